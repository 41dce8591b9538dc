// SystemC tests of the timeline and the step trace.
#include <cmath>
#include <cstdlib>
#include <map>
#include <set>
#include <sstream>
#include <stdexcept>
#include <tuple>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "aicore/aicore_config.h"
#include "runtime/graph_compiler.h"
#include "sim/config.h"
#include "sim/kernel.h"
#include "sim/report/report.h"
#include "sim/simulation.h"
#include "tests/test_support.h"
#include "workloads/workload.h"

namespace ascendsim {
namespace {

using runtime::RunResult;
using runtime::Strategy;

class TraceTest : public ::testing::Test {
 protected:
  /// Runs the four strategies (or loop sink at several sink sizes) and returns results and trace.
  std::vector<RunResult> run(const std::vector<runtime::Session>& sessions, bool trace, std::int64_t first,
                             std::int64_t last, nlohmann::json* trace_json, std::string* perfetto = nullptr,
                             std::string* json_text = nullptr) {
    sim::KernelScope kernel;  // a fresh SystemC context: a test may run twice
    sim::Simulation simulation;
    const auto w = workloads::make_workload("lenet5", 32);
    const auto cfg = sim::load_config(test::config_request());
    for (const auto& s : sessions) simulation.add(cfg, w, s);
    std::ostringstream os;
    if (trace) simulation.enable_trace(os, perfetto ? sim::TraceFormat::Perfetto : sim::TraceFormat::Json, first, last);
    simulation.keep_each_step(true);
    simulation.run();
    std::vector<RunResult> out;
    for (std::size_t i = 0; i < sessions.size(); ++i) out.push_back(simulation.result(i));
    if (trace_json) *trace_json = nlohmann::json::parse(os.str());
    if (perfetto) *perfetto = os.str();
    if (json_text) *json_text = os.str();
    return out;
  }

  static std::vector<runtime::Session> four(std::int64_t steps) {
    std::vector<runtime::Session> out;
    for (auto s : runtime::all_strategies()) {
      runtime::Session session;
      session.strategy = s;
      session.steps_per_epoch = steps;
      out.push_back(session);
    }
    return out;
  }
};

TEST_F(TraceTest, TraceParsesAndItsEventsMatchTheInteractionCounts) {
  nlohmann::json trace;
  const auto r = run(four(30), true, 0, INT64_MAX, &trace);
  int blocks_per_step = 0, ops_per_step = 0;
  {
    aicore::CachedCostModel model(aicore::make_pipe_cost_model({}, {}));
    for (const auto& t : runtime::compile(workloads::make_workload("lenet5", 32), model, 16).step_tasks) {
      blocks_per_step += static_cast<int>(t.cost.blocks);
      ++ops_per_step;
    }
  }
  // Track names per (pid, tid) from the metadata, then spans per track and per name.
  std::map<std::pair<int, int>, std::string> tracks;
  std::map<int, std::map<std::string, int>> spans_on, names, aicpu;
  std::map<int, int> core_blocks;
  int counters = 0;
  for (const auto& e : trace["traceEvents"]) {
    if (e["ph"] == "M" && e["name"] == "thread_name")
      tracks[{e["pid"].get<int>(), e["tid"].get<int>()}] = e["args"]["name"].get<std::string>();
  }
  for (const auto& e : trace["traceEvents"]) {
    if (e["ph"] == "C") ++counters;
    if (e["ph"] != "X") continue;
    const int pid = e["pid"].get<int>();
    ++spans_on[pid][tracks.at({pid, e["tid"].get<int>()})];
    const std::string name = e["name"].get<std::string>();
    ++names[pid][name.rfind("launch op ", 0) == 0 ? "launch op" : name];
    if (tracks.at({pid, e["tid"].get<int>()}) == "AICPU") ++aicpu[pid][name];
    if (tracks.at({pid, e["tid"].get<int>()}) == "AI cores") {
      core_blocks[pid] += e["args"]["blocks"].get<int>();
      // An op's mean HBM bandwidth never exceeds the chip's sustained one (rounded to 0.1).
      EXPECT_GE(e["args"]["hbm_gbps"].get<double>(), 0);
      EXPECT_LE(e["args"]["hbm_gbps"].get<double>(), aicore::MemoryConfig{}.hbm_gbps() + 0.05);
    }
    EXPECT_GE(e["dur"].get<double>(), 0);
  }
  EXPECT_GT(counters, 0);
  for (std::size_t i = 0; i < r.size(); ++i) {
    const int pid = static_cast<int>(i + 1);
    const auto& io = r[i].interactions;
    SCOPED_TRACE(runtime::strategy_name(r[i].session.strategy));
    EXPECT_EQ(names[pid]["launch op"], io.op_launches);
    EXPECT_EQ(names[pid]["launch graph"], io.graph_launches);
    EXPECT_EQ(names[pid]["sync"], io.host_syncs);
    EXPECT_EQ(spans_on[pid]["PCIe DMA h2d"], io.h2d_copies);
    EXPECT_EQ(spans_on[pid]["PCIe DMA d2h"], io.d2h_copies);
    // Every op appears once on the AI cores, with the cores it occupies; the stream's own track
    // holds the other tasks (GetNext, loop control, the end of a graph).
    EXPECT_EQ(spans_on[pid]["AI cores"], ops_per_step * r[i].steps_completed);
    EXPECT_EQ(core_blocks[pid], blocks_per_step * r[i].steps_completed);
    EXPECT_EQ(spans_on[pid]["device stream (task scheduler)"] - names[pid]["GetNext: wait for data"],
              (runtime::uses_queue(r[i].session.strategy) ? 1 : 0) * r[i].steps_completed +
                  static_cast<int>(3 * r[i].device_loop_iterations) - (r[i].device_loop_iterations > 0 ? 1 : 0) +
                  static_cast<int>(r[i].interactions.graph_launches));
    EXPECT_EQ(aicpu[pid]["GetNext"], runtime::uses_queue(r[i].session.strategy) ? r[i].steps_completed : 0);
    if (r[i].session.strategy == Strategy::LoopSink) {
      EXPECT_EQ(aicpu[pid]["StreamSwitch"], r[i].steps_completed);
    }
    // Every stage of the pipeline's execution tree has its tracks: the reader's, each map call's
    // workers', the batch op's.
    int map_spans = 0;
    for (const auto& [track, n] : spans_on[pid])
      if (track.rfind("pipeline Map(", 0) == 0) map_spans += n;
    EXPECT_GT(map_spans, 0);
    EXPECT_GT(spans_on[pid]["pipeline Batch"], 0);
    EXPECT_GT(spans_on[pid]["pipeline MnistDataset"], 0);
  }
}

TEST_F(TraceTest, StepWindowLimitsTheTrace) {
  nlohmann::json window;
  run(four(40), true, 10, 20, &window);
  std::map<std::pair<int, int>, std::string> tracks;
  for (const auto& e : window["traceEvents"])
    if (e["ph"] == "M" && e["name"] == "thread_name")
      tracks[{e["pid"].get<int>(), e["tid"].get<int>()}] = e["args"]["name"].get<std::string>();
  std::size_t ai_core_spans = 0, all = 0;
  for (const auto& e : window["traceEvents"]) {
    if (e["ph"] != "X") continue;
    ++all;
    ai_core_spans += e["name"].get<std::string>() == "conv2/Conv2D" &&
                     tracks.at({e["pid"].get<int>(), e["tid"].get<int>()}) == "AI cores";
  }
  // conv2 (not UB-fused: its K is split) runs once per step: 10 steps in the window, per strategy
  // (the first task of a step may start just before the window opens).
  EXPECT_GE(ai_core_spans, 4u * 9);
  EXPECT_LE(ai_core_spans, 4u * 11);
  EXPECT_GT(all, 0u);
}

/// A protobuf message's fields: (field number, varint value or the bytes of a length-delimited or
/// fixed64 field). Throws on a malformed encoding.
struct Field {
  int number;
  std::uint64_t value = 0;
  std::string bytes;
};
std::vector<Field> decode(const std::string& m) {
  std::vector<Field> out;
  std::size_t i = 0;
  auto varint = [&] {
    std::uint64_t v = 0;
    for (int shift = 0;; shift += 7) {
      if (i >= m.size() || shift > 63) throw std::runtime_error("truncated varint");
      const auto b = static_cast<unsigned char>(m[i++]);
      v |= static_cast<std::uint64_t>(b & 0x7F) << shift;
      if (!(b & 0x80)) return v;
    }
  };
  while (i < m.size()) {
    const std::uint64_t tag = varint();
    Field f{static_cast<int>(tag >> 3), 0, {}};
    switch (tag & 7) {
      case 0:
        f.value = varint();
        break;
      case 1:
        if (i + 8 > m.size()) throw std::runtime_error("truncated fixed64");
        f.bytes = m.substr(i, 8);
        i += 8;
        break;
      case 2: {
        const std::uint64_t n = varint();
        if (i + n > m.size()) throw std::runtime_error("truncated field");
        f.bytes = m.substr(i, n);
        i += n;
        break;
      }
      default:
        throw std::runtime_error("unexpected wire type");
    }
    out.push_back(std::move(f));
  }
  return out;
}

TEST_F(TraceTest, PerfettoTraceHoldsTheSameSpansAsTheJsonTrace) {
  // Same runs, both encodings: every span of the JSON trace appears in the Perfetto trace on a
  // track of the same name (or one of its overflow lanes), with the same start and end (to the
  // nanosecond), and each track's begin and end events pair up.
  nlohmann::json json;
  std::string proto, json_text;
  run(four(12), true, 0, INT64_MAX, &json, nullptr, &json_text);
  run(four(12), true, 0, INT64_MAX, nullptr, &proto, nullptr);

  std::map<std::pair<int, int>, std::string> tracks;
  for (const auto& e : json["traceEvents"])
    if (e["ph"] == "M" && e["name"] == "thread_name")
      tracks[{e["pid"].get<int>(), e["tid"].get<int>()}] = e["args"]["name"].get<std::string>();
  // (track name, span name, start ns, end ns)
  using Span = std::tuple<std::string, std::string, std::uint64_t, std::uint64_t>;
  std::multiset<Span> from_json, from_proto;
  std::size_t json_counters = 0;
  for (const auto& e : json["traceEvents"]) {
    if (e["ph"] == "C") ++json_counters;
    if (e["ph"] != "X") continue;
    const auto ps = [](double us) { return static_cast<std::uint64_t>(std::llround(us * 1e6)); };
    const std::uint64_t start = ps(e["ts"].get<double>()), end = start + ps(e["dur"].get<double>());
    from_json.insert({std::to_string(e["pid"].get<int>()) + "/" + tracks.at({e["pid"].get<int>(), e["tid"].get<int>()}),
                      e["name"].get<std::string>(), start / 1000, end / 1000});
  }

  std::map<std::uint64_t, std::string> track_name;  // uuid -> "pid/name"
  std::map<std::uint64_t, int> process_of;          // process uuid -> pid
  std::map<std::uint64_t, std::uint64_t> parent;
  std::map<std::uint64_t, std::string> names, annotation_names;
  std::map<std::uint64_t, std::vector<std::pair<std::uint64_t, std::string>>> open;  // uuid -> (start, name)
  std::size_t packets = 0, counters = 0, first_flags = 0;
  std::uint64_t blocks = 0;
  for (const auto& packet : decode(proto)) {
    ASSERT_EQ(packet.number, 1);  // Trace.packet
    std::uint64_t ts = 0, flags = 0;
    const Field* event = nullptr;
    const auto fields = decode(packet.bytes);
    for (const auto& f : fields) {
      if (f.number == 8) ts = f.value;
      if (f.number == 10) {
        EXPECT_EQ(f.value, 1u);  // one sequence
      }
      if (f.number == 13) flags = f.value;
      if (f.number == 11) event = &f;
      if (f.number == 12)
        for (const auto& entry : decode(f.bytes)) {
          std::uint64_t iid = 0;
          std::string name;
          for (const auto& g : decode(entry.bytes)) (g.number == 1 ? (void)(iid = g.value) : (void)(name = g.bytes));
          auto& table = entry.number == 2 ? names : annotation_names;
          EXPECT_EQ(table.count(iid), 0u) << "interned twice: " << name;
          table[iid] = name;
        }
      if (f.number == 60) {
        std::uint64_t uuid = 0, up = 0;
        std::string name;
        int pid = 0;
        for (const auto& g : decode(f.bytes)) {
          if (g.number == 1) uuid = g.value;
          if (g.number == 2) name = g.bytes;
          if (g.number == 5) up = g.value;
          if (g.number == 3)
            for (const auto& h : decode(g.bytes))
              if (h.number == 1) pid = static_cast<int>(h.value);
        }
        if (pid)
          process_of[uuid] = pid;
        else {
          ASSERT_TRUE(process_of.count(up)) << name << ": its process is described first";
          track_name[uuid] = std::to_string(process_of[up]) + "/" + name;
        }
      }
    }
    if (packets++ == 0) first_flags = flags;
    if (!event) continue;
    std::uint64_t type = 0, uuid = 0;
    std::string name;
    for (const auto& g : decode(event->bytes)) {
      if (g.number == 9) type = g.value;
      if (g.number == 11) uuid = g.value;
      if (g.number == 10) {
        name = names.at(g.value);  // an interned name, sent before or with its use
        EXPECT_EQ(flags, 2u) << "a packet using interned names says so";
      }
      if (g.number == 23) name = g.bytes;
      if (g.number == 4) {
        std::uint64_t key = 0, value = 0;
        for (const auto& h : decode(g.bytes)) (h.number == 1 ? (void)(key = h.value) : (void)(value = h.value));
        if (annotation_names.at(key) == "blocks") blocks += value;
      }
    }
    ASSERT_TRUE(track_name.count(uuid) || type == 4) << "event on an undescribed track";
    if (type == 4) ++counters;
    if (type == 1) {
      open[uuid].push_back({ts, name});
    }
    if (type == 2) {
      ASSERT_FALSE(open[uuid].empty()) << "an end without a begin on " << track_name[uuid];
      const auto [start, began] = open[uuid].back();
      open[uuid].pop_back();
      EXPECT_TRUE(open[uuid].empty()) << "spans of one lane never overlap";
      std::string track = track_name[uuid];
      if (const auto lane = track.rfind(" #"); lane != std::string::npos) track.resize(lane);
      from_proto.insert({track, began, start, ts});
    }
  }
  EXPECT_EQ(first_flags, 1u);  // the first packet clears the interning state
  for (const auto& [uuid, stack] : open) EXPECT_TRUE(stack.empty()) << track_name[uuid];
  EXPECT_EQ(counters, json_counters);
  EXPECT_GT(blocks, 0u);
  EXPECT_EQ(from_proto.size(), from_json.size());
  EXPECT_TRUE(from_proto == from_json);
  // Less than half the bytes of the JSON file (LeNet-5's op names are short; ResNet-50's take a
  // third).
  EXPECT_LT(proto.size() * 2, json_text.size());
}

TEST_F(TraceTest, StepTraceAddsUpToTheStepTimes) {
  const auto r = run(four(50), false, 0, 0, nullptr);
  for (const auto& x : r) {
    SCOPED_TRACE(runtime::strategy_name(x.session.strategy));
    const auto& t = x.steps.trace;
    ASSERT_EQ(t.interval_s.size(), x.steps.step_s.size());
    for (std::size_t i = 0; i < x.steps.step_s.size(); ++i) {
      EXPECT_NEAR(t.interval_s[i] + t.fp_bp_s[i] + t.tail_s[i], x.steps.step_s[i], 1e-12);
      EXPECT_GE(t.interval_s[i], 0);
      EXPECT_GT(t.fp_bp_s[i], 0);
    }
    const auto j = report::run_json(x);
    for (const char* k : {"iteration_interval", "fp_bp", "tail"}) EXPECT_TRUE(j["step_trace_ms"].contains(k)) << k;
  }
  // Op-by-op launching shows up as a long iteration interval; loop sink has almost none.
  EXPECT_GT(runtime::summarize_steps(r[0].steps.trace.interval_s).mean_ms,
            10 * runtime::summarize_steps(r[3].steps.trace.interval_s).p50_ms);
}

TEST_F(TraceTest, LoopSinkStepTimeDoesNotRiseWithSinkSize) {
  std::vector<runtime::Session> sessions;
  for (std::int64_t s : {1, 10, 100, 1000, 2000}) {
    runtime::Session session;
    session.strategy = Strategy::LoopSink;
    session.steps_per_epoch = 2000;
    session.sink_size = s;
    session.epochs = 2000 / s;  // the same 2000 steps in sinks of s
    sessions.push_back(session);
  }
  const auto r = run(sessions, false, 0, 0, nullptr);
  for (std::size_t i = 1; i < r.size(); ++i) {
    EXPECT_EQ(r[i].steps_completed, 2000);
    EXPECT_LE(runtime::summarize_steps(r[i].steps.step_s).mean_ms,
              runtime::summarize_steps(r[i - 1].steps.step_s).mean_ms)
        << "sink_size " << r[i].session.sink_size;
  }
}

}  // namespace
}  // namespace ascendsim
