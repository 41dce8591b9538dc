#include "aicore/aicore_config.h"

namespace ascendsim::aicore {

void AicoreConfig::declare(sim::ParamSet& ps) {
  ps.integer("aicore.cores", cores, "cores", 1, 1024, "AI cores (each with Cube, Vector, Scalar, MTE pipes)");
  ps.integer("aicore.vector_cores", vector_cores, "cores", 0, 2048,
             "separate vector-only cores (Cube/Vector split designs); 0 = Vector inside each AI core");
  ps.real("aicore.freq_ghz", freq_ghz, "GHz", 0.05, 10, "AI core clock");
  ps.integer("aicore.cube_fp16_macs_per_cycle", cube_fp16_macs_per_cycle, "MAC/cycle", 1, 1 << 20,
             "Cube fp16 multiply-accumulates per cycle per core (int8: twice)");
  ps.integer("aicore.vector_bytes_per_cycle", vector_bytes_per_cycle, "B/cycle", 1, 1 << 16,
             "Vector unit width per core");
  ps.integer("aicore.gm_bytes_per_cycle", gm_bytes_per_cycle, "B/cycle", 1, 1 << 16,
             "one core's MTE bandwidth to L2/HBM (the shared HBM bandwidth caps the sum)");
  ps.integer("aicore.l0a_kib", l0a_kib, "KiB", 1, 1 << 20, "L0A buffer (Cube left operand) per core");
  ps.integer("aicore.l0b_kib", l0b_kib, "KiB", 1, 1 << 20, "L0B buffer (Cube right operand) per core");
  ps.integer("aicore.l0c_kib", l0c_kib, "KiB", 1, 1 << 20, "L0C buffer (Cube accumulator) per core");
  ps.integer("aicore.l1_kib", l1_kib, "KiB", 1, 1 << 20, "L1 buffer per core");
  ps.integer("aicore.ub_kib", ub_kib, "KiB", 1, 1 << 20, "Unified Buffer (Vector operand store) per core");
  ps.integer("aicore.block_start_cycles", block_start_cycles, "cycles", 0, 1 << 24,
             "fixed cost of starting one block on a core (scalar prologue, parameters, i-cache)");
}

void MemoryConfig::declare(sim::ParamSet& ps) {
  ps.real("memory.hbm_gib", hbm_gib, "GiB", 0.125, 1 << 16, "device memory capacity");
  ps.real("memory.hbm_bandwidth_gbps", hbm_bandwidth_gbps, "GB/s", 1, 1e6,
          "device memory bandwidth shared by all cores");
  ps.real("memory.l2_mib", l2_mib, "MiB", 0, 1 << 16, "on-chip L2 cache");
}

}  // namespace ascendsim::aicore
