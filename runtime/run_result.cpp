#include "runtime/run_result.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace ascendsim::runtime {

StepStats summarize_steps(std::vector<double> s) {
  StepStats st;
  if (s.empty()) return st;
  st.mean_ms = std::accumulate(s.begin(), s.end(), 0.0) / static_cast<double>(s.size()) * 1e3;
  auto rank = [&](double p) {
    auto k = static_cast<std::size_t>(std::ceil(p * static_cast<double>(s.size())));
    k = std::clamp<std::size_t>(k, 1, s.size()) - 1;
    std::nth_element(s.begin(), s.begin() + static_cast<std::ptrdiff_t>(k), s.end());
    return s[k] * 1e3;
  };
  st.p50_ms = rank(0.50);
  st.p99_ms = rank(0.99);
  return st;
}

double RunResult::samples_per_s() const {
  return sim_time_s > 0 ? static_cast<double>(steps_completed * batch_size) / sim_time_s : 0.0;
}

double RunResult::device_busy_fraction() const {
  return sim_time_s > 0 ? breakdown_s[static_cast<std::size_t>(sim::Phase::DeviceCompute)] / sim_time_s : 0.0;
}

std::vector<double> RunResult::epoch_s() const {
  std::vector<double> out;
  const auto d = static_cast<std::size_t>(session.steps_per_epoch);
  for (std::size_t start = 0; d > 0 && start + d <= step_s.size(); start += d)
    out.push_back(std::accumulate(step_s.begin() + static_cast<std::ptrdiff_t>(start),
                                  step_s.begin() + static_cast<std::ptrdiff_t>(start + d), 0.0));
  return out;
}

nlohmann::ordered_json RunResult::to_json() const {
  const StepStats st = summarize_steps(step_s);
  nlohmann::ordered_json j;
  j["strategy"] = strategy_name(session.strategy);
  j["epochs"] = session.epochs;
  j["steps_per_epoch"] = session.steps_per_epoch;
  if (session.strategy == Strategy::LoopSink)
    j["sink_size"] = session.effective_sink_size();
  else
    j["sink_size"] = nullptr;
  j["steps"] = steps_completed;
  j["sim_time_s"] = sim_time_s;
  j["samples_per_s"] = samples_per_s();
  j["step_time_ms"] = {{"mean", st.mean_ms}, {"p50", st.p50_ms}, {"p99", st.p99_ms}};
  j["device_busy_fraction"] = device_busy_fraction();
  j["interactions"] = {{"op_launches", interactions.op_launches}, {"graph_launches", interactions.graph_launches},
                       {"h2d_copies", interactions.h2d_copies},   {"d2h_copies", interactions.d2h_copies},
                       {"host_syncs", interactions.host_syncs},   {"h2d_bytes", interactions.h2d_bytes},
                       {"d2h_bytes", interactions.d2h_bytes},     {"device_loop_iterations", device_loop_iterations}};
  nlohmann::ordered_json b = nlohmann::ordered_json::object();
  for (std::size_t i = 0; i < sim::kPhaseCount; ++i) b[sim::phase_name(static_cast<sim::Phase>(i))] = breakdown_s[i];
  j["breakdown_s"] = b;
  j["losses_returned"] = losses_returned;
  j["epoch_time_s"] = epoch_s();
  auto summary = [](const std::vector<double>& v) {
    const StepStats s = summarize_steps(v);
    return nlohmann::ordered_json{{"mean", s.mean_ms}, {"p50", s.p50_ms}, {"p99", s.p99_ms}};
  };
  j["step_trace_ms"] = {{"iteration_interval", summary(steps_trace.interval_s)},
                        {"fp_bp", summary(steps_trace.fp_bp_s)},
                        {"tail", summary(steps_trace.tail_s)}};
  if (!data.is_null()) j["data"] = data;
  if (!failure.empty()) j["failure"] = failure;
  j["stats"] = stats;
  return j;
}

}  // namespace ascendsim::runtime
