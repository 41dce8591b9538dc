// Self-contained HTML reports: inline SVG charts generated here, no scripts, no network.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "runtime/run_result.h"
#include "sim/report/report.h"

namespace ascendsim::report {

/// A strategy comparison: summary, time breakdown as stacked bars, interactions per strategy,
/// data-queue depth over time, and the data verdicts.
std::string html_compare(const ReportHeader& h, const std::vector<RunResult>& runs);

struct SweepPoint {
  std::string value;
  RunResult run;
};

/// One published figure against its simulation (sim::validate's rows).
struct ValidationEntry {
  std::string id, unit, configuration, source;
  double published = 0, simulated = 0, error = 0;  ///< error: (simulated - published) / published
  bool compared = false;
  std::string note;             ///< why not compared
  bool simulated_only = false;  ///< simulated and shown (its error in parentheses), not counted
};

/// The validation page: each figure's error as a bar against the tolerance band, and the table
/// with configurations and sources.
std::string html_validation(const std::vector<ValidationEntry>& rows, double tolerance);

/// Text with &, <, > and " escaped for HTML and XML.
std::string escape_xml(const std::string& s);

/// A sweep: one curve per strategy of mean step time against the swept value, plus the table.
std::string html_sweep(const ReportHeader& h, const std::string& param, const std::vector<SweepPoint>& points,
                       const std::string& conclusion);

}  // namespace ascendsim::report
