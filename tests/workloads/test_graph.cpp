#include <gtest/gtest.h>

#include "workloads/graph.h"
#include "workloads/training.h"

namespace ascendsim::workloads {
namespace {

TEST(Graph, RejectsInconsistentShapes) {
  Graph g;
  TensorId x = g.add_tensor({"x", {2, 3, 8, 8}, DType::F32, TensorRole::Input});
  TensorId w = g.add_tensor({"w", {4, 5, 3, 3}, DType::F32, TensorRole::Parameter});
  EXPECT_THROW(g.conv2d("c", x, w, {3, 3, 1, 0, 0}), std::invalid_argument);  // 3 vs 5 input channels
  TensorId a = g.add_tensor({"a", {2, 3}, DType::F32, TensorRole::Input});
  TensorId b = g.add_tensor({"b", {4, 5}, DType::F32, TensorRole::Parameter});
  EXPECT_THROW(g.matmul("m", a, b, {}, TensorRole::Activation), std::invalid_argument);
  EXPECT_THROW(g.add_tensor({"z", {0, 3}, DType::F32, TensorRole::Input}), std::invalid_argument);
}

TEST(Graph, ConvOutputFollowsStrideAndPadding) {
  Graph g;
  TensorId x = g.add_tensor({"x", {1, 16, 56, 56}, DType::F16, TensorRole::Input});
  TensorId w = g.add_tensor({"w", {32, 16, 3, 3}, DType::F16, TensorRole::Parameter});
  TensorId y = g.conv2d("c", x, w, {3, 3, 2, 1, 1});
  EXPECT_EQ(g.tensor(y).shape, (Shape{1, 32, 28, 28}));
  EXPECT_EQ(op_macs(g, g.ops().back()), 28 * 28 * 32 * 16 * 9);
}

TEST(Training, SharedTensorGradientsAreSummed) {
  // y = relu(x W^T) used twice by the loss path through an AddN: the gradient of a tensor read
  // twice must be the AddN of both contributions.
  Graph g;
  TensorId x = g.add_tensor({"x", {4, 8}, DType::F32, TensorRole::Input});
  TensorId label = g.add_tensor({"label", {4}, DType::I32, TensorRole::Label});
  TensorId w = g.add_tensor({"w", {8, 8}, DType::F32, TensorRole::Parameter});
  TensorId h = g.relu("r", g.matmul("m", x, w, {false, true}, TensorRole::Activation));
  TensorId s = g.add_n("sum", {h, h});
  TensorId loss = g.sparse_softmax_cross_entropy("loss", s, label);
  auto grads = append_backward(g, loss);
  ASSERT_EQ(grads.size(), 1u);
  int addn_in_backward = 0;
  for (const auto& op : g.ops())
    if (op.pass == Pass::Backward && op.type == "AddN") ++addn_in_backward;
  EXPECT_EQ(addn_in_backward, 1);
  EXPECT_EQ(g.tensor(grads.at(w)).shape, g.tensor(w).shape);
}

}  // namespace
}  // namespace ascendsim::workloads
