// The library entry point: runs in one process give what separate processes give, byte for byte,
// also after a run that failed in the middle.
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "sim/api.h"
#include "sim/core/error.h"
#include "sim/report/report.h"
#include "sim/report/studies_report.h"
#include "tests/test_support.h"

namespace ascendsim {
namespace {

namespace fs = std::filesystem;

sim::RunRequest lenet(std::int64_t steps) {
  sim::RunRequest r;
  r.config = test::config_request();
  r.steps_per_epoch = steps;
  r.epochs = 2;
  return r;
}

/// ResNet-50 loop sink with one pipeline worker (about 19 batches/s for a device that takes 33):
/// a 2 s graph load lets the queue fill, the device drains it, and once GetNext has to wait its
/// 10 ms op timeout fails the run in the middle.
sim::RunRequest starving() {
  sim::RunRequest r;
  r.config = test::config_request();
  r.config.sets = {"pipeline.num_parallel_workers=1", "aicpu.op_timeout_s=0.01", "host.graph_load_us=2000000"};
  r.workload = "resnet50";
  r.strategies = {runtime::Strategy::LoopSink};
  r.steps_per_epoch = 100;
  return r;
}

std::string cli_json(const std::string& args) {
  const fs::path out = fs::temp_directory_path() / ("ascendsim_api_" + std::to_string(::getpid()) + ".json");
  const std::string cmd = std::string("ASCENDSIM_CONFIG_DIR=") + ASCENDSIM_SOURCE_DIR "/configs " + ASCENDSIM_BIN +
                          " " + args + " -q --json " + out.string() + " >/dev/null";
  EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
  std::ifstream f(out);
  std::stringstream ss;
  ss << f.rdbuf();
  fs::remove(out);
  return ss.str();
}

TEST(Api, TwoRunsInOneProcessEqualTwoProcesses) {
  const std::string first = sim::run(lenet(40)).report().dump(2) + "\n";
  const std::string other = sim::run(lenet(7)).report().dump(2) + "\n";
  const std::string again = sim::run(lenet(40)).report().dump(2) + "\n";
  EXPECT_EQ(first, again);
  EXPECT_NE(first, other);
  EXPECT_EQ(first, cli_json("compare --epochs 2 --steps-per-epoch 40"));
  EXPECT_EQ(other, cli_json("compare --epochs 2 --steps-per-epoch 7"));
}

TEST(Api, ARunThatFailsMidwayLeavesTheNextRunUntouched) {
  const std::string before = sim::run(lenet(40)).report().dump(2);
  const sim::RunOutcome failed = sim::run(starving());
  ASSERT_TRUE(failed.failed());
  EXPECT_NE(failed.failure_message().find("GetNext timed out"), std::string::npos);
  EXPECT_GT(failed.runs[0].steps_completed, 0);  // it failed in the middle, not at the start
  EXPECT_LT(failed.runs[0].steps_completed, 100);
  const std::string after = sim::run(lenet(40)).report().dump(2);
  EXPECT_EQ(before, after);
  // The failure itself is deterministic too.
  const sim::RunOutcome again = sim::run(starving());
  EXPECT_EQ(again.runs[0].steps_completed, failed.runs[0].steps_completed);
  EXPECT_EQ(again.runs[0].sim_time_s, failed.runs[0].sim_time_s);
  EXPECT_EQ(report::run_json(again.runs[0]).dump(), report::run_json(failed.runs[0]).dump());
}

TEST(Api, SweepsInProcessEqualTheCommandLine) {
  sim::SweepRequest s;
  s.base = lenet(30);
  s.param = "sink_size";
  s.values = {"1", "10", "60"};
  const std::string in_process = sim::sweep(s).report().dump(2) + "\n";
  EXPECT_EQ(in_process, cli_json("sweep --epochs 2 --steps-per-epoch 30 --param sink_size --values 1,10,60"));
  EXPECT_EQ(in_process, sim::sweep(s).report().dump(2) + "\n");
  // A sink_size sweep keeps the training, 2 x 30 steps, and gives loop sink ceil(60 / S) sinks of
  // S; every row's table line shows the mean step with the median beside it.
  const auto out = sim::sweep(s);
  std::istringstream table(report::sweep_table(out));
  std::vector<std::vector<std::string>> rows;
  for (std::string line; std::getline(table, line);) {
    std::istringstream cells(line);
    std::vector<std::string> c;
    for (std::string w; cells >> w;) c.push_back(w);
    if (c.size() == 9 && (c[0] == "1" || c[0] == "10" || c[0] == "60")) rows.push_back(c);
  }
  ASSERT_EQ(rows.size(), out.points.size());
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const auto& run = out.points[i].run;
    const auto st = run.steps.step.stats();
    EXPECT_EQ(rows[i][3], fmt::format("{:.4f}", st.mean_ms));
    EXPECT_EQ(rows[i][4], fmt::format("{:.4f}", st.p50_ms));
    EXPECT_EQ(run.steps_completed, 60);
    if (run.session.strategy == runtime::Strategy::LoopSink) {
      const std::int64_t sink = std::stoll(out.points[i].value);
      EXPECT_EQ(run.interactions.graph_launches, (60 + sink - 1) / sink);
    }
  }
}

TEST(Api, AnInputErrorAfterRunsIsThrownCleanly) {
  // In sanitizer builds the kernel's stack switches used to leave the sanitizer on a process's
  // stack, and the next exception's construction tripped over stale poison.
  sim::RunRequest r = lenet(6);
  ASSERT_FALSE(sim::run(r).failed());
  r.workload = "resnet50";
  r.devices = 8;
  ASSERT_FALSE(sim::run(r).failed());
  r.workload = "no-such-network";
  EXPECT_THROW(sim::run(r), sim::InputError);
}

TEST(Api, RunsOfTasksWithOneWaitGiveWhatOneWaitPerTaskGives) {
  // The device runs each step's AI core tasks with one wait; the reference executes them one by
  // one. Every figure and statistic must agree exactly, and so must the timelines. Untraced, a
  // run counts the tasks that no flow reached in one sum (traced, one by one): the same values.
  // The 8-device run's graph has a communication stream beside the compute stream: runs of
  // tasks there too, with AllReduces ending in the middle of them.
  for (const char* workload : {"lenet5", "resnet50", "resnet50 x 8"}) {
    const bool cluster = std::string(workload) == "resnet50 x 8";
    sim::RunRequest r = lenet(std::string(workload) == "lenet5" ? 6 : 3);
    r.workload = cluster ? "resnet50" : workload;
    r.config.sets = {"pipeline.num_parallel_workers=2"};  // ResNet-50 then waits for data at times
    if (cluster) {
      r.devices = 8;
      r.all_reduce_fusion = {85, 160};
      r.rank_sets[5] = {"pipeline.num_parallel_workers=1"};  // a straggler: the ranks wait for it
      // Every device its own PCIe switch: which of two transfers arriving at one instant a shared
      // uplink serves first follows the kernel's event order, which the number of waits changes.
      r.config.sets.push_back("link.pcie_switch_devices=1");
      // Cores for every pipeline thread of the 8 ranks: which of two threads asking for the last
      // free core at one instant waits follows the kernel's process order too.
      r.config.sets.push_back("host.cpu_cores=64");
    }
    const auto untraced = sim::run(r);
    r.trace = true;
    const auto fast = sim::run(r);
    r.one_wait_per_task = true;
    const auto reference = sim::run(r);
    EXPECT_EQ(fast.report().dump(), reference.report().dump()) << workload;
    EXPECT_EQ(untraced.report().dump(), reference.report().dump()) << workload;
    // Same events; the order in the file follows when each was recorded, and which of two idle
    // pipeline workers takes a slice at the same instant follows the kernel's process order.
    auto events = [](const std::string& trace) {
      auto j = nlohmann::json::parse(trace)["traceEvents"];
      std::vector<std::string> out;
      for (auto& e : j) {
        if (e.contains("name") && e["name"].get<std::string>().rfind("batch ", 0) == 0) e.erase("tid");
        out.push_back(e.dump());
      }
      std::sort(out.begin(), out.end());
      return out;
    };
    EXPECT_EQ(events(fast.trace), events(reference.trace)) << workload;
  }
}

TEST(Api, TheTraceSizeEstimateIsCloseAndTheTraceStreams) {
  for (const auto format : {sim::TraceFormat::Json, sim::TraceFormat::Perfetto})
    for (const char* workload : {"lenet5", "resnet50"}) {
      sim::RunRequest r = lenet(std::string(workload) == "lenet5" ? 30 : 3);
      r.workload = workload;
      r.trace = true;
      r.trace_format = format;
      std::ostringstream streamed;
      r.trace_out = &streamed;
      const auto out = sim::run(r);
      EXPECT_TRUE(out.trace.empty());  // it went to the stream, not into memory
      const auto actual = static_cast<double>(streamed.str().size());
      const auto estimate = static_cast<double>(sim::estimated_trace_bytes(r));
      EXPECT_NEAR(estimate, actual, 0.35 * actual) << workload;
      if (format == sim::TraceFormat::Json) {
        EXPECT_NO_THROW(nlohmann::json::parse(streamed.str()));
      }
      r.trace_first_step = 1;
      r.trace_last_step = 2;  // one step of each run
      EXPECT_NEAR(static_cast<double>(sim::estimated_trace_bytes(r)), estimate / (2.0 * (r.steps_per_epoch.value())),
                  0.2 * estimate / (2.0 * r.steps_per_epoch.value()));
    }
}

TEST(Api, TheEventModelsTraceHasATrackPerPipeOfCoreZero) {
  // With aicore.model=event a trace has AI core 0's pipes, each op's busy intervals inside the
  // op's span on the AI cores, and the op summary on the span; the size estimate counts them.
  sim::RunRequest r = lenet(2);
  r.workload = "resnet50";
  r.epochs = 1;
  r.strategies = {runtime::Strategy::LoopSink};
  r.config.sets.push_back("aicore.model=event");
  r.trace = true;
  const auto out = sim::run(r);
  ASSERT_FALSE(out.failed());
  const auto j = nlohmann::json::parse(out.trace);
  std::map<int, std::string> tracks;
  for (const auto& e : j["traceEvents"])
    if (e["ph"] == "M" && e["name"] == "thread_name") tracks[e["tid"].get<int>()] = e["args"]["name"];
  std::map<std::string, int> tid;
  for (const auto& [id, name] : tracks) tid[name] = id;
  for (const char* pipe : {"scalar", "mte2", "mte1", "cube", "fixpipe", "vector", "mte3"})
    EXPECT_TRUE(tid.count(std::string("AI core 0: ") + pipe)) << pipe;
  // Every interval on the Cube's track lies inside a span of the same op on the AI cores.
  std::map<std::string, std::vector<std::pair<double, double>>> ops;
  int summaries = 0, cube_spans = 0;
  for (const auto& e : j["traceEvents"])
    if (e["ph"] == "X" && e["tid"] == tid["AI cores"]) {
      ops[e["name"]].push_back({e["ts"].get<double>(), e["ts"].get<double>() + e["dur"].get<double>()});
      if (e["args"].contains("aic_mac_ratio")) ++summaries;
    }
  for (const auto& e : j["traceEvents"])
    if (e["ph"] == "X" && e["tid"] == tid["AI core 0: cube"]) {
      ++cube_spans;
      const double a = e["ts"].get<double>(), b = a + e["dur"].get<double>();
      bool inside = false;
      for (const auto& [from, to] : ops[e["name"]]) inside = inside || (a >= from - 1e-3 && b <= to + 1e-3);
      EXPECT_TRUE(inside) << e.dump();
    }
  EXPECT_GT(cube_spans, 100);
  EXPECT_GT(summaries, 100);
  const auto estimate = static_cast<double>(sim::estimated_trace_bytes(r));
  EXPECT_NEAR(estimate, static_cast<double>(out.trace.size()), 0.35 * static_cast<double>(out.trace.size()));
}

TEST(Api, EveryStatisticIsDocumentedAndInTheReport) {
  std::ifstream f(ASCENDSIM_SOURCE_DIR "/docs/reports.md");
  std::stringstream doc;
  doc << f.rdbuf();
  const auto stats = sim::describe_statistics(lenet(5));
  ASSERT_GT(stats.size(), 30u);
  const auto report = sim::run(lenet(5)).report();
  std::string missing, unreported;
  for (const auto& s : stats) {
    EXPECT_FALSE(s.unit.empty()) << s.path;
    EXPECT_FALSE(s.description.empty()) << s.path;
    if (doc.str().find("`" + s.path + "`") == std::string::npos) missing += " " + s.path;
    // The path leads to a number in every run's stats tree.
    for (const auto& run : report["runs"]) {
      const auto* node = &run["stats"];
      std::stringstream parts(s.path);
      for (std::string part; std::getline(parts, part, '.');) {
        if (!node->contains(part)) {
          node = nullptr;
          break;
        }
        node = &(*node)[part];
      }
      if (!node || !node->is_number()) unreported += " " + s.path;
    }
  }
  EXPECT_TRUE(missing.empty()) << "docs/reports.md does not list:" << missing;
  EXPECT_TRUE(unreported.empty()) << "not in the report:" << unreported;
}

TEST(Api, ErrorsNameTheRequestKey) {
  sim::RunRequest r = lenet(10);
  r.batch_size = 0;
  try {
    sim::run(r);
    FAIL() << "batch_size 0 accepted";
  } catch (const sim::InputError& e) {
    EXPECT_EQ(e.key(), "batch_size");
  }
  r = lenet(10);
  r.config.sets = {"pipeline.num_parallel_workers=0"};
  try {
    sim::run(r);
    FAIL() << "no workers accepted";
  } catch (const sim::InputError& e) {
    EXPECT_EQ(e.key(), "pipeline.num_parallel_workers");
    EXPECT_EQ(e.origin(), sim::override_origin("pipeline.num_parallel_workers=0"));
  }
  r = lenet(10);
  r.config.dir.clear();  // the library never falls back to the environment
  EXPECT_THROW(sim::run(r), sim::InputError);
}

// A short loop-sink run's time is mostly one-time set-up: its verdict says so and blames no
// launches; an op-by-op run's verdict names the host's launches it made.
TEST(Api, TheVerdictNamesTheShareThatDominatesTheRun) {
  sim::RunRequest r = lenet(5);
  r.epochs = 1;
  r.sink_size = 5;
  r.strategies = {runtime::Strategy::LoopSink, runtime::Strategy::NonSink};
  const auto out = sim::run(r);
  const auto& sink = out.runs[0];
  const double setup = sink.breakdown_s[static_cast<std::size_t>(sim::Phase::Setup)] / sink.sim_time_s;
  ASSERT_GT(setup, 0.4);  // the graph's load and the channel's creation against five short steps
  EXPECT_EQ(sink.interactions.op_launches, 0);
  EXPECT_EQ(sink.data["dominant"], "set-up");
  EXPECT_NEAR(sink.data["dominant_fraction"].get<double>(), setup, 1e-12);
  const std::string v = sink.data["verdict"].get<std::string>();
  EXPECT_NE(v.find("goes to one-time set-up"), std::string::npos) << v;
  EXPECT_EQ(v.find("launch"), std::string::npos) << v;
  const auto& ops = out.runs[1];
  EXPECT_GT(ops.interactions.op_launches, 0);
  EXPECT_EQ(ops.data["dominant"], "host");
  EXPECT_NE(ops.data["verdict"].get<std::string>().find("the host's launches"), std::string::npos);
}

}  // namespace
}  // namespace ascendsim
