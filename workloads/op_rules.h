// Helpers the op registrations share (ops.cpp, ops_nn.cpp): checks, output specs and the usual
// lowerings. Not for use outside the registrations.
#pragma once

#include <algorithm>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include "workloads/op_registry.h"

namespace ascendsim::workloads::rules {

using Inputs = std::vector<TensorId>;

inline void require(bool ok, const std::string& what) {
  if (!ok) throw std::invalid_argument(what);
}

inline OutputSpec out(Shape shape, DType dtype, TensorRole role) {
  return {Tensor{"", std::move(shape), dtype, role}, -1};
}

inline const Tensor& in(const Graph& g, const Op& op, std::size_t i) { return g.tensor(op.inputs.at(i)); }
inline const Tensor& res(const Graph& g, const Op& op, std::size_t i) { return g.tensor(op.outputs.at(i)); }

inline void set_nchw(aicore::OpDesc& d, const Shape& x) {
  d.batch = x[0];
  d.cin = x[1];
  d.h = x[2];
  d.w = x[3];
}

/// A vector op over `main`'s elements, in its storage precision.
inline aicore::OpDesc vector_op(aicore::OpKind kind, const Tensor& main, std::int64_t out_elements = 0) {
  aicore::OpDesc d;
  d.kind = kind;
  d.precision = storage_precision(main.dtype);
  d.out_precision = d.precision;
  d.elements = main.elements();
  d.out_elements = out_elements;
  return d;
}

/// `def` as a member of fused kernels, with its Vector operations per element.
inline OpDef fusible(OpDef def, OpDef::Fusion role, std::int64_t vector_ops) {
  def.fusion = role;
  def.vector_ops = vector_ops;
  return def;
}

/// `def` with the layouts its device kernel wants and gives, and whether it runs on the Cube.
inline OpDef layout(OpDef def, std::vector<Format> in, Format out, bool cube = false) {
  def.formats = std::move(in);
  def.out_format = out;
  def.cube = cube;
  return def;
}

/// Windows along an axis of `d` pixels: floor's, or with ceil_mode a last partial window that
/// starts inside the input or its leading padding. 0 when the window is larger than the input.
inline std::int64_t pool_out(std::int64_t d, const PoolAttr& p, bool width = false) {
  const std::int64_t span = d + 2 * p.pad - (width ? p.width() : p.kernel);
  if (span < 0 || p.stride < 1) return 0;
  std::int64_t o = (p.ceil ? (span + p.stride - 1) / p.stride : span / p.stride) + 1;
  if (p.ceil && (o - 1) * p.stride >= d + p.pad) --o;
  return o;
}

/// The pooling ops' shape rule: an NCHW input pooled by the window of attrs.pool.
inline std::vector<OutputSpec> pool_infer(const Graph& g, const Inputs& i, OpAttrs& a) {
  const Shape& xs = g.tensor(i.at(0)).shape;
  require(xs.size() == 4, "NCHW input expected");
  const std::int64_t ho = pool_out(xs[2], a.pool), wo = pool_out(xs[3], a.pool, true);
  require(ho > 0 && wo > 0, "window larger than input");
  return {out({xs[0], xs[1], ho, wo}, g.tensor(i[0]).dtype, TensorRole::Activation)};
}

/// The pooling ops' lowering: the window of attrs.pool over the NCHW input (or, for a gradient
/// that takes only dy, over its output, the forward input's shape).
inline std::function<aicore::OpDesc(const Graph&, const Op&)> pool_lower(aicore::OpKind kind, bool on_output = false) {
  return [kind, on_output](const Graph& g, const Op& op) {
    const Tensor& x = on_output ? res(g, op, 0) : in(g, op, 0);
    aicore::OpDesc d = vector_op(kind, x);
    set_nchw(d, x.shape);
    d.kh = op.pool.kernel;
    d.kw = op.pool.width();
    d.stride = op.pool.stride;
    d.pad_h = d.pad_w = op.pool.pad;
    if (op.pool.ceil) {  // the partial windows cost as whole ones over an input padded at its end
      d.h = (pool_out(x.shape[2], op.pool) - 1) * d.stride + d.kh - 2 * d.pad_h;
      d.w = (pool_out(x.shape[3], op.pool, true) - 1) * d.stride + d.kw - 2 * d.pad_w;
      d.h = std::max(d.h, x.shape[2]);
      d.w = std::max(d.w, x.shape[3]);
    }
    return d;
  };
}

/// The shape two operands broadcast to, as numpy's rules: trailing axes align; each pair is
/// equal or one of them is 1.
inline Shape broadcast_shape(const Shape& a, const Shape& b) {
  Shape s(std::max(a.size(), b.size()), 1);
  for (std::size_t k = 0; k < s.size(); ++k) {
    const std::int64_t x = k < s.size() - a.size() ? 1 : a[k - (s.size() - a.size())];
    const std::int64_t y = k < s.size() - b.size() ? 1 : b[k - (s.size() - b.size())];
    require(x == y || x == 1 || y == 1, "shapes " + shape_string(a) + " and " + shape_string(b) +
                                            " do not broadcast (axis " + std::to_string(k) + ": " + std::to_string(x) +
                                            " against " + std::to_string(y) + ")");
    s[k] = x == 1 ? y : x;
  }
  return s;
}

/// `grad` (of a broadcast result) summed back to the shape of `operand` by a ReduceSum; `grad`
/// itself when the shapes agree.
inline TensorId reduce_to(Graph& g, TensorId grad, TensorId operand, const std::string& name) {
  if (g.tensor(grad).shape == g.tensor(operand).shape) return grad;
  OpAttrs a;
  a.shape = g.tensor(operand).shape;
  return g.apply("ReduceSum", name, {grad}, a)[0];
}

/// An element-wise op as one Vector pass: output 0's elements, each full-size input read and
/// each full-size output written once, smaller (broadcast) inputs read once, `ops` Vector
/// operations per element.
inline aicore::OpDesc elementwise_desc(const Graph& g, const Op& op, std::int64_t ops) {
  const Tensor& y = res(g, op, 0);
  aicore::OpDesc d = vector_op(aicore::OpKind::Elementwise, y);
  d.operands = d.results = 0;
  for (auto t : op.inputs) {
    if (g.tensor(t).elements() == y.elements())
      ++d.operands;
    else
      d.out_elements += g.tensor(t).elements();
  }
  for (auto t : op.outputs) d.results += g.tensor(t).elements() == y.elements();
  d.fused_ops = ops;
  return d;
}

}  // namespace ascendsim::workloads::rules
