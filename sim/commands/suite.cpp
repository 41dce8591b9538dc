// `suite`: a suite file's named runs into a directory of reports and its index.

#include <cstddef>
#include <filesystem>
#include <iostream>
#include <string>

#include <fmt/format.h>

#include "sim/api.h"
#include "sim/commands/commands.h"
#include "sim/commands/messages.h"
#include "sim/commands/options.h"
#include "sim/config.h"
#include "sim/core/error.h"
#include "sim/outputs.h"
#include "sim/regression.h"
#include "sim/report/report.h"
#include "sim/report/serve_report.h"
#include "sim/serve.h"

namespace ascendsim::sim::cli {

int cmd_suite(int argc, char* argv[]) {
  std::string file, out_dir;
  bool quiet = false;
  po::options_description desc("options");
  desc.add_options()("help,h", "show this help")("suite", po::value(&file)->required(),
                                                 "suite file (YAML: name, runs; see bench/suites/)")(
      "out", po::value(&out_dir)->required(), "directory for one JSON report per run and index.json")(
      "quiet,q", po::bool_switch(&quiet), "no progress on stderr");
  po::positional_options_description pos;
  pos.add("suite", 1);
  if (!parse(argc, argv, desc, "suite", &pos)) return 0;
  std::string name;
  const auto entries = load_suite(file, default_config_dir(), &name);
  Outputs files;
  files.directory(out_dir, "--out");
  ordered_json index;
  index["suite"] = name;
  index["entries"] = ordered_json::array();
  for (const auto& e : entries) files.add((std::filesystem::path(out_dir) / (e.name + ".json")).string(), "--out");
  const std::string index_path = (std::filesystem::path(out_dir) / "index.json").string();
  files.add(index_path, "--out");
  for (std::size_t i = 0; i < entries.size(); ++i) {
    const auto& e = entries[i];
    if (!quiet) std::cerr << "[" << i + 1 << "/" << entries.size() << "] " << e.name << "\n";
    if (e.serve) {  // a serving run
      ServeOutcome served;
      try {
        served = serve(*e.serve);
      } catch (const InputError& err) {
        throw InputError(file + ": run '" + e.name + "': " + cli_message(err));
      }
      const std::string report_file = e.name + ".json";
      files.stage((std::filesystem::path(out_dir) / report_file).string(), report::serve_json(served).dump(2) + "\n");
      ordered_json launches = ordered_json::array();
      for (auto m : served.modes) launches.push_back(runtime::launch_mode_name(m));
      index["entries"].push_back({{"name", e.name},
                                  {"file", report_file},
                                  {"workload", served.header["workload"]},
                                  {"chip", served.header["chip"]},
                                  {"serve", true},
                                  {"launches", launches}});
      continue;
    }
    RunOutcome out;
    try {
      out = run(e.request);
    } catch (const InputError& err) {
      throw InputError(file + ": run '" + e.name + "': " + cli_message(err));
    }
    if (out.failed()) {
      std::cerr << "error: " << file << ": run '" << e.name << "' failed: " << out.failure_message()
                << "no reports written\n";
      return kExitRunFailed;
    }
    const std::string report_file = e.name + ".json";
    files.stage((std::filesystem::path(out_dir) / report_file).string(), out.report().dump(2) + "\n");
    ordered_json strategies = ordered_json::array(), steps = ordered_json::array();
    for (const auto& r : out.runs) {
      strategies.push_back(runtime::strategy_name(r.session.strategy));
      steps.push_back(r.steps_completed);
    }
    index["entries"].push_back({{"name", e.name},
                                {"file", report_file},
                                {"workload", out.header.workload},
                                {"chip", out.header.chip},
                                {"strategies", strategies},
                                {"steps", steps}});
  }
  files.stage(index_path, index.dump(2) + "\n");
  files.commit();
  std::cout << fmt::format("{}: {} run(s), reports in {}\n", name, entries.size(), out_dir);
  return 0;
}

}  // namespace ascendsim::sim::cli
