#include "workloads/pipeline.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <set>
#include <stdexcept>
#include <string>

#include "workloads/op_registry.h"
#include "workloads/transformer.h"

namespace ascendsim::workloads {

std::int64_t warmup_micro_batches(std::int64_t stages, std::int64_t stage, std::int64_t micro_batches) {
  return std::min(stages - stage - 1, micro_batches);
}

namespace {

/// An op's name without the prefixes of the ops derived from it ("Gradients/", "Recompute/").
std::string base_name(std::string n) {
  for (bool again = true; again;) {
    again = false;
    for (const char* p : {"Gradients/", "Recompute/", "Regather/"})
      if (n.rfind(p, 0) == 0) {
        n = n.substr(std::strlen(p));
        again = true;
      }
  }
  return n;
}

constexpr int kNone = -1;
constexpr int kEvery = -2;  ///< computed from the batch and constants: on every stage that reads it
constexpr int kSplit = -3;  ///< a shared weight's gradient sum: each holder sums its own part

std::string stage_name(std::int64_t k) { return "Micro" + std::to_string(k) + "/"; }

/// Where every op of the training graph runs.
struct Partition {
  std::int64_t stages = 0;
  std::vector<std::int64_t> first_layer, layers;  ///< per stage
  std::vector<int> op_stage;                      ///< per op of the graph (optimizer ops: kNone)
  std::vector<std::set<int>> every;               ///< kEvery ops: the stages that read them
  std::vector<int> tensor_stage;                  ///< per tensor: its producer's stage (kNone: none)
  std::vector<bool> backward_tensor;              ///< produced by the backward pass
  std::map<TensorId, std::set<int>> holders;      ///< persistent tensor -> the stages that read it
  std::vector<std::vector<TensorId>> forward;     ///< per pair (s, s+1): tensors s sends forward
  std::vector<std::vector<TensorId>> backward;    ///< per pair (s, s+1): gradients s+1 sends back
};

Partition partition(const Workload& w, std::int64_t P) {
  const Graph& g = w.graph;
  const auto& ops = g.ops();
  const std::size_t no = ops.size(), nt = g.tensors().size();
  const std::string flag = "--pipeline-stages " + std::to_string(P) + ": ";
  Partition part;
  part.stages = P;
  part.op_stage.assign(no, kNone);
  part.every.resize(no);
  part.tensor_stage.assign(nt, kNone);
  part.backward_tensor.assign(nt, false);

  // The layers in forward order, and where the first begins.
  std::map<std::string, std::int64_t> layer_index;
  std::size_t first_layer_op = no;
  for (std::size_t i = 0; i < no; ++i) {
    if (ops[i].pass != Pass::Forward) continue;
    const std::string l = transformer_layer_of(base_name(ops[i].name));
    if (l.empty()) continue;
    first_layer_op = std::min(first_layer_op, i);
    layer_index.emplace(l, static_cast<std::int64_t>(layer_index.size()));
  }
  const auto L = static_cast<std::int64_t>(layer_index.size());
  if (P == 1) {  // gradient accumulation: every op on the one stage
    part.first_layer.assign(1, 0);
    part.layers.assign(1, L);
    for (std::size_t i = 0; i < no; ++i) {
      const Op& op = ops[i];
      if (op.pass == Pass::Optimizer) continue;
      part.op_stage[i] = 0;
      for (auto t : op.inputs)
        if (is_persistent(g.tensor(t).role)) part.holders[t].insert(0);
      for (auto o : op.outputs) {
        if (is_persistent(g.tensor(o).role)) continue;
        part.tensor_stage[static_cast<std::size_t>(o)] = 0;
        part.backward_tensor[static_cast<std::size_t>(o)] = op.pass == Pass::Backward;
      }
    }
    return part;
  }
  if (L < P)
    throw std::invalid_argument(flag + w.name + " has " + std::to_string(L) +
                                " transformer layer(s) to divide among the stages; give at most " +
                                std::to_string(std::max<std::int64_t>(L, 1)) + " stages");
  auto layer_stage = [&](const std::string& l) { return static_cast<int>(layer_index.at(l) * P / L); };
  part.first_layer.assign(static_cast<std::size_t>(P), L);
  part.layers.assign(static_cast<std::size_t>(P), 0);
  for (std::int64_t l = L; l-- > 0;) {
    const auto s = static_cast<std::size_t>(l * P / L);
    part.first_layer[s] = l;
    ++part.layers[s];
  }

  std::vector<bool> from_data(nt, false);
  for (std::size_t t = 0; t < nt; ++t) {
    const TensorRole r = g.tensors()[t].role;
    from_data[t] = r == TensorRole::Input || r == TensorRole::Label || r == TensorRole::Constant;
  }
  std::map<std::string, int> name_stage;  // forward ops and weights by name
  std::vector<int> producer(nt, -1);
  for (std::size_t i = 0; i < no; ++i) {
    const Op& op = ops[i];
    if (op.pass != Pass::Forward) continue;
    const std::string l = transformer_layer_of(base_name(op.name));
    const bool data = !op.inputs.empty() && std::all_of(op.inputs.begin(), op.inputs.end(), [&](TensorId t) {
      return from_data[static_cast<std::size_t>(t)];
    });
    const int st = !l.empty() ? layer_stage(l) : data ? kEvery : i < first_layer_op ? 0 : static_cast<int>(P - 1);
    part.op_stage[i] = st;
    for (auto o : op.outputs) {
      if (is_persistent(g.tensor(o).role)) continue;
      part.tensor_stage[static_cast<std::size_t>(o)] = st;
      from_data[static_cast<std::size_t>(o)] = st == kEvery;
      producer[static_cast<std::size_t>(o)] = static_cast<int>(i);
    }
    if (st < 0) continue;
    name_stage[op.name] = st;
    for (auto t : op.inputs)
      if (is_persistent(g.tensor(t).role)) part.holders[t].insert(st);
  }
  for (const auto& [t, stages] : part.holders)
    if (stages.size() == 1) name_stage[g.tensor(t).name] = *stages.begin();

  // A shared weight's gradient: the sum of its holders' contributions, each summing its own.
  const auto& grads = g.optimizer_gradients();
  std::set<int> split_ops;
  std::map<TensorId, int> sum_of;  // a backward AddN's result -> the op
  for (std::size_t i = 0; i < no; ++i)
    if (ops[i].pass == Pass::Backward && ops[i].type == "AddN") sum_of[ops[i].outputs.at(0)] = static_cast<int>(i);
  for (const auto& [param, grad] : grads) {
    const auto h = part.holders.find(param);
    if (h == part.holders.end() || h->second.size() < 2) continue;
    if (h->second.size() > 2)
      throw std::invalid_argument(flag + "the weight " + g.tensor(param).name + " is read on " +
                                  std::to_string(h->second.size()) + " stages; a weight may be shared by two");
    if (const auto s = sum_of.find(grad); s != sum_of.end()) split_ops.insert(s->second);
  }

  // The backward pass, in order.
  for (std::size_t i = 0; i < no; ++i) {
    const Op& op = ops[i];
    if (op.pass != Pass::Backward) continue;
    int st = kNone;
    if (split_ops.count(static_cast<int>(i))) {
      st = kSplit;
    } else {
      const std::string n = base_name(op.name);
      const std::string l = transformer_layer_of(n);
      if (!l.empty()) {
        st = layer_stage(l);
      } else {  // the longest prefix naming a forward op or a weight
        for (std::size_t end = n.size(); st == kNone;) {
          const auto it = name_stage.find(n.substr(0, end));
          if (it != name_stage.end()) st = it->second;
          if (end == 0) break;
          const std::size_t slash = n.rfind('/', end - 1);
          if (slash == std::string::npos) break;
          end = slash;
        }
      }
      // An op that reads only gradients of one later stage (a boundary tensor's gradient
      // contributions summed) runs there: one tensor crosses, not its parts.
      std::set<int> in_stages;
      bool only_gradients = true;
      for (auto t : op.inputs) {
        const int ts = part.tensor_stage[static_cast<std::size_t>(t)];
        if (ts < 0) continue;
        in_stages.insert(ts);
        only_gradients = only_gradients && part.backward_tensor[static_cast<std::size_t>(t)];
      }
      if (in_stages.size() == 1 && only_gradients && (st == kNone || *in_stages.begin() > st)) st = *in_stages.begin();
      if (st == kNone && !in_stages.empty()) st = *in_stages.rbegin();
      if (st == kNone) throw std::logic_error("pipeline: no stage for the backward op " + op.name);
    }
    part.op_stage[i] = st;
    for (auto t : op.inputs)
      if (st >= 0 && is_persistent(g.tensor(t).role)) part.holders[t].insert(st);
    for (auto o : op.outputs) {
      if (is_persistent(g.tensor(o).role)) continue;
      part.tensor_stage[static_cast<std::size_t>(o)] = st == kSplit ? kNone : st;
      part.backward_tensor[static_cast<std::size_t>(o)] = true;
      producer[static_cast<std::size_t>(o)] = static_cast<int>(i);
    }
  }

  // The stages that read each op computed from the data (in reverse: readers first).
  for (std::size_t j = no; j-- > 0;) {
    if (ops[j].pass == Pass::Optimizer) continue;
    std::set<int> at;
    if (part.op_stage[j] >= 0)
      at.insert(part.op_stage[j]);
    else if (part.op_stage[j] == kEvery)
      at = part.every[j];
    for (auto t : ops[j].inputs) {
      const int p = producer[static_cast<std::size_t>(t)];
      if (p >= 0 && part.op_stage[static_cast<std::size_t>(p)] == kEvery)
        part.every[static_cast<std::size_t>(p)].insert(at.begin(), at.end());
    }
  }

  // The tensors crossing between stages: only between neighbours, forward results forward and
  // gradients back.
  part.forward.resize(static_cast<std::size_t>(P - 1));
  part.backward.resize(static_cast<std::size_t>(P - 1));
  auto add = [](std::vector<TensorId>& v, TensorId t) {
    if (std::find(v.begin(), v.end(), t) == v.end()) v.push_back(t);
  };
  for (std::size_t i = 0; i < no; ++i) {
    const int st = part.op_stage[i];
    if (ops[i].pass == Pass::Optimizer) continue;
    for (auto t : ops[i].inputs) {
      const int ts = part.tensor_stage[static_cast<std::size_t>(t)];
      if (ts < 0) continue;
      const bool grad = part.backward_tensor[static_cast<std::size_t>(t)];
      if (st == kSplit) {
        if (grad) continue;  // each holder's own contributions
      } else if (ts == st) {
        continue;
      } else if (!grad && ts + 1 == st) {
        add(part.forward[static_cast<std::size_t>(ts)], t);
        continue;
      } else if (grad && ts == st + 1) {
        add(part.backward[static_cast<std::size_t>(st)], t);
        continue;
      }
      throw std::invalid_argument(flag + ops[i].name + " (stage " + std::to_string(st) + ") reads " + g.tensor(t).name +
                                  " of stage " + std::to_string(ts) +
                                  "; stages exchange tensors with their neighbours only");
    }
  }
  return part;
}

/// Stage `s`'s workload: its ops once per micro-batch in 1F1B order with its exchanges.
Workload build_stage(const Workload& w, const Partition& part, int s, std::int64_t M, std::int64_t R) {
  const Graph& g = w.graph;
  const auto& ops = g.ops();
  const auto P = part.stages;
  const auto& grads = g.optimizer_gradients();
  Workload sw;
  sw.name = w.name;
  sw.description = w.description;
  sw.batch_size = w.batch_size * M;
  sw.data = w.data;
  sw.eval_data = w.eval_data;
  sw.optimizer = w.optimizer;
  sw.recipe = w.recipe;
  sw.hyper = w.hyper;
  sw.parallel = w.parallel;
  sw.shard_plan = w.shard_plan;
  sw.whole = w.whole;
  sw.training = true;
  sw.initial_values = w.initial_values;
  sw.tokens_per_sample = w.tokens_per_sample;
  Graph& h = sw.graph;

  std::map<TensorId, TensorId> shared;                                           // persistent tensors
  std::vector<std::map<TensorId, TensorId>> micro(static_cast<std::size_t>(M));  // per micro-batch
  std::map<TensorId, TensorId> batch;                                            // the step's batch inputs
  for (auto t : w.batch_inputs) {
    Tensor x = g.tensor(t);
    x.shape.at(0) *= M;
    batch[t] = h.add_tensor(x);
    sw.batch_inputs.push_back(batch[t]);
  }
  auto persistent = [&](TensorId t) {
    const auto it = shared.find(t);
    return it != shared.end() ? it->second : shared[t] = h.add_tensor(g.tensor(t));
  };
  auto in = [&](std::int64_t k, TensorId t) -> TensorId {
    if (is_persistent(g.tensor(t).role)) return persistent(t);
    auto& m = micro[static_cast<std::size_t>(k)];
    if (const auto it = m.find(t); it != m.end()) return it->second;
    if (const auto b = batch.find(t); b != batch.end()) {  // micro-batch k's rows of the batch
      if (M == 1) return m[t] = b->second;
      OpAttrs a;
      a.axis = 0;
      a.count = k * g.tensor(t).shape.at(0);
      a.shape = g.tensor(t).shape;
      return m[t] = h.apply("StridedSlice", stage_name(k) + "Slice/" + g.tensor(t).name, {b->second}, a)[0];
    }
    throw std::logic_error("pipeline: stage " + std::to_string(s) + " reads " + g.tensor(t).name +
                           " before it is computed");
  };
  auto copy = [&](std::int64_t k, const Op& op) {
    std::vector<TensorId> inputs;
    for (auto t : op.inputs) inputs.push_back(in(k, t));
    const OpAttrs& attrs = op;
    const std::vector<TensorId> outs = h.apply(op.type, stage_name(k) + op.name, inputs, attrs);
    for (std::size_t i = 0; i < outs.size(); ++i) {
      const TensorId o = op.outputs[i];
      if (is_persistent(g.tensor(o).role)) continue;
      micro[static_cast<std::size_t>(k)][o] = outs[i];
      h.set_role(outs[i], g.tensor(o).role);
    }
  };
  auto runs_here = [&](std::size_t i) {
    const int st = part.op_stage[i];
    return st == s || (st == kEvery && part.every[i].count(s) > 0);
  };

  // The weights this stage updates, and the step's sums of their gradients.
  std::vector<TensorId> updated;
  for (const auto& [param, grad] : grads)
    if (const auto hd = part.holders.find(param); hd != part.holders.end() && hd->second.count(s))
      updated.push_back(param);
  // With the gradients sharded too (ZeRO-2: OptimizerSpec::partition_gradients), each
  // micro-batch's gradient of a shardable weight is reduce-scattered as it is computed and only
  // the rank's piece is accumulated (in the gradient's type, as DeepSpeed's partitions).
  const OptimizerSpec& given = w.optimizer_spec;
  const bool partition = given.partition_gradients && given.shard_size > 1;
  std::set<TensorId> pieces;  // the weights accumulated as pieces
  for (auto p : updated)
    if (partition && shardable(g, p, given)) pieces.insert(p);
  const TensorId mean = pieces.empty() ? -1 : reduce_scatter_mean_constant(h);
  // MindSpore's accu_grads: a persistent accumulator per weight, every micro-batch's gradient
  // added into it, cleared once the optimizer has read it.
  std::map<TensorId, TensorId> accumulator, sum;
  for (auto p : updated) {
    if (M == 1) break;
    Tensor a = g.tensor(grads.at(p));
    a.name = "accu_grads." + g.tensor(p).name;
    a.role = TensorRole::State;  // MindSpore's accu_grads are parameters that are not trained
    if (pieces.count(p)) a.shape[0] /= given.shard_size;
    accumulator[p] = h.add_tensor(a);
  }

  auto forward = [&](std::int64_t k) {
    h.set_pass(Pass::Forward);
    for (std::size_t i = 0; i < ops.size(); ++i)
      if (ops[i].pass == Pass::Forward && runs_here(i)) copy(k, ops[i]);
  };
  // The weights each gradient tensor is the gradient of.
  std::map<TensorId, std::vector<TensorId>> gradient_of;
  for (auto p : updated) gradient_of[grads.at(p)].push_back(p);
  auto accumulate = [&](std::int64_t k, TensorId p) {  // the micro-batch's gradient added into the step's
    TensorId mine = in(k, grads.at(p));
    if (pieces.count(p)) mine = reduce_scatter_gradient(h, stage_name(k), persistent(p), mine, mean, given);
    const std::string name = stage_name(k) + "GradientAccumulation/" + g.tensor(p).name;
    if (M == 1) {
      sum[p] = mine;
    } else if (k + 1 < M) {
      h.apply("AccumulateGrad", name, {accumulator.at(p), mine});
    } else {  // the last: the step's gradient, out of place (its collectives start after it)
      sum[p] = h.apply("Add", name, {accumulator.at(p), mine})[0];
      h.set_role(sum[p], TensorRole::Gradient);
    }
  };
  auto backward = [&](std::int64_t k) {
    h.set_pass(Pass::Backward);
    std::set<TensorId> done;  // the weights whose gradient this micro-batch has accumulated
    // Before the last micro-batch each gradient is added into its accumulator as soon as it is
    // computed (hooks on the weights, as MindSpore's and Megatron's accumulation), so a
    // micro-batch's gradients are not all live at once; the last one's sums follow the pass, where
    // the gradients' collectives start — unless they are reduce-scattered micro-batch by
    // micro-batch (ZeRO-2), whose collectives start as each gradient is computed, the last's too.
    const bool at_once = M > 1 && (k + 1 < M || !pieces.empty());
    for (std::size_t i = 0; i < ops.size(); ++i) {
      if (ops[i].pass != Pass::Backward) continue;
      if (part.op_stage[i] == kSplit) {  // this holder's own contributions
        std::vector<TensorId> mine;
        for (auto t : ops[i].inputs)
          if (part.tensor_stage[static_cast<std::size_t>(t)] == s) mine.push_back(in(k, t));
        if (mine.empty()) continue;
        const TensorId local = mine.size() == 1 ? mine[0] : h.add_n(stage_name(k) + ops[i].name, mine);
        micro[static_cast<std::size_t>(k)][ops[i].outputs[0]] = local;
      } else if (runs_here(i)) {
        copy(k, ops[i]);
      } else {
        continue;
      }
      if (at_once)
        for (auto o : ops[i].outputs)
          if (const auto it = gradient_of.find(o); it != gradient_of.end())
            for (auto p : it->second)
              if (done.insert(p).second) accumulate(k, p);
    }
    for (auto p : updated)
      if (!at_once || !done.count(p)) accumulate(k, p);
  };
  // An exchange with the stage `dir` (+1 next, -1 previous): `sends` of micro-batch `ks` (this
  // graph's tensors of the old ones) and `receives` into micro-batch `kr`, pairwise as one op.
  auto exchange = [&](int dir, const std::vector<TensorId>& sends, std::int64_t ks,
                      const std::vector<TensorId>& receives, std::int64_t kr, Pass pass) {
    h.set_pass(pass);
    for (std::size_t i = 0; i < std::max(sends.size(), receives.size()); ++i) {
      OpAttrs a;
      a.peer = dir * R;
      std::vector<TensorId> args;
      std::string what;
      if (i < sends.size()) {
        args.push_back(in(ks, sends[i]));
        what = g.tensor(sends[i]).name;
      }
      if (i < receives.size()) {
        a.shape = g.tensor(receives[i]).shape;
        a.dtype = g.tensor(receives[i]).dtype;
        what += (what.empty() ? "" : ",") + g.tensor(receives[i]).name;
      }
      const std::string type = args.empty() ? "Receive" : i < receives.size() ? "SendReceive" : "Send";
      const std::int64_t k = args.empty() ? kr : ks;
      const TensorId out = h.apply(type, stage_name(k) + "Pipeline/" + type + "/" + what, args, a)[0];
      if (i < receives.size()) {
        micro[static_cast<std::size_t>(kr)][receives[i]] = out;
        h.set_role(out, g.tensor(receives[i]).role);
      }
    }
  };
  const bool first = s == 0, last = s == P - 1;
  const std::vector<TensorId> none;
  const auto& from_prev = first ? none : part.forward[static_cast<std::size_t>(s - 1)];      // received
  const auto& to_next = last ? none : part.forward[static_cast<std::size_t>(s)];             // sent
  const auto& grad_from_next = last ? none : part.backward[static_cast<std::size_t>(s)];     // received
  const auto& grad_to_prev = first ? none : part.backward[static_cast<std::size_t>(s - 1)];  // sent

  // Megatron's 1F1B: warm-up forwards, then one forward and one backward, then the cool-down.
  const std::int64_t warm = warmup_micro_batches(P, s, M), steady = M - warm;
  for (std::int64_t k = 0; k < warm; ++k) {
    exchange(-1, {}, k, from_prev, k, Pass::Forward);
    forward(k);
    exchange(+1, to_next, k, {}, k, Pass::Forward);
  }
  if (steady > 0) exchange(-1, {}, warm, from_prev, warm, Pass::Forward);
  for (std::int64_t j = 0; j < steady; ++j) {
    forward(warm + j);
    exchange(+1, to_next, warm + j, grad_from_next, j, Pass::Backward);
    backward(j);
    if (j + 1 == steady)
      exchange(-1, grad_to_prev, j, {}, j, Pass::Backward);
    else
      exchange(-1, grad_to_prev, j, from_prev, warm + j + 1, Pass::Backward);
  }
  for (std::int64_t k = steady; k < M; ++k) {
    exchange(+1, {}, k, grad_from_next, k, Pass::Backward);
    backward(k);
    exchange(-1, grad_to_prev, k, {}, k, Pass::Backward);
  }
  // A shared weight's gradient summed over its two holders, as the optimizer begins.
  h.set_pass(Pass::Optimizer);
  OptimizerSpec spec = w.optimizer_spec;
  spec.decayed.clear();
  spec.unsharded.clear();
  spec.split.clear();
  spec.norm_elsewhere.clear();
  spec.partial_gradients.clear();
  for (auto p : updated) {
    const auto& holders = part.holders.at(p);
    if (holders.size() < 2) continue;
    const int other = *holders.begin() == s ? *holders.rbegin() : *holders.begin();
    OpAttrs a;
    a.peer = (other - s) * R;
    sum[p] = h.apply("AllReduce", "Pipeline/SharedWeight/" + g.tensor(p).name + "/AllReduce", {sum.at(p)}, a)[0];
    h.set_role(sum[p], TensorRole::Gradient);
    if (other < s) spec.norm_elsewhere.insert(persistent(p));
  }
  // The optimizer on the step's gradients.
  for (auto t : w.optimizer_spec.decayed)
    if (shared.count(t)) spec.decayed.insert(shared.at(t));
  for (auto t : w.optimizer_spec.unsharded)
    if (shared.count(t)) spec.unsharded.insert(shared.at(t));
  for (auto t : w.optimizer_spec.split)
    if (shared.count(t)) spec.split.insert(shared.at(t));
  for (const auto& [t, group] : w.optimizer_spec.partial_gradients)
    if (shared.count(t)) spec.partial_gradients[shared.at(t)] = group;
  spec.pipeline_stages = P;
  spec.pipeline_stride = R;
  spec.gradients_are_pieces = !pieces.empty();
  // A per-step learning-rate array has one entry per optimizer step: a step is M micro-batches.
  if (spec.lr_schedule_steps > 0) spec.lr_schedule_steps = (spec.lr_schedule_steps + M - 1) / M;
  std::map<TensorId, TensorId> step_grads;
  for (auto p : updated) step_grads[persistent(p)] = sum.at(p);
  append_optimizer(h, step_grads, spec);
  sw.optimizer_spec = spec;
  h.set_pass(Pass::Optimizer);
  for (const auto& [p, a] : accumulator) h.apply("AtomicAddrClean", "Pipeline/ClearGradients/" + g.tensor(p).name, {a});

  sw.loss = last && w.loss >= 0 ? micro.back().at(w.loss) : -1;
  sw.sens = w.sens >= 0 ? persistent(w.sens) : -1;
  sw.parallel.unreduced.clear();
  for (auto t : w.parallel.unreduced)
    if (shared.count(t)) sw.parallel.unreduced.insert(shared.at(t));
  sw.parallel.reduce_scattered.clear();
  for (const auto& op : h.ops())
    if (op.type == "AllGatherInto") sw.parallel.reduce_scattered.insert(op.inputs.at(1));
  sw.parallel.pipeline_stages = P;
  sw.parallel.micro_batches = M;
  sw.parallel.gradient_accumulation = P == 1 ? M : w.parallel.gradient_accumulation;
  sw.parallel.stage = s;
  sw.parallel.stage_first_layer = part.first_layer[static_cast<std::size_t>(s)];
  sw.parallel.stage_layers = part.layers[static_cast<std::size_t>(s)];
  return sw;
}

}  // namespace

std::vector<Workload> pipeline_stages(const Workload& w, std::int64_t stages, std::int64_t micro_batches,
                                      std::int64_t stage_ranks) {
  if (stages < 2)
    throw std::invalid_argument("--pipeline-stages: give 2 or more stages, got " + std::to_string(stages));
  if (micro_batches < 1)
    throw std::invalid_argument("--micro-batches: give 1 or more, got " + std::to_string(micro_batches));
  if (!w.training || w.graph.optimizer_gradients().empty())
    throw std::invalid_argument("--pipeline-stages: pipeline parallelism divides a training step; " + w.name +
                                " has no backward pass");
  const Partition part = partition(w, stages);
  std::vector<Workload> out;
  for (int s = 0; s < stages; ++s) out.push_back(build_stage(w, part, s, micro_batches, stage_ranks));
  return out;
}

Workload accumulate_gradients(const Workload& w, std::int64_t micro_batches) {
  if (micro_batches < 1)
    throw std::invalid_argument("--gradient-accumulation: give 1 or more micro-batches, got " +
                                std::to_string(micro_batches));
  if (!w.training || w.graph.optimizer_gradients().empty())
    throw std::invalid_argument("--gradient-accumulation: accumulation sums a training step's gradients; " + w.name +
                                " has no backward pass");
  return build_stage(w, partition(w, 1), 0, micro_batches, 1);
}

}  // namespace ascendsim::workloads
