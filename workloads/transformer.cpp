#include "workloads/transformer.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <map>
#include <set>
#include <stdexcept>

namespace ascendsim::workloads {

const std::vector<TransformerShape>& transformer_shapes() {
  using K = TransformerShape::Kind;
  // BERT: Devlin et al. 2019 (base: 12 layers, 768 hidden, 12 heads; large: 24, 1024, 16), the
  // uncased WordPiece vocabulary of 30,522, 512 positions, pretraining phase 1 at sequence 128
  // with 20 masked-LM predictions per sequence (the model zoo's run_pretrain defaults).
  // GPT-2: Radford et al. 2019 (small 12 x 768, medium 24 x 1024; 50,257 tokens, 1,024
  // positions). LLaMA-7B: Touvron et al. 2023 (32 layers, 4,096 hidden, 32 heads, SwiGLU width
  // 11,008, 32,000 tokens, sequence 2,048).
  static const std::vector<TransformerShape> shapes = {
      {"bert-base", K::Bert, 12, 768, 12, 3072, 128, 30522, 512, 20,
       "BERT-base pretraining (masked LM and next sentence), sequence 128, O2 mixed precision, LAMB", 0, true},
      {"bert-large", K::Bert, 24, 1024, 16, 4096, 128, 30522, 512, 20,
       "BERT-large pretraining (masked LM and next sentence), sequence 128, O2 mixed precision, LAMB", 0, true},
      {"gpt2-small", K::Gpt2, 12, 768, 12, 3072, 1024, 50257, 1024, 0,
       "GPT-2 small (124M), sequence 1024, O2 mixed precision, AdamW", 0, true},
      {"gpt2-medium", K::Gpt2, 24, 1024, 16, 4096, 1024, 50257, 1024, 0,
       "GPT-2 medium (355M), sequence 1024, O2 mixed precision, AdamW", 0, true},
      {"llama-7b", K::Llama, 32, 4096, 32, 11008, 2048, 32000, 0, 0,
       "LLaMA-7B-shaped decoder (RMSNorm, SwiGLU, rotary), sequence 2048, O2 mixed precision, AdamW"},
  };
  return shapes;
}

std::optional<TransformerShape> transformer_shape(const std::string& name, const RecipeOverrides& o) {
  if (o.base_shape) return *o.base_shape;
  return transformer_shape(name);
}

std::optional<TransformerShape> transformer_shape(const std::string& name) {
  // "gpt": a GPT-2 decoder of the size given (gpt2-small's unless overridden).
  const std::string preset = name == "gpt" ? "gpt2-small" : name;
  for (auto s : transformer_shapes())
    if (s.name == preset) {
      s.name = name;
      return s;
    }
  return std::nullopt;
}

namespace {

/// The layers of one transformer, with the recipe's precision: fp32 master weights cast to the
/// compute precision every step (O2), the weights that take weight decay remembered.
class Builder {
 public:
  Builder(Graph& g, const Recipe& r, std::int64_t tokens)
      : m_g(g),
        m_compute(r.amp_level == "O0" ? DType::F32 : DType::F16),
        m_master(r.amp_level == "O3" ? DType::F16 : DType::F32),
        m_tokens(tokens),
        m_flash(r.flash_attention) {}

  Graph& g() { return m_g; }
  DType compute() const { return m_compute; }
  bool flash() const { return m_flash; }

  TensorId param(const std::string& name, Shape shape, bool decayed) {
    const TensorId p = m_g.add_tensor({name, std::move(shape), m_master, TensorRole::Parameter});
    if (decayed) m_decayed.insert(p);
    return p;
  }
  /// A parameter as the compute precision sees it.
  TensorId use(const std::string& name, TensorId p) {
    return m_master == m_compute ? p : m_g.cast(name + "/Cast", p, m_compute);
  }

  /// x [tokens, in] -> [tokens, out]: MatMul with the weight [out, in] transposed, and a bias.
  TensorId dense(const std::string& name, TensorId x, std::int64_t out, bool bias = true) {
    const std::int64_t in = m_g.tensor(x).shape[1];
    const TensorId w = use(name, param(name + ".weight", {out, in}, true));
    TensorId y = m_g.matmul(name + "/MatMul", x, w, {false, true}, TensorRole::Activation);
    if (bias) y = m_g.bias_add(name + "/BiasAdd", y, use(name + "/bias", param(name + ".bias", {out}, false)));
    return y;
  }

  TensorId layer_norm(const std::string& name, TensorId x) {
    const std::int64_t h = m_g.tensor(x).shape.back();
    const TensorId gamma = use(name + "/gamma", param(name + ".gamma", {h}, false));
    const TensorId beta = use(name + "/beta", param(name + ".beta", {h}, false));
    return m_g.apply("LayerNorm", name + "/LayerNorm", {x, gamma, beta})[0];
  }

  TensorId rms_norm(const std::string& name, TensorId x) {
    const std::int64_t h = m_g.tensor(x).shape.back();
    const TensorId gamma = use(name + "/gamma", param(name + ".weight", {h}, false));
    return m_g.apply("RmsNorm", name + "/RmsNorm", {x, gamma})[0];
  }

  TensorId dropout(const std::string& name, TensorId x, double keep) {
    if (keep >= 1) return x;
    OpAttrs a;
    a.alpha = keep;
    return m_g.apply("Dropout", name + "/Dropout", {x}, a)[0];
  }

  TensorId transpose(const std::string& name, TensorId x, Shape perm) {
    OpAttrs a;
    a.shape = std::move(perm);
    return m_g.apply("Transpose", name + "/Transpose", {x}, a)[0];
  }

  TensorId unary(const std::string& type, const std::string& name, TensorId x) {
    return m_g.apply(type, name + "/" + type, {x})[0];
  }

  TensorId lookup(const std::string& name, TensorId table, TensorId ids) {
    return m_g.apply("EmbeddingLookup", name + "/EmbeddingLookup", {table, ids})[0];
  }

  const std::set<TensorId>& decayed() const { return m_decayed; }
  std::int64_t tokens() const { return m_tokens; }

 private:
  Graph& m_g;
  DType m_compute, m_master;
  std::int64_t m_tokens;
  bool m_flash;
  std::set<TensorId> m_decayed;
};

/// Self-attention on x [B*S, H] of sequences of `seq`: Q, K and V projections, heads split by
/// Reshape and Transpose, scores QK^T / sqrt(d) (a causal mask for decoders, the padding mask
/// `mask_adder` [B, 1, 1, S] for BERT), softmax, dropout, PV, the heads joined and projected.
TensorId attention(Builder& b, const TransformerShape& s, const std::string& name, TensorId x, std::int64_t batch,
                   TensorId mask_adder, TensorId cos, TensorId sin, double keep) {
  Graph& g = b.g();
  const std::int64_t h = s.hidden, nh = s.heads, nkv = s.kv(), d = s.head_dim(), n = s.seq;
  const bool bias = s.kind != TransformerShape::Kind::Llama;
  auto heads = [&](const std::string& part, std::int64_t count, bool rotate) {
    const TensorId p = b.dense(name + "." + part, x, count * d, bias || s.qkv_bias);
    TensorId y = b.transpose(name + "." + part, g.reshape(name + "." + part + "/Reshape", p, {batch, n, count, d}),
                             {0, 2, 1, 3});  // [B, heads, S, d]
    if (rotate && cos >= 0) y = g.apply("RotaryEmbedding", name + "." + part + "/RotaryEmbedding", {y, cos, sin})[0];
    return y;
  };
  TensorId q = heads("q", nh, true), k = heads("k", nkv, true), v = heads("v", nkv, false);
  // Grouped KV heads: the fused kernel reads each key and value head for its group of query heads
  // itself; the unfused attention repeats them to one per query head first (MindFormers' and
  // Megatron's repeat_kv), a copy whose gradient sums the group's.
  auto repeat = [&](const std::string& part, TensorId t) {
    if (nkv == nh || b.flash()) return t;
    const Shape shape = g.tensor(t).shape;  // [B, kv, S, d]
    const TensorId one = g.reshape(name + "." + part + "/Reshape_group", t, {shape[0], nkv, 1, shape[2] * shape[3]});
    OpAttrs a;
    a.axis = 2;
    const TensorId copies = g.apply("Concat", name + "." + part + "/RepeatKV",
                                    std::vector<TensorId>(static_cast<std::size_t>(nh / nkv), one), a)[0];
    return g.reshape(name + "." + part + "/Reshape_repeated", copies, {shape[0], nh, shape[2], shape[3]});
  };
  k = repeat("k", k);
  v = repeat("v", v);
  if (b.flash()) {  // the fused kernel: scores, mask, softmax, dropout and PV in one
    OpAttrs fa;
    fa.alpha = keep;
    fa.causal = s.kind != TransformerShape::Kind::Bert;
    std::vector<TensorId> in = {q, k, v};
    if (!fa.causal) in.push_back(mask_adder);
    const TensorId ctx = g.apply("FlashAttentionScore", name + "/FlashAttentionScore", in, fa)[0];
    const TensorId joined =
        g.reshape(name + "/Reshape_out", b.transpose(name + ".out", ctx, {0, 2, 1, 3}), {batch * n, h});
    return b.dropout(name + ".proj", b.dense(name + ".o", joined, h, bias), keep);
  }
  OpAttrs qk;
  qk.matmul = {false, true};
  TensorId scores = g.apply("BatchMatMul", name + "/BatchMatMul_qk", {q, k}, qk)[0];  // [B, heads, S, S]
  const TensorId scale = g.add_tensor({name + ".scale", {1}, b.compute(), TensorRole::Constant});
  scores = g.mul(name + "/Mul_scale", scores, scale, TensorRole::Activation);
  scores = g.add(name + "/Add_mask", scores, mask_adder);
  TensorId probs = b.dropout(name + ".attn", g.apply("Softmax", name + "/Softmax", {scores})[0], keep);
  TensorId ctx = g.apply("BatchMatMul", name + "/BatchMatMul_pv", {probs, v})[0];  // [B, heads, S, d]
  ctx = g.reshape(name + "/Reshape_out", b.transpose(name + ".out", ctx, {0, 2, 1, 3}), {batch * n, h});
  return b.dropout(name + ".proj", b.dense(name + ".o", ctx, h, bias), keep);
}

TensorId mlp(Builder& b, const TransformerShape& s, const std::string& name, TensorId x, double keep) {
  Graph& g = b.g();
  if (s.kind == TransformerShape::Kind::Llama) {  // SwiGLU: W2 (silu(W1 x) * W3 x)
    const TensorId gate = b.unary("SiLU", name + ".gate", b.dense(name + ".w1", x, s.ffn, false));
    const TensorId up = b.dense(name + ".w3", x, s.ffn, false);
    return b.dense(name + ".w2", g.apply("Mul", name + "/Mul", {gate, up})[0], s.hidden, false);
  }
  const TensorId inner = b.unary("GeLU", name + ".act", b.dense(name + ".fc1", x, s.ffn));
  return b.dropout(name + ".out", b.dense(name + ".fc2", inner, s.hidden), keep);
}

/// Global-norm clipping (clip norm 1.0, as both scripts): each gradient's square sum, their sum
/// and one scale every gradient is multiplied by.
/// The sum of `sums` by AddN kernels of at most 64 inputs, partial sums added by a further one.
TensorId add_all(Graph& g, const std::string& name, std::vector<TensorId> sums) {
  while (sums.size() > 1) {
    std::vector<TensorId> partial;
    for (std::size_t i = 0; i < sums.size(); i += 64) {
      const std::vector<TensorId> part(sums.begin() + static_cast<std::ptrdiff_t>(i),
                                       sums.begin() + static_cast<std::ptrdiff_t>(std::min(i + 64, sums.size())));
      partial.push_back(
          part.size() == 1
              ? part[0]
              : g.add_n(name + "/AddN" + std::to_string(partial.size()) + "_" + std::to_string(sums.size()), part));
    }
    sums = std::move(partial);
  }
  return sums.front();
}

void clip_by_global_norm(Graph& g, std::map<TensorId, TensorId>& grads, const OptimizerSpec& spec,
                         const std::map<TensorId, TensorId>& pieces) {
  g.set_pass(Pass::Optimizer);
  // Each gradient's square sum, added within the group its pieces span (a whole one's once): the
  // groups' sums AllReduced over them, then added.
  std::map<std::pair<std::int64_t, std::int64_t>, std::vector<TensorId>> by_group;
  for (const auto& [param, grad] : grads)
    if (!spec.norm_elsewhere.count(param))
      by_group[norm_group(spec, param, pieces.count(param) > 0)].push_back(
          g.apply("SquareSumV1", "ClipByGlobalNorm/" + g.tensor(param).name + "/SquareSumV1", {grad})[0]);
  std::vector<TensorId> totals;
  for (const auto& [group, sums] : by_group) {
    const std::string name =
        group.first > 1 ? "ClipByGlobalNorm/" + std::to_string(group.first) + "x" + std::to_string(group.second)
                        : std::string("ClipByGlobalNorm");
    totals.push_back(reduce_norm(g, name, add_all(g, name, sums), group));
  }
  TensorId total = add_all(g, "ClipByGlobalNorm/Groups", totals);
  if (spec.pipeline_stages > 1)  // the other stages' weights
    total = reduce_norm(g, "ClipByGlobalNorm/Stages", total, {spec.pipeline_stages, spec.pipeline_stride});
  const TensorId norm = g.apply("Sqrt", "ClipByGlobalNorm/Sqrt", {total})[0];
  const TensorId clip = g.add_tensor({"clip_norm", {1}, DType::F32, TensorRole::Constant});
  // MindSpore's clip_by_global_norm: scaled by clip / max(norm, clip), so only a larger norm shrinks.
  const TensorId above = g.apply("Maximum", "ClipByGlobalNorm/Maximum", {norm, clip})[0];
  const TensorId scale = g.apply("RealDiv", "ClipByGlobalNorm/RealDiv", {clip, above})[0];
  for (auto& [param, grad] : grads)
    grad = g.mul("ClipByGlobalNorm/" + g.tensor(param).name + "/Mul", grad, scale, TensorRole::Gradient);
}

}  // namespace

void append_adam_family(Graph& g, const std::map<TensorId, TensorId>& grads, const OptimizerSpec& spec) {
  g.begin_optimizer(grads);
  g.set_pass(Pass::Optimizer);
  std::map<TensorId, TensorId> update = grads;
  sum_partial_gradients(g, update, spec);
  const std::map<TensorId, TensorId> pieces = shard_gradients(g, update, spec);
  unscale_gradients(g, update, spec.loss_scale);
  if (spec.clip_global_norm) clip_by_global_norm(g, update, spec, pieces);
  const TensorId lr = g.add_tensor({"learning_rate", {1}, DType::F32, TensorRole::OptimizerState});
  // LAMB: every weight's moments and norms first, then the norms of the sharded pieces summed
  // across the shard group (consecutive collectives, fused), then the updates.
  struct Lamb {
    std::string name;
    TensorId param, target, update;
    std::vector<TensorId> norms;
  };
  std::vector<Lamb> lamb;
  for (auto& [param, grad] : update) {  // std::map: parameter creation order
    const std::string pname = g.tensor(param).name;
    const TensorId target = pieces.count(param) ? pieces.at(param) : param;  // the rank's piece, sharded
    const Shape shape = g.tensor(target).shape;                              // copies: adding tensors moves them
    const TensorId m = g.add_tensor({"adam_m." + pname, shape, DType::F32, TensorRole::OptimizerState});
    const TensorId v = g.add_tensor({"adam_v." + pname, shape, DType::F32, TensorRole::OptimizerState});
    if (spec.kind == "lamb") {
      const auto next = g.apply("LambNextMV", "Lamb/" + pname + "/LambNextMV", {target, m, v, grad});
      lamb.push_back({pname, param, target, next[2],
                      g.apply("SquareSumAll", "Lamb/" + pname + "/SquareSumAll", {target, next[2]})});
    } else {
      OpAttrs a;  // the weight decay of a decayed weight (not the norms' scales and the biases)
      a.alpha = spec.decayed.count(param) ? spec.weight_decay : 0.0;
      g.apply("AdamWeightDecay", "AdamWeightDecay/" + pname, {target, m, v, lr, grad}, a);
    }
  }
  // A piece's norms are partial: the trust ratio needs the whole weight's.
  for (auto& l : lamb)
    for (std::size_t k = 0; k < l.norms.size(); ++k)
      l.norms[k] = reduce_norm(g, "Lamb/" + l.name + "/SquareSumAll" + std::to_string(k), l.norms[k],
                               norm_group(spec, l.param, pieces.count(l.param) > 0));
  for (const auto& l : lamb)
    g.apply("LambUpdateWithLR", "Lamb/" + l.name + "/LambUpdateWithLR",
            {l.target, l.update, l.norms[0], l.norms[1], lr});
  gather_pieces(g, pieces, spec);
}

Workload make_transformer(const TransformerShape& shape, std::int64_t batch_size, const Recipe& recipe) {
  using K = TransformerShape::Kind;
  TransformerShape s = shape;
  if (s.hidden % s.heads != 0)
    throw std::invalid_argument(s.name + ": --hidden " + std::to_string(s.hidden) + " is not a multiple of the " +
                                std::to_string(s.heads) + " heads (--heads)");
  if (s.kv_heads < 0 || s.kv() > s.heads || s.heads % s.kv() != 0)
    throw std::invalid_argument(s.name + ": --kv-heads " + std::to_string(s.kv_heads) + " must divide the " +
                                std::to_string(s.heads) + " query heads (--heads): each key and value head serves "
                                "a group of them");
  if (s.kind == K::Bert && s.kv() != s.heads)
    throw std::invalid_argument(s.name + ": --kv-heads applies to the decoders; BERT has a key and value head per "
                                "query head");
  if (s.kind == K::Llama && (s.hidden / s.heads) % 2 != 0)
    throw std::invalid_argument(s.name + ": rotary embeddings rotate pairs: the head width " +
                                std::to_string(s.hidden / s.heads) + " (--hidden / --heads) must be even");
  // A longer sequence than the preset's gets a position table as long; BERT's predictions per
  // sequence follow its length as the model zoo's (20 at 128, 80 at 512).
  if (s.max_positions > 0) s.max_positions = std::max(s.max_positions, s.seq);
  if (s.kind == K::Bert) s.masked_per_seq = std::max<std::int64_t>(1, (20 * s.seq + 64) / 128);
  // A shape read from a config is described by its origin and its sizes (flags may have changed them).
  const auto preset = s.origin.empty() ? transformer_shape(s.name) : std::nullopt;
  if (!s.origin.empty() || !preset || preset->layers != s.layers || preset->hidden != s.hidden ||
      preset->heads != s.heads || preset->ffn != s.ffn || preset->seq != s.seq || preset->vocab != s.vocab ||
      preset->kv() != s.kv())
    s.description = (s.origin.empty() ? "" : s.origin + ": ") + std::to_string(s.layers) + " layers, hidden " +
                    std::to_string(s.hidden) + ", " + std::to_string(s.heads) + " heads" +
                    (s.kv() != s.heads ? " (" + std::to_string(s.kv()) + " key/value)" : std::string()) + ", MLP " + std::to_string(s.ffn) + ", sequence " +
                    std::to_string(s.seq) + ", vocabulary " + std::to_string(s.vocab) +
                    (s.origin.empty() ? "; otherwise as " + (shape.name == "gpt" ? std::string("gpt2-small") : shape.name)
                                      : std::string());
  const bool bert = s.kind == K::Bert;
  Workload w;
  w.recipe = recipe;
  w.name = s.name;
  w.description = s.description;
  w.batch_size = batch_size;
  w.tokens_per_sample = s.seq;
  // Token records (MindRecord/TFRecord) of int32 columns, each cast by a TypeCast map of its own.
  // BERT's seven: input_ids, input_mask, segment_ids (a sequence each), masked_lm_positions,
  // masked_lm_ids, masked_lm_weights (a prediction each) and next_sentence_labels; a decoder's
  // one: the sequence and the next token (S + 1), split into inputs and labels on the device.
  // Corpus size: an assumption (the run's length is usually given in steps).
  const std::int64_t columns = bert ? 7 : 1;
  const std::int64_t record_values = bert ? 3 * s.seq + 3 * s.masked_per_seq + 1 : s.seq + 1;
  w.data.dataset.format = DatasetFormat::MindRecord;
  w.data.dataset.source = "synthetic";
  w.data.dataset.samples = 1000000;
  w.data.dataset.height = 1;
  w.data.dataset.width = record_values;
  w.data.dataset.channels = 1;
  w.data.dataset.record_bytes = record_values * 4;
  w.data.dataset.classes = s.vocab;  // a token's values
  for (std::int64_t c = 0; c < columns; ++c) {
    MapOp cast{MapOpType::TypeCast};
    cast.call = c;
    w.data.maps.push_back(cast);
  }
  w.eval_data = w.data;
  w.eval_data.dataset.samples = 10000;

  Graph& g = w.graph;
  const std::int64_t n = batch_size, S = s.seq, H = s.hidden, tokens = n * S;
  Builder b(g, recipe, tokens);
  const double keep = s.kind == K::Llama ? 1.0 : 0.9;  // dropout 0.1 in BERT and GPT-2, none in LLaMA
  TensorId ids, labels = -1;
  if (bert) {
    ids = g.add_tensor({"input_ids", {n, S}, DType::I32, TensorRole::Input});
    w.batch_inputs = {ids};
  } else {  // tokens [B, S + 1]: the first S the input, the last S the labels
    const TensorId record = g.add_tensor({"input_ids", {n, S + 1}, DType::I32, TensorRole::Input});
    w.batch_inputs = {record};
    OpAttrs a;
    a.axis = 1;
    a.shape = {n, S};
    ids = g.apply("StridedSlice", "tokens/StridedSlice_inputs", {record}, a)[0];
    a.count = 1;
    labels = g.reshape("tokens/Reshape_labels", g.apply("StridedSlice", "tokens/StridedSlice_labels", {record}, a)[0],
                       {tokens});
  }

  // Embeddings: tokens (and learned positions and BERT's segments), in fp32, cast once.
  const TensorId wte = b.param(bert ? "bert.embeddings.word_embeddings" : "wte", {s.vocab, H}, true);
  TensorId x = b.lookup("embed.tokens", wte, ids);  // [B, S, H]
  TensorId mask_adder = -1, cos = -1, sin = -1;
  if (s.max_positions > 0) {
    const TensorId wpe = b.param(bert ? "bert.embeddings.position_embeddings" : "wpe", {s.max_positions, H}, true);
    const TensorId pos = g.add_tensor({"position_ids", {S}, DType::I32, TensorRole::Constant});
    x = g.add("embed/Add_positions", x, b.lookup("embed.positions", wpe, pos));
  }
  if (bert) {
    const TensorId segments = g.add_tensor({"token_type_ids", {n, S}, DType::I32, TensorRole::Input});
    const TensorId mask = g.add_tensor({"input_mask", {n, S}, DType::I32, TensorRole::Input});
    w.batch_inputs.push_back(segments);
    w.batch_inputs.push_back(mask);
    const TensorId wtt = b.param("bert.embeddings.token_type_embeddings", {2, H}, true);
    x = g.add("embed/Add_segments", x, b.lookup("embed.segments", wtt, segments));
    x = b.layer_norm("embed.norm", x);
    // The padding mask as an additive bias on the scores: (1 - mask) * -10000, [B, 1, 1, S].
    const TensorId m = g.cast("mask/Cast", g.reshape("mask/Reshape", mask, {n, 1, 1, S}), b.compute());
    const TensorId one = g.add_tensor({"one", {1}, b.compute(), TensorRole::Constant});
    const TensorId big = g.add_tensor({"mask_value", {1}, b.compute(), TensorRole::Constant});
    mask_adder = g.mul("mask/Mul", g.apply("Sub", "mask/Sub", {one, m})[0], big, TensorRole::Activation);
  } else if (!b.flash()) {  // the fused kernel masks a decoder's scores itself
    mask_adder = g.add_tensor({"causal_mask", {S, S}, b.compute(), TensorRole::Constant});
  }
  if (s.kind == K::Llama) {
    cos = g.add_tensor({"rotary.cos", {S, H / s.heads}, b.compute(), TensorRole::Constant});
    sin = g.add_tensor({"rotary.sin", {S, H / s.heads}, b.compute(), TensorRole::Constant});
  }
  if (b.compute() != g.tensor(x).dtype) x = g.cast("embed/Cast", x, b.compute());
  x = g.reshape("embed/Reshape", b.dropout("embed", x, keep), {tokens, H});

  for (std::int64_t l = 0; l < s.layers; ++l) {
    const std::string p = (bert ? "bert.encoder.layer." : "h.") + std::to_string(l);
    if (bert) {  // post-LN: x = LN(x + attn(x)); x = LN(x + mlp(x))
      x = b.layer_norm(
          p + ".attention.norm",
          g.add(p + "/Add_attention", x, attention(b, s, p + ".attention", x, n, mask_adder, cos, sin, keep)));
      x = b.layer_norm(p + ".output.norm", g.add(p + "/Add_mlp", x, mlp(b, s, p + ".mlp", x, keep)));
    } else {  // pre-LN: x += attn(norm(x)); x += mlp(norm(x))
      auto norm = [&](const std::string& name, TensorId t) {
        return s.kind == K::Llama ? b.rms_norm(name, t) : b.layer_norm(name, t);
      };
      x = g.add(p + "/Add_attention", x,
                attention(b, s, p + ".attn", norm(p + ".ln_1", x), n, mask_adder, cos, sin, keep));
      x = g.add(p + "/Add_mlp", x, mlp(b, s, p + ".mlp", norm(p + ".ln_2", x), keep));
    }
  }

  OptimizerSpec opt;
  opt.loss_scale = recipe.loss_scale;
  opt.clip_global_norm = true;
  if (bert) {
    // Masked LM on the masked positions: gather them, dense + GeLU + LayerNorm, the decoder tied to
    // the token table, a bias; next sentence from the [CLS] token: pooler dense + tanh, then 2-way.
    const std::int64_t P = s.masked_per_seq;
    const TensorId positions = g.add_tensor({"masked_lm_positions", {n * P}, DType::I32, TensorRole::Input});
    const TensorId mlm_ids = g.add_tensor({"masked_lm_ids", {n * P}, DType::I32, TensorRole::Label});
    // Fed as the script feeds it; the loss here is the mean over the predictions (the weights'
    // zeroing of padded predictions is not modelled).
    const TensorId mlm_weights = g.add_tensor({"masked_lm_weights", {n * P}, DType::F32, TensorRole::Input});
    const TensorId nsp = g.add_tensor({"next_sentence_labels", {n}, DType::I32, TensorRole::Label});
    w.batch_inputs.push_back(positions);
    w.batch_inputs.push_back(mlm_ids);
    w.batch_inputs.push_back(mlm_weights);
    w.batch_inputs.push_back(nsp);
    TensorId m = b.lookup("cls.predictions.gather", x, positions);  // [B*P, H]
    m = b.layer_norm("cls.predictions.transform.norm",
                     b.unary("GeLU", "cls.predictions.transform.act", b.dense("cls.predictions.transform", m, H)));
    TensorId logits = g.matmul("cls.predictions.decoder/MatMul", m, b.use("cls.predictions.decoder", wte),
                               {false, true}, TensorRole::Activation);
    logits = g.bias_add("cls.predictions/BiasAdd", logits,
                        b.use("cls.predictions/bias", b.param("cls.predictions.bias", {s.vocab}, false)));
    logits = g.cast("cls.predictions/CastLogits", logits, DType::F32);
    const TensorId mlm = g.sparse_softmax_cross_entropy("loss/mlm", logits, mlm_ids);
    const TensorId first =
        b.lookup("pooler.gather", x, g.add_tensor({"cls_index", {n}, DType::I32, TensorRole::Constant}));
    const TensorId pooled = b.unary("Tanh", "pooler.act", b.dense("bert.pooler", first, H));
    const TensorId nsp_logits =
        g.cast("cls.seq_relationship/Cast", b.dense("cls.seq_relationship", pooled, 2), DType::F32);
    w.loss = g.add("loss/Add", mlm, g.sparse_softmax_cross_entropy("loss/nsp", nsp_logits, nsp));
    g.set_role(w.loss, TensorRole::Loss);
    opt.kind = "lamb";
    opt.weight_decay = 0.01;
    w.optimizer = "Lamb(weight_decay=0.01), clip by global norm 1.0";
  } else {
    x = s.kind == K::Llama ? b.rms_norm("norm", x) : b.layer_norm("ln_f", x);
    const TensorId head = s.tied_embeddings ? wte : b.param("lm_head.weight", {s.vocab, H}, true);  // GPT-2 ties it
    TensorId logits = g.cast(
        "lm_head/CastLogits",
        g.matmul("lm_head/MatMul", x, b.use("lm_head", head), {false, true}, TensorRole::Activation), DType::F32);
    w.loss = g.sparse_softmax_cross_entropy("loss/SparseSoftmaxCrossEntropyWithLogits", logits, labels);
    opt.kind = "adamw";
    opt.weight_decay = 0.1;
    w.optimizer = "AdamWeightDecay(weight_decay=0.1), clip by global norm 1.0";
  }
  char scale[32];
  std::snprintf(scale, sizeof scale, "%g", recipe.loss_scale);
  w.optimizer += std::string(", loss scale ") + scale;
  opt.decayed = b.decayed();
  w.hyper = {1e-4, 0.9, opt.weight_decay};
  const TensorId sens = g.add_tensor({"loss_scale", {1}, DType::F32, TensorRole::Constant});
  w.sens = sens;
  w.optimizer_spec = opt;
  append_optimizer(g, append_backward(g, w.loss, sens), opt);
  // Functional mode's values of the small constants: the attention scores' scale 1/sqrt(d) (the
  // masks and rotary tables are computed there from their names).
  auto values = std::make_shared<std::map<std::string, std::vector<float>>>();
  for (const auto& t : g.tensors())
    if (t.role == TensorRole::Constant && t.name.size() > 6 && t.name.compare(t.name.size() - 6, 6, ".scale") == 0)
      (*values)[t.name] = {static_cast<float>(1.0 / std::sqrt(static_cast<double>(H / s.heads)))};
  w.initial_values = values;
  return w;
}

std::map<std::string, ShardStrategy> tensor_parallel_strategies(const Workload& w, std::int64_t heads,
                                                                std::int64_t kv_heads, std::int64_t ffn, std::int64_t dp,
                                                                std::int64_t tp) {
  if (tp < 1 || dp < 1) throw std::invalid_argument("at least 1");
  if (heads % tp != 0)
    throw std::invalid_argument(std::to_string(tp) + ": " + w.name + "'s " + std::to_string(heads) +
                                " attention heads do not divide among " + std::to_string(tp) + " ranks");
  if (kv_heads % tp != 0)
    throw std::invalid_argument(std::to_string(tp) + ": " + w.name + "'s " + std::to_string(kv_heads) +
                                " key/value heads do not divide among " + std::to_string(tp) +
                                " ranks (each rank holds the key and value heads of its query heads)");
  if (ffn % tp != 0)
    throw std::invalid_argument(std::to_string(tp) + ": " + w.name + "'s MLP width " + std::to_string(ffn) +
                                " does not divide among " + std::to_string(tp) + " ranks");
  auto ends = [](const std::string& name, const std::string& tail) {
    return name.size() > tail.size() && name.compare(name.size() - tail.size(), tail.size(), tail) == 0;
  };
  const ShardStrategy column{{dp, 1}, {tp, 1}}, row{{dp, tp}, {1, tp}};
  std::map<std::string, ShardStrategy> out;
  for (const Op& op : w.graph.ops()) {
    if (op.pass != Pass::Forward || op.type != "MatMul") continue;
    const std::string& n = op.name;
    if (ends(n, ".q/MatMul") || ends(n, ".k/MatMul") || ends(n, ".v/MatMul") || ends(n, ".fc1/MatMul") ||
        ends(n, ".w1/MatMul") || ends(n, ".w3/MatMul"))
      out[n] = column;
    else if (ends(n, ".o/MatMul") || ends(n, ".fc2/MatMul") || ends(n, ".w2/MatMul"))
      out[n] = row;
  }
  return out;
}

SequenceParallelStrategies sequence_parallel_strategies(const Workload& w, std::int64_t dp, std::int64_t tp) {
  const std::vector<std::int64_t> tokens{dp * tp, 1};  // [tokens, hidden]: 1/tp of a batch piece's tokens
  auto ends = [](const std::string& name, const std::string& tail) {
    return name.size() > tail.size() && name.compare(name.size() - tail.size(), tail.size(), tail) == 0;
  };
  SequenceParallelStrategies out;
  for (const Op& op : w.graph.ops()) {
    if (op.pass != Pass::Forward) continue;
    const std::string& n = op.name;
    const bool region = op.type == "LayerNorm" || op.type == "RmsNorm" || op.type == "Add" || op.type == "Dropout";
    const bool layer = !transformer_layer_of(n).empty();
    if (region && w.graph.tensor(op.outputs.at(0)).shape.size() == 2 &&
        (layer || n == "ln_f/LayerNorm" || n == "norm/RmsNorm")) {
      ShardStrategy s;  // the activations cut along the tokens, the norms' scales whole
      for (auto t : op.inputs) s.push_back(w.graph.tensor(t).shape.size() == 2 ? tokens : std::vector<std::int64_t>{1});
      out.layers[n] = s;
    } else if (n == "embed/Reshape" || ends(n, ".o/MatMul") || ends(n, ".fc2/MatMul") || ends(n, ".w2/MatMul")) {
      out.outputs[n] = {tokens};
    } else if (n == "lm_head/MatMul") {
      out.layers[n] = {{dp, 1}, {1, 1}};
    }
  }
  return out;
}

std::string transformer_layer_of(const std::string& op_name) {
  std::string name = op_name;
  if (name.rfind("Gradients/", 0) == 0) name = name.substr(10);
  for (const std::string prefix : {"h.", "bert.encoder.layer."}) {
    if (name.rfind(prefix, 0) != 0) continue;
    std::size_t i = prefix.size();
    while (i < name.size() && std::isdigit(static_cast<unsigned char>(name[i]))) ++i;
    if (i > prefix.size() && (i == name.size() || name[i] == '.' || name[i] == '/')) return name.substr(0, i);
  }
  return "";
}

std::int64_t regather_in_backward(Workload& w) {
  Graph& g = w.graph;
  const std::vector<Op> ops = g.ops();  // copies: the new gathers add tensors
  std::map<TensorId, std::size_t> gathered;  // a layer's gathered activation -> its forward AllGather
  for (std::size_t i = 0; i < ops.size(); ++i)
    if (ops[i].pass == Pass::Forward && ops[i].type == "AllGather" && !transformer_layer_of(ops[i].name).empty())
      gathered[ops[i].outputs.at(0)] = i;
  std::vector<Op> out;
  out.reserve(ops.size() + gathered.size());
  std::map<TensorId, TensorId> again;
  std::int64_t added = 0;
  for (const Op& op : ops) {
    Op copy = op;
    if (op.pass == Pass::Backward)
      for (auto& t : copy.inputs) {
        const auto it = gathered.find(t);
        if (it == gathered.end()) continue;
        if (!again.count(t)) {  // the first backward reader: gather the split input again
          const Op& f = ops[it->second];
          Op r = g.make_op(f.type, "Regather/" + f.name, f.inputs, f, Pass::Backward);
          again[t] = r.outputs.at(0);
          out.push_back(std::move(r));
          ++added;
        }
        t = again.at(t);
      }
    out.push_back(std::move(copy));
  }
  g.set_ops(std::move(out));
  return added;
}

std::int64_t recompute_layers(Workload& w) {
  Graph& g = w.graph;
  const std::vector<Op> ops = g.ops();                      // copies: recomputed ops add tensors
  std::map<std::string, std::vector<std::size_t>> forward;  // per layer, its forward ops in order
  for (std::size_t i = 0; i < ops.size(); ++i)
    if (ops[i].pass == Pass::Forward) {
      const std::string layer = transformer_layer_of(ops[i].name);
      if (!layer.empty()) forward[layer].push_back(i);
    }
  if (forward.empty()) throw std::invalid_argument(w.name + " has no transformer layers to recompute");
  std::vector<Op> out;
  out.reserve(ops.size() * 2);
  std::map<TensorId, TensorId> again;  // an activation -> its recomputed copy
  std::set<std::string> done;
  std::int64_t recomputed = 0;
  for (const Op& op : ops) {
    if (op.pass == Pass::Backward) {
      const std::string layer = transformer_layer_of(op.name);
      if (!layer.empty() && forward.count(layer) && done.insert(layer).second) {
        // The layer's forward again, from its input (kept from the forward pass) and weights.
        for (std::size_t i : forward.at(layer)) {
          const Op& f = ops[i];
          std::vector<TensorId> in = f.inputs;
          for (auto& t : in)
            if (auto it = again.find(t); it != again.end()) t = it->second;
          Op r = g.make_op(f.type, "Recompute/" + f.name, in, f, Pass::Backward);
          for (std::size_t k = 0; k < f.outputs.size(); ++k) again[f.outputs[k]] = r.outputs.at(k);
          out.push_back(std::move(r));
          ++recomputed;
        }
      }
    }
    Op copy = op;
    if (op.pass != Pass::Forward)
      for (auto& t : copy.inputs)
        if (auto it = again.find(t); it != again.end()) t = it->second;
    out.push_back(std::move(copy));
  }
  g.set_ops(std::move(out));
  return recomputed;
}

}  // namespace ascendsim::workloads
