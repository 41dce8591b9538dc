// calibrate-host's report: the host's measured data-pipeline costs as a host profile.
#pragma once

#include <string>

#include "runtime/calibrate.h"

namespace ascendsim::report {

/// The calibration as a host profile (YAML, `host:` keys, for --config), each value with what it
/// was fitted from.
std::string host_profile_yaml(const runtime::HostCalibration& c);

}  // namespace ascendsim::report
