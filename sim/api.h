// The library entry point: a request in, a result out. The command line, the tests and the
// Python module all run simulations through these calls.
//
// Every call simulates in a SystemC kernel context of its own, created for the call and deleted
// after it, so calls in one process give the same results as calls in separate processes, even
// after a call whose run failed mid-way (docs/design.md, "Runs in one process"). Calls must not
// overlap: one call at a time per process.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "runtime/functional.h"
#include "runtime/run_result.h"
#include "runtime/session.h"
#include "sim/config.h"
#include "sim/core/stats.h"
#include "sim/core/trace.h"
#include "sim/report/html_report.h"
#include "sim/report/report.h"
#include "workloads/workload.h"

namespace ascendsim::sim {

/// Draws of a run with failures when the request gives no fault_seeds.
inline constexpr std::int64_t kDefaultFaultSeeds = 100;

/// What to simulate. Errors about a field name it by the key in brackets (InputError::key()).
struct RunRequest {
  ConfigRequest config;             ///< server and chip presets, YAML file, overrides, config dir
  std::string workload = "lenet5";  ///< [workload]
  /// [model] an ONNX file (workloads/onnx_import.h): the network, instead of `workload`
  std::string model;
  std::string mode = "train";  ///< [mode] "train", or "infer": the forward pass only
  /// [loss] an ONNX model's training loss: "softmax-cross-entropy" of its output against integer
  /// labels, or "none" for a model whose output is its own loss
  std::string loss = "softmax-cross-entropy";
  /// [frozen] an ONNX model's initializers that are not trained (PyTorch's buffers an op reads as
  /// data, such as rotary tables), by name; masks are recognised without it (docs/onnx.md)
  std::vector<std::string> frozen;
  std::int64_t batch_size = 32;       ///< [batch_size] 0 with a model: the model's own
  workloads::RecipeOverrides recipe;  ///< [workload] over the workload's default (MindSpore's script)
  std::vector<runtime::Strategy> strategies = runtime::all_strategies();  ///< one run each
  std::int64_t epochs = 1;                                                ///< [epochs]
  std::int64_t sink_size = -1;                                            ///< [sink_size] loop sink's S; -1: one epoch
  std::optional<std::int64_t> steps_per_epoch;                            ///< [steps_per_epoch] unset: from the dataset
  std::string dataset;  ///< [dataset] directory of real files; "" synthetic
  /// [data] the data pipeline as the script builds it (sim/data_script.h): the dataset and its
  /// map() calls, replacing the workload's; its pipeline.* settings are in config.sets. Null: the
  /// workload's own.
  std::shared_ptr<const workloads::DataRecipe> data;
  std::string data_where;  ///< where `data` was read (a file, a figure), for messages
  /// [eval_every] evaluate on the evaluation dataset after every N epochs (MindSpore's
  /// EvalCallBack; sinks under loop sink); 0: no evaluation
  std::int64_t eval_every = 0;
  /// [accuracy_curve, target_accuracy] epochs to converge as an input: a CSV of epoch,accuracy
  /// and the accuracy to reach; the run trains to the first evaluation (every eval_every epochs)
  /// at which the curve reaches it, instead of `epochs` (sim/accuracy_curve.h).
  std::string accuracy_curve;
  double target_accuracy = 0;
  /// [checkpoint_every] MindSpore's ModelCheckpoint (save_checkpoint_steps): the weights and
  /// optimizer state copied to the host, serialised and written to the server's storage at least
  /// every N steps and at the end; unset: no checkpoints
  std::optional<std::int64_t> checkpoint_every;
  bool checkpoint_async = false;  ///< [checkpoint_async] ModelCheckpoint's async_save
  /// [device_mtbf_hours] a device's mean time between failures: the expected time to train with
  /// failures and restarts from the last checkpoint, the best checkpoint interval (runtime/faults.h)
  std::optional<double> device_mtbf_hours;
  std::optional<std::int64_t> fault_seeds;  ///< [fault_seeds] seeded draws of the run with failures (kDefaultFaultSeeds)
  std::string eval_dataset;  ///< [eval_dataset] an image folder to evaluate on; "" the workload's default
  /// [dataset_index] a file caching the image folder's JPEG headers (rebuilt when the folder changed)
  std::string dataset_index;
  /// [parallel_mode] "data" (every rank the whole model, DATA_PARALLEL) or "semi-auto" (operator
  /// sharding by the strategies below, workloads/parallel.h)
  std::string parallel_mode = "data";
  std::string dataset_strategy;  ///< [dataset_strategy] semi-auto: e.g. "((1,1,1,4),(1,))"; "" the batch cut
  std::string shard_strategy;    ///< [shard_strategy] semi-auto: a YAML file of layer: "((a,b),(c,d))"
  /// [tensor_parallel] transformers: Megatron's tensor parallelism over groups of this many
  /// adjacent ranks (semi-auto with the strategies of workloads::tensor_parallel_strategies), the
  /// devices / tensor_parallel groups data parallel; batch_size is then each group's
  std::int64_t tensor_parallel = 1;
  /// [sequence_parallel] with tensor_parallel: Megatron's sequence parallelism, the norms,
  /// dropouts and residual adds on 1/tensor_parallel of the tokens (workloads::sequence_parallel_strategies)
  bool sequence_parallel = false;
  /// [optimizer_shard] shard the optimizer state across the ranks that hold the same weights and
  /// read different samples (MindSpore's optimizer_shard, ZeRO-1): gradients reduce-scattered,
  /// each rank updating its piece, the pieces all-gathered into the weights
  bool optimizer_shard = false;
  /// [optimizer_shard_level] with optimizer_shard: 1 the optimizer state (MindSpore's
  /// optimizer_level "level1", ZeRO-1); 2 the gradients too ("level2", DeepSpeed's ZeRO-2: each
  /// micro-batch's gradient reduce-scattered and only the rank's piece accumulated, fp16 weights
  /// updated in an fp32 master copy of the rank's piece)
  std::int64_t optimizer_shard_level = 1;
  /// [recompute] transformers: every layer's forward ops run again in the backward pass
  /// (MindSpore's recompute, Megatron's full recomputation), so only each layer's input is kept
  bool recompute = false;
  /// [pipeline_stages] transformers: the layers divided among this many stages, each of devices /
  /// pipeline_stages consecutive ranks, the micro-batches in 1F1B order (workloads/pipeline.h);
  /// batch_size is then each pipeline's, all its micro-batches
  std::int64_t pipeline_stages = 1;
  /// [micro_batches] pipeline parallelism: the micro-batches of a step (MindSpore's micro_size;
  /// 0: as many as the stages)
  std::int64_t micro_batches = 0;
  /// [gradient_accumulation] micro-batches whose gradients are added up before one optimizer step
  /// and one set of gradient collectives (MindFormers' gradient_accumulation_steps, DeepSpeed's
  /// and Megatron's global batch); batch_size is the step's, all its micro-batches. With
  /// pipeline stages the step runs micro_batches x gradient_accumulation micro-batches in 1F1B
  /// order (Megatron's num_microbatches)
  std::int64_t gradient_accumulation = 1;
  std::int64_t devices = 1;      ///< [devices] data-parallel ranks, one server of up to 8
  /// [all_reduce_fusion] each AllReduce group's last gradient index, in gradient order (MindSpore's
  /// all_reduce_fusion_config); empty: one group after the backward pass
  std::vector<std::int64_t> all_reduce_fusion;
  /// [parameter_broadcast] broadcast the initialised parameters from rank 0 before training, as
  /// MindSpore does by default in DATA_PARALLEL mode
  bool parameter_broadcast = true;
  /// [rank_table] devices of one server: a rank table's; 0 the server preset's
  /// (server.devices_per_server)
  std::int64_t devices_per_server = 0;
  /// [rank_set] host.* and pipeline.* overrides ("key=value") for single ranks, over the run's
  /// configuration: a slower host or pipeline on one rank (a straggler)
  std::map<std::int64_t, std::vector<std::string>> rank_sets;
  runtime::FunctionalOptions functional;                   ///< [functional] compute the values too (one device)
  bool trace = false;                                      ///< record a timeline
  sim::TraceFormat trace_format = sim::TraceFormat::Json;  ///< Chrome JSON or Perfetto protobuf
  std::ostream* trace_out = nullptr;  ///< stream the trace here as it is recorded (else RunOutcome::trace)
  std::int64_t trace_first_step = 0;  ///< traced steps: [first, last), 0-based (the CLI's step N is N-1)
  std::int64_t trace_last_step = INT64_MAX;
  /// Free bytes where trace_out's file goes (its file system's, for an unprivileged user): a trace
  /// estimated larger is refused before anything is simulated. Unset: not checked (a pipe).
  std::optional<std::int64_t> trace_space;
  std::ostream* progress = nullptr;  ///< progress lines, about once a second
  std::ostream* warnings = nullptr;  ///< warnings before simulating (a very large trace)
  bool one_wait_per_task = false;    ///< the reference execution the runs of tasks must equal
  /// Simulate every rank of a cluster, not one server per kind (the reference; always when tracing).
  bool every_rank = false;
  bool per_step = false;
  std::int64_t step_trace_first = 0;  ///< steps kept for a per-step table: [first, last), 0-based as above
  std::int64_t step_trace_last = 0;   ///< keep every step's values (RunResult::steps.step_s), not only their summary
};

struct RunOutcome {
  report::ReportHeader header;
  std::vector<runtime::RunResult> runs;  ///< in the order of the request's strategies
  nlohmann::ordered_json config;         ///< every parameter as resolved
  std::string trace;                     ///< the trace file's bytes, if asked for without a trace_out

  /// Runs that failed (e.g. a GetNext timeout), and their combined diagnosis.
  bool failed() const;
  std::string failure_message() const;
  /// The JSON report (docs/reports.md; report::make_report).
  nlohmann::ordered_json report() const;
};

/// Simulates the request's strategies together. Throws InputError for a request no run can
/// start; a run that fails in the simulation is reported in its RunResult::failure.
RunOutcome run(const RunRequest& req);

/// About how many bytes the request's trace takes: per traced step and run, four events per
/// device op (its span, its span on the AI cores, HBM bandwidth up and down) and about forty for
/// the host, the pipeline and the link, at about 105 bytes each.
std::int64_t estimated_trace_bytes(const RunRequest& req);
/// A trace estimated larger than this draws a warning with the --trace-steps advice.
inline constexpr std::int64_t kTraceWarnBytes = std::int64_t{1} << 30;

/// The AI-core operators of one training step as MindSpore's profiler tabulates them.
struct OpProfile {
  struct Op {
    std::string full_name;   ///< scope path and index, e.g. "Default/conv1/Conv2D-op0"
    std::string type;        ///< the op type, e.g. "Conv2D"
    double time_ms = 0;      ///< one execution
    std::int64_t count = 0;  ///< executions per step
    std::int64_t blocks = 0;
    double cycles = 0;           ///< of the busiest block
    std::vector<double> ratios;  ///< per aicore::op_summary_ratios() column
    std::string bound;           ///< what bounds it (aicore::bound_name)
  };
  struct Type {
    std::string type;
    double time_ms = 0;  ///< all executions in a step
    std::int64_t count = 0;
    double share = 0;  ///< of the step's AI-core time
  };
  std::vector<Op> ops;      ///< in execution order
  std::vector<Type> types;  ///< largest share first
  double step_ms = 0;       ///< AI-core time of one step
  std::string aicore_model;  ///< the cost model that timed the ops
};
/// The request's workload compiled for its chip: every AI-core op's modelled time (nothing is
/// simulated; these are the times each task takes in a run).
OpProfile profile_ops(const RunRequest& req);

/// Every distinct AI-core op of one training step timed by both AI-core models: the analytic pipe
/// schedule and the event model (docs/aicore.md).
struct AicoreModelCheck {
  struct Op {
    std::string type;        ///< the op type, e.g. "Conv2D"
    std::string desc;        ///< its description (aicore::OpDesc::to_string)
    std::int64_t count = 0;  ///< executions per step
    double analytic_us = 0, event_us = 0;
    std::string analytic_bound, event_bound;
    double difference() const { return analytic_us > 0 ? event_us / analytic_us - 1 : 0.0; }
  };
  std::vector<Op> ops;               ///< in order of first execution
  std::vector<std::string> skipped;  ///< ops the event model refused (too many steps), with why
  double wall_s = 0;                 ///< the event model's simulation time
};
AicoreModelCheck check_aicore_models(const RunRequest& req);

/// The request's workload at its batch size, with its default dataset (InputError if unknown),
/// its ranks placed on servers of the configuration's size.
workloads::Workload request_workload(const RunRequest& req, const SystemConfig& cfg);

/// Every statistic a run of the request reports, with its path below the run, unit and
/// description (nothing is simulated).
std::vector<StatInfo> describe_statistics(const RunRequest& req);

/// A sweep: the request's strategies at each value of one parameter — sink_size, epochs,
/// steps_per_epoch, batch_size, devices (the same job on clusters of these sizes: the dataset's
/// epochs split across the ranks unless steps_per_epoch is given) or any configuration key.
struct SweepRequest {
  RunRequest base;
  std::string param;                ///< [param]
  std::vector<std::string> values;  ///< [values]
};

struct SweepOutcome {
  report::ReportHeader header;
  std::string param;
  std::vector<std::string> values;
  std::vector<report::SweepPoint> points;  ///< value-major, then strategy
  std::optional<std::int64_t> break_even_sink_size;
  std::string conclusion;
  nlohmann::ordered_json config;  ///< the base configuration

  bool failed() const;
  std::string failure_message() const;
  /// The JSON report (report::sweep_json; its table and CSV: report::sweep_table, sweep_csv).
  nlohmann::ordered_json report() const;
};

SweepOutcome sweep(const SweepRequest& req);

/// Scaling: the request's job on one device (the same batch per device and steps per rank) next
/// to its run on `req.devices`. Per strategy: samples/s on N devices over N times samples/s on
/// one, in the order of the request's strategies.
std::vector<double> scaling_efficiency(const RunRequest& req, const RunOutcome& on_n_devices);

/// One device count of a scaling curve; per strategy, in the order of the request's strategies.
struct ScalingPoint {
  std::int64_t devices = 1;
  std::vector<double> samples_per_s, step_ms, efficiency;
  /// Per strategy, the efficiency lost against one device, by cause: each a share of this run's
  /// time, (phase time here − phase time on one device) / run time; they add up to 1 − efficiency.
  std::vector<std::array<double, 6>> lost;
};
/// The causes of ScalingPoint::lost (runtime/run_result.h).
using runtime::kScalingLosses;
/// The request's job on 1, 2, 4 and 8 devices (one server's worth, up to its size) and whole
/// servers doubling up to `req.devices`, ending with `on_n_devices` itself: the same batch per
/// device and steps per rank, the fusion split kept, a rank's own settings kept where the rank
/// exists. Efficiency against the one-device point. Costs about twice the N-device run.
std::vector<ScalingPoint> scaling_curve(const RunRequest& req, const RunOutcome& on_n_devices);

/// A search for AllReduce fusion splits (`all_reduce_fusion`) with the shortest step.
struct FusionAdvice {
  struct Candidate {
    std::vector<std::int64_t> split;  ///< each group's last gradient index; empty: one group
    double tail_ms = 0, step_ms = 0, comm_s = 0;
  };
  std::int64_t gradients = 0;
  std::vector<Candidate> candidates;  ///< shortest mean step first (then shortest tail)
};
/// Simulates the request (loop sink, devices > 1) with one group, every single split on a grid of
/// `stride` gradients, every pair of splits on a grid of `4 * stride`, and the request's own
/// split if it has one.
FusionAdvice advise_fusion(const RunRequest& req, std::int64_t stride);

}  // namespace ascendsim::sim
