// `info`: parameters, MACs, ops, device memory and the data pipeline of a workload, without running it.

#include <cstddef>
#include <cstdint>
#include <iostream>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "runtime/data_pipeline.h"
#include "runtime/graph_compiler.h"
#include "sim/api.h"
#include "sim/commands/commands.h"
#include "sim/commands/options.h"
#include "sim/config.h"
#include "sim/system.h"
#include "workloads/parallel.h"
#include "workloads/workload.h"

namespace ascendsim::sim::cli {

int cmd_info(int argc, char* argv[]) {
  Options o;
  po::options_description desc = common_options(o);
  desc.add(parallel_options(o));
  if (!parse(argc, argv, desc, "info")) return 0;
  const RunRequest req = make_request(o, {});
  const SystemConfig cfg = load_config(req.config);  // with a data script's pipeline settings
  const workloads::Workload w = request_workload(req, cfg);
  const runtime::CompiledGraph g = compile_for(cfg, w);
  // Pipeline stages: every stage's graph; the memory and the fit are the fullest stage's, the
  // parameters and MACs the whole network's.
  std::vector<runtime::CompiledGraph> stage_graphs;
  std::size_t fullest = 0;
  for (const auto& s : w.stages) {
    stage_graphs.push_back(compile_for(cfg, *s));
    if (stage_graphs.back().memory.peak_bytes() > stage_graphs[fullest].memory.peak_bytes())
      fullest = stage_graphs.size() - 1;
  }
  const workloads::Workload& mw = w.stages.empty() ? w : *w.stages[fullest];
  const runtime::CompiledGraph& mg = w.stages.empty() ? g : stage_graphs[fullest];
  const workloads::Workload& whole = w.stages.empty() || !w.whole ? w : *w.whole;

  ordered_json j;
  j["workload"] = w.name;
  j["description"] = w.description;
  j["server"] = cfg.server.name;
  j["chip"] = cfg.chip.name;
  j["batch_size"] = w.batch_size;
  j["parameters"] = workloads::parameter_count(whole.graph);
  {
    // The gradients all_reduce_fusion's indices count, in the rank's training graph.
    std::int64_t gradients = 0;
    for (const auto& t : w.graph.tensors()) gradients += t.role == workloads::TensorRole::Parameter;
    j["gradients"] = w.training ? gradients : 0;
  }
  j["forward_macs_per_sample"] = workloads::forward_macs(whole.graph) / whole.batch_size;
  j["ops_per_step"] = static_cast<std::int64_t>(g.step_tasks.size());
  j["ops_per_step_sink"] = static_cast<std::int64_t>(g.sink_tasks.size());
  j["peak_device_memory_bytes"] = mg.memory.peak_bytes();
  // The data queue's buffers count only in the sink modes.
  const std::string short_op_by_op = memory_shortfall(cfg, mw, mg.memory, false);
  const std::string short_sink = memory_shortfall(cfg, mw, mg.memory, true);
  if (!w.stages.empty()) {
    ordered_json stages = ordered_json::array();
    for (std::size_t s = 0; s < stage_graphs.size(); ++s)
      stages.push_back({{"stage", s},
                        {"layers",
                         {w.stages[s]->parallel.stage_first_layer,
                          w.stages[s]->parallel.stage_first_layer + w.stages[s]->parallel.stage_layers - 1}},
                        {"parameters", workloads::parameter_count(w.stages[s]->graph)},
                        {"ops_per_step", static_cast<std::int64_t>(stage_graphs[s].step_tasks.size())},
                        {"device_compute_per_step_s", stage_graphs[s].device_compute_s},
                        {"peak_device_memory_bytes", stage_graphs[s].memory.peak_bytes()}});
    j["pipeline_stages"] = stages;
    j["memory_stage"] = fullest;
  }
  j["fits_device_memory"] = {{"non-sink", short_op_by_op.empty()}, {"sink modes", short_sink.empty()}};
  j["memory"] = {{"persistent_bytes", mg.memory.persistent_bytes},
                 {"arena_bytes", mg.memory.arena_bytes},
                 {"live_peak_bytes", mg.memory.live_peak_bytes},
                 {"workspace_bytes", mg.memory.workspace_bytes},
                 {"queue_buffer_bytes", mg.memory.queue_buffer_bytes},
                 {"weights_bytes", mg.memory.weight_bytes},
                 {"optimizer_state_bytes", mg.memory.optimizer_state_bytes},
                 {"other_persistent_bytes", mg.memory.other_persistent_bytes},
                 {"peak_gradient_bytes", mg.memory.peak_gradient_bytes},
                 {"peak_activation_bytes", mg.memory.peak_activation_bytes},
                 {"peak_workspace_bytes", mg.memory.peak_workspace_bytes},
                 {"device_capacity_bytes", static_cast<std::int64_t>(cfg.chip.memory.hbm_gib * 1073741824.0)}};
  j["dataset"] = {{"format", workloads::dataset_format_name(w.data.dataset.format)},
                  {"source", w.data.dataset.source},
                  {"samples", w.data.dataset.samples}};
  j["steps_per_epoch"] = w.steps_per_epoch();
  j["batch_bytes"] = w.batch_bytes();
  const runtime::PipelineCosts pipeline_costs(cfg.host, cfg.pipeline, w.data, w.batch_size, w.steps_per_epoch());
  j["pipeline_tree"] = runtime::describe_tree(pipeline_costs, cfg.host.cpu_cores, static_cast<double>(w.batch_bytes()),
                                              cfg.link.h2d_bandwidth_gbps);
  j["optimizer"] = w.optimizer;
  j["mode"] = w.training ? "train" : "infer";
  j["recipe"] = {{"amp_level", w.recipe.amp_level},
                 {"keep_batchnorm_fp32", w.recipe.keep_batchnorm_fp32},
                 {"graph_kernel_fusion", w.recipe.graph_kernel_fusion},
                 {"ub_fusion", w.recipe.ub_fusion},
                 {"flash_attention", w.recipe.flash_attention},
                 {"loss_scale", w.recipe.loss_scale}};
  j["device_compute_per_step_s"] = g.device_compute_s;
  ordered_json passes = ordered_json::array();
  for (const auto& p : g.pass_effects) passes.push_back({{"pass", p.name}, {"ops", p.ops}, {"hbm_bytes", p.bytes}});
  j["graph_passes"] = passes;
  ordered_json ops = ordered_json::array();
  for (std::size_t i = 0; i < g.step_tasks.size(); ++i) {
    if (g.step_tasks[i].kind != hostif::TaskKind::AiCore) continue;  // events and collectives
    const auto& c = g.step_tasks[i].cost;
    const auto part = g.step_tasks[i].part;
    ops.push_back({{"name", g.step_tasks[i].name},
                   {"pass", part == hostif::StepPart::Forward    ? "forward"
                            : part == hostif::StepPart::Backward ? "backward"
                                                                 : "optimizer"},
                   {"op", g.descs[i].to_string()},
                   {"time_us", c.time_s * 1e6},
                   {"blocks", c.blocks},
                   {"macs", c.macs},
                   {"bound", aicore::bound_name(c.bound)}});
  }
  j["ops"] = ops;

  if (!o.json.empty()) {
    write_output(o.json, j.dump(2) + "\n");
    if (o.json == "-") {
      check_fits(cfg, mw, mg.memory, false);  // described, and refused if nothing fits: exit 2
      return 0;
    }
  }
  std::cout << fmt::format("{} — {}\n", w.name, w.description);
  std::cout << fmt::format("  server                    {} ({} host cores, {} devices per host)\n", cfg.server.name,
                           cfg.host.cpu_cores, cfg.server.devices_per_server);
  std::cout << fmt::format("  chip                      {}\n", cfg.chip.name);
  std::cout << fmt::format("  batch size                {}\n", w.batch_size);
  std::cout << fmt::format("  {:<25} {}\n", w.training ? "training" : "inference", w.recipe.describe());
  std::cout << fmt::format("  parameters                {}\n", j["parameters"].get<std::int64_t>());
  std::cout << fmt::format("  forward MACs per sample   {}\n", j["forward_macs_per_sample"].get<std::int64_t>());
  const std::string stage0 = w.stages.empty() ? "" : " (pipeline stage 0; every stage's below)";
  std::cout << fmt::format("  device ops per step       {} (+1 GetNext in the sink modes){}\n", g.step_tasks.size(),
                           stage0);
  std::cout << fmt::format("  device compute per step   {:.1f} us{}\n", g.device_compute_s * 1e6, stage0);
  std::cout << "  data pipeline             the execution tree, first epoch (per batch on one thread; batches/s its threads sustain)\n";
  for (const auto& st : j["pipeline_tree"])
    std::cout << fmt::format("    {:<44} {:>3} worker(s) {:>10.3f} ms {:>10.1f} batches/s{}\n",
                             st["stage"].get<std::string>(), st["workers"].get<std::int64_t>(),
                             st["batch_ms"].get<double>(), st["batches_per_s"].get<double>(),
                             st["bounds_pipeline"].get<bool>() ? "  <- bounds the pipeline" : "");
  if (!w.stages.empty())
    for (const auto& st : j["pipeline_stages"])
      std::cout << fmt::format(
          "  pipeline stage {:<10} layers {} to {}: {} parameters, {} ops, {:.1f} us compute, "
          "peak memory {}{}\n",
          st["stage"].get<std::int64_t>(), st["layers"][0].get<std::int64_t>(), st["layers"][1].get<std::int64_t>(),
          st["parameters"].get<std::int64_t>(), st["ops_per_step"].get<std::int64_t>(),
          1e6 * st["device_compute_per_step_s"].get<double>(),
          format_bytes(st["peak_device_memory_bytes"].get<double>()),
          st["stage"].get<std::size_t>() == fullest ? " (the memory below)" : "");
  std::cout << fmt::format("  peak device memory        {} (persistent {}, step {}, data queue {})\n",
                           format_bytes(static_cast<double>(mg.memory.peak_bytes())),
                           format_bytes(static_cast<double>(mg.memory.persistent_bytes)),
                           format_bytes(static_cast<double>(mg.memory.arena_bytes)),
                           format_bytes(static_cast<double>(mg.memory.queue_buffer_bytes)));
  auto bytes = [](std::int64_t b) { return format_bytes(static_cast<double>(b)); };
  std::cout << fmt::format(
      "  memory by part            weights {}, optimizer state {}, other {}; at the step's peak gradients {}, "
      "activations {}, workspaces {}\n",
      bytes(mg.memory.weight_bytes), bytes(mg.memory.optimizer_state_bytes), bytes(mg.memory.other_persistent_bytes),
      bytes(mg.memory.peak_gradient_bytes), bytes(mg.memory.peak_activation_bytes),
      bytes(mg.memory.peak_workspace_bytes));
  std::cout << fmt::format("  fits device memory        non-sink {}, sink modes {}\n",
                           short_op_by_op.empty() ? "yes" : "no", short_sink.empty() ? "yes" : "no");
  std::cout << fmt::format("  dataset                   {} samples, {} steps per epoch\n", w.data.dataset.samples,
                           w.steps_per_epoch());
  // The executed graph, pass by pass: device ops and the bytes they move in HBM.
  std::string passes_line;
  for (std::size_t i = 0; i < g.pass_effects.size(); ++i) {
    const auto& p = g.pass_effects[i];
    if (i > 0 && p.ops == g.pass_effects[i - 1].ops && p.bytes == g.pass_effects[i - 1].bytes) continue;
    passes_line += fmt::format("{}{} {} ops {}", passes_line.empty() ? "" : " -> ", p.name, p.ops,
                               format_bytes(static_cast<double>(p.bytes)));
  }
  std::cout << fmt::format("  executed graph            {}\n\n", passes_line);
  if (w.shard_plan) {  // semi-auto: every tensor's layout on each rank, and the collectives
    const auto& plan = *w.shard_plan;
    auto dims = [](const workloads::Shape& s) {
      std::string t;
      for (auto v : s) t += (t.empty() ? "" : "x") + std::to_string(v);
      return t;
    };
    std::cout << fmt::format(
        "  semi-auto layouts on {} devices (cuts per dimension; partial: a sum over that many ranks)\n",
        w.parallel.devices);
    std::cout << fmt::format("  {:<44} {:>16} {:>14} {:>12} {:>8}\n", "tensor", "shape", "on each rank", "cuts",
                             "partial");
    for (const auto& l : plan.layouts) {
      std::string cuts;
      for (auto c : l.cuts) cuts += (cuts.empty() ? "" : ",") + std::to_string(c);
      std::cout << fmt::format("  {:<44} {:>16} {:>14} {:>12} {:>8}\n", l.tensor, dims(l.global), dims(l.local),
                               "(" + cuts + ")", l.partial);
    }
    std::cout << "\n";
    for (const auto& c : plan.collectives)
      std::cout << fmt::format("  {} {} {}: {} ranks {} apart, {} bytes\n", c.forward ? "forward " : "backward", c.kind,
                               c.name, c.group_size, c.group_stride, c.bytes);
    std::cout << "\n";
  }
  std::cout << fmt::format("  {:<52} {:>10} {:>7} {:>9}\n", "op", "time us", "blocks", "bound");
  for (std::size_t i = 0; i < g.step_tasks.size(); ++i) {
    if (g.step_tasks[i].kind != hostif::TaskKind::AiCore) continue;
    const auto& c = g.step_tasks[i].cost;
    std::cout << fmt::format("  {:<52} {:>10.2f} {:>7} {:>9}\n", g.step_tasks[i].name, c.time_s * 1e6, c.blocks,
                             aicore::bound_name(c.bound));
  }
  check_fits(cfg, mw, mg.memory, false);  // described, and refused if nothing fits: exit 2
  return 0;
}

}  // namespace ascendsim::sim::cli
