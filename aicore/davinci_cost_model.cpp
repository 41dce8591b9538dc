// The DaVinci pipe model of an op (see tiling.h and pipe_schedule.h).
//
// The busiest block decides the op's time: blocks run in parallel, one per core. Within a block,
// tiles flow through the pipes as pipe_schedule.h describes. MTE2 and MTE3 reach GM through the
// HBM and L2 bandwidths, which the active blocks share in proportion to their traffic; the part
// of a Cube op's operand traffic that re-reads data a concurrent block (or, while the operand
// fits L2, any block) already fetched is served by L2. A block can never move its HBM bytes
// faster than its share of HBM allows, reads and writes together.
#include <algorithm>
#include <cmath>
#include <numeric>

#include "aicore/cost_model.h"
#include "aicore/event_model.h"

namespace ascendsim::aicore {

const char* bound_name(Bound b) {
  switch (b) {
    case Bound::Cube:
      return "cube";
    case Bound::Vector:
      return "vector";
    case Bound::Memory:
      return "memory";
    case Bound::Overhead:
      return "overhead";
  }
  return "?";
}

namespace {

std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }

class DaVinciCostModel final : public CostModel {
 public:
  DaVinciCostModel(const AicoreConfig& core, const MemoryConfig& mem) : m_core(core), m_mem(mem) {}

  OpCost estimate(const OpDesc& d) const override {
    OpCost c;
    c.tiling = tile_op(d, m_core);
    c.blocks = c.tiling.blocks;
    c.macs = static_cast<double>(d.macs());
    PipeSchedule schedule(static_cast<double>(m_core.flag_sync_cycles));
    if (is_attention(d.kind))
      attention(d, c, schedule);
    else if (c.tiling.cube)
      cube(d, c, schedule);
    else
      vector(d, c, schedule);
    const double hbm_per_cycle = m_mem.hbm_gbps() / m_core.freq_ghz;
    c.pipe_busy = schedule.busy();
    c.overhead_cycles = static_cast<double>(m_core.block_start_cycles);
    // However the blocks share it, the op's HBM bytes take at least this long.
    const double hbm_floor = c.gm_bytes / hbm_per_cycle;
    c.span_cycles = schedule.makespan();
    c.hbm_floor_cycles = hbm_floor;
    c.block_cycles = std::max(schedule.makespan(), hbm_floor) + c.overhead_cycles;
    c.time_s = c.block_cycles / (m_core.freq_ghz * 1e9);
    c.bound = classify(c, hbm_floor);
    return c;
  }

 private:
  Bound classify(const OpCost& c, double hbm_floor) const {
    const auto& b = c.pipe_busy;
    auto at = [&](Pipe p) { return b[static_cast<std::size_t>(p)]; };
    const double memory = std::max({at(Pipe::Mte2), at(Pipe::Mte1), at(Pipe::Mte3), at(Pipe::FixPipe), hbm_floor});
    const double busiest = std::max({memory, at(Pipe::Cube), at(Pipe::Vector)});
    if (c.overhead_cycles + at(Pipe::Scalar) >= busiest) return Bound::Overhead;
    if (busiest == at(Pipe::Cube)) return Bound::Cube;
    if (busiest == at(Pipe::Vector)) return Bound::Vector;
    return Bound::Memory;
  }

  void cube(const OpDesc& d, OpCost& c, PipeSchedule& schedule) const {
    const CubeTiling& t = c.tiling.c;
    const double b = static_cast<double>(precision_bytes(d.precision));
    const double ob = static_cast<double>(precision_bytes(d.out_precision));
    const double macs_per_cycle = static_cast<double>(d.precision == Precision::INT8 ? m_core.cube_int8_macs_per_cycle
                                                                                     : m_core.cube_fp16_macs_per_cycle);
    const auto tiles = static_cast<double>(t.batch * t.tiles_m * t.tiles_n);
    const auto steps = static_cast<double>(t.k_steps);

    // Edge tiles are smaller than m_t x n_t x k_t: the op's bytes come from the mean tile of all,
    // the busiest block's steps from the mean of its own tiles (deal_cube_tiles; the event model
    // runs each tile at its size).
    const double gm_m = static_cast<double>(t.M) / static_cast<double>(t.tiles_m);
    const double gm_n = static_cast<double>(t.N) / static_cast<double>(t.tiles_n);
    const double gm_k = static_cast<double>(t.K) / static_cast<double>(t.k_steps);
    const double a_item = gm_m * gm_k * b * t.a_gm_factor;
    const double b_item = gm_k * gm_n * b * t.b_gm_factor;
    const CubeDeal deal = deal_cube_tiles(d, c.tiling, m_mem.l2_mib * 1024 * 1024);
    const double me = deal.mean_m, ne = deal.mean_n, ke = deal.mean_k, mn = deal.mean_mn;
    const double total_read = tiles * steps * (a_item + b_item);
    const double unique = static_cast<double>(t.batch) * (static_cast<double>(t.M * t.K) * b * t.a_gm_factor +
                                                          static_cast<double>(t.K * t.N) * b * t.b_gm_factor);
    // Fraction of operand reads that miss L2: all re-reads hit while the operands fit; otherwise
    // what the sweep of patches the tiles are dealt in fetches (swept_bytes: the operand a band
    // holds once while a band of it fits L2, the other once while it fits whole), and at least the
    // first read of every byte. The blocks cover a rows x cols
    // patch of the output chosen to share the most; the first round of tiles finds L2 cold: all
    // it reads of the patch misses.
    // The tiles in flight lie in one product (one of a batch) as far as it has them.
    const std::int64_t in_flight = std::min<std::int64_t>(c.blocks / t.k_split, t.tiles_m * t.tiles_n);
    double fetched = static_cast<double>(in_flight) * (a_item + b_item);
    for (std::int64_t rows = 1; rows <= std::min(t.tiles_m, in_flight); ++rows) {
      const std::int64_t cols = ceil_div(in_flight, rows);
      if (cols <= t.tiles_n)
        fetched = std::min(fetched, static_cast<double>(rows) * a_item + static_cast<double>(cols) * b_item);
    }
    const double patch_miss = fetched / (static_cast<double>(in_flight) * (a_item + b_item));
    double miss = unique / total_read;
    const double l2_bytes = m_mem.l2_mib * 1024 * 1024;
    if (unique > l2_bytes) {
      // One product's operands as the sweep the tiles are dealt in fetches them (swept_bytes), on
      // their own sizes, not their full L0 tiles.
      const double a_once = static_cast<double>(t.M * t.K) * b * t.a_gm_factor,
                   b_once = static_cast<double>(t.K * t.N) * b * t.b_gm_factor;
      const double swept =
          swept_bytes(a_once, b_once, deal.along_rows ? deal.rows_sweep : deal.cols_sweep, deal.along_rows, l2_bytes);
      miss = std::max(miss, static_cast<double>(t.batch) * swept / total_read);
    }
    miss = std::clamp(miss, 0.0, 1.0);
    const double first_reads = static_cast<double>(in_flight) * steps * (a_item + b_item);
    const double first_miss = total_read > first_reads ? std::min(patch_miss, miss * total_read / first_reads) : miss;
    const double later_miss =
        total_read > first_reads
            ? std::clamp((miss * total_read - first_miss * first_reads) / (total_read - first_reads), 0.0, 1.0)
            : miss;
    const double out_b = t.k_split > 1 ? 4.0 : ob;
    const auto out_elements = static_cast<double>(t.batch * t.M * t.N);
    c.mte_bytes = total_read + out_elements * static_cast<double>(t.k_split) * out_b;
    c.gm_bytes = total_read * miss + out_elements * static_cast<double>(t.k_split) * out_b;
    if (d.epilogue_ops > 0 || d.epilogue_operands > 0) {  // UB fusion: the consumers' other operands
      c.mte_bytes += out_elements * static_cast<double>(d.epilogue_operands) * ob;
      c.gm_bytes += out_elements * static_cast<double>(d.epilogue_operands) * ob;
    }
    // A fused reduction's per-channel sums, added atomically into GM once per output tile.
    c.gm_bytes += static_cast<double>(d.epilogue_sums) * 4.0 * static_cast<double>(t.tiles_m);

    const double in_bytes = (me * t.a_gm_factor + ne * t.b_gm_factor) * ke * b;
    const double out_item = mn * out_b;
    const double out_elems = mn;
    // A k-step when `active` output tiles (each with k_split blocks) are in flight: the blocks
    // share HBM and L2 in proportion to their traffic, the busiest block's tile against the mean.
    auto tile_steps = [&](std::int64_t active, double round_miss) -> std::pair<PipeCycles, PipeCycles> {
      const double share = std::min(1.0, in_bytes / (static_cast<double>(active * t.k_split) * (a_item + b_item)));
      const double hbm = m_mem.hbm_gbps() / m_core.freq_ghz * share;
      const double l2 = m_mem.l2_bandwidth_gbps / m_core.freq_ghz * share;
      PipeCycles inner{};
      inner[static_cast<std::size_t>(Pipe::Scalar)] = static_cast<double>(m_core.scalar_tile_cycles);
      inner[static_cast<std::size_t>(Pipe::Mte2)] =
          std::max({in_bytes / static_cast<double>(m_core.mte2_bytes_per_cycle), in_bytes * round_miss / hbm,
                    in_bytes * (1 - round_miss) / l2});
      inner[static_cast<std::size_t>(Pipe::Mte1)] = (me * ke * t.a_mte1_factor + ke * ne * t.b_mte1_factor) * b /
                                                    static_cast<double>(m_core.mte1_bytes_per_cycle);
      inner[static_cast<std::size_t>(Pipe::Cube)] = mn * ke / macs_per_cycle;
      // The last k-step of an output tile also drains L0C, converts and stores the result.
      PipeCycles last = inner;
      last[static_cast<std::size_t>(Pipe::FixPipe)] =
          out_elems * 4.0 / static_cast<double>(m_core.fixpipe_bytes_per_cycle);
      last[static_cast<std::size_t>(Pipe::Vector)] =
          out_elems * ob / static_cast<double>(m_core.vector_bytes_per_cycle) +
          static_cast<double>(m_core.vector_issue_cycles *
                              ceil_div(static_cast<std::int64_t>(out_elems * ob), 255 * m_core.vector_bytes_per_cycle));
      last[static_cast<std::size_t>(Pipe::Mte3)] =
          std::max(out_item / static_cast<double>(m_core.mte3_bytes_per_cycle), out_item / hbm);
      if (d.epilogue_ops > 0 || d.epilogue_operands > 0) {
        // UB fusion: the consumers' Vector work on the tile in the UB, their other operands'
        // tiles fetched by MTE2; the result is stored once, after them.
        const double epi_in = out_elems * static_cast<double>(d.epilogue_operands) * ob;
        last[static_cast<std::size_t>(Pipe::Vector)] +=
            out_elems * static_cast<double>(d.epilogue_ops) * ob / static_cast<double>(m_core.vector_bytes_per_cycle) +
            static_cast<double>(
                m_core.vector_issue_cycles * d.epilogue_ops *
                ceil_div(static_cast<std::int64_t>(out_elems * ob), 255 * m_core.vector_bytes_per_cycle));
        last[static_cast<std::size_t>(Pipe::Mte2)] +=
            std::max(epi_in / static_cast<double>(m_core.mte2_bytes_per_cycle), epi_in / hbm);
      }
      return {inner, last};
    };
    // The busiest block's tiles: one per round, the first round's against a cold L2, then those
    // of the full rounds, then one in the last round if it has fewer tiles than blocks and the
    // busiest block is among them.
    const std::int64_t block_steps = std::min(t.k_steps_per_block, t.k_steps);
    const std::int64_t all = t.batch * t.tiles_m * t.tiles_n;
    const std::int64_t full = all / deal.per_round, rest = all % deal.per_round;
    const std::int64_t in_full = std::min(full, deal.busiest_tiles);
    auto run = [&](std::int64_t active, double round_miss, std::int64_t count) {
      if (count <= 0) return;
      const auto [inner, last] = tile_steps(active, round_miss);
      run_tiles(schedule, inner, last, block_steps, count);
    };
    if (in_full > 0) {
      run(deal.per_round, first_miss, 1);
      run(deal.per_round, later_miss, in_full - 1);
    }
    if (deal.busiest_tiles > in_full) run(rest, in_full > 0 ? later_miss : first_miss, deal.busiest_tiles - in_full);
  }

  /// Fused attention, one (head, tile) unit after another, each a run of inner steps over the
  /// other operand's tiles with a last step that also loads and stores the unit's own tiles. Per
  /// inner step of the forward pass: S = Q K^T and O += P V on the Cube (2 Br Bc D MACs), the
  /// scores' online softmax on the Vector unit in fp32 (scale, mask, row max, subtract, exp, row
  /// sum, cast: 7 passes over Br x Bc, and O's rescale), the K and V tiles loaded. Per step of the
  /// gradient: S again, dP = dO V^T, dV += P^T dO, dQ += dS K, dK += dS^T Q (5 Br Bc D MACs), P
  /// and dS on the Vector unit (6 passes), the Q, dO tiles and row statistics loaded and dQ's
  /// partial sums added into GM in fp32. The Vector passes run on the block's vector cores (two
  /// per Cube core on a split design). K and V re-read by later query tiles (Q, dO by later key
  /// tiles) hit L2 while the heads in flight keep them there.
  void attention(const OpDesc& d, OpCost& c, PipeSchedule& schedule) const {
    const CubeTiling& t = c.tiling.c;
    const bool forward = d.kind == OpKind::FlashAttention;
    const double b = 2, f32 = 4;  // fp16 operands, fp32 scores and accumulators
    const double br = static_cast<double>(t.m_t), bc = static_cast<double>(t.n_t), D = static_cast<double>(t.K);
    const double macs_per_cycle = static_cast<double>(m_core.cube_fp16_macs_per_cycle);
    const double vec_width =
        static_cast<double>(m_core.vector_bytes_per_cycle) *
        (m_core.vector_cores > 0 ? static_cast<double>(m_core.vector_cores) / static_cast<double>(m_core.cores) : 1.0);
    const auto units = static_cast<double>(t.batch * (forward ? t.tiles_m : t.tiles_n));
    const double share = std::min(1.0, static_cast<double>(t.tiles_per_block) / units);
    const double hbm = m_mem.hbm_gbps() / m_core.freq_ghz * share;
    const double l2 = m_mem.l2_bandwidth_gbps / m_core.freq_ghz * share;
    // Per inner step: what streams in (other operand's tiles), the Cube's and the Vector's work,
    // the scores moved out of L0C.
    const double streamed = forward ? 2 * bc * D * b : (2 * br * D * b + br * 8 * f32 * 2);
    const double passes = forward ? 7 : 6;
    const double gemms = forward ? 2 : 5;
    const double vector_bytes = br * bc * f32 * passes + (forward ? br * D * f32 * 2 : 0);
    // Of the streamed tiles, the first pass over a head's operand misses L2, the rest hit while
    // the heads in flight (one per block) fit.
    // Grouped KV heads: a group's query heads, dealt to the blocks together, stream the same key and
    // value tiles, so the group's first pass misses and the others hit.
    const double group = forward ? static_cast<double>(std::max<std::int64_t>(1, d.group)) : 1.0;
    const double per_head = (forward ? 2 * static_cast<double>(t.N) * D * b : 2 * static_cast<double>(t.M) * D * b);
    const double in_flight = per_head * static_cast<double>(c.blocks) / group;
    const double repeats = static_cast<double>(forward ? t.tiles_m : t.tiles_n) * group;
    double miss = 1 / repeats;
    if (in_flight > m_mem.l2_mib * 1024 * 1024) miss = 1;
    PipeCycles inner{};
    inner[static_cast<std::size_t>(Pipe::Scalar)] = static_cast<double>(m_core.scalar_tile_cycles);
    inner[static_cast<std::size_t>(Pipe::Mte2)] = std::max({streamed / static_cast<double>(m_core.mte2_bytes_per_cycle),
                                                            streamed * miss / hbm, streamed * (1 - miss) / l2});
    inner[static_cast<std::size_t>(Pipe::Mte1)] =
        (forward ? (2 * bc * D + br * bc) * b : (2 * br * D + 3 * br * bc) * b) /
        static_cast<double>(m_core.mte1_bytes_per_cycle);
    inner[static_cast<std::size_t>(Pipe::Cube)] = gemms * br * bc * D / macs_per_cycle;
    inner[static_cast<std::size_t>(Pipe::FixPipe)] =
        (forward ? br * bc + br * D : 2 * br * bc + br * D) * f32 / static_cast<double>(m_core.fixpipe_bytes_per_cycle);
    inner[static_cast<std::size_t>(Pipe::Vector)] =
        vector_bytes / vec_width + static_cast<double>(m_core.vector_issue_cycles) * passes *
                                       static_cast<double>(ceil_div(static_cast<std::int64_t>(br * bc * f32),
                                                                    255 * m_core.vector_bytes_per_cycle));
    // The gradient adds dQ's partial sums into GM (fp32) every step.
    const double atomic = forward ? 0 : br * D * f32;
    inner[static_cast<std::size_t>(Pipe::Mte3)] =
        std::max(atomic / static_cast<double>(m_core.mte3_bytes_per_cycle), atomic / hbm);
    // The unit's own tiles: forward, Q in and O (and two fp32 row statistics) out; gradient, K and
    // V in and dK, dV out.
    const double own_in = forward ? br * D * b : 2 * bc * D * b;
    const double own_out = forward ? br * D * b + br * 8 * f32 * 2 : 2 * bc * D * b;
    // The gradient's own key and value tiles: the group's heads read the same ones (one from HBM).
    const double own_in_gm = forward ? own_in : own_in / static_cast<double>(std::max<std::int64_t>(1, d.group));
    PipeCycles last = inner;
    last[static_cast<std::size_t>(Pipe::Mte2)] +=
        std::max(own_in / static_cast<double>(m_core.mte2_bytes_per_cycle), own_in_gm / hbm);
    last[static_cast<std::size_t>(Pipe::Mte3)] +=
        std::max(own_out / static_cast<double>(m_core.mte3_bytes_per_cycle), own_out / hbm);
    // The busiest block's units (deal_attention_units: balanced under a causal mask), runs of
    // units of equal length at a time; every unit's streamed tiles for the bytes.
    const auto dealt = deal_attention_units(d, c.tiling);
    const std::vector<std::int64_t> loads = attention_loads(d, t, dealt);
    const auto at_most = static_cast<std::size_t>(std::max_element(loads.begin(), loads.end()) - loads.begin());
    const auto all_steps = static_cast<double>(std::accumulate(loads.begin(), loads.end(), std::int64_t{0}));
    c.mte_bytes = all_steps * (streamed + atomic) + units * (own_in + own_out);
    c.gm_bytes = all_steps * (streamed * miss + atomic) + units * (own_in_gm + own_out);
    const auto& mine = dealt[at_most];
    for (std::size_t i = 0; i < mine.size();) {
      const auto r = attention_range(d, t, mine[i]);
      std::size_t j = i + 1;
      while (j < mine.size() && attention_range(d, t, mine[j]) == r) ++j;
      run_tiles(schedule, inner, last, r.second - r.first, static_cast<std::int64_t>(j - i));
      i = j;
    }
  }

  /// Tiles dealt to the blocks in rounds, each round's blocks sharing the HBM: block 0 has a tile
  /// in every full round and one in the last, shorter round.
  void vector(const OpDesc& d, OpCost& c, PipeSchedule& schedule) const {
    const VectorTiling& v = c.tiling.v;
    const double ib = static_cast<double>(precision_bytes(d.precision));
    const double ob = static_cast<double>(precision_bytes(d.out_precision));
    auto tile = [&](std::int64_t active, std::int64_t elements) {
      const auto te = static_cast<double>(elements);
      const double read = te * v.read_per_element * ib;
      const double write = te * v.write_per_element * ob;
      const std::int64_t repeats = ceil_div(static_cast<std::int64_t>(te * ib), 255 * m_core.vector_bytes_per_cycle);
      const double hbm = m_mem.hbm_gbps() / m_core.freq_ghz / static_cast<double>(active);
      PipeCycles p{};
      p[static_cast<std::size_t>(Pipe::Scalar)] = static_cast<double>(m_core.scalar_tile_cycles);
      p[static_cast<std::size_t>(Pipe::Mte2)] =
          std::max(read / static_cast<double>(m_core.mte2_bytes_per_cycle), read / hbm);
      p[static_cast<std::size_t>(Pipe::Vector)] =
          te * v.ops_per_element * ib / static_cast<double>(m_core.vector_bytes_per_cycle) +
          static_cast<double>(m_core.vector_issue_cycles * v.instructions_per_pass * repeats);
      p[static_cast<std::size_t>(Pipe::Mte3)] =
          std::max(write / static_cast<double>(m_core.mte3_bytes_per_cycle), write / hbm);
      return p;
    };
    const auto e = static_cast<double>(v.elements);
    c.gm_bytes = e * (v.read_per_element * ib + v.write_per_element * ob);
    c.mte_bytes = c.gm_bytes;
    // Block 0's tile in the last round is the first of that round: the op's last, shorter tile
    // only when it is alone.
    const std::int64_t full = v.tiles / c.blocks, rest = v.tiles % c.blocks;
    schedule.run(tile(c.blocks, v.tile_elements), full);
    if (rest > 0)
      schedule.run(tile(rest, std::min(v.tile_elements, v.elements - full * c.blocks * v.tile_elements)), 1);
  }

  /// `tiles` output tiles of `steps` k-steps each (the last one drains the result). Once whole
  /// tiles repeat with a constant shift, the rest is extrapolated.
  static void run_tiles(PipeSchedule& s, const PipeCycles& inner, const PipeCycles& last, std::int64_t steps,
                        std::int64_t tiles) {
    PipeCycles works{};
    for (std::size_t p = 0; p < kPipeCount; ++p) works[p] = inner[p] + last[p];
    PipeSchedule::State prev_shift{};
    int stable = 0;
    for (std::int64_t i = 0; i < tiles; ++i) {
      const PipeSchedule::State before = s.state();
      const PipeCycles busy_before = s.busy();
      s.run(inner, steps - 1);
      s.run(last, 1);
      PipeSchedule::State shift{};
      bool same = i > 0;
      for (std::size_t r = 0; r < shift.size(); ++r)
        for (std::size_t p = 0; p < kPipeCount; ++p) {
          shift[r][p] = s.state()[r][p] - before[r][p];
          same = same && std::fabs(shift[r][p] - prev_shift[r][p]) < 1e-6;
        }
      stable = same ? stable + 1 : 0;
      prev_shift = shift;
      double period = 0;
      if (stable >= 2 && i + 1 < tiles && PipeSchedule::uniform_shift(before, s.state(), works, period)) {
        PipeCycles per_tile{};
        for (std::size_t p = 0; p < kPipeCount; ++p) per_tile[p] = s.busy()[p] - busy_before[p];
        s.advance(period, per_tile, steps, tiles - i - 1);
        return;
      }
    }
  }

  AicoreConfig m_core;
  MemoryConfig m_mem;
};

}  // namespace

double pipe_ratio(const OpCost& c, Pipe p) {
  return c.block_cycles > 0 ? c.pipe_busy[static_cast<std::size_t>(p)] / c.block_cycles : 0.0;
}

const std::vector<std::pair<const char*, Pipe>>& op_summary_ratios() {
  static const std::vector<std::pair<const char*, Pipe>> columns = {
      {"aic_mac_ratio", Pipe::Cube},  {"aic_scalar_ratio", Pipe::Scalar},   {"aic_mte1_ratio", Pipe::Mte1},
      {"aic_mte2_ratio", Pipe::Mte2}, {"aic_fixpipe_ratio", Pipe::FixPipe}, {"aiv_vec_ratio", Pipe::Vector},
      {"aiv_mte3_ratio", Pipe::Mte3}};
  return columns;
}

std::unique_ptr<CostModel> make_pipe_cost_model(const AicoreConfig& core, const MemoryConfig& mem) {
  if (core.model == "event") return make_event_cost_model(core, mem);
  return std::make_unique<DaVinciCostModel>(core, mem);
}

}  // namespace ascendsim::aicore
