#include "workloads/training.h"

#include <stdexcept>
#include <vector>

namespace ascendsim::workloads {

std::map<TensorId, TensorId> append_backward(Graph& g, TensorId loss, TensorId sens) {
  if (g.tensor(loss).elements() != 1) throw std::invalid_argument("append_backward: the loss must be a scalar");
  if (sens < 0) sens = g.add_tensor({"sens", {1}, DType::F32, TensorRole::Constant});
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
  contrib[static_cast<std::size_t>(loss)].push_back(sens);
  for (auto it = forward.rbegin(); it != forward.rend(); ++it) {
    const Op& op = *it;
    const std::string gname = "Gradients/" + op.name;
    TensorId dy = grad_of(op.outputs[0], gname);
    if (dy < 0) continue;
    switch (op.type) {
      case OpType::SparseSoftmaxCrossEntropyWithLogits:
        // The fused op yields the mean gradient directly (its sensitivity is 1).
        give(op.inputs[0], g.sparse_softmax_cross_entropy_grad(gname, op.inputs[0], op.inputs[1]));
        break;
      case OpType::SoftmaxCrossEntropyWithLogits:
        give(op.inputs[0], g.softmax_cross_entropy_grad(gname, op.inputs[0], op.inputs[1], dy));
        break;
      case OpType::ReduceMean:
        give(op.inputs[0], g.reduce_mean_grad(gname + "/ReduceMeanGrad", dy, g.tensor(op.inputs[0]).shape));
        break;
      case OpType::BatchNorm: {
        TensorId dx =
            g.batch_norm_grad(gname + "/BatchNormGrad", dy, op.inputs[0], op.inputs[1], op.outputs[1], op.outputs[2]);
        const Op& bng = g.ops().back();
        give(op.inputs[1], bng.outputs[1]);
        give(op.inputs[2], bng.outputs[2]);
        give(op.inputs[0], dx);
        break;
      }
      case OpType::Add:
        give(op.inputs[0], dy);
        give(op.inputs[1], dy);
        break;
      case OpType::Cast:
        give(op.inputs[0], g.cast(gname + "/Cast", dy, g.tensor(op.inputs[0]).dtype));
        break;
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

  std::map<TensorId, TensorId> grads;
  for (std::size_t i = 0; i < n_tensors; ++i) {
    if (g.tensors()[i].role != TensorRole::Parameter) continue;
    TensorId t = static_cast<TensorId>(i);
    TensorId dw = grad_of(t, "Gradients/" + g.tensor(t).name);
    if (dw < 0) throw std::logic_error("parameter without gradient: " + g.tensor(t).name);
    g.set_role(dw, TensorRole::Gradient);
    grads[t] = dw;
  }
  return grads;
}

void append_momentum(Graph& g, const std::map<TensorId, TensorId>& grads, const OptimizerSpec& spec) {
  g.set_pass(Pass::Optimizer);
  std::map<TensorId, TensorId> update = grads;
  if (spec.loss_scale > 1) {
    TensorId inv = g.add_tensor({"loss_scale_reciprocal", {1}, DType::F32, TensorRole::Constant});
    for (auto& [param, grad] : update) grad = g.mul("Unscale/" + g.tensor(param).name, grad, inv, TensorRole::Gradient);
  }
  TensorId lr;
  if (spec.lr_schedule_steps > 0) {
    TensorId table = g.add_tensor({"learning_rate", {spec.lr_schedule_steps}, DType::F32, TensorRole::OptimizerState});
    TensorId step = g.add_tensor({"global_step", {1}, DType::I32, TensorRole::OptimizerState});
    TensorId one = g.add_tensor({"one", {1}, DType::I32, TensorRole::Constant});
    lr = g.gather("LearningRate/Gather", table, step);
    g.assign_add("LearningRate/AssignAdd", step, one);
  } else {
    lr = g.add_tensor({"learning_rate", {1}, DType::F32, TensorRole::OptimizerState});
  }
  TensorId mom = g.add_tensor({"momentum", {1}, DType::F32, TensorRole::OptimizerState});
  TensorId wd = spec.weight_decay > 0 ? g.add_tensor({"weight_decay", {1}, DType::F32, TensorRole::Constant}) : -1;
  for (auto& [param, grad] : update) {  // std::map: parameter creation order
    const std::string pname = g.tensor(param).name;
    if (wd >= 0 && spec.decayed.count(param)) {
      TensorId decay = g.mul("WeightDecay/" + pname + "/Mul", param, wd, TensorRole::Gradient);
      grad = g.add("WeightDecay/" + pname + "/Add", decay, grad);
      g.set_role(grad, TensorRole::Gradient);
    }
    TensorId accum =
        g.add_tensor({"moments." + pname, g.tensor(param).shape, g.tensor(param).dtype, TensorRole::OptimizerState});
    g.apply_momentum("Momentum/" + pname, param, accum, lr, grad, mom);
  }
}

}  // namespace ascendsim::workloads
