// HCCL, the collective communication of a cluster's devices, as one module every rank's task
// scheduler calls when its communication stream reaches a collective task. A collective starts
// when the last rank arrives (the ring needs every member) and ends for all at once.
//
// AllReduce within one server runs as a ring: reduce-scatter then all-gather, 2(N-1) steps each
// moving S/N bytes over one link per rank in each direction, and N-1 reduction steps on the
// device's Vector units (S/N elements read twice and written once from HBM per step). A rank's
// collectives run one at a time on its communication stream, so no two share a link: the ring's
// time is exact for the model, 2(N-1)·(α + S/(N·B)) + (N-1)·3S/(N·H) with α the per-step latency,
// B the link bandwidth and H the HBM bandwidth. Broadcast (the parameters at start) is a
// pipelined ring of N-1 hops.
//
// Across servers AllReduce is hierarchical: a reduce-scatter on each server's ring (m devices),
// an AllReduce of each S/m piece on a ring of the k servers' devices of the same local rank, each
// over its own RoCE port (the k-rings run side by side), and an all-gather on each server's ring.
#pragma once

#include <cstdint>
#include <map>
#include <vector>

#include <systemc>

#include "aicpu/aicpu_config.h"
#include "sim/core/stats.h"

namespace ascendsim::aicpu {

/// What a rank's communication stream asks of the cluster.
class CollectiveIf : public virtual sc_core::sc_interface {
 public:
  /// Blocks the calling thread until every rank has asked for its `seq`-th AllReduce of `bytes`
  /// and it has completed. Call from an SC_THREAD.
  virtual void all_reduce(int rank, std::int64_t bytes) = 0;
};

class Hccl : public sc_core::sc_module, public CollectiveIf {
 public:
  /// `hbm_gbps`: each device's HBM bandwidth, for the reduction steps; `per_server`: devices of
  /// one server (ranks is a multiple of it).
  Hccl(sc_core::sc_module_name name, const HcclConfig& cfg, int ranks, double hbm_gbps, int per_server = 8);

  void all_reduce(int rank, std::int64_t bytes) override;

  /// The ring AllReduce of `bytes` on `ranks` devices, in seconds (see above).
  static double ring_all_reduce_s(const HcclConfig& cfg, int ranks, double bytes, double hbm_gbps);
  /// The hierarchical AllReduce of `bytes` on `servers` servers of `per_server` devices.
  static double hierarchical_all_reduce_s(const HcclConfig& cfg, int servers, int per_server, double bytes,
                                          double hbm_gbps);
  /// What all_reduce takes on this cluster.
  double all_reduce_s(double bytes) const;
  /// The pipelined ring Broadcast of `bytes` from one rank to `ranks`, in `chunks` pieces.
  static double ring_broadcast_s(const HcclConfig& cfg, int ranks, double bytes, int chunks);

  int ranks() const { return m_ranks; }
  sim::StatsGroup& stats() { return m_stats; }

 private:
  struct Instance {
    int arrived = 0, left = 0;
    std::int64_t bytes = -1;
    sc_core::sc_event done;
  };
  HcclConfig m_cfg;
  int m_ranks, m_per_server;
  double m_hbm_gbps;
  std::vector<std::int64_t> m_calls;        ///< per rank: collectives asked so far
  std::map<std::int64_t, Instance> m_open;  ///< by sequence number, until every rank has left
  sim::StatsGroup m_stats;
  sim::Scalar& m_count;
  sim::Scalar& m_bytes;
  sim::Scalar& m_busy_s;
};

}  // namespace ascendsim::aicpu
