// Regression runs for users' CI: a suite of named runs in one invocation, and a comparison of two
// reports (or two suite outputs) figure by figure with a tolerance.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "sim/api.h"

namespace ascendsim::sim {

/// One entry of a suite file: a name and the run it stands for.
struct SuiteEntry {
  std::string name;
  RunRequest request;
};

/// Reads a suite file (YAML):
///   name: NAME
///   runs:
///     - name: lenet5-compare          # file name of its report; letters, digits, - _ .
///       workload: lenet5              # and any of: strategies (list), epochs, steps_per_epoch,
///       strategies: [loop-sink]       # batch_size, sink_size, chip, dataset, set (map or list
///       set: {host.op_launch_us: 20}  # of key=value)
/// Throws InputError naming the file, the entry and the key for anything else.
std::vector<SuiteEntry> load_suite(const std::string& path, const std::string& config_dir, std::string* suite_name);

/// One figure compared.
struct FigureChange {
  std::string run;     ///< "entry/strategy" or "strategy"
  std::string figure;  ///< "step_time_ms.mean", "breakdown_s.launch", "interactions.op_launches", ...
  double base = 0, now = 0;
  double relative = 0;  ///< (now - base) / |base|; infinite if base is 0 and now is not
  bool past_tolerance = false;
};

struct DiffResult {
  std::vector<FigureChange> figures;  ///< every figure compared, in report order
  bool moved() const;                 ///< any past the tolerance
};

/// Compares two reports (files) or two suite output directories (index.json). Throws InputError
/// for unreadable inputs or runs that are not comparable (a different workload, strategy or step
/// count, named).
DiffResult diff_reports(const std::string& base, const std::string& now, double tolerance);

/// The moved figures as a table; all of them if `all`.
std::string diff_table(const DiffResult& d, double tolerance, bool all = false);
/// JUnit XML: one test case per figure, a failure for each past the tolerance.
std::string diff_junit(const DiffResult& d, double tolerance);

/// A published hardware figure and the run that reproduces its configuration.
struct PublishedFigure {
  std::string id;
  double value = 0;
  /// measure: step_time_ms or samples_per_s (the steady state, as StepRecord defines it),
  /// eval_pass_s (later passes) or peak_tflops
  std::string unit, measure;
  std::string configuration, source;
  RunRequest run;  ///< one strategy (devices > 1: not yet comparable)
};

struct ValidationRow {
  PublishedFigure figure;
  double simulated = 0;
  double error = 0;  ///< (simulated - published) / published
  bool compared = false;
  std::string note;  ///< why not compared
};

/// Reads bench/validation/figures.yaml: `figures:` a list of id, value, unit, measure,
/// configuration, source and run (the keys of a suite run, devices included).
std::vector<PublishedFigure> load_figures(const std::string& path, const std::string& config_dir);
/// Simulates every figure it can (one device).
std::vector<ValidationRow> validate(const std::vector<PublishedFigure>& figures);
/// published, simulated, error per figure, and how many lie within the tolerance.
std::string validation_table(const std::vector<ValidationRow>& rows, double tolerance);
/// The same as an HTML page (runtime::html_validation).
std::string validation_html(const std::vector<ValidationRow>& rows, double tolerance);
/// The rows as JSON: id, published, simulated (null if not compared), unit, error, note.
nlohmann::ordered_json validation_json(const std::vector<ValidationRow>& rows);

}  // namespace ascendsim::sim
