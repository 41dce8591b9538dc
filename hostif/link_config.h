// Configuration of the host link (PCIe), its DMA engine and the device data queues.
#pragma once

#include <cstdint>

#include "sim/core/params.h"

namespace ascendsim::hostif {

struct LinkConfig {
  double h2d_bandwidth_gbps = 24;   ///< effective host-to-device DMA bandwidth
  double d2h_bandwidth_gbps = 24;   ///< effective device-to-host DMA bandwidth
  double latency_ns = 900;          ///< one-way latency a transfer's last byte adds
  std::int64_t dma_chunk_kib = 64;  ///< arbitration granularity: concurrent transfers interleave chunks
  double dma_setup_ns = 1000;       ///< per transfer: descriptor build and fetch
  double doorbell_ns = 600;         ///< host MMIO doorbell until the device sees a submission
  double completion_ns = 2000;      ///< device completion until the host is notified (interrupt/poll)
  /// A server's PCIe topology (data-parallel runs): devices behind one PCIe switch, whose uplink
  /// to the host they share in each direction.
  std::int64_t pcie_switch_devices = 4;
  double pcie_uplink_gbps = 24;  ///< effective bandwidth of a switch's uplink, per direction

  void declare(sim::ParamSet& ps);
};

struct QueueConfig {
  std::int64_t capacity = 16;  ///< batches the device data queue holds

  void declare(sim::ParamSet& ps);
};

}  // namespace ascendsim::hostif
