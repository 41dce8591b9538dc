// HCCL, the collective communication of a cluster's devices, as one module every rank's task
// scheduler calls when its communication stream reaches a collective task. A collective starts
// when the last rank arrives (the ring needs every member) and ends for all at once.
//
// Within one server the collectives run on a ring of its N devices (α the per-step latency, B a
// link's bandwidth in one direction, H the HBM bandwidth for the reductions):
//   AllReduce      reduce-scatter + all-gather: 2(N-1)·(α + S/(N·B)) + (N-1)·3S/(N·H)
//   ReduceScatter  (N-1)·(α + S/(N·B)) + (N-1)·3S/(N·H)    (each step reads two S/N pieces, writes one)
//   AllGather      (N-1)·(α + S/(N·B))                      (S is the gathered result)
//   Broadcast      pipelined ring in c chunks: (N-2+c)·(α + S/(c·B)), c chosen to minimise it
// These are a collective's times alone. Each device has one port of each class — into its HCCS
// network, its PCIe path to the server's other networks, its RoCE NIC — and the fabric behind the
// ports is non-blocking; every member of a collective sends through its port of the phase's class.
// Two collectives in flight at once that share a member (a semi-auto redistribution on the compute
// stream beside a gradient AllReduce on the communication stream) share that port as a fluid:
// each phase's transfer (the S/(n·B) terms) progresses at the max-min fair rate of its ports, its
// latency and reductions (the α and HBM terms) keep their time. A collective that meets no other
// on a port takes exactly the formula's time.
//
// A server's devices may form several HCCS networks of g devices (hccl.hccs_group_size; an Atlas
// 800 9000's 8 devices are two meshes of four, 0-3 and 4-7, joined through PCIe). Then a
// collective inside the server is hierarchical too: AllReduce is a reduce-scatter on each
// network's ring, an AllReduce of each S/g piece on a ring of the p = m/g devices with the same
// index in their networks, over PCIe (bandwidth hccl.pcie_bandwidth_gbps, step latency α), and an
// all-gather on each network's ring. With g = m it is the server's ring above.
//
// Across k servers of m devices the algorithm is hierarchical: AllReduce is a reduce-scatter on
// each server's ring, an AllReduce of each S/m piece among the k devices with the same local rank
// (each over its own RoCE port, the m level-1 collectives side by side), and an all-gather on each
// server's ring; ReduceScatter and AllGather are their halves; Broadcast crosses the servers on
// the root's RoCE ring, then each server's ring. The level 1 is hccl.inter_server_algorithm: a
// ring of the k, recursive halving-doubling, NHR, NB, or the pipeline (the server rings and the
// RoCE rings at once on chunks of the data); "auto" picks one by hccl.auto_rule (docs/model.md,
// "HCCL's algorithms between servers", has each one's steps and bytes).
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <systemc>

#include "aicore/hbm.h"
#include "aicpu/aicpu_config.h"
#include "hostif/task.h"
#include "sim/core/stats.h"
#include "sim/core/trace.h"

namespace ascendsim::aicpu {

/// What a rank's communication stream asks of the cluster.
class CollectiveIf : public virtual sc_core::sc_interface {
 public:
  /// Blocks the calling thread until every rank has asked for its next collective (the same kind
  /// and size on every rank) and it has completed. Call from an SC_THREAD.
  virtual void collective(int rank, hostif::Collective kind, std::int64_t bytes) = 0;
  /// The same among the ranks of `group` only: it starts when the group's last member arrives,
  /// and disjoint groups run independently.
  virtual void collective(int rank, hostif::Collective kind, std::int64_t bytes, const hostif::CommGroup& group) {
    (void)group;
    collective(rank, kind, bytes);
  }
};

/// A collective's time and what it puts on the links.
struct CollectiveCost {
  /// The algorithm's phases in order, each on one class of link (for the trace).
  struct Part {
    const char* what;  ///< "reduce-scatter", "all-gather", "all-reduce", "broadcast"
    bool roce;         ///< between servers (RoCE) or within a server (HCCS, or PCIe if `pcie`)
    double seconds;
    bool pcie = false;  ///< between a server's HCCS networks, over PCIe
    /// Bytes each member's HBM moves in this phase: every ring step reads the piece it sends and
    /// writes the piece it receives, and a reduction reads two pieces and writes one.
    double hbm_bytes = 0;
    /// Of `seconds`, the transfers at the port's full rate (the rest: step latencies, reductions).
    double wire_s = 0;
  };
  std::vector<Part> parts;
  double seconds = 0;
  double hccs_bytes = 0;  ///< bytes all of the cluster's HCCS ring links carry, summed
  double roce_bytes = 0;  ///< bytes all RoCE ports send, summed
  double pcie_bytes = 0;  ///< bytes the devices send between a server's HCCS networks, summed
};

/// The shape a collective spans: k servers, p HCCS networks in each, g devices in each network,
/// on `leaves` leaf switches of the RoCE fabric.
struct CollectiveSpan {
  int servers = 1, networks = 1, devices = 1, leaves = 1;
};

/// Max-min fair rates of flows over ports of capacity 1: flow f crosses the ports `ports[f]` and
/// runs at most at 1 (its ports' full rate). Progressive filling: every unfrozen flow's rate rises
/// together until a port it crosses is full or it reaches 1.
std::vector<double> max_min_rates(const std::vector<std::vector<std::int64_t>>& ports);
/// The same with flow f's rate at most caps[f] (its demand, a fraction of a port's rate).
std::vector<double> max_min_rates(const std::vector<std::vector<std::int64_t>>& ports, const std::vector<double>& caps);

class Hccl : public sc_core::sc_module, public CollectiveIf {
 public:
  SC_HAS_PROCESS(Hccl);
  /// `hbm_gbps`: each device's HBM bandwidth, for the reduction steps; `per_server`: devices of
  /// one server (ranks is a multiple of it).
  Hccl(sc_core::sc_module_name name, const HcclConfig& cfg, int ranks, double hbm_gbps, int per_server = 8);

  void collective(int rank, hostif::Collective kind, std::int64_t bytes) override;
  void collective(int rank, hostif::Collective kind, std::int64_t bytes, const hostif::CommGroup& group) override;
  /// The ranks of `rank`'s group, ascending; InputError-free: throws std::logic_error for a group
  /// that does not tile the cluster (size · stride must divide the ranks).
  std::vector<int> members(int rank, const hostif::CommGroup& group) const;
  /// What a collective of `bytes` among `members` takes: a ring within one server, else the
  /// hierarchical algorithm over the servers the members span (as many on each).
  CollectiveCost group_cost(hostif::Collective kind, const std::vector<int>& members, double bytes) const;
  void all_reduce(int rank, std::int64_t bytes) { collective(rank, hostif::Collective::AllReduce, bytes); }

  /// A collective of `bytes` on a ring of `ranks` devices of one server, in seconds (see above).
  static double ring_s(const HcclConfig& cfg, hostif::Collective kind, int ranks, double bytes, double hbm_gbps);
  /// The same on `servers` servers of `per_server` devices (numbered consecutively, in HCCS
  /// networks of hccl.hccs_group_size), with its phases and link traffic.
  static CollectiveCost cost(const HcclConfig& cfg, hostif::Collective kind, int servers, int per_server, double bytes,
                             double hbm_gbps);
  /// The same on the shape `span`.
  static CollectiveCost cost(const HcclConfig& cfg, hostif::Collective kind, const CollectiveSpan& span, double bytes,
                             double hbm_gbps);
  /// The level-1 algorithm a collective uses between the servers of `span`: hccl.inter_server_algorithm,
  /// or with "auto" the one hccl.auto_rule picks for the kind, the servers and `bytes` ("ring" on
  /// one server, and for the kinds whose level 1 is always the ring: Broadcast, AllToAll, SendRecv).
  static std::string algorithm(const HcclConfig& cfg, hostif::Collective kind, const CollectiveSpan& span, double bytes,
                               double hbm_gbps);
  /// The shape `members` (rank numbers) span on servers of `per_server` devices: as many on each
  /// server and network as on the first.
  static CollectiveSpan span_of(const HcclConfig& cfg, const std::vector<int>& members, int per_server);
  /// Devices of one HCCS network on a server of `per_server` devices.
  static int network_size(const HcclConfig& cfg, int per_server);
  static double ring_all_reduce_s(const HcclConfig& cfg, int ranks, double bytes, double hbm_gbps) {
    return ring_s(cfg, hostif::Collective::AllReduce, ranks, bytes, hbm_gbps);
  }
  static double hierarchical_all_reduce_s(const HcclConfig& cfg, int servers, int per_server, double bytes,
                                          double hbm_gbps) {
    return cost(cfg, hostif::Collective::AllReduce, servers, per_server, bytes, hbm_gbps).seconds;
  }
  /// What a collective of `bytes` takes on this cluster.
  double seconds(hostif::Collective kind, double bytes) const {
    return cost(m_cfg, kind, servers(), m_per_server, bytes, m_hbm_gbps).seconds;
  }
  double all_reduce_s(double bytes) const { return seconds(hostif::Collective::AllReduce, bytes); }

  int ranks() const { return m_ranks; }
  int servers() const { return m_ranks / m_per_server; }
  /// Leaf switches the cluster's servers sit under (network.servers_per_leaf each, in rank order).
  int leaves() const { return leaves_of(m_cfg, servers()); }
  static int leaves_of(const HcclConfig& cfg, int servers) {
    const auto l = static_cast<int>(std::max<std::int64_t>(1, cfg.servers_per_leaf));
    return (servers + l - 1) / l;
  }
  /// The rate of a ring between servers on several leaves, as a fraction of a port's: each leaf's
  /// uplinks carry one hop of every ring side by side, min(1, servers_per_leaf / oversubscription).
  static double spine_rate(const HcclConfig& cfg) {
    return std::min(1.0, static_cast<double>(cfg.servers_per_leaf) / std::max(1.0, cfg.oversubscription));
  }
  int per_server() const { return m_per_server; }
  /// Links of each class: one ring link out of every device (none on one-device HCCS networks),
  /// one RoCE port per device (used only across servers).
  int hccs_links() const { return network_size(m_cfg, m_per_server) > 1 ? m_ranks : 0; }
  int roce_ports() const { return servers() > 1 ? m_ranks : 0; }
  /// HCCS networks per server, and each device's PCIe path between them (none with one network).
  int networks_per_server() const { return m_per_server / network_size(m_cfg, m_per_server); }
  int pcie_paths() const { return networks_per_server() > 1 ? m_ranks : 0; }
  /// The links' utilisation over `seconds` of run time: bytes carried / (links · bandwidth · time).
  double hccs_utilisation(double seconds) const;
  double roce_utilisation(double seconds) const;
  double pcie_utilisation(double seconds) const;
  const HcclConfig& config() const { return m_cfg; }
  double hccs_bytes() const { return m_hccs_bytes.value(); }
  double hccs_busy_s() const { return m_hccs_busy_s.value(); }
  double roce_bytes() const { return m_roce_bytes.value(); }
  double roce_busy_s() const { return m_roce_busy_s.value(); }
  double pcie_bytes() const { return m_pcie_bytes.value(); }
  double pcie_busy_s() const { return m_pcie_busy_s.value(); }
  sim::StatsGroup& stats() { return m_stats; }
  /// Rank `rank`'s HBM: each collective's phases are flows on its members' HBM.
  void set_hbm(int rank, aicore::Hbm* hbm);
  /// Rank `rank` is simulated for `ranks` ranks alike (itself and the same local rank of servers
  /// alike, which are not simulated): its arrival at a whole-cluster collective counts for them
  /// all. Group collectives need every member simulated (logic_error otherwise).
  void set_stands_for(int rank, int ranks);
  /// Records each collective's phases on a track per server ring and one for the RoCE rings,
  /// while `window` (a rank's recorder, which knows the step) is active.
  void set_trace(sim::TraceRecorder* trace, const sim::TraceRecorder* window);
  /// Writes the trace of the collectives still held (call at the end of the run).
  void flush_trace();
  /// A DMA channel of rank `rank` over its own PCIe link, which a collective's phase between the
  /// server's HCCS networks also crosses: they share the link (max-min, as the ports), the rank's
  /// DMA as one more flow on its PCIe port at most at `demand()` — the fraction of the link its
  /// transfers would draw now (0: none in flight; below 1 when a switch uplink holds them back).
  void add_pcie_dma(int rank, std::function<double()> demand);
  /// A DMA channel of rank `rank` changed its demand.
  void pcie_dma_changed(int rank);
  /// The fraction of rank `rank`'s PCIe link the collectives take now (its DMA channels share the
  /// rest), and the event notified when it changes.
  double pcie_taken(int rank) const { return m_pcie_taken[static_cast<std::size_t>(rank)]; }
  const sc_core::sc_event& pcie_changed(int rank) const { return *m_pcie_changed[static_cast<std::size_t>(rank)]; }
  /// Collectives slowed by another on a shared port (or by the data's DMA on a PCIe link), and the
  /// time they lost to it, summed.
  double shared_count() const { return m_shared.value(); }
  double shared_lost_s() const { return m_shared_lost_s.value(); }

 private:
  struct Instance {
    int arrived = 0, left = 0;
    hostif::Collective kind = hostif::Collective::AllReduce;
    std::int64_t bytes = -1;
    sc_core::sc_event done;
  };
  /// A collective in flight, for the ports' sharing. Its parts are segments: each part's fixed
  /// time (latencies, reductions), then its transfer on the part's port class.
  struct Running {
    std::vector<int> members;
    CollectiveCost cost;
    hostif::Collective kind = hostif::Collective::AllReduce;
    std::int64_t bytes = 0;
    sc_core::sc_event* done = nullptr;
    sc_core::sc_time start, alone_end;
    bool traced = false;                      ///< the trace recorded while it started
    bool watched = false;                     ///< shares a member with another in flight: its segments are tracked
    bool shared = false;                      ///< ran below its full rate at some time: ends when its segments do
    std::size_t seg = 0;                      ///< segment: part seg/2, its fixed time (even) or its transfer (odd)
    double left = 0;                          ///< seconds of the segment still to run (at the full rate)
    double rate = 1;                          ///< of the full rate, in a transfer
    std::vector<sc_core::sc_time> part_ends;  ///< when each part ended (tracked segments)
  };
  /// Starts `cost` among `members` (all ranks if empty); `done` fires at its end.
  void start(const CollectiveCost& cost, std::vector<int> members, hostif::Collective kind, std::int64_t bytes,
             sc_core::sc_event* done);
  void advance();     ///< tracked segments' progress up to now; ends and drops finished ones
  void reallocate();  ///< the transfers' rates among the ports they share
  void schedule();    ///< the next segment end of a tracked collective
  void on_tick();     ///< SC_METHOD: a tracked segment ended
  double segment_s(const Running& r, std::size_t seg) const;
  void seek(Running& r);  ///< a collective's segment and what is left of it, from its start
  void finish(Running& r, const sc_core::sc_time& end);
  std::vector<std::unique_ptr<Running>> m_running;
  std::vector<int> m_in_flight;  ///< per rank: collectives in flight that include it
  std::vector<std::vector<std::function<double()>>> m_dma_demand;  ///< per rank: its DMA channels'
  /// The most any of rank `rank`'s DMA channels draws of its PCIe link now.
  double dma_demand(std::size_t rank) const;
  std::vector<double> m_pcie_taken;  ///< per rank: of its PCIe link, what the collectives take
  std::vector<std::unique_ptr<sc_core::sc_event>> m_pcie_changed;  ///< per rank
  /// True if `r` has a phase over PCIe through a rank whose DMA channels are busy.
  bool meets_dma(const Running& r) const;
  static bool over_pcie(const Running& r) {
    return std::any_of(r.cost.parts.begin(), r.cost.parts.end(), [](const auto& p) { return p.pcie; });
  }
  sc_core::sc_time m_last;       ///< tracked segments advanced up to here
  sc_core::sc_event m_tick;
  void trace_collective(const Running& r);
  /// The collective's phases as flows on the HBM of `members` (all ranks if empty), from now.
  void draw(const CollectiveCost& c, const std::vector<int>& members);
  std::vector<aicore::Hbm*> m_hbm;  ///< per rank

  HcclConfig m_cfg;
  int m_ranks, m_per_server;
  double m_hbm_gbps;
  std::vector<std::int64_t> m_calls;        ///< per rank: collectives asked so far
  std::vector<int> m_stands_for;            ///< per rank: the ranks its arrival counts for
  std::map<std::int64_t, Instance> m_open;  ///< by sequence number, until every rank has left
  /// The whole cluster's collectives by kind and bytes: costed once, as every step asks the same.
  std::map<std::pair<int, std::int64_t>, CollectiveCost> m_cluster_costs;
  /// Sub-group collectives: per (group, its first member) and rank, the calls so far; open ones by
  /// (group key, sequence number).
  std::map<std::pair<std::string, int>, std::int64_t> m_group_calls;
  std::map<std::pair<std::string, std::int64_t>, Instance> m_group_open;
  void account(hostif::Collective kind, std::int64_t bytes, const CollectiveCost& c);
  sim::TraceRecorder* m_trace = nullptr;
  const sim::TraceRecorder* m_window = nullptr;
  std::vector<int> m_server_tracks;
  int m_roce_track = -1;
  sim::StatsGroup m_stats;
  sim::Scalar& m_count;
  sim::Scalar& m_bytes;
  sim::Scalar& m_busy_s;
  sim::Scalar& m_broadcasts;
  sim::Scalar& m_gathers;
  sim::Scalar& m_exchanges;
  sim::Scalar& m_hccs_bytes;
  sim::Scalar& m_hccs_busy_s;
  sim::Scalar& m_roce_bytes;
  sim::Scalar& m_roce_busy_s;
  sim::Scalar& m_pcie_bytes;
  sim::Scalar& m_pcie_busy_s;
  sim::Scalar& m_shared;
  sim::Scalar& m_shared_lost_s;
};

}  // namespace ascendsim::aicpu
