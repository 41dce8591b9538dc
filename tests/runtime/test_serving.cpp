// The serving loop's scheduler (runtime/serving.h) on a cost function of known form: Little's
// law, the KV-cache budget, the step limits, graph captures and the time accounting.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <numeric>
#include <set>

#include "runtime/serving.h"
#include "sim/core/error.h"
#include "sim/serve.h"

namespace ascendsim::runtime {
namespace {

/// A step: 2 ms, 20 us per token, 50 ns per key a decode sequence reads; capture 10 ms. The
/// phases: launch 1 ms, device compute the rest.
StepCost synthetic(const StepQuery& q) {
  StepCost c;
  const double keys = static_cast<double>(q.shape.decode_seqs * q.shape.decode_context);
  const double device = 1e-3 + 20e-6 * static_cast<double>(q.shape.tokens()) + 50e-9 * keys;
  c.phase_s[static_cast<std::size_t>(ServePhase::Launch)] = q.mode == LaunchMode::Eager ? 1e-3 : 0.1e-3;
  c.phase_s[static_cast<std::size_t>(ServePhase::DeviceCompute)] = device * static_cast<double>(q.steps);
  for (double p : c.phase_s) c.time_s += p;
  c.capture_s = q.mode == LaunchMode::Eager ? 0 : 10e-3;
  return c;
}

std::vector<ServeArrival> poisson(double rate, std::int64_t n, std::int64_t prompt, std::int64_t output, double spread,
                                  std::uint64_t seed = 7) {
  sim::ServeRequest r;
  r.rate = rate;
  r.requests = n;
  r.prompt_tokens = prompt;
  r.output_tokens = output;
  r.length_spread = spread;
  r.seed = seed;
  return sim::serve_arrivals(r, rate);
}

SchedulerConfig config(LaunchMode mode, std::int64_t blocks) {
  SchedulerConfig c;
  c.mode = mode;
  c.kv_blocks = blocks;
  c.block_size = 16;
  c.max_seqs = 64;
  c.max_batched_tokens = 2048;
  c.graph_buckets = default_graph_buckets(c.max_seqs);
  c.schedule_step_s = 200e-6;
  c.schedule_seq_s = 5e-6;
  return c;
}

TEST(Serving, ArrivalsArePoissonAtTheRate) {
  // Exponential gaps: mean 1/rate, coefficient of variation 1; lengths uniform within the spread.
  const auto a = poisson(50, 40000, 200, 40, 0.5);
  double sum = 0, squares = 0;
  std::int64_t lo = 1 << 30, hi = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    const double gap = a[i].arrival_s - (i > 0 ? a[i - 1].arrival_s : 0);
    sum += gap;
    squares += gap * gap;
    lo = std::min(lo, a[i].prompt_tokens);
    hi = std::max(hi, a[i].prompt_tokens);
  }
  const double n = static_cast<double>(a.size()), mean = sum / n, sd = std::sqrt(squares / n - mean * mean);
  EXPECT_NEAR(mean * 50, 1, 0.02);
  EXPECT_NEAR(sd / mean, 1, 0.02);
  EXPECT_EQ(lo, 100);
  EXPECT_EQ(hi, 300);
}

TEST(Serving, LittlesLawHoldsOnTheRequestQueue) {
  // The queue's time-average length, integrated from its lengths step by step, against the rate
  // asked for times the mean of each request's own time in the system. A stable load: 100
  // requests/s, about ten in the system at a time.
  const double rate = 100;
  const auto arrivals = poisson(rate, 20000, 200, 50, 0.5);
  for (LaunchMode m : {LaunchMode::Eager, LaunchMode::Graph, LaunchMode::MultiStep}) {
    const ServeLog log = serve(arrivals, config(m, 4000), synthetic);
    double latency = 0;
    for (const auto& r : log.requests) latency += r.e2e_s();
    latency /= static_cast<double>(log.requests.size());
    EXPECT_GT(log.mean_in_system, 5) << launch_mode_name(m);  // a queue worth measuring
    EXPECT_NEAR(log.mean_in_system / (rate * latency), 1, 0.02) << launch_mode_name(m);
  }
}

TEST(Serving, KvBlocksNeverExceedTheBudgetAndAreAllFreed) {
  // A cache far too small for the load: sequences are preempted and computed again.
  const auto arrivals = poisson(50, 600, 300, 120, 0.8);
  for (bool chunked : {false, true})
    for (LaunchMode m : {LaunchMode::Eager, LaunchMode::Graph, LaunchMode::MultiStep}) {
      SchedulerConfig c = config(m, 200);
      c.chunked_prefill = chunked;
      const ServeLog log = serve(arrivals, c, synthetic);
      SCOPED_TRACE(std::string(launch_mode_name(m)) + (chunked ? " chunked" : ""));
      EXPECT_GT(log.preemptions, 0);       // the budget was reached
      EXPECT_EQ(log.peak_kv_blocks, 200);  // and used to the last block
      for (const auto& s : log.steps) {
        // What the step's sequences hold by their lengths is allocated, and all of it within the budget.
        ASSERT_LE(s.kv_blocks_needed, s.kv_blocks_used);
        ASSERT_LE(s.kv_blocks_used, 200);
      }
      EXPECT_EQ(log.kv_blocks_left, 0);
      for (const auto& r : log.requests) {
        ASSERT_GT(r.finish_s, r.arrival_s);
        ASSERT_GE(r.first_token_s, r.arrival_s);
        ASSERT_LE(r.first_token_s, r.finish_s);
      }
    }
}

TEST(Serving, ContinuousBatchingNeverAdmitsPastTheBudget) {
  // Every step the cost function is asked for stays within the sequence and token limits, and
  // its sequences' blocks (reconstructed from the shape) within the cache.
  const auto arrivals = poisson(80, 800, 500, 60, 0.9);
  for (bool chunked : {false, true}) {
    SchedulerConfig c = config(LaunchMode::Eager, 300);
    c.chunked_prefill = chunked;
    std::int64_t steps = 0, full = 0;
    const StepCostFn checked = [&](const StepQuery& q) {
      ++steps;
      EXPECT_LE(q.shape.seqs(), c.max_seqs);
      EXPECT_LE(q.shape.tokens(), c.max_batched_tokens + q.shape.prefill_seqs);  // the mean chunk rounded up
      full += q.shape.seqs() == c.max_seqs || q.shape.tokens() > c.max_batched_tokens / 2;
      return synthetic(q);
    };
    const ServeLog log = serve(arrivals, c, checked);
    EXPECT_GT(full, 0) << "the limits were never approached";
    for (const auto& s : log.steps) {
      EXPECT_LE(s.kv_blocks_needed, s.kv_blocks_used);
      EXPECT_LE(s.decode_seqs + s.prefill_seqs, c.max_seqs);
      EXPECT_LE(s.tokens, c.max_batched_tokens);
      EXPECT_LE(s.kv_blocks_used, c.kv_blocks);
    }
    EXPECT_EQ(static_cast<std::int64_t>(log.steps.size()), steps);
  }
}

TEST(Serving, GraphModePaysCaptureOncePerBucket) {
  const auto arrivals = poisson(30, 400, 100, 40, 0.9);
  SchedulerConfig c = config(LaunchMode::Graph, 4000);
  c.capture_at_startup = false;
  const ServeLog log = serve(arrivals, c, synthetic);
  std::set<std::int64_t> used;
  std::map<std::int64_t, int> paid;
  double capture = 0;
  for (const auto& s : log.steps) {
    if (s.padded_seqs > 0) {
      used.insert(s.padded_seqs);
      EXPECT_GE(s.padded_seqs, s.decode_seqs);  // padded up to its bucket
    }
    if (s.capture_s > 0) ++paid[s.padded_seqs];
    capture += s.capture_s;
  }
  EXPECT_GT(used.size(), 3u);
  EXPECT_EQ(paid.size(), used.size());
  for (const auto& [bucket, n] : paid) EXPECT_EQ(n, 1) << "bucket " << bucket;
  for (std::size_t b = 0; b < c.graph_buckets.size(); ++b)
    EXPECT_EQ(log.captures[b], used.count(c.graph_buckets[b]) ? 1 : 0) << "bucket " << c.graph_buckets[b];
  EXPECT_DOUBLE_EQ(capture, log.capture_s);
  EXPECT_DOUBLE_EQ(log.capture_s, 10e-3 * static_cast<double>(used.size()));
  // At start-up instead: every bucket once before serving, none during it.
  c.capture_at_startup = true;
  const ServeLog startup = serve(arrivals, c, synthetic);
  for (auto n : startup.captures) EXPECT_EQ(n, 1);
  EXPECT_DOUBLE_EQ(startup.startup_s, 10e-3 * static_cast<double>(c.graph_buckets.size()));
  for (const auto& s : startup.steps) EXPECT_EQ(s.capture_s, 0);
}

TEST(Serving, AStepsTimeIsItsPhasesAndFollowsTheLast) {
  const auto arrivals = poisson(40, 300, 150, 30, 0.5);
  for (LaunchMode m : {LaunchMode::Eager, LaunchMode::Graph, LaunchMode::MultiStep}) {
    SchedulerConfig c = config(m, 4000);
    c.capture_at_startup = false;
    const ServeLog log = serve(arrivals, c, synthetic);
    double prev = 0;
    for (const auto& s : log.steps) {
      const double phases = std::accumulate(s.phase_s.begin(), s.phase_s.end(), 0.0);
      ASSERT_NEAR(s.end_s - s.start_s, phases + s.capture_s, 1e-12);
      ASSERT_GE(s.start_s, prev);
      prev = s.end_s;
      if (m == LaunchMode::MultiStep && s.prefill_seqs == 0) {
        EXPECT_EQ(s.steps, c.multi_step);
      }
    }
    // Every output token is generated once: prefills give the first, each decode step one more.
    std::int64_t tokens = 0, wanted = 0;
    for (const auto& s : log.steps) tokens += s.tokens;
    for (const auto& r : log.requests) wanted += r.prompt_tokens + r.output_tokens - 1;
    if (m != LaunchMode::MultiStep) {  // multi-step pads groups
      EXPECT_EQ(tokens, wanted) << launch_mode_name(m);
    }
  }
}

TEST(Serving, APreemptedSequenceResumesWithItsOwnLength) {
  // Two requests, a cache of four 16-token blocks: the second is preempted and computed again
  // (prompt and generated tokens); every decode step reads as many keys as its sequences hold.
  const std::vector<ServeArrival> two = {{0.0, 16, 40}, {0.0, 16, 40}};
  SchedulerConfig c = config(LaunchMode::Eager, 4);
  c.max_batched_tokens = 64;
  c.watermark = 0;
  std::int64_t longest = 0;
  const StepCostFn checked = [&](const StepQuery& q) {
    longest = std::max(longest, q.shape.decode_context);
    return synthetic(q);
  };
  const ServeLog log = serve(two, c, checked);
  EXPECT_GT(log.preemptions, 0);
  EXPECT_LE(longest, 16 + 40);
  EXPECT_LE(log.peak_kv_blocks, 4);
  for (const auto& s : log.steps) EXPECT_LE(s.kv_blocks_needed, s.kv_blocks_used);
  for (const auto& r : log.requests) EXPECT_GT(r.finish_s, 0);
}

TEST(Serving, MultiStepLaunchesKStepsOnlyWhereAGraphHoldsTheBatch) {
  // Buckets up to 8: batches above run a step at a time; chunked prefill's single decode steps
  // replay the graph. Every multi-step launch the cost function sees is of k steps.
  const auto arrivals = poisson(200, 400, 100, 60, 0.5);
  for (bool chunked : {false, true}) {
    SchedulerConfig c = config(LaunchMode::MultiStep, 4000);
    c.graph_buckets = {1, 2, 4, 8};
    c.chunked_prefill = chunked;
    std::int64_t launches = 0, singles = 0;
    const StepCostFn checked = [&](const StepQuery& q) {
      if (q.mode == LaunchMode::MultiStep) {
        EXPECT_EQ(q.steps, c.multi_step);
        EXPECT_LE(q.shape.decode_seqs, 8);
        ++launches;
      } else {
        EXPECT_EQ(q.steps, 1);
        singles += q.shape.prefill_seqs == 0;
      }
      return synthetic(q);
    };
    const ServeLog log = serve(arrivals, c, checked);
    EXPECT_GT(launches, 0);
    EXPECT_GT(singles, 0);
    for (const auto& s : log.steps) {
      EXPECT_EQ(s.steps > 1, s.padded_seqs > 0 && s.steps == c.multi_step) << s.decode_seqs;
      EXPECT_LE(s.kv_blocks_needed, s.kv_blocks_used);
    }
  }
}

TEST(Serving, ARequestTheCacheCannotHoldIsRefusedNamingTheBlocks) {
  const std::vector<ServeArrival> one = {{0.0, 1000, 100}};
  try {
    serve(one, config(LaunchMode::Eager, 50), synthetic);
    FAIL() << "no error";
  } catch (const sim::InputError& e) {
    EXPECT_EQ(e.key(), "kv_blocks");
    EXPECT_NE(std::string(e.what()).find("69 KV-cache blocks"), std::string::npos)
        << e.what();  // 1100/16 + watermark 0
    EXPECT_NE(std::string(e.what()).find("has 50"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace ascendsim::runtime
