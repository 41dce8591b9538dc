// The backend passes, each on its own: op counts and bytes before and after, and what each pass
// must keep (every op's operands and results, the parameters' updates, the loss).
#include <algorithm>
#include <map>
#include <set>

#include <gtest/gtest.h>

#include "aicore/cost_model.h"
#include "runtime/backend_passes.h"
#include "workloads/op_registry.h"
#include "tests/test_support.h"
#include "workloads/workload.h"

namespace ascendsim {
namespace {

using workloads::DType;
using workloads::Format;
using workloads::Graph;
using workloads::Op;
using workloads::TensorId;
using workloads::Workload;

const aicore::CostModel& model() { return test::cost_model(); }

/// The executed graph after the given passes (in that order).
Graph after(const Workload& w, const std::vector<runtime::CompilePass>& passes) {
  runtime::CompileState s{w, model(), 16, w.graph, {}, {}};
  for (const auto& p : passes) p.run(s);
  return s.graph;
}

std::int64_t count(const Graph& g, const std::string& type) {
  return std::count_if(g.ops().begin(), g.ops().end(), [&](const Op& op) { return op.type == type; });
}

/// The ops of `g` other than `inserted` types, as (name, type, inputs, outputs) after mapping each
/// inserted op's output back to its input (a Cast or TransData stands for the tensor it converts).
std::vector<std::tuple<std::string, std::string, std::vector<TensorId>, std::vector<TensorId>>> skeleton(
    const Graph& g, const std::set<std::string>& inserted) {
  std::map<TensorId, TensorId> origin;
  std::vector<std::tuple<std::string, std::string, std::vector<TensorId>, std::vector<TensorId>>> out;
  for (const auto& op : g.ops()) {
    if (inserted.count(op.type)) {
      if (op.type != "AtomicAddrClean") origin[op.outputs[0]] = op.inputs[0];
      continue;
    }
    std::vector<TensorId> in = op.inputs;
    for (auto& t : in)
      while (origin.count(t)) t = origin[t];
    out.emplace_back(op.name, op.type, in, op.outputs);
  }
  return out;
}

TEST(BackendPasses, CubePrecisionCastsEachFp32CubeOperandOnce) {
  const Workload w = workloads::make_workload("lenet5", 32);  // fp32 (O0)
  std::set<TensorId> fp32_cube_operands;
  for (const auto& op : w.graph.ops())
    if (op.def->cube)
      for (auto t : op.inputs)
        if (w.graph.tensor(t).dtype == DType::F32) fp32_cube_operands.insert(t);
  const Graph g = after(w, {runtime::cube_precision_pass()});
  EXPECT_EQ(fp32_cube_operands.size(), 15u);  // 5 weights, 5 activations, 5 gradients
  EXPECT_EQ(count(g, "Cast"), count(w.graph, "Cast") + static_cast<std::int64_t>(fp32_cube_operands.size()));
  for (const auto& op : g.ops()) {
    if (!op.def->cube) continue;
    for (auto t : op.inputs) EXPECT_EQ(g.tensor(t).dtype, DType::F16) << op.name;
    EXPECT_EQ(g.tensor(op.outputs[0]).dtype, DType::F32) << op.name << ": the Cube accumulates and writes fp32";
  }
  // The same computation: the ops and their tensors once the casts are seen through.
  EXPECT_EQ(skeleton(g, {"Cast"}), skeleton(w.graph, {"Cast"}));
  const auto before = runtime::graph_traffic(w.graph), now = runtime::graph_traffic(g);
  EXPECT_EQ(now.ops, before.ops + 15);
  EXPECT_GT(now.bytes, before.bytes);
}

TEST(BackendPasses, TheRecipeDecidesTheCasts) {
  // O2 with fp16 BatchNorm (the ResNet script): the network is fp16 already, no cast is added
  // and no BatchNorm is wrapped in casts; O0: no fp16 tensor but the Cube's operands.
  const Workload o2 = workloads::make_workload("resnet50", 32);
  const Graph g2 = after(o2, {runtime::cube_precision_pass()});
  EXPECT_EQ(g2.ops().size(), o2.graph.ops().size());
  for (const auto& op : g2.ops())
    if (op.type == "BatchNorm") {
      EXPECT_EQ(g2.tensor(op.inputs[0]).dtype, DType::F16) << op.name;
    }
  workloads::RecipeOverrides fp32;
  fp32.amp_level = "O0";
  const Workload o0 = workloads::make_workload("resnet50", 32, fp32);
  for (const auto& t : o0.graph.tensors()) EXPECT_NE(t.dtype, DType::F16) << t.name;
  const Graph g0 = after(o0, {runtime::cube_precision_pass()});
  std::set<TensorId> cube_inputs;
  for (const auto& op : g0.ops())
    if (op.def->cube) cube_inputs.insert(op.inputs.begin(), op.inputs.end());
  for (const auto& op : g0.ops())
    for (auto t : op.outputs)
      if (g0.tensor(t).dtype == DType::F16) {
        EXPECT_TRUE(op.type == "Cast" && cube_inputs.count(t)) << op.name;
      }
}

TEST(BackendPasses, BatchNormRunsAsTwoKernelsEachWay) {
  const Workload w = workloads::make_workload("resnet50", 32);
  const std::int64_t bn = count(w.graph, "BatchNorm"), bng = count(w.graph, "BatchNormGrad");
  EXPECT_EQ(bn, 53);
  EXPECT_EQ(bng, 53);
  const Graph g = after(w, {runtime::bn_split_pass()});
  EXPECT_EQ(count(g, "BatchNorm") + count(g, "BatchNormGrad"), 0);
  EXPECT_EQ(count(g, "BNTrainingReduce"), bn);
  EXPECT_EQ(count(g, "BNTrainingUpdate"), bn);
  EXPECT_EQ(count(g, "BNTrainingUpdateGrad"), bng);
  EXPECT_EQ(count(g, "BNTrainingReduceGrad"), bng);
  EXPECT_EQ(g.ops().size(), w.graph.ops().size() + static_cast<std::size_t>(bn + bng));
  // Each forward pair reads x twice, each backward pair dy, x and the batch statistics twice: the
  // bytes grow by exactly one more read of those, plus the per-channel sums passed between the two.
  std::int64_t extra = 0;
  for (const auto& op : w.graph.ops()) {
    const auto bytes = [&](TensorId t) { return w.graph.tensor(t).bytes(); };
    if (op.type == "BatchNorm") {
      const std::int64_t c = w.graph.tensor(op.inputs[1]).shape[0];
      extra += bytes(op.inputs[0]) + 2 * (2 * c * 4);  // x again; sum and square sum written and read
    }
    if (op.type == "BatchNormGrad")  // dy, x, batch mean and variance again; dgamma and dbeta read back
      extra += bytes(op.inputs[0]) + bytes(op.inputs[1]) + bytes(op.inputs[3]) + bytes(op.inputs[4]) +
               bytes(op.outputs[1]) + bytes(op.outputs[2]);
  }
  EXPECT_EQ(runtime::graph_traffic(g).bytes - runtime::graph_traffic(w.graph).bytes, extra);
  // Downstream ops read the same tensors: the update writes BatchNorm's own outputs.
  std::set<TensorId> produced;
  for (const auto& op : g.ops()) produced.insert(op.outputs.begin(), op.outputs.end());
  for (const auto& op : w.graph.ops())
    for (auto t : op.outputs) EXPECT_TRUE(produced.count(t)) << op.name;
}

TEST(BackendPasses, FormatsConvertWhereAConsumerWantsAnotherLayout) {
  for (const char* name : {"lenet5", "resnet50"}) {
    SCOPED_TRACE(name);
    const Workload w = workloads::make_workload(name, 32);
    const Graph g = after(w, {runtime::cube_precision_pass(), runtime::bn_split_pass(), runtime::format_pass()});
    for (const auto& op : g.ops()) {
      for (std::size_t i = 0; i < op.inputs.size() && i < op.def->formats.size(); ++i) {
        const auto& t = g.tensor(op.inputs[i]);
        if (op.def->formats[i] == Format::Any || t.shape.size() <= 1) continue;
        EXPECT_EQ(t.format, op.def->formats[i]) << op.name << " input " << i;  // every kernel gets its layout
      }
      // Parameters and optimizer state are stored in their consumers' layout, never converted.
      if (op.type == "TransData") {
        EXPECT_FALSE(workloads::is_persistent(g.tensor(op.inputs[0]).role)) << op.name;
      }
    }
    EXPECT_EQ(skeleton(g, {"TransData"}).size(), g.ops().size() - static_cast<std::size_t>(count(g, "TransData")));
  }
  // LeNet-5: the image into NC1HWC0; into ND for the flatten and out of it in backward; the
  // dense layers' operands into FRACTAL_NZ and their logits back to ND, each way.
  const Workload lenet = workloads::make_workload("lenet5", 32);
  const Graph g = after(lenet, {runtime::cube_precision_pass(), runtime::format_pass()});
  EXPECT_EQ(count(g, "TransData"), 7);
  std::map<std::string, int> targets;
  for (const auto& op : g.ops())
    if (op.type == "TransData") ++targets[workloads::format_name(op.format)];
  EXPECT_EQ(targets, (std::map<std::string, int>{{"FRACTAL_NZ", 2}, {"NC1HWC0", 2}, {"ND", 3}}));
  // Padding counts: the one-channel image takes 16 channels in NC1HWC0.
  for (const auto& op : g.ops())
    if (op.type == "TransData" && op.format == Format::NC1HWC0 && g.tensor(op.inputs[0]).shape[1] == 1) {
      EXPECT_EQ(workloads::stored_elements(g.tensor(op.outputs[0]).shape, Format::NC1HWC0),
                16 * g.tensor(op.inputs[0]).elements());
    }
}

TEST(BackendPasses, AtomicAddrCleanPrecedesEveryKernelThatAccumulates) {
  const Workload w = workloads::make_workload("resnet50", 32);
  const Graph g = after(w, {runtime::cube_precision_pass(), runtime::bn_split_pass(), runtime::format_pass(),
                            runtime::atomic_clean_pass()});
  std::int64_t k_split = 0, reductions = 0;
  for (std::size_t i = 0; i < g.ops().size(); ++i) {
    const Op& op = g.ops()[i];
    if (op.type == "AtomicAddrClean") {
      ASSERT_LT(i + 1, g.ops().size());
      EXPECT_EQ(op.outputs, g.ops()[i + 1].outputs) << op.name << " clears what the next kernel writes";
      continue;
    }
    const aicore::OpDesc d = op.def->lower(g, op);
    const aicore::OpCost c = model().estimate(d);
    const bool accumulates =
        (aicore::is_cube(d.kind) && c.tiling.c.k_split > 1) ||
        ((d.kind == aicore::OpKind::BNTrainingReduce || d.kind == aicore::OpKind::BNTrainingUpdateGrad ||
          d.kind == aicore::OpKind::BiasAddGrad || d.kind == aicore::OpKind::ReduceSum) &&
         c.blocks > 1);
    const bool cleaned = i > 0 && g.ops()[i - 1].type == "AtomicAddrClean";
    EXPECT_EQ(accumulates, cleaned) << op.name;
    k_split += accumulates && aicore::is_cube(d.kind);
    reductions += accumulates && !aicore::is_cube(d.kind);
  }
  EXPECT_GT(k_split, 0);
  EXPECT_EQ(reductions, 2 * 53 + 1);  // both BatchNorm reductions of every layer, the fc bias gradient
}

std::vector<runtime::CompilePass> backend(bool fusion) {
  std::vector<runtime::CompilePass> p = {runtime::cube_precision_pass(), runtime::bn_split_pass(),
                                         runtime::format_pass(), runtime::atomic_clean_pass()};
  if (fusion) p.push_back(runtime::graph_kernel_fusion_pass());
  return p;
}

TEST(BackendPasses, FusionNeverAddsOpsOrTrafficAndKeepsTheStepsMath) {
  for (const char* name : {"lenet5", "resnet50"}) {
    SCOPED_TRACE(name);
    const Workload w = workloads::make_workload(name, 32);
    const Graph plain = after(w, backend(false)), fused = after(w, backend(true));
    const auto a = runtime::graph_traffic(plain), b = runtime::graph_traffic(fused);
    EXPECT_LT(b.ops, a.ops);
    EXPECT_LT(b.bytes, a.bytes);
    // Every op that is not fused reads and writes the same tensors; every fused kernel reads
    // only tensors produced before it (or persistent ones and the batch), and between them the
    // kernels write every tensor the unfused step wrote that anything outside them reads.
    std::set<TensorId> available(w.batch_inputs.begin(), w.batch_inputs.end());
    for (std::size_t t = 0; t < fused.tensors().size(); ++t)
      if (workloads::is_persistent(fused.tensors()[t].role)) available.insert(static_cast<TensorId>(t));
    std::set<std::string> unfused;
    for (const auto& op : plain.ops()) unfused.insert(op.name);
    std::int64_t kernels = 0;
    for (const auto& op : fused.ops()) {
      for (auto t : op.inputs)
        EXPECT_TRUE(available.count(t) || op.type == "AtomicAddrClean")
            << op.name << " reads " << fused.tensor(t).name << " before it exists";
      available.insert(op.outputs.begin(), op.outputs.end());
      if (op.type == "FusedElementwise") {
        ++kernels;
        EXPECT_FALSE(op.outputs.empty());
      } else {
        EXPECT_TRUE(unfused.count(op.name)) << op.name;
      }
    }
    EXPECT_GT(kernels, 0);
    // The loss and every parameter's update are still computed.
    std::set<TensorId> written;
    for (const auto& op : fused.ops()) written.insert(op.outputs.begin(), op.outputs.end());
    EXPECT_TRUE(written.count(w.loss));
    for (std::size_t t = 0; t < w.graph.tensors().size(); ++t)
      if (w.graph.tensors()[t].role == workloads::TensorRole::Parameter) {
        EXPECT_TRUE(written.count(static_cast<TensorId>(t))) << w.graph.tensors()[t].name;
      }
  }
}

TEST(BackendPasses, FusedBatchNormUpdateAndReluWriteOnlyWhatOthersRead) {
  // BNTrainingUpdate then ReLU: the normalised tensor goes nowhere else, so the fused kernel
  // never writes it — exactly two passes over it (its write and its read) leave the step.
  const Workload w = workloads::make_workload("resnet50", 32);
  const Graph plain = after(w, backend(false)), fused = after(w, backend(true));
  const Op* update = nullptr;
  const Op* relu = nullptr;
  for (const auto& op : plain.ops()) {
    if (op.name == "layer1.0.bn1/BatchNorm/BNTrainingUpdate") update = &op;
    if (op.name == "layer1.0.relu1/ReLU") relu = &op;
  }
  ASSERT_TRUE(update && relu);
  const TensorId y = update->outputs[0];
  ASSERT_EQ(relu->inputs[0], y);
  const Op* kernel = nullptr;
  for (const auto& op : fused.ops())
    if (op.name == "layer1.0.relu1/ReLU/Fused_BNTrainingUpdate_ReLU") kernel = &op;
  ASSERT_TRUE(kernel);
  EXPECT_EQ(kernel->inputs, update->inputs);  // x, the sums, gamma, beta, the moving statistics
  // The batch statistics (read by the gradient) and the activation; not the normalised tensor.
  EXPECT_EQ(kernel->outputs, (std::vector<TensorId>{update->outputs[1], update->outputs[2], relu->outputs[0]}));
  const auto stored = [&](TensorId t) {
    const auto& x = plain.tensor(t);
    return workloads::stored_elements(x.shape, x.format) * workloads::dtype_bytes(x.dtype);
  };
  std::int64_t member_bytes = 0, kernel_bytes = 0;
  for (const Op* op : {update, relu}) {
    for (auto t : op->inputs) member_bytes += stored(t);
    for (auto t : op->outputs) member_bytes += stored(t);
  }
  for (auto t : kernel->inputs) kernel_bytes += stored(t);
  for (auto t : kernel->outputs) kernel_bytes += stored(t);
  EXPECT_EQ(member_bytes - kernel_bytes, 2 * stored(y));
  // And the kernel costs less than its two members did.
  const auto cost = [&](const Graph& g, const Op& op) { return model().estimate(op.def->lower(g, op)).time_s; };
  EXPECT_LT(cost(fused, *kernel), cost(plain, *update) + cost(plain, *relu));
}

TEST(BackendPasses, MomentumFusionMergesEachOptimizerChainAsAscendsBackendDoes) {
  // ResNet-50 (loss scale 1024, weight decay on the 54 conv and dense weights): every weight's
  // unscale Mul, decay Mul, Add and ApplyMomentum become FusedWeightScaleApplyMomentum; the 107
  // BatchNorm gammas, betas and the bias get FusedMulApplyMomentum.
  const Workload w = workloads::make_workload("resnet50", 32);
  const std::vector<runtime::CompilePass> before = {runtime::cube_precision_pass(), runtime::bn_split_pass(),
                                                    runtime::format_pass(), runtime::atomic_clean_pass()};
  auto with = before;
  with.push_back(runtime::momentum_fusion_pass());
  const Graph plain = after(w, before), fused = after(w, with);
  EXPECT_EQ(count(fused, "FusedWeightScaleApplyMomentum"), 54);
  EXPECT_EQ(count(fused, "FusedMulApplyMomentum"), 107);
  EXPECT_EQ(count(fused, "ApplyMomentum"), 0);
  EXPECT_EQ(fused.ops().size(), plain.ops().size() - 54 * 3 - 107);
  // Each kernel updates its parameter and accumulator in place and reads its gradient as the
  // backward pass left it; it moves fewer bytes than the ops it replaces.
  for (const auto& op : fused.ops()) {
    if (op.type != "FusedWeightScaleApplyMomentum" && op.type != "FusedMulApplyMomentum") continue;
    ASSERT_EQ(op.outputs.size(), 2u);
    EXPECT_EQ(fused.tensor(op.outputs[0]).role, workloads::TensorRole::Parameter);
    EXPECT_EQ(fused.tensor(op.outputs[1]).role, workloads::TensorRole::OptimizerState);
  }
  EXPECT_LT(runtime::graph_traffic(fused).bytes, runtime::graph_traffic(plain).bytes);
  // LeNet-5 trains without loss scale or weight decay: nothing to fuse.
  const Workload lenet = workloads::make_workload("lenet5", 32);
  EXPECT_EQ(after(lenet, with).ops().size(), after(lenet, before).ops().size());
}

TEST(BackendPasses, TheCompiledStepRecordsEachPassEffect) {
  workloads::RecipeOverrides ub;
  ub.ub_fusion = true;  // every pass of the default pipeline and UB fusion
  const Workload w = workloads::make_workload("resnet50", 32, ub);
  const runtime::CompiledGraph c = runtime::compile(w, model(), 16);
  ASSERT_EQ(c.pass_effects.size(), 7u);
  EXPECT_EQ(c.pass_effects[0].name, "framework");
  EXPECT_EQ(c.pass_effects[0].ops, workloads::device_op_count(w.graph));
  EXPECT_EQ(c.pass_effects.back().ops, static_cast<std::int64_t>(c.step_tasks.size()));
  for (std::size_t i = 1; i < c.pass_effects.size(); ++i) {
    if (c.pass_effects[i].name == "momentum_fusion" || c.pass_effects[i].name == "ub_fusion") {  // fusion only removes
      EXPECT_LT(c.pass_effects[i].ops, c.pass_effects[i - 1].ops);
      EXPECT_LT(c.pass_effects[i].bytes, c.pass_effects[i - 1].bytes);
      continue;
    }
    EXPECT_GE(c.pass_effects[i].ops, c.pass_effects[i - 1].ops) << c.pass_effects[i].name;  // these passes only add
    EXPECT_GE(c.pass_effects[i].bytes, c.pass_effects[i - 1].bytes) << c.pass_effects[i].name;
  }
}

}  // namespace
}  // namespace ascendsim
