// The reports of the regression runs and of the model against published figures
// (sim/regression.h): the diff's table and JUnit XML, the validation's table, JSON and page, and
// the calibration's table, JSON and configuration fragment.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "sim/regression.h"

namespace ascendsim::report {

/// The moved figures as a table; all of them if `all`.
std::string diff_table(const sim::DiffResult& d, double tolerance, bool all = false);
/// JUnit XML: one test case per figure, a failure for each past the tolerance.
std::string diff_junit(const sim::DiffResult& d, double tolerance);

/// published, simulated, error per figure, and how many lie within the tolerance.
std::string validation_table(const std::vector<sim::ValidationRow>& rows, double tolerance);
/// The same as an HTML page (html_validation).
std::string validation_html(const std::vector<sim::ValidationRow>& rows, double tolerance);
/// The rows as JSON: id, published, simulated (null if not compared), unit, error, note.
nlohmann::ordered_json validation_json(const std::vector<sim::ValidationRow>& rows);

/// Parameters (start, fitted, bounds, at a bound, or why not fitted), then figures (published, at
/// the start, error at the start, with all fitted, left out).
std::string calibration_table(const sim::Calibration& c);
nlohmann::ordered_json calibration_json(const sim::Calibration& c);
/// The fitted values as a configuration fragment (YAML, for --config), each with its provenance.
std::string calibration_yaml(const sim::Calibration& c);

}  // namespace ascendsim::report
