#include <algorithm>
#include <cmath>
#include <random>
#include <stdexcept>
#include <vector>

#include <gtest/gtest.h>

#include "sim/core/stats.h"
#include "sim/core/time.h"

namespace ascendsim {
namespace {

std::vector<double> mixed_terms() {
  // Byte counts and MACs of every size, fractional ones among them.
  std::mt19937_64 rng(7);
  std::vector<double> v;
  for (int i = 0; i < 5000; ++i) {
    const double mag = std::ldexp(1.0, static_cast<int>(rng() % 60) - 10);
    v.push_back(mag * (1.0 + static_cast<double>(rng() % 1000003) / 1000003.0));
  }
  return v;
}

TEST(Stats, AnExactSumIsTheSameInAnyOrderAndItsPrefixesSubtractExactly) {
  const std::vector<double> terms = mixed_terms();
  sim::ExactSum forward, backward, shuffled_sum;
  std::vector<sim::ExactSum> prefix(1);
  for (double t : terms) {
    forward += t;
    prefix.push_back(prefix.back());
    prefix.back() += t;
  }
  for (auto it = terms.rbegin(); it != terms.rend(); ++it) backward += *it;
  std::vector<double> shuffled = terms;
  std::shuffle(shuffled.begin(), shuffled.end(), std::mt19937_64(11));
  for (double t : shuffled) shuffled_sum += t;
  EXPECT_EQ(forward.value(), backward.value());
  EXPECT_EQ(forward.value(), shuffled_sum.value());
  // A range counted from the prefix sums is the range counted term by term.
  for (std::size_t a : {0u, 17u, 2500u})
    for (std::size_t b : {2501u, 4000u, 5000u}) {
      sim::ExactSum direct;
      for (std::size_t i = a; i < b; ++i) direct += terms[i];
      EXPECT_EQ((prefix[b] - prefix[a]).value(), direct.value()) << a << ".." << b;
    }
  // Each term is within half a unit of 2^-20 of itself: the sum is within N of those of the
  // exact sum (long double carries it to well below that).
  long double exact = 0;
  for (double t : terms) exact += t;
  EXPECT_NEAR(forward.value(), static_cast<double>(exact),
              static_cast<double>(exact) * 1e-15 + terms.size() * std::ldexp(1.0, -21));
  // Integers, and values of 2^32 or more, are carried exactly; others to the nearest 2^-20.
  for (const double v : {4294967296.5, 4294967296.0 + 0x1p-20, 8589934591.0 + 0x1p-19, 1e15 + 0.125, 123456789.0}) {
    sim::ExactSum one;
    one += v;
    EXPECT_EQ(one.value(), v) << v;
  }
  for (const double v : {0.49999999999999994 * 0x1p-20, 0x1p-21, 0.3 * 0x1p-20}) {
    sim::ExactSum small;
    small += v;
    EXPECT_EQ(small.value(), 0.0) << v;  // below half a unit, or a tie (to even): none
  }
  sim::ExactSum macs;
  macs += 9007199254740993.0;  // 2^53 + 1 is not a double: 2^53
  macs += 4294967296.5;        // 2^32 + 1/2
  EXPECT_EQ(macs.value(), 9007199254740992.0 + 4294967296.5);
  // A term that is not finite shows, as adding doubles would show it.
  sim::ExactSum broken = macs;
  broken += std::nan("");
  EXPECT_TRUE(std::isnan(broken.value()));
  EXPECT_TRUE(std::isnan((broken - macs).value()));
}

TEST(Stats, ATimeSumCountsWholePicosecondsExactly) {
  sim::TimeSum busy, by_cores;
  sc_core::sc_time total;
  std::int64_t core_ps = 0;
  for (int i = 1; i <= 1000; ++i) {
    const sc_core::sc_time t = sim::ns(1.001 * i);  // not a binary fraction of a second
    busy.add(t);
    by_cores.add(t, i % 32 + 1);
    total += t;
    core_ps += static_cast<std::int64_t>(t.value()) * (i % 32 + 1);
  }
  EXPECT_EQ(busy.seconds(), total.to_seconds());
  EXPECT_EQ(by_cores.seconds(), static_cast<double>(core_ps) * sc_core::sc_get_time_resolution().to_seconds());
  sim::TimeSum first;
  first.add(sim::ns(5));
  EXPECT_EQ((busy - first).seconds(), (total - sim::ns(5)).to_seconds());
}

class Owner : public sc_core::sc_module {
 public:
  explicit Owner(sc_core::sc_module_name n) : sc_module(n), stats(*this) {}
  sim::StatsGroup stats;
};

TEST(Stats, AStatisticNameIsRegisteredOnceWhateverItsKind) {
  Owner o("owner");
  o.stats.scalar("a", "count", "a counter");
  o.stats.sum("b", "B", "bytes");
  o.stats.time_sum("c", "s", "a time");
  o.stats.formula("d", "%", "a ratio", [] { return 1.0; });
  for (const char* name : {"a", "b", "c", "d"}) {
    EXPECT_THROW(o.stats.scalar(name, "count", ""), std::logic_error) << name;
    EXPECT_THROW(o.stats.sum(name, "B", ""), std::logic_error) << name;
    EXPECT_THROW(o.stats.time_sum(name, "s", ""), std::logic_error) << name;
    EXPECT_THROW(o.stats.formula(name, "%", "", [] { return 0.0; }), std::logic_error) << name;
  }
  const auto j = o.stats.to_json();
  EXPECT_EQ(j.size(), 4u);
  EXPECT_EQ(j["d"], 1.0);
}

}  // namespace
}  // namespace ascendsim
