#include "hostif/data_queue.h"

#include <stdexcept>

namespace ascendsim::hostif {

using sc_core::sc_time;
using sc_core::sc_time_stamp;

DataQueue::DataQueue(sc_core::sc_module_name name, std::int64_t capacity)
    : sc_module(name),
      m_capacity(capacity),
      m_stats(*this),
      m_pushes(m_stats.scalar("pushes", "count", "batches committed by the host channel")),
      m_pops(m_stats.scalar("pops", "count", "batches popped by GetNext")),
      m_bytes_pushed(m_stats.scalar("bytes_pushed", "B", "bytes committed")),
      m_bytes_popped(m_stats.scalar("bytes_popped", "B", "bytes popped")),
      m_max_depth(m_stats.scalar("max_depth", "batches", "largest number of queued batches")),
      m_full_wait_s(m_stats.scalar("full_wait_s", "s", "time the channel thread waited for a free slot")),
      m_empty_wait_s(m_stats.scalar("empty_wait_s", "s", "time GetNext waited on an empty queue")) {
  if (capacity < 1) throw std::invalid_argument("data queue capacity must be positive");
  m_stats.formula("mean_depth", "batches", "time-weighted mean number of queued batches", [this] {
    const double t = m_last_change.to_seconds();
    return t > 0 ? m_depth_integral / t : 0.0;
  });
}

void DataQueue::track_depth(const sc_time& now) {
  if (now <= m_last_change) return;
  m_depth_integral += static_cast<double>(m_items.size()) * (now - m_last_change).to_seconds();
  m_last_change = now;
}

void DataQueue::finish(const sc_time& end) { track_depth(end); }

void DataQueue::reserve() {
  const sc_time start = sc_time_stamp();
  while (m_reserved + depth() >= m_capacity) wait(m_popped);
  m_full_wait_s += (sc_time_stamp() - start).to_seconds();
  ++m_reserved;
}

void DataQueue::commit(std::uint64_t bytes) {
  if (m_reserved <= 0) throw std::logic_error("DataQueue::commit without reserve");
  track_depth(sc_time_stamp());
  --m_reserved;
  m_items.push_back(bytes);
  ++m_pushes;
  m_bytes_pushed += static_cast<double>(bytes);
  m_max_depth.sample_max(static_cast<double>(m_items.size()));
  if (m_trace && m_trace->active())
    m_trace->counter("data queue depth", sc_time_stamp(), static_cast<double>(m_items.size()));
  m_pushed.notify(sc_core::SC_ZERO_TIME);
}

bool DataQueue::pop(const sc_time& timeout) {
  const sc_time start = sc_time_stamp();
  const sc_time deadline = start + timeout;
  while (m_items.empty()) {
    const sc_time now = sc_time_stamp();
    if (now >= deadline) {
      m_empty_wait_s += (now - start).to_seconds();
      return false;
    }
    wait(deadline - now, m_pushed);
  }
  m_empty_wait_s += (sc_time_stamp() - start).to_seconds();
  track_depth(sc_time_stamp());
  m_bytes_popped += static_cast<double>(m_items.front());
  m_items.pop_front();
  ++m_pops;
  if (m_trace && m_trace->active())
    m_trace->counter("data queue depth", sc_time_stamp(), static_cast<double>(m_items.size()));
  if (++m_popped_count % m_sample_every == 0)
    m_depth_samples.emplace_back(sc_time_stamp().to_seconds(), static_cast<std::int64_t>(m_items.size()));
  m_popped.notify(sc_core::SC_ZERO_TIME);
  return true;
}

}  // namespace ascendsim::hostif
