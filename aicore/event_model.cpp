#define SC_INCLUDE_DYNAMIC_PROCESSES
#include "aicore/event_model.h"

#include <algorithm>
#include <cmath>
#include <deque>
#include <list>
#include <stdexcept>
#include <string>
#include <unordered_map>

#include <systemc>

#include "sim/core/context.h"

namespace ascendsim::aicore {

namespace {

using sc_core::sc_time;

std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }
constexpr std::size_t at(Pipe p) { return static_cast<std::size_t>(p); }

/// One step of the block: what each pipe does in it (cycles; 0 = nothing). A Cube op's step is a
/// k-step: the Cube accumulates into L0C from an output tile's first k-step to its last, whose
/// result FixPipe, the Vector unit and MTE3 then drain.
struct Step {
  PipeCycles d{};
  bool first = true, last = true;
};

struct Program {
  std::vector<Step> steps;
  bool accumulate = false;  ///< the Cube holds its L0C half from a step with `first` to one with `last`
  std::array<int, kPipeCount> halves{};
  double gm_bytes = 0, mte_bytes = 0;
  double hbm_floor = 0;  ///< cycles the whole op's HBM bytes take at the chip's bandwidth
};

// ---------------------------------------------------------------------------------------------
// L2: which operand tiles the blocks' reads find on chip.

/// The chip's L2 as the operand tiles see it: an LRU of tiles by bytes, or, while everything the
/// op reads fits, a record of what was fetched once.
class L2Model {
 public:
  L2Model(double capacity_bytes, double unique_bytes, std::size_t keys)
      : m_capacity(capacity_bytes), m_fits(unique_bytes <= capacity_bytes) {
    if (m_fits) m_seen.assign(keys, 0);
  }
  /// Reads tile `key` of `bytes`; true if it hit.
  bool read(std::size_t key, double bytes) {
    if (m_fits) {
      const bool hit = m_seen[key] != 0;
      m_seen[key] = 1;
      return hit;
    }
    auto it = m_where.find(key);
    if (it != m_where.end()) {
      m_lru.splice(m_lru.begin(), m_lru, it->second);
      return true;
    }
    m_lru.push_front({key, bytes});
    m_where[key] = m_lru.begin();
    m_held += bytes;
    while (m_held > m_capacity && m_lru.size() > 1) {
      m_held -= m_lru.back().second;
      m_where.erase(m_lru.back().first);
      m_lru.pop_back();
    }
    return false;
  }

 private:
  double m_capacity;
  bool m_fits;
  std::vector<char> m_seen;
  std::list<std::pair<std::size_t, double>> m_lru;
  std::unordered_map<std::size_t, std::list<std::pair<std::size_t, double>>::iterator> m_where;
  double m_held = 0;
};

struct Rates {
  double mte2, mte1, mte3, fixpipe, vec;  ///< bytes per cycle of one core
  double hbm, l2;                         ///< bytes per cycle of the whole chip
  double issue;                           ///< cycles per Vector instruction
};

Rates rates(const AicoreConfig& core, const MemoryConfig& mem) {
  return {static_cast<double>(core.mte2_bytes_per_cycle),
          static_cast<double>(core.mte1_bytes_per_cycle),
          static_cast<double>(core.mte3_bytes_per_cycle),
          static_cast<double>(core.fixpipe_bytes_per_cycle),
          static_cast<double>(core.vector_bytes_per_cycle),
          mem.hbm_gbps() / core.freq_ghz,
          mem.l2_bandwidth_gbps / core.freq_ghz,
          static_cast<double>(core.vector_issue_cycles)};
}

/// Vector cycles of `passes` instructions, each over `bytes` (an instruction repeats at most 255
/// vector widths).
double vector_cycles(double bytes, double width, double issue, std::int64_t per_width, double passes) {
  return passes * (bytes / width + issue * static_cast<double>(ceil_div(static_cast<std::int64_t>(bytes), per_width)));
}

/// Halves each buffer gets: two where both fit (the tiler sized them for two) and double
/// buffering is on, else one.
std::array<int, kPipeCount> buffer_halves(const AicoreConfig& core) {
  std::array<int, kPipeCount> h{};
  h.fill(core.double_buffer ? 2 : 1);
  return h;
}

// ---------------------------------------------------------------------------------------------
// Programmes: the busiest block's steps.

/// A Cube op: output tiles dealt to the blocks a round at a time as deal_cube_tiles() orders them
/// (with K split, B / k_split tiles at a time, each block one part of K), every round's reads
/// through L2.
Program cube_program(const OpDesc& d, const Tiling& tiling, const CubeDeal& deal, const AicoreConfig& core,
                     const MemoryConfig& mem) {
  const CubeTiling& t = tiling.c;
  const Rates r = rates(core, mem);
  const double b = static_cast<double>(precision_bytes(d.precision));
  const double ob = static_cast<double>(precision_bytes(d.out_precision));
  const double macs_per_cycle = static_cast<double>(d.precision == Precision::INT8 ? core.cube_int8_macs_per_cycle
                                                                                   : core.cube_fp16_macs_per_cycle);
  const std::int64_t per_width = 255 * core.vector_bytes_per_cycle;
  const std::int64_t tiles = t.batch * t.tiles_m * t.tiles_n;
  const std::int64_t blocks = tiling.blocks;
  const std::int64_t parts = t.k_split;
  const std::int64_t per_round = blocks / parts;  // output tiles in flight together
  const std::int64_t kpb = t.k_steps_per_block;
  const double out_b = parts > 1 ? 4.0 : ob;

  auto extent = [](std::int64_t index, std::int64_t tile, std::int64_t total) {
    return static_cast<double>(tile_extent(index, tile, total));
  };
  const double unique = static_cast<double>(t.batch) * (static_cast<double>(t.M * t.K) * b * t.a_gm_factor +
                                                        static_cast<double>(t.K * t.N) * b * t.b_gm_factor);
  const auto a_keys = static_cast<std::size_t>(t.batch * t.tiles_m * t.k_steps);
  L2Model l2(mem.l2_mib * 1024 * 1024, unique, a_keys + static_cast<std::size_t>(t.batch * t.k_steps * t.tiles_n));

  const auto per_product = static_cast<std::int64_t>(deal.order.size());
  auto tile_at = [&](std::int64_t i) {  // the i-th output tile dealt, (product x tiles_m + row) x tiles_n + col
    return i / per_product * per_product + deal.order[static_cast<std::size_t>(i % per_product)];
  };
  const std::int64_t busiest = deal.busiest;
  const std::int64_t rounds = ceil_div(tiles, per_round);
  Program p;
  p.accumulate = true;
  p.halves = buffer_halves(core);
  for (std::int64_t round = 0; round < rounds; ++round) {
    const std::int64_t first_tile = round * per_round;
    const std::int64_t active = std::min(per_round, tiles - first_tile);  // output tiles in this round
    for (std::int64_t s = 0; s < kpb; ++s) {
      double all = 0, missed = 0, own_in = 0, own_a = 0, own_b = 0;
      double me0 = 0, ne0 = 0, ke0 = 0;
      bool own = false;
      for (std::int64_t o = 0; o < active; ++o) {
        const std::int64_t tile = tile_at(first_tile + o);
        const std::int64_t bi = tile / (t.tiles_m * t.tiles_n);
        const std::int64_t i = tile / t.tiles_n % t.tiles_m;
        const std::int64_t j = tile % t.tiles_n;
        const double me = extent(i, t.m_t, t.M), ne = extent(j, t.n_t, t.N);
        for (std::int64_t part = 0; part < parts; ++part) {
          const std::int64_t kg = part * kpb + s;
          if (kg >= t.k_steps) continue;
          const double ke = extent(kg, t.k_t, t.K);
          const double a = me * ke * b * t.a_gm_factor, bb = ke * ne * b * t.b_gm_factor;
          const bool a_hit = l2.read(static_cast<std::size_t>((bi * t.tiles_m + i) * t.k_steps + kg), a);
          const bool b_hit = l2.read(a_keys + static_cast<std::size_t>((bi * t.k_steps + kg) * t.tiles_n + j), bb);
          all += a + bb;
          missed += (a_hit ? 0 : a) + (b_hit ? 0 : bb);
          if (o == busiest && part == 0) {
            own = true;
            own_a = me * ke;
            own_b = ke * ne;
            own_in = a + bb;
            me0 = me;
            ne0 = ne;
            ke0 = ke;
          }
        }
      }
      p.mte_bytes += all;
      p.gm_bytes += missed;
      if (!own) continue;
      Step st;
      st.first = s == 0;
      st.last = s + 1 == std::min(kpb, t.k_steps);
      st.d[at(Pipe::Scalar)] = static_cast<double>(core.scalar_tile_cycles);
      st.d[at(Pipe::Mte2)] = std::max({own_in / r.mte2, missed / r.hbm, (all - missed) / r.l2});
      st.d[at(Pipe::Mte1)] = (own_a * t.a_mte1_factor + own_b * t.b_mte1_factor) * b / r.mte1;
      st.d[at(Pipe::Cube)] = me0 * ne0 * ke0 / macs_per_cycle;
      if (st.last) {
        const double out_elems = me0 * ne0;
        const double out_item = out_elems * out_b;
        // Every tile of the round stores at about the same time.
        const double round_out = out_item * static_cast<double>(active * parts);
        st.d[at(Pipe::FixPipe)] = out_elems * 4.0 / r.fixpipe;
        st.d[at(Pipe::Vector)] = vector_cycles(out_elems * ob, r.vec, r.issue, per_width, 1);
        st.d[at(Pipe::Mte3)] = std::max(out_item / r.mte3, round_out / r.hbm);
        if (d.epilogue_ops > 0 || d.epilogue_operands > 0) {  // UB fusion (as the analytic model)
          const double epi_in = out_elems * static_cast<double>(d.epilogue_operands) * ob;
          st.d[at(Pipe::Vector)] +=
              vector_cycles(out_elems * ob, r.vec, r.issue, per_width, static_cast<double>(d.epilogue_ops));
          st.d[at(Pipe::Mte2)] += std::max(epi_in / r.mte2, epi_in * static_cast<double>(active * parts) / r.hbm);
        }
      }
      p.steps.push_back(st);
    }
    // Results (and fused operands) of the round's tiles.
    for (std::int64_t o = 0; o < active; ++o) {
      const std::int64_t tile = tile_at(first_tile + o);
      const double out_elems = extent(tile / t.tiles_n % t.tiles_m, t.m_t, t.M) * extent(tile % t.tiles_n, t.n_t, t.N);
      const double bytes =
          out_elems * (out_b * static_cast<double>(parts) + static_cast<double>(d.epilogue_operands) * ob);
      p.mte_bytes += bytes;
      p.gm_bytes += bytes;
    }
  }
  p.gm_bytes += static_cast<double>(d.epilogue_sums) * 4.0 * static_cast<double>(t.tiles_m);
  p.hbm_floor = p.gm_bytes / r.hbm;
  return p;
}

/// Fused attention: (head, tile) units dealt to the blocks in turn, each streaming the other
/// operand's tiles (a causal mask: only those at or below the diagonal), every round's streamed
/// tiles through L2. The per-step work is the analytic model's (davinci_cost_model.cpp).
Program attention_program(const OpDesc& d, const Tiling& tiling, const std::vector<std::vector<std::int64_t>>& dealt,
                          const std::vector<std::int64_t>& load, const AicoreConfig& core, const MemoryConfig& mem) {
  const CubeTiling& t = tiling.c;
  const Rates r = rates(core, mem);
  const bool forward = d.kind == OpKind::FlashAttention;
  const double b = 2, f32 = 4;
  const double br = static_cast<double>(t.m_t), bc = static_cast<double>(t.n_t), D = static_cast<double>(t.K);
  const double macs_per_cycle = static_cast<double>(core.cube_fp16_macs_per_cycle);
  const double vec_width =
      r.vec * (core.vector_cores > 0 ? static_cast<double>(core.vector_cores) / static_cast<double>(core.cores) : 1.0);
  const std::int64_t own_tiles = forward ? t.tiles_m : t.tiles_n;  // units per head
  const std::int64_t across = forward ? t.tiles_n : t.tiles_m;     // streamed tiles per head
  const double streamed = forward ? 2 * bc * D * b : (2 * br * D * b + br * 8 * f32 * 2);
  const double passes = forward ? 7 : 6;
  const double gemms = forward ? 2 : 5;
  const double vector_bytes = br * bc * f32 * passes + (forward ? br * D * f32 * 2 : 0);
  const double atomic = forward ? 0 : br * D * f32;
  const double own_in = forward ? br * D * b : 2 * bc * D * b;
  const double own_out = forward ? br * D * b + br * 8 * f32 * 2 : 2 * bc * D * b;
  auto range = [&](std::int64_t u) { return attention_range(d, t, u); };
  // Grouped KV heads: the forward pass's streamed key and value tiles are the group's, the
  // gradient's own key and value tiles too (the analytic model's assumption).
  const std::int64_t group = std::max<std::int64_t>(1, d.group);
  const std::int64_t stream_group = forward ? group : 1;
  const double own_in_gm = forward ? own_in : own_in / static_cast<double>(group);
  const double unique = static_cast<double>(t.batch / stream_group) * static_cast<double>(across) * streamed;
  L2Model l2(mem.l2_mib * 1024 * 1024, unique, static_cast<std::size_t>(t.batch / stream_group * across));

  PipeCycles inner{};
  inner[at(Pipe::Scalar)] = static_cast<double>(core.scalar_tile_cycles);
  inner[at(Pipe::Mte1)] = (forward ? (2 * bc * D + br * bc) * b : (2 * br * D + 3 * br * bc) * b) / r.mte1;
  inner[at(Pipe::Cube)] = gemms * br * bc * D / macs_per_cycle;
  inner[at(Pipe::FixPipe)] = (forward ? br * bc + br * D : 2 * br * bc + br * D) * f32 / r.fixpipe;
  inner[at(Pipe::Vector)] =
      vector_bytes / vec_width +
      r.issue * passes *
          static_cast<double>(ceil_div(static_cast<std::int64_t>(br * bc * f32), 255 * core.vector_bytes_per_cycle));
  Program p;
  p.halves = buffer_halves(core);
  // Round r is every block's r-th unit; the busiest block (the largest `load`) is simulated.
  auto length = [&](std::int64_t u) { return range(u).second - range(u).first; };
  const auto busiest = static_cast<std::size_t>(std::max_element(load.begin(), load.end()) - load.begin());
  std::int64_t rounds = 0;
  for (const auto& list : dealt) rounds = std::max(rounds, static_cast<std::int64_t>(list.size()));
  for (std::int64_t round = 0; round < rounds; ++round) {
    std::vector<std::int64_t> in_round;
    for (const auto& list : dealt)
      if (static_cast<std::int64_t>(list.size()) > round) in_round.push_back(list[static_cast<std::size_t>(round)]);
    const auto active = static_cast<std::int64_t>(in_round.size());
    std::int64_t longest = 0;
    for (std::int64_t u : in_round) longest = std::max(longest, length(u));
    const bool own = static_cast<std::int64_t>(dealt[busiest].size()) > round;
    const auto [own_lo, own_hi] =
        own ? range(dealt[busiest][static_cast<std::size_t>(round)]) : std::pair<std::int64_t, std::int64_t>{0, 0};
    for (std::int64_t s = 0; s < longest; ++s) {
      double all = 0, missed = 0, writers = 0;
      for (std::int64_t u : in_round) {
        const auto [lo, hi] = range(u);
        if (lo + s >= hi) continue;
        const std::int64_t head = u / own_tiles / stream_group;
        all += streamed;
        if (!l2.read(static_cast<std::size_t>(head * across + lo + s), streamed)) missed += streamed;
        writers += 1;
      }
      p.mte_bytes += all + writers * atomic;
      p.gm_bytes += missed + writers * atomic;
      if (own_lo + s >= own_hi) continue;
      Step st;
      st.d = inner;
      st.d[at(Pipe::Mte2)] = std::max({streamed / r.mte2, missed / r.hbm, (all - missed) / r.l2});
      st.d[at(Pipe::Mte3)] = atomic > 0 ? std::max(atomic / r.mte3, writers * atomic / r.hbm) : 0;
      if (own_lo + s + 1 == own_hi) {  // the unit's own tiles in and out
        st.d[at(Pipe::Mte2)] += std::max(own_in / r.mte2, own_in_gm * static_cast<double>(active) / r.hbm);
        st.d[at(Pipe::Mte3)] += std::max(own_out / r.mte3, own_out * static_cast<double>(active) / r.hbm);
      }
      p.steps.push_back(st);
    }
    p.mte_bytes += static_cast<double>(active) * (own_in + own_out);
    p.gm_bytes += static_cast<double>(active) * (own_in_gm + own_out);
  }
  p.hbm_floor = p.gm_bytes / r.hbm;
  return p;
}

/// A Vector op: tiles dealt to the blocks in turn, streamed GM -> UB -> GM; the round's blocks
/// share the HBM.
Program vector_program(const OpDesc& d, const Tiling& tiling, const AicoreConfig& core, const MemoryConfig& mem) {
  const VectorTiling& v = tiling.v;
  const Rates r = rates(core, mem);
  const double ib = static_cast<double>(precision_bytes(d.precision));
  const double ob = static_cast<double>(precision_bytes(d.out_precision));
  const std::int64_t blocks = tiling.blocks;
  Program p;
  p.halves = buffer_halves(core);
  for (std::int64_t round = 0; round * blocks < v.tiles; ++round) {
    const std::int64_t first = round * blocks;
    const auto active = static_cast<double>(std::min(blocks, v.tiles - first));
    const double te = static_cast<double>(std::min(v.tile_elements, v.elements - first * v.tile_elements));
    const double read = te * v.read_per_element * ib, write = te * v.write_per_element * ob;
    Step st;
    st.d[at(Pipe::Scalar)] = static_cast<double>(core.scalar_tile_cycles);
    st.d[at(Pipe::Mte2)] = std::max(read / r.mte2, read * active / r.hbm);
    st.d[at(Pipe::Vector)] =
        te * v.ops_per_element * ib / r.vec +
        r.issue * static_cast<double>(v.instructions_per_pass *
                                      ceil_div(static_cast<std::int64_t>(te * ib), 255 * core.vector_bytes_per_cycle));
    st.d[at(Pipe::Mte3)] = std::max(write / r.mte3, write * active / r.hbm);
    p.steps.push_back(st);
  }
  const auto e = static_cast<double>(v.elements);
  p.gm_bytes = p.mte_bytes = e * (v.read_per_element * ib + v.write_per_element * ob);
  p.hbm_floor = p.gm_bytes / r.hbm;
  return p;
}

// ---------------------------------------------------------------------------------------------
// The block as SystemC processes.

/// A set_flag/wait_flag pair: each set becomes visible `sync` after it, and is consumed by one
/// wait. Free flags start with one set per buffer half.
struct Flag {
  std::deque<sc_time> ready;
  sc_core::sc_event raised;
};

/// Keeps at most `keep` intervals, merging across the shortest gaps.
void merge_gaps(std::vector<PipeTimeline::Interval>& v, std::size_t keep) {
  if (v.size() <= keep) return;
  std::vector<double> gaps;
  gaps.reserve(v.size() - 1);
  for (std::size_t i = 1; i < v.size(); ++i) gaps.push_back(v[i].start - v[i - 1].end);
  std::vector<double> sorted = gaps;
  const std::size_t cut = v.size() - keep;  // gaps to close
  std::nth_element(sorted.begin(), sorted.begin() + static_cast<std::ptrdiff_t>(cut - 1), sorted.end());
  const double threshold = sorted[cut - 1];
  std::vector<PipeTimeline::Interval> out{v.front()};
  for (std::size_t i = 1; i < v.size(); ++i) {
    if (gaps[i - 1] <= threshold)
      out.back().end = v[i].end;
    else
      out.push_back(v[i]);
  }
  v = std::move(out);
}

class Block : public sc_core::sc_module {
 public:
  /// `keep`: intervals kept per pipe, the shortest gaps merged whenever there are twice as many.
  Block(sc_core::sc_module_name name, const Program& p, double sync_cycles, std::size_t keep)
      : sc_module(name), m_p(p), m_sync(sync_cycles, sc_core::SC_NS), m_keep(keep) {
    for (std::size_t q = 0; q < kPipeCount; ++q)
      for (int h = 0; h < p.halves[q]; ++h) m_free[q].ready.push_back(sc_core::SC_ZERO_TIME);
    for (std::size_t q = 0; q < kPipeCount; ++q)
      sc_core::sc_spawn([this, q] { run(q); }, (std::string("pipe_") + pipe_name(static_cast<Pipe>(q))).c_str());
  }

  std::array<std::vector<PipeTimeline::Interval>, kPipeCount> intervals;
  PipeCycles busy{};
  std::array<std::int64_t, kPipeCount> done{};  ///< steps each pipe finished
  /// What a pipe waits for, while it does: the flag of producer `from` for step `step` (from <
  /// kPipeCount), or a free half of its own output buffer (from == kPipeCount).
  struct Wait {
    bool active = false;
    std::size_t from = 0;
    std::size_t step = 0;
  };
  std::array<Wait, kPipeCount> waiting{};
  PipeCycles starved{};  ///< cycles each pipe waited for its input (the producer's flag)
  PipeCycles blocked{};  ///< cycles each pipe waited for a free half of its output

  /// What pipe `q` waits for, in words (a deadlock's report).
  std::string waiting_for(std::size_t q) const {
    const Wait& w = waiting[q];
    const std::string step = " (step " + std::to_string(w.step) + ")";
    if (w.from < kPipeCount)
      return std::string("wait_flag ") + pipe_name(static_cast<Pipe>(w.from)) + " -> " +
             pipe_name(static_cast<Pipe>(q)) + step;
    return std::string("a free half of ") + pipe_name(static_cast<Pipe>(q)) + "'s output buffer" + step;
  }

  /// True when every pipe has been through every step.
  bool finished() const {
    for (auto n : done)
      if (n != static_cast<std::int64_t>(m_p.steps.size())) return false;
    return true;
  }

 private:
  static bool works(const Step& s, std::size_t q) { return s.d[q] > 0; }

  /// Waits for `f` (from producer `from`, or kPipeCount: a free half); the time goes to `waited`.
  void wait_flag(Flag& f, std::size_t q, std::size_t from, std::size_t step, double& waited) {
    const sc_time since = sc_core::sc_time_stamp();
    waiting[q] = {true, from, step};
    while (f.ready.empty()) wait(f.raised);
    const sc_time when = f.ready.front();
    f.ready.pop_front();
    if (when > sc_core::sc_time_stamp()) wait(when - sc_core::sc_time_stamp());
    waiting[q].active = false;
    waited += (sc_core::sc_time_stamp() - since).to_seconds() * 1e9;
  }
  void set_flag(Flag& f) {
    f.ready.push_back(sc_core::sc_time_stamp() + m_sync);
    f.raised.notify();
  }

  void run(std::size_t q) {
    const Pipe pipe = static_cast<Pipe>(q);
    const bool cube = m_p.accumulate && pipe == Pipe::Cube;
    for (std::size_t i = 0; i < m_p.steps.size(); ++i, ++done[q]) {
      const Step& s = m_p.steps[i];
      if (!works(s, q)) continue;
      std::size_t prev = q, next = q;
      while (prev > 0 && !works(s, prev - 1)) --prev;
      prev = prev > 0 ? prev - 1 : kPipeCount;
      next = q + 1;
      while (next < kPipeCount && !works(s, next)) ++next;
      if (prev < kPipeCount) wait_flag(m_full[prev][q], q, prev, i, starved[q]);
      if (cube ? s.first : next < kPipeCount) wait_flag(m_free[q], q, kPipeCount, i, blocked[q]);
      const sc_time start = sc_core::sc_time_stamp();
      wait(sc_time(s.d[q], sc_core::SC_NS));
      record(q, start.to_seconds() * 1e9, sc_core::sc_time_stamp().to_seconds() * 1e9);
      busy[q] += s.d[q];
      if (prev < kPipeCount) set_flag(m_free[prev]);
      if (next < kPipeCount && (!cube || s.last)) set_flag(m_full[q][next]);
    }
  }

  void record(std::size_t q, double start, double end) {
    auto& v = intervals[q];
    if (!v.empty() && start - v.back().end < 1e-6)
      v.back().end = end;
    else
      v.push_back({start, end});
    if (v.size() >= 2 * m_keep) merge_gaps(v, m_keep);
  }

  const Program& m_p;
  sc_time m_sync;
  std::size_t m_keep;
  std::array<Flag, kPipeCount> m_free;                          ///< per pipe: free halves of its output
  std::array<std::array<Flag, kPipeCount>, kPipeCount> m_full;  ///< [producer][consumer]: a step's data in
};

Bound classify(const OpCost& c, double hbm_floor) {
  const auto& b = c.pipe_busy;
  const double memory =
      std::max({b[at(Pipe::Mte2)], b[at(Pipe::Mte1)], b[at(Pipe::Mte3)], b[at(Pipe::FixPipe)], hbm_floor});
  const double busiest = std::max({memory, b[at(Pipe::Cube)], b[at(Pipe::Vector)]});
  if (c.overhead_cycles + b[at(Pipe::Scalar)] >= busiest) return Bound::Overhead;
  if (busiest == b[at(Pipe::Cube)]) return Bound::Cube;
  if (busiest == b[at(Pipe::Vector)]) return Bound::Vector;
  return Bound::Memory;
}

OpCost run_program(const OpDesc& d, const Tiling& tiling, const Program& p, const AicoreConfig& core,
                   const EventOptions& opt) {
  OpCost c;
  c.tiling = tiling;
  c.blocks = tiling.blocks;
  c.macs = static_cast<double>(d.macs());
  c.gm_bytes = p.gm_bytes;
  c.mte_bytes = p.mte_bytes;
  auto timeline = std::make_shared<PipeTimeline>();
  double makespan = 0;
  {
    // Ops are timed when a graph is compiled, before its simulation starts (checked under the
    // lock that guards SystemC's current context).
    std::unique_lock<std::recursive_mutex> lock(sim::systemc_mutex());
    if (sc_core::sc_curr_simcontext && sc_core::sc_is_running(sc_core::sc_curr_simcontext))
      throw std::logic_error("the event model times ops before a simulation starts, not while it runs");
    sim::ScopedContext context;
    Block block("block", p, static_cast<double>(core.flag_sync_cycles),
                opt.full_timeline ? kFullTimelineIntervals : kTimelineIntervals);
    sc_core::sc_start();
    sim::clear_dead_stack();
    if (!block.finished()) {
      std::string who;
      for (std::size_t q = 0; q < kPipeCount; ++q)
        if (block.waiting[q].active)
          who += std::string(who.empty() ? "" : "; ") + pipe_name(static_cast<Pipe>(q)) + " waits for " +
                 block.waiting_for(q);
      throw std::logic_error(d.to_string() + ": the pipes' flags deadlocked: " + who);
    }
    c.pipe_busy = block.busy;
    timeline->starved = block.starved;
    timeline->blocked = block.blocked;
    for (std::size_t q = 0; q < kPipeCount; ++q) {
      if (!block.intervals[q].empty()) makespan = std::max(makespan, block.intervals[q].back().end);
      timeline->pipes[q] = std::move(block.intervals[q]);
    }
  }
  c.overhead_cycles = static_cast<double>(core.block_start_cycles);
  c.span_cycles = makespan;
  c.hbm_floor_cycles = p.hbm_floor;
  c.block_cycles = std::max(makespan, p.hbm_floor) + c.overhead_cycles;
  c.time_s = c.block_cycles / (core.freq_ghz * 1e9);
  c.bound = classify(c, p.hbm_floor);
  timeline->steps = static_cast<std::int64_t>(p.steps.size());
  timeline->halves = p.halves;
  for (auto& v : timeline->pipes) {
    for (auto& i : v) {
      i.start += c.overhead_cycles;
      i.end += c.overhead_cycles;
    }
    const std::size_t keep = opt.full_timeline ? kFullTimelineIntervals : kTimelineIntervals;
    merge_gaps(v, keep);
  }
  c.timeline = std::move(timeline);
  return c;
}

class EventCostModel final : public CostModel {
 public:
  EventCostModel(const AicoreConfig& core, const MemoryConfig& mem) : m_core(core), m_mem(mem) {}
  OpCost estimate(const OpDesc& d) const override { return simulate_op(d, m_core, m_mem); }

 private:
  AicoreConfig m_core;
  MemoryConfig m_mem;
};

}  // namespace

OpCost simulate_tiling(const OpDesc& d, const Tiling& t, const AicoreConfig& core, const MemoryConfig& mem,
                       const EventOptions& opt) {
  // The busiest block's steps are counted, from the tiles' dealing, before they are built.
  auto refuse_beyond_limit = [&](std::int64_t steps) {
    if (steps > kMaxSteps)
      throw EventModelError(d.to_string() + ": " + std::to_string(steps) +
                            " steps in its busiest block, more than the event model takes (" +
                            std::to_string(kMaxSteps) + ", about 20 s); time it with aicore.model: analytic");
  };
  if (t.attention) {
    const auto dealt = deal_attention_units(d, t);
    const std::vector<std::int64_t> loads = attention_loads(d, t.c, dealt);
    refuse_beyond_limit(*std::max_element(loads.begin(), loads.end()));
    return run_program(d, t, attention_program(d, t, dealt, loads, core, mem), core, opt);
  }
  if (t.cube) {
    const CubeDeal deal = deal_cube_tiles(d, t, mem.l2_mib * 1024 * 1024);
    refuse_beyond_limit(deal.busiest_tiles * std::min(t.c.k_steps_per_block, t.c.k_steps));
    return run_program(d, t, cube_program(d, t, deal, core, mem), core, opt);
  }
  refuse_beyond_limit(t.v.tiles_per_block);
  return run_program(d, t, vector_program(d, t, core, mem), core, opt);
}

OpCost simulate_op(const OpDesc& d, const AicoreConfig& core, const MemoryConfig& mem, const EventOptions& opt) {
  return simulate_tiling(d, tile_op(d, core), core, mem, opt);
}

std::string timeline_chart(const PipeTimeline& t, double from, double to, int columns) {
  std::string out;
  const double width = (to - from) / columns;
  for (std::size_t q = 0; q < kPipeCount; ++q) {
    std::vector<double> busy(static_cast<std::size_t>(columns), 0.0);
    for (const auto& i : t.pipes[q]) {
      const double a = std::max(i.start, from), b = std::min(i.end, to);
      if (!(b > a)) continue;
      for (auto c = static_cast<std::int64_t>((a - from) / width);
           c < columns && from + static_cast<double>(c) * width < b; ++c) {
        const double lo = from + static_cast<double>(c) * width;
        busy[static_cast<std::size_t>(c)] += std::min(b, lo + width) - std::max(a, lo);
      }
    }
    std::string row = std::string("  ") + pipe_name(static_cast<Pipe>(q));
    row.resize(11, ' ');
    row += '|';
    for (double x : busy) row += x >= width * (1 - 1e-9) ? '#' : x > width / 2 ? '+' : x > 0 ? '.' : ' ';
    out += row + "|\n";
  }
  return out;
}

std::unique_ptr<CostModel> make_event_cost_model(const AicoreConfig& core, const MemoryConfig& mem) {
  return std::make_unique<EventCostModel>(core, mem);
}

}  // namespace ascendsim::aicore
