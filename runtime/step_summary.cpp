#include "runtime/step_summary.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace ascendsim::runtime {

namespace {
// DDSketch's mapping: bucket i holds (gamma^(i-1), gamma^i]; its estimate 2 gamma^i / (gamma + 1)
// lies within kRelativeError of every value in it.
constexpr double kGamma = (1 + StepSummary::kRelativeError) / (1 - StepSummary::kRelativeError);
const double kLogGamma = std::log(kGamma);

std::int32_t bucket(double v) { return static_cast<std::int32_t>(std::ceil(std::log(v) / kLogGamma)); }
double estimate(std::int32_t i) { return 2 * std::pow(kGamma, i) / (kGamma + 1); }
}  // namespace

StepStats summarize_steps(std::vector<double> s) {
  StepStats st;
  if (s.empty()) return st;
  st.mean_ms = std::accumulate(s.begin(), s.end(), 0.0) / static_cast<double>(s.size()) * 1e3;
  auto rank = [&](double p) {
    auto k = static_cast<std::size_t>(std::ceil(p * static_cast<double>(s.size())));
    k = std::clamp<std::size_t>(k, 1, s.size()) - 1;
    std::nth_element(s.begin(), s.begin() + static_cast<std::ptrdiff_t>(k), s.end());
    return s[k] * 1e3;
  };
  st.p50_ms = rank(0.50);
  st.p99_ms = rank(0.99);
  return st;
}

void StepSummary::add(double v) {
  ++m_count;
  m_sum += v;
  if (exact()) {
    m_values.push_back(v);
    return;
  }
  if (!m_values.empty()) spill();
  insert(v);
}

void StepSummary::insert(double v) {
  if (v > 0)
    ++m_buckets[bucket(v)];
  else
    ++m_non_positive;
}

void StepSummary::spill() {
  for (double v : m_values) insert(v);
  std::vector<double>().swap(m_values);
}

double StepSummary::quantile(double p) const {
  // Nearest rank k of m_count, 1-based.
  auto k = static_cast<std::int64_t>(std::ceil(p * static_cast<double>(m_count)));
  k = std::clamp<std::int64_t>(k, 1, m_count);
  if (k <= m_non_positive) return 0;
  std::int64_t seen = m_non_positive;
  for (const auto& [i, n] : m_buckets) {
    seen += n;
    if (seen >= k) return estimate(i);
  }
  return m_buckets.empty() ? 0 : estimate(m_buckets.rbegin()->first);
}

StepStats StepSummary::stats() const {
  if (m_count == 0) return {};
  if (exact()) return summarize_steps(m_values);
  StepStats st;
  st.mean_ms = m_sum / static_cast<double>(m_count) * 1e3;
  st.p50_ms = quantile(0.50) * 1e3;
  st.p99_ms = quantile(0.99) * 1e3;
  return st;
}

}  // namespace ascendsim::runtime
