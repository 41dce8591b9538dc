// Steps summarised as they complete: exact while small, a sketch with a stated error bound
// beyond, never more memory than the bound allows.
#include <cmath>
#include <random>

#include <gtest/gtest.h>

#include "runtime/step_summary.h"

namespace ascendsim::runtime {
namespace {

std::vector<double> lognormal(std::size_t n, std::uint32_t seed) {
  std::mt19937 gen(seed);
  std::lognormal_distribution<double> d(std::log(1.5e-4), 0.6);
  std::vector<double> v(n);
  for (auto& x : v) x = d(gen);
  return v;
}

TEST(StepSummary, ExactWhileSmall) {
  const auto v = lognormal(StepSummary::kExactValues, 1);
  StepSummary s;
  for (double x : v) s.add(x);
  ASSERT_TRUE(s.exact());
  const StepStats a = s.stats(), b = summarize_steps(v);
  EXPECT_EQ(a.mean_ms, b.mean_ms);
  EXPECT_EQ(a.p50_ms, b.p50_ms);
  EXPECT_EQ(a.p99_ms, b.p99_ms);
}

TEST(StepSummary, BeyondTheExactRangePercentilesStayWithinTheStatedError) {
  for (std::uint32_t seed : {2u, 3u}) {
    const auto v = lognormal(5 * StepSummary::kExactValues + 17, seed);
    StepSummary s;
    for (double x : v) s.add(x);
    ASSERT_FALSE(s.exact());
    const StepStats sketch = s.stats(), exact = summarize_steps(v);
    EXPECT_NEAR(sketch.p50_ms, exact.p50_ms, StepSummary::kRelativeError * exact.p50_ms);
    EXPECT_NEAR(sketch.p99_ms, exact.p99_ms, StepSummary::kRelativeError * exact.p99_ms);
    EXPECT_NEAR(sketch.mean_ms, exact.mean_ms, 1e-12 * exact.mean_ms);  // the sum is exact up to rounding order
    EXPECT_EQ(s.count(), static_cast<std::int64_t>(v.size()));
  }
}

TEST(StepSummary, ConstantStepsGiveTheirValueAndTheSameInputsTheSameSummary) {
  StepSummary a, b;
  for (int i = 0; i < 200000; ++i) {
    a.add(0.00015307);
    b.add(0.00015307);
  }
  EXPECT_NEAR(a.stats().p99_ms, 0.15307, StepSummary::kRelativeError * 0.15307);
  EXPECT_EQ(a.stats().p50_ms, b.stats().p50_ms);
  EXPECT_EQ(a.stats().mean_ms, b.stats().mean_ms);
}

}  // namespace
}  // namespace ascendsim::runtime
