#include "runtime/faults.h"

#include <algorithm>
#include <cmath>
#include <random>

namespace ascendsim::runtime {

namespace {

/// The interval a save actually follows: the first return to the host `every` steps on.
std::int64_t effective_every(const FaultInputs& in, std::int64_t every) {
  const std::int64_t g = std::max<std::int64_t>(1, in.granule);
  return (every + g - 1) / g * g;
}

/// An exponential draw of mean `mean` from the generator's next 53 bits (u in (0, 1]).
double exponential(std::mt19937_64& rng, double mean) {
  const double u = (static_cast<double>(rng() >> 11) + 1.0) * 0x1.0p-53;
  return -std::log(u) * mean;
}

}  // namespace

std::vector<Segment> segments(const FaultInputs& in, std::int64_t every) {
  // The first segment holds the initialisation: a failure in it relaunches the job and starts
  // again from the initialisation, with no checkpoint to load.
  const double work = static_cast<double>(in.steps) * in.step_s;
  if (every <= 0 || in.steps <= 0) return {{in.init_s + work, 1, in.first_restart_s}};
  const std::int64_t n = effective_every(in, every);
  const std::int64_t full = in.steps / n, rest = in.steps - full * n;
  const double segment = static_cast<double>(n) * in.step_s + in.checkpoint_s;
  if (full == 0) return {{in.init_s + work + in.checkpoint_s, 1, in.first_restart_s}};
  std::vector<Segment> out = {{in.init_s + segment, 1, in.first_restart_s}};
  if (full > 1) out.push_back({segment, full - 1, in.restart_s});
  if (rest > 0) out.push_back({static_cast<double>(rest) * in.step_s + in.checkpoint_s, 1, in.restart_s});
  return out;
}

std::int64_t saves(const FaultInputs& in, std::int64_t every) {
  if (every <= 0 || in.steps <= 0) return 0;
  const std::int64_t n = effective_every(in, every);
  return (in.steps + n - 1) / n;
}

double failure_free_s(const std::vector<Segment>& segs) {
  double t = 0;
  for (const auto& s : segs) t += s.length * static_cast<double>(s.count);
  return t;
}

double expected_s(const FaultInputs& in, const std::vector<Segment>& segs) {
  const double M = in.mtbf_s;
  double t = 0;
  for (const auto& s : segs)
    t += static_cast<double>(s.count) * M * std::exp(s.restart_s / M) * std::expm1(s.length / M);
  return t;
}

double draw_s(const FaultInputs& in, const std::vector<Segment>& segs, std::uint64_t seed, std::int64_t& failures) {
  std::mt19937_64 rng(seed);
  const double M = in.mtbf_s;
  double t = 0;
  failures = 0;
  for (const auto& seg : segs) {
    const double R = seg.restart_s;
    std::int64_t left = seg.count;
    if (seg.length <= 0) continue;
    while (left > 0) {
      // The next failure, x from now (memoryless: a fresh draw after every completed stretch).
      double x = exponential(rng, M);
      const double whole = std::floor(x / seg.length);
      if (whole >= static_cast<double>(left)) {  // the group's segments all end before it
        t += seg.length * static_cast<double>(left);
        break;
      }
      const auto k = static_cast<std::int64_t>(whole);
      t += seg.length * static_cast<double>(k);
      left -= k;
      x -= seg.length * static_cast<double>(k);
      // It strikes x into the next segment: that work is lost, and a restart follows, which a
      // failure may strike too (then it starts again).
      t += x;
      ++failures;
      for (;;) {
        const double y = exponential(rng, M);
        if (y >= R) break;
        t += y;
        ++failures;
      }
      t += R;
    }
  }
  return t;
}

double young_daly_interval_s(double checkpoint_s, double mtbf_s) {
  return checkpoint_s > 0 && mtbf_s > 0 ? std::sqrt(2.0 * checkpoint_s * mtbf_s) : 0.0;
}

BestInterval best_interval(const FaultInputs& in) {
  const std::int64_t g = std::max<std::int64_t>(1, in.granule);
  const std::int64_t most = std::max<std::int64_t>(1, (in.steps + g - 1) / g);  // in granules
  BestInterval best;
  auto consider = [&](std::int64_t granules) {
    const std::int64_t every = granules * g;
    const double e = expected_s(in, segments(in, every));
    if (best.every == 0 || e < best.expected_s) best = {every, e};
  };
  constexpr std::int64_t kExhaustive = 200'000;
  if (most <= kExhaustive) {
    for (std::int64_t m = 1; m <= most; ++m) consider(m);
    return best;
  }
  // A logarithmic grid of 4,096 points, then every interval between the best one's neighbours.
  constexpr int kGrid = 4096;
  const double ratio = std::pow(static_cast<double>(most), 1.0 / kGrid);
  std::int64_t prev = 0;
  std::vector<std::int64_t> grid;
  for (int i = 0; i <= kGrid; ++i) {
    const auto m = std::clamp<std::int64_t>(std::llround(std::pow(ratio, i)), 1, most);
    if (m != prev) grid.push_back(m);
    prev = m;
  }
  std::size_t at = 0;
  for (std::size_t i = 0; i < grid.size(); ++i) {
    const BestInterval before = best;
    consider(grid[i]);
    if (best.every != before.every) at = i;
  }
  const std::int64_t lo = grid[at > 0 ? at - 1 : 0], hi = grid[std::min(at + 1, grid.size() - 1)];
  for (std::int64_t m = lo; m <= hi; ++m) consider(m);
  return best;
}

FaultAnalysis analyse_faults(const FaultInputs& in, std::int64_t every, std::int64_t seeds) {
  FaultAnalysis a;
  a.inputs = in;
  a.every = every;
  const std::vector<Segment> segs = segments(in, every);
  a.failure_free_s = failure_free_s(segs);
  a.expected_s = expected_s(in, segs);
  a.expected_failures = a.expected_s / in.mtbf_s;  // failures come at rate 1/M all the while
  a.seeds = seeds;
  std::vector<double> times;
  times.reserve(static_cast<std::size_t>(std::max<std::int64_t>(0, seeds)));
  double sum = 0, failures = 0;
  for (std::int64_t s = 0; s < seeds; ++s) {
    std::int64_t f = 0;
    times.push_back(draw_s(in, segs, static_cast<std::uint64_t>(s), f));
    sum += times.back();
    failures += static_cast<double>(f);
  }
  if (!times.empty()) {
    a.mean_s = sum / static_cast<double>(times.size());
    a.failures_mean = failures / static_cast<double>(times.size());
    std::sort(times.begin(), times.end());
    // Nearest rank: the smallest draw with at least q of the draws at or below it.
    auto quantile = [&](double q) {
      const auto k = static_cast<std::size_t>(std::ceil(q * static_cast<double>(times.size())));
      return times[std::clamp<std::size_t>(k, 1, times.size()) - 1];
    };
    a.p10_s = quantile(0.1);
    a.p50_s = quantile(0.5);
    a.p90_s = quantile(0.9);
    a.min_s = times.front();
    a.max_s = times.back();
  }
  a.best = best_interval(in);
  a.young_daly_s = young_daly_interval_s(in.checkpoint_s, in.mtbf_s);
  return a;
}

}  // namespace ascendsim::runtime
