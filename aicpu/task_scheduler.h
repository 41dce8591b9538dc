// The device task scheduler. It implements the host interface's DeviceIf: it takes submissions —
// single tasks (op-by-op launch) or a loaded graph run for N iterations — and executes them on
// device streams. Each stream runs its tasks in order; streams run concurrently, ordered only by
// event record/wait tasks, and share the AI cores (a task waits for free cores). AI core tasks run
// on the AI cores, GetNext, loop control and events as AICPU work, each after a per-task dispatch
// cost. With loop control, every iteration ends with AssignAdd on the loop counter, StreamSwitch
// comparing it with the iteration count and StreamActive re-entering the body; the graph ends with
// EndGraph.
//
// A submission runs on its launch stream (the task's stream; stream 0 for a graph). A graph whose
// tasks all sit on one stream runs inline there, one wait per task; a multi-stream graph hands
// each other stream its tasks of the iteration and the iteration ends when every stream is done.
#pragma once

#include <array>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include <systemc>

#include "aicore/aicore_cluster.h"
#include "aicpu/aicpu_config.h"
#include "aicpu/hccl.h"
#include "hostif/device_if.h"
#include "hostif/values_if.h"
#include "sim/core/breakdown.h"
#include "sim/core/stats.h"
#include "sim/core/trace.h"

namespace ascendsim::aicpu {

using hostif::StepMarks;
using hostif::Task;
using hostif::TaskList;

class TaskScheduler : public sc_core::sc_module, public hostif::DeviceIf {
 public:
  SC_HAS_PROCESS(TaskScheduler);
  TaskScheduler(sc_core::sc_module_name name, const AicpuConfig& cfg, aicore::AiCoreCluster& cores,
                sim::BreakdownAccountant& account);

  sc_core::sc_port<hostif::DeviceEventsIf> host;  ///< step ends and failures go here
  /// GetNext pops here: the training data's channel, then the evaluation data's (Task::queue).
  sc_core::sc_port<hostif::BatchSourceIf, 2, sc_core::SC_ONE_OR_MORE_BOUND> batches;
  /// The cluster's collectives (AllReduce tasks); unbound on a single device.
  sc_core::sc_port<CollectiveIf, 1, sc_core::SC_ZERO_OR_MORE_BOUND> collectives;
  /// This chip's rank in its cluster.
  void set_rank(int rank) { m_rank = rank; }
  /// Functional mode: GetNext moves the queue's batch into the inputs, a step's end computes it.
  void set_values(hostif::ValuesIf* values) { m_values = values; }

  /// Records tasks on the recorder's tracks while it is active — per stream its tasks and the AI
  /// cores its ops occupy (one span per op, the block count as an argument), and the AICPU;
  /// nullptr disables.
  void set_trace(sim::TraceRecorder* trace);
  /// false: every task takes its own wait even where a run of tasks could take one (the reference
  /// the runs are checked against; the results are the same).
  void set_task_runs(bool on) { m_task_runs = on; }

  // DeviceIf
  void submit_task(const Task& task, const sc_core::sc_time& arrival, bool ends_step) override;
  void submit_graph(const TaskList& graph, std::int64_t iterations, bool loop_control,
                    const sc_core::sc_time& arrival) override;
  std::uint64_t submitted() const override { return m_submitted; }
  std::uint64_t completed() const override { return m_completed; }
  const sc_core::sc_event& drained_event() const override { return m_drained; }
  std::int64_t graph_image_bytes(const TaskList& graph) const override;

  sim::StatsGroup& stats() { return m_stats; }

  /// Per gradient group (Task::comm_group): how its collectives went on this rank.
  struct CommTiming {
    std::int64_t count = 0;
    double start_s = 0;     ///< summed over steps: this rank's arrival after the step's first forward task
    double duration_s = 0;  ///< summed: arrival to end, waiting for the other ranks included
    double exposed_s = 0;   ///< summed: the part no computation hid (charged to `comm`)
  };
  const std::vector<CommTiming>& comm_timing() const { return m_comm_timing; }
  /// The communication no computation hid, by what it was for: the gradients' collectives (data
  /// parallelism: Task::comm_group >= 0, and the optimizer's own, a sharded optimizer's
  /// ReduceScatter and AllGather) and the collectives inside the forward and backward passes (an
  /// operator's layout: tensor parallelism, semi-auto redistribution), in seconds.
  double exposed_gradients_s() const { return m_exposed_gradients_s; }
  double exposed_operators_s() const { return m_exposed_operators_s; }
  /// Of the exposed communication: the collectives among pipeline stages (Task::across_stages:
  /// their own time and the waits for the other stages).
  double exposed_pipeline_s() const { return m_exposed_pipeline_s; }
  /// What other consumers of the HBM (collectives, DMA, other streams' kernels) added to the AI
  /// core tasks' time: on stream 0 (the compute stream of a graph) and on the others, in seconds.
  double hbm_lost_s(bool stream0) const;

 private:
  /// Statistics of consecutive tasks of a run, summed.
  struct RunSums {
    sim::TimeSum time;       ///< on the cores
    sim::TimeSum core_time;  ///< on the cores, by blocks
    sim::ExactSum macs;
    sim::ExactSum gm_bytes;  ///< HBM traffic
  };
  /// Consecutive AI core tasks of a graph's stream, run with one wait when no other stream can
  /// take AI cores in between and the cores are all free (see run_planned).
  struct Run {
    std::size_t begin = 0, end = 0;  ///< task indices [begin, end) in the stream's list
    sc_core::sc_time total;          ///< dispatch + time of every task, alone
    /// Indices in the run of the first forward task, and of the last forward and backward ones
    /// (SIZE_MAX: none).
    std::size_t first_forward = SIZE_MAX, last_forward = SIZE_MAX, last_backward = SIZE_MAX;
    /// Per task and one past the last: its dispatch's offset from the run's start, alone (task
    /// j ends at offset[j + 1]; offset.back() == total).
    std::vector<sc_core::sc_time> offset;
    std::vector<RunSums> sums;  ///< prefix sums: sums[j] over tasks [0, j)
    std::size_t size() const { return end - begin; }
  };
  /// The tasks of one graph iteration, split by stream.
  struct GraphPlan {
    std::vector<std::int32_t> streams;                 ///< streams used, ascending
    std::vector<std::vector<const Task*>> per_stream;  ///< tasks of streams[i], in order
    bool single_stream = true;
    /// At most one stream has AI core tasks (the others communicate and record or wait for
    /// events): nothing another stream does can observe the cores during a run of its tasks.
    bool one_compute_stream = true;
    std::vector<std::vector<Run>> runs;  ///< per stream: AI core runs of two tasks or more, in order
  };
  struct Work {
    // A submission (task or graph) ...
    const Task* task = nullptr;
    const TaskList* graph = nullptr;
    const GraphPlan* plan = nullptr;
    std::int64_t iterations = 1;
    bool loop_control = false;
    bool ends_step = false;
    sc_core::sc_time arrival;
    // ... or a slice of a multi-stream graph iteration run for its launch stream.
    const std::vector<const Task*>* slice = nullptr;
    const std::vector<Run>* slice_runs = nullptr;
  };
  /// An AI core task of a run as planned: dispatched at `ds`, its kernel from `ks` to `end`; at
  /// `from` its kernel had `left` of its time alone still to run.
  struct Planned {
    const Task* task = nullptr;
    sc_core::sc_time arrival;  ///< its launch's arrival (op-by-op), else zero
    sc_core::sc_time ds, ks, end, from, left;
    bool ends_step = false;
    aicore::HbmLost lost_before{}, lost_planned{};  ///< time lost to flows before `from`, and planned after
  };
  /// Which tasks of a run run_planned() plans one by one (its window): [first, first +
  /// items.size()). Those before it ended alone; those after it follow its last alone, since no
  /// flow reaches them. The window grows while its next task could meet a flow.
  struct Window {
    const Run* run = nullptr;                         ///< nullptr: the items are all there is (op by op)
    const std::vector<const Task*>* tasks = nullptr;  ///< the stream's list `run` indexes
    std::size_t first = 0;
    sc_core::sc_time prev_end;  ///< the end of the task before the window (or when it began)
  };
  struct Stream {
    std::int32_t id = 0;
    std::deque<Work> queue;
    sc_core::sc_event arrived;
    int track = 0, core_track = 0;
    bool active = false;   ///< counted as busy in the time breakdown
    bool ai_work = false;  ///< has been given an AI core task on its own (not in a graph)
    sc_core::sc_time hbm_lost;  ///< what other HBM consumers added to its kernels' time
    std::vector<Planned> items;  ///< scratch for its runs
  };

  Stream& stream(std::int32_t id);
  void stream_thread(std::int32_t id);
  void stream0_thread();
  void push(std::int32_t stream_id, Work w);
  bool run_submission(Stream& s, const Work& w);  // false: the run failed
  bool run_iteration(Stream& s, const Work& w);
  /// Executes one stream's tasks of a graph iteration, its runs of AI core tasks with one wait
  /// each where `plan` allows; false if the run failed.
  bool execute_tasks(Stream& s, const GraphPlan& plan, const std::vector<const Task*>& tasks,
                     const std::vector<Run>& runs);
  bool execute(Stream& s, const Task& task);
  /// Executes a run of AI core tasks with one wait; false if the device could be observed in
  /// between (the caller then executes them one by one).
  bool execute_run(Stream& s, const GraphPlan& plan, const Run& run, const std::vector<const Task*>& tasks);
  /// Runs `items` back to back from now with one wait, planned among the HBM's known flows and
  /// re-planned when another consumer arrives; then counts them and sets the step marks.
  /// `announce`: announce the device's busy and idle spans to the time accounting (op-by-op).
  /// `resume`: the items already hold the plan made at `begin`, and a consumer has just arrived.
  /// `w`: the run the items are a window of (if any).
  void run_planned(Stream& s, std::vector<Planned>& items, Window& w, bool announce, bool resume = false,
                   sc_core::sc_time begin = sc_core::SC_ZERO_TIME);
  /// Plans items [i, end) after `prev_end` (growing `w`'s window as needed); items[i]'s kernel is
  /// under way if `running`. Returns the end of the last item, or of `w`'s run. `changed` (a
  /// re-plan: the items hold an earlier plan): set if an item moved; once an item ends as
  /// planned, after every flow, the rest stand as planned.
  sc_core::sc_time plan_items(std::vector<Planned>& items, const Window& w, std::size_t i, sc_core::sc_time prev_end,
                              bool running, bool* changed = nullptr);
  /// Where the tasks after `w`'s window are dispatched from: the window's last end.
  static sc_core::sc_time tail_start(const std::vector<Planned>& items, const Window& w) {
    return items.empty() ? w.prev_end : items.back().end;
  }
  /// The end of the last item, or of `w`'s run.
  static sc_core::sc_time planned_end(const std::vector<Planned>& items, const Window& w);
  /// When the window's task `k` (items[k], or one after the window) is dispatched.
  static sc_core::sc_time dispatch_at(const std::vector<Planned>& items, const Window& w, std::size_t k);
  /// Tasks [after, ...) of `w`'s run ran alone back to back, `after` dispatched at `at`, until now
  /// (a flow arrived): counts those that ended and makes the window the one under way, as planned
  /// alone. `fp`: the run index of the task that set the step's start while planning, or SIZE_MAX.
  void restart_window(Stream& s, std::vector<Planned>& items, Window& w, std::size_t after, const sc_core::sc_time& at,
                      std::size_t fp, bool tracing);
  /// Counts the first `n` items as they ran, and drops them from the window.
  void count_planned(Stream& s, std::vector<Planned>& items, Window& w, std::size_t n, bool tracing);
  /// Counts tasks [a, b) of `run` that ran alone back to back, a dispatched at `at`; in one sum
  /// unless traced. Sets the step marks of those among them.
  void count_alone(const Stream& s, const Run& run, const std::vector<const Task*>& tasks, std::size_t a, std::size_t b,
                   const sc_core::sc_time& at, bool tracing);
  void name_tracks(Stream& s);
  /// Statistics (and trace) of an AI core task a run executes without its own wait: dispatched at
  /// `start`, `time` on the cores. Returns its end.
  sc_core::sc_time count_ai_task(const Stream& s, const Task& t, const sc_core::sc_time& start,
                                 const sc_core::sc_time& time, bool tracing);
  /// Records an AI core task that ran from `start` (its dispatch) to `end`.
  void trace_ai_task(const Stream& s, const Task& t, const sc_core::sc_time& start, const sc_core::sc_time& end);
  /// True if nothing can observe the device between `s`'s tasks: no other stream was given AI core
  /// work (a communication stream's collectives and events take no core), every core free. (A
  /// trace records the tasks of a run with their computed times.)
  bool unobserved(const Stream& s) const;
  /// Runs op-by-op submissions of AI core tasks — `first` and those queued behind it, up to the
  /// step's last — with one wait, announcing the device's busy and idle spans to the time
  /// accounting. Call only when unobserved(s).
  void run_ops(Stream& s, const Work& first);
  void set_active(Stream& s, bool active);
  void aicpu_kernel(Stream& s, const sc_core::sc_time& t, sim::Scalar& counter, const char* name);
  void step_done();
  void fail(const std::string& reason);

  const AicpuConfig& m_cfg;
  aicore::AiCoreCluster& m_cores;
  sim::BreakdownAccountant& m_account;
  StepMarks m_marks;
  bool m_step_started = false;
  /// An inference step has no backward task: its fp_and_bp span ends with its last forward task.
  bool m_step_backward = false;
  sc_core::sc_time m_fp_end;
  bool m_task_runs = true;
  sim::TraceRecorder* m_trace = nullptr;
  int m_aicpu_track = 0;
  /// Tracks of AI core 0's pipes (the busiest block of every op runs there), made on the first op
  /// the event model timed; -1 until then.
  std::array<int, aicore::kPipeCount> m_pipe_tracks{-1, -1, -1, -1, -1, -1, -1};
  std::unordered_map<const Task*, int> m_pipe_labels;  ///< per task: its pipe spans' label
  int m_rank = 0;
  hostif::ValuesIf* m_values = nullptr;
  std::vector<CommTiming> m_comm_timing;
  double m_exposed_gradients_s = 0, m_exposed_operators_s = 0, m_exposed_pipeline_s = 0;
  std::unordered_map<const Task*, int> m_trace_labels;  ///< per task: its AI core span's trace label

  std::map<std::int32_t, std::unique_ptr<Stream>> m_streams;
  std::map<const TaskList*, GraphPlan> m_plans;
  std::vector<std::int64_t> m_recorded, m_waited;  ///< per event: records, consumed waits
  sc_core::sc_event m_event_recorded;
  std::int64_t m_slices_pending = 0;
  sc_core::sc_event m_slice_done;
  sc_core::sc_event m_drained;
  std::uint64_t m_submitted = 0;
  std::uint64_t m_completed = 0;
  std::string m_failure;
  sc_core::sc_time m_dispatch;
  sc_core::sc_time m_getnext_t, m_assign_add_t, m_stream_switch_t, m_stream_active_t, m_end_graph_t;

  sim::StatsGroup m_stats;
  sim::Scalar& m_tasks;
  sim::Scalar& m_getnext;
  sim::Scalar& m_getnext_wait_s;
  sim::Scalar& m_assign_add;
  sim::Scalar& m_stream_switch;
  sim::Scalar& m_stream_active;
  sim::Scalar& m_end_graph;
  sim::Scalar& m_graph_runs;
  sim::Scalar& m_events_recorded;
  sim::Scalar& m_event_wait_s;
  sim::Scalar& m_comm_tasks;
  sim::Scalar& m_busy_s;
  sim::Scalar& m_hbm_lost_s;
  std::size_t m_fp_item = SIZE_MAX;  ///< the planned item that set the step's fp_start, while planning
  sc_core::sc_time m_busy;  ///< busy_s summed in whole picoseconds: the same in any order
  void add_busy(const sc_core::sc_time& t) {
    m_busy += t;
    m_busy_s.set(m_busy.to_seconds());
  }
};

}  // namespace ascendsim::aicpu
