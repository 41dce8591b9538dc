// Reports compared figure by figure (sim/regression.h): two reports or two suite outputs, the
// figures that moved past a tolerance (written as a table or JUnit XML by
// sim/report/diff_report.cpp).
#include "sim/regression.h"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>

#include <fmt/format.h>

#include "sim/core/error.h"

namespace ascendsim::sim {

namespace fs = std::filesystem;
using nlohmann::ordered_json;

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

}  // namespace ascendsim::sim
