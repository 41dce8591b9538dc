// `ascendsim calibrate` as a user runs it: it recovers parameter values from figures simulated
// with them, refuses what it cannot fit, names bad input and writes nothing then.
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/cli_support.h"

namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::Not;

using Result = ascendsim::test::CliResult;

class CalibrateCli : public ascendsim::test::CliFixture {
 protected:
  CalibrateCli() : CliFixture("ascendsim_calibrate_") {}

  /// Five tiny LeNet-5 runs that the host bounds in different ways (A and E: the pipeline's resize
  /// stage in loop sink; B: op by op; C and F: the host's step in graph sink) and the chip's peak
  /// (D, device-bound); `sets` goes into A, B, C, E and F; `values` are the published values (1 if
  /// absent).
  /// `b_workers`: B's pipeline workers; `c_host_bound`: whether C is marked host-bound.
  static std::string figures(const std::string& sets, const std::map<std::string, double>& values,
                             const std::string& fit_section, int b_workers = 8, bool c_host_bound = true) {
    auto value = [&](const std::string& id) {
      const auto at = values.find(id);
      return at == values.end() ? std::string("1") : fmt::format("{}", at->second);
    };
    const std::string extra = sets.empty() ? "" : ", " + sets;
    // A and E: loop sink, bound by the pipeline's resize stage (10 ns per value, one worker; two
    // at batch 64); B: op by op; C and F: graph sink at batch 64 and 32, bound by the host's step.
    const std::string pipeline_bound = "host.resize_ns_per_value: 10";
    return fmt::format(
               "figures:\n"
               "  - {{id: A, value: {}, unit: ms/step, measure: step_time_ms, host_bound: true,\n"
               "     run: {{workload: lenet5, strategies: [loop-sink], steps_per_epoch: 40,\n"
               "           set: {{pipeline.num_parallel_workers: 1, {}{}}}}}}}\n"
               "  - {{id: B, value: {}, unit: ms/step, measure: step_time_ms, host_bound: true,\n"
               "     run: {{workload: lenet5, strategies: [non-sink], steps_per_epoch: 40, set: "
               "{{pipeline.num_parallel_workers: {}{}}}}}}}\n"
               "  - {{id: C, value: {}, unit: ms/step, measure: step_time_ms, host_bound: {},\n"
               "     run: {{workload: lenet5, strategies: [graph-sink], steps_per_epoch: 40, batch_size: 64,\n"
               "           set: {{pipeline.num_parallel_workers: 2{}}}}}}}\n"
               "  - {{id: E, value: {}, unit: ms/step, measure: step_time_ms, host_bound: true,\n"
               "     run: {{workload: lenet5, strategies: [loop-sink], steps_per_epoch: 40, batch_size: 64,\n"
               "           set: {{pipeline.num_parallel_workers: 2, {}{}}}}}}}\n"
               "  - {{id: F, value: {}, unit: ms/step, measure: step_time_ms, host_bound: true,\n"
               "     run: {{workload: lenet5, strategies: [graph-sink], steps_per_epoch: 40{}}}}}\n"
               "  - {{id: D, value: 256, unit: TFLOPS, measure: peak_tflops, run: {{chip: ascend910}}}}\n",
               value("A"), pipeline_bound, extra, value("B"), b_workers, extra, value("C"), c_host_bound, extra,
               value("E"), pipeline_bound, extra, value("F"), sets.empty() ? "" : ", set: {" + sets + "}") +
           fit_section;
  }

  static constexpr const char* kBounds =
      "fit:\n"
      "  host.map_op_overhead_us: {min: 0.5, max: 20, why: dispatch of one map op on one row}\n"
      "  host.step_overhead_us: {min: 50, max: 2000, why: the training loop's work per step}\n"
      "  host.op_launch_us: {min: 1, max: 100, why: one kernel launch from the host}\n";

  /// The published figures: A, B, C, E and F simulated (by validate, the same code path) with
  /// map_op_overhead_us 3 and step_overhead_us 400.
  std::string published(int b_workers = 8, bool c_host_bound = true) {
    const std::string gen = file(
        "gen.yaml", figures("host.map_op_overhead_us: 3, host.step_overhead_us: 400", {}, "", b_workers, c_host_bound));
    const fs::path json = m_dir / "gen.json";
    const Result r = run("validate --figures " + gen + " --json " + json.string());
    EXPECT_EQ(r.code, 0) << r.err;
    std::map<std::string, double> values;
    for (const auto& row : nlohmann::json::parse(slurp(json))) values[row["id"]] = row["simulated"].get<double>();
    return file("published.yaml", figures("", values, kBounds, b_workers, c_host_bound));
  }

};

TEST_F(CalibrateCli, RecoversTheValuesTheFiguresWereSimulatedWith) {
  const std::string pub = published();
  const fs::path json = m_dir / "fit.json", yaml = m_dir / "fit.yaml";
  // Started elsewhere in the bounds; op_launch_us moves only B (the op-by-op run), so it is not fitted.
  const std::string args = "calibrate --quiet --figures " + pub +
                           " --fit host.map_op_overhead_us,host.step_overhead_us,host.op_launch_us"
                           " --start host.map_op_overhead_us=8 --start host.step_overhead_us=100 --json " +
                           json.string() + " --out " + yaml.string();
  const Result r = run(args);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("host.op_launch_us: only B moves it; not fitted, stays assumed"));
  EXPECT_EQ(r.err, "");  // --quiet
  const auto j = nlohmann::json::parse(slurp(json));
  const auto& p = j["parameters"];
  ASSERT_EQ(p.size(), 3u);
  EXPECT_EQ(p[0]["key"], "host.map_op_overhead_us");
  EXPECT_TRUE(p[0]["fitted"].get<bool>());
  EXPECT_NEAR(p[0]["value"].get<double>(), 3.0, 3.0 * 1e-5);
  EXPECT_NEAR(p[1]["value"].get<double>(), 400.0, 400.0 * 1e-5);
  EXPECT_TRUE(p[0]["at_bound"].is_null());
  EXPECT_FALSE(p[2]["fitted"].get<bool>());
  EXPECT_TRUE(p[2]["value"].is_null());
  EXPECT_EQ(p[2]["start"].get<double>(), 10.0);  // the preset's, as configured
  EXPECT_EQ(p[2]["why"], "one kernel launch from the host");
  // The screen's figures: op_launch_us moves B only; A and C not at all (they sink).
  EXPECT_GT(std::fabs(p[2]["moves_over_bounds"]["B"].get<double>()), 0.01);
  EXPECT_EQ(p[2]["moves_over_bounds"]["A"].get<double>(), 0.0);
  // The fitted figures (the host-bound ones by default) reproduced, and each predicted by the
  // other two; the device-bound peak not fitted and not moved.
  std::map<std::string, nlohmann::json> f;
  for (const auto& x : j["figures"]) f[x["id"]] = x;
  ASSERT_EQ(f.size(), 6u);
  for (const char* id : {"A", "B", "C", "E", "F"}) {
    EXPECT_TRUE(f[id]["fitted"].get<bool>()) << id;
    EXPECT_GT(std::fabs(f[id]["start_error"].get<double>()), 0.01) << id;
    EXPECT_LT(std::fabs(f[id]["fit_error"].get<double>()), 1e-6) << id;
  }
  // Left out: each parameter is pinned by two figures (map_op_overhead_us by A and E, the
  // pipeline-bound ones; step_overhead_us by B, C and F, the host-bound ones), so each figure is
  // predicted by the others. A's left-out value is its run at the refit, which the test runs.
  for (const char* id : {"A", "B", "C", "E", "F"}) EXPECT_LT(std::fabs(f[id]["left_out_error"].get<double>()), 1e-4) << id;
  const auto& without_a = f["A"]["left_out_values"];
  const fs::path a_loo = m_dir / "a_loo.json";
  ASSERT_EQ(run(fmt::format("train -s loop-sink --steps-per-epoch 40 --set pipeline.num_parallel_workers=1 --set "
                            "host.resize_ns_per_value=10 --set host.map_op_overhead_us={} --set "
                            "host.step_overhead_us={} --json {}",
                            without_a["host.map_op_overhead_us"].get<double>(),
                            without_a["host.step_overhead_us"].get<double>(), a_loo.string()))
                .code,
            0);
  const double a_at_loo =
      nlohmann::json::parse(slurp(a_loo))["runs"][0]["steady_state"]["step_ms_mean"].get<double>();
  EXPECT_NEAR(f["A"]["left_out"].get<double>(), a_at_loo, 1e-9 * a_at_loo);
  EXPECT_NEAR(f["A"]["left_out_error"].get<double>(),
              (a_at_loo - f["A"]["published"].get<double>()) / f["A"]["published"].get<double>(), 1e-9);
  EXPECT_FALSE(f["D"]["fitted"].get<bool>());
  EXPECT_EQ(f["D"]["moved_by"].get<double>(), 0.0);
  EXPECT_FALSE(j["fit"]["capped"].get<bool>());
  // The fragment names its provenance and loads as a configuration: A's run with it is A's
  // published step time.
  const std::string fragment = slurp(yaml);
  EXPECT_THAT(fragment, HasSubstr("fitted by ascendsim calibrate to A, B, C, E, F"));
  EXPECT_THAT(fragment, HasSubstr("# host.op_launch_us: not fitted (only B moves it); stays assumed"));
  EXPECT_THAT(fragment, Not(HasSubstr("  op_launch_us:")));
  const fs::path a = m_dir / "a.json";
  ASSERT_EQ(run("train -s loop-sink --steps-per-epoch 40 --set pipeline.num_parallel_workers=1 --set "
                "host.resize_ns_per_value=10 --config " +
                yaml.string() + " --json " + a.string())
                .code,
            0);
  const double step = nlohmann::json::parse(slurp(a))["runs"][0]["steady_state"]["step_ms_mean"].get<double>();
  EXPECT_NEAR(step, f["A"]["published"].get<double>(), 1e-5 * step);
  // The same inputs, the same report and fragment, bit for bit.
  const std::string first_json = slurp(json), first_yaml = fragment;
  const Result again = run(args);
  ASSERT_EQ(again.code, 0) << again.err;
  EXPECT_EQ(again.out, r.out);
  EXPECT_EQ(slurp(json), first_json);
  EXPECT_EQ(slurp(yaml), first_yaml);
}

TEST_F(CalibrateCli, AFigureNotHostBoundIsReportedWithHowFarTheFitMovedIt) {
  // A, B, E and F fitted, by default as the host-bound ones; C is not host-bound: run at the
  // start and at the fit, its move past 2% flagged.
  const std::string pub = published(1, false);
  const fs::path json = m_dir / "fit.json";
  const Result r = run("calibrate --quiet --figures " + pub +
                       " --fit host.map_op_overhead_us,host.step_overhead_us --start host.map_op_overhead_us=8"
                       " --start host.step_overhead_us=100 --json " +
                       json.string());
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(slurp(json));
  std::map<std::string, nlohmann::json> f;
  for (const auto& x : j["figures"]) f[x["id"]] = x;
  EXPECT_TRUE(f["A"]["fitted"].get<bool>() && f["B"]["fitted"].get<bool>());
  EXPECT_FALSE(f["C"]["fitted"].get<bool>());
  EXPECT_FALSE(f["C"]["host_bound"].get<bool>());
  EXPECT_NEAR(j["parameters"][0]["value"].get<double>(), 3.0, 3.0 * 1e-5);
  EXPECT_NEAR(j["parameters"][1]["value"].get<double>(), 400.0, 400.0 * 1e-5);
  // C's move is its value at the fit against its value at the start; at the fit it is the figure
  // it was simulated as.
  const double moved = f["C"]["moved_by"].get<double>();
  EXPECT_DOUBLE_EQ(moved,
                   (f["C"]["at_fit"].get<double>() - f["C"]["start"].get<double>()) / f["C"]["start"].get<double>());
  EXPECT_LT(std::fabs(f["C"]["fit_error"].get<double>()), 1e-5);
  ASSERT_GT(std::fabs(moved), 0.02);
  EXPECT_THAT(r.out, HasSubstr(fmt::format("C (not host-bound) moved by {:+.1f}% at the fit", 100 * moved)));
  EXPECT_TRUE(f["C"]["left_out_error"].is_null());  // not fitted, not left out
  EXPECT_LT(std::fabs(f["A"]["left_out_error"].get<double>()), 1e-4);
}

TEST_F(CalibrateCli, WithoutFitItRefitsWhatTheHostPresetsMarkAndReproducesTheirValues) {
  // The host presets mark the parameters fitted to every host-bound figure; a refit from the
  // presets' values to those figures lands on them again, each scoped to the preset that owns it
  // (the Atlas 800T A2's core speed its own, the rest the Kunpeng host's, which the A2's is made from).
  const fs::path json = m_dir / "refit.json";
  const Result r = run("calibrate --quiet --loo linear --max-iterations 3 --json " + json.string());
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(slurp(json));
  std::map<std::string, double> fitted;
  for (const auto& p : j["parameters"])
    if (p["fitted"].get<bool>()) fitted[p["key"].get<std::string>()] = p["value"].get<double>();
  const std::map<std::string, double> preset = {{"kunpeng920-4s:host.device_queue_push_us", 654.5},
                                                {"kunpeng920-4s:host.device_queue_ns_per_byte", 0.2843},
                                                {"kunpeng920-4s:host.core_speed", 0.2303},
                                                {"kunpeng920-4s:host.color_adjust_ns_per_value", 0.5},
                                                {"atlas800t-a2:host.core_speed", 0.2048}};
  for (const auto& [key, value] : preset) {
    ASSERT_EQ(fitted.count(key), 1u) << key << " in " << j["parameters"].dump();
    EXPECT_NEAR(fitted[key], value, 0.03 * value) << key;
  }
  // Every host-bound figure of the file was fitted, and each has its left-out error or says why not.
  std::size_t host_bound = 0;
  for (const auto& f : j["figures"])
    if (f["fitted"].get<bool>()) {
      ++host_bound;
      EXPECT_TRUE(!f["left_out_error"].is_null() || f.contains("alone_pins")) << f["id"];
    }
  EXPECT_GE(host_bound, 15u);
}

TEST_F(CalibrateCli, BadRequestsAreNamedAndWriteNothing) {
  const std::string pub = published();
  const fs::path json = m_dir / "bad.json", yaml = m_dir / "bad.yaml";
  const std::string outs = " --json " + json.string() + " --out " + yaml.string();
  const std::string two = " --fit host.map_op_overhead_us,host.step_overhead_us";
  struct Case {
    std::string args, says;
  };
  const std::vector<Case> cases{
      {"--figures " + pub + " --fit host.decode_ns_per_pixel",
       "--fit host.decode_ns_per_pixel: " + pub + " gives no bounds for it"},
      {"--figures " + pub + " --fit host.map_op_overhead_us,host.nope", "unknown parameter 'host.nope'"},
      {"--figures " + pub +
           " --fit host.map_op_overhead_us,host.step_overhead_us,host.op_launch_us,host.decode_ns_per_pixel,"
           "host.resize_ns_per_value,host.crop_ns_per_value,host.flip_ns_per_value",
       "7 parameters; at most six are fitted jointly"},
      {"--figures " + pub + " --fit nohost:host.step_overhead_us", "--fit nohost:host.step_overhead_us: no host preset 'nohost'"},
      {"--figures " + pub + two + " --only A,B,Z", "--only Z: no such figure in " + pub + " (A, B, C, E, F, D)"},
      {"--figures " + pub + two + " --only A", "1 figure(s) (A) cannot fit 2 parameters"},
      {"--figures " + pub + two + " --start host.step_overhead_us=5000",
       "--fit host.step_overhead_us: the start 5000 lies outside its bounds [50, 2000]"},
      {"--figures " + pub + two + " --start host.op_launch_us=5", "--start host.op_launch_us=5: give key=value"},
      // No --fit: the host presets' marked parameters; the generic server carries none.
      {"--figures " + pub, "the host presets of the figures fitted mark no parameter as fitted"},
      {"--figures " + pub + two + " --max-iterations 0", "--max-iterations 0: give 1 to 1000"},
      {"--figures " + pub + " --fit host.map_op_overhead_us,host.map_op_overhead_us",
       "--fit host.map_op_overhead_us: given twice"},
      {"--figures " + pub + two + " --start host.step_overhead_us=300 --start host.step_overhead_us=400",
       "--start host.step_overhead_us is given twice; keep one"},
      {"--figures " +
           file("int.yaml", figures("", {}, "fit:\n  pipeline.num_parallel_workers: {min: 1, max: 8, why: w}\n")) + two,
       "fit: pipeline.num_parallel_workers: not a real-valued parameter"},
      {"--figures " +
           file("minmax.yaml", figures("", {}, "fit:\n  host.step_overhead_us: {min: 50, max: 20, why: w}\n")) + two,
       "fit: host.step_overhead_us: min 50, max 20: give 0 < min < max"},
      {"--figures " + file("nowhy.yaml", figures("", {}, "fit:\n  host.step_overhead_us: {min: 50, max: 200}\n")) + two,
       "fit: host.step_overhead_us: give min, max and why"},
      // A figure that sets a fitted parameter itself: its configuration, not a candidate.
      {"--figures " + file("own.yaml", figures("host.step_overhead_us: 300", {}, kBounds)) + two,
       "--fit host.step_overhead_us: figure A sets it itself"},
  };
  for (const auto& c : cases) {
    const Result r = run("calibrate --quiet " + c.args + outs);
    EXPECT_EQ(r.code, 2) << c.args << "\n" << r.err;
    EXPECT_THAT(r.err, HasSubstr(c.says)) << c.args;
    EXPECT_FALSE(fs::exists(json)) << c.args;
    EXPECT_FALSE(fs::exists(yaml)) << c.args;
  }
  // A parameter no two figures move: nothing can be fitted, said per parameter.
  const Result none = run("calibrate --quiet --figures " + pub + " --fit host.op_launch_us" + outs);
  EXPECT_EQ(none.code, 2);
  EXPECT_THAT(none.err, HasSubstr("no parameter can be fitted to A, B, C, E, F; host.op_launch_us: only B moves it"));
  EXPECT_FALSE(fs::exists(json));
  // The schema: host_bound is true or false.
  const Result hb = run("validate --figures " +
                        file("hb.yaml",
                             "figures:\n  - {id: X, value: 1, unit: TFLOPS, measure: peak_tflops, host_bound: "
                             "yes, run: {chip: ascend910}}\n"));
  EXPECT_EQ(hb.code, 2);
  EXPECT_THAT(hb.err, HasSubstr("'host_bound' is true or false"));
}

}  // namespace
