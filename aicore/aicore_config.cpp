#include "aicore/aicore_config.h"

namespace ascendsim::aicore {

void AicoreConfig::declare(sim::ParamSet& ps) {
  ps.integer("aicore.cores", cores, "cores", 1, 1024, "AI cores (each with Cube, Vector, Scalar, MTE pipes)");
  ps.integer("aicore.vector_cores", vector_cores, "cores", 0, 2048,
             "separate vector-only cores (Cube/Vector split designs); 0 = Vector inside each AI core");
  ps.real("aicore.freq_ghz", freq_ghz, "GHz", 0.05, 10, "AI core clock");
  ps.integer("aicore.cube_fp16_macs_per_cycle", cube_fp16_macs_per_cycle, "MAC/cycle", 1, 1 << 20,
             "Cube fp16 multiply-accumulates per cycle per core");
  ps.integer("aicore.cube_int8_macs_per_cycle", cube_int8_macs_per_cycle, "MAC/cycle", 1, 1 << 20,
             "Cube int8 multiply-accumulates per cycle per core");
  ps.integer("aicore.vector_bytes_per_cycle", vector_bytes_per_cycle, "B/cycle", 1, 1 << 16,
             "Vector unit width per core");
  ps.integer("aicore.vector_issue_cycles", vector_issue_cycles, "cycles", 0, 1 << 16,
             "issue cost of one Vector instruction (a repeat of at most 255 vector widths)");
  ps.integer("aicore.scalar_tile_cycles", scalar_tile_cycles, "cycles", 0, 1 << 16,
             "Scalar pipe work per tile: address arithmetic, pipe flags, loop control");
  ps.integer("aicore.flag_sync_cycles", flag_sync_cycles, "cycles", 0, 1 << 16,
             "latency from one pipe setting a flag to the next pipe seeing it");
  ps.integer("aicore.mte2_bytes_per_cycle", mte2_bytes_per_cycle, "B/cycle", 1, 1 << 16,
             "MTE2 GM -> L1/UB per core (HBM and L2 bandwidth shared by the active cores cap it)");
  ps.integer("aicore.mte1_bytes_per_cycle", mte1_bytes_per_cycle, "B/cycle", 1, 1 << 16,
             "MTE1 L1 -> L0A/L0B per core, img2col expansion included");
  ps.integer("aicore.mte3_bytes_per_cycle", mte3_bytes_per_cycle, "B/cycle", 1, 1 << 16, "MTE3 UB -> GM per core");
  ps.integer("aicore.fixpipe_bytes_per_cycle", fixpipe_bytes_per_cycle, "B/cycle", 1, 1 << 16,
             "L0C -> UB/GM path per core (accumulator read-out and conversion)");
  ps.integer("aicore.l0a_kib", l0a_kib, "KiB", 1, 1 << 20, "L0A buffer (Cube left operand) per core");
  ps.integer("aicore.l0b_kib", l0b_kib, "KiB", 1, 1 << 20, "L0B buffer (Cube right operand) per core");
  ps.integer("aicore.l0c_kib", l0c_kib, "KiB", 1, 1 << 20, "L0C buffer (Cube accumulator) per core");
  ps.integer("aicore.l1_kib", l1_kib, "KiB", 1, 1 << 20, "L1 buffer per core");
  ps.integer("aicore.ub_kib", ub_kib, "KiB", 1, 1 << 20, "Unified Buffer (Vector operand store) per core");
  ps.integer("aicore.block_start_cycles", block_start_cycles, "cycles", 0, 1 << 24,
             "fixed cost of starting one block on a core (scalar prologue, parameters, i-cache)");
  ps.text("aicore.model", model, {"analytic", "event"},
          "how each op is timed: analytic (a pipe schedule of each block's tiles, fast) or event (every pipe a "
          "SystemC process synchronised by set_flag/wait_flag, L2 as an LRU; docs/aicore.md)");
  ps.boolean("aicore.double_buffer", double_buffer,
             "event model: two halves (ping-pong) in every buffer where the tiling fits twice; false: one, so each "
             "pipe waits for its consumer to free the buffer");
  ps.boolean("aicore.flash_attention", flash_attention,
             "the backend has the fused attention kernel FlashAttentionScore (the transformers use it by default)");
}

void MemoryConfig::declare(sim::ParamSet& ps) {
  ps.real("memory.hbm_gib", hbm_gib, "GiB", 0.125, 1 << 16, "device memory capacity");
  ps.real("memory.hbm_bandwidth_gbps", hbm_bandwidth_gbps, "GB/s", 1, 1e6,
          "device memory bandwidth at its pins (the peak)");
  ps.real("memory.hbm_efficiency", hbm_efficiency, "fraction", 0.05, 1,
          "fraction of the peak the chip's traffic sustains (refresh, bus turnarounds, bank conflicts); every "
          "consumer shares hbm_bandwidth_gbps x hbm_efficiency");
  ps.real("memory.l2_mib", l2_mib, "MiB", 0, 1 << 16, "on-chip L2 cache: operands re-read while they fit hit it");
  ps.real("memory.l2_bandwidth_gbps", l2_bandwidth_gbps, "GB/s", 1, 1e6, "L2 bandwidth shared by all cores");
  ps.boolean("memory.hbm_contention", hbm_contention,
             "share the HBM bandwidth among AI-core kernels, DMA and collectives running at once (max-min fair); "
             "false: each sees all of it");
}

}  // namespace ascendsim::aicore
