// The library's calls that run one job several times (sim/api.h): sweep() over a request field or
// a parameter, the scaling curve against one device, and the search of AllReduce fusion splits.
#include "sim/api.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <map>
#include <set>
#include <sstream>

#include <fmt/format.h>

#include "runtime/graph_compiler.h"
#include "sim/core/error.h"
#include "sim/kernel.h"
#include "sim/report/studies_report.h"
#include "sim/run_build.h"
#include "sim/simulation.h"
#include "sim/system.h"
#include "workloads/parallel.h"
#include "workloads/workload.h"

namespace ascendsim::sim {

using nlohmann::ordered_json;

namespace {

std::int64_t parse_whole(const std::string& v, const std::string& key) {
  std::size_t used = 0;
  std::int64_t x = 0;
  try {
    x = std::stoll(v, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != v.size() || v.empty()) throw InputError("values", key, "'" + v + "' is not a whole number");
  return x;
}

}  // namespace

SweepOutcome sweep(const SweepRequest& req) {
  if (req.values.empty()) throw InputError("values", "values", "give at least one value to sweep");
  const RunRequest& o = req.base;
  const std::string& param = req.param;
  if (o.device_mtbf_hours)
    throw InputError("device_mtbf_hours", "device_mtbf_hours",
                     "failures are laid over one run's time line: give it to train or compare, not to a sweep");
  const SystemConfig base = load_config(o.config);
  const bool session_param = param == "sink_size" || param == "epochs" || param == "steps_per_epoch" ||
                             param == "batch_size" || param == "devices";
  SweepOutcome out;
  out.param = param;
  out.values = req.values;
  out.config = resolved_params(base);

  // Everything is checked before anything is simulated.
  struct Point {
    std::string value;
    SystemConfig cfg;
    std::size_t workload;
    runtime::Session session;
  };
  std::vector<Point> plan;
  std::vector<workloads::Workload> workloads_by_value;
  workloads_by_value.reserve(req.values.size());
  for (const auto& v : req.values) {
    RunRequest ov = o;
    SystemConfig cfg = base;
    if (param == "sink_size")  // the same training: epochs x steps per epoch, in sinks of this size
      ov.sink_size = parse_whole(v, "sink_size");
    else if (param == "epochs")
      ov.epochs = parse_whole(v, "epochs");
    else if (param == "steps_per_epoch")
      ov.steps_per_epoch = parse_whole(v, "steps_per_epoch");
    else if (param == "batch_size")
      ov.batch_size = parse_whole(v, "batch_size");
    else if (param == "devices") {  // the same job on a cluster of this size: its epochs of the same dataset
      ov.devices = parse_whole(v, "devices");
      if (ov.devices < 1) throw InputError("values", "devices", "'" + v + "' is not a device count (1 or more)");
      if (o.devices_per_server > 0) ov.devices_per_server = std::min(o.devices_per_server, ov.devices);
      if (ov.devices == 1) ov.all_reduce_fusion.clear();
      ov.rank_sets.clear();
      for (const auto& [rank, sets] : o.rank_sets)
        if (rank < ov.devices) ov.rank_sets[rank] = sets;
    }
    if (!session_param) {
      ConfigRequest c = o.config;
      c.sets.push_back(param + "=" + v);
      cfg = load_config(c);
    }
    workloads_by_value.push_back(build_workload_with_data(ov, cfg));
    for (auto s : o.strategies) {
      runtime::Session session = make_session(ov, workloads_by_value.back(), s);
      if (param == "sink_size" && s == runtime::Strategy::LoopSink && ov.sink_size > 0) {
        // MindSpore users set epoch = total steps / sink_size: keep the total number of steps.
        const std::int64_t total = o.epochs * session.steps_per_epoch;
        session.epochs = (total + ov.sink_size - 1) / ov.sink_size;
        session.validate();
      }
      plan.push_back({v, cfg, workloads_by_value.size() - 1, session});
    }
  }
  const auto& w0 = workloads_by_value.front();
  out.header = {w0.name,
                base.chip.name,
                w0.batch_size,
                o.devices,
                setting_line(base, w0),
                recipe_json(w0.recipe),
                {},
                w0.parallel.devices / w0.parallel.devices_per_server,
                {},
                w0.training ? "train" : "infer",
                {},
                base.server.name};

  {
    KernelScope kernel;
    Simulation simulation;
    for (const auto& p : plan) simulation.add(p.cfg, workloads_by_value[p.workload], p.session);
    simulation.show_progress(o.progress);
    simulation.run();
    for (std::size_t i = 0; i < simulation.size(); ++i) out.points.push_back({plan[i].value, simulation.result(i)});
  }
  if (out.failed()) return out;

  // Break-even sink size: from there on, every larger value gains loop sink less than 1%.
  if (param == "sink_size") {
    std::vector<std::pair<std::int64_t, double>> loop;
    for (const auto& p : out.points)
      if (p.run.session.strategy == runtime::Strategy::LoopSink)
        loop.emplace_back(p.run.session.effective_sink_size(), p.run.steps.step.stats().mean_ms);
    out.break_even_sink_size = report::break_even_sink_size(loop);
    if (out.break_even_sink_size)
      out.conclusion =
          "loop sink gains less than 1% per step beyond sink_size " + std::to_string(*out.break_even_sink_size);
    else if (loop.size() >= 2)
      out.conclusion = "loop sink still gains 1% or more at the largest sink_size given (" +
                       std::to_string(std::max_element(loop.begin(), loop.end())->first) + "); try larger values";
  }
  return out;
}

bool SweepOutcome::failed() const {
  return std::any_of(points.begin(), points.end(), [](const report::SweepPoint& p) { return !p.run.failure.empty(); });
}

std::string SweepOutcome::failure_message() const {
  std::string out;
  for (const auto& p : points)
    if (!p.run.failure.empty())
      out +=
          param + "=" + p.value + ", " + runtime::strategy_name(p.run.session.strategy) + ": " + p.run.failure + "\n";
  return out;
}

ordered_json SweepOutcome::report() const { return report::sweep_json(*this); }

namespace {
/// `req` for a run of its own inside another command: no trace, progress or warnings.
RunRequest quiet(RunRequest req) {
  req.trace = false;
  req.trace_out = nullptr;
  req.progress = nullptr;
  req.warnings = nullptr;
  return req;
}
}  // namespace

/// Scaling compares with fewer devices of the same layout: a tensor-parallel group cannot shrink.
void check_scalable(const RunRequest& req) {
  if (req.pipeline_stages > 1)
    throw InputError("pipeline_stages", "pipeline_stages",
                     "scaling compares with one device, which cannot hold " + std::to_string(req.pipeline_stages) +
                         " pipeline stages; compare runs with devices of multiples of them (sweep --param devices) "
                         "instead");
  if (req.tensor_parallel > 1)
    throw InputError("tensor_parallel", "tensor_parallel",
                     "scaling compares with one device, which cannot hold a tensor-parallel group of " +
                         std::to_string(req.tensor_parallel) +
                         "; compare runs with devices of multiples of it (sweep --param devices) instead");
}

std::vector<ScalingPoint> scaling_curve(const RunRequest& req, const RunOutcome& on_n_devices) {
  if (req.devices <= 1) throw InputError("devices", "devices", "a scaling curve needs devices > 1");
  check_scalable(req);
  const std::int64_t m = std::min(devices_per_server(req, load_config(req.config)), req.devices);
  std::vector<std::int64_t> counts;
  for (std::int64_t d = 1; d < m; d *= 2) counts.push_back(d);
  for (std::int64_t d = m; d < req.devices; d *= 2) counts.push_back(d);
  counts.push_back(req.devices);
  std::vector<ScalingPoint> out;
  // Per point and strategy: the time by cause (kScalingLosses) and the run's time.
  std::vector<std::vector<std::array<double, 6>>> causes;
  std::vector<std::vector<double>> run_s;
  const std::optional<std::int64_t> steps =
      on_n_devices.runs.empty() ? req.steps_per_epoch
                                : std::optional<std::int64_t>(on_n_devices.runs.front().session.steps_per_epoch);
  for (const std::int64_t d : counts) {
    RunOutcome own;
    const RunOutcome* o = &on_n_devices;
    if (d != req.devices) {
      RunRequest r = quiet(req);
      r.devices = d;
      r.devices_per_server = req.devices_per_server > 0 ? std::min(req.devices_per_server, d) : 0;
      r.steps_per_epoch = steps;
      if (d == 1) {
        r.all_reduce_fusion.clear();
        r.devices_per_server = 0;
        r.optimizer_shard = false;  // nothing to shard on one device
      }
      r.rank_sets.clear();
      for (const auto& [rank, sets] : req.rank_sets)
        if (rank < d) r.rank_sets[rank] = sets;
      own = run(r);
      if (own.failed())
        throw RunError("the " + std::to_string(d) +
                       "-device run of the scaling curve failed: " + own.failure_message());
      o = &own;
    }
    ScalingPoint p;
    p.devices = d;
    causes.emplace_back();
    run_s.emplace_back();
    for (const auto& x : o->runs) {
      p.samples_per_s.push_back(x.samples_per_s());
      p.step_ms.push_back(x.steps.step.stats().mean_ms);
      auto phase = [&x](Phase ph) { return x.breakdown_s[static_cast<std::size_t>(ph)]; };
      const double comm = phase(Phase::Comm);
      const double least = x.rank_comm_s.empty() ? comm : *std::min_element(x.rank_comm_s.begin(), x.rank_comm_s.end());
      double host = 0;
      for (Phase ph :
           {Phase::HostData, Phase::H2D, Phase::Launch, Phase::D2H, Phase::HostLoop, Phase::WaitData, Phase::Sync,
            Phase::Checkpoint})
        host += phase(ph);
      causes.back().push_back(
          {least, comm - least, host, phase(Phase::DeviceCompute), phase(Phase::Setup), phase(Phase::Eval)});
      run_s.back().push_back(x.sim_time_s);
    }
    out.push_back(std::move(p));
  }
  for (std::size_t k = 0; k < out.size(); ++k) {
    ScalingPoint& p = out[k];
    for (std::size_t i = 0; i < p.samples_per_s.size(); ++i) {
      const double base = out.front().samples_per_s.at(i);
      p.efficiency.push_back(base > 0 ? p.samples_per_s[i] / (static_cast<double>(p.devices) * base) : 0.0);
      std::array<double, 6> lost{};
      for (std::size_t c = 0; c < lost.size(); ++c)
        lost[c] = run_s[k][i] > 0 ? (causes[k][i][c] - causes[0][i][c]) / run_s[k][i] : 0.0;
      p.lost.push_back(lost);
    }
  }
  return out;
}

std::vector<double> scaling_efficiency(const RunRequest& req, const RunOutcome& on_n_devices) {
  if (req.devices <= 1) return std::vector<double>(on_n_devices.runs.size(), 1.0);
  check_scalable(req);
  RunRequest one = quiet(req);
  one.devices = 1;
  one.devices_per_server = 0;
  one.optimizer_shard = false;  // nothing to shard on one device
  one.all_reduce_fusion.clear();
  one.rank_sets.clear();
  one.steps_per_epoch = on_n_devices.runs.empty()
                            ? req.steps_per_epoch
                            : std::optional<std::int64_t>(on_n_devices.runs.front().session.steps_per_epoch);
  const RunOutcome single = run(one);
  if (single.failed()) throw RunError("the one-device run for --scaling failed: " + single.failure_message());
  std::vector<double> out;
  for (std::size_t i = 0; i < on_n_devices.runs.size(); ++i) {
    const double base = single.runs.at(i).samples_per_s();
    out.push_back(base > 0 ? on_n_devices.runs[i].samples_per_s() / (static_cast<double>(req.devices) * base) : 0.0);
  }
  return out;
}

FusionAdvice advise_fusion(const RunRequest& req, std::int64_t stride) {
  if (req.devices <= 1)
    throw InputError("devices", "devices", "fusion splits group AllReduces across devices; give devices > 1");
  if (stride < 1) throw InputError("stride", "stride", "must be a positive whole number");
  if (req.optimizer_shard || req.tensor_parallel > 1 || req.pipeline_stages > 1 || req.parallel_mode != "data") {
    const std::string key = req.optimizer_shard       ? "optimizer_shard"
                            : req.tensor_parallel > 1 ? "tensor_parallel"
                            : req.pipeline_stages > 1 ? "pipeline_stages"
                                                      : "parallel_mode";
    throw InputError(key, key,
                     "advise-fusion splits data parallelism's gradient AllReduce over every weight; run it without "
                     "sharded layouts, pipeline stages or a sharded optimizer");
  }
  FusionAdvice advice;
  const workloads::Workload w = build_workload(req, load_config(req.config));
  for (const auto& t : w.graph.tensors()) advice.gradients += t.role == workloads::TensorRole::Parameter;
  const std::int64_t n = advice.gradients;
  std::vector<std::vector<std::int64_t>> splits = {{}};
  for (std::int64_t a = stride - 1; a < n - 1; a += stride) splits.push_back({a});
  for (std::int64_t a = 4 * stride - 1; a < n - 1; a += 4 * stride)
    for (std::int64_t b = a + 4 * stride; b < n - 1; b += 4 * stride) splits.push_back({a, b});
  if (!req.all_reduce_fusion.empty() && std::find(splits.begin(), splits.end(), req.all_reduce_fusion) == splits.end())
    splits.push_back(req.all_reduce_fusion);
  for (const auto& split : splits) {
    RunRequest r = quiet(req);
    r.strategies = {runtime::Strategy::LoopSink};
    r.all_reduce_fusion = split;
    const RunOutcome out = run(r);
    if (out.failed()) throw RunError("split failed: " + out.failure_message());
    const auto& run0 = out.runs.front();
    advice.candidates.push_back({split, run0.steps.tail.stats().mean_ms, run0.steps.step.stats().mean_ms,
                                 run0.breakdown_s[static_cast<std::size_t>(Phase::Comm)]});
  }
  // The step, not the tail: what a collective overlapping the backward pass costs it through the
  // shared HBM lengthens fp_and_bp, which the tail does not see.
  std::stable_sort(advice.candidates.begin(), advice.candidates.end(), [](const auto& a, const auto& b) {
    return a.step_ms != b.step_ms ? a.step_ms < b.step_ms : a.tail_ms < b.tail_ms;
  });
  return advice;
}

}  // namespace ascendsim::sim
