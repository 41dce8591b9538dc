#include "sim/api.h"

#include "runtime/data_pipeline.h"

#include <algorithm>
#include <chrono>
#include <limits>
#include <map>
#include <set>
#include <sstream>
#include <unordered_map>

#include <yaml-cpp/yaml.h>

#include <fmt/format.h>

#include "aicore/event_model.h"
#include "aicpu/hccl.h"
#include "runtime/dataset_files.h"
#include "runtime/graph_compiler.h"
#include "sim/accuracy_curve.h"
#include "sim/core/error.h"
#include "sim/kernel.h"
#include "sim/simulation.h"
#include "workloads/onnx_import.h"
#include "workloads/parallel.h"
#include "workloads/pipeline.h"
#include "workloads/transformer.h"
#include "workloads/workload.h"

namespace ascendsim::sim {

using nlohmann::ordered_json;

namespace {

/// The request's recipe with the chip's defaults: a transformer's attention fused where the
/// chip's backend has the kernel. Asking for it without attention or on a chip without the kernel
/// is refused.
workloads::RecipeOverrides recipe_for(const RunRequest& r, const SystemConfig& cfg) {
  workloads::RecipeOverrides o = r.recipe;
  const bool transformer = r.model.empty() && workloads::transformer_shape(r.workload).has_value();
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
}

/// Activation recomputation, last: it rewrites the backward pass of the settled graph.
void recompute(workloads::Workload& w, const RunRequest& r) {
  if (!r.recompute) return;
  if (!workloads::transformer_shape(w.name) || !r.model.empty() || !w.training)
    throw InputError("recompute", "recompute",
                     "recomputes the layers of a built-in transformer's training (bert-base, bert-large, gpt, "
                     "gpt2-small, gpt2-medium, llama-7b), not " +
                         (r.model.empty() ? w.name : r.model) + (w.training ? "" : " in inference"));
  workloads::recompute_layers(w);
  w.recipe.recompute = true;
}

workloads::Workload build_workload(const RunRequest& r, const SystemConfig& cfg);
}  // namespace

workloads::Workload request_workload(const RunRequest& req, const SystemConfig& cfg) {
  return build_workload(req, cfg);
}

namespace {
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

/// Devices of one server for the request: its rank table's, else the server preset's.
std::int64_t devices_per_server(const RunRequest& r, const SystemConfig& cfg) {
  return r.devices_per_server > 0 ? r.devices_per_server : cfg.server.devices_per_server;
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
                     "micro-batches divide a step among pipeline stages; give pipeline_stages 2 or more");
  const std::int64_t M = r.micro_batches > 0 ? r.micro_batches : P;
  const std::string net = r.model.empty() ? r.workload : r.model;
  if (!workloads::transformer_shape(r.workload) || !r.model.empty())
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

workloads::Workload build_workload(const RunRequest& r, const SystemConfig& cfg) {
  if (r.pipeline_stages != 1 || r.micro_batches != 0) return build_pipeline(r, cfg);
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
  const auto shape = workloads::transformer_shape(w.name);
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
      c.layers = workloads::tensor_parallel_strategies(w, r.recipe.heads.value_or(shape->heads),
                                                       r.recipe.ffn.value_or(shape->ffn), dp, tp);
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
  w.whole = std::make_shared<const workloads::Workload>(whole);
  lay_out_optimizer(w, r, tp);
  recompute(w, r);
  return w;
}

/// The workload with its dataset: the default one, or the files in `dataset`; one shard of it.
workloads::Workload build_workload_with_data(const RunRequest& r, const SystemConfig& cfg) {
  workloads::Workload w = build_workload(r, cfg);
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
  if (r.eval_every > 0) session.eval_steps = w.eval_data.dataset.samples / w.batch_size;  // drop_remainder
  if (session.steps_per_epoch <= 0)
    throw InputError("batch_size", "batch_size",
                     w.name + ": " + std::to_string(w.data.dataset.samples) + " samples make no batch of " +
                         std::to_string(w.batch_size) + "; reduce batch_size");
  session.validate();
  return session;
}

void check_trace_window(const RunRequest& r) {
  if (r.trace_first_step < 0 || r.trace_last_step <= r.trace_first_step)
    throw InputError("trace_steps", "trace_steps",
                     "the traced steps [" + std::to_string(r.trace_first_step) + ", " +
                         std::to_string(r.trace_last_step) + ") are empty; give 0 <= first < last");
}

std::string failures(const std::vector<runtime::RunResult>& runs) {
  std::string out;
  for (const auto& r : runs)
    if (!r.failure.empty())
      out += fmt::format("{} failed after {} of {} steps at {:.6f} s simulated: {}\n",
                         runtime::strategy_name(r.session.strategy), r.steps_completed, r.session.steps(), r.sim_time_s,
                         r.failure);
  return out;
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

/// Semi-automatic parallelism in the report: the strategies, per device the parameters and
/// memory, every forward redistribution collective with its group, bytes and time (its backward
/// dual moves as many bytes), and the tensors' layouts.
ordered_json parallel_json(const SystemConfig& cfg, const workloads::Workload& w, const runtime::CompiledGraph& g) {
  workloads::ShardPlan p;  // pipeline stages alone: no operator is cut
  if (w.shard_plan) {
    p = *w.shard_plan;
  } else {
    for (const auto& t : w.graph.tensors())
      if (t.role == workloads::TensorRole::Parameter) p.parameters_local += t.elements();
    p.parameters_global = p.parameters_local;
  }
  ordered_json collectives = ordered_json::array();
  for (const auto& c : p.collectives) {
    const hostif::Collective kind = c.kind == "AllReduce"   ? hostif::Collective::AllReduce
                                    : c.kind == "AllGather" ? hostif::Collective::AllGather
                                    : c.kind == "AllToAll"  ? hostif::Collective::AllToAll
                                                            : hostif::Collective::ReduceScatter;
    // Rank 0's group: the span of servers and HCCS networks it covers.
    const hostif::CommGroup group{static_cast<std::int32_t>(c.group_size), static_cast<std::int32_t>(c.group_stride)};
    const std::vector<int> members = group.members(0, static_cast<int>(w.parallel.devices));
    const double s =
        aicpu::Hccl::cost(cfg.chip.hccl, kind,
                          aicpu::Hccl::span_of(cfg.chip.hccl, members, static_cast<int>(w.parallel.devices_per_server)),
                          static_cast<double>(c.bytes), cfg.chip.memory.hbm_gbps())
            .seconds;
    collectives.push_back({{"name", c.name},
                           {"kind", c.kind},
                           {"pass", c.forward ? "forward" : "backward"},
                           {"group", {{"size", c.group_size}, {"stride", c.group_stride}}},
                           {"bytes", c.bytes},
                           {"ms", 1e3 * s}});
  }
  ordered_json layouts = ordered_json::array();
  for (const auto& l : p.layouts)
    layouts.push_back({{"tensor", l.tensor},
                       {"op", l.op},
                       {"shape", l.global},
                       {"local", l.local},
                       {"cuts", l.cuts},
                       {"partial", l.partial}});
  ordered_json strategies = ordered_json::object();
  for (const auto& [layer, s] : p.strategies) strategies[layer] = s;
  const auto& m = g.memory;
  ordered_json pipeline = nullptr;
  if (w.parallel.pipeline_stages > 1) {
    const std::int64_t P = w.parallel.pipeline_stages, M = w.parallel.micro_batches;
    std::int64_t whole = 0;  // parameters: each stage's (a shared weight counted once)
    std::set<std::string> seen;
    for (const auto& s : w.stages)
      for (const auto& t : s->graph.tensors())
        if (t.role == workloads::TensorRole::Parameter && seen.insert(t.name).second) whole += t.elements();
    if (!w.shard_plan) p.parameters_global = whole;
    p.parameters_local = 0;  // stage 0's
    for (const auto& t : w.graph.tensors())
      if (t.role == workloads::TensorRole::Parameter) p.parameters_local += t.elements();
    pipeline = {{"stages", P},
                {"micro_batches", M},
                {"micro_batch", w.batch_size / M},
                {"ranks_per_stage", w.parallel.devices / P},
                {"schedule", "1F1B"},
                {"ideal_bubble_fraction", static_cast<double>(P - 1) / static_cast<double>(M + P - 1)}};
  }
  return {{"mode", w.shard_plan ? "semi-auto" : "pipeline"},
          {"devices", w.parallel.devices},
          {"data_shards", w.parallel.data_shards},
          {"tensor_parallel", w.parallel.tensor_parallel},
          {"optimizer_shard", w.optimizer_spec.shard_size},
          {"strategies", strategies},
          {"gradient_group", {{"size", w.parallel.gradient_group_size}, {"stride", w.parallel.gradient_group_stride}}},
          {"parameters", {{"whole", p.parameters_global}, {"per_device", p.parameters_local}}},
          {"device_compute_per_step_ms", 1e3 * g.device_compute_s},
          {"memory_per_device_bytes",
           {{"persistent", m.persistent_bytes},
            {"step", m.arena_bytes},
            {"queue", m.queue_buffer_bytes},
            {"input_per_batch", w.batch_bytes()}}},
          {"collectives", collectives},
          {"layouts", layouts},
          {"pipeline", pipeline}};
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
          {"optimizer", r.optimizer}};
}

ordered_json resolved_params(const SystemConfig& cfg) {
  SystemConfig copy = cfg;
  return bind_params(copy).to_json();
}

}  // namespace

bool RunOutcome::failed() const {
  return std::any_of(runs.begin(), runs.end(), [](const runtime::RunResult& r) { return !r.failure.empty(); });
}
std::string RunOutcome::failure_message() const { return failures(runs); }
ordered_json RunOutcome::report() const { return runtime::make_report(header, runs, config); }

std::string RunOutcome::per_step_csv() const {
  std::string out = "strategy,step,step_s,iteration_interval_s,fp_bp_s,tail_s\n";
  for (const auto& r : runs) {
    for (const auto& k : r.steps.kept_steps())
      out += fmt::format("{},{},{:.12g},{:.12g},{:.12g},{:.12g}\n", runtime::strategy_name(r.session.strategy), k.number,
                         k.step_s, k.interval_s, k.fp_bp_s, k.tail_s);
  }
  return out;
}

namespace {
/// See estimated_trace_bytes; `ops`: device ops of one step.
std::int64_t trace_bytes(const RunRequest& req, const runtime::CompiledGraph& g,
                         const std::vector<runtime::Session>& sessions) {
  // One span per op on the AI cores (with its arguments), one launch span per op where the host
  // launches op by op, a few dozen host, pipeline, DMA and queue events per step, and a sample of
  // the HBM's traffic per bin of the device's compute.
  // Measured on LeNet-5 and ResNet-50 traces: bytes per event in each format.
  const bool json = req.trace_format == TraceFormat::Json;
  const auto ops = static_cast<std::int64_t>(g.step_tasks.size());
  const auto hbm_samples = static_cast<std::int64_t>(g.device_compute_s * 1e12 / aicore::Hbm::kTraceBinPs) + 2;
  const std::int64_t kOpSpanBytes = json ? 150 : 60, kLaunchSpanBytes = json ? 110 : 36,
                     kHostEventsPerStep = 40 + hbm_samples, kEventBytes = json ? 105 : 30;
  // The event model: its op summary on each op span, and AI core 0's pipe tracks.
  std::int64_t pipe_spans = 0, summaries = 0;
  for (const auto& t : g.step_tasks)
    if (t.cost.timeline) {
      ++summaries;
      for (const auto& pipe : t.cost.timeline->pipes) pipe_spans += static_cast<std::int64_t>(pipe.size());
    }
  const std::int64_t kSummaryBytes = json ? 180 : 0;  // Perfetto interns a label's arguments
  std::int64_t bytes = 0;
  for (const auto& s : sessions) {
    const std::int64_t steps =
        std::max<std::int64_t>(0, std::min(req.trace_last_step, s.steps()) - req.trace_first_step);
    const bool op_by_op = s.strategy == runtime::Strategy::NonSink || s.strategy == runtime::Strategy::DataSink;
    bytes += steps * (ops * (kOpSpanBytes + (op_by_op ? kLaunchSpanBytes : 0)) + kHostEventsPerStep * kEventBytes +
                      summaries * kSummaryBytes + pipe_spans * kEventBytes);
  }
  return bytes;
}

}  // namespace

std::int64_t estimated_trace_bytes(const RunRequest& req) {
  const SystemConfig cfg = load_config(req.config);
  const workloads::Workload w = build_workload_with_data(req, cfg);
  std::vector<runtime::Session> sessions;
  for (auto s : req.strategies) sessions.push_back(make_session(req, w, s));
  return trace_bytes(req, compile_for(cfg, w), sessions);
}

RunOutcome run(const RunRequest& request) {
  RunRequest req = request;
  nlohmann::ordered_json target;  // a run to a target accuracy: its epochs from the user's curve
  if (!req.accuracy_curve.empty() || req.target_accuracy != 0) {
    if (req.accuracy_curve.empty() || req.target_accuracy == 0)
      throw InputError("target_accuracy", "target_accuracy",
                       "give both the accuracy curve (--accuracy-curve FILE) and the accuracy to reach "
                       "(--target-accuracy X)");
    const AccuracyCurve curve = load_accuracy_curve(req.accuracy_curve);
    const auto [epochs, accuracy] = epochs_to_target(curve, req.target_accuracy, req.eval_every);
    req.epochs = epochs;
    target = {{"curve", req.accuracy_curve},
              {"target_accuracy", req.target_accuracy},
              {"eval_every", req.eval_every},
              {"epochs", epochs},
              {"accuracy", accuracy}};
  }
  const SystemConfig cfg = load_config(req.config);
  const workloads::Workload w = build_workload_with_data(req, cfg);
  if (req.trace) check_trace_window(req);
  std::vector<runtime::Session> sessions;
  for (auto s : req.strategies) sessions.push_back(make_session(req, w, s));
  if (req.trace && req.trace_first_step > 0)
    for (const auto& s : sessions)
      if (req.trace_first_step >= s.steps())  // a window past the run's end: an empty trace
        throw InputError("trace_steps", "trace_steps",
                         "step " + std::to_string(req.trace_first_step + 1) + " is past the run's end: " +
                             runtime::strategy_name(s.strategy) + " runs " + std::to_string(s.steps()) +
                             " steps; give a window within 1:" + std::to_string(s.steps() + 1));

  RunOutcome out;
  out.header = {w.name,
                cfg.chip.name,
                w.batch_size,
                req.devices,
                setting_line(cfg, w),
                recipe_json(w.recipe),
                {},
                w.parallel.devices / w.parallel.devices_per_server,
                {},
                w.training ? "train" : "infer",
                target,
                cfg.server.name};
  out.config = resolved_params(cfg);
  KernelScope kernel;
  Simulation simulation;
  std::map<std::int64_t, SystemConfig> rank_cfgs;
  for (const auto& [rank, sets] : req.rank_sets) {
    if (rank < 0 || rank >= req.devices)
      throw InputError("rank_set", "rank_set",
                       "rank " + std::to_string(rank) + " is not one of the " + std::to_string(req.devices) +
                           " devices (0 to " + std::to_string(req.devices - 1) + ")");
    ConfigRequest c = req.config;
    for (const auto& s : sets) {
      if (s.rfind("host.", 0) != 0 && s.rfind("pipeline.", 0) != 0)
        throw InputError("rank_set", "rank_set",
                         "'" + s + "': a rank's own settings are its host's and pipeline's (host.*, pipeline.*)");
      c.sets.push_back(s);
    }
    rank_cfgs.emplace(rank, load_config(c));
  }
  simulation.simulate_every_rank(req.every_rank || req.trace);  // a trace has every rank's processes
  for (const auto& s : sessions) simulation.add(cfg, w, s, rank_cfgs, req.functional);
  if ((w.shard_plan || !w.stages.empty()) && simulation.size() > 0)
    out.header.parallel = parallel_json(cfg, w, simulation.system(0).compiled());
  if (simulation.size() > 0) {
    out.header.graph_passes = nlohmann::ordered_json::array();
    for (const auto& p : simulation.system(0).compiled().pass_effects)
      out.header.graph_passes.push_back({{"pass", p.name}, {"ops", p.ops}, {"hbm_bytes", p.bytes}});
  }
  if (req.trace && (req.warnings || req.trace_space) && simulation.size() > 0) {  // the systems' own compiled graph
    const std::int64_t bytes = trace_bytes(req, simulation.system(0).compiled(), sessions);
    if (req.trace_space && bytes > *req.trace_space)
      throw InputError("trace", "trace",
                       "the trace would take about " + format_bytes(static_cast<double>(bytes)) + " but its file system has " +
                           format_bytes(static_cast<double>(*req.trace_space)) +
                           " free; keep a window of steps with trace_steps A:B (e.g. trace_steps 100:120), or write "
                           "the trace where there is room");
    if (req.warnings && bytes > kTraceWarnBytes)
      *req.warnings << "warning: the trace will take about " << format_bytes(static_cast<double>(bytes))
                    << " (every device op of every traced step and run); keep a window of steps with "
                       "--trace-steps A:B, e.g. --trace-steps 100:120\n";
  }
  std::ostringstream trace_text;
  if (req.trace)
    simulation.enable_trace(req.trace_out ? *req.trace_out : trace_text, req.trace_format, req.trace_first_step,
                            req.trace_last_step);
  simulation.keep_each_step(req.per_step);
  if (req.step_trace_last > req.step_trace_first) simulation.keep_steps(req.step_trace_first, req.step_trace_last);
  simulation.set_task_runs(!req.one_wait_per_task);
  simulation.show_progress(req.progress);
  simulation.run();
  for (std::size_t i = 0; i < simulation.size(); ++i) out.runs.push_back(simulation.result(i));
  if (req.trace && !req.trace_out && !out.failed()) out.trace = trace_text.str();
  return out;
}

OpProfile profile_ops(const RunRequest& req) {
  const SystemConfig cfg = load_config(req.config);
  const workloads::Workload w = build_workload(req, cfg);
  const runtime::CompiledGraph g = compile_for(cfg, w);
  OpProfile p;
  p.aicore_model = cfg.chip.aicore.model;
  std::map<std::string, std::size_t> at;
  for (std::size_t i = 0; i < g.step_tasks.size(); ++i) {
    if (g.step_tasks[i].kind != hostif::TaskKind::AiCore) continue;  // events and collectives
    const auto& t = g.step_tasks[i];
    const double ms = t.cost.time_s * 1e3;
    const std::string scope =
        t.name.rfind("Gradients/", 0) == 0 ? "Gradients/" + t.name.substr(10) : "Default/" + t.name;
    std::vector<double> ratios;
    for (const auto& column : aicore::op_summary_ratios()) ratios.push_back(aicore::pipe_ratio(t.cost, column.second));
    p.ops.push_back({scope + "-op" + std::to_string(i), g.op_types[i], ms, 1, t.cost.blocks, t.cost.block_cycles,
                     std::move(ratios), aicore::bound_name(t.cost.bound)});
    auto it = at.find(g.op_types[i]);
    if (it == at.end()) {
      it = at.emplace(g.op_types[i], p.types.size()).first;
      p.types.push_back({g.op_types[i], 0, 0, 0});
    }
    p.types[it->second].time_ms += ms;
    ++p.types[it->second].count;
    p.step_ms += ms;
  }
  for (auto& t : p.types) t.share = p.step_ms > 0 ? t.time_ms / p.step_ms : 0;
  std::stable_sort(p.types.begin(), p.types.end(),
                   [](const OpProfile::Type& a, const OpProfile::Type& b) { return a.time_ms > b.time_ms; });
  return p;
}

AicoreModelCheck check_aicore_models(const RunRequest& req) {
  SystemConfig cfg = load_config(req.config);
  if (cfg.chip.aicore.model != "analytic")
    throw InputError("aicore.model", "aicore.model",
                     "aicore-check runs both AI-core models side by side; leave aicore.model (--aicore-model) unset");
  const workloads::Workload w = build_workload(req, cfg);
  const runtime::CompiledGraph g = compile_for(cfg, w);
  const auto event = aicore::make_event_cost_model(cfg.chip.aicore, cfg.chip.memory);
  AicoreModelCheck out;
  std::unordered_map<aicore::OpDesc, std::size_t, aicore::OpDescHash> seen;
  const auto begin = std::chrono::steady_clock::now();
  for (std::size_t i = 0; i < g.step_tasks.size(); ++i) {
    const auto& t = g.step_tasks[i];
    if (t.kind != hostif::TaskKind::AiCore) continue;
    constexpr std::size_t kRefused = std::numeric_limits<std::size_t>::max();
    auto [it, added] = seen.try_emplace(g.descs[i], out.ops.size());
    if (!added) {
      if (it->second != kRefused) ++out.ops[it->second].count;
      continue;
    }
    aicore::OpCost e;
    try {
      e = event->estimate(g.descs[i]);
    } catch (const aicore::EventModelError& err) {  // too large to simulate: listed, not compared
      out.skipped.push_back(g.op_types[i] + ": " + err.what());
      it->second = kRefused;
      continue;
    }
    out.ops.push_back({g.op_types[i], g.descs[i].to_string(), 1, t.cost.time_s * 1e6, e.time_s * 1e6,
                       aicore::bound_name(t.cost.bound), aicore::bound_name(e.bound)});
  }
  out.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
  return out;
}

std::vector<StatInfo> describe_statistics(const RunRequest& req) {
  const SystemConfig cfg = load_config(req.config);
  const workloads::Workload w = build_workload_with_data(req, cfg);
  const runtime::Session session =
      make_session(req, w, req.strategies.empty() ? runtime::Strategy::LoopSink : req.strategies.front());
  KernelScope kernel;
  Simulation simulation;
  simulation.add(cfg, w, session);
  return describe_stats(simulation.system(0));
}

namespace {

std::int64_t parse_whole(const std::string& v, const std::string& key) {
  std::size_t used = 0;
  std::int64_t x = 0;
  try {
    x = std::stoll(v, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != v.size() || v.empty()) throw InputError("values", key, "'" + v + "' is not a whole number");
  return x;
}

}  // namespace

SweepOutcome sweep(const SweepRequest& req) {
  if (req.values.empty()) throw InputError("values", "values", "give at least one value to sweep");
  const RunRequest& o = req.base;
  const std::string& param = req.param;
  const SystemConfig base = load_config(o.config);
  const bool session_param = param == "sink_size" || param == "epochs" || param == "steps_per_epoch" ||
                             param == "batch_size" || param == "devices";
  SweepOutcome out;
  out.param = param;
  out.values = req.values;
  out.config = resolved_params(base);

  // Everything is checked before anything is simulated.
  struct Point {
    std::string value;
    SystemConfig cfg;
    std::size_t workload;
    runtime::Session session;
  };
  std::vector<Point> plan;
  std::vector<workloads::Workload> workloads_by_value;
  workloads_by_value.reserve(req.values.size());
  for (const auto& v : req.values) {
    RunRequest ov = o;
    SystemConfig cfg = base;
    if (param == "sink_size")  // the same training: epochs x steps per epoch, in sinks of this size
      ov.sink_size = parse_whole(v, "sink_size");
    else if (param == "epochs")
      ov.epochs = parse_whole(v, "epochs");
    else if (param == "steps_per_epoch")
      ov.steps_per_epoch = parse_whole(v, "steps_per_epoch");
    else if (param == "batch_size")
      ov.batch_size = parse_whole(v, "batch_size");
    else if (param == "devices") {  // the same job on a cluster of this size: its epochs of the same dataset
      ov.devices = parse_whole(v, "devices");
      if (ov.devices < 1) throw InputError("values", "devices", "'" + v + "' is not a device count (1 or more)");
      if (o.devices_per_server > 0) ov.devices_per_server = std::min(o.devices_per_server, ov.devices);
      if (ov.devices == 1) ov.all_reduce_fusion.clear();
      ov.rank_sets.clear();
      for (const auto& [rank, sets] : o.rank_sets)
        if (rank < ov.devices) ov.rank_sets[rank] = sets;
    }
    if (!session_param) {
      ConfigRequest c = o.config;
      c.sets.push_back(param + "=" + v);
      cfg = load_config(c);
    }
    workloads_by_value.push_back(build_workload_with_data(ov, cfg));
    for (auto s : o.strategies) {
      runtime::Session session = make_session(ov, workloads_by_value.back(), s);
      if (param == "sink_size" && s == runtime::Strategy::LoopSink && ov.sink_size > 0) {
        // MindSpore users set epoch = total steps / sink_size: keep the total number of steps.
        const std::int64_t total = o.epochs * session.steps_per_epoch;
        session.epochs = (total + ov.sink_size - 1) / ov.sink_size;
        session.validate();
      }
      plan.push_back({v, cfg, workloads_by_value.size() - 1, session});
    }
  }
  const auto& w0 = workloads_by_value.front();
  out.header = {w0.name,
                base.chip.name,
                w0.batch_size,
                o.devices,
                setting_line(base, w0),
                recipe_json(w0.recipe),
                {},
                w0.parallel.devices / w0.parallel.devices_per_server,
                {},
                w0.training ? "train" : "infer",
                {},
                base.server.name};

  {
    KernelScope kernel;
    Simulation simulation;
    for (const auto& p : plan) simulation.add(p.cfg, workloads_by_value[p.workload], p.session);
    simulation.show_progress(o.progress);
    simulation.run();
    for (std::size_t i = 0; i < simulation.size(); ++i) out.points.push_back({plan[i].value, simulation.result(i)});
  }
  if (out.failed()) return out;

  // Break-even sink size: from there on, every larger value gains loop sink less than 1%.
  if (param == "sink_size") {
    std::vector<std::pair<std::int64_t, double>> loop;
    for (const auto& p : out.points)
      if (p.run.session.strategy == runtime::Strategy::LoopSink)
        loop.emplace_back(p.run.session.effective_sink_size(), p.run.steps.step.stats().mean_ms);
    out.break_even_sink_size = runtime::break_even_sink_size(loop);
    if (out.break_even_sink_size)
      out.conclusion =
          "loop sink gains less than 1% per step beyond sink_size " + std::to_string(*out.break_even_sink_size);
    else if (loop.size() >= 2)
      out.conclusion = "loop sink still gains 1% or more at the largest sink_size given (" +
                       std::to_string(std::max_element(loop.begin(), loop.end())->first) + "); try larger values";
  }
  return out;
}

bool SweepOutcome::failed() const {
  return std::any_of(points.begin(), points.end(), [](const runtime::SweepPoint& p) { return !p.run.failure.empty(); });
}

std::string SweepOutcome::failure_message() const {
  std::string out;
  for (const auto& p : points)
    if (!p.run.failure.empty())
      out +=
          param + "=" + p.value + ", " + runtime::strategy_name(p.run.session.strategy) + ": " + p.run.failure + "\n";
  return out;
}

ordered_json SweepOutcome::report() const {
  ordered_json rows = ordered_json::array();
  for (const auto& p : points) {
    ordered_json row;
    row["param"] = param;
    try {
      std::size_t used = 0;
      const double num = std::stod(p.value, &used);
      row["value"] = used == p.value.size() ? ordered_json(num) : ordered_json(p.value);
    } catch (const std::exception&) {
      row["value"] = p.value;
    }
    const ordered_json run = p.run.to_json();
    for (const auto& [k, v] : run.items()) row[k] = v;
    row.erase("stats");
    rows.push_back(row);
  }
  ordered_json report;
  report["workload"] = header.workload;
  report["chip"] = header.chip;
  report["batch_size"] = header.batch_size;
  report["param"] = param;
  report["values"] = values;
  report["break_even_sink_size"] = break_even_sink_size ? ordered_json(*break_even_sink_size) : ordered_json(nullptr);
  report["conclusion"] = conclusion;
  report["rows"] = rows;
  report["config"] = config;
  return report;
}

std::string SweepOutcome::table() const {
  std::string out =
      fmt::format("{} on {}, batch {}: sweep of {}\n\n", header.workload, header.chip, header.batch_size, param);
  out += fmt::format("{:>14} {:<11} {:>8} {:>12} {:>10} {:>10} {:>7} {:>10} {:>8}\n", param, "strategy", "steps",
                     "step ms mean", "median", "samples/s", "busy", "launches", "syncs");
  bool pulled_up = false;
  for (const auto& p : points) {
    const auto& r = p.run;
    const runtime::StepStats st = r.steps.step.stats();
    pulled_up = pulled_up || runtime::mean_pulled_up(st);
    out += fmt::format("{:>14} {:<11} {:>8} {:>12.4f} {:>10.4f} {:>10.0f} {:>6.1f}% {:>10} {:>8}\n", p.value,
                       runtime::strategy_name(r.session.strategy), r.steps_completed, st.mean_ms, st.p50_ms,
                       r.samples_per_s(), 100 * r.device_busy_fraction(),
                       r.interactions.op_launches + r.interactions.graph_launches, r.interactions.host_syncs);
  }
  if (pulled_up) out += std::string("\n") + runtime::kPulledUpNote;
  if (std::any_of(points.begin(), points.end(), [&](const runtime::SweepPoint& p) {
        return param == "devices" || p.run.session.eval_passes() > 0 || p.run.devices > 1 ||
               p.run.interactions.kernels_compiled > 0;
      })) {
    runtime::TextTable t(
        {param, "strategy", "time to train s", "training", "evaluation", "initialisation", "exposed comm"});
    for (const auto& p : points) {
      const runtime::TimeToTrain v = p.run.time_to_train();
      t.add({p.value, runtime::strategy_name(p.run.session.strategy), fmt::format("{:.3f}", v.total),
             fmt::format("{:.3f}", v.training), fmt::format("{:.3f}", v.evaluation),
             fmt::format("{:.3f}", v.initialisation), fmt::format("{:.3f}", v.exposed_comm)});
    }
    out += "\ntime to train, from the run's start to its stop (s):\n" + t.render();
  }
  if (!conclusion.empty()) out += "\n" + conclusion + "\n";
  return out;
}

std::string SweepOutcome::csv() const {
  std::string csv =
      "param,value,strategy,steps,sim_time_s,step_ms_mean,step_ms_p50,step_ms_p99,samples_per_s,"
      "device_busy_fraction,op_launches,graph_launches,h2d_copies,d2h_copies,host_syncs,h2d_bytes,"
      "d2h_bytes";
  for (std::size_t i = 0; i < kPhaseCount; ++i) csv += std::string(",") + phase_name(static_cast<Phase>(i)) + "_s";
  csv += "\n";
  for (const auto& p : points) {
    const auto& r = p.run;
    const auto st = r.steps.step.stats();
    const auto& io = r.interactions;
    csv += fmt::format("{},{},{},{},{:.9g},{:.9g},{:.9g},{:.9g},{:.9g},{:.9g},{},{},{},{},{},{},{}", param, p.value,
                       runtime::strategy_name(r.session.strategy), r.steps_completed, r.sim_time_s, st.mean_ms,
                       st.p50_ms, st.p99_ms, r.samples_per_s(), r.device_busy_fraction(), io.op_launches,
                       io.graph_launches, io.h2d_copies, io.d2h_copies, io.host_syncs, io.h2d_bytes, io.d2h_bytes);
    for (double b : r.breakdown_s) csv += fmt::format(",{:.9g}", b);
    csv += "\n";
  }
  return csv;
}

namespace {
/// `req` for a run of its own inside another command: no trace, progress or warnings.
RunRequest quiet(RunRequest req) {
  req.trace = false;
  req.trace_out = nullptr;
  req.progress = nullptr;
  req.warnings = nullptr;
  return req;
}
}  // namespace

/// Scaling compares with fewer devices of the same layout: a tensor-parallel group cannot shrink.
void check_scalable(const RunRequest& req) {
  if (req.pipeline_stages > 1)
    throw InputError("pipeline_stages", "pipeline_stages",
                     "scaling compares with one device, which cannot hold " + std::to_string(req.pipeline_stages) +
                         " pipeline stages; compare runs with devices of multiples of them (sweep --param devices) "
                         "instead");
  if (req.tensor_parallel > 1)
    throw InputError("tensor_parallel", "tensor_parallel",
                     "scaling compares with one device, which cannot hold a tensor-parallel group of " +
                         std::to_string(req.tensor_parallel) +
                         "; compare runs with devices of multiples of it (sweep --param devices) instead");
}

std::vector<ScalingPoint> scaling_curve(const RunRequest& req, const RunOutcome& on_n_devices) {
  if (req.devices <= 1) throw InputError("devices", "devices", "a scaling curve needs devices > 1");
  check_scalable(req);
  const std::int64_t m = std::min(devices_per_server(req, load_config(req.config)), req.devices);
  std::vector<std::int64_t> counts;
  for (std::int64_t d = 1; d < m; d *= 2) counts.push_back(d);
  for (std::int64_t d = m; d < req.devices; d *= 2) counts.push_back(d);
  counts.push_back(req.devices);
  std::vector<ScalingPoint> out;
  // Per point and strategy: the time by cause (kScalingLosses) and the run's time.
  std::vector<std::vector<std::array<double, 6>>> causes;
  std::vector<std::vector<double>> run_s;
  const std::optional<std::int64_t> steps =
      on_n_devices.runs.empty() ? req.steps_per_epoch
                                : std::optional<std::int64_t>(on_n_devices.runs.front().session.steps_per_epoch);
  for (const std::int64_t d : counts) {
    RunOutcome own;
    const RunOutcome* o = &on_n_devices;
    if (d != req.devices) {
      RunRequest r = quiet(req);
      r.devices = d;
      r.devices_per_server = req.devices_per_server > 0 ? std::min(req.devices_per_server, d) : 0;
      r.steps_per_epoch = steps;
      if (d == 1) {
        r.all_reduce_fusion.clear();
        r.devices_per_server = 0;
        r.optimizer_shard = false;  // nothing to shard on one device
      }
      r.rank_sets.clear();
      for (const auto& [rank, sets] : req.rank_sets)
        if (rank < d) r.rank_sets[rank] = sets;
      own = run(r);
      if (own.failed())
        throw RunError("the " + std::to_string(d) +
                       "-device run of the scaling curve failed: " + own.failure_message());
      o = &own;
    }
    ScalingPoint p;
    p.devices = d;
    causes.emplace_back();
    run_s.emplace_back();
    for (const auto& x : o->runs) {
      p.samples_per_s.push_back(x.samples_per_s());
      p.step_ms.push_back(x.steps.step.stats().mean_ms);
      auto phase = [&x](Phase ph) { return x.breakdown_s[static_cast<std::size_t>(ph)]; };
      const double comm = phase(Phase::Comm);
      const double least = x.rank_comm_s.empty() ? comm : *std::min_element(x.rank_comm_s.begin(), x.rank_comm_s.end());
      double host = 0;
      for (Phase ph :
           {Phase::HostData, Phase::H2D, Phase::Launch, Phase::D2H, Phase::HostLoop, Phase::WaitData, Phase::Sync})
        host += phase(ph);
      causes.back().push_back(
          {least, comm - least, host, phase(Phase::DeviceCompute), phase(Phase::Setup), phase(Phase::Eval)});
      run_s.back().push_back(x.sim_time_s);
    }
    out.push_back(std::move(p));
  }
  for (std::size_t k = 0; k < out.size(); ++k) {
    ScalingPoint& p = out[k];
    for (std::size_t i = 0; i < p.samples_per_s.size(); ++i) {
      const double base = out.front().samples_per_s.at(i);
      p.efficiency.push_back(base > 0 ? p.samples_per_s[i] / (static_cast<double>(p.devices) * base) : 0.0);
      std::array<double, 6> lost{};
      for (std::size_t c = 0; c < lost.size(); ++c)
        lost[c] = run_s[k][i] > 0 ? (causes[k][i][c] - causes[0][i][c]) / run_s[k][i] : 0.0;
      p.lost.push_back(lost);
    }
  }
  return out;
}

std::vector<double> scaling_efficiency(const RunRequest& req, const RunOutcome& on_n_devices) {
  if (req.devices <= 1) return std::vector<double>(on_n_devices.runs.size(), 1.0);
  check_scalable(req);
  RunRequest one = quiet(req);
  one.devices = 1;
  one.devices_per_server = 0;
  one.optimizer_shard = false;  // nothing to shard on one device
  one.all_reduce_fusion.clear();
  one.rank_sets.clear();
  one.steps_per_epoch = on_n_devices.runs.empty()
                            ? req.steps_per_epoch
                            : std::optional<std::int64_t>(on_n_devices.runs.front().session.steps_per_epoch);
  const RunOutcome single = run(one);
  if (single.failed()) throw RunError("the one-device run for --scaling failed: " + single.failure_message());
  std::vector<double> out;
  for (std::size_t i = 0; i < on_n_devices.runs.size(); ++i) {
    const double base = single.runs.at(i).samples_per_s();
    out.push_back(base > 0 ? on_n_devices.runs[i].samples_per_s() / (static_cast<double>(req.devices) * base) : 0.0);
  }
  return out;
}

FusionAdvice advise_fusion(const RunRequest& req, std::int64_t stride) {
  if (req.devices <= 1)
    throw InputError("devices", "devices", "fusion splits group AllReduces across devices; give devices > 1");
  if (stride < 1) throw InputError("stride", "stride", "must be a positive whole number");
  if (req.optimizer_shard || req.tensor_parallel > 1 || req.pipeline_stages > 1 || req.parallel_mode != "data") {
    const std::string key = req.optimizer_shard       ? "optimizer_shard"
                            : req.tensor_parallel > 1 ? "tensor_parallel"
                            : req.pipeline_stages > 1 ? "pipeline_stages"
                                                      : "parallel_mode";
    throw InputError(key, key,
                     "advise-fusion splits data parallelism's gradient AllReduce over every weight; run it without "
                     "sharded layouts, pipeline stages or a sharded optimizer");
  }
  FusionAdvice advice;
  const workloads::Workload w = build_workload(req, load_config(req.config));
  for (const auto& t : w.graph.tensors()) advice.gradients += t.role == workloads::TensorRole::Parameter;
  const std::int64_t n = advice.gradients;
  std::vector<std::vector<std::int64_t>> splits = {{}};
  for (std::int64_t a = stride - 1; a < n - 1; a += stride) splits.push_back({a});
  for (std::int64_t a = 4 * stride - 1; a < n - 1; a += 4 * stride)
    for (std::int64_t b = a + 4 * stride; b < n - 1; b += 4 * stride) splits.push_back({a, b});
  if (!req.all_reduce_fusion.empty() && std::find(splits.begin(), splits.end(), req.all_reduce_fusion) == splits.end())
    splits.push_back(req.all_reduce_fusion);
  for (const auto& split : splits) {
    RunRequest r = quiet(req);
    r.strategies = {runtime::Strategy::LoopSink};
    r.all_reduce_fusion = split;
    const RunOutcome out = run(r);
    if (out.failed()) throw RunError("split failed: " + out.failure_message());
    const auto& run0 = out.runs.front();
    advice.candidates.push_back({split, run0.steps.tail.stats().mean_ms, run0.steps.step.stats().mean_ms,
                                 run0.breakdown_s[static_cast<std::size_t>(Phase::Comm)]});
  }
  // The step, not the tail: what a collective overlapping the backward pass costs it through the
  // shared HBM lengthens fp_and_bp, which the tail does not see.
  std::stable_sort(advice.candidates.begin(), advice.candidates.end(), [](const auto& a, const auto& b) {
    return a.step_ms != b.step_ms ? a.step_ms < b.step_ms : a.tail_ms < b.tail_ms;
  });
  return advice;
}

std::string FusionAdvice::table(std::size_t top) const {
  runtime::TextTable t({"all_reduce_fusion", "step ms", "tail ms", "exposed comm s"});
  for (std::size_t i = 0; i < candidates.size() && i < top; ++i) {
    const auto& c = candidates[i];
    std::string split;
    for (auto v : c.split) split += (split.empty() ? "" : ",") + std::to_string(v);
    t.add({split.empty() ? std::string("(one group)") : split, fmt::format("{:.4f}", c.step_ms),
           fmt::format("{:.4f}", c.tail_ms), fmt::format("{:.4f}", c.comm_s)});
  }
  return t.render();
}

}  // namespace ascendsim::sim
