// Regression runs for users' CI: a suite of named runs in one invocation (sim/suite.cpp), and a
// comparison of two reports (or two suite outputs) figure by figure with a tolerance
// (sim/diff.cpp). And the model against published figures: validation (sim/validation.cpp) and
// the calibration of host parameters to them (sim/calibration.cpp).
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "sim/api.h"
#include "sim/fit.h"
#include "sim/serve.h"

namespace ascendsim::sim {

/// One entry of a suite file: a name and the run it stands for.
struct SuiteEntry {
  std::string name;
  RunRequest request;
  std::optional<ServeRequest> serve;  ///< a serving run (`serve: true`) instead of `request`
};

/// Reads a suite file (YAML):
///   name: NAME
///   runs:
///     - name: lenet5-compare          # file name of its report; letters, digits, - _ .
///       workload: lenet5              # (or hf_config: a Hugging Face config.json, sim/hf_config.h)
///                                     # and any of: strategies (list), epochs, steps_per_epoch,
///       strategies: [loop-sink]       # batch_size, sink_size, chip, dataset, set (map or list
///       set: {host.op_launch_us: 20}  # of key=value)
///     - name: llama-serving             # serve: true, a serving run (sim/serve.h): workload,
///       serve: true                     # gpt_size, layers, hidden, heads, ffn, vocab, server, chip,
///       launch: [eager, graph]          # set, devices, tensor_parallel, launch, rate, requests, ...
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

// Its table and JUnit XML: report::diff_table, diff_junit (sim/report/regression_report.h).

/// A published hardware figure and the run that reproduces its configuration.
struct PublishedFigure {
  std::string id;
  double value = 0;
  /// measure: step_time_ms or samples_per_s (the steady state, as StepRecord defines it),
  /// eval_pass_s (later passes), epoch_s (the epochs after the first, their mean), first_epoch_s
  /// (both scaled to the dataset's steps when the run simulates fewer per epoch), peak_tflops,
  /// tokens_per_s_per_device (a transformer's steady tokens per second over the devices), or a
  /// serving run's tpot_ms or ttft_ms (the mean over the requests)
  std::string unit, measure;
  std::string configuration, source;
  RunRequest run;           ///< one strategy (devices > 1: not yet comparable)
  /// A serving figure (the run's `serve: true`; measure tpot_ms or ttft_ms, the requests' mean):
  /// one launch mode.
  std::optional<ServeRequest> serve;
  bool host_bound = false;  ///< bound by the host; `calibrate` fits to these by default
  /// Why the figure is simulated and shown but not counted (its error is not the model's: e.g.
  /// the source's devices are not the chip modelled); empty: counted.
  std::string not_compared;
};

/// A fittable parameter's physically plausible range (the figures file's `fit:` section).
struct FitBounds {
  std::string key;  ///< as --set takes it, e.g. host.map_op_overhead_us
  double min = 0, max = 0;
  std::string why;  ///< the physical reasoning for the range
};

/// A figures file: the figures and the bounds of the parameters `calibrate` may fit.
struct FiguresFile {
  std::string path;
  std::vector<PublishedFigure> figures;
  std::vector<FitBounds> bounds;  ///< in file order
};

struct ValidationRow {
  PublishedFigure figure;
  double simulated = 0;
  double error = 0;  ///< (simulated - published) / published
  bool compared = false;
  bool simulated_only = false;  ///< simulated and shown, not counted (PublishedFigure::not_compared)
  std::string note;  ///< why not compared
};

/// Reads bench/validation/figures.yaml: `figures:` a list of id, value, unit, measure,
/// configuration, source, run (the keys of a suite run, devices included) and host_bound (true or
/// false, default false); `fit:` (optional) a mapping of parameter keys to {min, max, why}, the
/// bounds `calibrate` fits within (0 < min < max, inside the parameter's declared range, a real
/// parameter).
FiguresFile load_figures_file(const std::string& path, const std::string& config_dir);
/// The figures of load_figures_file().
std::vector<PublishedFigure> load_figures(const std::string& path, const std::string& config_dir);
/// Simulates every figure it can (one device).
std::vector<ValidationRow> validate(const std::vector<PublishedFigure>& figures);
/// One figure's simulated value, `extra_sets` ("key=value") applied after the figure's own
/// overrides; validate()'s code path. Throws InputError if it cannot be simulated (more than 8
/// devices) or its run fails.
double simulate_figure(const PublishedFigure& figure, const std::vector<std::string>& extra_sets = {});

/// `ascendsim calibrate`: which figures, which parameters, from where.
struct CalibrationRequest {
  std::string figures_path;
  std::string config_dir;
  /// Parameter keys, 1 to 6, each with bounds in the file; `PRESET:key` fits a host preset's own
  /// (applied only to the figures whose servers carry that preset). Empty: the parameters the
  /// fitted figures' host presets mark as fitted (`host.fitted`).
  std::vector<std::string> fit;
  std::vector<std::string> only;   ///< figure ids fitted; empty: those marked host_bound
  std::vector<std::string> start;  ///< "key=value": a fitted parameter's start instead of its configured value
  fit::Options options;
};

/// The ids of the figures a calibration fits: `only`'s (each known and compared), else those
/// marked host_bound.
struct FiguresFile;
std::vector<std::string> figure_ids(const FiguresFile& file, const std::vector<std::string>& only);

struct Calibration {
  FiguresFile file;
  std::vector<std::string> keys;         ///< the fitted keys, --fit's or the presets'
  fit::Loo loo = fit::Loo::Exact;        ///< how the left-out errors were had
  std::vector<FitBounds> bounds;         ///< per fitted key, in --fit order
  std::vector<std::string> units;        ///< per fitted key
  std::vector<PublishedFigure> figures;  ///< the fitted ones first, then the others that can be simulated
  fit::Result result;
};

/// Checks the request (every key, bound and id, before any run), then runs fit::calibrate() with
/// the figures simulated by simulate_figure(), the candidate values as overrides after each
/// figure's own. Throws InputError naming the key, id or file.
Calibration calibrate(const CalibrationRequest& req);
// The validation's and the calibration's table, JSON, page and configuration fragment:
// report::validation_table, ..., calibration_yaml (sim/report/regression_report.h).

}  // namespace ascendsim::sim
