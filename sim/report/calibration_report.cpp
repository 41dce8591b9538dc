// The calibration's table, JSON and configuration fragment (regression_report.h).
#include "sim/report/regression_report.h"

#include <algorithm>
#include <cmath>
#include <functional>

#include <fmt/format.h>

#include "sim/report/report.h"

namespace ascendsim::report {

using nlohmann::ordered_json;
using sim::Calibration;
namespace fit = sim::fit;

namespace {

std::string joined(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : ", ") + x;
  return s;
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

std::string calibration_table(const Calibration& c) {
  const fit::Result& r = c.result;
  std::string out;
  for (const auto& p : r.parameters)
    if (!p.fitted) out += p.parameter.key + ": " + p.note + "; not fitted, stays assumed\n";
  if (!out.empty()) out += "\n";
  TextTable pt({"parameter", "unit", "start", "fitted", "min", "max", "note"}, {1, 6});
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
  TextTable mt(head);
  for (const auto& p : r.parameters) {
    std::vector<std::string> row{p.parameter.key};
    for (std::size_t j = 0; j < r.figures.size(); ++j)
      if (r.figures[j].figure.fitted) row.push_back(pct(p.moves[j]));
    mt.add(row);
  }
  const std::string moves_table = mt.render();
  TextTable ft({"figure", "published", "at start", "error", "fitted", "error", "left out"});
  for (std::size_t j = 0; j < r.figures.size(); ++j) {
    const auto& fr = r.figures[j];
    if (!fr.figure.fitted) continue;
    const std::string unit = " " + c.figures[j].unit;
    ft.add({fr.figure.id, fmt::format("{:g}{}", fr.figure.published, unit), fmt::format("{:.4g}{}", fr.start, unit),
            pct(fr.start_error()), fmt::format("{:.4g}{}", fr.at_fit, unit), pct(fr.fit_error()),
            fr.loo_error() ? pct(*fr.loo_error()) : !fr.unpinned.empty() ? "alone pins" : "-"});
  }
  out += ft.render();
  if (!r.loo_note.empty())
    out += "left out: " + r.loo_note + "\n";
  else
    out += c.loo == fit::Loo::Exact ? "left out: each figure's error at a fit made again without it, from the start "
                                      "(--loo exact)\n"
           : c.loo == fit::Loo::Refit
               ? "left out: each figure's error at a fit made again without it, from the fit with it (--loo refit)\n"
               : "left out: each figure's error at one Gauss-Newton step without it from the fit, on the Jacobian "
                 "there (--loo linear; --loo refit fits again)\n";
  for (const auto& fr : r.figures)
    if (!fr.unpinned.empty()) {
      std::string keys;
      for (const auto& k : fr.unpinned) keys += (keys.empty() ? "" : ", ") + k;
      out += "  " + fr.figure.id + " alone pins " + keys + ": no other fitted figure moves it, so it cannot be "
             "predicted from them\n";
    }
  bool others = false;
  TextTable ot({"not fitted", "published", "at start", "at fit", "moved by", "error at fit"});
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
      if (!fr.unpinned.empty()) f["alone_pins"] = fr.unpinned;
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
  fit["left_out"] = c.loo == fit::Loo::Exact ? "exact" : c.loo == fit::Loo::Refit ? "refit" : "linear";
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
    if (const auto colon = p.parameter.key.find(':'); colon != std::string::npos) {
      // One host preset's own: a fragment for --config would set it on every server.
      const std::string preset = p.parameter.key.substr(0, colon);
      out += fmt::format("# {} = {:.6g} on the servers carrying host preset {} (configs/hosts/{}.yaml holds it; "
                         "a --config file would set it for every server)\n",
                         p.parameter.key.substr(colon + 1), p.value, preset, preset);
      continue;
    }
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

}  // namespace ascendsim::report
