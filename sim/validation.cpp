// Validation (sim/regression.h): the figures file read (published figures, their runs, the bounds
// `calibrate` fits within), and each figure simulated (its rows written as a table, HTML and
// JSON by sim/report/validation_report.cpp).
#include "sim/regression.h"

#include <algorithm>
#include <cmath>
#include <filesystem>

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include "sim/config.h"
#include "sim/core/error.h"
#include "sim/core/params.h"
#include "sim/run_yaml.h"

namespace ascendsim::sim {

namespace fs = std::filesystem;
using nlohmann::ordered_json;
using run_yaml::number;
using run_yaml::parse_run;
using run_yaml::scalar;

namespace {

/// The `fit:` section: per parameter key, min, max and why.
std::vector<FitBounds> parse_fit_bounds(const YAML::Node& fit, const std::string& path, const std::string& config_dir) {
  const std::string at0 = path + ":" + std::to_string(fit.Mark().line + 1);
  if (!fit.IsMap()) throw InputError(at0 + ": 'fit' is a mapping of parameter keys to {min, max, why}");
  (void)config_dir;
  SystemConfig cfg;
  ParamSet ps = bind_params(cfg);
  std::vector<FitBounds> out;
  for (const auto& kv : fit) {
    FitBounds b;
    b.key = kv.first.as<std::string>();
    const std::string at = path + ":" + std::to_string(kv.first.Mark().line + 1) + ": fit: " + b.key;
    const ParamSpec* spec = ps.find(b.key);
    if (!spec) {
      try {
        ps.set(b.key, "0", at);
      } catch (const InputError& e) {
        throw InputError(at + ": " + e.detail());
      }
      throw InputError(at + ": unknown parameter (`ascendsim params` lists them)");
    }
    if (spec->type != ParamType::Real)
      throw InputError(at + ": not a real-valued parameter; calibrate fits real-valued ones");
    for (const auto& seen : out)
      if (seen.key == b.key) throw InputError(at + ": given twice; keep one");
    if (!kv.second.IsMap()) throw InputError(at + ": give a mapping {min, max, why}");
    bool has_min = false, has_max = false;
    for (const auto& f : kv.second) {
      const std::string k = f.first.as<std::string>();
      if (k == "min") {
        b.min = number(f.second, at, k);
        has_min = true;
      } else if (k == "max") {
        b.max = number(f.second, at, k);
        has_max = true;
      } else if (k == "why") {
        b.why = scalar(f.second, at, k);
      } else {
        throw InputError(at + ": unknown key '" + k + "' (min, max, why)");
      }
    }
    if (!has_min || !has_max || b.why.empty())
      throw InputError(at + ": give min, max and why (the physical reasoning for the range)");
    if (!(b.min > 0) || !(b.max > b.min))
      throw InputError(
          at + fmt::format(": min {:g}, max {:g}: give 0 < min < max (the fit works on the logarithm)", b.min, b.max));
    if (b.min < spec->min || b.max > spec->max)
      throw InputError(at + fmt::format(": [{:g}, {:g}] leaves the parameter's range {}", b.min, b.max,
                                        ParamSet::range_string(*spec)));
    out.push_back(std::move(b));
  }
  return out;
}

}  // namespace

FiguresFile load_figures_file(const std::string& path, const std::string& config_dir) {
  if (!fs::is_regular_file(path)) throw InputError(path + ": no such figures file");
  YAML::Node root;
  try {
    root = YAML::LoadFile(path);
  } catch (const YAML::Exception& e) {
    throw InputError(path + ":" + std::to_string(e.mark.line + 1) + ": malformed YAML: " + e.msg);
  }
  if (!root.IsMap() || !root["figures"] || !root["figures"].IsSequence())
    throw InputError(path + ": a figures file is a mapping with a list `figures`");
  for (const auto& kv : root) {
    const std::string key = kv.first.as<std::string>();
    if (key != "figures" && key != "fit")
      throw InputError(path + ":" + std::to_string(kv.first.Mark().line + 1) + ": unknown key '" + key +
                       "' (figures, fit)");
  }
  FiguresFile file;
  file.path = path;
  std::vector<PublishedFigure>& out = file.figures;
  for (const auto& f : root["figures"]) {
    const std::string at = path + ":" + std::to_string(f.Mark().line + 1);
    if (!f.IsMap()) throw InputError(at + ": a figure is a mapping");
    PublishedFigure p;
    for (const auto& kv : f) {
      const std::string key = kv.first.as<std::string>();
      const YAML::Node& v = kv.second;
      if (key == "id")
        p.id = scalar(v, at, key);
      else if (key == "value") {
        try {
          p.value = std::stod(scalar(v, at, key));
        } catch (const std::exception&) {
          throw InputError(at + ": 'value' expects a number");
        }
      } else if (key == "unit")
        p.unit = scalar(v, at, key);
      else if (key == "measure")
        p.measure = scalar(v, at, key);
      else if (key == "configuration")
        p.configuration = scalar(v, at, key);
      else if (key == "source")
        p.source = scalar(v, at, key);
      else if (key == "host_bound") {
        const std::string b = scalar(v, at, key);
        if (b != "true" && b != "false") throw InputError(at + ": 'host_bound' is true or false");
        p.host_bound = b == "true";
      } else if (key == "not_compared") {
        p.not_compared = scalar(v, at, key);
        if (p.not_compared.empty()) throw InputError(at + ": 'not_compared' gives the reason; remove it to count the figure");
      } else if (key == "run") {
        if (!v.IsMap()) throw InputError(at + ": 'run' is a mapping (workload, strategies, ...)");
        if (v["serve"]) {
          p.serve = run_yaml::parse_serve_run(v, at + ": run", config_dir, nullptr);
          p.run.config = p.serve->config;  // the server and presets its figure is simulated on
          p.run.devices = p.serve->devices;
        } else
          p.run = parse_run(v, at + ": run", config_dir, nullptr);
      } else {
        throw InputError(at + ": unknown key '" + key +
                         "' (id, value, unit, measure, configuration, source, host_bound, not_compared, run)");
      }
    }
    if (p.measure != "step_time_ms" && p.measure != "samples_per_s" && p.measure != "peak_tflops" &&
        p.measure != "eval_pass_s" && p.measure != "epoch_s" && p.measure != "first_epoch_s" &&
        p.measure != "tokens_per_s_per_device" && p.measure != "tpot_ms" && p.measure != "ttft_ms" &&
        p.measure != "time_to_train_s")
      throw InputError(at + ": 'measure' is step_time_ms, samples_per_s, tokens_per_s_per_device, eval_pass_s, epoch_s, "
                            "first_epoch_s, time_to_train_s, peak_tflops, or a serving run's tpot_ms or ttft_ms");
    if ((p.measure == "tpot_ms" || p.measure == "ttft_ms") != p.serve.has_value())
      throw InputError(at + ": tpot_ms and ttft_ms measure a serving run (serve: true), and a serving run is "
                            "measured by them");
    if (p.serve && p.serve->launch.size() != 1)
      throw InputError(at + ": a serving figure's run has exactly one launch mode");
    if (p.measure == "eval_pass_s" && p.run.eval_every <= 0)
      throw InputError(at + ": 'eval_pass_s' measures evaluation passes; give the run eval_every > 0");
    if (p.measure == "epoch_s" && p.run.epochs < 2)
      throw InputError(at + ": 'epoch_s' is the mean of the epochs after the first; give the run epochs >= 2");
    if (p.id.empty() || !(p.value > 0)) throw InputError(at + ": a figure needs an id and a positive value");
    if (p.host_bound && !p.not_compared.empty())
      throw InputError(at + ": a figure that is not compared is not fitted to either; drop host_bound or not_compared");
    for (const auto& seen : out)
      if (seen.id == p.id) throw InputError(at + ": figure id '" + p.id + "' is given twice; ids are unique");
    out.push_back(std::move(p));
  }
  if (root["fit"]) file.bounds = parse_fit_bounds(root["fit"], path, config_dir);
  return file;
}

std::vector<PublishedFigure> load_figures(const std::string& path, const std::string& config_dir) {
  return load_figures_file(path, config_dir).figures;
}

double simulate_figure(const PublishedFigure& f, const std::vector<std::string>& extra_sets) {
  if (f.measure == "peak_tflops") {
    ConfigRequest c = f.run.config;
    c.sets.insert(c.sets.end(), extra_sets.begin(), extra_sets.end());
    const SystemConfig cfg = load_config(c);
    const auto& a = cfg.chip.aicore;
    return 2.0 * static_cast<double>(a.cores * a.cube_fp16_macs_per_cycle) * a.freq_ghz / 1e3;
  }
  if (f.serve) {  // the requests' mean time to first token or per output token
    ServeRequest sreq = *f.serve;
    sreq.config.sets.insert(sreq.config.sets.end(), extra_sets.begin(), extra_sets.end());
    const ServeOutcome out = serve(sreq);
    double sum = 0;
    std::int64_t n = 0;
    for (const auto& r : out.runs.front().log.requests) {
      if (f.measure == "tpot_ms" && r.output_tokens <= 1) continue;
      sum += f.measure == "tpot_ms" ? r.tpot_s() : r.ttft_s();
      ++n;
    }
    if (n == 0) throw InputError(f.id + ": no request of the serving run has a time to measure");
    return 1e3 * sum / static_cast<double>(n);
  }
  RunRequest req = f.run;
  req.config.sets.insert(req.config.sets.end(), extra_sets.begin(), extra_sets.end());
  if (req.strategies.size() != 1) throw InputError(f.id + ": a validation run has exactly one strategy");
  const RunOutcome out = run(req);
  if (out.failed()) throw InputError(f.id + ": the run failed: " + out.failure_message());
  const auto& run0 = out.runs.front();
  // Published epoch times are MindSpore's TimeMonitor's: the first epoch (graph load, pipeline
  // fill, a cache's inserts, a cold storage), or the mean of the later ones. A run that simulates
  // fewer steps per epoch than the dataset has scales its epochs to the dataset's steps.
  const auto& epochs = run0.epoch_s();
  if (f.measure == "first_epoch_s" || f.measure == "epoch_s") {
    if (epochs.size() < (f.measure == "epoch_s" ? 2u : 1u))
      throw InputError(f.id + ": the run completed " + std::to_string(epochs.size()) + " epoch(s)");
    const auto& s = run0.session;
    const double scale = s.dataset_steps_per_epoch > 0 ? static_cast<double>(s.dataset_steps_per_epoch) /
                                                             static_cast<double>(s.steps_per_epoch)
                                                       : 1.0;
    if (f.measure == "first_epoch_s") return scale * epochs.front();
    double later = 0;
    for (std::size_t e = 1; e < epochs.size(); ++e) later += epochs[e];
    return scale * later / static_cast<double>(epochs.size() - 1);
  }
  // Published per-step figures quote the steady state (MindSpore's per-step time of a later
  // epoch): the steady mean, not the warm-up's graph load and pipeline fill.
  if (f.measure == "tokens_per_s_per_device") {
    if (run0.tokens_per_sample <= 0) throw InputError(f.id + ": tokens_per_s_per_device measures a transformer's run");
    return run0.steady_samples_per_s() * static_cast<double>(run0.tokens_per_sample) /
           static_cast<double>(std::max<std::int64_t>(1, f.run.devices));
  }
  // MLPerf's timed region, run_start to run_stop: the whole run less its initialisation.
  if (f.measure == "time_to_train_s") {
    const auto t = run0.time_to_train();
    return t.total - t.initialisation;
  }
  return f.measure == "step_time_ms"  ? run0.steps.steady.stats().mean_ms
         : f.measure == "eval_pass_s" ? run0.evaluation().later_mean_s
                                      : run0.steady_samples_per_s();
}

std::vector<ValidationRow> validate(const std::vector<PublishedFigure>& figures) {
  std::vector<ValidationRow> rows;
  for (const auto& f : figures) {
    ValidationRow r{f, 0, 0, false, false, {}};
    r.simulated = simulate_figure(f);
    r.error = (r.simulated - f.value) / f.value;
    r.compared = f.not_compared.empty();
    r.simulated_only = !r.compared;
    r.note = f.not_compared;
    rows.push_back(r);
  }
  return rows;
}

}  // namespace ascendsim::sim
