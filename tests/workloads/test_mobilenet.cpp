// MobileNetV2: torchvision's counts, the depthwise convolution's shapes, cost and kernels.
#include <cmath>
#include <random>

#include <gtest/gtest.h>

#include "aicore/op_desc.h"
#include "workloads/kernels.h"
#include "workloads/op_registry.h"
#include "workloads/workload.h"

namespace ascendsim::workloads {
namespace {

TEST(MobileNetV2, ParameterAndMacCountsMatchTorchvision) {
  // torchvision.models.mobilenet_v2(): 3,504,872 parameters (weights, the classifier's bias,
  // BatchNorm gamma/beta); 300.77 M multiply-adds per 224x224 image (its docs: 0.30 GFLOPS).
  const Workload w = make_workload("mobilenetv2", 2);
  EXPECT_EQ(parameter_count(w.graph), 3504872);
  EXPECT_EQ(forward_macs(w.graph) / 2, 300774272);
  std::int64_t depthwise = 0, relu6 = 0, adds = 0;
  for (const auto& op : w.graph.ops()) {
    if (op.pass != Pass::Forward) continue;
    depthwise += op.type == "DepthwiseConv2dNative";
    relu6 += op.type == "ReLU6";
    adds += op.type == "Add";
  }
  EXPECT_EQ(depthwise, 17);  // one per inverted residual block
  EXPECT_EQ(relu6, 35);      // stem, 16 expansions, 17 depthwise, the last 1x1
  EXPECT_EQ(adds, 10);       // the blocks whose stride is 1 and channels agree
}

TEST(MobileNetV2, ADepthwiseConvolutionCostsItsChannelBlocksOnTheCube) {
  // Lowered as a dense 16-to-16 convolution per block of 16 channels: 32 channels are two
  // blocks, 40 are three (padded), so the Cube's work grows by blocks, not channels.
  auto lowered = [](std::int64_t c) {
    Graph g;
    TensorId x = g.add_tensor({"x", {8, c, 28, 28}, DType::F16, TensorRole::Input});
    TensorId w = g.add_tensor({"w", {c, 1, 3, 3}, DType::F16, TensorRole::Parameter});
    OpAttrs a;
    a.conv = {3, 3, 1, 1, 1};
    const TensorId y = g.apply("DepthwiseConv2dNative", "dw", {x, w}, a)[0];
    EXPECT_EQ(g.tensor(y).shape, (Shape{8, c, 28, 28}));
    const Op& op = g.ops().back();
    return op.def->lower(g, op);
  };
  const aicore::OpDesc two = lowered(32), three = lowered(40);
  EXPECT_EQ(two.kind, aicore::OpKind::Conv2D);
  EXPECT_EQ(two.cin, 16);
  EXPECT_EQ(two.cout, 16);
  EXPECT_EQ(two.batch, 8 * 2);
  EXPECT_EQ(three.batch, 8 * 3);
  // A weight that is not [C, 1, k, k] is refused.
  Graph g;
  TensorId x = g.add_tensor({"x", {1, 4, 8, 8}, DType::F32, TensorRole::Input});
  TensorId w = g.add_tensor({"w", {4, 2, 3, 3}, DType::F32, TensorRole::Parameter});
  EXPECT_THROW(g.apply("DepthwiseConv2dNative", "dw", {x, w}, {}), std::invalid_argument);
}

/// Runs a registered op's kernel on `inputs` (values per input) into outputs of the graph's shapes.
std::vector<std::vector<float>> compute(const Graph& g, const Op& op, std::vector<std::vector<float>> inputs) {
  std::vector<std::vector<float>> outputs;
  for (auto t : op.outputs) outputs.emplace_back(static_cast<std::size_t>(g.tensor(t).elements()));
  KernelIO io{g, op, {}, {}};
  for (auto& v : inputs) io.in.push_back(v.data());
  for (auto& v : outputs) io.out.push_back(v.data());
  op.def->compute(io);
  return outputs;
}

TEST(MobileNetV2, DepthwiseGradientsAreTheForwardPassesDerivatives) {
  // L = sum(dy * conv(x, w)) is linear in x and in w, so dL/dx and dL/dw are exact differences.
  Graph g;
  TensorId x = g.add_tensor({"x", {2, 3, 7, 6}, DType::F32, TensorRole::Input});
  TensorId w = g.add_tensor({"w", {3, 1, 3, 3}, DType::F32, TensorRole::Parameter});
  OpAttrs a;
  a.conv = {3, 3, 2, 1, 1};
  const TensorId y = g.apply("DepthwiseConv2dNative", "dw", {x, w}, a)[0];
  const Shape ys = g.tensor(y).shape;
  TensorId dy = g.add_tensor({"dy", ys, DType::F32, TensorRole::Activation});
  a.shape = g.tensor(x).shape;
  g.apply("DepthwiseConv2dNativeBackpropInput", "dx", {dy, w}, a);
  a.shape = g.tensor(w).shape;
  g.apply("DepthwiseConv2dNativeBackpropFilter", "dw_grad", {dy, x}, a);
  const auto& ops = g.ops();
  ASSERT_EQ(ops.size(), 3u);

  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-1, 1);
  auto random = [&](TensorId t) {
    std::vector<float> v(static_cast<std::size_t>(g.tensor(t).elements()));
    for (auto& e : v) e = u(rng);
    return v;
  };
  const std::vector<float> xv = random(x), wv = random(w), dyv = random(dy);
  auto loss = [&](const std::vector<float>& xs, const std::vector<float>& ws) {
    const auto out = compute(g, ops[0], {xs, ws})[0];
    double l = 0;
    for (std::size_t i = 0; i < out.size(); ++i) l += static_cast<double>(out[i]) * dyv[i];
    return l;
  };
  const double base = loss(xv, wv);
  const auto dx = compute(g, ops[1], {dyv, wv})[0];
  const auto dw = compute(g, ops[2], {dyv, xv})[0];
  for (std::size_t i = 0; i < xv.size(); i += 5) {
    auto xp = xv;
    xp[i] += 1;
    EXPECT_NEAR(loss(xp, wv) - base, dx[i], 1e-4) << "x " << i;
  }
  for (std::size_t i = 0; i < wv.size(); ++i) {
    auto wp = wv;
    wp[i] += 1;
    EXPECT_NEAR(loss(xv, wp) - base, dw[i], 1e-4) << "w " << i;
  }
  // One output by hand: channel 1, output (1, 2) of the stride-2 convolution, padding 1.
  const auto yv = compute(g, ops[0], {xv, wv})[0];
  double expect = 0;
  for (int ky = 0; ky < 3; ++ky)
    for (int kx = 0; kx < 3; ++kx) {
      const int iy = 1 * 2 - 1 + ky, ix = 2 * 2 - 1 + kx;
      if (iy < 0 || iy >= 7 || ix < 0 || ix >= 6) continue;
      expect +=
          xv[static_cast<std::size_t>((1 * 7 + iy) * 6 + ix)] * wv[static_cast<std::size_t>((1 * 3 + ky) * 3 + kx)];
    }
  EXPECT_NEAR(yv[static_cast<std::size_t>((1 * ys[2] + 1) * ys[3] + 2)], expect, 1e-5);
}

TEST(MobileNetV2, ReLU6ClipsAndItsGradientPassesOnlyInside) {
  Graph g;
  TensorId x = g.add_tensor({"x", {6}, DType::F32, TensorRole::Input});
  const TensorId y = g.apply("ReLU6", "r", {x})[0];
  TensorId dy = g.add_tensor({"dy", {6}, DType::F32, TensorRole::Activation});
  g.apply("ReLU6Grad", "rg", {dy, y});
  const auto out = compute(g, g.ops()[0], {{-1, 0, 0.5f, 5.5f, 6, 9}})[0];
  EXPECT_EQ(out, (std::vector<float>{0, 0, 0.5f, 5.5f, 6, 6}));
  const auto grad = compute(g, g.ops()[1], {{1, 1, 1, 1, 1, 1}, out})[0];
  EXPECT_EQ(grad, (std::vector<float>{0, 0, 1, 1, 0, 0}));
}

}  // namespace
}  // namespace ascendsim::workloads
