// One chip: AI cores, the task scheduler with its AICPU kernels, and the host interface
// (PCIe DMA, doorbells, completions, device data queue). The constructor's connect section makes
// every binding; SystemC refuses to start if a port is left unbound.
#pragma once

#include <systemc>

#include "aicore/aicore_cluster.h"
#include "aicpu/task_scheduler.h"
#include "hostif/host_interface.h"
#include "sim/config.h"
#include "sim/core/breakdown.h"

namespace ascendsim::sim {

class Chip : public sc_core::sc_module {
 public:
  Chip(sc_core::sc_module_name name, const SystemConfig& cfg, BreakdownAccountant& account);

  aicore::Hbm hbm;
  aicore::AiCoreCluster cores;
  aicpu::TaskScheduler scheduler;
  hostif::HostInterface hostif;
};

}  // namespace ascendsim::sim
