// The ascendsim binary as a user runs it: exit codes, error messages, files written or not.
#include <sys/wait.h>

#include <sys/stat.h>
#include <unistd.h>
#include <csignal>
#include <cstdlib>
#include <cstring>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <vector>

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "sim/commands/commands.h"
#include "sim/regression.h"
#include "tests/cli_support.h"

namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::Not;

using Result = ascendsim::test::CliResult;

class CliTest : public ascendsim::test::CliFixture {
 protected:
  CliTest() : CliFixture("ascendsim_cli_") {}

};

TEST_F(CliTest, CompareWritesFourRunsWithTheirCounts) {
  const fs::path json = m_dir / "r.json";
  const Result r =
      run("compare --workload lenet5 --epochs 2 --steps-per-epoch 40 --sink-size 15 --json " + json.string());
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("loop-sink"));
  const auto j = nlohmann::json::parse(slurp(json));
  EXPECT_EQ(j["workload"], "lenet5");
  EXPECT_EQ(j["chip"], "ascend910");
  EXPECT_EQ(j["batch_size"], 32);
  EXPECT_EQ(j["devices"], 1);
  ASSERT_EQ(j["runs"].size(), 4u);
  const char* names[] = {"non-sink", "data-sink", "graph-sink", "loop-sink"};
  for (int i = 0; i < 4; ++i) {
    const auto& run_j = j["runs"][i];
    EXPECT_EQ(run_j["strategy"], names[i]);
    for (const char* key : {"epochs", "sink_size", "steps", "sim_time_s", "samples_per_s", "step_time_ms",
                            "device_busy_fraction", "interactions", "breakdown_s", "losses_returned"})
      EXPECT_TRUE(run_j.contains(key)) << names[i] << " lacks " << key;
    for (const char* key :
         {"op_launches", "graph_launches", "h2d_copies", "d2h_copies", "host_syncs", "h2d_bytes", "d2h_bytes"})
      EXPECT_TRUE(run_j["interactions"].contains(key)) << key;
    for (const char* key : {"host_data", "h2d", "launch", "device_compute", "d2h", "host_loop", "wait_data"})
      EXPECT_TRUE(run_j["breakdown_s"].contains(key)) << key;
  }
  EXPECT_EQ(j["runs"][0]["steps"], 80);
  const auto info = nlohmann::json::parse(run("info --workload lenet5 --json").out);
  EXPECT_EQ(j["runs"][0]["interactions"]["op_launches"], 80 * info["ops_per_step"].get<int>());
  EXPECT_EQ(j["runs"][3]["steps"], 30);
  EXPECT_EQ(j["runs"][3]["sink_size"], 15);
  EXPECT_EQ(j["runs"][3]["interactions"]["graph_launches"], 2);
  EXPECT_EQ(j["config"]["link"]["h2d_bandwidth_gbps"], 24.0);
}

TEST_F(CliTest, TwoIdenticalRunsWriteByteIdenticalJson) {
  const std::string args = "compare --epochs 1 --steps-per-epoch 60 --sink-size 25 --set host.op_launch_us=12 --json ";
  ASSERT_EQ(run(args + (m_dir / "a.json").string()).code, 0);
  ASSERT_EQ(run(args + (m_dir / "b.json").string()).code, 0);
  const std::string a = slurp(m_dir / "a.json");
  EXPECT_GT(a.size(), 1000u);
  EXPECT_EQ(a, slurp(m_dir / "b.json"));
}

TEST_F(CliTest, ProgressReportingDoesNotChangeResults) {
  // Printing progress between the kernel's slices of simulated time must not move the report.
  const std::string args = "compare --epochs 2 --steps-per-epoch 1875 --json ";
  const Result plain = run(args + (m_dir / "a.json").string());
  const Result progress = run("--progress " + args + (m_dir / "b.json").string());
  ASSERT_EQ(plain.code, 0) << plain.err;
  ASSERT_EQ(progress.code, 2);  // options follow the command
  const Result sliced = run(args + (m_dir / "b.json").string() + " --progress");
  ASSERT_EQ(sliced.code, 0) << sliced.err;
  const std::string a = slurp(m_dir / "a.json");
  EXPECT_EQ(a, slurp(m_dir / "b.json"));
  EXPECT_EQ(nlohmann::json::parse(a)["runs"][0]["steps"], 3750);
}

TEST_F(CliTest, MalformedYamlFailsWithoutReport) {
  const std::string cfg = file("bad.yaml", "host:\n  op_launch_us: [3\n");
  const Result r = run("compare --steps-per-epoch 5 --config " + cfg + " --json " + (m_dir / "r.json").string());
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.err, HasSubstr("bad.yaml"));
  EXPECT_THAT(r.err, HasSubstr("malformed YAML"));
  EXPECT_FALSE(fs::exists(m_dir / "r.json"));
  EXPECT_TRUE(r.out.empty()) << r.out;
}

TEST_F(CliTest, UnknownKeyFailsWithoutReport) {
  const std::string cfg = file("typo.yaml", "host:\n  op_lunch_us: 3\n");
  const Result r = run("compare --steps-per-epoch 5 --config " + cfg + " --json " + (m_dir / "r.json").string());
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.err, HasSubstr("host.op_lunch_us"));
  EXPECT_THAT(r.err, HasSubstr("host.op_launch_us"));
  EXPECT_FALSE(fs::exists(m_dir / "r.json"));
  const Result s = run("train --strategy loop-sink --steps-per-epoch 5 --set link.nope=1");
  EXPECT_EQ(s.code, 2);
  EXPECT_THAT(s.err, HasSubstr("link.nope"));
}

TEST_F(CliTest, NegativeBatchSizeFailsWithoutReport) {
  const Result r = run("compare --batch-size -4 --json " + (m_dir / "r.json").string());
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.err, HasSubstr("--batch-size"));
  EXPECT_THAT(r.err, HasSubstr("-4"));
  EXPECT_FALSE(fs::exists(m_dir / "r.json"));
}

TEST_F(CliTest, OtherBadOptionsAreRejected) {
  EXPECT_EQ(run("compare --epochs 0").code, 2);
  EXPECT_EQ(run("compare --sink-size 0").code, 2);
  EXPECT_EQ(run("compare --batch-size many").code, 2);
  EXPECT_EQ(run("compare --workload alexnet").code, 2);
  EXPECT_EQ(run("train --strategy warp-sink").code, 2);
  EXPECT_EQ(run("compare --chip ascend920").code, 2);
  EXPECT_EQ(run("compare --devices 9").code, 2);  // one server of up to 8
  EXPECT_EQ(run("compare --devices 0").code, 2);
  const Result split = run("train --strategy loop-sink --devices 8 --all-reduce-fusion 5,3 --steps-per-epoch 2");
  EXPECT_EQ(split.code, 2);
  EXPECT_THAT(split.err, HasSubstr("--all-reduce-fusion"));
  EXPECT_EQ(run("train --strategy loop-sink --devices 8 --all-reduce-fusion 3,x --steps-per-epoch 2").code, 2);
  EXPECT_EQ(run("train --strategy loop-sink --devices 8 --all-reduce-fusion 8 --steps-per-epoch 2").code,
            2);                                                                                    // LeNet-5 has 8
  EXPECT_EQ(run("train --strategy loop-sink --all-reduce-fusion 3 --steps-per-epoch 2").code, 2);  // one device
  // A rank table gives the devices; --devices may repeat it but not contradict it.
  const std::string table = ASCENDSIM_SOURCE_DIR "/configs/rank_table_16pcs.json";
  const Result ok = run("train --strategy loop-sink --steps-per-epoch 2 --rank-table " + table + " --json");
  ASSERT_EQ(ok.code, 0) << ok.err;
  EXPECT_EQ(nlohmann::json::parse(ok.out)["runs"][0]["devices"], 16);
  const Result clash = run("train --strategy loop-sink --steps-per-epoch 2 --devices 8 --rank-table " + table);
  EXPECT_EQ(clash.code, 2);
  EXPECT_THAT(clash.err, HasSubstr("disagrees with --rank-table"));
  const Result missing = run("train --strategy loop-sink --rank-table /nonexistent.json");
  EXPECT_EQ(missing.code, 2);
  EXPECT_THAT(missing.err, HasSubstr("/nonexistent.json: cannot read the rank table"));
  EXPECT_EQ(run("compare --steps-per-epoch 0").code, 2);
  EXPECT_EQ(run("compare --batch-size 99999999999").code, 2);
  const Result huge = run("compare --epochs 99999999999");
  EXPECT_EQ(huge.code, 2);
  EXPECT_THAT(huge.err, HasSubstr("reduce --epochs"));
  EXPECT_EQ(run("frobnicate").code, 2);
  // Impossible combinations are rejected at load time, and unwritable outputs before running.
  const Result ub = run("compare --set aicore.ub_kib=1");
  EXPECT_EQ(ub.code, 2);
  EXPECT_THAT(ub.err, HasSubstr("aicore.ub_kib"));
  EXPECT_EQ(run("compare --set pipeline.shard_id=3").code, 2);
  // Semi-auto ranks hold pieces of the network: there is no one network's weights to write.
  const Result pieces =
      run("train --strategy non-sink --steps-per-epoch 2 --devices 8 --parallel-mode semi-auto "
          "--workload mlp-slice --dataset-strategy '((1,1,1,4),(1,))' --functional --save-weights " +
          (m_dir / "w.json").string());
  EXPECT_EQ(pieces.code, 2);
  EXPECT_THAT(pieces.err, HasSubstr("--save-weights writes one network's weights"));
  EXPECT_FALSE(std::filesystem::exists(m_dir / "w.json"));
  // The same with the devices from a rank table: refused after the run, before any file.
  if (std::filesystem::exists("/usr/share/datasets/fashion-mnist")) {
    const Result tabled =
        run("train --strategy non-sink --steps-per-epoch 2 --parallel-mode semi-auto --workload mlp-slice "
            "--dataset-strategy '((1,1,1,4),(1,))' --functional --dataset /usr/share/datasets/fashion-mnist "
            "--rank-table " ASCENDSIM_SOURCE_DIR "/configs/rank_table_8pcs.json --save-weights " +
            (m_dir / "w.json").string() + " --json " + (m_dir / "r.json").string());
    EXPECT_EQ(tabled.code, 2);
    EXPECT_THAT(tabled.err, HasSubstr("write one network's values; this run has none"));
    EXPECT_FALSE(std::filesystem::exists(m_dir / "w.json"));
    EXPECT_FALSE(std::filesystem::exists(m_dir / "r.json"));
  }
  const Result out = run("compare --steps-per-epoch 3 --json " + (m_dir / "nodir" / "r.json").string());
  EXPECT_EQ(out.code, 2);
  EXPECT_THAT(out.err, HasSubstr("does not exist"));
  EXPECT_TRUE(out.out.empty());
}

TEST_F(CliTest, GetNextTimeoutFailsTheRunWithDiagnosisAndNoReport) {
  const Result r =
      run("train --strategy loop-sink --steps-per-epoch 10 --set host.normalize_ns_per_value=200000 "
          "--set aicpu.op_timeout_s=0.01 --json " +
          (m_dir / "r.json").string());
  EXPECT_EQ(r.code, 3);
  EXPECT_THAT(r.err, HasSubstr("GetNext"));
  EXPECT_THAT(r.err, HasSubstr("wait_data"));
  EXPECT_FALSE(fs::exists(m_dir / "r.json"));
}

TEST_F(CliTest, OneWorkerWithATinyOpTimeoutFailsInGetNext) {
  const Result r =
      run("train --workload resnet50 --batch-size 32 --strategy loop-sink --steps-per-epoch 50 "
          "--num-parallel-workers 1 --op-timeout 0.001 --json " +
          (m_dir / "r.json").string());
  EXPECT_EQ(r.code, 3);
  EXPECT_THAT(r.err, HasSubstr("GetNext timed out"));
  EXPECT_THAT(r.err, HasSubstr("num_parallel_workers"));
  EXPECT_FALSE(fs::exists(m_dir / "r.json"));
}

TEST_F(CliTest, LeNetOnFashionMnistRunsTheFilesEpoch) {
  if (!fs::exists("/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz"))
    GTEST_SKIP() << "dataset-fashion-mnist is not installed (scripts/install-deps.sh installs it)";
  const Result r =
      run("train --workload lenet5 --strategy loop-sink --dataset /usr/share/datasets/fashion-mnist "
          "--json -");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["runs"][0]["steps"], 1875);
  EXPECT_EQ(j["runs"][0]["steps_per_epoch"], 1875);
}

TEST_F(CliTest, DatasetErrorsAreClear) {
  const Result empty = run("train --strategy loop-sink --dataset " + m_dir.string());
  EXPECT_EQ(empty.code, 2);
  EXPECT_THAT(empty.err, HasSubstr("no MNIST idx files"));
  std::ofstream(m_dir / "train-images-idx3-ubyte") << "garbage!";
  std::ofstream(m_dir / "train-labels-idx1-ubyte") << "garbage!";
  const Result bad = run("train --strategy loop-sink --dataset " + m_dir.string());
  EXPECT_EQ(bad.code, 2);
  EXPECT_THAT(bad.err, HasSubstr("train-images-idx3-ubyte"));
  if (fs::exists("/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz")) {
    const Result mismatch =
        run("train --workload resnet50 --strategy loop-sink --dataset /usr/share/datasets/fashion-mnist");
    EXPECT_EQ(mismatch.code, 2);
    EXPECT_THAT(mismatch.err, HasSubstr("mnist-idx"));
  }
  EXPECT_EQ(run("train --strategy loop-sink --cache sometimes").code, 2);
}

// Renders an HTML file in headless Chromium and returns the serialised DOM ("" when no browser).
std::string render_dom(const fs::path& html, const fs::path& profile) {
  if (!fs::exists("/usr/bin/chromium")) return "";
  const fs::path out = html.string() + ".dom";
  const std::string cmd =
      "timeout 120 /usr/bin/chromium --headless --no-sandbox --disable-gpu --disable-quic "
      "--no-first-run --disable-background-networking --disable-component-update --disable-sync "
      "--user-data-dir=" +
      profile.string() + " --dump-dom file://" + html.string() + " >" + out.string() + " 2>/dev/null";
  if (std::system(cmd.c_str()) != 0) return "";
  std::ifstream f(out);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

/// The rendered <svg> element with this id.
std::string chart(const std::string& dom, const std::string& id) {
  const auto a = dom.find("id=\"" + id + "\"");
  if (a == std::string::npos) return "";
  return dom.substr(a, dom.find("</svg>", a) - a);
}

/// The distinct values of an attribute.
std::set<std::string> attributes(const std::string& svg, const std::string& name) {
  std::set<std::string> out;
  const std::regex re(name + "=\"([^\"]+)\"");
  for (auto it = std::sregex_iterator(svg.begin(), svg.end(), re); it != std::sregex_iterator(); ++it)
    out.insert((*it)[1]);
  return out;
}

/// The text of every <text> of a class, in order.
std::vector<std::string> texts(const std::string& svg, const std::string& cls) {
  std::vector<std::string> out;
  const std::regex re("<text class=\"" + cls + "\"[^>]*>([^<]*)</text>");
  for (auto it = std::sregex_iterator(svg.begin(), svg.end(), re); it != std::sregex_iterator(); ++it)
    out.push_back((*it)[1]);
  return out;
}

std::size_t occurrences(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (auto at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

TEST_F(CliTest, ATraceNamedPftraceIsPerfettosProtobufFormat) {
  const fs::path json = m_dir / "t.json", proto = m_dir / "t.pftrace";
  ASSERT_EQ(run("train --strategy loop-sink --steps-per-epoch 20 --trace " + json.string()).code, 0);
  ASSERT_EQ(run("train --strategy loop-sink --steps-per-epoch 20 --trace " + proto.string()).code, 0);
  const std::string p = slurp(proto);
  ASSERT_GT(p.size(), 100u);
  EXPECT_EQ(p[0], '\x0a');                            // Trace.packet, length-delimited
  EXPECT_NE(p.find("loop-sink"), std::string::npos);  // the process name
  EXPECT_LT(p.size() * 2, fs::file_size(json));
  EXPECT_EQ(slurp(json).front(), '{');
}

TEST_F(CliTest, CompareWritesTraceAndHtmlThatRenders) {
  const fs::path trace = m_dir / "t.json", html = m_dir / "r.html";
  const Result r = run("compare --workload lenet5 --epochs 1 --steps-per-epoch 200 --trace " + trace.string() +
                       " --html " + html.string());
  ASSERT_EQ(r.code, 0) << r.err;
  const auto t = nlohmann::json::parse(slurp(trace));
  EXPECT_GT(t["traceEvents"].size(), 1000u);
  const std::string page = slurp(html);
  EXPECT_EQ(page.find("<script"), std::string::npos);  // self-contained, no scripts
  EXPECT_EQ(page.find("http"), std::string::npos);     // no external resources
  const std::string dom = render_dom(html, m_dir / "profile");
  if (dom.empty()) GTEST_SKIP() << "chromium is not installed (scripts/test.sh installs it); HTML not rendered";
  for (const char* id : {"chart-step-time", "chart-breakdown", "chart-interactions", "chart-queue-depth"})
    EXPECT_NE(dom.find(std::string("id=\"") + id + "\""), std::string::npos) << id;
  EXPECT_GE(occurrences(dom, "class=\"bar\""), 4u * 3);  // step bars, breakdown segments, interaction bars
  EXPECT_EQ(occurrences(dom, "class=\"series\""), 3u);   // queue depth of the three sink modes
  // Phases and strategies never share a colour.
  const auto phase_colours = attributes(chart(dom, "chart-breakdown"), "fill");
  const auto strategy_colours = attributes(chart(dom, "chart-step-time"), "fill");
  ASSERT_GE(phase_colours.size(), 5u);
  ASSERT_EQ(strategy_colours.size(), 4u);
  for (const auto& c : strategy_colours) EXPECT_EQ(phase_colours.count(c), 0u) << c;
  // The legend lists the phases in the order the bars stack them.
  const std::string breakdown = chart(dom, "chart-breakdown");
  std::vector<std::string> legend_order, stack_order;
  const std::regex legend_re("<text x=\"[0-9.]+\" y=\"[0-9.]+\">([a-z_0-9]+)</text>");
  for (auto it = std::sregex_iterator(breakdown.begin(), breakdown.end(), legend_re); it != std::sregex_iterator();
       ++it)
    legend_order.push_back((*it)[1]);
  const std::regex bar_re("<title>([a-z_0-9]+): ");
  for (auto it = std::sregex_iterator(breakdown.begin(), breakdown.end(), bar_re); it != std::sregex_iterator(); ++it)
    stack_order.push_back((*it)[1]);
  ASSERT_FALSE(stack_order.empty());
  std::size_t pos = 0, rows = 1;  // each row's segments follow the legend's order
  for (const auto& name : stack_order) {
    const auto at = std::find(legend_order.begin(), legend_order.end(), name);
    ASSERT_NE(at, legend_order.end()) << name;
    const auto idx = static_cast<std::size_t>(at - legend_order.begin());
    if (idx <= pos && &name != &stack_order.front()) ++rows;  // only a new row goes back
    pos = idx;
  }
  EXPECT_EQ(rows, 4u);
  // The interactions chart labels its axis and prints every bar's value, zeros included.
  const std::string inter = chart(dom, "chart-interactions");
  EXPECT_THAT(inter, HasSubstr("count per run (log scale)"));
  EXPECT_EQ(occurrences(inter, "class=\"value\""), 5u * 4);
  EXPECT_GE(occurrences(inter, ">0</text>"), 4u);  // e.g. graph launches of the op-by-op strategies
  // Queue depth in whole batches; series are told apart by dash patterns; points say their value.
  const std::string depth = chart(dom, "chart-queue-depth");
  for (const auto& tick : texts(depth, "tick y-tick")) EXPECT_EQ(tick.find('.'), std::string::npos) << tick;
  EXPECT_EQ(attributes(depth, "stroke-dasharray").size(), 3u);
  EXPECT_GT(occurrences(depth, "<title>"), 10u);
}

TEST_F(CliTest, SweepOfSinkSizeNamesTheBreakEven) {
  const fs::path json = m_dir / "s.json", csv = m_dir / "s.csv", html = m_dir / "s.html";
  const Result r = run("sweep --workload lenet5 --param sink_size --values 1,10,100,1000,1875 --json " + json.string() +
                       " --csv " + csv.string() + " --html " + html.string());
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(slurp(json));
  ASSERT_EQ(j["rows"].size(), 5u * 4);
  for (const auto& row : j["rows"]) {
    EXPECT_EQ(row["param"], "sink_size");
    EXPECT_TRUE(row.contains("value") && row.contains("strategy") && row.contains("step_time_ms"));
  }
  // Recompute the break-even from the loop-sink rows: the smallest sink size from which every
  // larger one improves the mean step time by less than 1%.
  std::vector<std::pair<double, double>> loop;
  for (const auto& row : j["rows"])
    if (row["strategy"] == "loop-sink")
      loop.emplace_back(row["value"].get<double>(), row["step_time_ms"]["mean"].get<double>());
  std::size_t be = loop.size();
  for (std::size_t i = loop.size(); i-- > 1;) {
    if ((loop[i - 1].second - loop[i].second) / loop[i - 1].second < 0.01)
      be = i - 1;
    else
      break;
  }
  ASSERT_LT(be, loop.size() - 1) << "the values given should reach the break-even";
  EXPECT_EQ(j["break_even_sink_size"].get<double>(), loop[be].first);
  EXPECT_THAT(r.out, HasSubstr("gains less than 1%"));
  EXPECT_EQ(occurrences(slurp(csv), "\n"), 1u + 5 * 4);
  // Any parameter key can be swept; a wrong one is an error naming it.
  const Result bw =
      run("sweep --param link.h2d_bandwidth_gbps --values 1,24 --strategies non-sink --steps-per-epoch 20");
  EXPECT_EQ(bw.code, 0) << bw.err;
  const Result bad = run("sweep --param link.h2d_bandwith_gbps --values 1,24 --steps-per-epoch 20");
  EXPECT_EQ(bad.code, 2);
  EXPECT_THAT(bad.err, HasSubstr("link.h2d_bandwith_gbps"));
  EXPECT_EQ(run("sweep --param sink_size --values 1,,3").code, 2);
  const std::string dom = render_dom(html, m_dir / "profile");
  if (dom.empty()) GTEST_SKIP() << "chromium is not installed (scripts/test.sh installs it); HTML not rendered";
  EXPECT_NE(dom.find("id=\"chart-sweep\""), std::string::npos);
  EXPECT_EQ(occurrences(dom, "class=\"series\""), 4u);
  // 1 to 1875 spans three decades: a log axis with decade ticks, nice y ticks, the break-even marked.
  const std::string sweep = chart(dom, "chart-sweep");
  EXPECT_THAT(sweep, HasSubstr("sink_size (log scale)"));
  EXPECT_EQ(texts(sweep, "tick x-tick"), (std::vector<std::string>{"1", "10", "100", "1000", "10000"}));
  for (const auto& t : texts(sweep, "tick y-tick")) {
    const double v = std::stod(t);
    const double mant = v / std::pow(10, std::floor(std::log10(v > 0 ? v : 1)));
    EXPECT_TRUE(v == 0 || std::fabs(mant - std::round(mant)) < 1e-9) << t;  // 0.1, 0.2, ... not 0.156
  }
  EXPECT_THAT(sweep, HasSubstr("break-even: sink_size " + std::to_string(static_cast<long long>(loop[be].first))));
}

TEST_F(CliTest, TraceStepsMustBeAWindow) {
  EXPECT_EQ(run("compare --steps-per-epoch 5 --trace " + (m_dir / "t.json").string() + " --trace-steps 5:2").code, 2);
  EXPECT_EQ(run("compare --steps-per-epoch 5 --trace " + (m_dir / "t.json").string() + " --trace-steps abc").code, 2);
  EXPECT_FALSE(fs::exists(m_dir / "t.json"));
}

TEST_F(CliTest, InfoReportsLeNetFigures) {
  const Result r = run("info --workload lenet5 --batch-size 32 --ub-fusion true --json");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["parameters"], 61684);
  EXPECT_EQ(j["forward_macs_per_sample"], 416520);
  // LeNet-5's 42 framework ops as the device runs them: a Cast to fp16 for each of the 15 fp32
  // tensors its Cube ops read, 7 TransData, 8 AtomicAddrClean; UB fusion then joins conv1 with
  // its ReLU (one op fewer), fc2's MatMul with its BiasAdd and ReLU (two) and the backward MatMul
  // into fc2's ReluGrad (one).
  EXPECT_EQ(j["graph_passes"][0]["ops"], 42);
  const auto& e = j["graph_passes"];
  ASSERT_GE(e.size(), 2u);
  EXPECT_EQ(e[e.size() - 2]["ops"], 42 + 15 + 7 + 8);
  EXPECT_EQ(e.back()["pass"], "ub_fusion");
  EXPECT_EQ(j["ops_per_step"], 42 + 15 + 7 + 8 - 4);
  EXPECT_LT(e.back()["hbm_bytes"], e[e.size() - 2]["hbm_bytes"]);
  EXPECT_EQ(j["graph_passes"].back()["ops"], j["ops_per_step"]);
  EXPECT_EQ(j["recipe"]["amp_level"], "O0");
  EXPECT_EQ(j["recipe"]["ub_fusion"], true);
  // --ub-fusion false: the graph without the pass; a value other than true or false is refused.
  const auto off = nlohmann::json::parse(run("info --workload lenet5 --ub-fusion false --json").out);
  EXPECT_EQ(off["ops_per_step"], 42 + 15 + 7 + 8);
  EXPECT_EQ(off["graph_passes"].back()["pass"], "momentum_fusion");
  EXPECT_EQ(off["recipe"]["ub_fusion"], false);
  EXPECT_GT(off["device_compute_per_step_s"], j["device_compute_per_step_s"]);
  const Result bad = run("info --workload lenet5 --ub-fusion yes");
  EXPECT_EQ(bad.code, 2);
  EXPECT_NE(bad.err.find("--ub-fusion 'yes'"), std::string::npos) << bad.err;
  const Result kept = run("info --workload resnet50 --keep-batchnorm-fp32 true --json");
  ASSERT_EQ(kept.code, 0) << kept.err;
  // Casts around every BatchNorm (53 forward, 53 backward, two each).
  EXPECT_EQ(nlohmann::json::parse(kept.out)["graph_passes"][0]["ops"], 953 + 4 * 53);
  const auto plain = nlohmann::json::parse(run("info --workload resnet50 --ub-fusion false --json").out);
  EXPECT_EQ(plain["graph_passes"][0]["ops"], 953);
  // Graph-kernel fusion: one more pass, fewer ops and bytes, the recipe says so.
  const auto fused =
      nlohmann::json::parse(run("info --workload resnet50 --graph-kernel-fusion --ub-fusion false --json").out);
  EXPECT_EQ(fused["graph_passes"].back()["pass"], "graph_kernel_fusion");
  EXPECT_LT(fused["ops_per_step"], plain["ops_per_step"]);
  EXPECT_LT(fused["graph_passes"].back()["hbm_bytes"], plain["graph_passes"].back()["hbm_bytes"]);
  EXPECT_LT(fused["device_compute_per_step_s"], plain["device_compute_per_step_s"]);
  EXPECT_EQ(fused["recipe"]["graph_kernel_fusion"], true);
  EXPECT_EQ(run("info --workload lenet5 --amp-level O2").code, 2);
  EXPECT_GT(j["peak_device_memory_bytes"].get<std::int64_t>(), 61684 * 4 * 2);
}

TEST_F(CliTest, ModelTooLargeForDeviceMemoryIsRefused) {
  const Result r = run("compare --steps-per-epoch 2 --batch-size 4096 --set memory.hbm_gib=0.125");
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.err, HasSubstr("needs"));
  EXPECT_THAT(r.err, HasSubstr("reduce --batch-size"));
}

TEST_F(CliTest, ResNetOutOfMemorySaysHowMuchAndWhatToDo) {
  const Result r =
      run("compare --workload resnet152 --batch-size 4096 --steps-per-epoch 2 --json " + (m_dir / "r.json").string());
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.err, HasSubstr("resnet152 at batch 4096 needs"));
  EXPECT_THAT(r.err, HasSubstr("ascend910 has 32.00 GiB"));
  EXPECT_THAT(r.err, HasSubstr("reduce --batch-size"));
  EXPECT_FALSE(fs::exists(m_dir / "r.json"));
  const Result fits = run("info --workload resnet50 --batch-size 256 --json");
  ASSERT_EQ(fits.code, 0) << fits.err;
  const auto j = nlohmann::json::parse(fits.out);
  EXPECT_LT(j["peak_device_memory_bytes"].get<std::int64_t>(), std::int64_t{32} << 30);
  EXPECT_EQ(j["parameters"], 25557032);
}

TEST_F(CliTest, OpReportsPipesTilingAndBound) {
  const Result r =
      run("op --type conv2d --n 32 --c 64 --h 56 --w 56 --k 64 --r 3 --s 3 --stride 1 --pad 1 "
          "--dtype fp16 --json");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  for (const char* key : {"time_us", "macs", "gm_bytes", "achieved_tflops", "peak_tflops", "hbm_bandwidth_gbps",
                          "hbm_sustained_gbps", "bound", "pipes", "tiling", "tiles", "blocks"})
    EXPECT_TRUE(j.contains(key)) << key;
  EXPECT_EQ(j["macs"], 32.0 * 56 * 56 * 64 * 64 * 9);
  EXPECT_NEAR(j["peak_tflops"].get<double>(), 262.144, 1e-9);
  EXPECT_LE(j["achieved_tflops"].get<double>(), j["peak_tflops"].get<double>());
  // achieved = 2 MACs / time
  EXPECT_NEAR(j["achieved_tflops"].get<double>(),
              2 * j["macs"].get<double>() / (j["time_us"].get<double>() * 1e-6) / 1e12, 1e-6);
  for (const char* pipe : {"scalar", "mte2", "mte1", "cube", "fixpipe", "vector", "mte3"})
    EXPECT_TRUE(j["pipes"].contains(pipe)) << pipe;
  const Result mm = run("op --type matmul --m 16 --n 16 --k 16");
  EXPECT_EQ(mm.code, 0);
  EXPECT_THAT(mm.out, HasSubstr("overhead"));
  EXPECT_EQ(run("op --type add --elements 1048576 --dtype fp16").code, 0);
  EXPECT_EQ(run("op --type batchnorm_grad --n 32 --c 256 --h 14 --w 14 --dtype fp32").code, 0);
  EXPECT_EQ(run("op --type maxpool --n 32 --c 64 --h 112 --w 112 --r 3 --s 3 --stride 2 --pad 1").code, 0);
  // Bad op input.
  const Result bad = run("op --type matmul --m 0 --n 4 --k 4");
  EXPECT_EQ(bad.code, 2);
  EXPECT_THAT(bad.err, HasSubstr("--m"));
  EXPECT_EQ(run("op --type warp").code, 2);
  EXPECT_EQ(run("op --type matmul --m 64 --n 64 --k 64 --dtype fp32").code, 2);
  EXPECT_EQ(run("op --type conv2d --n 1 --c 3 --h 4 --w 4 --k 8 --r 7 --s 7").code, 2);
}

TEST_F(CliTest, OpWithTheEventModelPrintsThePipesTimeline) {
  const std::string conv = "op --type conv2d --n 32 --c 64 --h 56 --w 56 --k 64 --r 3 --s 3 --pad 1 ";
  const Result r = run(conv + "--aicore-model event --columns 40");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("pipe timeline of the busiest block"));
  EXPECT_THAT(r.out, HasSubstr("the first 12 steps"));
  EXPECT_THAT(r.out, HasSubstr("aic_mac_ratio"));
  // One chart row per pipe, 40 columns between the bars.
  std::istringstream lines(r.out);
  int cube_rows = 0;
  for (std::string line; std::getline(lines, line);)
    if (line.rfind("  cube     |", 0) == 0) {
      ++cube_rows;
      EXPECT_EQ(line.size(), 12u + 40u + 1u) << line;
      EXPECT_EQ(line.find_first_not_of(" .+#", 12), 52u) << line;
    }
  EXPECT_EQ(cube_rows, 2);  // the whole op and its first steps
  const auto j = nlohmann::json::parse(run(conv + "--aicore-model event --json").out);
  EXPECT_EQ(j["aicore_model"], "event");
  ASSERT_TRUE(j.contains("timeline_cycles"));
  // The Cube's intervals add up to its busy cycles.
  double cube = 0;
  for (const auto& i : j["timeline_cycles"]["cube"]) cube += i[1].get<double>() - i[0].get<double>();
  EXPECT_NEAR(cube, j["pipes"]["cube"].get<double>(), 1e-3 * cube);
  // Where the pipes waited: the Cube, which bounds this op, hardly at all.
  ASSERT_TRUE(j.contains("pipes_waiting"));
  EXPECT_LT(j["pipes_waiting"]["cube"]["input"].get<double>() + j["pipes_waiting"]["cube"]["free_half"].get<double>(),
            0.05 * cube);
  EXPECT_THAT(r.out, HasSubstr("waiting for its input"));
  EXPECT_NEAR(j["op_summary"]["aic_mac_ratio"].get<double>(),
              j["pipes"]["cube"].get<double>() / j["cycles"].get<double>(), 1e-9);
  // The analytic model has no timeline; a tile of one's own is the event model's.
  EXPECT_FALSE(nlohmann::json::parse(run(conv + "--json").out).contains("timeline_cycles"));
  const Result tiled = run(conv + "--aicore-model event --tile 128,64,64 --json");
  ASSERT_EQ(tiled.code, 0) << tiled.err;
  EXPECT_THAT(nlohmann::json::parse(tiled.out)["tiling"].get<std::string>(), HasSubstr("m128 n64 k64"));
  const Result too_big = run(conv + "--aicore-model event --tile 512,512,512");
  EXPECT_EQ(too_big.code, 2);
  EXPECT_THAT(too_big.err, HasSubstr("L0A"));
  EXPECT_EQ(run(conv + "--tile 128,64,64").code, 2);                       // analytic: no --tile
  EXPECT_EQ(run(conv + "--aicore-model event --tile 100,64,64").code, 2);  // not a fractal
  EXPECT_EQ(run(conv + "--aicore-model event --tile 128,64").code, 2);     // three sizes
  EXPECT_EQ(run(conv + "--aicore-model cycle").code, 2);                   // no such model
  EXPECT_EQ(run(conv + "--aicore-model event --tile 4611686018427387904,16,16").code, 2);  // no overflow
  EXPECT_EQ(run(conv + "--set aicore.double_buffer=false").code, 2);                       // the event model's setting
  EXPECT_EQ(run("op --type flash_attention --batch 4 --m 512 --n 512 --k 128 --chip ascend910b --aicore-model event "
                "--tile 64,64,128")
                .code,
            2);
  const Result single = run(conv + "--aicore-model event --set aicore.double_buffer=false --json");
  ASSERT_EQ(single.code, 0) << single.err;
  EXPECT_GT(nlohmann::json::parse(single.out)["cycles"].get<double>(), j["cycles"].get<double>());
}

TEST_F(CliTest, AicoreCheckComparesTheModelsOpByOp) {
  const Result r = run("aicore-check --workload lenet5 --json");
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  ASSERT_GT(j["ops"].size(), 10u);
  EXPECT_TRUE(j["not_compared"].empty());
  // The analytic side is what every run uses: the step's AI-core time of `info`; the event side
  // is what the event model's own runs use.
  const auto info = nlohmann::json::parse(run("info --workload lenet5 --json").out);
  EXPECT_NEAR(j["step_analytic_ms"].get<double>(), info["device_compute_per_step_s"].get<double>() * 1e3, 1e-6);
  const auto event_info = nlohmann::json::parse(run("info --workload lenet5 --aicore-model event --json").out);
  EXPECT_NEAR(j["step_event_ms"].get<double>(), event_info["device_compute_per_step_s"].get<double>() * 1e3, 1e-6);
  // LeNet-5's ops agree within 10%, the step within 2%.
  for (const auto& op : j["ops"]) EXPECT_LT(std::fabs(op["difference"].get<double>()), 0.10) << op.dump();
  EXPECT_NEAR(j["step_event_ms"].get<double>() / j["step_analytic_ms"].get<double>(), 1.0, 0.02);
  const Result text = run("aicore-check --workload lenet5");
  EXPECT_THAT(text.out, HasSubstr("ops agree within 10%"));
  EXPECT_EQ(run("aicore-check --workload lenet5 --tolerance x").code, 2);
  EXPECT_EQ(run("aicore-check --workload lenet5 --aicore-model event").code, 2);  // it runs both
}

TEST_F(CliTest, ParamsListsEveryParameterWithUnitAndDescription) {
  const Result r = run("params --chip ascend910b");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("link.h2d_bandwidth_gbps"));
  EXPECT_THAT(r.out, HasSubstr("GB/s"));
  EXPECT_THAT(r.out, HasSubstr("host.op_launch_us"));
  const Result c = run("chips");
  EXPECT_THAT(c.out, HasSubstr("ascend310"));
}

TEST_F(CliTest, StatsListsEveryStatisticWithUnitAndDescription) {
  const Result r = run("stats");
  EXPECT_EQ(r.code, 0);
  EXPECT_THAT(r.out, HasSubstr("chip.hostif.h2d.bytes"));
  EXPECT_THAT(r.out, HasSubstr("bytes moved"));
  EXPECT_THAT(r.out, HasSubstr("chip.scheduler.event_wait_s"));
  const Result bad = run("stats --set link.h2d_bandwidth_gbps=0");
  EXPECT_EQ(bad.code, 2);
  EXPECT_THAT(bad.err, HasSubstr("--set link.h2d_bandwidth_gbps=0"));
}

TEST_F(CliTest, AShortcutFlagsErrorNamesTheFlag) {
  const Result r = run("compare --num-parallel-workers 0");
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.err, HasSubstr("--num-parallel-workers 0"));
  EXPECT_THAT(r.err, Not(HasSubstr("--set")));
  const Result b = run("compare --workload resnet152 --batch-size 4096");
  EXPECT_THAT(b.err, HasSubstr("reduce --batch-size"));
}

TEST_F(CliTest, StrayWordsAndUnusedOptionsAreRejected) {
  for (const char* args : {"compare resnet50", "params ascend310", "train loop-sink -s non-sink"}) {
    const Result r = run(args);
    EXPECT_EQ(r.code, 2) << args;
    EXPECT_THAT(r.err, HasSubstr("unexpected argument")) << args;
  }
  const Result sweep = run("sweep --param sink_size --values 1,2 --trace " + (m_dir / "t.json").string());
  EXPECT_EQ(sweep.code, 2);
  EXPECT_FALSE(fs::exists(m_dir / "t.json"));
  EXPECT_EQ(run("compare --trace-steps 1:2").code, 2);
  const Result sweep_name = run("sweep --param chip.name --values a,b");
  EXPECT_EQ(sweep_name.code, 2);
  EXPECT_THAT(sweep_name.err, HasSubstr("--param chip.name value a"));
}

// The table of commands (sim/commands/commands.cpp) and `ascendsim --help` agree: every entry is
// listed with its line, and every command the help names runs (its own --help).
TEST_F(CliTest, HelpListsTheTableOfCommandsAndEachDispatches) {
  const Result help = run("--help");
  ASSERT_EQ(help.code, 0) << help.err;
  EXPECT_EQ(help.out, ascendsim::sim::cli::usage());
  // The commands section: "  NAME  HELP" lines between "commands:" and the blank line.
  std::vector<std::pair<std::string, std::string>> listed;
  {
    std::istringstream lines(help.out);
    bool in = false;
    for (std::string line; std::getline(lines, line);) {
      if (line == "commands:") {
        in = true;
      } else if (in && line.empty()) {
        break;
      } else if (in) {
        const std::regex entry("  (\\S+) {2,}(\\S.*)");
        std::smatch m;
        ASSERT_TRUE(std::regex_match(line, m, entry)) << line;
        listed.emplace_back(m[1], m[2]);
      }
    }
  }
  const auto& table = ascendsim::sim::cli::commands();
  ASSERT_EQ(listed.size(), table.size());
  for (std::size_t i = 0; i < table.size(); ++i) {
    EXPECT_EQ(listed[i].first, table[i].name);
    EXPECT_EQ(listed[i].second, table[i].help) << table[i].name;
    EXPECT_EQ(ascendsim::sim::cli::find_command(table[i].name), &table[i]);
  }
  // `tune --help` is the Python package's (built beside the binary unless Python is off).
  const bool python = fs::exists(fs::path(ASCENDSIM_BIN).parent_path().parent_path() / "python" / "ascendsim");
  for (const auto& [name, line] : listed) {
    const Result r = run(name + " --help");
    EXPECT_THAT(r.err, Not(HasSubstr("unknown command"))) << name;
    if (name == "tune" && !python) continue;
    EXPECT_EQ(r.code, 0) << name << ": " << r.err;
    EXPECT_EQ(r.out.rfind("usage: ascendsim " + name + " ", 0), 0u) << name << ": " << r.out;
  }
  const Result unknown = run("no-such-command");
  EXPECT_EQ(unknown.code, 2);
  EXPECT_EQ(unknown.err, "error: unknown command 'no-such-command'\n\n" + ascendsim::sim::cli::usage());
}

TEST_F(CliTest, TheHeaderSaysWhatRunsAndHelpShowsDefaults) {
  const Result r = run("compare --epochs 2 --sink-size 500 --steps-per-epoch 1875");
  EXPECT_EQ(r.code, 0);
  EXPECT_THAT(r.out, HasSubstr("loop-sink: 2 sink(s) of 500 steps = 1000 steps"));
  // Where the data comes from, the script's map() calls with their workers and the host, in one
  // line under the header.
  EXPECT_THAT(r.out, HasSubstr("\ntraining: amp O0, loss scale 1; data: synthetic mnist-idx, 60000 samples; "
                               "map calls (workers): Map(TypeCast) x8 > Map(Resize) x8 > Map(Rescale) x8"));
  EXPECT_THAT(r.out, HasSubstr("Map(HWC2CHW) x8; server generic-x86: host 32 cores, cache none\n"));
  const Result help = run("compare --help");
  EXPECT_THAT(help.out, HasSubstr("default 8)"));
  EXPECT_THAT(help.out, HasSubstr("1900 s)"));
  EXPECT_THAT(help.out, HasSubstr("none)"));
  const Result v = run("--version");
  EXPECT_EQ(v.code, 0);
  EXPECT_THAT(v.out, HasSubstr("ascendsim 0."));
}

TEST_F(CliTest, OutputsGoWhereTheyPointAndAFailedCommandLeavesNone) {
  const std::string args = "compare --steps-per-epoch 3 ";
  // A device stays a device.
  EXPECT_EQ(run(args + "--json /dev/null").code, 0);
  EXPECT_TRUE(fs::is_character_file("/dev/null"));
  // A symlink keeps its link; its target gets the report.
  const fs::path target = m_dir / "target.json", link = m_dir / "link.json";
  file("target.json", "old");
  fs::create_symlink(target, link);
  EXPECT_EQ(run(args + "--json " + link.string()).code, 0);
  EXPECT_TRUE(fs::is_symlink(link));
  EXPECT_THAT(slurp(target), HasSubstr("\"workload\""));
  // A file that happens to be named like a temporary is left alone.
  file("r.json.tmp", "keep");
  EXPECT_EQ(run(args + "--json " + (m_dir / "r.json").string()).code, 0);
  EXPECT_EQ(slurp(m_dir / "r.json.tmp"), "keep");
  // One bad destination: nothing is written, and the message says why.
  fs::create_directory(m_dir / "some_dir");
  const Result bad = run(args + "--json " + (m_dir / "ok.json").string() + " --html " + (m_dir / "some_dir").string());
  EXPECT_EQ(bad.code, 2);
  EXPECT_THAT(bad.err, HasSubstr("some_dir: is a directory"));
  EXPECT_FALSE(fs::exists(m_dir / "ok.json"));
  // A FIFO's reader gets the report.
  const fs::path fifo = m_dir / "report.fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const std::string reader = "cat " + fifo.string() + " > " + (m_dir / "from_fifo").string() + " &";
  ASSERT_EQ(std::system(reader.c_str()), 0);
  EXPECT_EQ(run(args + "--json " + fifo.string()).code, 0);
  for (int i = 0; i < 50 && slurp(m_dir / "from_fifo").find("\"runs\"") == std::string::npos; ++i) ::usleep(20000);
  EXPECT_THAT(slurp(m_dir / "from_fifo"), HasSubstr("\"runs\""));
  // A run that fails writes nothing either.
  const Result failed =
      run("train --workload resnet50 --strategy loop-sink --steps-per-epoch 50 --num-parallel-workers 1 "
          "--op-timeout 0.001 --json " +
          (m_dir / "never.json").string());
  EXPECT_EQ(failed.code, 3);
  EXPECT_FALSE(fs::exists(m_dir / "never.json"));
}

/// Files in `dir` whose names start with "." (the staged outputs).
std::vector<std::string> hidden_files(const fs::path& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().filename().string().front() == '.') out.push_back(e.path().filename().string());
  return out;
}

TEST_F(CliTest, ATraceLargerThanTheFreeSpaceIsRefusedBeforeTheRun) {
  // 10^8 traced ResNet-50 steps of about 10^3 device ops each: tens of terabytes, more than any
  // test machine's disk has free.
  const fs::path trace = m_dir / "t.json", json = m_dir / "r.json";
  const Result r = run("train -s non-sink --workload resnet50 --epochs 100 --steps-per-epoch 1000000 --trace " +
                       trace.string() + " --json " + json.string());
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_THAT(r.err, HasSubstr("--trace " + trace.string() + ": the trace would take about"));
  EXPECT_THAT(r.err, HasSubstr(" TiB but its file system has "));
  EXPECT_THAT(r.err, HasSubstr("free; keep a window of steps with --trace-steps A:B"));
  EXPECT_EQ(r.out, "");
  EXPECT_FALSE(fs::exists(trace));
  EXPECT_FALSE(fs::exists(json));
  EXPECT_THAT(hidden_files(m_dir), ::testing::IsEmpty());
}

TEST_F(CliTest, AWriteThatFailsStopsTheRunAndLeavesNothing) {
  // A file-size limit stands in for a full disk: the trace's write fails with EFBIG after 1 MiB
  // (ulimit -f counts 1024-byte blocks), SIGXFSZ is ignored, and the run stops at the next slice.
  const fs::path trace = m_dir / "t.json", json = m_dir / "r.json";
  const std::string cmd = "ulimit -f 1024; " +
                          command("train -s non-sink --epochs 200 --trace " + trace.string() + " --json " +
                                  json.string()) +
                          " >" + (m_dir / "out").string() + " 2>" + (m_dir / "err").string();
  const int status = std::system(("bash -c '" + cmd + "'").c_str());
  ASSERT_TRUE(WIFEXITED(status)) << "killed by signal " << WTERMSIG(status);
  EXPECT_EQ(WEXITSTATUS(status), 2);
  const std::string err = slurp(m_dir / "err");
  EXPECT_THAT(err, HasSubstr("--trace " + trace.string() + ": cannot write: File too large"));
  EXPECT_THAT(err, HasSubstr("the run stopped"));
  EXPECT_EQ(slurp(m_dir / "out"), "");  // no report: the run did not end
  EXPECT_FALSE(fs::exists(trace));
  EXPECT_FALSE(fs::exists(json));
  EXPECT_THAT(hidden_files(m_dir), ::testing::IsEmpty());
  // A device that is always full (ENOSPC), written straight through.
  const Result full = run("train -s non-sink --epochs 200 --trace /dev/full --json " + json.string());
  EXPECT_EQ(full.code, 2);
  EXPECT_THAT(full.err, HasSubstr("--trace /dev/full: cannot write: No space left on device"));
  EXPECT_FALSE(fs::exists(json));
}

class CliSignalTest : public CliTest, public ::testing::WithParamInterface<int> {};

TEST_P(CliSignalTest, ASignalMidRunRemovesEveryStagingFile) {
  const int signo = GetParam();
  const fs::path trace = m_dir / "t.json", json = m_dir / "r.json";
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    const std::string err = (m_dir / "err").string();
    ::freopen("/dev/null", "w", stdout);
    ::freopen(err.c_str(), "w", stderr);
    ::setenv("ASCENDSIM_CONFIG_DIR", ASCENDSIM_SOURCE_DIR "/configs", 1);
    // Long enough never to finish first: 3.75 million steps.
    ::execl(ASCENDSIM_BIN, ASCENDSIM_BIN, "compare", "--epochs", "500", "--trace", trace.c_str(), "--trace-steps",
            "1:21", "--json", json.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  // The run is under way once its trace is staged and the first steps were written out.
  bool staged = false;
  for (int i = 0; i < 600 && !staged; ++i) {
    staged = staged_bytes(pid) > 0;
    if (!staged) ::usleep(20000);
  }
  ::usleep(200000);
  ASSERT_EQ(::kill(pid, signo), 0);
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(staged) << "the trace was never staged";
  ASSERT_TRUE(WIFEXITED(status)) << "killed by signal " << WTERMSIG(status);
  EXPECT_EQ(WEXITSTATUS(status), 128 + signo);
  EXPECT_THAT(slurp(m_dir / "err"), HasSubstr(std::string("stopped by SIG") + sigabbrev_np(signo)));
  EXPECT_FALSE(fs::exists(trace));
  EXPECT_FALSE(fs::exists(json));
  EXPECT_THAT(hidden_files(m_dir), ::testing::IsEmpty());
}

INSTANTIATE_TEST_SUITE_P(Signals, CliSignalTest, ::testing::Values(SIGINT, SIGTERM, SIGHUP),
                         [](const auto& p) { return std::string(sigabbrev_np(p.param)); });

TEST_F(CliTest, AReportThatCannotReachStandardOutputFailsTheCommand) {
  const fs::path json = m_dir / "r.json";
  for (const auto& [where, why] : {std::pair<const char*, const char*>{">/dev/full", "No space left on device"},
                                   {">&-", "Bad file descriptor"}}) {
    const std::string cmd =
        command("compare --steps-per-epoch 20 --json " + json.string()) + " " + where + " 2>" + (m_dir / "err").string();
    const int status = std::system(cmd.c_str());
    ASSERT_TRUE(WIFEXITED(status)) << where;
    EXPECT_EQ(WEXITSTATUS(status), 2) << where;
    EXPECT_THAT(slurp(m_dir / "err"),
                HasSubstr(std::string("standard output: the report could not be written (") + why + ")"))
        << where;
    EXPECT_FALSE(fs::exists(json)) << where;  // nothing put in place
  }
  // A command that only prints.
  const int info = std::system((command("info --workload lenet5") + " >/dev/full 2>/dev/null").c_str());
  EXPECT_EQ(WEXITSTATUS(info), 2);
  EXPECT_THAT(hidden_files(m_dir), ::testing::IsEmpty());
}

TEST_F(CliTest, AParameterSetTwiceIsRefusedNamingBoth) {
  const Result twice = run("compare --steps-per-epoch 3 --set host.op_launch_us=1 --set host.op_launch_us=2");
  EXPECT_EQ(twice.code, 2);
  EXPECT_THAT(twice.err,
              HasSubstr("--set host.op_launch_us=2: host.op_launch_us is already set by --set host.op_launch_us=1"));
  const Result flag_and_set =
      run("compare --steps-per-epoch 3 --num-parallel-workers 4 --set pipeline.num_parallel_workers=8");
  EXPECT_EQ(flag_and_set.code, 2);
  EXPECT_THAT(flag_and_set.err, HasSubstr("--set pipeline.num_parallel_workers=8: pipeline.num_parallel_workers is "
                                          "already set by --num-parallel-workers 4"));
  EXPECT_EQ(run("compare --steps-per-epoch 3 --set host.op_launch_us=1 --set link.doorbell_ns=900").code, 0);
}

TEST_F(CliTest, TooManyStepsNamesTheFlagThatMadeThem) {
  const Result spe = run("train -s non-sink --steps-per-epoch 1000000000000");
  EXPECT_EQ(spe.code, 2);
  EXPECT_THAT(spe.err, HasSubstr("--steps-per-epoch: 1 x 1000000000000 steps would simulate more than 100000000"));
  const Result epochs = run("train -s non-sink --steps-per-epoch 10 --epochs 1000000000000");
  EXPECT_EQ(epochs.code, 2);
  EXPECT_THAT(epochs.err, HasSubstr("--epochs: 1000000000000 x 10 steps would simulate"));
  const Result sink = run("train --sink-size 1000000000000 --steps-per-epoch 10");
  EXPECT_EQ(sink.code, 2);
  EXPECT_THAT(sink.err, HasSubstr("--sink-size: "));
}

TEST_F(CliTest, OutputDirectoriesAreMadeWithTheirParentsAndRemovedOnFailure) {
  const fs::path out = m_dir / "runs" / "new";
  const Result ok = run("profile --workload lenet5 --out " + out.string());
  ASSERT_EQ(ok.code, 0) << ok.err;
  EXPECT_TRUE(fs::exists(out / "aicore_op_detail.csv"));
  const Result bad = run("profile --workload nosuch --out " + (m_dir / "a" / "b").string());
  EXPECT_EQ(bad.code, 2);
  EXPECT_FALSE(fs::exists(m_dir / "a"));  // made for the outputs, removed with them
}

TEST_F(CliTest, OpSizesBeyondTheModelsArithmeticAreRejected) {
  const Result mm = run("op --type matmul --m 4000000000 --n 4000000000 --k 4000000000");
  EXPECT_EQ(mm.code, 2);
  EXPECT_THAT(mm.err, HasSubstr("exceeds the 2^40"));
  EXPECT_EQ(mm.out, "");
  const Result pad = run("op --type conv2d --n 1 --c 16 --h 8 --w 8 --k 16 --r 3 --s 3 --pad 1000000000");
  EXPECT_EQ(pad.code, 2);
  EXPECT_THAT(pad.err, HasSubstr("--pad 1000000000 must be smaller than the window"));
  const Result red = run("op --type reduce_sum --out-elements 1000 --elements 100");
  EXPECT_EQ(red.code, 2);
  EXPECT_THAT(red.err, HasSubstr("must divide --elements 100"));
}

TEST_F(CliTest, MapWorkersNameTheMapCallsTheyDoNotFit) {
  // One worker count per map() call of the script; a wrong count lists the calls, a word that is
  // not a count is named; nothing runs.
  const Result few = run("train -s loop-sink --set pipeline.map_workers=1,2");
  EXPECT_EQ(few.code, 2);
  EXPECT_THAT(few.err, HasSubstr("pipeline.map_workers"));
  EXPECT_THAT(few.err, HasSubstr("gives 2 worker count(s) but the recipe has 5 map() call(s): Map(TypeCast), "
                                 "Map(Resize), Map(Rescale), Map(Normalize), Map(HWC2CHW)"));
  EXPECT_EQ(few.out, "");
  const Result word = run("info --set pipeline.map_workers=1,x,1,1,1");
  EXPECT_EQ(word.code, 2);
  EXPECT_THAT(word.err, HasSubstr("'1,x,1,1,1': expected one whole number of workers"));
  const Result ok = run("info --set pipeline.map_workers=1,4,1,1,1");
  ASSERT_EQ(ok.code, 0) << ok.err;
  EXPECT_THAT(ok.out, HasSubstr("Map(Resize)"));
}

TEST_F(CliTest, OpTakesPaddingPerAxis) {
  // Inception's 1x7 convolution: --pad H,W pads the width only and keeps the 17x17 map; a
  // padding as wide as its window, or a value that is not H,W, is refused naming it.
  const Result row = run("op --type conv2d --n 8 --c 128 --h 17 --w 17 --k 128 --r 1 --s 7 --pad 0,3 --json -");
  ASSERT_EQ(row.code, 0) << row.err;
  const auto j = nlohmann::json::parse(row.out);
  EXPECT_EQ(j["macs"].get<std::int64_t>(), 8LL * 17 * 17 * 128 * 128 * 7) << row.out;
  const Result wide = run("op --type conv2d --n 1 --c 16 --h 8 --w 8 --k 16 --r 1 --s 7 --pad 0,7");
  EXPECT_EQ(wide.code, 2);
  EXPECT_THAT(wide.err, HasSubstr("--pad 0,7 must be smaller than the window (1x7)"));
  const Result junk = run("op --type conv2d --n 1 --c 16 --h 8 --w 8 --k 16 --r 3 --s 3 --pad 1,x");
  EXPECT_EQ(junk.code, 2);
  EXPECT_THAT(junk.err, HasSubstr("--pad '1,x': expected P or H,W"));
}

TEST_F(CliTest, ARunBeyondTheSimulatorsTimeRangeFailsSayingSo) {
  // A resize of 2 s per sample on the one worker of its map call: 4096-sample batches take hours
  // each, and 2000 of them need more than the 2^63 ps the kernel's clock holds. A 10^7 s op
  // timeout must not wrap.
  const Result r =
      run("train -s loop-sink --batch-size 4096 --steps-per-epoch 2000 --num-parallel-workers 1 "
          "--op-timeout 10000000 --set host.map_op_overhead_us=1000000 --set host.resize_ns_per_value=1000000 --json " +
          (m_dir / "r.json").string());
  EXPECT_EQ(r.code, 3);
  EXPECT_THAT(r.err, HasSubstr("more simulated time than the simulator's range"));
  EXPECT_THAT(r.err, Not(HasSubstr("GetNext timed out")));
  EXPECT_FALSE(fs::exists(m_dir / "r.json"));
  // What cannot finish within the range is refused before it starts: 10^8 ResNet-152 steps need
  // 269 days of device compute alone.
  const Result refused =
      run("train -s loop-sink --workload resnet152 --batch-size 128 --sink-size 100000000 "
          "--steps-per-epoch 5");
  EXPECT_EQ(refused.code, 2);
  EXPECT_THAT(refused.err, HasSubstr("beyond the simulator's range"));
}

TEST_F(CliTest, OutOfMemoryNamesTheLargestPartAndInfoSaysItDoesNotFit) {
  // 8192 queued batches of ResNet-50 at batch 256 are 1.15 TiB: the queue is to blame, not the batch.
  const Result q = run("compare --workload resnet50 --batch-size 256 --set queue.capacity=8192 --steps-per-epoch 2");
  EXPECT_EQ(q.code, 2);
  EXPECT_THAT(q.err, HasSubstr("--set queue.capacity=8192"));
  EXPECT_THAT(q.err, HasSubstr("reduce queue.capacity"));
  EXPECT_THAT(q.err, Not(HasSubstr("reduce --batch-size")));
  // Non-sink has no data queue: the same configuration runs.
  EXPECT_EQ(
      run("train -s non-sink --workload resnet50 --batch-size 256 --set queue.capacity=8192 --steps-per-epoch 2").code,
      0);
  const Result info = run("info --workload resnet152 --batch-size 4096");
  EXPECT_EQ(info.code, 2);
  EXPECT_THAT(info.out, HasSubstr("fits device memory        non-sink no, sink modes no"));
  EXPECT_THAT(info.err, HasSubstr("reduce --batch-size"));
  const Result fits = run("info --workload resnet50 --batch-size 256 --set queue.capacity=8192");
  EXPECT_EQ(fits.code, 0);
  EXPECT_THAT(fits.out, HasSubstr("non-sink yes, sink modes no"));
}

TEST_F(CliTest, PerStepDetailGoesToItsOwnFile) {
  const fs::path csv = m_dir / "steps.csv", json = m_dir / "r.json";
  ASSERT_EQ(run("train -s non-sink --steps-per-epoch 7 --per-step " + csv.string() + " --json " + json.string()).code,
            0);
  std::istringstream lines(slurp(csv));
  std::string line;
  std::getline(lines, line);
  EXPECT_EQ(line, "strategy,step,step_s,iteration_interval_s,fp_bp_s,tail_s");
  double sum = 0;
  int rows = 0;
  while (std::getline(lines, line)) {
    ++rows;
    std::vector<std::string> f;
    std::stringstream cells(line);
    for (std::string c; std::getline(cells, c, ',');) f.push_back(c);
    ASSERT_EQ(f.size(), 6u);
    sum += std::stod(f[2]);
    EXPECT_NEAR(std::stod(f[3]) + std::stod(f[4]) + std::stod(f[5]), std::stod(f[2]), 1e-9);
  }
  EXPECT_EQ(rows, 7);
  const auto j = nlohmann::json::parse(slurp(json));
  EXPECT_NEAR(sum, j["runs"][0]["sim_time_s"].get<double>(), 1e-9);
  EXPECT_EQ(run("sweep --param sink_size --values 1,2 --per-step " + csv.string()).code, 2);
}

TEST_F(CliTest, SuiteAndDiffGuardAUsersFigures) {
  const std::string suite = file("suite.yaml",
                                 "name: mine\n"
                                 "runs:\n"
                                 "  - name: lenet\n"
                                 "    workload: lenet5\n"
                                 "    steps_per_epoch: 40\n"
                                 "  - name: slow-launch\n"
                                 "    workload: lenet5\n"
                                 "    strategies: [non-sink]\n"
                                 "    steps_per_epoch: 40\n"
                                 "    set: {host.op_launch_us: 20}\n");
  const fs::path a = m_dir / "a", b = m_dir / "b";
  ASSERT_EQ(run("suite " + suite + " --out " + a.string() + " -q").code, 0);
  ASSERT_EQ(run("suite " + suite + " --out " + b.string() + " -q").code, 0);
  const auto index = nlohmann::json::parse(slurp(a / "index.json"));
  ASSERT_EQ(index["entries"].size(), 2u);
  EXPECT_EQ(index["entries"][1]["strategies"][0], "non-sink");
  EXPECT_TRUE(fs::exists(a / "lenet.json"));
  // Against itself: nothing moves.
  const Result same = run("diff " + a.string() + " " + b.string());
  EXPECT_EQ(same.code, 0) << same.out << same.err;
  EXPECT_THAT(same.out, HasSubstr("0 past the tolerance"));
  // A slower launch moves the launch phase and the step time, and the JUnit report says so.
  const fs::path base = m_dir / "base.json", slow = m_dir / "slow.json", junit = m_dir / "junit.xml";
  ASSERT_EQ(run("compare --steps-per-epoch 40 --json " + base.string()).code, 0);
  ASSERT_EQ(run("compare --steps-per-epoch 40 --set host.op_launch_us=20 --json " + slow.string()).code, 0);
  EXPECT_EQ(run("diff " + base.string() + " " + base.string()).code, 0);
  const Result moved = run("diff " + base.string() + " " + slow.string() + " --junit " + junit.string());
  EXPECT_EQ(moved.code, 1);
  EXPECT_THAT(moved.out, HasSubstr("non-sink    breakdown_s.launch"));
  EXPECT_THAT(moved.out, HasSubstr("step_time_ms.mean"));
  EXPECT_THAT(moved.out, Not(HasSubstr("loop-sink   breakdown_s.launch")));  // no op launches to slow down
  const std::string xml = slurp(junit);
  EXPECT_THAT(xml, HasSubstr("<testsuite name=\"ascendsim diff\""));
  EXPECT_THAT(xml, HasSubstr("name=\"breakdown_s.launch\"><failure"));
  // A larger tolerance lets it pass; different workloads are not compared.
  EXPECT_EQ(run("diff " + base.string() + " " + slow.string() + " --tolerance 500%").code, 0);
  const fs::path other = m_dir / "other.json";
  ASSERT_EQ(run("compare --workload resnet18 --steps-per-epoch 3 --json " + other.string()).code, 0);
  const Result mismatch = run("diff " + base.string() + " " + other.string());
  EXPECT_EQ(mismatch.code, 2);
  EXPECT_THAT(mismatch.err, HasSubstr("different workload"));
  // A suite file with a typo is refused naming the key.
  const Result typo = run("suite " + file("bad.yaml", "runs:\n  - name: x\n    worklaod: lenet5\n") + " --out " +
                          (m_dir / "c").string());
  EXPECT_EQ(typo.code, 2);
  EXPECT_THAT(typo.err, HasSubstr("unknown key 'worklaod'"));
  EXPECT_FALSE(fs::exists(m_dir / "c" / "index.json"));
}

TEST_F(CliTest, ASuiteRunTakesUbFusionAsTheFlagDoes) {
  const std::string suite = file("ub.yaml",
                                 "runs:\n"
                                 "  - name: off\n"
                                 "    workload: lenet5\n"
                                 "    strategies: [graph-sink]\n"
                                 "    steps_per_epoch: 10\n"
                                 "    ub_fusion: false\n");
  const fs::path out = m_dir / "ub";
  ASSERT_EQ(run("suite " + suite + " --out " + out.string() + " -q").code, 0);
  const fs::path flag = m_dir / "flag.json";
  ASSERT_EQ(run("train -s graph-sink --workload lenet5 --steps-per-epoch 10 --ub-fusion false --json " + flag.string())
                .code,
            0);
  const auto from_suite = nlohmann::json::parse(slurp(out / "off.json")),
             from_flag = nlohmann::json::parse(slurp(flag));
  EXPECT_EQ(from_suite["recipe"]["ub_fusion"], false);
  EXPECT_EQ(from_suite["graph_passes"], from_flag["graph_passes"]);
  EXPECT_EQ(from_suite["runs"][0]["step_time_ms"], from_flag["runs"][0]["step_time_ms"]);
  const Result bad =
      run("suite " + file("bad-ub.yaml", "runs:\n  - name: x\n    workload: lenet5\n    ub_fusion: maybe\n") +
          " --out " + (m_dir / "d").string());
  EXPECT_EQ(bad.code, 2);
  EXPECT_THAT(bad.err, HasSubstr("'ub_fusion' is true or false"));
  EXPECT_FALSE(fs::exists(m_dir / "d" / "index.json"));
}

TEST_F(CliTest, SequenceParallelismNamesItsFlagAndASuiteRunTakesIt) {
  const std::string gpt = "--workload gpt --layers 1 --hidden 64 --heads 4 --ffn 128 --seq-length 15 --vocab 128 ";
  const Result alone = run("train -s loop-sink " + gpt + "--sequence-parallel");
  EXPECT_EQ(alone.code, 2);
  EXPECT_THAT(alone.err, HasSubstr("--sequence-parallel: splits the tokens among the ranks of a tensor-parallel group; "
                                   "give --tensor-parallel 2 or more (it is 1)"));
  const Result odd =
      run("train -s loop-sink " + gpt + "--batch-size 1 --devices 2 --tensor-parallel 2 --sequence-parallel");
  EXPECT_EQ(odd.code, 2);
  EXPECT_THAT(odd.err, HasSubstr("--sequence-parallel: the 15 tokens a tensor-parallel group computes at once"));
  const std::string suite = file("sp.yaml",
                                 "runs:\n"
                                 "  - name: sp\n"
                                 "    workload: gpt\n"
                                 "    sequence_parallel: true\n");
  const Result refused = run("suite " + suite + " --out " + (m_dir / "sp").string() + " -q");
  EXPECT_EQ(refused.code, 2);
  EXPECT_THAT(refused.err, HasSubstr("give --tensor-parallel 2 or more"));
  const Result bad =
      run("suite " + file("bad-sp.yaml", "runs:\n  - name: x\n    workload: gpt\n    sequence_parallel: maybe\n") +
          " --out " + (m_dir / "d").string());
  EXPECT_EQ(bad.code, 2);
  EXPECT_THAT(bad.err, HasSubstr("'sequence_parallel' is true or false"));
}

TEST_F(CliTest, TableColumnsAreSizedToTheirContent) {
  // A slow pipeline gives wide step times; every row still splits into as many columns as its
  // header, two spaces apart.
  const Result r =
      run("train -s loop-sink --workload resnet50 --steps-per-epoch 20 --num-parallel-workers 1 "
          "--set host.map_op_overhead_us=100000");
  ASSERT_EQ(r.code, 0) << r.err;
  std::istringstream lines(r.out);
  std::vector<std::vector<std::string>> table;
  auto split = [](const std::string& line) {
    std::vector<std::string> cells;
    std::size_t at = 0;
    while (at < line.size()) {
      const auto end = line.find("  ", at);
      cells.push_back(line.substr(at, end == std::string::npos ? std::string::npos : end - at));
      if (end == std::string::npos) break;
      at = line.find_first_not_of(' ', end);
    }
    return cells;
  };
  std::string line, header;
  int checked = 0;
  while (std::getline(lines, line)) {
    if (line.rfind("strategy", 0) == 0) header = line;
    if (line.rfind("loop-sink", 0) == 0 && !header.empty() && line.find("advice") == std::string::npos &&
        line.find("data-bound") == std::string::npos) {
      EXPECT_EQ(split(line).size(), split(header).size()) << header << "\n" << line;
      ++checked;
    }
  }
  EXPECT_EQ(checked, 3);  // figures, breakdown, step trace
  EXPECT_THAT(r.out, HasSubstr("iteration_interval"));
  // One-time set-up has its own phase: PCIe time (h2d) is transfers only.
  EXPECT_THAT(r.out, HasSubstr("setup"));
}

TEST_F(CliTest, TheDataVerdictUsesTheStrategysRealConsumption) {
  const fs::path json = m_dir / "r.json";
  ASSERT_EQ(run("compare --steps-per-epoch 200 --json " + json.string()).code, 0);
  const auto j = nlohmann::json::parse(slurp(json));
  const auto& non_sink = j["runs"][0];
  const double rate = non_sink["data"]["strategy_batches_per_s"].get<double>();
  // The strategy's rate is its steps over the time it did not wait for data (the first batch's
  // wait, set-up in the breakdown, included), well below what the device alone could take, and the
  // verdict says the host bounds it.
  const double waited = non_sink["breakdown_s"]["wait_data"].get<double>() +
                        non_sink["breakdown_s"]["host_data"].get<double>() +
                        non_sink["data"]["first_fill_s"].get<double>();
  EXPECT_GT(non_sink["data"]["first_fill_s"].get<double>(), 0);
  EXPECT_NEAR(rate, 200 / (non_sink["sim_time_s"].get<double>() - waited), 1e-6 * rate);
  EXPECT_LT(rate, 0.5 * non_sink["data"]["device_batches_per_s"].get<double>());
  const std::string verdict = non_sink["data"]["verdict"].get<std::string>();
  EXPECT_THAT(verdict, HasSubstr("batches/s when not waiting"));
  EXPECT_THAT(verdict, HasSubstr("goes to the host's launches"));
}

TEST_F(CliTest, EveryReportGivesTheSteadyStateAndTheWarmUp) {
  // Two epochs of 50 steps: steady from step 51 to step 99. JSON, text and HTML give the same.
  const fs::path html = m_dir / "s.html", json = m_dir / "s.json";
  const Result r = run("compare --steps-per-epoch 50 --epochs 2 --html " + html.string() + " --json " + json.string());
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(slurp(json));
  const std::string page = slurp(html);
  const auto at = page.find("<table id=\"summary\">");
  ASSERT_NE(at, std::string::npos);
  const std::string table = page.substr(at, page.find("</table>", at) - at);
  EXPECT_THAT(r.out, HasSubstr("steady: the mean step from step 51 on (the second epoch)"));
  for (const auto& run_j : j["runs"]) {
    const auto& st = run_j["steady_state"];
    EXPECT_EQ(st["from_step"].get<std::int64_t>(), 51);
    EXPECT_EQ(st["steps"].get<std::int64_t>(), 49);
    const double steady = st["step_ms_mean"].get<double>(), warm = run_j["warmup_s"].get<double>();
    // The whole run is the warm-up's steps, the steady ones and the last: the warm-up is what the
    // first 50 took beyond 50 steady steps, so mean x 100 = 50 x steady + warm-up + steady steps
    // + the last step, which lies between the steady step and the whole run.
    const double total_ms = run_j["step_time_ms"]["mean"].get<double>() * 100;
    const double last_ms = total_ms - 99 * steady - 1e3 * warm;
    EXPECT_GT(last_ms, 0.5 * steady) << run_j["strategy"];
    EXPECT_LT(last_ms, 3 * steady) << run_j["strategy"];
    if (run_j["strategy"] == "graph-sink" || run_j["strategy"] == "loop-sink") {
      EXPECT_GT(warm, 0) << run_j["strategy"];  // the first step loads the graph
    }
    EXPECT_NEAR(st["samples_per_s"].get<double>(), 32 / (1e-3 * steady), 1e-6 * 32 / (1e-3 * steady));
    EXPECT_THAT(table, HasSubstr(fmt::format("<td>{:.4f}</td><td>{:.4f}</td>", steady, warm)));
    EXPECT_THAT(r.out, HasSubstr(fmt::format("{:.4f}", steady)));
  }
}

TEST_F(CliTest, TheHtmlPipelineTreeIsTheJsonsTree) {
  // One row per stage of the execution tree; per strategy its busy fraction and queue usage, as
  // the JSON's data.tree gives them.
  const fs::path html = m_dir / "t.html", json = m_dir / "t.json";
  const Result r = run("compare --steps-per-epoch 50 --html " + html.string() + " --json " + json.string());
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(slurp(json));
  const std::string page = slurp(html);
  const auto at = page.find("<table id=\"pipeline-tree\">");
  ASSERT_NE(at, std::string::npos);
  std::string table = page.substr(at, page.find("</table>", at) - at);
  // A stage's name may break after its commas and before its parentheses.
  for (auto w = table.find("<wbr>"); w != std::string::npos; w = table.find("<wbr>", w)) table.erase(w, 5);
  const auto& tree = j["runs"][0]["data"]["tree"];
  ASSERT_EQ(tree.size(), 8u);  // the source, five map calls, the batch op, the device queue
  for (std::size_t i = 0; i < tree.size(); ++i) {
    std::string row = fmt::format("<tr><td class=\"stage\">{}</td><td>{}</td>", tree[i]["stage"].get<std::string>(),
                                  tree[i]["workers"].get<std::int64_t>());
    for (const auto& run_j : j["runs"]) {
      const auto& st = run_j["data"]["tree"][i];
      row += fmt::format("<td>{:.1f}%{}</td><td>{}</td>", 100 * st["busy_fraction"].get<double>(),
                         st["bounds_pipeline"].get<bool>() ? " (slowest)" : "",
                         st["queue_usage"].is_null() ? std::string("-")
                                                     : fmt::format("{:.1f}%", 100 * st["queue_usage"].get<double>()));
    }
    EXPECT_THAT(table, HasSubstr(row + "</tr>")) << i;
  }
}

TEST_F(CliTest, TheHtmlStepTraceShowsEachPartsMeanMedianAndP99) {
  const fs::path html = m_dir / "r.html", json = m_dir / "r.json";
  const Result r = run("compare --steps-per-epoch 50 --html " + html.string() + " --json " + json.string());
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(slurp(json));
  const std::string page = slurp(html);
  const auto at = page.find("<table id=\"step-trace\">");
  ASSERT_NE(at, std::string::npos);
  const std::string table = page.substr(at, page.find("</table>", at) - at);
  std::vector<std::string> cells;
  const std::regex cell_re("<td>([^<]*)</td>");
  for (auto it = std::sregex_iterator(table.begin(), table.end(), cell_re); it != std::sregex_iterator(); ++it)
    cells.push_back((*it)[1]);
  ASSERT_EQ(cells.size(), 4u * 10);  // strategy, then mean, median, p99 of three parts
  for (std::size_t i = 0; i < 4; ++i) {
    const auto& run_j = j["runs"][i];
    EXPECT_EQ(cells[i * 10], run_j["strategy"].get<std::string>());
    std::size_t k = i * 10 + 1;
    for (const char* part : {"iteration_interval", "fp_bp", "tail"})
      for (const char* stat : {"mean", "p50", "p99"})
        EXPECT_EQ(cells[k++], fmt::format("{:.4f}", run_j["step_trace_ms"][part][stat].get<double>()))
            << run_j["strategy"] << " " << part << " " << stat;
  }
}

TEST_F(CliTest, AStepTraceWindowListsEachStep) {
  const fs::path html = m_dir / "r.html";
  const Result r = run("compare --steps-per-epoch 50 --step-trace 10:13 --html " + html.string());
  ASSERT_EQ(r.code, 0) << r.err;
  for (const char* s : {"non-sink", "data-sink", "graph-sink", "loop-sink"})
    EXPECT_THAT(r.out, HasSubstr(std::string("step trace of ") + s + ", steps 10 to 12 (ms)"));
  // Each row: the three parts add up to the step.
  std::istringstream lines(r.out);
  int rows = 0;
  for (std::string line; std::getline(lines, line);) {
    std::istringstream cells(line);
    std::string step;
    double a = 0, b = 0, c = 0, total = 0;
    if (!(cells >> step >> a >> b >> c >> total) || (step != "10" && step != "11" && step != "12")) continue;
    EXPECT_NEAR(a + b + c, total, 2e-4) << line;
    ++rows;
  }
  EXPECT_EQ(rows, 4 * 3);
  EXPECT_EQ(occurrences(slurp(html), "class=\"step-window\""), 4u);
  EXPECT_EQ(run("compare --step-trace 3:3").code, 2);
  EXPECT_EQ(run("compare --step-trace 0:2000").code, 2);
}

TEST_F(CliTest, ProfileWritesMindSporeStyleOpTables) {
  const fs::path out = m_dir / "p", info = m_dir / "info.json";
  const Result r = run("profile --workload resnet50 --batch-size 32 --out " + out.string());
  ASSERT_EQ(r.code, 0) << r.err;
  ASSERT_EQ(run("info --workload resnet50 --batch-size 32 --json " + info.string()).code, 0);
  const auto j = nlohmann::json::parse(slurp(info));
  auto rows = [&](const fs::path& f) {
    std::vector<std::vector<std::string>> out_rows;
    std::istringstream lines(slurp(f));
    std::string line;
    std::getline(lines, line);
    while (std::getline(lines, line)) {
      std::vector<std::string> cells;
      std::stringstream ss(line);
      for (std::string c; std::getline(ss, c, ',');) cells.push_back(c);
      out_rows.push_back(cells);
    }
    return out_rows;
  };
  const auto detail = rows(out / "aicore_op_detail.csv"), types = rows(out / "aicore_op_type.csv");
  EXPECT_EQ(static_cast<std::int64_t>(detail.size()), j["ops_per_step"].get<std::int64_t>());
  double total_ms = 0, share = 0;
  std::int64_t count = 0;
  for (const auto& t : types) {
    total_ms += std::stod(t[1]);
    count += std::stoll(t[2]);
    share += std::stod(t[3]);
  }
  // The op types add up to the step's AI-core time, every op once, 100% in all.
  EXPECT_NEAR(total_ms, j["device_compute_per_step_s"].get<double>() * 1e3, 1e-3);
  EXPECT_EQ(count, j["ops_per_step"].get<std::int64_t>());
  EXPECT_NEAR(share, 100.0, 0.01);
  EXPECT_THAT(detail[0][0], HasSubstr("-op0"));
  EXPECT_THAT(r.out, HasSubstr("top op types"));
  // CANN's op summary: a row per op, its duration and each pipe's share of its cycles.
  const auto summary = rows(out / "op_summary.csv");
  ASSERT_EQ(summary.size(), detail.size());
  for (std::size_t i = 0; i < summary.size(); ++i) {
    ASSERT_EQ(summary[i].size(), 15u);
    EXPECT_EQ(summary[i][0], detail[i][0]);
    EXPECT_NEAR(std::stod(summary[i][4]), std::stod(detail[i][2]) * 1e3, 1.5e-3);  // us against ms, each rounded
    for (std::size_t c = 7; c < 14; ++c) {
      EXPECT_GE(std::stod(summary[i][c]), 0.0);
      EXPECT_LE(std::stod(summary[i][c]), 1.0);
    }
  }
  EXPECT_EQ(slurp(out / "op_summary.csv").rfind("Op Name,OP Type,Task Type,Block Dim,Task Duration(us)", 0), 0u);
}

TEST_F(CliTest, ADataScriptIsThePipelineInfoAndTheRunsShowAndABadOneIsNamed) {
  const std::string script = ASCENDSIM_SOURCE_DIR "/configs/data/resnet-cifar10.yaml";
  const Result info = run("info --workload resnet18 --data " + script);
  ASSERT_EQ(info.code, 0) << info.err;
  EXPECT_THAT(info.out, HasSubstr("Cifar10Dataset                                12 worker(s)"));
  EXPECT_THAT(info.out, HasSubstr("Map(RandomCrop,RandomHorizontalFlip,Resize,Rescale,Normalize,HWC2CHW)   8 worker(s)"));
  // Bad scripts: one error line naming the file and what is wrong, exit 2, nothing written.
  const fs::path json = m_dir / "d.json";
  std::ofstream(m_dir / "op.yaml") << "dataset: cifar10\nmaps:\n  - ops: [Sharpen]\n";
  std::ofstream(m_dir / "size.yaml") << "dataset: cifar10\nmaps:\n  - ops: [{Resize: {size: [227, 227]}}, Rescale, HWC2CHW]\n";
  std::ofstream(m_dir / "zero.yaml") << "dataset: cifar10\nmaps:\n  - {workers: 0, ops: [HWC2CHW]}\n";
  std::ofstream(m_dir / "neg.yaml") << "dataset: cifar10\nreader_workers: -3\n";
  std::ofstream(m_dir / "huge.yaml") << "dataset: cifar10\nsamples: 9223372036854775808\n";
  std::ofstream(m_dir / "nan.yaml")
      << "dataset: imagenet\nmaps:\n  - ops: [{RandomCropDecodeResize: {size: 224, scale: [nan, 1]}}]\n";
  std::ofstream(m_dir / "empty.yaml") << "";
  // A link to a script is the script.
  fs::create_symlink(script, m_dir / "link.yaml");
  const Result linked = run("info --workload resnet18 --data " + (m_dir / "link.yaml").string());
  EXPECT_EQ(linked.code, 0) << linked.err;
  EXPECT_EQ(linked.out, info.out);
  for (const auto& [args, says] : std::vector<std::pair<std::string, std::string>>{
           {"--data " + m_dir.string(), "a directory; give a data script (YAML) file"},
           {"--data " + (m_dir / "none.yaml").string(), "none.yaml: no such file"},
           {"--data " + (m_dir / "op.yaml").string(), "unknown map op 'Sharpen'"},
           {"--data " + (m_dir / "size.yaml").string(), "size.yaml: the maps give 227x227x3 images (height x width x channels) but resnet18 takes 224x224x3"},
           {"--data /dev/full", "--data /dev/full: not a regular file"},
           {"--data " + (m_dir / "zero.yaml").string(), "'workers' is 0"},
           {"--data " + (m_dir / "neg.yaml").string(), "'reader_workers' is -3"},
           {"--data " + (m_dir / "huge.yaml").string(), "'samples' is 9223372036854775808"},
           {"--data " + (m_dir / "nan.yaml").string(), "'scale' expects a number, got 'nan'"},
           {"--data " + (m_dir / "empty.yaml").string(), "a data script is a mapping"}}) {
    for (const char* cmd : {"info", "train --strategy loop-sink"}) {
      const Result r = run(std::string(cmd) + " --workload resnet18 " + args + " --json " + json.string());
      EXPECT_EQ(r.code, 2) << cmd << " " << args << "\n" << r.err;
      EXPECT_THAT(r.err, HasSubstr(says)) << cmd << " " << args;
      EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
      EXPECT_FALSE(fs::exists(json));
    }
  }
}

TEST_F(CliTest, TheLlmTrainingFlagsRefuseHostileValuesInOneLineAndWriteNothing) {
  // --gradient-accumulation, --kv-heads, --framework, --optimizer-shard-level (level 0 is not
  // "off": it is refused as the others) and the checkpoint and failure flags as a user may mistype
  // them: one error line naming the flag, exit 2, no report. A link to a shipped preset is not a
  // preset's name.
  const fs::path json = m_dir / "t.json";
  fs::create_symlink(ASCENDSIM_SOURCE_DIR "/configs/frameworks/vllm-ascend-eager.yaml", m_dir / "fw.yaml");
  for (const auto& [args, says] : std::vector<std::pair<std::string, std::string>>{
           {"--gradient-accumulation 0", "--gradient-accumulation: must be at least 1 (1: no accumulation), got 0"},
           {"--gradient-accumulation -4", "--gradient-accumulation: must be at least 1 (1: no accumulation), got -4"},
           {"--gradient-accumulation 9223372036854775808", "'--gradient-accumulation' is invalid"},
           {"--gradient-accumulation nan", "'--gradient-accumulation' is invalid"},
           {"--gradient-accumulation 5", "the batch of 32 does not divide into 5 micro-batches"},
           {"--kv-heads 0", "--kv-heads 0: must be positive"},
           {"--kv-heads -1", "--kv-heads -1: must be positive"},
           {"--kv-heads 9223372036854775808", "'--kv-heads' is invalid"},
           {"--kv-heads nan", "'--kv-heads' is invalid"},
           {"--kv-heads 5", "--kv-heads 5 must divide the 32 query heads"},
           {"--framework nope", "--framework: no preset 'nope'"},
           {"--framework " + m_dir.string(), "is not a preset's name"},
           {"--framework /dev/full", "'/dev/full' is not a preset's name"},
           {"--framework " + (m_dir / "fw").string(), "is not a preset's name"},
           {"--devices 2 --optimizer-shard-level 0", "--optimizer-shard-level: is 1 (the optimizer state"},
           {"--devices 2 --optimizer-shard-level 3", "level2), got 3"},
           {"--devices 2 --optimizer-shard-level -2", "level2), got -2"},
           {"--devices 2 --optimizer-shard-level 9223372036854775808", "'--optimizer-shard-level' is invalid"},
           {"--devices 2 --optimizer-shard-level nan", "'--optimizer-shard-level' is invalid"},
           {"--optimizer-shard-level 2", "--optimizer-shard: shards the optimizer state across data-parallel ranks"},
           {"--checkpoint-every 0", "--checkpoint-every: must be a positive number of steps, got 0"},
           {"--checkpoint-every -5", "--checkpoint-every: must be a positive number of steps, got -5"},
           {"--checkpoint-every 9223372036854775808", "'--checkpoint-every' is invalid"},
           {"--checkpoint-every nan", "'--checkpoint-every' is invalid"},
           {"--checkpoint-every ten", "'--checkpoint-every' is invalid"},
           {"--checkpoint-async", "--checkpoint-async: saves asynchronously only with --checkpoint-every"},
           {"--checkpoint-every 2 --device-mtbf-hours 0", "--device-mtbf-hours: a device's mean time between failures in hours, above 0 and at most 1e+08, got 0"},
           {"--checkpoint-every 2 --device-mtbf-hours -3", "--device-mtbf-hours: a device's mean time between failures in hours, above 0 and at most 1e+08, got -3"},
           {"--checkpoint-every 2 --device-mtbf-hours nan", "--device-mtbf-hours: a device's mean time between failures in hours, above 0 and at most 1e+08, got nan"},
           {"--checkpoint-every 2 --device-mtbf-hours 9223372036854775808", "--device-mtbf-hours: a device's mean time between failures in hours, above 0 and at most 1e+08, got 9.223372036854776e+18"},
           {"--checkpoint-every 2 --device-mtbf-hours weekly", "'--device-mtbf-hours' is invalid"},
           {"--device-mtbf-hours 1000", "--device-mtbf-hours: a restart resumes from the last checkpoint, whose cost the run simulates: give --checkpoint-every too"},
           {"--checkpoint-every 2 --device-mtbf-hours 1000 --fault-seeds 0", "--fault-seeds: draws of the run with failures: from 1 to 1000000, got 0"},
           {"--checkpoint-every 2 --device-mtbf-hours 1000 --fault-seeds -1", "--fault-seeds: draws of the run with failures: from 1 to 1000000, got -1"},
           {"--checkpoint-every 2 --device-mtbf-hours 1000 --fault-seeds 9223372036854775808", "'--fault-seeds' is invalid"},
           {"--checkpoint-every 2 --device-mtbf-hours 1000 --fault-seeds nan", "'--fault-seeds' is invalid"},
           {"--fault-seeds 10", "--fault-seeds: draws failures only with --device-mtbf-hours"}}) {
    const Result r = run("train --strategy graph-sink --workload llama-7b --layers 2 --batch-size 32 " + args +
                         " --json " + json.string());
    EXPECT_EQ(r.code, 2) << args << "\n" << r.err;
    EXPECT_THAT(r.err, HasSubstr(says)) << args;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_FALSE(fs::exists(json)) << args;
  }
}

TEST_F(CliTest, ValidatePrintsPublishedAgainstSimulated) {
  const Result r = run("validate");
  ASSERT_EQ(r.code, 0) << r.err;
  // Every figure of the file is a row; the count of compared ones is the file's, less the rows
  // marked not_compared.
  const auto figures = ascendsim::sim::load_figures(ASCENDSIM_SOURCE_DIR "/bench/validation/figures.yaml",
                                         ASCENDSIM_SOURCE_DIR "/configs");
  std::size_t counted_in_file = 0;
  for (const auto& f : figures) {
    EXPECT_THAT(r.out, HasSubstr("\n" + f.id + " "));
    counted_in_file += f.not_compared.empty();
  }
  for (const char* id : {"\nC1 ", "\nC2 ", "\nC3 ", "\nC4 ", "\nC5 ", "\nC8-nocache ", "\nC8-cache ", "\nC7 "})
    EXPECT_THAT(r.out, HasSubstr(id));
  EXPECT_THAT(r.out, HasSubstr(" of " + std::to_string(counted_in_file) + " compared figure(s) within 15%"));
  // The four C9 rows are simulated and shown, their errors in parentheses, and not counted.
  for (const char* id : {"\nC9-first-nocache ", "\nC9-first-cache ", "\nC9-nocache ", "\nC9-cache "})
    EXPECT_THAT(r.out, HasSubstr(id));
  EXPECT_THAT(r.out, HasSubstr("(not counted: GPU devices, not modelled"));
  EXPECT_THAT(r.out, HasSubstr("s/pass"));
  // The chip's fp16 peak is its configuration: 32 cores x 4096 MACs x 1 GHz x 2.
  EXPECT_THAT(r.out, HasSubstr("262.1 TFLOPS"));
  // The validation page: one bar per compared figure, the table with every figure and its source.
  const fs::path html = m_dir / "v.html", json = m_dir / "v.json";
  ASSERT_EQ(run("validate --html " + html.string() + " --json " + json.string()).code, 0);
  const auto rows = nlohmann::json::parse(slurp(json));
  std::size_t compared = 0, shown = 0;
  for (const auto& row : rows) {
    compared += row["counted"].get<bool>();
    shown += !row["simulated"].is_null();
    if (!row["counted"].get<bool>()) {
      EXPECT_FALSE(row["note"].get<std::string>().empty()) << row["id"];
    }
  }
  EXPECT_EQ(compared, counted_in_file);
  EXPECT_EQ(shown, figures.size());
  const std::string page = slurp(html);
  EXPECT_EQ(page.find("<script"), std::string::npos);
  EXPECT_EQ(occurrences(page, "class=\"bar\""), compared);
  EXPECT_EQ(occurrences(page, "<tr><td>"), rows.size());
  EXPECT_THAT(page, HasSubstr("mindspore-ai/models"));
  const Result bad = run("validate --figures " + file("f.yaml", "figures:\n  - id: X\n    value: 1\n    measur: x\n"));
  EXPECT_EQ(bad.code, 2);
  EXPECT_THAT(bad.err, HasSubstr("unknown key 'measur'"));
  // A figure not compared is not fitted to: calibrate refuses to, and a figure cannot be both.
  const Result fit = run("calibrate --fit host.device_queue_push_us --only C1,C9-cache");
  EXPECT_EQ(fit.code, 2);
  EXPECT_THAT(fit.err, HasSubstr("--only C9-cache: the figure is not compared (GPU devices"));
  const Result both = run("validate --figures " +
                          file("b.yaml", "figures:\n  - id: X\n    value: 1\n    unit: s\n    measure: epoch_s\n"
                                         "    host_bound: true\n    not_compared: storage\n"
                                         "    run: {workload: lenet5, epochs: 2}\n"));
  EXPECT_EQ(both.code, 2);
  EXPECT_THAT(both.err, HasSubstr("drop host_bound or not_compared"));
  // A serving figure is measured by the requests' TPOT or TTFT, in one launch mode; a training run
  // is not.
  const std::string serving = "    run: {serve: true, workload: gpt, gpt_size: gpt2-small, requests: 4, rate: 2, "
                              "prompt_tokens: 32, output_tokens: 8";
  const Result step = run("validate --figures " +
                          file("s1.yaml", "figures:\n  - id: S\n    value: 1\n    unit: ms\n    measure: step_time_ms\n" +
                                              serving + "}\n"));
  EXPECT_EQ(step.code, 2);
  EXPECT_THAT(step.err, HasSubstr("tpot_ms and ttft_ms measure a serving run"));
  const Result two = run("validate --figures " +
                         file("s2.yaml", "figures:\n  - id: S\n    value: 1\n    unit: ms\n    measure: tpot_ms\n" +
                                             serving + ", launch: [eager, graph]}\n"));
  EXPECT_EQ(two.code, 2);
  EXPECT_THAT(two.err, HasSubstr("exactly one launch mode"));
  const fs::path sj = m_dir / "s3.json";
  const Result tpot = run("validate --figures " +
                          file("s3.yaml", "figures:\n  - id: S\n    value: 5\n    unit: ms\n    measure: tpot_ms\n" +
                                              serving + ", framework: vllm-ascend-eager}\n") +
                          " --json " + sj.string());
  ASSERT_EQ(tpot.code, 0) << tpot.err;
  const auto served = nlohmann::json::parse(slurp(sj));
  ASSERT_EQ(served.size(), 1u);
  EXPECT_GT(served[0]["simulated"].get<double>(), 0);
}

TEST_F(CliTest, ValidateMeasuresEpochsAsTimeMonitorAndTakesARunsConfigFile) {
  // A run's epochs as MindSpore's TimeMonitor prints them: first_epoch_s is the first, epoch_s
  // the mean of the later ones, each scaled to the dataset's steps when the run simulates fewer.
  // `config:` is a parameter file in the configuration directory.
  const std::string run_keys =
      "    run: {server: generic-x86, workload: lenet5, strategies: [loop-sink], epochs: 3, steps_per_epoch: 40,\n"
      "          config: storage-nfs.yaml}\n";
  const std::string figures = file("e.yaml", "figures:\n  - id: F\n    value: 1\n    unit: s\n    measure: first_epoch_s\n" +
                                                 run_keys +
                                                 "  - id: L\n    value: 1\n    unit: s\n    measure: epoch_s\n" +
                                                 run_keys);
  const fs::path json = m_dir / "e.json", report = m_dir / "t.json";
  ASSERT_EQ(run("validate --figures " + figures + " --json " + json.string()).code, 0);
  ASSERT_EQ(run("train --workload lenet5 -s loop-sink --epochs 3 --steps-per-epoch 40 --config " +
                std::string(ASCENDSIM_SOURCE_DIR) + "/configs/storage-nfs.yaml --json " + report.string())
                .code,
            0);
  const auto rows = nlohmann::json::parse(slurp(json));
  const auto epochs = nlohmann::json::parse(slurp(report))["runs"][0]["epoch_time_s"];
  ASSERT_EQ(epochs.size(), 3u);
  // 40 steps simulated of the dataset's 1875 (60,000 samples in batches of 32): scaled to 1875.
  const double scale = 1875.0 / 40;
  EXPECT_DOUBLE_EQ(rows[0]["simulated"].get<double>(), scale * epochs[0].get<double>());
  EXPECT_DOUBLE_EQ(rows[1]["simulated"].get<double>(),
                   scale * (epochs[1].get<double>() + epochs[2].get<double>()) / 2);
  EXPECT_GT(epochs[0].get<double>(), epochs[1].get<double>());  // the first pays graph load and pipeline fill
  // epoch_s needs a later epoch; a config file that is not there is named.
  const Result one = run("validate --figures " +
                         file("one.yaml", "figures:\n  - id: L\n    value: 1\n    unit: s\n    measure: epoch_s\n"
                                          "    run: {workload: lenet5, epochs: 1}\n"));
  EXPECT_EQ(one.code, 2);
  EXPECT_THAT(one.err, HasSubstr("give the run epochs >= 2"));
  const Result missing = run("validate --figures " +
                             file("m.yaml", "figures:\n  - id: L\n    value: 1\n    unit: s\n    measure: epoch_s\n"
                                            "    run: {workload: lenet5, epochs: 2, config: nfs.yaml}\n"));
  EXPECT_EQ(missing.code, 2);
  EXPECT_THAT(missing.err, HasSubstr("config: no file"));
  EXPECT_THAT(missing.err, HasSubstr("nfs.yaml"));
}

TEST_F(CliTest, ValidateMeasuresTimeToTrainAsMlperfsTimedRegionOnSeveralServers) {
  // time_to_train_s is run_start to run_stop: the run's whole time less its initialisation, here
  // on two servers (16 devices), with evaluation during training.
  const std::string figures =
      file("t.yaml",
           "figures:\n  - id: T\n    value: 1\n    unit: s\n    measure: time_to_train_s\n"
           "    run: {server: cloudbrain2, workload: resnet50, batch_size: 32, devices: 16, strategies: [loop-sink],\n"
           "          steps_per_epoch: 6, epochs: 2, eval_every: 1, optimizer: lars}\n");
  const fs::path json = m_dir / "t.json", report = m_dir / "r.json";
  const Result v = run("validate --figures " + figures + " --json " + json.string());
  ASSERT_EQ(v.code, 0) << v.err;
  ASSERT_EQ(run("train --server cloudbrain2 --workload resnet50 --batch-size 32 --devices 16 -s loop-sink "
                "--steps-per-epoch 6 --epochs 2 --eval-every 1 --optimizer lars --json " +
                report.string())
                .code,
            0);
  const auto ttt = nlohmann::json::parse(slurp(report))["runs"][0]["time_to_train_s"];
  const double timed = ttt["total"].get<double>() - ttt["initialisation"].get<double>();
  EXPECT_GT(ttt["initialisation"].get<double>(), 0);
  EXPECT_GT(ttt["evaluation"].get<double>(), 0);
  EXPECT_DOUBLE_EQ(nlohmann::json::parse(slurp(json))[0]["simulated"].get<double>(), timed);
  // A run key outside the list is named with the list, optimizer among it.
  const Result bad = run("validate --figures " +
                         file("b.yaml", "figures:\n  - id: T\n    value: 1\n    unit: s\n    measure: step_time_ms\n"
                                        "    run: {workload: resnet50, optimiser: lars}\n"));
  EXPECT_EQ(bad.code, 2);
  EXPECT_THAT(bad.err, AllOf(HasSubstr("unknown key 'optimiser'"), HasSubstr("optimizer")));
}

TEST_F(CliTest, AFigureWhoseExportIsMissingAndCannotBeMadeNamesTheCommandThatMakesIt) {
  // `export: NAME` is <cache>/NAME.onnx, made by the package's zoo (python/ascendsim/zoo.py) when
  // missing. On a machine without torch (an interpreter that says so) the figure's line, the file
  // and the command that makes it are named in one line; exit 2; nothing is left in the cache.
  const fs::path cache = m_dir / "cache";
  const std::string python = file("python", "#!/bin/sh\necho \"ModuleNotFoundError: No module named 'torch'\" >&2\nexit 1\n");
  fs::permissions(python, fs::perms::owner_all);
  ::setenv("ASCENDSIM_MODEL_CACHE", cache.c_str(), 1);
  ::setenv("ASCENDSIM_PYTHON", python.c_str(), 1);
  const std::string figures = file("z.yaml", "figures:\n  - id: F8\n    value: 0.575\n    unit: ms/step\n"
                                             "    measure: step_time_ms\n"
                                             "    run: {server: atlas800-9000, export: ncf, batch_size: 256}\n");
  const Result r = run("validate --figures " + figures);
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.err, HasSubstr("error: " + figures + ":2: run: export 'ncf': " + (cache / "ncf.onnx").string() +
                               " is missing and could not be made (ModuleNotFoundError: No module named 'torch'); "
                               "make it with: "));
  EXPECT_THAT(r.err, HasSubstr(python + " -m ascendsim.zoo --out " + cache.string() + " ncf\n"));
  EXPECT_EQ(occurrences(r.err, "error: "), 1u);
  EXPECT_FALSE(fs::exists(cache / "ncf.onnx"));
  // An interpreter that fails without a word: its exit status is the reason.
  ::setenv("ASCENDSIM_PYTHON", "/bin/false", 1);
  const Result none = run("validate --figures " + figures);
  EXPECT_EQ(none.code, 2);
  EXPECT_THAT(none.err, HasSubstr("(the command exited with status 1); make it with: "));
  // A run names its model once: a file or a zoo entry.
  const Result both = run("validate --figures " +
                          file("b.yaml", "figures:\n  - id: X\n    value: 1\n    unit: ms/step\n"
                                         "    measure: step_time_ms\n    run: {model: a.onnx, export: ncf}\n"));
  EXPECT_EQ(both.code, 2);
  EXPECT_THAT(both.err, HasSubstr(":2: run: give 'model' or 'export', not both"));
  ::unsetenv("ASCENDSIM_MODEL_CACHE");
  ::unsetenv("ASCENDSIM_PYTHON");
}

}  // namespace
