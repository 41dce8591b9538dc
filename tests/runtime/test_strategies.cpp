// SystemC tests of the four strategies. Each test builds all the runs it compares into one
// simulation (the kernel elaborates once per process) and runs in its own process.
#include <cstdlib>
#include <numeric>
#include <vector>

#include <gtest/gtest.h>

#include "runtime/graph_compiler.h"
#include "sim/config.h"
#include "sim/report/report.h"
#include "sim/simulation.h"
#include "tests/test_support.h"
#include "workloads/workload.h"

namespace ascendsim {
namespace {

using runtime::RunResult;
using runtime::Session;
using runtime::Strategy;

struct Spec {
  Strategy strategy;
  std::int64_t epochs;
  std::int64_t steps_per_epoch;
  std::int64_t sink_size = -1;
  std::vector<std::string> sets = {};
  std::string workload = "lenet5";
  std::int64_t batch = 32;
};

class StrategiesTest : public ::testing::Test {
 protected:
  std::vector<RunResult> run(const std::vector<Spec>& specs) {
    sim::Simulation simulation;
    for (const auto& s : specs) {
      const auto w = workloads::make_workload(s.workload, s.batch);
      sim::ConfigRequest req = test::config_request();
      req.sets = s.sets;
      Session session;
      session.strategy = s.strategy;
      session.epochs = s.epochs;
      session.steps_per_epoch = s.steps_per_epoch;
      session.sink_size = s.sink_size;
      simulation.add(sim::load_config(req), w, session);
    }
    simulation.keep_each_step(true);
    simulation.run();
    std::vector<RunResult> out;
    for (std::size_t i = 0; i < specs.size(); ++i) out.push_back(simulation.result(i));
    return out;
  }

  static double phase(const RunResult& r, sim::Phase p) { return r.breakdown_s[static_cast<std::size_t>(p)]; }
};

TEST_F(StrategiesTest, InteractionCountsFollowTheFormulas) {
  const auto w = workloads::make_workload("lenet5", 32);
  aicore::CachedCostModel model(aicore::make_pipe_cost_model({}, {}));
  const auto g = runtime::compile(w, model, 16);
  const std::int64_t K = static_cast<std::int64_t>(g.step_tasks.size());
  ASSERT_EQ(K, g.pass_effects.back().ops);  // the executed graph's device ops
  ASSERT_GT(K, 42);                         // LeNet-5's 42 framework ops and the backend's
  const std::int64_t bb = w.batch_bytes();
  const std::int64_t graph_bytes = (K + 1 + 4) * 64;

  struct Case {
    std::int64_t E, D, S;
  };
  // S = -1 (whole dataset), S dividing D, S not dividing D, S larger than D.
  const std::vector<Case> cases = {{1, 7, -1}, {2, 6, 3}, {2, 5, 3}, {3, 4, 10}};
  std::vector<Spec> specs;
  for (const auto& c : cases)
    for (auto s : runtime::all_strategies()) specs.push_back({s, c.E, c.D, c.S});
  const auto results = run(specs);

  for (std::size_t i = 0; i < results.size(); ++i) {
    const RunResult& r = results[i];
    const Case& c = cases[i / 4];
    const std::int64_t E = c.E, D = c.D, S = c.S < 0 ? D : c.S;
    const auto& io = r.interactions;
    SCOPED_TRACE(std::string(runtime::strategy_name(r.session.strategy)) + " E=" + std::to_string(E) +
                 " D=" + std::to_string(D) + " S=" + std::to_string(c.S));
    ASSERT_TRUE(r.failure.empty()) << r.failure;
    const auto sched = r.stats["chip"]["scheduler"];
    const auto queue = r.stats["chip"]["hostif"]["queue"];
    switch (r.session.strategy) {
      case Strategy::NonSink:
        EXPECT_EQ(r.steps_completed, E * D);
        EXPECT_EQ(io.op_launches, E * D * K);
        EXPECT_EQ(io.graph_launches, 0);
        EXPECT_EQ(io.h2d_copies, 2 * E * D);
        EXPECT_EQ(io.h2d_bytes, E * D * bb);
        EXPECT_EQ(io.d2h_copies, E * D);
        EXPECT_EQ(io.host_syncs, E * D);
        EXPECT_EQ(sched["getnext"].get<double>(), 0);
        break;
      case Strategy::DataSink:
        EXPECT_EQ(r.steps_completed, E * D);
        EXPECT_EQ(io.op_launches, E * D * (K + 1));
        EXPECT_EQ(io.graph_launches, 0);
        EXPECT_EQ(io.h2d_copies, 2 * E * D);
        EXPECT_EQ(io.h2d_bytes, E * D * bb);
        EXPECT_EQ(io.d2h_copies, E * D);
        EXPECT_EQ(io.host_syncs, E * D);
        EXPECT_EQ(sched["getnext"].get<double>(), E * D);
        break;
      case Strategy::GraphSink:
        EXPECT_EQ(r.steps_completed, E * D);
        EXPECT_EQ(io.op_launches, 0);
        EXPECT_EQ(io.graph_launches, E * D);
        EXPECT_EQ(io.h2d_copies, 2 * E * D + 1);
        EXPECT_EQ(io.h2d_bytes, E * D * bb + graph_bytes);
        EXPECT_EQ(io.d2h_copies, E * D);
        EXPECT_EQ(io.host_syncs, E * D);
        EXPECT_EQ(sched["end_graph"].get<double>(), E * D);
        EXPECT_EQ(sched["assign_add"].get<double>(), 0);
        break;
      case Strategy::LoopSink:
        EXPECT_EQ(r.steps_completed, E * S);
        EXPECT_EQ(io.op_launches, 0);
        EXPECT_EQ(io.graph_launches, E);
        EXPECT_EQ(io.h2d_copies, 2 * E * S + 1);
        EXPECT_EQ(io.h2d_bytes, E * S * bb + graph_bytes);
        EXPECT_EQ(io.d2h_copies, E);
        EXPECT_EQ(io.host_syncs, E);
        EXPECT_EQ(r.device_loop_iterations, E * S);
        EXPECT_EQ(sched["assign_add"].get<double>(), E * S);
        EXPECT_EQ(sched["stream_switch"].get<double>(), E * S);
        EXPECT_EQ(sched["stream_active"].get<double>(), E * (S - 1));
        EXPECT_EQ(sched["end_graph"].get<double>(), E);
        break;
    }
    EXPECT_EQ(io.d2h_bytes, 4 * io.d2h_copies);
    EXPECT_EQ(r.losses_returned, io.d2h_copies);
    EXPECT_EQ(static_cast<std::int64_t>(r.steps.step_s.size()), r.steps_completed);
    if (runtime::uses_queue(r.session.strategy)) {
      // Conservation through the device queue, and its bound.
      EXPECT_EQ(queue["pushes"].get<double>(), static_cast<double>(r.steps_completed));
      EXPECT_EQ(queue["pops"].get<double>(), static_cast<double>(r.steps_completed));
      EXPECT_EQ(queue["bytes_pushed"].get<double>(), queue["bytes_popped"].get<double>());
      EXPECT_LE(queue["max_depth"].get<double>(), 16);
    }
  }
}

TEST_F(StrategiesTest, LaunchBoundLeNetOrdersTheStrategies) {
  std::vector<Spec> specs;
  for (auto s : runtime::all_strategies()) specs.push_back({s, 1, 300});
  const auto r = run(specs);
  const auto mean = [](const RunResult& x) { return runtime::summarize_steps(x.steps.step_s).mean_ms; };
  EXPECT_GE(mean(r[0]), mean(r[1]));
  EXPECT_GE(mean(r[1]), mean(r[2]));
  EXPECT_GE(mean(r[2]), mean(r[3]));
  // Loop sink leaves the device busy most of the time; non-sink mostly waits for the host.
  EXPECT_GT(r[3].device_busy_fraction(), 0.8);
  EXPECT_LT(r[0].device_busy_fraction(), 0.5);
}

TEST_F(StrategiesTest, BreakdownAndStepTimesAddUpToSimulatedTime) {
  std::vector<Spec> specs;
  for (auto s : runtime::all_strategies()) specs.push_back({s, 2, 50, 20});
  for (const auto& r : run(specs)) {
    SCOPED_TRACE(runtime::strategy_name(r.session.strategy));
    const double sum = std::accumulate(r.breakdown_s.begin(), r.breakdown_s.end(), 0.0);
    EXPECT_NEAR(sum, r.sim_time_s, 1e-9 * r.sim_time_s);
    const double steps = std::accumulate(r.steps.step_s.begin(), r.steps.step_s.end(), 0.0);
    EXPECT_NEAR(steps, r.sim_time_s, 1e-9 * r.sim_time_s);
    for (double s : r.steps.step_s) EXPECT_GT(s, 0);
    // Device compute equals the AI core and AICPU busy time the scheduler recorded.
    EXPECT_NEAR(phase(r, sim::Phase::DeviceCompute), r.stats["chip"]["scheduler"]["busy_s"].get<double>(),
                1e-9 * r.sim_time_s);
  }
}

TEST_F(StrategiesTest, MorePcieBandwidthNeverSlower) {
  std::vector<Spec> specs;
  const std::vector<std::string> bws = {"0.2", "0.4", "24", "48"};
  for (const auto& bw : bws)
    for (auto s : runtime::all_strategies())
      specs.push_back({s, 1, 60, -1, {"link.h2d_bandwidth_gbps=" + bw, "link.d2h_bandwidth_gbps=" + bw}});
  const auto r = run(specs);
  for (std::size_t b = 1; b < bws.size(); ++b)
    for (std::size_t s = 0; s < 4; ++s) {
      SCOPED_TRACE(std::string(runtime::strategy_name(r[s].session.strategy)) + " at " + bws[b] + " GB/s");
      EXPECT_LE(r[b * 4 + s].sim_time_s, r[(b - 1) * 4 + s].sim_time_s);
    }
  // A 0.2 GB/s link makes the 128 KiB batch copy dominate non-sink (h2d phase exposed).
  EXPECT_GT(phase(r[0], sim::Phase::H2D), phase(r[8], sim::Phase::H2D) * 10);
}

TEST_F(StrategiesTest, DoublingOpLaunchCostSlowsOpByOpModesOnly) {
  std::vector<Spec> specs;
  for (const char* cost : {"host.op_launch_us=10", "host.op_launch_us=20"})
    for (auto s : runtime::all_strategies()) specs.push_back({s, 2, 100, -1, {cost}});
  const auto r = run(specs);
  EXPECT_GT(r[4].sim_time_s, r[0].sim_time_s * 1.2);                      // non-sink
  EXPECT_GT(r[5].sim_time_s, r[1].sim_time_s * 1.2);                      // data-sink
  EXPECT_NEAR(r[7].sim_time_s, r[3].sim_time_s, 0.01 * r[3].sim_time_s);  // loop-sink within 1%
  EXPECT_NEAR(r[6].sim_time_s, r[2].sim_time_s, 0.01 * r[2].sim_time_s);  // graph-sink: no op launches
}

TEST_F(StrategiesTest, IdenticalRunsGiveIdenticalReports) {
  std::vector<Spec> specs;
  for (int rep = 0; rep < 2; ++rep)
    for (auto s : runtime::all_strategies()) specs.push_back({s, 2, 40, 15});
  const auto r = run(specs);
  for (std::size_t s = 0; s < 4; ++s) EXPECT_EQ(report::run_json(r[s]).dump(), report::run_json(r[s + 4]).dump());
}

TEST_F(StrategiesTest, ResNet50RunsUnderAllStrategiesComputeBound) {
  std::vector<Spec> specs;
  for (auto s : runtime::all_strategies()) specs.push_back({s, 1, 10, -1, {}, "resnet50", 32});
  const auto r = run(specs);
  const auto w = workloads::make_workload("resnet50", 32);
  aicore::CachedCostModel model(aicore::make_pipe_cost_model({}, {}));
  const auto g = runtime::compile(w, model, 16);
  const auto K = static_cast<std::int64_t>(g.step_tasks.size());
  EXPECT_EQ(r[0].interactions.op_launches, 10 * K);
  EXPECT_EQ(r[1].interactions.op_launches, 10 * (K + 1));
  for (const auto& x : r) {
    SCOPED_TRACE(runtime::strategy_name(x.session.strategy));
    EXPECT_TRUE(x.failure.empty()) << x.failure;
    EXPECT_EQ(x.steps_completed, 10);
    // Compute-bound once the pipeline has made its first batch (one worker's 32 JPEGs): the
    // device stays busy and no step beats the device time.
    EXPECT_GT(x.device_busy_fraction(), 0.8);
    for (double s : x.steps.step_s) EXPECT_GE(s, g.device_compute_s);
  }
  // The strategies differ by little when the device dominates.
  EXPECT_LT(r[0].sim_time_s, r[3].sim_time_s * 1.1);
}

TEST_F(StrategiesTest, StarvedPipelineTimesOutInGetNext) {
  // Normalising one 32x32 sample costs 1024 x 200 us = 0.2 s on a worker: a batch every ~0.8 s
  // with 8 workers, far beyond an op_timeout of 0.05 s.
  const std::vector<std::string> slow = {"host.normalize_ns_per_value=200000", "aicpu.op_timeout_s=0.05"};
  const auto r = run({{Strategy::DataSink, 1, 20, -1, slow}, {Strategy::LoopSink, 1, 20, -1, slow}});
  for (const auto& x : r) {
    SCOPED_TRACE(runtime::strategy_name(x.session.strategy));
    EXPECT_NE(x.failure.find("GetNext"), std::string::npos) << x.failure;
    EXPECT_LT(x.steps_completed, 20);
    // No batch ever came: the wait was the pipeline's first fill, charged to set-up.
    EXPECT_EQ(x.steps_completed, 0);
    EXPECT_GE(phase(x, sim::Phase::Setup), 0.05 - 1e-12);
    EXPECT_EQ(phase(x, sim::Phase::WaitData), 0);
  }
}

TEST_F(StrategiesTest, SlowPipelineShowsAsWaitData) {
  // ~4 ms per batch against ~0.1 ms of device work: loop sink spends its time waiting on GetNext,
  // non-sink waiting on the host pipeline.
  const std::vector<std::string> slow = {"host.normalize_ns_per_value=1000"};
  const auto r = run({{Strategy::NonSink, 1, 30, -1, slow}, {Strategy::LoopSink, 1, 30, -1, slow}});
  EXPECT_GT(phase(r[0], sim::Phase::HostData) / r[0].sim_time_s, 0.5);
  EXPECT_GT(phase(r[1], sim::Phase::WaitData) / r[1].sim_time_s, 0.5);
  EXPECT_TRUE(r[1].failure.empty());
}

}  // namespace
}  // namespace ascendsim
