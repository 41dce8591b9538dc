// The event model of the AI core (aicore/event_model.h): its pipes against formulas, its flags
// under fuzzed tilings, and its agreement with the analytic model over whole networks.
#include <algorithm>
#include <cmath>
#include <map>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "aicore/cost_model.h"
#include "aicore/event_model.h"
#include "aicore/tiling.h"
#include "hostif/task.h"
#include "runtime/graph_compiler.h"
#include "workloads/workload.h"

namespace ascendsim::aicore {
namespace {

constexpr std::size_t at(Pipe p) { return static_cast<std::size_t>(p); }

OpDesc matmul(std::int64_t m, std::int64_t n, std::int64_t k) {
  OpDesc d;
  d.kind = OpKind::MatMul;
  d.m = m;
  d.n = n;
  d.k = k;
  return d;
}

/// One core, and an HBM and L2 fast enough never to be the limit: the pipes alone.
AicoreConfig one_core() {
  AicoreConfig c;
  c.cores = 1;
  return c;
}
MemoryConfig unlimited_memory() {
  MemoryConfig m;
  m.hbm_bandwidth_gbps = 1e6;
  m.l2_bandwidth_gbps = 1e6;
  return m;
}

TEST(EventModel, StreamingOpTakesItsBytesOverTheMteBandwidthPlusTheFill) {
  // A Cast streams GM -> UB -> GM: MTE2 reads each tile at mte2_bytes_per_cycle while the Vector
  // unit (twice as wide) and MTE3 keep up. The block takes the scalar issue and a flag to start,
  // every tile's read back to back, then the last tile's Vector and MTE3 steps, each after a flag.
  const AicoreConfig core = one_core();
  OpDesc d;
  d.kind = OpKind::Cast;
  d.precision = d.out_precision = Precision::FP16;
  d.elements = 1 << 24;
  const OpCost c = simulate_op(d, core, unlimited_memory());
  const Tiling& t = c.tiling;
  const auto tiles = static_cast<double>(t.v.tiles);
  const double te = static_cast<double>(t.v.tile_elements);
  const double read = te * 2 / static_cast<double>(core.mte2_bytes_per_cycle);
  const double vec = te * 2 / static_cast<double>(core.vector_bytes_per_cycle) +
                     static_cast<double>(core.vector_issue_cycles) * std::ceil(te * 2 / (255.0 * 256));
  const double write = te * 2 / static_cast<double>(core.mte3_bytes_per_cycle);
  const double sync = static_cast<double>(core.flag_sync_cycles);
  ASSERT_EQ(t.v.tiles * t.v.tile_elements, d.elements);  // whole tiles: no edge
  ASSERT_GT(read, vec);
  const double fill = static_cast<double>(core.scalar_tile_cycles) + 3 * sync + vec + write;
  EXPECT_NEAR(c.block_cycles - c.overhead_cycles, tiles * read + fill, 1e-3);
  // The reads: exactly the bytes over MTE2's bandwidth.
  EXPECT_NEAR(c.pipe_busy[at(Pipe::Mte2)], static_cast<double>(d.elements) * 2 / 128.0, 1e-6);
  EXPECT_NEAR(c.block_cycles - c.overhead_cycles, static_cast<double>(d.elements) * 2 / 128.0, 2e-3 * c.block_cycles);
}

TEST(EventModel, LargeGemmReachesTheCubePeak) {
  const AicoreConfig core;
  const MemoryConfig mem;
  const OpCost c = simulate_op(matmul(8192, 8192, 8192), core, mem);
  const double peak = static_cast<double>(core.cores * core.cube_fp16_macs_per_cycle) * core.freq_ghz * 1e9;
  const double achieved = c.macs / c.time_s;
  EXPECT_GT(achieved / peak, 0.98);
  EXPECT_LE(achieved / peak, 1.0);
  EXPECT_EQ(c.bound, Bound::Cube);
}

/// The per-step period of a one-tile GEMM: the time added by each further k-step.
struct Periods {
  double measured, mte2, mte1, cube;
};
Periods gemm_period(bool double_buffer) {
  AicoreConfig core = one_core();
  core.double_buffer = double_buffer;
  const MemoryConfig mem = unlimited_memory();
  const L0Tile tile{256, 128, 64};
  auto cycles = [&](std::int64_t k_steps) {
    const OpDesc d = matmul(256, 128, 64 * k_steps);
    return simulate_tiling(d, tile_op(d, core, &tile), core, mem).block_cycles;
  };
  Periods p{};
  p.measured = (cycles(120) - cycles(60)) / 60;
  p.mte2 = (256.0 * 64 + 64.0 * 128) * 2 / static_cast<double>(core.mte2_bytes_per_cycle);
  p.mte1 = (256.0 * 64 + 64.0 * 128) * 2 / static_cast<double>(core.mte1_bytes_per_cycle);
  p.cube = 256.0 * 128 * 64 / static_cast<double>(core.cube_fp16_macs_per_cycle);
  return p;
}

TEST(EventModel, PingPongBuffersOverlapThePipes) {
  // Two halves in L1 and L0: MTE2 loads step i+1 while MTE1 moves step i and the Cube computes
  // step i-1; the busiest pipe sets the pace.
  const Periods p = gemm_period(true);
  EXPECT_NEAR(p.measured, std::max({p.mte2, p.mte1, p.cube}), 1e-6);
}

TEST(EventModel, SingleBuffersSerialiseEachPipeWithMte1) {
  // One half each: MTE2 may load step i+1 only once MTE1 has emptied L1 of step i, and MTE1 may
  // fill L0 only once the Cube has finished step i. MTE2 and the Cube still overlap (they use
  // different buffers) but each waits for MTE1 and two flags every step:
  // period = max(mte2, cube) + mte1 + 2 sync.
  const Periods p = gemm_period(false);
  const double sync = static_cast<double>(AicoreConfig{}.flag_sync_cycles);
  EXPECT_NEAR(p.measured, std::max(p.mte2, p.cube) + p.mte1 + 2 * sync, 1e-6);
  EXPECT_GT(p.measured, gemm_period(true).measured * 1.2);
}

TEST(EventModel, SingleBufferedStreamSerialisesMte2VectorAndMte3) {
  // A Vector op with one UB half in and one out: period = max(mte2, mte3) + vector + 2 sync.
  AicoreConfig core = one_core();
  core.double_buffer = false;
  const MemoryConfig mem = unlimited_memory();
  auto run = [&](std::int64_t tiles) {
    OpDesc d;
    d.kind = OpKind::Add;
    d.precision = d.out_precision = Precision::FP16;
    d.elements = 8192 * tiles;
    const L0Tile tile{8192, 0, 0};
    return simulate_tiling(d, tile_op(d, core, &tile), core, mem).block_cycles;
  };
  const double te = 8192;
  const double mte2 = te * 2 * 2 / 128.0, mte3 = te * 2 / 128.0;
  const double vec = te * 2 / 256.0 + 8.0 * std::ceil(te * 2 / (255.0 * 256));
  const double sync = static_cast<double>(core.flag_sync_cycles);
  EXPECT_NEAR((run(80) - run(40)) / 40, std::max(mte2, mte3) + vec + 2 * sync, 1e-6);
}

TEST(EventModel, BusyCyclesAreTheStepsWorkAndTheSpanBoundsThem) {
  // Conservation: each pipe's busy cycles are its work summed over the steps, and the block lasts
  // at least as long as its busiest pipe.
  const AicoreConfig core;
  const MemoryConfig mem;
  OpDesc conv;
  conv.kind = OpKind::Conv2D;
  conv.batch = 32;
  conv.cin = 64;
  conv.h = conv.w = 56;
  conv.cout = 64;
  conv.kh = conv.kw = 3;
  conv.pad_h = conv.pad_w = 1;
  const OpCost c = simulate_op(conv, core, mem);
  const CubeTiling& t = c.tiling.c;
  ASSERT_EQ(t.M % t.m_t, 0);
  ASSERT_EQ(t.N % t.n_t, 0);
  ASSERT_EQ(t.K % t.k_t, 0);
  const double steps = static_cast<double>(t.tiles_per_block * t.k_steps);
  EXPECT_NEAR(c.pipe_busy[at(Pipe::Cube)], steps * static_cast<double>(t.m_t * t.n_t * t.k_t) / 4096.0, 1e-6);
  EXPECT_NEAR(c.pipe_busy[at(Pipe::Scalar)], steps * static_cast<double>(core.scalar_tile_cycles), 1e-6);
  for (std::size_t p = 0; p < kPipeCount; ++p) EXPECT_LE(c.pipe_busy[p] + c.overhead_cycles, c.block_cycles + 1e-6);
  ASSERT_TRUE(c.timeline);
  EXPECT_EQ(c.timeline->steps, t.tiles_per_block * t.k_steps);
  for (const auto& pipe : c.timeline->pipes) {
    EXPECT_LE(pipe.size(), kTimelineIntervals);
    for (std::size_t i = 1; i < pipe.size(); ++i) EXPECT_GT(pipe[i].start, pipe[i - 1].end);
  }
  // Every operand byte is read once from HBM (both fit L2) and moved by MTE2 as often as a tile
  // needs it.
  EXPECT_LE(c.gm_bytes, c.mte_bytes);
}

TEST(EventModel, L2HitsReusedTilesWhileTheOperandsFit) {
  // A GEMM whose operands fit L2: each A and B tile misses once, however often it is re-read.
  // With an L2 too small for them, the re-reads miss too and HBM traffic rises.
  const AicoreConfig core;
  MemoryConfig mem;
  const OpDesc d = matmul(2048, 2048, 2048);
  const OpCost fits = simulate_op(d, core, mem);
  const double operands = 2.0 * 2048 * 2048 * 2, result = 2048.0 * 2048 * 2;
  EXPECT_NEAR(fits.gm_bytes, operands + result, 1.0);
  mem.l2_mib = 1;
  const OpCost small = simulate_op(d, core, mem);
  EXPECT_GT(small.gm_bytes, 1.5 * (operands + result));
  EXPECT_DOUBLE_EQ(small.mte_bytes, fits.mte_bytes);
}

TEST(EventModel, SameOpSameCostBitForBit) {
  const OpDesc d = matmul(1000, 3000, 700);
  const OpCost a = simulate_op(d, AicoreConfig{}, MemoryConfig{});
  const OpCost b = simulate_op(d, AicoreConfig{}, MemoryConfig{});
  EXPECT_EQ(a.block_cycles, b.block_cycles);
  EXPECT_EQ(a.gm_bytes, b.gm_bytes);
  EXPECT_EQ(a.pipe_busy, b.pipe_busy);
}

TEST(EventModel, ChosenByTheConfiguration) {
  AicoreConfig core;
  EXPECT_FALSE(make_pipe_cost_model(core, {})->estimate(matmul(256, 256, 256)).timeline);
  core.model = "event";
  const OpCost c = make_pipe_cost_model(core, {})->estimate(matmul(256, 256, 256));
  ASSERT_TRUE(c.timeline);
  EXPECT_GT(pipe_ratio(c, Pipe::Cube), 0);
  EXPECT_LE(pipe_ratio(c, Pipe::Cube), 1);
}

TEST(EventModel, FuzzedTilingsRunOrAreRefusedNeverDeadlock) {
  // Random ops, buffer sizes, L0 tiles and buffering: the tiler refuses a tile that does not fit
  // (naming the buffer); every other one runs to its last step with every pipe's work done.
  std::mt19937_64 rng(20261126);
  auto pick = [&](std::int64_t lo, std::int64_t hi) {
    return std::uniform_int_distribution<std::int64_t>(lo, hi)(rng);
  };
  int ran = 0, refused = 0;
  for (int trial = 0; trial < 800; ++trial) {
    AicoreConfig core;
    core.cores = pick(1, 32);
    core.l0a_kib = pick(1, 128);
    core.l0b_kib = pick(1, 128);
    core.l0c_kib = pick(4, 512);
    core.l1_kib = pick(16, 2048);
    core.ub_kib = pick(8, 512);
    core.double_buffer = pick(0, 1) == 1;
    core.flag_sync_cycles = pick(0, 100);
    MemoryConfig mem;
    mem.l2_mib = static_cast<double>(pick(0, 8)) / 2;
    OpDesc d;
    L0Tile tile;
    switch (pick(0, 2)) {
      case 0:
        d = matmul(pick(1, 700), pick(1, 700), pick(1, 900));
        d.batch = pick(1, 3);
        tile = {16 * pick(1, 16), 16 * pick(1, 16), 16 * pick(1, 32)};
        break;
      case 1:
        d.kind = pick(0, 1) ? OpKind::Conv2DBackpropFilter : OpKind::Conv2D;
        d.batch = pick(1, 4);
        d.cin = pick(1, 64);
        d.h = d.w = pick(4, 20);
        d.cout = pick(1, 64);
        d.kh = d.kw = pick(1, 3);
        d.stride = pick(1, 2);
        tile = {16 * pick(1, 16), 16 * pick(1, 16), 16 * pick(1, 32)};
        break;
      default:
        d.kind = OpKind::ReluGrad;
        d.elements = pick(1, 200000);
        tile = {16 * pick(1, 2000), 0, 0};
        break;
    }
    Tiling t;
    try {
      t = tile_op(d, core, &tile);
    } catch (const std::logic_error& e) {  // does not fit: the buffer is named
      EXPECT_NE(std::string(e.what()).find("needs"), std::string::npos) << e.what();
      ++refused;
      continue;
    }
    const OpCost c = simulate_tiling(d, t, core, mem);  // throws on a deadlock
    ASSERT_TRUE(c.timeline);
    const std::int64_t steps = t.cube ? t.c.tiles_per_block * t.c.k_steps_per_block : t.v.tiles_per_block;
    EXPECT_LE(c.timeline->steps, steps) << d.to_string();
    EXPECT_GT(c.timeline->steps, 0) << d.to_string();
    EXPECT_GT(c.block_cycles, c.overhead_cycles) << d.to_string();
    ++ran;
  }
  EXPECT_GT(ran, 100);
  EXPECT_GT(refused, 20);
}

}  // namespace
}  // namespace ascendsim::aicore
