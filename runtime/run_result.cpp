#include "runtime/run_result.h"

#include <algorithm>
#include <cmath>
#include <numeric>

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
    (p == sim::Phase::Eval         ? t.evaluation
     : p == sim::Phase::Setup      ? t.initialisation
     : p == sim::Phase::Comm       ? t.exposed_comm
     : p == sim::Phase::Checkpoint ? t.checkpoint
                                   : t.training) += breakdown_s[i];
  }
  if (faults_analysed()) t.expected_with_failures = faults.expected_s;
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

}  // namespace ascendsim::runtime
