#include "runtime/executor.h"

#include "sim/core/time.h"

namespace ascendsim::runtime {

using sim::Phase;

Executor::Executor(sc_core::sc_module_name name, const HostConfig& host, const Session& session,
                   const CompiledGraph& graph, std::int64_t batch_size, hostif::HostInterface& device,
                   DataPipeline& pipeline, sim::BreakdownAccountant& account)
    : sc_module(name),
      m_host(host),
      m_session(session),
      m_graph(graph),
      m_device(device),
      m_batch_size(batch_size),
      m_pipeline(pipeline),
      m_account(account) {
  m_record.steady_from = StepRecord::steady_start(session.steps(), session.steps_per_epoch);
  m_record.steady_until = StepRecord::steady_end(session.steps());
  m_device.on_step_end([this](const hostif::StepMarks& marks) {
    if (m_in_eval) return;  // an evaluation step: the pass is timed as a whole
    // A step's values are known when the next one ends (the last one's when the run ends, or an
    // evaluation pass begins).
    if (m_steps_done > 0 && !m_pending_recorded) record_step(m_pending.end);
    m_pending = marks;
    m_pending_recorded = false;
    ++m_steps_done;
    if (m_trace) m_trace->on_step(m_steps_done);
  });
  m_device.on_failure([this](const std::string&) { finish(); });
  SC_THREAD(main_thread);
  if (uses_queue(session.strategy)) {
    SC_THREAD(channel_thread);
    SC_THREAD(eval_channel_thread);
  }
}

void Executor::phase(Phase p) { m_account.set_host(m_in_eval ? Phase::Eval : p); }

void Executor::set_trace(sim::TraceRecorder* trace) {
  m_trace = trace;
  if (!trace) return;
  m_host_track = trace->track("host training thread");
  if (uses_queue(m_session.strategy)) m_channel_track = trace->track("host channel thread");
}

/// Records a host action as a span on a track when it ends (if tracing is on and active).
class Executor::Span {
 public:
  Span(Executor& e, int track, const char* name)
      : m_e(e), m_track(track), m_name(name), m_start(sc_core::sc_time_stamp()) {}
  ~Span() {  // nothing is built unless the span is recorded
    if (m_e.m_trace && m_e.m_trace->active()) m_e.m_trace->span(m_track, m_name, m_start, sc_core::sc_time_stamp());
  }
  Span(const Span&) = delete;
  Span& operator=(const Span&) = delete;

 private:
  Executor& m_e;
  int m_track;
  const char* m_name;
  sc_core::sc_time m_start;
};

void Executor::main_thread() {
  broadcast_parameters();
  train();
  if (m_session.checkpoint_every > 0 && !m_finished) {
    // ModelCheckpoint's end(): the last steps saved too, unless just saved; the run ends once the
    // last file is written.
    if (m_steps_done > m_saved_at_step) save_checkpoint();
    wait_for_saving();
  }
  finish();
}

void Executor::finish() {
  if (m_finished) return;
  m_finished = true;
  m_end = sc_core::sc_time_stamp();
  m_account.close(m_end);
}

void Executor::channel_thread() {
  wait(m_channel_start);
  auto& hostif = m_device;
  for (std::int64_t i = 0; i < m_session.steps() && !m_finished; ++i) {  // a failed run stops feeding
    {
      Span s(*this, m_channel_track, "wait for batch");
      m_pipeline.next();
    }
    {
      Span s(*this, m_channel_track, "wait for queue slot");
      hostif.queue.reserve();
    }
    Span s(*this, m_channel_track, "send batch");
    const sc_core::sc_time send_start = sc_core::sc_time_stamp();
    m_pipeline.send_work(static_cast<double>(m_graph.batch_bytes));
    for (auto bytes : m_graph.input_bytes) {
      hostif.h2d.transfer(static_cast<std::uint64_t>(bytes));
      ++m_io.h2d_copies;
      m_io.h2d_bytes += bytes;
    }
    hostif.queue.commit(static_cast<std::uint64_t>(m_graph.batch_bytes));
    m_pipeline.note_send((sc_core::sc_time_stamp() - send_start).to_seconds());
    if (m_values) m_values->send_batch_to_queue();
  }
}

void Executor::eval_channel_thread() {
  // The evaluation dataset's channel, created at the first evaluation; it feeds each pass's
  // batches as the evaluation pipeline yields them (the pipeline starts a pass only when the
  // pass begins).
  wait(m_eval_channel_start);
  auto& hostif = m_device;
  const std::int64_t batches = m_session.eval_passes() * m_session.eval_steps;
  for (std::int64_t i = 0; i < batches && !m_finished; ++i) {
    {
      Span s(*this, m_channel_track, "wait for evaluation batch");
      m_eval_pipeline->next();
    }
    {
      Span s(*this, m_channel_track, "wait for evaluation queue slot");
      hostif.eval_queue.reserve();
    }
    Span s(*this, m_channel_track, "send evaluation batch");
    m_eval_pipeline->send_work(static_cast<double>(m_eval_graph->batch_bytes));
    for (auto bytes : m_eval_graph->input_bytes) {
      hostif.h2d.transfer(static_cast<std::uint64_t>(bytes));
      ++m_eval_io.h2d_copies;
      m_eval_io.h2d_bytes += bytes;
    }
    hostif.eval_queue.commit(static_cast<std::uint64_t>(m_eval_graph->batch_bytes));
  }
}

void Executor::next_batch_from_pipeline() {
  phase(Phase::HostData);
  Span s(*this, m_host_track, "wait for batch");
  m_pipeline.next();
  m_account.filled();
}

void Executor::memcpy_inputs_h2d() {
  copy_h2d(m_graph.input_bytes);
  if (m_values) m_values->copy_batch_to_device();
}

void Executor::copy_h2d(const std::vector<std::int64_t>& input_bytes) {
  phase(Phase::H2D);
  for (auto bytes : input_bytes) {
    Span s(*this, m_host_track, "memcpy H2D");
    wait(sim::us(m_host.memcpy_setup_us));
    m_device.h2d.transfer(static_cast<std::uint64_t>(bytes));
    ++io().h2d_copies;
    io().h2d_bytes += bytes;
  }
}

void Executor::launch_ops(const hostif::TaskList& tasks) {
  // The host launches the ops back to back, each ready after its launch cost; the device sees
  // each at its own time, so one wait covers the whole sequence.
  phase(Phase::Launch);
  // A Python framework's eager launch adds its own work per op and per tensor argument, on the
  // host's cores.
  const double python = m_host.framework_op_us / m_host.core_speed;
  const double per_arg = m_host.framework_arg_us / m_host.core_speed;
  const sc_core::sc_time op = sim::us(m_host.op_launch_us + python),
                         collective = sim::us(m_host.collective_launch_us + python);
  const bool tracing = m_trace && m_trace->active();
  sc_core::sc_time issued = sc_core::sc_time_stamp();
  for (std::size_t i = 0; i < tasks.size(); ++i) {
    const sc_core::sc_time cost =
        tasks[i].kind == hostif::TaskKind::Comm ? collective
        : per_arg > 0 ? sim::us(m_host.op_launch_us + python + per_arg * static_cast<double>(tasks[i].tensor_args))
                      : op;
    issued += cost;
    m_device.submit_task(tasks[i], issued, i + 1 == tasks.size());
    ++io().op_launches;
    if (tracing) {
      auto [it, added] = m_launch_labels.try_emplace(&tasks[i], 0);
      if (added) it->second = m_trace->label("launch op " + tasks[i].name);
      m_trace->span(m_host_track, it->second, issued - cost, issued);
    }
  }
  wait(issued - sc_core::sc_time_stamp());
}

void Executor::launch_graph(std::int64_t iterations, bool loop_control) {
  submit_graph(m_graph.sink_tasks, iterations, loop_control);
}

void Executor::submit_graph(const hostif::TaskList& graph, std::int64_t iterations, bool loop_control) {
  phase(Phase::Launch);
  Span s(*this, m_host_track, "launch graph");
  wait(sim::us(m_host.graph_launch_us));
  m_device.submit_graph(graph, iterations, loop_control);
  ++io().graph_launches;
  if (loop_control) m_loop_iterations += iterations;
}

void Executor::create_channel() {
  phase(Phase::Setup);
  Span s(*this, m_host_track, "create dataset channel");
  wait(sim::us(m_host.queue_create_us));
  m_channel_start.notify(sc_core::SC_ZERO_TIME);
}

void Executor::load_graph() { load(m_graph.sink_tasks); }

void Executor::compile_kernels() {
  if (m_host.kernel_cache == "cold") compile_kernels(kernels_to_compile(m_graph), m_io);
}

void Executor::compile_kernels(std::int64_t kernels, Interactions& counted) {
  if (m_host.kernel_cache != "cold" || kernels <= 0) return;
  // Before the graph loads, while the data channel (created first) starts filling, as
  // MindSpore's sink modes compile the network after launching the dataset's graph.
  phase(Phase::Setup);
  Span s(*this, m_host_track, "compile kernels");
  const sc_core::sc_time start = sc_core::sc_time_stamp();
  wait(sim::seconds(m_host.kernel_compile_s * static_cast<double>(kernels)));
  m_compile_s += (sc_core::sc_time_stamp() - start).to_seconds();
  counted.kernels_compiled += kernels;
  // No step's time: like an evaluation pass, the next step starts after it.
  if (!m_in_eval) m_prev_end = sc_core::sc_time_stamp();
}

void Executor::load(const hostif::TaskList& graph) {
  phase(Phase::Setup);
  Span s(*this, m_host_track, "load graph");
  wait(sim::us(m_host.graph_load_us));
  const std::int64_t bytes = m_device.graph_image_bytes(graph);
  m_device.h2d.transfer(static_cast<std::uint64_t>(bytes));
  ++io().h2d_copies;
  io().h2d_bytes += bytes;
}

void Executor::broadcast_parameters() {
  if (m_graph.setup_tasks.empty()) return;
  phase(Phase::Setup);
  Span s(*this, m_host_track, "broadcast parameters");
  const sc_core::sc_time now = sc_core::sc_time_stamp();
  for (const auto& t : m_graph.setup_tasks) m_device.submit_task(t, now, false);
  m_device.wait_all_completed();
}

void Executor::synchronize() {
  phase(Phase::Sync);
  Span s(*this, m_host_track, "sync");
  if (m_device.busy()) {
    m_device.wait_all_completed();
    wait(sim::us(m_host.sync_wakeup_us));
  }
  if (m_host.framework_sync_us > 0) wait(sim::us(m_host.framework_sync_us / m_host.core_speed));
  ++io().host_syncs;
}

void Executor::return_loss() {
  phase(Phase::D2H);
  Span s(*this, m_host_track, "memcpy D2H (loss)");
  const std::int64_t bytes = m_session.result_bytes;
  wait(sim::us(m_host.memcpy_setup_us));
  m_device.d2h.transfer(static_cast<std::uint64_t>(bytes));
  ++m_io.d2h_copies;
  m_io.d2h_bytes += bytes;
  ++m_losses;
  if (m_values) {
    // MindSpore's LossMonitor: per step, its epoch and step in the epoch; per sink under loop
    // sink, the sink's number and size (the last step's loss).
    LossRecord l;
    l.loss = m_values->read_loss();
    if (m_session.strategy == Strategy::LoopSink) {
      l.epoch = m_losses;
      l.step = m_session.effective_sink_size();
    } else {
      l.epoch = (m_steps_done - 1) / m_session.steps_per_epoch + 1;
      l.step = (m_steps_done - 1) % m_session.steps_per_epoch + 1;
    }
    m_loss_values.push_back(l);
  }
}

void Executor::epoch_end(std::int64_t epoch) {
  if (m_eval_graph && m_session.eval_every > 0 && epoch % m_session.eval_every == 0) evaluate(epoch);
}

void Executor::close_pending_step() {
  if (m_steps_done > 0 && !m_pending_recorded) {
    record_step(m_pending.end);
    m_pending_recorded = true;
  }
}

void Executor::checkpoint_if_due() {
  if (m_session.checkpoint_every > 0 && m_steps_done - m_saved_at_step >= m_session.checkpoint_every)
    save_checkpoint();
}

void Executor::wait_for_saving() {
  const sc_core::sc_time now = sc_core::sc_time_stamp();
  if (m_saving_until <= now) return;
  phase(Phase::Checkpoint);
  Span s(*this, m_host_track, "wait for the checkpoint's save");
  wait(m_saving_until - now);
  m_checkpoints.wait_s += (m_saving_until - now).to_seconds();
}

void Executor::save_checkpoint() {
  close_pending_step();
  wait_for_saving();
  const sc_core::sc_time start = sc_core::sc_time_stamp();
  phase(Phase::Checkpoint);
  Span whole(*this, m_host_track, "checkpoint");
  const std::int64_t bytes = m_checkpoints.bytes;
  const sc_core::sc_time copy_start = sc_core::sc_time_stamp();
  {
    Span s(*this, m_host_track, "memcpy D2H (checkpoint)");
    wait(sim::us(m_host.memcpy_setup_us));
    m_device.d2h.transfer(static_cast<std::uint64_t>(bytes));
    ++m_io.d2h_copies;
    m_io.d2h_bytes += bytes;
  }
  const sc_core::sc_time copied = sc_core::sc_time_stamp();
  // The host's serialisation on one core, then the file's write at this rank's share of the
  // server's storage: the server's ranks save at the same step, so they write together.
  const sc_core::sc_time serialise = sim::seconds(m_host.checkpoint_serialise_s(static_cast<double>(bytes)));
  const sc_core::sc_time write = sim::seconds(
      m_host.checkpoint_write_s(static_cast<double>(bytes), static_cast<double>(m_checkpoints.writers)));
  if (m_session.checkpoint_async) {
    m_saving_until = copied + serialise + write;
  } else {
    {
      Span s(*this, m_host_track, "serialise checkpoint");
      wait(serialise);
    }
    Span s(*this, m_host_track, "write checkpoint");
    wait(write);
  }
  ++m_checkpoints.saves;
  m_checkpoints.d2h_s += (copied - copy_start).to_seconds();
  m_checkpoints.serialise_s += serialise.to_seconds();
  m_checkpoints.write_s += write.to_seconds();
  m_checkpoints.wait_s += (sc_core::sc_time_stamp() - start).to_seconds();
  m_saved_at_step = m_steps_done;
  m_prev_end = sc_core::sc_time_stamp();
}

void Executor::evaluate(std::int64_t epoch) {
  // The training step before the pass ends where it ended; the next one starts after the pass.
  close_pending_step();
  if (!m_eval_compiled) {  // its kernels the training graph has not: once, as set-up
    m_eval_compiled = true;
    if (m_host.kernel_cache == "cold") compile_kernels(kernels_to_compile(*m_eval_graph, &m_graph), m_eval_io);
  }
  EvalPass pass;
  pass.after_epoch = epoch;
  const sc_core::sc_time start = sc_core::sc_time_stamp();
  pass.start_s = start.to_seconds();
  m_in_eval = true;
  phase(Phase::Eval);
  if (m_values) m_values->evaluating(true);
  Span whole(*this, m_host_track, "evaluation");
  m_eval_pipeline->open(m_session.eval_steps);
  const CompiledGraph& g = *m_eval_graph;
  if (uses_queue(m_session.strategy) && !m_eval_loaded) {
    {
      Span s(*this, m_host_track, "create evaluation channel");
      wait(sim::us(m_host.queue_create_us));
      m_eval_channel_start.notify(sc_core::SC_ZERO_TIME);
    }
    if (uses_graph(m_session.strategy)) load(g.sink_tasks);
    m_eval_loaded = true;
  }
  for (std::int64_t i = 0; i < m_session.eval_steps && !m_finished; ++i) {
    switch (m_session.strategy) {
      case Strategy::NonSink: {
        {
          Span s(*this, m_host_track, "wait for evaluation batch");
          m_eval_pipeline->next();
        }
        copy_h2d(g.input_bytes);
        launch_ops(g.step_tasks);
        break;
      }
      case Strategy::DataSink:
        launch_ops(g.sink_tasks);
        break;
      case Strategy::GraphSink:
      case Strategy::LoopSink:
        submit_graph(g.sink_tasks, 1, false);
        break;
    }
    synchronize();
    {
      phase(Phase::D2H);
      Span s(*this, m_host_track, "memcpy D2H (outputs)");
      wait(sim::us(m_host.memcpy_setup_us));
      m_device.d2h.transfer(static_cast<std::uint64_t>(m_eval_outputs_bytes));
      ++io().d2h_copies;
      io().d2h_bytes += m_eval_outputs_bytes;
    }
    step_overhead();  // the metrics' update per step
    ++pass.steps;
  }
  if (m_values) pass.accuracy = m_values->evaluating(false);
  m_in_eval = false;
  pass.time_s = (sc_core::sc_time_stamp() - start).to_seconds();
  m_eval_passes.push_back(pass);
  m_prev_end = sc_core::sc_time_stamp();
}

void Executor::step_overhead() {
  phase(Phase::HostLoop);
  Span s(*this, m_host_track, "step overhead");
  wait(sim::us(m_host.step_overhead_us));
}

void Executor::return_to_host() {
  synchronize();
  return_loss();
  step_overhead();
}

void Executor::record_step(const sc_core::sc_time& t) {
  // Iteration trajectory: host gap before the forward pass, forward+backward, the tail after
  // backward (optimizer, loop control and, for the last step, the final sync and copy).
  const hostif::StepMarks& m = m_pending;
  m_record.add((t - m_prev_end).to_seconds(), (m.fp_start - m_prev_end).to_seconds(),
               (m.bp_end - m.fp_start).to_seconds(), (t - m.bp_end).to_seconds(), m_session.steps_per_epoch);
  m_prev_end = t;
}

RunResult Executor::result() {
  RunResult r;
  r.session = m_session;
  r.batch_size = m_batch_size;
  r.steps_completed = m_steps_done;
  const sc_core::sc_time end = m_finished ? m_end : sc_core::sc_time_stamp();
  r.sim_time_s = end.to_seconds();
  // The last step runs to the end (or to the evaluation pass after it).
  if (!m_last_recorded && m_steps_done > 0 && !m_pending_recorded) record_step(end);
  m_last_recorded = true;
  r.steps = m_record;
  r.breakdown_s = m_account.close(end);
  r.first_fill_s = m_account.first_fill_s();
  r.compile_s = m_compile_s;
  r.interactions = m_io;
  r.losses_returned = m_losses;
  r.loss_values = m_loss_values;
  r.device_loop_iterations = m_loop_iterations;
  r.eval_passes = m_eval_passes;
  r.eval_interactions = m_eval_io;
  r.checkpoints = m_checkpoints;
  r.failure = m_device.failure();
  return r;
}

namespace {

class NonSinkExecutor final : public Executor {
 public:
  using Executor::Executor;

 protected:
  void train() override {
    compile_kernels();
    for (std::int64_t s = 0; s < m_session.steps(); ++s) {
      next_batch_from_pipeline();
      memcpy_inputs_h2d();
      launch_ops(m_graph.step_tasks);
      return_to_host();
      checkpoint_if_due();
      if ((s + 1) % m_session.steps_per_epoch == 0) epoch_end((s + 1) / m_session.steps_per_epoch);
    }
  }
};

class DataSinkExecutor final : public Executor {
 public:
  using Executor::Executor;

 protected:
  void train() override {
    create_channel();
    compile_kernels();
    for (std::int64_t s = 0; s < m_session.steps(); ++s) {
      launch_ops(m_graph.sink_tasks);
      return_to_host();
      checkpoint_if_due();
      if ((s + 1) % m_session.steps_per_epoch == 0) epoch_end((s + 1) / m_session.steps_per_epoch);
    }
  }
};

class GraphSinkExecutor final : public Executor {
 public:
  using Executor::Executor;

 protected:
  void train() override {
    create_channel();
    compile_kernels();
    load_graph();
    for (std::int64_t s = 0; s < m_session.steps(); ++s) {
      launch_graph(1, false);
      return_to_host();
      checkpoint_if_due();
      if ((s + 1) % m_session.steps_per_epoch == 0) epoch_end((s + 1) / m_session.steps_per_epoch);
    }
  }
};

class LoopSinkExecutor final : public Executor {
 public:
  using Executor::Executor;

 protected:
  void train() override {
    create_channel();
    compile_kernels();
    load_graph();
    for (std::int64_t e = 0; e < m_session.epochs; ++e) {
      launch_graph(m_session.effective_sink_size(), true);
      return_to_host();
      checkpoint_if_due();
      epoch_end(e + 1);
    }
  }
};

}  // namespace

std::unique_ptr<Executor> make_executor(sc_core::sc_module_name name, const HostConfig& host, const Session& session,
                                        const CompiledGraph& graph, std::int64_t batch_size,
                                        hostif::HostInterface& device, DataPipeline& pipeline,
                                        sim::BreakdownAccountant& account) {
  switch (session.strategy) {
    case Strategy::NonSink:
      return std::make_unique<NonSinkExecutor>(name, host, session, graph, batch_size, device, pipeline, account);
    case Strategy::DataSink:
      return std::make_unique<DataSinkExecutor>(name, host, session, graph, batch_size, device, pipeline, account);
    case Strategy::GraphSink:
      return std::make_unique<GraphSinkExecutor>(name, host, session, graph, batch_size, device, pipeline, account);
    case Strategy::LoopSink:
      return std::make_unique<LoopSinkExecutor>(name, host, session, graph, batch_size, device, pipeline, account);
  }
  throw std::logic_error("unknown strategy");
}

}  // namespace ascendsim::runtime
