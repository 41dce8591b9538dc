// `diff`: two reports or suite outputs compared figure by figure.

#include <string>

#include "sim/commands/commands.h"
#include "sim/commands/options.h"
#include "sim/outputs.h"
#include "sim/regression.h"
#include "sim/report/regression_report.h"

namespace ascendsim::sim::cli {

int cmd_diff(int argc, char* argv[]) {
  std::string base, now, tolerance_arg = "1%", junit;
  bool all = false;
  po::options_description desc("options");
  desc.add_options()("help,h", "show this help")("base", po::value(&base)->required(),
                                                 "the reference: a JSON report or a suite output directory")(
      "new", po::value(&now)->required(), "the report or suite output to compare with it")(
      "tolerance", po::value(&tolerance_arg)->default_value(tolerance_arg),
      "largest relative change that passes, as 1% or 0.01")(
      "junit", po::value(&junit), "write a JUnit XML report (one test case per figure) to FILE")(
      "all", po::bool_switch(&all), "list every figure compared, not only those that moved");
  po::positional_options_description pos;
  pos.add("base", 1).add("new", 1);
  if (!parse(argc, argv, desc, "diff", &pos)) return 0;
  const double tolerance = parse_share(tolerance_arg, "--tolerance", false);
  Outputs files;
  files.add(junit, "--junit");
  const DiffResult d = diff_reports(base, now, tolerance);
  if (!junit.empty()) files.stage(junit, report::diff_junit(d, tolerance));
  files.print(report::diff_table(d, tolerance, all));
  files.commit();
  return d.moved() ? 1 : 0;
}

}  // namespace ascendsim::sim::cli
