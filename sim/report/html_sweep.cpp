// The sweep page: a curve per strategy against the swept value, and the table.
#include "sim/report/html_report.h"

#include <algorithm>
#include <map>

#include <fmt/format.h>

#include "sim/report/charts.h"
#include "sim/report/html_parts.h"

namespace ascendsim::report {

using namespace runtime;
using namespace html;
using charts::tick_label;

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

}  // namespace ascendsim::report
