// UB fusion (the ub_fusion pass): which kernels fuse, the bytes each fused kernel saves, and that
// turning it off leaves the executed graph and its cost exactly as without the pass.
#include <algorithm>
#include <set>

#include <gtest/gtest.h>

#include "aicore/cost_model.h"
#include "runtime/backend_passes.h"
#include "runtime/graph_compiler.h"
#include "workloads/op_registry.h"
#include "tests/test_support.h"
#include "workloads/workload.h"

namespace ascendsim {
namespace {

using workloads::Graph;
using workloads::Op;
using workloads::TensorId;
using workloads::Workload;

const aicore::CostModel& model() { return test::cost_model(); }

std::vector<runtime::CompilePass> backend(bool ub) {
  std::vector<runtime::CompilePass> p = {runtime::cube_precision_pass(), runtime::bn_split_pass(),
                                         runtime::format_pass(), runtime::atomic_clean_pass(),
                                         runtime::momentum_fusion_pass()};
  if (ub) p.push_back(runtime::ub_fusion_pass());
  return p;
}

Graph after(const Workload& w, const std::vector<runtime::CompilePass>& passes) {
  runtime::CompileState s{w, model(), 16, w.graph, {}, {}};
  for (const auto& p : passes) p.run(s);
  return s.graph;
}

std::int64_t stored(const Graph& g, TensorId t) {
  const auto& x = g.tensor(t);
  return workloads::stored_elements(x.shape, x.format) * workloads::dtype_bytes(x.dtype);
}

const Op* find(const Graph& g, const std::string& name) {
  for (const auto& op : g.ops())
    if (op.name == name) return &op;
  return nullptr;
}

/// Bytes the ops read and write, each tensor in its stored layout.
std::int64_t traffic(const Graph& g, const std::vector<const Op*>& ops) {
  std::int64_t b = 0;
  for (const Op* op : ops) {
    for (auto t : op->inputs) b += stored(g, t);
    for (auto t : op->outputs) b += stored(g, t);
  }
  return b;
}

bool ub_fused(const Op& op) { return op.type.rfind("UBFused", 0) == 0; }

/// The members of a fused kernel, from its name ".../FusionOp_A_B_C".
std::int64_t members(const Op& op) {
  const std::string tail = op.name.substr(op.name.rfind("/FusionOp_") + 10);
  std::int64_t n = 1;
  for (std::size_t p = 0; p < tail.size(); ++p)
    if (tail[p] == '_' && p + 1 < tail.size() && std::isupper(static_cast<unsigned char>(tail[p + 1]))) ++n;
  return n;
}

TEST(UbFusion, ConvolutionAndTheBatchNormReductionOfItsResultFuse) {
  // Conv2dBnReduceFusion: the sums of the convolution's result are taken from each output tile in
  // the UB. BNTrainingUpdate (and the gradient) read the result too, so it is still stored; the
  // reduction's read of it, the result's stored size, is what the kernel saves.
  const Workload w = workloads::make_workload("resnet50", 32);
  const Graph plain = after(w, backend(false)), fused = after(w, backend(true));
  const Op* conv = find(plain, "layer1.0.conv1/Conv2D");
  const Op* reduce = find(plain, "layer1.0.bn1/BatchNorm/BNTrainingReduce");
  const Op* kernel = find(fused, "layer1.0.bn1/BatchNorm/BNTrainingReduce/FusionOp_Conv2D_BNTrainingReduce");
  ASSERT_TRUE(conv && reduce && kernel);
  ASSERT_EQ(reduce->inputs[0], conv->outputs[0]);
  const TensorId y = conv->outputs[0];
  EXPECT_EQ(kernel->type, "UBFusedConv2D");
  EXPECT_EQ(kernel->inputs, conv->inputs);
  EXPECT_EQ(kernel->outputs, (std::vector<TensorId>{y, reduce->outputs[0], reduce->outputs[1]}));
  EXPECT_EQ(traffic(plain, {conv, reduce}) - traffic(fused, {kernel}), stored(plain, y));
  EXPECT_FALSE(find(fused, conv->name));
  EXPECT_FALSE(find(fused, reduce->name));
  // The fused kernel is the convolution with the reduction's Vector work on its tiles: the same
  // multiply-accumulates, the sums as its epilogue, and less time than the two kernels.
  const aicore::OpDesc d = kernel->def->lower(fused, *kernel), c = conv->def->lower(plain, *conv);
  EXPECT_EQ(d.macs(), c.macs());
  EXPECT_EQ(d.epilogue_ops, reduce->def->vector_ops);
  EXPECT_EQ(d.epilogue_sums, 2 * plain.tensor(y).shape[1]);
  EXPECT_EQ(d.epilogue_operands, 0);
  const auto time = [&](const Graph& g, const Op& op) {
    aicore::OpDesc x = op.def->lower(g, op);
    runtime::apply_precision_mode(x);
    return model().estimate(x).time_s;
  };
  EXPECT_LT(time(fused, *kernel), time(plain, *conv) + time(plain, *reduce));
  EXPECT_GE(time(fused, *kernel), time(plain, *conv));  // the Cube's work is all still there
}

TEST(UbFusion, BatchNormUpdateAndItsReluFuseWithoutStoringTheNormalisedTensor) {
  // BnupdateEltwiseFusion: ReLU is the normalised tensor's only reader, so the fused kernel
  // neither writes nor reads it: twice its stored size saved.
  const Workload w = workloads::make_workload("resnet50", 32);
  const Graph plain = after(w, backend(false)), fused = after(w, backend(true));
  const Op* update = find(plain, "layer1.0.bn1/BatchNorm/BNTrainingUpdate");
  const Op* relu = find(plain, "layer1.0.relu1/ReLU");
  const Op* kernel = find(fused, "layer1.0.relu1/ReLU/FusionOp_BNTrainingUpdate_ReLU");
  ASSERT_TRUE(update && relu && kernel);
  const TensorId y = update->outputs[0];
  ASSERT_EQ(relu->inputs[0], y);
  EXPECT_EQ(kernel->type, "UBFusedElementwise");
  EXPECT_EQ(kernel->outputs, (std::vector<TensorId>{update->outputs[1], update->outputs[2], relu->outputs[0]}));
  EXPECT_EQ(traffic(plain, {update, relu}) - traffic(fused, {kernel}), 2 * stored(plain, y));
  // BnupdateEltwiseEltwiseFusion: the last BatchNorm of a bottleneck, the residual Add and ReLU.
  const Op* chain = find(fused, "layer1.1.relu3/ReLU/FusionOp_BNTrainingUpdate_Add_ReLU");
  ASSERT_TRUE(chain);
  const Op* add = find(plain, "layer1.1/Add");
  const Op* bn3 = find(plain, "layer1.1.bn3/BatchNorm/BNTrainingUpdate");
  const Op* relu3 = find(plain, "layer1.1.relu3/ReLU");
  ASSERT_TRUE(add && bn3 && relu3);
  EXPECT_EQ(traffic(plain, {bn3, add, relu3}) - traffic(fused, {chain}),
            2 * stored(plain, bn3->outputs[0]) + 2 * stored(plain, add->outputs[0]));
}

TEST(UbFusion, AReluGradFusesIntoTheBatchNormGradientReductionItFeeds) {
  // Eltwise + BNTrainingUpdateGrad: the last block's ReluGrad (the loss's gradient comes in
  // without a convolution before it). BNTrainingReduceGrad reads dy too, so dy is still stored;
  // the reduction's read of it is what the kernel saves.
  const Workload w = workloads::make_workload("resnet50", 32);
  const Graph plain = after(w, backend(false)), fused = after(w, backend(true));
  const Op* update_grad = find(plain, "Gradients/layer4.2.bn3/BatchNorm/BatchNormGrad/BNTrainingUpdateGrad");
  ASSERT_TRUE(update_grad);
  const TensorId dy = update_grad->inputs[0];
  const Op* relu_grad = nullptr;
  for (const auto& op : plain.ops())
    if (!op.outputs.empty() && op.outputs[0] == dy) relu_grad = &op;
  ASSERT_TRUE(relu_grad);
  EXPECT_EQ(relu_grad->type, "ReluGrad");
  const Op* kernel = find(fused, update_grad->name + "/FusionOp_ReluGrad_BNTrainingUpdateGrad");
  ASSERT_TRUE(kernel);
  EXPECT_EQ(kernel->type, "UBFusedElementwise");
  EXPECT_EQ(kernel->outputs[0], dy);  // for BNTrainingReduceGrad
  EXPECT_EQ(traffic(plain, {relu_grad, update_grad}) - traffic(fused, {kernel}), stored(plain, dy));
}

TEST(UbFusion, AResultWithAnotherReaderIsNotFusedIntoAnElementwiseConsumer) {
  // LeNet-5's first convolution feeds only its ReLU: they fuse. Give its result a second reader
  // and they do not (the result must reach HBM for it, and the ReLU reads it there).
  Workload w = workloads::make_workload("lenet5", 32);
  ASSERT_TRUE(find(after(w, backend(true)), "relu1/ReLU/FusionOp_Conv2D_ReLU"));
  const Op* conv = find(w.graph, "conv1/Conv2D");
  ASSERT_TRUE(conv);
  w.graph.apply("ReLU", "probe/ReLU", {conv->outputs[0]});
  const Graph fused = after(w, backend(true));
  EXPECT_FALSE(find(fused, "relu1/ReLU/FusionOp_Conv2D_ReLU"));
  EXPECT_TRUE(find(fused, "conv1/Conv2D"));
  EXPECT_TRUE(find(fused, "relu1/ReLU"));
}

TEST(UbFusion, AResultAddedUpAtomicallyInHbmIsNotFused) {
  // LeNet-5's second convolution splits K over blocks: its result is complete only in HBM, after
  // an AtomicAddrClean and every block's addition, so its ReLU cannot take it from the UB.
  const Workload w = workloads::make_workload("lenet5", 32);
  const Graph fused = after(w, backend(true));
  const Op* conv = find(fused, "conv2/Conv2D");
  ASSERT_TRUE(conv);
  bool cleared = false;
  for (const auto& op : fused.ops())
    if (op.type == "AtomicAddrClean" && op.inputs == conv->outputs) cleared = true;
  EXPECT_TRUE(cleared);
  EXPECT_TRUE(find(fused, "relu2/ReLU"));
}

TEST(UbFusion, EachFusedKernelStandsForItsMembersAndDropsOnlyIntermediatesOneKernelReads) {
  for (const char* name : {"lenet5", "resnet50"}) {
    SCOPED_TRACE(name);
    const Workload w = workloads::make_workload(name, 32);
    const Graph plain = after(w, backend(false)), fused = after(w, backend(true));
    std::int64_t kernels = 0, merged = 0;
    std::map<TensorId, int> readers;
    for (const auto& op : plain.ops())
      if (op.type != "AtomicAddrClean")
        for (auto t : std::set<TensorId>(op.inputs.begin(), op.inputs.end())) ++readers[t];
    std::set<TensorId> written;
    for (const auto& op : fused.ops()) written.insert(op.outputs.begin(), op.outputs.end());
    for (const auto& op : fused.ops()) {
      if (!ub_fused(op)) continue;
      ++kernels;
      merged += members(op) - 1;
    }
    EXPECT_GT(kernels, 0);
    EXPECT_EQ(runtime::graph_traffic(fused).ops, runtime::graph_traffic(plain).ops - merged);
    EXPECT_LT(runtime::graph_traffic(fused).bytes, runtime::graph_traffic(plain).bytes);
    // A tensor the unfused step wrote and the fused one does not had exactly one reader.
    for (const auto& op : plain.ops())
      for (auto t : op.outputs)
        if (!written.count(t)) {
          EXPECT_EQ(readers[t], 1) << plain.tensor(t).name;
        }
    // No fused kernel's Cube part splits K (its result would be complete only in HBM).
    for (const auto& op : fused.ops())
      if (ub_fused(op) && op.def->cube) {
        aicore::OpDesc d = op.def->lower(fused, op);
        runtime::apply_precision_mode(d);
        EXPECT_EQ(model().estimate(d).tiling.c.k_split, 1) << op.name;
      }
  }
}

TEST(UbFusion, OffGivesTheGraphWithoutThePassAndFusionOnlyShortensTheDeviceCompute) {
  for (const char* name : {"lenet5", "resnet50"}) {
    SCOPED_TRACE(name);
    workloads::RecipeOverrides off, on;
    off.ub_fusion = false;
    on.ub_fusion = true;
    const Workload on_w = workloads::make_workload(name, 32, on), off_w = workloads::make_workload(name, 32, off);
    EXPECT_TRUE(workloads::make_workload(name, 32).recipe.ub_fusion);  // MindSpore's graph mode on Ascend
    const runtime::CompiledGraph without = runtime::compile(off_w, model(), 16);
    // The pipeline as it was: the default passes, no ub_fusion.
    const runtime::CompiledGraph reference = runtime::compile(off_w, model(), 16, runtime::default_passes());
    ASSERT_EQ(without.step_tasks.size(), reference.step_tasks.size());
    for (std::size_t i = 0; i < without.step_tasks.size(); ++i) {
      EXPECT_EQ(without.step_tasks[i].name, reference.step_tasks[i].name);
      EXPECT_TRUE(without.descs[i] == reference.descs[i]) << without.step_tasks[i].name;
      EXPECT_EQ(without.step_tasks[i].time, reference.step_tasks[i].time) << without.step_tasks[i].name;
      EXPECT_EQ(without.descs[i].epilogue_ops + without.descs[i].epilogue_operands + without.descs[i].epilogue_sums, 0);
    }
    EXPECT_EQ(without.device_compute_s, reference.device_compute_s);
    ASSERT_EQ(without.pass_effects.size(), reference.pass_effects.size());
    for (std::size_t i = 0; i < without.pass_effects.size(); ++i) {
      EXPECT_EQ(without.pass_effects[i].name, reference.pass_effects[i].name);
      EXPECT_EQ(without.pass_effects[i].ops, reference.pass_effects[i].ops);
      EXPECT_EQ(without.pass_effects[i].bytes, reference.pass_effects[i].bytes);
    }
    EXPECT_NE(without.pass_effects.back().name, "ub_fusion");
    // On: the pass runs last among the rewrites, removes ops and bytes, and the step computes less.
    const runtime::CompiledGraph with = runtime::compile(on_w, model(), 16);
    EXPECT_EQ(with.pass_effects.back().name, "ub_fusion");
    const auto& e = with.pass_effects;
    EXPECT_LT(e.back().ops, e[e.size() - 2].ops);
    EXPECT_LT(e.back().bytes, e[e.size() - 2].bytes);
    EXPECT_LT(with.device_compute_s, without.device_compute_s);
    // Same inputs, same step.
    const runtime::CompiledGraph again = runtime::compile(on_w, model(), 16);
    ASSERT_EQ(again.step_tasks.size(), with.step_tasks.size());
    for (std::size_t i = 0; i < with.step_tasks.size(); ++i) {
      EXPECT_EQ(again.step_tasks[i].name, with.step_tasks[i].name);
      EXPECT_EQ(again.step_tasks[i].time, with.step_tasks[i].time);
    }
    EXPECT_EQ(again.device_compute_s, with.device_compute_s);
  }
}

TEST(UbFusion, RunsAfterGraphKernelFusionAndLeavesItsKernelsAlone) {
  workloads::RecipeOverrides both;
  both.graph_kernel_fusion = true;
  both.ub_fusion = true;
  const Workload w = workloads::make_workload("resnet50", 32, both);
  const runtime::CompiledGraph c = runtime::compile(w, model(), 16);
  const auto& e = c.pass_effects;
  ASSERT_GE(e.size(), 3u);
  EXPECT_EQ(e[e.size() - 2].name, "graph_kernel_fusion");
  EXPECT_EQ(e.back().name, "ub_fusion");
  for (const auto& t : c.step_tasks) EXPECT_EQ(t.name.find("FusionOp_FusedElementwise"), std::string::npos) << t.name;
}

}  // namespace
}  // namespace ascendsim
