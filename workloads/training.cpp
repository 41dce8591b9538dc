#include "workloads/training.h"

#include <stdexcept>
#include <vector>

namespace ascendsim::workloads {

std::map<TensorId, TensorId> append_backward(Graph& g, TensorId loss) {
  const std::vector<Op> forward = g.ops();  // snapshot: backward ops are appended to g
  const std::size_t n_tensors = g.tensors().size();

  // A tensor needs a gradient if it is a parameter or computed from one.
  std::vector<bool> needs(n_tensors, false);
  for (std::size_t i = 0; i < n_tensors; ++i) needs[i] = g.tensors()[i].role == TensorRole::Parameter;
  for (const auto& op : forward) {
    bool any = false;
    for (auto in : op.inputs) any = any || needs[static_cast<std::size_t>(in)];
    for (auto out : op.outputs) needs[static_cast<std::size_t>(out)] = needs[static_cast<std::size_t>(out)] || any;
  }

  std::vector<std::vector<TensorId>> contrib(n_tensors);
  auto give = [&](TensorId t, TensorId grad) {
    if (needs[static_cast<std::size_t>(t)]) contrib[static_cast<std::size_t>(t)].push_back(grad);
  };
  auto wants = [&](TensorId t) { return needs[static_cast<std::size_t>(t)]; };
  auto grad_of = [&](TensorId t, const std::string& name) -> TensorId {
    auto& c = contrib[static_cast<std::size_t>(t)];
    if (c.empty()) return -1;
    if (c.size() == 1) return c[0];
    TensorId sum = g.add_n(name + "/AddN", c);
    c = {sum};
    return sum;
  };

  g.set_pass(Pass::Backward);
  bool seeded = false;
  for (auto it = forward.rbegin(); it != forward.rend(); ++it) {
    const Op& op = *it;
    const std::string gname = "Gradients/" + op.name;
    if (op.type == OpType::SparseSoftmaxCrossEntropyWithLogits) {
      if (op.outputs[0] != loss) continue;
      give(op.inputs[0], g.sparse_softmax_cross_entropy_grad(gname, op.inputs[0], op.inputs[1]));
      seeded = true;
      continue;
    }
    TensorId dy = grad_of(op.outputs[0], gname);
    if (dy < 0) continue;
    switch (op.type) {
      case OpType::Conv2D: {
        TensorId x = op.inputs[0], w = op.inputs[1];
        if (wants(x)) give(x, g.conv2d_backprop_input(gname + "/BackpropInput", dy, w, g.tensor(x).shape, op.conv));
        if (wants(w)) give(w, g.conv2d_backprop_filter(gname + "/BackpropFilter", dy, x, g.tensor(w).shape, op.conv));
        break;
      }
      case OpType::MatMul: {
        if (op.matmul.transpose_a) throw std::logic_error(op.name + ": backward of transpose_a MatMul not supported");
        TensorId a = op.inputs[0], b = op.inputs[1];
        TensorRole brole = g.tensor(b).role == TensorRole::Parameter ? TensorRole::Gradient : TensorRole::Activation;
        if (op.matmul.transpose_b) {  // y = a b^T: da = dy b, db = dy^T a
          if (wants(a)) give(a, g.matmul(gname + "/MatMul_dx", dy, b, {false, false}, TensorRole::Activation));
          if (wants(b)) give(b, g.matmul(gname + "/MatMul_dw", dy, a, {true, false}, brole));
        } else {  // y = a b: da = dy b^T, db = a^T dy
          if (wants(a)) give(a, g.matmul(gname + "/MatMul_dx", dy, b, {false, true}, TensorRole::Activation));
          if (wants(b)) give(b, g.matmul(gname + "/MatMul_dw", a, dy, {true, false}, brole));
        }
        break;
      }
      case OpType::BiasAdd:
        if (wants(op.inputs[1])) give(op.inputs[1], g.bias_add_grad(gname + "/BiasAddGrad", dy));
        give(op.inputs[0], dy);
        break;
      case OpType::ReLU:
        give(op.inputs[0], g.relu_grad(gname + "/ReluGrad", dy, op.outputs[0]));
        break;
      case OpType::MaxPool:
        give(op.inputs[0], g.max_pool_grad(gname + "/MaxPoolGrad", op.inputs[0], op.outputs[0], dy, op.pool));
        break;
      case OpType::Reshape:
        give(op.inputs[0], g.reshape(gname + "/Reshape", dy, g.tensor(op.inputs[0]).shape));
        break;
      case OpType::AddN:
        for (auto in : op.inputs) give(in, dy);
        break;
      default:
        throw std::logic_error(std::string("no backward rule for ") + op_type_name(op.type));
    }
  }
  if (!seeded) throw std::invalid_argument("append_backward: loss is not a SparseSoftmaxCrossEntropyWithLogits output");

  std::map<TensorId, TensorId> grads;
  for (std::size_t i = 0; i < n_tensors; ++i) {
    if (g.tensors()[i].role != TensorRole::Parameter) continue;
    TensorId t = static_cast<TensorId>(i);
    TensorId dw = grad_of(t, "Gradients/" + g.tensor(t).name);
    if (dw < 0) throw std::logic_error("parameter without gradient: " + g.tensor(t).name);
    grads[t] = dw;
  }
  return grads;
}

void append_momentum(Graph& g, const std::map<TensorId, TensorId>& grads) {
  g.set_pass(Pass::Optimizer);
  TensorId lr = g.add_tensor({"learning_rate", {1}, DType::F32, TensorRole::OptimizerState});
  TensorId mom = g.add_tensor({"momentum", {1}, DType::F32, TensorRole::OptimizerState});
  for (const auto& [param, grad] : grads) {  // std::map: parameter creation order
    const Tensor& p = g.tensor(param);
    TensorId accum = g.add_tensor({"moments." + p.name, p.shape, p.dtype, TensorRole::OptimizerState});
    g.apply_momentum("Momentum/" + p.name, param, accum, lr, grad, mom);
  }
}

}  // namespace ascendsim::workloads
