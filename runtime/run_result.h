// The outcome of one simulated training run, in the units of docs/design.md ("The report contract").
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "runtime/faults.h"
#include "runtime/session.h"
#include "runtime/step_summary.h"
#include "sim/core/breakdown.h"

namespace ascendsim::runtime {

struct Interactions {
  std::int64_t op_launches = 0;
  std::int64_t graph_launches = 0;
  std::int64_t h2d_copies = 0;  ///< H2D transfers: batch tensors, graph load
  std::int64_t d2h_copies = 0;
  std::int64_t host_syncs = 0;
  std::int64_t h2d_bytes = 0;
  std::int64_t d2h_bytes = 0;
  std::int64_t kernels_compiled = 0;  ///< distinct AI-core kernels compiled first (a cold kernel cache)
};

/// Per-step iteration trajectory (seconds): interval + fp_bp + tail = the step's time.
struct StepTrace {
  std::vector<double> interval_s;  ///< previous step's end to this step's first forward task (host gap)
  std::vector<double> fp_bp_s;     ///< first forward task start to last backward task end
  std::vector<double> tail_s;      ///< backward end to step end (optimizer, loop control, final return)
};

/// One kept step's values, with its number: steps are numbered from 1, the run's first step being
/// step 1, in every output that names a step (docs/reports.md).
struct NumberedStep {
  std::int64_t number = 0;
  double step_s = 0, interval_s = 0, fp_bp_s = 0, tail_s = 0;
};

/// The steps of a run summarised as they complete (bounded memory), and, if asked for, every
/// step's values.
struct StepRecord {
  StepSummary step, interval, fp_bp, tail;
  /// The steady state, what published per-step figures quote: the steps from `steady_from`
  /// (0-based; the second epoch's first step when the run has more than one epoch, else the
  /// second half of the run). The steps before it are the warm-up (graph load, pipeline fill, a
  /// cache's first epoch).
  std::int64_t steady_from = 0;
  /// The steady steps end before this index: the run's last step, which also waits for the final
  /// synchronisation and copy, is neither warm-up nor steady.
  std::int64_t steady_until = INT64_MAX;
  StepSummary steady;
  double warmup_steps_s = 0;  ///< the warm-up steps' time, summed
  /// The steady_from rule for a run of `steps` steps of `steps_per_epoch` each.
  static std::int64_t steady_start(std::int64_t steps, std::int64_t steps_per_epoch) {
    return steps > steps_per_epoch ? steps_per_epoch : steps / 2;
  }
  /// The steady_until rule: all but the last step (all of a run of two or fewer).
  static std::int64_t steady_end(std::int64_t steps) { return steps > 2 ? steps - 1 : steps; }
  /// What the warm-up cost beyond as many steady steps: its steps' time less steady_from times
  /// the steady mean (0 without steady steps).
  double warmup_s() const;
  std::vector<double> epoch_s;    ///< each complete epoch (steps_per_epoch steps)
  bool keep_each = false;         ///< fill the per-step vectors below with every step
  std::int64_t window_first = 0;  ///< ... or with the steps in [window_first, window_last) only
  std::int64_t window_last = 0;
  std::vector<double> step_s;    ///< per kept step
  StepTrace trace;               ///< per kept step
  std::int64_t first_kept = -1;  ///< index (0-based) of the first kept step

  /// Adds one step's values, in step order.
  void add(double step, double interval, double fp_bp, double tail, std::int64_t steps_per_epoch);
  /// Every kept step, numbered from 1.
  std::vector<NumberedStep> kept_steps() const;
  /// The kept steps of the window [window_first, window_last) (a per-step table), numbered from 1;
  /// empty when no window was asked for.
  std::vector<NumberedStep> window_steps() const;

 private:
  double m_epoch_sum = 0;
  std::int64_t m_in_epoch = 0;
  std::int64_t m_index = 0;
};

class FunctionalModel;

/// Functional mode: one LossMonitor line — MindSpore's epoch and step in it, and the loss read.
struct LossRecord {
  std::int64_t epoch = 0, step = 0;
  double loss = 0;
};

/// One evaluation pass during training (Session::eval_every).
struct EvalPass {
  std::int64_t after_epoch = 0;  ///< the epoch (sink under loop sink) it followed
  double start_s = 0;            ///< simulated time it began
  double time_s = 0;             ///< its duration: MindSpore's eval_cost
  std::int64_t steps = 0;
  double accuracy = -1;  ///< functional mode: the evaluation dataset's accuracy then
};

/// The evaluation passes' summary: the first pass's time, the later passes' mean (the first's
/// when there is one pass) and the mean of all.
struct EvalSummary {
  std::int64_t passes = 0;
  double first_s = 0, later_mean_s = 0, mean_s = 0;
};

/// The checkpoints a run saved (Session::checkpoint_every), their parts summed over the saves.
struct CheckpointRecord {
  std::int64_t bytes = 0;    ///< one save of this rank: its weights and optimizer state
  /// The largest rank's save (pipeline stages hold different layers): a restart loads every
  /// rank's checkpoint at once and trains again when the largest is loaded.
  std::int64_t largest_bytes = 0;
  std::int64_t writers = 1;  ///< the server's ranks writing their files at once
  std::int64_t saves = 0;
  double d2h_s = 0;        ///< the copies from the device over its PCIe link (DMA)
  double serialise_s = 0;  ///< the host's serialisation
  double write_s = 0;      ///< the writes, at the rank's share of the server's storage
  /// What the training thread waited for (the breakdown's checkpoint): every part when saving
  /// synchronously; with async_save the copies and any wait for the save before.
  double wait_s = 0;
};

/// The causes a scaling curve's lost efficiency is split into, in order: exposed collectives
/// (rank 0's, less its wait for a straggler), waiting for stragglers (rank 0's exposed
/// communication beyond the least exposed rank's), the host (its data, launches, copies, loop,
/// syncs and the device's wait for data), the device's compute (HBM contention, the gradients'
/// averaging), the one-time set-up (the parameters' broadcast), evaluation.
inline constexpr std::array<const char*, 6> kScalingLosses = {"collective", "stragglers", "host",
                                                              "device",     "setup",      "evaluation"};

/// A run from its start to its stop: the four parts add up to it (MLPerf's timed region leaves out
/// the initialisation).
struct TimeToTrain {
  double total = 0;
  double training = 0;        ///< the steps: every phase of the breakdown but the three below
  double evaluation = 0;      ///< the evaluation passes, all their time
  double initialisation = 0;  ///< one-time set-up (data channel, graph load, parameter broadcast)
  double exposed_comm = 0;    ///< collectives no computation hid
  double checkpoint = 0;      ///< the checkpoints the steps waited for (0 without)
  /// With --device-mtbf-hours: the expected time to train with failures (beside the total, not a
  /// part of it); negative: not analysed.
  double expected_with_failures = -1;
};

struct RunResult {
  Session session;
  std::int64_t batch_size = 0;
  std::int64_t steps_completed = 0;
  double sim_time_s = 0;
  /// Step times, from the previous step's end on the device (the last includes the tail), and
  /// the iteration trajectory.
  StepRecord steps;
  std::array<double, sim::kPhaseCount> breakdown_s{};
  double first_fill_s = 0;  ///< of breakdown_s's setup, the wait for the first training batch
  double compile_s = 0;     ///< of breakdown_s's setup, a cold kernel cache's compilation
  Interactions interactions;
  std::int64_t losses_returned = 0;
  /// Functional mode: the losses the host read, as LossMonitor prints them; the test-set accuracy
  /// (--eval; negative: not evaluated) over `eval_samples`.
  std::vector<LossRecord> loss_values;
  bool functional = false;
  double accuracy = -1;
  std::int64_t eval_samples = 0;
  /// Functional mode: the model as the run left it (weights, the batches kept for a dump); not
  /// part of the report.
  std::shared_ptr<const FunctionalModel> values;
  std::int64_t device_loop_iterations = 0;  ///< loop sink: iterations run under on-device loop control
  std::vector<EvalPass> eval_passes;        ///< evaluation during training, in order
  Interactions eval_interactions;           ///< the evaluation passes' own (not in `interactions`)
  nlohmann::ordered_json eval_cache;        ///< the evaluation pipeline's cache (PipelineCosts::cache_summary)
  CheckpointRecord checkpoints;             ///< the saves (Session::checkpoint_every)
  /// Device failures laid over the run (--device-mtbf-hours); analysed when `faults.devices` > 0.
  FaultAnalysis faults;
  bool faults_analysed() const { return faults.devices > 0; }
  std::string failure;                      ///< empty if the run completed
  nlohmann::ordered_json stats;             ///< per-module statistics
  nlohmann::ordered_json data;              ///< data pipeline verdict, queue depth over time
  /// What sharing the chip cost the AI core tasks per step: HBM (by stream and by the consumer
  /// charged) and waits for free cores (docs/reports.md, "contention").
  nlohmann::ordered_json contention;
  /// The exposed communication (breakdown_s's comm, training steps) by what it was for, ms per
  /// step: gradients_ms_per_step (data parallelism's AllReduce, the optimizer's collectives) and
  /// operators_ms_per_step (the
  /// collectives an operator's layout needs: tensor parallelism, semi-auto redistribution).
  nlohmann::ordered_json exposed_comm;
  /// A cluster's collectives of the optimizer pass, per step, by kind ("ReduceScatter", ...):
  /// {collectives (fused units), bytes}; null without any.
  nlohmann::ordered_json optimizer_collectives;
  /// Pipeline parallelism: {stages, micro_batches, ideal_bubble_fraction, per_stage: [{stage,
  /// first_rank, layers, step_ms, device_compute_ms, busy_ms, optimizer_ms, micro_batch_ms, exchanges, exchange_bytes,
  /// exchange_ms, exposed_exchange_ms, bubble_ms, bubble_fraction, memory}]} (docs/reports.md); null without.
  nlohmann::ordered_json pipeline;
  /// Data-parallel runs: the ranks (each ran steps_completed steps of batch_size samples; this
  /// result is rank 0's, its sim_time_s the last rank's end), each rank's mean step time, and
  /// the AllReduce groups in gradient order ({first, last, bytes, all_reduce_ms, start_ms,
  /// duration_ms, exposed_ms, exposed_max_ms}), the parameters' broadcast and the links
  /// (`cluster_links`, see docs/reports.md).
  std::int64_t devices = 1;
  /// The model's arithmetic per sample (2 x forward MACs, x 3 when training: the forward product
  /// and the backward pass's two), tokens per sample (0: not a sequence model) and one device's
  /// fp16 Cube peak: the model FLOPs utilisation and tokens/s.
  double model_flops_per_sample = 0;
  std::int64_t tokens_per_sample = 0;
  double peak_flops_per_device = 0;
  /// Of the chips' peak, the arithmetic the model needs at the steady state's samples/s.
  double mfu() const;
  std::vector<double> rank_step_mean_ms, rank_step_p50_ms;  ///< per rank: mean and median step
  std::vector<double> rank_wait_data_s, rank_comm_s;  ///< per rank: waiting for data, exposed communication
  nlohmann::ordered_json comm_groups;
  nlohmann::ordered_json cluster_links;
  double scaling_efficiency = -1;  ///< against one device (--scaling); negative: not computed
  /// --scaling: the job on 1, 2, 4, … devices ({devices, samples_per_s, step_ms, efficiency}).
  nlohmann::ordered_json scaling;

  /// Time of each complete dataset epoch (steps_per_epoch steps).
  const std::vector<double>& epoch_s() const { return steps.epoch_s; }

  /// Ranks that read different samples (semi-auto parallelism: the batch's cuts; 0: every rank).
  std::int64_t data_shards = 0;
  std::int64_t tensor_parallel = 1;  ///< ranks of a tensor-parallel group (1: none)
  /// Ranks simulated: fewer than `devices` when servers alike were simulated once.
  std::int64_t simulated_ranks = 0;
  /// Samples trained per second: each step's batch on every rank that reads its own samples.
  double samples_per_s() const;
  /// The same in the steady state: a batch per reader every steady mean step.
  double steady_samples_per_s() const;
  /// Data-parallel runs: the straggler, the rank the others wait for in each AllReduce — the one
  /// with the least exposed communication, as it arrives last — when the ranks' exposed
  /// communication differs by over 1% of the run; -1 otherwise. The ranks step together, so their
  /// step times do not single out a slow rank: this is the report's only one.
  std::int64_t straggler() const;
  double device_busy_fraction() const;
  EvalSummary evaluation() const;
  TimeToTrain time_to_train() const;
  /// The time to train has parts beyond the steps: evaluation during training, a cluster's
  /// communication, a cold cache's compilation, checkpoints (the reports then show them).
  bool time_to_train_has_parts() const {
    return session.eval_passes() > 0 || devices > 1 || interactions.kernels_compiled > 0 ||
           session.checkpoint_every > 0;
  }
};

}  // namespace ascendsim::runtime
