// The host's training thread under one of the four execution strategies (docs/design.md), plus the
// dataset channel thread of the sink modes. Host actions cost configured durations; device work
// runs concurrently on the device modules, so overlap comes out of the simulation.
//
//   non-sink   per step: wait for a batch, synchronous H2D memcpy of each input tensor, K op
//              launches, sync, D2H of the loss, framework step overhead.
//   data-sink  once: create the dataset channel; the channel thread pushes batches into the
//              device queue as the pipeline yields them. Per step: K+1 op launches (GetNext
//              first), sync, D2H of the loss, step overhead.
//   graph-sink once: channel + graph load (descriptors over PCIe). Per step: one graph launch.
//   loop-sink  once: channel + graph load. Per sink of S steps: one graph launch; the device
//              loops S times under AICPU loop control; one sync and loss copy per sink.
#pragma once

#include <memory>
#include <unordered_map>
#include <vector>

#include <systemc>

#include "hostif/host_interface.h"
#include "hostif/values_if.h"
#include "runtime/data_pipeline.h"
#include "runtime/graph_compiler.h"
#include "runtime/host_config.h"
#include "runtime/run_result.h"
#include "runtime/session.h"
#include "sim/core/breakdown.h"
#include "sim/core/trace.h"

namespace ascendsim::runtime {

class Executor : public sc_core::sc_module {
 public:
  SC_HAS_PROCESS(Executor);
  Executor(sc_core::sc_module_name name, const HostConfig& host, const Session& session, const CompiledGraph& graph,
           std::int64_t batch_size, hostif::HostInterface& device, DataPipeline& pipeline,
           sim::BreakdownAccountant& account);

  /// The run's result; call once the simulation has ended (it closes the time accounting).
  /// Statistics of other modules are not included (the caller adds them).
  RunResult result();
  bool finished() const { return m_finished; }
  std::int64_t steps_done() const { return m_steps_done; }
  /// Keep every step's values in the result, not only their summary.
  void keep_each_step(bool keep) { m_record.keep_each = keep; }
  /// Keep the values of the steps in [first, last) (0-based).
  void keep_steps(std::int64_t first, std::int64_t last) {
    m_record.window_first = first;
    m_record.window_last = last;
  }
  /// Records host actions on the recorder's tracks while it is active; nullptr disables.
  void set_trace(sim::TraceRecorder* trace);
  /// Functional mode: the values the host moves and reads (nullptr: timing only).
  void set_values(hostif::ValuesIf* values) { m_values = values; }
  /// Evaluation during training (Session::eval_every): the forward-only graph (its GetNext reads
  /// the evaluation channel) and the evaluation pipeline, which reads a pass's batches only once
  /// the pass has begun (DataPipeline::open). Set before the simulation starts.
  /// `outputs_bytes`: what the host reads back after each evaluation step (outputs and loss).
  void set_evaluation(const CompiledGraph* graph, DataPipeline* pipeline, std::int64_t outputs_bytes) {
    m_eval_graph = graph;
    m_eval_pipeline = pipeline;
    m_eval_outputs_bytes = outputs_bytes;
  }
  /// Checkpoints (Session::checkpoint_every): `bytes` of weights and optimizer state copied from
  /// this rank's device, serialised and written to the server's storage, which `writers` ranks of
  /// the server write to at once. Set before the simulation starts.
  void set_checkpoint(std::int64_t bytes, std::int64_t writers) {
    m_checkpoints.bytes = bytes;
    m_checkpoints.largest_bytes = bytes;
    m_checkpoints.writers = writers;
  }

 protected:
  virtual void train() = 0;

  // Host actions, each charging its phase and counting its interactions.
  void next_batch_from_pipeline();
  void memcpy_inputs_h2d();
  void launch_ops(const hostif::TaskList& tasks);
  void launch_graph(std::int64_t iterations, bool loop_control);
  void create_channel();
  void load_graph();
  /// With a cold kernel cache: compiles the training graph's distinct kernels (set-up).
  void compile_kernels();
  /// The end of training epoch `epoch` (1-based; a sink under loop sink): evaluates if due.
  void epoch_end(std::int64_t epoch);
  /// After a step's (or a sink's) return to the host: saves a checkpoint if due, as
  /// ModelCheckpoint's step_end does.
  void checkpoint_if_due();
  /// The cluster's one-time collectives before training (the parameters' broadcast), if any.
  void broadcast_parameters();
  void synchronize();
  void return_loss();
  void step_overhead();
  /// The end of every launch: sync, copy the loss back, run the framework's step work.
  void return_to_host();

  const HostConfig& m_host;
  const Session& m_session;
  const CompiledGraph& m_graph;
  hostif::HostInterface& m_device;  ///< the one door to the device

 private:
  void main_thread();
  void channel_thread();
  void eval_channel_thread();
  void finish();
  /// One evaluation pass, the strategy's way: per step a batch, a launch, a sync and the outputs'
  /// copy back (MindSpore evaluates one step per launch, even in sink mode).
  void evaluate(std::int64_t epoch);
  /// The training step that ended before a pass or a save keeps its end; the next starts after it.
  void close_pending_step();
  /// One checkpoint: the copy to the host, then (synchronous) its serialisation and write, or
  /// (async_save) those on a thread of their own, after the previous save's.
  void save_checkpoint();
  /// async_save: waits for the save in progress on the host's save thread, if any.
  void wait_for_saving();
  /// Charges the host's time to `p` (to eval while evaluating).
  void phase(sim::Phase p);
  /// The interactions being counted: training's, or the evaluation's while evaluating.
  Interactions& io() { return m_in_eval ? m_eval_io : m_io; }
  void copy_h2d(const std::vector<std::int64_t>& input_bytes);
  void submit_graph(const hostif::TaskList& graph, std::int64_t iterations, bool loop_control);
  void load(const hostif::TaskList& graph);
  /// With a cold kernel cache: compiles `kernels` distinct kernels on the host (set-up), counted
  /// in `counted`.
  void compile_kernels(std::int64_t kernels, Interactions& counted);

  std::int64_t m_batch_size;
  DataPipeline& m_pipeline;
  sim::BreakdownAccountant& m_account;
  sc_core::sc_event m_channel_start;
  bool m_finished = false;
  sc_core::sc_time m_end;
  void record_step(const sc_core::sc_time& end);
  std::int64_t m_steps_done = 0;
  hostif::StepMarks m_pending;  ///< the last step that ended, not yet recorded
  bool m_pending_recorded = false;
  sc_core::sc_time m_prev_end;
  bool m_last_recorded = false;
  StepRecord m_record;
  sim::TraceRecorder* m_trace = nullptr;
  std::unordered_map<const hostif::Task*, int> m_launch_labels;  ///< per task: its launch span's trace label
  int m_host_track = 0, m_channel_track = 0;
  class Span;
  Interactions m_io;
  std::int64_t m_losses = 0;
  hostif::ValuesIf* m_values = nullptr;
  std::vector<LossRecord> m_loss_values;
  std::int64_t m_loop_iterations = 0;
  const CompiledGraph* m_eval_graph = nullptr;
  DataPipeline* m_eval_pipeline = nullptr;
  std::int64_t m_eval_outputs_bytes = 0;
  bool m_in_eval = false;
  bool m_eval_loaded = false;  ///< the evaluation channel exists and its graph is loaded
  bool m_eval_compiled = false;
  CheckpointRecord m_checkpoints;
  std::int64_t m_saved_at_step = 0;  ///< the steps done at the last save
  sc_core::sc_time m_saving_until;   ///< async_save: when the save thread's current save ends
  double m_compile_s = 0;
  sc_core::sc_event m_eval_channel_start;
  Interactions m_eval_io;
  std::vector<EvalPass> m_eval_passes;
};

std::unique_ptr<Executor> make_executor(sc_core::sc_module_name name, const HostConfig& host, const Session& session,
                                        const CompiledGraph& graph, std::int64_t batch_size,
                                        hostif::HostInterface& device, DataPipeline& pipeline,
                                        sim::BreakdownAccountant& account);

}  // namespace ascendsim::runtime
