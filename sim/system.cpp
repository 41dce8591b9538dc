#include "sim/system.h"

#include "aicore/event_model.h"

#include <algorithm>
#include <cstdio>

#include "sim/core/error.h"
#include "sim/core/time.h"
#include "sim/report/data_verdict.h"

namespace ascendsim::sim {

std::string format_bytes(double bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (bytes >= 1024.0 && u < 4) {
    bytes /= 1024.0;
    ++u;
  }
  char buf[64];
  std::snprintf(buf, sizeof buf, u == 0 ? "%.0f %s" : "%.2f %s", bytes, units[u]);
  return buf;
}

namespace {
struct Shortfall {
  std::string key, message;
  std::string origin;  ///< what the user gave that does not fit, when not the key itself
};

Shortfall shortfall(const SystemConfig& cfg, const workloads::Workload& w, const runtime::MemoryPlan& plan,
                    bool with_queue) {
  const double capacity = cfg.chip.memory.hbm_gib * 1024.0 * 1024.0 * 1024.0;
  const auto need = static_cast<double>(plan.peak_bytes(with_queue));
  if (need <= capacity) return {};
  const auto persistent = static_cast<double>(plan.persistent_bytes), step = static_cast<double>(plan.arena_bytes),
             queue = with_queue ? static_cast<double>(plan.queue_buffer_bytes) : 0.0;
  std::string key, advice, origin;
  if (queue >= step && queue >= persistent) {
    key = "queue.capacity";
    advice = "the data queue's " + std::to_string(cfg.chip.queue.capacity) + " batch buffers (" + format_bytes(queue) +
             ") are the largest part — reduce queue.capacity or batch_size";
  } else if (step >= persistent && w.parallel.pipeline_stages > 1) {
    key = "micro_batches";
    advice = "the step's activations and workspaces (" + format_bytes(step) +
             ") are the largest part — give more micro_batches (smaller micro-batches) or reduce batch_size";
  } else if (step >= persistent) {
    key = "batch_size";
    advice =
        "the step's activations and workspaces (" + format_bytes(step) + ") are the largest part — reduce batch_size";
  } else {
    // Which persistent part to shard: the weights (tensor parallelism) or the optimizer's state
    // (MindSpore's optimizer_shard, ZeRO-1).
    const auto weights = static_cast<double>(plan.weight_bytes),
               optimizer = static_cast<double>(plan.optimizer_state_bytes);
    const bool transformer = w.tokens_per_sample > 0;
    const std::int64_t group = w.parallel.grouped() ? w.parallel.gradient_group_size : w.parallel.devices;
    const bool sharded = w.optimizer_spec.shard_size > 1, shardable = group > 1;
    key = optimizer >= weights && shardable && !sharded ? "optimizer_shard"
          : optimizer >= weights                        ? "devices"
          : transformer                                 ? "tensor_parallel"
                                                        : "chip";
    origin = "workload";  // the model is what does not fit; the key names the setting that would fit it
    advice = "the weights and optimizer state alone take " + format_bytes(persistent) + " (weights " +
             format_bytes(weights) + ", optimizer state " + format_bytes(optimizer) + "); ";
    if (optimizer >= weights && sharded)
      advice += "the optimizer state is the larger, already sharded across " +
                std::to_string(w.optimizer_spec.shard_size) + " ranks: more data-parallel ranks divide it further";
    else if (optimizer >= weights)
      advice += std::string(
                    "the optimizer state is the larger: shard it across the data-parallel ranks with "
                    "optimizer_shard (MindSpore's parallel optimizer, ZeRO-1), which divides it by their "
                    "number") +
                (shardable ? "" : " (it needs more than one rank holding each weight: give more devices)");
    else
      advice += "the weights are the larger";
    if (transformer)
      advice += std::string(optimizer >= weights ? ", or split" : ": split") +
                " the attention and MLP weights over devices with tensor_parallel, which divides them by its "
                "group's size, or the layers into stages with pipeline_stages, or train a smaller model (--layers, "
                "--hidden)";
    else
      advice += ", or choose a chip with more device memory";
  }
  const std::string what =
      w.parallel.pipeline_stages > 1
          ? w.name + " pipeline stage " + std::to_string(w.parallel.stage) + " of " +
                std::to_string(w.parallel.pipeline_stages) + " (micro-batches of " +
                std::to_string(w.batch_size / std::max<std::int64_t>(1, w.parallel.micro_batches)) + ")"
          : w.name + " at batch " + std::to_string(w.batch_size);
  return {key, what + " needs " + format_bytes(need) + " of device memory (weights and optimizer " +
                   format_bytes(persistent) + ", step " + format_bytes(step) +
                   (with_queue ? ", data queue " + format_bytes(queue) : std::string()) + "); " + cfg.chip.name +
                   " has " + format_bytes(capacity) + ": " + advice,
          origin.empty() ? key : origin};
}
}  // namespace

std::string memory_shortfall(const SystemConfig& cfg, const workloads::Workload& w, const runtime::MemoryPlan& plan,
                             bool with_queue) {
  return shortfall(cfg, w, plan, with_queue).message;
}

void check_fits(const SystemConfig& cfg, const workloads::Workload& w, const runtime::MemoryPlan& plan,
                bool with_queue) {
  const Shortfall s = shortfall(cfg, w, plan, with_queue);
  if (!s.message.empty()) throw InputError(s.origin, s.key, s.message);
}

runtime::CompiledGraph compile_for(const SystemConfig& cfg, const workloads::Workload& w) {
  aicore::CachedCostModel model(aicore::make_pipe_cost_model(cfg.chip.aicore, cfg.chip.memory));
  try {
    return runtime::compile(w, model, cfg.chip.queue.capacity);
  } catch (const aicore::EventModelError& e) {  // an op too large for the event model
    throw InputError(e.what());
  } catch (const std::invalid_argument& e) {  // a request the graph cannot take (all_reduce_fusion)
    throw InputError(e.what());
  } catch (const std::logic_error& e) {  // the tiler found no tile that fits the configured buffers
    throw InputError(std::string(e.what()) + " — raise the aicore buffer sizes (aicore.*_kib)");
  }
}

runtime::CompiledGraph compile_checked(const SystemConfig& cfg, const workloads::Workload& w,
                                       const runtime::Session& session) {
  runtime::CompiledGraph g = compile_for(cfg, w);
  check_fits(cfg, w, g.memory, runtime::uses_queue(session.strategy));
  // The device computes at least this long: a run that cannot finish within the kernel's clock
  // is refused before it starts.
  const double at_least_s = static_cast<double>(session.steps()) * g.device_compute_s;
  if (at_least_s * 1e12 >= kTimeLimitPs)
    throw InputError(session.largest_factor(), session.largest_factor(),
                     std::to_string(session.steps()) + " steps need at least " +
                         std::to_string(static_cast<std::int64_t>(at_least_s / 86400)) +
                         " days of simulated time (device compute alone), beyond the simulator's range of about "
                         "106 days — reduce epochs, steps_per_epoch or sink_size");
  return g;
}

namespace {
const runtime::Session& validated(const runtime::Session& s) {
  s.validate();
  return s;
}
}  // namespace

System::System(sc_core::sc_module_name name, const SystemConfig& cfg, const workloads::Workload& workload,
               const runtime::Session& session, const RankPlace& place, const runtime::CompiledGraph* compiled,
               const runtime::FunctionalOptions& functional)
    : sc_module(name),
      m_cfg(cfg),
      m_session(validated(session)),
      m_data(workload.data),
      m_graph(compiled ? *compiled : compile_checked(m_cfg, workload, m_session)),
      m_chip("chip", m_cfg, m_account),
      m_cores(m_cfg.host.cpu_cores),
      m_pipeline("pipeline", m_cfg.host, m_cfg.pipeline, m_data, m_session.steps(), workload.batch_size,
                 m_session.steps_per_epoch, place.host_cores ? place.host_cores : &m_cores) {
  m_chip.scheduler.set_rank(place.rank);
  m_pipeline.set_host_slot(2 * place.host_slot);
  {  // the model's arithmetic per sample, of the network as written (semi-auto: before slicing)
    const workloads::Workload& full = workload.whole ? *workload.whole : workload;
    m_model_flops_per_sample = 2.0 * static_cast<double>(workloads::forward_macs(full.graph)) /
                               static_cast<double>(std::max<std::int64_t>(1, full.batch_size)) *
                               (full.training ? 3.0 : 1.0);
    m_tokens_per_sample = full.tokens_per_sample;
  }
  if (place.collectives) m_chip.scheduler.collectives.bind(*place.collectives);
  m_chip.hostif.h2d.set_uplink(place.h2d_uplink);
  m_chip.hostif.d2h.set_uplink(place.d2h_uplink);
  // connect
  m_chip.hostif.queue.sample_depth_every(std::max<std::int64_t>(1, m_session.steps() / 200));
  m_executor = runtime::make_executor("host", m_cfg.host, m_session, m_graph, workload.batch_size, m_chip.hostif,
                                      m_pipeline, m_account);
  // A checkpoint saves what the memory plan keeps between steps: the weights and the optimizer's
  // state (this rank's pieces), every rank its own file on the server's storage.
  if (m_session.checkpoint_every > 0)
    m_executor->set_checkpoint(m_graph.memory.weight_bytes + m_graph.memory.optimizer_state_bytes,
                               m_cfg.pipeline.cache_sharers);
  if (m_session.eval_passes() > 0) {
    // The evaluation pipeline: the evaluation recipe (nothing random, no shuffle buffer), its own
    // cache after the last map or the source, reading a pass's batches only once the pass begins.
    m_eval_data = workload.eval_data;
    m_eval_pipe = m_cfg.pipeline;
    m_eval_pipe.cache = m_cfg.pipeline.eval_cache;
    m_eval_pipe.cache_after = -1;
    m_eval_pipe.shuffle_buffer = 0;
    m_eval_graph = compile_for(m_cfg, workloads::inference_workload(workload));
    for (auto& t : m_eval_graph.sink_tasks)
      if (t.kind == hostif::TaskKind::GetNext) t.queue = 1;  // the evaluation dataset's channel
    m_eval_pipeline = std::make_unique<runtime::DataPipeline>(
        "eval_pipeline", m_cfg.host, m_eval_pipe, m_eval_data, m_session.eval_passes() * m_session.eval_steps,
        workload.batch_size, m_session.eval_steps, place.host_cores ? place.host_cores : &m_cores);
    m_eval_pipeline->gate();
    m_eval_pipeline->set_host_slot(2 * place.host_slot + 1);
    // Read back per step: the logits and the loss, in fp32.
    const std::int64_t outputs =
        4 * (workload.batch_size * std::max<std::int64_t>(1, workload.data.dataset.classes) + 1);
    m_executor->set_evaluation(&m_eval_graph, m_eval_pipeline.get(), outputs);
  }
  if (place.values) {
    m_cluster_values = true;
    m_executor->set_values(place.values);
    m_chip.scheduler.set_values(place.values);
  }
  if (functional.enabled) {
    const std::string& dir = workload.data.dataset.source;
    m_values = std::make_shared<runtime::FunctionalModel>(workload, functional, dir == "synthetic" ? "" : dir,
                                                          m_session.steps_per_epoch);
    m_executor->set_values(m_values.get());
    m_chip.scheduler.set_values(m_values.get());
    m_eval = functional.eval;
  }
}

void System::enable_trace(TraceSink& sink, int pid, std::int64_t first_step, std::int64_t last_step) {
  m_trace = std::make_unique<TraceRecorder>(
      sink, pid, std::string(runtime::strategy_name(m_session.strategy)) + " (" + name() + ")");
  m_trace->set_step_window(first_step, last_step);
  m_executor->set_trace(m_trace.get());
  m_pipeline.set_trace(m_trace.get());
  m_chip.hostif.h2d.set_trace(m_trace.get());
  m_chip.hostif.d2h.set_trace(m_trace.get());
  m_chip.scheduler.set_trace(m_trace.get());
  m_chip.hbm.set_trace(m_trace.get());
  m_chip.hostif.queue.set_trace(m_trace.get());
}

runtime::RunResult System::result() {
  runtime::RunResult r = m_executor->result();
  r.model_flops_per_sample = m_model_flops_per_sample;
  r.tokens_per_sample = m_tokens_per_sample;
  const auto& core = m_cfg.chip.aicore;
  r.peak_flops_per_device = 2.0 * static_cast<double>(core.cores * core.cube_fp16_macs_per_cycle) * core.freq_ghz * 1e9;
  if (!m_executor->finished() && r.failure.empty()) {
    if (sc_core::sc_pending_activity())  // the next event lies beyond the limit
      r.failure =
          "the run needs more simulated time than the simulator's range of 2^63 ps (about 106.75 days); "
          "it stopped there after " +
          std::to_string(r.steps_completed) + " of " + std::to_string(m_session.steps()) +
          " steps — simulate fewer steps (epochs, steps_per_epoch, "
          "sink_size) or check for parameters that make a step take days";
    else
      r.failure = "the simulation stopped with the host still waiting (nothing left to happen on the device)";
  }
  m_chip.hostif.queue.finish(sim::seconds(r.sim_time_s));
  r.stats = stats_tree(*this);
  {
    const double steps = static_cast<double>(std::max<std::int64_t>(1, r.steps_completed));
    const aicore::HbmLost to = m_chip.hbm.lost_to();
    nlohmann::ordered_json lost_to;
    for (std::size_t i = 0; i < to.size(); ++i)
      lost_to[aicore::hbm_source_name(static_cast<aicore::HbmSource>(i))] = 1e3 * to[i] / steps;
    r.contention = {
        {"hbm_gbps", m_cfg.chip.memory.hbm_gbps()},
        {"hbm_shared", m_cfg.chip.memory.hbm_contention},
        {"hbm_lost_ms_per_step",
         {{"compute_stream", 1e3 * m_chip.scheduler.hbm_lost_s(true) / steps},
          {"other_streams", 1e3 * m_chip.scheduler.hbm_lost_s(false) / steps}}},
        {"hbm_lost_to_ms_per_step", lost_to},
        {"kernels_slowed_per_step", m_chip.hbm.stats().to_json()["contended_kernels"].get<double>() / steps},
        {"core_wait_ms_per_step", 1e3 * m_chip.cores.stats().to_json()["core_wait_s"].get<double>() / steps}};
    const bool communicates = std::any_of(m_graph.step_tasks.begin(), m_graph.step_tasks.end(),
                                          [](const hostif::Task& t) { return t.kind == hostif::TaskKind::Comm; });
    if (communicates)
      r.exposed_comm = {{"gradients_ms_per_step", 1e3 * m_chip.scheduler.exposed_gradients_s() / steps},
                        {"operators_ms_per_step", 1e3 * m_chip.scheduler.exposed_operators_s() / steps}};
    const bool exchanges = std::any_of(m_graph.step_tasks.begin(), m_graph.step_tasks.end(),
                                       [](const hostif::Task& t) { return t.across_stages; });
    if (exchanges) r.exposed_comm["pipeline_ms_per_step"] = 1e3 * m_chip.scheduler.exposed_pipeline_s() / steps;
  }
  if (m_cluster_values) r.functional = true;
  if (m_values) {
    r.functional = true;
    if (m_eval && r.failure.empty()) {
      r.accuracy = m_values->evaluate();
      r.eval_samples = m_values->evaluated();
    }
    r.values = m_values;
  }

  report::DataRates rates;
  rates.has_later_epochs = m_session.steps() > m_session.steps_per_epoch;
  const auto& stages = m_pipeline.costs().stages();
  for (std::size_t s = 0; s < stages.size(); ++s) {
    const bool source = stages[s].kind == runtime::Stage::Kind::Source;
    rates.stages.push_back({stages[s].name, std::min(stages[s].workers, m_pipeline.costs().batch_size()), source,
                            m_pipeline.costs().mean_stage_s(s, false), m_pipeline.costs().mean_stage_s(s, true),
                            source ? m_pipeline.costs().mean_storage_s(false) : 0.0,
                            source ? m_pipeline.costs().mean_storage_s(true) : 0.0});
  }
  if (runtime::uses_queue(m_session.strategy)) {  // the sink modes' device-queue op: its host work and DMA
    const double bytes = static_cast<double>(m_graph.batch_bytes);
    const double send = m_pipeline.costs().send_and_dma_s(bytes, m_cfg.link.h2d_bandwidth_gbps);
    rates.stages.push_back({"DeviceQueue", 1, false, send, send});
  }
  rates.device_s_per_batch = m_graph.device_compute_s;
  rates.map_cache_possible = m_data.first_random() > 0;
  r.data = report::verdict_json(report::judge_data(r, rates, m_cfg.host, m_cfg.pipeline));
  nlohmann::ordered_json depth = nlohmann::ordered_json::array();
  for (const auto& [t, d] : m_chip.hostif.queue.depth_samples()) depth.push_back({t, d});
  r.data["queue_depth_over_time"] = depth;
  r.data["cache"] = m_cfg.pipeline.cache;
  r.data["cache_detail"] = m_pipeline.costs().cache_summary();
  if (r.data["cache_detail"]["randomness_lost"].get<bool>())
    r.data["verdict"] = r.data["verdict"].get<std::string>() +
                        "; warning: the cache follows a random map op, so every epoch after the first replays the "
                        "first epoch's augmentation (pipeline.cache_allow_random)";
  r.data["num_parallel_workers"] = m_cfg.pipeline.num_parallel_workers;
  r.data["tree"] = m_pipeline.tree(r.sim_time_s);
  if (m_eval_pipeline) r.eval_cache = m_eval_pipeline->costs().cache_summary();
  return r;
}

}  // namespace ascendsim::sim
