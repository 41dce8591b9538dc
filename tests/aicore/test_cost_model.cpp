#include <vector>

#include <gtest/gtest.h>

#include "aicore/cost_model.h"
#include "aicore/pipe_schedule.h"
#include "aicore/tiling.h"
#include "runtime/graph_compiler.h"
#include "workloads/op_registry.h"
#include "workloads/workload.h"

namespace ascendsim::aicore {
namespace {

OpDesc matmul(std::int64_t m, std::int64_t n, std::int64_t k, Precision p = Precision::FP16) {
  OpDesc d;
  d.kind = OpKind::MatMul;
  d.precision = d.out_precision = p;
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
  d.pad_h = d.pad_w = pad;
  return d;
}

OpDesc vec(OpKind kind, std::int64_t elements, Precision p = Precision::FP32) {
  OpDesc d;
  d.kind = kind;
  d.precision = d.out_precision = p;
  d.elements = elements;
  return d;
}

std::vector<OpDesc> training_ops(const std::string& workload, std::int64_t batch) {
  const auto w = workloads::make_workload(workload, batch);
  std::vector<OpDesc> ops;
  for (const auto& op : w.graph.ops())
    if (!op.def->view) ops.push_back(runtime::lower_op(w.graph, op));
  return ops;
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
                             vec(OpKind::Add, 1 << 10),
                             vec(OpKind::Relu, 32 << 20, Precision::FP16),
                             vec(OpKind::Momentum, 1 << 20)};
  for (const auto& d : training_ops("lenet5", 32)) ops.push_back(d);
  for (const auto& d : training_ops("resnet50", 32)) ops.push_back(d);
  return ops;
}

double peak_macs_per_s(const AicoreConfig& core, Precision p) {
  const auto per_cycle = p == Precision::INT8 ? core.cube_int8_macs_per_cycle : core.cube_fp16_macs_per_cycle;
  return static_cast<double>(core.cores * per_cycle) * core.freq_ghz * 1e9;
}

TEST(PipeSchedule, OneTileTakesTheSumOfItsPipes) {
  PipeSchedule s;
  PipeCycles t{};
  t[static_cast<std::size_t>(Pipe::Mte2)] = 10;
  t[static_cast<std::size_t>(Pipe::Cube)] = 30;
  t[static_cast<std::size_t>(Pipe::Mte3)] = 5;
  s.run(t, 1);
  EXPECT_DOUBLE_EQ(s.makespan(), 45);
}

TEST(PipeSchedule, DoubleBufferingOverlapsLoadsWithCompute) {
  PipeCycles t{};
  t[static_cast<std::size_t>(Pipe::Mte2)] = 10;
  t[static_cast<std::size_t>(Pipe::Cube)] = 30;
  t[static_cast<std::size_t>(Pipe::Mte3)] = 5;
  PipeSchedule s;
  s.run(t, 100);
  // Fill (10) + 100 Cube tiles back to back + the last store (5): the loads hide behind the Cube.
  EXPECT_DOUBLE_EQ(s.makespan(), 10 + 100 * 30 + 5);
  EXPECT_DOUBLE_EQ(s.busy()[static_cast<std::size_t>(Pipe::Cube)], 3000);
  EXPECT_EQ(s.tiles(), 100);
  // More than a plain max over pipes, less than their sum.
  EXPECT_GT(s.makespan(), 3000);
  EXPECT_LT(s.makespan(), 100 * 45);
}

TEST(PipeSchedule, PingPongLimitsRunAhead) {
  // A fast producer cannot run more than two tiles ahead of a slow consumer: the schedule equals
  // the consumer's pace, and the producer's finish times trail it.
  PipeCycles t{};
  t[static_cast<std::size_t>(Pipe::Mte2)] = 1;
  t[static_cast<std::size_t>(Pipe::Vector)] = 50;
  PipeSchedule s;
  s.run(t, 10);
  EXPECT_DOUBLE_EQ(s.makespan(), 1 + 10 * 50);
  EXPECT_GE(s.state()[1][static_cast<std::size_t>(Pipe::Mte2)], 8 * 50);  // tile 10's load waited for a free half
}

TEST(PipeSchedule, ExtrapolationEqualsTileByTile) {
  PipeCycles a{}, b{};
  a[static_cast<std::size_t>(Pipe::Scalar)] = 3;
  a[static_cast<std::size_t>(Pipe::Mte2)] = 17;
  a[static_cast<std::size_t>(Pipe::Mte1)] = 9;
  a[static_cast<std::size_t>(Pipe::Cube)] = 13;
  b = a;
  b[static_cast<std::size_t>(Pipe::FixPipe)] = 20;
  b[static_cast<std::size_t>(Pipe::Vector)] = 7;
  b[static_cast<std::size_t>(Pipe::Mte3)] = 11;
  for (const double sync : {0.0, 20.0}) {  // with the flags' latency too (set and freeing flags)
    PipeSchedule fast(sync), slow(sync);
    for (int tile = 0; tile < 40; ++tile) {
      fast.run(a, 999);
      fast.run(b, 1);
      for (int i = 0; i < 999; ++i) slow.run(a, 1);
      slow.run(b, 1);
    }
    EXPECT_NEAR(fast.makespan(), slow.makespan(), 1e-6 * slow.makespan()) << sync;
    for (std::size_t p = 0; p < kPipeCount; ++p)
      EXPECT_NEAR(fast.busy()[p], slow.busy()[p], 1e-6 * slow.busy()[p] + 1e-9) << sync;
  }
}

TEST(PipeSchedule, AFreedHalfIsSeenAFlagLater) {
  // MTE2 refills a half once the Cube has finished with it and its flag is seen: with a 20-cycle
  // flag the period is the Cube's 30 cycles only if MTE2's 10 and two flags fit in two of them.
  PipeCycles t{};
  t[static_cast<std::size_t>(Pipe::Mte2)] = 10;
  t[static_cast<std::size_t>(Pipe::Cube)] = 30;
  PipeSchedule s(20);
  s.run(t, 1000);
  // Tile i's load waits for tile i-2's compute, +20; its compute for the load, +20: period
  // (10 + 20 + 30 + 20) / 2 = 40 per tile once the two halves alternate.
  EXPECT_NEAR(s.makespan() / 1000.0, 40.0, 0.1);
}

TEST(DaVinciCostModel, NoOpBeatsItsRoofline) {
  AicoreConfig core;
  MemoryConfig mem;
  auto model = make_pipe_cost_model(core, mem);
  for (const auto& d : sample_ops()) {
    const OpCost c = model->estimate(d);
    EXPECT_GE(c.time_s * (1 + 1e-12), c.macs / peak_macs_per_s(core, d.precision)) << d.to_string();
    EXPECT_GE(c.time_s * (1 + 1e-12), c.gm_bytes / (mem.hbm_gbps() * 1e9)) << d.to_string();
    EXPECT_GT(c.time_s, 0) << d.to_string();
    EXPECT_LE(c.blocks, is_cube(d.kind) ? core.cores : core.vector_core_count()) << d.to_string();
  }
}

TEST(DaVinciCostModel, LargeMatMulNearCubePeakTinyMatMulOverheadBound) {
  AicoreConfig core;
  auto model = make_pipe_cost_model(core, MemoryConfig{});
  const OpCost big = model->estimate(matmul(8192, 8192, 8192));
  EXPECT_GE(big.macs / big.time_s, 0.8 * peak_macs_per_s(core, Precision::FP16));
  EXPECT_EQ(big.bound, Bound::Cube);
  EXPECT_EQ(model->estimate(matmul(16, 16, 16)).bound, Bound::Overhead);
}

TEST(DaVinciCostModel, Int8AboutTwiceAsFastOnComputeBoundShapes) {
  auto model = make_pipe_cost_model(AicoreConfig{}, MemoryConfig{});
  for (const auto& [m, n, k] : std::vector<std::array<std::int64_t, 3>>{{8192, 8192, 8192}, {4096, 4096, 8192}}) {
    const double fp16 = model->estimate(matmul(m, n, k)).time_s;
    const double int8 = model->estimate(matmul(m, n, k, Precision::INT8)).time_s;
    EXPECT_NEAR(fp16 / int8, 2.0, 0.2) << m << "x" << n << "x" << k;
  }
}

TEST(DaVinciCostModel, MoreCoresNeverSlowerOnLargeOps) {
  const std::vector<OpDesc> large = {matmul(8192, 8192, 8192), matmul(4096, 1024, 2048), conv(32, 64, 56, 64, 3, 1, 1),
                                     conv(32, 256, 14, 256, 3, 1, 1, OpKind::Conv2DBackpropFilter),
                                     vec(OpKind::Relu, 32 << 20, Precision::FP16)};
  for (const auto& d : large) {
    double prev = 1e9;
    for (std::int64_t cores : {1, 2, 4, 8, 16, 32, 64}) {
      AicoreConfig core;
      core.cores = cores;
      const double t = make_pipe_cost_model(core, MemoryConfig{})->estimate(d).time_s;
      EXPECT_LE(t, prev * (1 + 1e-9)) << d.to_string() << " cores " << cores;
      prev = t;
    }
  }
}

TEST(DaVinciCostModel, MoreHbmBandwidthNeverSlower) {
  for (const auto& d : sample_ops()) {
    double prev = 1e9;
    for (double bw : {100.0, 300.0, 1200.0, 2400.0}) {
      MemoryConfig m;
      m.hbm_bandwidth_gbps = bw;
      const double t = make_pipe_cost_model(AicoreConfig{}, m)->estimate(d).time_s;
      EXPECT_LE(t, prev * (1 + 1e-9)) << d.to_string() << " bw " << bw;
      prev = t;
    }
  }
}

TEST(DaVinciCostModel, VectorInstructionIssueCostCounts) {
  // With HBM out of the way, the Vector unit bounds a BatchNorm and its issue cost shows.
  MemoryConfig fast;
  fast.hbm_bandwidth_gbps = 1e5;
  AicoreConfig cheap, dear;
  cheap.vector_issue_cycles = 0;
  dear.vector_issue_cycles = 200;
  const OpDesc bn = [] {
    OpDesc d;
    d.kind = OpKind::BatchNorm;
    d.precision = d.out_precision = Precision::FP32;
    d.batch = 32;
    d.cin = 256;
    d.h = d.w = 14;
    return d;
  }();
  EXPECT_LT(make_pipe_cost_model(cheap, fast)->estimate(bn).time_s,
            make_pipe_cost_model(dear, fast)->estimate(bn).time_s);
}

/// The ascend910b preset's core: 24 Cube cores with two vector cores each, 1.592 GHz.
AicoreConfig ascend910b_core() {
  AicoreConfig c;
  c.cores = 24;
  c.vector_cores = 48;
  c.freq_ghz = 1.592;
  c.l0c_kib = 128;
  c.l1_kib = 512;
  c.ub_kib = 192;
  c.block_start_cycles = 2000;
  c.flash_attention = true;
  return c;
}

OpDesc attention(std::int64_t heads, std::int64_t s, std::int64_t d, bool causal = false,
                 OpKind kind = OpKind::FlashAttention) {
  OpDesc x;
  x.kind = kind;
  x.batch = heads;
  x.m = x.n = s;
  x.k = d;
  x.causal = causal;
  return x;
}

TEST(DaVinciCostModel, FlashAttentionKeepsTheScoresOnChip) {
  // 32 heads of a 2,048-token sequence, head width 128 (LLaMA-7B's layer at batch 1): HBM sees
  // Q, K, V and the context once and the two fp32 row statistics, never the 2,048 x 2,048 scores.
  MemoryConfig mem;
  mem.hbm_bandwidth_gbps = 1759.2;
  const AicoreConfig core = ascend910b_core();
  auto model = make_pipe_cost_model(core, mem);
  const std::int64_t heads = 32, S = 2048, D = 128;
  const OpCost c = model->estimate(attention(heads, S, D));
  EXPECT_DOUBLE_EQ(c.gm_bytes, static_cast<double>(heads) * (4.0 * S * D * 2 + 2.0 * S * 8 * 4));
  EXPECT_LT(c.gm_bytes, static_cast<double>(heads * S * S * 2));  // less than the fp16 scores alone
  EXPECT_DOUBLE_EQ(c.macs, 2.0 * heads * S * S * D);
  // Near the Cube's peak (its softmax on two vector cores keeps pace), never past it.
  const double peak = peak_macs_per_s(core, Precision::FP16);
  EXPECT_GE(c.time_s, c.macs / peak);
  EXPECT_LE(c.time_s, 1.3 * c.macs / peak);
  EXPECT_TRUE(c.bound == Bound::Cube || c.bound == Bound::Vector) << bound_name(c.bound);
  // A decoder's mask skips the tiles above the diagonal: about half the work.
  const OpCost causal = model->estimate(attention(heads, S, D, true));
  EXPECT_DOUBLE_EQ(causal.macs, c.macs / 2);
  EXPECT_LT(causal.time_s, 0.6 * c.time_s);
  EXPECT_GT(causal.time_s, 0.45 * c.time_s);
  // The gradient: five products per tile pair against two, and dQ's partial sums through HBM.
  const OpCost grad = model->estimate(attention(heads, S, D, false, OpKind::FlashAttentionGrad));
  EXPECT_DOUBLE_EQ(grad.macs, 2.5 * c.macs);
  const auto cube = static_cast<std::size_t>(Pipe::Cube);
  EXPECT_DOUBLE_EQ(grad.pipe_busy[cube], 2.5 * c.pipe_busy[cube]);
  EXPECT_GT(grad.time_s, 1.5 * c.time_s);  // the forward's softmax passes weigh more than the gradient's
  EXPECT_GE(grad.time_s, grad.macs / peak);
  // Without the second vector core the softmax takes longer than the products.
  AicoreConfig single = core;
  single.vector_cores = 0;
  EXPECT_GT(make_pipe_cost_model(single, mem)->estimate(attention(heads, S, D)).time_s, c.time_s);
  // The kernel runs in fp16 only, and a head too wide for any tile is refused.
  OpDesc fp32 = attention(heads, S, D);
  fp32.precision = Precision::FP32;
  EXPECT_THROW(model->estimate(fp32), std::invalid_argument);
  EXPECT_THROW(model->estimate(attention(1, 64, 4096)), std::logic_error);
}

TEST(Tiler, EveryTrainingOpFitsItsBuffersOnEveryPreset) {
  struct Chip {
    const char* name;
    std::int64_t l0a, l0b, l0c, l1, ub;
  };
  // ascend910, ascend910b (L0C 128 KiB, L1 512 KiB, UB 192 KiB), ascend310
  for (const Chip& chip : {Chip{"910", 64, 64, 256, 1024, 256}, Chip{"910b", 64, 64, 128, 512, 192}}) {
    AicoreConfig cfg;
    cfg.l0a_kib = chip.l0a;
    cfg.l0b_kib = chip.l0b;
    cfg.l0c_kib = chip.l0c;
    cfg.l1_kib = chip.l1;
    cfg.ub_kib = chip.ub;
    for (const char* w : {"lenet5", "resnet50"})
      for (std::int64_t batch : {1, 32, 256})
        for (const auto& d : training_ops(w, batch)) {
          const Tiling t = tile_op(d, cfg);
          SCOPED_TRACE(std::string(chip.name) + " " + d.to_string());
          EXPECT_LE(t.use.l0a, cfg.l0a_kib * 1024);
          EXPECT_LE(t.use.l0b, cfg.l0b_kib * 1024);
          EXPECT_LE(t.use.l0c, cfg.l0c_kib * 1024);
          EXPECT_LE(t.use.l1, cfg.l1_kib * 1024);
          EXPECT_LE(t.use.ub, cfg.ub_kib * 1024);
          EXPECT_GE(t.blocks, 1);
          EXPECT_GE(t.tile_count(), 1);
          if (t.cube) {
            EXPECT_EQ(t.c.m_t % 16, 0);
            EXPECT_EQ(t.c.n_t % 16, 0);
            EXPECT_GE(t.c.tiles_m * t.c.m_t, t.c.M);
            EXPECT_GE(t.c.tiles_n * t.c.n_t, t.c.N);
            EXPECT_GE(t.c.k_steps * t.c.k_t, t.c.K);
          } else {
            EXPECT_GE(t.v.tiles * t.v.tile_elements, t.v.elements);
          }
        }
  }
}

TEST(Tiler, RejectsImpossibleGeometryAndBuffersTooSmall) {
  EXPECT_THROW(tile_op(matmul(0, 16, 16), AicoreConfig{}), std::invalid_argument);
  EXPECT_THROW(tile_op(conv(1, 3, 4, 8, 7, 1, 0), AicoreConfig{}), std::invalid_argument);  // 7x7 on 4x4
  EXPECT_THROW(tile_op(matmul(64, 64, 64, Precision::FP32), AicoreConfig{}), std::invalid_argument);
  AicoreConfig tiny;
  tiny.l0a_kib = 1;  // 2 x 16 x 16 x 2 B = 1 KiB fits; make L0C too small for any fractal tile
  tiny.l0c_kib = 1;
  EXPECT_THROW(tile_op(matmul(64, 64, 64), tiny), std::logic_error);
}

TEST(DaVinciCostModel, PaddingOnOneAxisKeepsThatAxisAndCostsItsMacs) {
  // Inception's 1x7 convolution pads the width only (pads [0,3,0,3]): a 17x17 input stays 17x17,
  // the MACs are the 1x7 window's, and the cost is that of neither equal padding.
  OpDesc row = conv(8, 128, 17, 128, 1, 1, 0);
  row.kw = 7;
  row.pad_w = 3;
  EXPECT_EQ(row.conv_out_h(), 17);
  EXPECT_EQ(row.conv_out_w(), 17);
  EXPECT_EQ(row.macs(), 8 * 17 * 17 * 128 * 128 * 7);
  EXPECT_EQ(row.pad_string(), "0,3");
  EXPECT_NO_THROW(row.validate());
  OpDesc column = row;  // its transpose: 7x1, pads [3,0,3,0]
  std::swap(column.kh, column.kw);
  std::swap(column.pad_h, column.pad_w);
  auto model = make_pipe_cost_model(AicoreConfig{}, MemoryConfig{});
  EXPECT_EQ(model->estimate(row).macs, model->estimate(column).macs);
  EXPECT_FALSE(row == column);
  EXPECT_NE(row.hash(), column.hash());  // the cost cache keeps them apart
  OpDesc wider = row;  // the pad the 1x7 window cannot take
  wider.pad_w = 7;
  EXPECT_THROW(wider.validate(), std::invalid_argument);
}

TEST(CachedCostModel, SameDescSameCostComputedOnce) {
  CachedCostModel cached(make_pipe_cost_model(AicoreConfig{}, MemoryConfig{}));
  auto direct = make_pipe_cost_model(AicoreConfig{}, MemoryConfig{});
  const auto ops = training_ops("lenet5", 32);
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
