// One run's part of the JSON report (docs/reports.md): its figures, evaluation, data verdict and
// statistics, from a RunResult.
#include "sim/report/report.h"

#include <algorithm>

#include "runtime/functional.h"

namespace ascendsim::report {

using namespace runtime;

nlohmann::ordered_json evaluation_json(const RunResult& r) {
  const EvalSummary s = r.evaluation();
  nlohmann::ordered_json passes = nlohmann::ordered_json::array();
  for (const auto& p : r.eval_passes) {
    nlohmann::ordered_json e = {
        {"after_epoch", p.after_epoch}, {"start_s", p.start_s}, {"time_s", p.time_s}, {"steps", p.steps}};
    if (p.accuracy >= 0) e["accuracy"] = p.accuracy;
    passes.push_back(e);
  }
  const Interactions& io = r.eval_interactions;
  return {{"every", r.session.eval_every},
          {"steps_per_pass", r.session.eval_steps},
          {"samples_per_pass", r.session.eval_steps * r.batch_size},
          {"passes", passes},
          {"cache", r.eval_cache},
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

namespace {

/// The checkpoints a run saved: per save its bytes and parts (the means over the saves).
nlohmann::ordered_json checkpoint_json(const RunResult& r) {
  const CheckpointRecord& c = r.checkpoints;
  const double n = static_cast<double>(std::max<std::int64_t>(1, c.saves));
  return {{"every", r.session.checkpoint_every},
          {"async", r.session.checkpoint_async},
          {"bytes", c.bytes},
          {"largest_rank_bytes", c.largest_bytes},
          {"writers_per_server", c.writers},
          {"saves", c.saves},
          {"per_save_s",
           {{"d2h", c.d2h_s / n}, {"serialise", c.serialise_s / n}, {"write", c.write_s / n}, {"wait", c.wait_s / n}}},
          {"total_s", {{"d2h", c.d2h_s}, {"serialise", c.serialise_s}, {"write", c.write_s}, {"wait", c.wait_s}}}};
}

/// Failures laid over the run: the model's inputs, the expected time, the draws, the best interval.
nlohmann::ordered_json faults_json(const FaultAnalysis& a) {
  const FaultInputs& in = a.inputs;
  return {{"device_mtbf_hours", a.device_mtbf_hours},
          {"devices", a.devices},
          {"cluster_mtbf_s", in.mtbf_s},
          {"checkpoint_every", a.every},
          {"checkpoint_s", in.checkpoint_s},
          {"step_s", in.step_s},
          {"restart_s",
           {{"relaunch", a.relaunch_s},
            {"initialisation", in.init_s},
            {"checkpoint_load", a.load_s},
            {"total", in.restart_s},
            {"before_first_save", in.first_restart_s}}},
          {"failure_free_s", a.failure_free_s},
          {"expected_time_to_train_s", a.expected_s},
          {"expected_failures", a.expected_failures},
          {"draws",
           {{"seeds", a.seeds},
            {"mean_s", a.mean_s},
            {"p10_s", a.p10_s},
            {"p50_s", a.p50_s},
            {"p90_s", a.p90_s},
            {"min_s", a.min_s},
            {"max_s", a.max_s},
            {"failures_mean", a.failures_mean}}},
          {"best_interval", {{"steps", a.best.every}, {"expected_time_to_train_s", a.best.expected_s}}},
          {"young_daly", {{"interval_s", a.young_daly_s}, {"steps", in.step_s > 0 ? a.young_daly_s / in.step_s : 0.0}}}};
}

}  // namespace

nlohmann::ordered_json run_json(const RunResult& r) {
  const StepStats st = r.steps.step.stats();
  nlohmann::ordered_json j;
  j["strategy"] = strategy_name(r.session.strategy);
  j["epochs"] = r.session.epochs;
  j["steps_per_epoch"] = r.session.steps_per_epoch;
  if (r.session.strategy == Strategy::LoopSink)
    j["sink_size"] = r.session.effective_sink_size();
  else
    j["sink_size"] = nullptr;
  j["steps"] = r.steps_completed;
  j["sim_time_s"] = r.sim_time_s;
  j["samples_per_s"] = r.samples_per_s();
  j["step_time_ms"] = {{"mean", st.mean_ms}, {"p50", st.p50_ms}, {"p99", st.p99_ms}};
  const StepStats steady = r.steps.steady.stats();
  j["steady_state"] = {{"from_step", r.steps.steady_from + 1},
                       {"steps", r.steps.steady.count()},
                       {"step_ms_mean", steady.mean_ms},
                       {"step_ms_p50", steady.p50_ms},
                       {"samples_per_s", r.steady_samples_per_s()}};
  j["warmup_s"] = r.steps.warmup_s();
  j["model_flops"] = {{"per_sample", r.model_flops_per_sample},
                      {"tokens_per_sample", r.tokens_per_sample},
                      {"tokens_per_s", r.steady_samples_per_s() * static_cast<double>(r.tokens_per_sample)},
                      {"peak_per_device", r.peak_flops_per_device},
                      {"mfu", r.mfu()}};
  j["device_busy_fraction"] = r.device_busy_fraction();
  j["interactions"] = {{"op_launches", r.interactions.op_launches},
                       {"graph_launches", r.interactions.graph_launches},
                       {"h2d_copies", r.interactions.h2d_copies},
                       {"d2h_copies", r.interactions.d2h_copies},
                       {"host_syncs", r.interactions.host_syncs},
                       {"h2d_bytes", r.interactions.h2d_bytes},
                       {"d2h_bytes", r.interactions.d2h_bytes},
                       {"kernels_compiled", r.interactions.kernels_compiled},
                       {"device_loop_iterations", r.device_loop_iterations}};
  nlohmann::ordered_json b = nlohmann::ordered_json::object();
  for (std::size_t i = 0; i < sim::kPhaseCount; ++i)
    if (static_cast<sim::Phase>(i) != sim::Phase::Checkpoint || r.session.checkpoint_every > 0)
      b[sim::phase_name(static_cast<sim::Phase>(i))] = r.breakdown_s[i];
  j["breakdown_s"] = b;
  j["losses_returned"] = r.losses_returned;
  j["epoch_time_s"] = r.epoch_s();
  const TimeToTrain ttt = r.time_to_train();
  j["time_to_train_s"] = {{"total", ttt.total},
                          {"training", ttt.training},
                          {"evaluation", ttt.evaluation},
                          {"initialisation", ttt.initialisation},
                          {"exposed_communication", ttt.exposed_comm}};
  if (r.session.checkpoint_every > 0) {
    j["time_to_train_s"]["checkpoint"] = ttt.checkpoint;
    j["checkpoint"] = checkpoint_json(r);
  }
  if (r.faults_analysed()) {
    j["time_to_train_s"]["expected_with_failures"] = ttt.expected_with_failures;
    j["faults"] = faults_json(r.faults);
  }
  auto summary = [](const StepSummary& v) {
    const StepStats s = v.stats();
    return nlohmann::ordered_json{{"mean", s.mean_ms}, {"p50", s.p50_ms}, {"p99", s.p99_ms}};
  };
  j["step_trace_ms"] = {
      {"iteration_interval", summary(r.steps.interval)}, {"fp_bp", summary(r.steps.fp_bp)}, {"tail", summary(r.steps.tail)}};
  if (r.devices > 1) {
    j["devices"] = r.devices;
    const std::int64_t slow = r.straggler();
    j["ranks"] = {{"step_time_ms_mean", r.rank_step_mean_ms},
                  {"step_time_ms_p50", r.rank_step_p50_ms},
                  {"wait_data_s", r.rank_wait_data_s},
                  {"comm_s", r.rank_comm_s},
                  {"straggler", slow >= 0 ? nlohmann::ordered_json(slow) : nlohmann::ordered_json()},
                  {"simulated", r.simulated_ranks}};
    j["all_reduce_groups"] = r.comm_groups;
    j["cluster_links"] = r.cluster_links;
    if (r.scaling_efficiency >= 0) j["scaling_efficiency"] = r.scaling_efficiency;
    if (r.scaling.is_array()) j["scaling"] = r.scaling;
  }
  if (r.functional) {
    nlohmann::ordered_json losses = nlohmann::ordered_json::array();
    for (const auto& l : r.loss_values) losses.push_back({l.epoch, l.step, l.loss});
    j["functional"] = {{"losses", losses}};
    if (r.values) {
      j["functional"]["seed"] = r.values->options().seed;
      j["functional"]["init"] = r.values->options().init_from.empty() ? r.values->options().init : "file";
    }
    if (r.accuracy >= 0) {
      j["functional"]["accuracy"] = r.accuracy;
      j["functional"]["eval_samples"] = r.eval_samples;
    }
  }
  if (r.session.eval_every > 0) j["evaluation"] = evaluation_json(r);
  if (!r.data.is_null()) j["data"] = r.data;
  if (!r.contention.is_null()) j["contention"] = r.contention;
  if (!r.exposed_comm.is_null()) j["exposed_comm"] = r.exposed_comm;
  if (!r.optimizer_collectives.is_null()) j["optimizer_collectives"] = r.optimizer_collectives;
  if (!r.pipeline.is_null()) j["pipeline"] = r.pipeline;
  if (!r.failure.empty()) j["failure"] = r.failure;
  j["stats"] = r.stats;
  return j;
}

}  // namespace ascendsim::report
