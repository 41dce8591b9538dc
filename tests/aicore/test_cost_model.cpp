#include <vector>

#include <gtest/gtest.h>

#include "aicore/cost_model.h"
#include "runtime/graph_compiler.h"
#include "workloads/lenet5.h"

namespace ascendsim::aicore {
namespace {

OpDesc matmul(std::int64_t m, std::int64_t n, std::int64_t k, Precision p = Precision::FP16) {
  OpDesc d;
  d.kind = OpKind::MatMul;
  d.precision = p;
  d.m = m;
  d.n = n;
  d.k = k;
  return d;
}

OpDesc conv(std::int64_t n, std::int64_t c, std::int64_t hw, std::int64_t k, std::int64_t r, std::int64_t stride,
            std::int64_t pad, OpKind kind = OpKind::Conv2D) {
  OpDesc d;
  d.kind = kind;
  d.batch = n;
  d.cin = c;
  d.h = d.w = hw;
  d.cout = k;
  d.kh = d.kw = r;
  d.stride = stride;
  d.pad = pad;
  return d;
}

OpDesc vec(std::int64_t elements, OpKind kind = OpKind::Elementwise) {
  OpDesc d;
  d.kind = kind;
  d.precision = Precision::FP32;
  d.elements = elements;
  d.out_elements = elements;
  d.inputs = 1;
  d.passes = 1;
  return d;
}

std::vector<OpDesc> sample_ops() {
  std::vector<OpDesc> ops = {matmul(16, 16, 16),
                             matmul(8192, 8192, 8192),
                             matmul(32, 120, 400),
                             matmul(4096, 1000, 2048, Precision::INT8),
                             conv(32, 64, 56, 64, 3, 1, 1),
                             conv(32, 3, 224, 64, 7, 2, 3),
                             conv(32, 256, 14, 256, 3, 1, 1, OpKind::Conv2DBackpropInput),
                             conv(32, 256, 14, 256, 3, 1, 1, OpKind::Conv2DBackpropFilter),
                             vec(1 << 10),
                             vec(32 << 20),
                             vec(1 << 20, OpKind::Momentum)};
  // Every op of a LeNet-5 training step as the compiler lowers it.
  const auto w = workloads::make_lenet5(32);
  for (const auto& op : w.graph.ops())
    if (workloads::is_device_op(op.type)) ops.push_back(runtime::lower_op(w.graph, op));
  return ops;
}

TEST(PipeCostModel, NoOpBeatsItsRoofline) {
  AicoreConfig core;
  MemoryConfig mem;
  auto model = make_pipe_cost_model(core, mem);
  const double peak_macs_per_s = static_cast<double>(core.cores * core.cube_fp16_macs_per_cycle) * core.freq_ghz * 1e9;
  const double hbm_bytes_per_s = mem.hbm_bandwidth_gbps * 1e9;
  for (const auto& d : sample_ops()) {
    const OpCost c = model->estimate(d);
    const double int8 = d.precision == Precision::INT8 ? 2.0 : 1.0;
    EXPECT_GE(c.time_s * (1 + 1e-12), c.macs / (peak_macs_per_s * int8)) << d.to_string();
    EXPECT_GE(c.time_s * (1 + 1e-12), c.gm_bytes / hbm_bytes_per_s) << d.to_string();
    EXPECT_GT(c.time_s, 0) << d.to_string();
    EXPECT_LE(c.blocks, core.cores) << d.to_string();
  }
}

TEST(PipeCostModel, LargeMatMulNearCubePeakTinyMatMulOverheadBound) {
  AicoreConfig core;
  MemoryConfig mem;
  auto model = make_pipe_cost_model(core, mem);
  const OpCost big = model->estimate(matmul(8192, 8192, 8192));
  const double peak = static_cast<double>(core.cores * core.cube_fp16_macs_per_cycle) * core.freq_ghz * 1e9;
  EXPECT_GE(big.macs / big.time_s, 0.8 * peak);
  EXPECT_EQ(big.bound, Bound::Cube);
  EXPECT_EQ(model->estimate(matmul(16, 16, 16)).bound, Bound::Overhead);
}

TEST(PipeCostModel, Int8TwiceAsFastOnComputeBoundShapes) {
  auto model = make_pipe_cost_model(AicoreConfig{}, MemoryConfig{});
  const double fp16 = model->estimate(matmul(8192, 8192, 8192)).time_s;
  const double int8 = model->estimate(matmul(8192, 8192, 8192, Precision::INT8)).time_s;
  EXPECT_NEAR(fp16 / int8, 2.0, 0.1);
}

TEST(PipeCostModel, MoreCoresNeverSlowerMoreBandwidthNeverSlower) {
  MemoryConfig mem;
  for (const auto& d : sample_ops()) {
    double prev = 1e9;
    for (std::int64_t cores : {1, 2, 4, 8, 16, 32, 64}) {
      AicoreConfig core;
      core.cores = cores;
      const double t = make_pipe_cost_model(core, mem)->estimate(d).time_s;
      EXPECT_LE(t, prev * (1 + 1e-12)) << d.to_string() << " cores " << cores;
      prev = t;
    }
    prev = 1e9;
    for (double bw : {100.0, 300.0, 1200.0, 2400.0}) {
      MemoryConfig m;
      m.hbm_bandwidth_gbps = bw;
      const double t = make_pipe_cost_model(AicoreConfig{}, m)->estimate(d).time_s;
      EXPECT_LE(t, prev * (1 + 1e-12)) << d.to_string() << " bw " << bw;
      prev = t;
    }
  }
}

TEST(PipeCostModel, CubeHasNoFp32Mode) {
  auto model = make_pipe_cost_model(AicoreConfig{}, MemoryConfig{});
  EXPECT_THROW(model->estimate(matmul(64, 64, 64, Precision::FP32)), std::invalid_argument);
}

TEST(CachedCostModel, SameDescSameCostComputedOnce) {
  CachedCostModel cached(make_pipe_cost_model(AicoreConfig{}, MemoryConfig{}));
  auto direct = make_pipe_cost_model(AicoreConfig{}, MemoryConfig{});
  const auto ops = sample_ops();
  for (int pass = 0; pass < 3; ++pass)
    for (const auto& d : ops) EXPECT_EQ(cached.estimate(d).time_s, direct->estimate(d).time_s);
  std::size_t unique = 0;
  for (std::size_t i = 0; i < ops.size(); ++i) {
    bool seen = false;
    for (std::size_t j = 0; j < i; ++j) seen = seen || ops[i] == ops[j];
    unique += seen ? 0 : 1;
  }
  EXPECT_EQ(cached.size(), unique);
}

}  // namespace
}  // namespace ascendsim::aicore
