// The ops imported networks add (ops_nn.cpp, kernels_nn.cpp): each op's registered backward rule,
// run by the functional kernels, is the derivative of its forward kernel (central differences of
// a weighted sum of the output), and the kernels compute what the ops mean.
#include <gtest/gtest.h>

#include <functional>
#include <random>

#include "aicore/aicore_config.h"
#include "aicore/cost_model.h"
#include "runtime/functional.h"
#include "workloads/op_registry.h"
#include "workloads/op_rules.h"
#include "workloads/training.h"

namespace ascendsim::workloads {
namespace {

struct Net {
  Graph g;
  std::vector<TensorId> params;
  TensorId loss = -1;
  std::map<TensorId, TensorId> grads;
  std::vector<std::vector<float>> values;
};

/// loss = mean(f(params) * weights) for fixed random weights; the backward pass appended.
Net build(const std::vector<Shape>& shapes, const std::function<TensorId(Graph&, const std::vector<TensorId>&)>& f,
          std::mt19937& rng) {
  Net n;
  for (std::size_t k = 0; k < shapes.size(); ++k)
    n.params.push_back(n.g.add_tensor({"p" + std::to_string(k), shapes[k], DType::F32, TensorRole::Parameter}));
  const TensorId y = f(n.g, n.params);
  const Shape ys = n.g.tensor(y).shape;
  const TensorId c = n.g.add_tensor({"c", ys, DType::F32, TensorRole::Constant});
  const TensorId m = n.g.apply("Mul", "weigh", {y, c})[0];
  n.loss = n.g.reduce_mean("mean", n.g.reshape("flat", m, {n.g.tensor(m).elements()}));
  n.grads = append_backward(n.g, n.loss);
  std::uniform_real_distribution<float> u(-4, 4);
  n.values.resize(n.g.tensors().size());
  for (std::size_t t = 0; t < n.values.size(); ++t) {
    n.values[t].assign(static_cast<std::size_t>(n.g.tensors()[t].elements()), 0.0f);
    if (n.g.tensors()[t].role == TensorRole::Parameter || static_cast<TensorId>(t) == c)
      for (auto& v : n.values[t]) v = u(rng);
    if (n.g.tensors()[t].name == "sens") n.values[t][0] = 1;
  }
  return n;
}

double run(Net& n, bool backward) {
  std::vector<std::shared_ptr<void>> state(n.g.ops().size());
  for (std::size_t i = 0; i < n.g.ops().size(); ++i)
    if (backward || n.g.ops()[i].pass == Pass::Forward) runtime::compute_op(n.g, n.g.ops()[i], n.values, &state[i]);
  return n.values[static_cast<std::size_t>(n.loss)][0];
}

/// Every parameter's gradient against central differences at a spread of its elements.
void check_gradients(const std::string& what, const std::vector<Shape>& shapes,
                     const std::function<TensorId(Graph&, const std::vector<TensorId>&)>& f, unsigned seed = 1) {
  std::mt19937 rng(seed);
  Net n = build(shapes, f, rng);
  run(n, true);
  for (TensorId p : n.params) {
    const auto grad = n.values[static_cast<std::size_t>(n.grads.at(p))];
    auto& x = n.values[static_cast<std::size_t>(p)];
    const std::size_t step = std::max<std::size_t>(1, x.size() / 23);
    for (std::size_t i = 0; i < x.size(); i += step) {
      const float keep = x[i], eps = 1e-2f;
      x[i] = keep + eps;
      const double up = run(n, false);
      x[i] = keep - eps;
      const double down = run(n, false);
      x[i] = keep;
      EXPECT_NEAR((up - down) / (2 * eps), grad[i], 2e-4 + 1e-2 * std::fabs(grad[i]))
          << what << ": parameter " << n.g.tensor(p).name << " element " << i;
    }
  }
}

OpAttrs with_alpha_beta(double a, double b) {
  OpAttrs o;
  o.alpha = a;
  o.beta = b;
  return o;
}

TEST(NnOps, BackwardRulesAreTheForwardKernelsDerivatives) {
  auto one = [](const std::string& type, OpAttrs a = {}) {
    return [type, a](Graph& g, const std::vector<TensorId>& p) { return g.apply(type, type, {p[0]}, a)[0]; };
  };
  check_gradients("Sigmoid", {{2, 3, 4}}, one("Sigmoid"));
  check_gradients("HSigmoid", {{2, 3, 4}}, one("HSigmoid", with_alpha_beta(0.2, 0.5)));
  check_gradients("HSwish", {{2, 3, 4}}, one("HSwish"));
  check_gradients("ClipByValue", {{2, 3, 4}}, one("ClipByValue", with_alpha_beta(-1, 1.5)));
  check_gradients("Softmax", {{3, 5}}, one("Softmax"));
  check_gradients("Neg", {{4}}, one("Neg"));
  OpAttrs pool;
  pool.pool = {3, 2, 1};
  check_gradients("AvgPool", {{1, 2, 5, 5}}, one("AvgPool", pool));
  pool.count = 1;  // count_include_pad
  check_gradients("AvgPool (pad counted)", {{1, 2, 5, 5}}, one("AvgPool", pool));
  OpAttrs perm;
  perm.shape = {2, 0, 1};
  check_gradients("Transpose", {{2, 3, 4}}, one("Transpose", perm));
  check_gradients("Concat", {{2, 3, 2}, {2, 1, 2}}, [](Graph& g, const std::vector<TensorId>& p) {
    OpAttrs a;
    a.axis = 1;
    return g.apply("Concat", "cat", {p[0], g.apply("Sigmoid", "s", {p[1]})[0]}, a)[0];
  });
  for (const char* type : {"Add", "Sub", "Mul", "RealDiv"})
    check_gradients(std::string(type) + " (broadcast)", {{2, 3, 4}, {3, 1}},
                    [type](Graph& g, const std::vector<TensorId>& p) {
                      // RealDiv divides by a sigmoid of the second parameter: positive, away from 0.
                      const TensorId b = std::string(type) == "RealDiv" ? g.apply("Sigmoid", "pos", {p[1]})[0] : p[1];
                      return g.apply(type, type, {p[0], b})[0];
                    });
  // The transposed convolution (Conv2DBackpropInput as a forward op) and its two gradients.
  check_gradients("ConvTranspose", {{1, 3, 4, 4}, {3, 2, 2, 2}}, [](Graph& g, const std::vector<TensorId>& p) {
    return g.conv2d_backprop_input("up", p[0], p[1], {1, 2, 8, 8}, {2, 2, 2, 0});
  });
}

std::vector<float> compute(Graph& g, const std::string& type, std::vector<std::vector<float>> in,
                           std::vector<Shape> shapes, OpAttrs a = {}, bool inference = false,
                           std::vector<std::vector<float>>* all = nullptr) {
  std::vector<TensorId> ids;
  for (std::size_t k = 0; k < shapes.size(); ++k)
    ids.push_back(g.add_tensor({"i" + std::to_string(k), shapes[k], DType::F32, TensorRole::Activation}));
  g.apply(type, type, ids, a);
  const Op& op = g.ops().back();
  std::vector<std::vector<float>> values(g.tensors().size());
  for (std::size_t k = 0; k < ids.size(); ++k) values[static_cast<std::size_t>(ids[k])] = in[k];
  for (auto t : op.outputs)
    values[static_cast<std::size_t>(t)].resize(static_cast<std::size_t>(g.tensor(t).elements()));
  std::shared_ptr<void> state;
  runtime::compute_op(g, op, values, &state, inference);
  if (all) *all = values;
  return values[static_cast<std::size_t>(op.outputs[0])];
}

TEST(NnOps, KernelsComputeWhatTheOpsMean) {
  Graph g;
  // Broadcasting: [2,3] - [3] subtracts the row from each row; [2,1] / [1,3] is an outer quotient.
  EXPECT_EQ(compute(g, "Sub", {{1, 2, 3, 4, 5, 6}, {1, 1, 1}}, {{2, 3}, {3}}), (std::vector<float>{0, 1, 2, 3, 4, 5}));
  EXPECT_EQ(compute(g, "RealDiv", {{6, 12}, {1, 2, 3}}, {{2, 1}, {1, 3}}), (std::vector<float>{6, 3, 2, 12, 6, 4}));
  OpAttrs to;
  to.shape = {1, 3};
  EXPECT_EQ(compute(g, "ReduceSum", {{1, 2, 3, 4, 5, 6}}, {{2, 3}}, to), (std::vector<float>{5, 7, 9}));
  // Softmax rows sum to one; HSwish at its landmarks; average pooling of a 2x2 window.
  const auto s = compute(g, "Softmax", {{0, 0, 0, 1, 2, 3}}, {{2, 3}});
  EXPECT_NEAR(s[0], 1.0 / 3, 1e-6);
  EXPECT_NEAR(s[3] + s[4] + s[5], 1.0, 1e-6);
  EXPECT_EQ(compute(g, "HSwish", {{-4, -3, 0, 3, 5}}, {{5}}), (std::vector<float>{0, 0, 0, 3, 5}));
  OpAttrs pool;
  pool.pool = {2, 2, 0};
  EXPECT_EQ(compute(g, "AvgPool", {{1, 2, 3, 4}}, {{1, 1, 2, 2}}, pool), (std::vector<float>{2.5f}));
  OpAttrs perm;
  perm.shape = {1, 0};
  EXPECT_EQ(compute(g, "Transpose", {{1, 2, 3, 4, 5, 6}}, {{2, 3}}, perm), (std::vector<float>{1, 4, 2, 5, 3, 6}));
  OpAttrs cat;
  cat.axis = 1;
  EXPECT_EQ(compute(g, "Concat", {{1, 2, 3, 4}, {9, 8}}, {{2, 2}, {2, 1}}, cat),
            (std::vector<float>{1, 2, 9, 3, 4, 8}));
  // Dropout keeps about its keep probability, scales what it keeps, and repeats run to run.
  OpAttrs keep;
  keep.alpha = 0.8;
  const std::vector<float> ones(10000, 1.0f);
  Graph g1, g2;
  const auto y1 = compute(g1, "Dropout", {ones}, {{10000}}, keep), y2 = compute(g2, "Dropout", {ones}, {{10000}}, keep);
  EXPECT_EQ(y1, y2);
  int kept = 0;
  for (float v : y1) {
    EXPECT_TRUE(v == 0.0f || v == 1.25f);
    kept += v != 0.0f;
  }
  EXPECT_NEAR(kept / 10000.0, 0.8, 0.02);
}

OpAttrs grouped(std::int64_t group, std::int64_t stride = 1, std::int64_t pad = 1) {
  OpAttrs a;
  a.conv.stride = stride;
  a.conv.pad_h = a.conv.pad_w = pad;
  a.conv.group = group;
  return a;
}

OpAttrs slice(std::int64_t axis, std::int64_t begin, Shape piece) {
  OpAttrs a;
  a.axis = axis;
  a.count = begin;
  a.shape = std::move(piece);
  return a;
}

TEST(NnOps, GroupedConvolutionsAndSlicesHaveTheirForwardKernelsDerivatives) {
  // Grouped convolutions: 2 groups of 2 channels to 3 each; 4 groups of 2 channels to 1, strided.
  check_gradients("Conv2D, group 2", {{2, 4, 5, 5}, {6, 2, 3, 3}}, [](Graph& g, const std::vector<TensorId>& p) {
    return g.apply("Conv2D", "conv", {p[0], p[1]}, grouped(2))[0];
  });
  check_gradients("Conv2D, group 4, stride 2", {{1, 8, 6, 6}, {4, 2, 3, 3}},
                  [](Graph& g, const std::vector<TensorId>& p) {
                    return g.apply("Conv2D", "conv", {p[0], p[1]}, grouped(4, 2))[0];
                  });
  // A slice of channels, and ShuffleNet's split in two whose halves swap places: each element's
  // gradient comes back through exactly one piece.
  check_gradients("StridedSlice", {{2, 5, 3}}, [](Graph& g, const std::vector<TensorId>& p) {
    return g.apply("StridedSlice", "slice", {p[0]}, slice(1, 1, {2, 3, 3}))[0];
  });
  check_gradients("split and swap", {{2, 4, 3}}, [](Graph& g, const std::vector<TensorId>& p) {
    const TensorId a = g.apply("StridedSlice", "a", {p[0]}, slice(1, 0, {2, 2, 3}))[0];
    const TensorId b = g.apply("StridedSlice", "b", {g.apply("Sigmoid", "s", {p[0]})[0]}, slice(1, 2, {2, 2, 3}))[0];
    OpAttrs cat;
    cat.axis = 1;
    return g.apply("Concat", "cat", {b, a}, cat)[0];
  });
}

TEST(NnOps, AGroupedConvolutionIsItsGroupsDenseConvolutions) {
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> u(-1, 1);
  const std::int64_t n = 2, cin = 6, cout = 9, groups = 3, hw = 5;
  std::vector<float> x(static_cast<std::size_t>(n * cin * hw * hw)), w(static_cast<std::size_t>(cout * 2 * 9));
  for (auto& v : x) v = u(rng);
  for (auto& v : w) v = u(rng);
  Graph g;
  const auto y = compute(g, "Conv2D", {x, w}, {{n, cin, hw, hw}, {cout, cin / groups, 3, 3}}, grouped(groups));
  ASSERT_EQ(y.size(), static_cast<std::size_t>(n * cout * hw * hw));
  for (std::int64_t k = 0; k < groups; ++k) {  // group k: input channels 2k, 2k+1 to outputs 3k..3k+2
    std::vector<float> xk, wk(w.begin() + k * 3 * 2 * 9, w.begin() + (k + 1) * 3 * 2 * 9);
    for (std::int64_t b = 0; b < n; ++b)
      xk.insert(xk.end(), x.begin() + (b * cin + 2 * k) * hw * hw, x.begin() + (b * cin + 2 * k + 2) * hw * hw);
    Graph gk;
    const auto yk = compute(gk, "Conv2D", {xk, wk}, {{n, 2, hw, hw}, {3, 2, 3, 3}}, grouped(1));
    for (std::int64_t b = 0; b < n; ++b)
      for (std::int64_t i = 0; i < 3 * hw * hw; ++i)
        EXPECT_NEAR(y[static_cast<std::size_t>((b * cout + 3 * k) * hw * hw + i)],
                    yk[static_cast<std::size_t>(b * 3 * hw * hw + i)], 1e-5)
            << "group " << k << " sample " << b << " element " << i;
  }
  // A weight that does not divide into the groups is refused, naming the shapes.
  Graph bad;
  const TensorId bx = bad.add_tensor({"x", {1, 6, 5, 5}, DType::F32, TensorRole::Input});
  const TensorId bw = bad.add_tensor({"w", {8, 3, 3, 3}, DType::F32, TensorRole::Parameter});
  EXPECT_THROW(bad.apply("Conv2D", "conv", {bx, bw}, grouped(3)), std::invalid_argument);
  // A slice's gradient is dy in place in zeros.
  EXPECT_EQ(compute(g, "StridedSliceGrad", {{1, 2, 3, 4}}, {{2, 2}}, slice(1, 1, {2, 4})),
            (std::vector<float>{0, 1, 2, 0, 0, 3, 4, 0}));
  EXPECT_EQ(compute(g, "StridedSlice", {{1, 2, 3, 4, 5, 6, 7, 8}}, {{2, 4}}, slice(1, 1, {2, 2})),
            (std::vector<float>{2, 3, 6, 7}));
}

TEST(NnOps, AGroupedConvolutionIsCostedAsItsGroupsGemmsOnTheCube) {
  // [32, 64, 28, 28] by 3x3 filters to 64 channels in G groups: one Cube kernel of G GEMMs of
  // Cin/G to Cout/G channels (the groups stacked as G times the batch), 1/G of the dense MACs.
  auto lowered = [](std::int64_t groups) {
    Graph g;
    const TensorId x = g.add_tensor({"x", {32, 64, 28, 28}, DType::F16, TensorRole::Input});
    const TensorId w = g.add_tensor({"w", {64, 64 / groups, 3, 3}, DType::F16, TensorRole::Parameter});
    g.apply("Conv2D", "conv", {x, w}, grouped(groups));
    const Op& op = g.ops().back();
    EXPECT_TRUE(op.def->cube);
    const aicore::OpDesc d = op.def->lower(g, op);
    EXPECT_EQ(d.macs(), op.def->macs(g, op));
    return d;
  };
  const aicore::OpDesc dense = lowered(1), g4 = lowered(4), g8 = lowered(8);
  EXPECT_EQ(g4.batch, 32 * 4);
  EXPECT_EQ(g4.cin, 16);
  EXPECT_EQ(g4.cout, 16);
  EXPECT_EQ(g4.macs() * 4, dense.macs());
  EXPECT_EQ(g8.macs() * 8, dense.macs());
  aicore::AicoreConfig core;
  auto model = aicore::make_pipe_cost_model(core, aicore::MemoryConfig{});
  const double t1 = model->estimate(dense).time_s, t4 = model->estimate(g4).time_s, t8 = model->estimate(g8).time_s;
  // Fewer MACs, less time; but groups of 8 channels are padded to the Cube's 16 (C0) on both
  // sides: half the MACs of groups of 16, and no less time.
  EXPECT_LT(t4, t1);
  EXPECT_GT(t4, t1 / 4 * 0.9);
  EXPECT_GE(t8, t4 * 0.95);
}

TEST(NnOps, ACeilModeMaxPoolHasItsPartialWindows) {
  // 4x4 by 3x3 windows at stride 2: floor has one window, ceil_mode two per axis, the second
  // clipped to rows and columns 2..3. PyTorch: max_pool2d(arange(16).view(1,1,4,4), 3, 2,
  // ceil_mode=True) = [[10, 11], [14, 15]].
  std::vector<float> x(16);
  for (int k = 0; k < 16; ++k) x[static_cast<std::size_t>(k)] = static_cast<float>(k);
  OpAttrs a;
  a.pool = {3, 2, 0, true};
  Graph g;
  EXPECT_EQ(compute(g, "MaxPool", {x}, {{1, 1, 4, 4}}, a), (std::vector<float>{10, 11, 14, 15}));
  a.pool.ceil = false;
  Graph floor;
  EXPECT_EQ(compute(floor, "MaxPool", {x}, {{1, 1, 4, 4}}, a), (std::vector<float>{10}));
  // The gradient goes to each window's maximum, the partial windows' too.
  a.pool.ceil = true;
  Graph gg;
  std::vector<float> dx = compute(gg, "MaxPoolGrad", {x, {10, 11, 14, 15}, {1, 2, 3, 4}},
                                  {{1, 1, 4, 4}, {1, 1, 2, 2}, {1, 1, 2, 2}}, a);
  std::vector<float> want(16, 0.0f);
  want[10] = 1, want[11] = 2, want[14] = 3, want[15] = 4;
  EXPECT_EQ(dx, want);
  // A window that would start past the input is not added: 5 pixels, 2x2 at stride 2, pad 1.
  EXPECT_EQ(rules::pool_out(5, PoolAttr{2, 2, 1, true}), 3);
  EXPECT_EQ(rules::pool_out(4, PoolAttr{2, 2, 1, true}), 3);
  EXPECT_EQ(rules::pool_out(6, PoolAttr{3, 2, 0, true}), 3);
  EXPECT_EQ(rules::pool_out(6, PoolAttr{3, 2, 0, false}), 2);
}

TEST(NnOps, ARectangularGlobalPoolTakesTheWholePlane) {
  // A 3x2 plane by a 3x2 window (TextCNN's max over the sentence, its window the conv output's
  // height and width): one output, the plane's maximum; the gradient goes to it alone; the mean
  // divides by all six cells.
  const std::vector<float> x{4, -1, 7, 2, 0, 5};
  OpAttrs a;
  a.pool = PoolAttr{3, 1, 0, false, 2};
  Graph g;
  EXPECT_EQ(compute(g, "MaxPool", {x}, {{1, 1, 3, 2}}, a), (std::vector<float>{7}));
  Graph avg;
  EXPECT_EQ(compute(avg, "AvgPool", {x}, {{1, 1, 3, 2}}, a), (std::vector<float>{17.0f / 6}));
  Graph gg;
  EXPECT_EQ(compute(gg, "MaxPoolGrad", {x, {7}, {3}}, {{1, 1, 3, 2}, {1, 1, 1, 1}, {1, 1, 1, 1}}, a),
            (std::vector<float>{0, 0, 3, 0, 0, 0}));
  EXPECT_EQ(rules::pool_out(3, a.pool), 1);
  EXPECT_EQ(rules::pool_out(2, a.pool, true), 1);
  auto one = [a](Graph& gr, const std::vector<TensorId>& p) { return gr.apply("AvgPool", "AvgPool", {p[0]}, a)[0]; };
  check_gradients("AvgPool 3x2", {{2, 2, 3, 2}}, one);
}

TEST(NnOps, TheEvaluationNetworkNormalisesByMovingStatisticsAndDropsNothing) {
  // BatchNorm of two channels, two samples of 1x2: x, gamma, beta, moving mean, moving variance.
  const std::vector<float> x{1, 3, 10, 20, 5, 7, 30, 40}, gamma{2, 1}, beta{0.5f, -1}, mean{2, 25}, var{4, 100};
  const std::vector<Shape> shapes{{2, 2, 1, 2}, {2}, {2}, {2}, {2}};
  Graph ge, gt;
  std::vector<std::vector<float>> after;
  const auto y = compute(ge, "BatchNorm", {x, gamma, beta, mean, var}, shapes, {}, true, &after);
  for (std::size_t i = 0; i < x.size(); ++i) {
    const std::size_t c = (i / 2) % 2;
    EXPECT_NEAR(y[i], (x[i] - mean[c]) / std::sqrt(var[c] + 1e-5) * gamma[c] + beta[c], 1e-5) << i;
  }
  EXPECT_EQ(after[3], mean);  // nothing updated
  EXPECT_EQ(after[4], var);
  // Training normalises by the batch (channel 0: 1, 3, 5, 7, mean 4, variance 5) and moves the statistics.
  const auto yt = compute(gt, "BatchNorm", {x, gamma, beta, mean, var}, shapes, {}, false, &after);
  EXPECT_NEAR(yt[0], (1 - 4) / std::sqrt(5 + 1e-5) * 2 + 0.5, 1e-5);
  EXPECT_NEAR(after[3][0], 0.9 * 2 + 0.1 * 4, 1e-6);
  // Dropout passes its input through, its mask all ones.
  OpAttrs keep;
  keep.alpha = 0.5;
  Graph gd;
  const std::vector<float> v{1, -2, 3, 4};
  EXPECT_EQ(compute(gd, "Dropout", {v}, {{4}}, keep, true, &after), v);
  EXPECT_EQ(after[static_cast<std::size_t>(gd.ops().back().outputs[1])], (std::vector<float>{1, 1, 1, 1}));
}

}  // namespace
}  // namespace ascendsim::workloads

namespace ascendsim::workloads {
namespace {

TEST(NnOps, TheTransformersKernelsAreTheirBackwardRulesDerivatives) {
  auto one = [](const std::string& type, OpAttrs a = {}) {
    return [type, a](Graph& g, const std::vector<TensorId>& p) { return g.apply(type, type, {p[0]}, a)[0]; };
  };
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      OpAttrs a;
      a.matmul = {ta, tb};
      const Shape x = ta ? Shape{2, 4, 3} : Shape{2, 3, 4}, w = tb ? Shape{2, 5, 4} : Shape{2, 4, 5};
      check_gradients("BatchMatMul", {x, w}, [a](Graph& g, const std::vector<TensorId>& p) {
        return g.apply("BatchMatMul", "bmm", {p[0], p[1]}, a)[0];
      });
    }
  check_gradients("LayerNorm", {{3, 6}, {6}, {6}}, [](Graph& g, const std::vector<TensorId>& p) {
    return g.apply("LayerNorm", "ln", {p[0], p[1], p[2]})[0];
  });
  OpAttrs mean;
  mean.shape = {2, 1, 4};
  check_gradients("ReduceMeanD", {{2, 3, 4}}, one("ReduceMeanD", mean));
  mean.shape = {1, 3, 1};
  check_gradients("ReduceMeanD (two axes)", {{2, 3, 4}}, one("ReduceMeanD", mean));
  check_gradients("Sqrt", {{2, 5}}, [](Graph& g, const std::vector<TensorId>& p) {  // of a positive number
    return g.apply("Sqrt", "sqrt", {g.apply("Sigmoid", "pos", {p[0]})[0]})[0];
  });
  for (const char* type : {"Tanh", "Erf", "GeLU", "SiLU"}) check_gradients(type, {{2, 6}}, one(type));
  check_gradients("RmsNorm", {{3, 6}, {6}}, [](Graph& g, const std::vector<TensorId>& p) {
    return g.apply("RmsNorm", "rms", {p[0], p[1]})[0];
  });
}

TEST(NnOps, TheRotaryEmbeddingsGradientIsItsTranspose) {
  // y = R x is linear in x: the gradient kernel must be R's transpose, <dy, R x> = <R^T dy, x>.
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(-1, 1);
  auto random = [&](std::size_t n) {
    std::vector<float> v(n);
    for (auto& x : v) x = u(rng);
    return v;
  };
  const Shape xs{2, 3, 4, 6}, table{4, 6};
  const auto x = random(144), dy = random(144), cos = random(24), sin = random(24);
  Graph f, b;
  const auto y = compute(f, "RotaryEmbedding", {x, cos, sin}, {xs, table, table});
  const auto dx = compute(b, "RotaryEmbeddingGrad", {dy, cos, sin}, {xs, table, table});
  double left = 0, right = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    left += static_cast<double>(dy[i]) * y[i];
    right += static_cast<double>(dx[i]) * x[i];
  }
  EXPECT_NEAR(left, right, 1e-4 * std::fabs(left));
  // With cos 1 and sin 0 it is the identity; with cos 0 and sin 1 rotate_half: (-x2, x1).
  Graph h;
  const auto turned =
      compute(h, "RotaryEmbedding", {{1, 2, 3, 4}, {0, 0, 0, 0}, {1, 1, 1, 1}}, {{1, 4}, {1, 4}, {1, 4}});
  EXPECT_EQ(turned, (std::vector<float>{-3, -4, 1, 2}));
}

TEST(NnOps, TheTransformersKernelsComputeWhatTheOpsMean) {
  Graph g;
  // LayerNorm with a unit scale and no shift: each row's mean 0 and variance 1 (epsilon aside).
  std::vector<std::vector<float>> all;
  const auto y = compute(g, "LayerNorm", {{1, 2, 3, 4, 10, 20, 30, 40}, {1, 1, 1, 1}, {0, 0, 0, 0}}, {{2, 4}, {4}, {4}},
                         {}, false, &all);
  for (int r = 0; r < 2; ++r) {
    double m = 0, v = 0;
    for (int i = 0; i < 4; ++i) m += y[static_cast<std::size_t>(4 * r + i)] / 4.0;
    for (int i = 0; i < 4; ++i) v += std::pow(y[static_cast<std::size_t>(4 * r + i)] - m, 2) / 4.0;
    EXPECT_NEAR(m, 0, 1e-6);
    EXPECT_NEAR(v, 1, 1e-4);
  }
  // BatchMatMul: each batch's product.
  Graph h;
  const auto z =
      compute(h, "BatchMatMul", {{1, 2, 3, 4, 1, 0, 0, 1}, {1, 1, 1, 1, 2, 3, 4, 5}}, {{2, 2, 2}, {2, 2, 2}});
  EXPECT_EQ(z, (std::vector<float>{3, 3, 7, 7, 2, 3, 4, 5}));
  // An embedding's rows at the ids, and its gradient summed back at them.
  Graph e;
  const TensorId table = e.add_tensor({"table", {3, 2}, DType::F32, TensorRole::Parameter});
  const TensorId ids = e.add_tensor({"ids", {3}, DType::I32, TensorRole::Input});
  const TensorId rows = e.apply("EmbeddingLookup", "lookup", {table, ids})[0];
  std::vector<std::vector<float>> v(e.tensors().size());
  v[static_cast<std::size_t>(table)] = {0, 1, 10, 11, 20, 21};
  v[static_cast<std::size_t>(ids)] = {2, 0, 2};
  v[static_cast<std::size_t>(rows)].resize(6);
  std::shared_ptr<void> state;
  runtime::compute_op(e, e.ops().back(), v, &state);
  EXPECT_EQ(v[static_cast<std::size_t>(rows)], (std::vector<float>{20, 21, 0, 1, 20, 21}));
  Graph s;
  EXPECT_EQ(
      compute(s, "UnsortedSegmentSum", {{1, 1, 2, 2, 3, 3}, {2, 0, 2}, std::vector<float>(6)}, {{3, 2}, {3}, {3, 2}}),
      (std::vector<float>{2, 2, 0, 0, 4, 4}));
}

}  // namespace
}  // namespace ascendsim::workloads
