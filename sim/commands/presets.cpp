// `chips` and `servers`: the chip and server presets of the configuration directory.

#include <algorithm>
#include <functional>
#include <iostream>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "sim/commands/commands.h"
#include "sim/commands/options.h"
#include "sim/config.h"
#include "sim/core/error.h"

namespace ascendsim::sim::cli {

namespace {

/// `chips` and `servers`: every preset `presets` finds in the configuration directory (its
/// `subdir`), each loaded through `name_it`, printed as `line` gives it (the name padded to the
/// longest) or written as `entry`.
int list_presets(int argc, char* argv[], const std::string& command, const std::string& subdir,
                 std::vector<std::string> (*presets)(const std::string&),
                 const std::function<void(ConfigRequest&, const std::string&)>& name_it,
                 const std::function<std::string(const std::string&, const SystemConfig&)>& line,
                 const std::function<ordered_json(const SystemConfig&)>& entry) {
  po::options_description desc("options");
  std::string json;
  desc.add_options()("help,h", "show this help")("json", po::value(&json)->implicit_value("-"),
                                                 "write them as JSON to FILE ('-' or no value: stdout)");
  if (!parse(argc, argv, desc, command)) return 0;
  const std::string dir = default_config_dir();
  const auto names = presets(dir);
  if (names.empty())
    throw InputError("no " + subdir.substr(0, subdir.size() - 1) + " presets in " + dir + "/" + subdir +
                     "; set ASCENDSIM_CONFIG_DIR");
  std::size_t width = 0;  // the names in one column
  for (const auto& n : names) width = std::max(width, n.size());
  ordered_json j = ordered_json::object();
  for (const auto& n : names) {
    ConfigRequest req;
    req.dir = dir;
    name_it(req, n);
    const SystemConfig cfg = load_config(req);
    if (json.empty()) std::cout << line(fmt::format("{:<{}}", n, width), cfg) << "\n";
    j[n] = entry(cfg);
  }
  if (!json.empty()) write_output(json, j.dump(2) + "\n");
  return 0;
}

}  // namespace

int cmd_chips(int argc, char* argv[]) {
  return list_presets(
      argc, argv, "chips", "chips", chip_presets, [](ConfigRequest& r, const std::string& n) { r.chip = n; },
      [](const std::string& n, const SystemConfig& c) { return fmt::format("{} {}", n, c.chip.description); },
      [](const SystemConfig& c) { return ordered_json(c.chip.description); });
}

int cmd_servers(int argc, char* argv[]) {
  return list_presets(
      argc, argv, "servers", "servers", server_presets, [](ConfigRequest& r, const std::string& n) { r.server = n; },
      [](const std::string& n, const SystemConfig& c) {
        return fmt::format("{} {} (chip {}, {} devices, {} host cores)", n, c.server.description,
                           c.server.chip, c.server.devices_per_server, c.host.cpu_cores);
      },
      [](const SystemConfig& c) {
        return ordered_json{{"description", c.server.description},
                            {"chip", c.server.chip},
                            {"devices_per_server", c.server.devices_per_server},
                            {"host_cpu_cores", c.host.cpu_cores}};
      });
}

}  // namespace ascendsim::sim::cli
