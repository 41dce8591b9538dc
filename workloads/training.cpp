#include "workloads/training.h"

#include <stdexcept>
#include <vector>

#include "workloads/op_registry.h"
#include "workloads/workload.h"

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
  auto grad_of = [&](TensorId t, const std::string& name) -> TensorId {
    auto& c = contrib[static_cast<std::size_t>(t)];
    if (c.empty()) return -1;
    if (c.size() == 1) return c[0];
    TensorId sum = g.add_n(name + "/AddN", c);
    c = {sum};
    return sum;
  };

  // Each op's registered backward rule emits its inputs' gradients.
  class Context final : public BackwardContext {
   public:
    Context(Graph& g, std::vector<bool>& needs, std::vector<std::vector<TensorId>>& contrib)
        : m_g(g), m_needs(needs), m_contrib(contrib) {}
    Graph& graph() override { return m_g; }
    bool wants(TensorId t) const override { return m_needs[static_cast<std::size_t>(t)]; }
    void give(TensorId t, TensorId grad) override {
      if (wants(t)) m_contrib[static_cast<std::size_t>(t)].push_back(grad);
    }

   private:
    Graph& m_g;
    std::vector<bool>& m_needs;
    std::vector<std::vector<TensorId>>& m_contrib;
  } ctx(g, needs, contrib);

  g.set_pass(Pass::Backward);
  contrib[static_cast<std::size_t>(loss)].push_back(sens);
  for (auto it = forward.rbegin(); it != forward.rend(); ++it) {
    const Op& op = *it;
    const std::string gname = "Gradients/" + op.name;
    TensorId dy = grad_of(op.outputs[0], gname);
    if (dy < 0) continue;
    if (!op.def->backward) throw std::logic_error("no backward rule for " + op.type + " (op " + op.name + ")");
    op.def->backward(ctx, op, dy, gname);
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

void unscale_gradients(Graph& g, std::map<TensorId, TensorId>& grads, double loss_scale) {
  if (loss_scale <= 1) return;
  const TensorId inv = g.add_tensor({"loss_scale_reciprocal", {1}, DType::F32, TensorRole::Constant});
  for (auto& [param, grad] : grads) grad = g.mul("Unscale/" + g.tensor(param).name, grad, inv, TensorRole::Gradient);
}

void sum_partial_gradients(Graph& g, std::map<TensorId, TensorId>& update, const OptimizerSpec& spec) {
  for (const auto& [param, group] : spec.partial_gradients) {
    const auto it = update.find(param);
    if (it == update.end()) continue;
    it->second = reduce_norm(g, "PartialGradients/" + g.tensor(param).name, it->second, group);
  }
}

namespace {
OpAttrs shard_attrs(const OptimizerSpec& spec) {
  OpAttrs a;
  a.group_size = spec.shard_size;
  a.group_stride = spec.shard_stride;
  a.axis = 0;
  return a;
}
}  // namespace

bool shardable(const Graph& g, TensorId param, const OptimizerSpec& spec) {
  const Shape& shape = g.tensor(param).shape;
  return spec.shard_size > 1 && !shape.empty() && shape[0] % spec.shard_size == 0 && !spec.unsharded.count(param);
}

TensorId reduce_scatter_mean_constant(Graph& g) {
  return g.add_tensor({"gradients_mean", {1}, DType::F32, TensorRole::Constant});
}

TensorId reduce_scatter_gradient(Graph& g, const std::string& prefix, TensorId param, TensorId grad, TensorId mean,
                                 const OptimizerSpec& spec) {
  const std::string pname = prefix + "OptimizerShard/" + g.tensor(param).name;
  grad = g.apply("ReduceScatter", pname + "/ReduceScatter", {grad}, shard_attrs(spec))[0];
  return g.mul(pname + "/GradientsMean", grad, mean, TensorRole::Gradient);
}

std::map<TensorId, TensorId> shard_gradients(Graph& g, std::map<TensorId, TensorId>& update,
                                             const OptimizerSpec& spec) {
  std::map<TensorId, TensorId> pieces;
  if (spec.shard_size <= 1) return pieces;
  const TensorId mean = spec.gradients_are_pieces ? -1 : reduce_scatter_mean_constant(g);
  for (auto& [param, grad] : update) {
    if (!shardable(g, param, spec)) continue;  // kept whole (all-reduced, or the rank's own)
    const std::string pname = g.tensor(param).name;
    if (!spec.gradients_are_pieces) grad = reduce_scatter_gradient(g, "", param, grad, mean, spec);
    if (spec.partition_gradients && g.tensor(param).dtype == DType::F16) {
      // DeepSpeed's fp16 optimizer: the rank's piece lives in fp32 as an optimizer state.
      Shape piece = g.tensor(param).shape;
      piece[0] /= spec.shard_size;
      pieces[param] = g.add_tensor({"master." + pname, piece, DType::F32, TensorRole::OptimizerState});
      if (g.tensor(grad).dtype != DType::F32) {
        grad = g.cast("OptimizerShard/" + pname + "/CastGradient", grad, DType::F32);
        g.set_role(grad, TensorRole::Gradient);
      }
    } else {
      pieces[param] = g.apply("Slice", "OptimizerShard/" + pname + "/Slice", {param}, shard_attrs(spec))[0];
    }
  }
  return pieces;
}

void gather_pieces(Graph& g, const std::map<TensorId, TensorId>& pieces, const OptimizerSpec& spec) {
  for (const auto& [param, piece] : pieces) {
    const std::string pname = "OptimizerShard/" + g.tensor(param).name;
    const DType dtype = g.tensor(param).dtype;
    const TensorId updated = g.tensor(piece).dtype == dtype ? piece : g.cast(pname + "/CastMaster", piece, dtype);
    g.apply("AllGatherInto", pname + "/AllGather", {updated, param}, shard_attrs(spec));
  }
}

std::pair<std::int64_t, std::int64_t> norm_group(const OptimizerSpec& spec, TensorId param, bool sharded) {
  const bool split = spec.tensor_group_size > 1 && spec.split.count(param);
  if (split && sharded) return {spec.tensor_group_size * spec.shard_size, 1};
  if (split) return {spec.tensor_group_size, 1};
  if (sharded) return {spec.shard_size, spec.shard_stride};
  return {1, 1};
}

TensorId reduce_norm(Graph& g, const std::string& name, TensorId sums, std::pair<std::int64_t, std::int64_t> group) {
  if (group.first <= 1) return sums;
  OpAttrs a;
  a.group_size = group.first;
  a.group_stride = group.second;
  return g.apply("AllReduce", name + "/AllReduce", {sums}, a)[0];
}

void replace_optimizer(Workload& w, const OptimizerSpec& spec) {
  if (!w.graph.has_optimizer()) throw std::logic_error(w.name + ": no optimizer to replace");
  const std::map<TensorId, TensorId> grads = w.graph.optimizer_gradients();
  w.graph.drop_optimizer();
  append_optimizer(w.graph, grads, spec);
  w.optimizer_spec = spec;
}

void append_momentum(Graph& g, const std::map<TensorId, TensorId>& grads, const OptimizerSpec& spec) {
  g.begin_optimizer(grads);
  g.set_pass(Pass::Optimizer);
  if (spec.lars && spec.shard_size > 1)
    throw std::invalid_argument(
        "LARS scales each layer by its whole weight's norm; shard the optimizer of Momentum, AdamW or LAMB");
  std::map<TensorId, TensorId> update = grads;
  sum_partial_gradients(g, update, spec);
  const std::map<TensorId, TensorId> pieces = shard_gradients(g, update, spec);
  unscale_gradients(g, update, spec.loss_scale);
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
  // LARSUpdate's weight decay: the optimizer's, or a zero without one.
  const TensorId lars_wd = !spec.lars ? -1
                           : wd >= 0  ? wd
                                      : g.add_tensor({"lars_no_decay", {1}, DType::F32, TensorRole::Constant});
  for (auto& [param, grad] : update) {  // std::map: parameter creation order
    const std::string pname = g.tensor(param).name;
    const TensorId target = pieces.count(param) ? pieces.at(param) : param;  // the rank's piece, sharded
    if (spec.lars && spec.decayed.count(param)) {  // the layer's trust ratio, weight decay inside
      const auto sums = g.apply("SquareSumAll", "LARS/" + pname + "/SquareSumAll", {param, grad});
      grad = g.apply("LARSUpdate", "LARS/" + pname + "/LARSUpdate", {param, grad, sums[0], sums[1], lars_wd, lr})[0];
    } else if (wd >= 0 && spec.decayed.count(param)) {
      TensorId decay = g.mul("WeightDecay/" + pname + "/Mul", target, wd, TensorRole::Gradient);
      grad = g.add("WeightDecay/" + pname + "/Add", decay, grad);
      g.set_role(grad, TensorRole::Gradient);
    }
    TensorId accum =
        g.add_tensor({"moments." + pname, g.tensor(target).shape, g.tensor(target).dtype, TensorRole::OptimizerState});
    g.apply_momentum("Momentum/" + pname, target, accum, lr, grad, mom);
  }
  gather_pieces(g, pieces, spec);
}

void append_optimizer(Graph& g, const std::map<TensorId, TensorId>& grads, const OptimizerSpec& spec) {
  if (spec.kind == "momentum")
    append_momentum(g, grads, spec);
  else
    append_adam_family(g, grads, spec);
}

Workload inference_workload(const Workload& train) {
  Workload w = train;
  // A graph of the forward ops and the tensors they touch (renumbered), so that nothing of the
  // backward pass or the optimizer (gradients, accumulators) is left in it.
  const Graph& from = train.graph;
  Graph g;
  std::vector<TensorId> id(from.tensors().size(), -1);
  auto keep = [&](TensorId t) {
    auto& m = id.at(static_cast<std::size_t>(t));
    if (m < 0) m = g.add_tensor(from.tensor(t));
    return m;
  };
  for (auto& t : w.batch_inputs) t = keep(t);
  std::vector<Op> ops;
  for (const Op& op : from.ops()) {
    if (op.pass != Pass::Forward) continue;
    if (op.def && op.def->identity_in_inference) {  // its output is its input
      id.at(static_cast<std::size_t>(op.outputs.at(0))) = keep(op.inputs.at(0));
      continue;
    }
    Op o = op;
    for (auto& t : o.inputs) t = keep(t);
    for (auto& t : o.outputs) t = keep(t);
    ops.push_back(std::move(o));
  }
  g.set_ops(std::move(ops));
  w.graph = std::move(g);
  w.loss = train.loss >= 0 && id.at(static_cast<std::size_t>(train.loss)) >= 0
               ? id[static_cast<std::size_t>(train.loss)]
               : -1;
  w.training = false;
  w.parallel.parameter_broadcast = false;
  w.parallel.all_reduce_fusion.clear();
  w.optimizer = "none (inference)";
  return w;
}

}  // namespace ascendsim::workloads
