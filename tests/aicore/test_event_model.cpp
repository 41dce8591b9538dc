// The event model of the AI core (aicore/event_model.h): its pipes against formulas, its flags
// under fuzzed tilings, and its agreement with the analytic model over whole networks.
#include <algorithm>
#include <cmath>
#include <map>
#include <random>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include <gtest/gtest.h>
#include <systemc>

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
  // MTE2 sets the pace: it never waits for a free half, only for its first issue.
  ASSERT_TRUE(c.timeline);
  EXPECT_EQ(c.timeline->blocked[at(Pipe::Mte2)], 0);
  EXPECT_NEAR(c.timeline->starved[at(Pipe::Mte2)], static_cast<double>(core.scalar_tile_cycles) + sync, 1e-3);
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
  ASSERT_EQ(t.M % t.m_t, 0);  // whole output tiles; the last k-step may be shallower
  ASSERT_EQ(t.N % t.n_t, 0);
  const double steps = static_cast<double>(t.tiles_per_block * t.k_steps);
  // Each output tile's k-steps together cover K: m_t x n_t x K MACs per tile.
  EXPECT_NEAR(c.pipe_busy[at(Pipe::Cube)], static_cast<double>(t.tiles_per_block * t.m_t * t.n_t * t.K) / 4096.0, 1e-6);
  EXPECT_NEAR(c.pipe_busy[at(Pipe::Scalar)], steps * static_cast<double>(core.scalar_tile_cycles), 1e-6);
  for (std::size_t p = 0; p < kPipeCount; ++p) EXPECT_LE(c.pipe_busy[p] + c.overhead_cycles, c.block_cycles + 1e-6);
  ASSERT_TRUE(c.timeline);
  EXPECT_EQ(c.timeline->steps, t.tiles_per_block * t.k_steps);
  // Until its last step ends a pipe is always working or waiting (for its input or for a free
  // half of its output): busy + waits = that end, from the block's start (to the picosecond the
  // simulation rounds each step's work to: 0.001 cycle per step at most).
  for (std::size_t p = 0; p < kPipeCount; ++p) {
    if (c.timeline->pipes[p].empty()) continue;
    const double end = c.timeline->pipes[p].back().end - c.overhead_cycles;
    EXPECT_NEAR(c.pipe_busy[p] + c.timeline->starved[p] + c.timeline->blocked[p], end,
                1e-3 * static_cast<double>(c.timeline->steps))
        << pipe_name(Pipe(p));
  }
  // A Cube-bound op: the Cube hardly waits; MTE2, faster, waits for the Cube to free its halves.
  EXPECT_LT(c.timeline->starved[at(Pipe::Cube)] + c.timeline->blocked[at(Pipe::Cube)],
            0.05 * c.pipe_busy[at(Pipe::Cube)]);
  EXPECT_GT(c.timeline->blocked[at(Pipe::Mte2)], 0.1 * c.pipe_busy[at(Pipe::Mte2)]);
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

TEST(EventModel, AnOperandThatFitsL2IsFetchedOnceInBothModels) {
  // A 50176 x 1024 x 512 product (ResNet-50's strided 1x1 convolution to 1024 channels at batch
  // 256, as a MatMul): A, 51 MB, exceeds the 32 MB L2, B, 1 MB, fits. The patches sweep along
  // bands of rows, so each A tile is fetched once and B stays in L2: the HBM carries the operands
  // and the result once. The analytic model's estimate follows the same sweep, and so its time.
  const AicoreConfig core;
  const MemoryConfig mem;
  const OpDesc d = matmul(50176, 1024, 512);
  const double once = 50176.0 * 512 * 2 + 512.0 * 1024 * 2 + 50176.0 * 1024 * 2;
  const OpCost event = simulate_op(d, core, mem);
  const OpCost analytic = make_pipe_cost_model(core, mem)->estimate(d);
  EXPECT_LT(event.gm_bytes, 1.05 * once);
  EXPECT_GE(analytic.gm_bytes, 0.999 * once);
  EXPECT_LT(analytic.gm_bytes, 1.05 * once);
  EXPECT_NEAR(analytic.time_s / event.time_s, 1, 0.05);
}

TEST(EventModel, OperandsBeyondL2AreFetchedAsTheSweepFetchesThemInBothModels) {
  // A 4096 x 4096 x 32768 product: both operands (256 MiB each) exceed L2, and so do the bands
  // the sweep holds: they are fetched again round by round. The analytic estimate counts the
  // bytes the event model's LRU L2 misses; with the HBM the limit, the times agree too.
  const AicoreConfig core;
  MemoryConfig mem;
  mem.hbm_efficiency = 0.3;  // memory-bound
  const OpDesc d = matmul(4096, 4096, 32768);
  const OpCost event = simulate_op(d, core, mem);
  const OpCost analytic = make_pipe_cost_model(core, mem)->estimate(d);
  const double once = 2.0 * 4096 * 32768 * 2 + 4096.0 * 4096 * 2;
  EXPECT_GT(event.gm_bytes, 2 * once);
  EXPECT_NEAR(analytic.gm_bytes / event.gm_bytes, 1, 0.02);
  EXPECT_NEAR(analytic.time_s / event.time_s, 1, 0.05);
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

/// The 910B's AI cores: 24 with a Cube, two vector cores each, the fused attention kernel.
AicoreConfig split_cores() {
  AicoreConfig c;
  c.cores = 24;
  c.vector_cores = 48;
  c.flash_attention = true;
  return c;
}

OpDesc attention(bool forward, std::int64_t heads, std::int64_t m, std::int64_t n, bool causal) {
  OpDesc d;
  d.kind = forward ? OpKind::FlashAttention : OpKind::FlashAttentionGrad;
  d.batch = heads;
  d.m = m;
  d.n = n;
  d.k = 128;
  d.causal = causal;
  return d;
}

TEST(EventModel, AttentionRunsEveryStepOfItsBusiestBlock) {
  // The simulated block runs every streamed tile of each unit of the busiest block, however the
  // causal mask makes the units unequal; the Cube's busy cycles are 2 (forward) or 5 (gradient)
  // Br x Bc x D products per step; every unit is dealt once.
  const AicoreConfig core = split_cores();
  for (bool forward : {true, false})
    for (bool causal : {false, true})
      for (const auto& [heads, m, n] : std::vector<std::tuple<std::int64_t, std::int64_t, std::int64_t>>{
               {7, 3000, 1024}, {3, 1920, 1920}, {1, 3200, 3200}, {32, 2048, 2048}}) {
        if (causal && m != n) continue;
        const OpDesc d = attention(forward, heads, m, n, causal);
        const Tiling t = tile_op(d, core);
        std::int64_t busiest = 0, all = 0;
        for (const auto& units : deal_attention_units(d, t)) {
          std::int64_t load = 0;
          for (std::int64_t u : units) {
            const auto r = attention_range(d, t.c, u);
            load += r.second - r.first;
          }
          busiest = std::max(busiest, load);
          all += static_cast<std::int64_t>(units.size());
        }
        EXPECT_EQ(all, heads * (forward ? t.c.tiles_m : t.c.tiles_n)) << d.to_string();
        const OpCost c = simulate_op(d, core, MemoryConfig{});
        ASSERT_TRUE(c.timeline);
        EXPECT_EQ(c.timeline->steps, busiest) << d.to_string();
        const double per_step = (forward ? 2.0 : 5.0) * static_cast<double>(t.c.m_t * t.c.n_t * t.c.K) / 4096.0;
        EXPECT_NEAR(c.pipe_busy[at(Pipe::Cube)], static_cast<double>(busiest) * per_step, 1e-6) << d.to_string();
        // Under the mask the blocks balance: the busiest has at most one unit's worth above the mean.
        if (causal) {
          const double mean =
              static_cast<double>(heads * t.c.tiles_m * (t.c.tiles_m + 1) / 2) / static_cast<double>(t.blocks);
          EXPECT_LE(static_cast<double>(busiest), mean + static_cast<double>(t.c.tiles_m + 1)) << d.to_string();
        }
      }
}

TEST(EventModel, GroupedKvHeadsReadEachKeyAndValueTileOncePerGroup) {
  // A decode's attention (one query per head) streams every key and value tile from HBM: with
  // 32 query heads in groups of g, both models read 1/g of the tiles from HBM; the Cube's work is
  // the query heads' and does not change; a group that does not divide the heads is refused.
  const AicoreConfig core = split_cores();
  AicoreConfig event = core;
  event.model = "event";
  for (bool forward : {true, false}) {
    OpDesc mha = attention(forward, 32, forward ? 1 : 2048, forward ? 4096 : 2048, false);
    const OpCost a1 = make_pipe_cost_model(core, {})->estimate(mha), e1 = simulate_op(mha, event, MemoryConfig{});
    for (std::int64_t g : {4, 8}) {
      OpDesc gqa = mha;
      gqa.group = g;
      const OpCost a = make_pipe_cost_model(core, {})->estimate(gqa), e = simulate_op(gqa, event, MemoryConfig{});
      EXPECT_EQ(gqa.macs(), mha.macs());
      EXPECT_NEAR(a.pipe_busy[at(Pipe::Cube)], a1.pipe_busy[at(Pipe::Cube)], 1e-9);
      if (forward) {  // the streamed key/value tiles: one pass per group misses
        EXPECT_LT(a.gm_bytes, a1.gm_bytes / static_cast<double>(g) * 1.5) << gqa.to_string();
        EXPECT_LT(e.gm_bytes, e1.gm_bytes / static_cast<double>(g) * 1.5) << gqa.to_string();
      } else {  // the gradient's own key and value tiles: shared by the group
        EXPECT_LT(a.gm_bytes, a1.gm_bytes) << gqa.to_string();
        EXPECT_LT(e.gm_bytes, e1.gm_bytes) << gqa.to_string();
      }
      EXPECT_LE(a.time_s, a1.time_s);
      EXPECT_LE(e.time_s, e1.time_s * (1 + 1e-9));
      EXPECT_NE(gqa.to_string().find("group=" + std::to_string(g)), std::string::npos);
      EXPECT_FALSE(gqa == mha);
    }
  }
  OpDesc bad = attention(true, 32, 1, 4096, false);
  bad.group = 5;
  EXPECT_THROW(bad.validate(), std::invalid_argument);
  bad.group = 0;
  EXPECT_THROW(bad.validate(), std::invalid_argument);
}

TEST(EventModel, AnOpTooLargeIsRefusedBeforeItIsBuiltAndTheCallersContextStays) {
  sc_core::sc_simcontext* before = sc_core::sc_get_curr_simcontext();
  OpDesc d = matmul(4096, 4096, 4096);
  d.batch = 65536;
  try {
    simulate_op(d, AicoreConfig{}, MemoryConfig{});
    ADD_FAILURE() << "not refused";
  } catch (const EventModelError& e) {
    EXPECT_NE(std::string(e.what()).find("aicore.model: analytic"), std::string::npos) << e.what();
  }
  EXPECT_EQ(sc_core::sc_get_curr_simcontext(), before);
  // A tile far beyond any buffer is refused as such, not overflowed.
  const L0Tile huge{std::int64_t{1} << 62, 16, 16};
  EXPECT_THROW(tile_op(matmul(64, 64, 64), AicoreConfig{}, &huge), std::invalid_argument);
  // After a refusal the model still runs, in a context of its own.
  EXPECT_GT(simulate_op(matmul(256, 256, 256), AicoreConfig{}, MemoryConfig{}).time_s, 0);
  EXPECT_EQ(sc_core::sc_get_curr_simcontext(), before);
}

TEST(EventModel, TheBusiestBlockOfABatchIsCountedOverItsPeriod) {
  // deal_cube_tiles counts a batch's products over the period in which block positions repeat:
  // the same as dealing every tile.
  // 15 tiles of 16 x 16 per product on 32 cores: positions repeat every 32 products; batches
  // below, at and beyond the period, with and without a remainder.
  for (const std::int64_t batch : {1, 3, 7, 31, 32, 33, 40, 64, 1000}) {
    OpDesc d = matmul(80, 48, 64);
    d.batch = batch;
    const AicoreConfig core;
    const L0Tile tile{16, 16, 16};
    const Tiling t = tile_op(d, core, &tile);
    ASSERT_EQ(t.c.tiles_m * t.c.tiles_n, 15);
    const CubeDeal deal = deal_cube_tiles(d, t, 32.0 * 1024 * 1024);
    const auto per_product = static_cast<std::int64_t>(deal.order.size());
    std::vector<double> work(static_cast<std::size_t>(deal.per_round), 0.0);
    std::vector<std::int64_t> count(work.size(), 0);
    for (std::int64_t i = 0; i < batch * per_product; ++i) {
      const std::int64_t dealt = deal.order[static_cast<std::size_t>(i % per_product)];
      const auto at = static_cast<std::size_t>(i % deal.per_round);
      work[at] += static_cast<double>(tile_extent(dealt / t.c.tiles_n, t.c.m_t, t.c.M) *
                                      tile_extent(dealt % t.c.tiles_n, t.c.n_t, t.c.N));
      ++count[at];
    }
    const auto busiest = static_cast<std::size_t>(std::max_element(work.begin(), work.end()) - work.begin());
    EXPECT_EQ(deal.busiest, static_cast<std::int64_t>(busiest)) << batch;
    EXPECT_EQ(deal.busiest_tiles, count[busiest]) << batch;
    EXPECT_NEAR(deal.mean_mn * static_cast<double>(count[busiest]), work[busiest], 1e-6) << batch;
  }
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
    switch (pick(0, 3)) {
      case 0:
        d = matmul(pick(1, 700), pick(1, 700), pick(1, 900));
        d.batch = pick(1, 3);
        if (pick(0, 3) == 0) d.precision = d.out_precision = Precision::INT8;
        if (pick(0, 3) == 0) {  // a UB-fused epilogue
          d.epilogue_ops = pick(0, 3);
          d.epilogue_operands = pick(0, 1);
          d.epilogue_sums = pick(0, 1) * d.n;
        }
        tile = {16 * pick(1, 16), 16 * pick(1, 16), (d.precision == Precision::INT8 ? 32 : 16) * pick(1, 16)};
        break;
      case 3: {  // fused attention: its own tiles; the fuzz is in the shape, the mask and the cores
        core.flash_attention = true;
        core.vector_cores = pick(0, 1) * 2 * core.cores;
        const bool causal = pick(0, 1) == 1;
        const std::int64_t s = pick(1, 1200);
        d = attention(pick(0, 1) == 1, pick(1, 9), s, causal ? s : pick(1, 1200), causal);
        d.k = 16 * pick(1, 16);
        Tiling t;
        try {
          t = tile_op(d, core);
        } catch (const std::logic_error&) {
          ++refused;
          continue;
        }
        const OpCost c = simulate_tiling(d, t, core, mem);
        EXPECT_GT(c.timeline->steps, 0) << d.to_string();
        ++ran;
        continue;
      }
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
