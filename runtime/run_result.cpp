#include "runtime/run_result.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "runtime/functional.h"

namespace ascendsim::runtime {

void StepRecord::add(double step, double interval_s, double fp_bp_s, double tail_s, std::int64_t steps_per_epoch) {
  this->step.add(step);
  interval.add(interval_s);
  fp_bp.add(fp_bp_s);
  tail.add(tail_s);
  m_epoch_sum += step;
  if (++m_in_epoch == steps_per_epoch) {
    epoch_s.push_back(m_epoch_sum);
    m_epoch_sum = 0;
    m_in_epoch = 0;
  }
  const std::int64_t index = m_index++;
  if (index < steady_from)
    warmup_steps_s += step;
  else if (index < steady_until)
    steady.add(step);
  if (!keep_each && !(index >= window_first && index < window_last)) return;
  if (first_kept < 0) first_kept = index;
  step_s.push_back(step);
  trace.interval_s.push_back(interval_s);
  trace.fp_bp_s.push_back(fp_bp_s);
  trace.tail_s.push_back(tail_s);
}

double StepRecord::warmup_s() const {
  if (steady.count() == 0) return 0;
  return warmup_steps_s - static_cast<double>(steady_from) * steady.stats().mean_ms * 1e-3;
}

std::vector<NumberedStep> StepRecord::kept_steps() const {
  std::vector<NumberedStep> out;
  out.reserve(step_s.size());
  // The kept steps are consecutive from first_kept (0-based index): number = index + 1.
  for (std::size_t i = 0; i < step_s.size(); ++i)
    out.push_back({first_kept + static_cast<std::int64_t>(i) + 1, step_s[i], trace.interval_s[i], trace.fp_bp_s[i],
                   trace.tail_s[i]});
  return out;
}

std::vector<NumberedStep> StepRecord::window_steps() const {
  std::vector<NumberedStep> out;
  if (window_last <= window_first) return out;
  for (const auto& s : kept_steps())
    if (s.number - 1 >= window_first && s.number - 1 < window_last) out.push_back(s);
  return out;
}

double RunResult::samples_per_s() const {
  const std::int64_t readers = data_shards > 0 ? data_shards : devices;
  return sim_time_s > 0 ? static_cast<double>(steps_completed * batch_size * readers) / sim_time_s : 0.0;
}

double RunResult::steady_samples_per_s() const {
  const std::int64_t readers = data_shards > 0 ? data_shards : devices;
  const double step_ms = steps.steady.stats().mean_ms;
  return step_ms > 0 ? static_cast<double>(batch_size * readers) / (step_ms * 1e-3) : 0.0;
}

double RunResult::mfu() const {
  const double peak = peak_flops_per_device * static_cast<double>(devices);
  return peak > 0 ? steady_samples_per_s() * model_flops_per_sample / peak : 0.0;
}

TimeToTrain RunResult::time_to_train() const {
  TimeToTrain t;
  t.total = sim_time_s;
  for (std::size_t i = 0; i < sim::kPhaseCount; ++i) {
    const auto p = static_cast<sim::Phase>(i);
    (p == sim::Phase::Eval    ? t.evaluation
     : p == sim::Phase::Setup ? t.initialisation
     : p == sim::Phase::Comm  ? t.exposed_comm
                              : t.training) += breakdown_s[i];
  }
  return t;
}

std::int64_t RunResult::straggler() const {
  if (rank_comm_s.empty()) return -1;
  const auto [lo, hi] = std::minmax_element(rank_comm_s.begin(), rank_comm_s.end());
  return *hi - *lo > 0.01 * sim_time_s ? lo - rank_comm_s.begin() : -1;
}

double RunResult::device_busy_fraction() const {
  return sim_time_s > 0 ? breakdown_s[static_cast<std::size_t>(sim::Phase::DeviceCompute)] / sim_time_s : 0.0;
}

EvalSummary RunResult::evaluation() const {
  EvalSummary s;
  s.passes = static_cast<std::int64_t>(eval_passes.size());
  if (eval_passes.empty()) return s;
  s.first_s = eval_passes.front().time_s;
  double all = 0, later = 0;
  for (std::size_t i = 0; i < eval_passes.size(); ++i) {
    all += eval_passes[i].time_s;
    if (i > 0) later += eval_passes[i].time_s;
  }
  s.mean_s = all / static_cast<double>(eval_passes.size());
  s.later_mean_s = eval_passes.size() > 1 ? later / static_cast<double>(eval_passes.size() - 1) : s.first_s;
  return s;
}

nlohmann::ordered_json RunResult::evaluation_json() const {
  const EvalSummary s = evaluation();
  nlohmann::ordered_json passes = nlohmann::ordered_json::array();
  for (const auto& p : eval_passes) {
    nlohmann::ordered_json e = {
        {"after_epoch", p.after_epoch}, {"start_s", p.start_s}, {"time_s", p.time_s}, {"steps", p.steps}};
    if (p.accuracy >= 0) e["accuracy"] = p.accuracy;
    passes.push_back(e);
  }
  const Interactions& io = eval_interactions;
  return {{"every", session.eval_every},
          {"steps_per_pass", session.eval_steps},
          {"samples_per_pass", session.eval_steps * batch_size},
          {"passes", passes},
          {"cache", eval_cache},
          {"first_pass_s", s.first_s},
          {"later_pass_mean_s", s.later_mean_s},
          {"interactions",
           {{"op_launches", io.op_launches},
            {"graph_launches", io.graph_launches},
            {"h2d_copies", io.h2d_copies},
            {"d2h_copies", io.d2h_copies},
            {"host_syncs", io.host_syncs},
            {"h2d_bytes", io.h2d_bytes},
            {"d2h_bytes", io.d2h_bytes},
            {"kernels_compiled", io.kernels_compiled}}}};
}

nlohmann::ordered_json RunResult::to_json() const {
  const StepStats st = steps.step.stats();
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
  const StepStats steady = steps.steady.stats();
  j["steady_state"] = {{"from_step", steps.steady_from + 1},
                       {"steps", steps.steady.count()},
                       {"step_ms_mean", steady.mean_ms},
                       {"step_ms_p50", steady.p50_ms},
                       {"samples_per_s", steady_samples_per_s()}};
  j["warmup_s"] = steps.warmup_s();
  j["model_flops"] = {{"per_sample", model_flops_per_sample},
                      {"tokens_per_sample", tokens_per_sample},
                      {"tokens_per_s", steady_samples_per_s() * static_cast<double>(tokens_per_sample)},
                      {"peak_per_device", peak_flops_per_device},
                      {"mfu", mfu()}};
  j["device_busy_fraction"] = device_busy_fraction();
  j["interactions"] = {{"op_launches", interactions.op_launches},
                       {"graph_launches", interactions.graph_launches},
                       {"h2d_copies", interactions.h2d_copies},
                       {"d2h_copies", interactions.d2h_copies},
                       {"host_syncs", interactions.host_syncs},
                       {"h2d_bytes", interactions.h2d_bytes},
                       {"d2h_bytes", interactions.d2h_bytes},
                       {"kernels_compiled", interactions.kernels_compiled},
                       {"device_loop_iterations", device_loop_iterations}};
  nlohmann::ordered_json b = nlohmann::ordered_json::object();
  for (std::size_t i = 0; i < sim::kPhaseCount; ++i) b[sim::phase_name(static_cast<sim::Phase>(i))] = breakdown_s[i];
  j["breakdown_s"] = b;
  j["losses_returned"] = losses_returned;
  j["epoch_time_s"] = epoch_s();
  const TimeToTrain ttt = time_to_train();
  j["time_to_train_s"] = {{"total", ttt.total},
                          {"training", ttt.training},
                          {"evaluation", ttt.evaluation},
                          {"initialisation", ttt.initialisation},
                          {"exposed_communication", ttt.exposed_comm}};
  auto summary = [](const StepSummary& v) {
    const StepStats s = v.stats();
    return nlohmann::ordered_json{{"mean", s.mean_ms}, {"p50", s.p50_ms}, {"p99", s.p99_ms}};
  };
  j["step_trace_ms"] = {
      {"iteration_interval", summary(steps.interval)}, {"fp_bp", summary(steps.fp_bp)}, {"tail", summary(steps.tail)}};
  if (devices > 1) {
    j["devices"] = devices;
    const std::int64_t slow = straggler();
    j["ranks"] = {{"step_time_ms_mean", rank_step_mean_ms},
                  {"step_time_ms_p50", rank_step_p50_ms},
                  {"wait_data_s", rank_wait_data_s},
                  {"comm_s", rank_comm_s},
                  {"straggler", slow >= 0 ? nlohmann::ordered_json(slow) : nlohmann::ordered_json()},
                  {"simulated", simulated_ranks}};
    j["all_reduce_groups"] = comm_groups;
    j["cluster_links"] = cluster_links;
    if (scaling_efficiency >= 0) j["scaling_efficiency"] = scaling_efficiency;
    if (scaling.is_array()) j["scaling"] = scaling;
  }
  if (functional) {
    nlohmann::ordered_json losses = nlohmann::ordered_json::array();
    for (const auto& l : loss_values) losses.push_back({l.epoch, l.step, l.loss});
    j["functional"] = {{"losses", losses}};
    if (values) {
      j["functional"]["seed"] = values->options().seed;
      j["functional"]["init"] = values->options().init_from.empty() ? values->options().init : "file";
    }
    if (accuracy >= 0) {
      j["functional"]["accuracy"] = accuracy;
      j["functional"]["eval_samples"] = eval_samples;
    }
  }
  if (session.eval_every > 0) j["evaluation"] = evaluation_json();
  if (!data.is_null()) j["data"] = data;
  if (!contention.is_null()) j["contention"] = contention;
  if (!exposed_comm.is_null()) j["exposed_comm"] = exposed_comm;
  if (!optimizer_collectives.is_null()) j["optimizer_collectives"] = optimizer_collectives;
  if (!pipeline.is_null()) j["pipeline"] = pipeline;
  if (!failure.empty()) j["failure"] = failure;
  j["stats"] = stats;
  return j;
}

}  // namespace ascendsim::runtime
