#include "aicpu/task_scheduler.h"

#include <algorithm>

#include "sim/core/time.h"

namespace ascendsim::aicpu {

using sc_core::sc_time;

TaskScheduler::TaskScheduler(sc_core::sc_module_name name, const AicpuConfig& cfg, aicore::AiCoreCluster& cores,
                             sim::BreakdownAccountant& account)
    : sc_module(name),
      m_cfg(cfg),
      m_cores(cores),
      m_account(account),
      m_dispatch(sim::ns(cfg.dispatch_ns)),
      m_stats("scheduler"),
      m_tasks(m_stats.scalar("tasks", "count", "tasks dispatched (AI core and AICPU)")),
      m_getnext(m_stats.scalar("getnext", "count", "GetNext kernels")),
      m_getnext_wait_s(m_stats.scalar("getnext_wait_s", "s", "time GetNext waited for an empty data queue")),
      m_assign_add(m_stats.scalar("assign_add", "count", "loop counter AssignAdd kernels")),
      m_stream_switch(m_stats.scalar("stream_switch", "count", "StreamSwitch kernels")),
      m_stream_active(m_stats.scalar("stream_active", "count", "StreamActive kernels")),
      m_end_graph(m_stats.scalar("end_graph", "count", "EndGraph kernels")),
      m_graph_runs(m_stats.scalar("graph_runs", "count", "graph executions started")),
      m_busy_s(m_stats.scalar("busy_s", "s", "time the device executed tasks")) {
  SC_THREAD(run);
}

void TaskScheduler::submit_task(const Task& task, const sc_time& arrival, bool ends_step) {
  m_queue.push_back({&task, nullptr, 1, false, ends_step, arrival});
  ++m_submitted;
  m_arrived.notify(sc_core::SC_ZERO_TIME);
}

void TaskScheduler::submit_graph(const TaskList& graph, std::int64_t iterations, bool loop_control,
                                 const sc_time& arrival) {
  m_queue.push_back({nullptr, &graph, iterations, loop_control, true, arrival});
  ++m_submitted;
  m_arrived.notify(sc_core::SC_ZERO_TIME);
}

void TaskScheduler::set_trace(sim::TraceRecorder* trace, std::int64_t cores) {
  m_trace = trace;
  if (!trace) return;
  m_stream_track = trace->track("device stream (task scheduler)");
  m_aicpu_track = trace->track("AICPU");
  m_core_tracks.clear();
  for (std::int64_t c = 0; c < cores; ++c) m_core_tracks.push_back(trace->track("AI core " + std::to_string(c)));
}

void TaskScheduler::step_done() {
  m_marks.end = sc_core::sc_time_stamp();
  if (!m_step_started) m_marks.fp_start = m_marks.bp_end = m_marks.end;
  if (m_on_step) m_on_step(m_marks);
  m_step_started = false;
}

void TaskScheduler::aicpu_kernel(double us, sim::Scalar& counter, const char* name) {
  ++counter;
  ++m_tasks;
  const sc_time start = sc_core::sc_time_stamp();
  const sc_time t = m_dispatch + sim::us(us);
  m_busy_s += t.to_seconds();
  wait(t);
  if (m_trace && m_trace->active()) {
    m_trace->span(m_stream_track, name, start, sc_core::sc_time_stamp());
    m_trace->span(m_aicpu_track, name, start + m_dispatch, sc_core::sc_time_stamp());
  }
}

bool TaskScheduler::execute(const Task& task) {
  if (task.kind == TaskKind::AiCore) {
    ++m_tasks;
    const sc_time start = sc_core::sc_time_stamp();
    if (task.part == StepPart::Forward && !m_step_started) {
      m_marks.fp_start = start;
      m_step_started = true;
    }
    const sc_time run_start = start + m_dispatch;
    const bool tracing = m_trace && m_trace->active();
    if (tracing && task.cost.time_s > 0)
      m_trace->counter("HBM GB/s", run_start, task.cost.gm_bytes / task.cost.time_s / 1e9);
    // Dispatch and execution in one wait: the cores run the op right after the dispatch.
    m_busy_s += (m_dispatch + m_cores.execute(task.cost, m_dispatch)).to_seconds();
    if (task.part == StepPart::Backward) m_marks.bp_end = sc_core::sc_time_stamp();
    if (tracing) {
      m_trace->span(m_stream_track, task.name, start, sc_core::sc_time_stamp());
      const std::string args = "{\"blocks\":" + std::to_string(task.cost.blocks) + ",\"bound\":\"" +
                               aicore::bound_name(task.cost.bound) + "\"}";
      const auto blocks = std::min<std::size_t>(static_cast<std::size_t>(task.cost.blocks), m_core_tracks.size());
      for (std::size_t c = 0; c < blocks; ++c)  // the op's details once, on its first core
        m_trace->span(m_core_tracks[c], task.name, run_start, sc_core::sc_time_stamp(), c == 0 ? args : std::string());
      m_trace->counter("HBM GB/s", sc_core::sc_time_stamp(), 0);
    }
    return true;
  }
  // GetNext: wait (device idle, charged to wait_data) until the queue has a batch.
  if (!m_source) throw std::logic_error("GetNext without a bound data queue");
  const sc_time start = sc_core::sc_time_stamp();
  m_account.set_device_busy(false);
  m_account.set_device_waiting(true);
  const bool ok = m_source->pop(sim::seconds(m_cfg.op_timeout_s));
  m_account.set_device_waiting(false);
  m_getnext_wait_s += (sc_core::sc_time_stamp() - start).to_seconds();
  if (m_trace && m_trace->active() && sc_core::sc_time_stamp() > start)
    m_trace->span(m_stream_track, "GetNext: wait for data", start, sc_core::sc_time_stamp());
  if (!ok) {
    m_failure = "GetNext timed out after " + std::to_string(m_cfg.op_timeout_s) +
                " s waiting for the device data queue: the data pipeline is too slow or failed. "
                "Raise num_parallel_workers, simplify the map operations, or raise op_timeout.";
    return false;
  }
  m_account.set_device_busy(true);
  aicpu_kernel(m_cfg.getnext_us, m_getnext, "GetNext");
  return true;
}

void TaskScheduler::run() {
  for (;;) {
    while (m_queue.empty()) wait(m_arrived);
    const Submission s = m_queue.front();
    m_queue.pop_front();
    const sc_time now = sc_core::sc_time_stamp();
    if (s.arrival > now) wait(s.arrival - now);

    m_account.set_device_busy(true);
    if (s.task) {
      if (!execute(*s.task)) break;
      if (s.ends_step) step_done();
    } else {
      ++m_graph_runs;
      bool ok = true;
      for (std::int64_t it = 0; ok && it < s.iterations; ++it) {
        for (const Task& t : *s.graph)
          if (!(ok = execute(t))) break;
        if (!ok) break;
        if (s.loop_control) {
          aicpu_kernel(m_cfg.assign_add_us, m_assign_add, "AssignAdd (loop counter)");
          aicpu_kernel(m_cfg.stream_switch_us, m_stream_switch, "StreamSwitch");
          if (it + 1 < s.iterations) aicpu_kernel(m_cfg.stream_active_us, m_stream_active, "StreamActive");
        }
        step_done();
      }
      if (!ok) break;
      aicpu_kernel(m_cfg.end_graph_us, m_end_graph, "EndGraph");
    }
    m_account.set_device_busy(false);
    ++m_completed;
    m_completion.notify(sc_core::SC_ZERO_TIME);
  }
  m_account.set_device_busy(false);
  if (m_on_failure) m_on_failure();
}

}  // namespace ascendsim::aicpu
