// The device task scheduler. It takes submissions from the host in arrival order — single tasks
// (op-by-op launch) or a loaded graph to run for N iterations — and executes their tasks in stream
// order: AI core tasks on the AI cores, GetNext and loop control as AICPU kernels, each after a
// per-task dispatch cost. With loop control, every iteration ends with AssignAdd on the loop
// counter, StreamSwitch comparing it with the iteration count and StreamActive re-entering the
// body; the graph ends with EndGraph. One stream: tasks never overlap each other.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <string>
#include <vector>

#include <systemc>

#include "aicore/aicore_cluster.h"
#include "aicpu/aicpu_config.h"
#include "aicpu/task.h"
#include "sim/core/breakdown.h"
#include "sim/core/stats.h"
#include "sim/core/trace.h"

namespace ascendsim::aicpu {

class TaskScheduler : public sc_core::sc_module {
 public:
  SC_HAS_PROCESS(TaskScheduler);
  TaskScheduler(sc_core::sc_module_name name, const AicpuConfig& cfg, aicore::AiCoreCluster& cores,
                sim::BreakdownAccountant& account);

  void bind_source(BatchSource& source) { m_source = &source; }
  /// Called on the device each time a training step's last task finishes.
  void on_step_end(std::function<void(const StepMarks&)> fn) { m_on_step = std::move(fn); }
  /// Records tasks on the recorder's tracks while it is active — the stream, each of `cores` AI
  /// cores (an op's blocks on cores 0..blocks-1) and the AICPU; nullptr disables.
  void set_trace(sim::TraceRecorder* trace, std::int64_t cores);
  /// Called on the device when a task fails the run (see failure()); the scheduler stops.
  void on_failure(std::function<void()> fn) { m_on_failure = std::move(fn); }

  /// Host submissions; each reaches the device at `arrival` (>= now, non-decreasing).
  /// `task` must outlive its execution.
  void submit_task(const Task& task, const sc_core::sc_time& arrival, bool ends_step);
  void submit_graph(const TaskList& graph, std::int64_t iterations, bool loop_control, const sc_core::sc_time& arrival);

  std::uint64_t submitted() const { return m_submitted; }
  std::uint64_t completed() const { return m_completed; }
  /// Notified whenever a submission completes.
  const sc_core::sc_event& completion_event() const { return m_completion; }

  bool failed() const { return !m_failure.empty(); }
  const std::string& failure() const { return m_failure; }

  sim::StatsGroup& stats() { return m_stats; }

 private:
  struct Submission {
    const Task* task = nullptr;
    const TaskList* graph = nullptr;
    std::int64_t iterations = 1;
    bool loop_control = false;
    bool ends_step = false;
    sc_core::sc_time arrival;
  };

  void run();
  bool execute(const Task& task);  // false: the run failed
  void aicpu_kernel(double us, sim::Scalar& counter, const char* name);
  void step_done();

  const AicpuConfig& m_cfg;
  aicore::AiCoreCluster& m_cores;
  sim::BreakdownAccountant& m_account;
  BatchSource* m_source = nullptr;
  std::function<void(const StepMarks&)> m_on_step;
  StepMarks m_marks;
  bool m_step_started = false;
  sim::TraceRecorder* m_trace = nullptr;
  int m_stream_track = 0, m_aicpu_track = 0;
  std::vector<int> m_core_tracks;
  std::function<void()> m_on_failure;

  std::deque<Submission> m_queue;
  sc_core::sc_event m_arrived;
  sc_core::sc_event m_completion;
  std::uint64_t m_submitted = 0;
  std::uint64_t m_completed = 0;
  std::string m_failure;
  sc_core::sc_time m_dispatch;

  sim::StatsGroup m_stats;
  sim::Scalar& m_tasks;
  sim::Scalar& m_getnext;
  sim::Scalar& m_getnext_wait_s;
  sim::Scalar& m_assign_add;
  sim::Scalar& m_stream_switch;
  sim::Scalar& m_stream_active;
  sim::Scalar& m_end_graph;
  sim::Scalar& m_graph_runs;
  sim::Scalar& m_busy_s;
};

}  // namespace ascendsim::aicpu
