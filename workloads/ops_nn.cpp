// The rest of the operators imported networks use (workloads/onnx_import.h): activations,
// average pooling, broadcasting arithmetic, softmax and the tensor-shuffling ops, each with its
// shape rule, backward rule (the ops MindSpore's bprop emits) and lowering to the AI core's
// Vector unit.
#include <numeric>
#include <stdexcept>

#include "workloads/op_registry.h"
#include "workloads/op_rules.h"

namespace ascendsim::workloads {

using aicore::OpDesc;
using aicore::OpKind;
using namespace rules;

namespace {

/// A gradient's role: a parameter's gradient stays one.
TensorRole role_of(const Tensor& x) { return x.role == TensorRole::Gradient ? x.role : TensorRole::Activation; }

std::vector<OutputSpec> like(const Tensor& x) { return {out(x.shape, x.dtype, TensorRole::Activation)}; }

/// An element-wise op of `ops` Vector operations per element; its output is shaped as input 0.
OpDef unary(const std::string& name, std::int64_t ops,
            std::function<void(BackwardContext&, const Op&, TensorId, const std::string&)> backward = {}) {
  OpDef d{name, false, [](const Graph& g, const Inputs& i, OpAttrs&) { return like(g.tensor(i.at(0))); },
          std::move(backward), [ops](const Graph& g, const Op& op) { return elementwise_desc(g, op, ops); }};
  return d;
}

/// A gradient op of `dy` and a saved tensor of the same shape.
OpDef gradient(const std::string& name, std::int64_t ops) {
  return {name,
          false,
          [](const Graph& g, const Inputs& i, OpAttrs&) {
            require(i.size() == 2 && g.tensor(i[0]).shape == g.tensor(i[1]).shape, "dy and its saved tensor differ");
            return like(g.tensor(i[0]));
          },
          {},
          [ops](const Graph& g, const Op& op) { return elementwise_desc(g, op, ops); }};
}

/// Backward of y = f(x) where the gradient op reads (dy, x) or (dy, y).
std::function<void(BackwardContext&, const Op&, TensorId, const std::string&)> grad_by(const std::string& op_type,
                                                                                       bool of_output) {
  return [op_type, of_output](BackwardContext& b, const Op& op, TensorId dy, const std::string& gname) {
    const TensorId saved = of_output ? op.outputs[0] : op.inputs[0];
    b.give(op.inputs[0], b.graph().apply(op_type, gname + "/" + op_type, {dy, saved}, op)[0]);
  };
}

std::int64_t normalised_axis(std::int64_t axis, std::size_t rank) {
  const auto r = static_cast<std::int64_t>(rank);
  if (axis < 0) axis += r;
  require(axis >= 0 && axis < r, "axis out of range for rank " + std::to_string(r));
  return axis;
}

}  // namespace

void register_nn_ops(OpRegistry& r) {
  // Broadcast arithmetic beyond Add and Mul (ops.cpp) ------------------------------------------
  r.add({"ReduceSum",
         false,  // a broadcast result's gradient summed back to attrs.shape
         [](const Graph& g, const Inputs& i, OpAttrs& a) {
           const Tensor& x = g.tensor(i.at(0));
           require(broadcast_shape(x.shape, a.shape) == x.shape,
                   "cannot sum " + shape_string(x.shape) + " to " + shape_string(a.shape));
           return std::vector<OutputSpec>{out(a.shape, x.dtype, role_of(x))};
         },
         {},
         [](const Graph& g, const Op& op) {
           return vector_op(OpKind::ReduceSum, in(g, op, 0), std::max<std::int64_t>(1, res(g, op, 0).elements()));
         }});
  r.add(unary("Neg", 1, [](BackwardContext& b, const Op& op, TensorId dy, const std::string& gname) {
    b.give(op.inputs[0], b.graph().apply("Neg", gname + "/Neg", {dy})[0]);
  }));
  auto binary_shape = [](const Graph& g, const Inputs& i, OpAttrs&) {
    const Tensor& a = g.tensor(i.at(0));
    const Tensor& b = g.tensor(i.at(1));
    require(a.dtype == b.dtype, "operand dtypes differ (missing Cast?)");
    return std::vector<OutputSpec>{out(broadcast_shape(a.shape, b.shape), a.dtype, TensorRole::Activation)};
  };
  r.add({"Sub", false, binary_shape,
         [](BackwardContext& b, const Op& op, TensorId dy, const std::string& gname) {
           Graph& g = b.graph();
           if (b.wants(op.inputs[0])) b.give(op.inputs[0], reduce_to(g, dy, op.inputs[0], gname + "/ReduceSum0"));
           if (b.wants(op.inputs[1])) {
             const TensorId neg = g.apply("Neg", gname + "/Neg", {dy})[0];
             b.give(op.inputs[1], reduce_to(g, neg, op.inputs[1], gname + "/ReduceSum1"));
           }
         },
         [](const Graph& g, const Op& op) { return elementwise_desc(g, op, 1); }});
  r.add({"RealDiv", false, binary_shape,
         // y = a / b: da = dy / b, db = -(dy / b) * y
         [](BackwardContext& b, const Op& op, TensorId dy, const std::string& gname) {
           Graph& g = b.graph();
           const TensorId q = g.apply("RealDiv", gname + "/RealDiv", {dy, op.inputs[1]})[0];
           if (b.wants(op.inputs[0])) b.give(op.inputs[0], reduce_to(g, q, op.inputs[0], gname + "/ReduceSum0"));
           if (b.wants(op.inputs[1])) {
             const TensorId m =
                 g.apply("Mul", gname + "/Mul", {g.apply("Neg", gname + "/Neg", {q})[0], op.outputs[0]})[0];
             b.give(op.inputs[1], reduce_to(g, m, op.inputs[1], gname + "/ReduceSum1"));
           }
         },
         [](const Graph& g, const Op& op) { return elementwise_desc(g, op, 4); }});  // reciprocal by Newton steps

  // Activations --------------------------------------------------------------------------------
  r.add(unary("Sigmoid", 4, grad_by("SigmoidGrad", true)));     // 1 / (1 + exp(-x)): neg, exp, add, reciprocal
  r.add(gradient("SigmoidGrad", 3));                            // dy * y * (1 - y)
  r.add(unary("HSigmoid", 3, grad_by("HSigmoidGrad", false)));  // min(max(alpha x + beta, 0), 1)
  r.add(gradient("HSigmoidGrad", 3));
  r.add(unary("HSwish", 4, grad_by("HSwishGrad", false)));  // x * relu6(x + 3) / 6
  r.add(gradient("HSwishGrad", 5));
  r.add(unary("ClipByValue", 2, grad_by("ClipByValueGrad", false)));  // min(max(x, alpha), beta)
  r.add(gradient("ClipByValueGrad", 3));

  // Training only: Dropout keeps each element with probability attrs.alpha, scaled by 1/alpha,
  // and writes the mask its gradient reads (MindSpore's DropoutGenMask + DropoutDoMask).
  {
    OpDef d{"Dropout", false,
            [](const Graph& g, const Inputs& i, OpAttrs& a) {
              const Tensor& x = g.tensor(i.at(0));
              require(a.alpha > 0 && a.alpha <= 1, "keep probability must lie in (0, 1]");
              return std::vector<OutputSpec>{out(x.shape, x.dtype, TensorRole::Activation),
                                             out(x.shape, DType::I8, TensorRole::Activation)};
            },
            [](BackwardContext& b, const Op& op, TensorId dy, const std::string& gname) {
              b.give(op.inputs[0], b.graph().apply("DropoutGrad", gname + "/DropoutGrad", {dy, op.outputs[1]}, op)[0]);
            },
            [](const Graph& g, const Op& op) { return elementwise_desc(g, op, 3); }};  // random, compare, select
    d.identity_in_inference = true;
    r.add(std::move(d));
  }
  r.add({"DropoutGrad",
         false,
         [](const Graph& g, const Inputs& i, OpAttrs&) {
           require(i.size() == 2 && g.tensor(i[0]).shape == g.tensor(i[1]).shape, "dy and mask shapes differ");
           return like(g.tensor(i[0]));
         },
         {},
         [](const Graph& g, const Op& op) { return elementwise_desc(g, op, 2); }});

  // Average pooling ----------------------------------------------------------------------------
  r.add(layout(OpDef{"AvgPool", false, pool_infer,
                     [](BackwardContext& b, const Op& op, TensorId dy, const std::string& gname) {
                       OpAttrs a = op;
                       a.shape = b.graph().tensor(op.inputs[0]).shape;
                       b.give(op.inputs[0], b.graph().apply("AvgPoolGrad", gname + "/AvgPoolGrad", {dy}, a)[0]);
                     },
                     pool_lower(OpKind::AvgPool)},
               {Format::NC1HWC0}, Format::NC1HWC0));
  r.add(layout(OpDef{"AvgPoolGrad",
                     false,  // dy -> dx of shape attrs.shape
                     [](const Graph& g, const Inputs& i, OpAttrs& a) {
                       require(a.shape.size() == 4, "the input's NCHW shape expected");
                       return std::vector<OutputSpec>{out(a.shape, g.tensor(i.at(0)).dtype, TensorRole::Activation)};
                     },
                     {},
                     pool_lower(OpKind::AvgPoolGrad, true)},
               {Format::NC1HWC0}, Format::NC1HWC0));

  // Softmax over the last axis: max, subtract, exp, sum and divide per element of each row.
  r.add({"Softmax", false, [](const Graph& g, const Inputs& i, OpAttrs&) { return like(g.tensor(i.at(0))); },
         [](BackwardContext& b, const Op& op, TensorId dy, const std::string& gname) {
           b.give(op.inputs[0], b.graph().apply("SoftmaxGrad", gname + "/SoftmaxGrad", {dy, op.outputs[0]})[0]);
         },
         [](const Graph& g, const Op& op) { return elementwise_desc(g, op, 5); }});
  r.add(gradient("SoftmaxGrad", 4));  // y * (dy - sum(dy * y))

  // Tensor shuffling: copies on the Vector unit ----------------------------------------------------
  // Concat along attrs.axis; its gradient is each input's slice of dy.
  r.add({"Concat", false,
         [](const Graph& g, const Inputs& i, OpAttrs& a) {
           require(!i.empty(), "at least one input");
           const Tensor& x0 = g.tensor(i[0]);
           a.axis = normalised_axis(a.axis, x0.shape.size());
           Shape s = x0.shape;
           const auto ax = static_cast<std::size_t>(a.axis);
           s[ax] = 0;
           for (auto t : i) {
             const Tensor& x = g.tensor(t);
             require(x.shape.size() == s.size() && x.dtype == x0.dtype, "inputs of different ranks or dtypes");
             for (std::size_t k = 0; k < s.size(); ++k)
               require(k == ax || x.shape[k] == x0.shape[k], "inputs differ off the concatenated axis");
             s[ax] += x.shape[ax];
           }
           return std::vector<OutputSpec>{out(s, x0.dtype, TensorRole::Activation)};
         },
         [](BackwardContext& b, const Op& op, TensorId dy, const std::string& gname) {
           Graph& g = b.graph();
           std::int64_t begin = 0;
           for (std::size_t k = 0; k < op.inputs.size(); ++k) {
             const Shape s = g.tensor(op.inputs[k]).shape;  // a copy: apply() grows the tensors
             if (b.wants(op.inputs[k])) {
               OpAttrs a;
               a.axis = op.axis;
               a.count = begin;
               a.shape = s;
               b.give(op.inputs[k], g.apply("StridedSlice", gname + "/StridedSlice" + std::to_string(k), {dy}, a)[0]);
             }
             begin += s[static_cast<std::size_t>(op.axis)];
           }
         },
         [](const Graph& g, const Op& op) {
           return vector_op(OpKind::TransData, res(g, op, 0), res(g, op, 0).elements());
         }});
  r.add({"StridedSlice",
         false,  // the attrs.shape piece of x starting at attrs.count along attrs.axis
         [](const Graph& g, const Inputs& i, OpAttrs& a) {
           const Tensor& x = g.tensor(i.at(0));
           a.axis = normalised_axis(a.axis, x.shape.size());
           require(a.shape.size() == x.shape.size(), "a piece of the input's rank expected");
           for (std::size_t k = 0; k < x.shape.size(); ++k)
             require(static_cast<std::int64_t>(k) == a.axis ? a.count >= 0 && a.count + a.shape[k] <= x.shape[k]
                                                            : a.shape[k] == x.shape[k],
                     "the piece " + shape_string(a.shape) + " at " + std::to_string(a.count) + " is not within " +
                         shape_string(x.shape));
           return std::vector<OutputSpec>{out(a.shape, x.dtype, role_of(x))};
         },
         // A slice of an activation (ONNX Slice, Split): its gradient is dy in place in zeros.
         [](BackwardContext& b, const Op& op, TensorId dy, const std::string& gname) {
           OpAttrs a;
           a.axis = op.axis;
           a.count = op.count;
           a.shape = b.graph().tensor(op.inputs[0]).shape;
           b.give(op.inputs[0], b.graph().apply("StridedSliceGrad", gname + "/StridedSliceGrad", {dy}, a)[0]);
         },
         [](const Graph& g, const Op& op) {
           return vector_op(OpKind::TransData, res(g, op, 0), res(g, op, 0).elements());
         }});
  r.add({"StridedSliceGrad",
         false,  // dy -> zeros of attrs.shape with dy at attrs.count along attrs.axis
         [](const Graph& g, const Inputs& i, OpAttrs& a) {
           const Tensor& dy = g.tensor(i.at(0));
           require(a.shape.size() == dy.shape.size(), "the sliced tensor's shape, of dy's rank, expected");
           a.axis = normalised_axis(a.axis, dy.shape.size());
           for (std::size_t k = 0; k < dy.shape.size(); ++k)
             require(static_cast<std::int64_t>(k) == a.axis ? a.count >= 0 && a.count + dy.shape[k] <= a.shape[k]
                                                            : a.shape[k] == dy.shape[k],
                     "the piece " + shape_string(dy.shape) + " at " + std::to_string(a.count) + " is not within " +
                         shape_string(a.shape));
           return std::vector<OutputSpec>{out(a.shape, dy.dtype, role_of(dy))};
         },
         {},
         [](const Graph& g, const Op& op) {  // reads dy, writes the whole gradient (zeros included)
           return vector_op(OpKind::TransData, in(g, op, 0), res(g, op, 0).elements());
         }});
  // Transpose by the permutation attrs.shape; its gradient is the inverse permutation.
  r.add({"Transpose", false,
         [](const Graph& g, const Inputs& i, OpAttrs& a) {
           const Tensor& x = g.tensor(i.at(0));
           require(a.shape.size() == x.shape.size(), "a permutation of the input's axes expected");
           Shape sorted = a.shape, s(x.shape.size());
           std::sort(sorted.begin(), sorted.end());
           for (std::size_t k = 0; k < s.size(); ++k) {
             require(sorted[k] == static_cast<std::int64_t>(k), "perm " + shape_string(a.shape) + " is no permutation");
             s[k] = x.shape[static_cast<std::size_t>(a.shape[k])];
           }
           return std::vector<OutputSpec>{out(s, x.dtype, role_of(x))};
         },
         [](BackwardContext& b, const Op& op, TensorId dy, const std::string& gname) {
           OpAttrs a;
           a.shape.resize(op.shape.size());
           for (std::size_t k = 0; k < op.shape.size(); ++k)
             a.shape[static_cast<std::size_t>(op.shape[k])] = static_cast<std::int64_t>(k);
           b.give(op.inputs[0], b.graph().apply("Transpose", gname + "/Transpose", {dy}, a)[0]);
         },
         [](const Graph& g, const Op& op) {
           return vector_op(OpKind::TransData, in(g, op, 0), res(g, op, 0).elements());
         }});
}

}  // namespace ascendsim::workloads
