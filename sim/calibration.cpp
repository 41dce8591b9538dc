// Calibration (sim/regression.h): host parameters fitted jointly to the published figures within
// their bounds (fit::calibrate over simulate_figure), with leave-one-out errors; the result as a
// table, JSON and a configuration fragment.
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
#include "sim/report/report.h"
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

std::string fitted_ids(const Calibration& c) {
  std::vector<std::string> ids;
  for (const auto& fr : c.result.figures)
    if (fr.figure.fitted) ids.push_back(fr.figure.id);
  return joined(ids);
}

std::string pct(double r) { return fmt::format("{:+.1f}%", 100 * r); }

const char* bound_word(fit::Bound b) {
  return b == fit::Bound::Lower ? "lower" : b == fit::Bound::Upper ? "upper" : nullptr;
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

std::string calibration_table(const Calibration& c) {
  const fit::Result& r = c.result;
  std::string out;
  for (const auto& p : r.parameters)
    if (!p.fitted) out += p.parameter.key + ": " + p.note + "; not fitted, stays assumed\n";
  if (!out.empty()) out += "\n";
  report::TextTable pt({"parameter", "unit", "start", "fitted", "min", "max", "note"}, {1, 6});
  for (std::size_t i = 0; i < r.parameters.size(); ++i) {
    const auto& p = r.parameters[i];
    std::string note = !p.fitted                     ? "not fitted: " + p.note
                       : p.bound == fit::Bound::None ? ""
                                                     : std::string("at its ") + bound_word(p.bound) + " bound";
    pt.add({p.parameter.key, c.units[i], fmt::format("{:.4g}", p.parameter.start),
            p.fitted ? fmt::format("{:.4g}", p.value) : "-", fmt::format("{:g}", p.parameter.min),
            fmt::format("{:g}", p.parameter.max), note});
  }
  const std::string parameters_table = pt.render();
  // How much each fitted figure moves over each parameter's bounds (the screen).
  std::vector<std::string> head{"moves over the bounds"};
  for (const auto& fr : r.figures)
    if (fr.figure.fitted) head.push_back(fr.figure.id);
  report::TextTable mt(head);
  for (const auto& p : r.parameters) {
    std::vector<std::string> row{p.parameter.key};
    for (std::size_t j = 0; j < r.figures.size(); ++j)
      if (r.figures[j].figure.fitted) row.push_back(pct(p.moves[j]));
    mt.add(row);
  }
  const std::string moves_table = mt.render();
  report::TextTable ft({"figure", "published", "at start", "error", "fitted", "error", "left out"});
  for (std::size_t j = 0; j < r.figures.size(); ++j) {
    const auto& fr = r.figures[j];
    if (!fr.figure.fitted) continue;
    const std::string unit = " " + c.figures[j].unit;
    ft.add({fr.figure.id, fmt::format("{:g}{}", fr.figure.published, unit), fmt::format("{:.4g}{}", fr.start, unit),
            pct(fr.start_error()), fmt::format("{:.4g}{}", fr.at_fit, unit), pct(fr.fit_error()),
            fr.loo_error() ? pct(*fr.loo_error()) : "-"});
  }
  out += ft.render();
  if (!r.loo_note.empty()) out += "left out: " + r.loo_note + "\n";
  bool others = false;
  report::TextTable ot({"not fitted", "published", "at start", "at fit", "moved by", "error at fit"});
  for (std::size_t j = 0; j < r.figures.size(); ++j) {
    const auto& fr = r.figures[j];
    if (fr.figure.fitted) continue;
    others = true;
    const std::string unit = " " + c.figures[j].unit;
    const bool flag = !c.figures[j].host_bound && c.figures[j].not_compared.empty() && std::fabs(fr.moved_by()) > 0.02;
    ot.add({fr.figure.id, fmt::format("{:g}{}", fr.figure.published, unit), fmt::format("{:.4g}{}", fr.start, unit),
            fmt::format("{:.4g}{}", fr.at_fit, unit), pct(fr.moved_by()) + (flag ? " !" : ""), pct(fr.fit_error())});
  }
  if (others) out += "\n" + ot.render();
  out += "\n" + parameters_table + "\n" + moves_table;
  out += fmt::format(
      "\nfit to {}: {}; {} iteration(s), sum of squared errors {:.4g}; {} simulations ({} repeated "
      "ones answered from the cache)\n",
      fitted_ids(c), r.all.stop, r.all.iterations, r.all.cost, r.evaluations, r.cache_hits);
  for (const auto& p : r.parameters)
    if (p.fitted && p.bound != fit::Bound::None)
      out += fmt::format("{} is at its {} bound: the figures ask for a value the bounds ({}) call implausible\n",
                         p.parameter.key, bound_word(p.bound), c.file.path);
  for (std::size_t j = 0; j < r.figures.size(); ++j)
    if (!r.figures[j].figure.fitted && !c.figures[j].host_bound && c.figures[j].not_compared.empty() &&
        std::fabs(r.figures[j].moved_by()) > 0.02)
      out += fmt::format("{} (not host-bound) moved by {} at the fit; device-bound figures should move at most 2%\n",
                         r.figures[j].figure.id, pct(r.figures[j].moved_by()));
  return out;
}

nlohmann::ordered_json calibration_json(const Calibration& c) {
  const fit::Result& r = c.result;
  ordered_json j;
  j["figures_file"] = c.file.path;
  ordered_json params = ordered_json::array();
  for (std::size_t i = 0; i < r.parameters.size(); ++i) {
    const auto& p = r.parameters[i];
    ordered_json q;
    q["key"] = p.parameter.key;
    q["unit"] = c.units[i];
    q["min"] = p.parameter.min;
    q["max"] = p.parameter.max;
    q["why"] = c.bounds[i].why;
    q["start"] = p.parameter.start;
    q["fitted"] = p.fitted;
    q["value"] = p.fitted ? ordered_json(p.value) : ordered_json();
    q["at_bound"] = bound_word(p.bound) ? ordered_json(bound_word(p.bound)) : ordered_json();
    if (!p.fitted) q["note"] = p.note;
    ordered_json moves = ordered_json::object();
    for (std::size_t k = 0; k < r.figures.size(); ++k)
      if (r.figures[k].figure.fitted) moves[r.figures[k].figure.id] = p.moves[k];
    q["moves_over_bounds"] = moves;
    params.push_back(q);
  }
  j["parameters"] = params;
  ordered_json figs = ordered_json::array();
  for (std::size_t k = 0; k < r.figures.size(); ++k) {
    const auto& fr = r.figures[k];
    ordered_json f;
    f["id"] = fr.figure.id;
    f["unit"] = c.figures[k].unit;
    f["host_bound"] = c.figures[k].host_bound;
    f["fitted"] = fr.figure.fitted;
    f["published"] = fr.figure.published;
    f["start"] = fr.start;
    f["start_error"] = fr.start_error();
    f["at_fit"] = fr.at_fit;
    f["fit_error"] = fr.fit_error();
    f["moved_by"] = fr.moved_by();
    if (fr.figure.fitted) {
      f["left_out"] = fr.loo ? ordered_json(*fr.loo) : ordered_json();
      f["left_out_error"] = fr.loo_error() ? ordered_json(*fr.loo_error()) : ordered_json();
      ordered_json lv = ordered_json::object();
      for (std::size_t i = 0; i < fr.loo_values.size(); ++i)
        if (r.parameters[i].fitted) lv[r.parameters[i].parameter.key] = fr.loo_values[i];
      f["left_out_values"] = lv;
    }
    figs.push_back(f);
  }
  j["figures"] = figs;
  ordered_json fit;
  fit["stop"] = r.all.stop;
  fit["iterations"] = r.all.iterations;
  fit["capped"] = r.all.capped;
  fit["sum_of_squares"] = r.all.cost;
  fit["simulations"] = r.evaluations;
  fit["cache_hits"] = r.cache_hits;
  if (!r.loo_note.empty()) fit["left_out_note"] = r.loo_note;
  j["fit"] = fit;
  return j;
}

std::string calibration_yaml(const Calibration& c) {
  const fit::Result& r = c.result;
  const std::string ids = fitted_ids(c);
  std::string out = "# Fitted by ascendsim calibrate to " + ids + " (" + c.file.path +
                    "), each within the bounds of that file's fit section.\n";
  for (const auto& p : r.parameters)
    if (!p.fitted) out += "# " + p.parameter.key + ": not fitted (" + p.note + "); stays assumed\n";
  // Nested by the keys' sections, in --fit order of first appearance.
  struct Item {
    std::vector<std::string> path;
    std::string line;
  };
  std::vector<Item> items;
  for (const auto& p : r.parameters) {
    if (!p.fitted) continue;
    Item it;
    for (const auto& part : [&] {
           std::vector<std::string> parts;
           std::size_t from = 0;
           for (std::size_t dot; (dot = p.parameter.key.find('.', from)) != std::string::npos; from = dot + 1)
             parts.push_back(p.parameter.key.substr(from, dot - from));
           parts.push_back(p.parameter.key.substr(from));
           return parts;
         }())
      it.path.push_back(part);
    it.line = fmt::format("{:.6g}  # fitted by ascendsim calibrate to {}; bounds [{:g}, {:g}]{}", p.value, ids,
                          p.parameter.min, p.parameter.max,
                          bound_word(p.bound) ? std::string(", at the ") + bound_word(p.bound) + " bound" : "");
    items.push_back(std::move(it));
  }
  std::function<void(const std::vector<const Item*>&, std::size_t)> emit = [&](const std::vector<const Item*>& group,
                                                                               std::size_t depth) {
    std::vector<std::string> order;
    for (const Item* it : group)
      if (std::find(order.begin(), order.end(), it->path[depth]) == order.end()) order.push_back(it->path[depth]);
    for (const auto& name : order) {
      std::vector<const Item*> sub;
      for (const Item* it : group)
        if (it->path[depth] == name) sub.push_back(it);
      const std::string indent(2 * depth, ' ');
      if (sub.size() == 1 && sub.front()->path.size() == depth + 1) {
        out += indent + name + ": " + sub.front()->line + "\n";
      } else {
        out += indent + name + ":\n";
        emit(sub, depth + 1);
      }
    }
  };
  std::vector<const Item*> all;
  for (const auto& it : items) all.push_back(&it);
  emit(all, 0);
  return out;
}

}  // namespace ascendsim::sim
