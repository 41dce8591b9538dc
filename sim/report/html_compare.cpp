// The strategy comparison page (compare, train): summary, breakdown, interactions, queue depth,
// the cluster, the data verdicts.
#include "sim/report/html_report.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <map>

#include <fmt/format.h>

#include "sim/report/charts.h"
#include "sim/report/html_parts.h"

namespace ascendsim::report {

using namespace runtime;
using namespace html;
using charts::nice_ticks;
using charts::text_width;
using charts::tick_label;

namespace {

std::string breakdown_chart(const std::vector<RunResult>& runs) {
  const double left = widest(strategy_names(runs)) + 16, width = 760, bar = 26, gap = 12;
  std::vector<std::pair<std::string, std::string>> items;
  const bool checkpoints =
      std::any_of(runs.begin(), runs.end(), [](const RunResult& r) { return r.session.checkpoint_every > 0; });
  for (std::size_t p = 0; p < sim::kPhaseCount; ++p)
    if (static_cast<sim::Phase>(p) != sim::Phase::Checkpoint || checkpoints)
      items.emplace_back(sim::phase_name(static_cast<sim::Phase>(p)), phase_color(p));
  const Legend key = legend(items, left, 8, left + width);
  const double top = key.bottom + 14;
  const double height = top + static_cast<double>(runs.size()) * (bar + gap) + 46;
  std::string s = fmt::format(
      "<svg id=\"chart-breakdown\" class=\"chart\" width=\"{:.0f}\" height=\"{:.0f}\" role=\"img\" "
      "aria-label=\"time breakdown per strategy\">",
      left + width + 24, height);
  s += key.svg;
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
          x, y, w, bar, phase_color(p), sim::phase_name(static_cast<sim::Phase>(p)), 100 * frac, r.breakdown_s[p]);
      x += w;
    }
  }
  for (int t = 0; t <= 4; ++t)
    s += fmt::format("<text class=\"tick\" x=\"{:.1f}\" y=\"{:.0f}\" text-anchor=\"middle\">{}%</text>",
                     left + width * t / 4.0, height - 24, t * 25);
  s += fmt::format(
      "<text class=\"axis-label\" x=\"{:.0f}\" y=\"{:.0f}\" text-anchor=\"middle\">share of simulated time</text>",
      left + width / 2, height - 6);
  return s + "</svg>\n";
}

std::string step_time_chart(const std::vector<RunResult>& runs) {
  double max_ms = 0;
  std::vector<std::string> values;
  for (const auto& r : runs) {
    max_ms = std::max(max_ms, r.steps.step.stats().mean_ms);
    values.push_back(
        fmt::format("{:.4f} ms/step (median {:.4f})", r.steps.step.stats().mean_ms, r.steps.step.stats().p50_ms));
  }
  const double left = widest(strategy_names(runs)) + 16, width = 700, bar = 22, gap = 10;
  const double height = static_cast<double>(runs.size()) * (bar + gap) + 20;
  std::string s = fmt::format(
      "<svg id=\"chart-step-time\" class=\"chart\" width=\"{:.0f}\" height=\"{:.0f}\" role=\"img\" "
      "aria-label=\"mean step time per strategy\">",
      left + width + 6 + widest(values) + 12, height);
  for (std::size_t i = 0; i < runs.size(); ++i) {
    const auto& r = runs[i];
    const double ms = r.steps.step.stats().mean_ms;
    const double y = 10 + static_cast<double>(i) * (bar + gap);
    const double w = max_ms > 0 ? ms / max_ms * width : 0;
    s += fmt::format("<text x=\"{:.0f}\" y=\"{:.1f}\" text-anchor=\"end\">{}</text>", left - 8, y + bar * 0.7,
                     strategy_name(r.session.strategy));
    s += fmt::format(
        "<rect class=\"bar\" x=\"{:.0f}\" y=\"{:.1f}\" width=\"{:.2f}\" height=\"{:.0f}\" fill=\"{}\"><title>{}: "
        "{:.4f} "
        "ms per step</title></rect>",
        left, y, w, bar, color_of(r.session.strategy), strategy_name(r.session.strategy), ms);
    s += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\">{}</text>", left + w + 6, y + bar * 0.7, values[i]);
  }
  return s + "</svg>\n";
}

/// Counts per strategy on a logarithmic axis. The axis starts half a decade below 1, so a count
/// of 1 still draws a bar; a count of 0 has no place on it and draws none, only its label "0".
/// Value labels are compact (274k) and every bar is as wide as the widest, so they never touch.
std::string interactions_chart(const std::vector<RunResult>& runs) {
  const std::vector<std::pair<std::string, std::int64_t Interactions::*>> kinds = {
      {"op launches", &Interactions::op_launches},
      {"graph launches", &Interactions::graph_launches},
      {"H2D copies", &Interactions::h2d_copies},
      {"D2H copies", &Interactions::d2h_copies},
      {"host syncs", &Interactions::host_syncs}};
  constexpr double kValueFont = 10, kBase = -0.5;  // log10 of the axis' bottom
  double max_v = 1, label_w = 0, kind_w = 0;
  for (const auto& k : kinds) {
    kind_w = std::max(kind_w, text_width(k.first));
    for (const auto& r : runs) {
      const double v = static_cast<double>(r.interactions.*(k.second));
      max_v = std::max(max_v, v);
      label_w = std::max(label_w, text_width(charts::count_label(v), kValueFont));
    }
  }
  const double decades = std::max(1.0, std::ceil(std::log10(max_v) - 1e-12));
  std::vector<std::string> ticks;
  for (int d = 0; d <= static_cast<int>(decades); ++d) ticks.push_back(charts::count_label(std::pow(10, d)));
  const double n = static_cast<double>(std::max<std::size_t>(1, runs.size()));
  const double bar_w = std::max(16.0, label_w + 4);
  const double group_w = std::max(n * bar_w, kind_w) + 28;
  const double left = 28 + widest(ticks) + 8, plot_h = 220;
  const double plot_w = group_w * static_cast<double>(kinds.size());
  std::vector<std::pair<std::string, std::string>> items;
  for (const auto& r : runs) items.emplace_back(strategy_name(r.session.strategy), color_of(r.session.strategy));
  const Legend key = legend(items, left, 4, left + plot_w);
  const double top = key.bottom + 20;
  auto py = [&](double v) { return top + plot_h - plot_h * (std::log10(v) - kBase) / (decades - kBase); };
  std::string s = fmt::format(
      "<svg id=\"chart-interactions\" class=\"chart\" width=\"{:.0f}\" height=\"{:.0f}\" role=\"img\" "
      "aria-label=\"host-device interactions per strategy (log scale)\">",
      left + plot_w + 20, top + plot_h + 30);
  s += key.svg;
  for (int d = 0; d <= static_cast<int>(decades); ++d) {
    const double y = py(std::pow(10, d));
    s += fmt::format("<line x1=\"{:.0f}\" x2=\"{:.0f}\" y1=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"#ddd\"/>", left,
                     left + plot_w, y, y);
    s += fmt::format("<text class=\"tick\" x=\"{:.0f}\" y=\"{:.1f}\" text-anchor=\"end\">{}</text>", left - 6, y + 4,
                     ticks[static_cast<std::size_t>(d)]);
  }
  s += fmt::format("<line x1=\"{0:.0f}\" x2=\"{1:.0f}\" y1=\"{2:.1f}\" y2=\"{2:.1f}\" stroke=\"#888\"/>", left,
                   left + plot_w, top + plot_h);
  s += fmt::format(
      "<text class=\"axis-label\" x=\"14\" y=\"{0:.0f}\" transform=\"rotate(-90 14 {0:.0f})\" "
      "text-anchor=\"middle\">count per run (log scale)</text>",
      top + plot_h / 2);
  for (std::size_t k = 0; k < kinds.size(); ++k) {
    const double gx = left + group_w * static_cast<double>(k) + (group_w - n * bar_w) / 2;
    for (std::size_t i = 0; i < runs.size(); ++i) {
      const double v = static_cast<double>(runs[i].interactions.*(kinds[k].second));
      const double bx = gx + bar_w * static_cast<double>(i);
      const double y = v > 0 ? py(v) : top + plot_h;
      if (v > 0)
        s += fmt::format(
            "<rect class=\"bar\" x=\"{:.1f}\" y=\"{:.2f}\" width=\"{:.1f}\" height=\"{:.2f}\" fill=\"{}\"><title>{} "
            "{}: {:.0f}</title></rect>",
            bx + 1, y, bar_w - 2, top + plot_h - y, color_of(runs[i].session.strategy),
            strategy_name(runs[i].session.strategy), kinds[k].first, v);
      s += fmt::format(
          "<text class=\"value\" x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\" "
          "style=\"font-size:{:.0f}px\">{}</text>",
          bx + bar_w / 2, y - 3, kValueFont, charts::count_label(v));
    }
    s += fmt::format("<text x=\"{:.1f}\" y=\"{:.0f}\" text-anchor=\"middle\">{}</text>",
                     left + group_w * (static_cast<double>(k) + 0.5), top + plot_h + 18, kinds[k].first);
  }
  return s + "</svg>\n";
}

std::string summary_table(const std::vector<RunResult>& runs) {
  std::string s =
      "<table id=\"summary\"><tr><th>strategy</th><th>steps</th><th>simulated s</th><th>step ms (mean)</th>"
      "<th>median ms</th><th>p99 ms</th><th>steady ms</th><th>warm-up s</th>"
      "<th>samples/s</th><th>device busy</th><th>op launches</th><th>graph launches</th><th>H2D</th><th>D2H</th>"
      "<th>syncs</th></tr>\n";
  for (const auto& r : runs) {
    const auto st = r.steps.step.stats();
    const auto& io = r.interactions;
    s += fmt::format(
        "<tr><td>{}</td><td>{}</td><td>{:.4f}</td><td>{:.4f}</td><td>{:.4f}</td><td>{:.4f}</td><td>{:.4f}</td>"
        "<td>{:.4f}</td><td>{:.0f}</td><td>{:.1f}%</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>\n",
        strategy_name(r.session.strategy), r.steps_completed, r.sim_time_s, st.mean_ms, st.p50_ms, st.p99_ms,
        r.steps.steady.stats().mean_ms, r.steps.warmup_s(), r.samples_per_s(), 100 * r.device_busy_fraction(),
        io.op_launches, io.graph_launches, io.h2d_copies, io.d2h_copies, io.host_syncs);
  }
  s += "</table>\n";
  if (!runs.empty())
    s += fmt::format(
        "<p class=\"note\">steady: the mean step from step {} on; warm-up: what the steps before it took beyond as "
        "many steady steps (graph load, pipeline fill, a cache's first epoch).</p>\n",
        runs.front().steps.steady_from + 1);
  return s;
}

/// Small multiples: one panel per strategy, two to a row on a wide page, sharing their scales.
constexpr double kPanelWidth = 528;

std::string shared_legend(const std::string& id, const std::vector<std::pair<std::string, std::string>>& items) {
  const Legend key = legend(items, 4, 4, 2 * kPanelWidth);
  return fmt::format(
      "<svg id=\"{}\" class=\"chart legend\" width=\"{:.0f}\" height=\"{:.0f}\" role=\"img\" "
      "aria-label=\"legend\">{}</svg>\n",
      id, 2 * kPanelWidth, key.bottom + 4, key.svg);
}

/// Per strategy, a mean step on one row per stream: forward and backward on the compute stream,
/// each AllReduce group on the communication stream from its start for its duration, the part
/// no computation hid drawn at its end; the step's end marked. One panel per strategy, on one
/// time scale.
std::string group_timeline(const std::vector<RunResult>& runs) {
  double end = 0;
  std::vector<std::string> labels = {"compute stream"};
  bool any = false;
  for (const auto& r : runs) {
    const auto& groups = r.comm_groups;
    if (!groups.is_array() || groups.empty()) continue;
    any = true;
    const double fp_bp = r.steps.fp_bp.stats().mean_ms;
    end = std::max({end, fp_bp, fp_bp + r.steps.tail.stats().mean_ms});
    for (std::size_t k = 0; k < groups.size(); ++k) {
      end = std::max(end, groups[k].value("start_ms", 0.0) + groups[k].value("duration_ms", 0.0));
      labels.push_back(fmt::format("group {} ({:.1f} MB)", k, groups[k]["bytes"].get<double>() / 1e6));
    }
  }
  if (!any) return "";
  const std::vector<double> xt = nice_ticks(0, end);
  std::vector<std::string> x_labels;
  for (double t : xt) x_labels.push_back(tick_label(t));
  const double left = widest(labels) + 14, right = text_width(x_labels.back()) / 2 + 6;
  const double width = kPanelWidth - left - right, row = 20, top = 6;
  auto px = [&](double ms) { return left + ms / xt.back() * width; };
  const char* compute = phase_color(static_cast<std::size_t>(sim::Phase::DeviceCompute));
  const char* exposed = phase_color(static_cast<std::size_t>(sim::Phase::Comm));
  const char* hidden = "#c8c8c8";
  std::string s =
      "<h3>The AllReduce groups in a mean step (ms)</h3>\n<p class=\"note\">Per strategy, on one scale: the compute "
      "stream's forward and backward pass, each group's AllReduce from its start for its duration, and the part no "
      "computation hid at its end; dotted: the step's end, after its tail.</p>\n";
  s += shared_legend("legend-groups",
                     {{"forward + backward", compute}, {"communication hidden", hidden}, {"exposed", exposed}});
  s += "<div class=\"multiples\">\n";
  for (const auto& r : runs) {
    const auto& groups = r.comm_groups;
    if (!groups.is_array() || groups.empty()) continue;
    // The step ends after its tail; the interval before the first forward op is not drawn.
    const double fp_bp = r.steps.fp_bp.stats().mean_ms, step = fp_bp + r.steps.tail.stats().mean_ms;
    const double height = top + static_cast<double>(groups.size() + 1) * (row + 6) + 40;
    const std::string name = strategy_name(r.session.strategy);
    s += fmt::format(
        "<figure><figcaption>{0}</figcaption><svg id=\"chart-groups-{0}\" class=\"chart\" width=\"{1:.0f}\" "
        "height=\"{2:.0f}\" role=\"img\" aria-label=\"{0}: forward and backward pass and each AllReduce group over a "
        "mean step\">",
        name, kPanelWidth, height);
    auto bar = [&](double y, double from, double to, const char* color, const std::string& title) {
      s += fmt::format(
          "<rect class=\"bar\" x=\"{:.2f}\" y=\"{:.1f}\" width=\"{:.2f}\" height=\"{:.0f}\" fill=\"{}\">"
          "<title>{}</title></rect>",
          px(from), y, std::max(0.5, px(to) - px(from)), row, color, esc(title));
    };
    double y = top;
    s += fmt::format("<text x=\"{:.0f}\" y=\"{:.1f}\" text-anchor=\"end\">{}</text>", left - 6, y + 14, labels[0]);
    bar(y, 0, fp_bp, compute, fmt::format("forward + backward: {:.3f} ms", fp_bp));
    for (std::size_t k = 0; k < groups.size(); ++k) {
      y += row + 6;
      const auto& g = groups[k];
      const double start = g.value("start_ms", 0.0), dur = g.value("duration_ms", 0.0),
                   exp = std::min(dur, g.value("exposed_ms", 0.0));
      s += fmt::format("<text x=\"{:.0f}\" y=\"{:.1f}\" text-anchor=\"end\">group {} ({:.1f} MB)</text>", left - 6,
                       y + 14, k, g["bytes"].get<double>() / 1e6);
      bar(y, start, start + dur - exp, hidden,
          fmt::format("group {}: starts {:.3f} ms, lasts {:.3f} ms, {:.3f} ms hidden", k, start, dur, dur - exp));
      bar(y, start + dur - exp, start + dur, exposed, fmt::format("group {}: {:.3f} ms exposed", k, exp));
    }
    const double axis = y + row + 6;
    s += fmt::format("<line x1=\"{0:.0f}\" x2=\"{1:.0f}\" y1=\"{2:.1f}\" y2=\"{2:.1f}\" stroke=\"#888\"/>", left,
                     left + width, axis);
    for (std::size_t i = 0; i < xt.size(); ++i)
      s += fmt::format("<text class=\"tick x-tick\" x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\">{}</text>",
                       px(xt[i]), axis + 14, x_labels[i]);
    s += fmt::format(
        "<line class=\"mark\" x1=\"{0:.2f}\" x2=\"{0:.2f}\" y1=\"{1}\" y2=\"{2:.1f}\" stroke=\"#444\" "
        "stroke-dasharray=\"2 3\"><title>the step ends: {3:.3f} ms</title></line>",
        px(step), top - 4, axis, step);
    s += fmt::format(
        "<text class=\"axis-label\" x=\"{:.0f}\" y=\"{:.1f}\" text-anchor=\"middle\">ms after the step's first "
        "forward op</text>",
        left + width / 2, axis + 32);
    s += "</svg></figure>\n";
  }
  return s + "</div>\n";
}

/// Per strategy, each rank's wait for data and exposed communication as two columns: one panel
/// per strategy, on one scale, however many ranks.
std::string rank_waits(const std::vector<RunResult>& runs) {
  double most = 0;
  std::size_t n = 0;
  for (const auto& r : runs) {
    n = std::max(n, r.rank_comm_s.size());
    for (std::size_t k = 0; k < r.rank_comm_s.size(); ++k)
      most = std::max({most, r.rank_comm_s[k], r.rank_wait_data_s[k]});
  }
  if (n == 0) return "";
  const std::vector<double> yt = nice_ticks(0, most > 0 ? most : 1);
  std::vector<std::string> y_labels;
  for (double t : yt) y_labels.push_back(tick_label(t));
  const double left = widest(y_labels) + 12, right = 10, top = 8, plot_h = 120;
  const double width = kPanelWidth - left - right, slot = width / static_cast<double>(n);
  const double col = std::min(18.0, slot * 0.4);
  // Label every rank, or every 2nd, 4th, ... where the numbers would touch.
  std::size_t every = 1;
  while (static_cast<double>(every) * slot < text_width(std::to_string(n - 1)) + 8) every *= 2;
  auto py = [&](double v) { return top + plot_h - v / yt.back() * plot_h; };
  const char* colors[2] = {phase_color(static_cast<std::size_t>(sim::Phase::WaitData)),
                           phase_color(static_cast<std::size_t>(sim::Phase::Comm))};
  const char* what[2] = {"wait for data", "exposed communication"};
  std::string s = "<h3>Each rank's waits (s)</h3>\n";
  s += shared_legend("legend-ranks", {{what[0], colors[0]}, {what[1], colors[1]}});
  s += "<div class=\"multiples\">\n";
  for (const auto& r : runs) {
    const std::size_t ranks = r.rank_comm_s.size();
    if (ranks == 0) continue;
    const std::string name = strategy_name(r.session.strategy);
    s += "<figure><figcaption>" + name + "</figcaption>";
    if (r.straggler() >= 0)
      s += fmt::format("<p class=\"note\">The others wait for rank {} in the AllReduce.</p>", r.straggler());
    s += fmt::format(
        "<svg id=\"chart-ranks-{0}\" class=\"chart\" width=\"{1:.0f}\" height=\"{2:.0f}\" role=\"img\" "
        "aria-label=\"{0}: each rank's wait for data and exposed communication\">",
        name, kPanelWidth, top + plot_h + 44);
    for (std::size_t i = 0; i < yt.size(); ++i) {
      s += fmt::format("<line x1=\"{:.0f}\" x2=\"{:.0f}\" y1=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"#ddd\"/>", left,
                       left + width, py(yt[i]), py(yt[i]));
      s += fmt::format("<text class=\"tick y-tick\" x=\"{:.0f}\" y=\"{:.1f}\" text-anchor=\"end\">{}</text>", left - 4,
                       py(yt[i]) + 4, y_labels[i]);
    }
    for (std::size_t k = 0; k < ranks; ++k) {
      const double x = left + slot * static_cast<double>(k) + slot / 2;
      const double values[2] = {r.rank_wait_data_s[k], r.rank_comm_s[k]};
      for (int b = 0; b < 2; ++b)
        s += fmt::format(
            "<rect class=\"bar\" x=\"{:.2f}\" y=\"{:.2f}\" width=\"{:.2f}\" height=\"{:.2f}\" fill=\"{}\">"
            "<title>rank {}: {:.4f} s {}</title></rect>",
            x - col + b * col, py(values[b]), col, top + plot_h - py(values[b]), colors[b], k, values[b], what[b]);
      if (k % every == 0)
        s += fmt::format("<text class=\"tick x-tick\" x=\"{:.1f}\" y=\"{:.0f}\" text-anchor=\"middle\">{}</text>", x,
                         top + plot_h + 14, k);
    }
    s += fmt::format("<line x1=\"{0:.0f}\" x2=\"{1:.0f}\" y1=\"{2:.1f}\" y2=\"{2:.1f}\" stroke=\"#888\"/>", left,
                     left + width, top + plot_h);
    s += fmt::format("<text class=\"axis-label\" x=\"{:.0f}\" y=\"{:.0f}\" text-anchor=\"middle\">rank</text>",
                     left + width / 2, top + plot_h + 34);
    s += "</svg></figure>\n";
  }
  return s + "</div>\n";
}

/// Per cluster size of a scaling curve, a bar of its run's time: the efficiency kept, then the
/// causes of what was lost (a cause below zero, where one device spent more, is not drawn, and
/// the bar is scaled to the causes drawn).
std::string scaling_loss_chart(const RunResult& r) {
  static const char* kColors[] = {"#117733", "#aa4499", "#44aa99", "#ddcc77", "#332288", "#dddddd", "#6f6f6f"};
  std::vector<std::string> rows;
  for (const auto& p : r.scaling) {
    const auto n = p["devices"].get<std::int64_t>();
    rows.push_back(std::to_string(n) + (n == 1 ? " device" : " devices"));
  }
  const double left = widest(rows) + 16, width = 760, bar = 18, gap = 8;
  std::vector<std::pair<std::string, std::string>> items = {{"efficiency", kColors[0]}};
  for (std::size_t c = 0; c < kScalingLosses.size(); ++c) items.emplace_back(kScalingLosses[c], kColors[c + 1]);
  const Legend key = legend(items, left, 8, left + width);
  const double top = key.bottom + 14;
  const double height = top + static_cast<double>(rows.size()) * (bar + gap) + 46;
  const std::string id = "chart-scaling-lost-" + std::string(strategy_name(r.session.strategy));
  std::string s = fmt::format(
      "<svg id=\"{}\" class=\"chart\" width=\"{:.0f}\" height=\"{:.0f}\" role=\"img\" "
      "aria-label=\"efficiency kept and lost per cluster size, {}\">",
      id, left + width + 24, height, strategy_name(r.session.strategy));
  s += key.svg;
  for (std::size_t i = 0; i < r.scaling.size(); ++i) {
    const auto& p = r.scaling[i];
    std::vector<std::pair<std::string, double>> parts = {{"efficiency", p["efficiency"].get<double>()}};
    const bool has_lost = p.contains("lost");
    for (const char* c : kScalingLosses) parts.emplace_back(c, has_lost ? p["lost"][c].get<double>() : 0.0);
    double drawn = 0;
    for (const auto& part : parts) drawn += std::max(0.0, part.second);
    const double y = top + static_cast<double>(i) * (bar + gap);
    s += fmt::format("<text x=\"{:.0f}\" y=\"{:.1f}\" text-anchor=\"end\">{}</text>", left - 8, y + bar * 0.7, rows[i]);
    double x = left;
    for (std::size_t k = 0; k < parts.size(); ++k) {
      const double w = drawn > 0 ? std::max(0.0, parts[k].second) / drawn * width : 0.0;
      if (w <= 0) continue;
      s += fmt::format(
          "<rect class=\"bar\" x=\"{:.2f}\" y=\"{:.1f}\" width=\"{:.2f}\" height=\"{:.0f}\" fill=\"{}\">"
          "<title>{}, {}: {:.1f}% of the run's time</title></rect>",
          x, y, w, bar, kColors[k], rows[i], parts[k].first, 100 * parts[k].second);
      x += w;
    }
  }
  for (int t = 0; t <= 4; ++t)
    s += fmt::format("<text class=\"tick\" x=\"{:.1f}\" y=\"{:.0f}\" text-anchor=\"middle\">{}%</text>",
                     left + width * t / 4.0, height - 24, t * 25);
  s += fmt::format(
      "<text class=\"axis-label\" x=\"{:.0f}\" y=\"{:.0f}\" text-anchor=\"middle\">share of the run's time "
      "({})</text>",
      left + width / 2, height - 6, strategy_name(r.session.strategy));
  return s + "</svg>\n";
}

/// Data-parallel runs: each AllReduce group (bytes, collective time) and each rank's waits, per
/// strategy: how long it waited for its data and for the others in the AllReduce.
std::string cluster_section(const std::vector<RunResult>& runs) {
  std::string s = "<h2>Cluster</h2>\n";
  const auto& groups = runs.front().comm_groups;
  s += "<h3>AllReduce groups</h3>\n<table id=\"allreduce-groups\"><tr><th>group</th><th>gradients</th>"
       "<th>MB</th><th>AllReduce ms</th></tr>\n";
  double max_ms = 0;
  for (std::size_t g = 0; g < groups.size(); ++g) {
    const double ms = groups[g].value("all_reduce_ms", 0.0);
    max_ms = std::max(max_ms, ms);
    s += fmt::format("<tr><td>{}</td><td>{} to {}</td><td>{:.1f}</td><td>{:.3f}</td></tr>\n", g,
                     groups[g]["first"].get<std::int64_t>(), groups[g]["last"].get<std::int64_t>(),
                     groups[g]["bytes"].get<double>() / 1e6, ms);
  }
  s += "</table>\n";
  s += group_timeline(runs);
  // The scaling curve (--scaling): efficiency against one device, per strategy.
  if (runs.front().scaling.is_array() && !runs.front().scaling.empty()) {
    Series series;
    double hi = 1;
    for (const auto& r : runs) {
      std::vector<std::pair<double, double>> pts;
      for (const auto& p : r.scaling) {
        pts.emplace_back(p["devices"].get<double>(), p["efficiency"].get<double>());
        hi = std::max(hi, p["devices"].get<double>());
      }
      series.emplace_back(r.session.strategy, pts);
    }
    s += "<h3>Scaling</h3>\n<p class=\"note\">samples/s across the ranks over N times one device's, for the same "
         "batch per device and steps per rank; 1 is linear.</p>\n";
    s += line_chart("chart-scaling", "scaling efficiency against devices", {"devices", hi >= 64, true},
                    {"scaling efficiency"}, "of linear", series, 0, {}, 1.0, "linear");
    s += "<table id=\"scaling\"><tr><th>devices</th>";
    for (const auto& r : runs) s += "<th>" + std::string(strategy_name(r.session.strategy)) + " samples/s</th>";
    s += "</tr>\n";
    for (std::size_t i = 0; i < runs.front().scaling.size(); ++i) {
      s += fmt::format("<tr><td>{}</td>", runs.front().scaling[i]["devices"].get<std::int64_t>());
      for (const auto& r : runs)
        s += fmt::format("<td>{:.0f} ({:.1f}%)</td>", r.scaling[i]["samples_per_s"].get<double>(),
                         100 * r.scaling[i]["efficiency"].get<double>());
      s += "</tr>\n";
    }
    s += "</table>\n";
    s += "<h3>Where the efficiency goes</h3>\n<p class=\"note\">per cluster size, its run's time: the efficiency "
         "kept against one device and the causes of the rest — exposed collectives, waiting for stragglers, the "
         "host, the device's compute, the one-time set-up, evaluation (each its time beyond one device's).</p>\n";
    for (const auto& r : runs) s += scaling_loss_chart(r);
  }
  return s + rank_waits(runs);
}

}  // namespace

std::string html_compare(const ReportHeader& h, const std::vector<RunResult>& runs) {
  std::string body;
  if (!runs.empty()) {
    const auto& s = runs.front().session;
    body += fmt::format("<p>{} on {}, batch {}, {} epoch(s) of {} steps, {} device(s).</p>\n", esc(h.workload),
                        chip_and_server(h), h.batch_size, s.epochs, s.steps_per_epoch, h.devices);
    if (!h.setting.empty()) body += "<p class=\"setting\">" + esc(h.setting) + "</p>\n";
  }
  body += "<h2>Summary</h2>\n" + summary_table(runs);
  body += "<h2>Mean step time</h2>\n" + step_time_chart(runs);
  body +=
      "<h2>Where the time goes</h2>\n<p class=\"note\">Each instant is charged once: device work first, then what "
      "the host's training thread was doing while the device idled.</p>\n" +
      breakdown_chart(runs);
  if (std::any_of(runs.begin(), runs.end(), [](const RunResult& r) { return r.time_to_train_has_parts(); })) {
    std::vector<std::pair<std::string, TimeToTrain>> rows;
    for (const auto& r : runs) rows.emplace_back(strategy_name(r.session.strategy), r.time_to_train());
    body += std::string("<h3>Time to train</h3>\n") + kTimeToTrainNote +
            time_to_train_section("chart-time-to-train", "strategy", rows);
  }
  body += "<h2>Host-device interactions</h2>\n" + interactions_chart(runs);
  body +=
      "<h2>Step trace</h2>\n<p class=\"note\">ms per step, as MindSpore's profiler names them: the host gap before "
      "the forward pass, forward and backward, and the tail (optimizer, loop control, return).</p>\n<table "
      "id=\"step-trace\"><tr><th>strategy</th><th>iteration_interval mean</th><th>median</th><th>p99</th>"
      "<th>fp_and_bp mean</th><th>median</th><th>p99</th><th>tail mean</th><th>median</th><th>p99</th></tr>\n";
  for (const auto& r : runs) {
    body += fmt::format("<tr><td>{}</td>", strategy_name(r.session.strategy));
    for (const auto& part : {r.steps.interval.stats(), r.steps.fp_bp.stats(), r.steps.tail.stats()})
      body += fmt::format("<td>{:.4f}</td><td>{:.4f}</td><td>{:.4f}</td>", part.mean_ms, part.p50_ms, part.p99_ms);
    body += "</tr>\n";
  }
  body += "</table>\n";
  for (const auto& r : runs) {  // per step for a chosen window, steps numbered from 1
    const std::vector<NumberedStep> w = r.steps.window_steps();
    if (w.empty()) continue;
    body += fmt::format(
        "<h3>{}: steps {} to {}</h3>\n<table class=\"step-window\"><tr><th>step</th>"
        "<th>iteration_interval</th><th>fp_and_bp</th><th>tail</th><th>step ms</th></tr>\n",
        strategy_name(r.session.strategy), w.front().number, w.back().number);
    for (const auto& k : w)
      body += fmt::format("<tr><td>{}</td><td>{:.4f}</td><td>{:.4f}</td><td>{:.4f}</td><td>{:.4f}</td></tr>\n", k.number,
                          1e3 * k.interval_s, 1e3 * k.fp_bp_s, 1e3 * k.tail_s, 1e3 * k.step_s);
    body += "</table>\n";
  }
  std::vector<std::pair<Strategy, std::vector<std::pair<double, double>>>> depth;
  std::vector<std::string> depth_notes;
  for (const auto& r : runs) {
    if (r.data.is_null() || !r.data.contains("queue_depth_over_time") || !uses_queue(r.session.strategy)) continue;
    std::vector<std::pair<double, double>> pts;
    for (const auto& p : r.data["queue_depth_over_time"]) pts.emplace_back(p[0].get<double>(), p[1].get<double>());
    depth.emplace_back(r.session.strategy, std::move(pts));
    // A line that barely moves says little by itself: say in words whether the device ever
    // found the queue empty.
    const nlohmann::ordered_json* queue = &r.stats;
    for (const char* key : {"chip", "hostif", "queue"})
      queue = queue != nullptr && queue->is_object() && queue->contains(key) ? &(*queue)[key] : nullptr;
    if (queue == nullptr || !queue->is_object()) continue;
    const double waited = queue->value("empty_wait_s", 0.0);
    const std::string name = strategy_name(r.session.strategy);
    if (waited > 0)
      depth_notes.push_back(
          fmt::format("{}: GetNext found the queue empty and waited {:.3g} ms for batches in all, {:.2g}% of the run.",
                      name, 1e3 * waited, r.sim_time_s > 0 ? 100 * waited / r.sim_time_s : 0.0));
    else
      depth_notes.push_back(name + ": the queue never ran empty under the device: GetNext never waited for a batch.");
  }
  if (!depth.empty())
    body += "<h2>Data queue depth over time</h2>\n" +
            line_chart("chart-queue-depth", "data queue depth over time", {"simulated time (s)"},
                       {"batches queued", false, true}, "batches", depth, 0, {}, 0, {}, depth_notes);
  if (!runs.empty() && runs.front().devices > 1) body += cluster_section(runs);
  body += "<h2>Data pipeline</h2>\n<ul>\n";
  for (const auto& r : runs)
    if (!r.data.is_null())
      body += fmt::format("<li><b>{}</b>: {}. Advice: {}.</li>\n", strategy_name(r.session.strategy),
                          esc(r.data["verdict"].get<std::string>()), esc(r.data["advice"].get<std::string>()));
  body += "</ul>\n";
  // The execution tree: one row per stage, each strategy's busy fraction of its threads and the
  // mean usage of its output connector; the slowest stage of each marked.
  const RunResult* first = nullptr;
  for (const auto& r : runs)
    if (!r.data.is_null() && r.data.contains("tree")) first = first ? first : &r;
  if (first) {
    body += "<table id=\"pipeline-tree\"><tr><th>stage</th><th>workers</th>";
    for (const auto& r : runs)
      if (!r.data.is_null() && r.data.contains("tree"))
        body += fmt::format("<th>{} busy</th><th>queue usage</th>", strategy_name(r.session.strategy));
    body += "</tr>\n";
    const auto& stages = first->data["tree"];
    for (std::size_t i = 0; i < stages.size(); ++i) {
      body += fmt::format("<tr><td class=\"stage\">{}</td><td>{}</td>", breakable(stages[i]["stage"].get<std::string>()),
                          stages[i]["workers"].get<std::int64_t>());
      for (const auto& r : runs) {
        if (r.data.is_null() || !r.data.contains("tree")) continue;
        const auto& st = r.data["tree"][i];
        body += fmt::format("<td>{:.1f}%{}</td><td>{}</td>", 100 * st["busy_fraction"].get<double>(),
                            st["bounds_pipeline"].get<bool>() ? " (slowest)" : "",
                            st["queue_usage"].is_null() ? std::string("-")
                                                        : fmt::format("{:.1f}%", 100 * st["queue_usage"].get<double>()));
      }
      body += "</tr>\n";
    }
    body += "</table>\n<p class=\"note\">MindSpore's execution tree, source first: each stage's threads' "
            "working time over theirs, and how full its output connector was on average (a full queue "
            "before a stage and an empty one after it point at that stage).</p>\n";
  }
  return page("ascendsim — " + h.workload + " strategy comparison", body);
}

}  // namespace ascendsim::report
