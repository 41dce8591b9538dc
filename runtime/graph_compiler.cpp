#include "runtime/graph_compiler.h"

#include <algorithm>
#include <stdexcept>

#include "runtime/backend_passes.h"
#include "sim/core/time.h"
#include "workloads/op_registry.h"

namespace ascendsim::runtime {

namespace {

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
           t.cost = s.model.estimate(c.descs[i]);
           t.time = sim::seconds(t.cost.time_s);
           t.part = op.pass == workloads::Pass::Forward    ? hostif::StepPart::Forward
                    : op.pass == workloads::Pass::Backward ? hostif::StepPart::Backward
                                                           : hostif::StepPart::Optimizer;
           c.device_compute_s += t.cost.time_s;
           c.step_tasks.push_back(t);
           c.op_types.push_back(op.type);
           c.sink_tasks.push_back(t);
         }
       }},
      {"memory_plan", [](CompileState& s) { s.out.memory = plan_memory(s.workload, s.graph, s.queue_capacity); }},
  };
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
  if (w.recipe.graph_kernel_fusion) insert_pass(passes, "atomic_clean", graph_kernel_fusion_pass());
  return compile(w, model, queue_capacity, passes);
}

}  // namespace ascendsim::runtime
