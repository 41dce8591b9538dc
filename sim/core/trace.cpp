#include "sim/core/trace.h"

#include <charconv>
#include <cstring>
#include <map>
#include <unordered_map>

namespace ascendsim::sim {

TraceFormat trace_format_for(const std::string& path) {
  auto ends_with = [&](const char* suffix) {
    const std::size_t n = std::strlen(suffix);
    return path.size() >= n && path.compare(path.size() - n, n, suffix) == 0;
  };
  return ends_with(".pftrace") || ends_with(".perfetto-trace") ? TraceFormat::Perfetto : TraceFormat::Json;
}

namespace {

constexpr std::size_t kBlockBytes = 1 << 20;

/// Buffers a file's bytes and writes them in blocks of about 1 MiB.
class BlockWriter {
 public:
  explicit BlockWriter(std::ostream& os) : m_os(os) { m_block.reserve(kBlockBytes + 4096); }
  std::string& block() {
    if (m_block.size() >= kBlockBytes) flush();
    return m_block;
  }
  void flush() {
    m_os.write(m_block.data(), static_cast<std::streamsize>(m_block.size()));
    m_block.clear();
  }
  void finish() {
    flush();
    m_os.flush();
  }

 private:
  std::ostream& m_os;
  std::string m_block;
};

// ---- Chrome trace JSON -------------------------------------------------------------------------

void escape_into(std::string& out, const std::string& s) {
  bool plain = true;
  for (char c : s) plain &= c != '"' && c != '\\' && static_cast<unsigned char>(c) >= 0x20;
  if (plain) {
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

/// As %.9g.
void number_into(std::string& out, double v) {
  char buf[40];
  const auto r = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::general, 9);
  out.append(buf, r.ptr);
}

class JsonSink final : public TraceSink {
 public:
  explicit JsonSink(std::ostream& os) : m_out(os) { m_out.block() = "{\"displayTimeUnit\":\"ns\",\"traceEvents\":[\n"; }

  void process(int pid, const std::string& name) override {
    std::string& e = begin();
    e += R"({"ph":"M","name":"process_name","pid":)";
    int_into(e, pid);
    e += R"(,"tid":0,"args":{"name":")";
    escape_into(e, name);
    e += "\"}}";
  }

  void track(int pid, int tid, const std::string& name) override {
    std::string& e = begin();
    e += R"({"ph":"M","name":"thread_name","pid":)";
    int_into(e, pid);
    e += ",\"tid\":";
    int_into(e, tid);
    e += R"(,"args":{"name":")";
    escape_into(e, name);
    e += "\"}}";
    std::string& f = begin();
    f += R"({"ph":"M","name":"thread_sort_index","pid":)";
    int_into(f, pid);
    f += ",\"tid\":";
    int_into(f, tid);
    f += R"(,"args":{"sort_index":)";
    int_into(f, tid - 1);
    f += "}}";
  }

  int label(const std::string& name, const TraceArgs& args) override {
    Label l;
    escape_into(l.name, name);
    char sep = '{';
    if (!args.empty()) l.args = ",\"args\":";
    for (const auto& a : args) {
      l.args += sep;
      sep = ',';
      l.args += '"';
      escape_into(l.args, a.key);
      l.args += "\":";
      switch (a.kind) {
        case TraceArg::Kind::Int:
          int_into(l.args, a.int_value);
          break;
        case TraceArg::Kind::Double:
          number_into(l.args, a.double_value);
          break;
        case TraceArg::Kind::String:
          l.args += '"';
          escape_into(l.args, a.string_value);
          l.args += '"';
          break;
      }
    }
    if (!args.empty()) l.args += '}';
    m_labels.push_back(std::move(l));
    return static_cast<int>(m_labels.size() - 1);
  }

  void span(int pid, int tid, int label, std::uint64_t start_ps, std::uint64_t end_ps) override {
    const Label& l = m_labels.at(static_cast<std::size_t>(label));
    std::string& e = begin();
    e += R"({"ph":"X","name":")";
    e += l.name;
    span_rest(e, pid, tid, start_ps, end_ps);
    e += l.args;
    e += '}';
  }

  void span(int pid, int tid, const std::string& name, std::uint64_t start_ps, std::uint64_t end_ps) override {
    std::string& e = begin();
    e += R"({"ph":"X","name":")";
    escape_into(e, name);
    span_rest(e, pid, tid, start_ps, end_ps);
    e += '}';
  }

  void counter(int pid, const std::string& name, std::uint64_t at_ps, double value) override {
    std::string& e = begin_event('C', name, pid);
    e += ",\"ts\":";
    micros_into(e, at_ps);
    e += R"(,"args":{"value":)";
    number_into(e, value);
    e += "}}";
  }

  void close() override {
    if (m_closed) return;
    m_closed = true;
    m_out.block() += "\n]}\n";
    m_out.finish();
  }

 private:
  std::string& begin() {
    if (m_closed) {  // processes ended after the run record nothing more
      m_dropped.clear();
      return m_dropped;
    }
    std::string& b = m_out.block();
    if (!m_first) b += ",\n";
    m_first = false;
    return b;
  }
  std::string& begin_event(char phase, const std::string& name, int pid) {
    std::string& e = begin();
    e += R"({"ph":")";
    e += phase;
    e += R"(","name":")";
    escape_into(e, name);
    e += R"(","pid":)";
    int_into(e, pid);
    return e;
  }
  /// After the name: its pid, tid, start and duration.
  static void span_rest(std::string& e, int pid, int tid, std::uint64_t start_ps, std::uint64_t end_ps) {
    e += R"(","pid":)";
    int_into(e, pid);
    e += ",\"tid\":";
    int_into(e, tid);
    e += ",\"ts\":";
    micros_into(e, start_ps);
    e += ",\"dur\":";
    micros_into(e, end_ps - start_ps);
  }
  struct Label {
    std::string name;  ///< escaped
    std::string args;  ///< ,"args":{...} or empty
  };
  BlockWriter m_out;
  std::vector<Label> m_labels;
  std::string m_dropped;
  bool m_first = true, m_closed = false;
};

// ---- Perfetto protobuf -------------------------------------------------------------------------
// The wire format of perfetto/trace/trace.proto: a Trace is a sequence of `packet` (field 1)
// TracePackets. Field numbers used:
//   TracePacket      timestamp 8, trusted_packet_sequence_id 10, track_event 11, interned_data 12,
//                    sequence_flags 13 (1 incremental state cleared, 2 needs incremental state),
//                    track_descriptor 60
//   TrackDescriptor  uuid 1, name 2, process 3, parent_uuid 5, counter 8, child_ordering 11
//                    (3 explicit), sibling_order_rank 12
//   ProcessDescriptor pid 1, process_name 6
//   TrackEvent       debug_annotations 4, type 9 (1 slice begin, 2 slice end, 4 counter),
//                    name_iid 10, track_uuid 11, name 23, double_counter_value 44
//   DebugAnnotation  name_iid 1, int_value 4, double_value 5, string_value 6
//   InternedData     event_names 2, debug_annotation_names 3 (EventName / DebugAnnotationName:
//                    iid 1, name 2)

/// One protobuf message being encoded into a growing buffer; nested messages are encoded
/// separately and appended.
class Proto {
 public:
  Proto() : m_buf(256) {}
  static std::size_t encode(std::uint64_t v, char* out) {
    std::size_t n = 0;
    while (v >= 0x80) {
      out[n++] = static_cast<char>((v & 0x7F) | 0x80);
      v >>= 7;
    }
    out[n++] = static_cast<char>(v);
    return n;
  }
  void uint(int field, std::uint64_t v) {
    char* p = room(20);
    m_len += encode(static_cast<std::uint64_t>(field) << 3, p);
    m_len += encode(v, m_buf.data() + m_len);
  }
  void sint(int field, std::int64_t v) { uint(field, static_cast<std::uint64_t>(v)); }  // int64: two's complement
  void fixed_double(int field, double v) {
    char* p = room(18);
    m_len += encode(static_cast<std::uint64_t>(field) << 3 | 1, p);
    std::memcpy(m_buf.data() + m_len, &v, 8);  // little-endian hosts (x86-64, aarch64)
    m_len += 8;
  }
  void bytes(int field, const char* data, std::size_t size) {
    char* p = room(20 + size);
    m_len += encode(static_cast<std::uint64_t>(field) << 3 | 2, p);
    m_len += encode(size, m_buf.data() + m_len);
    std::memcpy(m_buf.data() + m_len, data, size);
    m_len += size;
  }
  void bytes(int field, const std::string& s) { bytes(field, s.data(), s.size()); }
  void message(int field, const Proto& m) { bytes(field, m.data(), m.size()); }
  /// Appends another encoding's fields.
  void append(const Proto& m) {
    std::memcpy(room(m.size()), m.data(), m.size());
    m_len += m.size();
  }
  void clear() { m_len = 0; }
  const char* data() const { return m_buf.data(); }
  std::size_t size() const { return m_len; }
  bool empty() const { return m_len == 0; }

 private:
  char* room(std::size_t n) {
    if (m_len + n > m_buf.size()) m_buf.resize(std::max(2 * m_buf.size(), m_len + n));
    return m_buf.data() + m_len;
  }
  std::vector<char> m_buf;
  std::size_t m_len = 0;
};

class PerfettoSink final : public TraceSink {
 public:
  explicit PerfettoSink(std::ostream& os) : m_out(os) {}

  void process(int pid, const std::string& name) override {
    Proto proc, desc;
    proc.uint(1, static_cast<std::uint64_t>(pid));
    proc.bytes(6, name);
    desc.uint(1, process_uuid(pid));
    desc.message(3, proc);
    desc.uint(11, 3);  // child tracks in the order of their rank
    descriptor(desc);
  }

  void track(int pid, int tid, const std::string& name) override {
    Track& t = m_tracks[key(pid, tid)];
    t.pid = pid;
    t.name = name;
    t.rank = tid;
  }

  int label(const std::string& name, const TraceArgs& args) override {
    // New names are interned with the next labelled span; the encoded name id and arguments
    // are reused by every span of the label.
    Label l;
    l.body.uint(10, intern(m_event_names, name, 2, m_pending));
    for (const auto& a : args) {
      Proto ann;
      ann.uint(1, intern(m_annotation_names, a.key, 3, m_pending));
      switch (a.kind) {
        case TraceArg::Kind::Int:
          ann.sint(4, a.int_value);
          break;
        case TraceArg::Kind::Double:
          ann.fixed_double(5, a.double_value);
          break;
        case TraceArg::Kind::String:
          ann.bytes(6, a.string_value);
          break;
      }
      l.body.message(4, ann);
    }
    m_labels.push_back(std::move(l));
    return static_cast<int>(m_labels.size() - 1);
  }

  void span(int pid, int tid, int label, std::uint64_t start_ps, std::uint64_t end_ps) override {
    if (m_closed) return;
    const Label& l = m_labels.at(static_cast<std::size_t>(label));
    const std::uint64_t start = start_ps / 1000, end = end_ps / 1000;  // Perfetto counts nanoseconds
    const std::uint64_t uuid = lane_uuid(pid, tid, start, end);
    Proto& ev = m_event;
    ev.clear();
    ev.uint(9, 1);
    ev.uint(11, uuid);
    ev.append(l.body);
    event(start, ev, m_pending.empty() ? nullptr : &m_pending, true);
    m_pending.clear();  // sent
    end_event(uuid, end);
  }

  void span(int pid, int tid, const std::string& name, std::uint64_t start_ps, std::uint64_t end_ps) override {
    if (m_closed) return;
    const std::uint64_t start = start_ps / 1000, end = end_ps / 1000;
    const std::uint64_t uuid = lane_uuid(pid, tid, start, end);
    Proto& ev = m_event;
    ev.clear();
    ev.uint(9, 1);
    ev.uint(11, uuid);
    ev.bytes(23, name);  // TrackEvent.name: not interned
    event(start, ev, nullptr, false);
    end_event(uuid, end);
  }

  void counter(int pid, const std::string& name, std::uint64_t at_ps, double value) override {
    if (m_closed) return;
    if (pid != m_last_counter_pid || name != m_last_counter_name) {  // (a run's counters come in long series)
      auto [it, added] = m_counters.try_emplace(name + '\0' + std::to_string(pid), 0);
      if (added) {
        it->second = m_next_uuid++;
        Proto desc, counter;
        desc.uint(1, it->second);
        desc.bytes(2, name);
        desc.uint(5, process_uuid(pid));
        desc.message(8, counter);
        desc.uint(12, 1000000);  // counters after the tracks
        descriptor(desc);
      }
      m_last_counter_pid = pid;
      m_last_counter_name = name;
      m_last_counter_uuid = it->second;
    }
    Proto& ev = m_event;
    ev.clear();
    ev.uint(9, 4);
    ev.uint(11, m_last_counter_uuid);
    ev.fixed_double(44, value);
    event(at_ps / 1000, ev, nullptr, false);
  }

  void close() override {
    if (m_closed) return;
    m_closed = true;
    m_out.finish();
  }

 private:
  struct Label {
    Proto body;  ///< name_iid and debug annotations of the TrackEvent
  };

  void end_event(std::uint64_t uuid, std::uint64_t end) {
    Proto& ev = m_event;
    ev.clear();
    ev.uint(9, 2);
    ev.uint(11, uuid);
    event(end, ev, nullptr, false);
  }

  struct Track {
    int pid = 0;
    std::string name;
    int rank = 0;
    /// Spans that overlap without nesting go to further lanes ("name #2", ...): a lane holds
    /// disjoint spans only, so its begin and end events pair up whatever the recording order.
    std::vector<std::uint64_t> lane_ends, lane_uuids;
  };

  static std::uint64_t key(int pid, int tid) {
    return static_cast<std::uint64_t>(static_cast<std::uint32_t>(pid)) << 32 | static_cast<std::uint32_t>(tid);
  }
  static std::uint64_t process_uuid(int pid) { return static_cast<std::uint64_t>(pid) << 40; }

  std::uint64_t lane_uuid(int pid, int tid, std::uint64_t start, std::uint64_t end) {
    Track& t = m_tracks[key(pid, tid)];
    if (t.name.empty()) t = Track{pid, "track " + std::to_string(tid), tid, {}, {}};
    std::size_t lane = 0;
    while (lane < t.lane_ends.size() && t.lane_ends[lane] > start) ++lane;
    if (lane == t.lane_ends.size()) {
      const std::uint64_t uuid = m_next_uuid++;
      Proto desc;
      desc.uint(1, uuid);
      desc.bytes(2, lane == 0 ? t.name : t.name + " #" + std::to_string(lane + 1));
      desc.uint(5, process_uuid(pid));
      desc.sint(12, static_cast<std::int64_t>(t.rank) * 64 + static_cast<std::int64_t>(lane));
      descriptor(desc);
      t.lane_ends.push_back(0);
      t.lane_uuids.push_back(uuid);
    }
    t.lane_ends[lane] = std::max(t.lane_ends[lane], end);
    return t.lane_uuids[lane];
  }

  /// The id of `s` in `table`; a new one is added to `interned` (InternedData field `field`).
  std::uint64_t intern(std::unordered_map<std::string, std::uint64_t>& table, const std::string& s, int field,
                       Proto& interned) {
    auto [it, added] = table.try_emplace(s, table.size() + 1);
    if (added) {
      Proto entry;
      entry.uint(1, it->second);
      entry.bytes(2, s);
      interned.message(field, entry);
    }
    return it->second;
  }

  void descriptor(const Proto& desc) {
    Proto p;  // rare: one per track
    sequence(p, false);
    p.message(60, desc);
    packet(p);
  }

  /// `interning`: the event refers to interned names.
  void event(std::uint64_t ts_ns, const Proto& ev, const Proto* interned, bool interning) {
    Proto& p = m_packet;
    p.clear();
    p.uint(8, ts_ns);
    sequence(p, interning);
    p.message(11, ev);
    if (interned) p.message(12, *interned);
    packet(p);
  }

  /// One sequence: its first packet clears the interning state; packets that use it say so.
  void sequence(Proto& p, bool interning) {
    p.uint(10, 1);
    if (!m_started)
      p.uint(13, 1);
    else if (interning)
      p.uint(13, 2);
    m_started = true;
  }

  void packet(const Proto& p) {
    char head[11] = {'\x0a'};  // field 1, length-delimited
    const std::size_t n = 1 + Proto::encode(p.size(), head + 1);
    std::string& b = m_out.block();
    b.append(head, n);
    b.append(p.data(), p.size());
  }

  BlockWriter m_out;
  Proto m_packet, m_event;  ///< reused encodings
  Proto m_pending;          ///< InternedData entries not sent yet
  std::vector<Label> m_labels;
  std::map<std::uint64_t, Track> m_tracks;
  std::unordered_map<std::string, std::uint64_t> m_event_names, m_annotation_names, m_counters;
  int m_last_counter_pid = -1;  ///< the counter of the last sample: its name, pid and track
  std::string m_last_counter_name;
  std::uint64_t m_last_counter_uuid = 0;
  std::uint64_t m_next_uuid = 1;
  bool m_started = false, m_closed = false;
};

}  // namespace

std::unique_ptr<TraceSink> make_trace_sink(TraceFormat format, std::ostream& os) {
  if (format == TraceFormat::Perfetto) return std::make_unique<PerfettoSink>(os);
  return std::make_unique<JsonSink>(os);
}

TraceRecorder::TraceRecorder(TraceSink& sink, int pid, const std::string& process) : m_sink(sink), m_pid(pid) {
  m_sink.process(pid, process);
}

int TraceRecorder::track(const std::string& name) {
  for (std::size_t i = 0; i < m_tracks.size(); ++i)
    if (m_tracks[i] == name) return static_cast<int>(i);
  m_tracks.push_back(name);
  m_sink.track(m_pid, static_cast<int>(m_tracks.size()), name);
  return static_cast<int>(m_tracks.size() - 1);
}

}  // namespace ascendsim::sim
