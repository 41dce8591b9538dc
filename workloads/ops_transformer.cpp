// The operators transformer training runs on Ascend's backend: batched matrix products on the
// Cube (attention's QK^T and PV), LayerNorm and RMSNorm with their gradient kernels, GeLU and
// SiLU, rotary position embeddings, embedding lookups with their scatter-add gradient, and the
// optimizers' fused update kernels (AdamWeightDecay; LAMB's LambNextMV and LambUpdateWithLR).
// Each lowers to the AI core's cost model as the kernel MindSpore's Ascend backend runs.
#include <stdexcept>

#include "workloads/op_registry.h"
#include "workloads/op_rules.h"

namespace ascendsim::workloads {

using aicore::OpDesc;
using aicore::OpKind;
using namespace rules;

namespace {

std::vector<OutputSpec> like(const Tensor& x, TensorRole role = TensorRole::Activation) {
  return {out(x.shape, x.dtype, role)};
}

/// The product of all axes but the last `keep`.
std::int64_t leading(const Shape& s, std::size_t keep) {
  std::int64_t p = 1;
  for (std::size_t k = 0; k + keep < s.size(); ++k) p *= s[k];
  return p;
}

/// A Vector kernel over `main`'s elements: `operands` full-size inputs read, `results` full-size
/// outputs written, `ops` Vector operations per element, `small` further elements read or
/// written (per-row statistics, per-column parameters).
OpDesc vector_kernel(const Tensor& main, std::int64_t operands, std::int64_t results, std::int64_t ops,
                     std::int64_t small) {
  OpDesc d = vector_op(OpKind::FusedElementwise, main, small);
  d.operands = operands;
  d.results = results;
  d.fused_ops = ops;
  return d;
}

/// y = op(a) op(b) over equal leading (batch) axes: [..., M, K] x [..., K, N] -> [..., M, N],
/// with a's last two axes swapped under transpose_a and b's under transpose_b.
std::vector<OutputSpec> batch_matmul_shape(const Graph& g, const Inputs& i, OpAttrs& a) {
  const Tensor& x = g.tensor(i.at(0));
  const Tensor& y = g.tensor(i.at(1));
  require(
      x.shape.size() >= 3 && x.shape.size() == y.shape.size(),
      "BatchMatMul needs operands of one rank, 3 or more: " + shape_string(x.shape) + " x " + shape_string(y.shape));
  const std::size_t r = x.shape.size();
  for (std::size_t k = 0; k + 2 < r; ++k)
    require(x.shape[k] == y.shape[k], "batch axes differ: " + shape_string(x.shape) + " x " + shape_string(y.shape));
  const std::int64_t m = a.matmul.transpose_a ? x.shape[r - 1] : x.shape[r - 2];
  const std::int64_t ka = a.matmul.transpose_a ? x.shape[r - 2] : x.shape[r - 1];
  const std::int64_t kb = a.matmul.transpose_b ? y.shape[r - 1] : y.shape[r - 2];
  const std::int64_t n = a.matmul.transpose_b ? y.shape[r - 2] : y.shape[r - 1];
  require(ka == kb, "inner dimensions differ: " + shape_string(x.shape) + " x " + shape_string(y.shape));
  require(x.dtype == y.dtype, "operand dtypes differ (missing Cast?)");
  Shape s(x.shape.begin(), x.shape.end() - 2);
  s.push_back(m);
  s.push_back(n);
  return {out(s, x.dtype, a.role)};
}

TensorId bmm(Graph& g, const std::string& name, TensorId a, TensorId b, bool ta, bool tb) {
  OpAttrs at;
  at.matmul = {ta, tb};
  return g.apply("BatchMatMul", name, {a, b}, at)[0];
}

}  // namespace

void register_transformer_ops(OpRegistry& r) {
  r.add(layout(OpDef{"BatchMatMul",
                     false,
                     batch_matmul_shape,
                     [](BackwardContext& b, const Op& op, TensorId dy, const std::string& gname) {
                       Graph& g = b.graph();
                       const TensorId x = op.inputs[0], y = op.inputs[1];
                       const bool ta = op.matmul.transpose_a, tb = op.matmul.transpose_b;
                       // z = op(x) op(y): dz op(y)^T is d op(x), op(x)^T dz is d op(y); each taken back through
                       // its transpose.
                       if (b.wants(x))
                         b.give(x, ta ? bmm(g, gname + "/BatchMatMul_dx", y, dy, tb, true)
                                      : bmm(g, gname + "/BatchMatMul_dx", dy, y, false, !tb));
                       if (b.wants(y))
                         b.give(y, tb ? bmm(g, gname + "/BatchMatMul_dy", dy, x, true, ta)
                                      : bmm(g, gname + "/BatchMatMul_dy", x, dy, !ta, false));
                     },
                     [](const Graph& g, const Op& op) {
                       const Shape& xs = in(g, op, 0).shape;
                       const Shape& ys = res(g, op, 0).shape;
                       OpDesc d;
                       d.kind = OpKind::MatMul;
                       d.precision = storage_precision(in(g, op, 0).dtype);
                       d.out_precision = storage_precision(res(g, op, 0).dtype);
                       d.batch = leading(ys, 2) > 1 ? leading(ys, 2) : 0;  // one product: as MatMul's
                       d.m = ys[ys.size() - 2];
                       d.n = ys[ys.size() - 1];
                       d.k = op.matmul.transpose_a ? xs[xs.size() - 2] : xs[xs.size() - 1];
                       d.transpose_a = op.matmul.transpose_a;
                       d.transpose_b = op.matmul.transpose_b;
                       return d;
                     },
                     {},
                     [](const Graph& g, const Op& op) {
                       const Shape& xs = in(g, op, 0).shape;
                       const Shape& ys = res(g, op, 0).shape;
                       return leading(ys, 2) * ys[ys.size() - 2] * ys[ys.size() - 1] *
                              (op.matmul.transpose_a ? xs[xs.size() - 2] : xs[xs.size() - 1]);
                     }},
               {Format::FracNZ, Format::FracNZ}, Format::FracNZ, true));

  // LayerNorm over the last axis: y = (x - mean) * rstd * gamma + beta, with the rows' mean and
  // 1/std kept (fp32) for the backward pass. Ascend runs the gradient as two kernels:
  // LayerNormXBackprop (dx) and LayerNormBetaGammaBackprop (dgamma, dbeta summed over the rows).
  r.add({"LayerNorm", false,
         [](const Graph& g, const Inputs& i, OpAttrs&) {
           const Tensor& x = g.tensor(i.at(0));
           require(i.size() == 3, "LayerNorm takes x, gamma and beta");
           const std::int64_t h = x.shape.back();
           for (std::size_t k = 1; k < 3; ++k)
             require(g.tensor(i[k]).shape == Shape{h}, "gamma and beta must be [" + std::to_string(h) + "]");
           Shape stat = x.shape;
           stat.back() = 1;
           return std::vector<OutputSpec>{out(x.shape, x.dtype, TensorRole::Activation),
                                          out(stat, DType::F32, TensorRole::Activation),
                                          out(stat, DType::F32, TensorRole::Activation)};
         },
         [](BackwardContext& b, const Op& op, TensorId dy, const std::string& gname) {
           Graph& g = b.graph();
           const TensorId x = op.inputs[0], mean = op.outputs[1], rstd = op.outputs[2];
           if (b.wants(x))
             b.give(x,
                    g.apply("LayerNormXBackprop", gname + "/LayerNormXBackprop", {dy, x, mean, rstd, op.inputs[1]})[0]);
           if (b.wants(op.inputs[1]) || b.wants(op.inputs[2])) {
             OpAttrs a;
             a.dtype = g.tensor(op.inputs[1]).dtype;
             const auto d =
                 g.apply("LayerNormBetaGammaBackprop", gname + "/LayerNormBetaGammaBackprop", {dy, x, mean, rstd}, a);
             b.give(op.inputs[1], d[0]);
             b.give(op.inputs[2], d[1]);
           }
         },
         [](const Graph& g, const Op& op) {
           const Tensor& x = in(g, op, 0);
           // Per element: the sum and the sum of squares, subtract, two multiplies, add; per row
           // the statistics written; gamma and beta read.
           return vector_kernel(x, 1, 1, 6, 2 * leading(x.shape, 1) + 2 * x.shape.back());
         }});
  r.add({"LayerNormXBackprop",
         false,
         [](const Graph& g, const Inputs& i, OpAttrs&) {
           require(i.size() == 5 && g.tensor(i[0]).shape == g.tensor(i[1]).shape, "dy, x, mean, rstd, gamma expected");
           return like(g.tensor(i[0]));
         },
         {},
         [](const Graph& g, const Op& op) {
           const Tensor& dy = in(g, op, 0);
           // dx = rstd * (dy*gamma - mean(dy*gamma) - x_hat * mean(dy*gamma*x_hat)): two row sums
           // and about ten operations per element.
           return vector_kernel(dy, 2, 1, 10, 2 * leading(dy.shape, 1) + dy.shape.back());
         }});
  r.add({"LayerNormBetaGammaBackprop",
         false,
         [](const Graph& g, const Inputs& i, OpAttrs& a) {
           require(i.size() == 4 && g.tensor(i[0]).shape == g.tensor(i[1]).shape, "dy, x, mean, rstd expected");
           const std::int64_t h = g.tensor(i[0]).shape.back();
           return std::vector<OutputSpec>{out({h}, a.dtype, TensorRole::Gradient),
                                          out({h}, a.dtype, TensorRole::Gradient)};
         },
         {},
         [](const Graph& g, const Op& op) {
           const Tensor& dy = in(g, op, 0);
           // dgamma = sum(dy * x_hat), dbeta = sum(dy) over the rows.
           return vector_kernel(dy, 2, 0, 5, 2 * leading(dy.shape, 1) + 2 * dy.shape.back());
         }});

  // RMSNorm (LLaMA): y = x * rsqrt(mean(x^2) + eps) * gamma; its gradient in one kernel, dx and
  // dgamma (summed over the rows), as Ascend's RmsNormGrad.
  r.add({"RmsNorm", false,
         [](const Graph& g, const Inputs& i, OpAttrs&) {
           const Tensor& x = g.tensor(i.at(0));
           require(i.size() == 2 && g.tensor(i[1]).shape == Shape{x.shape.back()}, "RmsNorm takes x and gamma [H]");
           Shape stat = x.shape;
           stat.back() = 1;
           return std::vector<OutputSpec>{out(x.shape, x.dtype, TensorRole::Activation),
                                          out(stat, DType::F32, TensorRole::Activation)};
         },
         [](BackwardContext& b, const Op& op, TensorId dy, const std::string& gname) {
           OpAttrs a;
           a.dtype = b.graph().tensor(op.inputs[1]).dtype;
           const auto d = b.graph().apply("RmsNormGrad", gname + "/RmsNormGrad",
                                          {dy, op.inputs[0], op.outputs[1], op.inputs[1]}, a);
           b.give(op.inputs[0], d[0]);
           b.give(op.inputs[1], d[1]);
         },
         [](const Graph& g, const Op& op) {
           const Tensor& x = in(g, op, 0);
           return vector_kernel(x, 1, 1, 4, leading(x.shape, 1) + x.shape.back());  // square, sum, two multiplies
         }});
  r.add({"RmsNormGrad",
         false,
         [](const Graph& g, const Inputs& i, OpAttrs& a) {
           require(i.size() == 4 && g.tensor(i[0]).shape == g.tensor(i[1]).shape, "dy, x, rstd, gamma expected");
           const Tensor& dy = g.tensor(i[0]);
           return std::vector<OutputSpec>{out(dy.shape, dy.dtype, TensorRole::Activation),
                                          out({dy.shape.back()}, a.dtype, TensorRole::Gradient)};
         },
         {},
         [](const Graph& g, const Op& op) {
           const Tensor& dy = in(g, op, 0);
           return vector_kernel(dy, 2, 1, 8, leading(dy.shape, 1) + 2 * dy.shape.back());
         }});

  // Activations: GeLU (the tanh form BERT and GPT-2 use: a cube, multiply-adds and a tanh
  // through exp and a reciprocal) and SiLU (x * sigmoid(x), SwiGLU's gate).
  auto unary = [](const std::string& name, std::int64_t ops, const std::string& grad) {
    return OpDef{name, false, [](const Graph& g, const Inputs& i, OpAttrs&) { return like(g.tensor(i.at(0))); },
                 [grad](BackwardContext& b, const Op& op, TensorId dy, const std::string& gname) {
                   b.give(op.inputs[0], b.graph().apply(grad, gname + "/" + grad, {dy, op.inputs[0]})[0]);
                 },
                 [ops](const Graph& g, const Op& op) { return vector_kernel(in(g, op, 0), 1, 1, ops, 0); }};
  };
  auto gradient = [](const std::string& name, std::int64_t ops) {
    return OpDef{name,
                 false,
                 [](const Graph& g, const Inputs& i, OpAttrs&) {
                   require(i.size() == 2 && g.tensor(i[0]).shape == g.tensor(i[1]).shape, "dy and x differ");
                   return like(g.tensor(i[0]));
                 },
                 {},
                 [ops](const Graph& g, const Op& op) { return vector_kernel(in(g, op, 0), 2, 1, ops, 0); }};
  };
  r.add(unary("GeLU", 8, "GeLUGrad"));
  r.add(gradient("GeLUGrad", 12));
  r.add(unary("SiLU", 5, "SiLUGrad"));
  r.add(gradient("SiLUGrad", 7));
  r.add(unary("Tanh", 5, "TanhGrad"));
  r.add(gradient("TanhGrad", 3));
  // Erf (an exported exact GeLU: x/2 (1 + erf(x/sqrt 2))): a polynomial and an exponential;
  // its gradient dy 2/sqrt(pi) exp(-x^2).
  r.add(unary("Erf", 10, "ErfGrad"));
  r.add(gradient("ErfGrad", 5));

  // Rotary position embedding on [..., S, D]: x * cos + rotate_half(x) * sin with [S, D] tables;
  // its gradient is the rotation back (the same kernel with -sin).
  r.add(
      {"RotaryEmbedding", false,
       [](const Graph& g, const Inputs& i, OpAttrs&) {
         const Tensor& x = g.tensor(i.at(0));
         require(i.size() == 3 && x.shape.size() >= 2, "x [..., S, D], cos and sin [S, D] expected");
         const Shape table{x.shape[x.shape.size() - 2], x.shape.back()};
         require(g.tensor(i[1]).shape == table && g.tensor(i[2]).shape == table,
                 "cos and sin must be " + shape_string(table));
         return like(x);
       },
       [](BackwardContext& b, const Op& op, TensorId dy, const std::string& gname) {
         b.give(op.inputs[0], b.graph().apply("RotaryEmbeddingGrad", gname + "/RotaryEmbeddingGrad",
                                              {dy, op.inputs[1], op.inputs[2]})[0]);
       },
       [](const Graph& g, const Op& op) { return vector_kernel(in(g, op, 0), 1, 1, 4, 2 * in(g, op, 1).elements()); }});
  r.add(
      {"RotaryEmbeddingGrad",
       false,
       [](const Graph& g, const Inputs& i, OpAttrs&) { return like(g.tensor(i.at(0))); },
       {},
       [](const Graph& g, const Op& op) { return vector_kernel(in(g, op, 0), 1, 1, 4, 2 * in(g, op, 1).elements()); }});

  // Fused attention (FlashAttentionScore, CANN's kernel on Ascend 910B): q, k, v [B, N, S, D]
  // (and BERT's additive padding mask) -> the context [B, N, S, D] and the rows' softmax max and
  // sum [B, N, S, 8] (fp32, as CANN keeps them) for the gradient, which recomputes the scores.
  // Dropout (attrs.alpha: keep probability) happens inside; `causal`: a decoder's mask.
  auto attention_desc = [](const Graph& g, const Op& op, aicore::OpKind kind) {
    const Shape& q = in(g, op, 0).shape;
    OpDesc d;
    d.kind = kind;
    d.precision = d.out_precision = storage_precision(in(g, op, 0).dtype);
    d.batch = q[0] * q[1];
    d.m = q[2];
    d.n = in(g, op, 1).shape[2];
    d.k = q[3];
    d.causal = op.causal;
    d.group = q[1] / in(g, op, 1).shape[1];  // query heads per key/value head
    return d;
  };
  r.add(layout(OpDef{"FlashAttentionScore",
                     false,
                     [](const Graph& g, const Inputs& i, OpAttrs& a) {
                       require(i.size() == 3 || i.size() == 4, "q, k, v and an optional mask expected");
                       const Tensor& q = g.tensor(i[0]);
                       const Tensor& k = g.tensor(i[1]);
                       require(q.shape.size() == 4 && k.shape == g.tensor(i[2]).shape && k.shape.size() == 4 &&
                                   k.shape[0] == q.shape[0] && k.shape[1] >= 1 && q.shape[1] % k.shape[1] == 0 &&
                                   k.shape[3] == q.shape[3],
                               "q [B, N, Sq, D], k and v [B, Nkv, Skv, D] (Nkv dividing N) expected");
                       require(a.alpha > 0 && a.alpha <= 1, "keep probability must lie in (0, 1]");
                       Shape stat = q.shape;
                       stat.back() = 8;
                       return std::vector<OutputSpec>{out(q.shape, q.dtype, TensorRole::Activation),
                                                      out(stat, DType::F32, TensorRole::Activation),
                                                      out(stat, DType::F32, TensorRole::Activation)};
                     },
                     [](BackwardContext& b, const Op& op, TensorId dy, const std::string& gname) {
                       std::vector<TensorId> in = {op.inputs[0],  op.inputs[1],  op.inputs[2], dy,
                                                   op.outputs[0], op.outputs[1], op.outputs[2]};
                       if (op.inputs.size() == 4) in.push_back(op.inputs[3]);
                       const auto d =
                           b.graph().apply("FlashAttentionScoreGrad", gname + "/FlashAttentionScoreGrad", in, op);
                       for (std::size_t k = 0; k < 3; ++k) b.give(op.inputs[k], d[k]);
                     },
                     [attention_desc](const Graph& g, const Op& op) {
                       return attention_desc(g, op, aicore::OpKind::FlashAttention);
                     },
                     {},
                     [](const Graph& g, const Op& op) {  // counted as the unfused QK^T and PV are
                       const Shape& q = in(g, op, 0).shape;
                       return 2 * q[0] * q[1] * q[2] * in(g, op, 1).shape[2] * q[3];
                     }},
               {Format::ND, Format::ND, Format::ND, Format::ND}, Format::ND));
  r.add(layout(OpDef{"FlashAttentionScoreGrad",
                     false,
                     [](const Graph& g, const Inputs& i, OpAttrs&) {
                       require(i.size() >= 7, "q, k, v, dy, the context and its row statistics expected");
                       std::vector<OutputSpec> o;
                       for (std::size_t k = 0; k < 3; ++k)
                         o.push_back(out(g.tensor(i[k]).shape, g.tensor(i[k]).dtype, TensorRole::Activation));
                       return o;
                     },
                     {},
                     [attention_desc](const Graph& g, const Op& op) {
                       return attention_desc(g, op, aicore::OpKind::FlashAttentionGrad);
                     }},
               {Format::ND, Format::ND, Format::ND, Format::ND, Format::ND}, Format::ND));

  // Serving (workloads/serving.h), the kernels vLLM's Ascend backend runs a step with. The
  // attention's queries, keys and values come fused from one projection: qkv [T, N + 2 Nkv, D],
  // the first N heads the queries, then the Nkv keys, then the Nkv values (T tokens, heads of
  // width D; Nkv = N but for grouped-query attention).
  //
  // ApplyRotaryPosEmb: the rotary embedding of the queries and keys in place, from the [T, D]
  // cos and sin rows of the tokens' positions; `count` the key heads (0: N, a third of qkv's).
  r.add({"ApplyRotaryPosEmb",
         false,
         [](const Graph& g, const Inputs& i, OpAttrs& a) {
           require(i.size() == 3, "qkv, cos and sin expected");
           const Tensor& x = g.tensor(i[0]);
           require(x.shape.size() == 3 && (a.count > 0 ? x.shape[1] > 2 * a.count : x.shape[1] % 3 == 0),
                   "qkv [T, N + 2 Nkv, D] expected");
           const Shape table{x.shape[0], x.shape[2]};
           require(g.tensor(i[1]).shape == table && g.tensor(i[2]).shape == table,
                   "cos and sin must be " + shape_string(table));
           return std::vector<OutputSpec>{OutputSpec::alias(0)};
         },
         {},
         [](const Graph& g, const Op& op) {
           OpDesc d = vector_kernel(in(g, op, 0), 1, 1, 4, 2 * in(g, op, 1).elements());
           const std::int64_t heads = in(g, op, 0).shape[1], kv = op.count > 0 ? op.count : heads / 3;
           d.elements = d.elements / heads * (heads - kv);  // the queries and keys
           return d;
         }});
  // ReshapeAndCache: the keys and values of qkv written into the paged caches [blocks,
  // block_size, N, D] (updated in place) at the tokens' slots [T] (int32: block x block_size +
  // offset).
  r.add({"ReshapeAndCache",
         false,
         [](const Graph& g, const Inputs& i, OpAttrs&) {
           require(i.size() == 4, "qkv, the key cache, the value cache and the slots expected");
           const Tensor& x = g.tensor(i[0]);
           const Tensor& kc = g.tensor(i[1]);
           require(x.shape.size() == 3, "qkv [T, N + 2 Nkv, D] expected");
           require(kc.shape.size() == 4 && kc.shape == g.tensor(i[2]).shape && kc.shape[2] >= 1 &&
                       x.shape[1] > 2 * kc.shape[2] && (x.shape[1] - 2 * kc.shape[2]) % kc.shape[2] == 0 &&
                       kc.shape[3] == x.shape[2],
                   "caches [blocks, block_size, Nkv, D] of qkv's key/value heads expected");
           require(g.tensor(i[3]).dtype == DType::I32 && g.tensor(i[3]).shape == Shape{x.shape[0]},
                   "int32 slots [T] expected");
           return std::vector<OutputSpec>{OutputSpec::alias(1), OutputSpec::alias(2)};
         },
         {},
         [](const Graph& g, const Op& op) {
           OpDesc d = vector_kernel(in(g, op, 0), 1, 1, 1, in(g, op, 3).elements());
           // the keys and values: read, and written at their slots
           d.elements = d.elements / in(g, op, 0).shape[1] * 2 * in(g, op, 1).shape[2];
           return d;
         }});
  // PagedAttention: the queries of `shape` = {B, Sq} sequences (B x Sq of qkv's rows; a step's
  // decode rows come first, its prompts' after them) against each sequence's keys and values, read from the cache
  // blocks its row of the block table [B', max_blocks] lists (int32), as many as its context length [B'] -> the context
  // [T, N * D]; a sixth input, the context another PagedAttention wrote, is updated in place (a step with decode and
  // prefill parts). `count`: the mean keys a sequence reads; `causal`: fresh prompts (count == Sq), each query seeing
  // the keys up to its own (FlashAttention-style prefill); else each query sees all its sequence's keys (decode: one
  // query; a prompt's later chunk). Timed as the fused attention kernel over B x N (sequence,
  // head) pairs, the keys streamed from HBM tile by tile.
  r.add(layout(OpDef{"PagedAttention",
                     false,
                     [](const Graph& g, const Inputs& i, OpAttrs& a) {
                       require(i.size() == 5 || i.size() == 6,
                               "qkv, the caches, the block table, the context lengths and an optional output expected");
                       const Tensor& x = g.tensor(i[0]);
                       const Tensor& table = g.tensor(i[3]);
                       const std::int64_t kv = g.tensor(i[1]).shape.size() == 4 ? g.tensor(i[1]).shape[2] : 0;
                       require(x.shape.size() == 3 && kv >= 1 && x.shape[1] > 2 * kv &&
                                   (x.shape[1] - 2 * kv) % kv == 0,
                               "qkv [T, N + 2 Nkv, D] and caches [blocks, block_size, Nkv, D] expected");
                       require(table.shape.size() == 2 && table.dtype == DType::I32,
                               "an int32 block table [B, max_blocks] expected");
                       require(g.tensor(i[4]).shape == Shape{table.shape[0]}, "context lengths [B] expected");
                       require(
                           a.shape.size() == 2 && a.shape[0] >= 1 && a.shape[1] >= 1 && a.shape[0] <= table.shape[0] &&
                               a.shape[0] * a.shape[1] <= x.shape[0],
                           "shape {sequences, queries each} within the block table's rows and qkv's tokens expected");
                       require(a.count >= a.shape[1] || !a.causal, "a fresh prompt's queries see as many keys");
                       require(a.count >= 1 && a.count <= table.shape[1] * g.tensor(i[1]).shape.at(1),
                               "a sequence reads from 1 key to what its blocks hold");
                       const Shape o{x.shape[0], (x.shape[1] - 2 * kv) * x.shape[2]};
                       if (i.size() == 6) {
                         require(g.tensor(i[5]).shape == o, "the output to update must be " + shape_string(o));
                         return std::vector<OutputSpec>{OutputSpec::alias(5)};
                       }
                       return std::vector<OutputSpec>{out(o, x.dtype, TensorRole::Activation)};
                     },
                     {},
                     [](const Graph& g, const Op& op) {
                       const Tensor& x = in(g, op, 0);
                       OpDesc d;
                       d.kind = aicore::OpKind::FlashAttention;
                       d.precision = d.out_precision = storage_precision(x.dtype);
                       const std::int64_t kv = in(g, op, 1).shape[2], heads = x.shape[1] - 2 * kv;
                       d.batch = op.shape[0] * heads;
                       d.m = op.shape[1];
                       d.n = op.count;
                       d.k = x.shape[2];
                       d.causal = op.causal;
                       d.group = heads / kv;
                       return d;
                     },
                     {},
                     [](const Graph& g, const Op& op) {  // QK^T and PV over the keys each query sees
                       const Tensor& x = in(g, op, 0);
                       const std::int64_t seqs = op.shape[0], q = op.shape[1];
                       const std::int64_t pairs = op.causal ? seqs * q * (q + 1) / 2 : seqs * q * op.count;
                       return 2 * (x.shape[1] - 2 * in(g, op, 1).shape[2]) * x.shape[2] * pairs;
                     }},
               {Format::ND, Format::ND, Format::ND, Format::ND, Format::ND, Format::ND}, Format::ND));
  // SwiGLU as one kernel (vLLM's SiluAndMul, Ascend's npu_swiglu): [T, 2F] -> silu(x[:, :F]) *
  // x[:, F:], [T, F].
  r.add({"SwiGlu",
         false,
         [](const Graph& g, const Inputs& i, OpAttrs&) {
           const Tensor& x = g.tensor(i.at(0));
           require(x.shape.size() == 2 && x.shape[1] % 2 == 0, "[T, 2F] expected");
           return std::vector<OutputSpec>{out({x.shape[0], x.shape[1] / 2}, x.dtype, TensorRole::Activation)};
         },
         {},
         [](const Graph& g, const Op& op) { return vector_kernel(res(g, op, 0), 2, 1, 6, 0); }});
  // The residual add fused with the next RMSNorm (vLLM's fused_add_rms_norm, Ascend's
  // npu_add_rms_norm): x + residual -> its RMSNorm with gamma [H], and the sum (the next residual).
  r.add({"AddRmsNorm",
         false,
         [](const Graph& g, const Inputs& i, OpAttrs&) {
           require(i.size() == 3, "x, the residual and gamma expected");
           const Tensor& x = g.tensor(i[0]);
           require(x.shape.size() == 2 && g.tensor(i[1]).shape == x.shape && g.tensor(i[2]).shape == Shape{x.shape[1]},
                   "x and the residual [T, H], gamma [H] expected");
           return std::vector<OutputSpec>{out(x.shape, x.dtype, TensorRole::Activation),
                                          out(x.shape, x.dtype, TensorRole::Activation)};
         },
         {},
         [](const Graph& g, const Op& op) { return vector_kernel(in(g, op, 0), 2, 2, 6, in(g, op, 2).elements()); }});
  // Greedy sampling on the device: each row's largest logit, [B, V] -> its index [B] (int32).
  r.add({"ArgMax",
         false,
         [](const Graph& g, const Inputs& i, OpAttrs&) {
           const Tensor& x = g.tensor(i.at(0));
           require(x.shape.size() == 2, "logits [B, V] expected");
           return std::vector<OutputSpec>{out({x.shape[0]}, DType::I32, TensorRole::Activation)};
         },
         {},
         [](const Graph& g, const Op& op) {
           return vector_op(OpKind::ReduceSum, in(g, op, 0), res(g, op, 0).elements());
         }});

  // Embedding lookup: rows of a [V, H] table at int32 ids [...] -> [..., H]. Its gradient is
  // UnsortedSegmentSum: the table's gradient zeroed, then dy's rows added at their ids.
  r.add(layout(OpDef{"EmbeddingLookup", false,
                     [](const Graph& g, const Inputs& i, OpAttrs&) {
                       const Tensor& table = g.tensor(i.at(0));
                       const Tensor& ids = g.tensor(i.at(1));
                       require(table.shape.size() == 2, "a [V, H] table expected");
                       require(ids.dtype == DType::I32, "int32 ids expected");
                       Shape s = ids.shape;
                       s.push_back(table.shape[1]);
                       return std::vector<OutputSpec>{out(s, table.dtype, TensorRole::Activation)};
                     },
                     [](BackwardContext& b, const Op& op, TensorId dy, const std::string& gname) {
                       b.give(op.inputs[0], b.graph().apply("UnsortedSegmentSum", gname + "/UnsortedSegmentSum",
                                                            {dy, op.inputs[1], op.inputs[0]})[0]);
                     },
                     [](const Graph& g, const Op& op) {
                       const Tensor& y = res(g, op, 0);
                       return vector_kernel(y, 1, 1, 1, in(g, op, 1).elements());  // a row copy per id
                     }},
               {Format::ND, Format::ND}, Format::ND));
  r.add(layout(OpDef{"UnsortedSegmentSum",
                     false,
                     [](const Graph& g, const Inputs& i, OpAttrs&) {
                       // dy [..., H], ids [...], the table (for its shape) -> the table's gradient
                       const Tensor& table = g.tensor(i.at(2));
                       require(g.tensor(i.at(0)).shape.back() == table.shape.at(1), "dy's rows and the table's differ");
                       const TensorRole role =
                           table.role == TensorRole::Parameter ? TensorRole::Gradient : TensorRole::Activation;
                       return std::vector<OutputSpec>{out(table.shape, g.tensor(i[0]).dtype, role)};
                     },
                     {},
                     [](const Graph& g, const Op& op) {
                       // dy read, added into its rows; the whole table's gradient zeroed first.
                       return vector_kernel(in(g, op, 0), 1, 1, 1, res(g, op, 0).elements() + in(g, op, 1).elements());
                     }},
               {Format::ND, Format::ND}, Format::ND));

  // Sqrt, and its gradient from the result as Ascend's SqrtGrad: dx = dy / (2 y).
  r.add({"Sqrt", false, [](const Graph& g, const Inputs& i, OpAttrs&) { return like(g.tensor(i.at(0))); },
         [](BackwardContext& b, const Op& op, TensorId dy, const std::string& gname) {
           b.give(op.inputs[0], b.graph().apply("SqrtGrad", gname + "/SqrtGrad", {dy, op.outputs[0]})[0]);
         },
         [](const Graph& g, const Op& op) { return vector_kernel(in(g, op, 0), 1, 1, 3, 0); }});
  r.add(gradient("SqrtGrad", 2));

  // The mean over any axes, kept as 1 (Ascend's ReduceMeanD): attrs.shape is the result, x's
  // shape with each reduced axis 1 (a LayerNorm or RMSNorm an exporter wrote out, a mean over a
  // sequence). Its gradient spreads dy / n over the reduced axes.
  r.add({"ReduceMeanD", false,
         [](const Graph& g, const Inputs& i, OpAttrs& a) {
           const Tensor& x = g.tensor(i.at(0));
           require(a.shape.size() == x.shape.size(), "the result keeps the input's rank");
           for (std::size_t k = 0; k < x.shape.size(); ++k)
             require(a.shape[k] == x.shape[k] || a.shape[k] == 1,
                     shape_string(a.shape) + " is not " + shape_string(x.shape) + " with reduced axes 1");
           return std::vector<OutputSpec>{out(a.shape, x.dtype, TensorRole::Activation)};
         },
         [](BackwardContext& b, const Op& op, TensorId dy, const std::string& gname) {
           OpAttrs a;
           a.shape = b.graph().tensor(op.inputs[0]).shape;
           b.give(op.inputs[0], b.graph().apply("ReduceMeanDGrad", gname + "/ReduceMeanDGrad", {dy}, a)[0]);
         },
         [](const Graph& g, const Op& op) {
           return vector_kernel(in(g, op, 0), 1, 0, 1, std::max<std::int64_t>(1, res(g, op, 0).elements()));
         }});
  r.add({"ReduceMeanDGrad",
         false,
         [](const Graph& g, const Inputs& i, OpAttrs& a) {
           const Tensor& dy = g.tensor(i.at(0));
           require(a.shape.size() == dy.shape.size(), "x's shape of dy's rank expected");
           return std::vector<OutputSpec>{out(a.shape, dy.dtype, TensorRole::Activation)};
         },
         {},
         [](const Graph& g, const Op& op) {
           return vector_kernel(res(g, op, 0), 0, 1, 1, std::max<std::int64_t>(1, in(g, op, 0).elements()));
         }});

  // The larger of two numbers element by element (global-norm clipping: the norm, at least the
  // clip norm), numpy broadcasting; no gradient (the optimizer's).
  r.add({"Maximum",
         false,
         [](const Graph& g, const Inputs& i, OpAttrs&) {
           const Tensor& a = g.tensor(i.at(0));
           const Tensor& b = g.tensor(i.at(1));
           require(a.dtype == b.dtype, "operand dtypes differ (missing Cast?)");
           require(a.shape == b.shape || a.elements() == 1 || b.elements() == 1,
                   "operands of one shape, or a scalar, expected");
           return std::vector<OutputSpec>{
               out(a.elements() >= b.elements() ? a.shape : b.shape, a.dtype, TensorRole::Activation)};
         },
         {},
         [](const Graph& g, const Op& op) { return vector_kernel(res(g, op, 0), 2, 1, 1, 0); }});

  // Square sum of a tensor to a scalar (global-norm clipping's per-gradient part).
  r.add({"SquareSumV1",
         false,
         [](const Graph&, const Inputs& i, OpAttrs&) {
           require(i.size() == 1, "one tensor expected");
           return std::vector<OutputSpec>{out({1}, DType::F32, TensorRole::Activation)};
         },
         {},
         [](const Graph& g, const Op& op) { return vector_kernel(in(g, op, 0), 1, 0, 2, 1); }});

  // AdamWeightDecay (MindSpore's fused AdamApplyOneWithDecay on Ascend): per parameter, with its
  // two moments, in place: m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2;
  // w -= lr (m / (sqrt(v) + eps) + wd w), wd attrs.alpha; nn.AdamWeightDecay's b1 0.9, b2 0.999,
  // eps 1e-6 and no bias correction.
  r.add({"AdamWeightDecay",
         false,
         [](const Graph& g, const Inputs& i, OpAttrs&) {
           require(i.size() == 5, "param, m, v, learning rate, gradient expected");
           const Shape& s = g.tensor(i[0]).shape;
           require(g.tensor(i[1]).shape == s && g.tensor(i[2]).shape == s && g.tensor(i[4]).shape == s,
                   "param, moments and gradient must share a shape");
           return std::vector<OutputSpec>{OutputSpec::alias(0), OutputSpec::alias(1), OutputSpec::alias(2)};
         },
         {},
         [](const Graph& g, const Op& op) { return vector_kernel(in(g, op, 0), 4, 3, 12, 1); }});

  // LAMB (the BERT model zoo's optimizer) as Ascend runs it: LambNextMV updates the moments and
  // gives the update direction r (weight decay included); SquareSumAll the squared norms of the
  // weight and r; LambUpdateWithLR the weight by lr * trust ratio * r.
  r.add({"LambNextMV",
         false,
         [](const Graph& g, const Inputs& i, OpAttrs&) {
           require(i.size() == 4, "param, m, v, gradient expected");
           const Tensor& w = g.tensor(i[0]);
           for (std::size_t k = 1; k < 4; ++k) require(g.tensor(i[k]).shape == w.shape, "shapes differ");
           return std::vector<OutputSpec>{OutputSpec::alias(1), OutputSpec::alias(2),
                                          out(w.shape, w.dtype, TensorRole::Gradient)};
         },
         {},
         [](const Graph& g, const Op& op) { return vector_kernel(in(g, op, 0), 4, 3, 12, 0); }});
  r.add({"LambUpdateWithLR",
         false,
         [](const Graph& g, const Inputs& i, OpAttrs&) {
           require(i.size() == 5 && g.tensor(i[0]).shape == g.tensor(i[1]).shape,
                   "param, update, two squared norms and the learning rate expected");
           return std::vector<OutputSpec>{OutputSpec::alias(0)};
         },
         {},
         [](const Graph& g, const Op& op) { return vector_kernel(in(g, op, 0), 2, 1, 3, 3); }});
}

}  // namespace ascendsim::workloads
