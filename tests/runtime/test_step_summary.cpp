// Steps summarised as they complete: exact while small, a sketch with a stated error bound
// beyond, never more memory than the bound allows.
#include <algorithm>
#include <cmath>
#include <random>

#include <gtest/gtest.h>

#include "runtime/run_result.h"
#include "runtime/step_summary.h"
#include "sim/report/data_verdict.h"

namespace ascendsim::report {
using namespace runtime;
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

// Steps are numbered from 1 in every output: the kept steps and a window's carry the number of
// the step they are, whether every step is kept (--per-step) or only the window (--step-trace).
TEST(StepRecord, SteadyStateLeavesOutTheWarmUpAndTheLastStep) {
  // Three epochs of 4 steps: steady from the second epoch (step 5) to the last step but one.
  EXPECT_EQ(StepRecord::steady_start(12, 4), 4);
  EXPECT_EQ(StepRecord::steady_end(12), 11);
  EXPECT_EQ(StepRecord::steady_start(10, 10), 5);  // one epoch: its second half
  EXPECT_EQ(StepRecord::steady_end(2), 2);
  StepRecord r;
  r.steady_from = StepRecord::steady_start(12, 4);
  r.steady_until = StepRecord::steady_end(12);
  // A first step of 9 ms (graph load), three of 3 ms (the pipeline filling), then 2 ms steps and a
  // 5 ms last step (the final synchronisation).
  const double ms[] = {9, 3, 3, 3, 2, 2, 2, 2, 2, 2, 2, 5};
  for (double v : ms) r.add(1e-3 * v, 0, 1e-3 * v, 0, 4);
  EXPECT_EQ(r.steady.count(), 7);
  EXPECT_DOUBLE_EQ(r.steady.stats().mean_ms, 2.0);
  // The warm-up: its 4 steps' 18 ms less 4 steady steps' 8 ms.
  EXPECT_NEAR(r.warmup_s(), 10e-3, 1e-12);
  // Whole-run mean against steady mean: 37/12 ms against 2 ms.
  EXPECT_NEAR(r.step.stats().mean_ms, 37.0 / 12, 1e-9);
  StepRecord empty;  // no steady step: no warm-up to state
  EXPECT_EQ(empty.warmup_s(), 0.0);
}

TEST(StepRecord, KeptStepsCarryTheirNumberFromOne) {
  for (bool keep_each : {false, true}) {
    StepRecord r;
    r.keep_each = keep_each;
    r.window_first = 4;  // the CLI's 5:8, steps 5 to 7
    r.window_last = 7;
    for (int i = 0; i < 12; ++i) r.add(1e-3 * (i + 1), 0, 1e-3 * (i + 1), 0, 4);  // step n takes n ms
    const auto w = r.window_steps();
    ASSERT_EQ(w.size(), 3u) << keep_each;
    for (std::size_t i = 0; i < w.size(); ++i) {
      EXPECT_EQ(w[i].number, static_cast<std::int64_t>(5 + i));
      EXPECT_DOUBLE_EQ(w[i].step_s, 1e-3 * static_cast<double>(w[i].number));  // the step of that number
    }
    const auto all = r.kept_steps();
    ASSERT_EQ(all.size(), keep_each ? 12u : 3u);
    EXPECT_EQ(all.front().number, keep_each ? 1 : 5);
    for (const auto& k : all) EXPECT_DOUBLE_EQ(k.step_s, 1e-3 * static_cast<double>(k.number));
  }
  StepRecord none;  // no window asked for: none listed
  none.keep_each = true;
  for (int i = 0; i < 3; ++i) none.add(1e-3, 0, 1e-3, 0, 3);
  EXPECT_TRUE(none.window_steps().empty());
}

/// A run whose phases take the given seconds (they add up to its simulated time).
RunResult run_with(std::initializer_list<std::pair<sim::Phase, double>> phases, Strategy s = Strategy::LoopSink) {
  RunResult r;
  r.session.strategy = s;
  r.steps_completed = 5;
  for (const auto& [p, t] : phases) {
    r.breakdown_s[static_cast<std::size_t>(p)] = t;
    r.sim_time_s += t;
  }
  return r;
}

DataVerdict verdict_of(const RunResult& r) {
  DataRates rates;
  rates.stages = {{"MnistDataset", 1, true, 1e-5, 1e-5}, {"Map(Resize)", 1, false, 1e-5, 1e-5}};
  rates.device_s_per_batch = 1e-4;
  return judge_data(r, rates, HostConfig{}, PipelineConfig{});
}

// The verdict names the largest share of the run's time, set-up included: a short loop-sink run
// whose time is mostly set-up is not blamed on launches it did not make.
TEST(DataVerdict, NamesTheShareThatDominatesSetUpIncluded) {
  using sim::Phase;
  const RunResult short_sink = run_with(
      {{Phase::Setup, 0.47}, {Phase::DeviceCompute, 0.30}, {Phase::HostLoop, 0.13}, {Phase::Sync, 0.10}});
  const DataVerdict v = verdict_of(short_sink);
  EXPECT_EQ(v.dominant, "set-up");
  EXPECT_NEAR(v.dominant_fraction, 0.47, 1e-12);
  EXPECT_NE(v.verdict.find("(47.0%) goes to one-time set-up"), std::string::npos) << v.verdict;
  EXPECT_EQ(v.verdict.find("launch"), std::string::npos) << v.verdict;
  // The same run with the host's parts larger: the host, naming only the parts it spent time on —
  // no launches in a run that made none.
  const RunResult host = run_with(
      {{Phase::Setup, 0.15}, {Phase::DeviceCompute, 0.30}, {Phase::HostLoop, 0.30}, {Phase::Sync, 0.25}});
  const DataVerdict h = verdict_of(host);
  EXPECT_EQ(h.dominant, "host");
  EXPECT_NEAR(h.dominant_fraction, 0.55, 1e-12);
  EXPECT_NE(h.verdict.find("goes to the host's step work and syncs while the device idles"), std::string::npos)
      << h.verdict;
  EXPECT_EQ(h.verdict.find("launch"), std::string::npos) << h.verdict;
  // Launches are named when they took time, largest part first.
  const RunResult op_by_op = run_with({{Phase::DeviceCompute, 0.2},
                                       {Phase::Launch, 0.3},
                                       {Phase::HostLoop, 0.1},
                                       {Phase::H2D, 0.05},
                                       {Phase::Sync, 0.02}},
                                      Strategy::NonSink);
  EXPECT_NE(verdict_of(op_by_op).verdict.find("the host's launches, step work, copies and syncs"), std::string::npos);
}

// Whatever the mix, the named share is the largest of the groups, which add up to the run's time.
TEST(DataVerdict, TheNamedShareIsTheLargestAndTheGroupsAddUp) {
  std::mt19937 gen(7);
  std::uniform_real_distribution<double> u(0, 1);
  for (int trial = 0; trial < 200; ++trial) {
    RunResult r;
    r.session.strategy = Strategy::GraphSink;
    r.steps_completed = 10;
    for (std::size_t i = 0; i < sim::kPhaseCount; ++i) {
      r.breakdown_s[i] = u(gen) < 0.3 ? 0 : u(gen);
      r.sim_time_s += r.breakdown_s[i];
    }
    if (r.sim_time_s == 0) continue;
    auto at = [&](sim::Phase p) { return r.breakdown_s[static_cast<std::size_t>(p)]; };
    using sim::Phase;
    const double groups[] = {at(Phase::DeviceCompute),
                             at(Phase::Launch) + at(Phase::Sync) + at(Phase::HostLoop) + at(Phase::H2D) + at(Phase::D2H),
                             at(Phase::WaitData) + at(Phase::HostData),
                             at(Phase::Comm),
                             at(Phase::Setup),
                             at(Phase::Eval),
                             at(Phase::Checkpoint)};
    double sum = 0, most = 0;
    for (double g : groups) {
      sum += g;
      most = std::max(most, g);
    }
    EXPECT_NEAR(sum, r.sim_time_s, 1e-12);  // every phase in exactly one group
    const Dominant d = dominant_share(r);
    EXPECT_DOUBLE_EQ(d.fraction, most / r.sim_time_s);
    // A host part is named only if the run spent time on it.
    const bool names_launches = d.words.find("launches") != std::string::npos;
    EXPECT_EQ(names_launches, d.name == "host" && at(Phase::Launch) > 0) << d.words;
    EXPECT_EQ(verdict_of(r).dominant, d.name);
  }
}

}  // namespace
}  // namespace ascendsim::report
