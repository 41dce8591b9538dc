#include "runtime/graph_compiler.h"

#include <algorithm>
#include <cstdint>
#include <map>
#include <stdexcept>
#include <unordered_set>

#include "runtime/backend_passes.h"
#include "sim/core/time.h"
#include "workloads/op_registry.h"

namespace ascendsim::runtime {

namespace {

/// A pass's rewritten step: its tasks with their descriptions and types, and the sink form
/// (GetNext first) rebuilt from them.
void set_step(CompiledGraph& c, hostif::TaskList tasks, std::vector<aicore::OpDesc> descs,
              std::vector<std::string> types) {
  c.step_tasks = std::move(tasks);
  c.descs = std::move(descs);
  c.op_types = std::move(types);
  hostif::TaskList sink = {c.sink_tasks.front()};  // GetNext
  sink.insert(sink.end(), c.step_tasks.begin(), c.step_tasks.end());
  c.sink_tasks = std::move(sink);
}

aicore::OpDesc lower_registered(const workloads::Graph& g, const workloads::Op& op) {
  if (!op.def || op.def->view || !op.def->lower)
    throw std::invalid_argument(op.name + ": " + op.type + " does not run on the AI cores");
  return op.def->lower(g, op);
}

}  // namespace

void apply_precision_mode(aicore::OpDesc& d) {
  if (aicore::is_cube(d.kind) && d.precision == aicore::Precision::FP32) d.precision = aicore::Precision::FP16;
}

aicore::OpDesc lower_op(const workloads::Graph& g, const workloads::Op& op) {
  aicore::OpDesc d = lower_registered(g, op);
  apply_precision_mode(d);
  return d;
}

std::vector<CompilePass> default_passes() {
  return {
      cube_precision_pass(),
      bn_split_pass(),
      format_pass(),
      atomic_clean_pass(),
      momentum_fusion_pass(),
      {"lower",
       [](CompileState& s) {
         const auto& g = s.graph;
         for (const auto& op : g.ops()) {
           if (op.def->view) continue;
           s.ops.push_back(&op);
           s.out.descs.push_back(lower_registered(g, op));
         }
       }},
      {"precision",
       [](CompileState& s) {
         for (auto& d : s.out.descs) apply_precision_mode(d);
       }},
      {"cost",
       [](CompileState& s) {
         auto& c = s.out;
         hostif::Task getnext;
         getnext.kind = hostif::TaskKind::GetNext;
         getnext.name = "GetNext";
         getnext.part = hostif::StepPart::Data;
         c.sink_tasks.push_back(getnext);
         for (std::size_t i = 0; i < s.ops.size(); ++i) {
           const workloads::Op& op = *s.ops[i];
           hostif::Task t;
           t.kind = hostif::TaskKind::AiCore;
           t.name = op.name;
           t.tensor_args = static_cast<std::int32_t>(op.inputs.size() + op.outputs.size());
           t.part = op.pass == workloads::Pass::Forward    ? hostif::StepPart::Forward
                    : op.pass == workloads::Pass::Backward ? hostif::StepPart::Backward
                                                           : hostif::StepPart::Optimizer;
           using C = workloads::OpDef::Collective;
           if (op.def->collective != C::None) {
             // A redistribution collective, in the compute stream's order: its consumers wait for it.
             const auto& g = s.graph;
             t.kind = hostif::TaskKind::Comm;
             t.collective = op.def->collective == C::AllReduce   ? hostif::Collective::AllReduce
                            : op.def->collective == C::AllGather ? hostif::Collective::AllGather
                            : op.def->collective == C::AllToAll  ? hostif::Collective::AllToAll
                            : op.def->collective == C::SendRecv  ? hostif::Collective::SendRecv
                                                                 : hostif::Collective::ReduceScatter;
             // AllGather's size is the gathered result; an exchange's, the larger way's (a Send's
             // token is not sent); the others', what each rank contributes.
             if (op.def->collective == C::SendRecv) {
               t.comm_bytes = op.type == "Send" ? 0 : g.tensor(op.outputs[0]).bytes();
               if (!op.inputs.empty()) t.comm_bytes = std::max(t.comm_bytes, g.tensor(op.inputs[0]).bytes());
             } else {
               t.comm_bytes = op.def->collective == C::AllGather ? g.tensor(op.outputs[0]).bytes()
                                                                 : g.tensor(op.inputs[0]).bytes();
             }
             t.group = {static_cast<std::int32_t>(op.group_size), static_cast<std::int32_t>(op.group_stride),
                        static_cast<std::int32_t>(op.peer)};
             const auto& par = s.workload.parallel;
             t.across_stages =
                 par.pipeline_stages > 1 && (op.peer != 0 || (op.group_size == par.pipeline_stages &&
                                                              op.group_stride == par.devices / par.pipeline_stages));
             c.step_tasks.push_back(t);
             c.op_types.push_back(op.type);
             c.sink_tasks.push_back(t);
             continue;
           }
           t.cost = s.model.estimate(c.descs[i]);
           t.time = sim::seconds(t.cost.time_s);
           c.device_compute_s += t.cost.time_s;
           c.step_tasks.push_back(t);
           c.op_types.push_back(op.type);
           c.sink_tasks.push_back(t);
         }
       }},
      {"memory_plan", [](CompileState& s) { s.out.memory = plan_memory(s.workload, s.graph, s.queue_capacity); }},
  };
}

/// HCCL's fusion of a sharded optimizer's collectives: MindSpore's comm_fusion in its "auto" mode
/// fuses consecutive collectives of one kind into buckets of up to 64 MB.
constexpr std::int64_t kFusionBytes = 64ll << 20;

CompilePass comm_stream_pass() {
  return {"comm_stream", [](CompileState& s) {
            auto& c = s.out;
            const std::size_t n = s.ops.size();
            // Each device op's task (tasks other passes added lie between them).
            std::vector<std::size_t> task_of(n);
            for (std::size_t k = 0, i = 0; k < n; ++k) {
              while (i < c.step_tasks.size() && c.step_tasks[i].name != s.ops[k]->name) ++i;
              if (i == c.step_tasks.size()) throw std::logic_error("comm_stream: no task for " + s.ops[k]->name);
              task_of[k] = i++;
            }
            std::map<const workloads::Op*, std::size_t> index;
            for (std::size_t k = 0; k < n; ++k) index[s.ops[k]] = k;
            // Per collective op: the op that last wrote one of its inputs (through views) and the
            // first that reads one of its results (through views).
            constexpr std::size_t none = SIZE_MAX;
            std::vector<std::size_t> writer(s.graph.tensors().size(), none), from(s.graph.tensors().size(), none);
            std::vector<std::size_t> producer(n, none), consumer(n, none);
            std::vector<bool> moved(n, false), feeds_collective(n, false);
            for (const auto& op : s.graph.ops()) {
              const auto it = index.find(&op);
              if (it == index.end()) {  // a view: its result is its input's buffer
                for (auto o : op.outputs) {
                  writer[static_cast<std::size_t>(o)] = writer[static_cast<std::size_t>(op.inputs.at(0))];
                  from[static_cast<std::size_t>(o)] = from[static_cast<std::size_t>(op.inputs.at(0))];
                }
                continue;
              }
              const std::size_t k = it->second;
              const hostif::Task& t = c.step_tasks[task_of[k]];
              const bool comm = t.kind == hostif::TaskKind::Comm && t.stream == 0 && t.comm_group < 0;
              for (auto in : op.inputs) {
                const std::size_t f = from[static_cast<std::size_t>(in)];
                // A collective read by another needs no wait: stream 1 runs them in order.
                if (f != none && comm) feeds_collective[f] = true;
                if (f != none && !comm && consumer[f] == none) consumer[f] = k;
                if (comm) {
                  const std::size_t w = writer[static_cast<std::size_t>(in)];
                  if (w != none && (producer[k] == none || w > producer[k])) producer[k] = w;
                }
              }
              moved[k] = comm;
              for (auto o : op.outputs) {
                writer[static_cast<std::size_t>(o)] = k;
                from[static_cast<std::size_t>(o)] = comm ? k : none;
              }
            }
            // The optimizer's collectives (a sharded optimizer's ReduceScatter and AllGather, the
            // norms' AllReduce) are fused as HCCL fuses them: consecutive ones of one kind and
            // group in buckets of up to kFusionBytes.
            std::vector<std::vector<std::size_t>> units;
            std::vector<std::size_t> unit_of(n, none), anchor, first_use;
            std::vector<bool> chained;  // every member's producer is a collective (the stream orders them)
            const std::size_t end_of_step = c.step_tasks.size();
            for (std::size_t k = 0; k < n; ++k) {
              if (!moved[k]) continue;
              const hostif::Task& t = c.step_tasks[task_of[k]];
              const std::size_t p = producer[k];
              // A unit runs once its members' producers are done: the task to start after.
              std::size_t at = p == none ? task_of[k] : moved[p] ? anchor[unit_of[p]] : task_of[p];
              // A collective among pipeline stages starts where the program reaches it: an exchange
              // after the micro-batch's whole pass (Megatron's send after backward_step), not as
              // soon as its tensor is ready; and every stage posts them in its program's order.
              const bool exchange = t.across_stages;
              if (exchange && task_of[k] > 0) at = std::max(at, task_of[k] - 1);
              const bool on_collective = p != none && moved[p] && !exchange;
              // Nothing of the step reads it: waited for at the step's end, unless a later collective
              // reads it (whose own wait covers it; past the end: never waited for).
              const std::size_t use = consumer[k] != none   ? task_of[consumer[k]]
                                      : feeds_collective[k] ? end_of_step + 1
                                                            : end_of_step;
              bool joins = false;
              if (!units.empty() && s.ops[k]->pass == workloads::Pass::Optimizer) {
                const std::size_t u = units.size() - 1;
                const hostif::Task& f = c.step_tasks[task_of[units[u].front()]];
                std::int64_t bytes = t.comm_bytes;
                for (auto m : units[u]) bytes += c.step_tasks[task_of[m]].comm_bytes;
                // A fused collective waits for its last producer and is waited for by its first
                // consumer: the one must come before the other.
                joins = s.ops[units[u].back()]->pass == workloads::Pass::Optimizer && f.collective == t.collective &&
                        f.group.size == t.group.size && f.group.stride == t.group.stride &&
                        f.group.peer == t.group.peer && bytes <= kFusionBytes && (p == none || unit_of[p] != u) &&
                        std::max(anchor[u], at) < std::min(first_use[u], use);
              }
              if (!joins) {
                units.emplace_back();
                anchor.push_back(at);
                first_use.push_back(use);
                chained.push_back(on_collective);
              } else {
                anchor.back() = std::max(anchor.back(), at);
                first_use.back() = std::min(first_use.back(), use);
                chained.back() = chained.back() && on_collective;
              }
              units.back().push_back(k);
              unit_of[k] = units.size() - 1;
            }
            // A unit runs on the communication stream (stream 1) once its producers are done —
            // right after its producer when that is another collective — and the compute stream
            // waits for it before its first consumer, or at the step's end when nothing in the
            // step reads it (an updated weight's gather).
            std::vector<std::vector<std::size_t>> after(c.step_tasks.size()), before(c.step_tasks.size() + 2);
            for (std::size_t u = 0; u < units.size(); ++u) {
              after[anchor[u]].push_back(u);
              before[first_use[u]].push_back(u);  // before[end_of_step + 1]: never waited for
            }
            hostif::TaskList tasks;
            std::vector<aicore::OpDesc> descs;
            std::vector<std::string> types;
            std::vector<std::int32_t> event(units.size(), 0);
            std::int32_t next_event = 1000;  // clear of the gradient groups' events
            for (const auto& t : c.step_tasks) next_event = std::max(next_event, t.event + 1);
            auto ev = [&](hostif::TaskKind kind, const hostif::Task& of, const std::string& suffix, std::int32_t stream,
                          std::int32_t id) {
              hostif::Task e;
              e.kind = kind;
              e.name = of.name + suffix;
              e.part = of.part;
              e.stream = stream;
              e.event = id;
              tasks.push_back(e);
              descs.emplace_back();
              types.emplace_back(kind == hostif::TaskKind::EventRecord ? "EventRecord" : "EventWait");
            };
            auto waits = [&](std::size_t at) {
              for (auto u : before[at])
                ev(hostif::TaskKind::EventWait, c.step_tasks[task_of[units[u].front()]], "/wait", 0, event[u] + 1);
            };
            auto launch = [&](std::size_t u) {
              hostif::Task on1 = c.step_tasks[task_of[units[u].front()]];
              for (std::size_t m = 1; m < units[u].size(); ++m)
                on1.comm_bytes += c.step_tasks[task_of[units[u][m]]].comm_bytes;
              if (units[u].size() > 1) on1.name += " (+" + std::to_string(units[u].size() - 1) + " fused)";
              on1.stream = 1;
              event[u] = next_event;
              next_event += 2;
              if (!chained[u]) {
                ev(hostif::TaskKind::EventRecord, on1, "/ready", 0, event[u]);
                ev(hostif::TaskKind::EventWait, on1, "/start", 1, event[u]);
              }
              tasks.push_back(on1);
              descs.push_back(c.descs[task_of[units[u].front()]]);
              types.push_back(c.op_types[task_of[units[u].front()]]);
              ev(hostif::TaskKind::EventRecord, on1, "/done", 1, event[u] + 1);
            };
            std::vector<bool> is_moved_task(c.step_tasks.size(), false);
            for (std::size_t k = 0; k < n; ++k)
              if (moved[k]) is_moved_task[task_of[k]] = true;
            for (std::size_t i = 0; i < c.step_tasks.size(); ++i) {
              waits(i);
              if (!is_moved_task[i]) {
                tasks.push_back(c.step_tasks[i]);
                descs.push_back(c.descs[i]);
                types.push_back(c.op_types[i]);
              }
              for (auto u : after[i]) launch(u);
            }
            waits(c.step_tasks.size());
            set_step(c, std::move(tasks), std::move(descs), std::move(types));
          }};
}

void insert_pass(std::vector<CompilePass>& passes, const std::string& after, CompilePass pass) {
  const auto it = std::find_if(passes.begin(), passes.end(), [&](const CompilePass& p) { return p.name == after; });
  if (it == passes.end()) throw std::invalid_argument("no compiler pass named '" + after + "'");
  passes.insert(it + 1, std::move(pass));
}

CompiledGraph compile(const workloads::Workload& w, const aicore::CostModel& model, std::int64_t queue_capacity,
                      const std::vector<CompilePass>& passes) {
  CompileState s{w, model, queue_capacity, w.graph, {}, {}};
  for (auto t : w.batch_inputs) s.out.input_bytes.push_back(w.graph.tensor(t).bytes());
  s.out.batch_bytes = w.batch_bytes();
  auto measure = [&](const std::string& name) {
    const GraphTraffic t = graph_traffic(s.graph);
    s.out.pass_effects.push_back({name, t.ops, t.bytes});
  };
  measure("framework");
  for (const auto& p : passes) {
    const bool rewrites = s.ops.empty();  // the graph is final once lowered
    p.run(s);
    if (rewrites && s.ops.empty()) measure(p.name);
  }
  return std::move(s.out);
}

CompiledGraph compile(const workloads::Workload& w, const aicore::CostModel& model, std::int64_t queue_capacity) {
  auto passes = default_passes();
  if (w.recipe.graph_kernel_fusion) insert_pass(passes, "momentum_fusion", graph_kernel_fusion_pass());
  // UB fusion works on the kernels as selected (layouts, atomic clears) and leaves graph-kernel
  // fusion's kernels alone: it runs after both, last before lowering.
  if (w.recipe.ub_fusion)
    insert_pass(passes, w.recipe.graph_kernel_fusion ? "graph_kernel_fusion" : "momentum_fusion", ub_fusion_pass());
  bool reduces = w.parallel.devices > 1 && w.training;
  if (reduces) {  // any gradient the ranks share and no collective of the graph reduces?
    std::int64_t params = 0;
    for (const auto& t : w.graph.tensors()) params += t.role == workloads::TensorRole::Parameter;
    reduces = (!w.parallel.grouped() || w.parallel.gradient_group_size != 1) &&
              static_cast<std::int64_t>(w.parallel.unreduced.size() + w.parallel.reduce_scattered.size()) < params;
  }
  if (reduces) insert_pass(passes, "cost", all_reduce_pass());
  const bool collectives = std::any_of(w.graph.ops().begin(), w.graph.ops().end(), [](const workloads::Op& op) {
    return op.def && op.def->collective != workloads::OpDef::Collective::None;
  });
  if (w.parallel.semi_auto || collectives) passes.push_back(comm_stream_pass());
  return compile(w, model, queue_capacity, passes);
}

namespace {

using workloads::TensorId;

/// For each op of `ops`: the tensors produced by the backward pass that an optimizer op reads,
/// directly or through other optimizer ops (the gradients as the backward pass left them).
std::vector<const workloads::Op*> device_ops(const workloads::Graph& g) {
  std::vector<const workloads::Op*> ops;
  for (const auto& op : g.ops())
    if (!op.def->view) ops.push_back(&op);
  return ops;
}

struct ParamFlow {
  TensorId param;
  std::size_t update;              ///< the op that updates it in place
  int ready;                       ///< the last backward op its update depends on
  std::vector<TensorId> gradient;  ///< the backward tensors its update reads
};

/// How gradients flow from the backward pass into the optimizer, over `ops` (indices are theirs).
struct GradientFlow {
  /// Per op: for optimizer ops, the backward-produced tensors they read, directly or through other
  /// optimizer ops (a parameter's gradient as the backward pass left it).
  std::vector<std::vector<TensorId>> roots;
  /// Every updated parameter with its update and when its gradient is ready, in gradient order:
  /// by the backward op that finishes it, then the later-created parameter first (the backward
  /// pass walks the network in reverse).
  std::vector<ParamFlow> params;
};

GradientFlow gradient_flow(const workloads::Graph& g, const std::vector<const workloads::Op*>& ops) {
  GradientFlow flow;
  flow.roots.resize(ops.size());
  std::vector<int> producer(g.tensors().size(), -1), update(g.tensors().size(), -1);
  for (std::size_t i = 0; i < ops.size(); ++i) {
    const auto& op = *ops[i];
    const bool optimizer = op.pass == workloads::Pass::Optimizer;
    if (optimizer)
      for (auto t : op.inputs) {
        const int p = producer[static_cast<std::size_t>(t)];
        if (p < 0) continue;
        auto& r = flow.roots[i];
        if (ops[static_cast<std::size_t>(p)]->pass == workloads::Pass::Backward) {
          if (std::find(r.begin(), r.end(), t) == r.end()) r.push_back(t);
        } else if (ops[static_cast<std::size_t>(p)]->pass == workloads::Pass::Optimizer) {
          for (auto x : flow.roots[static_cast<std::size_t>(p)])
            if (std::find(r.begin(), r.end(), x) == r.end()) r.push_back(x);
        }
      }
    for (auto t : op.outputs) {
      const auto ti = static_cast<std::size_t>(t);
      if (!workloads::updates_in_place(op, t))
        producer[ti] = static_cast<int>(i);
      else if (optimizer && update[ti] < 0 && g.tensor(t).role == workloads::TensorRole::Parameter)
        update[ti] = static_cast<int>(i);
    }
  }
  for (std::size_t t = 0; t < g.tensors().size(); ++t) {
    if (update[t] < 0) continue;
    const auto u = static_cast<std::size_t>(update[t]);
    ParamFlow f{static_cast<TensorId>(t), u, -1, flow.roots[u]};
    for (auto r : f.gradient) f.ready = std::max(f.ready, producer[static_cast<std::size_t>(r)]);
    flow.params.push_back(std::move(f));
  }
  std::stable_sort(flow.params.begin(), flow.params.end(), [](const ParamFlow& a, const ParamFlow& b) {
    return a.ready != b.ready ? a.ready < b.ready : a.param > b.param;
  });
  return flow;
}

}  // namespace

std::vector<TensorId> gradient_order(const workloads::Graph& executed) {
  std::vector<TensorId> out;
  for (const auto& f : gradient_flow(executed, device_ops(executed)).params) out.push_back(f.param);
  return out;
}

CompilePass all_reduce_pass() {
  return {
      "all_reduce", [](CompileState& s) {
        const auto& par = s.workload.parallel;
        const workloads::Graph& g = s.graph;
        GradientFlow flow = gradient_flow(g, s.ops);
        // Only the gradients that ranks share are averaged (semi-auto: within their group); a
        // sharded optimizer's are reduce-scattered by the graph's own collectives.
        flow.params.erase(std::remove_if(flow.params.begin(), flow.params.end(),
                                         [&](const ParamFlow& f) {
                                           return (par.grouped() && par.gradient_group_size == 1) ||
                                                  par.unreduced.count(f.param) || par.reduce_scattered.count(f.param);
                                         }),
                          flow.params.end());
        // With pipeline stages a stage's gradients are reduced after its last exchange, which would
        // otherwise queue behind them on the communication stream (Megatron reduces after the
        // pipeline's flush).
        int last_exchange = -1;
        for (std::size_t i = 0; i < s.out.step_tasks.size(); ++i)
          if (s.out.step_tasks[i].across_stages && s.out.step_tasks[i].part != hostif::StepPart::Optimizer)
            last_exchange = static_cast<int>(i);
        for (auto& f : flow.params) f.ready = std::max(f.ready, last_exchange);
        const auto& flows = flow.params;
        const auto n = static_cast<std::int64_t>(flows.size());
        // Group boundaries: the index of each group's last gradient, in gradient order.
        std::vector<std::int64_t> ends = par.all_reduce_fusion;
        for (std::size_t k = 0; k < ends.size(); ++k)
          if (ends[k] < 0 || ends[k] >= n || (k > 0 && ends[k] <= ends[k - 1]))
            throw std::invalid_argument("all_reduce_fusion: group ends must increase within the " + std::to_string(n) +
                                        " gradients (0 to " + std::to_string(n - 1) + "), got " +
                                        std::to_string(ends[k]) + " — give each group's last gradient index, ascending, " +
                                        "among the gradients the ranks AllReduce");
        if (ends.empty() || ends.back() != n - 1) ends.push_back(n - 1);
        struct Group {
          int ready = -1;
          std::size_t first_use = SIZE_MAX;
          std::int64_t bytes = 0;
          std::vector<TensorId> params;
        };
        std::vector<Group> groups(ends.size());
        std::vector<int> group_of_root(g.tensors().size(), -1);
        for (std::size_t k = 0, p = 0; k < ends.size(); ++k) {
          CompiledGraph::CommGroup cg;
          cg.first = static_cast<std::int64_t>(p);
          for (; static_cast<std::int64_t>(p) <= ends[k]; ++p) {
            const auto& f = flows[p];
            groups[k].ready = std::max(groups[k].ready, f.ready);
            const auto& t = g.tensor(f.param);
            groups[k].bytes += t.elements() * workloads::dtype_bytes(t.dtype);
            groups[k].params.push_back(f.param);
            for (auto r : f.gradient) group_of_root[static_cast<std::size_t>(r)] = static_cast<int>(k);
          }
          if (groups[k].ready < 0)  // its AllReduce could never start, and the optimizer would wait forever
            throw std::logic_error("all_reduce: no backward op produces the gradients of group " + std::to_string(k));
          cg.last = ends[k];
          cg.bytes = groups[k].bytes;
          s.out.comm_groups.push_back(cg);
        }
        // The first optimizer op that reads a group's gradients waits for its AllReduce.
        const auto& roots = flow.roots;
        for (std::size_t i = 0; i < s.ops.size(); ++i)
          for (auto r : roots[i]) {
            const int k = group_of_root[static_cast<std::size_t>(r)];
            if (k >= 0)
              groups[static_cast<std::size_t>(k)].first_use =
                  std::min(groups[static_cast<std::size_t>(k)].first_use, i);
          }
        auto task = [](hostif::TaskKind kind, const std::string& name, std::int32_t stream, std::int32_t event) {
          hostif::Task t;
          t.kind = kind;
          t.name = name;
          t.part = hostif::StepPart::Optimizer;  // after the backward pass: the step's tail
          t.stream = stream;
          t.event = event;
          return t;
        };
        CompiledGraph& c = s.out;
        hostif::TaskList tasks;
        std::vector<aicore::OpDesc> descs;
        std::vector<std::string> types;
        auto add = [&](hostif::Task t, const aicore::OpDesc& d, const std::string& type) {
          tasks.push_back(std::move(t));
          descs.push_back(d);
          types.push_back(type);
        };
        for (std::size_t i = 0; i < c.step_tasks.size(); ++i) {
          for (std::size_t k = 0; k < groups.size(); ++k)
            if (groups[k].first_use == i) {
              const std::string name = "AllReduce/group" + std::to_string(k);
              add(task(hostif::TaskKind::EventWait, name + "/wait", 0, static_cast<std::int32_t>(2 * k + 1)), {},
                  "EventWait");
              // gradients_mean (the model zoo's DATA_PARALLEL setting): each summed gradient is
              // scaled by 1/devices, a Mul per gradient, before the optimizer reads it.
              for (auto p : groups[k].params) {
                const auto& t = g.tensor(p);
                aicore::OpDesc d;
                d.kind = aicore::OpKind::Mul;
                d.precision = d.out_precision = workloads::storage_precision(t.dtype);
                d.elements = t.elements();
                hostif::Task mul = task(hostif::TaskKind::AiCore, "GradientsMean/" + t.name, 0, -1);
                mul.cost = s.model.estimate(d);
                mul.time = sim::seconds(mul.cost.time_s);
                c.device_compute_s += mul.cost.time_s;
                add(mul, d, "Mul");
              }
            }
          add(c.step_tasks[i], c.descs[i], c.op_types[i]);
          for (std::size_t k = 0; k < groups.size(); ++k)
            if (groups[k].ready == static_cast<int>(i)) {
              const std::string name = "AllReduce/group" + std::to_string(k);
              const auto e = static_cast<std::int32_t>(2 * k);
              add(task(hostif::TaskKind::EventRecord, name + "/ready", 0, e), {}, "EventRecord");
              add(task(hostif::TaskKind::EventWait, name + "/start", 1, e), {}, "EventWait");
              hostif::Task comm = task(hostif::TaskKind::Comm, name, 1, -1);
              comm.comm_bytes = groups[k].bytes;
              comm.comm_group = static_cast<std::int32_t>(k);
              if (par.grouped()) comm.group = {par.gradient_group_size, par.gradient_group_stride};
              add(comm, {}, "AllReduce");
              add(task(hostif::TaskKind::EventRecord, name + "/done", 1, e + 1), {}, "EventRecord");
            }
        }
        set_step(c, std::move(tasks), std::move(descs), std::move(types));
        // parameter_broadcast: rank 0's initialised training network — weights, BatchNorm
        // statistics and optimizer state, as MindSpore marks the whole train network — to all.
        if (par.parameter_broadcast) {
          std::int64_t bytes = 0;
          for (const auto& t : g.tensors())
            if (t.role == workloads::TensorRole::Parameter || t.role == workloads::TensorRole::OptimizerState ||
                t.role == workloads::TensorRole::State)
              bytes += t.bytes();
          hostif::Task b = task(hostif::TaskKind::Comm, "Broadcast/parameters", 0, -1);
          b.part = hostif::StepPart::Setup;
          b.collective = hostif::Collective::Broadcast;
          // Within the ranks that hold the same weights (a pipeline stage's: each stage its own).
          if (par.grouped()) b.group = {par.gradient_group_size, par.gradient_group_stride};
          b.comm_bytes = bytes;
          c.setup_tasks.push_back(b);
        }
      }};
}

std::int64_t kernels_to_compile(const CompiledGraph& g, const CompiledGraph* known) {
  // A kernel: the op's type with the geometry its cost model sees (Sub and RealDiv of one shape
  // are two kernels though their descriptions agree).
  using Kernel = std::pair<std::string, aicore::OpDesc>;
  struct Hash {
    std::size_t operator()(const Kernel& k) const { return std::hash<std::string>()(k.first) ^ (k.second.hash() << 1); }
  };
  auto kernels = [](const CompiledGraph& c) {
    std::unordered_set<Kernel, Hash> out;
    for (std::size_t i = 0; i < c.step_tasks.size() && i < c.descs.size(); ++i)
      if (c.step_tasks[i].kind == hostif::TaskKind::AiCore)
        out.emplace(i < c.op_types.size() ? c.op_types[i] : std::string(), c.descs[i]);
    return out;
  };
  const auto mine = kernels(g);
  if (known == nullptr) return static_cast<std::int64_t>(mine.size());
  const auto before = kernels(*known);
  return std::count_if(mine.begin(), mine.end(), [&](const Kernel& k) { return before.count(k) == 0; });
}

}  // namespace ascendsim::runtime
