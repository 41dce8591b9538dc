#include "hostif/host_interface.h"

#include "sim/core/time.h"

namespace ascendsim::hostif {

HostInterface::HostInterface(sc_core::sc_module_name name, const LinkConfig& link, const QueueConfig& queue_cfg)
    : sc_module(name),
      h2d("h2d", link.h2d_bandwidth_gbps, link.latency_ns, link.dma_chunk_kib * 1024, link.dma_setup_ns),
      d2h("d2h", link.d2h_bandwidth_gbps, link.latency_ns, link.dma_chunk_kib * 1024, link.dma_setup_ns),
      queue("queue", queue_cfg.capacity),
      m_doorbell(sim::ns(link.doorbell_ns)),
      m_completion(sim::ns(link.completion_ns)),
      m_stats("hostif"),
      m_doorbells(m_stats.scalar("doorbells", "count", "host submissions (op or graph launches)")),
      m_completions(m_stats.scalar("completions", "count", "completion notifications delivered to the host")) {}

sc_core::sc_time HostInterface::ring_doorbell(const sc_core::sc_time& at) {
  ++m_doorbells;
  return at + m_doorbell;
}

void HostInterface::await_completion_notice() {
  ++m_completions;
  wait(m_completion);
}

}  // namespace ascendsim::hostif
