#include "sim/regression.h"

#include "sim/rank_table.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <optional>
#include <set>

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include "runtime/html_report.h"
#include "runtime/report.h"
#include "sim/config.h"
#include "sim/core/error.h"
#include "sim/core/params.h"

namespace ascendsim::sim {

namespace fs = std::filesystem;
using nlohmann::ordered_json;

namespace {

std::string scalar(const YAML::Node& n, const std::string& where, const std::string& key) {
  if (!n.IsScalar()) throw InputError(where + ": '" + key + "' needs a single value");
  return n.Scalar();
}

std::int64_t whole(const YAML::Node& n, const std::string& where, const std::string& key) {
  const std::string s = scalar(n, where, key);
  std::size_t used = 0;
  std::int64_t v = 0;
  try {
    v = std::stoll(s, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != s.size() || s.empty())
    throw InputError(where + ": '" + key + "' expects a whole number, got '" + s + "'");
  return v;
}

bool valid_name(const std::string& n) {
  if (n.empty() || n[0] == '.') return false;
  for (char c : n)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.')) return false;
  return true;
}

}  // namespace

namespace {
RunRequest parse_run(const YAML::Node& run, const std::string& at, const std::string& config_dir, std::string* name) {
  RunRequest r;
  r.config.dir = config_dir;
  bool batch_given = false;
  for (const auto& kv : run) {
    const std::string key = kv.first.as<std::string>();
    const YAML::Node& v = kv.second;
    if (key == "name" && name) {
      *name = scalar(v, at, key);
    } else if (key == "workload") {
      r.workload = scalar(v, at, key);
    } else if (key == "model") {
      r.model = scalar(v, at, key);
    } else if (key == "mode") {
      r.mode = scalar(v, at, key);
    } else if (key == "loss") {
      r.loss = scalar(v, at, key);
    } else if (key == "strategies") {
      if (!v.IsSequence() || v.size() == 0) throw InputError(at + ": 'strategies' is a non-empty list");
      r.strategies.clear();
      for (const auto& s : v) r.strategies.push_back(runtime::parse_strategy(scalar(s, at, key)));
    } else if (key == "epochs") {
      r.epochs = whole(v, at, key);
    } else if (key == "steps_per_epoch") {
      r.steps_per_epoch = whole(v, at, key);
    } else if (key == "batch_size") {
      r.batch_size = whole(v, at, key);
      batch_given = true;
    } else if (key == "sink_size") {
      r.sink_size = whole(v, at, key);
    } else if (key == "devices") {
      r.devices = whole(v, at, key);
    } else if (key == "rank_table") {
      const RankTable t = load_rank_table(scalar(v, at, key));
      r.devices = static_cast<std::int64_t>(t.devices.size());
      r.devices_per_server = t.devices_per_server();
    } else if (key == "all_reduce_fusion") {
      if (!v.IsSequence()) throw InputError(at + ": 'all_reduce_fusion' is a list of gradient indices, e.g. [85, 160]");
      for (const auto& x : v) r.all_reduce_fusion.push_back(whole(x, at, key));
    } else if (key == "parameter_broadcast") {
      const std::string b = scalar(v, at, key);
      if (b != "true" && b != "false") throw InputError(at + ": 'parameter_broadcast' is true or false");
      r.parameter_broadcast = b == "true";
    } else if (key == "chip") {
      r.config.chip = scalar(v, at, key);
    } else if (key == "server") {
      r.config.server = scalar(v, at, key);
    } else if (key == "config") {  // as --config; a relative path is in the configuration directory
      const fs::path file = fs::path(scalar(v, at, key)).is_absolute() ? fs::path(scalar(v, at, key))
                                                                       : fs::path(config_dir) / scalar(v, at, key);
      if (!fs::is_regular_file(file))
        throw InputError(at + ": config: no file " + file.string() +
                         " (a YAML of parameters, as --config; relative to the configuration directory)");
      r.config.config_file = file.string();
    } else if (key == "dataset") {
      r.dataset = scalar(v, at, key);
    } else if (key == "dataset_index") {
      r.dataset_index = scalar(v, at, key);
    } else if (key == "eval_every") {
      r.eval_every = whole(v, at, key);
    } else if (key == "amp_level") {
      r.recipe.amp_level = scalar(v, at, key);
    } else if (key == "keep_batchnorm_fp32") {
      const std::string b = scalar(v, at, key);
      if (b != "true" && b != "false") throw InputError(at + ": 'keep_batchnorm_fp32' is true or false");
      r.recipe.keep_batchnorm_fp32 = b == "true";
    } else if (key == "graph_kernel_fusion") {
      const std::string b = scalar(v, at, key);
      if (b != "true" && b != "false") throw InputError(at + ": 'graph_kernel_fusion' is true or false");
      r.recipe.graph_kernel_fusion = b == "true";
    } else if (key == "ub_fusion") {
      const std::string b = scalar(v, at, key);
      if (b != "true" && b != "false") throw InputError(at + ": 'ub_fusion' is true or false");
      r.recipe.ub_fusion = b == "true";
    } else if (key == "loss_scale") {
      r.recipe.loss_scale = static_cast<double>(whole(v, at, key));
    } else if (key == "set") {
      if (v.IsMap()) {
        for (const auto& p : v) r.config.sets.push_back(p.first.as<std::string>() + "=" + scalar(p.second, at, key));
      } else if (v.IsSequence()) {
        for (const auto& p : v) r.config.sets.push_back(scalar(p, at, key));
      } else {
        throw InputError(at + ": 'set' is a mapping of parameter keys to values (or a list of key=value)");
      }
    } else {
      throw InputError(at + ": unknown key '" + key + "' (a run takes " + (name ? "name, " : "") +
                       "workload, model, mode, loss, strategies, epochs, steps_per_epoch, batch_size, sink_size, "
                       "devices, rank_table, "
                       "all_reduce_fusion, parameter_broadcast, server, chip, config, "
                       "dataset, dataset_index, eval_every, "
                       "amp_level, keep_batchnorm_fp32, loss_scale, graph_kernel_fusion, ub_fusion, set)");
    }
  }
  if (!r.model.empty() && !batch_given) r.batch_size = 0;  // the model's own
  return r;
}

bool boolean(const YAML::Node& v, const std::string& at, const std::string& key) {
  const std::string b = scalar(v, at, key);
  if (b != "true" && b != "false") throw InputError(at + ": '" + key + "' is true or false");
  return b == "true";
}

/// `s` as a number if all of it is one.
std::optional<double> whole_real(const std::string& s) {
  std::size_t used = 0;
  double v = 0;
  try {
    v = std::stod(s, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (s.empty() || used != s.size()) return std::nullopt;
  return v;
}

double number(const YAML::Node& n, const std::string& at, const std::string& key) {
  const std::string s = scalar(n, at, key);
  const std::optional<double> parsed = whole_real(s);
  const double v = parsed.value_or(0);
  if (!parsed || !std::isfinite(v)) throw InputError(at + ": '" + key + "' expects a number, got '" + s + "'");
  return v;
}

/// A serving run of a suite (`serve: true`), its keys those of ServeRequest.
ServeRequest parse_serve_run(const YAML::Node& run, const std::string& at, const std::string& config_dir,
                             std::string* name) {
  ServeRequest r;
  r.config.dir = config_dir;
  auto list = [&](const YAML::Node& v, const std::string& key) {
    if (!v.IsSequence() || v.size() == 0) throw InputError(at + ": '" + key + "' is a non-empty list");
    return v;
  };
  for (const auto& kv : run) {
    const std::string key = kv.first.as<std::string>();
    const YAML::Node& v = kv.second;
    if (key == "name")
      *name = scalar(v, at, key);
    else if (key == "serve") {
      if (!boolean(v, at, key)) throw InputError(at + ": 'serve' is true for a serving run (leave it out otherwise)");
    } else if (key == "workload")
      r.workload = scalar(v, at, key);
    else if (key == "gpt_size")
      r.gpt_size = scalar(v, at, key);
    else if (key == "layers")
      r.shape.layers = whole(v, at, key);
    else if (key == "hidden")
      r.shape.hidden = whole(v, at, key);
    else if (key == "heads")
      r.shape.heads = whole(v, at, key);
    else if (key == "ffn")
      r.shape.ffn = whole(v, at, key);
    else if (key == "vocab")
      r.shape.vocab = whole(v, at, key);
    else if (key == "server")
      r.config.server = scalar(v, at, key);
    else if (key == "chip")
      r.config.chip = scalar(v, at, key);
    else if (key == "devices")
      r.devices = whole(v, at, key);
    else if (key == "tensor_parallel")
      r.tensor_parallel = whole(v, at, key);
    else if (key == "launch") {
      r.launch.clear();
      for (const auto& m : list(v, key)) r.launch.push_back(runtime::parse_launch_mode(scalar(m, at, key)));
    } else if (key == "rate")
      r.rate = number(v, at, key);
    else if (key == "requests")
      r.requests = whole(v, at, key);
    else if (key == "prompt_tokens")
      r.prompt_tokens = whole(v, at, key);
    else if (key == "output_tokens")
      r.output_tokens = whole(v, at, key);
    else if (key == "length_spread")
      r.length_spread = number(v, at, key);
    else if (key == "arrivals")
      r.arrivals = scalar(v, at, key);
    else if (key == "seed")
      r.seed = static_cast<std::uint64_t>(whole(v, at, key));
    else if (key == "max_seqs")
      r.max_seqs = whole(v, at, key);
    else if (key == "max_batched_tokens")
      r.max_batched_tokens = whole(v, at, key);
    else if (key == "chunked_prefill")
      r.chunked_prefill = boolean(v, at, key);
    else if (key == "block_size")
      r.block_size = whole(v, at, key);
    else if (key == "kv_blocks")
      r.kv_blocks = whole(v, at, key);
    else if (key == "memory_utilization")
      r.memory_utilization = number(v, at, key);
    else if (key == "multi_step")
      r.multi_step = whole(v, at, key);
    else if (key == "sampling")
      r.sampling = scalar(v, at, key);
    else if (key == "capture")
      r.capture = scalar(v, at, key);
    else if (key == "slo_ttft_ms")
      r.slo_ttft_ms = number(v, at, key);
    else if (key == "slo_tpot_ms")
      r.slo_tpot_ms = number(v, at, key);
    else if (key == "graph_buckets") {
      r.graph_buckets.clear();
      for (const auto& b : list(v, key)) r.graph_buckets.push_back(whole(b, at, key));
    } else if (key == "rates") {
      for (const auto& b : list(v, key)) r.rates.push_back(number(b, at, key));
    } else if (key == "decode_batches") {
      r.decode_batches.clear();
      for (const auto& b : list(v, key)) r.decode_batches.push_back(whole(b, at, key));
    } else if (key == "set") {
      if (!v.IsMap()) throw InputError(at + ": 'set' is a mapping of parameter keys to values");
      for (const auto& p : v) r.config.sets.push_back(p.first.as<std::string>() + "=" + scalar(p.second, at, key));
    } else {
      throw InputError(
          at + ": unknown key '" + key +
          "' (a serving run takes name, serve, workload, gpt_size, layers, hidden, heads, ffn, vocab, "
          "server, chip, set, devices, tensor_parallel, launch, rate, requests, prompt_tokens, "
          "output_tokens, length_spread, arrivals, seed, max_seqs, max_batched_tokens, chunked_prefill, "
          "block_size, kv_blocks, memory_utilization, multi_step, sampling, capture, graph_buckets, rates, "
          "decode_batches, slo_ttft_ms, slo_tpot_ms)");
    }
  }
  return r;
}

}  // namespace

std::vector<SuiteEntry> load_suite(const std::string& path, const std::string& config_dir, std::string* suite_name) {
  if (fs::is_directory(path)) throw InputError(path + ": is a directory; give a suite YAML file");
  if (!fs::exists(path)) throw InputError(path + ": no such suite file");
  YAML::Node root;
  try {
    root = YAML::LoadFile(path);
  } catch (const YAML::Exception& e) {
    throw InputError(path + ":" + std::to_string(e.mark.line + 1) + ": malformed YAML: " + e.msg);
  }
  if (!root.IsMap() || !root["runs"] || !root["runs"].IsSequence() || root["runs"].size() == 0)
    throw InputError(path + ": a suite is a mapping with `name` and a non-empty list `runs`");
  for (const auto& kv : root) {
    const std::string k = kv.first.as<std::string>();
    if (k != "name" && k != "runs") throw InputError(path + ": unknown key '" + k + "' (a suite has name and runs)");
  }
  if (suite_name) *suite_name = root["name"] ? scalar(root["name"], path, "name") : fs::path(path).stem().string();
  std::vector<SuiteEntry> out;
  std::set<std::string> names;
  std::size_t index = 0;
  for (const auto& run : root["runs"]) {
    ++index;
    const std::string at = path + ":" + std::to_string(run.Mark().line + 1) + ": run " + std::to_string(index);
    if (!run.IsMap()) throw InputError(at + ": a run is a mapping (name, workload, ...)");
    SuiteEntry e;
    if (run["serve"])
      e.serve = parse_serve_run(run, at, config_dir, &e.name);
    else
      e.request = parse_run(run, at, config_dir, &e.name);
    if (!valid_name(e.name))
      throw InputError(at + ": needs a `name` of letters, digits, '-', '_' or '.' (it names the report file)");
    if (!names.insert(e.name).second) throw InputError(at + ": the name '" + e.name + "' is used twice");
    out.push_back(std::move(e));
  }
  return out;
}

namespace {

struct Loaded {
  std::string label;
  ordered_json report;
};

ordered_json read_json(const std::string& path) {
  std::ifstream f(path);
  if (!f) throw InputError(path + ": cannot read");
  try {
    return ordered_json::parse(f);
  } catch (const std::exception& e) {
    throw InputError(path + ": not a JSON report (" + std::string(e.what()) + ")");
  }
}

/// A report file, or every report of a suite directory, labelled by entry.
std::vector<Loaded> load_reports(const std::string& path) {
  if (fs::is_directory(path)) {
    const fs::path index = fs::path(path) / "index.json";
    if (!fs::exists(index)) throw InputError(path + ": a directory without index.json is not a suite output");
    const ordered_json idx = read_json(index.string());
    std::vector<Loaded> out;
    for (const auto& e : idx.value("entries", ordered_json::array()))
      out.push_back(
          {e.at("name").get<std::string>(), read_json((fs::path(path) / e.at("file").get<std::string>()).string())});
    return out;
  }
  const ordered_json r = read_json(path);
  if (!r.contains("runs") || !r["runs"].is_array())
    throw InputError(path + ": not a compare, train or serve report (no runs)");
  return {{"", r}};
}

/// One figure of a run in both reports (numbers only), marked past the tolerance if it moved more.
void add_figure(DiffResult& d, const std::string& run, const std::string& name, const ordered_json& x,
                const ordered_json& y, double tolerance) {
  if (!x.is_number() || !y.is_number()) return;
  FigureChange f;
  f.run = run;
  f.figure = name;
  f.base = x.get<double>();
  f.now = y.get<double>();
  if (f.base == f.now)
    f.relative = 0;
  else if (f.base == 0)
    f.relative = std::numeric_limits<double>::infinity();
  else
    f.relative = (f.now - f.base) / std::fabs(f.base);
  f.past_tolerance = std::fabs(f.relative) > tolerance;
  d.figures.push_back(f);
}

void add_figures(DiffResult& d, const std::string& run, const ordered_json& a, const ordered_json& b,
                 double tolerance) {
  auto figure = [&](const std::string& name, const ordered_json& x, const ordered_json& y) {
    add_figure(d, run, name, x, y, tolerance);
  };
  figure("sim_time_s", a["sim_time_s"], b["sim_time_s"]);
  for (const char* k : {"mean", "p50", "p99"})
    figure(std::string("step_time_ms.") + k, a["step_time_ms"][k], b["step_time_ms"][k]);
  figure("samples_per_s", a["samples_per_s"], b["samples_per_s"]);
  figure("device_busy_fraction", a["device_busy_fraction"], b["device_busy_fraction"]);
  for (const auto& [k, v] : a["breakdown_s"].items())
    if (b["breakdown_s"].contains(k)) figure("breakdown_s." + k, v, b["breakdown_s"][k]);
  for (const auto& [k, v] : a["interactions"].items())
    if (b["interactions"].contains(k)) figure("interactions." + k, v, b["interactions"][k]);
}

}  // namespace

namespace {
/// A serving run's figures: throughput, the latency percentiles, the decode step and its phases,
/// the cache's peak and the preemptions.
void add_serving_figures(DiffResult& d, const std::string& run, const ordered_json& a, const ordered_json& b,
                         double tolerance) {
  auto figure = [&](const std::string& name, const ordered_json& x, const ordered_json& y) {
    add_figure(d, run, name, x, y, tolerance);
  };
  for (const char* k : {"duration_s", "requests_per_s", "output_tokens_per_s"}) figure(k, a[k], b[k]);
  figure("goodput.requests_per_s", a["goodput"]["requests_per_s"], b["goodput"]["requests_per_s"]);
  for (const char* m : {"ttft_ms", "tpot_ms", "e2e_ms"})
    for (const char* q : {"mean", "p50", "p90", "p99"}) figure(std::string(m) + "." + q, a[m][q], b[m][q]);
  figure("decode_step_ms.mean", a["decode_step_ms"]["mean"], b["decode_step_ms"]["mean"]);
  for (const auto& [k, v] : a["decode_step_ms"]["phases"].items())
    figure("decode_step_ms.phases." + k, v, b["decode_step_ms"]["phases"][k]);
  figure("kv_cache.peak_blocks", a["kv_cache"]["peak_blocks"], b["kv_cache"]["peak_blocks"]);
  figure("preemptions", a["preemptions"], b["preemptions"]);
  figure("steps.launches", a["steps"]["launches"], b["steps"]["launches"]);
}
}  // namespace

bool DiffResult::moved() const {
  for (const auto& f : figures)
    if (f.past_tolerance) return true;
  return false;
}

DiffResult diff_reports(const std::string& base, const std::string& now, double tolerance) {
  if (!(tolerance >= 0)) throw InputError("tolerance must not be negative");
  const auto a = load_reports(base), b = load_reports(now);
  if (a.size() != b.size())
    throw InputError(base + " has " + std::to_string(a.size()) + " report(s), " + now + " " + std::to_string(b.size()) +
                     ": not the same suite");
  DiffResult d;
  for (std::size_t i = 0; i < a.size(); ++i) {
    const std::string entry = a[i].label;
    if (entry != b[i].label)
      throw InputError("entry " + std::to_string(i + 1) + " is '" + entry + "' in " + base + " and '" + b[i].label +
                       "' in " + now);
    const auto& ra = a[i].report;
    const auto& rb = b[i].report;
    const std::string where = entry.empty() ? std::string() : entry + ": ";
    const bool serving = ra.value("kind", "") == "serving";
    if (serving != (rb.value("kind", "") == "serving"))
      throw InputError(where + "a serving report and a training report: not comparable");
    for (const char* k : {"workload", "batch_size", "devices", "tensor_parallel"})
      if (ra.value(k, ordered_json()) != rb.value(k, ordered_json()))
        throw InputError(where + "different " + k + " (" + ra.value(k, ordered_json()).dump() + " in " + base + ", " +
                         rb.value(k, ordered_json()).dump() + " in " + now + "): not comparable");
    if (ra["runs"].size() != rb["runs"].size())
      throw InputError(where + "different " + (serving ? "launch modes" : "strategies") + " (" +
                       std::to_string(ra["runs"].size()) + " and " + std::to_string(rb["runs"].size()) +
                       " runs): not comparable");
    for (std::size_t r = 0; r < ra["runs"].size(); ++r) {
      const auto& x = ra["runs"][r];
      const auto& y = rb["runs"][r];
      if (serving) {
        if (x["launch"] != y["launch"] || x["requests"] != y["requests"])
          throw InputError(where + "run " + std::to_string(r + 1) + " serves " + x["requests"].dump() + " requests " +
                           x["launch"].dump() + " in " + base + " and " + y["requests"].dump() + " " +
                           y["launch"].dump() + " in " + now + ": not comparable");
        add_serving_figures(d, (entry.empty() ? "" : entry + "/") + x["launch"].get<std::string>(), x, y, tolerance);
        continue;
      }
      if (x["strategy"] != y["strategy"])
        throw InputError(where + "run " + std::to_string(r + 1) + " is " + x["strategy"].dump() + " in " + base +
                         " and " + y["strategy"].dump() + " in " + now + ": not comparable");
      if (x["steps"] != y["steps"])
        throw InputError(where + x["strategy"].get<std::string>() + " ran " + x["steps"].dump() + " steps in " + base +
                         " and " + y["steps"].dump() + " in " + now + ": not comparable");
      add_figures(d, (entry.empty() ? "" : entry + "/") + x["strategy"].get<std::string>(), x, y, tolerance);
    }
  }
  return d;
}

namespace {
std::string percent(double r) {
  if (std::isinf(r)) return r > 0 ? "new" : "-new";
  return fmt::format("{:+.3f}%", 100 * r);
}
}  // namespace

std::string diff_table(const DiffResult& d, double tolerance, bool all) {
  std::size_t wr = 3, wf = 6;
  for (const auto& f : d.figures) {
    wr = std::max(wr, f.run.size());
    wf = std::max(wf, f.figure.size());
  }
  std::string out =
      fmt::format("{:<{}}  {:<{}}  {:>16}  {:>16}  {:>10}\n", "run", wr, "figure", wf, "base", "new", "change");
  int moved = 0, past = 0;
  for (const auto& f : d.figures) {
    if (f.relative == 0 && !all) continue;
    ++moved;
    past += f.past_tolerance;
    out += fmt::format("{:<{}}  {:<{}}  {:>16.9g}  {:>16.9g}  {:>10}{}\n", f.run, wr, f.figure, wf, f.base, f.now,
                       percent(f.relative), f.past_tolerance ? "  past tolerance" : "");
  }
  out += fmt::format("\n{} figure(s) compared, {} moved, {} past the tolerance of {:g}%\n", d.figures.size(), moved,
                     past, 100 * tolerance);
  return out;
}

std::string diff_junit(const DiffResult& d, double tolerance) {
  const auto esc = runtime::escape_xml;
  int failures = 0;
  for (const auto& f : d.figures) failures += f.past_tolerance;
  std::string out = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  out += fmt::format("<testsuites><testsuite name=\"ascendsim diff\" tests=\"{}\" failures=\"{}\">\n", d.figures.size(),
                     failures);
  for (const auto& f : d.figures) {
    out += fmt::format("  <testcase classname=\"{}\" name=\"{}\"", esc(f.run), esc(f.figure));
    if (!f.past_tolerance) {
      out += "/>\n";
      continue;
    }
    out += fmt::format(
        "><failure message=\"{} moved {} (tolerance {:g}%)\">base {:.9g}, new {:.9g}</failure></testcase>\n",
        esc(f.figure), esc(percent(f.relative)), 100 * tolerance, f.base, f.now);
  }
  out += "</testsuite></testsuites>\n";
  return out;
}

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
        p.run = parse_run(v, at + ": run", config_dir, nullptr);
      } else {
        throw InputError(at + ": unknown key '" + key +
                         "' (id, value, unit, measure, configuration, source, host_bound, not_compared, run)");
      }
    }
    if (p.measure != "step_time_ms" && p.measure != "samples_per_s" && p.measure != "peak_tflops" &&
        p.measure != "eval_pass_s" && p.measure != "epoch_s" && p.measure != "first_epoch_s")
      throw InputError(at +
                       ": 'measure' is step_time_ms, samples_per_s, eval_pass_s, epoch_s, first_epoch_s or peak_tflops");
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
  if (f.run.devices > 8)
    throw InputError(f.id + ": " + std::to_string(f.run.devices) +
                     " devices: joins when clusters of several servers are modelled");
  if (f.measure == "peak_tflops") {
    ConfigRequest c = f.run.config;
    c.sets.insert(c.sets.end(), extra_sets.begin(), extra_sets.end());
    const SystemConfig cfg = load_config(c);
    const auto& a = cfg.chip.aicore;
    return 2.0 * static_cast<double>(a.cores * a.cube_fp16_macs_per_cycle) * a.freq_ghz / 1e3;
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
  return f.measure == "step_time_ms"  ? run0.steps.steady.stats().mean_ms
         : f.measure == "eval_pass_s" ? run0.evaluation().later_mean_s
                                      : run0.steady_samples_per_s();
}

std::vector<ValidationRow> validate(const std::vector<PublishedFigure>& figures) {
  std::vector<ValidationRow> rows;
  for (const auto& f : figures) {
    ValidationRow r{f, 0, 0, false, false, {}};
    if (f.run.devices > 8) {
      r.note = std::to_string(f.run.devices) + " devices: joins when clusters of several servers are modelled";
      rows.push_back(r);
      continue;
    }
    r.simulated = simulate_figure(f);
    r.error = (r.simulated - f.value) / f.value;
    r.compared = f.not_compared.empty();
    r.simulated_only = !r.compared;
    r.note = f.not_compared;
    rows.push_back(r);
  }
  return rows;
}

std::string validation_html(const std::vector<ValidationRow>& rows, double tolerance) {
  std::vector<runtime::ValidationEntry> entries;
  for (const auto& r : rows)
    entries.push_back({r.figure.id, r.figure.unit, r.figure.configuration, r.figure.source, r.figure.value, r.simulated,
                       r.error, r.compared, r.note, r.simulated_only});
  return runtime::html_validation(entries, tolerance);
}

nlohmann::ordered_json validation_json(const std::vector<ValidationRow>& rows) {
  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  for (const auto& r : rows) {
    nlohmann::ordered_json j;
    j["id"] = r.figure.id;
    j["published"] = r.figure.value;
    j["unit"] = r.figure.unit;
    const bool shown = r.compared || r.simulated_only;
    j["simulated"] = shown ? nlohmann::ordered_json(r.simulated) : nlohmann::ordered_json();
    j["error"] = shown ? nlohmann::ordered_json(r.error) : nlohmann::ordered_json();
    j["counted"] = r.compared;
    if (!r.compared) j["note"] = r.note;
    out.push_back(j);
  }
  return out;
}

std::string validation_table(const std::vector<ValidationRow>& rows, double tolerance) {
  runtime::TextTable t({"id", "published", "simulated", "error", "configuration"}, {4});
  double abs_sum = 0;
  int compared = 0, within = 0;
  for (const auto& r : rows) {
    const std::string published = fmt::format("{:g} {}", r.figure.value, r.figure.unit);
    if (r.simulated_only) {  // shown, its error in parentheses, not counted
      t.add({r.figure.id, published, fmt::format("{:.4g} {}", r.simulated, r.figure.unit),
             fmt::format("({:+.1f}%)", 100 * r.error), r.figure.configuration + " (not counted: " + r.note + ")"});
      continue;
    }
    if (!r.compared) {
      t.add({r.figure.id, published, "-", "-", r.figure.configuration + " (" + r.note + ")"});
      continue;
    }
    ++compared;
    abs_sum += std::fabs(r.error);
    within += std::fabs(r.error) <= tolerance;
    t.add({r.figure.id, published, fmt::format("{:.4g} {}", r.simulated, r.figure.unit),
           fmt::format("{:+.1f}%{}", 100 * r.error, std::fabs(r.error) > tolerance ? " !" : ""),
           r.figure.configuration});
  }
  std::string out = t.render();
  out += fmt::format("\n{} of {} compared figure(s) within {:g}%; mean absolute error {:.1f}%\n", within, compared,
                     100 * tolerance, compared > 0 ? 100 * abs_sum / compared : 0.0);
  return out;
}

// ---- calibrate ----

namespace {

std::vector<std::string> own_keys(const PublishedFigure& f) {
  std::vector<std::string> keys;
  for (const auto& s : f.run.config.sets) keys.push_back(s.substr(0, s.find('=')));
  return keys;
}

/// The figures simulated by simulate_figure(), the candidate values as overrides after each
/// figure's own (a figure that sets a key itself keeps its own value: its configuration).
class FigureModel : public fit::Evaluator {
 public:
  FigureModel(const std::vector<PublishedFigure>& figures, const std::vector<std::string>& keys)
      : m_figures(figures), m_keys(keys) {}
  double simulate(std::size_t j, const std::vector<double>& values) override {
    const PublishedFigure& f = m_figures[j];
    const std::vector<std::string> own = own_keys(f);
    std::vector<std::string> sets;
    std::string at;
    for (std::size_t i = 0; i < m_keys.size(); ++i) {
      if (std::find(own.begin(), own.end(), m_keys[i]) != own.end()) continue;
      sets.push_back(m_keys[i] + "=" + fmt::format("{}", values[i]));
      at += (at.empty() ? "" : ", ") + sets.back();
    }
    try {
      return simulate_figure(f, sets);
    } catch (const InputError& e) {
      throw InputError(f.id + " at " + at + ": " + e.what());
    }
  }

 private:
  const std::vector<PublishedFigure>& m_figures;
  const std::vector<std::string>& m_keys;
};

std::string joined(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : ", ") + x;
  return s;
}

double configured_value(const PublishedFigure& f, const std::string& key) {
  SystemConfig cfg = load_config(f.run.config);
  ParamSet ps = bind_params(cfg);
  return *std::get<double*>(ps.find(key)->target);
}

std::string fitted_ids(const Calibration& c) {
  std::vector<std::string> ids;
  for (const auto& fr : c.result.figures)
    if (fr.figure.fitted) ids.push_back(fr.figure.id);
  return joined(ids);
}

std::string pct(double r) { return fmt::format("{:+.1f}%", 100 * r); }

const char* bound_word(fit::Bound b) {
  return b == fit::Bound::Lower ? "lower" : b == fit::Bound::Upper ? "upper" : nullptr;
}

}  // namespace

Calibration calibrate(const CalibrationRequest& req) {
  Calibration c;
  c.file = load_figures_file(req.figures_path, req.config_dir);
  const std::string& path = c.file.path;
  // The parameters: known, real, at most four, each with bounds in the file.
  if (req.fit.empty()) throw InputError("--fit: give the parameter keys to fit (1 to 4), e.g. host.map_op_overhead_us");
  if (req.fit.size() > 4)
    throw InputError(
        fmt::format("--fit {}: {} parameters; at most four are fitted jointly", joined(req.fit), req.fit.size()));
  SystemConfig probe;
  ParamSet ps = bind_params(probe);
  for (std::size_t i = 0; i < req.fit.size(); ++i) {
    const std::string& key = req.fit[i];
    if (key.empty()) throw InputError("--fit " + joined(req.fit) + ": an empty key");
    for (std::size_t k = 0; k < i; ++k)
      if (req.fit[k] == key) throw InputError("--fit " + key + ": given twice");
    const ParamSpec* spec = ps.find(key);
    if (!spec) {
      ps.set(key, "0", "--fit " + key);  // throws, naming the closest keys
      throw InputError("--fit " + key + ": unknown parameter");
    }
    if (spec->type != ParamType::Real)
      throw InputError("--fit " + key + ": not a real-valued parameter; calibrate fits real-valued ones");
    const auto b =
        std::find_if(c.file.bounds.begin(), c.file.bounds.end(), [&](const FitBounds& x) { return x.key == key; });
    if (b == c.file.bounds.end())
      throw InputError("--fit " + key + ": " + path +
                       " gives no bounds for it; add it to the file's `fit:` section with min, max and why");
    c.bounds.push_back(*b);
    c.units.push_back(spec->unit);
  }
  // The figures: --only's, or those marked host_bound.
  std::vector<std::string> ids;
  if (req.only.empty()) {
    for (const auto& f : c.file.figures)
      if (f.host_bound) ids.push_back(f.id);
    if (ids.empty()) throw InputError(path + ": no figure is marked host_bound: true; name the figures with --only");
  } else {
    for (const auto& id : req.only) {
      const bool known = std::any_of(c.file.figures.begin(), c.file.figures.end(),
                                     [&](const PublishedFigure& f) { return f.id == id; });
      if (!known) {
        std::vector<std::string> all;
        for (const auto& f : c.file.figures) all.push_back(f.id);
        throw InputError("--only " + id + ": no such figure in " + path + " (" + joined(all) + ")");
      }
      if (std::count(req.only.begin(), req.only.end(), id) > 1) throw InputError("--only " + id + ": given twice");
      const auto& f = *std::find_if(c.file.figures.begin(), c.file.figures.end(),
                                    [&](const PublishedFigure& x) { return x.id == id; });
      if (!f.not_compared.empty())
        throw InputError("--only " + id + ": the figure is not compared (" + f.not_compared +
                         "); a fit to it would fit what the model does not claim");
      ids.push_back(id);
    }
  }
  std::vector<fit::Figure> figs;
  for (const auto& f : c.file.figures) {
    const bool fitted = std::find(ids.begin(), ids.end(), f.id) != ids.end();
    if (f.run.devices > 8) {
      if (fitted)
        throw InputError("--only " + f.id + ": " + std::to_string(f.run.devices) +
                         " devices cannot be simulated yet; leave it out");
      continue;
    }
    if (fitted)
      for (const auto& key : own_keys(f))
        if (std::find(req.fit.begin(), req.fit.end(), key) != req.fit.end())
          throw InputError("--fit " + key + ": figure " + f.id + " sets it itself (its configuration); leave " + f.id +
                           " out (--only) or fit another parameter");
    c.figures.push_back(f);
    figs.push_back({f.id, f.value, fitted});
  }
  // The start: each parameter's configured value (one value in every fitted figure's
  // configuration), or --start's.
  std::vector<fit::Parameter> params;
  for (std::size_t i = 0; i < req.fit.size(); ++i) {
    fit::Parameter p{req.fit[i], c.bounds[i].min, c.bounds[i].max, 0};
    bool first = true;
    std::string first_id;
    for (const auto& f : c.figures) {
      if (std::find(ids.begin(), ids.end(), f.id) == ids.end()) continue;
      const double v = configured_value(f, p.key);
      if (!first && v != p.start)
        throw InputError(
            fmt::format("--fit {}: {:g} in {}'s configuration and {:g} in {}'s; a fitted parameter has "
                        "one value",
                        p.key, p.start, first_id, v, f.id));
      if (first) first_id = f.id;
      p.start = v;
      first = false;
    }
    params.push_back(p);
  }
  std::set<std::string> started;
  for (const auto& s : req.start) {
    const auto eq = s.find('=');
    const std::string key = s.substr(0, eq);
    const auto at = std::find(req.fit.begin(), req.fit.end(), key);
    if (eq == std::string::npos || at == req.fit.end())
      throw InputError("--start " + s + ": give key=value for a parameter of --fit (" + joined(req.fit) + ")");
    if (!started.insert(key).second) throw InputError("--start " + key + " is given twice; keep one");
    const std::optional<double> v = whole_real(s.substr(eq + 1));
    if (!v) throw InputError("--start " + s + ": expects a number");
    params[static_cast<std::size_t>(at - req.fit.begin())].start = *v;
  }
  for (std::size_t i = 0; i < params.size(); ++i)
    if (!(params[i].start >= params[i].min && params[i].start <= params[i].max))
      throw InputError(
          fmt::format("--fit {}: the start {:g} lies outside its bounds [{:g}, {:g}] in {}; give --start "
                      "{}=VALUE inside them or widen the bounds",
                      params[i].key, params[i].start, params[i].min, params[i].max, path, params[i].key));
  FigureModel model(c.figures, req.fit);
  c.result = fit::calibrate(model, figs, params, req.options);
  return c;
}

std::string calibration_table(const Calibration& c) {
  const fit::Result& r = c.result;
  std::string out;
  for (const auto& p : r.parameters)
    if (!p.fitted) out += p.parameter.key + ": " + p.note + "; not fitted, stays assumed\n";
  if (!out.empty()) out += "\n";
  runtime::TextTable pt({"parameter", "unit", "start", "fitted", "min", "max", "note"}, {1, 6});
  for (std::size_t i = 0; i < r.parameters.size(); ++i) {
    const auto& p = r.parameters[i];
    std::string note = !p.fitted                     ? "not fitted: " + p.note
                       : p.bound == fit::Bound::None ? ""
                                                     : std::string("at its ") + bound_word(p.bound) + " bound";
    pt.add({p.parameter.key, c.units[i], fmt::format("{:.4g}", p.parameter.start),
            p.fitted ? fmt::format("{:.4g}", p.value) : "-", fmt::format("{:g}", p.parameter.min),
            fmt::format("{:g}", p.parameter.max), note});
  }
  const std::string parameters_table = pt.render();
  // How much each fitted figure moves over each parameter's bounds (the screen).
  std::vector<std::string> head{"moves over the bounds"};
  for (const auto& fr : r.figures)
    if (fr.figure.fitted) head.push_back(fr.figure.id);
  runtime::TextTable mt(head);
  for (const auto& p : r.parameters) {
    std::vector<std::string> row{p.parameter.key};
    for (std::size_t j = 0; j < r.figures.size(); ++j)
      if (r.figures[j].figure.fitted) row.push_back(pct(p.moves[j]));
    mt.add(row);
  }
  const std::string moves_table = mt.render();
  runtime::TextTable ft({"figure", "published", "at start", "error", "fitted", "error", "left out"});
  for (std::size_t j = 0; j < r.figures.size(); ++j) {
    const auto& fr = r.figures[j];
    if (!fr.figure.fitted) continue;
    const std::string unit = " " + c.figures[j].unit;
    ft.add({fr.figure.id, fmt::format("{:g}{}", fr.figure.published, unit), fmt::format("{:.4g}{}", fr.start, unit),
            pct(fr.start_error()), fmt::format("{:.4g}{}", fr.at_fit, unit), pct(fr.fit_error()),
            fr.loo_error() ? pct(*fr.loo_error()) : "-"});
  }
  out += ft.render();
  if (!r.loo_note.empty()) out += "left out: " + r.loo_note + "\n";
  bool others = false;
  runtime::TextTable ot({"not fitted", "published", "at start", "at fit", "moved by", "error at fit"});
  for (std::size_t j = 0; j < r.figures.size(); ++j) {
    const auto& fr = r.figures[j];
    if (fr.figure.fitted) continue;
    others = true;
    const std::string unit = " " + c.figures[j].unit;
    const bool flag = !c.figures[j].host_bound && c.figures[j].not_compared.empty() && std::fabs(fr.moved_by()) > 0.02;
    ot.add({fr.figure.id, fmt::format("{:g}{}", fr.figure.published, unit), fmt::format("{:.4g}{}", fr.start, unit),
            fmt::format("{:.4g}{}", fr.at_fit, unit), pct(fr.moved_by()) + (flag ? " !" : ""), pct(fr.fit_error())});
  }
  if (others) out += "\n" + ot.render();
  out += "\n" + parameters_table + "\n" + moves_table;
  out += fmt::format(
      "\nfit to {}: {}; {} iteration(s), sum of squared errors {:.4g}; {} simulations ({} repeated "
      "ones answered from the cache)\n",
      fitted_ids(c), r.all.stop, r.all.iterations, r.all.cost, r.evaluations, r.cache_hits);
  for (const auto& p : r.parameters)
    if (p.fitted && p.bound != fit::Bound::None)
      out += fmt::format("{} is at its {} bound: the figures ask for a value the bounds ({}) call implausible\n",
                         p.parameter.key, bound_word(p.bound), c.file.path);
  for (std::size_t j = 0; j < r.figures.size(); ++j)
    if (!r.figures[j].figure.fitted && !c.figures[j].host_bound && c.figures[j].not_compared.empty() &&
        std::fabs(r.figures[j].moved_by()) > 0.02)
      out += fmt::format("{} (not host-bound) moved by {} at the fit; device-bound figures should move at most 2%\n",
                         r.figures[j].figure.id, pct(r.figures[j].moved_by()));
  return out;
}

nlohmann::ordered_json calibration_json(const Calibration& c) {
  const fit::Result& r = c.result;
  ordered_json j;
  j["figures_file"] = c.file.path;
  ordered_json params = ordered_json::array();
  for (std::size_t i = 0; i < r.parameters.size(); ++i) {
    const auto& p = r.parameters[i];
    ordered_json q;
    q["key"] = p.parameter.key;
    q["unit"] = c.units[i];
    q["min"] = p.parameter.min;
    q["max"] = p.parameter.max;
    q["why"] = c.bounds[i].why;
    q["start"] = p.parameter.start;
    q["fitted"] = p.fitted;
    q["value"] = p.fitted ? ordered_json(p.value) : ordered_json();
    q["at_bound"] = bound_word(p.bound) ? ordered_json(bound_word(p.bound)) : ordered_json();
    if (!p.fitted) q["note"] = p.note;
    ordered_json moves = ordered_json::object();
    for (std::size_t k = 0; k < r.figures.size(); ++k)
      if (r.figures[k].figure.fitted) moves[r.figures[k].figure.id] = p.moves[k];
    q["moves_over_bounds"] = moves;
    params.push_back(q);
  }
  j["parameters"] = params;
  ordered_json figs = ordered_json::array();
  for (std::size_t k = 0; k < r.figures.size(); ++k) {
    const auto& fr = r.figures[k];
    ordered_json f;
    f["id"] = fr.figure.id;
    f["unit"] = c.figures[k].unit;
    f["host_bound"] = c.figures[k].host_bound;
    f["fitted"] = fr.figure.fitted;
    f["published"] = fr.figure.published;
    f["start"] = fr.start;
    f["start_error"] = fr.start_error();
    f["at_fit"] = fr.at_fit;
    f["fit_error"] = fr.fit_error();
    f["moved_by"] = fr.moved_by();
    if (fr.figure.fitted) {
      f["left_out"] = fr.loo ? ordered_json(*fr.loo) : ordered_json();
      f["left_out_error"] = fr.loo_error() ? ordered_json(*fr.loo_error()) : ordered_json();
      ordered_json lv = ordered_json::object();
      for (std::size_t i = 0; i < fr.loo_values.size(); ++i)
        if (r.parameters[i].fitted) lv[r.parameters[i].parameter.key] = fr.loo_values[i];
      f["left_out_values"] = lv;
    }
    figs.push_back(f);
  }
  j["figures"] = figs;
  ordered_json fit;
  fit["stop"] = r.all.stop;
  fit["iterations"] = r.all.iterations;
  fit["capped"] = r.all.capped;
  fit["sum_of_squares"] = r.all.cost;
  fit["simulations"] = r.evaluations;
  fit["cache_hits"] = r.cache_hits;
  if (!r.loo_note.empty()) fit["left_out_note"] = r.loo_note;
  j["fit"] = fit;
  return j;
}

std::string calibration_yaml(const Calibration& c) {
  const fit::Result& r = c.result;
  const std::string ids = fitted_ids(c);
  std::string out = "# Fitted by ascendsim calibrate to " + ids + " (" + c.file.path +
                    "), each within the bounds of that file's fit section.\n";
  for (const auto& p : r.parameters)
    if (!p.fitted) out += "# " + p.parameter.key + ": not fitted (" + p.note + "); stays assumed\n";
  // Nested by the keys' sections, in --fit order of first appearance.
  struct Item {
    std::vector<std::string> path;
    std::string line;
  };
  std::vector<Item> items;
  for (const auto& p : r.parameters) {
    if (!p.fitted) continue;
    Item it;
    for (const auto& part : [&] {
           std::vector<std::string> parts;
           std::size_t from = 0;
           for (std::size_t dot; (dot = p.parameter.key.find('.', from)) != std::string::npos; from = dot + 1)
             parts.push_back(p.parameter.key.substr(from, dot - from));
           parts.push_back(p.parameter.key.substr(from));
           return parts;
         }())
      it.path.push_back(part);
    it.line = fmt::format("{:.6g}  # fitted by ascendsim calibrate to {}; bounds [{:g}, {:g}]{}", p.value, ids,
                          p.parameter.min, p.parameter.max,
                          bound_word(p.bound) ? std::string(", at the ") + bound_word(p.bound) + " bound" : "");
    items.push_back(std::move(it));
  }
  std::function<void(const std::vector<const Item*>&, std::size_t)> emit = [&](const std::vector<const Item*>& group,
                                                                               std::size_t depth) {
    std::vector<std::string> order;
    for (const Item* it : group)
      if (std::find(order.begin(), order.end(), it->path[depth]) == order.end()) order.push_back(it->path[depth]);
    for (const auto& name : order) {
      std::vector<const Item*> sub;
      for (const Item* it : group)
        if (it->path[depth] == name) sub.push_back(it);
      const std::string indent(2 * depth, ' ');
      if (sub.size() == 1 && sub.front()->path.size() == depth + 1) {
        out += indent + name + ": " + sub.front()->line + "\n";
      } else {
        out += indent + name + ":\n";
        emit(sub, depth + 1);
      }
    }
  };
  std::vector<const Item*> all;
  for (const auto& it : items) all.push_back(&it);
  emit(all, 0);
  return out;
}

}  // namespace ascendsim::sim
