// `params`: every configuration parameter with its value, unit, range and description.

#include <cstddef>
#include <iostream>
#include <string>

#include <fmt/format.h>

#include "sim/commands/commands.h"
#include "sim/commands/options.h"
#include "sim/config.h"
#include "sim/core/params.h"

namespace ascendsim::sim::cli {

int cmd_params(int argc, char* argv[]) {
  Options o;
  po::options_description desc("options");
  desc.add_options()("help,h", "show this help")("server", po::value(&o.config.server),
                                                 "show values on this server preset (default generic-x86)")(
      "chip", po::value(&o.config.chip), "show values of this chip preset (default: the server's)")(
      "config", po::value(&o.config.config_file), "YAML file overriding preset parameters")(
      "set", po::value(&o.config.sets)->composing(), "override one parameter, key=value (repeatable)")(
      "json", po::value(&o.json)->implicit_value("-"), "write them as JSON to FILE ('-' or no value: stdout)");
  if (!parse(argc, argv, desc, "params")) return 0;
  SystemConfig cfg = load_config(o.request());
  SystemConfig defaults;
  const ParamSet ps = bind_params(cfg);
  const ParamSet ds = bind_params(defaults);
  if (!o.json.empty()) {
    const ordered_json values = ps.to_json();
    ordered_json j = ordered_json::object();
    for (const ParamSpec& s : ps.specs()) {
      ordered_json v = values;
      for (std::size_t at = 0, dot = 0; dot != std::string::npos; at = dot + 1) {  // "a.b.c" in the nested values
        dot = s.key.find('.', at);
        v = v.at(s.key.substr(at, dot == std::string::npos ? std::string::npos : dot - at));
      }
      j[s.key] = {{"value", v}, {"unit", s.unit}, {"range", ParamSet::range_string(s)}, {"description", s.description}};
    }
    write_output(o.json, j.dump(2) + "\n");
    return 0;
  }
  std::cout << fmt::format("{:<34} {:>12} {:>12} {:<9} {:<18} {}\n", "parameter", cfg.chip.name, "built-in", "unit",
                           "range", "description");
  for (std::size_t i = 0; i < ps.specs().size(); ++i) {
    const ParamSpec& s = ps.specs()[i];
    if (s.key == "chip.description" || s.key == "server.description") continue;
    std::cout << fmt::format("{:<34} {:>12} {:>12} {:<9} {:<18} {}\n", s.key, ParamSet::value_string(s),
                             ParamSet::value_string(ds.specs()[i]), s.unit, ParamSet::range_string(s), s.description);
  }
  return 0;
}

}  // namespace ascendsim::sim::cli
