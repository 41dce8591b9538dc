#include <cstdio>
#include <stdexcept>

#include "workloads/lenet5.h"
#include "workloads/mlp.h"
#include "workloads/mobilenet.h"
#include "workloads/resnet.h"
#include "workloads/transformer.h"
#include "workloads/workload.h"

namespace ascendsim::workloads {

std::int64_t Workload::batch_bytes() const {
  std::int64_t n = 0;
  for (auto t : batch_inputs) n += graph.tensor(t).bytes();
  return n;
}

std::vector<std::string> workload_names() {
  std::vector<std::string> names = {"lenet5"};
  for (const auto& s : resnet_specs()) names.push_back(s.name);
  names.push_back("mobilenetv2");
  names.push_back("mlp-slice");
  for (const auto& s : transformer_shapes()) names.push_back(s.name);
  names.push_back("gpt");  // gpt2-small's shape unless --layers, --hidden, ... say otherwise
  return names;
}

std::string Recipe::describe() const {
  char scale[32];
  std::snprintf(scale, sizeof scale, "%g", loss_scale);
  return "amp " + amp_level +
         (amp_level == "O2" && has_batchnorm ? (keep_batchnorm_fp32 ? ", BatchNorm fp32" : ", BatchNorm fp16") : "") +
         ", loss scale " + scale + (graph_kernel_fusion ? ", graph-kernel fusion" : "") +
         (ub_fusion ? "" : ", no UB fusion") + (flash_attention ? ", FlashAttention" : "") +
         (recompute ? ", layers recomputed" : "") +
         (optimizer_shard > 1 ? std::string(gradients_sharded ? ", optimizer state and gradients" : ", optimizer state") +
                                    " sharded over " + std::to_string(optimizer_shard) + " ranks"
                              : "") +
         (optimizer == "lars"    ? ", LARS"
          : optimizer == "lamb"  ? ", LAMB"
          : optimizer == "adamw" ? ", AdamW"
                                 : "");
}

Workload make_workload(const std::string& name, std::int64_t batch_size, const RecipeOverrides& o) {
  if (batch_size <= 0) throw std::invalid_argument("batch size must be positive, got " + std::to_string(batch_size));
  if (o.shapes_transformer() && !transformer_shape(name, o))
    throw std::invalid_argument(name +
                                " has a fixed shape: --layers, --hidden, --heads, --kv-heads, --ffn, --seq-length and --vocab "
                                "apply to the transformers (bert-base, bert-large, gpt, gpt2-small, gpt2-medium, "
                                "llama-7b)");
  if (o.flash_attention && *o.flash_attention && !transformer_shape(name, o))
    throw std::invalid_argument("--flash-attention true: " + name +
                                " has no attention; it applies to the transformers");
  if (o.optimizer && *o.optimizer != "momentum" && *o.optimizer != "lars")
    throw std::invalid_argument("optimizer '" + *o.optimizer + "': use momentum or lars");
  if (o.optimizer && *o.optimizer == "lars" && (name == "lenet5" || name == "mlp-slice"))
    throw std::invalid_argument(name +
                                " trains with its script's Momentum; LARS applies to the ResNet and "
                                "MobileNetV2 workloads");
  if (o.amp_level && *o.amp_level != "O0" && *o.amp_level != "O2" && *o.amp_level != "O3")
    throw std::invalid_argument("amp level '" + *o.amp_level + "': use O0, O2 or O3");
  if (o.loss_scale && !(*o.loss_scale >= 1 && *o.loss_scale <= 16777216))
    throw std::invalid_argument("loss scale must lie in [1, 16777216]");
  if (name == "mlp-slice") {
    if ((o.amp_level && *o.amp_level != "O0") || (o.loss_scale && *o.loss_scale != 1) || o.keep_batchnorm_fp32)
      throw std::invalid_argument("mlp-slice trains in fp32 without loss scaling (amp O0), as seed 002's script");
    Workload w = make_mlp_slice(batch_size);
    w.recipe.graph_kernel_fusion = o.graph_kernel_fusion.value_or(false);
    w.recipe.ub_fusion = o.ub_fusion.value_or(true);
    return w;
  }
  if (name == "lenet5") {
    if ((o.amp_level && *o.amp_level != "O0") || (o.loss_scale && *o.loss_scale != 1) || o.keep_batchnorm_fp32)
      throw std::invalid_argument(
          "lenet5 trains in fp32 without loss scaling (amp O0), as the seed's script; the recipe options apply to the "
          "ResNet and MobileNetV2 workloads");
    Workload w = make_lenet5(batch_size);
    w.recipe.graph_kernel_fusion = o.graph_kernel_fusion.value_or(false);
    w.recipe.ub_fusion = o.ub_fusion.value_or(true);
    return w;
  }
  if (auto shape = transformer_shape(name, o)) {
    auto set = [&](const std::optional<std::int64_t>& v, std::int64_t& field, const char* flag) {
      if (!v) return;
      if (*v <= 0) throw std::invalid_argument(std::string(flag) + " " + std::to_string(*v) + ": must be positive");
      // Past 2^31 a dimension is no model's, and the sizes made from it would overflow.
      if (*v > 2147483647)
        throw std::invalid_argument(std::string(flag) + " " + std::to_string(*v) + ": at most 2147483647");
      field = *v;
    };
    set(o.layers, shape->layers, "--layers");
    set(o.hidden, shape->hidden, "--hidden");
    set(o.heads, shape->heads, "--heads");
    set(o.ffn, shape->ffn, "--ffn");
    set(o.seq_length, shape->seq, "--seq-length");
    set(o.vocab, shape->vocab, "--vocab");
    set(o.kv_heads, shape->kv_heads, "--kv-heads");
    // The model zoo's BERT and MindFormers' GPT scripts: amp O2; a dynamic loss scale, held here at
    // 65536 (its updates are not modelled); their own optimizers (LAMB, AdamW).
    if (o.optimizer)
      throw std::invalid_argument(name + " trains with its script's " +
                                  (shape->kind == TransformerShape::Kind::Bert ? "LAMB" : "AdamW") +
                                  "; --optimizer applies to the ResNet and MobileNetV2 workloads");
    if (o.keep_batchnorm_fp32) throw std::invalid_argument(name + " has no BatchNorm (keep_batchnorm_fp32)");
    Recipe r;
    r.has_batchnorm = false;
    r.amp_level = o.amp_level.value_or("O2");
    r.loss_scale = o.loss_scale.value_or(65536);
    r.graph_kernel_fusion = o.graph_kernel_fusion.value_or(false);
    r.ub_fusion = o.ub_fusion.value_or(true);
    r.flash_attention = o.flash_attention.value_or(false);
    if (r.flash_attention && r.amp_level == "O0")
      throw std::invalid_argument(
          "--flash-attention true: the fused attention kernel runs in fp16; use --amp-level O2 or O3");
    r.optimizer = shape->kind == TransformerShape::Kind::Bert ? "lamb" : "adamw";
    return make_transformer(*shape, batch_size, r);
  }
  Recipe r;  // MindSpore's model-zoo ResNet and MobileNetV2 scripts: amp O2, BatchNorm in fp16, loss scale 1024
  r.amp_level = o.amp_level.value_or("O2");
  r.keep_batchnorm_fp32 = o.keep_batchnorm_fp32.value_or(false);
  r.loss_scale = o.loss_scale.value_or(1024);
  r.graph_kernel_fusion = o.graph_kernel_fusion.value_or(false);
  r.ub_fusion = o.ub_fusion.value_or(true);
  r.optimizer = o.optimizer.value_or("momentum");
  for (const auto& s : resnet_specs())
    if (s.name == name) return make_resnet(s, batch_size, r);
  if (name == "mobilenetv2") return make_mobilenet_v2(batch_size, r);
  std::string known;
  for (const auto& n : workload_names()) known += (known.empty() ? "" : ", ") + n;
  throw std::invalid_argument("unknown workload '" + name + "' (known: " + known + ")");
}

}  // namespace ascendsim::workloads
