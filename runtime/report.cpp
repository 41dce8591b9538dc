#include "runtime/report.h"

#include <algorithm>

#include <fmt/format.h>

namespace ascendsim::runtime {

nlohmann::ordered_json make_report(const ReportHeader& h, const std::vector<RunResult>& runs,
                                   const nlohmann::ordered_json& config) {
  nlohmann::ordered_json j;
  j["workload"] = h.workload;
  j["chip"] = h.chip;
  j["batch_size"] = h.batch_size;
  j["devices"] = h.devices;
  j["runs"] = nlohmann::ordered_json::array();
  for (const auto& r : runs) j["runs"].push_back(r.to_json());
  j["config"] = config;
  return j;
}

std::optional<std::int64_t> break_even_sink_size(std::vector<std::pair<std::int64_t, double>> points) {
  std::sort(points.begin(), points.end());
  std::optional<std::int64_t> be;
  for (std::size_t i = points.size(); i-- > 1;) {
    if ((points[i - 1].second - points[i].second) / points[i - 1].second >= 0.01) break;
    be = points[i - 1].first;
  }
  return be;
}

std::string format_table(const ReportHeader& h, const std::vector<RunResult>& runs) {
  std::string out;
  if (!runs.empty()) {
    const Session& s = runs.front().session;
    out += fmt::format("{} on {}, batch {}, {} epoch(s) x {} steps", h.workload, h.chip, h.batch_size, s.epochs,
                       s.steps_per_epoch);
    // Say what runs where a strategy runs something else: loop sink's sinks of S steps.
    for (const auto& r : runs)
      if (r.session.strategy == Strategy::LoopSink && r.session.effective_sink_size() != r.session.steps_per_epoch) {
        out += fmt::format("; loop-sink: {} sink(s) of {} steps = {} steps", r.session.epochs,
                           r.session.effective_sink_size(), r.session.steps());
        break;
      }
    out += "\n\n";
  }
  out +=
      fmt::format("{:<11} {:>7} {:>10} {:>8} {:>8} {:>10} {:>6} | {:>9} {:>7} {:>7} {:>7} {:>7}\n", "strategy", "steps",
                  "sim s", "step ms", "p99 ms", "samples/s", "busy", "op launch", "graph", "H2D", "D2H", "syncs");
  for (const auto& r : runs) {
    const StepStats st = r.steps.step.stats();
    const Interactions& io = r.interactions;
    out += fmt::format("{:<11} {:>7} {:>10.3f} {:>8.4f} {:>8.4f} {:>10.0f} {:>5.1f}% | {:>9} {:>7} {:>7} {:>7} {:>7}\n",
                       strategy_name(r.session.strategy), r.steps_completed, r.sim_time_s, st.mean_ms, st.p99_ms,
                       r.samples_per_s(), 100.0 * r.device_busy_fraction(), io.op_launches, io.graph_launches,
                       io.h2d_copies, io.d2h_copies, io.host_syncs);
  }
  out += "\nwhere the time goes (% of simulated time; device work first, host work only where the device idles)\n";
  // A phase no run has (communication on one device) gets no column.
  std::vector<std::size_t> shown;
  for (std::size_t i = 0; i < sim::kPhaseCount; ++i)
    if (static_cast<sim::Phase>(i) != sim::Phase::Comm ||
        std::any_of(runs.begin(), runs.end(), [i](const RunResult& r) { return r.breakdown_s[i] > 0; }))
      shown.push_back(i);
  out += fmt::format("{:<11}", "strategy");
  for (std::size_t i : shown) out += fmt::format(" {:>14}", sim::phase_name(static_cast<sim::Phase>(i)));
  out += "\n";
  for (const auto& r : runs) {
    out += fmt::format("{:<11}", strategy_name(r.session.strategy));
    for (std::size_t i : shown)
      out += fmt::format(" {:>13.1f}%", r.sim_time_s > 0 ? 100.0 * r.breakdown_s[i] / r.sim_time_s : 0.0);
    out += "\n";
  }
  out += "\ndata pipeline\n";
  for (const auto& r : runs) {
    if (r.data.is_null()) continue;
    out += fmt::format("{:<11} {}\n", strategy_name(r.session.strategy), r.data["verdict"].get<std::string>());
    out += fmt::format("{:<11} advice: {}\n", "", r.data["advice"].get<std::string>());
    const auto epochs = r.epoch_s();
    if (epochs.size() > 1) {
      out += fmt::format("{:<11} epoch times:", "");
      for (std::size_t i = 0; i < epochs.size() && i < 8; ++i) out += fmt::format(" {:.3f}s", epochs[i]);
      out += epochs.size() > 8 ? " ...\n" : "\n";
    }
  }
  return out;
}

}  // namespace ascendsim::runtime
