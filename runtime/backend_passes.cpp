#include "runtime/backend_passes.h"

#include <algorithm>
#include <map>
#include <set>
#include <utility>

#include "workloads/op_registry.h"

namespace ascendsim::runtime {

using workloads::DType;
using workloads::Format;
using workloads::Graph;
using workloads::Op;
using workloads::OpAttrs;
using workloads::TensorId;

namespace {

/// An op of a registered type over existing tensors (a rewrite keeps the tensors downstream ops
/// read).
Op rewritten(const std::string& type, const std::string& name, workloads::Pass pass, std::vector<TensorId> inputs,
             std::vector<TensorId> outputs, const OpAttrs& attrs = {}) {
  const workloads::OpDef& def = workloads::OpRegistry::global().at(type);
  Op op;
  static_cast<OpAttrs&>(op) = attrs;
  op.def = &def;
  op.type = def.name;
  op.name = name;
  op.pass = pass;
  op.inputs = std::move(inputs);
  op.outputs = std::move(outputs);
  return op;
}

std::size_t rank(const Graph& g, TensorId t) { return g.tensor(t).shape.size(); }

/// A fused kernel of `type` standing for `members` (indices into `ops`, ascending) at the place of
/// the last: it reads what the members read from outside the group, once each, writes `outputs`,
/// and does the members' Vector operations per element (attrs.count).
Op fused_kernel(const std::string& type, const std::string& name, const std::vector<Op>& ops,
                const std::vector<std::size_t>& members, const std::vector<int>& producer,
                std::vector<TensorId> outputs) {
  std::vector<TensorId> inputs;
  OpAttrs attrs;
  for (auto m : members) {
    attrs.count += ops[m].def->vector_ops;
    for (auto t : ops[m].inputs) {
      const int p = producer[static_cast<std::size_t>(t)];
      const bool inside = p >= 0 && std::binary_search(members.begin(), members.end(), static_cast<std::size_t>(p));
      if (!inside && std::find(inputs.begin(), inputs.end(), t) == inputs.end()) inputs.push_back(t);
    }
  }
  const Op& last = ops[members.back()];
  return rewritten(type, name, last.pass, std::move(inputs), std::move(outputs), attrs);
}

/// `ops` with each fused group replaced by its kernel: `kernels` maps a group's last member to the
/// kernel, `fused_at` each member to its group's last member (-1: not fused).
std::vector<Op> with_kernels(const std::vector<Op>& ops, const std::vector<int>& fused_at,
                             std::map<std::size_t, Op>& kernels) {
  std::vector<Op> out;
  for (std::size_t i = 0; i < ops.size(); ++i) {
    if (fused_at[i] < 0)
      out.push_back(ops[i]);
    else if (static_cast<std::size_t>(fused_at[i]) == i)
      out.push_back(std::move(kernels.at(i)));
  }
  return out;
}

}  // namespace

GraphTraffic graph_traffic(const Graph& g) {
  GraphTraffic t;
  auto bytes = [&](TensorId id) {
    const auto& x = g.tensor(id);
    return workloads::stored_elements(x.shape, x.format) * workloads::dtype_bytes(x.dtype);
  };
  for (const auto& op : g.ops()) {
    if (op.def->view) continue;
    ++t.ops;
    for (auto i : op.inputs) t.bytes += bytes(i);
    for (std::size_t o = 0; o < op.outputs.size(); ++o) {
      // An output that is an input updated in place is written back once more.
      t.bytes += bytes(op.outputs[o]);
    }
  }
  return t;
}

CompilePass cube_precision_pass() {
  return {"cube_precision", [](CompileState& s) {
            Graph& g = s.graph;
            std::map<TensorId, TensorId> fp16;  // fp32 tensor -> its fp16 copy of this step
            std::vector<Op> ops;
            for (Op op : g.ops()) {
              if (op.def->cube)
                for (auto& in : op.inputs) {
                  if (g.tensor(in).dtype != DType::F32) continue;
                  auto it = fp16.find(in);
                  if (it == fp16.end()) {
                    OpAttrs a;
                    a.dtype = DType::F16;
                    Op cast = g.make_op("Cast", g.tensor(in).name + "/Cast", {in}, a, op.pass);
                    it = fp16.emplace(in, cast.outputs[0]).first;
                    ops.push_back(std::move(cast));
                  }
                  in = it->second;
                }
              ops.push_back(std::move(op));
            }
            g.set_ops(std::move(ops));
          }};
}

CompilePass bn_split_pass() {
  return {"bn_split", [](CompileState& s) {
            Graph& g = s.graph;
            std::vector<Op> ops;
            for (Op op : g.ops()) {
              if (op.type == "BatchNorm" && !s.workload.training) {
                // inference: the moving statistics normalise; x, gamma, beta, mean, variance -> y
                const auto& in = op.inputs;
                ops.push_back(rewritten("BNInfer", op.name + "/BNInfer", op.pass, {in[0], in[1], in[2], in[3], in[4]},
                                        {op.outputs[0]}));
              } else if (op.type == "BatchNorm") {
                // x, gamma, beta, moving mean, moving variance -> y, batch mean, batch variance
                const auto& in = op.inputs;
                Op reduce = g.make_op("BNTrainingReduce", op.name + "/BNTrainingReduce", {in[0]}, {}, op.pass);
                std::vector<TensorId> update_in = {in[0], reduce.outputs[0], reduce.outputs[1], in[1], in[2], in[3],
                                                   in[4]};
                ops.push_back(std::move(reduce));
                ops.push_back(rewritten("BNTrainingUpdate", op.name + "/BNTrainingUpdate", op.pass,
                                        std::move(update_in), op.outputs));
              } else if (op.type == "BatchNormGrad") {
                // dy, x, gamma, batch mean, batch variance -> dx, dgamma, dbeta
                const auto& in = op.inputs;
                const auto& out = op.outputs;
                ops.push_back(rewritten("BNTrainingUpdateGrad", op.name + "/BNTrainingUpdateGrad", op.pass,
                                        {in[0], in[1], in[3], in[4]}, {out[1], out[2]}));
                ops.push_back(rewritten("BNTrainingReduceGrad", op.name + "/BNTrainingReduceGrad", op.pass,
                                        {in[0], in[1], out[1], out[2], in[2], in[3], in[4]}, {out[0]}));
              } else {
                ops.push_back(std::move(op));
              }
            }
            g.set_ops(std::move(ops));
          }};
}

CompilePass format_pass() {
  return {
      "formats", [](CompileState& s) {
        Graph& g = s.graph;
        const std::size_t nt = g.tensors().size();
        std::vector<bool> known(nt, false), pinned(nt, false);
        const std::vector<int> producer = workloads::tensor_producers(g);
        const auto& old = g.ops();
        auto wanted = [](const Op& op, std::size_t i) {
          return i < op.def->formats.size() ? op.def->formats[i] : Format::Any;
        };
        auto layout_free = [&](const Op& op) {  // passes input 0's layout through
          return (op.def->formats.empty() || wanted(op, 0) == Format::Any) && op.def->out_format == Format::Any &&
                 !op.inputs.empty() && rank(g, op.inputs[0]) == rank(g, op.outputs[0]);
        };
        // Tensors nothing produces in the step (batch inputs, parameters, state): batch inputs
        // arrive in ND from the host; a persistent tensor is stored in the layout its first
        // layout-demanding consumer wants, through layout-free ops (O2's weight Cast).
        for (const auto& op : old)
          for (std::size_t i = 0; i < op.inputs.size(); ++i) {
            const Format want = wanted(op, i);
            if (want == Format::Any || rank(g, op.inputs[i]) <= 1) continue;
            TensorId t = op.inputs[i];
            while (producer[static_cast<std::size_t>(t)] >= 0 &&
                   layout_free(old[static_cast<std::size_t>(producer[static_cast<std::size_t>(t)])]))
              t = old[static_cast<std::size_t>(producer[static_cast<std::size_t>(t)])].inputs[0];
            const auto ti = static_cast<std::size_t>(t);
            if (producer[ti] >= 0 || pinned[ti] || !workloads::is_persistent(g.tensor(t).role)) continue;
            g.set_format(t, want);
            pinned[ti] = true;
          }
        for (std::size_t t = 0; t < nt; ++t)
          if (producer[t] < 0) known[t] = true;  // ND unless set above

        std::map<std::pair<TensorId, Format>, TensorId> converted;
        std::vector<Op> ops;
        for (Op op : g.ops()) {
          Format first = Format::ND;
          // A persistent tensor no consumer demanded a layout of, combined by a layout-free op with
          // a computed operand of its rank (a gradient accumulator and the gradient, MindSpore's
          // accu_grads cloned from the weights), is stored in that operand's layout.
          if (layout_free(op) && op.inputs.size() >= 2) {
            const auto i0 = static_cast<std::size_t>(op.inputs[0]);
            if (!pinned[i0] && producer[i0] < 0 && workloads::is_persistent(g.tensor(op.inputs[0]).role))
              for (std::size_t i = 1; i < op.inputs.size(); ++i)
                if (producer[static_cast<std::size_t>(op.inputs[i])] >= 0 &&
                    rank(g, op.inputs[i]) == rank(g, op.inputs[0]) && known[static_cast<std::size_t>(op.inputs[i])]) {
                  g.set_format(op.inputs[0], g.tensor(op.inputs[i]).format);
                  pinned[i0] = true;
                  break;
                }
          }
          for (std::size_t i = 0; i < op.inputs.size(); ++i) {
            TensorId& in = op.inputs[i];
            if (rank(g, in) <= 1) continue;
            Format want = wanted(op, i);
            // A layout-free op reads its other same-rank operands in input 0's layout.
            if (want == Format::Any && i > 0 && rank(g, in) == rank(g, op.inputs[0])) want = first;
            const auto ii = static_cast<std::size_t>(in);
            if (want != Format::Any && !pinned[ii] && producer[ii] < 0 && workloads::is_persistent(g.tensor(in).role)) {
              g.set_format(in, want);  // a persistent tensor no consumer demanded a layout of yet
              pinned[ii] = true;
            }
            if (want != Format::Any && g.tensor(in).format != want) {
              auto it = converted.find({in, want});
              if (it == converted.end()) {
                OpAttrs a;
                a.format = want;
                Op trans = g.make_op("TransData", g.tensor(in).name + "/TransData_" + workloads::format_name(want),
                                     {in}, a, op.pass);
                it = converted.emplace(std::make_pair(in, want), trans.outputs[0]).first;
                ops.push_back(std::move(trans));
              }
              in = it->second;
            }
            if (i == 0) first = g.tensor(in).format;
          }
          for (std::size_t o = 0; o < op.outputs.size(); ++o) {
            const TensorId t = op.outputs[o];
            if (workloads::updates_in_place(op, t) || known[static_cast<std::size_t>(t)]) continue;
            known[static_cast<std::size_t>(t)] = true;
            Format f = Format::ND;
            if (rank(g, t) >= 2) {
              f = op.def->out_format;
              if (f == Format::Any) f = !op.inputs.empty() && rank(g, op.inputs[0]) == rank(g, t) ? first : Format::ND;
            }
            g.set_format(t, f);
          }
          ops.push_back(std::move(op));
        }
        g.set_ops(std::move(ops));
      }};
}

CompilePass atomic_clean_pass() {
  return {"atomic_clean", [](CompileState& s) {
            Graph& g = s.graph;
            std::vector<Op> ops;
            for (Op op : g.ops()) {
              if (!op.def->view && op.def->lower) {
                aicore::OpDesc d = op.def->lower(g, op);
                apply_precision_mode(d);
                const aicore::OpCost c = s.model.estimate(d);
                const bool k_split = aicore::is_cube(d.kind) && c.tiling.c.k_split > 1;
                const bool reduction =
                    (d.kind == aicore::OpKind::BNTrainingReduce || d.kind == aicore::OpKind::BNTrainingUpdateGrad ||
                     d.kind == aicore::OpKind::BiasAddGrad || d.kind == aicore::OpKind::ReduceSum) &&
                    c.blocks > 1;
                if (k_split || reduction)
                  ops.push_back(
                      rewritten("AtomicAddrClean", op.name + "/AtomicAddrClean", op.pass, op.outputs, op.outputs));
              }
              ops.push_back(std::move(op));
            }
            g.set_ops(std::move(ops));
          }};
}

CompilePass graph_kernel_fusion_pass() {
  return {"graph_kernel_fusion", [](CompileState& s) {
            using Fusion = workloads::OpDef::Fusion;
            Graph& g = s.graph;
            const auto& ops = g.ops();
            const std::size_t n = ops.size(), nt = g.tensors().size();
            // Who produces and who reads each tensor (an in-place output is not a production; the
            // AtomicAddrClean before a kernel does not read what it clears).
            const std::vector<int> producer = workloads::tensor_producers(g);
            std::vector<std::vector<std::size_t>> readers(nt);
            for (std::size_t i = 0; i < n; ++i) {
              if (ops[i].type == "AtomicAddrClean") continue;
              for (auto t : ops[i].inputs) {
                auto& r = readers[static_cast<std::size_t>(t)];
                if (r.empty() || r.back() != i) r.push_back(i);
              }
            }
            std::vector<std::size_t> parent(n);
            for (std::size_t i = 0; i < n; ++i) parent[i] = i;
            auto root = [&](std::size_t i) {
              while (parent[i] != i) i = parent[i] = parent[parent[i]];
              return i;
            };
            for (std::size_t j = 0; j < n; ++j) {
              const Op& b = ops[j];
              if (b.def->fusion == Fusion::None) continue;
              const std::int64_t size =
                  g.tensor(b.def->fusion == Fusion::Reduction ? b.inputs[0] : b.outputs[0]).elements();
              for (auto t : b.inputs) {
                const auto ti = static_cast<std::size_t>(t);
                if (producer[ti] < 0 || readers[ti].size() != 1) continue;  // a tensor only b reads
                const Op& a = ops[static_cast<std::size_t>(producer[ti])];
                // Within a pass, or a gradient's last backward op into its optimizer kernel.
                const bool passes_ok =
                    a.pass == b.pass || (a.pass == workloads::Pass::Backward && b.pass == workloads::Pass::Optimizer);
                if (a.def->fusion != Fusion::Elementwise || !passes_ok) continue;
                if (workloads::is_persistent(g.tensor(t).role) || g.tensor(t).role == workloads::TensorRole::Loss)
                  continue;
                if (g.tensor(t).elements() != size) continue;
                parent[root(static_cast<std::size_t>(producer[ti]))] = root(j);
              }
            }
            std::map<std::size_t, std::vector<std::size_t>> groups;
            for (std::size_t i = 0; i < n; ++i)
              if (ops[i].def->fusion != Fusion::None) groups[root(i)].push_back(i);
            std::vector<int> fused_at(n, -1);   // member -> index of its group's last member
            std::map<std::size_t, Op> kernels;  // last member -> the fused kernel
            for (const auto& [r, members] : groups) {
              if (members.size() < 2) continue;
              const std::size_t last = members.back();
              std::set<std::size_t> in_group(members.begin(), members.end());
              std::vector<TensorId> outputs;
              std::string types;
              bool placeable = true;
              for (auto m : members) {
                const Op& op = ops[m];
                types += (types.empty() ? "" : "_") + op.type;
                for (auto t : op.outputs) {
                  const auto ti = static_cast<std::size_t>(t);
                  const auto& rd = readers[ti];
                  const bool outside =
                      workloads::is_persistent(g.tensor(t).role) || g.tensor(t).role == workloads::TensorRole::Loss ||
                      rd.empty() ||
                      std::any_of(rd.begin(), rd.end(), [&](std::size_t k) { return !in_group.count(k); });
                  if (!outside || std::find(outputs.begin(), outputs.end(), t) != outputs.end()) continue;
                  outputs.push_back(t);
                  // The fused kernel runs where its last member ran: nothing outside may read one of
                  // its results between the member that writes it and that point (reading the
                  // value from before, as the forward pass reads a weight before its update, is
                  // fine).
                  for (auto k : rd)
                    if (!in_group.count(k) && k > m && k < last) placeable = false;
                }
              }
              // A kernel reads at most 64 tensors (the Vector kernels' operand limit): a wider group
              // (a global norm's partial sums joined again) stays unfused.
              std::set<TensorId> reads;
              for (auto m : members)
                for (auto t : ops[m].inputs)
                  if (producer[static_cast<std::size_t>(t)] < 0 ||
                      !in_group.count(static_cast<std::size_t>(producer[static_cast<std::size_t>(t)])))
                    reads.insert(t);
              if (!placeable || reads.size() > 64) continue;
              kernels.emplace(last, fused_kernel("FusedElementwise", ops[last].name + "/Fused_" + types, ops, members,
                                                 producer, outputs));
              for (auto m : members) fused_at[m] = static_cast<int>(last);
            }
            g.set_ops(with_kernels(ops, fused_at, kernels));
          }};
}

CompilePass ub_fusion_pass() {
  return {
      "ub_fusion", [](CompileState& s) {
        Graph& g = s.graph;
        const auto& ops = g.ops();
        const std::size_t n = ops.size(), nt = g.tensors().size();
        const std::vector<int> producer = workloads::tensor_producers(g);
        // Who reads each tensor (the AtomicAddrClean before a kernel does not read what it clears),
        // and which tensors their producer accumulates atomically (complete only in HBM).
        std::vector<std::vector<std::size_t>> readers(nt);
        std::vector<bool> cleared(nt, false);
        for (std::size_t i = 0; i < n; ++i) {
          if (ops[i].type == "AtomicAddrClean") {
            for (auto t : ops[i].inputs) cleared[static_cast<std::size_t>(t)] = true;
            continue;
          }
          for (auto t : ops[i].inputs) {
            auto& r = readers[static_cast<std::size_t>(t)];
            if (r.empty() || r.back() != i) r.push_back(i);
          }
        }
        auto eltwise = [](const Op& op) {
          static const std::set<std::string> kinds = {"ReLU", "ReLU6", "Add",      "AddN",
                                                      "Mul",  "BiasAdd", "ReluGrad", "ReLU6Grad"};
          return kinds.count(op.type) > 0 && op.outputs.size() == 1;
        };
        auto kept = [&](TensorId t) {  // must reach HBM whoever reads it
          return workloads::is_persistent(g.tensor(t).role) || g.tensor(t).role == workloads::TensorRole::Loss;
        };
        std::vector<bool> taken(n, false);
        // The element-wise op that continues a chain through `t` (op i's result): t's only reader,
        // in i's pass, whose result has t's shape, type and layout; or -1.
        auto next_eltwise = [&](std::size_t i, TensorId t) {
          const auto ti = static_cast<std::size_t>(t);
          if (kept(t) || cleared[ti] || readers[ti].size() != 1) return -1;
          const std::size_t j = readers[ti][0];
          const Op& c = ops[j];
          if (taken[j] || c.pass != ops[i].pass || !eltwise(c) || workloads::updates_in_place(c, c.outputs[0]))
            return -1;
          const auto &a = g.tensor(t), &r = g.tensor(c.outputs[0]);
          if (r.shape != a.shape || r.dtype != a.dtype || r.format != a.format) return -1;
          return static_cast<int>(j);
        };
        // The reduction of `type` in i's pass that reads `t` as its input 0; or -1.
        auto reduction = [&](std::size_t i, TensorId t, const char* type) {
          if (cleared[static_cast<std::size_t>(t)]) return -1;
          for (auto j : readers[static_cast<std::size_t>(t)])
            if (!taken[j] && ops[j].type == type && ops[j].pass == ops[i].pass && ops[j].inputs[0] == t)
              return static_cast<int>(j);
          return -1;
        };
        std::vector<int> fused_at(n, -1);
        std::map<std::size_t, Op> kernels;
        for (std::size_t i = 0; i < n; ++i) {
          const Op& p = ops[i];
          if (taken[i] || p.pass == workloads::Pass::Optimizer || p.outputs.empty()) continue;
          const bool cube = (p.type == "Conv2D" || p.type == "Conv2DBackpropInput" || p.type == "MatMul") &&
                            p.inputs.size() == 2 && p.inputs[0] != p.inputs[1] && p.outputs.size() == 1 &&
                            !cleared[static_cast<std::size_t>(p.outputs[0])];
          std::vector<std::size_t> members = {i};
          bool reduces = false;
          if (cube || p.type == "BNTrainingUpdate") {
            if (p.type == "Conv2D")  // Conv2dBnReduceFusion
              if (const int r = reduction(i, p.outputs[0], "BNTrainingReduce"); r >= 0) {
                members.push_back(static_cast<std::size_t>(r));
                reduces = true;
              }
            // Conv2dEltwise, Conv2DBackpropEltwise, MatmulEltwise, BnupdateEltwise(Eltwise)Fusion
            for (TensorId t = p.outputs[0]; !reduces && members.size() < 3;) {
              const int j = next_eltwise(i, t);
              if (j < 0) break;
              members.push_back(static_cast<std::size_t>(j));
              t = ops[static_cast<std::size_t>(j)].outputs[0];
            }
          } else if (eltwise(p)) {  // an element-wise op into BNTrainingUpdateGrad
            if (const int r = reduction(i, p.outputs[0], "BNTrainingUpdateGrad"); r >= 0)
              members.push_back(static_cast<std::size_t>(r));
          }
          if (members.size() < 2) continue;
          const std::size_t last = members.back();
          const std::set<std::size_t> in_group(members.begin(), members.end());
          // The results that leave the kernel: read outside it, or kept; nothing outside may read
          // one between the member that writes it and the kernel's place (its last member's).
          std::vector<TensorId> outputs;
          bool placeable = true;
          std::string types;
          for (auto m : members) {
            types += (types.empty() ? "" : "_") + ops[m].type;
            for (auto t : ops[m].outputs) {
              const auto& rd = readers[static_cast<std::size_t>(t)];
              const bool outside = kept(t) || rd.empty() || std::any_of(rd.begin(), rd.end(), [&](std::size_t k) {
                                     return !in_group.count(k);
                                   });
              if (!outside) continue;
              if (std::find(outputs.begin(), outputs.end(), t) == outputs.end()) outputs.push_back(t);
              for (auto k : rd)
                if (!in_group.count(k) && k > m && k < last) placeable = false;
            }
          }
          if (!placeable) continue;
          const std::string name = ops[last].name + "/FusionOp_" + types;
          Op kernel;
          if (cube) {
            // The Cube result is output 0 beside a fused reduction's sums, else the last consumer's.
            std::vector<TensorId> outs = {reduces ? p.outputs[0] : ops[last].outputs[0]};
            for (auto t : outputs)
              if (std::find(outs.begin(), outs.end(), t) == outs.end()) outs.push_back(t);
            Op fused = fused_kernel("UBFused" + p.type, name, ops, members, producer, std::move(outs));
            static_cast<OpAttrs&>(fused) = static_cast<const OpAttrs&>(p);
            fused.count = 0;
            for (std::size_t k = 1; k < members.size(); ++k) fused.count += ops[members[k]].def->vector_ops;
            // The fused kernel must tile with its output tiles whole in the UB: no K split, the
            // consumers' operands beside the result tile.
            try {
              aicore::OpDesc d = fused.def->lower(g, fused);
              apply_precision_mode(d);
              if (s.model.estimate(d).tiling.c.k_split > 1) continue;
            } catch (const std::logic_error&) {
              continue;
            }
            kernel = std::move(fused);
          } else {
            kernel = fused_kernel("UBFusedElementwise", name, ops, members, producer, outputs);
          }
          kernels.emplace(last, std::move(kernel));
          for (auto m : members) {
            fused_at[m] = static_cast<int>(last);
            taken[m] = true;
          }
        }
        g.set_ops(with_kernels(ops, fused_at, kernels));
      }};
}

CompilePass momentum_fusion_pass() {
  return {"momentum_fusion", [](CompileState& s) {
            Graph& g = s.graph;
            const auto& ops = g.ops();
            const std::size_t n = ops.size(), nt = g.tensors().size();
            const std::vector<int> producer = workloads::tensor_producers(g);
            std::vector<int> readers(nt, 0);
            for (const auto& op : ops)
              for (auto t : op.inputs) ++readers[static_cast<std::size_t>(t)];
            // An optimizer-pass op of `type` that produces `t` for one reader only, or -1.
            auto sole = [&](TensorId t, const char* type) {
              const int p = producer[static_cast<std::size_t>(t)];
              if (p < 0 || readers[static_cast<std::size_t>(t)] != 1) return -1;
              const Op& op = ops[static_cast<std::size_t>(p)];
              return op.type == type && op.pass == workloads::Pass::Optimizer ? p : -1;
            };
            auto scalar = [&](TensorId t) { return g.tensor(t).elements() == 1; };
            std::vector<int> fused_at(n, -1);
            std::map<std::size_t, Op> kernels;
            for (std::size_t i = 0; i < n; ++i) {
              const Op& am = ops[i];
              if (am.type != "ApplyMomentum") continue;  // param, accum, lr, grad, momentum
              const TensorId param = am.inputs[0], grad = am.inputs[3];
              std::vector<std::size_t> members;
              const char* type = nullptr;
              if (const int add = sole(grad, "Add"); add >= 0) {
                // grad = Mul(param, wd) + Mul(g, 1/loss_scale): weight decay and the unscale.
                const Op& a = ops[static_cast<std::size_t>(add)];
                int decay = -1, unscale = -1;
                for (auto x : a.inputs) {
                  const int m = sole(x, "Mul");
                  if (m < 0 || !scalar(ops[static_cast<std::size_t>(m)].inputs[1])) continue;
                  (ops[static_cast<std::size_t>(m)].inputs[0] == param ? decay : unscale) = m;
                }
                if (decay >= 0 && unscale >= 0) {
                  members = {static_cast<std::size_t>(unscale), static_cast<std::size_t>(decay),
                             static_cast<std::size_t>(add), i};
                  type = "FusedWeightScaleApplyMomentum";
                }
              } else if (const int mul = sole(grad, "Mul");
                         mul >= 0 && scalar(ops[static_cast<std::size_t>(mul)].inputs[1])) {
                members = {static_cast<std::size_t>(mul), i};
                type = "FusedMulApplyMomentum";
              }
              if (!type) continue;
              std::sort(members.begin(), members.end());
              kernels.emplace(i, fused_kernel(type, am.name + "/" + type, ops, members, producer, am.outputs));
              for (auto m : members) fused_at[m] = static_cast<int>(i);
            }
            g.set_ops(with_kernels(ops, fused_at, kernels));
          }};
}

}  // namespace ascendsim::runtime
