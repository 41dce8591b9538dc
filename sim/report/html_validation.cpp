// The validation page: each figure's error against the tolerance band, and the table.
#include "sim/report/html_report.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "sim/report/charts.h"
#include "sim/report/html_parts.h"

namespace ascendsim::report {

using namespace html;

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
    // A source is often a path without spaces (a repository's file): it breaks anywhere.
    body += fmt::format(
        "<td style=\"text-align:left\">{}</td><td style=\"text-align:left;overflow-wrap:anywhere\">{}</td></tr>\n",
        esc(r.configuration), esc(r.source));
  }
  body += "</table>\n";
  return page("ascendsim validation against published Ascend 910 figures", body);
}

}  // namespace ascendsim::report
