// calibrate-host: the data pipeline's per-sample costs measured on this machine. It times the real
// operations — JPEG decode with libjpeg-turbo of images it generates at ImageNet-like sizes,
// bilinear resize, crop, flip, rescale, normalize, HWC2CHW, the uint8 -> float cast, reading
// files, copying samples into a batch — at several sizes (and, with threads > 1, on that many
// threads at once), and fits each a straight line (cost = per-unit x units + fixed); its per-unit
// costs are written as a host profile the pipeline model reads (`--config`) by
// sim/report/host_profile.cpp.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

namespace ascendsim::runtime {

/// Least-squares y = slope * x + intercept through the points, and the largest relative miss.
struct LinearFit {
  double slope = 0, intercept = 0;
  double max_rel_error = 0;  ///< max over points of |fit - y| / y
};
LinearFit fit_linear(const std::vector<std::pair<double, double>>& xy);

struct CalibrateOptions {
  int threads = 1;           ///< threads measuring at once (their contention included)
  double min_time_s = 0.04;  ///< each measurement repeats its operation for at least this long
  int repeats = 9;           ///< measurements per point; the fastest counts
  bool quick = false;        ///< fewer sizes (tests)
  std::string temp_dir;      ///< where the read test writes its files (default: the system's)
};

/// One operation's measurements (units per call, seconds per call) and their fit.
struct OpCalibration {
  std::string key;   ///< the host parameter it sets, e.g. "host.decode_ns_per_pixel"
  std::string what;  ///< what was timed
  std::string unit;  ///< "pixel", "value", "byte"
  std::vector<std::pair<double, double>> points;
  LinearFit fit;
  double per_unit_ns() const { return fit.slope * 1e9; }
};

struct HostCalibration {
  int threads = 1;
  int cpu_cores = 1;  ///< this machine's hardware threads
  std::string cpu;    ///< /proc/cpuinfo's model name
  std::vector<OpCalibration> ops;
  double wall_s = 0;
};

/// Measures this host; progress lines (one per operation) go to `progress` if given.
HostCalibration calibrate_host(const CalibrateOptions& opt, std::ostream* progress);

}  // namespace ascendsim::runtime
