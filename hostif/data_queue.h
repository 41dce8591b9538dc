// A named, bounded device data queue (the dataset channel of the sink modes). The host's channel
// thread reserves a slot (blocking while the queue is full), DMAs the batch into it and commits
// it; GetNext on the device pops it (blocking while empty, up to a timeout). Reserved slots count
// against the capacity, so depth never exceeds it.
#pragma once

#include <cstdint>
#include <deque>
#include <string>
#include <utility>
#include <vector>

#include <systemc>

#include "hostif/device_if.h"
#include "sim/core/stats.h"
#include "sim/core/trace.h"

namespace ascendsim::hostif {

class DataQueue : public sc_core::sc_module, public BatchSourceIf {
 public:
  DataQueue(sc_core::sc_module_name name, std::int64_t capacity);

  /// Host side: blocks until a slot is free and holds it. Call from an SC_THREAD.
  void reserve();
  /// Host side: makes a batch of `bytes` in a reserved slot visible to GetNext.
  void commit(std::uint64_t bytes);
  /// Device side (GetNext): false if nothing arrived within `timeout`.
  bool pop(const sc_core::sc_time& timeout) override;

  std::int64_t capacity() const { return m_capacity; }
  std::int64_t depth() const { return static_cast<std::int64_t>(m_items.size()); }
  /// Records (time, depth) after every `every`-th pop, for a depth-over-time series.
  void sample_depth_every(std::int64_t every) { m_sample_every = every > 0 ? every : 1; }
  const std::vector<std::pair<double, std::int64_t>>& depth_samples() const { return m_depth_samples; }
  void set_trace(sim::TraceRecorder* trace) { m_trace = trace; }
  /// Closes the depth integral at `end`, the end of the run.
  void finish(const sc_core::sc_time& end);

  sim::StatsGroup& stats() { return m_stats; }

 private:
  void track_depth(const sc_core::sc_time& now);

  std::int64_t m_capacity;
  std::int64_t m_reserved = 0;
  std::deque<std::uint64_t> m_items;
  sc_core::sc_event m_pushed;
  sc_core::sc_event m_popped;
  sc_core::sc_time m_last_change;
  double m_depth_integral = 0;
  std::int64_t m_sample_every = 1;
  std::int64_t m_popped_count = 0;
  std::vector<std::pair<double, std::int64_t>> m_depth_samples;
  sim::TraceRecorder* m_trace = nullptr;

  sim::StatsGroup m_stats;
  sim::Scalar& m_pushes;
  sim::Scalar& m_pops;
  sim::Scalar& m_bytes_pushed;
  sim::Scalar& m_bytes_popped;
  sim::Scalar& m_max_depth;
  sim::Scalar& m_full_wait_s;
  sim::Scalar& m_empty_wait_s;
};

}  // namespace ascendsim::hostif
