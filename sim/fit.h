// Calibration of a few model parameters against published figures: a bounded least-squares fit
// of the figures' relative errors (projected Levenberg-Marquardt in the logarithm of each
// parameter, forward-difference Jacobian), the identifiability screen that decides which
// parameters the figures can fix at all, and leave-one-out refits. The model behind the figures
// is an Evaluator, so the solver runs without the simulator (docs/validation.md, "Calibration").
#pragma once

#include <cstddef>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace ascendsim::sim::fit {

/// The model: figure `figure`'s simulated value with the parameters at `values` (one per
/// Parameter given to calibrate(), in its order). Must be deterministic.
class Evaluator {
 public:
  virtual ~Evaluator() = default;
  virtual double simulate(std::size_t figure, const std::vector<double>& values) = 0;
};

/// Remembers every evaluation: the same figure at the same values (bit for bit) runs once.
class CachedEvaluator : public Evaluator {
 public:
  explicit CachedEvaluator(Evaluator& inner) : m_inner(inner) {}
  double simulate(std::size_t figure, const std::vector<double>& values) override;
  std::size_t evaluations() const { return m_cache.size(); }  ///< distinct ones, run by the inner evaluator
  std::size_t hits() const { return m_hits; }                 ///< answered from the cache

 private:
  Evaluator& m_inner;
  std::map<std::pair<std::size_t, std::vector<double>>, double> m_cache;
  std::size_t m_hits = 0;
};

struct Parameter {
  std::string key;
  double min = 0, max = 0;  ///< bounds, 0 < min < max
  double start = 0;         ///< min <= start <= max
};

struct Figure {
  std::string id;
  double published = 0;  ///< > 0
  bool fitted = true;    ///< in the objective; else only simulated at the start and at the fit
};

/// How a figure's left-out error is had: `Exact` repeats the whole fit without it, from the start;
/// `Linear` takes one bounded Gauss-Newton step without it from the fit with every figure, on the
/// Jacobian there, and simulates the figure at those values (one simulation per figure).
/// `Refit` repeats the fit without it, started at the fit with every figure. Where no remaining
/// figure moves a parameter (its Jacobian column without the figure is nought), the figure was the
/// only one pinning it: `Linear` and `Refit` say so (FigureResult::unpinned) instead of a value.
enum class Loo { Exact, Refit, Linear };

struct Options {
  Loo loo = Loo::Exact;
  int max_iterations = 30;        ///< Levenberg-Marquardt iterations per fit (each a Jacobian)
  double min_improvement = 1e-6;  ///< stop when an accepted step lowers the sum of squares by less than this share
  double fd_step = 1e-3;          ///< finite-difference step, as a share of the parameter's log-range
  double sensitivity_threshold = 0.01;  ///< a figure "moves" when it changes by more than this share over the bounds
  double reproduced = 1e-14;  ///< stop when the sum of squared relative errors is below this (1e-7 per figure)
  std::function<void(const std::string&)> progress;  ///< optional: a line per fit and iteration
};

enum class Bound { None, Lower, Upper };

/// One fit's outcome.
struct Solution {
  std::vector<double> values;  ///< every parameter (the unfitted ones at their start)
  double cost = 0;             ///< sum of squared relative errors of the fitted figures
  int iterations = 0;
  bool capped = false;  ///< stopped by max_iterations
  std::string stop;     ///< why it stopped
};

struct ParameterResult {
  Parameter parameter;
  bool fitted = false;
  std::string note;  ///< why not fitted ("only C1 moves it"), empty if fitted
  double value = 0;  ///< fitted value (the start if not fitted)
  Bound bound = Bound::None;
  /// Per figure (as given to calibrate()): (sim at max - sim at min) / sim at start, the others at
  /// their start; only for fitted figures (0 for the others).
  std::vector<double> moves;
};

struct FigureResult {
  Figure figure;
  double start = 0;                ///< simulated at the start values
  double at_fit = 0;               ///< simulated at the fit with every fitted figure
  std::optional<double> loo;       ///< simulated at the fit without this figure (fitted figures)
  std::vector<double> loo_values;  ///< that fit's parameter values
  /// Leave-one-out: the parameters no other fitted figure moves (their keys); no left-out value then.
  std::vector<std::string> unpinned;
  double start_error() const { return (start - figure.published) / figure.published; }
  double fit_error() const { return (at_fit - figure.published) / figure.published; }
  std::optional<double> loo_error() const {
    return loo ? std::optional<double>((*loo - figure.published) / figure.published) : std::nullopt;
  }
  double moved_by() const { return (at_fit - start) / start; }  ///< at the fit against the start
};

struct Result {
  std::vector<ParameterResult> parameters;
  std::vector<FigureResult> figures;
  Solution all;          ///< the fit with every fitted figure
  std::string loo_note;  ///< why leave-one-out was not run, empty if it was
  std::size_t evaluations = 0, cache_hits = 0;
};

/// Minimises the sum of squared relative errors of the figures `in_fit` (indices into `figures`)
/// over the parameters `free` (indices into `params`), the others at their start; bounded, in the
/// logarithm of each parameter. Deterministic.
Solution solve(Evaluator& model, const std::vector<Figure>& figures, const std::vector<std::size_t>& in_fit,
               const std::vector<Parameter>& params, const std::vector<std::size_t>& free, const Options& options);

/// The screen, the fit with every fitted figure, one refit without each of them, and every figure
/// simulated at the fit. Throws InputError when fewer figures than identifiable parameters remain
/// or none is identifiable (the message says which parameter only one figure moves).
Result calibrate(Evaluator& model, const std::vector<Figure>& figures, const std::vector<Parameter>& params,
                 const Options& options);

/// Solves the n x n system A x = b (n small) by Gaussian elimination with partial pivoting;
/// false if A is singular.
bool solve_dense(std::vector<std::vector<double>> a, std::vector<double> b, std::vector<double>& x);

}  // namespace ascendsim::sim::fit
