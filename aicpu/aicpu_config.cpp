#include "aicpu/aicpu_config.h"

#include <iterator>
#include <string>
#include <vector>

namespace ascendsim::aicpu {

void AicpuConfig::declare(sim::ParamSet& ps) {
  ps.real("aicpu.dispatch_ns", dispatch_ns, "ns", 0, 1e6,
          "task scheduler cost per task (descriptor fetch, dependency check, block dispatch)");
  ps.real("aicpu.getnext_us", getnext_us, "us", 0, 1e6, "GetNext kernel time on an AICPU core once a batch is queued");
  ps.real("aicpu.assign_add_us", assign_add_us, "us", 0, 1e6, "loop-sink counter AssignAdd kernel, per iteration");
  ps.real("aicpu.stream_switch_us", stream_switch_us, "us", 0, 1e6, "loop-sink StreamSwitch, per iteration");
  ps.real("aicpu.stream_active_us", stream_active_us, "us", 0, 1e6, "loop-sink StreamActive, per iteration");
  ps.real("aicpu.end_graph_us", end_graph_us, "us", 0, 1e6, "EndGraph kernel at the end of a graph execution");
  ps.integer("aicpu.task_descriptor_bytes", task_descriptor_bytes, "B", 1, 1 << 20,
             "size of one task descriptor loaded with a graph");
  ps.real("aicpu.op_timeout_s", op_timeout_s, "s", 1e-6, 1e7,
          "a device op (GetNext) waiting longer than this fails the run (MindSpore op_timeout)");
}

void HcclConfig::declare(sim::ParamSet& ps) {
  ps.real("hccl.link_bandwidth_gbps", link_bandwidth_gbps, "GB/s", 1e-3, 1e5,
          "collective ring: one link's bandwidth in one direction, as HCCL achieves it");
  ps.real("hccl.roce_bandwidth_gbps", roce_bandwidth_gbps, "GB/s", 1e-3, 1e5,
          "between servers: one device's RoCE port, one direction");
  ps.real("hccl.roce_step_latency_us", roce_step_latency_us, "us", 0, 1e6,
          "between servers: latency of one ring step (through the switch)");
  ps.integer("hccl.hccs_group_size", hccs_group_size, "devices", 1, 8,
             "devices of one HCCS network in a server (0..g-1, g..2g-1, ...); a server's networks are joined "
             "through PCIe (8: one network of the whole server)");
  ps.real("hccl.pcie_bandwidth_gbps", pcie_bandwidth_gbps, "GB/s", 1e-3, 1e5,
          "between a server's HCCS networks: one device's PCIe path, one direction, as HCCL achieves it");
  ps.real("hccl.step_latency_us", step_latency_us, "us", 0, 1e6,
          "collective ring: latency of one step (transfer start and the cross-device notify)");
  ps.integer("network.servers_per_leaf", servers_per_leaf, "servers", 1, 1 << 16,
             "servers under one leaf switch of the RoCE fabric (in rank order)");
  ps.real("network.oversubscription", oversubscription, "ratio", 1, 1e3,
          "a leaf's downlink bandwidth over its uplink bandwidth to the spines (1: non-blocking)");
  ps.real("network.switch_latency_us", switch_latency_us, "us", 0, 1e3,
          "one switch traversal; a ring step between leaves crosses two more (spine, far leaf)");
  std::vector<std::string> algorithms{"auto"};
  algorithms.insert(algorithms.end(), std::begin(kAlgorithms), std::end(kAlgorithms));
  ps.text("hccl.inter_server_algorithm", inter_server_algorithm, algorithms,
          "between servers: auto (as HCCL chooses, by hccl.auto_rule), rings of the servers, recursive "
          "halving-doubling, nonuniform hierarchical ring, nonuniform Bruck, or pipeline (server rings and RoCE at "
          "once, in chunks)");
  ps.text("hccl.auto_rule", auto_rule, {"power-of-two-servers", "least-time"},
          "how inter_server_algorithm=auto chooses, by product: halving-doubling on a power of two of servers, else "
          "ring (Atlas training, 910), or the algorithm of least modelled time (assumed for Atlas A2, 910B)");
}

}  // namespace ascendsim::aicpu
