// The host interface of one chip: the two DMA directions of the PCIe link, the device data queue,
// doorbells (host -> device submissions) and completion notifications (device -> host).
#pragma once

#include <systemc>

#include "hostif/data_queue.h"
#include "hostif/dma_channel.h"
#include "hostif/link_config.h"
#include "sim/core/stats.h"

namespace ascendsim::hostif {

class HostInterface : public sc_core::sc_module {
 public:
  HostInterface(sc_core::sc_module_name name, const LinkConfig& link, const QueueConfig& queue);

  DmaChannel h2d;
  DmaChannel d2h;
  DataQueue queue;

  /// Rings a doorbell at `at` (now or later); returns when the device sees the submission.
  sc_core::sc_time ring_doorbell(const sc_core::sc_time& at);
  /// Blocks the host thread for the completion notification latency. Call from an SC_THREAD.
  void await_completion_notice();

  sim::StatsGroup& stats() { return m_stats; }

 private:
  sc_core::sc_time m_doorbell;
  sc_core::sc_time m_completion;
  sim::StatsGroup m_stats;
  sim::Scalar& m_doorbells;
  sim::Scalar& m_completions;
};

}  // namespace ascendsim::hostif
