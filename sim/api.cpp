// The library's calls on one run (sim/api.h): run() and its outcome and report, the estimate of
// a trace's size, and the tools that time one step without running the job (profile_ops,
// check_aicore_models, describe_statistics). The run is built in run_build.cpp; the calls that
// run a job several times (sweep, scaling, fusion advice) are in studies.cpp.
#include "sim/api.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <map>
#include <set>
#include <sstream>
#include <unordered_map>

#include <fmt/format.h>

#include "aicore/event_model.h"
#include "aicpu/hccl.h"
#include "runtime/data_pipeline.h"
#include "runtime/graph_compiler.h"
#include "sim/accuracy_curve.h"
#include "sim/core/error.h"
#include "sim/kernel.h"
#include "sim/run_build.h"
#include "sim/simulation.h"
#include "workloads/parallel.h"
#include "workloads/workload.h"

namespace ascendsim::sim {

using nlohmann::ordered_json;

namespace {

void check_trace_window(const RunRequest& r) {
  if (r.trace_first_step < 0 || r.trace_last_step <= r.trace_first_step)
    throw InputError("trace_steps", "trace_steps",
                     "the traced steps [" + std::to_string(r.trace_first_step) + ", " +
                         std::to_string(r.trace_last_step) + ") are empty; give 0 <= first < last");
}

std::string failures(const std::vector<runtime::RunResult>& runs) {
  std::string out;
  for (const auto& r : runs)
    if (!r.failure.empty())
      out += fmt::format("{} failed after {} of {} steps at {:.6f} s simulated: {}\n",
                         runtime::strategy_name(r.session.strategy), r.steps_completed, r.session.steps(), r.sim_time_s,
                         r.failure);
  return out;
}

/// Device failures laid over a run that saved checkpoints (--device-mtbf-hours; runtime/faults.h):
/// the run's figures made into the fault model's inputs, the restart's cost from the configuration.
void analyse_failures(const RunRequest& req, const SystemConfig& cfg, runtime::RunResult& r) {
  const runtime::CheckpointRecord& c = r.checkpoints;
  if (!r.failure.empty() || c.saves == 0) return;
  const runtime::TimeToTrain t = r.time_to_train();
  const double writers = static_cast<double>(c.writers);
  runtime::FaultInputs in;
  in.mtbf_s = *req.device_mtbf_hours * 3600.0 / static_cast<double>(r.devices);
  in.init_s = t.initialisation;
  in.steps = r.steps_completed;
  in.step_s = (t.total - t.initialisation - t.checkpoint) / static_cast<double>(std::max<std::int64_t>(1, in.steps));
  in.granule = r.session.strategy == runtime::Strategy::LoopSink ? r.session.effective_sink_size() : 1;
  in.checkpoint_s = t.checkpoint / static_cast<double>(c.saves);
  // The restart: relaunch, the run's initialisation again, and the last checkpoint's load — its
  // file read at the rank's share of the server's storage, parsed, and copied to the device at the
  // rank's share of its PCIe switch's uplink (the server's ranks load at once; training resumes
  // when the largest rank's, a pipeline's fullest stage, is on its device).
  const double per_switch = std::min(static_cast<double>(cfg.link.pcie_switch_devices), writers);
  const double h2d_gbps = std::min(cfg.link.h2d_bandwidth_gbps, cfg.link.pcie_uplink_gbps / std::max(1.0, per_switch));
  const double bytes = static_cast<double>(c.largest_bytes);
  const double load =
      cfg.host.checkpoint_read_s(bytes, writers) + cfg.host.checkpoint_serialise_s(bytes) + bytes / (h2d_gbps * 1e9);
  in.restart_s = cfg.host.relaunch_s + t.initialisation + load;
  in.first_restart_s = cfg.host.relaunch_s;  // before the first save: the run starts over
  const double expected = runtime::expected_s(in, runtime::segments(in, r.session.checkpoint_every));
  constexpr double kMostFailures = 1e6;  // draws of a run expecting more would take minutes
  if (!std::isfinite(expected) || expected / in.mtbf_s > kMostFailures)
    throw InputError("device_mtbf_hours", "device_mtbf_hours",
                     fmt::format("with a cluster MTBF of {:.4g} s ({} devices) the run would expect over {:g} "
                                 "failures between its checkpoints and restarts of {:.4g} s; give a longer MTBF or "
                                 "save more often",
                                 in.mtbf_s, r.devices, kMostFailures, in.restart_s));
  r.faults = runtime::analyse_faults(in, r.session.checkpoint_every, req.fault_seeds.value_or(kDefaultFaultSeeds));
  r.faults.device_mtbf_hours = *req.device_mtbf_hours;
  r.faults.devices = r.devices;
  r.faults.relaunch_s = cfg.host.relaunch_s;
  r.faults.load_s = load;
}

/// Semi-automatic parallelism in the report: the strategies, per device the parameters and
/// memory, every forward redistribution collective with its group, bytes and time (its backward
/// dual moves as many bytes), and the tensors' layouts.
ordered_json parallel_json(const SystemConfig& cfg, const workloads::Workload& w, const runtime::CompiledGraph& g) {
  workloads::ShardPlan p;  // pipeline stages alone: no operator is cut
  if (w.shard_plan) {
    p = *w.shard_plan;
  } else {
    for (const auto& t : w.graph.tensors())
      if (t.role == workloads::TensorRole::Parameter) p.parameters_local += t.elements();
    p.parameters_global = p.parameters_local;
  }
  ordered_json collectives = ordered_json::array();
  for (const auto& c : p.collectives) {
    const hostif::Collective kind = c.kind == "AllReduce"   ? hostif::Collective::AllReduce
                                    : c.kind == "AllGather" ? hostif::Collective::AllGather
                                    : c.kind == "AllToAll"  ? hostif::Collective::AllToAll
                                                            : hostif::Collective::ReduceScatter;
    // Rank 0's group: the span of servers and HCCS networks it covers.
    const hostif::CommGroup group{static_cast<std::int32_t>(c.group_size), static_cast<std::int32_t>(c.group_stride)};
    const std::vector<int> members = group.members(0, static_cast<int>(w.parallel.devices));
    const double s =
        aicpu::Hccl::cost(cfg.chip.hccl, kind,
                          aicpu::Hccl::span_of(cfg.chip.hccl, members, static_cast<int>(w.parallel.devices_per_server)),
                          static_cast<double>(c.bytes), cfg.chip.memory.hbm_gbps())
            .seconds;
    collectives.push_back({{"name", c.name},
                           {"kind", c.kind},
                           {"pass", c.forward ? "forward" : "backward"},
                           {"group", {{"size", c.group_size}, {"stride", c.group_stride}}},
                           {"bytes", c.bytes},
                           {"ms", 1e3 * s}});
  }
  ordered_json layouts = ordered_json::array();
  for (const auto& l : p.layouts)
    layouts.push_back({{"tensor", l.tensor},
                       {"op", l.op},
                       {"shape", l.global},
                       {"local", l.local},
                       {"cuts", l.cuts},
                       {"partial", l.partial}});
  ordered_json strategies = ordered_json::object();
  for (const auto& [layer, s] : p.strategies) strategies[layer] = s;
  const auto& m = g.memory;
  ordered_json pipeline = nullptr;
  if (w.parallel.pipeline_stages > 1) {
    const std::int64_t P = w.parallel.pipeline_stages, M = w.parallel.micro_batches;
    std::int64_t whole = 0;  // parameters: each stage's (a shared weight counted once)
    std::set<std::string> seen;
    for (const auto& s : w.stages)
      for (const auto& t : s->graph.tensors())
        if (t.role == workloads::TensorRole::Parameter && seen.insert(t.name).second) whole += t.elements();
    if (!w.shard_plan) p.parameters_global = whole;
    p.parameters_local = 0;  // stage 0's
    for (const auto& t : w.graph.tensors())
      if (t.role == workloads::TensorRole::Parameter) p.parameters_local += t.elements();
    pipeline = {{"stages", P},
                {"micro_batches", M},
                {"micro_batch", w.batch_size / M},
                {"ranks_per_stage", w.parallel.devices / P},
                {"schedule", "1F1B"},
                {"ideal_bubble_fraction", static_cast<double>(P - 1) / static_cast<double>(M + P - 1)}};
  }
  ordered_json out = {
      {"mode", w.shard_plan ? "semi-auto" : "pipeline"},
      {"devices", w.parallel.devices},
      {"data_shards", w.parallel.data_shards},
      {"tensor_parallel", w.parallel.tensor_parallel},
      {"optimizer_shard", w.optimizer_spec.shard_size},
      {"gradients_sharded", w.optimizer_spec.partition_gradients && w.optimizer_spec.shard_size > 1},
      {"strategies", strategies},
      {"gradient_group", {{"size", w.parallel.gradient_group_size}, {"stride", w.parallel.gradient_group_stride}}},
      {"parameters", {{"whole", p.parameters_global}, {"per_device", p.parameters_local}}},
      {"device_compute_per_step_ms", 1e3 * g.device_compute_s},
      {"memory_per_device_bytes",
       {{"persistent", m.persistent_bytes},
        {"step", m.arena_bytes},
        {"queue", m.queue_buffer_bytes},
        {"input_per_batch", w.batch_bytes()}}},
      {"collectives", collectives},
      {"layouts", layouts},
      {"pipeline", pipeline}};
  if (!p.output_strategies.empty()) {  // sequence parallelism's (only then: other reports keep their keys)
    out["sequence_parallel"] = w.parallel.sequence_parallel;
    out["output_strategies"] = p.output_strategies;
  }
  return out;
}


}  // namespace

bool RunOutcome::failed() const {
  return std::any_of(runs.begin(), runs.end(), [](const runtime::RunResult& r) { return !r.failure.empty(); });
}
std::string RunOutcome::failure_message() const { return failures(runs); }
ordered_json RunOutcome::report() const { return report::make_report(header, runs, config); }

namespace {
/// See estimated_trace_bytes; `ops`: device ops of one step.
std::int64_t trace_bytes(const RunRequest& req, const runtime::CompiledGraph& g,
                         const std::vector<runtime::Session>& sessions) {
  // One span per op on the AI cores (with its arguments), one launch span per op where the host
  // launches op by op, a few dozen host, pipeline, DMA and queue events per step, and a sample of
  // the HBM's traffic per bin of the device's compute.
  // Measured on LeNet-5 and ResNet-50 traces: bytes per event in each format.
  const bool json = req.trace_format == TraceFormat::Json;
  const auto ops = static_cast<std::int64_t>(g.step_tasks.size());
  const auto hbm_samples = static_cast<std::int64_t>(g.device_compute_s * 1e12 / aicore::Hbm::kTraceBinPs) + 2;
  const std::int64_t kOpSpanBytes = json ? 150 : 60, kLaunchSpanBytes = json ? 110 : 36,
                     kHostEventsPerStep = 40 + hbm_samples, kEventBytes = json ? 105 : 30;
  // The event model: its op summary on each op span, and AI core 0's pipe tracks.
  std::int64_t pipe_spans = 0, summaries = 0;
  for (const auto& t : g.step_tasks)
    if (t.cost.timeline) {
      ++summaries;
      for (const auto& pipe : t.cost.timeline->pipes) pipe_spans += static_cast<std::int64_t>(pipe.size());
    }
  const std::int64_t kSummaryBytes = json ? 180 : 0;  // Perfetto interns a label's arguments
  std::int64_t bytes = 0;
  for (const auto& s : sessions) {
    const std::int64_t steps =
        std::max<std::int64_t>(0, std::min(req.trace_last_step, s.steps()) - req.trace_first_step);
    const bool op_by_op = s.strategy == runtime::Strategy::NonSink || s.strategy == runtime::Strategy::DataSink;
    bytes += steps * (ops * (kOpSpanBytes + (op_by_op ? kLaunchSpanBytes : 0)) + kHostEventsPerStep * kEventBytes +
                      summaries * kSummaryBytes + pipe_spans * kEventBytes);
  }
  return bytes;
}

}  // namespace

std::int64_t estimated_trace_bytes(const RunRequest& req) {
  const SystemConfig cfg = load_config(req.config);
  const workloads::Workload w = build_workload_with_data(req, cfg);
  std::vector<runtime::Session> sessions;
  for (auto s : req.strategies) sessions.push_back(make_session(req, w, s));
  return trace_bytes(req, compile_for(cfg, w), sessions);
}

RunOutcome run(const RunRequest& request) {
  RunRequest req = request;
  nlohmann::ordered_json target;  // a run to a target accuracy: its epochs from the user's curve
  if (!req.accuracy_curve.empty() || req.target_accuracy != 0) {
    if (req.accuracy_curve.empty() || req.target_accuracy == 0)
      throw InputError("target_accuracy", "target_accuracy",
                       "give both the accuracy curve (--accuracy-curve FILE) and the accuracy to reach "
                       "(--target-accuracy X)");
    const AccuracyCurve curve = load_accuracy_curve(req.accuracy_curve);
    const auto [epochs, accuracy] = epochs_to_target(curve, req.target_accuracy, req.eval_every);
    req.epochs = epochs;
    target = {{"curve", req.accuracy_curve},
              {"target_accuracy", req.target_accuracy},
              {"eval_every", req.eval_every},
              {"epochs", epochs},
              {"accuracy", accuracy}};
  }
  const SystemConfig cfg = load_config(req.config);
  const workloads::Workload w = build_workload_with_data(req, cfg);
  if (req.trace) check_trace_window(req);
  std::vector<runtime::Session> sessions;
  for (auto s : req.strategies) sessions.push_back(make_session(req, w, s));
  if (req.trace && req.trace_first_step > 0)
    for (const auto& s : sessions)
      if (req.trace_first_step >= s.steps())  // a window past the run's end: an empty trace
        throw InputError("trace_steps", "trace_steps",
                         "step " + std::to_string(req.trace_first_step + 1) + " is past the run's end: " +
                             runtime::strategy_name(s.strategy) + " runs " + std::to_string(s.steps()) +
                             " steps; give a window within 1:" + std::to_string(s.steps() + 1));

  RunOutcome out;
  out.header = {w.name,
                cfg.chip.name,
                w.batch_size,
                req.devices,
                setting_line(cfg, w),
                recipe_json(w.recipe),
                {},
                w.parallel.devices / w.parallel.devices_per_server,
                {},
                w.training ? "train" : "infer",
                target,
                cfg.server.name};
  out.header.gradient_accumulation = w.parallel.gradient_accumulation;
  out.config = resolved_params(cfg);
  KernelScope kernel;
  Simulation simulation;
  std::map<std::int64_t, SystemConfig> rank_cfgs;
  for (const auto& [rank, sets] : req.rank_sets) {
    if (rank < 0 || rank >= req.devices)
      throw InputError("rank_set", "rank_set",
                       "rank " + std::to_string(rank) + " is not one of the " + std::to_string(req.devices) +
                           " devices (0 to " + std::to_string(req.devices - 1) + ")");
    ConfigRequest c = req.config;
    for (const auto& s : sets) {
      if (s.rfind("host.", 0) != 0 && s.rfind("pipeline.", 0) != 0)
        throw InputError("rank_set", "rank_set",
                         "'" + s + "': a rank's own settings are its host's and pipeline's (host.*, pipeline.*)");
      c.sets.push_back(s);
    }
    rank_cfgs.emplace(rank, load_config(c));
  }
  simulation.simulate_every_rank(req.every_rank || req.trace);  // a trace has every rank's processes
  for (const auto& s : sessions) simulation.add(cfg, w, s, rank_cfgs, req.functional);
  if ((w.shard_plan || !w.stages.empty()) && simulation.size() > 0)
    out.header.parallel = parallel_json(cfg, w, simulation.system(0).compiled());
  if (simulation.size() > 0) {
    out.header.graph_passes = nlohmann::ordered_json::array();
    for (const auto& p : simulation.system(0).compiled().pass_effects)
      out.header.graph_passes.push_back({{"pass", p.name}, {"ops", p.ops}, {"hbm_bytes", p.bytes}});
  }
  if (req.trace && (req.warnings || req.trace_space) && simulation.size() > 0) {  // the systems' own compiled graph
    const std::int64_t bytes = trace_bytes(req, simulation.system(0).compiled(), sessions);
    if (req.trace_space && bytes > *req.trace_space)
      throw InputError("trace", "trace",
                       "the trace would take about " + format_bytes(static_cast<double>(bytes)) + " but its file system has " +
                           format_bytes(static_cast<double>(*req.trace_space)) +
                           " free; keep a window of steps with trace_steps A:B (e.g. trace_steps 100:120), or write "
                           "the trace where there is room");
    if (req.warnings && bytes > kTraceWarnBytes)
      *req.warnings << "warning: the trace will take about " << format_bytes(static_cast<double>(bytes))
                    << " (every device op of every traced step and run); keep a window of steps with "
                       "--trace-steps A:B, e.g. --trace-steps 100:120\n";
  }
  std::ostringstream trace_text;
  if (req.trace)
    simulation.enable_trace(req.trace_out ? *req.trace_out : trace_text, req.trace_format, req.trace_first_step,
                            req.trace_last_step);
  simulation.keep_each_step(req.per_step);
  if (req.step_trace_last > req.step_trace_first) simulation.keep_steps(req.step_trace_first, req.step_trace_last);
  simulation.set_task_runs(!req.one_wait_per_task);
  simulation.show_progress(req.progress);
  simulation.run();
  for (std::size_t i = 0; i < simulation.size(); ++i) out.runs.push_back(simulation.result(i));
  if (req.device_mtbf_hours)
    for (auto& r : out.runs) analyse_failures(req, cfg, r);
  if (req.trace && !req.trace_out && !out.failed()) out.trace = trace_text.str();
  return out;
}

OpProfile profile_ops(const RunRequest& req) {
  const SystemConfig cfg = load_config(req.config);
  const workloads::Workload w = build_workload(req, cfg);
  const runtime::CompiledGraph g = compile_for(cfg, w);
  OpProfile p;
  p.aicore_model = cfg.chip.aicore.model;
  std::map<std::string, std::size_t> at;
  for (std::size_t i = 0; i < g.step_tasks.size(); ++i) {
    if (g.step_tasks[i].kind != hostif::TaskKind::AiCore) continue;  // events and collectives
    const auto& t = g.step_tasks[i];
    const double ms = t.cost.time_s * 1e3;
    const std::string scope =
        t.name.rfind("Gradients/", 0) == 0 ? "Gradients/" + t.name.substr(10) : "Default/" + t.name;
    std::vector<double> ratios;
    for (const auto& column : aicore::op_summary_ratios()) ratios.push_back(aicore::pipe_ratio(t.cost, column.second));
    p.ops.push_back({scope + "-op" + std::to_string(i), g.op_types[i], ms, 1, t.cost.blocks, t.cost.block_cycles,
                     std::move(ratios), aicore::bound_name(t.cost.bound)});
    auto it = at.find(g.op_types[i]);
    if (it == at.end()) {
      it = at.emplace(g.op_types[i], p.types.size()).first;
      p.types.push_back({g.op_types[i], 0, 0, 0});
    }
    p.types[it->second].time_ms += ms;
    ++p.types[it->second].count;
    p.step_ms += ms;
  }
  for (auto& t : p.types) t.share = p.step_ms > 0 ? t.time_ms / p.step_ms : 0;
  std::stable_sort(p.types.begin(), p.types.end(),
                   [](const OpProfile::Type& a, const OpProfile::Type& b) { return a.time_ms > b.time_ms; });
  return p;
}

AicoreModelCheck check_aicore_models(const RunRequest& req) {
  SystemConfig cfg = load_config(req.config);
  if (cfg.chip.aicore.model != "analytic")
    throw InputError("aicore.model", "aicore.model",
                     "aicore-check runs both AI-core models side by side; leave aicore.model (--aicore-model) unset");
  const workloads::Workload w = build_workload(req, cfg);
  const runtime::CompiledGraph g = compile_for(cfg, w);
  const auto event = aicore::make_event_cost_model(cfg.chip.aicore, cfg.chip.memory);
  AicoreModelCheck out;
  std::unordered_map<aicore::OpDesc, std::size_t, aicore::OpDescHash> seen;
  const auto begin = std::chrono::steady_clock::now();
  for (std::size_t i = 0; i < g.step_tasks.size(); ++i) {
    const auto& t = g.step_tasks[i];
    if (t.kind != hostif::TaskKind::AiCore) continue;
    constexpr std::size_t kRefused = std::numeric_limits<std::size_t>::max();
    auto [it, added] = seen.try_emplace(g.descs[i], out.ops.size());
    if (!added) {
      if (it->second != kRefused) ++out.ops[it->second].count;
      continue;
    }
    aicore::OpCost e;
    try {
      e = event->estimate(g.descs[i]);
    } catch (const aicore::EventModelError& err) {  // too large to simulate: listed, not compared
      out.skipped.push_back(g.op_types[i] + ": " + err.what());
      it->second = kRefused;
      continue;
    }
    out.ops.push_back({g.op_types[i], g.descs[i].to_string(), 1, t.cost.time_s * 1e6, e.time_s * 1e6,
                       aicore::bound_name(t.cost.bound), aicore::bound_name(e.bound)});
  }
  out.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
  return out;
}

std::vector<StatInfo> describe_statistics(const RunRequest& req) {
  const SystemConfig cfg = load_config(req.config);
  const workloads::Workload w = build_workload_with_data(req, cfg);
  const runtime::Session session =
      make_session(req, w, req.strategies.empty() ? runtime::Strategy::LoopSink : req.strategies.front());
  KernelScope kernel;
  Simulation simulation;
  simulation.add(cfg, w, session);
  return describe_stats(simulation.system(0));
}


}  // namespace ascendsim::sim
