#include <map>
#include <set>

#include <gtest/gtest.h>

#include "workloads/lenet5.h"
#include "workloads/workload.h"

namespace ascendsim::workloads {
namespace {

const Op& find_op(const Graph& g, const std::string& name) {
  for (const auto& op : g.ops())
    if (op.name == name) return op;
  throw std::runtime_error("no op " + name);
}

TEST(LeNet5, ParameterCountMatchesMindSporeModel) {
  // conv1 6*1*5*5 + conv2 16*6*5*5 + fc1 400*120+120 + fc2 120*84+84 + fc3 84*10+10
  EXPECT_EQ(parameter_count(make_lenet5(32).graph), 150 + 2400 + 48120 + 10164 + 850);
  EXPECT_EQ(parameter_count(make_lenet5(32).graph), 61684);
}

TEST(LeNet5, ForwardMacsPerSample) {
  for (std::int64_t batch : {1, 32, 256}) {
    const Workload w = make_lenet5(batch);
    // conv1 28*28*6*25 + conv2 10*10*16*150 + 400*120 + 120*84 + 84*10
    EXPECT_EQ(forward_macs(w.graph), batch * 416520) << "batch " << batch;
  }
}

TEST(LeNet5, ForwardShapes) {
  const Workload w = make_lenet5(32);
  const Graph& g = w.graph;
  auto out = [&](const std::string& op) { return g.tensor(find_op(g, op).outputs[0]).shape; };
  EXPECT_EQ(out("conv1/Conv2D"), (Shape{32, 6, 28, 28}));
  EXPECT_EQ(out("pool1/MaxPool"), (Shape{32, 6, 14, 14}));
  EXPECT_EQ(out("conv2/Conv2D"), (Shape{32, 16, 10, 10}));
  EXPECT_EQ(out("pool2/MaxPool"), (Shape{32, 16, 5, 5}));
  EXPECT_EQ(out("flatten/Reshape"), (Shape{32, 400}));
  EXPECT_EQ(out("fc1/BiasAdd"), (Shape{32, 120}));
  EXPECT_EQ(out("fc2/BiasAdd"), (Shape{32, 84}));
  EXPECT_EQ(out("fc3/BiasAdd"), (Shape{32, 10}));
  EXPECT_EQ(g.tensor(w.loss).elements(), 1);
  EXPECT_EQ(w.batch_bytes(), 32 * 32 * 32 * 4 + 32 * 4);
  EXPECT_EQ(w.steps_per_epoch(), 1875);
}

TEST(LeNet5, EveryParameterHasOneGradientOfItsShapeAndOneMomentumUpdate) {
  const Graph& g = make_lenet5(32).graph;
  std::map<TensorId, int> updates;
  for (const auto& op : g.ops()) {
    if (op.type != "ApplyMomentum") continue;
    const TensorId param = op.inputs[0], grad = op.inputs[3];
    EXPECT_EQ(g.tensor(param).role, TensorRole::Parameter);
    EXPECT_EQ(g.tensor(grad).shape, g.tensor(param).shape) << op.name;
    EXPECT_EQ(g.tensor(grad).role, TensorRole::Gradient) << op.name;
    ++updates[param];
  }
  std::int64_t params = 0;
  for (std::size_t t = 0; t < g.tensors().size(); ++t) {
    if (g.tensors()[t].role != TensorRole::Parameter) continue;
    ++params;
    EXPECT_EQ(updates[static_cast<TensorId>(t)], 1) << g.tensors()[t].name;
  }
  EXPECT_EQ(params, 8);  // 2 conv weights, 3 dense weights, 3 dense biases
}

TEST(LeNet5, BackwardHasTheOpsATrainingStepRuns) {
  const Graph& g = make_lenet5(32).graph;
  std::map<std::string, int> count;
  for (const auto& op : g.ops()) ++count[op.type];
  EXPECT_EQ(count["Conv2D"], 2);
  EXPECT_EQ(count["Conv2DBackpropFilter"], 2);
  EXPECT_EQ(count["Conv2DBackpropInput"], 1);  // the image needs no gradient
  EXPECT_EQ(count["MatMul"], 3 + 3 + 3);       // forward, dx, dw
  EXPECT_EQ(count["BiasAddGrad"], 3);
  EXPECT_EQ(count["ReluGrad"], 4);
  EXPECT_EQ(count["MaxPoolGrad"], 2);
  EXPECT_EQ(count["SparseSoftmaxCrossEntropyWithLogitsGrad"], 1);
  EXPECT_EQ(count["ApplyMomentum"], 8);
  EXPECT_EQ(count["Reshape"], 2);
  // 16 forward + 20 backward + 8 optimizer ops, of which the 2 reshapes are views
  EXPECT_EQ(device_op_count(g), 42);
}

TEST(LeNet5, BackwardShapesMatchForward) {
  const Graph& g = make_lenet5(32).graph;
  const Op& dconv2 = find_op(g, "Gradients/conv2/Conv2D/BackpropInput");
  EXPECT_EQ(g.tensor(dconv2.outputs[0]).shape, (Shape{32, 6, 14, 14}));
  const Op& dw1 = find_op(g, "Gradients/conv1/Conv2D/BackpropFilter");
  EXPECT_EQ(g.tensor(dw1.outputs[0]).shape, (Shape{6, 1, 5, 5}));
  const Op& dfc1 = find_op(g, "Gradients/fc1/MatMul/MatMul_dw");
  EXPECT_EQ(g.tensor(dfc1.outputs[0]).shape, (Shape{120, 400}));
  EXPECT_EQ(op_macs(g, dfc1), 32 * 120 * 400);
}

TEST(Workloads, RejectsUnknownNameAndBadBatch) {
  EXPECT_THROW(make_workload("alexnet", 32), std::invalid_argument);
  EXPECT_THROW(make_workload("lenet5", 0), std::invalid_argument);
  EXPECT_THROW(make_workload("lenet5", -4), std::invalid_argument);
}

}  // namespace
}  // namespace ascendsim::workloads
