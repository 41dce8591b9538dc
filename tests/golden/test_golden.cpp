// Golden regression: small canonical runs compared with the figures checked in under
// bench/golden/. Counts and names must match exactly; simulated times and rates within a relative
// 1e-6 (the simulation is deterministic: the tolerance only absorbs compiler and libm
// differences between toolchains, never a model change). A failure lists every figure that moved.
// Regenerate after a deliberate change: ASCENDSIM_UPDATE_GOLDEN=1 build/bin/test_golden
#include <sys/wait.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace {

namespace fs = std::filesystem;
using nlohmann::ordered_json;

constexpr double kRelTolerance = 1e-6;

ordered_json run_json(const std::string& args) {
  const fs::path out = fs::temp_directory_path() / ("ascendsim_golden_" + std::to_string(::getpid()) + ".json");
  const bool op = args.rfind("op ", 0) == 0 || args.rfind("validate", 0) == 0;  // these print no progress
  const std::string cmd = std::string("ASCENDSIM_CONFIG_DIR=") + ASCENDSIM_SOURCE_DIR "/configs " + ASCENDSIM_BIN +
                          " " + args + (op ? "" : " -q") + " --json " + out.string() + " >/dev/null";
  EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
  std::ifstream f(out);
  ordered_json j = ordered_json::parse(f);
  fs::remove(out);
  return j;
}

/// The figures a regression guards, from a compare report.
ordered_json figures(const ordered_json& report) {
  ordered_json out;
  out["workload"] = report["workload"];
  out["chip"] = report["chip"];
  out["batch_size"] = report["batch_size"];
  for (const auto& r : report["runs"]) {
    ordered_json f;
    for (const char* k : {"steps", "sim_time_s", "samples_per_s", "device_busy_fraction", "losses_returned"})
      f[k] = r[k];
    f["step_time_ms"] = r["step_time_ms"];
    f["interactions"] = r["interactions"];
    f["breakdown_s"] = r["breakdown_s"];
    out["runs"][r["strategy"].get<std::string>()] = f;
  }
  return out;
}

ordered_json op_figures(const ordered_json& op) {
  ordered_json out;
  for (const char* k : {"op", "time_us", "cycles", "macs", "gm_bytes", "bound", "blocks", "tiling", "tiles"})
    out[k] = op[k];
  return out;
}

void compare(const ordered_json& golden, const ordered_json& now, const std::string& path, std::string& moved) {
  if (golden.is_object()) {
    for (const auto& [k, v] : golden.items()) {
      if (!now.contains(k)) {
        moved += "  " + path + "/" + k + ": missing now\n";
        continue;
      }
      compare(v, now[k], path + "/" + k, moved);
    }
    for (const auto& [k, v] : now.items())
      if (!golden.contains(k)) moved += "  " + path + "/" + k + ": new (not in the golden file)\n";
    return;
  }
  if (golden.is_number_float() || now.is_number_float()) {
    const double g = golden.get<double>(), n = now.get<double>();
    if (std::fabs(n - g) > kRelTolerance * std::max(std::fabs(g), 1e-300))
      moved += "  " + path + ": " + std::to_string(g) + " -> " + std::to_string(n) + " (" +
               std::to_string(g != 0 ? 100.0 * (n - g) / g : 0.0) + "%)\n";
    return;
  }
  if (golden != now) moved += "  " + path + ": " + golden.dump() + " -> " + now.dump() + "\n";
}

void check(const std::string& name, const ordered_json& now) {
  const fs::path file = fs::path(ASCENDSIM_SOURCE_DIR) / "bench" / "golden" / (name + ".json");
  if (const char* update = std::getenv("ASCENDSIM_UPDATE_GOLDEN"); update && std::string(update) == "1") {
    std::ofstream(file) << now.dump(2) << "\n";
    std::cout << "updated " << file << "\n";
    return;
  }
  std::ifstream f(file);
  ASSERT_TRUE(f) << file << " is missing; create it with ASCENDSIM_UPDATE_GOLDEN=1 build/bin/test_golden";
  const ordered_json golden = ordered_json::parse(f);
  std::string moved;
  compare(golden, now, name, moved);
  EXPECT_TRUE(moved.empty()) << "figures that moved against " << file << ":\n"
                             << moved
                             << "If the change is deliberate, regenerate with ASCENDSIM_UPDATE_GOLDEN=1 "
                                "build/bin/test_golden and give the reason in the commit message.";
}

TEST(Golden, LeNet5TwoEpochsAllStrategies) {
  check("lenet5_2epochs", figures(run_json("compare --workload lenet5 --epochs 2")));
}

TEST(Golden, ResNet50Batch32TwentyStepsAllStrategies) {
  check("resnet50_b32_20steps",
        figures(run_json("compare --workload resnet50 --batch-size 32 --steps-per-epoch 20 --epochs 1")));
}

TEST(Golden, ValidationAgainstPublishedFigures) {
  // The simulated value of every published figure the simulator reproduces, and whether it lies
  // within the 15% tolerance: moving one is a reviewed decision (the validation table before and
  // after goes in the commit message).
  const ordered_json rows = run_json("validate");
  ordered_json now;
  for (const auto& r : rows) {
    ordered_json f;
    f["simulated"] = r["simulated"];
    f["within_15_percent"] = !r["error"].is_null() && std::fabs(r["error"].get<double>()) <= 0.15;
    now[r["id"].get<std::string>()] = f;
  }
  check("validation", now);
}

TEST(Golden, OpResults) {
  ordered_json ops;
  ops["conv2d_3x3"] = op_figures(run_json("op --type conv2d --n 32 --c 64 --h 56 --w 56 --k 64 --r 3 --s 3 --pad 1"));
  ops["conv2d_7x7_stride2"] =
      op_figures(run_json("op --type conv2d --n 32 --c 3 --h 224 --w 224 --k 64 --r 7 --s 7 --stride 2 --pad 3"));
  ops["conv2d_backprop_filter"] =
      op_figures(run_json("op --type conv2d_backprop_filter --n 32 --c 256 --h 14 --w 14 --k 256 --r 3 --s 3 --pad 1"));
  ops["matmul_8192"] = op_figures(run_json("op --type matmul --m 8192 --n 8192 --k 8192"));
  ops["matmul_16"] = op_figures(run_json("op --type matmul --m 16 --n 16 --k 16"));
  ops["batchnorm_fp32"] = op_figures(run_json("op --type batchnorm --n 32 --c 256 --h 56 --w 56 --dtype fp32"));
  check("ops", ops);
}

}  // namespace
