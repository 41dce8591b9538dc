// `stats`: every statistic a run reports, with unit and description.

#include <iostream>

#include <fmt/format.h>

#include "sim/api.h"
#include "sim/commands/commands.h"
#include "sim/commands/options.h"

namespace ascendsim::sim::cli {

int cmd_stats(int argc, char* argv[]) {
  Options o;
  po::options_description desc = common_options(o);
  if (!parse(argc, argv, desc, "stats")) return 0;
  const auto stats = describe_statistics(make_request(o, runtime::all_strategies()));
  if (!o.json.empty()) {
    ordered_json j = ordered_json::array();
    for (const auto& s : stats) j.push_back({{"path", s.path}, {"unit", s.unit}, {"description", s.description}});
    write_output(o.json, j.dump(2) + "\n");
    if (o.json == "-") return 0;
  }
  std::cout << "statistics of each run, under runs[].stats in the JSON report (paths below the run)\n\n";
  std::cout << fmt::format("{:<36} {:<9} {}\n", "statistic", "unit", "description");
  for (const auto& s : stats) std::cout << fmt::format("{:<36} {:<9} {}\n", s.path, s.unit, s.description);
  return 0;
}

}  // namespace ascendsim::sim::cli
