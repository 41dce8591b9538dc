// The sweep's JSON, table and CSV, and the fusion advice's table (studies_report.h).
#include "sim/report/studies_report.h"

#include <algorithm>

#include <fmt/format.h>

#include "sim/core/breakdown.h"
#include "sim/report/report.h"

namespace ascendsim::report {

using nlohmann::ordered_json;
using sim::kPhaseCount;
using sim::Phase;
using sim::phase_name;

ordered_json sweep_json(const sim::SweepOutcome& o) {
  ordered_json rows = ordered_json::array();
  for (const auto& p : o.points) {
    ordered_json row;
    row["param"] = o.param;
    try {
      std::size_t used = 0;
      const double num = std::stod(p.value, &used);
      row["value"] = used == p.value.size() ? ordered_json(num) : ordered_json(p.value);
    } catch (const std::exception&) {
      row["value"] = p.value;
    }
    const ordered_json run = run_json(p.run);
    for (const auto& [k, v] : run.items()) row[k] = v;
    row.erase("stats");
    rows.push_back(row);
  }
  ordered_json report;
  report["workload"] = o.header.workload;
  report["chip"] = o.header.chip;
  report["batch_size"] = o.header.batch_size;
  report["param"] = o.param;
  report["values"] = o.values;
  report["break_even_sink_size"] =
      o.break_even_sink_size ? ordered_json(*o.break_even_sink_size) : ordered_json(nullptr);
  report["conclusion"] = o.conclusion;
  report["rows"] = rows;
  report["config"] = o.config;
  return report;
}

std::string sweep_table(const sim::SweepOutcome& o) {
  const std::string& param = o.param;
  std::string out =
      fmt::format("{} on {}, batch {}: sweep of {}\n\n", o.header.workload, o.header.chip, o.header.batch_size, param);
  out += fmt::format("{:>14} {:<11} {:>8} {:>12} {:>10} {:>10} {:>7} {:>10} {:>8}\n", param, "strategy", "steps",
                     "step ms mean", "median", "samples/s", "busy", "launches", "syncs");
  bool pulled_up = false;
  for (const auto& p : o.points) {
    const auto& r = p.run;
    const runtime::StepStats st = r.steps.step.stats();
    pulled_up = pulled_up || mean_pulled_up(st);
    out += fmt::format("{:>14} {:<11} {:>8} {:>12.4f} {:>10.4f} {:>10.0f} {:>6.1f}% {:>10} {:>8}\n", p.value,
                       runtime::strategy_name(r.session.strategy), r.steps_completed, st.mean_ms, st.p50_ms,
                       r.samples_per_s(), 100 * r.device_busy_fraction(),
                       r.interactions.op_launches + r.interactions.graph_launches, r.interactions.host_syncs);
  }
  if (pulled_up) out += std::string("\n") + kPulledUpNote;
  if (std::any_of(o.points.begin(), o.points.end(),
                  [&](const SweepPoint& p) { return param == "devices" || p.run.time_to_train_has_parts(); })) {
    const bool checkpoints = std::any_of(o.points.begin(), o.points.end(),
                                         [](const SweepPoint& p) { return p.run.session.checkpoint_every > 0; });
    std::vector<std::string> head = {param,        "strategy",       "time to train s", "training",
                                     "evaluation", "initialisation", "exposed comm"};
    if (checkpoints) head.push_back("checkpoint");
    TextTable t(head);
    for (const auto& p : o.points) {
      const runtime::TimeToTrain v = p.run.time_to_train();
      std::vector<std::string> row = {p.value,
                                      runtime::strategy_name(p.run.session.strategy),
                                      fmt::format("{:.3f}", v.total),
                                      fmt::format("{:.3f}", v.training),
                                      fmt::format("{:.3f}", v.evaluation),
                                      fmt::format("{:.3f}", v.initialisation),
                                      fmt::format("{:.3f}", v.exposed_comm)};
      if (checkpoints) row.push_back(fmt::format("{:.3f}", v.checkpoint));
      t.add(row);
    }
    out += "\ntime to train, from the run's start to its stop (s):\n" + t.render();
  }
  if (!o.conclusion.empty()) out += "\n" + o.conclusion + "\n";
  return out;
}

std::string sweep_csv(const sim::SweepOutcome& o) {
  std::string csv =
      "param,value,strategy,steps,sim_time_s,step_ms_mean,step_ms_p50,step_ms_p99,samples_per_s,"
      "device_busy_fraction,op_launches,graph_launches,h2d_copies,d2h_copies,host_syncs,h2d_bytes,"
      "d2h_bytes";
  // The checkpoints' column only where a point saved them (the sweep's columns are otherwise as before).
  const bool checkpoints = std::any_of(o.points.begin(), o.points.end(),
                                       [](const SweepPoint& p) { return p.run.session.checkpoint_every > 0; });
  const std::size_t phases = checkpoints ? kPhaseCount : static_cast<std::size_t>(Phase::Checkpoint);
  for (std::size_t i = 0; i < phases; ++i) csv += std::string(",") + phase_name(static_cast<Phase>(i)) + "_s";
  csv += "\n";
  for (const auto& p : o.points) {
    const auto& r = p.run;
    const auto st = r.steps.step.stats();
    const auto& io = r.interactions;
    csv += fmt::format("{},{},{},{},{:.9g},{:.9g},{:.9g},{:.9g},{:.9g},{:.9g},{},{},{},{},{},{},{}", o.param, p.value,
                       runtime::strategy_name(r.session.strategy), r.steps_completed, r.sim_time_s, st.mean_ms,
                       st.p50_ms, st.p99_ms, r.samples_per_s(), r.device_busy_fraction(), io.op_launches,
                       io.graph_launches, io.h2d_copies, io.d2h_copies, io.host_syncs, io.h2d_bytes, io.d2h_bytes);
    for (std::size_t i = 0; i < phases; ++i) csv += fmt::format(",{:.9g}", r.breakdown_s[i]);
    csv += "\n";
  }
  return csv;
}

std::string fusion_table(const sim::FusionAdvice& a, std::size_t top) {
  TextTable t({"all_reduce_fusion", "step ms", "tail ms", "exposed comm s"});
  for (std::size_t i = 0; i < a.candidates.size() && i < top; ++i) {
    const auto& c = a.candidates[i];
    std::string split;
    for (auto v : c.split) split += (split.empty() ? "" : ",") + std::to_string(v);
    t.add({split.empty() ? std::string("(one group)") : split, fmt::format("{:.4f}", c.step_ms),
           fmt::format("{:.4f}", c.tail_ms), fmt::format("{:.4f}", c.comm_s)});
  }
  return t.render();
}

}  // namespace ascendsim::report
