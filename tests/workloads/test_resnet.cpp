#include <map>
#include <set>

#include <gtest/gtest.h>

#include "runtime/graph_compiler.h"
#include "runtime/memory_plan.h"
#include "sim/config.h"
#include "sim/system.h"
#include "tests/test_support.h"
#include "workloads/resnet.h"
#include "workloads/workload.h"

namespace ascendsim::workloads {
namespace {

struct Canonical {
  const char* name;
  std::int64_t params, macs;
};

// torchvision.models definitions (parameters: weights, biases, BatchNorm gamma/beta; forward MACs
// of conv and dense layers for one 224x224 image — the 1.81/3.66/4.09/7.80/11.51 G of its docs).
const Canonical kCanonical[] = {
    {"resnet18", 11689512, 1814073344},         {"resnet34", 21797672, 3663761408},
    {"resnet50", 25557032, 4089184256},         {"resnet101", 44549160, 7801405440},
    {"resnet152", 60192808, 11513626624},       {"resnet50-cifar10", 23528522, 4087156736},
    {"resnet18-cifar10", 11181642, 1813566464},
};

TEST(ResNet, ParameterAndMacCountsMatchTorchvision) {
  for (const auto& c : kCanonical) {
    const Workload w = make_workload(c.name, 2);
    EXPECT_EQ(parameter_count(w.graph), c.params) << c.name;
    EXPECT_EQ(forward_macs(w.graph) / 2, c.macs) << c.name;
  }
}

Shape expected_shape(const Graph& g, const Op& op) {
  auto in = [&](std::size_t i) { return g.tensor(op.inputs.at(i)).shape; };
  auto conv = [](std::int64_t x, std::int64_t k, std::int64_t s, std::int64_t p) { return (x + 2 * p - k) / s + 1; };
  const std::string& t = op.type;
  auto is = [&](std::initializer_list<const char*> names) {
    for (const char* n : names)
      if (t == n) return true;
    return false;
  };
  if (t == "Conv2D") {
    const Shape x = in(0), w = in(1);
    return {x[0], w[0], conv(x[2], w[2], op.conv.stride, op.conv.pad_h), conv(x[3], w[3], op.conv.stride, op.conv.pad_w)};
  }
  if (t == "MaxPool") {
    const Shape x = in(0);
    return {x[0], x[1], conv(x[2], op.pool.kernel, op.pool.stride, op.pool.pad),
            conv(x[3], op.pool.kernel, op.pool.stride, op.pool.pad)};
  }
  if (t == "MatMul") {
    const Shape a = in(0), b = in(1);
    return {op.matmul.transpose_a ? a[1] : a[0], op.matmul.transpose_b ? b[0] : b[1]};
  }
  if (is({"Conv2DBackpropInput", "MaxPoolGrad", "ReduceMeanGrad", "Conv2DBackpropFilter", "Reshape"}))
    return g.tensor(op.outputs[0]).shape;  // given explicitly by the forward op; checked below
  if (t == "BiasAddGrad") return {in(0)[1]};
  if (t == "ReduceMean") return in(0).size() == 4 ? Shape{in(0)[0], in(0)[1]} : Shape{1};
  if (t == "OneHot") return {in(0)[0], g.tensor(op.outputs[0]).shape[1]};
  if (t == "SoftmaxCrossEntropyWithLogits") return {in(0)[0]};
  if (is({"SparseSoftmaxCrossEntropyWithLogits", "Gather"})) return {1};
  if (is({"BatchNormGrad", "SoftmaxCrossEntropyWithLogitsGrad", "SparseSoftmaxCrossEntropyWithLogitsGrad"}))
    return in(0);
  if (t == "ReluGrad") return in(1);
  return in(0);  // elementwise, BatchNorm, Cast, Mul, AddN, ApplyMomentum, AssignAdd
}

RecipeOverrides keep_bn_fp32() {
  RecipeOverrides r;
  r.keep_batchnorm_fp32 = true;
  return r;
}

TEST(ResNet, TheRecipeSetsThePrecisionOfEveryOp) {
  auto count = [](const Workload& w, const std::string& type) {
    int n = 0;
    for (const auto& op : w.graph.ops()) n += op.type == type;
    return n;
  };
  // MindSpore's ResNet script: amp O2 with BatchNorm in fp16 — no casts around any BatchNorm.
  const Workload seed = make_workload("resnet50", 4);
  EXPECT_EQ(seed.recipe.amp_level, "O2");
  EXPECT_FALSE(seed.recipe.keep_batchnorm_fp32);
  EXPECT_EQ(seed.recipe.loss_scale, 1024);
  for (const auto& op : seed.graph.ops()) {
    EXPECT_EQ(op.name.find("/CastIn"), std::string::npos) << op.name;
    if (op.type == "BatchNorm") {
      EXPECT_EQ(seed.graph.tensor(op.outputs[0]).dtype, DType::F16) << op.name;
    }
  }
  // keep_batchnorm_fp32 adds a cast in and out of each of the 53 BatchNorms, and their gradients.
  const Workload kept = make_workload("resnet50", 4, keep_bn_fp32());
  EXPECT_EQ(count(kept, "Cast") - count(seed, "Cast"), 4 * 53);
  // O0: nothing in fp16, no casts of the network (the loss keeps its scaling).
  RecipeOverrides o0;
  o0.amp_level = "O0";
  const Workload fp32 = make_workload("resnet50", 4, o0);
  for (const auto& t : fp32.graph.tensors()) EXPECT_NE(t.dtype, DType::F16) << t.name;
  EXPECT_EQ(count(fp32, "Cast"), 0);
  // O3: fp16 parameters, no per-step casts of master weights.
  RecipeOverrides o3;
  o3.amp_level = "O3";
  const Workload half = make_workload("resnet50", 4, o3);
  for (const auto& t : half.graph.tensors())
    if (t.role == TensorRole::Parameter) {
      EXPECT_EQ(t.dtype, DType::F16) << t.name;
    }
  EXPECT_LT(count(half, "Cast"), count(seed, "Cast"));
  // No loss scale: no unscaling of the 161 gradients.
  RecipeOverrides unscaled;
  unscaled.loss_scale = 1;
  EXPECT_EQ(count(seed, "Mul") - count(make_workload("resnet50", 4, unscaled), "Mul"), 161);
  // LeNet-5 is the seed's fp32 script; other recipes are refused, naming why.
  EXPECT_THROW(make_workload("lenet5", 4, o3), std::invalid_argument);
  RecipeOverrides bad;
  bad.amp_level = "O1";
  EXPECT_THROW(make_workload("resnet50", 4, bad), std::invalid_argument);
}

TEST(ResNet, EveryOpHasTheShapeItsInputsImply) {
  for (const auto& c : kCanonical) {
    const Workload w = make_workload(c.name, 4);
    const Graph& g = w.graph;
    std::map<TensorId, Shape> forward_input;  // for backprop ops: the forward operand's shape
    for (const auto& op : g.ops()) {
      EXPECT_EQ(g.tensor(op.outputs[0]).shape, expected_shape(g, op)) << c.name << " " << op.name;
      if (op.type == "Conv2DBackpropInput") {  // dx has the forward input's shape: dy's H,W follow from it
        const Shape dx = g.tensor(op.outputs[0]).shape, dy = g.tensor(op.inputs[0]).shape;
        EXPECT_EQ(dx[0], dy[0]) << op.name;
        EXPECT_EQ((dx[2] + 2 * op.conv.pad_h - op.conv.kernel_h) / op.conv.stride + 1, dy[2]) << op.name;
      }
      if (op.type == "Conv2DBackpropFilter") {
        EXPECT_EQ(g.tensor(op.outputs[0]).shape[0], g.tensor(op.inputs[0]).shape[1]);
      }
      if (op.type == "MaxPoolGrad") {
        EXPECT_EQ(g.tensor(op.outputs[0]).shape, g.tensor(op.inputs[0]).shape);
      }
    }
  }
}

TEST(ResNet, MixedPrecisionO2) {
  const Workload w = make_workload("resnet50", 4, keep_bn_fp32());
  const Graph& g = w.graph;
  int casts = 0;
  for (const auto& op : g.ops()) {
    const DType out = g.tensor(op.outputs[0]).dtype;
    const std::string& t = op.type;
    if (t == "Conv2D" || t == "Conv2DBackpropInput" || t == "Conv2DBackpropFilter" || t == "MatMul")
      EXPECT_EQ(out, DType::F16) << op.name;
    else if (t == "BatchNorm" || t == "BatchNormGrad" || t == "ApplyMomentum")
      EXPECT_EQ(out, DType::F32) << op.name;
    else if (t == "Cast")
      ++casts;
  }
  for (const auto& t : g.tensors()) {
    if (t.role == TensorRole::Parameter) {
      EXPECT_EQ(t.dtype, DType::F32) << t.name;
    }
  }
  // Forward: input, 53 conv weights, fc weight and bias, 2 per BatchNorm, logits; backward mirrors
  // all but the input's (the image needs no gradient).
  const int forward = 1 + 53 + 2 + 2 * 53 + 1;
  EXPECT_EQ(casts, forward + forward - 1);
}

TEST(ResNet, EveryParameterGetsOneUpdateWithDecayOnlyOnWeights) {
  for (const char* name : {"resnet18", "resnet50"}) {
    const Workload w = make_workload(name, 2);
    const Graph& g = w.graph;
    std::map<TensorId, int> momentum, decay, unscale;
    std::map<std::string, TensorId> by_name;
    for (std::size_t t = 0; t < g.tensors().size(); ++t) by_name[g.tensors()[t].name] = static_cast<TensorId>(t);
    int gathers = 0, steps = 0;
    for (const auto& op : g.ops()) {
      if (op.type == "ApplyMomentum") {
        ++momentum[op.inputs[0]];
        EXPECT_EQ(g.tensor(op.inputs[3]).shape, g.tensor(op.inputs[0]).shape) << op.name;
        EXPECT_EQ(g.tensor(op.inputs[3]).role, TensorRole::Gradient) << op.name;
      }
      if (op.name.rfind("WeightDecay/", 0) == 0 && op.type == "Mul") ++decay[op.inputs[0]];
      if (op.name.rfind("Unscale/", 0) == 0) ++unscale[by_name.at(op.name.substr(8))];
      gathers += op.type == "Gather";
      steps += op.type == "AssignAdd";
    }
    EXPECT_EQ(gathers, 1);
    EXPECT_EQ(steps, 1);
    for (std::size_t t = 0; t < g.tensors().size(); ++t) {
      const Tensor& p = g.tensors()[t];
      if (p.role != TensorRole::Parameter) continue;
      const auto id = static_cast<TensorId>(t);
      EXPECT_EQ(momentum[id], 1) << p.name;
      EXPECT_EQ(unscale[id], 1) << p.name;
      const bool is_weight = p.name.size() > 7 && p.name.compare(p.name.size() - 7, 7, ".weight") == 0;
      EXPECT_EQ(decay[id], is_weight ? 1 : 0) << p.name;
    }
  }
}

TEST(ResNet, LarsScalesEveryWeightsGradientWithItsTrustRatioBeforeMomentum) {
  // MindSpore's nn.LARS over Momentum: every weight (the decayed parameters; BatchNorm and biases
  // keep plain Momentum) gets SquareSumAll of itself and its gradient, then LARSUpdate — weight
  // decay inside it — whose result is what its ApplyMomentum applies.
  RecipeOverrides o;
  o.optimizer = "lars";
  const Workload lars = make_workload("resnet50", 32, o);
  const Workload plain = make_workload("resnet50", 32);
  const Graph& g = lars.graph;
  std::map<TensorId, TensorId> scaled;  // parameter -> its LARSUpdate's result
  int sums = 0, decays = 0;
  for (const auto& op : g.ops()) {
    sums += op.type == "SquareSumAll";
    decays += op.name.rfind("WeightDecay/", 0) == 0;
    if (op.type == "LARSUpdate") {
      EXPECT_EQ(op.pass, Pass::Optimizer);
      scaled[op.inputs[0]] = op.outputs[0];
    }
  }
  EXPECT_EQ(decays, 0);  // all of it inside LARSUpdate
  std::int64_t weights = 0;
  for (const auto& op : g.ops()) {
    if (op.type != "ApplyMomentum") continue;
    const std::string& name = g.tensor(op.inputs[0]).name;
    const bool weight = name.size() > 7 && name.compare(name.size() - 7, 7, ".weight") == 0;
    weights += weight;
    EXPECT_EQ(scaled.count(op.inputs[0]), weight ? 1u : 0u) << name;
    if (weight) {
      EXPECT_EQ(op.inputs[3], scaled.at(op.inputs[0])) << name;  // Momentum applies the scaled gradient
    }
  }
  EXPECT_EQ(weights, 54);  // 53 convolutions and the dense layer
  EXPECT_EQ(sums, 54);
  EXPECT_EQ(scaled.size(), 54u);
  EXPECT_EQ(lars.recipe.describe(), plain.recipe.describe() + ", LARS");
  // The same forward and backward: only the optimizer differs.
  std::int64_t lars_ops = 0, plain_ops = 0;
  for (const auto& op : g.ops()) lars_ops += op.pass != Pass::Optimizer;
  for (const auto& op : plain.graph.ops()) plain_ops += op.pass != Pass::Optimizer;
  EXPECT_EQ(lars_ops, plain_ops);
  // On the device: the forward and backward tasks are the same, one for one; the optimizer's take
  // the rest of the step's compute. The backend no longer fuses a weight's unscale, decay and
  // Momentum into FusedWeightScaleApplyMomentum (LARSUpdate stands between them), so a weight's
  // update is its unscale Mul, SquareSumAll, LARSUpdate and ApplyMomentum.
  const sim::SystemConfig cfg = sim::load_config(test::config_request());
  const runtime::CompiledGraph cl = sim::compile_for(cfg, lars), cp = sim::compile_for(cfg, plain);
  auto split = [](const runtime::CompiledGraph& c, std::vector<std::pair<std::string, double>>& steps) {
    double optimizer = 0;
    for (const auto& t : c.step_tasks) {
      if (t.kind != hostif::TaskKind::AiCore) continue;
      if (t.part == hostif::StepPart::Optimizer)
        optimizer += t.cost.time_s;
      else
        steps.emplace_back(t.name, t.cost.time_s);
    }
    return optimizer;
  };
  std::vector<std::pair<std::string, double>> fl, fp;
  const double opt_lars = split(cl, fl), opt_plain = split(cp, fp);
  EXPECT_EQ(fl, fp);
  EXPECT_NEAR(cl.device_compute_s - cp.device_compute_s, opt_lars - opt_plain, 1e-12);
  EXPECT_GT(opt_lars, opt_plain);
  std::map<std::string, int> kinds;
  for (const auto& t : cl.step_tasks)
    if (t.name.rfind("LARS/conv1.weight/", 0) == 0 || t.name.rfind("Momentum/conv1.weight", 0) == 0 ||
        t.name == "Unscale/conv1.weight")
      ++kinds[t.name];
  EXPECT_EQ(kinds.size(), 4u);  // Unscale, SquareSumAll, LARSUpdate, ApplyMomentum
  // Refused where the script trains with its own Momentum, and unknown names.
  EXPECT_THROW(make_workload("lenet5", 32, o), std::invalid_argument);
  o.optimizer = "adam";
  EXPECT_THROW(make_workload("resnet50", 32, o), std::invalid_argument);
}

TEST(MemoryPlan, LiveBuffersNeverShareAddresses) {
  for (const auto& c : kCanonical) {
    for (std::int64_t batch : {1, 32}) {
      const Workload w = make_workload(c.name, batch);
      const auto plan = runtime::plan_memory(w, 16);
      const auto& a = plan.allocations;
      std::set<TensorId> allocated;
      for (std::size_t i = 0; i < a.size(); ++i) {
        EXPECT_EQ(a[i].offset % runtime::MemoryPlan::kAlignment, 0);
        EXPECT_LE(a[i].offset + a[i].bytes, plan.arena_bytes);
        if (a[i].tensor >= 0) {
          EXPECT_TRUE(allocated.insert(a[i].tensor).second) << "allocated twice";
        }
        for (std::size_t j = i + 1; j < a.size(); ++j) {
          const bool live_together = a[i].first <= a[j].last && a[j].first <= a[i].last;
          const bool share = a[i].offset < a[j].offset + a[j].bytes && a[j].offset < a[i].offset + a[i].bytes;
          if (live_together && share) {
            ADD_FAILURE() << c.name << ": allocations " << i << " and " << j << " overlap";
            return;
          }
        }
      }
      // Every per-step tensor an op writes is somewhere: allocated, a view, or persistent.
      for (const auto& op : w.graph.ops()) {
        for (auto t : op.outputs) {
          if (!is_persistent(w.graph.tensor(t).role) && op.type != "Reshape") {
            EXPECT_TRUE(allocated.count(t)) << w.graph.tensor(t).name;
          }
        }
      }
      EXPECT_GE(plan.arena_bytes, plan.live_peak_bytes);
      // Reuse works: the arena is far below the sum of all step buffers.
      std::int64_t total = 0;
      for (const auto& x : a) total += x.bytes;
      if (c.name[0] == 'r') {
        EXPECT_LT(plan.arena_bytes, total / 2) << c.name;
      }
    }
  }
}

TEST(MemoryPlan, GrowsWithBatchAndHoldsPersistentState) {
  const auto small = runtime::plan_memory(make_workload("resnet50", 32), 16);
  const auto large = runtime::plan_memory(make_workload("resnet50", 256), 16);
  // Only the on-device learning-rate table (90 epochs of steps) depends on the batch size.
  const std::int64_t table_diff = 90 * 4 * (1281167 / 32 - 1281167 / 256);
  EXPECT_NEAR(static_cast<double>(small.persistent_bytes - large.persistent_bytes), static_cast<double>(table_diff),
              runtime::MemoryPlan::kAlignment * 2);
  // fp32 weights, momentum accumulators and BN statistics alone are above 2 x 4 x 25.5M bytes.
  EXPECT_GT(small.persistent_bytes, 2 * 4 * 25557032);
  EXPECT_GT(large.arena_bytes, 6 * small.arena_bytes);
  EXPECT_LT(large.peak_bytes(), std::int64_t{32} << 30);  // ResNet-50 at batch 256 fits 32 GiB
}

}  // namespace
}  // namespace ascendsim::workloads
