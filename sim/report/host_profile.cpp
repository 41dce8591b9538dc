// calibrate-host's host profile (host_profile.h).
#include "sim/report/host_profile.h"

#include <algorithm>

#include <fmt/format.h>

namespace ascendsim::report {

using runtime::HostCalibration;

std::string host_profile_yaml(const HostCalibration& c) {
  std::string s = fmt::format(
      "# Host profile: this machine's data-pipeline costs, measured by `ascendsim calibrate-host`\n"
      "# on {} ({} hardware threads), {} thread(s) measuring at once. Each cost is the slope of a\n"
      "# straight line (cost = per-unit x units + fixed) fitted to timings at several sizes; the comment\n"
      "# says what was timed, the sizes, how closely the line explains them and its fixed part. Use it\n"
      "# with --config; host costs not listed keep the preset's values (configs/host.yaml).\n"
      "host:\n"
      "  cpu_cores: {}  # this machine's hardware threads\n",
      c.cpu.empty() ? std::string("an unknown CPU") : c.cpu, c.cpu_cores, c.threads, c.cpu_cores);
  for (const auto& op : c.ops) {
    const std::string name = op.key.substr(op.key.find('.') + 1);
    s += fmt::format("  {}: {:.4g}  # {}; {} sizes {:.0f}-{:.0f} {}s; fit within {:.1f}%, fixed {:.2f} us\n", name,
                     std::max(0.0, op.per_unit_ns()), op.what, op.points.size(), op.points.front().first,
                     op.points.back().first, op.unit, 100 * op.fit.max_rel_error, op.fit.intercept * 1e6);
  }
  return s;
}

}  // namespace ascendsim::report
