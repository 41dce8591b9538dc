// From a request to what a run simulates: the workload built and laid out as the request says
// (recipe, data or semi-automatic parallelism, tensor and pipeline parallelism, the sharded
// optimizer, recomputation), its dataset and shard, the sessions of its strategies, and the
// report header's description of the setting. The library's calls (api.cpp, studies.cpp) start
// here; sim/run_build.h declares what they share.
#include "sim/run_build.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <stdexcept>

#include <yaml-cpp/yaml.h>

#include <fmt/format.h>

#include "runtime/data_pipeline.h"
#include "runtime/dataset_files.h"
#include "sim/core/error.h"
#include "sim/core/params.h"
#include "sim/simulation.h"
#include "workloads/onnx_import.h"
#include "workloads/parallel.h"
#include "workloads/pipeline.h"
#include "workloads/transformer.h"

namespace ascendsim::sim {

using nlohmann::ordered_json;

namespace {

/// The request's recipe with the chip's defaults: a transformer's attention fused where the
/// chip's backend has the kernel. Asking for it without attention or on a chip without the kernel
/// is refused.
workloads::RecipeOverrides recipe_for(const RunRequest& r, const SystemConfig& cfg) {
  workloads::RecipeOverrides o = r.recipe;
  const bool transformer = r.model.empty() && workloads::transformer_shape(r.workload, r.recipe).has_value();
  if (o.flash_attention && *o.flash_attention && !transformer)
    throw InputError("flash_attention", "flash_attention",
                     (r.model.empty() ? r.workload : r.model) + " has no attention; it applies to the transformers");
  if (o.flash_attention && *o.flash_attention && !cfg.chip.aicore.flash_attention)
    throw InputError("flash_attention", "flash_attention",
                     cfg.chip.name +
                         "'s backend has no fused attention kernel (aicore.flash_attention is false); "
                         "FlashAttentionScore is CANN's kernel for the Atlas A2 series, the ascend910b preset");
  if (!o.flash_attention && transformer)
    o.flash_attention = cfg.chip.aicore.flash_attention && o.amp_level.value_or("O2") != "O0";
  return o;
}

/// Optimizer-state sharding and the norms' groups, once the layout is settled: the shard group is
/// the ranks that all-reduce a weight's gradient (every device in data parallel; the gradient
/// group in semi-auto); the weights tensor parallelism cuts (`split`) have their norms summed
/// over the tensor-parallel group (workloads::norm_group).
void lay_out_optimizer(workloads::Workload& w, const RunRequest& r, std::int64_t tp) {
  if (!w.training) {
    if (r.optimizer_shard) throw InputError("optimizer_shard", "optimizer_shard", "infer has no optimizer to shard");
    return;
  }
  workloads::OptimizerSpec spec = w.optimizer_spec;
  if (r.optimizer_shard) {
    if (r.functional.enabled)
      throw InputError("optimizer_shard", "optimizer_shard",
                       "functional mode computes whole optimizer states; run it without optimizer_shard");
    if (r.optimizer_shard_level != 1 && r.optimizer_shard_level != 2)
      throw InputError("optimizer_shard_level", "optimizer_shard_level",
                       "is 1 (the optimizer state, MindSpore's level1) or 2 (the gradients too, level2), got " +
                           std::to_string(r.optimizer_shard_level));
    spec.partition_gradients = r.optimizer_shard_level == 2;
    spec.shard_size = w.parallel.semi_auto ? w.parallel.gradient_group_size : r.devices;
    spec.shard_stride = w.parallel.semi_auto ? w.parallel.gradient_group_stride : 1;
    spec.unsharded = w.parallel.unreduced;
    if (spec.shard_size <= 1)
      throw InputError("optimizer_shard", "optimizer_shard",
                       "the optimizer state divides among the ranks that hold the same weights and read different "
                       "samples, and " +
                           std::string(tp > 1 ? "with tensor_parallel " + std::to_string(tp) + " on " +
                                                    std::to_string(r.devices) + " devices"
                                              : "on " + std::to_string(r.devices) + " device(s)") +
                           " there is one; give more devices");
  }
  if (tp > 1 && w.shard_plan) {  // the weights tensor parallelism cuts: their norms span the group
    spec.tensor_group_size = tp;
    for (workloads::TensorId t = 0; t < static_cast<workloads::TensorId>(w.graph.tensors().size()); ++t) {
      const auto& x = w.graph.tensor(t);
      const auto it = w.shard_plan->pieces.find(x.name);
      if (x.role == workloads::TensorRole::Parameter && it != w.shard_plan->pieces.end() &&
          std::any_of(it->second.cuts.begin(), it->second.cuts.end(), [](std::int64_t c) { return c > 1; }))
        spec.split.insert(t);
    }
  }
  const bool norms = (spec.clip_global_norm || spec.kind == "lamb") && !spec.split.empty();
  if (spec.shard_size <= 1 && !norms) return;
  try {
    workloads::replace_optimizer(w, spec);
  } catch (const std::invalid_argument& e) {
    throw InputError("optimizer_shard", "optimizer_shard", e.what());
  }
  for (const auto& op : w.graph.ops())  // a sharded weight's gradient is reduce-scattered, not all-reduced
    if (op.type == "AllGatherInto") w.parallel.reduce_scattered.insert(op.inputs.at(1));
  w.recipe.optimizer_shard = spec.shard_size;
  w.recipe.gradients_sharded = spec.partition_gradients && spec.shard_size > 1;
}

/// Activation recomputation, last: it rewrites the backward pass of the settled graph.
void recompute(workloads::Workload& w, const RunRequest& r) {
  if (!r.recompute) return;
  if (!workloads::transformer_shape(w.name, r.recipe) || !r.model.empty() || !w.training)
    throw InputError("recompute", "recompute",
                     "recomputes the layers of a built-in transformer's training (bert-base, bert-large, gpt, "
                     "gpt2-small, gpt2-medium, llama-7b), not " +
                         (r.model.empty() ? w.name : r.model) + (w.training ? "" : " in inference"));
  workloads::recompute_layers(w);
  w.recipe.recompute = true;
}


constexpr std::int64_t kMaxDevices = 4096;

/// A strategy file: a YAML mapping of layer (op name or cell) to its strategy in MindSpore's
/// notation.
std::map<std::string, workloads::ShardStrategy> load_shard_strategies(const std::string& path) {
  YAML::Node root;
  try {
    root = YAML::LoadFile(path);
  } catch (const YAML::BadFile&) {
    throw InputError("shard_strategy", "shard_strategy", path + ": cannot be read");
  } catch (const YAML::Exception& e) {
    throw InputError("shard_strategy", "shard_strategy",
                     path + ":" + std::to_string(e.mark.line + 1) + ": malformed YAML: " + e.msg);
  }
  if (!root.IsMap())
    throw InputError("shard_strategy", "shard_strategy",
                     path + ": a mapping of layer names to strategies, e.g. layer1: \"((1,4),(1,4))\"");
  std::map<std::string, workloads::ShardStrategy> out;
  for (const auto& kv : root) {
    const std::string layer = kv.first.as<std::string>();
    const std::string at = path + ":" + std::to_string(kv.first.Mark().line + 1) + ": " + layer;
    if (!kv.second.IsScalar()) throw InputError("shard_strategy", "shard_strategy", at + ": a strategy is a string");
    try {
      out[layer] = workloads::parse_shard_strategy(kv.second.as<std::string>());
    } catch (const std::invalid_argument& e) {
      throw InputError("shard_strategy", "shard_strategy", at + ": " + e.what());
    }
  }
  return out;
}

/// Pipeline parallelism: one micro-batch of one stage's ranks laid out as the request says
/// (tensor parallelism, a sharded optimizer, recomputation), cut into the stages.
workloads::Workload build_pipeline(const RunRequest& r, const SystemConfig& cfg) {
  const std::int64_t P = r.pipeline_stages;
  if (P < 1) throw InputError("pipeline_stages", "pipeline_stages", "must be at least 1, got " + std::to_string(P));
  if (r.micro_batches < 0)
    throw InputError("micro_batches", "micro_batches",
                     "must be at least 1 (0: as many as the stages), got " + std::to_string(r.micro_batches));
  if (P == 1)
    throw InputError("micro_batches", "micro_batches",
                     "micro-batches divide a step among pipeline stages; give pipeline_stages 2 or more (without "
                     "stages, gradient_accumulation runs a step in micro-batches)");
  // Gradient accumulation: that many rounds of the stages' micro-batches in one 1F1B schedule.
  const std::int64_t M = (r.micro_batches > 0 ? r.micro_batches : P) * r.gradient_accumulation;
  const std::string net = r.model.empty() ? r.workload : r.model;
  if (!workloads::transformer_shape(r.workload, r.recipe) || !r.model.empty())
    throw InputError("pipeline_stages", "pipeline_stages",
                     "pipeline parallelism divides the built-in transformers' layers (bert-base, bert-large, gpt, "
                     "gpt2-small, gpt2-medium, llama-7b) among stages, not " +
                         net);
  if (r.mode != "train")
    throw InputError("pipeline_stages", "pipeline_stages", "pipeline parallelism divides a training step");
  if (r.functional.enabled)
    throw InputError("pipeline_stages", "pipeline_stages",
                     "functional mode computes one device's or a data-parallel cluster's values; run it without "
                     "pipeline_stages");
  if (!r.all_reduce_fusion.empty())
    throw InputError("all_reduce_fusion", "all_reduce_fusion",
                     "fusion groups index the whole network's gradients; each pipeline stage reduces its own");
  if (r.eval_every > 0)
    throw InputError("eval_every", "eval_every",
                     "evaluation runs each device's forward pass; with pipeline stages it is not modelled, train "
                     "without eval_every");
  if (r.parallel_mode != "data")
    throw InputError("parallel_mode", "parallel_mode",
                     "pipeline stages lay each stage out by tensor_parallel and data parallelism; semi-auto "
                     "strategies are not combined with them");
  if (r.devices % P != 0)
    throw InputError("pipeline_stages", "pipeline_stages",
                     std::to_string(P) + " stages do not divide the " + std::to_string(r.devices) +
                         " device(s); give devices a multiple of " + std::to_string(P) + " (each stage " +
                         (r.tensor_parallel > 1 ? "a multiple of tensor_parallel " + std::to_string(r.tensor_parallel)
                                                : std::string("one or more")) +
                         " ranks)");
  const std::int64_t R = r.devices / P;
  if (R % r.tensor_parallel != 0)
    throw InputError("tensor_parallel", "tensor_parallel",
                     "each of the " + std::to_string(P) + " stages has " + std::to_string(R) + " rank(s), which " +
                         std::to_string(r.tensor_parallel) + "-rank groups do not divide; give devices a multiple of " +
                         std::to_string(P * r.tensor_parallel));
  if (r.batch_size % M != 0)
    throw InputError("micro_batches", "micro_batches",
                     "the batch of " + std::to_string(r.batch_size) + " sequences does not divide into " +
                         std::to_string(M) + " micro-batches; give batch_size a multiple of " + std::to_string(M));
  if (r.optimizer_shard && R / r.tensor_parallel < 2)
    throw InputError("optimizer_shard", "optimizer_shard",
                     "the optimizer state divides among a stage's data-parallel ranks, and each of the " +
                         std::to_string(P) + " stages has " + std::to_string(R / r.tensor_parallel) +
                         "; give devices a multiple of " + std::to_string(2 * P * r.tensor_parallel));
  RunRequest one = r;
  one.pipeline_stages = 1;
  one.micro_batches = 0;
  one.gradient_accumulation = 1;
  one.devices = R;
  one.batch_size = r.batch_size / M;
  workloads::Workload w = build_workload(one, cfg);
  // Each stage's data-parallel ranks average its gradients among themselves.
  if (!w.parallel.semi_auto) {
    w.parallel.gradient_group_size = static_cast<std::int32_t>(R);
    w.parallel.gradient_group_stride = 1;
  }
  const std::int64_t shards = w.parallel.data_shards > 0 ? w.parallel.data_shards : R;
  std::vector<workloads::Workload> stages;
  try {
    stages = workloads::pipeline_stages(w, P, M, R);
  } catch (const std::invalid_argument& e) {
    std::string what = e.what();  // "--pipeline-stages 4: ..." — the key names the flag already
    const bool micro = what.rfind("--micro", 0) == 0;
    if (const auto colon = what.find(": "); what.rfind("--", 0) == 0 && colon != std::string::npos)
      what = what.substr(colon + 2);
    throw InputError(micro ? "micro_batches" : "pipeline_stages", micro ? "micro_batches" : "pipeline_stages", what);
  }
  const std::int64_t m = std::min(devices_per_server(r, cfg), r.devices);
  // The model's arithmetic (MFU) is the whole network's, as written.
  const auto whole = w.whole ? w.whole : std::make_shared<const workloads::Workload>(w);
  for (auto& s : stages) {
    s.whole = whole;
    s.parallel.gradient_accumulation = r.gradient_accumulation;
    s.parallel.devices = r.devices;
    s.parallel.devices_per_server = m;
    s.parallel.data_shards = shards;
  }
  std::vector<std::shared_ptr<const workloads::Workload>> held;
  for (auto& s : stages) held.push_back(std::make_shared<const workloads::Workload>(s));
  workloads::Workload out = stages.front();
  out.stages = held;
  return out;
}

}  // namespace

namespace {
void apply_data_script(const RunRequest& r, workloads::Workload& w);
}  // namespace

workloads::Workload request_workload(const RunRequest& req, const SystemConfig& cfg) {
  workloads::Workload w = build_workload(req, cfg);
  if (req.data) apply_data_script(req, w);
  return w;
}

/// Devices of one server for the request: its rank table's, else the server preset's.
std::int64_t devices_per_server(const RunRequest& r, const SystemConfig& cfg) {
  return r.devices_per_server > 0 ? r.devices_per_server : cfg.server.devices_per_server;
}

/// Gradient accumulation without pipeline stages: the step's batch in micro-batches, each one's
/// workload laid out as the request says (data or tensor parallelism, a sharded optimizer,
/// recomputation), run N times with one optimizer step.
workloads::Workload build_accumulation(const RunRequest& r, const SystemConfig& cfg) {
  const std::int64_t N = r.gradient_accumulation;
  if (r.mode != "train")
    throw InputError("gradient_accumulation", "gradient_accumulation",
                     "gradient accumulation divides a training step; inference has no gradients");
  if (r.functional.enabled)
    throw InputError("gradient_accumulation", "gradient_accumulation",
                     "functional mode computes a step at its whole batch; run it without gradient_accumulation");
  if (r.eval_every > 0)
    throw InputError("eval_every", "eval_every",
                     "evaluation with gradient accumulation is not modelled; train without eval_every");
  if (r.batch_size > 0 && r.batch_size % N != 0)
    throw InputError("gradient_accumulation", "gradient_accumulation",
                     "the batch of " + std::to_string(r.batch_size) + " does not divide into " + std::to_string(N) +
                         " micro-batches; give batch_size a multiple of " + std::to_string(N) +
                         " (batch_size is the step's, all its micro-batches)");
  RunRequest one = r;
  one.gradient_accumulation = 1;
  one.batch_size = r.batch_size / N;
  const workloads::Workload w = build_workload(one, cfg);
  try {
    return workloads::accumulate_gradients(w, N);
  } catch (const std::invalid_argument& e) {
    std::string what = e.what();
    if (const auto colon = what.find(": "); what.rfind("--", 0) == 0 && colon != std::string::npos)
      what = what.substr(colon + 2);
    throw InputError("gradient_accumulation", "gradient_accumulation", what);
  }
}

workloads::Workload build_workload(const RunRequest& r, const SystemConfig& cfg) {
  if (r.gradient_accumulation < 1)
    throw InputError("gradient_accumulation", "gradient_accumulation",
                     "must be at least 1 (1: no accumulation), got " + std::to_string(r.gradient_accumulation));
  if (r.pipeline_stages != 1 || r.micro_batches != 0) return build_pipeline(r, cfg);
  if (r.gradient_accumulation > 1) return build_accumulation(r, cfg);
  constexpr std::int64_t kMaxBatch = std::int64_t{1} << 24;
  if ((r.model.empty() ? r.batch_size <= 0 : r.batch_size < 0) || r.batch_size > kMaxBatch)
    throw InputError(
        "batch_size", "batch_size",
        "must be a whole number from 1 to " + std::to_string(kMaxBatch) + ", got " + std::to_string(r.batch_size));
  const std::int64_t m = devices_per_server(r, cfg);
  if (m < 1 || m > kDevicesPerServer)
    throw InputError("devices_per_server", "devices_per_server",
                     std::to_string(m) + ": a server holds 1 to " + std::to_string(kDevicesPerServer) + " devices");
  if (r.devices < 1 || r.devices > kMaxDevices || (r.devices > m && r.devices % m))
    throw InputError("devices", "devices",
                     std::to_string(r.devices) + ": give 1 to " + std::to_string(m) + " devices (one server of " +
                         cfg.server.name + ") or whole servers of " + std::to_string(m) + ", up to " +
                         std::to_string(kMaxDevices));
  {
    // The server's HCCS networks must tile the devices it holds in this run.
    const std::int64_t here = std::min(m, r.devices), g = std::min(cfg.chip.hccl.hccs_group_size, here);
    if (here % g != 0)
      throw InputError("devices", "devices",
                       std::to_string(here) + " devices per server do not fill its HCCS networks of " +
                           std::to_string(cfg.chip.hccl.hccs_group_size) + " (hccl.hccs_group_size, server " +
                           cfg.server.name + "); give a multiple of " + std::to_string(g));
  }
  if (r.mode != "train" && r.mode != "infer")
    throw InputError("mode", "mode", "'" + r.mode + "': train, or infer (the forward pass only)");
  if (r.loss != "softmax-cross-entropy" && r.loss != "none")
    throw InputError("loss", "loss",
                     "'" + r.loss + "': softmax-cross-entropy (of the model's output against integer labels) or none");
  if (r.loss != "softmax-cross-entropy" && r.model.empty())
    throw InputError("loss", "loss", "the loss is chosen for an imported model (model); a workload has its own");
  workloads::Workload w;
  if (r.functional.enabled && r.mode == "infer" && !r.model.empty())
    throw InputError("functional", "functional",
                     "an imported model's forward pass has no loss to compute; run --mode infer without functional "
                     "mode, or train it");
  if (!r.frozen.empty() && r.model.empty())
    throw InputError("frozen", "frozen", "names initializers of an ONNX model (model); a workload has its own weights");
  if (!r.model.empty() && r.workload != RunRequest{}.workload)
    throw InputError("model", "model", "the network is a workload or a model file; give one of the two");
  if (!r.model.empty() && r.recipe.shapes_transformer())
    throw InputError("model", "model",
                     "a model file has its own shape: --layers, --hidden, --heads, --ffn, --seq-length and --vocab "
                     "apply to the built-in transformers");
  if (!r.model.empty()) {
    workloads::OnnxOptions opt;
    opt.batch_size = r.batch_size;
    opt.inference = r.mode == "infer";
    opt.loss = r.loss != "none";
    opt.recipe = r.recipe;
    opt.values = r.functional.enabled;
    opt.frozen = r.frozen;
    try {
      w = workloads::import_onnx(r.model, opt);
    } catch (const std::invalid_argument& e) {
      throw InputError("model", "model", e.what());
    }
  } else {
    try {
      w = workloads::make_workload(r.workload, r.batch_size, recipe_for(r, cfg));
    } catch (const std::invalid_argument& e) {
      // A shape flag's error begins with the flag (--heads 0: ...) and says so itself.
      const std::string what = e.what();
      if (what.rfind("--", 0) == 0) throw InputError(what);
      throw InputError("workload", "workload", what);
    }
    if (r.mode == "infer") {  // the forward pass over the evaluation dataset, as MindSpore's Model.eval
      w = workloads::inference_workload(w);
      w.data = w.eval_data;
    }
  }
  if (!w.training && r.parallel_mode != "data")
    throw InputError("mode", "mode", "semi-auto parallelism shards a training network; infer runs in data mode");
  w.parallel.devices = r.devices;
  w.parallel.devices_per_server = std::min(m, r.devices);
  w.parallel.all_reduce_fusion = r.all_reduce_fusion;
  w.parallel.parameter_broadcast = r.parameter_broadcast;
  std::int64_t params = 0;
  for (const auto& t : w.graph.tensors()) params += t.role == workloads::TensorRole::Parameter;
  const auto& split = r.all_reduce_fusion;
  for (std::size_t k = 0; k < split.size(); ++k)
    if (split[k] < 0 || split[k] >= params || (k > 0 && split[k] <= split[k - 1]))
      throw InputError("all_reduce_fusion", "all_reduce_fusion",
                       "each group's last gradient index must increase within " + w.name + "'s " +
                           std::to_string(params) + " gradients (0 to " + std::to_string(params - 1) + "), got " +
                           std::to_string(split[k]));
  if (!split.empty() && r.devices == 1)
    throw InputError("all_reduce_fusion", "all_reduce_fusion", "groups AllReduce across devices; give devices > 1");
  if (r.parallel_mode != "data" && r.parallel_mode != "semi-auto")
    throw InputError("parallel_mode", "parallel_mode",
                     "'" + r.parallel_mode + "': data (every rank the whole model) or semi-auto (sharded operators)");
  const std::int64_t tp = r.tensor_parallel;
  const auto shape = workloads::transformer_shape(w.name, r.recipe);
  if (r.sequence_parallel && tp < 2)
    throw InputError("sequence_parallel", "sequence_parallel",
                     "splits the tokens among the ranks of a tensor-parallel group; give tensor_parallel 2 or more "
                     "(it is " +
                         std::to_string(tp) + ")");
  if (r.sequence_parallel && (w.batch_size * w.tokens_per_sample) % tp != 0)
    throw InputError("sequence_parallel", "sequence_parallel",
                     "the " + std::to_string(w.batch_size * w.tokens_per_sample) + " tokens a tensor-parallel group " +
                         "computes at once (" + std::to_string(w.batch_size) + " sequence(s) of " +
                         std::to_string(w.tokens_per_sample) + "; with pipeline stages a micro-batch's) do not " +
                         "divide among its " + std::to_string(tp) + " ranks");
  if (tp != 1) {
    if (tp < 1) throw InputError("tensor_parallel", "tensor_parallel", "must be at least 1, got " + std::to_string(tp));
    if (!shape || !r.model.empty())
      throw InputError("tensor_parallel", "tensor_parallel",
                       "tensor parallelism splits the built-in transformers' attention and MLP (bert-base, "
                       "bert-large, gpt, gpt2-small, gpt2-medium, llama-7b), not " +
                           (r.model.empty() ? w.name : r.model));
    if (!w.training) throw InputError("mode", "mode", "tensor parallelism shards a training network");
    if (r.devices % tp != 0)
      throw InputError("tensor_parallel", "tensor_parallel",
                       std::to_string(tp) + " ranks per group do not divide the " + std::to_string(r.devices) +
                           " device(s); give devices (default 1) a multiple of it");
    if (!r.dataset_strategy.empty() || !r.shard_strategy.empty())
      throw InputError(r.dataset_strategy.empty() ? "shard_strategy" : "dataset_strategy",
                       r.dataset_strategy.empty() ? "shard_strategy" : "dataset_strategy",
                       "tensor parallelism gives the strategies itself; give either strategies or tensor_parallel");
  }
  if (r.parallel_mode == "data" && tp == 1) {
    if (!r.dataset_strategy.empty() || !r.shard_strategy.empty())
      throw InputError(r.dataset_strategy.empty() ? "shard_strategy" : "dataset_strategy",
                       r.dataset_strategy.empty() ? "shard_strategy" : "dataset_strategy",
                       "strategies shard operators in semi-auto parallel mode; add parallel_mode semi-auto");
    if (r.optimizer_shard && r.devices < 2)
      throw InputError("optimizer_shard", "optimizer_shard",
                       "shards the optimizer state across data-parallel ranks; give devices > 1");
    lay_out_optimizer(w, r, 1);
    recompute(w, r);
    return w;
  }
  if (r.devices < 2)
    throw InputError("devices", "devices", "semi-auto parallelism shards the network across devices; give 2 or more");
  workloads::SemiAutoConfig c;
  c.devices = r.devices;
  if (tp > 1) {
    // The batch given is each tensor-parallel group's: the network is built at the global batch
    // and cut over the data-parallel groups, each batch piece repeated on a group's adjacent ranks.
    const std::int64_t dp = r.devices / tp;
    try {
      w = workloads::make_workload(r.workload, w.batch_size * dp, recipe_for(r, cfg));
      const std::int64_t heads = r.recipe.heads.value_or(shape->heads);
      c.layers = workloads::tensor_parallel_strategies(
          w, heads, r.recipe.kv_heads.value_or(shape->kv_heads > 0 ? shape->kv_heads : heads),
          r.recipe.ffn.value_or(shape->ffn), dp, tp);
      if (r.sequence_parallel) {
        auto sp = workloads::sequence_parallel_strategies(w, dp, tp);
        c.layers.insert(sp.layers.begin(), sp.layers.end());
        c.outputs = std::move(sp.outputs);
      }
    } catch (const std::invalid_argument& e) {
      throw InputError("tensor_parallel", "tensor_parallel", e.what());
    }
    w.parallel.devices = r.devices;
    w.parallel.devices_per_server = std::min(m, r.devices);
    w.parallel.all_reduce_fusion = r.all_reduce_fusion;
    for (auto t : w.batch_inputs) {
      std::vector<std::int64_t> cuts(w.graph.tensor(t).shape.size(), 1);
      cuts[0] = dp;
      c.dataset.push_back(cuts);
    }
    c.repeat_right = true;
  }
  if (!r.dataset_strategy.empty()) {
    try {
      c.dataset = workloads::parse_shard_strategy(r.dataset_strategy);
    } catch (const std::invalid_argument& e) {
      throw InputError("dataset_strategy", "dataset_strategy", e.what());
    }
  }
  if (!r.shard_strategy.empty()) c.layers = load_shard_strategies(r.shard_strategy);
  auto plan = std::make_shared<workloads::ShardPlan>();
  const workloads::Workload whole = w;
  try {
    w = workloads::semi_auto(w, c, plan.get());
  } catch (const std::invalid_argument& e) {
    const std::string what = e.what();
    const std::string key = what.rfind("dataset strategy", 0) == 0 ? "dataset_strategy" : "shard_strategy";
    throw InputError(key, key, what);
  }
  w.shard_plan = plan;
  w.parallel.tensor_parallel = tp;
  w.parallel.sequence_parallel = r.sequence_parallel;
  w.whole = std::make_shared<const workloads::Workload>(whole);
  lay_out_optimizer(w, r, tp);
  // Megatron's sequence parallelism gathers a layer's split input again in the backward pass
  // (full recomputation gathers it again anyway).
  if (r.sequence_parallel && !r.recompute && w.training) workloads::regather_in_backward(w);
  recompute(w, r);
  return w;
}

namespace {

/// The data script's recipe in place of the workload's: its image must be the network's input, and
/// its offloaded ops (dataset offload) become the first kernels of the step's graph, the batch fed
/// as it leaves the host (bytes, HWC where HWC2CHW is offloaded).
void apply_data_script(const RunRequest& r, workloads::Workload& w) {
  using workloads::MapOpType;
  workloads::DataRecipe data = *r.data;
  if (data.dataset.rows_per_yield < 0) data.dataset.rows_per_yield = w.batch_size;  // yields whole batches
  bool offload = false, chw = false, floats = false;
  for (const auto& op : data.maps) {
    offload = offload || op.offload;
    if (op.type == MapOpType::HWC2CHW) chw = true;
    if (op.type == MapOpType::Rescale || op.type == MapOpType::Normalize) floats = true;
  }
  const bool image = data.dataset.format != workloads::DatasetFormat::MindRecord &&
                     data.dataset.format != workloads::DatasetFormat::Generator;
  if (!image && !w.batch_inputs.empty()) {
    // A MindRecord's or generator's row: it holds the network's sample (and its other columns: a
    // label, a mask), in float32 bytes for a float input unless a Rescale or Normalize makes it so.
    const auto& x = w.graph.tensor(w.batch_inputs.front());
    std::int64_t per_sample = 1;
    for (std::size_t k = 1; k < x.shape.size(); ++k) per_sample *= x.shape[k];
    const std::int64_t values = data.dataset.height * data.dataset.width * data.dataset.channels;
    if (x.shape.size() >= 2 && values < per_sample)
      throw InputError(fmt::format("{}: a row of {}x{}x{} = {} values, but {} takes {} a sample ({}); give 'image' "
                                   "the input's shape (and the other columns' values)",
                                   r.data_where, data.dataset.height, data.dataset.width, data.dataset.channels,
                                   values, w.name, per_sample, workloads::shape_string(x.shape)));
    const bool float_input = x.dtype == workloads::DType::F32 || x.dtype == workloads::DType::F16;
    if (float_input && !floats && data.dataset.record_bytes < per_sample * 4)
      throw InputError(fmt::format("{}: a row of {} bytes holds less than the {} float32 values {} takes, and no "
                                   "Rescale or Normalize makes bytes float; give record_bytes of at least {} or add "
                                   "Rescale",
                                   r.data_where, data.dataset.record_bytes, per_sample, w.name, per_sample * 4));
  }
  if (image && !w.batch_inputs.empty()) {
    const auto& x = w.graph.tensor(w.batch_inputs.front());
    const auto o = [&] {
      workloads::DataRecipe all = data;  // the geometry with every op, offloaded or not
      for (auto& op : all.maps) op.offload = false;
      return all.host_output();
    }();
    if (x.shape.size() == 4) {
      const std::int64_t c = x.shape[1], h = x.shape[2], wd = x.shape[3];
      if (static_cast<std::int64_t>(o.height) != h || static_cast<std::int64_t>(o.width) != wd ||
          static_cast<std::int64_t>(o.channels) != c)
        throw InputError(static_cast<std::int64_t>(o.channels) != c
                             ? fmt::format("{}: the maps give {:g}x{:g}x{:g} images (height x width x channels) but {} "
                                           "takes {}x{}x{}: a dataset of {}-channel images, not {:g}",
                                           r.data_where, o.height, o.width, o.channels, w.name, h, wd, c, c, o.channels)
                             : fmt::format("{}: the maps give {:g}x{:g}x{:g} images (height x width x channels) but {} "
                                           "takes {}x{}x{}; make the last resize or crop {}x{}",
                                           r.data_where, o.height, o.width, o.channels, w.name, h, wd, c, h, wd));
      if (!chw)
        throw InputError(r.data_where + ": the maps leave the image HWC; " + w.name +
                             " takes CHW (NCHW batches): end the image's maps with HWC2CHW");
      if (!floats)
        throw InputError(r.data_where + ": the maps leave the image as bytes; " + w.name +
                             " takes float32: add Rescale or Normalize");
    }
  }
  if (offload) {
    if (w.parallel.semi_auto || !w.stages.empty() || w.whole)
      throw InputError(r.data_where + ": dataset offload with semi-automatic or pipeline parallelism is not modelled");
    if (r.functional.enabled)
      throw InputError(r.data_where + ": functional mode runs the maps on the host; drop offload");
    if (w.batch_inputs.empty() || w.graph.tensor(w.batch_inputs.front()).shape.size() != 4)
      throw InputError(r.data_where + ": dataset offload maps an image input [N, C, H, W]");
    // The batch as the host leaves it, then the offloaded ops as kernels in the script's order.
    workloads::Graph& g = w.graph;
    const workloads::TensorId x = w.batch_inputs.front();
    const workloads::Tensor xt = g.tensor(x);
    const std::int64_t n = xt.shape[0], c = xt.shape[1], h = xt.shape[2], wd = xt.shape[3];
    bool host_chw = false, host_float = false;
    for (const auto& op : data.maps) {
      if (op.offload) continue;
      host_chw = host_chw || op.type == MapOpType::HWC2CHW;
      host_float = host_float || op.type == MapOpType::Rescale || op.type == MapOpType::Normalize;
    }
    workloads::Tensor fed{xt.name + "/host", host_chw ? workloads::Shape{n, c, h, wd} : workloads::Shape{n, h, wd, c},
                          host_float ? workloads::DType::F32 : workloads::DType::I8, workloads::TensorRole::Input};
    const workloads::TensorId in = g.add_tensor(fed);
    std::vector<workloads::Op> front;
    workloads::TensorId cur = in;
    bool is_float = host_float;
    auto apply = [&](const std::string& type, const std::string& name, std::vector<workloads::TensorId> ins,
                     const workloads::OpAttrs& a) {
      front.push_back(g.make_op(type, "DatasetOffload/" + name, std::move(ins), a, workloads::Pass::Forward));
      cur = front.back().outputs.front();
    };
    auto constant = [&](const std::string& name, std::int64_t len) {
      return g.add_tensor({"DatasetOffload/" + name, {len}, workloads::DType::F32, workloads::TensorRole::Constant});
    };
    for (const auto& op : data.maps) {
      if (!op.offload || op.type == MapOpType::TypeCast) continue;
      workloads::OpAttrs a;
      if ((op.type == MapOpType::Rescale || op.type == MapOpType::Normalize) && !is_float) {
        a.dtype = workloads::DType::F32;
        apply("Cast", "Cast", {cur}, a);
        is_float = true;
      }
      const std::int64_t channels_axis_len = c;
      if (op.type == MapOpType::Rescale) {
        apply("Mul", "Rescale", {cur, constant("scale", 1)}, {});
      } else if (op.type == MapOpType::Normalize) {  // (x - mean) / std per channel, channels last while HWC
        const bool last = g.tensor(cur).shape.back() == channels_axis_len;
        const std::int64_t len = last ? channels_axis_len : 1;
        apply("Sub", "NormalizeMean", {cur, constant("mean", len)}, {});
        apply("Mul", "NormalizeScale", {cur, constant("inv_std", len)}, {});
      } else if (op.type == MapOpType::HWC2CHW) {
        a.shape = {0, 3, 1, 2};
        apply("Transpose", "HWC2CHW", {cur}, a);
      }
    }
    if (g.tensor(cur).shape != xt.shape || g.tensor(cur).dtype != xt.dtype) {
      workloads::OpAttrs a;
      a.dtype = xt.dtype;
      if (g.tensor(cur).dtype != xt.dtype) apply("Cast", "CastToInput", {cur}, a);
      if (g.tensor(cur).shape != xt.shape)
        throw InputError(r.data_where + ": the offloaded ops give " + workloads::shape_string(g.tensor(cur).shape) +
                             " where " + w.name + " takes " + workloads::shape_string(xt.shape));
    }
    // The network reads the offloaded ops' output where it read the batch.
    std::vector<workloads::Op> ops = front;
    for (auto op : g.ops()) {
      for (auto& t : op.inputs)
        if (t == x) t = cur;
      ops.push_back(std::move(op));
    }
    g.set_role(x, workloads::TensorRole::Activation);
    g.set_ops(std::move(ops));
    w.batch_inputs.front() = in;
  }
  w.data = std::move(data);
}

}  // namespace

/// The workload with its dataset: the default one, or the files in `dataset`; one shard of it.
workloads::Workload build_workload_with_data(const RunRequest& r, const SystemConfig& cfg) {
  workloads::Workload w = build_workload(r, cfg);
  if (r.data) apply_data_script(r, w);
  if (!r.dataset.empty()) {
    workloads::DatasetSpec d = runtime::load_dataset_dir(r.dataset, r.progress, r.dataset_index);
    const bool jpegs = d.format == workloads::DatasetFormat::ImageFolder &&
                       w.data.dataset.format == workloads::DatasetFormat::SyntheticJpeg;
    if (d.token_stream) {  // a sequence model's windows of the stream, its records as it reads them
      if (w.tokens_per_sample <= 0 || w.data.dataset.format != workloads::DatasetFormat::MindRecord)
        throw InputError("dataset", "dataset",
                         r.dataset + " holds a token stream (train-tokens.bin); " + w.name +
                             " is not a sequence model that reads token ids");
      workloads::DatasetSpec spec = w.data.dataset;
      spec.source = d.source;
      spec.samples = (d.samples - 1) / w.tokens_per_sample;
      spec.token_stream = true;
      if (r.eval_every > 0)
        throw InputError("eval_every", "eval_every",
                         r.dataset +
                             " is a token stream: evaluation (an image classifier's accuracy over a test "
                             "split) does not apply; train without eval_every");
      if (spec.samples < 1)
        throw InputError("dataset", "dataset",
                         r.dataset + ": fewer tokens than one sequence of " + std::to_string(w.tokens_per_sample) +
                             " and its next token");
      d = spec;
    }
    if (d.format != w.data.dataset.format && !jpegs)
      throw InputError("dataset", "dataset",
                       r.dataset + " holds " + workloads::dataset_format_name(d.format) + " files but " + w.name +
                           " reads " + workloads::dataset_format_name(w.data.dataset.format) +
                           (w.data.dataset.format == workloads::DatasetFormat::SyntheticJpeg
                                ? " (an image folder of JPEG files, or no dataset for synthesised ones)"
                                : ""));
    w.data.dataset = d;
  }
  if (!r.dataset_index.empty() && r.dataset.empty())
    throw InputError("dataset_index", "dataset_index", "an index caches an image folder's headers; give a dataset");
  if (!r.eval_dataset.empty()) {
    if (r.eval_every <= 0)
      throw InputError("eval_dataset", "eval_dataset", "an evaluation dataset is read only with eval_every > 0");
    workloads::DatasetSpec d = runtime::load_dataset_dir(r.eval_dataset, r.progress);
    if (d.format != workloads::DatasetFormat::ImageFolder ||
        w.eval_data.dataset.format != workloads::DatasetFormat::SyntheticJpeg)
      throw InputError("eval_dataset", "eval_dataset",
                       r.eval_dataset + " holds " + workloads::dataset_format_name(d.format) + " files; " + w.name +
                           (w.eval_data.dataset.format == workloads::DatasetFormat::SyntheticJpeg
                                ? " evaluates on an image folder of JPEG files"
                                : " evaluates on its dataset's test split (give no evaluation dataset)"));
    w.eval_data.dataset = d;
  }
  // This shard's samples fix the epoch: each rank reads 1/devices of the dataset (num_shards =
  // devices, shard_id = rank); evaluation is sharded the same way.
  const std::int64_t shards = w.parallel.data_shards > 0 ? w.parallel.data_shards : w.parallel.devices;
  w.data.dataset.samples /= cfg.pipeline.num_shards * shards;
  w.eval_data.dataset.samples /= cfg.pipeline.num_shards * shards;
  return w;
}


/// A device MTBF beyond this (11,400 years) is no longer a failure rate anyone measured; draws of
/// the run with failures beyond this many take more than seconds.
constexpr double kMaxMtbfHours = 1e8;
constexpr std::int64_t kMaxFaultSeeds = 1'000'000;

/// The checkpoint and failure fields of a request, each alone and with the others it needs.
static void check_checkpoint_request(const RunRequest& r) {
  if (r.checkpoint_every && *r.checkpoint_every <= 0)
    throw InputError("checkpoint_every", "checkpoint_every",
                     "must be a positive number of steps, got " + std::to_string(*r.checkpoint_every));
  if (r.checkpoint_async && !r.checkpoint_every)
    throw InputError("checkpoint_async", "checkpoint_async", "saves asynchronously only with checkpoint_every");
  if (r.device_mtbf_hours) {
    const double h = *r.device_mtbf_hours;
    if (!std::isfinite(h) || h <= 0 || h > kMaxMtbfHours)
      throw InputError("device_mtbf_hours", "device_mtbf_hours",
                       fmt::format("a device's mean time between failures in hours, above 0 and at most {:g}, got {}",
                                   kMaxMtbfHours, h));
    if (!r.checkpoint_every)
      throw InputError("device_mtbf_hours", "device_mtbf_hours",
                       "a restart resumes from the last checkpoint, whose cost the run simulates: give checkpoint_every "
                       "too");
  }
  if (r.fault_seeds) {
    if (*r.fault_seeds <= 0 || *r.fault_seeds > kMaxFaultSeeds)
      throw InputError("fault_seeds", "fault_seeds",
                       fmt::format("draws of the run with failures: from 1 to {}, got {}", kMaxFaultSeeds,
                                   *r.fault_seeds));
    if (!r.device_mtbf_hours)
      throw InputError("fault_seeds", "fault_seeds", "draws failures only with device_mtbf_hours");
  }
}

runtime::Session make_session(const RunRequest& r, const workloads::Workload& w, runtime::Strategy s) {
  if (r.steps_per_epoch && *r.steps_per_epoch <= 0)
    throw InputError("steps_per_epoch", "steps_per_epoch",
                     "must be a positive whole number, got " + std::to_string(*r.steps_per_epoch));
  runtime::Session session;
  session.strategy = s;
  session.epochs = r.epochs;
  session.sink_size = r.sink_size;
  session.steps_per_epoch = r.steps_per_epoch.value_or(w.steps_per_epoch());
  session.dataset_steps_per_epoch = w.steps_per_epoch();
  session.eval_every = r.eval_every;
  check_checkpoint_request(r);
  session.checkpoint_every = r.checkpoint_every.value_or(0);
  session.checkpoint_async = r.checkpoint_async;
  if (r.eval_every > 0) session.eval_steps = w.eval_data.dataset.samples / w.batch_size;  // drop_remainder
  if (session.steps_per_epoch <= 0)
    throw InputError("batch_size", "batch_size",
                     w.name + ": " + std::to_string(w.data.dataset.samples) + " samples make no batch of " +
                         std::to_string(w.batch_size) + "; reduce batch_size");
  session.validate();
  return session;
}


/// "data: ...; server NAME: host ..." for the report header.
std::string setting_line(const SystemConfig& cfg, const workloads::Workload& w) {
  const auto& d = w.data.dataset;
  // The execution tree's map() calls, each with its workers.
  std::string maps;
  const runtime::PipelineCosts costs(cfg.host, cfg.pipeline, w.data, w.batch_size, w.steps_per_epoch());
  for (const auto& st : costs.stages())
    if (st.kind == runtime::Stage::Kind::Map)
      maps += (maps.empty() ? "" : " > ") + st.name + " x" + std::to_string(st.workers);
  const std::string format = workloads::dataset_format_name(d.format);
  const std::string where = d.source != "synthetic"             ? format + " files in " + d.source
                            : format.rfind("synthetic", 0) == 0 ? format
                                                                : "synthetic " + format;
  return fmt::format("{}: {}; data: {}, {} samples; map calls (workers): {}; server {}: host {} cores, cache {}",
                     w.training ? "training" : "inference", w.recipe.describe(), where, d.samples,
                     maps.empty() ? "none" : maps, cfg.server.name, cfg.host.cpu_cores, cfg.pipeline.cache);
}


ordered_json recipe_json(const workloads::Recipe& r) {
  return {{"amp_level", r.amp_level},
          {"keep_batchnorm_fp32", r.has_batchnorm ? ordered_json(r.keep_batchnorm_fp32) : ordered_json(nullptr)},
          {"loss_scale", r.loss_scale},
          {"graph_kernel_fusion", r.graph_kernel_fusion},
          {"ub_fusion", r.ub_fusion},
          {"flash_attention", r.flash_attention},
          {"recompute", r.recompute},
          {"optimizer_shard", r.optimizer_shard},
          {"gradients_sharded", r.gradients_sharded},
          {"optimizer", r.optimizer}};
}

ordered_json resolved_params(const SystemConfig& cfg) {
  SystemConfig copy = cfg;
  return bind_params(copy).to_json();
}


}  // namespace ascendsim::sim
