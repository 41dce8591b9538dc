#include "runtime/html_report.h"

#include <algorithm>
#include <cmath>
#include <map>

#include <fmt/format.h>

#include "runtime/charts.h"

namespace ascendsim::runtime {

namespace {

using charts::nice_ticks;
using charts::tick_label;

std::string esc(const std::string& s) { return escape_xml(s); }

const char* color_of(Strategy s) { return charts::strategy_color(s); }
const char* phase_color(std::size_t p) { return charts::phase_color(static_cast<sim::Phase>(p)); }

std::string page(const std::string& title, const std::string& body) {
  return "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>" + esc(title) +
         "</title>\n<style>body{font-family:system-ui,sans-serif;margin:2em;color:#222;max-width:1100px}"
         "table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #ccc;padding:4px 8px;text-align:right}"
         "th{background:#f3f3f3}td:first-child,th:first-child{text-align:left}svg{display:block;margin:1em 0}"
         "td:first-child{white-space:nowrap}td.stage{white-space:normal;overflow-wrap:anywhere;min-width:8em}svg text{font-size:12px;font-family:system-ui,sans-serif}.note{color:#555}"
         ".multiples{display:flex;flex-wrap:wrap;column-gap:24px}.multiples figure{margin:0;max-width:540px}"
         "figcaption{font-weight:600;margin:.5em 0 0}figure svg{margin:.25em 0 1em}</style></head><body>\n<h1>" +
         esc(title) + "</h1>\n" + body + "</body></html>\n";
}

using charts::text_width;

/// `s` escaped, with a line break allowed after each comma and before each opening parenthesis:
/// a stage name such as Map(RandomCropDecodeResize,RandomHorizontalFlip,Normalize,HWC2CHW) wraps
/// at its ops instead of widening its table past the page.
std::string breakable(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '(' && !out.empty()) out += "<wbr>";
    out += esc(std::string(1, c));
    if (c == ',') out += "<wbr>";
  }
  return out;
}

/// "ascend910 (atlas800-9000 server)", escaped: the chip and the server it sits in.
std::string chip_and_server(const ReportHeader& h) {
  return esc(h.chip) + (h.server.empty() ? "" : " (" + esc(h.server) + " server)");
}

constexpr double kLegendRow = 18;

struct Legend {
  std::string svg;
  double bottom = 0;  ///< below the last row of entries
};

/// Colour swatches with their labels from (x, y), in rows that break before `right`.
Legend legend(const std::vector<std::pair<std::string, std::string>>& items, double x, double y, double right) {
  Legend l;
  const double x0 = x;
  for (const auto& [label, color] : items) {
    const double w = 16 + text_width(label);
    if (x > x0 && x + w > right) {
      x = x0;
      y += kLegendRow;
    }
    l.svg += fmt::format("<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"12\" height=\"12\" fill=\"{}\"/>", x, y, color);
    l.svg += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\">{}</text>", x + 16, y + 10, esc(label));
    x += w + 14;
  }
  l.bottom = y + 14;
  return l;
}

/// A strategy's marker centred on (x, y), `r` px from its centre to its box's sides: a circle,
/// square, diamond or triangle by strategy, so markers that coincide differ in shape too;
/// `outlined` draws it with a white edge.
std::string marker(Strategy st, double x, double y, double r, const std::string& title,
                   const std::string& cls = "point", bool outlined = false) {
  const std::string tail = fmt::format(" fill=\"{}\"{}><title>{}</title>", color_of(st),
                                       outlined ? " stroke=\"#fff\" stroke-width=\"0.75\"" : "", esc(title));
  switch (static_cast<int>(st)) {
    case 0:
      return fmt::format("<circle class=\"{}\" cx=\"{:.2f}\" cy=\"{:.2f}\" r=\"{:g}\"{}</circle>", cls, x, y, r, tail);
    case 1:
      return fmt::format("<rect class=\"{}\" x=\"{:.2f}\" y=\"{:.2f}\" width=\"{:g}\" height=\"{:g}\"{}</rect>",
                         cls, x - r, y - r, 2 * r, 2 * r, tail);
    case 2:
      return fmt::format("<path class=\"{7}\" d=\"M{0:.2f} {1:.2f}L{2:.2f} {3:.2f}L{0:.2f} {4:.2f}L{5:.2f} {3:.2f}Z\"{6}</path>",
                         x, y - r, x + r, y, y + r, x - r, tail, cls);
    default:
      return fmt::format("<path class=\"{6}\" d=\"M{0:.2f} {1:.2f}L{2:.2f} {3:.2f}L{4:.2f} {3:.2f}Z\"{5}</path>", x,
                         y - r, x + r, y + r, x - r, tail, cls);
  }
}

struct LineLegend {
  std::string svg;
  double bottom = 0;  ///< below the last row
};

/// A line chart's legend, in a group of its own from (x, y): per series a sample of its line (its
/// dash pattern) with its marker, and its name, in rows that break before `right`; then the notes
/// (which series coincide), wrapped.
LineLegend line_legend(const std::vector<std::pair<Strategy, std::vector<std::pair<double, double>>>>& series,
                       const std::vector<std::string>& notes, double x, double y, double right) {
  LineLegend l;
  const double x0 = x;
  l.svg = "<g class=\"legend\">";
  for (const auto& [st, pts] : series) {
    const std::string label = strategy_name(st);
    const double w = 34 + text_width(label);
    if (x > x0 && x + w > right) {
      x = x0;
      y += kLegendRow;
    }
    l.svg += fmt::format(
        "<line x1=\"{:.1f}\" x2=\"{:.1f}\" y1=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"{}\" stroke-width=\"2\" "
        "stroke-dasharray=\"{}\"/>",
        x, x + 28, y + 6, y + 6, color_of(st), charts::strategy_dash(st));
    l.svg += marker(st, x + 14, y + 6, 4, label, "key");
    l.svg += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\">{}</text>", x + 34, y + 10, esc(label));
    x += w + 14;
  }
  l.bottom = y + 14;
  for (const auto& n : notes)
    for (const auto& line : charts::wrap(n, right - x0)) {
      l.svg += fmt::format("<text class=\"legend-note\" x=\"{:.1f}\" y=\"{:.1f}\">{}</text>", x0, l.bottom + 14,
                           esc(line));
      l.bottom += 18;
    }
  l.svg += "</g>";
  return l;
}

/// The widest of these labels at 12 px.
double widest(const std::vector<std::string>& labels, double font_px = 12) {
  double w = 0;
  for (const auto& l : labels) w = std::max(w, text_width(l, font_px));
  return w;
}

std::vector<std::string> strategy_names(const std::vector<RunResult>& runs) {
  std::vector<std::string> out;
  for (const auto& r : runs) out.emplace_back(strategy_name(r.session.strategy));
  return out;
}

std::string breakdown_chart(const std::vector<RunResult>& runs) {
  const double left = widest(strategy_names(runs)) + 16, width = 760, bar = 26, gap = 12;
  std::vector<std::pair<std::string, std::string>> items;
  for (std::size_t p = 0; p < sim::kPhaseCount; ++p)
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

struct Axis {
  std::string label;
  bool log = false;      ///< logarithmic (values > 0)
  bool integer = false;  ///< whole-number ticks
};

using Series = std::vector<std::pair<Strategy, std::vector<std::pair<double, double>>>>;

/// A line chart with nice ticks on both axes; `mark_x` (if > 0) draws a marked vertical line.
/// `ref_y` (if > 0) draws a dashed horizontal reference line labelled `ref_label`. `notes` are
/// sentences printed under the chart, wrapped to its width.
std::string line_chart(const std::string& id, const std::string& label, const Axis& xa, const Axis& ya,
                       const std::string& y_unit, const Series& series, double mark_x = 0,
                       const std::string& mark_label = {}, double ref_y = 0, const std::string& ref_label = {},
                       const std::vector<std::string>& notes = {}) {
  double min_x = INFINITY, max_x = 0, max_y = 0;
  for (const auto& [st, pts] : series)
    for (const auto& [x, y] : pts) {
      min_x = std::min(min_x, x);
      max_x = std::max(max_x, x);
      max_y = std::max(max_y, y);
    }
  max_y = std::max(max_y, ref_y);
  if (!(max_x > 0)) max_x = 1;
  if (!std::isfinite(min_x)) min_x = 0;
  const std::vector<double> xt = xa.log ? charts::log_ticks(min_x, max_x) : nice_ticks(0, max_x, 5, xa.integer);
  const std::vector<double> yt = nice_ticks(0, max_y > 0 ? max_y : 1, 5, ya.integer);
  const double x0 = xa.log ? std::log10(xt.front()) : xt.front(), x1 = xa.log ? std::log10(xt.back()) : xt.back();
  const double y1 = yt.back();
  std::vector<std::string> y_labels, x_labels;
  for (double t : yt) y_labels.push_back(tick_label(t));
  for (double t : xt) x_labels.push_back(tick_label(t));
  const double left = 28 + widest(y_labels) + 8, w = 720, h = 240;
  const double right = std::max(30.0, text_width(x_labels.back()) / 2 + 6), svg_w = left + w + right;
  // Series that coincide — the same x values, every y within kCoincidePx of the other's — are
  // drawn one over another, each narrower than the one drawn before (lines and markers), so each
  // stays visible around the next; the legend says which coincide.
  constexpr double kCoincidePx = 3, kWiderLine = 3, kWiderMarker = 2.5;
  auto coincide = [&](const std::vector<std::pair<double, double>>& a, const std::vector<std::pair<double, double>>& b) {
    if (a.size() != b.size() || a.empty()) return false;
    for (std::size_t k = 0; k < a.size(); ++k)
      if (a[k].first != b[k].first || std::fabs(a[k].second - b[k].second) / y1 * h >= kCoincidePx) return false;
    return true;
  };
  std::vector<std::vector<std::size_t>> groups;  // series indices, in drawing order
  std::vector<std::size_t> group_of(series.size()), place(series.size());
  for (std::size_t i = 0; i < series.size(); ++i) {
    std::size_t g = 0;
    while (g < groups.size() && !coincide(series[groups[g].front()].second, series[i].second)) ++g;
    if (g == groups.size()) groups.emplace_back();
    group_of[i] = g;
    place[i] = groups[g].size();
    groups[g].push_back(i);
  }
  // How many series of its group are drawn after this one: each widens its line. A marker widens
  // for each marker drawn after it on the same spot (also where only some points meet: every
  // scaling curve starts at 1).
  auto under = [&](std::size_t i) { return static_cast<double>(groups[group_of[i]].size() - 1 - place[i]); };
  auto meets = [&](std::size_t j, const std::pair<double, double>& p) {  // series j has a point on p's spot
    return std::any_of(series[j].second.begin(), series[j].second.end(), [&](const std::pair<double, double>& q) {
      return q.first == p.first && std::fabs(q.second - p.second) / y1 * h < kCoincidePx;
    });
  };
  auto marker_r = [&](std::size_t i, std::size_t k) {
    double later = 0;
    for (std::size_t j = i + 1; j < series.size(); ++j) later += meets(j, series[i].second[k]);
    return 3 + kWiderMarker * later;
  };
  // A marker that shares its spot gets a white outline, which sets it apart from the one under it.
  auto shared = [&](std::size_t i, std::size_t k) {
    for (std::size_t j = 0; j < series.size(); ++j)
      if (j != i && meets(j, series[i].second[k])) return true;
    return false;
  };
  double widest_marker = 3;
  for (std::size_t i = 0; i < series.size(); ++i)
    for (std::size_t k = 0; k < series[i].second.size(); ++k) widest_marker = std::max(widest_marker, marker_r(i, k));
  std::vector<std::string> coinciding;
  for (const auto& g : groups) {
    if (g.size() < 2) continue;
    std::string names;
    for (std::size_t k = 0; k < g.size(); ++k)
      names += std::string(k == 0 ? "" : k + 1 == g.size() ? " and " : ", ") + strategy_name(series[g[k]].first);
    coinciding.push_back(names + " coincide: each is drawn over the one before it, narrower, so all stay visible.");
  }
  const LineLegend key = line_legend(series, coinciding, left, 4, left + w);
  const double top = key.bottom + (mark_x > 0 || ref_y > 0 ? 24 : 12) + (widest_marker - 3);
  std::vector<std::string> note_lines;
  for (const auto& n : notes)
    for (auto& line : charts::wrap(n, svg_w - 16)) note_lines.push_back(std::move(line));
  const double height = top + h + 50 + 18 * static_cast<double>(note_lines.size());
  auto px = [&](double x) { return left + ((xa.log ? std::log10(x) : x) - x0) / (x1 - x0) * w; };
  auto py = [&](double y) { return top + h - y / y1 * h; };
  std::string s =
      fmt::format("<svg id=\"{}\" class=\"chart\" width=\"{:.0f}\" height=\"{:.0f}\" role=\"img\" aria-label=\"{}\">",
                  id, svg_w, height, esc(label));
  s += key.svg;
  for (std::size_t i = 0; i < note_lines.size(); ++i)
    s += fmt::format("<text class=\"note\" x=\"8\" y=\"{:.0f}\">{}</text>", top + h + 62 + 18 * static_cast<double>(i),
                     esc(note_lines[i]));
  s += fmt::format("<line x1=\"{0}\" x2=\"{0}\" y1=\"{1}\" y2=\"{2}\" stroke=\"#888\"/>", left, top, top + h);
  s += fmt::format("<line x1=\"{0}\" x2=\"{1}\" y1=\"{2}\" y2=\"{2}\" stroke=\"#888\"/>", left, left + w, top + h);
  for (std::size_t i = 0; i < yt.size(); ++i)
    s += fmt::format("<text class=\"tick y-tick\" x=\"{:.0f}\" y=\"{:.1f}\" text-anchor=\"end\">{}</text>", left - 4,
                     py(yt[i]) + 4, y_labels[i]);
  for (std::size_t i = 0; i < xt.size(); ++i)
    s += fmt::format("<text class=\"tick x-tick\" x=\"{:.1f}\" y=\"{:.0f}\" text-anchor=\"middle\">{}</text>",
                     px(xt[i]), top + h + 16, x_labels[i]);
  s += fmt::format("<text class=\"axis-label\" x=\"{:.0f}\" y=\"{:.0f}\" text-anchor=\"middle\">{}{}</text>",
                   left + w / 2, top + h + 36, esc(xa.label), xa.log ? " (log scale)" : "");
  s += fmt::format(
      "<text class=\"axis-label\" x=\"14\" y=\"{0:.0f}\" transform=\"rotate(-90 14 {0:.0f})\" "
      "text-anchor=\"middle\">{1}</text>",
      top + h / 2, esc(ya.label));
  if (mark_x > 0) {
    s += fmt::format(
        "<line class=\"mark\" x1=\"{0:.2f}\" x2=\"{0:.2f}\" y1=\"{1}\" y2=\"{2}\" stroke=\"#444\" "
        "stroke-dasharray=\"2 3\"><title>{3}</title></line>",
        px(mark_x), top, top + h, esc(mark_label));
    // Centred on the line, moved in where it would cross the chart's edge.
    const double half = text_width(mark_label) / 2;
    s += fmt::format("<text class=\"mark-label\" x=\"{:.2f}\" y=\"{:.0f}\" text-anchor=\"middle\">{}</text>",
                     std::clamp(px(mark_x), half + 4, svg_w - half - 4), top - 6, esc(mark_label));
  }
  if (ref_y > 0)
    s += fmt::format(
        "<line class=\"reference\" x1=\"{0}\" x2=\"{1}\" y1=\"{2:.2f}\" y2=\"{2:.2f}\" stroke=\"#444\" "
        "stroke-dasharray=\"6 4\"><title>{3}</title></line><text class=\"mark-label\" x=\"{1}\" y=\"{4:.2f}\" "
        "text-anchor=\"end\">{3}</text>",
        left, left + w, py(ref_y), esc(ref_label), py(ref_y) - 4);
  for (std::size_t i = 0; i < series.size(); ++i) {
    const auto& [st, pts] = series[i];
    std::string points;
    for (const auto& [x, y] : pts) points += fmt::format("{:.2f},{:.2f} ", px(x), py(y));
    s += fmt::format(
        "<polyline class=\"series\" fill=\"none\" stroke=\"{}\" stroke-width=\"{:g}\" stroke-dasharray=\"{}\" "
        "points=\"{}\"/>",
        color_of(st), 2 + kWiderLine * under(i), charts::strategy_dash(st), points);
    for (std::size_t k = 0; k < pts.size(); ++k)
      s += marker(st, px(pts[k].first), py(pts[k].second), marker_r(i, k),
                  fmt::format("{}: {} → {} {}", strategy_name(st), tick_label(pts[k].first), tick_label(pts[k].second),
                              y_unit),
                  "point", shared(i, k));
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

}  // namespace

std::string escape_xml(const std::string& s) {
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

/// Time to train, one stacked bar per row (a strategy, or a swept value and strategy), in
/// seconds on one axis: the steps, the evaluation passes, the initialisation, the communication
/// no computation hid, in the breakdown's colours; and the same figures as a table.
std::string time_to_train_section(const std::string& id, const std::string& row_heading,
                                  const std::vector<std::pair<std::string, TimeToTrain>>& rows) {
  using sim::Phase;
  const std::array<std::pair<const char*, Phase>, 4> parts = {{{"training", Phase::DeviceCompute},
                                                               {"evaluation", Phase::Eval},
                                                               {"initialisation", Phase::Setup},
                                                               {"exposed comm", Phase::Comm}}};
  auto value = [](const TimeToTrain& t, std::size_t k) {
    return k == 0 ? t.training : k == 1 ? t.evaluation : k == 2 ? t.initialisation : t.exposed_comm;
  };
  std::vector<std::string> labels;
  double most = 0;
  for (const auto& [label, t] : rows) {
    labels.push_back(label);
    most = std::max(most, t.total);
  }
  const std::vector<double> xt = nice_ticks(0, most > 0 ? most : 1);
  std::vector<std::string> x_labels;
  for (double t : xt) x_labels.push_back(tick_label(t));
  const double left = widest(labels) + 16, right = text_width(x_labels.back()) / 2 + 8, width = 760, bar = 20, gap = 8;
  std::vector<std::pair<std::string, std::string>> items;
  for (const auto& [name, ph] : parts) items.emplace_back(name, phase_color(static_cast<std::size_t>(ph)));
  const Legend key = legend(items, left, 8, left + width);
  const double top = key.bottom + 14;
  const double height = top + static_cast<double>(rows.size()) * (bar + gap) + 46;
  std::string s = fmt::format(
      "<svg id=\"{}\" class=\"chart\" width=\"{:.0f}\" height=\"{:.0f}\" role=\"img\" "
      "aria-label=\"time to train and its parts per {}\">",
      id, left + width + right, height, esc(row_heading));
  s += key.svg;
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const auto& [label, t] = rows[i];
    const double y = top + static_cast<double>(i) * (bar + gap);
    s += fmt::format("<text x=\"{:.0f}\" y=\"{:.1f}\" text-anchor=\"end\">{}</text>", left - 8, y + bar * 0.7,
                     esc(label));
    double x = left;
    for (std::size_t k = 0; k < parts.size(); ++k) {
      const double w = value(t, k) / xt.back() * width;
      if (w <= 0) continue;
      s += fmt::format(
          "<rect class=\"bar\" x=\"{:.2f}\" y=\"{:.1f}\" width=\"{:.2f}\" height=\"{:.0f}\" fill=\"{}\">"
          "<title>{}, {}: {:.6g} s of {:.6g} s</title></rect>",
          x, y, w, bar, phase_color(static_cast<std::size_t>(parts[k].second)), esc(label), parts[k].first, value(t, k),
          t.total);
      x += w;
    }
  }
  for (std::size_t k = 0; k < xt.size(); ++k)
    s += fmt::format("<text class=\"tick\" x=\"{:.1f}\" y=\"{:.0f}\" text-anchor=\"middle\">{}</text>",
                     left + xt[k] / xt.back() * width, height - 24, x_labels[k]);
  s += fmt::format(
      "<text class=\"axis-label\" x=\"{:.0f}\" y=\"{:.0f}\" text-anchor=\"middle\">time to train, s (simulated)"
      "</text></svg>\n",
      left + width / 2, height - 6);
  s += "<table id=\"" + id.substr(id.find('-') + 1) + "\"><tr><th>" + esc(row_heading) +
       "</th><th>time to train</th><th>training</th><th>evaluation</th><th>initialisation</th><th>exposed comm</th>"
       "</tr>\n";
  for (const auto& [label, t] : rows)
    s +=
        fmt::format("<tr><td>{}</td><td>{:.3f}</td><td>{:.3f}</td><td>{:.3f}</td><td>{:.3f}</td><td>{:.3f}</td></tr>\n",
                    esc(label), t.total, t.training, t.evaluation, t.initialisation, t.exposed_comm);
  return s + "</table>\n";
}

const char* kTimeToTrainNote =
    "<p class=\"note\">from the run's start to its stop, in s: the steps, the evaluation passes, the one-time set-up "
    "(the data channel, a cold cache's kernel compilation, the graph's load, the parameters' broadcast, the "
    "pipeline's first fill), the communication no computation hid. MLPerf's timed region leaves out the "
    "initialisation.</p>\n";

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
  if (std::any_of(runs.begin(), runs.end(), [](const RunResult& r) {
        return r.session.eval_passes() > 0 || r.devices > 1 || r.interactions.kernels_compiled > 0;
      })) {
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

std::string html_sweep(const ReportHeader& h, const std::string& param, const std::vector<SweepPoint>& points,
                       const std::string& conclusion) {
  // Numeric values are placed at their value, on a log axis when they span more than two decades;
  // other values (presets, modes) at their position.
  std::vector<std::string> values;
  for (const auto& p : points)
    if (std::find(values.begin(), values.end(), p.value) == values.end()) values.push_back(p.value);
  bool numeric = true;
  double lo = INFINITY, hi = 0;
  std::map<std::string, double> at;
  for (const auto& v : values) {
    try {
      std::size_t used = 0;
      const double x = std::stod(v, &used);
      numeric = numeric && used == v.size() && x > 0;
      at[v] = x;
      lo = std::min(lo, x);
      hi = std::max(hi, x);
    } catch (const std::exception&) {
      numeric = false;
    }
  }
  const bool log = numeric && hi / lo >= 100;
  std::map<Strategy, std::vector<std::pair<double, double>>> by;
  for (const auto& p : points) {
    const double x = numeric
                         ? at[p.value]
                         : 1 + static_cast<double>(std::find(values.begin(), values.end(), p.value) - values.begin());
    by[p.run.session.strategy].emplace_back(x, p.run.steps.step.stats().mean_ms);
  }
  Series series(by.begin(), by.end());
  double mark = 0;
  std::string mark_label;
  if (param == "sink_size" && conclusion.find("beyond sink_size ") != std::string::npos) {
    mark = std::stod(conclusion.substr(conclusion.rfind(' ') + 1));
    mark_label = "break-even: sink_size " + tick_label(mark);
  }
  std::string body = fmt::format("<p>{} on {}, batch {}: sweep of <code>{}</code>.</p>\n", esc(h.workload),
                                 chip_and_server(h), h.batch_size, esc(param));
  if (!conclusion.empty()) body += "<p><b>" + esc(conclusion) + "</b></p>\n";
  body += "<h2>Mean step time</h2>\n" + line_chart("chart-sweep", "mean step time against " + param,
                                                   {numeric ? param : param + " (values in the order given)", log},
                                                   {"ms per step"}, "ms per step", series, mark, mark_label);
  body += "<h2>Rows</h2>\n<table><tr><th>" + esc(param) +
          "</th><th>strategy</th><th>steps</th><th>step ms (mean)</th><th>median ms</th><th>samples/s</th><th>device "
          "busy</th></tr>\n";
  for (const auto& p : points)
    body += fmt::format(
        "<tr><td>{}</td><td>{}</td><td>{}</td><td>{:.4f}</td><td>{:.4f}</td><td>{:.0f}</td><td>{:.1f}%</td></tr>\n",
        esc(p.value), strategy_name(p.run.session.strategy), p.run.steps_completed, p.run.steps.step.stats().mean_ms,
        p.run.steps.step.stats().p50_ms, p.run.samples_per_s(), 100 * p.run.device_busy_fraction());
  body += "</table>\n";
  // Time to train per point when the points train to an end worth timing: with evaluation, or
  // on a cluster (a sweep of devices gives one bar per cluster size).
  if (std::any_of(points.begin(), points.end(), [&](const SweepPoint& p) {
        return param == "devices" || p.run.session.eval_passes() > 0 || p.run.devices > 1 ||
               p.run.interactions.kernels_compiled > 0;
      })) {
    std::vector<std::pair<std::string, TimeToTrain>> rows;
    for (const auto& p : points)
      rows.emplace_back((param == "devices" ? p.value + (p.value == "1" ? " device, " : " devices, ")
                                            : param + " " + p.value + ", ") +
                            strategy_name(p.run.session.strategy),
                        p.run.time_to_train());
    body += std::string("<h2>Time to train</h2>\n") + kTimeToTrainNote +
            time_to_train_section("chart-time-to-train", param == "devices" ? "cluster size" : param, rows);
  }
  return page("ascendsim — " + h.workload + " sweep of " + param, body);
}

std::string html_validation(const std::vector<ValidationEntry>& rows, double tolerance) {
  std::size_t compared = 0, within = 0;
  double abs_sum = 0, worst = tolerance;
  for (const auto& r : rows)
    if (r.compared) {
      ++compared;
      within += std::fabs(r.error) <= tolerance;
      abs_sum += std::fabs(r.error);
      worst = std::max(worst, std::fabs(r.error));
    }
  std::string body = fmt::format(
      "<p>{} of {} compared figure(s) within {:.0f}%; mean absolute error {:.1f}%. Published Ascend 910 figures "
      "against this simulator's runs of the same configuration.</p>\n",
      within, compared, tolerance * 100, compared ? 100 * abs_sum / static_cast<double>(compared) : 0.0);
  // Signed error per figure, the tolerance band shaded.
  // Room on the left for the longest id, on the right for the longest value beyond the axis' end.
  std::vector<std::string> ids, values;
  for (const auto& r : rows)
    if (r.compared) {
      ids.push_back(r.id);
      values.push_back(fmt::format("{:+.1f}%", r.error * 100));
    }
  const double left = std::max(40.0, widest(ids) + 16), width = 700, bar = 22, gap = 10, top = 10;
  const double right = std::max(24.0, widest(values) + 10);
  const double span = std::ceil(worst * 10 + 0.5) / 10;  // symmetric axis, in steps of 10%
  const double height = top + static_cast<double>(compared) * (bar + gap) + 40;
  const double zero = left + width / 2;
  auto x_of = [&](double e) { return zero + e / span * (width / 2); };
  std::string svg = fmt::format(
      "<svg id=\"chart-validation\" class=\"chart\" width=\"{:.0f}\" height=\"{:.0f}\" role=\"img\" "
      "aria-label=\"simulation error per published figure\">",
      left + width + right, height);
  svg += fmt::format(
      "<rect class=\"band\" x=\"{:.1f}\" y=\"{:.0f}\" width=\"{:.1f}\" height=\"{:.0f}\" "
      "fill=\"#e8f2e8\"><title>within "
      "{:.0f}%</title></rect>",
      x_of(-tolerance), top - 4, x_of(tolerance) - x_of(-tolerance), height - top - 28, tolerance * 100);
  std::size_t i = 0;
  for (const auto& r : rows) {
    if (!r.compared) continue;
    const double y = top + static_cast<double>(i++) * (bar + gap);
    const double x0 = std::min(zero, x_of(r.error)), x1 = std::max(zero, x_of(r.error));
    const bool ok = std::fabs(r.error) <= tolerance;
    svg += fmt::format("<text x=\"{:.0f}\" y=\"{:.1f}\" text-anchor=\"end\">{}</text>", left - 8, y + bar * 0.7,
                       esc(r.id));
    svg += fmt::format(
        "<rect class=\"bar\" x=\"{:.2f}\" y=\"{:.1f}\" width=\"{:.2f}\" height=\"{:.0f}\" fill=\"{}\"><title>{}: "
        "{:+.1f}%</title></rect>",
        x0, y, x1 - x0, bar, ok ? "#009e73" : "#d55e00", esc(r.id), r.error * 100);
    // The value right of the bar's outer end, or right of zero for a bar that points left.
    svg += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\">{:+.1f}%</text>", x1 + 4, y + bar * 0.7, r.error * 100);
  }
  const double axis_y = height - 30;
  svg += fmt::format("<line x1=\"{:.0f}\" x2=\"{:.0f}\" y1=\"{:.0f}\" y2=\"{:.0f}\" stroke=\"#888\"/>", left,
                     left + width, axis_y, axis_y);
  for (double t : charts::nice_ticks(-span, span, 5))
    if (std::fabs(t) <= span + 1e-9)
      svg += fmt::format("<text class=\"tick x-tick\" x=\"{:.1f}\" y=\"{:.0f}\" text-anchor=\"middle\">{}%</text>",
                         x_of(t), axis_y + 14, charts::tick_label(t * 100));
  svg += fmt::format("<line x1=\"{:.1f}\" x2=\"{:.1f}\" y1=\"{:.0f}\" y2=\"{:.0f}\" stroke=\"#444\"/>", zero, zero,
                     top - 4, axis_y);
  body += svg + "</svg>\n";
  body +=
      "<table><tr><th>id</th><th>published</th><th>simulated</th><th>error</th><th>configuration</th>"
      "<th>source</th></tr>\n";
  for (const auto& r : rows) {
    body += fmt::format("<tr><td>{}</td><td>{:g} {}</td>", esc(r.id), r.published, esc(r.unit));
    if (r.compared)
      body += fmt::format("<td>{:.4g} {}</td><td>{:+.1f}%{}</td>", r.simulated, esc(r.unit), r.error * 100,
                          std::fabs(r.error) <= tolerance ? "" : " !");
    else if (r.simulated_only)
      body += fmt::format("<td>{:.4g} {}</td><td class=\"note\">({:+.1f}%) not counted: {}</td>", r.simulated,
                          esc(r.unit), r.error * 100, esc(r.note));
    else
      body += fmt::format("<td>-</td><td class=\"note\">{}</td>", esc(r.note));
    body += fmt::format("<td style=\"text-align:left\">{}</td><td style=\"text-align:left\">{}</td></tr>\n",
                        esc(r.configuration), esc(r.source));
  }
  body += "</table>\n";
  return page("ascendsim validation against published Ascend 910 figures", body);
}

}  // namespace ascendsim::runtime
