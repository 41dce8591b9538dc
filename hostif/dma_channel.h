// One direction of the PCIe link with its DMA engine. Transfers are cut into chunks; when several
// are in flight the engine serves them round-robin a chunk at a time, so they share the
// bandwidth. A transfer completes when its last chunk has crossed plus the link latency.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>

#include <systemc>

#include <string>
#include <vector>

#include "aicore/hbm.h"
#include "sim/core/stats.h"
#include "sim/core/trace.h"

namespace ascendsim::hostif {

class DmaChannel : public sc_core::sc_module {
 public:
  SC_HAS_PROCESS(DmaChannel);
  /// `fluid`: concurrent transfers share the bandwidth evenly and continuously (events only when a
  /// transfer arrives or completes) instead of a chunk at a time; the same shares in the limit of
  /// small chunks, at a cost independent of the transfers' sizes (a PCIe switch's uplink).
  DmaChannel(sc_core::sc_module_name name, double bandwidth_gbps, double latency_ns, std::int64_t chunk_bytes,
             double setup_ns, bool fluid = false);

  /// Moves `bytes` across the link and returns when they have arrived. Call from an SC_THREAD.
  void transfer(std::uint64_t bytes);
  /// Transfers also cross `uplink` (a PCIe switch's link to the host, shared with other
  /// devices' channels): the bytes stream through both at once, cut through the switch, and
  /// arrive when both have carried them. nullptr: a link of its own.
  void set_uplink(DmaChannel* uplink) {
    m_uplink = uplink;
    if (uplink) uplink->m_behind.push_back(this);
  }
  /// The device's HBM, which the transfers write (H2D) or read (D2H): each transfer is a flow of
  /// its bytes over the time it would take alone (nullptr: none, as for a switch's uplink).
  void set_hbm(aicore::Hbm* hbm) { m_hbm = hbm; }
  /// Another user of this link direction: a collective's phase through the device's own PCIe
  /// link (aicpu::Hccl). `taken()` is the fraction of the bandwidth it takes now (this channel's
  /// transfers share the rest), `changed` is notified when that fraction changes, and `demand_changed`
  /// is called when link_demand() changes. Chunked channels only (a device's link).
  void set_sharer(std::function<double()> taken, const sc_core::sc_event* changed,
                  std::function<void()> demand_changed);
  /// The fraction of this link direction its transfers draw now: 0 with none in flight; while a
  /// transfer's bytes also wait on a switch uplink that other devices share, that uplink's share
  /// over this link's bandwidth (the transfer goes at the slower pace); else 1.
  double link_demand() const;

  double bytes() const { return m_bytes.value(); }
  double busy_s() const { return m_busy_s.value(); }

  sim::StatsGroup& stats() { return m_stats; }
  /// Records transfers on a track named after this channel, and its bandwidth as a counter.
  void set_trace(sim::TraceRecorder* trace);

 private:
  struct Request {
    std::uint64_t remaining;
    sc_core::sc_event done;
    bool finished = false;  ///< its last chunk has crossed (done fires after the latency)
    std::uint64_t chunk_left = 0;  ///< of a chunk cut short by a change of the link's share: the rest
    DmaChannel* owner = nullptr;   ///< the device channel whose transfer it is
  };
  /// An uplink's transfers changed: the device channels behind it that have a sharer are told.
  void tell_behind();
  void serve();
  void serve_fluid();
  void enqueue(Request* r);

  double m_bandwidth_gbps;
  sc_core::sc_time m_latency;
  std::uint64_t m_chunk_bytes;
  sc_core::sc_time m_setup;
  std::deque<Request*> m_active;
  sc_core::sc_event m_kick;
  DmaChannel* m_uplink = nullptr;
  std::function<double()> m_taken;
  const sc_core::sc_event* m_share_changed = nullptr;
  std::function<void()> m_demand_changed;
  std::int64_t m_dev_pending = 0;     ///< transfers whose bytes this channel has not all carried
  std::int64_t m_up_pending = 0;      ///< transfers whose bytes its uplink has not all carried
  std::vector<DmaChannel*> m_behind;  ///< on an uplink: the device channels that stream through it
  aicore::Hbm* m_hbm = nullptr;
  sim::TraceRecorder* m_trace = nullptr;
  int m_track = 0;
  std::string m_counter;

  sim::StatsGroup m_stats;
  sim::Scalar& m_transfers;
  sim::Scalar& m_bytes;
  sim::Scalar& m_chunks;
  sim::Scalar& m_busy_s;
};

}  // namespace ascendsim::hostif
