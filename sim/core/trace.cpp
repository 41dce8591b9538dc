#include "sim/core/trace.h"

#include <algorithm>
#include <charconv>
#include <cstdio>

namespace ascendsim::sim {

namespace {

void escape_into(std::string& out, const std::string& s) {
  if (s.find_first_of("\"\\") == std::string::npos &&
      std::all_of(s.begin(), s.end(), [](char c) { return static_cast<unsigned char>(c) >= 0x20; })) {
    out += s;
    return;
  }
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (static_cast<unsigned char>(c) >= 0x20) out += c;
  }
}

/// Picoseconds as microseconds with six decimals.
void micros_into(std::string& out, std::uint64_t ps) {
  char buf[32];
  auto r = std::to_chars(buf, buf + sizeof buf, ps / 1000000);
  out.append(buf, r.ptr);
  out += '.';
  const auto frac = static_cast<unsigned>(ps % 1000000);
  char f[7] = {'0', '0', '0', '0', '0', '0', '\0'};
  auto fr = std::to_chars(buf, buf + sizeof buf, frac);
  const auto n = static_cast<std::size_t>(fr.ptr - buf);
  for (std::size_t i = 0; i < n; ++i) f[6 - n + i] = buf[i];
  out.append(f, 6);
}

void int_into(std::string& out, long long v) {
  char buf[24];
  auto r = std::to_chars(buf, buf + sizeof buf, v);
  out.append(buf, r.ptr);
}

}  // namespace

TraceSink::TraceSink(std::ostream& os) : m_os(os) { m_os << "{\"displayTimeUnit\":\"ns\",\"traceEvents\":[\n"; }

void TraceSink::event(const std::string& json) {
  if (m_closed) return;  // processes ended after the run record nothing more
  if (!m_first) m_os.write(",\n", 2);
  m_first = false;
  m_os.write(json.data(), static_cast<std::streamsize>(json.size()));
}

void TraceSink::close() {
  if (m_closed) return;
  m_closed = true;
  m_os << "\n]}\n";
  m_os.flush();
}

TraceRecorder::TraceRecorder(TraceSink& sink, int pid, std::string process) : m_sink(sink), m_pid(pid) {
  std::string e = R"({"ph":"M","name":"process_name","pid":)";
  int_into(e, pid);
  e += R"(,"tid":0,"args":{"name":")";
  escape_into(e, process);
  e += "\"}}";
  m_sink.event(e);
}

int TraceRecorder::track(const std::string& name) {
  for (std::size_t i = 0; i < m_tracks.size(); ++i)
    if (m_tracks[i] == name) return static_cast<int>(i);
  m_tracks.push_back(name);
  const auto t = static_cast<long long>(m_tracks.size());
  std::string e = R"({"ph":"M","name":"thread_name","pid":)";
  int_into(e, m_pid);
  e += ",\"tid\":";
  int_into(e, t);
  e += R"(,"args":{"name":")";
  escape_into(e, name);
  e += "\"}}";
  m_sink.event(e);
  e = R"({"ph":"M","name":"thread_sort_index","pid":)";
  int_into(e, m_pid);
  e += ",\"tid\":";
  int_into(e, t);
  e += R"(,"args":{"sort_index":)";
  int_into(e, t - 1);
  e += "}}";
  m_sink.event(e);
  return static_cast<int>(t - 1);
}

std::string& TraceRecorder::begin_event(char phase, const std::string& name) {
  std::string& e = m_buf;
  e.assign(R"({"ph":")");
  e += phase;
  e += R"(","name":")";
  escape_into(e, name);
  e += R"(","pid":)";
  int_into(e, m_pid);
  return e;
}

void TraceRecorder::span(int track, const std::string& name, const sc_core::sc_time& start, const sc_core::sc_time& end,
                         const std::string& args_json) {
  std::string& e = begin_event('X', name);
  e += ",\"tid\":";
  int_into(e, track + 1);
  e += ",\"ts\":";
  micros_into(e, start.value());
  e += ",\"dur\":";
  micros_into(e, end.value() - start.value());
  if (!args_json.empty()) {
    e += ",\"args\":";
    e += args_json;
  }
  e += '}';
  m_sink.event(e);
}

void TraceRecorder::counter(const std::string& name, const sc_core::sc_time& at, double value) {
  std::string& e = begin_event('C', name);
  e += ",\"ts\":";
  micros_into(e, at.value());
  char v[40];
  const auto r = std::to_chars(v, v + sizeof v, value, std::chars_format::general, 9);  // as %.9g
  e += R"(,"args":{"value":)";
  e.append(v, r.ptr);
  e += "}}";
  m_sink.event(e);
}

}  // namespace ascendsim::sim
