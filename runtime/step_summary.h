// A distribution of per-step values summarised as the steps complete, in bounded memory: exact
// count, sum and mean; exact nearest-rank percentiles while at most kExactValues values have been
// seen, and beyond that percentiles from a deterministic logarithmic-bucket sketch whose relative
// error is at most kRelativeError (docs/reports.md). Same values in the same order, same summary.
#pragma once

#include <cstdint>
#include <map>
#include <vector>

namespace ascendsim::runtime {

struct StepStats {
  double mean_ms = 0, p50_ms = 0, p99_ms = 0;
};

class StepSummary {
 public:
  static constexpr std::size_t kExactValues = 65536;
  static constexpr double kRelativeError = 0.001;

  void add(double v);
  std::int64_t count() const { return m_count; }
  /// Mean and nearest-rank p50/p99, in milliseconds (values are seconds).
  StepStats stats() const;
  /// True while the percentiles are exact.
  bool exact() const { return m_count <= static_cast<std::int64_t>(kExactValues); }

 private:
  double quantile(double p) const;
  void spill();
  void insert(double v);

  std::int64_t m_count = 0;
  double m_sum = 0;
  std::vector<double> m_values;                    ///< while exact
  std::map<std::int32_t, std::int64_t> m_buckets;  ///< sketch: bucket index -> count
  std::int64_t m_non_positive = 0;                 ///< sketch: values <= 0
};

/// Mean and nearest-rank percentiles of step times given in seconds (every value kept).
StepStats summarize_steps(std::vector<double> step_s);

}  // namespace ascendsim::runtime
