#include "sim/fit.h"

#include <algorithm>
#include <cmath>
#include <functional>

#include <fmt/format.h>

#include "sim/core/error.h"

namespace ascendsim::sim::fit {

double CachedEvaluator::simulate(std::size_t figure, const std::vector<double>& values) {
  auto key = std::make_pair(figure, values);
  const auto at = m_cache.find(key);
  if (at != m_cache.end()) {
    ++m_hits;
    return at->second;
  }
  const double v = m_inner.simulate(figure, values);
  m_cache.emplace(std::move(key), v);
  return v;
}

bool solve_dense(std::vector<std::vector<double>> a, std::vector<double> b, std::vector<double>& x) {
  const std::size_t n = b.size();
  double scale = 0;
  for (const auto& row : a)
    for (double v : row) scale = std::max(scale, std::fabs(v));
  if (!(scale > 0)) return false;
  for (std::size_t c = 0; c < n; ++c) {
    std::size_t p = c;
    for (std::size_t r = c + 1; r < n; ++r)
      if (std::fabs(a[r][c]) > std::fabs(a[p][c])) p = r;
    if (std::fabs(a[p][c]) <= 1e-14 * scale) return false;
    std::swap(a[p], a[c]);
    std::swap(b[p], b[c]);
    for (std::size_t r = c + 1; r < n; ++r) {
      const double f = a[r][c] / a[c][c];
      for (std::size_t k = c; k < n; ++k) a[r][k] -= f * a[c][k];
      b[r] -= f * b[c];
    }
  }
  x.assign(n, 0);
  for (std::size_t c = n; c-- > 0;) {
    double s = b[c];
    for (std::size_t k = c + 1; k < n; ++k) s -= a[c][k] * x[k];
    x[c] = s / a[c][c];
  }
  return true;
}

namespace {

/// A fit's coordinates: the logarithm of each free parameter, with the exact values at the
/// bounds and the start (so a point on a bound runs the bound itself, and the start the start).
struct LogSpace {
  const std::vector<Parameter>& params;
  const std::vector<std::size_t>& free;
  std::vector<double> lo, hi, u0;

  LogSpace(const std::vector<Parameter>& p, const std::vector<std::size_t>& f) : params(p), free(f) {
    for (std::size_t i : free) {
      lo.push_back(std::log(params[i].min));
      hi.push_back(std::log(params[i].max));
      u0.push_back(std::clamp(std::log(params[i].start), lo.back(), hi.back()));
    }
  }
  std::vector<double> values(const std::vector<double>& u) const {
    std::vector<double> v;
    for (const auto& p : params) v.push_back(p.start);
    for (std::size_t k = 0; k < free.size(); ++k) {
      const Parameter& p = params[free[k]];
      v[free[k]] = u[k] == lo[k] ? p.min : u[k] == hi[k] ? p.max : u[k] == u0[k] ? p.start : std::exp(u[k]);
    }
    return v;
  }
};

/// The residuals' Jacobian at u in log-space: forward differences, backward at the upper bound. A
/// flat column (the figures do not move over so small a step, e.g. on a plateau of max()) tries
/// ten and a hundred times the step.
std::vector<std::vector<double>> jacobian(const LogSpace& space, const std::vector<double>& u,
                                          const std::vector<double>& r,
                                          const std::function<std::vector<double>(const std::vector<double>&)>& residuals,
                                          const Options& options) {
  const std::size_t m = r.size(), n = u.size();
  std::vector<std::vector<double>> jac(m, std::vector<double>(n, 0));
  for (std::size_t k = 0; k < n; ++k) {
    const double range = space.hi[k] - space.lo[k];
    for (double h = options.fd_step * range; h <= 0.1 * range * (1 + 1e-12); h *= 10) {
      std::vector<double> w = u;
      const double step = u[k] + h <= space.hi[k] ? h : -h;
      w[k] = u[k] + step;
      const std::vector<double> rw = residuals(w);
      bool flat = true;
      for (std::size_t j = 0; j < m; ++j) {
        jac[j][k] = (rw[j] - r[j]) / step;
        flat = flat && jac[j][k] == 0;
      }
      if (!flat) break;
    }
  }
  return jac;
}

std::string describe(const std::vector<Parameter>& params, const std::vector<double>& values) {
  std::string s;
  for (std::size_t i = 0; i < params.size(); ++i)
    s += fmt::format("{}{}={:.6g}", i ? " " : "", params[i].key, values[i]);
  return s;
}

}  // namespace

Solution solve(Evaluator& model, const std::vector<Figure>& figures, const std::vector<std::size_t>& in_fit,
               const std::vector<Parameter>& params, const std::vector<std::size_t>& free, const Options& options) {
  const LogSpace space(params, free);
  const std::size_t m = in_fit.size(), n = free.size();
  auto residuals = [&](const std::vector<double>& u) {
    const std::vector<double> v = space.values(u);
    std::vector<double> r(m);
    for (std::size_t j = 0; j < m; ++j) {
      const Figure& f = figures[in_fit[j]];
      r[j] = (model.simulate(in_fit[j], v) - f.published) / f.published;
    }
    return r;
  };
  auto sum_sq = [](const std::vector<double>& r) {
    double s = 0;
    for (double x : r) s += x * x;
    return s;
  };
  std::string ids;
  for (std::size_t j : in_fit) ids += (ids.empty() ? "" : ", ") + figures[j].id;

  std::vector<double> u = space.u0, r = residuals(u);
  double cost = sum_sq(r);
  Solution s;
  double lambda = 1e-3;
  auto finish = [&](std::string why) {
    s.values = space.values(u);
    s.cost = cost;
    s.stop = std::move(why);
    if (options.progress)
      options.progress(fmt::format("fit to {}: {} after {} iteration(s); sum of squares {:.4g}; {}", ids, s.stop,
                                   s.iterations, s.cost, describe(params, s.values)));
    return s;
  };
  for (;;) {
    if (cost <= options.reproduced) return finish("the figures are reproduced");
    if (s.iterations >= options.max_iterations) {
      s.capped = true;
      return finish(fmt::format("stopped at the iteration cap ({})", options.max_iterations));
    }
    ++s.iterations;
    // Forward differences in log-space; backward at the upper bound. A flat column (the figures
    // do not move over so small a step, e.g. on a plateau of max()) tries ten and a hundred times
    // the step.
    const std::vector<std::vector<double>> jac = jacobian(space, u, r, residuals, options);
    std::vector<double> g(n, 0);
    std::vector<std::vector<double>> a(n, std::vector<double>(n, 0));
    for (std::size_t j = 0; j < m; ++j)
      for (std::size_t k = 0; k < n; ++k) {
        g[k] += jac[j][k] * r[j];
        for (std::size_t l = 0; l < n; ++l) a[k][l] += jac[j][k] * jac[j][l];
      }
    // Projection: a parameter on a bound whose descent direction leaves the box stays there.
    std::vector<std::size_t> act;
    for (std::size_t k = 0; k < n; ++k) {
      const bool out = (u[k] <= space.lo[k] && g[k] > 0) || (u[k] >= space.hi[k] && g[k] < 0);
      if (!out && g[k] != 0) act.push_back(k);
    }
    if (act.empty()) return finish("stationary (every parameter on a bound or without effect)");
    double dmax = 0;
    for (std::size_t k : act) dmax = std::max(dmax, a[k][k]);
    bool accepted = false;
    double improvement = 0;
    while (!accepted) {
      if (lambda > 1e4) return finish("no further decrease (the figures' resolution)");
      const std::size_t q = act.size();
      std::vector<std::vector<double>> sys(q, std::vector<double>(q));
      std::vector<double> rhs(q), d;
      for (std::size_t x = 0; x < q; ++x) {
        for (std::size_t y = 0; y < q; ++y) sys[x][y] = a[act[x]][act[y]];
        sys[x][x] += lambda * std::max(a[act[x]][act[x]], 1e-12 * dmax);
        rhs[x] = -g[act[x]];
      }
      if (!solve_dense(sys, rhs, d)) {
        lambda *= 10;
        continue;
      }
      std::vector<double> w = u;
      for (std::size_t x = 0; x < q; ++x) {
        const std::size_t k = act[x];
        w[k] = std::clamp(u[k] + d[x], space.lo[k], space.hi[k]);
      }
      if (w == u) return finish("stationary (the step is below the parameters' resolution)");
      const std::vector<double> rw = residuals(w);
      const double cw = sum_sq(rw);
      if (cw < cost) {
        improvement = (cost - cw) / cost;
        u = w;
        r = rw;
        cost = cw;
        lambda = std::max(lambda / 10, 1e-12);
        accepted = true;
      } else {
        lambda *= 10;
      }
    }
    if (options.progress)
      options.progress(fmt::format("fit to {}: iteration {}: sum of squares {:.4g}; {}", ids, s.iterations, cost,
                                   describe(params, space.values(u))));
    if (improvement < options.min_improvement)
      return finish(fmt::format("converged (improvement below {:g})", options.min_improvement));
  }
}

Result calibrate(Evaluator& model, const std::vector<Figure>& figures, const std::vector<Parameter>& params,
                 const Options& options) {
  CachedEvaluator cached(model);
  Result res;
  std::vector<std::size_t> in_fit;
  for (std::size_t j = 0; j < figures.size(); ++j)
    if (figures[j].fitted) in_fit.push_back(j);
  auto names = [&](const std::vector<std::size_t>& idx) {
    std::string s;
    for (std::size_t j : idx) s += (s.empty() ? "" : ", ") + figures[j].id;
    return s;
  };
  if (in_fit.size() < params.size())
    throw InputError(fmt::format("{} figure(s) ({}) cannot fit {} parameters; give more figures or fewer parameters",
                                 in_fit.size(), names(in_fit), params.size()));
  std::vector<double> starts;
  for (const auto& p : params) starts.push_back(p.start);
  for (const auto& f : figures) {
    FigureResult fr;
    fr.figure = f;
    fr.start = cached.simulate(res.figures.size(), starts);
    if (!(fr.start > 0))
      throw InputError(f.id + ": simulated " + fmt::format("{:g}", fr.start) + "; a fitted figure is positive");
    res.figures.push_back(fr);
  }
  // The screen: each parameter over its whole bounds, the others at their start.
  std::vector<std::size_t> free;
  for (std::size_t i = 0; i < params.size(); ++i) {
    ParameterResult pr;
    pr.parameter = params[i];
    pr.value = params[i].start;
    pr.moves.assign(figures.size(), 0);
    std::vector<double> lo = starts, hi = starts;
    lo[i] = params[i].min;
    hi[i] = params[i].max;
    std::vector<std::size_t> movers;
    for (std::size_t j : in_fit) {
      pr.moves[j] = (cached.simulate(j, hi) - cached.simulate(j, lo)) / res.figures[j].start;
      if (std::fabs(pr.moves[j]) > options.sensitivity_threshold) movers.push_back(j);
    }
    pr.fitted = movers.size() >= 2;
    if (!pr.fitted)
      pr.note = movers.empty() ? fmt::format("no figure moves it by more than {:g}% over its bounds",
                                             100 * options.sensitivity_threshold)
                               : "only " + figures[movers.front()].id + " moves it";
    if (pr.fitted) free.push_back(i);
    if (options.progress)
      options.progress(pr.parameter.key + (pr.fitted ? ": moves " + names(movers) : ": " + pr.note));
    res.parameters.push_back(pr);
  }
  if (free.empty()) {
    std::string why;
    for (const auto& p : res.parameters) why += "; " + p.parameter.key + ": " + p.note;
    throw InputError("no parameter can be fitted to " + names(in_fit) + why +
                     " (a fitted parameter must move at least two figures)");
  }
  if (in_fit.size() < free.size())
    throw InputError(fmt::format("{} figure(s) ({}) cannot fit {} identifiable parameters; give more figures",
                                 in_fit.size(), names(in_fit), free.size()));
  res.all = solve(cached, figures, in_fit, params, free, options);
  for (std::size_t i : free) {
    ParameterResult& pr = res.parameters[i];
    pr.value = res.all.values[i];
    const double range = std::log(pr.parameter.max) - std::log(pr.parameter.min), at = std::log(pr.value);
    pr.bound = at - std::log(pr.parameter.min) <= 1e-6 * range   ? Bound::Lower
               : std::log(pr.parameter.max) - at <= 1e-6 * range ? Bound::Upper
                                                                 : Bound::None;
  }
  for (std::size_t j = 0; j < figures.size(); ++j) res.figures[j].at_fit = cached.simulate(j, res.all.values);
  if (in_fit.size() > free.size() && options.loo == Loo::Exact) {
    for (std::size_t k : in_fit) {
      std::vector<std::size_t> rest;
      for (std::size_t j : in_fit)
        if (j != k) rest.push_back(j);
      const Solution s = solve(cached, figures, rest, params, free, options);
      res.figures[k].loo = cached.simulate(k, s.values);
      res.figures[k].loo_values = s.values;
    }
  } else if (in_fit.size() > free.size()) {
    // From the fit with every figure: the residuals' Jacobian there says which parameters each
    // figure alone pins (the others' column is under a hundredth of the whole's, in squares: they
    // move it by a tenth as much). Linear: one bounded Gauss-Newton step without figure k from there (a
    // parameter on a bound whose step leaves the box stays), and figure k simulated at those
    // values. Refit: the whole fit without figure k, started there.
    std::vector<Parameter> at_fit = params;
    for (std::size_t i = 0; i < params.size(); ++i) at_fit[i].start = res.all.values[i];
    const LogSpace space(at_fit, free);
    auto residuals = [&](const std::vector<double>& u) {
      const std::vector<double> v = space.values(u);
      std::vector<double> r(in_fit.size());
      for (std::size_t j = 0; j < in_fit.size(); ++j)
        r[j] = (cached.simulate(in_fit[j], v) - figures[in_fit[j]].published) / figures[in_fit[j]].published;
      return r;
    };
    const std::vector<double> r = residuals(space.u0);
    const auto jac = jacobian(space, space.u0, r, residuals, options);
    const std::size_t n = free.size();
    for (std::size_t x = 0; x < in_fit.size(); ++x) {
      const std::size_t k = in_fit[x];
      std::vector<double> g(n, 0);
      std::vector<std::vector<double>> a(n, std::vector<double>(n, 0));
      for (std::size_t j = 0; j < in_fit.size(); ++j) {
        if (j == x) continue;
        for (std::size_t c = 0; c < n; ++c) {
          g[c] += jac[j][c] * r[j];
          for (std::size_t l = 0; l < n; ++l) a[c][l] += jac[j][c] * jac[j][l];
        }
      }
      for (std::size_t c = 0; c < n; ++c) {
        const double all = a[c][c] + jac[x][c] * jac[x][c];
        if (all > 0 && a[c][c] <= 0.01 * all) res.figures[k].unpinned.push_back(params[free[c]].key);
      }
      if (!res.figures[k].unpinned.empty()) continue;  // the figure alone pins a parameter
      if (options.loo == Loo::Refit) {
        std::vector<std::size_t> rest;
        for (std::size_t j : in_fit)
          if (j != k) rest.push_back(j);
        const Solution s = solve(cached, figures, rest, at_fit, free, options);
        res.figures[k].loo_values = s.values;
        res.figures[k].loo = cached.simulate(k, s.values);
        continue;
      }
      std::vector<std::size_t> act;
      for (std::size_t c = 0; c < n; ++c) {
        const bool out = (space.u0[c] <= space.lo[c] && g[c] > 0) || (space.u0[c] >= space.hi[c] && g[c] < 0);
        if (!out && a[c][c] > 0) act.push_back(c);
      }
      std::vector<double> u = space.u0;
      if (!act.empty()) {
        const std::size_t q = act.size();
        std::vector<std::vector<double>> sys(q, std::vector<double>(q));
        std::vector<double> rhs(q), d;
        for (std::size_t y = 0; y < q; ++y) {
          for (std::size_t z = 0; z < q; ++z) sys[y][z] = a[act[y]][act[z]];
          rhs[y] = -g[act[y]];
        }
        if (solve_dense(sys, rhs, d))
          for (std::size_t y = 0; y < q; ++y)
            u[act[y]] = std::clamp(u[act[y]] + d[y], space.lo[act[y]], space.hi[act[y]]);
      }
      res.figures[k].loo_values = space.values(u);
      res.figures[k].loo = cached.simulate(k, res.figures[k].loo_values);
    }
  } else {
    res.loo_note =
        fmt::format("leave-one-out needs more figures than fitted parameters ({} and {})", in_fit.size(), free.size());
  }
  res.evaluations = cached.evaluations();
  res.cache_hits = cached.hits();
  return res;
}

}  // namespace ascendsim::sim::fit
