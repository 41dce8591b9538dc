#include "runtime/html_report.h"

#include <algorithm>
#include <cmath>
#include <map>

#include <fmt/format.h>

namespace ascendsim::runtime {

namespace {

const char* kPhaseColor[sim::kPhaseCount] = {"#8e6c8a", "#e7a33e", "#d1495b", "#2e86ab", "#66a182",
                                             "#9c9c9c", "#17becf", "#5c4d7d", "#e15759"};
const char* kStrategyColor[] = {"#d1495b", "#edae49", "#66a182", "#2e86ab"};

std::string esc(const std::string& s) {
  std::string o;
  for (char c : s) {
    if (c == '<')
      o += "&lt;";
    else if (c == '>')
      o += "&gt;";
    else if (c == '&')
      o += "&amp;";
    else if (c == '"')
      o += "&quot;";
    else
      o += c;
  }
  return o;
}

const char* color_of(Strategy s) { return kStrategyColor[static_cast<int>(s)]; }

std::string page(const std::string& title, const std::string& body) {
  return "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>" + esc(title) +
         "</title>\n<style>body{font-family:system-ui,sans-serif;margin:2em;color:#222;max-width:1100px}"
         "table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #ccc;padding:4px 8px;text-align:right}"
         "th{background:#f3f3f3}td:first-child,th:first-child{text-align:left}svg{display:block;margin:1em 0}"
         "svg text{font-size:12px;font-family:system-ui,sans-serif}.note{color:#555}</style></head><body>\n<h1>" +
         esc(title) + "</h1>\n" + body + "</body></html>\n";
}

std::string legend(const std::vector<std::pair<std::string, std::string>>& items, double x, double y) {
  std::string s;
  for (const auto& [label, color] : items) {
    s += fmt::format("<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"12\" height=\"12\" fill=\"{}\"/>", x, y, color);
    s += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\">{}</text>", x + 16, y + 10, esc(label));
    x += 30 + 7.0 * static_cast<double>(label.size());
  }
  return s;
}

std::string breakdown_chart(const std::vector<RunResult>& runs) {
  const double left = 110, width = 760, bar = 26, gap = 12, top = 40;
  const double height = top + static_cast<double>(runs.size()) * (bar + gap) + 30;
  std::string s = fmt::format(
      "<svg id=\"chart-breakdown\" class=\"chart\" width=\"{:.0f}\" height=\"{:.0f}\" role=\"img\" "
      "aria-label=\"time breakdown per strategy\">",
      left + width + 20, height);
  std::vector<std::pair<std::string, std::string>> items;
  for (std::size_t p = 0; p < sim::kPhaseCount; ++p)
    items.emplace_back(sim::phase_name(static_cast<sim::Phase>(p)), kPhaseColor[p]);
  s += legend(items, left, 8);
  for (std::size_t i = 0; i < runs.size(); ++i) {
    const auto& r = runs[i];
    const double y = top + static_cast<double>(i) * (bar + gap);
    s += fmt::format("<text x=\"{:.0f}\" y=\"{:.1f}\" text-anchor=\"end\">{}</text>", left - 8, y + bar * 0.65,
                     strategy_name(r.session.strategy));
    double x = left;
    for (std::size_t p = 0; p < sim::kPhaseCount; ++p) {
      const double frac = r.sim_time_s > 0 ? r.breakdown_s[p] / r.sim_time_s : 0;
      const double w = frac * width;
      if (w <= 0) continue;
      s += fmt::format(
          "<rect class=\"bar\" x=\"{:.2f}\" y=\"{:.1f}\" width=\"{:.2f}\" height=\"{:.0f}\" fill=\"{}\"><title>{}: "
          "{:.1f}% ({:.6f} s)</title></rect>",
          x, y, w, bar, kPhaseColor[p], sim::phase_name(static_cast<sim::Phase>(p)), 100 * frac, r.breakdown_s[p]);
      x += w;
    }
  }
  for (int t = 0; t <= 4; ++t)
    s += fmt::format("<text x=\"{:.1f}\" y=\"{:.0f}\" text-anchor=\"middle\">{}%</text>", left + width * t / 4.0,
                     height - 8, t * 25);
  return s + "</svg>\n";
}

std::string step_time_chart(const std::vector<RunResult>& runs) {
  double max_ms = 0;
  for (const auto& r : runs) max_ms = std::max(max_ms, r.steps.step.stats().mean_ms);
  const double left = 110, width = 700, bar = 22, gap = 10;
  const double height = static_cast<double>(runs.size()) * (bar + gap) + 20;
  std::string s = fmt::format(
      "<svg id=\"chart-step-time\" class=\"chart\" width=\"{:.0f}\" height=\"{:.0f}\" role=\"img\" "
      "aria-label=\"mean step time per strategy\">",
      left + width + 120, height);
  for (std::size_t i = 0; i < runs.size(); ++i) {
    const auto& r = runs[i];
    const double ms = r.steps.step.stats().mean_ms;
    const double y = 10 + static_cast<double>(i) * (bar + gap);
    const double w = max_ms > 0 ? ms / max_ms * width : 0;
    s += fmt::format("<text x=\"{:.0f}\" y=\"{:.1f}\" text-anchor=\"end\">{}</text>", left - 8, y + bar * 0.7,
                     strategy_name(r.session.strategy));
    s += fmt::format("<rect class=\"bar\" x=\"{:.0f}\" y=\"{:.1f}\" width=\"{:.2f}\" height=\"{:.0f}\" fill=\"{}\"/>",
                     left, y, w, bar, color_of(r.session.strategy));
    s += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\">{:.4f} ms/step</text>", left + w + 6, y + bar * 0.7, ms);
  }
  return s + "</svg>\n";
}

std::string interactions_chart(const std::vector<RunResult>& runs) {
  const std::vector<std::pair<std::string, std::int64_t Interactions::*>> kinds = {
      {"op launches", &Interactions::op_launches},
      {"graph launches", &Interactions::graph_launches},
      {"H2D copies", &Interactions::h2d_copies},
      {"D2H copies", &Interactions::d2h_copies},
      {"host syncs", &Interactions::host_syncs}};
  double max_v = 1;
  for (const auto& r : runs)
    for (const auto& k : kinds) max_v = std::max(max_v, static_cast<double>(r.interactions.*(k.second)));
  const double top_log = std::ceil(std::log10(max_v + 1));
  const double left = 60, plot_h = 220, group_w = 150, top = 30;
  const double bar_w = (group_w - 30) / static_cast<double>(std::max<std::size_t>(1, runs.size()));
  std::string s = fmt::format(
      "<svg id=\"chart-interactions\" class=\"chart\" width=\"{:.0f}\" height=\"{:.0f}\" role=\"img\" "
      "aria-label=\"host-device interactions per strategy (log scale)\">",
      left + group_w * static_cast<double>(kinds.size()) + 20, top + plot_h + 40);
  std::vector<std::pair<std::string, std::string>> items;
  for (const auto& r : runs) items.emplace_back(strategy_name(r.session.strategy), color_of(r.session.strategy));
  s += legend(items, left, 4);
  for (int d = 0; d <= static_cast<int>(top_log); ++d) {
    const double y = top + plot_h - plot_h * d / top_log;
    s += fmt::format("<line x1=\"{:.0f}\" x2=\"{:.0f}\" y1=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"#ddd\"/>", left,
                     left + group_w * static_cast<double>(kinds.size()), y, y);
    s += fmt::format("<text x=\"{:.0f}\" y=\"{:.1f}\" text-anchor=\"end\">1e{}</text>", left - 4, y + 4, d);
  }
  for (std::size_t k = 0; k < kinds.size(); ++k) {
    const double gx = left + group_w * static_cast<double>(k) + 15;
    for (std::size_t i = 0; i < runs.size(); ++i) {
      const double v = static_cast<double>(runs[i].interactions.*(kinds[k].second));
      const double h = v > 0 ? plot_h * std::log10(v + 1) / top_log : 0;
      s += fmt::format(
          "<rect class=\"bar\" x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{:.1f}\" fill=\"{}\"><title>{} "
          "{}: {:.0f}</title></rect>",
          gx + bar_w * static_cast<double>(i), top + plot_h - h, bar_w - 2, h, color_of(runs[i].session.strategy),
          strategy_name(runs[i].session.strategy), kinds[k].first, v);
    }
    s += fmt::format("<text x=\"{:.1f}\" y=\"{:.0f}\" text-anchor=\"middle\">{}</text>", gx + (group_w - 30) / 2,
                     top + plot_h + 18, kinds[k].first);
  }
  return s + "</svg>\n";
}

std::string line_chart(const std::string& id, const std::string& label, const std::string& x_label,
                       const std::string& y_label,
                       const std::vector<std::pair<Strategy, std::vector<std::pair<double, double>>>>& series,
                       const std::vector<std::string>& x_ticks = {}) {
  double max_x = 0, max_y = 0;
  for (const auto& [st, pts] : series)
    for (const auto& [x, y] : pts) {
      max_x = std::max(max_x, x);
      max_y = std::max(max_y, y);
    }
  if (max_x <= 0) max_x = 1;
  if (max_y <= 0) max_y = 1;
  const double left = 70, top = 30, w = 720, h = 240;
  std::string s =
      fmt::format("<svg id=\"{}\" class=\"chart\" width=\"{:.0f}\" height=\"{:.0f}\" role=\"img\" aria-label=\"{}\">",
                  id, left + w + 30, top + h + 50, esc(label));
  std::vector<std::pair<std::string, std::string>> items;
  for (const auto& [st, pts] : series) items.emplace_back(strategy_name(st), color_of(st));
  s += legend(items, left, 4);
  s += fmt::format("<line x1=\"{0}\" x2=\"{0}\" y1=\"{1}\" y2=\"{2}\" stroke=\"#888\"/>", left, top, top + h);
  s += fmt::format("<line x1=\"{0}\" x2=\"{1}\" y1=\"{2}\" y2=\"{2}\" stroke=\"#888\"/>", left, left + w, top + h);
  for (int t = 0; t <= 4; ++t) {
    const double y = top + h - h * t / 4.0;
    s += fmt::format("<text x=\"{:.0f}\" y=\"{:.1f}\" text-anchor=\"end\">{:.3g}</text>", left - 4, y + 4,
                     max_y * t / 4.0);
  }
  if (x_ticks.empty()) {
    for (int t = 0; t <= 4; ++t)
      s += fmt::format("<text x=\"{:.1f}\" y=\"{:.0f}\" text-anchor=\"middle\">{:.3g}</text>", left + w * t / 4.0,
                       top + h + 16, max_x * t / 4.0);
  } else {
    for (std::size_t t = 0; t < x_ticks.size(); ++t)
      s += fmt::format(
          "<text x=\"{:.1f}\" y=\"{:.0f}\" text-anchor=\"middle\">{}</text>",
          left + w * static_cast<double>(t) / static_cast<double>(std::max<std::size_t>(1, x_ticks.size() - 1)),
          top + h + 16, esc(x_ticks[t]));
  }
  s += fmt::format("<text x=\"{:.0f}\" y=\"{:.0f}\" text-anchor=\"middle\">{}</text>", left + w / 2, top + h + 36,
                   esc(x_label));
  s += fmt::format("<text x=\"14\" y=\"{:.0f}\" transform=\"rotate(-90 14 {:.0f})\" text-anchor=\"middle\">{}</text>",
                   top + h / 2, top + h / 2, esc(y_label));
  for (const auto& [st, pts] : series) {
    std::string points;
    for (const auto& [x, y] : pts)
      points += fmt::format("{:.2f},{:.2f} ", left + x / max_x * w, top + h - y / max_y * h);
    s += fmt::format("<polyline class=\"series\" fill=\"none\" stroke=\"{}\" stroke-width=\"2\" points=\"{}\"/>",
                     color_of(st), points);
    for (const auto& [x, y] : pts)
      s += fmt::format("<circle cx=\"{:.2f}\" cy=\"{:.2f}\" r=\"3\" fill=\"{}\"/>", left + x / max_x * w,
                       top + h - y / max_y * h, color_of(st));
  }
  return s + "</svg>\n";
}

std::string summary_table(const std::vector<RunResult>& runs) {
  std::string s =
      "<table><tr><th>strategy</th><th>steps</th><th>simulated s</th><th>step ms (mean)</th><th>p99 ms</th>"
      "<th>samples/s</th><th>device busy</th><th>op launches</th><th>graph launches</th><th>H2D</th><th>D2H</th>"
      "<th>syncs</th></tr>\n";
  for (const auto& r : runs) {
    const auto st = r.steps.step.stats();
    const auto& io = r.interactions;
    s += fmt::format(
        "<tr><td>{}</td><td>{}</td><td>{:.4f}</td><td>{:.4f}</td><td>{:.4f}</td><td>{:.0f}</td><td>{:.1f}%</td>"
        "<td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>\n",
        strategy_name(r.session.strategy), r.steps_completed, r.sim_time_s, st.mean_ms, st.p99_ms, r.samples_per_s(),
        100 * r.device_busy_fraction(), io.op_launches, io.graph_launches, io.h2d_copies, io.d2h_copies, io.host_syncs);
  }
  return s + "</table>\n";
}

}  // namespace

std::string html_compare(const ReportHeader& h, const std::vector<RunResult>& runs) {
  std::string body;
  if (!runs.empty()) {
    const auto& s = runs.front().session;
    body += fmt::format("<p>{} on {}, batch {}, {} epoch(s) of {} steps, {} device(s).</p>\n", esc(h.workload),
                        esc(h.chip), h.batch_size, s.epochs, s.steps_per_epoch, h.devices);
  }
  body += "<h2>Summary</h2>\n" + summary_table(runs);
  body += "<h2>Mean step time</h2>\n" + step_time_chart(runs);
  body +=
      "<h2>Where the time goes</h2>\n<p class=\"note\">Each instant is charged once: device work first, then what "
      "the host's training thread was doing while the device idled.</p>\n" +
      breakdown_chart(runs);
  body += "<h2>Host-device interactions</h2>\n" + interactions_chart(runs);
  std::vector<std::pair<Strategy, std::vector<std::pair<double, double>>>> depth;
  for (const auto& r : runs) {
    if (r.data.is_null() || !r.data.contains("queue_depth_over_time") || !uses_queue(r.session.strategy)) continue;
    std::vector<std::pair<double, double>> pts;
    for (const auto& p : r.data["queue_depth_over_time"]) pts.emplace_back(p[0].get<double>(), p[1].get<double>());
    depth.emplace_back(r.session.strategy, std::move(pts));
  }
  if (!depth.empty())
    body += "<h2>Data queue depth over time</h2>\n" + line_chart("chart-queue-depth", "data queue depth over time",
                                                                 "simulated time (s)", "batches queued", depth);
  body += "<h2>Data pipeline</h2>\n<ul>\n";
  for (const auto& r : runs)
    if (!r.data.is_null())
      body += fmt::format("<li><b>{}</b>: {}. Advice: {}.</li>\n", strategy_name(r.session.strategy),
                          esc(r.data["verdict"].get<std::string>()), esc(r.data["advice"].get<std::string>()));
  body += "</ul>\n";
  return page("ascendsim — " + h.workload + " strategy comparison", body);
}

std::string html_sweep(const ReportHeader& h, const std::string& param, const std::vector<SweepPoint>& points,
                       const std::string& conclusion) {
  std::vector<std::string> values;
  for (const auto& p : points)
    if (std::find(values.begin(), values.end(), p.value) == values.end()) values.push_back(p.value);
  std::map<Strategy, std::vector<std::pair<double, double>>> by;
  for (const auto& p : points) {
    const auto idx = static_cast<double>(std::find(values.begin(), values.end(), p.value) - values.begin());
    by[p.run.session.strategy].emplace_back(idx, p.run.steps.step.stats().mean_ms);
  }
  std::vector<std::pair<Strategy, std::vector<std::pair<double, double>>>> series(by.begin(), by.end());
  std::string body = fmt::format("<p>{} on {}, batch {}: sweep of <code>{}</code>.</p>\n", esc(h.workload), esc(h.chip),
                                 h.batch_size, esc(param));
  if (!conclusion.empty()) body += "<p><b>" + esc(conclusion) + "</b></p>\n";
  body += "<h2>Mean step time</h2>\n" +
          line_chart("chart-sweep", "mean step time against " + param, param, "ms per step", series, values);
  body += "<h2>Rows</h2>\n<table><tr><th>" + esc(param) +
          "</th><th>strategy</th><th>steps</th><th>step ms</th><th>samples/s</th><th>device busy</th></tr>\n";
  for (const auto& p : points)
    body += fmt::format("<tr><td>{}</td><td>{}</td><td>{}</td><td>{:.4f}</td><td>{:.0f}</td><td>{:.1f}%</td></tr>\n",
                        esc(p.value), strategy_name(p.run.session.strategy), p.run.steps_completed,
                        p.run.steps.step.stats().mean_ms, p.run.samples_per_s(), 100 * p.run.device_busy_fraction());
  body += "</table>\n";
  return page("ascendsim — " + h.workload + " sweep of " + param, body);
}

}  // namespace ascendsim::runtime
