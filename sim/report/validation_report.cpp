// The validation's table, JSON and page (regression_report.h).
#include "sim/report/regression_report.h"

#include <cmath>

#include <fmt/format.h>

#include "sim/report/html_report.h"
#include "sim/report/report.h"

namespace ascendsim::report {

using sim::ValidationRow;

std::string validation_html(const std::vector<ValidationRow>& rows, double tolerance) {
  std::vector<ValidationEntry> entries;
  for (const auto& r : rows)
    entries.push_back({r.figure.id, r.figure.unit, r.figure.configuration, r.figure.source, r.figure.value, r.simulated,
                       r.error, r.compared, r.note, r.simulated_only});
  return html_validation(entries, tolerance);
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
  TextTable t({"id", "published", "simulated", "error", "configuration"}, {4});
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

}  // namespace ascendsim::report
