// The event model's flags under any tiling: the input picks an op (a MatMul, a convolution or its
// filter gradient, a Vector op, a fused attention), the core's buffer sizes, double buffering, the
// flag latency and a hand-chosen L0 tile. The tiler may refuse the tile (std::logic_error naming
// the buffer, std::invalid_argument for an illegal tile); otherwise the op must run to its last
// step. A deadlock (aicore::EventModelError), a crash, a sanitizer report or a hang is a finding.
#include <cstdint>
#include <stdexcept>

#include "aicore/event_model.h"
#include "aicore/tiling.h"
#include "tests/fuzz/fuzz_common.h"

namespace {

/// Reads small numbers off the input, 0 once it is used up.
class Bytes {
 public:
  Bytes(const std::uint8_t* data, std::size_t size) : m_data(data), m_size(size) {}
  std::int64_t pick(std::int64_t lo, std::int64_t hi) {
    std::uint32_t v = 0;
    for (int i = 0; i < 2; ++i) v = v << 8 | (m_at < m_size ? m_data[m_at++] : 0);
    return lo + static_cast<std::int64_t>(v % static_cast<std::uint32_t>(hi - lo + 1));
  }

 private:
  const std::uint8_t* m_data;
  std::size_t m_size, m_at = 0;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace ascendsim::aicore;
  Bytes in(data, size);
  AicoreConfig core;
  core.cores = in.pick(1, 32);
  core.l0a_kib = in.pick(1, 128);
  core.l0b_kib = in.pick(1, 128);
  core.l0c_kib = in.pick(4, 512);
  core.l1_kib = in.pick(16, 2048);
  core.ub_kib = in.pick(8, 512);
  core.double_buffer = in.pick(0, 1) == 1;
  core.flag_sync_cycles = in.pick(0, 200);
  MemoryConfig mem;
  mem.l2_mib = static_cast<double>(in.pick(0, 16)) / 4;
  OpDesc d;
  L0Tile tile;
  const L0Tile* force = &tile;
  switch (in.pick(0, 3)) {
    case 0:
      d.kind = OpKind::MatMul;
      d.m = in.pick(1, 1000);
      d.n = in.pick(1, 1000);
      d.k = in.pick(1, 1000);
      d.batch = in.pick(1, 4);
      if (in.pick(0, 3) == 0) d.precision = d.out_precision = Precision::INT8;
      d.epilogue_ops = in.pick(0, 3);
      d.epilogue_operands = in.pick(0, 1);
      tile = {16 * in.pick(1, 32), 16 * in.pick(1, 32), 16 * in.pick(1, 64)};
      break;
    case 1:
      d.kind = in.pick(0, 1) ? OpKind::Conv2DBackpropFilter : OpKind::Conv2D;
      d.batch = in.pick(1, 4);
      d.cin = in.pick(1, 64);
      d.h = d.w = in.pick(4, 24);
      d.cout = in.pick(1, 64);
      d.kh = d.kw = in.pick(1, 3);
      d.stride = in.pick(1, 2);
      tile = {16 * in.pick(1, 32), 16 * in.pick(1, 32), 16 * in.pick(1, 64)};
      break;
    case 2:
      d.kind = OpKind::ReluGrad;
      d.elements = in.pick(1, 400000);
      tile = {16 * in.pick(1, 4000), 0, 0};
      break;
    default: {
      core.flash_attention = true;
      core.vector_cores = in.pick(0, 1) * 2 * core.cores;
      d.kind = in.pick(0, 1) ? OpKind::FlashAttention : OpKind::FlashAttentionGrad;
      d.batch = in.pick(1, 8);
      d.m = in.pick(1, 1500);
      d.causal = in.pick(0, 1) == 1;
      d.n = d.causal ? d.m : in.pick(1, 1500);
      d.k = 16 * in.pick(1, 16);
      force = nullptr;  // its own Br x Bc tiles
      break;
    }
  }
  Tiling t;
  try {
    t = tile_op(d, core, force);
  } catch (const std::logic_error&) {  // refused: a footprint the buffers cannot hold, or no tile
    return 0;
  }
  // Many small tiles on few cores make hundreds of thousands of steps: seconds each under the
  // sanitizers. The flags' logic is the same at any length; keep the inputs fast.
  const std::int64_t steps = t.attention ? t.c.tiles_per_block * t.c.k_steps
                             : t.cube    ? t.c.tiles_per_block * t.c.k_steps_per_block
                                         : t.v.tiles_per_block;
  if (steps > 20000) return 0;
  const OpCost c = simulate_tiling(d, t, core, mem);  // a deadlock throws: a finding
  if (!(c.block_cycles > 0) || !c.timeline || c.timeline->steps <= 0) __builtin_trap();
  return 0;
}
