#include "hostif/dma_channel.h"

#include <algorithm>

#include "sim/core/time.h"

namespace ascendsim::hostif {

DmaChannel::DmaChannel(sc_core::sc_module_name name, double bandwidth_gbps, double latency_ns, std::int64_t chunk_bytes,
                       double setup_ns, bool fluid)
    : sc_module(name),
      m_bandwidth_gbps(bandwidth_gbps),
      m_latency(sim::ns(latency_ns)),
      m_chunk_bytes(static_cast<std::uint64_t>(chunk_bytes)),
      m_setup(sim::ns(setup_ns)),
      m_stats(*this),
      m_transfers(m_stats.scalar("transfers", "count", "DMA transfers completed")),
      m_bytes(m_stats.scalar("bytes", "B", "bytes moved")),
      m_chunks(m_stats.scalar("chunks", "count", "chunks moved")),
      m_busy_s(m_stats.scalar("busy_s", "s", "time the link direction carried data")) {
  if (fluid) {
    SC_THREAD(serve_fluid);
  } else {
    SC_THREAD(serve);
  }
}

void DmaChannel::serve_fluid() {
  for (;;) {
    while (m_active.empty()) wait(m_kick);
    // Every transfer in flight moves at bandwidth / n until the smallest completes or another
    // arrives.
    const double rate = m_bandwidth_gbps * 1e9 / static_cast<double>(m_active.size());  // B/s each
    std::uint64_t least = m_active.front()->remaining;
    for (const Request* r : m_active) least = std::min(least, r->remaining);
    const sc_core::sc_time t = sim::seconds(static_cast<double>(least) / rate);
    const sc_core::sc_time start = sc_core::sc_time_stamp();
    wait(t, m_kick);
    const sc_core::sc_time elapsed = sc_core::sc_time_stamp() - start;
    const std::uint64_t moved =
        elapsed >= t ? least : std::min<std::uint64_t>(least, static_cast<std::uint64_t>(elapsed.to_seconds() * rate));
    m_busy_s += elapsed.to_seconds();
    bool ended = false;
    for (auto it = m_active.begin(); it != m_active.end();) {
      Request* r = *it;
      r->remaining -= std::min(moved, r->remaining);
      if (r->remaining == 0) {
        r->finished = true;
        r->done.notify(m_latency);
        if (r->owner) --r->owner->m_up_pending;
        it = m_active.erase(it);
        ended = true;
      } else {
        ++it;
      }
    }
    if (ended && !m_behind.empty()) tell_behind();
  }
}

void DmaChannel::set_trace(sim::TraceRecorder* trace) {
  m_trace = trace;
  if (!trace) return;
  m_track = trace->track(std::string("PCIe DMA ") + basename());
  m_counter = std::string("PCIe ") + basename() + " GB/s";
}

void DmaChannel::transfer(std::uint64_t bytes) {
  const sc_core::sc_time start = sc_core::sc_time_stamp();
  wait(m_setup);
  if (bytes == 0) {
    wait(m_latency);
  } else {
    if (m_hbm)
      m_hbm->flow(static_cast<double>(bytes), sc_core::SC_ZERO_TIME,
                  sim::transfer_time(static_cast<double>(bytes), m_bandwidth_gbps), aicore::HbmSource::Dma);
    Request r{bytes, {}};
    Request up{bytes, {}};
    r.owner = up.owner = this;
    ++m_dev_pending;
    if (m_uplink) ++m_up_pending;
    if (m_demand_changed && !m_uplink) m_demand_changed();  // (else its uplink tells it)
    enqueue(&r);
    if (m_uplink) m_uplink->enqueue(&up);
    wait(r.done);
    if (m_uplink && !up.finished) wait(up.done);
  }
  ++m_transfers;
  m_bytes += static_cast<double>(bytes);
  if (m_uplink) {
    ++m_uplink->m_transfers;
    m_uplink->m_bytes += static_cast<double>(bytes);
  }
  if (m_trace && m_trace->active())
    m_trace->span(m_track, std::to_string(bytes) + " B", start, sc_core::sc_time_stamp());
}

void DmaChannel::enqueue(Request* r) {
  m_active.push_back(r);
  m_kick.notify(sc_core::SC_ZERO_TIME);
  if (!m_behind.empty()) tell_behind();  // an uplink: the shares behind it changed
}

void DmaChannel::tell_behind() {
  for (DmaChannel* d : m_behind)
    if (d->m_demand_changed && (d->m_dev_pending > 0 || d->m_up_pending > 0)) d->m_demand_changed();
}

void DmaChannel::set_sharer(std::function<double()> taken, const sc_core::sc_event* changed,
                            std::function<void()> demand_changed) {
  m_taken = std::move(taken);
  m_share_changed = changed;
  m_demand_changed = std::move(demand_changed);
}

double DmaChannel::link_demand() const {
  if (m_dev_pending == 0 && m_up_pending == 0) return 0.0;
  if (!m_uplink || m_up_pending == 0) return 1.0;
  const double share =
      m_uplink->m_bandwidth_gbps / static_cast<double>(std::max<std::size_t>(1, m_uplink->m_active.size()));
  return std::min(1.0, share / m_bandwidth_gbps);
}

void DmaChannel::serve() {
  for (;;) {
    while (m_active.empty()) wait(m_kick);
    Request* r = m_active.front();
    m_active.pop_front();
    // Alone on the link a transfer streams until done or until another one arrives; with others
    // waiting, the link is shared a chunk at a time, round-robin. A collective through the link
    // takes its part of the bandwidth; the chunk is timed again when that part changes.
    const bool alone = m_active.empty();
    const double taken = m_taken ? std::clamp(m_taken(), 0.0, 1.0 - 1e-9) : 0.0;
    const double gbps = m_bandwidth_gbps * (1.0 - taken);
    const std::uint64_t n = alone               ? r->remaining
                            : r->chunk_left > 0 ? std::min(r->remaining, r->chunk_left)
                                                : std::min(r->remaining, m_chunk_bytes);
    const bool resumed = !alone && r->chunk_left > 0;
    r->chunk_left = 0;
    const sc_core::sc_time t = sim::transfer_time(static_cast<double>(n), gbps);
    const sc_core::sc_time start = sc_core::sc_time_stamp();
    if (m_trace && m_trace->active()) m_trace->counter(m_counter, start, gbps);
    if (m_share_changed)
      alone ? wait(t, m_kick | *m_share_changed) : wait(t, *m_share_changed);
    else if (alone)
      wait(t, m_kick);
    else
      wait(t);
    const sc_core::sc_time elapsed = sc_core::sc_time_stamp() - start;
    std::uint64_t moved = n;
    if (elapsed < t)  // interrupted by a new arrival, or by the collective's part changing
      moved = std::min<std::uint64_t>(n, static_cast<std::uint64_t>(elapsed.to_seconds() * gbps * 1e9));
    m_busy_s += elapsed.to_seconds();
    const bool cut = elapsed < t && !alone;  // by a change of the share: its turn goes on
    if (resumed)
      m_chunks += cut ? 0.0 : 1.0;  // one chunk, counted when its rest has crossed
    else if (!cut)
      m_chunks += static_cast<double>((moved + m_chunk_bytes - 1) / m_chunk_bytes);
    r->remaining -= moved;
    if (r->remaining == 0) {
      r->finished = true;
      r->done.notify(m_latency);
      if (cut) m_chunks += 1;  // (its last bytes crossed as the share changed)
      if (r->owner) --r->owner->m_dev_pending;
      if (m_demand_changed) m_demand_changed();
    } else if (cut) {
      r->chunk_left = n - moved;
      m_active.push_front(r);  // the rest of its chunk, at the new rate
    } else {
      m_active.push_back(r);
    }
    if (m_active.empty() && m_trace && m_trace->active()) m_trace->counter(m_counter, sc_core::sc_time_stamp(), 0);
  }
}

}  // namespace ascendsim::hostif
