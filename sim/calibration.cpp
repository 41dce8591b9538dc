// Calibration (sim/regression.h): host parameters fitted jointly to the published figures within
// their bounds (fit::calibrate over simulate_figure), with leave-one-out errors; the result is
// written as a table, JSON and a configuration fragment by sim/report/calibration_report.cpp.
#include "sim/regression.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <functional>
#include <limits>
#include <map>
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

/// A fitted key, `PRESET:key` for a parameter of one host preset (the figures whose servers carry
/// it), else `key` for every figure.
struct Scoped {
  std::string preset, key;
};
Scoped scoped(const std::string& k) {
  const auto colon = k.find(':');
  if (colon == std::string::npos) return {"", k};
  return {k.substr(0, colon), k.substr(colon + 1)};
}

/// Each figure's host presets, its configuration loaded once (by id).
class PresetChains {
 public:
  const std::vector<HostPresetUse>& of(const PublishedFigure& f) {
    auto it = m_chains.find(f.id);
    if (it == m_chains.end()) it = m_chains.emplace(f.id, load_config(f.run.config).host_presets).first;
    return it->second;
  }

 private:
  std::map<std::string, std::vector<HostPresetUse>> m_chains;
};

/// The host presets whose fitted parameters reach a figure of this chain: per preset, the keys it
/// marks that no later preset of the chain (one made from it) marks again — that one's value wins.
std::map<std::string, std::set<std::string>> host_presets_of(const std::vector<HostPresetUse>& chain) {
  std::map<std::string, std::set<std::string>> out;
  for (std::size_t i = 0; i < chain.size(); ++i) {
    auto& keys = out[chain[i].name];
    for (const auto& k : chain[i].fitted) {
      bool overridden = false;
      for (std::size_t later = i + 1; later < chain.size(); ++later)
        overridden = overridden || std::find(chain[later].fitted.begin(), chain[later].fitted.end(), k) !=
                                       chain[later].fitted.end();
      if (!overridden) keys.insert(k);
    }
  }
  return out;
}

/// Whether the scoped key reaches a figure of these presets: an unscoped key always; `P:k` when the
/// figure's server carries P and no preset made from P marks k as its own.
bool reaches(const std::map<std::string, std::set<std::string>>& presets, const std::string& preset,
             const std::string& key) {
  if (preset.empty()) return true;
  const auto it = presets.find(preset);
  if (it == presets.end()) return false;
  for (const auto& [name, keys] : presets)
    if (name != preset && keys.count(key) && !it->second.count(key)) return false;  // a derived preset's own
  return true;
}

std::vector<std::string> own_keys(const PublishedFigure& f) {
  std::vector<std::string> keys;
  for (const auto& s : f.run.config.sets) keys.push_back(s.substr(0, s.find('=')));
  return keys;
}

/// The figures simulated by simulate_figure(), the candidate values as overrides after each
/// figure's own (a figure that sets a key itself keeps its own value: its configuration).
class FigureModel : public fit::Evaluator {
 public:
  FigureModel(const std::vector<PublishedFigure>& figures, const std::vector<std::string>& keys,
              std::vector<std::map<std::string, std::set<std::string>>> presets)
      : m_figures(figures), m_keys(keys), m_presets(std::move(presets)) {}
  double simulate(std::size_t j, const std::vector<double>& values) override {
    const PublishedFigure& f = m_figures[j];
    const std::vector<std::string> own = own_keys(f);
    std::vector<std::string> sets;
    std::string at;
    for (std::size_t i = 0; i < m_keys.size(); ++i) {
      const Scoped k = scoped(m_keys[i]);
      if (std::find(own.begin(), own.end(), k.key) != own.end()) continue;
      if (!reaches(m_presets[j], k.preset, k.key)) continue;  // another host's
      sets.push_back(k.key + "=" + fmt::format("{}", values[i]));
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
  std::vector<std::map<std::string, std::set<std::string>>> m_presets;  ///< per figure, its host presets' fitted keys
};

std::string joined(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : ", ") + x;
  return s;
}

double configured_value(const PublishedFigure& f, const std::string& key) {
  SystemConfig cfg = load_config(f.run.config);
  ParamSet ps = bind_params(cfg);
  return *std::get<double*>(ps.find(scoped(key).key)->target);
}

/// The parameters the host presets of the figures `ids` mark as fitted, each scoped to its preset,
/// in the order the figures meet them.
std::vector<std::string> preset_fitted(const std::vector<PublishedFigure>& figures, const std::vector<std::string>& ids,
                                       PresetChains& chains) {
  std::vector<std::string> keys;
  for (const auto& f : figures) {
    if (std::find(ids.begin(), ids.end(), f.id) == ids.end()) continue;
    for (const auto& use : chains.of(f))
      for (const auto& k : use.fitted) {
        const std::string key = use.name + ":" + k;
        if (std::find(keys.begin(), keys.end(), key) == keys.end()) keys.push_back(key);
      }
  }
  return keys;
}

/// The host presets in the configuration directory (configs/hosts/*.yaml), by name.
std::vector<std::string> host_preset_names(const std::string& config_dir) {
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(std::filesystem::path(config_dir) / "hosts", ec))
    if (e.path().extension() == ".yaml") names.push_back(e.path().stem().string());
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace

Calibration calibrate(const CalibrationRequest& req) {
  Calibration c;
  c.file = load_figures_file(req.figures_path, req.config_dir);
  const std::string& path = c.file.path;
  // The figures: --only's, or those marked host_bound (chosen first: with no --fit, their
  // servers' host presets name the parameters).
  std::vector<std::string> ids = figure_ids(c.file, req.only);
  std::vector<std::string> fit_keys = req.fit;
  PresetChains chains;
  if (fit_keys.empty()) {
    fit_keys = preset_fitted(c.file.figures, ids, chains);
    // A preset's parameter that reaches none of the figures fitted (--only named another server's)
    // is left as it is.
    std::vector<std::string> reached;
    for (const auto& key : fit_keys) {
      const Scoped sc = scoped(key);
      bool any = false;
      for (const auto& f : c.file.figures)
        if (std::find(ids.begin(), ids.end(), f.id) != ids.end() && f.run.devices <= 8)
          any = any || reaches(host_presets_of(chains.of(f)), sc.preset, sc.key);
      if (any) reached.push_back(key);
    }
    fit_keys = reached;
    if (fit_keys.empty())
      throw InputError("--fit: the host presets of the figures fitted mark no parameter as fitted (host.fitted); name "
                       "the parameters to fit, e.g. --fit host.map_op_overhead_us");
  }
  c.keys = fit_keys;
  // The parameters: known, real, at most six, each with bounds in the file.
  if (fit_keys.size() > 6)
    throw InputError(
        fmt::format("--fit {}: {} parameters; at most six are fitted jointly", joined(fit_keys), fit_keys.size()));
  SystemConfig probe;
  ParamSet ps = bind_params(probe);
  const std::vector<std::string> presets = host_preset_names(req.config_dir);
  for (std::size_t i = 0; i < fit_keys.size(); ++i) {
    const std::string& full = fit_keys[i];
    if (full.empty()) throw InputError("--fit " + joined(fit_keys) + ": an empty key");
    for (std::size_t k = 0; k < i; ++k)
      if (fit_keys[k] == full) throw InputError("--fit " + full + ": given twice");
    const Scoped sc = scoped(full);
    if (!sc.preset.empty() && std::find(presets.begin(), presets.end(), sc.preset) == presets.end())
      throw InputError("--fit " + full + ": no host preset '" + sc.preset + "' (" + joined(presets) + ")");
    const std::string& key = sc.key;
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
    c.bounds.back().key = full;
    c.units.push_back(spec->unit);
  }
  std::vector<fit::Figure> figs;
  std::vector<std::map<std::string, std::set<std::string>>> figure_presets;
  for (const auto& f : c.file.figures) {
    const bool fitted = std::find(ids.begin(), ids.end(), f.id) != ids.end();
    if (fitted)
      for (const auto& key : own_keys(f))
        for (const auto& full : fit_keys)
          if (scoped(full).key == key)
            throw InputError("--fit " + key + ": figure " + f.id + " sets it itself (its configuration); leave " +
                             f.id + " out (--only) or fit another parameter");
    c.figures.push_back(f);
    figs.push_back({f.id, f.value, fitted});
    figure_presets.push_back(host_presets_of(chains.of(f)));
  }
  // The start: each parameter's configured value (one value in every fitted figure's
  // configuration it applies to), or --start's.
  std::vector<fit::Parameter> params;
  for (std::size_t i = 0; i < fit_keys.size(); ++i) {
    fit::Parameter p{fit_keys[i], c.bounds[i].min, c.bounds[i].max, 0};
    const Scoped sc = scoped(p.key);
    bool first = true;
    std::string first_id;
    for (std::size_t j = 0; j < c.figures.size(); ++j) {
      const auto& f = c.figures[j];
      if (std::find(ids.begin(), ids.end(), f.id) == ids.end()) continue;
      if (!reaches(figure_presets[j], sc.preset, sc.key)) continue;
      const double v = configured_value(f, p.key);
      if (!first && v != p.start)
        throw InputError(
            fmt::format("--fit {}: {:g} in {}'s configuration and {:g} in {}'s; a fitted parameter has "
                        "one value (a parameter of one server's host is fitted as HOSTPRESET:{})",
                        p.key, p.start, first_id, v, f.id, sc.key));
      if (first) first_id = f.id;
      p.start = v;
      first = false;
    }
    if (first)
      throw InputError("--fit " + p.key + ": no fitted figure runs on a server with host preset '" + sc.preset + "'");
    params.push_back(p);
  }
  std::set<std::string> started;
  for (const auto& s : req.start) {
    const auto eq = s.find('=');
    const std::string key = s.substr(0, eq);
    const auto at = std::find(fit_keys.begin(), fit_keys.end(), key);
    if (eq == std::string::npos || at == fit_keys.end())
      throw InputError("--start " + s + ": give key=value for a parameter of --fit (" + joined(fit_keys) + ")");
    if (!started.insert(key).second) throw InputError("--start " + key + " is given twice; keep one");
    const std::optional<double> v = whole_real(s.substr(eq + 1));
    if (!v) throw InputError("--start " + s + ": expects a number");
    params[static_cast<std::size_t>(at - fit_keys.begin())].start = *v;
  }
  for (std::size_t i = 0; i < params.size(); ++i)
    if (!(params[i].start >= params[i].min && params[i].start <= params[i].max))
      throw InputError(
          fmt::format("--fit {}: the start {:g} lies outside its bounds [{:g}, {:g}] in {}; give --start "
                      "{}=VALUE inside them or widen the bounds",
                      params[i].key, params[i].start, params[i].min, params[i].max, path, params[i].key));
  FigureModel model(c.figures, c.keys, figure_presets);
  c.loo = req.options.loo;
  c.result = fit::calibrate(model, figs, params, req.options);
  return c;
}

std::vector<std::string> figure_ids(const FiguresFile& file, const std::vector<std::string>& only) {
  const std::string& path = file.path;
  const auto& figures = file.figures;
  std::vector<std::string> ids;
  if (only.empty()) {
    for (const auto& f : figures)
      if (f.host_bound) ids.push_back(f.id);
    if (ids.empty()) throw InputError(path + ": no figure is marked host_bound: true; name the figures with --only");
  } else {
    for (const auto& id : only) {
      const bool known = std::any_of(figures.begin(), figures.end(),
                                     [&](const PublishedFigure& f) { return f.id == id; });
      if (!known) {
        std::vector<std::string> all;
        for (const auto& f : figures) all.push_back(f.id);
        throw InputError("--only " + id + ": no such figure in " + path + " (" + joined(all) + ")");
      }
      if (std::count(only.begin(), only.end(), id) > 1) throw InputError("--only " + id + ": given twice");
      const auto& f = *std::find_if(figures.begin(), figures.end(),
                                    [&](const PublishedFigure& x) { return x.id == id; });
      if (!f.not_compared.empty())
        throw InputError("--only " + id + ": the figure is not compared (" + f.not_compared +
                         "); a fit to it would fit what the model does not claim");
      ids.push_back(id);
    }
  }
  return ids;
}

}  // namespace ascendsim::sim
