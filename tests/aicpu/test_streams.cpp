// The task scheduler's streams and events on their own: a device driven straight through its
// DeviceIf, with a stub host side. Dispatch 0.8 us and EndGraph 3 us (the ascend910 defaults),
// so every expected time below is a sum of those and the tasks' own times.
#include <gtest/gtest.h>

#include "aicore/aicore_cluster.h"
#include "aicpu/task_scheduler.h"
#include "sim/core/breakdown.h"
#include "sim/core/time.h"

namespace ascendsim {
namespace {

using hostif::Task;
using hostif::TaskKind;
using hostif::TaskList;
using sim::Phase;

/// Stands in for the host interface: records step ends, always has a batch.
struct StubHost : sc_core::sc_module, hostif::DeviceEventsIf, hostif::BatchSourceIf {
  explicit StubHost(sc_core::sc_module_name n) : sc_module(n) {}
  void step_ended(const hostif::StepMarks& m) override { step_ends.push_back(m.end); }
  void device_failed(const std::string& r) override { failure = r; }
  bool pop(const sc_core::sc_time&) override { return true; }
  std::vector<sc_core::sc_time> step_ends;
  std::string failure;
};

Task ai(const std::string& name, double us, std::int64_t blocks, std::int32_t stream) {
  Task t;
  t.kind = TaskKind::AiCore;
  t.name = name;
  t.cost.time_s = us * 1e-6;
  t.cost.blocks = blocks;
  t.cost.tiling.cube = true;
  t.time = sim::us(us);
  t.stream = stream;
  return t;
}

Task event(TaskKind kind, std::int32_t id, std::int32_t stream) {
  Task t;
  t.kind = kind;
  t.event = id;
  t.stream = stream;
  t.name = std::string(hostif::task_kind_name(kind)) + " " + std::to_string(id);
  return t;
}

Task comm(double us, std::int32_t stream) {
  Task t;
  t.kind = TaskKind::Comm;
  t.name = "AllReduce";
  t.time = sim::us(us);
  t.cost.time_s = us * 1e-6;
  t.stream = stream;
  return t;
}

/// One chip's device side with 32 AI cores, a graph submitted at time 0 and run once.
struct Device {
  aicpu::AicpuConfig cfg;
  sim::BreakdownAccountant account;
  aicore::AiCoreCluster cores{"aicore", 32, 0};
  aicpu::TaskScheduler scheduler{"scheduler", cfg, cores, account};
  StubHost host{"host"};
  Device() {
    scheduler.host(host);
    scheduler.batches(host);
  }
  /// Runs `graph` once; returns the completion time in us.
  double run(const TaskList& graph) {
    scheduler.submit_graph(graph, 1, false, sc_core::SC_ZERO_TIME);
    sc_core::sc_start();
    EXPECT_EQ(scheduler.completed(), 1u);
    EXPECT_EQ(host.step_ends.size(), 1u);
    breakdown = account.close(sc_core::sc_time_stamp());
    return sc_core::sc_time_stamp().to_seconds() * 1e6;
  }
  double phase_us(Phase p) const { return breakdown[static_cast<std::size_t>(p)] * 1e6; }
  std::array<double, sim::kPhaseCount> breakdown{};
};

constexpr double kDispatch = 0.8, kEndGraph = 3.0, kTol = 1e-9;

TEST(Streams, IndependentTasksOnTwoStreamsOverlap) {
  Device d;
  const TaskList g = {ai("A", 10, 16, 0), ai("B", 10, 16, 1)};
  // Both start at 0 on 16 cores each: the iteration lasts one task, not two.
  EXPECT_NEAR(d.run(g), kDispatch + 10 + kDispatch + kEndGraph, kTol);
  EXPECT_NEAR(d.cores.stats().to_json()["busy_s"].get<double>() * 1e6, kDispatch + 10 - kDispatch, kTol);
}

TEST(Streams, OneStreamRunsTheSameTasksInOrder) {
  Device d;
  const TaskList g = {ai("A", 10, 16, 0), ai("B", 10, 16, 0)};
  EXPECT_NEAR(d.run(g), 2 * (kDispatch + 10) + kDispatch + kEndGraph, kTol);
}

TEST(Streams, TasksWaitForFreeCores) {
  Device d;
  // Each task wants all 32 cores: B, dispatched at 0.8 us, waits until A releases them at 10.8.
  const TaskList g = {ai("A", 10, 32, 0), ai("B", 10, 32, 1)};
  EXPECT_NEAR(d.run(g), kDispatch + 10 + 10 + kDispatch + kEndGraph, kTol);
  EXPECT_NEAR(d.cores.stats().to_json()["core_wait_s"].get<double>() * 1e6, 10, kTol);
}

TEST(Streams, EventWaitOrdersTheStreams) {
  Device d;
  // B on stream 1 may start only after stream 0 recorded event 0, after A.
  const TaskList g = {ai("A", 10, 16, 0), event(TaskKind::EventRecord, 0, 0), event(TaskKind::EventWait, 0, 1),
                      ai("B", 10, 16, 1)};
  const double record_done = kDispatch + 10 + kDispatch;
  const double b_done = record_done + kDispatch /* wait task */ + kDispatch + 10;
  EXPECT_NEAR(d.run(g), b_done + kDispatch + kEndGraph, kTol);
  EXPECT_NEAR(d.scheduler.stats().to_json()["event_wait_s"].get<double>() * 1e6, record_done, kTol);
}

TEST(Streams, DeviceBusyWhileAnyStreamRuns) {
  Device d;
  // Stream 1 finishes at 5.8 us while stream 0 runs until 10.8: the device is busy throughout.
  const TaskList g = {ai("A", 10, 16, 0), ai("B", 5, 16, 1)};
  const double total = d.run(g);
  EXPECT_NEAR(total, kDispatch + 10 + kDispatch + kEndGraph, kTol);
  EXPECT_NEAR(d.phase_us(Phase::DeviceCompute), total, kTol);
  double sum = 0;
  for (double b : d.breakdown) sum += b * 1e6;
  EXPECT_NEAR(sum, total, kTol);
}

TEST(Streams, CommunicationNotHiddenByComputeIsCharged) {
  Device d;
  // A 30 us collective on stream 1 next to 10 us of compute on stream 0: 20 us are exposed.
  const TaskList g = {ai("A", 10, 16, 0), comm(30, 1)};
  const double total = d.run(g);
  EXPECT_NEAR(total, kDispatch + 30 + kDispatch + kEndGraph, kTol);
  EXPECT_NEAR(d.phase_us(Phase::Comm), 30 - 10, kTol);
  EXPECT_NEAR(d.phase_us(Phase::DeviceCompute), kDispatch + 10 + kDispatch + kEndGraph, kTol);
}

TEST(Streams, EventsPairAcrossIterationsOfALoop) {
  Device d;
  const TaskList g = {ai("A", 10, 16, 0), event(TaskKind::EventRecord, 0, 0), event(TaskKind::EventWait, 0, 1),
                      ai("B", 10, 16, 1)};
  d.scheduler.submit_graph(g, 3, true, sc_core::SC_ZERO_TIME);
  sc_core::sc_start();
  ASSERT_EQ(d.host.step_ends.size(), 3u);
  // Every iteration: A, record, wait, B in sequence, then AssignAdd, StreamSwitch (+ StreamActive).
  const double iter = 4 * kDispatch + 20;
  const double loop = (kDispatch + 3) + (kDispatch + 1.5);
  EXPECT_NEAR(d.host.step_ends[0].to_seconds() * 1e6, iter + loop + kDispatch + 1.5, kTol);
  EXPECT_NEAR((d.host.step_ends[2] - d.host.step_ends[1]).to_seconds() * 1e6, iter + loop, kTol);
}

}  // namespace
}  // namespace ascendsim
