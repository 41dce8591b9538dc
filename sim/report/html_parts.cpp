// What the HTML pages share: the page around a body, legends, markers, the line chart, the time to
// train, and the text escaped.
#include "sim/report/html_parts.h"

#include <algorithm>
#include <array>
#include <cmath>

#include <fmt/format.h>

#include "sim/report/charts.h"

namespace ascendsim::report {

using namespace runtime;

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

namespace html {

using charts::nice_ticks;
using charts::text_width;
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
                   const std::string& cls, bool outlined) {
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
double widest(const std::vector<std::string>& labels, double font_px) {
  double w = 0;
  for (const auto& l : labels) w = std::max(w, text_width(l, font_px));
  return w;
}

std::vector<std::string> strategy_names(const std::vector<RunResult>& runs) {
  std::vector<std::string> out;
  for (const auto& r : runs) out.emplace_back(strategy_name(r.session.strategy));
  return out;
}

/// A line chart with nice ticks on both axes; `mark_x` (if > 0) draws a marked vertical line.
/// `ref_y` (if > 0) draws a dashed horizontal reference line labelled `ref_label`. `notes` are
/// sentences printed under the chart, wrapped to its width.
std::string line_chart(const std::string& id, const std::string& label, const Axis& xa, const Axis& ya,
                       const std::string& y_unit, const Series& series, double mark_x,
                       const std::string& mark_label, double ref_y, const std::string& ref_label,
                       const std::vector<std::string>& notes) {
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

/// Time to train, one stacked bar per row (a strategy, or a swept value and strategy), in
/// seconds on one axis: the steps, the evaluation passes, the initialisation, the communication
/// no computation hid, in the breakdown's colours; and the same figures as a table.
std::string time_to_train_section(const std::string& id, const std::string& row_heading,
                                  const std::vector<std::pair<std::string, TimeToTrain>>& rows) {
  using sim::Phase;
  // The checkpoints' part and the expected time with failures only where a row has them.
  const bool checkpoints =
      std::any_of(rows.begin(), rows.end(), [](const auto& row) { return row.second.checkpoint > 0; });
  const bool failures =
      std::any_of(rows.begin(), rows.end(), [](const auto& row) { return row.second.expected_with_failures >= 0; });
  std::vector<std::pair<const char*, Phase>> parts = {{"training", Phase::DeviceCompute},
                                                      {"evaluation", Phase::Eval},
                                                      {"initialisation", Phase::Setup},
                                                      {"exposed comm", Phase::Comm}};
  if (checkpoints) parts.push_back({"checkpoint", Phase::Checkpoint});
  auto value = [](const TimeToTrain& t, std::size_t k) {
    return k == 0 ? t.training : k == 1 ? t.evaluation : k == 2 ? t.initialisation : k == 3 ? t.exposed_comm
                                                                                             : t.checkpoint;
  };
  constexpr const char* kLostColor = "#ffffff";  // outlined: the time failures add, beside the run
  std::vector<std::string> labels;
  double most = 0;
  for (const auto& [label, t] : rows) {
    labels.push_back(label);
    most = std::max({most, t.total, t.expected_with_failures});
  }
  const std::vector<double> xt = nice_ticks(0, most > 0 ? most : 1);
  std::vector<std::string> x_labels;
  for (double t : xt) x_labels.push_back(tick_label(t));
  const double left = widest(labels) + 16, right = text_width(x_labels.back()) / 2 + 8, width = 760, bar = 20, gap = 8;
  std::vector<std::pair<std::string, std::string>> items;
  for (const auto& [name, ph] : parts) items.emplace_back(name, phase_color(static_cast<std::size_t>(ph)));
  if (failures) items.emplace_back("expected lost to failures", kLostColor);
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
    const double lost = t.expected_with_failures - t.total;
    if (t.expected_with_failures >= 0 && lost > 0)
      s += fmt::format(
          "<rect class=\"bar\" x=\"{:.2f}\" y=\"{:.1f}\" width=\"{:.2f}\" height=\"{:.0f}\" fill=\"{}\" "
          "stroke=\"#333333\" stroke-dasharray=\"3 2\"><title>{}, expected lost to failures: {:.6g} s (expected "
          "time to train with failures {:.6g} s)</title></rect>",
          x, y, lost / xt.back() * width, bar, kLostColor, esc(label), lost, t.expected_with_failures);
  }
  for (std::size_t k = 0; k < xt.size(); ++k)
    s += fmt::format("<text class=\"tick\" x=\"{:.1f}\" y=\"{:.0f}\" text-anchor=\"middle\">{}</text>",
                     left + xt[k] / xt.back() * width, height - 24, x_labels[k]);
  s += fmt::format(
      "<text class=\"axis-label\" x=\"{:.0f}\" y=\"{:.0f}\" text-anchor=\"middle\">time to train, s (simulated)"
      "</text></svg>\n",
      left + width / 2, height - 6);
  s += "<table id=\"" + id.substr(id.find('-') + 1) + "\"><tr><th>" + esc(row_heading) +
       "</th><th>time to train</th><th>training</th><th>evaluation</th><th>initialisation</th><th>exposed comm</th>" +
       (checkpoints ? "<th>checkpoint</th>" : "") + (failures ? "<th>expected with failures</th>" : "") + "</tr>\n";
  for (const auto& [label, t] : rows) {
    s += fmt::format("<tr><td>{}</td><td>{:.3f}</td><td>{:.3f}</td><td>{:.3f}</td><td>{:.3f}</td><td>{:.3f}</td>",
                     esc(label), t.total, t.training, t.evaluation, t.initialisation, t.exposed_comm);
    if (checkpoints) s += fmt::format("<td>{:.3f}</td>", t.checkpoint);
    if (failures)
      s += t.expected_with_failures >= 0 ? fmt::format("<td>{:.3f}</td>", t.expected_with_failures) : "<td></td>";
    s += "</tr>\n";
  }
  return s + "</table>\n";
}

const char* kTimeToTrainNote =
    "<p class=\"note\">from the run's start to its stop, in s: the steps, the evaluation passes, the one-time set-up "
    "(the data channel, a cold cache's kernel compilation, the graph's load, the parameters' broadcast, the "
    "pipeline's first fill), the communication no computation hid. MLPerf's timed region leaves out the "
    "initialisation.</p>\n";

/// Per cluster size of a scaling curve, a bar of its run's time: the efficiency kept, then the

}  // namespace html
}  // namespace ascendsim::report
