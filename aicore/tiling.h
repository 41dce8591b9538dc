// Per-op tiling on a DaVinci core: how an op is cut into blocks (one per core) and each block into
// tiles that fit the core's buffers with double buffering (ping-pong halves). Cube ops are GEMMs
// in the fractal layout (16x16 fp16 fractals, channels padded to C0 = 16, int8 C0 = 32): MatMul
// directly, Conv2D as img2col, Conv2DBackpropInput as the convolution of the (dilated) output
// gradient with the rotated weights, Conv2DBackpropFilter as dy^T x img2col(x), split along K
// over cores when its output has too few tiles. Vector ops stream tiles through the Unified
// Buffer. The tiler checks every footprint against the preset's capacities and throws
// std::logic_error if one does not fit.
#pragma once

#include <cstdint>
#include <string>

#include "aicore/aicore_config.h"
#include "aicore/op_desc.h"

namespace ascendsim::aicore {

/// Bytes one tile set occupies in each buffer, both ping-pong halves counted.
struct BufferUse {
  std::int64_t l1 = 0, l0a = 0, l0b = 0, l0c = 0, ub = 0;
};

struct CubeTiling {
  std::int64_t M = 0, N = 0, K = 0;        ///< GEMM dimensions, padded to the fractal
  std::int64_t batch = 1;                  ///< independent GEMMs of M x N x K (BatchMatMul)
  std::int64_t m_t = 0, n_t = 0, k_t = 0;  ///< L0 tile
  std::int64_t tiles_m = 0, tiles_n = 0, k_steps = 0;
  std::int64_t k_split = 1;          ///< blocks sharing one output tile along K
  std::int64_t tiles_per_block = 0;  ///< output tiles of the busiest block
  std::int64_t k_steps_per_block = 0;
  double a_gm_factor = 1;  ///< GM bytes per L0A byte of the left operand (< 1 where img2col re-reads from L1)
  double b_gm_factor = 1;
  double a_mte1_factor = 1;  ///< extra MTE1 work for a transposing load
  double b_mte1_factor = 1;
};

struct VectorTiling {
  std::int64_t elements = 0;       ///< main elements streamed
  std::int64_t tile_elements = 0;  ///< per tile
  std::int64_t tiles = 0;
  std::int64_t tiles_per_block = 0;
  double read_per_element = 0;             ///< operand elements read per main element
  double write_per_element = 0;            ///< result elements written per main element
  double ops_per_element = 0;              ///< Vector element-operations per main element
  std::int64_t instructions_per_pass = 1;  ///< distinct Vector instructions per element (each with its own repeats)
};

struct Tiling {
  bool cube = false;
  /// Fused attention (tile_attention): 1 forward, 2 its gradient; `c` holds the query tiles (m)
  /// and key tiles (n) per head (batch) and the inner steps per unit (k_steps).
  int attention = 0;
  std::int64_t blocks = 1;
  CubeTiling c;
  VectorTiling v;
  BufferUse use;
  std::string describe() const;  ///< "m128 n256 k64, 2048 tiles" / "elements 16384 per tile, 37 tiles"
  std::int64_t tile_count() const;
};

Tiling tile_op(const OpDesc& d, const AicoreConfig& cfg);

}  // namespace ascendsim::aicore
