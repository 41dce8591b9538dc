#include "workloads/graph.h"

#include <numeric>
#include <stdexcept>

namespace ascendsim::workloads {

std::int64_t dtype_bytes(DType t) {
  switch (t) {
    case DType::F32:
      return 4;
    case DType::F16:
      return 2;
    case DType::I32:
      return 4;
    case DType::I8:
      return 1;
  }
  return 0;
}

const char* dtype_name(DType t) {
  switch (t) {
    case DType::F32:
      return "fp32";
    case DType::F16:
      return "fp16";
    case DType::I32:
      return "int32";
    case DType::I8:
      return "int8";
  }
  return "?";
}

std::string shape_string(const Shape& s) {
  std::string out = "[";
  for (std::size_t i = 0; i < s.size(); ++i) out += (i ? "," : "") + std::to_string(s[i]);
  return out + "]";
}

bool is_persistent(TensorRole r) {
  return r == TensorRole::Parameter || r == TensorRole::OptimizerState || r == TensorRole::State ||
         r == TensorRole::Constant;
}

std::int64_t Tensor::elements() const {
  return std::accumulate(shape.begin(), shape.end(), std::int64_t{1}, std::multiplies<>());
}

const char* op_type_name(OpType t) {
  switch (t) {
    case OpType::Conv2D:
      return "Conv2D";
    case OpType::Conv2DBackpropInput:
      return "Conv2DBackpropInput";
    case OpType::Conv2DBackpropFilter:
      return "Conv2DBackpropFilter";
    case OpType::MatMul:
      return "MatMul";
    case OpType::BiasAdd:
      return "BiasAdd";
    case OpType::BiasAddGrad:
      return "BiasAddGrad";
    case OpType::ReLU:
      return "ReLU";
    case OpType::ReluGrad:
      return "ReluGrad";
    case OpType::MaxPool:
      return "MaxPool";
    case OpType::MaxPoolGrad:
      return "MaxPoolGrad";
    case OpType::Reshape:
      return "Reshape";
    case OpType::SparseSoftmaxCrossEntropyWithLogits:
      return "SparseSoftmaxCrossEntropyWithLogits";
    case OpType::SparseSoftmaxCrossEntropyWithLogitsGrad:
      return "SparseSoftmaxCrossEntropyWithLogitsGrad";
    case OpType::AddN:
      return "AddN";
    case OpType::ApplyMomentum:
      return "ApplyMomentum";
    case OpType::BatchNorm:
      return "BatchNorm";
    case OpType::BatchNormGrad:
      return "BatchNormGrad";
    case OpType::Add:
      return "Add";
    case OpType::Mul:
      return "Mul";
    case OpType::Cast:
      return "Cast";
    case OpType::ReduceMean:
      return "ReduceMean";
    case OpType::ReduceMeanGrad:
      return "ReduceMeanGrad";
    case OpType::OneHot:
      return "OneHot";
    case OpType::SoftmaxCrossEntropyWithLogits:
      return "SoftmaxCrossEntropyWithLogits";
    case OpType::SoftmaxCrossEntropyWithLogitsGrad:
      return "SoftmaxCrossEntropyWithLogitsGrad";
    case OpType::Gather:
      return "Gather";
    case OpType::AssignAdd:
      return "AssignAdd";
  }
  return "?";
}

bool is_device_op(OpType t) { return t != OpType::Reshape; }

namespace {

void require(bool ok, const std::string& op, const std::string& what) {
  if (!ok) throw std::invalid_argument(op + ": " + what);
}

std::int64_t conv_out(std::int64_t in, std::int64_t k, const ConvAttr& a) {
  return (in + 2 * a.pad - k) / a.stride + 1;
}

}  // namespace

TensorId Graph::add_tensor(Tensor t) {
  for (auto d : t.shape) require(d > 0, t.name, "non-positive dimension in " + shape_string(t.shape));
  m_tensors.push_back(std::move(t));
  return static_cast<TensorId>(m_tensors.size() - 1);
}

TensorId Graph::emit(OpType type, const std::string& name, std::vector<TensorId> inputs, Tensor out) {
  out.name = name + ":0";
  TensorId id = add_tensor(std::move(out));
  Op op{type, name, m_pass, std::move(inputs), {id}, {}, {}, {}};
  m_ops.push_back(std::move(op));
  return id;
}

TensorId Graph::conv2d(const std::string& name, TensorId x, TensorId w, ConvAttr attr) {
  const Shape& xs = tensor(x).shape;  // NCHW
  const Shape& ws = tensor(w).shape;  // Cout, Cin, kh, kw
  require(xs.size() == 4 && ws.size() == 4, name, "conv2d needs NCHW input and OIHW weight");
  require(xs[1] == ws[1], name, "input channels " + std::to_string(xs[1]) + " != weight " + std::to_string(ws[1]));
  require(tensor(x).dtype == tensor(w).dtype, name, "input and weight dtypes differ (missing Cast?)");
  attr.kernel_h = ws[2];
  attr.kernel_w = ws[3];
  std::int64_t ho = conv_out(xs[2], ws[2], attr), wo = conv_out(xs[3], ws[3], attr);
  require(ho > 0 && wo > 0, name, "kernel larger than padded input");
  TensorId y =
      emit(OpType::Conv2D, name, {x, w}, {"", {xs[0], ws[0], ho, wo}, tensor(x).dtype, TensorRole::Activation});
  last().conv = attr;
  return y;
}

TensorId Graph::conv2d_backprop_input(const std::string& name, TensorId dy, TensorId w, const Shape& x_shape,
                                      ConvAttr attr) {
  const Shape& dys = tensor(dy).shape;
  const Shape& ws = tensor(w).shape;
  require(x_shape.size() == 4 && dys.size() == 4 && ws.size() == 4, name, "rank-4 operands expected");
  require(dys[1] == ws[0] && x_shape[1] == ws[1], name, "channel mismatch");
  require(conv_out(x_shape[2], ws[2], attr) == dys[2] && conv_out(x_shape[3], ws[3], attr) == dys[3], name,
          "dy spatial shape does not match the forward convolution");
  TensorId dx =
      emit(OpType::Conv2DBackpropInput, name, {dy, w}, {"", x_shape, tensor(dy).dtype, TensorRole::Activation});
  last().conv = attr;
  return dx;
}

TensorId Graph::conv2d_backprop_filter(const std::string& name, TensorId dy, TensorId x, const Shape& w_shape,
                                       ConvAttr attr) {
  const Shape& dys = tensor(dy).shape;
  const Shape& xs = tensor(x).shape;
  require(w_shape.size() == 4 && dys.size() == 4 && xs.size() == 4, name, "rank-4 operands expected");
  require(dys[1] == w_shape[0] && xs[1] == w_shape[1] && dys[0] == xs[0], name, "shape mismatch");
  require(conv_out(xs[2], w_shape[2], attr) == dys[2], name, "dy spatial shape does not match the forward convolution");
  TensorId dw =
      emit(OpType::Conv2DBackpropFilter, name, {dy, x}, {"", w_shape, tensor(dy).dtype, TensorRole::Gradient});
  last().conv = attr;
  return dw;
}

TensorId Graph::matmul(const std::string& name, TensorId a, TensorId b, MatMulAttr attr, TensorRole out_role) {
  const Shape& as = tensor(a).shape;
  const Shape& bs = tensor(b).shape;
  require(as.size() == 2 && bs.size() == 2, name, "matmul needs rank-2 operands");
  std::int64_t m = attr.transpose_a ? as[1] : as[0], ka = attr.transpose_a ? as[0] : as[1];
  std::int64_t kb = attr.transpose_b ? bs[1] : bs[0], n = attr.transpose_b ? bs[0] : bs[1];
  require(ka == kb, name, "inner dimensions differ: " + shape_string(as) + " x " + shape_string(bs));
  require(tensor(a).dtype == tensor(b).dtype, name, "operand dtypes differ (missing Cast?)");
  TensorId y = emit(OpType::MatMul, name, {a, b}, {"", {m, n}, tensor(a).dtype, out_role});
  last().matmul = attr;
  return y;
}

TensorId Graph::bias_add(const std::string& name, TensorId x, TensorId b) {
  const Shape& xs = tensor(x).shape;
  require(tensor(b).shape.size() == 1 && xs.size() >= 2 && tensor(b).shape[0] == xs[1], name,
          "bias length != channels");
  return emit(OpType::BiasAdd, name, {x, b}, {"", xs, tensor(x).dtype, TensorRole::Activation});
}

TensorId Graph::bias_add_grad(const std::string& name, TensorId dy) {
  const Shape& s = tensor(dy).shape;
  require(s.size() >= 2, name, "rank >= 2 expected");
  return emit(OpType::BiasAddGrad, name, {dy}, {"", {s[1]}, tensor(dy).dtype, TensorRole::Gradient});
}

TensorId Graph::relu(const std::string& name, TensorId x) {
  return emit(OpType::ReLU, name, {x}, {"", tensor(x).shape, tensor(x).dtype, TensorRole::Activation});
}

TensorId Graph::relu_grad(const std::string& name, TensorId dy, TensorId y) {
  require(tensor(dy).shape == tensor(y).shape, name, "dy and y shapes differ");
  return emit(OpType::ReluGrad, name, {dy, y}, {"", tensor(y).shape, tensor(dy).dtype, TensorRole::Activation});
}

TensorId Graph::max_pool(const std::string& name, TensorId x, PoolAttr attr) {
  const Shape& xs = tensor(x).shape;
  require(xs.size() == 4, name, "NCHW input expected");
  std::int64_t ho = (xs[2] + 2 * attr.pad - attr.kernel) / attr.stride + 1;
  std::int64_t wo = (xs[3] + 2 * attr.pad - attr.kernel) / attr.stride + 1;
  require(ho > 0 && wo > 0, name, "window larger than input");
  TensorId y = emit(OpType::MaxPool, name, {x}, {"", {xs[0], xs[1], ho, wo}, tensor(x).dtype, TensorRole::Activation});
  last().pool = attr;
  return y;
}

TensorId Graph::max_pool_grad(const std::string& name, TensorId x, TensorId y, TensorId dy, PoolAttr attr) {
  require(tensor(y).shape == tensor(dy).shape, name, "y and dy shapes differ");
  TensorId dx =
      emit(OpType::MaxPoolGrad, name, {x, y, dy}, {"", tensor(x).shape, tensor(dy).dtype, TensorRole::Activation});
  last().pool = attr;
  return dx;
}

TensorId Graph::reshape(const std::string& name, TensorId x, const Shape& shape) {
  Tensor out{"", shape, tensor(x).dtype, TensorRole::Activation};
  require(out.elements() == tensor(x).elements(), name, "reshape changes the element count");
  return emit(OpType::Reshape, name, {x}, out);
}

TensorId Graph::sparse_softmax_cross_entropy(const std::string& name, TensorId logits, TensorId labels) {
  const Shape& ls = tensor(logits).shape;
  require(ls.size() == 2 && tensor(labels).shape == Shape{ls[0]}, name, "logits [N,C] and labels [N] expected");
  return emit(OpType::SparseSoftmaxCrossEntropyWithLogits, name, {logits, labels},
              {"", {1}, DType::F32, TensorRole::Loss});
}

TensorId Graph::sparse_softmax_cross_entropy_grad(const std::string& name, TensorId logits, TensorId labels) {
  const Shape& ls = tensor(logits).shape;
  require(ls.size() == 2 && tensor(labels).shape == Shape{ls[0]}, name, "logits [N,C] and labels [N] expected");
  return emit(OpType::SparseSoftmaxCrossEntropyWithLogitsGrad, name, {logits, labels},
              {"", ls, tensor(logits).dtype, TensorRole::Activation});
}

TensorId Graph::add_n(const std::string& name, const std::vector<TensorId>& xs) {
  require(xs.size() >= 2, name, "AddN needs two or more inputs");
  for (auto x : xs) require(tensor(x).shape == tensor(xs[0]).shape, name, "AddN operand shapes differ");
  return emit(OpType::AddN, name, xs, {"", tensor(xs[0]).shape, tensor(xs[0]).dtype, tensor(xs[0]).role});
}

void Graph::apply_momentum(const std::string& name, TensorId param, TensorId accum, TensorId lr, TensorId grad,
                           TensorId momentum) {
  require(tensor(param).shape == tensor(grad).shape && tensor(param).shape == tensor(accum).shape, name,
          "param, accum and grad shapes differ");
  require(tensor(lr).elements() == 1 && tensor(momentum).elements() == 1, name, "lr and momentum must be scalars");
  m_ops.push_back(
      Op{OpType::ApplyMomentum, name, m_pass, {param, accum, lr, grad, momentum}, {param, accum}, {}, {}, {}});
}

TensorId Graph::batch_norm(const std::string& name, TensorId x, TensorId gamma, TensorId beta, TensorId moving_mean,
                           TensorId moving_var) {
  const Shape xs = tensor(x).shape;  // copied: adding tensors may move the storage
  require(xs.size() == 4, name, "NCHW input expected");
  for (TensorId p : {gamma, beta, moving_mean, moving_var})
    require(tensor(p).shape == Shape{xs[1]}, name, "per-channel operand of the wrong length");
  TensorId y = emit(OpType::BatchNorm, name, {x, gamma, beta, moving_mean, moving_var},
                    {"", xs, tensor(x).dtype, TensorRole::Activation});
  TensorId mean = add_tensor({name + ":1", {xs[1]}, DType::F32, TensorRole::Activation});
  TensorId var = add_tensor({name + ":2", {xs[1]}, DType::F32, TensorRole::Activation});
  last().outputs.insert(last().outputs.end(), {mean, var});
  return y;
}

TensorId Graph::batch_norm_grad(const std::string& name, TensorId dy, TensorId x, TensorId gamma, TensorId mean,
                                TensorId var) {
  require(tensor(dy).shape == tensor(x).shape, name, "dy and x shapes differ");
  TensorId dx = emit(OpType::BatchNormGrad, name, {dy, x, gamma, mean, var},
                     {"", tensor(x).shape, tensor(dy).dtype, TensorRole::Activation});
  TensorId dgamma = add_tensor({name + ":1", tensor(gamma).shape, tensor(gamma).dtype, TensorRole::Gradient});
  TensorId dbeta = add_tensor({name + ":2", tensor(gamma).shape, tensor(gamma).dtype, TensorRole::Gradient});
  last().outputs.insert(last().outputs.end(), {dgamma, dbeta});
  return dx;
}

TensorId Graph::add(const std::string& name, TensorId a, TensorId b) {
  require(tensor(a).shape == tensor(b).shape && tensor(a).dtype == tensor(b).dtype, name, "operands differ");
  return emit(OpType::Add, name, {a, b}, {"", tensor(a).shape, tensor(a).dtype, TensorRole::Activation});
}

TensorId Graph::mul(const std::string& name, TensorId x, TensorId scalar, TensorRole out_role) {
  require(tensor(scalar).elements() == 1, name, "second operand must be a scalar");
  return emit(OpType::Mul, name, {x, scalar}, {"", tensor(x).shape, tensor(x).dtype, out_role});
}

TensorId Graph::cast(const std::string& name, TensorId x, DType to) {
  TensorRole role = tensor(x).role == TensorRole::Gradient ? TensorRole::Gradient : TensorRole::Activation;
  return emit(OpType::Cast, name, {x}, {"", tensor(x).shape, to, role});
}

TensorId Graph::reduce_mean(const std::string& name, TensorId x) {
  const Shape& xs = tensor(x).shape;
  require(xs.size() == 4 || xs.size() == 1, name, "NCHW (spatial mean) or a vector (full mean) expected");
  Shape out = xs.size() == 4 ? Shape{xs[0], xs[1]} : Shape{1};
  return emit(OpType::ReduceMean, name, {x}, {"", out, tensor(x).dtype, TensorRole::Activation});
}

TensorId Graph::reduce_mean_grad(const std::string& name, TensorId dy, const Shape& x_shape) {
  return emit(OpType::ReduceMeanGrad, name, {dy}, {"", x_shape, tensor(dy).dtype, TensorRole::Activation});
}

TensorId Graph::one_hot(const std::string& name, TensorId labels, std::int64_t classes, DType dtype) {
  require(tensor(labels).shape.size() == 1 && classes > 1, name, "labels [N] and at least two classes expected");
  return emit(OpType::OneHot, name, {labels}, {"", {tensor(labels).shape[0], classes}, dtype, TensorRole::Activation});
}

TensorId Graph::softmax_cross_entropy(const std::string& name, TensorId logits, TensorId onehot) {
  require(tensor(logits).shape == tensor(onehot).shape && tensor(logits).shape.size() == 2, name,
          "logits and one-hot labels [N,C] expected");
  return emit(OpType::SoftmaxCrossEntropyWithLogits, name, {logits, onehot},
              {"", {tensor(logits).shape[0]}, tensor(logits).dtype, TensorRole::Activation});
}

TensorId Graph::softmax_cross_entropy_grad(const std::string& name, TensorId logits, TensorId onehot, TensorId dloss) {
  require(tensor(dloss).shape == Shape{tensor(logits).shape[0]}, name, "dloss [N] expected");
  return emit(OpType::SoftmaxCrossEntropyWithLogitsGrad, name, {logits, onehot, dloss},
              {"", tensor(logits).shape, tensor(logits).dtype, TensorRole::Activation});
}

TensorId Graph::gather(const std::string& name, TensorId table, TensorId index) {
  require(tensor(table).shape.size() == 1 && tensor(index).elements() == 1, name, "1-D table and scalar index");
  return emit(OpType::Gather, name, {table, index}, {"", {1}, tensor(table).dtype, TensorRole::Activation});
}

void Graph::assign_add(const std::string& name, TensorId counter, TensorId one) {
  require(tensor(counter).elements() == 1 && tensor(one).elements() == 1, name, "scalar operands expected");
  m_ops.push_back(Op{OpType::AssignAdd, name, m_pass, {counter, one}, {counter}, {}, {}, {}});
}

std::int64_t op_macs(const Graph& g, const Op& op) {
  switch (op.type) {
    case OpType::Conv2D:
    case OpType::Conv2DBackpropInput:
    case OpType::Conv2DBackpropFilter: {
      // All three are the same contraction: output pixels x Cout x (Cin x kh x kw).
      const Shape& y = op.type == OpType::Conv2D ? g.tensor(op.outputs[0]).shape : g.tensor(op.inputs[0]).shape;
      const Shape& w = op.type == OpType::Conv2D                ? g.tensor(op.inputs[1]).shape
                       : op.type == OpType::Conv2DBackpropInput ? g.tensor(op.inputs[1]).shape
                                                                : g.tensor(op.outputs[0]).shape;
      return y[0] * y[2] * y[3] * w[0] * w[1] * w[2] * w[3];
    }
    case OpType::MatMul: {
      const Shape& a = g.tensor(op.inputs[0]).shape;
      const Shape& y = g.tensor(op.outputs[0]).shape;
      std::int64_t k = op.matmul.transpose_a ? a[0] : a[1];
      return y[0] * y[1] * k;
    }
    default:
      return 0;
  }
}

std::int64_t parameter_count(const Graph& g) {
  std::int64_t n = 0;
  for (const auto& t : g.tensors())
    if (t.role == TensorRole::Parameter) n += t.elements();
  return n;
}

std::int64_t forward_macs(const Graph& g) {
  std::int64_t n = 0;
  for (const auto& op : g.ops())
    if (op.pass == Pass::Forward) n += op_macs(g, op);
  return n;
}

std::int64_t device_op_count(const Graph& g) {
  std::int64_t n = 0;
  for (const auto& op : g.ops()) n += is_device_op(op.type) ? 1 : 0;
  return n;
}

}  // namespace ascendsim::workloads
