// `sweep`: the strategies over values of sink_size, another request field or any parameter.

#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "sim/api.h"
#include "sim/commands/commands.h"
#include "sim/commands/messages.h"
#include "sim/commands/options.h"
#include "sim/config.h"
#include "sim/core/error.h"
#include "sim/outputs.h"
#include "sim/report/html_report.h"
#include "sim/report/studies_report.h"

namespace ascendsim::sim::cli {

int cmd_sweep(int argc, char* argv[]) {
  Options o;
  std::string strategies_arg;
  SweepRequest req;
  std::string values_arg;
  po::options_description desc = common_options(o);
  desc.add(run_options(o));
  desc.add(parallel_options(o));
  desc.add_options()("param", po::value(&req.param)->required(),
                     "what to sweep: sink_size, epochs, steps_per_epoch, batch_size, devices (the same job on clusters "
                     "of these sizes; with evaluation, a time to train per size), or any parameter key "
                     "(e.g. link.h2d_bandwidth_gbps, host.op_launch_us)")("values", po::value(&values_arg)->required(),
                                                                          "comma-separated values, e.g. 1,10,100,1000")(
      "strategies", po::value(&strategies_arg), "comma-separated strategies (default: all four)")(
      "csv", po::value(&o.csv), "write the rows as CSV to FILE");
  if (!parse(argc, argv, desc, "sweep")) return 0;
  req.values = split_list(values_arg, "--values");
  for (const auto& v : req.values)
    typed()[override_origin(req.param + "=" + v)] = "--param " + req.param + " value " + v;
  if (!o.per_step.empty())
    throw InputError(
        "--per-step: a sweep writes no per-step file; use `ascendsim train` or `ascendsim compare` for "
        "the point you want");
  if (!o.trace.empty() || !o.trace_steps.empty())
    throw InputError(
        "--trace: a sweep writes no timeline; trace the point you want with `ascendsim train` or "
        "`ascendsim compare` and its value");
  std::vector<runtime::Strategy> strategies = runtime::all_strategies();
  if (!strategies_arg.empty()) {
    strategies.clear();
    for (const auto& s : split_list(strategies_arg, "--strategies")) strategies.push_back(runtime::parse_strategy(s));
  }
  Outputs files;
  add_outputs(files, o);
  req.base = make_request(o, strategies);
  req.base.trace = false;
  const SweepOutcome out = sweep(req);
  if (out.failed()) {
    std::istringstream lines(out.failure_message());
    for (std::string line; std::getline(lines, line);) std::cerr << "error: " << line << "\n";
    std::cerr << "no report written\n";
    return kExitRunFailed;
  }
  if (!o.json.empty()) files.stage(o.json, out.report().dump(2) + "\n");
  if (!o.csv.empty()) files.stage(o.csv, report::sweep_csv(out));
  if (!o.html.empty()) files.stage(o.html, report::html_sweep(out.header, out.param, out.points, out.conclusion));
  if (o.json != "-") files.print(report::sweep_table(out));
  files.commit();
  return 0;
}

}  // namespace ascendsim::sim::cli
