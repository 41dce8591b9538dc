#include "sim/core/trace.h"

#include <cstdio>

namespace ascendsim::sim {

namespace {

std::string escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (static_cast<unsigned char>(c) >= 0x20) out += c;
  }
  return out;
}

std::string micros(std::int64_t ps) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%lld.%06lld", static_cast<long long>(ps / 1000000),
                static_cast<long long>(ps % 1000000));
  return buf;
}

}  // namespace

int TraceRecorder::track(const std::string& name) {
  for (std::size_t i = 0; i < m_tracks.size(); ++i)
    if (m_tracks[i] == name) return static_cast<int>(i);
  m_tracks.push_back(name);
  return static_cast<int>(m_tracks.size() - 1);
}

void TraceRecorder::span(int track, std::string name, const sc_core::sc_time& start, const sc_core::sc_time& end,
                         std::string args_json) {
  const auto s = static_cast<std::int64_t>(start.value());
  const auto e = static_cast<std::int64_t>(end.value());
  m_events.push_back({'X', track, std::move(name), s, e - s, 0, std::move(args_json)});
}

void TraceRecorder::counter(const std::string& name, const sc_core::sc_time& at, double value) {
  m_events.push_back({'C', -1, name, static_cast<std::int64_t>(at.value()), 0, value, {}});
}

void TraceRecorder::write_events(std::ostream& os, bool& first) const {
  auto sep = [&] {
    if (!first) os << ",\n";
    first = false;
  };
  sep();
  os << R"({"ph":"M","name":"process_name","pid":)" << m_pid << R"(,"tid":0,"args":{"name":")" << escape(m_process)
     << "\"}}";
  for (std::size_t t = 0; t < m_tracks.size(); ++t) {
    sep();
    os << R"({"ph":"M","name":"thread_name","pid":)" << m_pid << ",\"tid\":" << t + 1 << R"(,"args":{"name":")"
       << escape(m_tracks[t]) << "\"}}";
    sep();
    os << R"({"ph":"M","name":"thread_sort_index","pid":)" << m_pid << ",\"tid\":" << t + 1
       << R"(,"args":{"sort_index":)" << t << "}}";
  }
  for (const auto& e : m_events) {
    sep();
    if (e.phase == 'X') {
      os << R"({"ph":"X","name":")" << escape(e.name) << R"(","pid":)" << m_pid << ",\"tid\":" << e.track + 1
         << ",\"ts\":" << micros(e.start_ps) << ",\"dur\":" << micros(e.dur_ps);
      if (!e.args.empty()) os << ",\"args\":" << e.args;
      os << "}";
    } else {
      char v[40];
      std::snprintf(v, sizeof v, "%.9g", e.value);
      os << R"({"ph":"C","name":")" << escape(e.name) << R"(","pid":)" << m_pid << ",\"ts\":" << micros(e.start_ps)
         << R"(,"args":{"value":)" << v << "}}";
    }
  }
}

void TraceRecorder::write_file(std::ostream& os, const std::vector<const TraceRecorder*>& runs) {
  os << "{\"displayTimeUnit\":\"ns\",\"traceEvents\":[\n";
  bool first = true;
  for (const auto* r : runs) r->write_events(os, first);
  os << "\n]}\n";
}

}  // namespace ascendsim::sim
