// Calibration (sim/regression.h): host parameters fitted jointly to the published figures within
// their bounds (fit::calibrate over simulate_figure), with leave-one-out errors; the result is
// written as a table, JSON and a configuration fragment by sim/report/calibration_report.cpp.
#include "sim/regression.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <optional>
#include <set>

#include <fmt/format.h>

#include "sim/config.h"
#include "sim/core/error.h"
#include "sim/core/params.h"
#include "sim/run_yaml.h"

namespace ascendsim::sim {

using nlohmann::ordered_json;
using run_yaml::whole_real;

namespace {

std::vector<std::string> own_keys(const PublishedFigure& f) {
  std::vector<std::string> keys;
  for (const auto& s : f.run.config.sets) keys.push_back(s.substr(0, s.find('=')));
  return keys;
}

/// The figures simulated by simulate_figure(), the candidate values as overrides after each
/// figure's own (a figure that sets a key itself keeps its own value: its configuration).
class FigureModel : public fit::Evaluator {
 public:
  FigureModel(const std::vector<PublishedFigure>& figures, const std::vector<std::string>& keys)
      : m_figures(figures), m_keys(keys) {}
  double simulate(std::size_t j, const std::vector<double>& values) override {
    const PublishedFigure& f = m_figures[j];
    const std::vector<std::string> own = own_keys(f);
    std::vector<std::string> sets;
    std::string at;
    for (std::size_t i = 0; i < m_keys.size(); ++i) {
      if (std::find(own.begin(), own.end(), m_keys[i]) != own.end()) continue;
      sets.push_back(m_keys[i] + "=" + fmt::format("{}", values[i]));
      at += (at.empty() ? "" : ", ") + sets.back();
    }
    try {
      return simulate_figure(f, sets);
    } catch (const InputError& e) {
      throw InputError(f.id + " at " + at + ": " + e.what());
    }
  }

 private:
  const std::vector<PublishedFigure>& m_figures;
  const std::vector<std::string>& m_keys;
};

std::string joined(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : ", ") + x;
  return s;
}

double configured_value(const PublishedFigure& f, const std::string& key) {
  SystemConfig cfg = load_config(f.run.config);
  ParamSet ps = bind_params(cfg);
  return *std::get<double*>(ps.find(key)->target);
}

}  // namespace

Calibration calibrate(const CalibrationRequest& req) {
  Calibration c;
  c.file = load_figures_file(req.figures_path, req.config_dir);
  const std::string& path = c.file.path;
  // The parameters: known, real, at most four, each with bounds in the file.
  if (req.fit.empty()) throw InputError("--fit: give the parameter keys to fit (1 to 4), e.g. host.map_op_overhead_us");
  if (req.fit.size() > 4)
    throw InputError(
        fmt::format("--fit {}: {} parameters; at most four are fitted jointly", joined(req.fit), req.fit.size()));
  SystemConfig probe;
  ParamSet ps = bind_params(probe);
  for (std::size_t i = 0; i < req.fit.size(); ++i) {
    const std::string& key = req.fit[i];
    if (key.empty()) throw InputError("--fit " + joined(req.fit) + ": an empty key");
    for (std::size_t k = 0; k < i; ++k)
      if (req.fit[k] == key) throw InputError("--fit " + key + ": given twice");
    const ParamSpec* spec = ps.find(key);
    if (!spec) {
      ps.set(key, "0", "--fit " + key);  // throws, naming the closest keys
      throw InputError("--fit " + key + ": unknown parameter");
    }
    if (spec->type != ParamType::Real)
      throw InputError("--fit " + key + ": not a real-valued parameter; calibrate fits real-valued ones");
    const auto b =
        std::find_if(c.file.bounds.begin(), c.file.bounds.end(), [&](const FitBounds& x) { return x.key == key; });
    if (b == c.file.bounds.end())
      throw InputError("--fit " + key + ": " + path +
                       " gives no bounds for it; add it to the file's `fit:` section with min, max and why");
    c.bounds.push_back(*b);
    c.units.push_back(spec->unit);
  }
  // The figures: --only's, or those marked host_bound.
  std::vector<std::string> ids;
  if (req.only.empty()) {
    for (const auto& f : c.file.figures)
      if (f.host_bound) ids.push_back(f.id);
    if (ids.empty()) throw InputError(path + ": no figure is marked host_bound: true; name the figures with --only");
  } else {
    for (const auto& id : req.only) {
      const bool known = std::any_of(c.file.figures.begin(), c.file.figures.end(),
                                     [&](const PublishedFigure& f) { return f.id == id; });
      if (!known) {
        std::vector<std::string> all;
        for (const auto& f : c.file.figures) all.push_back(f.id);
        throw InputError("--only " + id + ": no such figure in " + path + " (" + joined(all) + ")");
      }
      if (std::count(req.only.begin(), req.only.end(), id) > 1) throw InputError("--only " + id + ": given twice");
      const auto& f = *std::find_if(c.file.figures.begin(), c.file.figures.end(),
                                    [&](const PublishedFigure& x) { return x.id == id; });
      if (!f.not_compared.empty())
        throw InputError("--only " + id + ": the figure is not compared (" + f.not_compared +
                         "); a fit to it would fit what the model does not claim");
      ids.push_back(id);
    }
  }
  std::vector<fit::Figure> figs;
  for (const auto& f : c.file.figures) {
    const bool fitted = std::find(ids.begin(), ids.end(), f.id) != ids.end();
    if (f.run.devices > 8) {
      if (fitted)
        throw InputError("--only " + f.id + ": " + std::to_string(f.run.devices) +
                         " devices cannot be simulated yet; leave it out");
      continue;
    }
    if (fitted)
      for (const auto& key : own_keys(f))
        if (std::find(req.fit.begin(), req.fit.end(), key) != req.fit.end())
          throw InputError("--fit " + key + ": figure " + f.id + " sets it itself (its configuration); leave " + f.id +
                           " out (--only) or fit another parameter");
    c.figures.push_back(f);
    figs.push_back({f.id, f.value, fitted});
  }
  // The start: each parameter's configured value (one value in every fitted figure's
  // configuration), or --start's.
  std::vector<fit::Parameter> params;
  for (std::size_t i = 0; i < req.fit.size(); ++i) {
    fit::Parameter p{req.fit[i], c.bounds[i].min, c.bounds[i].max, 0};
    bool first = true;
    std::string first_id;
    for (const auto& f : c.figures) {
      if (std::find(ids.begin(), ids.end(), f.id) == ids.end()) continue;
      const double v = configured_value(f, p.key);
      if (!first && v != p.start)
        throw InputError(
            fmt::format("--fit {}: {:g} in {}'s configuration and {:g} in {}'s; a fitted parameter has "
                        "one value",
                        p.key, p.start, first_id, v, f.id));
      if (first) first_id = f.id;
      p.start = v;
      first = false;
    }
    params.push_back(p);
  }
  std::set<std::string> started;
  for (const auto& s : req.start) {
    const auto eq = s.find('=');
    const std::string key = s.substr(0, eq);
    const auto at = std::find(req.fit.begin(), req.fit.end(), key);
    if (eq == std::string::npos || at == req.fit.end())
      throw InputError("--start " + s + ": give key=value for a parameter of --fit (" + joined(req.fit) + ")");
    if (!started.insert(key).second) throw InputError("--start " + key + " is given twice; keep one");
    const std::optional<double> v = whole_real(s.substr(eq + 1));
    if (!v) throw InputError("--start " + s + ": expects a number");
    params[static_cast<std::size_t>(at - req.fit.begin())].start = *v;
  }
  for (std::size_t i = 0; i < params.size(); ++i)
    if (!(params[i].start >= params[i].min && params[i].start <= params[i].max))
      throw InputError(
          fmt::format("--fit {}: the start {:g} lies outside its bounds [{:g}, {:g}] in {}; give --start "
                      "{}=VALUE inside them or widen the bounds",
                      params[i].key, params[i].start, params[i].min, params[i].max, path, params[i].key));
  FigureModel model(c.figures, req.fit);
  c.result = fit::calibrate(model, figs, params, req.options);
  return c;
}

}  // namespace ascendsim::sim
