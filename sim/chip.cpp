#include "sim/chip.h"

namespace ascendsim::sim {

Chip::Chip(sc_core::sc_module_name name, const SystemConfig& cfg, BreakdownAccountant& account)
    : sc_module(name),
      hbm("hbm", cfg.chip.memory.hbm_gbps(), cfg.chip.memory.hbm_contention),
      cores("aicore", cfg.chip.aicore.cores, cfg.chip.aicore.vector_cores),
      scheduler("scheduler", cfg.chip.aicpu, cores, account),
      hostif("hostif", cfg.link, cfg.chip.queue) {
  // connect: the host interface drives the device; the device notifies the host interface and pops
  // batches from its data queue.
  cores.set_hbm(&hbm);
  hostif.h2d.set_hbm(&hbm);
  hostif.d2h.set_hbm(&hbm);
  hostif.device(scheduler);
  scheduler.host(hostif);
  scheduler.batches(hostif.queue);
  scheduler.batches(hostif.eval_queue);
}

}  // namespace ascendsim::sim
