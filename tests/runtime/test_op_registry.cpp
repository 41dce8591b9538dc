// Ops declared once: an op registered only here — shape rule, backward rule, lowering, workspace —
// is built into a graph, differentiated, lowered, costed and planned with no other change.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "aicore/cost_model.h"
#include "runtime/graph_compiler.h"
#include "workloads/op_registry.h"
#include "workloads/training.h"

namespace ascendsim {
namespace {

using namespace workloads;
using ::testing::HasSubstr;

constexpr std::int64_t kWorkspace = 3 << 20;

/// y = 2x, elementwise; its gradient is 2dy; it runs as a vector multiply and wants a workspace.
void register_scale_by_two() {
  if (OpRegistry::global().find("TestScaleByTwo")) return;
  OpDef d;
  d.name = "TestScaleByTwo";
  d.infer = [](const Graph& g, const std::vector<TensorId>& in, OpAttrs&) {
    if (in.size() != 1) throw std::invalid_argument("one input expected");
    const Tensor& x = g.tensor(in[0]);
    return std::vector<OutputSpec>{{Tensor{"", x.shape, x.dtype, TensorRole::Activation}, -1}};
  };
  d.backward = [](BackwardContext& b, const Op& op, TensorId dy, const std::string& gname) {
    b.give(op.inputs[0], b.graph().apply("TestScaleByTwo", gname + "/TestScaleByTwo", {dy})[0]);
  };
  d.lower = [](const Graph& g, const Op& op) {
    aicore::OpDesc desc;
    desc.kind = aicore::OpKind::Mul;
    const Tensor& y = g.tensor(op.outputs[0]);
    desc.precision = desc.out_precision = storage_precision(y.dtype);
    desc.elements = y.elements();
    return desc;
  };
  d.workspace = [](const Graph&, const Op&) { return kWorkspace; };
  OpRegistry::global().add(std::move(d));
}

Workload tiny() {
  register_scale_by_two();
  Workload w;
  w.name = "tiny";
  w.batch_size = 32;
  Graph& g = w.graph;
  const TensorId x = g.add_tensor({"x", {32, 64}, DType::F16, TensorRole::Input});
  const TensorId labels = g.add_tensor({"labels", {32}, DType::I32, TensorRole::Label});
  const TensorId wt = g.add_tensor({"w", {64, 10}, DType::F16, TensorRole::Parameter});
  const TensorId h = g.matmul("fc", x, wt, {}, TensorRole::Activation);
  const TensorId z = g.apply("TestScaleByTwo", "scale", {h})[0];
  const TensorId logits = g.cast("to_fp32", z, DType::F32);
  w.loss = g.sparse_softmax_cross_entropy("loss", logits, labels);
  append_momentum(g, append_backward(g, w.loss));
  w.batch_inputs = {x, labels};
  return w;
}

TEST(OpRegistry, AnOpRegisteredInOnePlaceIsLoweredCostedAndPlanned) {
  const Workload w = tiny();
  // Differentiated through its registered backward rule.
  std::vector<std::string> scales;
  for (const auto& op : w.graph.ops())
    if (op.type == "TestScaleByTwo") scales.push_back(op.name);
  EXPECT_EQ(scales, (std::vector<std::string>{"scale", "Gradients/scale/TestScaleByTwo"}));

  aicore::CachedCostModel model(aicore::make_pipe_cost_model({}, {}));
  const runtime::CompiledGraph c = runtime::compile(w, model, 4);
  ASSERT_EQ(c.step_tasks.size(), c.descs.size());
  std::size_t found = 0;
  for (std::size_t i = 0; i < c.step_tasks.size(); ++i) {
    if (c.op_types[i] != "TestScaleByTwo") continue;
    ++found;
    // Costed as the kernel it lowers to: a vector multiply of 32 x 10 fp16 values.
    aicore::OpDesc mul;
    mul.kind = aicore::OpKind::Mul;
    mul.elements = 320;
    EXPECT_EQ(c.descs[i], mul);
    EXPECT_EQ(c.step_tasks[i].cost.time_s, model.estimate(mul).time_s);
    EXPECT_GT(c.step_tasks[i].cost.time_s, 0);
  }
  EXPECT_EQ(found, 2u);
  // Planned with its workspace: the largest op workspace, and in the arena.
  EXPECT_EQ(c.memory.workspace_bytes, kWorkspace);
  EXPECT_GE(c.memory.arena_bytes, kWorkspace);
}

TEST(OpRegistry, AnUnknownOpIsAnErrorNamingIt) {
  Graph g;
  const TensorId x = g.add_tensor({"x", {4}, DType::F32, TensorRole::Input});
  try {
    g.apply("Frobnicate", "f", {x});
    FAIL() << "an unknown op was accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_THAT(e.what(), HasSubstr("unknown op 'Frobnicate'"));
    EXPECT_THAT(e.what(), HasSubstr("Conv2D"));  // the known ones are listed
  }
  EXPECT_THROW(OpRegistry::global().at("Frobnicate"), std::invalid_argument);
}

TEST(OpRegistry, ARegistrationMustBeComplete) {
  OpDef no_lowering;
  no_lowering.name = "TestNoLowering";
  no_lowering.infer = [](const Graph&, const std::vector<TensorId>&, OpAttrs&) { return std::vector<OutputSpec>{}; };
  EXPECT_THROW(OpRegistry::global().add(no_lowering), std::logic_error);  // a device op must lower
  OpDef twice = OpRegistry::global().at("ReLU");
  EXPECT_THROW(OpRegistry::global().add(twice), std::logic_error);
}

TEST(OpRegistry, ShapeRulesRejectInconsistentOperandsNamingTheOp) {
  Graph g;
  const TensorId a = g.add_tensor({"a", {4, 5}, DType::F16, TensorRole::Input});
  const TensorId b = g.add_tensor({"b", {6, 7}, DType::F16, TensorRole::Input});
  try {
    g.matmul("mm", a, b, {}, TensorRole::Activation);
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_THAT(e.what(), HasSubstr("mm: inner dimensions differ"));
  }
}

TEST(GraphCompiler, PassesRunInOrderAndCanBeExtended) {
  const Workload w = tiny();
  auto passes = runtime::default_passes();
  std::vector<std::string> names;
  for (const auto& p : passes) names.push_back(p.name);
  EXPECT_EQ(names, (std::vector<std::string>{"cube_precision", "bn_split", "formats", "atomic_clean",
                                             "momentum_fusion", "lower", "precision", "cost", "memory_plan"}));
  // A pass inserted after `precision` sees the lowered ops before they are costed: here it makes
  // every vector op twice as large, and the step's device time grows accordingly.
  runtime::insert_pass(passes, "precision", {"double_vectors", [](runtime::CompileState& s) {
                                               for (auto& d : s.out.descs)
                                                 if (!aicore::is_cube(d.kind) && d.elements > 0) d.elements *= 2;
                                             }});
  aicore::CachedCostModel model(aicore::make_pipe_cost_model({}, {}));
  const auto plain = runtime::compile(w, model, 4);
  const auto doubled = runtime::compile(w, model, 4, passes);
  EXPECT_GT(doubled.device_compute_s, plain.device_compute_s);
  EXPECT_THROW(runtime::insert_pass(passes, "fusion_of_nothing", {}), std::invalid_argument);
}

}  // namespace
}  // namespace ascendsim
