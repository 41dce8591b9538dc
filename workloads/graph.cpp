#include "workloads/graph.h"

#include "workloads/op_registry.h"

#include <algorithm>
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

namespace {

void require(bool ok, const std::string& what, const std::string& detail) {
  if (!ok) throw std::invalid_argument(what + ": " + detail);
}

}  // namespace

void Graph::begin_optimizer(const std::map<TensorId, TensorId>& gradients) {
  m_optimizer_ops = static_cast<std::int64_t>(m_ops.size());
  m_optimizer_tensors = static_cast<std::int64_t>(m_tensors.size());
  m_gradients = gradients;
}

void Graph::drop_optimizer() {
  if (!has_optimizer()) throw std::logic_error("the graph has no optimizer to drop");
  m_ops.resize(static_cast<std::size_t>(m_optimizer_ops));
  m_tensors.resize(static_cast<std::size_t>(m_optimizer_tensors));
  m_pass = Pass::Backward;
}

TensorId Graph::add_tensor(Tensor t) {
  std::int64_t n = 1;
  for (auto d : t.shape) {
    require(d > 0, t.name, "non-positive dimension in " + shape_string(t.shape));
    require(!__builtin_mul_overflow(n, d, &n) && n <= (std::int64_t{1} << 40), t.name,
            shape_string(t.shape) + " has more elements than a device holds (2^40)");
  }
  m_tensors.push_back(std::move(t));
  return static_cast<TensorId>(m_tensors.size() - 1);
}

const char* format_name(Format f) {
  switch (f) {
    case Format::Any:
      return "any";
    case Format::ND:
      return "ND";
    case Format::NC1HWC0:
      return "NC1HWC0";
    case Format::FracZ:
      return "FracZ";
    case Format::FracNZ:
      return "FRACTAL_NZ";
  }
  return "?";
}

std::vector<TensorId> Graph::apply(const std::string& type, const std::string& name, std::vector<TensorId> inputs,
                                   const OpAttrs& attrs) {
  m_ops.push_back(make_op(type, name, std::move(inputs), attrs, m_pass));
  return m_ops.back().outputs;
}

Op Graph::make_op(const std::string& type, const std::string& name, std::vector<TensorId> inputs, const OpAttrs& attrs,
                  Pass pass) {
  const OpDef& def = OpRegistry::global().at(type);
  for (auto in : inputs)
    require(in >= 0 && static_cast<std::size_t>(in) < m_tensors.size(), name, "input is not a tensor of the graph");
  Op op;
  static_cast<OpAttrs&>(op) = attrs;
  std::vector<OutputSpec> outs;
  try {
    outs = def.infer(*this, inputs, op);
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(name + ": " + e.what());
  }
  require(!outs.empty(), name, type + " gives no output");
  op.def = &def;
  op.type = def.name;
  op.name = name;
  op.pass = pass;
  for (std::size_t i = 0; i < outs.size(); ++i) {
    if (outs[i].alias_of_input >= 0) {
      op.outputs.push_back(inputs.at(static_cast<std::size_t>(outs[i].alias_of_input)));
      continue;
    }
    Tensor t = std::move(outs[i].tensor);
    t.name = name + ":" + std::to_string(i);
    op.outputs.push_back(add_tensor(std::move(t)));
  }
  op.inputs = std::move(inputs);
  return op;
}

namespace {
OpAttrs conv_attrs(const ConvAttr& c, const Shape& shape = {}) {
  OpAttrs a;
  a.conv = c;
  a.shape = shape;
  return a;
}
OpAttrs pool_attrs(const PoolAttr& p) {
  OpAttrs a;
  a.pool = p;
  return a;
}
OpAttrs role_attrs(TensorRole r) {
  OpAttrs a;
  a.role = r;
  return a;
}
}  // namespace

TensorId Graph::conv2d(const std::string& name, TensorId x, TensorId w, ConvAttr attr) {
  return apply("Conv2D", name, {x, w}, conv_attrs(attr))[0];
}
TensorId Graph::conv2d_backprop_input(const std::string& name, TensorId dy, TensorId w, const Shape& x_shape,
                                      ConvAttr attr) {
  return apply("Conv2DBackpropInput", name, {dy, w}, conv_attrs(attr, x_shape))[0];
}
TensorId Graph::conv2d_backprop_filter(const std::string& name, TensorId dy, TensorId x, const Shape& w_shape,
                                       ConvAttr attr) {
  return apply("Conv2DBackpropFilter", name, {dy, x}, conv_attrs(attr, w_shape))[0];
}
TensorId Graph::matmul(const std::string& name, TensorId a, TensorId b, MatMulAttr attr, TensorRole out_role) {
  OpAttrs at = role_attrs(out_role);
  at.matmul = attr;
  return apply("MatMul", name, {a, b}, at)[0];
}
TensorId Graph::bias_add(const std::string& name, TensorId x, TensorId b) { return apply("BiasAdd", name, {x, b})[0]; }
TensorId Graph::bias_add_grad(const std::string& name, TensorId dy) { return apply("BiasAddGrad", name, {dy})[0]; }
TensorId Graph::relu(const std::string& name, TensorId x) { return apply("ReLU", name, {x})[0]; }
TensorId Graph::relu_grad(const std::string& name, TensorId dy, TensorId y) {
  return apply("ReluGrad", name, {dy, y})[0];
}
TensorId Graph::max_pool(const std::string& name, TensorId x, PoolAttr attr) {
  return apply("MaxPool", name, {x}, pool_attrs(attr))[0];
}
TensorId Graph::max_pool_grad(const std::string& name, TensorId x, TensorId y, TensorId dy, PoolAttr attr) {
  return apply("MaxPoolGrad", name, {x, y, dy}, pool_attrs(attr))[0];
}
TensorId Graph::reshape(const std::string& name, TensorId x, const Shape& shape) {
  OpAttrs a;
  a.shape = shape;
  return apply("Reshape", name, {x}, a)[0];
}
TensorId Graph::sparse_softmax_cross_entropy(const std::string& name, TensorId logits, TensorId labels) {
  return apply("SparseSoftmaxCrossEntropyWithLogits", name, {logits, labels})[0];
}
TensorId Graph::sparse_softmax_cross_entropy_grad(const std::string& name, TensorId logits, TensorId labels) {
  return apply("SparseSoftmaxCrossEntropyWithLogitsGrad", name, {logits, labels})[0];
}
TensorId Graph::add_n(const std::string& name, const std::vector<TensorId>& xs) { return apply("AddN", name, xs)[0]; }
void Graph::apply_momentum(const std::string& name, TensorId param, TensorId accum, TensorId lr, TensorId grad,
                           TensorId momentum) {
  apply("ApplyMomentum", name, {param, accum, lr, grad, momentum});
}
TensorId Graph::batch_norm(const std::string& name, TensorId x, TensorId gamma, TensorId beta, TensorId moving_mean,
                           TensorId moving_var) {
  return apply("BatchNorm", name, {x, gamma, beta, moving_mean, moving_var})[0];
}
TensorId Graph::batch_norm_grad(const std::string& name, TensorId dy, TensorId x, TensorId gamma, TensorId mean,
                                TensorId var) {
  return apply("BatchNormGrad", name, {dy, x, gamma, mean, var})[0];
}
TensorId Graph::add(const std::string& name, TensorId a, TensorId b) { return apply("Add", name, {a, b})[0]; }
TensorId Graph::mul(const std::string& name, TensorId x, TensorId scalar, TensorRole out_role) {
  return apply("Mul", name, {x, scalar}, role_attrs(out_role))[0];
}
TensorId Graph::cast(const std::string& name, TensorId x, DType to) {
  OpAttrs a;
  a.dtype = to;
  return apply("Cast", name, {x}, a)[0];
}
TensorId Graph::reduce_mean(const std::string& name, TensorId x) { return apply("ReduceMean", name, {x})[0]; }
TensorId Graph::reduce_mean_grad(const std::string& name, TensorId dy, const Shape& x_shape) {
  OpAttrs a;
  a.shape = x_shape;
  return apply("ReduceMeanGrad", name, {dy}, a)[0];
}
TensorId Graph::one_hot(const std::string& name, TensorId labels, std::int64_t classes, DType dtype) {
  OpAttrs a;
  a.count = classes;
  a.dtype = dtype;
  return apply("OneHot", name, {labels}, a)[0];
}
TensorId Graph::softmax_cross_entropy(const std::string& name, TensorId logits, TensorId onehot) {
  return apply("SoftmaxCrossEntropyWithLogits", name, {logits, onehot})[0];
}
TensorId Graph::softmax_cross_entropy_grad(const std::string& name, TensorId logits, TensorId onehot, TensorId dloss) {
  return apply("SoftmaxCrossEntropyWithLogitsGrad", name, {logits, onehot, dloss})[0];
}
TensorId Graph::gather(const std::string& name, TensorId table, TensorId index) {
  return apply("Gather", name, {table, index})[0];
}
void Graph::assign_add(const std::string& name, TensorId counter, TensorId one) {
  apply("AssignAdd", name, {counter, one});
}

bool updates_in_place(const Op& op, TensorId t) {
  return std::find(op.inputs.begin(), op.inputs.end(), t) != op.inputs.end();
}

std::vector<int> tensor_producers(const Graph& g) {
  std::vector<int> producer(g.tensors().size(), -1);
  const auto& ops = g.ops();
  for (std::size_t i = 0; i < ops.size(); ++i)
    for (auto t : ops[i].outputs)
      if (!updates_in_place(ops[i], t)) producer[static_cast<std::size_t>(t)] = static_cast<int>(i);
  return producer;
}

std::int64_t op_macs(const Graph& g, const Op& op) { return op.def && op.def->macs ? op.def->macs(g, op) : 0; }

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
  for (const auto& op : g.ops()) n += op.def->view ? 0 : 1;
  return n;
}

}  // namespace ascendsim::workloads
