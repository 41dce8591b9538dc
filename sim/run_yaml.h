// The YAML of one run, shared by the suite files (sim/suite.cpp) and the figures files of
// validation and calibration (sim/validation.cpp, sim/calibration.cpp): a run's keys read into a
// RunRequest, and the values they take. Errors name the place (`at`) and the key.
#pragma once

#include <optional>
#include <string>

#include <yaml-cpp/yaml.h>

#include "sim/api.h"
#include "sim/serve.h"

namespace ascendsim::sim::run_yaml {

/// A run's mapping (name, workload, strategies, epochs, ... as a suite takes them) as a request;
/// its name in `name`.
RunRequest parse_run(const YAML::Node& run, const std::string& at, const std::string& config_dir, std::string* name);
/// A serving run's mapping (`serve: true`, the keys of sim/serve.h's request) as a request.
ServeRequest parse_serve_run(const YAML::Node& run, const std::string& at, const std::string& config_dir,
                             std::string* name);
/// `n`'s single value.
std::string scalar(const YAML::Node& n, const std::string& at, const std::string& key);
/// `n`'s value as a finite number.
double number(const YAML::Node& n, const std::string& at, const std::string& key);
/// `s` as a number if all of it is one.
std::optional<double> whole_real(const std::string& s);

}  // namespace ascendsim::sim::run_yaml
