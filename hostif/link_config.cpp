#include "hostif/link_config.h"

namespace ascendsim::hostif {

void LinkConfig::declare(sim::ParamSet& ps) {
  ps.real("link.h2d_bandwidth_gbps", h2d_bandwidth_gbps, "GB/s", 0.01, 1e4, "effective host-to-device DMA bandwidth");
  ps.real("link.d2h_bandwidth_gbps", d2h_bandwidth_gbps, "GB/s", 0.01, 1e4, "effective device-to-host DMA bandwidth");
  ps.real("link.latency_ns", latency_ns, "ns", 0, 1e7, "one-way link latency added to each transfer");
  ps.integer("link.dma_chunk_kib", dma_chunk_kib, "KiB", 1, 1 << 20,
             "DMA arbitration granularity: concurrent transfers in one direction interleave chunks");
  ps.real("link.dma_setup_ns", dma_setup_ns, "ns", 0, 1e7, "per-transfer DMA descriptor build and fetch");
  ps.real("link.doorbell_ns", doorbell_ns, "ns", 0, 1e7, "host doorbell write until the device sees the submission");
  ps.real("link.completion_ns", completion_ns, "ns", 0, 1e7, "device completion until the host is notified");
  ps.integer("link.pcie_switch_devices", pcie_switch_devices, "devices", 1, 8,
             "data-parallel runs: devices of a server behind one PCIe switch, sharing its uplink to the host");
  ps.real("link.pcie_uplink_gbps", pcie_uplink_gbps, "GB/s", 0.01, 1e4,
          "data-parallel runs: a PCIe switch's uplink to the host, effective DMA bandwidth per direction");
}

void QueueConfig::declare(sim::ParamSet& ps) {
  ps.integer("queue.capacity", capacity, "batches", 2, 8192, "device data queue capacity (dataset sink modes)");
}

}  // namespace ascendsim::hostif
