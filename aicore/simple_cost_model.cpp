// The pipe model of an op on the AI cores.
//
// An op is cut into blocks, at most one per core. Within a block the Cube, the Vector unit and
// the MTE path to GM work as overlapped pipes (double buffering), so a block takes as long as its
// busiest pipe plus a fixed start-up. The Cube works on 16x16 fractals with C0 = 16 channel
// padding, so small or odd dimensions pay for the padding. The cores' GM traffic shares the HBM
// bandwidth: the op's bytes cannot move faster than HBM allows. Left out here: per-tile pipe
// synchronisation, L2 reuse across blocks, buffer-driven tiling (the full DaVinci pipe model).
#include <algorithm>
#include <stdexcept>

#include "aicore/cost_model.h"

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

std::int64_t round_up(std::int64_t v, std::int64_t to) { return (v + to - 1) / to * to; }
std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }

struct Work {
  double cube_macs = 0;     // padded to the fractal
  double vector_bytes = 0;  // bytes streamed through the Vector unit
  double gm_bytes = 0;
  std::int64_t units = 1;  // independent pieces the op can be split into
  bool cube = false;
};

class PipeCostModel final : public CostModel {
 public:
  PipeCostModel(const AicoreConfig& core, const MemoryConfig& mem) : m_core(core), m_mem(mem) {}

  OpCost estimate(const OpDesc& d) const override {
    const Work w = work(d);
    const std::int64_t cores = w.cube ? m_core.cores : m_core.vector_core_count();
    const std::int64_t active = std::max<std::int64_t>(1, std::min(w.units, cores));
    const double share = static_cast<double>(ceil_div(w.units, active)) / static_cast<double>(w.units);

    const double macs_per_cycle =
        static_cast<double>(m_core.cube_fp16_macs_per_cycle) * (d.precision == Precision::INT8 ? 2.0 : 1.0);
    // A block's MTE moves its share at the core's own rate, and all blocks together cannot move
    // the op's bytes faster than the shared HBM.
    const double hbm_bytes_per_cycle = m_mem.hbm_bandwidth_gbps / m_core.freq_ghz;

    OpCost c;
    c.blocks = active;
    c.cube_cycles = w.cube_macs * share / macs_per_cycle;
    c.vector_cycles = w.vector_bytes * share / static_cast<double>(m_core.vector_bytes_per_cycle);
    c.mte_cycles =
        std::max(w.gm_bytes * share / static_cast<double>(m_core.gm_bytes_per_cycle), w.gm_bytes / hbm_bytes_per_cycle);
    c.overhead_cycles = static_cast<double>(m_core.block_start_cycles);
    const double busiest = std::max({c.cube_cycles, c.vector_cycles, c.mte_cycles});
    c.block_cycles = busiest + c.overhead_cycles;
    c.time_s = c.block_cycles / (m_core.freq_ghz * 1e9);
    c.macs = static_cast<double>(d.macs());
    c.gm_bytes = w.gm_bytes;
    if (c.overhead_cycles >= busiest)
      c.bound = Bound::Overhead;
    else if (busiest == c.cube_cycles)
      c.bound = Bound::Cube;
    else if (busiest == c.mte_cycles)
      c.bound = Bound::Memory;
    else
      c.bound = Bound::Vector;
    return c;
  }

 private:
  Work work(const OpDesc& d) const {
    const double b = static_cast<double>(precision_bytes(d.precision));
    const std::int64_t kalign = d.precision == Precision::INT8 ? 32 : 16;
    auto cube = [&](std::int64_t m, std::int64_t n, std::int64_t k, double gm_elems) {
      if (d.precision == Precision::FP32)
        throw std::invalid_argument(d.to_string() + ": the Cube has no fp32 mode; compute it as fp16");
      if (m <= 0 || n <= 0 || k <= 0) throw std::invalid_argument(d.to_string() + ": non-positive dimension");
      Work w;
      w.cube = true;
      w.cube_macs = static_cast<double>(round_up(m, 16)) * static_cast<double>(round_up(n, 16)) *
                    static_cast<double>(round_up(k, kalign));
      w.gm_bytes = gm_elems * b;
      // L0C -> UB/GM conversion of the fp32 accumulator passes the output through the Vector path.
      w.vector_bytes = static_cast<double>(m) * static_cast<double>(n) * 4.0;
      w.units = ceil_div(m, 16) * ceil_div(n, 16);
      return w;
    };
    const std::int64_t ho = d.conv_out_h(), wo = d.conv_out_w();
    const double x = static_cast<double>(d.batch * d.cin * d.h * d.w);
    const double wt = static_cast<double>(d.cout * d.cin * d.kh * d.kw);
    const double y = static_cast<double>(d.batch * d.cout * ho * wo);
    const std::int64_t cin16 = round_up(d.cin, kalign), cout16 = round_up(d.cout, kalign);
    switch (d.kind) {
      case OpKind::MatMul:
        return cube(d.m, d.n, d.k, static_cast<double>(d.m * d.k + d.k * d.n + d.m * d.n));
      case OpKind::Conv2D:  // img2col: [N*Ho*Wo, C1*kh*kw*C0] x [.., Cout]
        return cube(d.batch * ho * wo, d.cout, cin16 * d.kh * d.kw, x + wt + y);
      case OpKind::Conv2DBackpropInput:  // [N*H*W, Cout*kh*kw] x [.., Cin]
        return cube(d.batch * d.h * d.w, d.cin, cout16 * d.kh * d.kw, x + wt + y);
      case OpKind::Conv2DBackpropFilter:  // [Cout, N*Ho*Wo] x [.., Cin*kh*kw]
        return cube(d.cout, cin16 * d.kh * d.kw, d.batch * ho * wo, x + wt + y);
      case OpKind::Elementwise:
      case OpKind::Reduce:
      case OpKind::Pool:
      case OpKind::PoolGrad:
      case OpKind::SoftmaxCrossEntropy:
      case OpKind::Momentum: {
        if (d.elements <= 0) throw std::invalid_argument(d.to_string() + ": no elements");
        Work w;
        const double e = static_cast<double>(d.elements);
        w.vector_bytes = e * b * static_cast<double>(d.passes * d.window);
        w.gm_bytes = e * static_cast<double>(d.inputs) * b +
                     static_cast<double>(d.out_elements) * static_cast<double>(precision_bytes(d.out_precision));
        // A block streams at least half the Unified Buffer (one ping-pong half) per pass.
        const double half_ub = static_cast<double>(m_core.ub_kib) * 1024.0 / 2.0;
        w.units = std::max<std::int64_t>(1, static_cast<std::int64_t>((e * b + half_ub - 1) / half_ub));
        return w;
      }
    }
    throw std::invalid_argument("unknown op kind");
  }

  AicoreConfig m_core;
  MemoryConfig m_mem;
};

}  // namespace

std::unique_ptr<CostModel> make_pipe_cost_model(const AicoreConfig& core, const MemoryConfig& mem) {
  return std::make_unique<PipeCostModel>(core, mem);
}

}  // namespace ascendsim::aicore
