#include "sim/accuracy_curve.h"

#include <cmath>
#include <fstream>

#include <fmt/format.h>

#include "sim/core/error.h"

namespace ascendsim::sim {

namespace {
std::string trim(const std::string& s) {
  const auto a = s.find_first_not_of(" \t\r");
  if (a == std::string::npos) return "";
  return s.substr(a, s.find_last_not_of(" \t\r") - a + 1);
}

/// A number that is the whole text, else NaN.
double number(const std::string& text) {
  try {
    std::size_t used = 0;
    const double v = std::stod(text, &used);
    return used == text.size() && std::isfinite(v) ? v : NAN;
  } catch (const std::exception&) {
    return NAN;
  }
}
}  // namespace

double AccuracyCurve::at(double epoch) const {
  if (points.empty() || epoch < points.front().first || epoch > points.back().first) return -1;
  for (std::size_t i = 1; i < points.size(); ++i)
    if (epoch <= points[i].first) {
      const auto& [e0, a0] = points[i - 1];
      const auto& [e1, a1] = points[i];
      return a0 + (a1 - a0) * (epoch - e0) / (e1 - e0);
    }
  return -1;
}

AccuracyCurve load_accuracy_curve(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw InputError(path + ": cannot read the accuracy curve (a CSV of epoch,accuracy lines)");
  AccuracyCurve c;
  c.file = path;
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    const std::string t = trim(line);
    if (t.empty() || t[0] == '#') continue;
    const auto comma = t.find(',');
    const std::string a = comma == std::string::npos ? t : trim(t.substr(0, comma));
    std::string b = comma == std::string::npos ? "" : trim(t.substr(comma + 1));
    const bool percent = !b.empty() && b.back() == '%';
    if (percent) b = trim(b.substr(0, b.size() - 1));
    const double epoch = number(a), acc = number(b) / (percent ? 100.0 : 1.0);
    if (c.points.empty() && std::isnan(epoch) && comma != std::string::npos) continue;  // a header line
    const std::string where = fmt::format("{}:{}: '{}'", path, n, t);
    if (std::isnan(epoch) || std::isnan(acc))
      throw InputError(where + ": expected epoch,accuracy (e.g. 36,0.761 or 36,76.1%)");
    if (epoch < 1 || epoch != std::floor(epoch)) throw InputError(where + ": the epoch is a whole number from 1");
    if (acc < 0 || acc > 1)
      throw InputError(where + ": the accuracy is a fraction from 0 to 1 (or a percentage with its sign: 76.1%)");
    if (!c.points.empty() && epoch <= c.points.back().first)
      throw InputError(where + ": epochs must increase from line to line");
    c.points.emplace_back(epoch, acc);
  }
  if (in.bad()) throw InputError(path + ": reading the accuracy curve failed");
  if (c.points.empty()) throw InputError(path + ": no epoch,accuracy line in the accuracy curve");
  return c;
}

std::pair<std::int64_t, double> epochs_to_target(const AccuracyCurve& curve, double target, std::int64_t eval_every) {
  if (!(target > 0 && target <= 1))
    throw InputError("target_accuracy", "target_accuracy",
                     fmt::format("{}: give the accuracy to reach as a fraction above 0 and at most 1", target));
  if (eval_every < 1)
    throw InputError("target_accuracy", "target_accuracy",
                     "a run stops at the first evaluation that reaches the target: give eval_every, how often the run "
                     "evaluates");
  double best = 0;
  for (std::int64_t e = eval_every; e <= static_cast<std::int64_t>(curve.points.back().first); e += eval_every) {
    const double a = curve.at(static_cast<double>(e));
    best = std::max(best, a);
    if (a >= target) return {e, a};
  }
  throw InputError("target_accuracy", "target_accuracy",
                   fmt::format("{} never reaches {:g} at an evaluation every {} epoch(s) (its best there: {:g}, by "
                               "epoch {:g}); lower the target or extend the curve",
                               curve.file, target, eval_every, best, curve.points.back().first));
}

}  // namespace ascendsim::sim
