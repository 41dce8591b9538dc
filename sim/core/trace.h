// Timeline recorder in Chrome trace format (opens in Perfetto and chrome://tracing). Components
// call it only through a pointer that is null when tracing is off, and only while it is active
// (inside the --trace-steps window). One process per run; one track per host thread, pipeline
// thread, DMA direction, scheduler stream, AI core cluster and AICPU; counters for queue depth
// and bandwidth.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include <systemc>

namespace ascendsim::sim {

class TraceRecorder {
 public:
  /// Tracks and counters of one run appear under process `pid`, named `process`.
  explicit TraceRecorder(int pid, std::string process) : m_pid(pid), m_process(std::move(process)) {}

  /// Records only for steps in [first, last) (by the device's step count); default all.
  void set_step_window(std::int64_t first, std::int64_t last) {
    m_first = first;
    m_last = last;
  }
  void on_step(std::int64_t completed_steps) { m_step = completed_steps; }
  bool active() const { return m_step >= m_first && m_step < m_last; }

  /// A named track (thread) of this run; returns its id.
  int track(const std::string& name);
  /// A span on a track.
  void span(int track, std::string name, const sc_core::sc_time& start, const sc_core::sc_time& end,
            std::string args_json = {});
  /// A counter sample.
  void counter(const std::string& name, const sc_core::sc_time& at, double value);

  /// Writes this run's events (comma-separated objects, no surrounding array).
  void write_events(std::ostream& os, bool& first) const;
  /// Writes a complete trace file of several runs.
  static void write_file(std::ostream& os, const std::vector<const TraceRecorder*>& runs);

 private:
  struct Event {
    char phase;  // 'X' span, 'C' counter
    int track;
    std::string name;
    std::int64_t start_ps, dur_ps;
    double value;
    std::string args;
  };
  int m_pid;
  std::string m_process;
  std::vector<std::string> m_tracks;
  std::vector<Event> m_events;
  std::int64_t m_first = 0, m_last = INT64_MAX, m_step = 0;
};

}  // namespace ascendsim::sim
