#include "runtime/charts.h"

#include <cmath>

#include <fmt/format.h>

namespace ascendsim::runtime::charts {

const char* strategy_color(Strategy s) {
  // Okabe & Ito, "Color Universal Design": orange, sky blue, bluish green, vermillion.
  static const char* kColors[] = {"#e69f00", "#56b4e9", "#009e73", "#d55e00"};
  return kColors[static_cast<int>(s)];
}

const char* phase_color(sim::Phase p) {
  // Paul Tol's "muted" scheme (and its pale grey), one colour per phase in stacking order.
  static const char* kColors[sim::kPhaseCount] = {"#cc6677", "#332288", "#ddcc77", "#117733", "#88ccee", "#882255",
                                                  "#44aa99", "#999933", "#aa4499", "#dddddd", "#6f6f6f"};
  return kColors[static_cast<std::size_t>(p)];
}

const char* strategy_dash(Strategy s) {
  static const char* kDash[] = {"", "8 4", "3 3", "12 3 3 3"};
  return kDash[static_cast<int>(s)];
}

std::vector<double> nice_ticks(double lo, double hi, int target, bool integer) {
  if (!(hi > lo)) hi = lo + 1;
  const double raw = (hi - lo) / std::max(1, target);
  const double mag = std::pow(10, std::floor(std::log10(raw)));
  double step = mag;
  for (double m : {1.0, 2.0, 5.0, 10.0})
    if (m * mag >= raw) {
      step = m * mag;
      break;
    }
  if (integer) step = std::max(1.0, std::round(step));
  std::vector<double> out;
  for (double v = std::floor(lo / step) * step; v <= hi + step * 1e-9; v += step)
    out.push_back(std::fabs(v) < step * 1e-9 ? 0 : v);
  if (out.empty() || out.back() < hi) out.push_back(out.empty() ? hi : out.back() + step);
  return out;
}

std::vector<double> log_ticks(double lo, double hi) {
  std::vector<double> out;
  for (double e = std::floor(std::log10(lo)); e <= std::ceil(std::log10(hi)); ++e) out.push_back(std::pow(10, e));
  return out;
}

std::string tick_label(double v) {
  if (std::fabs(v) >= 1e6) return fmt::format("{:.3g}", v);
  std::string s = fmt::format("{:.6f}", v);
  s.erase(s.find_last_not_of('0') + 1);
  if (!s.empty() && s.back() == '.') s.pop_back();
  return s == "-0" ? "0" : s;
}

}  // namespace ascendsim::runtime::charts
