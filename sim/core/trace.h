// Timeline in Chrome trace format (opens in Perfetto and chrome://tracing), streamed to its output
// as it is recorded: memory stays bounded however long the traced window. Components call the
// recorder only through a pointer that is null when tracing is off, and only while it is active
// (inside the --trace-steps window). One process per run; one track per host thread, pipeline
// thread, DMA direction, device stream and the AI cores a stream's ops occupy (one span per op,
// its block count as an argument), and the AICPU; counters for queue depth and bandwidth.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include <systemc>

namespace ascendsim::sim {

/// The trace file that the runs of a simulation write into, event by event.
class TraceSink {
 public:
  /// Writes the file's opening to `os`; close() writes its end.
  explicit TraceSink(std::ostream& os);
  TraceSink(const TraceSink&) = delete;
  TraceSink& operator=(const TraceSink&) = delete;
  /// Appends one event (a JSON object).
  void event(const std::string& json);
  void close();

 private:
  std::ostream& m_os;
  bool m_first = true, m_closed = false;
};

class TraceRecorder {
 public:
  /// Tracks and counters of one run appear under process `pid`, named `process`.
  TraceRecorder(TraceSink& sink, int pid, std::string process);

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
  void span(int track, const std::string& name, const sc_core::sc_time& start, const sc_core::sc_time& end,
            const std::string& args_json = {});
  /// A counter sample.
  void counter(const std::string& name, const sc_core::sc_time& at, double value);

 private:
  /// Starts an event in the reused buffer: {"ph":..,"name":..,"pid":..
  std::string& begin_event(char phase, const std::string& name);
  TraceSink& m_sink;
  int m_pid;
  std::vector<std::string> m_tracks;
  std::int64_t m_first = 0, m_last = INT64_MAX, m_step = 0;
  std::string m_buf;
};

}  // namespace ascendsim::sim
