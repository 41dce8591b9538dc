#include "workloads/serving.h"

#include <algorithm>
#include <stdexcept>
#include <string>
#include <tuple>

namespace ascendsim::workloads {

namespace {

using K = TransformerShape::Kind;

void check(const TransformerShape& s, const ServingLayout& l) {
  if (s.kind == K::Bert)
    throw std::invalid_argument("workload: " + s.name +
                                " is an encoder; serving generates with a decoder (gpt, "
                                "gpt2-small, gpt2-medium, llama-7b)");
  if (l.tensor_parallel < 1)
    throw std::invalid_argument("tensor_parallel: must be at least 1, got " + std::to_string(l.tensor_parallel));
  if (s.kv_heads < 0 || s.heads % s.kv() != 0)
    throw std::invalid_argument("kv_heads: " + std::to_string(s.kv_heads) + " must divide " + s.name + "'s " +
                                std::to_string(s.heads) + " query heads (each key/value head serves a group of them)");
  if (s.heads % l.tensor_parallel != 0 || s.kv() % l.tensor_parallel != 0 || s.ffn % l.tensor_parallel != 0)
    throw std::invalid_argument("tensor_parallel: " + std::to_string(l.tensor_parallel) + " ranks do not divide " +
                                s.name + "'s " + std::to_string(s.heads) + " heads" +
                                (s.kv() != s.heads ? ", " + std::to_string(s.kv()) + " key/value heads" : std::string()) +
                                " and MLP width " + std::to_string(s.ffn));
  if (l.block_size < 1)
    throw std::invalid_argument("block_size: must be at least 1 token, got " + std::to_string(l.block_size));
  if (l.kv_blocks < 1) throw std::invalid_argument("kv_blocks: must be at least 1, got " + std::to_string(l.kv_blocks));
}

std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }

}  // namespace

std::int64_t kv_block_bytes(const TransformerShape& s, const ServingLayout& l) {
  return 2 * l.block_size * s.layers * (s.kv() / l.tensor_parallel) * s.head_dim() * 2;
}

std::int64_t serving_weight_bytes(const TransformerShape& s, const ServingLayout& l) {
  const std::int64_t h = s.hidden, tp = l.tensor_parallel;
  const bool llama = s.kind == K::Llama;
  // Per layer: the fused QKV (h x (heads + 2 kv heads) widths) and the output projection (h x h),
  // split; the MLP (two or three h x ffn matrices, split), the norms; GPT-2's biases of the split
  // layers split too (and Qwen2's of the QKV). The output head is the token table when tied.
  const std::int64_t qkv = (s.heads + 2 * s.kv()) * s.head_dim();
  const std::int64_t attn = (qkv + h) * h / tp + (llama ? (s.qkv_bias ? qkv / tp : 0) : qkv / tp + h);
  const std::int64_t mlp = (llama ? 3 : 2) * h * s.ffn / tp + (llama ? 0 : s.ffn / tp + h);
  const std::int64_t norms = (llama ? 2 : 4) * h;
  const std::int64_t embed = s.vocab * h + (s.tied_embeddings ? 0 : s.vocab * h) +
                             (llama ? 0 : s.max_positions * h) + (llama ? h : 2 * h);
  return 2 * (s.layers * (attn + mlp + norms) + embed);
}

std::int64_t step_result_bytes(const TransformerShape& s, const ServingLayout& l, std::int64_t seqs) {
  return l.sample_on_device ? 4 * seqs : 2 * seqs * s.vocab;
}

bool StepShape::operator<(const StepShape& o) const {
  return std::tie(decode_seqs, decode_context, prefill_seqs, prefill_tokens, prefill_context) <
         std::tie(o.decode_seqs, o.decode_context, o.prefill_seqs, o.prefill_tokens, o.prefill_context);
}

std::string StepShape::describe() const {
  std::string d;
  if (decode_seqs > 0) d = "decode " + std::to_string(decode_seqs) + " x " + std::to_string(decode_context) + " keys";
  if (prefill_seqs > 0)
    d += (d.empty() ? "" : " + ") + std::string("prefill ") + std::to_string(prefill_seqs) + " x " +
         std::to_string(prefill_tokens) +
         (prefill_context != prefill_tokens ? " of " + std::to_string(prefill_context) + " keys" : std::string());
  return d;
}

Workload serving_step(const TransformerShape& s, const StepShape& step, const ServingLayout& l) {
  check(s, l);
  if (step.decode_seqs < 0 || step.prefill_seqs < 0 || step.seqs() < 1 ||
      (step.decode_seqs > 0 && step.decode_context < 1) ||
      (step.prefill_seqs > 0 && (step.prefill_tokens < 1 || step.prefill_context < step.prefill_tokens)))
    throw std::invalid_argument(
        "batch: a step has at least one sequence, each reading at least its own tokens' keys, "
        "got " +
        step.describe());
  const bool llama = s.kind == K::Llama;
  const std::int64_t tp = l.tensor_parallel, H = s.hidden, N = s.heads / tp, KV = s.kv() / tp, D = s.head_dim(),
                     F = s.ffn / tp;
  const std::int64_t T = step.tokens(), B = step.seqs(), V = s.vocab;
  const std::int64_t longest = std::max(step.decode_context, step.prefill_context);
  const std::int64_t max_blocks = ceil_div(longest, l.block_size);
  if (max_blocks > l.kv_blocks)
    throw std::invalid_argument("kv_blocks: a sequence of " + std::to_string(longest) + " tokens needs " +
                                std::to_string(max_blocks) + " blocks of " + std::to_string(l.block_size) +
                                "; the cache has " + std::to_string(l.kv_blocks));

  Workload w;
  w.name = s.name;
  w.description = s.description;
  w.batch_size = B;
  w.training = false;
  w.tokens_per_sample = ceil_div(T, B);
  w.recipe.amp_level = "O3";  // fp16 weights, no master copies
  w.recipe.has_batchnorm = false;
  w.optimizer = "none (inference)";
  Graph& g = w.graph;
  auto input = [&](const std::string& name, Shape shape) {
    const TensorId t = g.add_tensor({name, std::move(shape), DType::I32, TensorRole::Input});
    w.batch_inputs.push_back(t);
    return t;
  };
  const TensorId ids = input("input_ids", {T});
  const TensorId positions = input("positions", {T});
  const TensorId slots = input("slot_mapping", {T});
  const TensorId block_table = input("block_tables", {B, max_blocks});
  const TensorId context_lens = input("context_lens", {B});
  const TensorId last = step.prefill_seqs > 0 ? input("logits_indices", {B}) : -1;
  auto param = [&](const std::string& name, Shape shape) {
    return g.add_tensor({name, std::move(shape), DType::F16, TensorRole::Parameter});
  };
  auto dense = [&](const std::string& name, TensorId x, std::int64_t out, bool bias) {
    const std::int64_t in = g.tensor(x).shape[1];
    TensorId y =
        g.matmul(name + "/MatMul", x, param(name + ".weight", {out, in}), {false, true}, TensorRole::Activation);
    if (bias) y = g.bias_add(name + "/BiasAdd", y, param(name + ".bias", {out}));
    return y;
  };
  auto all_reduce = [&](const std::string& name, TensorId x) {
    if (tp == 1) return x;
    OpAttrs a;
    a.group_size = tp;
    a.group_stride = 1;
    return g.apply("AllReduce", name + "/AllReduce", {x}, a)[0];
  };
  auto layer_norm = [&](const std::string& name, TensorId x) {
    return g.apply("LayerNorm", name + "/LayerNorm", {x, param(name + ".gamma", {H}), param(name + ".beta", {H})})[0];
  };

  const TensorId embed = param("embed_tokens.weight", {V, H});
  TensorId x = g.apply("EmbeddingLookup", "embed_tokens/EmbeddingLookup", {embed, ids})[0];
  TensorId cos = -1, sin = -1;
  if (llama) {  // the rotary tables' rows at the tokens' positions
    const std::int64_t rows = std::max<std::int64_t>(s.seq, longest);
    const TensorId cos_table = g.add_tensor({"rotary.cos", {rows, D}, DType::F16, TensorRole::Constant});
    const TensorId sin_table = g.add_tensor({"rotary.sin", {rows, D}, DType::F16, TensorRole::Constant});
    cos = g.apply("EmbeddingLookup", "rotary.cos/EmbeddingLookup", {cos_table, positions})[0];
    sin = g.apply("EmbeddingLookup", "rotary.sin/EmbeddingLookup", {sin_table, positions})[0];
  } else {
    const TensorId wpe = param("embed_positions.weight", {std::max(s.max_positions, longest), H});
    x = g.add("embed_positions/Add", x,
              g.apply("EmbeddingLookup", "embed_positions/EmbeddingLookup", {wpe, positions})[0]);
  }
  TensorId residual = x, h = -1;
  if (llama) {
    h = g.apply("RmsNorm", "layers.0.input_layernorm/RmsNorm", {x, param("layers.0.input_layernorm.weight", {H})})[0];
  }
  for (std::int64_t i = 0; i < s.layers; ++i) {
    const std::string n = "layers." + std::to_string(i);
    if (!llama) h = layer_norm(n + ".ln_1", residual);
    TensorId qkv = g.reshape(n + ".qkv/Reshape", dense(n + ".qkv_proj", h, (N + 2 * KV) * D, !llama || s.qkv_bias),
                             {T, N + 2 * KV, D});
    if (llama) {
      OpAttrs ra;
      ra.count = KV;
      qkv = g.apply("ApplyRotaryPosEmb", n + ".rotary/ApplyRotaryPosEmb", {qkv, cos, sin}, ra)[0];
    }
    const TensorId k_cache =
        g.add_tensor({n + ".key_cache", {l.kv_blocks, l.block_size, KV, D}, DType::F16, TensorRole::State});
    const TensorId v_cache =
        g.add_tensor({n + ".value_cache", {l.kv_blocks, l.block_size, KV, D}, DType::F16, TensorRole::State});
    g.apply("ReshapeAndCache", n + ".attn/ReshapeAndCache", {qkv, k_cache, v_cache, slots});
    // The decode rows first, then the prompts' (one kernel each; the second writes into the first's output).
    TensorId ctx = -1;
    auto attend = [&](const std::string& part, std::int64_t seqs, std::int64_t queries, std::int64_t keys) {
      if (seqs == 0) return;
      OpAttrs pa;
      pa.shape = {seqs, queries};
      pa.count = keys;
      pa.causal = part == "prefill" && keys == queries;
      std::vector<TensorId> in = {qkv, k_cache, v_cache, block_table, context_lens};
      if (ctx >= 0) in.push_back(ctx);
      ctx = g.apply("PagedAttention", n + ".attn/PagedAttention_" + part, in, pa)[0];
    };
    attend("decode", step.decode_seqs, 1, step.decode_context);
    attend("prefill", step.prefill_seqs, step.prefill_tokens, step.prefill_context);
    TensorId o = all_reduce(n + ".o_proj", dense(n + ".o_proj", ctx, H, false));
    if (!llama) o = g.bias_add(n + ".o_proj/BiasAdd", o, param(n + ".o_proj.bias", {H}));
    TensorId m;
    if (llama) {
      const auto r = g.apply("AddRmsNorm", n + ".post_attention_layernorm/AddRmsNorm",
                             {o, residual, param(n + ".post_attention_layernorm.weight", {H})});
      residual = r[1];
      const TensorId act =
          g.apply("SwiGlu", n + ".mlp/SwiGlu", {dense(n + ".mlp.gate_up_proj", r[0], 2 * F, false)})[0];
      m = all_reduce(n + ".mlp.down_proj", dense(n + ".mlp.down_proj", act, H, false));
    } else {
      residual = g.add(n + ".attn/Add", o, residual);
      const TensorId act =
          g.apply("GeLU", n + ".mlp/GeLU", {dense(n + ".mlp.fc1", layer_norm(n + ".ln_2", residual), F, true)})[0];
      m = g.bias_add(n + ".mlp.fc2/BiasAdd", all_reduce(n + ".mlp.fc2", dense(n + ".mlp.fc2", act, H, false)),
                     param(n + ".mlp.fc2.bias", {H}));
    }
    if (llama) {
      const std::string next = i + 1 < s.layers ? "layers." + std::to_string(i + 1) + ".input_layernorm" : "norm";
      const auto r = g.apply("AddRmsNorm", next + "/AddRmsNorm", {m, residual, param(next + ".weight", {H})});
      h = r[0];
      residual = r[1];
    } else {
      residual = g.add(n + ".mlp/Add", m, residual);
    }
  }
  if (!llama) h = layer_norm("ln_f", residual);
  // The logits of each sequence's last token only (a decode step's every token).
  if (last >= 0) h = g.apply("EmbeddingLookup", "logits_indices/EmbeddingLookup", {h, last})[0];
  const TensorId head = s.tied_embeddings ? embed : param("lm_head.weight", {V, H});  // GPT-2 ties it to the embedding
  const TensorId logits = g.matmul("lm_head/MatMul", h, head, {false, true}, TensorRole::Activation);
  if (l.sample_on_device) g.apply("ArgMax", "sampler/ArgMax", {logits});

  // What the host sends per step: the inputs' int32 values, one record per sequence.
  std::int64_t values = 0;
  for (const TensorId t : w.batch_inputs) values += g.tensor(t).elements();
  const std::int64_t per_seq = ceil_div(values, B);
  w.data.dataset.format = DatasetFormat::MindRecord;
  w.data.dataset.source = "synthetic";
  w.data.dataset.samples = B * 1000000;
  w.data.dataset.height = 1;
  w.data.dataset.width = per_seq;
  w.data.dataset.channels = 1;
  w.data.dataset.record_bytes = per_seq * 4;
  w.data.dataset.classes = V;
  w.eval_data = w.data;

  w.parallel.devices = tp;
  w.parallel.devices_per_server = std::min<std::int64_t>(tp, 8);
  w.parallel.parameter_broadcast = false;
  w.parallel.tensor_parallel = tp;
  if (tp > 1) {
    w.parallel.semi_auto = true;
    w.parallel.gradient_group_size = static_cast<std::int32_t>(tp);
    w.parallel.gradient_group_stride = 1;
  }
  return w;
}

}  // namespace ascendsim::workloads
