// SystemC tests of the timeline and the step trace.
#include <cstdlib>
#include <map>
#include <sstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "runtime/graph_compiler.h"
#include "sim/config.h"
#include "sim/simulation.h"
#include "tests/test_support.h"
#include "workloads/workload.h"

namespace ascendsim {
namespace {

using runtime::RunResult;
using runtime::Strategy;

class TraceTest : public ::testing::Test {
 protected:
  /// Runs the four strategies (or loop sink at several sink sizes) and returns results and trace.
  std::vector<RunResult> run(const std::vector<runtime::Session>& sessions, bool trace, std::int64_t first,
                             std::int64_t last, nlohmann::json* trace_json) {
    sim::Simulation simulation;
    const auto w = workloads::make_workload("lenet5", 32);
    const auto cfg = sim::load_config(test::config_request());
    for (const auto& s : sessions) simulation.add(cfg, w, s);
    std::ostringstream os;
    if (trace) simulation.enable_trace(os, first, last);
    simulation.keep_each_step(true);
    simulation.run();
    std::vector<RunResult> out;
    for (std::size_t i = 0; i < sessions.size(); ++i) out.push_back(simulation.result(i));
    if (trace_json) *trace_json = nlohmann::json::parse(os.str());
    return out;
  }

  static std::vector<runtime::Session> four(std::int64_t steps) {
    std::vector<runtime::Session> out;
    for (auto s : runtime::all_strategies()) {
      runtime::Session session;
      session.strategy = s;
      session.steps_per_epoch = steps;
      out.push_back(session);
    }
    return out;
  }
};

TEST_F(TraceTest, TraceParsesAndItsEventsMatchTheInteractionCounts) {
  nlohmann::json trace;
  const auto r = run(four(30), true, 0, INT64_MAX, &trace);
  int blocks_per_step = 0;
  {
    aicore::CachedCostModel model(aicore::make_pipe_cost_model({}, {}));
    for (const auto& t : runtime::compile(workloads::make_workload("lenet5", 32), model, 16).step_tasks)
      blocks_per_step += static_cast<int>(t.cost.blocks);
  }
  // Track names per (pid, tid) from the metadata, then spans per track and per name.
  std::map<std::pair<int, int>, std::string> tracks;
  std::map<int, std::map<std::string, int>> spans_on, names, aicpu;
  std::map<int, int> core_blocks;
  int counters = 0;
  for (const auto& e : trace["traceEvents"]) {
    if (e["ph"] == "M" && e["name"] == "thread_name")
      tracks[{e["pid"].get<int>(), e["tid"].get<int>()}] = e["args"]["name"].get<std::string>();
  }
  for (const auto& e : trace["traceEvents"]) {
    if (e["ph"] == "C") ++counters;
    if (e["ph"] != "X") continue;
    const int pid = e["pid"].get<int>();
    ++spans_on[pid][tracks.at({pid, e["tid"].get<int>()})];
    const std::string name = e["name"].get<std::string>();
    ++names[pid][name.rfind("launch op ", 0) == 0 ? "launch op" : name];
    if (tracks.at({pid, e["tid"].get<int>()}) == "AICPU") ++aicpu[pid][name];
    if (tracks.at({pid, e["tid"].get<int>()}) == "AI cores") core_blocks[pid] += e["args"]["blocks"].get<int>();
    EXPECT_GE(e["dur"].get<double>(), 0);
  }
  EXPECT_GT(counters, 0);
  for (std::size_t i = 0; i < r.size(); ++i) {
    const int pid = static_cast<int>(i + 1);
    const auto& io = r[i].interactions;
    SCOPED_TRACE(runtime::strategy_name(r[i].session.strategy));
    EXPECT_EQ(names[pid]["launch op"], io.op_launches);
    EXPECT_EQ(names[pid]["launch graph"], io.graph_launches);
    EXPECT_EQ(names[pid]["sync"], io.host_syncs);
    EXPECT_EQ(spans_on[pid]["PCIe DMA h2d"], io.h2d_copies);
    EXPECT_EQ(spans_on[pid]["PCIe DMA d2h"], io.d2h_copies);
    // Every op appears once on the AI cores, with the cores it occupies.
    EXPECT_EQ(spans_on[pid]["AI cores"], 42 * r[i].steps_completed);
    EXPECT_EQ(core_blocks[pid], blocks_per_step * r[i].steps_completed);
    EXPECT_EQ(spans_on[pid]["device stream (task scheduler)"] - names[pid]["GetNext: wait for data"],
              (42 + (runtime::uses_queue(r[i].session.strategy) ? 1 : 0)) * r[i].steps_completed +
                  static_cast<int>(3 * r[i].device_loop_iterations) - (r[i].device_loop_iterations > 0 ? 1 : 0) +
                  static_cast<int>(r[i].interactions.graph_launches));
    EXPECT_EQ(aicpu[pid]["GetNext"], runtime::uses_queue(r[i].session.strategy) ? r[i].steps_completed : 0);
    if (r[i].session.strategy == Strategy::LoopSink) {
      EXPECT_EQ(aicpu[pid]["StreamSwitch"], r[i].steps_completed);
    }
    EXPECT_GT(spans_on[pid]["pipeline worker 0"], 0);
  }
}

TEST_F(TraceTest, StepWindowLimitsTheTrace) {
  nlohmann::json window;
  run(four(40), true, 10, 20, &window);
  std::map<std::pair<int, int>, std::string> tracks;
  for (const auto& e : window["traceEvents"])
    if (e["ph"] == "M" && e["name"] == "thread_name")
      tracks[{e["pid"].get<int>(), e["tid"].get<int>()}] = e["args"]["name"].get<std::string>();
  std::size_t ai_core_spans = 0, all = 0;
  for (const auto& e : window["traceEvents"]) {
    if (e["ph"] != "X") continue;
    ++all;
    ai_core_spans += e["name"].get<std::string>() == "conv1/Conv2D" &&
                     tracks.at({e["pid"].get<int>(), e["tid"].get<int>()}) == "AI cores";
  }
  // conv1 runs once per step: 10 steps in the window, per strategy (the first task of a step may
  // start just before the window opens).
  EXPECT_GE(ai_core_spans, 4u * 9);
  EXPECT_LE(ai_core_spans, 4u * 11);
  EXPECT_GT(all, 0u);
}

TEST_F(TraceTest, StepTraceAddsUpToTheStepTimes) {
  const auto r = run(four(50), false, 0, 0, nullptr);
  for (const auto& x : r) {
    SCOPED_TRACE(runtime::strategy_name(x.session.strategy));
    const auto& t = x.steps.trace;
    ASSERT_EQ(t.interval_s.size(), x.steps.step_s.size());
    for (std::size_t i = 0; i < x.steps.step_s.size(); ++i) {
      EXPECT_NEAR(t.interval_s[i] + t.fp_bp_s[i] + t.tail_s[i], x.steps.step_s[i], 1e-12);
      EXPECT_GE(t.interval_s[i], 0);
      EXPECT_GT(t.fp_bp_s[i], 0);
    }
    const auto j = x.to_json();
    for (const char* k : {"iteration_interval", "fp_bp", "tail"}) EXPECT_TRUE(j["step_trace_ms"].contains(k)) << k;
  }
  // Op-by-op launching shows up as a long iteration interval; loop sink has almost none.
  EXPECT_GT(runtime::summarize_steps(r[0].steps.trace.interval_s).mean_ms,
            10 * runtime::summarize_steps(r[3].steps.trace.interval_s).p50_ms);
}

TEST_F(TraceTest, LoopSinkStepTimeDoesNotRiseWithSinkSize) {
  std::vector<runtime::Session> sessions;
  for (std::int64_t s : {1, 10, 100, 1000, 2000}) {
    runtime::Session session;
    session.strategy = Strategy::LoopSink;
    session.steps_per_epoch = 2000;
    session.sink_size = s;
    session.epochs = 2000 / s;  // the same 2000 steps in sinks of s
    sessions.push_back(session);
  }
  const auto r = run(sessions, false, 0, 0, nullptr);
  for (std::size_t i = 1; i < r.size(); ++i) {
    EXPECT_EQ(r[i].steps_completed, 2000);
    EXPECT_LE(runtime::summarize_steps(r[i].steps.step_s).mean_ms,
              runtime::summarize_steps(r[i - 1].steps.step_s).mean_ms)
        << "sink_size " << r[i].session.sink_size;
  }
}

}  // namespace
}  // namespace ascendsim
