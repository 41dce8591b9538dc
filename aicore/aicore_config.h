// Configuration of the DaVinci AI cores and the chip memory they share. Values default to the
// ascend910 preset; every field is declared (unit, range, description) in declare().
#pragma once

#include <cstdint>
#include <string>

#include "sim/core/params.h"

namespace ascendsim::aicore {

struct AicoreConfig {
  std::int64_t cores = 32;        ///< AI cores with a Cube unit
  std::int64_t vector_cores = 0;  ///< separate vector cores (910B split); 0 = Vector inside each AI core
  double freq_ghz = 1.0;
  std::int64_t cube_fp16_macs_per_cycle = 4096;  ///< 16x16x16
  std::int64_t cube_int8_macs_per_cycle = 8192;  ///< 16x32x16
  std::int64_t vector_bytes_per_cycle = 256;     ///< 2048-bit Vector unit
  std::int64_t vector_issue_cycles = 8;          ///< per Vector instruction (repeat count <= 255)
  std::int64_t scalar_tile_cycles = 24;          ///< Scalar pipe per tile: addresses, flags, loop control
  std::int64_t flag_sync_cycles = 20;            ///< set_flag -> wait_flag latency between two pipes
  std::int64_t mte2_bytes_per_cycle = 128;       ///< GM -> L1/UB
  std::int64_t mte1_bytes_per_cycle = 512;       ///< L1 -> L0A/L0B (img2col expansion included)
  std::int64_t mte3_bytes_per_cycle = 128;       ///< UB -> GM
  std::int64_t fixpipe_bytes_per_cycle = 256;    ///< L0C -> UB/GM
  std::int64_t l0a_kib = 64;
  std::int64_t l0b_kib = 64;
  std::int64_t l0c_kib = 256;
  std::int64_t l1_kib = 1024;
  std::int64_t ub_kib = 256;
  std::int64_t block_start_cycles = 1500;
  /// The backend's kernel library has the fused attention kernel (FlashAttentionScore): CANN
  /// provides it for the Atlas A2 (Ascend 910B) series.
  bool flash_attention = false;  ///< per block: scalar prologue, parameter load, i-cache warm-up
  /// How ops are timed: "analytic" (pipe_schedule.h) or "event" (event_model.h).
  std::string model = "analytic";
  /// Event model: ping-pong halves in every buffer the tiling fits twice (false: one of each).
  bool double_buffer = true;

  void declare(sim::ParamSet& ps);
  /// Cores that run vector-only ops.
  std::int64_t vector_core_count() const { return vector_cores > 0 ? vector_cores : cores; }
};

struct MemoryConfig {
  double hbm_gib = 32;
  double hbm_bandwidth_gbps = 1200;
  /// Fraction of hbm_bandwidth_gbps (the pins' peak) that the chip's traffic sustains; the 910's,
  /// fitted to its published training figures (configs/chips/ascend910.yaml).
  double hbm_efficiency = 0.7025;
  double l2_mib = 32;
  double l2_bandwidth_gbps = 4000;
  /// Share hbm_bandwidth_gbps among kernels, DMA and collectives (aicore/hbm.h); false: each sees all of it.
  bool hbm_contention = true;

  void declare(sim::ParamSet& ps);
  /// The bandwidth every consumer of the HBM shares: the peak times the sustained fraction.
  double hbm_gbps() const { return hbm_bandwidth_gbps * hbm_efficiency; }
};

}  // namespace ascendsim::aicore
