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
#include <utility>
#include <vector>

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

/// Rows (or columns) of output tile `index` of a dimension of `total` cut in tiles of `tile`: the
/// last one holds the rest.
inline std::int64_t tile_extent(std::int64_t index, std::int64_t tile, std::int64_t total) {
  return tile < total - index * tile ? tile : total - index * tile;
}

/// How a Cube op's output tiles go to the blocks: a round at a time, `per_round` tiles of `order`
/// (blocks / k_split), each block taking the same position in every round; the busiest block's
/// position and the mean extents of its tiles (edge tiles are smaller than the L0 tile).
struct CubeDeal {
  /// One product's output tiles in dealing order (row x tiles_n + col); a batch's products follow
  /// one another: global index i is tile order[i % size] of product i / size.
  std::vector<std::int64_t> order;
  std::int64_t per_round = 1;
  std::int64_t busiest = 0;        ///< position in a round of the block with the most output
  std::int64_t busiest_tiles = 0;  ///< output tiles that block computes
  double mean_m = 0, mean_n = 0;   ///< mean rows and columns of its output tiles
  double mean_mn = 0;              ///< mean elements of its output tiles
  double mean_k = 0;               ///< mean depth of its k-steps
  /// A sweep of the output: its bands (of rows of tiles, or of columns) and the rounds each takes.
  struct Sweep {
    std::int64_t bands = 1, rounds_per_band = 1;
  };
  bool along_rows = true;  ///< the patches sweep along bands of rows (else down bands of columns)
  Sweep rows_sweep, cols_sweep;
};
/// HBM bytes of one product's operand reads of `a_bytes` and `b_bytes` under a sweep: the operand
/// a band holds (A along rows, B down columns) is fetched once while one band of it fits
/// `l2_bytes`, else once per round of the band; the other once per band unless it fits whole.
double swept_bytes(double a_bytes, double b_bytes, const CubeDeal::Sweep& sweep, bool along_rows, double l2_bytes);
/// Tiles are dealt patch by patch, a patch being the rows x cols of output tiles in flight together
/// that re-read the fewest operand bytes, products of a batch one after another. Patches sweep
/// along a band of rows (B read once per band) or down a band of columns (A once per band),
/// whichever moves fewer bytes through HBM when an operand does not fit `l2_bytes`, as a GEMM
/// kernel chooses its iteration order.
CubeDeal deal_cube_tiles(const OpDesc& d, const Tiling& t, double l2_bytes);

/// Fused attention: the streamed tiles [first, last) of (head, tile) unit `unit` — every key tile
/// of a query tile (forward) or every query tile of a key tile (gradient), under a causal mask
/// only those at or below the diagonal.
std::pair<std::int64_t, std::int64_t> attention_range(const OpDesc& d, const CubeTiling& c, std::int64_t unit);
/// Fused attention: the units each block runs, dealt in turn head by head; under a causal mask
/// (units of unequal length) in pairs whose lengths add up to the same, so the blocks balance.
std::vector<std::vector<std::int64_t>> deal_attention_units(const OpDesc& d, const Tiling& t);
/// The streamed tiles (inner steps) each block of `dealt` runs.
std::vector<std::int64_t> attention_loads(const OpDesc& d, const CubeTiling& c,
                                          const std::vector<std::vector<std::int64_t>>& dealt);

/// An L0 tile chosen by hand: m x n x k for a Cube op (multiples of 16; k of 32 for int8), m
/// elements per tile for a Vector op (a multiple of 32 bytes); n and k unused there.
struct L0Tile {
  std::int64_t m = 0, n = 0, k = 0;
};

/// The op's tiling: the tiler's choice, or `force` (std::logic_error naming the buffer when a
/// footprint does not fit, std::invalid_argument when it is not a legal tile).
Tiling tile_op(const OpDesc& d, const AicoreConfig& cfg, const L0Tile* force = nullptr);

}  // namespace ascendsim::aicore
