#define SC_INCLUDE_DYNAMIC_PROCESSES  // streams beyond stream 0 get their threads when first used
#include "aicpu/task_scheduler.h"

#include <algorithm>
#include <cmath>

#include "sim/core/time.h"

namespace ascendsim::aicpu {

using hostif::StepPart;
using hostif::TaskKind;
using sc_core::sc_time;
using Device = sim::BreakdownAccountant::Device;

TaskScheduler::TaskScheduler(sc_core::sc_module_name name, const AicpuConfig& cfg, aicore::AiCoreCluster& cores,
                             sim::BreakdownAccountant& account)
    : sc_module(name),
      host("host"),
      batches("batches"),
      m_cfg(cfg),
      m_cores(cores),
      m_account(account),
      m_dispatch(sim::ns(cfg.dispatch_ns)),
      m_getnext_t(m_dispatch + sim::us(cfg.getnext_us)),
      m_assign_add_t(m_dispatch + sim::us(cfg.assign_add_us)),
      m_stream_switch_t(m_dispatch + sim::us(cfg.stream_switch_us)),
      m_stream_active_t(m_dispatch + sim::us(cfg.stream_active_us)),
      m_end_graph_t(m_dispatch + sim::us(cfg.end_graph_us)),
      m_stats(*this),
      m_tasks(m_stats.scalar("tasks", "count", "tasks dispatched (AI core, AICPU, event and communication)")),
      m_getnext(m_stats.scalar("getnext", "count", "GetNext kernels")),
      m_getnext_wait_s(m_stats.scalar("getnext_wait_s", "s", "time GetNext waited for an empty data queue")),
      m_assign_add(m_stats.scalar("assign_add", "count", "loop counter AssignAdd kernels")),
      m_stream_switch(m_stats.scalar("stream_switch", "count", "StreamSwitch kernels")),
      m_stream_active(m_stats.scalar("stream_active", "count", "StreamActive kernels")),
      m_end_graph(m_stats.scalar("end_graph", "count", "EndGraph kernels")),
      m_graph_runs(m_stats.scalar("graph_runs", "count", "graph executions started")),
      m_events_recorded(m_stats.scalar("events_recorded", "count", "event record tasks")),
      m_event_wait_s(m_stats.scalar("event_wait_s", "s", "time streams waited in event wait tasks")),
      m_comm_tasks(m_stats.scalar("comm_tasks", "count", "communication tasks")),
      m_busy_s(m_stats.scalar("busy_s", "s", "sum over streams of the time they executed tasks")),
      m_hbm_lost_s(m_stats.scalar("hbm_lost_s", "s",
                                  "time other consumers of the HBM added to AI core tasks, summed over streams")) {
  m_streams.emplace(0, std::make_unique<Stream>());
  SC_THREAD(stream0_thread);
}

void TaskScheduler::stream0_thread() { stream_thread(0); }

TaskScheduler::Stream& TaskScheduler::stream(std::int32_t id) {
  auto it = m_streams.find(id);
  if (it != m_streams.end()) return *it->second;
  if (id < 0) throw std::invalid_argument("task on stream " + std::to_string(id) + ": stream ids are >= 0");
  auto& s = *m_streams.emplace(id, std::make_unique<Stream>()).first->second;
  s.id = id;
  if (m_trace) name_tracks(s);
  sc_core::sc_spawn_options opts;
  sc_core::sc_spawn(sc_bind(&TaskScheduler::stream_thread, this, id), ("stream" + std::to_string(id)).c_str(), &opts);
  return s;
}

void TaskScheduler::push(std::int32_t stream_id, Work w) {
  Stream& s = stream(stream_id);
  if (w.task && w.task->kind == TaskKind::AiCore) s.ai_work = true;
  s.queue.push_back(w);
  s.arrived.notify(sc_core::SC_ZERO_TIME);
}

void TaskScheduler::submit_task(const Task& task, const sc_time& arrival, bool ends_step) {
  Work w;
  w.task = &task;
  w.ends_step = ends_step;
  w.arrival = arrival;
  ++m_submitted;
  push(task.stream, w);
}

void TaskScheduler::submit_graph(const TaskList& graph, std::int64_t iterations, bool loop_control,
                                 const sc_time& arrival) {
  auto it = m_plans.find(&graph);
  if (it == m_plans.end()) {
    GraphPlan p;
    p.streams = hostif::streams_of(graph);
    p.per_stream.resize(p.streams.size());
    for (const Task& t : graph) {
      const auto i = std::lower_bound(p.streams.begin(), p.streams.end(), t.stream) - p.streams.begin();
      p.per_stream[static_cast<std::size_t>(i)].push_back(&t);
    }
    p.single_stream = p.streams.size() <= 1 && (p.streams.empty() || p.streams[0] == 0);
    int compute_streams = 0;
    for (const auto& tasks : p.per_stream)
      compute_streams +=
          std::any_of(tasks.begin(), tasks.end(), [](const Task* t) { return t->kind == TaskKind::AiCore; });
    p.one_compute_stream = compute_streams <= 1;
    p.runs.resize(p.per_stream.size());
    for (std::size_t k = 0; k < p.per_stream.size(); ++k) {
      const auto& tasks = p.per_stream[k];
      for (std::size_t i = 0; i < tasks.size();) {
        if (tasks[i]->kind != TaskKind::AiCore) {
          ++i;
          continue;
        }
        Run r;
        r.begin = i;
        r.sums.emplace_back();
        for (; i < tasks.size() && tasks[i]->kind == TaskKind::AiCore; ++i) {
          const Task& t = *tasks[i];
          const std::size_t j = i - r.begin;
          if (t.part == StepPart::Forward && r.first_forward == SIZE_MAX) r.first_forward = j;
          if (t.part == StepPart::Forward) r.last_forward = j;
          if (t.part == StepPart::Backward) r.last_backward = j;
          r.offset.push_back(r.total);
          r.total += m_dispatch + t.time;
          RunSums sum = r.sums.back();
          sum.time.add(t.time);
          sum.core_time.add(t.time, t.cost.blocks);
          sum.macs += t.cost.macs;
          sum.gm_bytes += t.cost.gm_bytes;
          r.sums.push_back(sum);
        }
        r.offset.push_back(r.total);
        r.end = i;
        if (r.end - r.begin >= 2) p.runs[k].push_back(std::move(r));
      }
    }
    for (auto sid : p.streams) stream(sid);  // threads exist before the graph runs
    it = m_plans.emplace(&graph, std::move(p)).first;
  }
  Work w;
  w.graph = &graph;
  w.plan = &it->second;
  w.iterations = iterations;
  w.loop_control = loop_control;
  w.ends_step = true;
  w.arrival = arrival;
  ++m_submitted;
  push(0, w);
}

std::int64_t TaskScheduler::graph_image_bytes(const TaskList& graph) const {
  // The step's task descriptors plus the loop-control (AssignAdd, StreamSwitch, StreamActive) and
  // EndGraph tasks.
  return static_cast<std::int64_t>(graph.size() + 4) * m_cfg.task_descriptor_bytes;
}

void TaskScheduler::name_tracks(Stream& s) {
  s.track = m_trace->track(s.id == 0 ? std::string("device stream (task scheduler)")
                                     : "device stream " + std::to_string(s.id));
  s.core_track = m_trace->track(s.id == 0 ? std::string("AI cores") : "AI cores (stream " + std::to_string(s.id) + ")");
}

void TaskScheduler::set_trace(sim::TraceRecorder* trace) {
  m_trace = trace;
  if (!trace) return;
  for (auto& [id, s] : m_streams) name_tracks(*s);
  m_aicpu_track = trace->track("AICPU");
}

void TaskScheduler::trace_ai_task(const Stream& s, const Task& t, const sc_time& start, const sc_time& end) {
  // One span per op on its stream's AI cores, from the end of its dispatch, with the cores it
  // occupies, what bounds it and its mean HBM bandwidth (GB/s, to 0.1) as arguments.
  auto [it, added] = m_trace_labels.try_emplace(&t, 0);
  if (added) {
    const double gbps = t.cost.time_s > 0 ? t.cost.gm_bytes / t.cost.time_s / 1e9 : 0.0;
    sim::TraceArgs args = {sim::TraceArg::integer("blocks", t.cost.blocks),
                           sim::TraceArg::text("bound", aicore::bound_name(t.cost.bound)),
                           sim::TraceArg::number("hbm_gbps", std::round(gbps * 10) / 10)};
    if (t.cost.timeline)  // the event model: CANN's op summary ratios, to 0.001
      for (const auto& [column, pipe] : aicore::op_summary_ratios())
        args.push_back(sim::TraceArg::number(column, std::round(aicore::pipe_ratio(t.cost, pipe) * 1000) / 1000));
    it->second = m_trace->label(t.name, args);
  }
  m_trace->span(s.core_track, it->second, start + m_dispatch, end);
  if (!t.cost.timeline) return;
  // The event model's record of the busiest block, on AI core 0's pipe tracks, stretched to the
  // op's span here (longer than its cost where the HBM was shared).
  const auto& tl = *t.cost.timeline;
  const sc_time from = start + m_dispatch;
  if (!(end > from) || !(t.cost.block_cycles > 0)) return;
  const double ps_per_cycle = static_cast<double>((end - from).value()) / t.cost.block_cycles;
  auto at = [&](double cycles) {
    return from + sc_time::from_value(static_cast<std::uint64_t>(cycles * ps_per_cycle));
  };
  if (m_pipe_tracks[0] < 0)  // all seven, in the pipes' order
    for (std::size_t p = 0; p < aicore::kPipeCount; ++p)
      m_pipe_tracks[p] = m_trace->track(std::string("AI core 0: ") + aicore::pipe_name(static_cast<aicore::Pipe>(p)));
  auto [name, named] = m_pipe_labels.try_emplace(&t, 0);  // the op's name alone: its span has the arguments
  if (named) name->second = m_trace->label(t.name);
  for (std::size_t p = 0; p < aicore::kPipeCount; ++p)
    for (const auto& i : tl.pipes[p]) m_trace->span(m_pipe_tracks[p], name->second, at(i.start), at(i.end));
}

void TaskScheduler::set_active(Stream& s, bool active) {
  if (s.active == active) return;
  s.active = active;
  if (active)
    m_account.begin(Device::Busy);
  else
    m_account.end(Device::Busy);
}

void TaskScheduler::step_done() {
  if (m_values) m_values->step();
  m_marks.end = sc_core::sc_time_stamp();
  if (!m_step_started)
    m_marks.fp_start = m_marks.bp_end = m_marks.end;
  else if (!m_step_backward)
    m_marks.bp_end = m_fp_end;
  m_step_backward = false;
  host->step_ended(m_marks);
  m_step_started = false;
}

void TaskScheduler::fail(const std::string& reason) {
  if (m_failure.empty()) m_failure = reason;
}

void TaskScheduler::aicpu_kernel(Stream& s, const sc_time& t, sim::Scalar& counter, const char* name) {
  ++counter;
  ++m_tasks;
  const sc_time start = sc_core::sc_time_stamp();
  add_busy(t);
  wait(t);
  if (m_trace && m_trace->active()) {
    m_trace->span(s.track, name, start, sc_core::sc_time_stamp());
    m_trace->span(m_aicpu_track, name, start + m_dispatch, sc_core::sc_time_stamp());
  }
}

bool TaskScheduler::execute(Stream& s, const Task& task) {
  const bool tracing = m_trace && m_trace->active();
  switch (task.kind) {
    case TaskKind::AiCore: {
      ++m_tasks;
      const sc_time start = sc_core::sc_time_stamp();
      if (task.part == StepPart::Forward && !m_step_started) {
        m_marks.fp_start = start;
        m_step_started = true;
      }
      // Dispatch and execution in one wait when cores are free: the cores run the op right after
      // the dispatch.
      sc_time lost;
      const sc_time run_start = m_cores.execute(task.cost, task.time, m_dispatch, &lost);
      add_busy(sc_core::sc_time_stamp() - start);
      if (lost > sc_core::SC_ZERO_TIME) {
        s.hbm_lost += lost;
        m_hbm_lost_s += lost.to_seconds();
      }
      if (task.part == StepPart::Backward) {
        m_marks.bp_end = sc_core::sc_time_stamp();
        m_step_backward = true;
      } else if (task.part == StepPart::Forward) {
        m_fp_end = sc_core::sc_time_stamp();
      }
      if (tracing) trace_ai_task(s, task, run_start - m_dispatch, sc_core::sc_time_stamp());
      return true;
    }
    case TaskKind::GetNext: {
      // Wait (the stream idle, charged to wait_data) until the queue has a batch.
      const sc_time start = sc_core::sc_time_stamp();
      set_active(s, false);
      m_account.begin(Device::Waiting);
      const bool ok = batches[task.queue]->pop(sim::seconds(m_cfg.op_timeout_s));
      m_account.end(Device::Waiting);
      m_getnext_wait_s += (sc_core::sc_time_stamp() - start).to_seconds();
      if (tracing && sc_core::sc_time_stamp() > start)
        m_trace->span(s.track, "GetNext: wait for data", start, sc_core::sc_time_stamp());
      if (!ok) {
        fail("GetNext timed out after " + std::to_string(m_cfg.op_timeout_s) +
             " s waiting for the device data queue: the data pipeline is too slow or failed. "
             "Raise num_parallel_workers, simplify the map operations, or raise op_timeout.");
        return false;
      }
      set_active(s, true);
      if (task.queue == 0) m_account.filled();
      if (m_values) m_values->get_next();
      aicpu_kernel(s, m_getnext_t, m_getnext, "GetNext");
      return true;
    }
    case TaskKind::EventRecord: {
      ++m_tasks;
      ++m_events_recorded;
      const sc_time start = sc_core::sc_time_stamp();
      add_busy(m_dispatch);
      wait(m_dispatch);
      const auto e = static_cast<std::size_t>(task.event);
      if (m_recorded.size() <= e) m_recorded.resize(e + 1, 0);
      ++m_recorded[e];
      m_event_recorded.notify(sc_core::SC_ZERO_TIME);
      if (tracing) m_trace->span(s.track, task.name, start, sc_core::sc_time_stamp());
      return true;
    }
    case TaskKind::EventWait: {
      ++m_tasks;
      const sc_time start = sc_core::sc_time_stamp();
      const auto e = static_cast<std::size_t>(task.event);
      if (m_recorded.size() <= e) m_recorded.resize(e + 1, 0);
      if (m_waited.size() <= e) m_waited.resize(e + 1, 0);
      if (m_recorded[e] <= m_waited[e]) {  // not recorded yet: the stream idles
        set_active(s, false);
        while (m_recorded[e] <= m_waited[e]) wait(m_event_recorded);
        set_active(s, true);
      }
      ++m_waited[e];
      m_event_wait_s += (sc_core::sc_time_stamp() - start).to_seconds();
      add_busy(m_dispatch);
      wait(m_dispatch);
      if (tracing) m_trace->span(s.track, task.name, start, sc_core::sc_time_stamp());
      return true;
    }
    case TaskKind::Comm: {
      ++m_tasks;
      ++m_comm_tasks;
      const sc_time start = sc_core::sc_time_stamp();
      set_active(s, false);
      // One-time set-up (the parameters' broadcast) is charged to the host's `setup` phase.
      const bool setup = task.part == StepPart::Setup;
      if (!setup) m_account.begin(Device::Comm);
      const sc_time exposed_before = m_account.charged(sim::Phase::Comm);
      if (task.comm_bytes > 0 && collectives.size() > 0) {
        wait(m_dispatch);
        collectives->collective(m_rank, task.collective, task.comm_bytes, task.group);  // until the group is done
      } else {
        wait(m_dispatch + task.time);
      }
      if (task.comm_group >= 0) {
        const auto g = static_cast<std::size_t>(task.comm_group);
        if (m_comm_timing.size() <= g) m_comm_timing.resize(g + 1);
        CommTiming& c = m_comm_timing[g];
        ++c.count;
        if (m_step_started) c.start_s += (start - m_marks.fp_start).to_seconds();
        c.duration_s += (sc_core::sc_time_stamp() - start).to_seconds();
        c.exposed_s += (m_account.charged(sim::Phase::Comm) - exposed_before).to_seconds();
      }
      if (!setup) {
        // One communication stream: the comm phase grows only under this task, so its growth is
        // this task's exposed part.
        // A pipeline exchange's: its transfer and the wait for the other stage (the bubble).
        const bool gradients = task.comm_group >= 0 || task.part == StepPart::Optimizer;
        const double exposed = (m_account.charged(sim::Phase::Comm) - exposed_before).to_seconds();
        if (task.across_stages)
          m_exposed_pipeline_s += exposed;
        else
          (gradients ? m_exposed_gradients_s : m_exposed_operators_s) += exposed;
        m_account.end(Device::Comm);
      }
      set_active(s, true);
      if (tracing) m_trace->span(s.track, task.name, start, sc_core::sc_time_stamp());
      return true;
    }
  }
  return false;
}

bool TaskScheduler::unobserved(const Stream& s) const {
  if (!m_task_runs || !m_cores.idle()) return false;
  for (const auto& [id, other] : m_streams)
    if (other.get() != &s && other->ai_work) return false;
  return true;
}

void TaskScheduler::run_ops(Stream& s, const Work& first) {
  // The op-by-op launches queued behind `first`, up to the step's last or the first that is not
  // an AI core task.
  std::vector<Planned>& items = s.items;
  items.clear();
  for (Work w = first;; w = s.queue.front(), s.queue.pop_front()) {
    Planned p;
    p.task = w.task;
    p.arrival = w.arrival;
    p.ends_step = w.ends_step;
    items.push_back(p);
    const bool more = !w.ends_step && !s.queue.empty() && s.queue.front().task &&
                      s.queue.front().task->kind == TaskKind::AiCore;
    if (!more) break;
  }
  const bool ends_step = items.back().ends_step;
  const std::size_t n = items.size();
  Window all;
  run_planned(s, items, all, true);
  if (ends_step) step_done();
  m_completed += n;
  if (m_completed == m_submitted) m_drained.notify(sc_core::SC_ZERO_TIME);
}

sc_time TaskScheduler::planned_end(const std::vector<Planned>& items, const Window& w) {
  if (!w.run) return items.back().end;
  const std::size_t after = w.first + items.size();
  return tail_start(items, w) + (w.run->total - w.run->offset[after]);
}

sc_time TaskScheduler::dispatch_at(const std::vector<Planned>& items, const Window& w, std::size_t k) {
  if (k < items.size()) return items[k].ds;
  const std::size_t after = w.first + items.size();
  return tail_start(items, w) + (w.run->offset[w.first + k] - w.run->offset[after]);
}

sc_time TaskScheduler::plan_items(std::vector<Planned>& items, const Window& w, std::size_t i, sc_time prev_end,
                                  bool running, bool* changed) {
  aicore::Hbm* hbm = m_cores.hbm();
  std::size_t planned = items.size();  // items [i, planned) planned now; the rest stand as they were
  for (std::size_t j = i; j < items.size(); ++j) {
    Planned& p = items[j];
    const sc_time old_ds = p.ds, old_end = p.end;
    if (!(j == i && running)) {
      p.ds = std::max(prev_end, p.arrival);
      p.ks = p.ds + m_dispatch;
      p.from = p.ks;
      p.left = p.task->time;
      p.lost_before = {};
    }
    sc_time left = p.left;
    p.lost_planned = {};
    p.end = hbm && hbm->affects(p.from)
                ? hbm->kernel_end(p.from, left, p.task->time, p.task->cost.gm_bytes, sc_core::SC_ZERO_TIME,
                                  &p.lost_planned)
                : p.from + left;
    if (p.task->part == StepPart::Forward && !m_step_started) {
      m_marks.fp_start = p.ds;
      m_step_started = true;
      m_fp_item = j;
    }
    if (changed) {
      if (p.end != old_end || p.ds != old_ds) {
        *changed = true;
      } else if (j > i && hbm && p.end >= hbm->flows_end()) {
        planned = j + 1;  // past every flow and on its old schedule: so is the rest
        break;
      }
    }
    prev_end = p.end;
    // The run's next task joins the window if a flow can reach it (it is dispatched at prev_end).
    const std::size_t next = w.first + j + 1;
    if (j + 1 == items.size() && w.run && next < w.run->size() && hbm && hbm->affects(prev_end + m_dispatch)) {
      Planned q;
      q.task = (*w.tasks)[w.run->begin + next];
      items.push_back(q);  // `p` is not used past here
    }
  }
  for (std::size_t j = planned; j < items.size() && !m_step_started; ++j)  // it may stand among the rest
    if (items[j].task->part == StepPart::Forward) {
      m_marks.fp_start = items[j].ds;
      m_step_started = true;
      m_fp_item = j;
    }
  if (w.run && !m_step_started && w.run->first_forward != SIZE_MAX &&
      w.run->first_forward >= w.first + items.size()) {  // the step's first forward task follows the window
    m_fp_item = w.run->first_forward - w.first;
    m_marks.fp_start = dispatch_at(items, w, m_fp_item);
    m_step_started = true;
  }
  return planned_end(items, w);
}

void TaskScheduler::run_planned(Stream& s, std::vector<Planned>& items, Window& w, bool announce, bool resume,
                                sc_time begin) {
  aicore::Hbm* hbm = m_cores.hbm();
  const bool shared = hbm && hbm->contention();
  const bool tracing = m_trace && m_trace->active();
  auto announce_from = [&](std::size_t i, bool begun) {
    if (!announce) return;
    if (!begun) m_account.begin_at(Device::Busy, items[i].ds);  // the device was idle
    for (std::size_t j = i; j < items.size(); ++j) {
      const bool idle_next = j + 1 == items.size() || items[j + 1].ds > items[j].end;
      if (idle_next) m_account.end_at(Device::Busy, items[j].end);
      if (idle_next && j + 1 < items.size()) m_account.begin_at(Device::Busy, items[j + 1].ds);
    }
  };
  sc_time end;
  if (resume) {
    end = planned_end(items, w);
  } else {
    m_fp_item = SIZE_MAX;
    begin = sc_core::sc_time_stamp();
    w.prev_end = begin;
    end = plan_items(items, w, 0, begin, false);
    announce_from(0, false);
  }
  for (std::size_t i = 0;;) {
    if (!shared) {
      wait(end - begin);
      break;
    }
    if (!resume) {
      hbm->hold(begin);  // a re-plan asks about the kernel under way since then
      wait(end - begin, hbm->arrived());
    }
    resume = false;
    const sc_time now = sc_core::sc_time_stamp();
    if (now >= end) break;
    // Another consumer arrived: the items done so far stand; the rest are planned again from now.
    while (i < items.size() && items[i].end <= now) ++i;
    if (i == items.size()) {
      // A task after the window is under way: the window and the tasks that ended alone since are
      // counted, and the window starts again at that task.
      const sc_time at = tail_start(items, w);
      const std::size_t after = w.first + items.size();
      const std::size_t fp = m_fp_item == SIZE_MAX ? SIZE_MAX : w.first + m_fp_item;
      count_planned(s, items, w, items.size(), tracing);
      restart_window(s, items, w, after, at, fp, tracing);
      i = 0;
    }
    const bool running = now >= items[i].ks;
    if (running) {
      Planned& p = items[i];
      hbm->kernel_end(p.from, p.left, p.task->time, p.task->cost.gm_bytes, now, &p.lost_before);
      p.from = now;
    }
    if (m_fp_item != SIZE_MAX && m_fp_item >= i && dispatch_at(items, w, m_fp_item) > now) {
      m_step_started = false;  // its first forward task has not begun: planned again
      m_fp_item = SIZE_MAX;
    }
    bool changed = false;
    end = plan_items(items, w, i, i > 0 ? items[i - 1].end : w.prev_end, running, &changed);
    if (announce && changed) {
      m_account.retract(Device::Busy);
      announce_from(i, items[i].ds <= now);
    }
    begin = now;
  }
  if (shared) hbm->release();
  const sc_time at = tail_start(items, w);
  const std::size_t after = w.first + items.size();
  count_planned(s, items, w, items.size(), tracing);
  if (w.run) count_alone(s, *w.run, *w.tasks, after, w.run->size(), at, tracing);
  if (hbm && tracing) hbm->trace_progress();
}

void TaskScheduler::restart_window(Stream& s, std::vector<Planned>& items, Window& w, std::size_t after,
                                   const sc_time& at, std::size_t fp, bool tracing) {
  const sc_time now = sc_core::sc_time_stamp();
  const Run& run = *w.run;
  const auto& offset = run.offset;
  // The task under way: the first whose alone end, offset[k + 1] from `at`'s task, is past now.
  const auto first_end = offset.begin() + static_cast<std::ptrdiff_t>(after) + 1;
  const std::size_t k =
      static_cast<std::size_t>(std::upper_bound(first_end, offset.end(), offset[after] + (now - at)) - first_end) +
      after;
  count_alone(s, run, *w.tasks, after, k, at, tracing);
  Planned q;
  q.task = (*w.tasks)[run.begin + k];
  q.ds = at + (offset[k] - offset[after]);
  q.ks = q.from = q.ds + m_dispatch;
  q.left = q.task->time;
  q.end = q.ks + q.left;
  items.assign(1, q);
  w.first = k;
  w.prev_end = q.ds;
  m_fp_item = fp != SIZE_MAX && fp >= k ? fp - k : SIZE_MAX;
}

void TaskScheduler::count_planned(Stream& s, std::vector<Planned>& items, Window& w, std::size_t n, bool tracing) {
  aicore::Hbm* hbm = m_cores.hbm();
  for (std::size_t j = 0; j < n; ++j) {
    const Planned& p = items[j];
    const Task& t = *p.task;
    const sc_time time = p.end - p.ks;
    const bool alone = time == t.time;
    count_ai_task(s, t, p.ds, time, tracing);
    aicore::HbmLost by = p.lost_before;
    for (std::size_t k = 0; k < by.size(); ++k) by[k] += p.lost_planned[k];
    if (hbm) hbm->account_kernel(p.ks, p.end, t.cost.gm_bytes, alone ? sc_core::SC_ZERO_TIME : time - t.time, &by);
    if (!alone) {
      s.hbm_lost += time - t.time;
      m_hbm_lost_s += (time - t.time).to_seconds();
    }
    if (t.part == StepPart::Backward) {
      m_marks.bp_end = p.end;
      m_step_backward = true;
    } else if (t.part == StepPart::Forward) {
      m_fp_end = p.end;
    }
  }
  if (n == 0) return;
  w.prev_end = items[n - 1].end;
  w.first += n;
  items.erase(items.begin(), items.begin() + static_cast<std::ptrdiff_t>(n));
}

void TaskScheduler::count_alone(const Stream& s, const Run& run, const std::vector<const Task*>& tasks, std::size_t a,
                                std::size_t b, const sc_time& at, bool tracing) {
  if (a >= b) return;
  aicore::Hbm* hbm = m_cores.hbm();
  const auto& offset = run.offset;
  const sc_time span = offset[b] - offset[a];
  if (tracing || m_cores.busy_until() > at + m_dispatch) {  // task by task
    for (std::size_t j = a; j < b; ++j) {
      const Task& t = *tasks[run.begin + j];
      const sc_time ds = at + (offset[j] - offset[a]);
      count_ai_task(s, t, ds, t.time, tracing);
      if (hbm) hbm->account_kernel(ds + m_dispatch, ds + m_dispatch + t.time, t.cost.gm_bytes, {});
    }
  } else {
    const RunSums &to = run.sums[b], &from = run.sums[a];
    m_tasks += static_cast<double>(b - a);
    m_cores.account_free_runs(static_cast<std::int64_t>(b - a), at + m_dispatch, at + span, to.time - from.time,
                              to.core_time - from.core_time, to.macs - from.macs, to.gm_bytes - from.gm_bytes);
    add_busy(span);
    if (hbm) hbm->account_kernels(to.gm_bytes - from.gm_bytes);
  }
  if (run.last_backward != SIZE_MAX && run.last_backward >= a && run.last_backward < b) {
    m_marks.bp_end = at + (offset[run.last_backward + 1] - offset[a]);
    m_step_backward = true;
  }
  if (run.last_forward != SIZE_MAX && run.last_forward >= a && run.last_forward < b)
    m_fp_end = at + (offset[run.last_forward + 1] - offset[a]);
}

sc_time TaskScheduler::count_ai_task(const Stream& s, const Task& t, const sc_time& start, const sc_time& time,
                                     bool tracing) {
  const sc_time end = start + m_dispatch + time;
  ++m_tasks;
  m_cores.account_free_run(t.cost, start + m_dispatch, time);
  add_busy(m_dispatch + time);
  if (tracing) trace_ai_task(s, t, start, end);
  return end;
}

bool TaskScheduler::execute_run(Stream& s, const GraphPlan& plan, const Run& run,
                                const std::vector<const Task*>& tasks) {
  // One stream, or the only one with AI core work; every core free; runs not switched off.
  if (!m_task_runs || !m_cores.idle() || !(plan.one_compute_stream || m_streams.size() == 1)) return false;
  aicore::Hbm* hbm = m_cores.hbm();
  const sc_time start = sc_core::sc_time_stamp();
  std::vector<Planned>& items = s.items;
  Window w;
  w.run = &run;
  w.tasks = &tasks;
  auto tracing = [&] { return m_trace && m_trace->active(); };  // asked when counting: a step may end meanwhile
  if (hbm && hbm->affects(start)) {  // flows under way or announced: planned among them
    Planned p;
    p.task = tasks[run.begin];
    items.assign(1, p);
    run_planned(s, items, w, false);
    return true;
  }
  // Alone on the HBM: the run takes its tasks' times, unless a flow arrives while it runs.
  m_fp_item = SIZE_MAX;
  if (run.first_forward != SIZE_MAX && !m_step_started) {
    m_marks.fp_start = start + run.offset[run.first_forward];
    m_step_started = true;
    m_fp_item = run.first_forward;
  }
  if (hbm && hbm->contention()) {
    wait(run.total, hbm->arrived());
    const sc_time now = sc_core::sc_time_stamp();
    if (now - start < run.total) {
      // A flow arrived: the tasks that ended before stand; the rest of the run is planned among
      // the flows, from the one under way.
      items.clear();
      restart_window(s, items, w, 0, start, m_fp_item, tracing());
      run_planned(s, items, w, false, true, start);
      return true;
    }
  } else {
    wait(run.total);
  }
  const bool traced = tracing();
  count_alone(s, run, tasks, 0, run.size(), start, traced);
  if (hbm && traced) hbm->trace_progress();
  return true;
}

double TaskScheduler::hbm_lost_s(bool stream0) const {
  sc_time t;
  for (const auto& [id, st] : m_streams)
    if ((id == 0) == stream0) t += st->hbm_lost;
  return t.to_seconds();
}

bool TaskScheduler::execute_tasks(Stream& s, const GraphPlan& plan, const std::vector<const Task*>& tasks,
                                  const std::vector<Run>& runs) {
  auto run = runs.begin();
  for (std::size_t i = 0; i < tasks.size();) {
    if (run != runs.end() && run->begin == i) {
      const Run& r = *run++;
      if (execute_run(s, plan, r, tasks)) {
        i = r.end;
        continue;
      }
    }
    if (!execute(s, *tasks[i])) return false;
    ++i;
  }
  return true;
}

bool TaskScheduler::run_iteration(Stream& s, const Work& w) {
  const GraphPlan& p = *w.plan;
  if (p.single_stream) return p.per_stream.empty() || execute_tasks(s, p, p.per_stream[0], p.runs[0]);
  std::size_t own = SIZE_MAX;
  for (std::size_t i = 0; i < p.streams.size(); ++i) {
    if (p.streams[i] == s.id) {
      own = i;
      continue;
    }
    Work slice;
    slice.plan = &p;
    slice.slice = &p.per_stream[i];
    slice.slice_runs = &p.runs[i];
    ++m_slices_pending;
    push(p.streams[i], slice);
  }
  if (own != SIZE_MAX && !execute_tasks(s, p, p.per_stream[own], p.runs[own])) return false;
  if (m_slices_pending > 0) {
    set_active(s, false);
    while (m_slices_pending > 0 && m_failure.empty()) wait(m_slice_done);
    set_active(s, true);
  }
  return m_failure.empty();
}

bool TaskScheduler::run_submission(Stream& s, const Work& w) {
  if (w.task) {
    if (!execute(s, *w.task)) return false;
    if (w.ends_step) step_done();
    return true;
  }
  ++m_graph_runs;
  for (std::int64_t it = 0; it < w.iterations; ++it) {
    if (!run_iteration(s, w)) return false;
    if (w.loop_control) {
      aicpu_kernel(s, m_assign_add_t, m_assign_add, "AssignAdd (loop counter)");
      aicpu_kernel(s, m_stream_switch_t, m_stream_switch, "StreamSwitch");
      if (it + 1 < w.iterations) aicpu_kernel(s, m_stream_active_t, m_stream_active, "StreamActive");
    }
    step_done();
  }
  aicpu_kernel(s, m_end_graph_t, m_end_graph, "EndGraph");
  return true;
}

void TaskScheduler::stream_thread(std::int32_t id) {
  Stream& s = *m_streams.at(id);
  for (;;) {
    while (s.queue.empty()) wait(s.arrived);
    const Work w = s.queue.front();
    s.queue.pop_front();
    if (!m_failure.empty()) break;
    if (w.slice) {
      set_active(s, true);
      const bool ok = execute_tasks(s, *w.plan, *w.slice, *w.slice_runs);
      set_active(s, false);
      --m_slices_pending;
      m_slice_done.notify(sc_core::SC_ZERO_TIME);
      if (!ok) break;
      continue;
    }
    if (w.task && w.task->kind == TaskKind::AiCore && unobserved(s)) {
      run_ops(s, w);
      continue;
    }
    const sc_time now = sc_core::sc_time_stamp();
    if (w.arrival > now) wait(w.arrival - now);
    set_active(s, true);
    const bool ok = run_submission(s, w);
    set_active(s, false);
    if (!ok) break;
    if (++m_completed == m_submitted) m_drained.notify(sc_core::SC_ZERO_TIME);
  }
  set_active(s, false);
  if (!m_failure.empty()) {
    m_slice_done.notify(sc_core::SC_ZERO_TIME);  // a launch stream waiting for this slice gives up
    host->device_failed(m_failure);
  }
}

}  // namespace ascendsim::aicpu
