// The built-in graph ops, each registered once: shape rule, backward rule, lowering to the AI
// core cost model, workspace and MACs (see op_registry.h).
#include <algorithm>
#include <stdexcept>

#include "workloads/kernels.h"
#include "workloads/op_registry.h"
#include "workloads/op_rules.h"

namespace ascendsim::workloads {

using aicore::OpDesc;
using aicore::OpKind;
using namespace rules;

// ---- the registry ---------------------------------------------------------------------------

OpRegistry& OpRegistry::global() {
  static OpRegistry* r = [] {
    auto* reg = new OpRegistry;  // never destroyed: ops may be looked up during static destruction
    register_builtin_ops(*reg);
    register_builtin_kernels(*reg);
    return reg;
  }();
  return *r;
}

void OpRegistry::set_compute(const std::string& name, Compute fn) {
  auto it = m_ops.find(name);
  if (it == m_ops.end()) throw std::invalid_argument("set_compute: no op " + name);
  it->second->compute = std::move(fn);
}

const OpDef& OpRegistry::add(OpDef def) {
  if (def.name.empty()) throw std::logic_error("an op registration needs a name");
  if (!def.infer) throw std::logic_error("op " + def.name + " has no shape rule");
  if (!def.view && !def.lower) throw std::logic_error("op " + def.name + " runs on the device but has no lowering");
  if (m_ops.count(def.name)) throw std::logic_error("op " + def.name + " is registered twice");
  const std::string name = def.name;
  return *m_ops.emplace(name, std::make_unique<OpDef>(std::move(def))).first->second;
}

const OpDef* OpRegistry::find(const std::string& name) const {
  const auto it = m_ops.find(name);
  return it == m_ops.end() ? nullptr : it->second.get();
}

const OpDef& OpRegistry::at(const std::string& name) const {
  if (const OpDef* d = find(name)) return *d;
  std::string known;
  for (const auto& [n, d] : m_ops) known += (known.empty() ? "" : ", ") + n;
  throw std::invalid_argument("unknown op '" + name + "' (registered: " + known + ")");
}

std::vector<std::string> OpRegistry::names() const {
  std::vector<std::string> out;
  for (const auto& [n, d] : m_ops) out.push_back(n);
  return out;
}

aicore::Precision storage_precision(DType t) {
  switch (t) {
    case DType::F16:
      return aicore::Precision::FP16;
    case DType::I8:
      return aicore::Precision::INT8;
    default:
      return aicore::Precision::FP32;  // fp32 and int32 are 4 bytes
  }
}

// ---- helpers shared by the rules -------------------------------------------------------------

namespace {

std::int64_t conv_out_h(std::int64_t in, std::int64_t k, const ConvAttr& a) {
  return (in + 2 * a.pad_h - k) / a.stride + 1;
}
std::int64_t conv_out_w(std::int64_t in, std::int64_t k, const ConvAttr& a) {
  return (in + 2 * a.pad_w - k) / a.stride + 1;
}

/// A convolution family op lowered with the forward geometry: input x and weight w. A grouped
/// convolution is its G GEMMs in one Cube kernel: each group's Cin/G channels to its Cout/G, the
/// groups stacked as G times the batch ([N*G, Cin/G, H, W] by [Cout/G, Cin/G, kh, kw]), so every
/// group's channels are padded to C0 on their own and the MACs are the grouped convolution's.
OpDesc conv_op(OpKind kind, const Tensor& operand, const Tensor& result, const Shape& x, const Shape& w,
               const ConvAttr& c) {
  OpDesc d;
  d.kind = kind;
  d.precision = storage_precision(operand.dtype);
  d.out_precision = storage_precision(result.dtype);
  set_nchw(d, x);
  d.batch = x[0] * c.group;
  d.cin = x[1] / c.group;
  d.cout = w[0] / c.group;
  d.kh = w[2];
  d.kw = w[3];
  d.stride = c.stride;
  d.pad_h = c.pad_h;
  d.pad_w = c.pad_w;
  return d;
}

std::int64_t round16(std::int64_t v) { return (v + 15) / 16 * 16; }

/// Cin input channels against an OIHW weight in c.group groups: [Cout, Cin/group, kh, kw].
void check_groups(std::int64_t cin, const Shape& w, const ConvAttr& c) {
  require(c.group >= 1, "group " + std::to_string(c.group) + " must be positive");
  if (c.group == 1) {
    require(cin == w[1], "input channels " + std::to_string(cin) + " != weight " + std::to_string(w[1]));
    return;
  }
  require(cin == w[1] * c.group && w[0] % c.group == 0,
          "group " + std::to_string(c.group) + " of " + std::to_string(cin) + " input channels needs a weight [Cout, " +
              std::to_string(cin / c.group) + ", kh, kw] with Cout a multiple of " + std::to_string(c.group) +
              ", got " + shape_string(w));
}

}  // namespace

std::int64_t stored_elements(const Shape& s, Format f) {
  std::int64_t n = 1;
  for (auto d : s) n *= d;
  if (f == Format::NC1HWC0 && s.size() == 4) return s[0] * round16(s[1]) * s[2] * s[3];
  if (f == Format::FracZ && s.size() == 4) return round16(s[0]) * round16(s[1]) * s[2] * s[3];
  if (f == Format::FracNZ && s.size() == 2) return round16(s[0]) * round16(s[1]);
  return n;
}

namespace {

/// Output pixels x Cout x (Cin x kh x kw): the contraction of all three convolution ops.
std::int64_t conv_macs(const Shape& y, const Shape& w) { return y[0] * y[2] * y[3] * w[0] * w[1] * w[2] * w[3]; }

}  // namespace

// ---- the ops ---------------------------------------------------------------------------------

void register_builtin_ops(OpRegistry& r) {
  register_nn_ops(r);
  register_transformer_ops(r);
  // Cube ops ------------------------------------------------------------------------------------
  r.add(layout(
      OpDef{"Conv2D",
            false,
            [](const Graph& g, const Inputs& i, OpAttrs& a) {
              const Shape& xs = g.tensor(i.at(0)).shape;  // NCHW
              const Shape& ws = g.tensor(i.at(1)).shape;  // Cout, Cin, kh, kw
              require(xs.size() == 4 && ws.size() == 4, "conv2d needs NCHW input and OIHW weight");
              check_groups(xs[1], ws, a.conv);
              require(g.tensor(i[0]).dtype == g.tensor(i[1]).dtype, "input and weight dtypes differ (missing Cast?)");
              a.conv.kernel_h = ws[2];
              a.conv.kernel_w = ws[3];
              const std::int64_t ho = conv_out_h(xs[2], ws[2], a.conv), wo = conv_out_w(xs[3], ws[3], a.conv);
              require(ho > 0 && wo > 0, "kernel larger than padded input");
              return std::vector<OutputSpec>{out({xs[0], ws[0], ho, wo}, g.tensor(i[0]).dtype, TensorRole::Activation)};
            },
            [](BackwardContext& b, const Op& op, TensorId dy, const std::string& gname) {
              Graph& g = b.graph();
              const TensorId x = op.inputs[0], w = op.inputs[1];
              if (b.wants(x))
                b.give(x, g.conv2d_backprop_input(gname + "/BackpropInput", dy, w, g.tensor(x).shape, op.conv));
              if (b.wants(w))
                b.give(w, g.conv2d_backprop_filter(gname + "/BackpropFilter", dy, x, g.tensor(w).shape, op.conv));
            },
            [](const Graph& g, const Op& op) {
              return conv_op(OpKind::Conv2D, in(g, op, 0), res(g, op, 0), in(g, op, 0).shape, in(g, op, 1).shape,
                             op.conv);
            },
            {},
            [](const Graph& g, const Op& op) { return conv_macs(res(g, op, 0).shape, in(g, op, 1).shape); }},
      {Format::NC1HWC0, Format::FracZ}, Format::NC1HWC0, true));

  r.add(layout(OpDef{"Conv2DBackpropInput",
                     false,
                     [](const Graph& g, const Inputs& i, OpAttrs& a) {
                       const Shape& dys = g.tensor(i.at(0)).shape;
                       const Shape& ws = g.tensor(i.at(1)).shape;
                       const Shape& xs = a.shape;
                       require(xs.size() == 4 && dys.size() == 4 && ws.size() == 4, "rank-4 operands expected");
                       require(dys[1] == ws[0], "channel mismatch");
                       check_groups(xs[1], ws, a.conv);
                       require(conv_out_h(xs[2], ws[2], a.conv) == dys[2] && conv_out_w(xs[3], ws[3], a.conv) == dys[3],
                               "dy spatial shape does not match the forward convolution");
                       return std::vector<OutputSpec>{out(xs, g.tensor(i[0]).dtype, TensorRole::Activation)};
                     },
                     // As a transposed convolution (ConvTranspose) y = BackpropInput(x, w): dx is the
                     // convolution of dy by w, dw the filter gradient with x in the place of dy.
                     [](BackwardContext& b, const Op& op, TensorId dy, const std::string& gname) {
                       Graph& g = b.graph();
                       const TensorId x = op.inputs[0], w = op.inputs[1];
                       if (b.wants(x)) b.give(x, g.conv2d(gname + "/Conv2D", dy, w, op.conv));
                       if (b.wants(w))
                         b.give(w,
                                g.conv2d_backprop_filter(gname + "/BackpropFilter", x, dy, g.tensor(w).shape, op.conv));
                     },
                     [](const Graph& g, const Op& op) {
                       return conv_op(OpKind::Conv2DBackpropInput, in(g, op, 0), res(g, op, 0), res(g, op, 0).shape,
                                      in(g, op, 1).shape, op.conv);
                     },
                     {},
                     [](const Graph& g, const Op& op) { return conv_macs(in(g, op, 0).shape, in(g, op, 1).shape); }},
               {Format::NC1HWC0, Format::FracZ}, Format::NC1HWC0, true));

  r.add(layout(OpDef{"Conv2DBackpropFilter",
                     false,
                     [](const Graph& g, const Inputs& i, OpAttrs& a) {
                       const Shape& dys = g.tensor(i.at(0)).shape;
                       const Shape& xs = g.tensor(i.at(1)).shape;
                       const Shape& ws = a.shape;
                       require(ws.size() == 4 && dys.size() == 4 && xs.size() == 4, "rank-4 operands expected");
                       require(dys[1] == ws[0] && dys[0] == xs[0], "shape mismatch");
                       check_groups(xs[1], ws, a.conv);
                       require(conv_out_h(xs[2], ws[2], a.conv) == dys[2],
                               "dy spatial shape does not match the forward convolution");
                       return std::vector<OutputSpec>{out(ws, g.tensor(i[0]).dtype, TensorRole::Gradient)};
                     },
                     {},
                     [](const Graph& g, const Op& op) {
                       return conv_op(OpKind::Conv2DBackpropFilter, in(g, op, 0), res(g, op, 0), in(g, op, 1).shape,
                                      res(g, op, 0).shape, op.conv);
                     },
                     // An fp16 weight gradient accumulates in an fp32 workspace of its size.
                     [](const Graph& g, const Op& op) -> std::int64_t {
                       return res(g, op, 0).dtype == DType::F16 ? res(g, op, 0).elements() * 4 : 0;
                     },
                     [](const Graph& g, const Op& op) { return conv_macs(in(g, op, 0).shape, res(g, op, 0).shape); }},
               {Format::NC1HWC0, Format::NC1HWC0}, Format::FracZ, true));

  // Depthwise convolution (MindSpore's DepthwiseConv2dNative; weight [C, 1, kh, kw], one filter per
  // channel). The Cube computes it block by block: each group of C0 = 16 channels is a 16x16
  // fractal whose diagonal only is the filter, so it costs a dense convolution of 16 channels to
  // 16 per block (the product of the useful MACs and C0), with the activations' bytes.
  auto depthwise_geometry = [](const Shape& x) {  // x [N, C, H, W] -> [N * C1, C0, H, W]
    return Shape{x[0] * ((x[1] + 15) / 16), 16, x[2], x[3]};
  };
  auto depthwise_weight = [](const Shape& w) { return Shape{16, 16, w[2], w[3]}; };
  auto depthwise_macs = [](const Shape& y, const Shape& w) { return y[0] * y[1] * y[2] * y[3] * w[2] * w[3]; };
  r.add(layout(
      OpDef{"DepthwiseConv2dNative",
            false,
            [](const Graph& g, const Inputs& i, OpAttrs& a) {
              const Shape& xs = g.tensor(i.at(0)).shape;  // NCHW
              const Shape& ws = g.tensor(i.at(1)).shape;  // C, 1, kh, kw
              require(xs.size() == 4 && ws.size() == 4, "depthwise conv needs NCHW input and [C, 1, kh, kw] weight");
              require(ws[0] == xs[1] && ws[1] == 1, "a depthwise weight is [C, 1, kh, kw] for C = " +
                                                        std::to_string(xs[1]) + " channels, got " + shape_string(ws));
              require(g.tensor(i[0]).dtype == g.tensor(i[1]).dtype, "input and weight dtypes differ (missing Cast?)");
              a.conv.kernel_h = ws[2];
              a.conv.kernel_w = ws[3];
              const std::int64_t ho = conv_out_h(xs[2], ws[2], a.conv), wo = conv_out_w(xs[3], ws[3], a.conv);
              require(ho > 0 && wo > 0, "kernel larger than padded input");
              return std::vector<OutputSpec>{out({xs[0], xs[1], ho, wo}, g.tensor(i[0]).dtype, TensorRole::Activation)};
            },
            [](BackwardContext& b, const Op& op, TensorId dy, const std::string& gname) {
              Graph& g = b.graph();
              const TensorId x = op.inputs[0], w = op.inputs[1];
              OpAttrs a;
              a.conv = op.conv;
              if (b.wants(x)) {
                a.shape = g.tensor(x).shape;
                b.give(x, g.apply("DepthwiseConv2dNativeBackpropInput", gname + "/BackpropInput", {dy, w}, a)[0]);
              }
              if (b.wants(w)) {
                a.shape = g.tensor(w).shape;
                b.give(w, g.apply("DepthwiseConv2dNativeBackpropFilter", gname + "/BackpropFilter", {dy, x}, a)[0]);
              }
            },
            [depthwise_geometry, depthwise_weight](const Graph& g, const Op& op) {
              return conv_op(OpKind::Conv2D, in(g, op, 0), res(g, op, 0), depthwise_geometry(in(g, op, 0).shape),
                             depthwise_weight(in(g, op, 1).shape), op.conv);
            },
            {},
            [depthwise_macs](const Graph& g, const Op& op) {
              return depthwise_macs(res(g, op, 0).shape, in(g, op, 1).shape);
            }},
      {Format::NC1HWC0, Format::FracZ}, Format::NC1HWC0, true));
  r.add(layout(OpDef{"DepthwiseConv2dNativeBackpropInput",
                     false,
                     [](const Graph& g, const Inputs& i, OpAttrs& a) {  // dy, w -> dx (attrs.shape)
                       const Shape& dys = g.tensor(i.at(0)).shape;
                       const Shape& ws = g.tensor(i.at(1)).shape;
                       const Shape& xs = a.shape;
                       require(xs.size() == 4 && dys.size() == 4 && ws.size() == 4, "rank-4 operands expected");
                       require(dys[1] == xs[1] && ws[0] == xs[1], "channel mismatch");
                       require(conv_out_h(xs[2], ws[2], a.conv) == dys[2] && conv_out_w(xs[3], ws[3], a.conv) == dys[3],
                               "dy spatial shape does not match the forward convolution");
                       return std::vector<OutputSpec>{out(xs, g.tensor(i[0]).dtype, TensorRole::Activation)};
                     },
                     {},
                     [depthwise_geometry, depthwise_weight](const Graph& g, const Op& op) {
                       return conv_op(OpKind::Conv2DBackpropInput, in(g, op, 0), res(g, op, 0),
                                      depthwise_geometry(res(g, op, 0).shape), depthwise_weight(in(g, op, 1).shape),
                                      op.conv);
                     },
                     {},
                     [depthwise_macs](const Graph& g, const Op& op) {
                       return depthwise_macs(in(g, op, 0).shape, in(g, op, 1).shape);
                     }},
               {Format::NC1HWC0, Format::FracZ}, Format::NC1HWC0, true));
  r.add(layout(OpDef{"DepthwiseConv2dNativeBackpropFilter",
                     false,
                     [](const Graph& g, const Inputs& i, OpAttrs& a) {  // dy, x -> dw (attrs.shape)
                       const Shape& dys = g.tensor(i.at(0)).shape;
                       const Shape& xs = g.tensor(i.at(1)).shape;
                       const Shape& ws = a.shape;
                       require(ws.size() == 4 && dys.size() == 4 && xs.size() == 4, "rank-4 operands expected");
                       require(ws[0] == xs[1] && ws[1] == 1 && dys[1] == xs[1] && dys[0] == xs[0], "shape mismatch");
                       require(conv_out_h(xs[2], ws[2], a.conv) == dys[2],
                               "dy spatial shape does not match the forward convolution");
                       return std::vector<OutputSpec>{out(ws, g.tensor(i[0]).dtype, TensorRole::Gradient)};
                     },
                     {},
                     [depthwise_geometry, depthwise_weight](const Graph& g, const Op& op) {
                       return conv_op(OpKind::Conv2DBackpropFilter, in(g, op, 0), res(g, op, 0),
                                      depthwise_geometry(in(g, op, 1).shape), depthwise_weight(res(g, op, 0).shape),
                                      op.conv);
                     },
                     [](const Graph& g, const Op& op) -> std::int64_t {
                       return res(g, op, 0).dtype == DType::F16 ? res(g, op, 0).elements() * 4 : 0;
                     },
                     [depthwise_macs](const Graph& g, const Op& op) {
                       return depthwise_macs(in(g, op, 0).shape, res(g, op, 0).shape);
                     }},
               {Format::NC1HWC0, Format::NC1HWC0}, Format::FracZ, true));

  // Semi-automatic parallelism's redistribution (workloads/parallel.h): each collective's backward
  // is its dual, as MindSpore's: AllReduce of partial sums passes the gradient through, AllGather
  // reduce-scatters it (or, where the group consumed the gathered tensor alike and each rank's
  // gradient is whole, keeps the rank's piece of it), ReduceScatter gathers it; a local Slice (a
  // rank keeps its piece of a replicated tensor) gathers its gradient.
  auto axis_scaled = [](bool grow) {
    return [grow](const Graph& g, const Inputs& i, OpAttrs& a) {
      const Tensor& x = g.tensor(i.at(0));
      require(a.axis >= 0 && a.axis < static_cast<std::int64_t>(x.shape.size()), "axis out of range");
      require(a.group_size >= 1 && a.group_stride >= 1, "a group of at least one rank");
      Shape s = x.shape;
      auto& d = s[static_cast<std::size_t>(a.axis)];
      if (!grow)
        require(d % a.group_size == 0,
                "axis of " + std::to_string(d) + " does not divide into " + std::to_string(a.group_size) + " pieces");
      d = grow ? d * a.group_size : d / a.group_size;
      return std::vector<OutputSpec>{out(s, x.dtype, x.role == TensorRole::Gradient ? x.role : TensorRole::Activation)};
    };
  };
  auto same_shape = [](const Graph& g, const Inputs& i, OpAttrs&) {
    const Tensor& x = g.tensor(i.at(0));
    return std::vector<OutputSpec>{
        out(x.shape, x.dtype, x.role == TensorRole::Gradient ? x.role : TensorRole::Activation)};
  };
  auto comm = [](OpDef d, OpDef::Collective c) {
    d.collective = c;
    // Not an AI core kernel: the compiler makes it a communication task (this description, a copy
    // of the result, is never costed).
    d.lower = [](const Graph& g, const Op& op) {
      return vector_op(OpKind::TransData, res(g, op, 0), res(g, op, 0).elements());
    };
    return d;
  };
  r.add(comm({"AllReduce", false, same_shape,
              [](BackwardContext& b, const Op& op, TensorId dy, const std::string&) { b.give(op.inputs[0], dy); }},
             OpDef::Collective::AllReduce));
  r.add(comm({"AllGather", false, axis_scaled(true),
              [](BackwardContext& b, const Op& op, TensorId dy, const std::string& gname) {
                b.give(op.inputs[0], op.whole_gradient
                                         ? b.graph().apply("Slice", gname + "/Slice", {dy}, op)[0]
                                         : b.graph().apply("ReduceScatter", gname + "/ReduceScatter", {dy}, op)[0]);
              }},
             OpDef::Collective::AllGather));
  r.add(comm({"ReduceScatter", false, axis_scaled(false),
              [](BackwardContext& b, const Op& op, TensorId dy, const std::string& gname) {
                b.give(op.inputs[0], b.graph().apply("AllGather", gname + "/AllGather", {dy}, op)[0]);
              }},
             OpDef::Collective::ReduceScatter));
  // Optimizer-state sharding: the updated pieces of a weight gathered into it in place (the
  // weight's bytes gathered, as AllGather's).
  r.add(comm({"AllGatherInto", false,
              [](const Graph& g, const Inputs& i, OpAttrs& a) {
                require(i.size() == 2, "a piece and the whole it is gathered into");
                const Tensor& piece = g.tensor(i[0]);
                const Tensor& whole = g.tensor(i[1]);
                require(a.axis == 0 && a.group_size >= 1 && !whole.shape.empty() &&
                            whole.shape[0] == piece.shape.at(0) * a.group_size,
                        "the whole's first axis is the piece's times the group");
                return std::vector<OutputSpec>{OutputSpec::alias(1)};
              }},
             OpDef::Collective::AllGather));
  // Pipeline parallelism's exchanges with the rank OpAttrs::peer ranks away (MindSpore's Send and
  // Receive; Megatron's combined send-and-receive): Send gives a token (its completion), Receive
  // and SendReceive the received tensor of attrs.shape and attrs.dtype. Never differentiated: the
  // stages are built from a graph already differentiated (workloads/pipeline.h).
  auto received = [](const Graph&, const Inputs&, OpAttrs& a) {
    require(!a.shape.empty() && a.peer != 0, "a peer and the received tensor's shape");
    return std::vector<OutputSpec>{out(a.shape, a.dtype, TensorRole::Activation)};
  };
  r.add(comm({"Send", false,
              [](const Graph&, const Inputs& i, OpAttrs& a) {
                require(i.size() == 1 && a.peer != 0, "one tensor to send and a peer");
                return std::vector<OutputSpec>{out({1}, DType::I32, TensorRole::Activation)};
              }},
             OpDef::Collective::SendRecv));
  r.add(comm({"Receive", false,
              [received](const Graph& g, const Inputs& i, OpAttrs& a) {
                require(i.empty(), "nothing to send");
                return received(g, i, a);
              }},
             OpDef::Collective::SendRecv));
  r.add(comm({"SendReceive", false,
              [received](const Graph& g, const Inputs& i, OpAttrs& a) {
                require(i.size() == 1, "one tensor to send");
                return received(g, i, a);
              }},
             OpDef::Collective::SendRecv));
  // Mirror (MindSpore's MirrorOperator): a tensor every rank of a group holds whole, consumed by
  // an op split across that group — each rank's gradient is a partial sum, AllReduced in backward.
  r.add({"Mirror", true, same_shape, [](BackwardContext& b, const Op& op, TensorId dy, const std::string& gname) {
           b.give(op.inputs[0], b.graph().apply("AllReduce", gname + "/AllReduce", {dy}, op)[0]);
         }});
  // AllToAll: the tensor cut along `concat_axis` becomes cut along `axis` (each rank sends its
  // piece of `axis` to the rank that keeps it); its backward is the exchange the other way.
  r.add(comm({"AllToAll", false,
              [](const Graph& g, const Inputs& i, OpAttrs& a) {
                const Tensor& x = g.tensor(i.at(0));
                const auto n = static_cast<std::int64_t>(x.shape.size());
                require(a.axis >= 0 && a.axis < n && a.concat_axis >= 0 && a.concat_axis < n && a.axis != a.concat_axis,
                        "two different axes");
                Shape s = x.shape;
                require(s[static_cast<std::size_t>(a.axis)] % a.group_size == 0, "the split axis does not divide");
                s[static_cast<std::size_t>(a.axis)] /= a.group_size;
                s[static_cast<std::size_t>(a.concat_axis)] *= a.group_size;
                return std::vector<OutputSpec>{
                    out(s, x.dtype, x.role == TensorRole::Gradient ? x.role : TensorRole::Activation)};
              },
              [](BackwardContext& b, const Op& op, TensorId dy, const std::string& gname) {
                OpAttrs back = op;
                std::swap(back.axis, back.concat_axis);
                b.give(op.inputs[0], b.graph().apply("AllToAll", gname + "/AllToAll", {dy}, back)[0]);
              }},
             OpDef::Collective::AllToAll));
  r.add({"Slice", false, axis_scaled(false),
         [](BackwardContext& b, const Op& op, TensorId dy, const std::string& gname) {
           b.give(op.inputs[0], b.graph().apply("AllGather", gname + "/AllGather", {dy}, op)[0]);
         },
         [](const Graph& g, const Op& op) {  // a strided copy of the rank's piece
           return vector_op(OpKind::TransData, res(g, op, 0), res(g, op, 0).elements());
         }});

  r.add(layout(OpDef{"MatMul",
                     false,
                     [](const Graph& g, const Inputs& i, OpAttrs& a) {
                       const Shape& as = g.tensor(i.at(0)).shape;
                       const Shape& bs = g.tensor(i.at(1)).shape;
                       require(as.size() == 2 && bs.size() == 2, "matmul needs rank-2 operands");
                       const std::int64_t m = a.matmul.transpose_a ? as[1] : as[0],
                                          ka = a.matmul.transpose_a ? as[0] : as[1];
                       const std::int64_t kb = a.matmul.transpose_b ? bs[1] : bs[0],
                                          n = a.matmul.transpose_b ? bs[0] : bs[1];
                       require(ka == kb, "inner dimensions differ: " + shape_string(as) + " x " + shape_string(bs));
                       require(g.tensor(i[0]).dtype == g.tensor(i[1]).dtype, "operand dtypes differ (missing Cast?)");
                       return std::vector<OutputSpec>{out({m, n}, g.tensor(i[0]).dtype, a.role)};
                     },
                     [](BackwardContext& b, const Op& op, TensorId dy, const std::string& gname) {
                       Graph& g = b.graph();
                       if (op.matmul.transpose_a)
                         throw std::logic_error(op.name + ": backward of transpose_a MatMul not supported");
                       const TensorId a = op.inputs[0], w = op.inputs[1];
                       const TensorRole wrole =
                           g.tensor(w).role == TensorRole::Parameter ? TensorRole::Gradient : TensorRole::Activation;
                       if (op.matmul.transpose_b) {  // y = a w^T: da = dy w, dw = dy^T a
                         if (b.wants(a))
                           b.give(a, g.matmul(gname + "/MatMul_dx", dy, w, {false, false}, TensorRole::Activation));
                         if (b.wants(w)) b.give(w, g.matmul(gname + "/MatMul_dw", dy, a, {true, false}, wrole));
                       } else {  // y = a w: da = dy w^T, dw = a^T dy
                         if (b.wants(a))
                           b.give(a, g.matmul(gname + "/MatMul_dx", dy, w, {false, true}, TensorRole::Activation));
                         if (b.wants(w)) b.give(w, g.matmul(gname + "/MatMul_dw", a, dy, {true, false}, wrole));
                       }
                     },
                     [](const Graph& g, const Op& op) {
                       OpDesc d;
                       d.kind = OpKind::MatMul;
                       d.precision = storage_precision(in(g, op, 0).dtype);
                       d.out_precision = storage_precision(res(g, op, 0).dtype);
                       d.m = res(g, op, 0).shape[0];
                       d.n = res(g, op, 0).shape[1];
                       d.k = op.matmul.transpose_a ? in(g, op, 0).shape[0] : in(g, op, 0).shape[1];
                       d.transpose_a = op.matmul.transpose_a;
                       d.transpose_b = op.matmul.transpose_b;
                       return d;
                     },
                     {},
                     [](const Graph& g, const Op& op) {
                       const Shape& a = in(g, op, 0).shape;
                       const Shape& y = res(g, op, 0).shape;
                       return y[0] * y[1] * (op.matmul.transpose_a ? a[0] : a[1]);
                     }},
               {Format::FracNZ, Format::FracNZ}, Format::FracNZ, true));

  // Vector ops ----------------------------------------------------------------------------------
  r.add(fusible(OpDef{"BiasAdd", false,
                      [](const Graph& g, const Inputs& i, OpAttrs&) {
                        const Shape& xs = g.tensor(i.at(0)).shape;
                        const Shape& bs = g.tensor(i.at(1)).shape;
                        require(bs.size() == 1 && xs.size() >= 2 && bs[0] == xs[1], "bias length != channels");
                        return std::vector<OutputSpec>{out(xs, g.tensor(i[0]).dtype, TensorRole::Activation)};
                      },
                      [](BackwardContext& b, const Op& op, TensorId dy, const std::string& gname) {
                        if (b.wants(op.inputs[1]))
                          b.give(op.inputs[1], b.graph().bias_add_grad(gname + "/BiasAddGrad", dy));
                        b.give(op.inputs[0], dy);
                      },
                      [](const Graph& g, const Op& op) {
                        return vector_op(OpKind::BiasAdd, res(g, op, 0), res(g, op, 0).shape[1]);
                      }},
                OpDef::Fusion::Elementwise, 1));

  r.add(fusible(OpDef{"BiasAddGrad",
                      false,
                      [](const Graph& g, const Inputs& i, OpAttrs&) {
                        const Shape& s = g.tensor(i.at(0)).shape;
                        require(s.size() >= 2, "rank >= 2 expected");
                        return std::vector<OutputSpec>{out({s[1]}, g.tensor(i[0]).dtype, TensorRole::Gradient)};
                      },
                      {},
                      [](const Graph& g, const Op& op) {
                        return vector_op(OpKind::BiasAddGrad, in(g, op, 0), res(g, op, 0).elements());
                      }},
                OpDef::Fusion::Reduction, 1));

  r.add(fusible(OpDef{"ReLU", false,
                      [](const Graph& g, const Inputs& i, OpAttrs&) {
                        const Tensor& x = g.tensor(i.at(0));
                        return std::vector<OutputSpec>{out(x.shape, x.dtype, TensorRole::Activation)};
                      },
                      [](BackwardContext& b, const Op& op, TensorId dy, const std::string& gname) {
                        b.give(op.inputs[0], b.graph().relu_grad(gname + "/ReluGrad", dy, op.outputs[0]));
                      },
                      [](const Graph& g, const Op& op) { return vector_op(OpKind::Relu, res(g, op, 0)); }},
                OpDef::Fusion::Elementwise, 1));

  r.add(fusible(OpDef{"ReluGrad",
                      false,
                      [](const Graph& g, const Inputs& i, OpAttrs&) {
                        require(g.tensor(i.at(0)).shape == g.tensor(i.at(1)).shape, "dy and y shapes differ");
                        return std::vector<OutputSpec>{
                            out(g.tensor(i[1]).shape, g.tensor(i[0]).dtype, TensorRole::Activation)};
                      },
                      {},
                      [](const Graph& g, const Op& op) { return vector_op(OpKind::ReluGrad, res(g, op, 0)); }},
                OpDef::Fusion::Elementwise, 2));

  r.add(
      fusible(OpDef{"ReLU6", false,
                    [](const Graph& g, const Inputs& i, OpAttrs&) {
                      const Tensor& x = g.tensor(i.at(0));
                      return std::vector<OutputSpec>{out(x.shape, x.dtype, TensorRole::Activation)};
                    },
                    [](BackwardContext& b, const Op& op, TensorId dy, const std::string& gname) {
                      b.give(op.inputs[0], b.graph().apply("ReLU6Grad", gname + "/ReLU6Grad", {dy, op.outputs[0]})[0]);
                    },
                    [](const Graph& g, const Op& op) { return vector_op(OpKind::Relu6, res(g, op, 0)); }},
              OpDef::Fusion::Elementwise, 2));

  r.add(fusible(OpDef{"ReLU6Grad",
                      false,
                      [](const Graph& g, const Inputs& i, OpAttrs&) {
                        require(g.tensor(i.at(0)).shape == g.tensor(i.at(1)).shape, "dy and y shapes differ");
                        return std::vector<OutputSpec>{
                            out(g.tensor(i[1]).shape, g.tensor(i[0]).dtype, TensorRole::Activation)};
                      },
                      {},
                      [](const Graph& g, const Op& op) { return vector_op(OpKind::Relu6Grad, res(g, op, 0)); }},
                OpDef::Fusion::Elementwise, 3));

  r.add(layout(OpDef{"MaxPool", false, pool_infer,
                     [](BackwardContext& b, const Op& op, TensorId dy, const std::string& gname) {
                       b.give(op.inputs[0], b.graph().max_pool_grad(gname + "/MaxPoolGrad", op.inputs[0], op.outputs[0],
                                                                    dy, op.pool));
                     },
                     pool_lower(OpKind::MaxPool)},
               {Format::NC1HWC0}, Format::NC1HWC0));

  r.add(layout(OpDef{"MaxPoolGrad",
                     false,
                     [](const Graph& g, const Inputs& i, OpAttrs&) {
                       require(g.tensor(i.at(1)).shape == g.tensor(i.at(2)).shape, "y and dy shapes differ");
                       return std::vector<OutputSpec>{
                           out(g.tensor(i[0]).shape, g.tensor(i[2]).dtype, TensorRole::Activation)};
                     },
                     {},
                     pool_lower(OpKind::MaxPoolGrad)},
               {Format::NC1HWC0, Format::NC1HWC0, Format::NC1HWC0}, Format::NC1HWC0));

  r.add(layout(OpDef{"Reshape", true,
                     [](const Graph& g, const Inputs& i, OpAttrs& a) {
                       const Tensor& x = g.tensor(i.at(0));
                       OutputSpec o = out(a.shape, x.dtype, TensorRole::Activation);
                       require(o.tensor.elements() == x.elements(), "reshape changes the element count");
                       return std::vector<OutputSpec>{o};
                     },
                     [](BackwardContext& b, const Op& op, TensorId dy, const std::string& gname) {
                       Graph& g = b.graph();
                       b.give(op.inputs[0], g.reshape(gname + "/Reshape", dy, g.tensor(op.inputs[0]).shape));
                     }},
               {Format::ND}, Format::ND));

  auto logits_labels = [](const Graph& g, const Inputs& i) {
    const Shape& ls = g.tensor(i.at(0)).shape;
    require(ls.size() == 2 && g.tensor(i.at(1)).shape == Shape{ls[0]}, "logits [N,C] and labels [N] expected");
    return ls;
  };
  auto softmax_lower = [](OpKind kind) {
    return [kind](const Graph& g, const Op& op) { return vector_op(kind, in(g, op, 0), in(g, op, 0).shape[0]); };
  };
  r.add(layout(OpDef{"SparseSoftmaxCrossEntropyWithLogits", false,
                     [logits_labels](const Graph& g, const Inputs& i, OpAttrs&) {
                       logits_labels(g, i);
                       return std::vector<OutputSpec>{out({1}, DType::F32, TensorRole::Loss)};
                     },
                     // The fused op yields the mean gradient directly, times the loss's sensitivity dy
                     // (the loss scale), which it reads as a third input.
                     [](BackwardContext& b, const Op& op, TensorId dy, const std::string& gname) {
                       b.give(op.inputs[0], b.graph().apply("SparseSoftmaxCrossEntropyWithLogitsGrad", gname,
                                                            {op.inputs[0], op.inputs[1], dy})[0]);
                     },
                     softmax_lower(OpKind::SoftmaxCrossEntropy)},
               {Format::ND, Format::ND}, Format::ND));

  r.add(layout(OpDef{"SparseSoftmaxCrossEntropyWithLogitsGrad",
                     false,
                     [logits_labels](const Graph& g, const Inputs& i, OpAttrs&) {
                       require(i.size() == 2 || (i.size() == 3 && g.tensor(i[2]).elements() == 1),
                               "logits, labels and an optional scalar sensitivity expected");
                       return std::vector<OutputSpec>{
                           out(logits_labels(g, i), g.tensor(i[0]).dtype, TensorRole::Activation)};
                     },
                     {},
                     softmax_lower(OpKind::SoftmaxCrossEntropyGrad)},
               {Format::ND, Format::ND}, Format::ND));

  r.add(layout(OpDef{"SoftmaxCrossEntropyWithLogits", false,
                     [](const Graph& g, const Inputs& i, OpAttrs&) {
                       const Tensor& l = g.tensor(i.at(0));
                       require(l.shape == g.tensor(i.at(1)).shape && l.shape.size() == 2,
                               "logits and one-hot labels [N,C] expected");
                       return std::vector<OutputSpec>{out({l.shape[0]}, l.dtype, TensorRole::Activation)};
                     },
                     [](BackwardContext& b, const Op& op, TensorId dy, const std::string& gname) {
                       b.give(op.inputs[0],
                              b.graph().softmax_cross_entropy_grad(gname, op.inputs[0], op.inputs[1], dy));
                     },
                     softmax_lower(OpKind::SoftmaxCrossEntropy)},
               {Format::ND, Format::ND}, Format::ND));

  r.add(layout(OpDef{"SoftmaxCrossEntropyWithLogitsGrad",
                     false,
                     [](const Graph& g, const Inputs& i, OpAttrs&) {
                       const Tensor& l = g.tensor(i.at(0));
                       require(g.tensor(i.at(2)).shape == Shape{l.shape.at(0)}, "dloss [N] expected");
                       return std::vector<OutputSpec>{out(l.shape, l.dtype, TensorRole::Activation)};
                     },
                     {},
                     softmax_lower(OpKind::SoftmaxCrossEntropyGrad)},
               {Format::ND, Format::ND, Format::ND}, Format::ND));

  r.add(fusible(OpDef{"AddN", false,
                      [](const Graph& g, const Inputs& i, OpAttrs&) {
                        require(i.size() >= 2, "AddN needs two or more inputs");
                        for (auto x : i)
                          require(g.tensor(x).shape == g.tensor(i[0]).shape, "AddN operand shapes differ");
                        const Tensor& x0 = g.tensor(i[0]);
                        return std::vector<OutputSpec>{out(x0.shape, x0.dtype, x0.role)};
                      },
                      [](BackwardContext& b, const Op& op, TensorId dy, const std::string&) {
                        for (auto x : op.inputs) b.give(x, dy);
                      },
                      [](const Graph& g, const Op& op) {
                        OpDesc d = vector_op(OpKind::AddN, res(g, op, 0));
                        d.operands = static_cast<std::int64_t>(op.inputs.size());
                        return d;
                      }},
                OpDef::Fusion::Elementwise, 1));

  r.add(fusible(OpDef{"ApplyMomentum",
                      false,
                      [](const Graph& g, const Inputs& i, OpAttrs&) {  // param, accum, lr, grad, momentum
                        require(i.size() == 5, "param, accum, lr, grad and momentum expected");
                        require(g.tensor(i[0]).shape == g.tensor(i[3]).shape &&
                                    g.tensor(i[0]).shape == g.tensor(i[1]).shape,
                                "param, accum and grad shapes differ");
                        require(g.tensor(i[2]).elements() == 1 && g.tensor(i[4]).elements() == 1,
                                "lr and momentum must be scalars");
                        return std::vector<OutputSpec>{OutputSpec::alias(0), OutputSpec::alias(1)};  // updated in place
                      },
                      {},
                      [](const Graph& g, const Op& op) { return vector_op(OpKind::Momentum, in(g, op, 0)); }},
                OpDef::Fusion::Elementwise, 4));

  r.add(layout(OpDef{"BatchNorm", false,
                     [](const Graph& g, const Inputs& i, OpAttrs&) {  // x, gamma, beta, moving mean, moving variance
                       const Shape& xs = g.tensor(i.at(0)).shape;
                       require(xs.size() == 4, "NCHW input expected");
                       require(i.size() == 5, "x, gamma, beta, moving_mean and moving_var expected");
                       for (std::size_t p = 1; p < 5; ++p)
                         require(g.tensor(i[p]).shape == Shape{xs[1]}, "per-channel operand of the wrong length");
                       // y, then the batch mean and variance in fp32; the moving statistics update in place.
                       return std::vector<OutputSpec>{out(xs, g.tensor(i[0]).dtype, TensorRole::Activation),
                                                      out({xs[1]}, DType::F32, TensorRole::Activation),
                                                      out({xs[1]}, DType::F32, TensorRole::Activation)};
                     },
                     [](BackwardContext& b, const Op& op, TensorId dy, const std::string& gname) {
                       Graph& g = b.graph();
                       const TensorId dx = g.batch_norm_grad(gname + "/BatchNormGrad", dy, op.inputs[0], op.inputs[1],
                                                             op.outputs[1], op.outputs[2]);
                       const Op& bng = g.ops().back();
                       b.give(op.inputs[1], bng.outputs[1]);
                       b.give(op.inputs[2], bng.outputs[2]);
                       b.give(op.inputs[0], dx);
                     },
                     [](const Graph& g, const Op& op) {
                       OpDesc d = vector_op(OpKind::BatchNorm, in(g, op, 0));
                       set_nchw(d, in(g, op, 0).shape);
                       return d;
                     }},
               {Format::NC1HWC0}, Format::NC1HWC0));

  r.add(layout(OpDef{"BatchNormGrad",
                     false,
                     [](const Graph& g, const Inputs& i, OpAttrs&) {  // dy, x, gamma, batch mean, batch variance
                       require(i.size() == 5, "dy, x, gamma, mean and var expected");
                       require(g.tensor(i[0]).shape == g.tensor(i[1]).shape, "dy and x shapes differ");
                       const Tensor& gamma = g.tensor(i[2]);
                       return std::vector<OutputSpec>{
                           out(g.tensor(i[1]).shape, g.tensor(i[0]).dtype, TensorRole::Activation),
                           out(gamma.shape, gamma.dtype, TensorRole::Gradient),
                           out(gamma.shape, gamma.dtype, TensorRole::Gradient)};
                     },
                     {},
                     [](const Graph& g, const Op& op) {
                       OpDesc d = vector_op(OpKind::BatchNormGrad, in(g, op, 1));
                       set_nchw(d, in(g, op, 1).shape);
                       return d;
                     }},
               {Format::NC1HWC0, Format::NC1HWC0}, Format::NC1HWC0));

  // Add and Mul broadcast their operands as numpy does (ops_nn.cpp has Sub and RealDiv); the
  // gradient of a broadcast operand is summed back to its shape.
  r.add(fusible(OpDef{"Add", false,
                      [](const Graph& g, const Inputs& i, OpAttrs&) {
                        const Tensor& a = g.tensor(i.at(0));
                        const Tensor& b = g.tensor(i.at(1));
                        require(a.dtype == b.dtype, "operand dtypes differ (missing Cast?)");
                        return std::vector<OutputSpec>{
                            out(broadcast_shape(a.shape, b.shape), a.dtype, TensorRole::Activation)};
                      },
                      [](BackwardContext& b, const Op& op, TensorId dy, const std::string& gname) {
                        for (int k = 0; k < 2; ++k)
                          if (b.wants(op.inputs[k]))
                            b.give(op.inputs[k],
                                   reduce_to(b.graph(), dy, op.inputs[k], gname + "/ReduceSum" + std::to_string(k)));
                      },
                      [](const Graph& g, const Op& op) {
                        return in(g, op, 0).shape == in(g, op, 1).shape ? vector_op(OpKind::Add, res(g, op, 0))
                                                                        : elementwise_desc(g, op, 1);
                      }},
                OpDef::Fusion::Elementwise, 1));

  r.add(fusible(OpDef{"Mul",
                      false,  // by a scalar (loss-scale unscale, weight decay) or any broadcast operand
                      [](const Graph& g, const Inputs& i, OpAttrs& a) {
                        const Tensor& x = g.tensor(i.at(0));
                        const Tensor& y = g.tensor(i.at(1));
                        require(y.elements() == 1 || x.dtype == y.dtype, "operand dtypes differ (missing Cast?)");
                        return std::vector<OutputSpec>{out(broadcast_shape(x.shape, y.shape), x.dtype, a.role)};
                      },
                      [](BackwardContext& b, const Op& op, TensorId dy, const std::string& gname) {
                        Graph& g = b.graph();
                        for (int k = 0; k < 2; ++k)
                          if (b.wants(op.inputs[k])) {
                            const std::string at = gname + "/Mul" + std::to_string(k);
                            const TensorId d = g.apply("Mul", at, {dy, op.inputs[1 - k]})[0];
                            b.give(op.inputs[k], reduce_to(g, d, op.inputs[k], at + "/ReduceSum"));
                          }
                      },
                      [](const Graph& g, const Op& op) {
                        return in(g, op, 1).elements() == 1 ? vector_op(OpKind::Mul, res(g, op, 0))
                                                            : elementwise_desc(g, op, 1);
                      }},
                OpDef::Fusion::Elementwise, 1));

  r.add(fusible(OpDef{"Cast", false,
                      [](const Graph& g, const Inputs& i, OpAttrs& a) {
                        const Tensor& x = g.tensor(i.at(0));
                        const TensorRole role =
                            x.role == TensorRole::Gradient ? TensorRole::Gradient : TensorRole::Activation;
                        return std::vector<OutputSpec>{out(x.shape, a.dtype, role)};
                      },
                      [](BackwardContext& b, const Op& op, TensorId dy, const std::string& gname) {
                        Graph& g = b.graph();
                        b.give(op.inputs[0], g.cast(gname + "/Cast", dy, g.tensor(op.inputs[0]).dtype));
                      },
                      [](const Graph& g, const Op& op) {
                        OpDesc d = vector_op(OpKind::Cast, in(g, op, 0));
                        d.out_precision = storage_precision(res(g, op, 0).dtype);
                        return d;
                      }},
                OpDef::Fusion::Elementwise, 1));

  r.add(layout(
      OpDef{"ReduceMean", false,  // over H and W: [N,C,H,W] -> [N,C]; or a vector -> [1]
            [](const Graph& g, const Inputs& i, OpAttrs&) {
              const Tensor& x = g.tensor(i.at(0));
              require(x.shape.size() == 4 || x.shape.size() == 1,
                      "NCHW (spatial mean) or a vector (full mean) expected");
              return std::vector<OutputSpec>{
                  out(x.shape.size() == 4 ? Shape{x.shape[0], x.shape[1]} : Shape{1}, x.dtype, TensorRole::Activation)};
            },
            [](BackwardContext& b, const Op& op, TensorId dy, const std::string& gname) {
              Graph& g = b.graph();
              b.give(op.inputs[0], g.reduce_mean_grad(gname + "/ReduceMeanGrad", dy, g.tensor(op.inputs[0]).shape));
            },
            [](const Graph& g, const Op& op) {
              return vector_op(OpKind::ReduceMean, in(g, op, 0), res(g, op, 0).elements());
            }},
      {Format::Any}, Format::ND));

  r.add(layout(OpDef{"ReduceMeanGrad",
                     false,  // broadcast back to the input shape, divided by the count
                     [](const Graph& g, const Inputs& i, OpAttrs& a) {
                       return std::vector<OutputSpec>{out(a.shape, g.tensor(i.at(0)).dtype, TensorRole::Activation)};
                     },
                     {},
                     [](const Graph& g, const Op& op) {
                       return vector_op(OpKind::ReduceMeanGrad, res(g, op, 0), in(g, op, 0).elements());
                     }},
               {Format::Any}, Format::NC1HWC0));

  r.add(layout(OpDef{"OneHot",
                     false,  // labels [N] -> smoothed one-hot [N, classes]
                     [](const Graph& g, const Inputs& i, OpAttrs& a) {
                       const Tensor& l = g.tensor(i.at(0));
                       require(l.shape.size() == 1 && a.count > 1, "labels [N] and at least two classes expected");
                       return std::vector<OutputSpec>{out({l.shape[0], a.count}, a.dtype, TensorRole::Activation)};
                     },
                     {},
                     [](const Graph& g, const Op& op) {
                       return vector_op(OpKind::OneHot, res(g, op, 0), in(g, op, 0).elements());
                     }},
               {}, Format::ND));

  r.add({"Gather",
         false,  // one element of the on-device learning-rate schedule
         [](const Graph& g, const Inputs& i, OpAttrs&) {
           require(g.tensor(i.at(0)).shape.size() == 1 && g.tensor(i.at(1)).elements() == 1,
                   "1-D table and scalar index");
           return std::vector<OutputSpec>{out({1}, g.tensor(i[0]).dtype, TensorRole::Activation)};
         },
         {},
         [](const Graph& g, const Op& op) { return vector_op(OpKind::Gather, res(g, op, 0)); }});

  r.add({"AssignAdd",
         false,  // global step += 1, in place
         [](const Graph& g, const Inputs& i, OpAttrs&) {
           require(i.size() == 2 && g.tensor(i[0]).elements() == 1 && g.tensor(i[1]).elements() == 1,
                   "scalar operands expected");
           return std::vector<OutputSpec>{OutputSpec::alias(0)};
         },
         {},
         [](const Graph& g, const Op& op) { return vector_op(OpKind::AssignAdd, res(g, op, 0)); }});

  // Gradient accumulation (pipeline parallelism's micro-batches; MindSpore's assign_add into its
  // accu_grads): a micro-batch's gradient added into the step's accumulator, in place.
  r.add({"AccumulateGrad",
         false,
         [](const Graph& g, const Inputs& i, OpAttrs&) {
           require(i.size() == 2 && g.tensor(i[0]).shape == g.tensor(i[1]).shape &&
                       g.tensor(i[0]).dtype == g.tensor(i[1]).dtype,
                   "an accumulator and a gradient of its shape and type expected");
           return std::vector<OutputSpec>{OutputSpec::alias(0)};
         },
         {},
         [](const Graph& g, const Op& op) { return vector_op(OpKind::Add, in(g, op, 0)); }});

  // LARS (MindSpore's nn.LARS over Momentum, as MLPerf ResNet-50 submissions train at large
  // batch): per parameter it applies to, SquareSumAll gives the sums of squares of the weight and
  // its gradient in one kernel, and LARSUpdate (Ascend's LarsV2Update kernel) scales the gradient
  // by the layer's trust ratio, coefficient · ||w|| / (||g|| + wd · ||w||), weight decay included.
  r.add({"SquareSumAll",
         false,  // weight, gradient -> sum(w^2), sum(g^2)
         [](const Graph& g, const Inputs& i, OpAttrs&) {
           require(i.size() == 2 && g.tensor(i[0]).shape == g.tensor(i[1]).shape, "two tensors of one shape expected");
           return std::vector<OutputSpec>{out({1}, DType::F32, TensorRole::Activation),
                                          out({1}, DType::F32, TensorRole::Activation)};
         },
         {},
         [](const Graph& g, const Op& op) {
           OpDesc d = vector_op(OpKind::FusedElementwise, in(g, op, 0), 2);
           d.operands = 2;   // both read once
           d.results = 0;    // two scalars
           d.fused_ops = 4;  // a square and an add for each
           return d;
         }});
  r.add({"LARSUpdate",
         false,  // weight, gradient, sum(w^2), sum(g^2), weight decay, learning rate -> the scaled gradient
         [](const Graph& g, const Inputs& i, OpAttrs&) {
           require(i.size() == 6 && g.tensor(i[0]).shape == g.tensor(i[1]).shape,
                   "weight, gradient, their sums of squares, weight decay and learning rate expected");
           for (std::size_t k = 2; k < 6; ++k) require(g.tensor(i[k]).elements() == 1, "scalar operands expected");
           return std::vector<OutputSpec>{out(g.tensor(i[1]).shape, g.tensor(i[1]).dtype, TensorRole::Gradient)};
         },
         {},
         [](const Graph& g, const Op& op) {
           OpDesc d = vector_op(OpKind::Elementwise, in(g, op, 1), 4);  // the four scalars
           d.operands = 2;                                              // weight and gradient
           d.results = 1;                                               // the scaled gradient
           d.fused_ops = 3;  // g + wd · w, times the trust ratio (the ratio's scalar work aside)
           return d;
         }});

  // The backend's kernels: the graph compiler's passes put them in the executed graph -------------
  auto per_channel = [](const Graph& g, const Inputs& i, std::size_t from, std::size_t count) {
    const Shape& xs = g.tensor(i.at(0)).shape;
    require(xs.size() == 4, "NCHW input expected");
    require(i.size() >= from + count, std::to_string(from + count) + " inputs expected");
    for (std::size_t p = from; p < from + count; ++p)
      require(g.tensor(i[p]).shape == Shape{xs[1]}, "per-channel operand of the wrong length");
    return xs[1];
  };
  r.add(fusible(layout(OpDef{"BNTrainingReduce",
                             false,
                             [per_channel](const Graph& g, const Inputs& i, OpAttrs&) {  // x -> sum, square sum
                               const std::int64_t c = per_channel(g, i, 1, 0);
                               return std::vector<OutputSpec>{out({c}, DType::F32, TensorRole::Activation),
                                                              out({c}, DType::F32, TensorRole::Activation)};
                             },
                             {},
                             [](const Graph& g, const Op& op) {
                               return vector_op(OpKind::BNTrainingReduce, in(g, op, 0), 2 * in(g, op, 0).shape[1]);
                             }},
                       {Format::NC1HWC0}, Format::Any),
                OpDef::Fusion::Reduction, 2));
  r.add(fusible(
      layout(OpDef{"BNTrainingUpdate",
                   false,
                   // x, sum, square sum, gamma, beta, moving mean, moving variance -> y, batch mean, batch
                   // variance; the moving statistics update in place
                   [per_channel](const Graph& g, const Inputs& i, OpAttrs&) {
                     const std::int64_t c = per_channel(g, i, 1, 6);
                     return std::vector<OutputSpec>{
                         out(g.tensor(i[0]).shape, g.tensor(i[0]).dtype, TensorRole::Activation),
                         out({c}, DType::F32, TensorRole::Activation), out({c}, DType::F32, TensorRole::Activation)};
                   },
                   {},
                   [](const Graph& g, const Op& op) { return vector_op(OpKind::BNTrainingUpdate, in(g, op, 0)); }},
             {Format::NC1HWC0}, Format::NC1HWC0),
      OpDef::Fusion::Elementwise, 4));
  r.add(fusible(layout(OpDef{"BNTrainingUpdateGrad",
                             false,
                             // dy, x, batch mean, batch variance -> dgamma, dbeta (in attrs.dtype)
                             [per_channel](const Graph& g, const Inputs& i, OpAttrs& a) {
                               require(g.tensor(i.at(0)).shape == g.tensor(i.at(1)).shape, "dy and x shapes differ");
                               const std::int64_t c = per_channel(g, i, 2, 2);
                               return std::vector<OutputSpec>{out({c}, a.dtype, TensorRole::Gradient),
                                                              out({c}, a.dtype, TensorRole::Gradient)};
                             },
                             {},
                             [](const Graph& g, const Op& op) {
                               return vector_op(OpKind::BNTrainingUpdateGrad, in(g, op, 1), 2 * in(g, op, 1).shape[1]);
                             }},
                       {Format::NC1HWC0, Format::NC1HWC0}, Format::Any),
                OpDef::Fusion::Reduction, 4));
  r.add(fusible(
      layout(OpDef{"BNTrainingReduceGrad",
                   false,
                   // dy, x, dgamma, dbeta, gamma, batch mean, batch variance -> dx
                   [per_channel](const Graph& g, const Inputs& i, OpAttrs&) {
                     require(g.tensor(i.at(0)).shape == g.tensor(i.at(1)).shape, "dy and x shapes differ");
                     per_channel(g, i, 2, 5);
                     return std::vector<OutputSpec>{
                         out(g.tensor(i[1]).shape, g.tensor(i[0]).dtype, TensorRole::Activation)};
                   },
                   {},
                   [](const Graph& g, const Op& op) { return vector_op(OpKind::BNTrainingReduceGrad, in(g, op, 1)); }},
             {Format::NC1HWC0, Format::NC1HWC0}, Format::NC1HWC0),
      OpDef::Fusion::Elementwise, 6));
  r.add(fusible(layout(OpDef{"BNInfer",
                             false,
                             // x, gamma, beta, moving mean, moving variance -> y (inference: nothing updated)
                             [per_channel](const Graph& g, const Inputs& i, OpAttrs&) {
                               per_channel(g, i, 1, 4);
                               return std::vector<OutputSpec>{
                                   out(g.tensor(i[0]).shape, g.tensor(i[0]).dtype, TensorRole::Activation)};
                             },
                             {},
                             [](const Graph& g, const Op& op) { return vector_op(OpKind::BNInfer, in(g, op, 0)); }},
                       {Format::NC1HWC0}, Format::NC1HWC0),
                OpDef::Fusion::Elementwise, 4));

  r.add({"TransData",
         false,
         // x -> x in the layout attrs.format
         [](const Graph& g, const Inputs& i, OpAttrs& a) {
           const Tensor& x = g.tensor(i.at(0));
           require(a.format != Format::Any, "a target layout is needed");
           OutputSpec o = out(x.shape, x.dtype, x.role == TensorRole::Gradient ? x.role : TensorRole::Activation);
           o.tensor.format = a.format;
           return std::vector<OutputSpec>{o};
         },
         {},
         [](const Graph& g, const Op& op) {
           const Tensor& x = in(g, op, 0);
           OpDesc d = vector_op(OpKind::TransData, x);
           d.elements = stored_elements(x.shape, x.format);  // read as stored, padding included
           d.out_elements = stored_elements(x.shape, op.format);
           return d;
         }});

  // The optimizer chains Ascend's backend fuses by default take the same form: the unscale Mul
  // and ApplyMomentum (FusedMulApplyMomentum), with weight decay too (FusedWeightScaleApplyMomentum).
  // UB fusion's Vector kernels (UBFusedElementwise: BNTrainingUpdate with its element-wise consumers,
  // an element-wise op with the BNTrainingUpdateGrad it feeds) take the same form too.
  for (const char* fused :
       {"FusedElementwise", "FusedMulApplyMomentum", "FusedWeightScaleApplyMomentum", "UBFusedElementwise"})
    r.add({fused,
           false,
           // element-wise ops (and a reduction ending them) as one kernel; attrs.count: Vector
           // operations per element. Made by the graph-kernel fusion pass, which gives its outputs.
           [](const Graph&, const Inputs&, OpAttrs&) -> std::vector<OutputSpec> {
             throw std::invalid_argument("fused kernels are made by the compiler's fusion passes only");
           },
           {},
           [](const Graph& g, const Op& op) {
             std::int64_t size = 0;
             for (auto t : op.inputs) size = std::max(size, g.tensor(t).elements());
             for (auto t : op.outputs) size = std::max(size, g.tensor(t).elements());
             OpDesc d;
             d.kind = OpKind::FusedElementwise;
             d.elements = size;
             d.operands = d.results = 0;
             d.out_elements = 0;
             d.fused_ops = op.count;
             bool in_set = false, out_set = false;
             for (auto t : op.inputs)
               if (g.tensor(t).elements() == size) {
                 ++d.operands;
                 if (!in_set) d.precision = storage_precision(g.tensor(t).dtype);
                 in_set = true;
               }
             for (auto t : op.outputs) {
               if (g.tensor(t).elements() < size) {
                 d.out_elements += g.tensor(t).elements();
                 continue;
               }
               ++d.results;
               if (!out_set) d.out_precision = storage_precision(g.tensor(t).dtype);
               out_set = true;
             }
             if (!out_set) d.out_precision = aicore::Precision::FP32;  // a fused reduction's sums
             return d;
           }});

  // UB fusion (the Ascend backend's buffer fusion): a Cube op with the consumers of its result
  // computed on each output tile while it is in the Unified Buffer. Inputs: the Cube op's two
  // operands, then the consumers' other operands; output 0 has the Cube result's shape (the last
  // element-wise consumer's result, or the Cube result itself beside a fused reduction's sums,
  // outputs 1...); attrs: the Cube op's, with count = the consumers' Vector operations per element.
  for (const char* base : {"Conv2D", "Conv2DBackpropInput", "MatMul"}) {
    const OpDef& b = r.at(base);
    auto cube_part = [](const Op& op) {  // the Cube op inside the fused kernel
      Op c = op;
      c.inputs = {op.inputs.at(0), op.inputs.at(1)};
      c.outputs = {op.outputs.at(0)};
      return c;
    };
    OpDef f = b;
    f.name = std::string("UBFused") + base;
    f.infer = [](const Graph&, const Inputs&, OpAttrs&) -> std::vector<OutputSpec> {
      throw std::invalid_argument("UB-fused kernels are made by the compiler's ub_fusion pass only");
    };
    f.backward = {};
    f.compute = {};
    f.fusion = OpDef::Fusion::None;
    f.lower = [cube_part, lower = b.lower](const Graph& g, const Op& op) {
      OpDesc d = lower(g, cube_part(op));
      const std::int64_t size = g.tensor(op.outputs[0]).elements();
      d.epilogue_ops = op.count;
      for (std::size_t k = 2; k < op.inputs.size(); ++k)
        d.epilogue_operands += g.tensor(op.inputs[k]).elements() == size;
      for (std::size_t k = 1; k < op.outputs.size(); ++k) d.epilogue_sums += g.tensor(op.outputs[k]).elements();
      return d;
    };
    if (b.macs) f.macs = [cube_part, macs = b.macs](const Graph& g, const Op& op) { return macs(g, cube_part(op)); };
    if (b.workspace)
      f.workspace = [cube_part, ws = b.workspace](const Graph& g, const Op& op) { return ws(g, cube_part(op)); };
    r.add(std::move(f));
  }

  r.add({"AtomicAddrClean",
         false,
         // zeroes the outputs of the next kernel, whose blocks add partial results into them (in place)
         [](const Graph&, const Inputs& i, OpAttrs&) {
           require(!i.empty(), "a tensor to clear expected");
           std::vector<OutputSpec> outs;
           for (std::size_t k = 0; k < i.size(); ++k) outs.push_back(OutputSpec::alias(static_cast<int>(k)));
           return outs;
         },
         {},
         [](const Graph& g, const Op& op) {
           // Partial sums accumulate in fp32 whatever the result's type.
           OpDesc d = vector_op(OpKind::AtomicAddrClean, in(g, op, 0));
           d.precision = d.out_precision = aicore::Precision::FP32;
           d.elements = 0;
           for (auto t : op.inputs) d.elements += g.tensor(t).elements();
           return d;
         }});
}

}  // namespace ascendsim::workloads
