// Model against published figures: `validate` (the figures and the simulated ones side by side),
// `calibrate` (host parameters fitted to them) and `calibrate-host` (this host's own costs measured).

#include <chrono>
#include <iostream>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "runtime/calibrate.h"
#include "sim/commands/commands.h"
#include "sim/commands/options.h"
#include "sim/config.h"
#include "sim/core/error.h"
#include "sim/core/params.h"
#include "sim/outputs.h"
#include "sim/regression.h"
#include "sim/report/host_profile.h"
#include "sim/report/regression_report.h"

namespace ascendsim::sim::cli {

int cmd_validate(int argc, char* argv[]) {
  std::string file = std::string(ASCENDSIM_SOURCE_DIR) + "/bench/validation/figures.yaml", tolerance = "15%";
  std::string html, json;
  po::options_description desc("options");
  desc.add_options()("help,h", "show this help")("figures", po::value(&file)->default_value(file),
                                                 "published figures with the runs that reproduce them")(
      "tolerance", po::value(&tolerance)->default_value(tolerance), "error that counts as within (a percentage)")(
      "html", po::value(&html), "write the validation page (error per figure, table with sources) to FILE")(
      "json", po::value(&json), "write the rows as JSON to FILE");
  if (!parse(argc, argv, desc, "validate")) return 0;
  const double tol = parse_share(tolerance, "--tolerance", true);
  Outputs files;
  files.add(html, "--html");
  files.add(json, "--json");
  const auto rows = validate(load_figures(file, default_config_dir()));
  if (!html.empty()) files.stage(html, report::validation_html(rows, tol));
  if (!json.empty()) files.stage(json, report::validation_json(rows).dump(2) + "\n");
  files.print(report::validation_table(rows, tol));
  files.commit();
  return 0;
}

int cmd_calibrate(int argc, char* argv[]) {
  CalibrationRequest req;
  req.figures_path = std::string(ASCENDSIM_SOURCE_DIR) + "/bench/validation/figures.yaml";
  req.config_dir = default_config_dir();
  std::string fit, only, json, out, loo = "refit";
  std::vector<std::string> starts;
  bool quiet = false;
  po::options_description desc("options");
  desc.add_options()("help,h", "show this help")(
      "figures", po::value(&req.figures_path)->default_value(req.figures_path),
      "published figures with their runs, and the `fit:` bounds of the parameters")(
      "fit", po::value(&fit), "parameter keys to fit, comma-separated (1 to 6, each with bounds in the figures file; HOSTPRESET:key for one "
      "host preset's own; default: the parameters the fitted figures' host presets mark as fitted)")(
      "only", po::value(&only), "figure ids to fit to, comma-separated (default: those marked host_bound: true)")(
      "start", po::value(&starts)->composing(),
      "KEY=VALUE: start a fitted parameter here instead of at its configured value (repeatable)")(
      "loo", po::value(&loo)->default_value(loo),
      "left-out errors: linear (one Gauss-Newton step without the figure from the fit, then the figure "
      "simulated: one simulation each) | refit (the whole fit again without it, from the fit) | exact (the whole "
      "fit again without it, from the start)")(
      "max-iterations", po::value(&req.options.max_iterations)->default_value(req.options.max_iterations),
      "Levenberg-Marquardt iterations per fit at most")(
      "json", po::value(&json), "write parameters, figures and leave-one-out errors as JSON to FILE")(
      "out", po::value(&out), "write the fitted values as a configuration fragment (YAML, for --config) to FILE")(
      "quiet,q", po::bool_switch(&quiet), "no progress on stderr");
  if (!parse(argc, argv, desc, "calibrate")) return 0;
  if (loo != "linear" && loo != "refit" && loo != "exact") throw InputError("--loo " + loo + ": linear, refit or exact");
  req.options.loo = loo == "exact" ? fit::Loo::Exact : loo == "refit" ? fit::Loo::Refit : fit::Loo::Linear;
  if (req.options.max_iterations < 1 || req.options.max_iterations > 1000)
    throw InputError("--max-iterations " + std::to_string(req.options.max_iterations) + ": give 1 to 1000");
  req.fit = comma_list(fit);
  req.only = comma_list(only);
  if (!only.empty())
    for (const auto& id : req.only)
      if (id.empty()) throw InputError("--only " + only + ": an empty figure id");
  req.start = starts;
  Outputs files;
  files.add(json, "--json");
  files.add(out, "--out");
  const auto t0 = std::chrono::steady_clock::now();
  if (!quiet) req.options.progress = [](const std::string& line) { std::cerr << "calibrate: " << line << "\n"; };
  const Calibration c = calibrate(req);
  if (!json.empty()) files.stage(json, report::calibration_json(c).dump(2) + "\n");
  if (!out.empty()) files.stage(out, report::calibration_yaml(c));
  files.print(report::calibration_table(c));
  files.commit();
  if (!quiet)
    std::cerr << fmt::format("calibrate: {:.1f} s\n",
                             std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  return 0;
}

int cmd_calibrate_host(int argc, char* argv[]) {
  po::options_description desc("options");
  runtime::CalibrateOptions opt;
  std::string out;
  bool quiet = false;
  desc.add_options()("help,h", "show this help")("threads", po::value(&opt.threads)->default_value(1),
                                                 "threads measuring at once (their contention is measured too)")(
      "out", po::value(&out), "write the host profile (YAML, for --config) to FILE; default: stdout")(
      "quick", po::bool_switch(&opt.quick), "fewer sizes and shorter timings (a rough profile in seconds)")(
      "quiet,q", po::bool_switch(&quiet), "no progress on stderr");
  if (!parse(argc, argv, desc, "calibrate-host")) return 0;
  if (opt.threads < 1 || opt.threads > 1024)
    throw InputError("--threads " + std::to_string(opt.threads) + ": give 1 to 1024");
  if (opt.quick) {
    opt.min_time_s = 0.005;
    opt.repeats = 3;
  }
  Outputs files;
  if (!out.empty() && out != "-") files.add(out, "--out");
  std::ostream* progress = quiet ? nullptr : &std::cerr;
  if (progress)
    *progress << "calibrate-host: timing this host's pipeline operations (" << opt.threads << " thread(s))\n";
  const runtime::HostCalibration c = runtime::calibrate_host(opt, progress);
  // The fitted costs next to the preset's assumed ones, and how well the lines explain the timings.
  ConfigRequest preset_request;
  preset_request.dir = default_config_dir();
  SystemConfig preset = load_config(preset_request);
  const ParamSet ps = bind_params(preset);
  const ordered_json values = ps.to_json();
  double worst = 0;
  std::string worst_key;
  if (progress) *progress << fmt::format("\n{:<32} {:>10} {:>10}\n", "cost", "preset", "measured");
  for (const auto& op : c.ops) {
    if (op.fit.max_rel_error > worst) {
      worst = op.fit.max_rel_error;
      worst_key = op.key;
    }
    const std::string name = op.key.substr(op.key.find('.') + 1);
    if (progress)
      *progress << fmt::format("{:<32} {:>10.4g} {:>10.4g}  ns/{}\n", op.key, values.at("host").at(name).get<double>(),
                               op.per_unit_ns(), op.unit);
  }
  if (progress)
    *progress << fmt::format("the fitted costs explain every timing within {:.1f}% (worst: {}); {:.1f} s\n",
                             100 * worst, worst_key, c.wall_s);
  const std::string yaml = report::host_profile_yaml(c);
  if (out.empty() || out == "-") {
    std::cout << yaml;
  } else {
    files.stage(out, yaml);
    files.commit();
  }
  return 0;
}

}  // namespace ascendsim::sim::cli
