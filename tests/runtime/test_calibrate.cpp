// calibrate-host: the fit recovers known costs; a measured profile loads as a configuration.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>

#include <gtest/gtest.h>

#include "runtime/calibrate.h"
#include "sim/config.h"
#include "sim/report/host_profile.h"
#include "tests/test_support.h"

namespace ascendsim {
namespace {

TEST(Calibrate, TheFitRecoversKnownCosts) {
  // 3 ns per unit and 2 us fixed, exactly, then with +-3% noise.
  std::vector<std::pair<double, double>> exact, noisy;
  std::mt19937_64 rng(5);
  std::uniform_real_distribution<double> jitter(-0.03, 0.03);
  for (double x : {1e5, 2e5, 3e5, 5e5, 8e5}) {
    exact.emplace_back(x, 3e-9 * x + 2e-6);
    noisy.emplace_back(x, (3e-9 * x + 2e-6) * (1 + jitter(rng)));
  }
  const runtime::LinearFit f = runtime::fit_linear(exact);
  EXPECT_NEAR(f.slope, 3e-9, 1e-15);
  EXPECT_NEAR(f.intercept, 2e-6, 1e-12);
  EXPECT_LT(f.max_rel_error, 1e-9);
  const runtime::LinearFit g = runtime::fit_linear(noisy);
  EXPECT_NEAR(g.slope, 3e-9, 0.1 * 3e-9);
  EXPECT_LE(g.max_rel_error, 0.06);  // no point misses by more than twice the noise
  EXPECT_GT(g.max_rel_error, 0.0);
}

TEST(Calibrate, AMeasuredProfileLoadsAsAConfiguration) {
  runtime::CalibrateOptions o;
  o.quick = true;
  o.min_time_s = 0.002;
  o.repeats = 1;
  const runtime::HostCalibration c = runtime::calibrate_host(o, nullptr);
  ASSERT_EQ(c.ops.size(), 11u);
  // (Timings this short on a busy machine can tilt a two-point line either way; the profile
  // writes no negative cost.)
  for (const auto& op : c.ops) {
    EXPECT_GE(op.points.size(), 2u) << op.key;
    for (const auto& [units, seconds] : op.points) EXPECT_GT(seconds, 0) << op.key;
  }
  const auto path = test::temp_path("ascendsim_host_profile.yaml");
  std::ofstream(path) << report::host_profile_yaml(c);
  sim::ConfigRequest r = test::config_request();
  r.config_file = path.string();
  const sim::SystemConfig cfg = sim::load_config(r);
  EXPECT_EQ(cfg.host.cpu_cores, c.cpu_cores);
  for (const auto& op : c.ops) {
    if (op.key == "host.decode_ns_per_pixel") {
      EXPECT_NEAR(cfg.host.decode_ns_per_pixel, std::max(0.0, op.per_unit_ns()), 1e-3 * std::fabs(op.per_unit_ns()));
    }
  }
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace ascendsim
