// Timelines, streamed to their output as they are recorded: memory stays bounded however long the
// traced window. Two encodings of the same events:
//   - Chrome trace JSON (opens in Perfetto and chrome://tracing), human-readable;
//   - Perfetto's protobuf trace format (TracePacket / TrackEvent with interned names), about a
//     third of the bytes and much faster to write and to open.
// Components call the recorder only through a pointer that is null when tracing is off, and only
// while it is active (inside the --trace-steps window). One process per run; one track per host
// thread, pipeline thread, DMA direction, device stream and the AI cores a stream's ops occupy
// (one span per op, its block count as an argument), and the AICPU; counters for queue depth and
// bandwidth.
#pragma once

#include <cstdint>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include <systemc>

namespace ascendsim::sim {

enum class TraceFormat { Json, Perfetto };
/// The format a trace file's name asks for: ".pftrace" or ".perfetto-trace" is Perfetto's
/// protobuf format, anything else Chrome JSON.
TraceFormat trace_format_for(const std::string& path);

/// An argument of a span: an integer, a number or a string.
struct TraceArg {
  std::string key;
  enum class Kind { Int, Double, String } kind = Kind::Int;
  std::int64_t int_value = 0;
  double double_value = 0;
  std::string string_value;
  static TraceArg integer(std::string k, std::int64_t v) { return {std::move(k), Kind::Int, v, 0, {}}; }
  static TraceArg number(std::string k, double v) { return {std::move(k), Kind::Double, 0, v, {}}; }
  static TraceArg text(std::string k, std::string v) { return {std::move(k), Kind::String, 0, 0, std::move(v)}; }
};
using TraceArgs = std::vector<TraceArg>;

/// The trace file that the runs of a simulation write into, event by event. Times in picoseconds.
class TraceSink {
 public:
  virtual ~TraceSink() = default;
  /// Names process `pid` (one per run).
  virtual void process(int pid, const std::string& name) = 0;
  /// Names track `tid` (from 1) of process `pid`; tracks sort by tid.
  virtual void track(int pid, int tid, const std::string& name) = 0;
  /// A span name with its arguments, encoded once for the spans that repeat it (an op's every
  /// step); returns its id.
  virtual int label(const std::string& name, const TraceArgs& args) = 0;
  virtual void span(int pid, int tid, int label, std::uint64_t start_ps, std::uint64_t end_ps) = 0;
  /// A span whose name is used once or rarely (not kept).
  virtual void span(int pid, int tid, const std::string& name, std::uint64_t start_ps, std::uint64_t end_ps) = 0;
  virtual void counter(int pid, const std::string& name, std::uint64_t at_ps, double value) = 0;
  /// Writes what is buffered and the file's end; later events are dropped.
  virtual void close() = 0;
};

/// A sink writing `format` to `os`, which must outlive it.
std::unique_ptr<TraceSink> make_trace_sink(TraceFormat format, std::ostream& os);

class TraceRecorder {
 public:
  /// Tracks and counters of one run appear under process `pid`, named `process`.
  TraceRecorder(TraceSink& sink, int pid, const std::string& process);

  /// Records only for steps in [first, last) (by the device's step count); default all.
  void set_step_window(std::int64_t first, std::int64_t last) {
    m_first = first;
    m_last = last;
  }
  void on_step(std::int64_t completed_steps) { m_step = completed_steps; }
  bool active() const { return m_step >= m_first && m_step < m_last; }

  /// A named track (thread) of this run; returns its id.
  int track(const std::string& name);
  /// A label for spans that repeat (see TraceSink::label); valid for this recorder's sink.
  int label(const std::string& name, const TraceArgs& args = {}) { return m_sink.label(name, args); }
  /// A span on a track, named by a label.
  void span(int track, int label, const sc_core::sc_time& start, const sc_core::sc_time& end) {
    m_sink.span(m_pid, track + 1, label, start.value(), end.value());
  }
  /// A span on a track.
  void span(int track, const std::string& name, const sc_core::sc_time& start, const sc_core::sc_time& end) {
    m_sink.span(m_pid, track + 1, name, start.value(), end.value());
  }
  /// A counter sample.
  void counter(const std::string& name, const sc_core::sc_time& at, double value) {
    m_sink.counter(m_pid, name, at.value(), value);
  }

 private:
  TraceSink& m_sink;
  int m_pid;
  std::vector<std::string> m_tracks;
  std::int64_t m_first = 0, m_last = INT64_MAX, m_step = 0;
};

}  // namespace ascendsim::sim
