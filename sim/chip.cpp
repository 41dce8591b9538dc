#include "sim/chip.h"

namespace ascendsim::sim {

Chip::Chip(sc_core::sc_module_name name, const SystemConfig& cfg, BreakdownAccountant& account)
    : sc_module(name),
      cores("aicore"),
      scheduler("scheduler", cfg.chip.aicpu, cores, account),
      hostif("hostif", cfg.link, cfg.chip.queue) {
  // connect
  scheduler.bind_source(hostif.queue);
}

}  // namespace ascendsim::sim
