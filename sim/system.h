// A simulated system for one training run: the host (data pipeline and the strategy's executor)
// and one chip behind its PCIe link. Several Systems can live in one simulation; they share
// nothing but the SystemC kernel, so each run's results are what it would be alone.
#pragma once

#include <memory>

#include <systemc>

#include "aicore/cost_model.h"
#include "runtime/data_pipeline.h"
#include "runtime/executor.h"
#include "runtime/functional.h"
#include "runtime/graph_compiler.h"
#include "runtime/run_result.h"
#include "runtime/session.h"
#include "sim/chip.h"
#include "sim/config.h"
#include "sim/core/trace.h"
#include "workloads/workload.h"

namespace ascendsim::sim {

/// A rank's place in its cluster: its index, the cluster's collectives and the host cores its
/// pipeline shares with the other ranks of its server.
struct RankPlace {
  int rank = 0;
  aicpu::CollectiveIf* collectives = nullptr;
  runtime::HostCores* host_cores = nullptr;
  hostif::DmaChannel* h2d_uplink = nullptr;  ///< its PCIe switch's uplink, shared with the switch's other devices
  hostif::DmaChannel* d2h_uplink = nullptr;
  /// Functional mode under semi-auto parallelism: the cluster's values, driven by this rank
  /// (rank 0) — nullptr on the other ranks.
  hostif::ValuesIf* values = nullptr;
  int host_slot = 0;  ///< its place among the ranks the host's cores serve (their requests' order)
};

class System : public sc_core::sc_module {
 public:
  /// Compiles the workload and checks it fits device memory (InputError otherwise). `compiled`:
  /// the graph compiled already (the ranks of a cluster share it).
  /// `functional`: compute the values too (functional mode; one device).
  System(sc_core::sc_module_name name, const SystemConfig& cfg, const workloads::Workload& workload,
         const runtime::Session& session, const RankPlace& place = {}, const runtime::CompiledGraph* compiled = nullptr,
         const runtime::FunctionalOptions& functional = {});

  /// The run's result with every module's statistics. Call after the simulation.
  runtime::RunResult result();
  /// Records this run's timeline (process `pid` in the trace) for steps in [first, last).
  void enable_trace(TraceSink& sink, int pid, std::int64_t first_step, std::int64_t last_step);
  const runtime::CompiledGraph& compiled() const { return m_graph; }
  const SystemConfig& config() const { return m_cfg; }
  /// Its timeline recorder, once enable_trace was called.
  const TraceRecorder* trace_recorder() const { return m_trace.get(); }
  /// How this rank's gradient groups' collectives went (see aicpu::TaskScheduler::CommTiming).
  const std::vector<aicpu::TaskScheduler::CommTiming>& comm_timing() const { return m_chip.scheduler.comm_timing(); }
  std::int64_t steps_done() const { return m_executor->steps_done(); }
  /// Keep every step's values in the result (per-step outputs), not only their summary.
  void keep_each_step(bool keep) { m_executor->keep_each_step(keep); }
  void keep_steps(std::int64_t first, std::int64_t last) { m_executor->keep_steps(first, last); }
  /// false: one wait per device task (see aicpu::TaskScheduler::set_task_runs).
  void set_task_runs(bool on) { m_chip.scheduler.set_task_runs(on); }
  std::int64_t steps_total() const { return m_session.steps(); }
  /// Writes the trace records kept until the run's end (the HBM's traffic counter).
  void flush_trace() { m_chip.hbm.flush_trace(); }
  /// The chip's HBM (the cluster's collectives draw on it).
  aicore::Hbm& hbm() { return m_chip.hbm; }
  /// The chip's side of its PCIe link (a collective between a server's HCCS networks crosses it).
  hostif::HostInterface& host_interface() { return m_chip.hostif; }

 private:
  SystemConfig m_cfg;
  runtime::Session m_session;
  workloads::DataRecipe m_data;
  BreakdownAccountant m_account;
  runtime::CompiledGraph m_graph;
  Chip m_chip;
  /// The host's cores when no cluster shares them: the training and evaluation pipelines' own.
  runtime::HostCores m_cores;
  runtime::DataPipeline m_pipeline;
  std::unique_ptr<runtime::Executor> m_executor;
  std::unique_ptr<TraceRecorder> m_trace;
  double m_model_flops_per_sample = 0;
  std::int64_t m_tokens_per_sample = 0;
  std::shared_ptr<runtime::FunctionalModel> m_values;
  bool m_eval = false;
  bool m_cluster_values = false;  ///< the cluster's values (semi-auto functional mode) are driven from here
  // Evaluation during training: the forward-only graph and the evaluation pipeline.
  workloads::DataRecipe m_eval_data;
  runtime::PipelineConfig m_eval_pipe;
  runtime::CompiledGraph m_eval_graph;
  std::unique_ptr<runtime::DataPipeline> m_eval_pipeline;
};

/// The workload compiled for the chip of `cfg` (its cost model and data queue); InputError if the
/// configured buffers hold no tile of some op.
runtime::CompiledGraph compile_for(const SystemConfig& cfg, const workloads::Workload& w);
/// compile_for, checked against device memory and the simulator's time range for the session.
runtime::CompiledGraph compile_checked(const SystemConfig& cfg, const workloads::Workload& w,
                                       const runtime::Session& session);

/// Human-readable byte count ("1.50 GiB").
std::string format_bytes(double bytes);

/// Why the workload's memory plan does not fit the chip's device memory, naming the largest part
/// and what to change; empty if it fits. `with_queue`: the data queue's buffers count (sink modes).
std::string memory_shortfall(const SystemConfig& cfg, const workloads::Workload& w, const runtime::MemoryPlan& plan,
                             bool with_queue);
/// Throws InputError (keyed by what to change) if the plan does not fit.
void check_fits(const SystemConfig& cfg, const workloads::Workload& w, const runtime::MemoryPlan& plan,
                bool with_queue);

}  // namespace ascendsim::sim
