// The serving report: JSON (docs/reports.md, "Serving reports"), text and HTML.
#include "sim/report/serve_report.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "sim/report/charts.h"
#include "sim/report/html_report.h"

namespace ascendsim::report {

using nlohmann::ordered_json;
using runtime::LaunchMode;
using runtime::ServePhase;
using sim::ServeOutcome;
using sim::ServeRun;

namespace {

/// The p-th percentile of sorted values, linearly interpolated.
double percentile_of_sorted(const std::vector<double>& v, double p) {
  if (v.empty()) return 0;
  const double x = p / 100 * static_cast<double>(v.size() - 1);
  const auto i = static_cast<std::size_t>(std::floor(x));
  const double f = x - static_cast<double>(i);
  return i + 1 < v.size() ? v[i] * (1 - f) + v[i + 1] * f : v[i];
}

double percentile(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  return percentile_of_sorted(v, p);
}

ordered_json distribution_ms(std::vector<double> s) {
  std::sort(s.begin(), s.end());
  double sum = 0;
  for (double v : s) sum += v;
  return {{"mean", s.empty() ? 0 : sum / static_cast<double>(s.size()) * 1e3},
          {"p50", percentile_of_sorted(s, 50) * 1e3},
          {"p90", percentile_of_sorted(s, 90) * 1e3},
          {"p99", percentile_of_sorted(s, 99) * 1e3}};
}

ordered_json phases_ms(const std::array<double, runtime::kServePhases>& p, double scale = 1) {
  ordered_json j = ordered_json::object();
  for (std::size_t i = 0; i < runtime::kServePhases; ++i)
    j[runtime::serve_phase_name(static_cast<ServePhase>(i))] = p[i] * 1e3 * scale;
  return j;
}

/// A run's figures in serving units.
ordered_json serve_run_json(const ServeRun& run, bool timeline) {
  const runtime::ServeLog& log = run.log;
  std::vector<double> ttft, tpot, e2e;
  std::int64_t out_tokens = 0, in_tokens = 0, good = 0;
  double latency = 0;
  for (const auto& r : log.requests) {
    good += r.ttft_s() <= run.slo_ttft_s && r.tpot_s() <= run.slo_tpot_s;
    ttft.push_back(r.ttft_s());
    e2e.push_back(r.e2e_s());
    if (r.output_tokens > 1) tpot.push_back(r.tpot_s());
    out_tokens += r.output_tokens;
    in_tokens += r.prompt_tokens;
    latency += r.e2e_s();
  }
  const double n = static_cast<double>(log.requests.size());
  const double first = log.requests.empty() ? 0 : log.requests.front().arrival_s;
  const double last = log.requests.empty() ? 0 : log.requests.back().arrival_s;
  const double duration = log.end_s - first;
  // The arrival rate as measured (a Poisson process's differs from the rate asked by chance).
  const double arrival_rate = last > first ? (n - 1) / (last - first) : 0;
  // Decode steps: their time and phases per decode step (a multi-step launch's k steps each).
  std::int64_t decode_steps = 0, prefill_steps = 0, mixed_steps = 0, launches = 0, batch = 0, padded = 0;
  double decode_s = 0;
  std::array<double, runtime::kServePhases> phases{};
  for (const auto& s : log.steps) {
    ++launches;
    if (s.prefill_seqs > 0 && s.decode_seqs > 0) ++mixed_steps;
    if (s.prefill_seqs > 0 && s.decode_seqs == 0) ++prefill_steps;
    if (s.prefill_seqs > 0) continue;
    decode_steps += s.steps;
    batch += s.decode_seqs * s.steps;
    padded += (s.padded_seqs > 0 ? s.padded_seqs : s.decode_seqs) * s.steps;
    decode_s += s.end_s - s.start_s - s.capture_s;
    for (std::size_t i = 0; i < runtime::kServePhases; ++i) phases[i] += s.phase_s[i];
  }
  const double per = decode_steps > 0 ? 1.0 / static_cast<double>(decode_steps) : 0;
  ordered_json captures = ordered_json::array();
  ordered_json j = {
      {"launch", runtime::launch_mode_name(run.mode)},
      {"rate", run.rate},
      {"requests", log.requests.size()},
      {"duration_s", duration},
      {"startup_s", log.startup_s},
      {"requests_per_s", duration > 0 ? n / duration : 0},
      {"output_tokens_per_s", duration > 0 ? static_cast<double>(out_tokens) / duration : 0},
      {"total_tokens_per_s", duration > 0 ? static_cast<double>(out_tokens + in_tokens) / duration : 0},
      {"ttft_ms", distribution_ms(ttft)},
      {"tpot_ms", distribution_ms(tpot)},
      {"e2e_ms", distribution_ms(e2e)},
      {"little",
       {{"offered_rate", run.rate},
        {"arrival_rate", arrival_rate},
        {"mean_latency_s", n > 0 ? latency / n : 0},
        {"rate_x_latency", arrival_rate * (n > 0 ? latency / n : 0)},
        {"mean_in_system", log.mean_in_system}}},
      {"steps",
       {{"launches", launches},
        {"decode_steps", decode_steps},
        {"prefill_steps", prefill_steps},
        {"mixed_steps", mixed_steps},
        {"mean_decode_batch", decode_steps > 0 ? static_cast<double>(batch) / static_cast<double>(decode_steps) : 0},
        {"mean_padded_batch", decode_steps > 0 ? static_cast<double>(padded) / static_cast<double>(decode_steps) : 0}}},
      {"decode_step_ms", {{"mean", decode_s * per * 1e3}, {"phases", phases_ms(phases, per)}}},
      {"preemptions", log.preemptions},
      {"goodput",
       {{"requests_within_slo", good},
        {"fraction", n > 0 ? static_cast<double>(good) / n : 0},
        {"requests_per_s", duration > 0 ? static_cast<double>(good) / duration : 0}}},
  };
  // Overloaded: the queue grows while requests arrive — the last quarter's requests wait far longer
  // for their first token than the first quarter's.
  {
    const std::size_t q = ttft.size() / 4;
    if (q >= 2) {
      const double early =
          percentile(std::vector<double>(ttft.begin(), ttft.begin() + static_cast<std::ptrdiff_t>(q)), 50);
      const double late = percentile(std::vector<double>(ttft.end() - static_cast<std::ptrdiff_t>(q), ttft.end()), 50);
      j["overloaded"] = late > std::max(4 * early, early + 1.0);
      j["early_ttft_s"] = early;
      j["late_ttft_s"] = late;
    } else {
      j["overloaded"] = false;
    }
  }
  ordered_json kv = {
      {"blocks", log.kv_blocks},
      {"peak_blocks", log.peak_kv_blocks},
      {"peak_fraction",
       log.kv_blocks > 0 ? static_cast<double>(log.peak_kv_blocks) / static_cast<double>(log.kv_blocks) : 0},
      {"blocks_in_use_at_end", log.kv_blocks_left}};
  if (timeline) {
    // Replica 0's cache (each replica has its own), at most 200 points: its steps' ends, thinned evenly.
    std::vector<const runtime::ServedStep*> own;
    for (const auto& s : log.steps)
      if (s.replica == 0) own.push_back(&s);
    ordered_json t = ordered_json::array();
    const std::size_t every = std::max<std::size_t>(1, (own.size() + 199) / 200);
    for (std::size_t i = 0; i < own.size(); i += every) t.push_back({own[i]->end_s, own[i]->kv_blocks_used});
    kv["timeline"] = t;
  }
  j["kv_cache"] = kv;
  if (run.mode != LaunchMode::Eager) {
    std::int64_t buckets = 0;
    for (auto c : log.captures) buckets += c > 0;
    j["graph"] = {{"captures", log.captures}, {"buckets_captured", buckets}, {"capture_s", log.capture_s}};
  }
  return j;
}

std::string ms(double s) { return fmt::format("{:.2f}", s * 1e3); }

}  // namespace

ordered_json serve_json(const ServeOutcome& o) {
  ordered_json j;
  j["kind"] = "serving";
  for (auto it = o.header.begin(); it != o.header.end(); ++it) j[it.key()] = it.value();
  ordered_json runs_j = ordered_json::array();
  for (const auto& r : o.runs) runs_j.push_back(serve_run_json(r, true));
  j["runs"] = runs_j;
  ordered_json steps = ordered_json::array();
  for (const auto& p : o.decode_steps) {
    ordered_json by = ordered_json::object();
    for (std::size_t m = 0; m < o.modes.size(); ++m)
      by[runtime::launch_mode_name(o.modes[m])] = {{"step_ms", p.by_mode[m].time_s * 1e3},
                                                 {"phases_ms", phases_ms(p.by_mode[m].phase_s)}};
    steps.push_back({{"batch", p.batch}, {"context", p.context}, {"modes", by}});
  }
  j["decode_step_by_batch"] = steps;
  if (!o.sweep.empty()) {
    ordered_json s = ordered_json::array();
    for (const auto& r : o.sweep) s.push_back(serve_run_json(r, false));
    j["sweep"] = s;
  }
  j["step_shapes_simulated"] = o.simulations;
  j["config"] = o.config;
  return j;
}

std::string serve_text(const ServeOutcome& o) { return serve_text(o, serve_json(o)); }

std::string serve_text(const ServeOutcome& o, const ordered_json& r) {
  std::string out;
  out += fmt::format("{} on {} x {} ({} server), tensor parallel {}, {} replica(s)\n", r["workload"].get<std::string>(),
                     r["devices"].get<std::int64_t>(), r["chip"].get<std::string>(), r["server"].get<std::string>(),
                     r["tensor_parallel"].get<std::int64_t>(), r["replicas"].get<std::int64_t>());
  const auto& kv = r["kv_cache"];
  out += fmt::format("KV cache: {} blocks of {} tokens ({} tokens, {:.1f} MiB per block per rank)\n",
                     kv["blocks"].get<std::int64_t>(), kv["block_size"].get<std::int64_t>(),
                     kv["tokens"].get<std::int64_t>(), kv["block_bytes_per_rank"].get<double>() / 1048576.0);
  const auto& q = r["requests"];
  out += fmt::format("requests: {} ({}{}), prompt {:.0f} and output {:.0f} tokens on average{}\n",
                     q["requests"].get<std::int64_t>(), q["source"].get<std::string>(),
                     q["rate"].get<double>() > 0 ? fmt::format(" at {} req/s", q["rate"].get<double>()) : "",
                     q["prompt_tokens_mean"].get<double>(), q["output_tokens_mean"].get<double>(),
                     q["length_spread"].get<double>() > 0
                         ? fmt::format(" (each +-{:.0f}%)", q["length_spread"].get<double>() * 100)
                         : "");
  out += "\n";
  out += fmt::format("{:<11} {:>8} {:>9} {:>17} {:>17} {:>15} {:>10} {:>14} {:>8}\n", "launch", "req/s", "out tok/s",
                     "TTFT p50/p99 ms", "TPOT p50/p99 ms", "e2e p50/p99 s", "decode ms", "KV peak blocks", "preempt");
  for (const auto& run : r["runs"]) {
    out += fmt::format(
        "{:<11} {:>8.2f} {:>9.1f} {:>17} {:>17} {:>15} {:>10.2f} {:>14} {:>8}\n", run["launch"].get<std::string>(),
        run["requests_per_s"].get<double>(), run["output_tokens_per_s"].get<double>(),
        fmt::format("{:.1f}/{:.1f}", run["ttft_ms"]["p50"].get<double>(), run["ttft_ms"]["p99"].get<double>()),
        fmt::format("{:.2f}/{:.2f}", run["tpot_ms"]["p50"].get<double>(), run["tpot_ms"]["p99"].get<double>()),
        fmt::format("{:.2f}/{:.2f}", run["e2e_ms"]["p50"].get<double>() / 1e3,
                    run["e2e_ms"]["p99"].get<double>() / 1e3),
        run["decode_step_ms"]["mean"].get<double>(),
        fmt::format("{} ({:.1f}%)", run["kv_cache"]["peak_blocks"].get<std::int64_t>(),
                    run["kv_cache"]["peak_fraction"].get<double>() * 100),
        run["preemptions"].get<std::int64_t>());
  }
  for (const auto& run : r["runs"]) {
    if (run.contains("graph"))
      out += fmt::format("{}: {} bucket graph(s) captured in {:.2f} s, {} (not in the figures above)\n",
                         run["launch"].get<std::string>(), run["graph"]["buckets_captured"].get<std::int64_t>(),
                         run["graph"]["capture_s"].get<double>(),
                         r["scheduler"]["capture"] == "startup" ? "before serving" : "each at its first use");
    const double comm = run["decode_step_ms"]["phases"]["comm"].get<double>(),
                 step = run["decode_step_ms"]["mean"].get<double>();
    if (step > 0 && comm > 0.5 * step)
      out += fmt::format(
          "{}: exposed communication is {:.0f}% of a decode step; each collective's ring step costs "
          "hccl.step_latency_us = {} us on the {} server (the presets of servers for the chip have "
          "their own: `ascendsim servers`)\n",
          run["launch"].get<std::string>(), 100 * comm / step, r["config"]["hccl"]["step_latency_us"].get<double>(),
          r["server"].get<std::string>());
    if (run["overloaded"].get<bool>())
      out += fmt::format(
          "{}: overloaded — requests arrive at {:.2f}/s, faster than they are served, and the queue "
          "grows: the last quarter's median time to first token is {:.2f} s, the first quarter's "
          "{:.2f} s; the latencies grow with the number of requests\n",
          run["launch"].get<std::string>(), run["little"]["arrival_rate"].get<double>(),
          run["late_ttft_s"].get<double>(), run["early_ttft_s"].get<double>());
  }
  out += "\nwhere a decode step's time goes in the runs (ms per decode step):\n";
  out += fmt::format("{:<11}", "launch");
  for (std::size_t p = 0; p < runtime::kServePhases; ++p)
    out += fmt::format(" {:>9}", runtime::serve_phase_name(static_cast<ServePhase>(p)));
  out += fmt::format(" {:>9} {:>7}\n", "step", "batch");
  for (const auto& run : r["runs"]) {
    out += fmt::format("{:<11}", run["launch"].get<std::string>());
    for (const auto& [k, v] : run["decode_step_ms"]["phases"].items()) out += fmt::format(" {:>9.3f}", v.get<double>());
    out += fmt::format(" {:>9.3f} {:>7.1f}\n", run["decode_step_ms"]["mean"].get<double>(),
                       run["steps"]["mean_decode_batch"].get<double>());
  }
  if (!o.decode_steps.empty()) {
    out += fmt::format(
        "\none decode step by batch size, ms, at {} keys per sequence (the mean prompt and half the mean output), "
        "without the scheduler's work; the phases of each below:\n",
        o.decode_steps.front().context);
    out += fmt::format("{:>6}", "batch");
    for (auto m : o.modes) out += fmt::format(" {:>11}", runtime::launch_mode_name(m));
    out += o.modes.size() > 1 ? fmt::format("   {} / {}\n", runtime::launch_mode_name(o.modes.front()),
                                          runtime::launch_mode_name(o.modes[1]))
                            : "\n";
    for (const auto& p : o.decode_steps) {
      out += fmt::format("{:>6}", p.batch);
      for (const auto& c : p.by_mode) out += fmt::format(" {:>11}", ms(c.time_s));
      if (o.modes.size() > 1) out += fmt::format("   {:.2f}x", p.by_mode[0].time_s / p.by_mode[1].time_s);
      out += "\n";
    }
    for (const auto& p : o.decode_steps) {
      out += fmt::format("batch {}:\n", p.batch);
      for (std::size_t m = 0; m < o.modes.size(); ++m) {
        out += fmt::format("  {:<11}", runtime::launch_mode_name(o.modes[m]));
        for (std::size_t i = 0; i < runtime::kServePhases; ++i)
          if (p.by_mode[m].phase_s[i] > 0)
            out += fmt::format(" {} {}", runtime::serve_phase_name(static_cast<ServePhase>(i)),
                               ms(p.by_mode[m].phase_s[i]));
        out += "\n";
      }
    }
  }
  if (!o.sweep.empty()) {
    out += "\nrate sweep:\n";
    out += fmt::format("{:>8} {:<11} {:>8} {:>9} {:>12} {:>12} {:>12}\n", "rate", "launch", "req/s", "out tok/s",
                       "TTFT p50 ms", "TPOT p50 ms", "e2e p99 s");
    for (const auto& run : r["sweep"])
      out += fmt::format("{:>8} {:<11} {:>8.2f} {:>9.1f} {:>12.1f} {:>12.2f} {:>12.2f}\n", run["rate"].get<double>(),
                         run["launch"].get<std::string>(), run["requests_per_s"].get<double>(),
                         run["output_tokens_per_s"].get<double>(), run["ttft_ms"]["p50"].get<double>(),
                         run["tpot_ms"]["p50"].get<double>(), run["e2e_ms"]["p99"].get<double>() / 1e3);
  }
  out += fmt::format("\n{} step shapes simulated\n", o.simulations);
  return out;
}

namespace {

const char* mode_color(LaunchMode m) {
  static const char* c[] = {"#e69f00", "#56b4e9", "#009e73"};  // Okabe-Ito, as the strategies
  return c[static_cast<int>(m)];
}
const char* serve_phase_color(std::size_t p) {
  static const char* c[runtime::kServePhases] = {"#999933", "#ddcc77", "#332288", "#117733", "#44aa99",
                                                 "#88ccee", "#882255", "#cc6677", "#aa4499"};
  return c[p];
}

/// A line chart of series of (x, y) points, with axes and a legend in a band of its own right of
/// the plot, where it covers no point whatever the data. Each series has its own dash pattern too,
/// so lines that coincide stay apart.
std::string line_chart(const std::string& title, const std::string& xlabel, const std::string& ylabel,
                       const std::vector<std::pair<std::string, std::vector<std::pair<double, double>>>>& series,
                       const std::vector<std::string>& colors) {
  static const char* kDash[] = {"", "8 4", "3 3"};
  double key_w = 0;
  for (const auto& s : series) key_w = std::max(key_w, charts::text_width(s.first));
  const double plot_right = 620, H = 320, L = 70, T = 30, B = 50;
  const double key_x = plot_right + 24, W = key_x + 34 + key_w + 8, R = W - plot_right;
  double x0 = 0, x1 = 0, y1 = 0;
  for (const auto& s : series)
    for (const auto& [x, y] : s.second) {
      x1 = std::max(x1, x);
      y1 = std::max(y1, y);
    }
  const auto xt = charts::nice_ticks(x0, x1 > 0 ? x1 : 1),
             yt = charts::nice_ticks(0, y1 > 0 ? y1 : 1);
  x1 = xt.back();
  y1 = yt.back();
  auto X = [&](double x) { return L + (x - x0) / (x1 - x0) * (W - L - R); };
  auto Y = [&](double y) { return H - B - y / y1 * (H - T - B); };
  std::string s = fmt::format("<svg xmlns='http://www.w3.org/2000/svg' width='{}' height='{}' role='img'>", W, H);
  s += fmt::format("<text x='{}' y='18' font-size='14'>{}</text>", L, escape_xml(title));
  for (double t : xt)
    s += fmt::format(
        "<line x1='{0}' x2='{0}' y1='{1}' y2='{2}' stroke='#ddd'/><text x='{0}' y='{3}' font-size='11' "
        "text-anchor='middle'>{4}</text>",
        X(t), T, H - B, H - B + 15, charts::tick_label(t));
  for (double t : yt)
    s += fmt::format(
        "<line x1='{0}' x2='{1}' y1='{2}' y2='{2}' stroke='#ddd'/><text x='{3}' y='{4}' font-size='11' "
        "text-anchor='end'>{5}</text>",
        L, W - R, Y(t), L - 5, Y(t) + 4, charts::tick_label(t));
  s += fmt::format("<text x='{}' y='{}' font-size='12' text-anchor='middle'>{}</text>", (L + W - R) / 2, H - 12,
                   escape_xml(xlabel));
  s += fmt::format("<text x='14' y='{}' font-size='12' text-anchor='middle' transform='rotate(-90 14 {})'>{}</text>",
                   (T + H - B) / 2, (T + H - B) / 2, escape_xml(ylabel));
  for (std::size_t i = 0; i < series.size(); ++i) {
    std::string pts;
    for (const auto& [x, y] : series[i].second) pts += fmt::format("{:.1f},{:.1f} ", X(x), Y(y));
    s += fmt::format("<polyline class='series' fill='none' stroke='{}' stroke-width='2' stroke-dasharray='{}' points='{}'/>",
                     colors[i], kDash[i % 3], pts);
    for (const auto& [x, y] : series[i].second)
      if (series[i].second.size() < 40)
        s += fmt::format("<circle cx='{:.1f}' cy='{:.1f}' r='3' fill='{}'><title>{}: {} → {}</title></circle>", X(x),
                         Y(y), colors[i], escape_xml(series[i].first), charts::tick_label(x),
                         charts::tick_label(y));
  }
  s += "<g class='legend'>";
  for (std::size_t i = 0; i < series.size(); ++i)
    s += fmt::format(
        "<line x1='{0}' x2='{1}' y1='{2}' y2='{2}' stroke='{3}' stroke-width='3' stroke-dasharray='{4}'/>"
        "<text x='{5}' y='{6}' font-size='12'>{7}</text>",
        key_x, key_x + 28, T + 6 + 18 * static_cast<double>(i), colors[i], kDash[i % 3], key_x + 34,
        T + 10 + 18 * static_cast<double>(i), escape_xml(series[i].first));
  return s + "</g></svg>";
}

}  // namespace

std::string serve_html(const ServeOutcome& o) { return serve_html(o, serve_json(o)); }

std::string serve_html(const ServeOutcome& o, const ordered_json& r) {
  std::string h = "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>ascendsim serve: " +
                  escape_xml(r["workload"].get<std::string>()) +
                  "</title><style>body{font-family:system-ui,sans-serif;margin:2em;max-width:70em}"
                  "table{border-collapse:collapse}td,th{padding:2px 8px;text-align:right;border-bottom:1px solid #ddd}"
                  "th:first-child,td:first-child{text-align:left}pre{overflow-x:auto}</style></head><body>";
  h += "<h1>" + escape_xml(r["workload"].get<std::string>()) + " serving on " +
       std::to_string(r["devices"].get<std::int64_t>()) + " x " + escape_xml(r["chip"].get<std::string>()) +
       "</h1>";
  h += fmt::format(
      "<p>tensor parallel {}, {} replica(s); KV cache {} blocks of {} tokens; {} requests ({}), prompt {:.0f} "
      "and output {:.0f} tokens on average.</p>",
      r["tensor_parallel"].get<std::int64_t>(), r["replicas"].get<std::int64_t>(),
      r["kv_cache"]["blocks"].get<std::int64_t>(), r["kv_cache"]["block_size"].get<std::int64_t>(),
      r["requests"]["requests"].get<std::int64_t>(), escape_xml(r["requests"]["source"].get<std::string>()),
      r["requests"]["prompt_tokens_mean"].get<double>(), r["requests"]["output_tokens_mean"].get<double>());
  h += "<h2>Runs</h2><table><tr><th>launch</th><th>req/s</th><th>output tok/s</th><th>TTFT p50 ms</th><th>TTFT p99 "
       "ms</th><th>TPOT p50 ms</th><th>TPOT p99 ms</th><th>e2e p50 s</th><th>e2e p99 s</th><th>decode step "
       "ms</th><th>KV peak</th><th>preemptions</th></tr>";
  for (const auto& run : r["runs"])
    h += fmt::format(
        "<tr><td>{}</td><td>{:.2f}</td><td>{:.1f}</td><td>{:.1f}</td><td>{:.1f}</td><td>{:.2f}</td><td>{:.2f}"
        "</td><td>{:.2f}</td><td>{:.2f}</td><td>{:.2f}</td><td>{:.0f}%</td><td>{}</td></tr>",
        run["launch"].get<std::string>(), run["requests_per_s"].get<double>(), run["output_tokens_per_s"].get<double>(),
        run["ttft_ms"]["p50"].get<double>(), run["ttft_ms"]["p99"].get<double>(), run["tpot_ms"]["p50"].get<double>(),
        run["tpot_ms"]["p99"].get<double>(), run["e2e_ms"]["p50"].get<double>() / 1e3,
        run["e2e_ms"]["p99"].get<double>() / 1e3, run["decode_step_ms"]["mean"].get<double>(),
        run["kv_cache"]["peak_fraction"].get<double>() * 100, run["preemptions"].get<std::int64_t>());
  h += "</table>";
  // One decode step by batch: stacked phases per launch mode.
  if (!o.decode_steps.empty()) {
    h += fmt::format(
        "<h2>One decode step by batch size</h2><p>At a context of {} keys; each bar a launch mode, its "
        "segments the phases.</p>",
        o.decode_steps.front().context);
    const double W = 760, H = 340, L = 70, T = 20, B = 60, legend = 140;
    double top = 0;
    for (const auto& p : o.decode_steps)
      for (const auto& c : p.by_mode) top = std::max(top, c.time_s * 1e3);
    const auto yt = charts::nice_ticks(0, top > 0 ? top : 1);
    const double y1 = yt.back();
    const double group = (W - L - legend) / static_cast<double>(o.decode_steps.size());
    const double bar = std::min(40.0, group * 0.8 / static_cast<double>(o.modes.size()));
    auto Y = [&](double v) { return H - B - v / y1 * (H - T - B); };
    h += fmt::format("<svg xmlns='http://www.w3.org/2000/svg' width='{}' height='{}' role='img'>", W, H);
    for (double t : yt)
      h += fmt::format(
          "<line x1='{0}' x2='{1}' y1='{2}' y2='{2}' stroke='#ddd'/><text x='{3}' y='{4}' font-size='11' "
          "text-anchor='end'>{5}</text>",
          L, W - legend, Y(t), L - 5, Y(t) + 4, charts::tick_label(t));
    h += fmt::format(
        "<text x='14' y='{0}' font-size='12' text-anchor='middle' transform='rotate(-90 14 {0})'>ms per "
        "decode step</text>",
        (T + H - B) / 2);
    for (std::size_t g = 0; g < o.decode_steps.size(); ++g) {
      const double gx = L + group * static_cast<double>(g) + group * 0.1;
      for (std::size_t m = 0; m < o.modes.size(); ++m) {
        const double x = gx + bar * static_cast<double>(m);
        double base = 0;
        for (std::size_t p = 0; p < runtime::kServePhases; ++p) {
          const double v = o.decode_steps[g].by_mode[m].phase_s[p] * 1e3;
          if (v <= 0) continue;
          h += fmt::format(
              "<rect x='{:.1f}' y='{:.1f}' width='{:.1f}' height='{:.1f}' fill='{}'><title>{} {}: {:.3f} "
              "ms</title></rect>",
              x, Y(base + v), bar - 2, Y(base) - Y(base + v), serve_phase_color(p), runtime::launch_mode_name(o.modes[m]),
              runtime::serve_phase_name(static_cast<ServePhase>(p)), v);
          base += v;
        }
        h += fmt::format("<text x='{:.1f}' y='{}' font-size='10' text-anchor='middle'>{}</text>", x + bar / 2,
                         H - B + 12, runtime::launch_mode_name(o.modes[m])[0]);
      }
      h += fmt::format("<text x='{:.1f}' y='{}' font-size='12' text-anchor='middle'>batch {}</text>",
                       gx + bar * static_cast<double>(o.modes.size()) / 2, H - B + 30, o.decode_steps[g].batch);
    }
    for (std::size_t p = 0; p < runtime::kServePhases; ++p)
      h += fmt::format(
          "<rect x='{}' y='{}' width='12' height='12' fill='{}'/><text x='{}' y='{}' font-size='12'>{}</text>",
          W - legend + 10, T + 18 * static_cast<double>(p), serve_phase_color(p), W - legend + 26,
          T + 10 + 18 * static_cast<double>(p), runtime::serve_phase_name(static_cast<ServePhase>(p)));
    h += "</svg><p>e: eager, g: graph, m: multi-step (per decode step of a launch).</p>";
  }
  // KV-cache use over time.
  {
    std::vector<std::pair<std::string, std::vector<std::pair<double, double>>>> series;
    std::vector<std::string> colors;
    for (std::size_t i = 0; i < o.runs.size(); ++i) {
      std::vector<std::pair<double, double>> pts;
      for (const auto& p : r["runs"][i]["kv_cache"]["timeline"])
        pts.emplace_back(p[0].get<double>(),
                         p[1].get<double>() / std::max<double>(1, r["kv_cache"]["blocks"].get<double>()) * 100);
      series.emplace_back(runtime::launch_mode_name(o.runs[i].mode), pts);
      colors.push_back(mode_color(o.runs[i].mode));
    }
    h += "<h2>KV cache in use</h2>" + line_chart("KV-cache blocks in use", "time (s)", "% of blocks", series, colors);
  }
  if (!o.sweep.empty()) {
    std::vector<std::pair<std::string, std::vector<std::pair<double, double>>>> tpot, e2e;
    std::vector<std::string> colors;
    for (LaunchMode m : o.modes) {
      std::vector<std::pair<double, double>> a, b;
      for (const auto& run : r["sweep"])
        if (run["launch"] == runtime::launch_mode_name(m)) {
          a.emplace_back(run["output_tokens_per_s"].get<double>(), run["tpot_ms"]["p50"].get<double>());
          b.emplace_back(run["output_tokens_per_s"].get<double>(), run["e2e_ms"]["p99"].get<double>() / 1e3);
        }
      tpot.emplace_back(runtime::launch_mode_name(m), a);
      e2e.emplace_back(runtime::launch_mode_name(m), b);
      colors.push_back(mode_color(m));
    }
    h += "<h2>Latency against throughput</h2><p>Each point a request rate of the sweep.</p>" +
         line_chart("TPOT p50 against output throughput", "output tokens/s", "TPOT p50 (ms)", tpot, colors) +
         line_chart("end-to-end p99 against output throughput", "output tokens/s", "e2e p99 (s)", e2e, colors);
  }
  h += "<h2>Report</h2><pre>" + escape_xml(serve_text(o, r)) + "</pre></body></html>\n";
  return h;
}

}  // namespace ascendsim::report
