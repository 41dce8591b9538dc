// Shared by the tests: the configuration request for the presets in the source tree.
#pragma once

#include "sim/config.h"

namespace ascendsim::test {

inline sim::ConfigRequest config_request() {
  sim::ConfigRequest r;
  r.dir = ASCENDSIM_SOURCE_DIR "/configs";
  return r;
}

}  // namespace ascendsim::test
