#include "sim/regression.h"

#include "sim/rank_table.h"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <set>

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include "runtime/html_report.h"
#include "runtime/report.h"
#include "sim/core/error.h"

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
                       "all_reduce_fusion, parameter_broadcast, server, chip, "
                       "dataset, dataset_index, eval_every, "
                       "amp_level, keep_batchnorm_fp32, loss_scale, graph_kernel_fusion, set)");
    }
  }
  if (!r.model.empty() && !batch_given) r.batch_size = 0;  // the model's own
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
  if (!r.contains("runs") || !r["runs"].is_array()) throw InputError(path + ": not a compare/train report (no runs)");
  return {{"", r}};
}

void add_figures(DiffResult& d, const std::string& run, const ordered_json& a, const ordered_json& b,
                 double tolerance) {
  auto figure = [&](const std::string& name, const ordered_json& x, const ordered_json& y) {
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
    for (const char* k : {"workload", "batch_size", "devices"})
      if (ra.value(k, ordered_json()) != rb.value(k, ordered_json()))
        throw InputError(where + "different " + k + " (" + ra.value(k, ordered_json()).dump() + " in " + base + ", " +
                         rb.value(k, ordered_json()).dump() + " in " + now + "): not comparable");
    if (ra["runs"].size() != rb["runs"].size())
      throw InputError(where + "different strategies (" + std::to_string(ra["runs"].size()) + " and " +
                       std::to_string(rb["runs"].size()) + " runs): not comparable");
    for (std::size_t r = 0; r < ra["runs"].size(); ++r) {
      const auto& x = ra["runs"][r];
      const auto& y = rb["runs"][r];
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

std::vector<PublishedFigure> load_figures(const std::string& path, const std::string& config_dir) {
  if (!fs::is_regular_file(path)) throw InputError(path + ": no such figures file");
  YAML::Node root;
  try {
    root = YAML::LoadFile(path);
  } catch (const YAML::Exception& e) {
    throw InputError(path + ":" + std::to_string(e.mark.line + 1) + ": malformed YAML: " + e.msg);
  }
  if (!root.IsMap() || !root["figures"] || !root["figures"].IsSequence())
    throw InputError(path + ": a figures file is a mapping with a list `figures`");
  std::vector<PublishedFigure> out;
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
      else if (key == "run") {
        if (!v.IsMap()) throw InputError(at + ": 'run' is a mapping (workload, strategies, ...)");
        p.run = parse_run(v, at + ": run", config_dir, nullptr);
      } else {
        throw InputError(at + ": unknown key '" + key + "' (id, value, unit, measure, configuration, source, run)");
      }
    }
    if (p.measure != "step_time_ms" && p.measure != "samples_per_s" && p.measure != "peak_tflops" &&
        p.measure != "eval_pass_s")
      throw InputError(at + ": 'measure' is step_time_ms, samples_per_s, eval_pass_s or peak_tflops");
    if (p.measure == "eval_pass_s" && p.run.eval_every <= 0)
      throw InputError(at + ": 'eval_pass_s' measures evaluation passes; give the run eval_every > 0");
    if (p.id.empty() || !(p.value > 0)) throw InputError(at + ": a figure needs an id and a positive value");
    out.push_back(std::move(p));
  }
  return out;
}

std::vector<ValidationRow> validate(const std::vector<PublishedFigure>& figures) {
  std::vector<ValidationRow> rows;
  for (const auto& f : figures) {
    ValidationRow r{f, 0, 0, false, {}};
    if (f.run.devices > 8) {
      r.note = std::to_string(f.run.devices) + " devices: joins when clusters of several servers are modelled";
      rows.push_back(r);
      continue;
    }
    if (f.measure == "peak_tflops") {
      const SystemConfig cfg = load_config(f.run.config);
      const auto& a = cfg.chip.aicore;
      r.simulated = 2.0 * static_cast<double>(a.cores * a.cube_fp16_macs_per_cycle) * a.freq_ghz / 1e3;
    } else {
      RunRequest req = f.run;
      if (req.strategies.size() != 1) throw InputError(f.id + ": a validation run has exactly one strategy");
      const RunOutcome out = run(req);
      if (out.failed()) throw InputError(f.id + ": the run failed: " + out.failure_message());
      const auto& run0 = out.runs.front();
      // Published per-step figures quote the steady state (MindSpore's per-step time of a later
      // epoch): the steady mean, not the warm-up's graph load and pipeline fill.
      r.simulated = f.measure == "step_time_ms"  ? run0.steps.steady.stats().mean_ms
                    : f.measure == "eval_pass_s" ? run0.evaluation().later_mean_s
                                                 : run0.steady_samples_per_s();
    }
    r.error = (r.simulated - f.value) / f.value;
    r.compared = true;
    rows.push_back(r);
  }
  return rows;
}

std::string validation_html(const std::vector<ValidationRow>& rows, double tolerance) {
  std::vector<runtime::ValidationEntry> entries;
  for (const auto& r : rows)
    entries.push_back({r.figure.id, r.figure.unit, r.figure.configuration, r.figure.source, r.figure.value, r.simulated,
                       r.error, r.compared, r.note});
  return runtime::html_validation(entries, tolerance);
}

nlohmann::ordered_json validation_json(const std::vector<ValidationRow>& rows) {
  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  for (const auto& r : rows) {
    nlohmann::ordered_json j;
    j["id"] = r.figure.id;
    j["published"] = r.figure.value;
    j["unit"] = r.figure.unit;
    j["simulated"] = r.compared ? nlohmann::ordered_json(r.simulated) : nlohmann::ordered_json();
    j["error"] = r.compared ? nlohmann::ordered_json(r.error) : nlohmann::ordered_json();
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

}  // namespace ascendsim::sim
