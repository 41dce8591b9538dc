// Configuration of the device control side: the task scheduler and the AICPU kernels it runs.
#pragma once

#include <cstdint>
#include <string>

#include "sim/core/params.h"

namespace ascendsim::aicpu {

struct AicpuConfig {
  double dispatch_ns = 800;                 ///< scheduler cost per task: fetch descriptor, resolve, dispatch blocks
  double getnext_us = 12;                   ///< GetNext kernel on an AICPU core once a batch is queued
  double assign_add_us = 3;                 ///< loop counter AssignAdd kernel
  double stream_switch_us = 1.5;            ///< StreamSwitch (compare counter with sink_size, branch)
  double stream_active_us = 1.5;            ///< StreamActive (re-activate the loop body stream)
  double end_graph_us = 3;                  ///< EndGraph: mark the graph done, raise the completion
  std::int64_t task_descriptor_bytes = 64;  ///< one task descriptor as loaded with a graph
  double op_timeout_s = 1900;               ///< a device op (GetNext) waiting longer fails the run

  void declare(sim::ParamSet& ps);
};

/// The collectives between a cluster's devices (aicpu/hccl.h).
struct HcclConfig {
  double link_bandwidth_gbps = 63;    ///< B: one ring link, one direction, as HCCL achieves it
  double step_latency_us = 54.6;      ///< α: per ring step (transfer start, cross-device notify)
  double roce_bandwidth_gbps = 12.5;  ///< between servers: each device's RoCE port, one direction
  double roce_step_latency_us = 60;   ///< between servers: per ring step
  /// Devices of one HCCS network in a server (numbered consecutively: 0..g-1, g..2g-1, ...); the
  /// networks of a server are joined through PCIe. 8: one network of the whole server.
  std::int64_t hccs_group_size = 8;
  double pcie_bandwidth_gbps = 24;  ///< between a server's HCCS networks: one device's PCIe path, one direction
  /// The RoCE fabric between servers, two tiers: servers (in rank order) under leaf switches of
  /// `servers_per_leaf`, the leaves joined by spines with `oversubscription` : 1 of the leaf's
  /// downlink bandwidth to its uplink bandwidth; `switch_latency_us` per switch a packet crosses.
  std::int64_t servers_per_leaf = 4;
  double oversubscription = 1;
  double switch_latency_us = 0.5;
  /// HCCL's algorithm between servers (its level 1): "auto" (chosen by `auto_rule`), or one of the
  /// settable ones, "ring", "halving-doubling", "nhr", "nb", "pipeline" (aicpu/hccl.h).
  std::string inter_server_algorithm = "auto";
  /// The settable algorithms between servers, in the order the least-time rule prefers them on a tie.
  static constexpr const char* kAlgorithms[] = {"ring", "halving-doubling", "nhr", "nb", "pipeline"};
  /// How "auto" chooses, a property of the product (the chip preset sets it): "power-of-two-servers"
  /// (Atlas training products, Ascend 910: halving-doubling on a power of two of servers, else
  /// ring) or "least-time" (assumed for Atlas A2, 910B: the settable algorithm of least modelled
  /// time for the collective's kind, servers and size).
  std::string auto_rule = "power-of-two-servers";

  void declare(sim::ParamSet& ps);
};

}  // namespace ascendsim::aicpu
