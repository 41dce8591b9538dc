#include "aicore/tiling.h"

#include <algorithm>
#include <initializer_list>
#include <numeric>
#include <stdexcept>
#include <vector>

namespace ascendsim::aicore {

namespace {

std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }
std::int64_t round_up(std::int64_t v, std::int64_t to) { return ceil_div(v, to) * to; }

// img2col reads each input pixel from GM about once per output row band, not kh*kw times: the
// expansion happens in MTE1 (load3d). 1.25 allows for the halo rows a band re-reads.
double img2col_gm_factor(std::int64_t kh, std::int64_t kw, std::int64_t stride) {
  if (kh * kw == 1) return 1.0;
  return std::min(1.0, 1.25 * static_cast<double>(stride * stride) / static_cast<double>(kh * kw));
}

void check(std::int64_t used, std::int64_t kib, const char* buffer, const OpDesc& d) {
  if (used > kib * 1024)
    throw std::logic_error("tiler: " + d.to_string() + " needs " + std::to_string(used) + " B of " + buffer +
                           ", which holds " + std::to_string(kib * 1024) + " B");
}

CubeTiling gemm_shape(const OpDesc& d) {
  const std::int64_t c0 = d.precision == Precision::INT8 ? 32 : 16;
  CubeTiling t;
  const std::int64_t ho = d.conv_out_h(), wo = d.conv_out_w();
  switch (d.kind) {
    case OpKind::MatMul:
      t.M = d.m;
      t.N = d.n;
      t.K = d.k;
      t.batch = std::max<std::int64_t>(1, d.batch);
      t.a_mte1_factor = d.transpose_a ? 2.0 : 1.0;
      t.b_mte1_factor = d.transpose_b ? 2.0 : 1.0;
      break;
    case OpKind::Conv2D:
      t.M = d.batch * ho * wo;
      t.K = round_up(d.cin, c0) * d.kh * d.kw;
      t.N = d.cout;
      t.a_gm_factor = img2col_gm_factor(d.kh, d.kw, d.stride);
      break;
    case OpKind::Conv2DBackpropInput:
      if (d.kh * d.kw > 1) {  // dy dilated by the stride, convolved with the rotated weights
        t.M = d.batch * d.h * d.w;
        t.a_gm_factor = img2col_gm_factor(d.kh, d.kw, 1) / static_cast<double>(d.stride * d.stride);
      } else {  // 1x1: a GEMM on dy, scattered with the stride
        t.M = d.batch * ho * wo;
      }
      t.K = round_up(d.cout, c0) * d.kh * d.kw;
      t.N = d.cin;
      t.b_mte1_factor = 2.0;  // weights read transposed
      break;
    case OpKind::Conv2DBackpropFilter:
      t.M = d.cout;
      t.N = round_up(d.cin, c0) * d.kh * d.kw;
      t.K = d.batch * ho * wo;
      t.a_mte1_factor = 2.0;  // dy read transposed
      t.b_gm_factor = img2col_gm_factor(d.kh, d.kw, d.stride);
      break;
    default:
      throw std::logic_error("gemm_shape: not a Cube op");
  }
  t.M = round_up(t.M, 16);
  t.N = round_up(t.N, 16);
  t.K = round_up(t.K, c0);
  return t;
}

Tiling tile_cube(const OpDesc& d, const AicoreConfig& cfg, const L0Tile* force) {
  Tiling out;
  out.cube = true;
  CubeTiling t = gemm_shape(d);
  const std::int64_t b = precision_bytes(d.precision);
  const std::int64_t ob = precision_bytes(d.out_precision);
  const std::int64_t kalign = d.precision == Precision::INT8 ? 32 : 16;
  const double macs_per_cycle =
      static_cast<double>(d.precision == Precision::INT8 ? cfg.cube_int8_macs_per_cycle : cfg.cube_fp16_macs_per_cycle);

  // Pick the L0 tile that fits the buffers and costs the fewest cycles per MAC when the busiest
  // of Cube, MTE1 and MTE2 sets the pace; prefer larger output tiles (less re-reading) on ties.
  double best = 0;
  if (force) {
    const std::string name =
        "tile m" + std::to_string(force->m) + " n" + std::to_string(force->n) + " k" + std::to_string(force->k);
    if (force->m < 16 || force->m % 16 || force->n < 16 || force->n % 16 || force->k < kalign || force->k % kalign)
      throw std::invalid_argument(name + ": m and n must be multiples of 16, k of " + std::to_string(kalign) +
                                  " (the fractal" + (kalign == 16 ? "" : "; int8 packs 32 along k") + ")");
    // Far beyond any buffer; keeps the footprints' arithmetic in range.
    constexpr std::int64_t kLargest = 4096;
    if (force->m > kLargest || force->n > kLargest || force->k > kLargest)
      throw std::invalid_argument(name + ": at most " + std::to_string(kLargest) +
                                  " along each axis (no L0 buffer holds more)");
  }
  const std::vector<std::int64_t> ms =
      force ? std::vector<std::int64_t>{force->m} : std::vector<std::int64_t>{16, 32, 64, 128, 256, 512};
  const std::vector<std::int64_t> ns =
      force ? std::vector<std::int64_t>{force->n} : std::vector<std::int64_t>{16, 32, 64, 128, 256, 512};
  for (std::int64_t m : ms) {
    if (!force && m > t.M && m != 16) break;
    for (std::int64_t n : ns) {
      if (!force && n > t.N && n != 16) break;
      for (std::int64_t k = force ? force->k : kalign; k <= (force ? force->k : 1024); k *= 2) {
        if (!force && k > t.K && k != kalign) break;
        BufferUse u;
        u.l0a = 2 * m * k * b;
        u.l0b = 2 * k * n * b;
        u.l0c = 2 * m * n * 4;  // fp32 / int32 accumulators
        u.l1 = 2 * static_cast<std::int64_t>(static_cast<double>(m * k) * t.a_gm_factor * static_cast<double>(b) +
                                             static_cast<double>(k * n) * t.b_gm_factor * static_cast<double>(b) + 0.5);
        // The output tile in the UB; a fused epilogue adds its operands' tiles and an fp32
        // working value per element.
        u.ub = 2 * m * n *
               (std::max<std::int64_t>(ob, 2) + d.epilogue_operands * ob + (d.epilogue_ops > 0 ? 4 : 0));
        if (force) {  // refused with the buffer that overflows (below)
          out.use = u;
          t.m_t = m;
          t.n_t = n;
          t.k_t = k;
          break;
        }
        if (u.l0a > cfg.l0a_kib * 1024 || u.l0b > cfg.l0b_kib * 1024 || u.l0c > cfg.l0c_kib * 1024 ||
            u.l1 > cfg.l1_kib * 1024 || u.ub > cfg.ub_kib * 1024)
          continue;
        const double macs = static_cast<double>(m * n * k);
        const double cube = macs / macs_per_cycle;
        const double mte1 =
            (static_cast<double>(m * k) * t.a_mte1_factor + static_cast<double>(k * n) * t.b_mte1_factor) *
            static_cast<double>(b) / static_cast<double>(cfg.mte1_bytes_per_cycle);
        const double mte2 = (static_cast<double>(m * k) * t.a_gm_factor + static_cast<double>(k * n) * t.b_gm_factor) *
                            static_cast<double>(b) / static_cast<double>(cfg.mte2_bytes_per_cycle);
        // Padding waste at the problem's edges counts against a tile.
        const double useful = static_cast<double>(t.M * t.N) / static_cast<double>(round_up(t.M, m) * round_up(t.N, n));
        // So does a last round of tiles that leaves cores idle: the busiest core computes
        // ceil(tiles / cores) tiles while the mean is tiles / cores.
        const std::int64_t out_tiles = t.batch * ceil_div(t.M, m) * ceil_div(t.N, n);
        const double rounds_used =
            out_tiles >= cfg.cores
                ? static_cast<double>(out_tiles) / static_cast<double>(ceil_div(out_tiles, cfg.cores) * cfg.cores)
                : 1.0;
        // Ties on the busiest pipe go to the tile that moves fewer bytes per MAC (less GM pressure).
        const double score =
            macs * useful * rounds_used /
            (std::max({cube, mte1, mte2}) + static_cast<double>(cfg.scalar_tile_cycles) + 0.01 * (mte1 + mte2));
        if (score > best * (1 + 1e-9)) {
          best = score;
          t.m_t = m;
          t.n_t = n;
          t.k_t = k;
          out.use = u;
        }
      }
    }
  }
  if (t.m_t == 0)
    throw std::logic_error("tiler: no 16x16 fractal tile of " + d.to_string() + " fits this core's buffers");

  t.tiles_m = ceil_div(t.M, t.m_t);
  t.tiles_n = ceil_div(t.N, t.n_t);
  t.k_steps = ceil_div(t.K, t.k_t);
  const std::int64_t tiles = t.batch * t.tiles_m * t.tiles_n;  // a batch's products share the blocks
  if (tiles >= cfg.cores) {
    out.blocks = cfg.cores;
    t.tiles_per_block = ceil_div(tiles, cfg.cores);
    t.k_split = 1;
  } else {  // too few output tiles: split K too, partial sums added in a GM workspace
    t.k_split = std::clamp<std::int64_t>(cfg.cores / tiles, 1, t.k_steps);
    // Parts of equal length: as many as have k-steps to do (12 steps in 10 parts: 6 of 2).
    t.k_split = ceil_div(t.k_steps, ceil_div(t.k_steps, t.k_split));
    out.blocks = tiles * t.k_split;
    t.tiles_per_block = 1;
  }
  t.k_steps_per_block = ceil_div(t.k_steps, t.k_split);
  out.c = t;
  check(out.use.l0a, cfg.l0a_kib, "L0A", d);
  check(out.use.l0b, cfg.l0b_kib, "L0B", d);
  check(out.use.l0c, cfg.l0c_kib, "L0C", d);
  check(out.use.l1, cfg.l1_kib, "L1", d);
  check(out.use.ub, cfg.ub_kib, "UB", d);
  return out;
}

// Per main element: operand elements read, results written, Vector element-operations, and the
// distinct instructions an element passes through.
struct Profile {
  std::int64_t elements;
  double read, write, ops;
  std::int64_t instructions;
};

Profile vector_profile(const OpDesc& d) {
  const auto e = static_cast<double>(d.elements);
  const auto out = static_cast<double>(d.out_elements);
  switch (d.kind) {
    case OpKind::Add:
      return {d.elements, 2, 1, 1, 1};
    case OpKind::Mul:
      return {d.elements, 1, 1, 1, 1};
    case OpKind::AddN: {
      const auto n = static_cast<double>(std::max<std::int64_t>(2, d.operands));
      return {d.elements, n, 1, n - 1, std::max<std::int64_t>(1, d.operands - 1)};
    }
    case OpKind::Relu:
      return {d.elements, 1, 1, 1, 1};
    case OpKind::ReluGrad:
      return {d.elements, 2, 1, 2, 2};
    case OpKind::Relu6:
      return {d.elements, 1, 1, 2, 2};
    case OpKind::Relu6Grad:
      return {d.elements, 2, 1, 3, 3};
    case OpKind::Cast:
      return {d.elements, 1, 1, 1, 1};
    case OpKind::BiasAdd:
      return {d.elements, 1, 1, 1, 1};
    case OpKind::BiasAddGrad:
    case OpKind::ReduceSum:
    case OpKind::ReduceMean:
      return {d.elements, 1, out > 0 ? out / e : 0, 1, 1};
    case OpKind::ReduceMeanGrad:
      return {d.elements, out > 0 ? out / e : 0, 1, 1, 1};
    case OpKind::OneHot:
      return {d.elements, out > 0 ? out / e : 0, 1, 1, 1};
    case OpKind::SoftmaxCrossEntropy:
      return {d.elements, 2, out > 0 ? out / e : 0, 5, 5};
    case OpKind::SoftmaxCrossEntropyGrad:
      return {d.elements, 2 + (out > 0 ? out / e : 0), 1, 4, 4};
    case OpKind::Gather:
    case OpKind::AssignAdd:
      return {d.elements, 1, 1, 1, 1};
    case OpKind::Momentum:
      return {d.elements, 3, 2, 4, 4};
    case OpKind::BatchNorm:
      return {d.nchw_elements(), 2, 1, 6, 6};  // statistics pass, then normalise
    case OpKind::BatchNormGrad:
      return {d.nchw_elements(), 4, 1, 8, 8};  // reduce dy and dy*x, then apply
    // BatchNorm as two kernels each way: the same bytes as the one-kernel forms above.
    case OpKind::BNTrainingReduce:  // sum and sum of squares
      return {d.elements, 1, out > 0 ? out / e : 0, 2, 2};
    case OpKind::BNTrainingUpdate:  // (x - mean) * rsqrt(var + eps) * gamma + beta
      return {d.elements, 1, 1, 4, 4};
    case OpKind::BNTrainingUpdateGrad:  // sums of dy and dy * x_hat
      return {d.elements, 2, out > 0 ? out / e : 0, 4, 4};
    case OpKind::BNTrainingReduceGrad:  // gamma * rstd * (dy - mean(dy) - x_hat * mean(dy * x_hat))
      return {d.elements, 2, 1, 6, 6};
    case OpKind::BNInfer:  // (x - mean) * rsqrt(var + eps) * gamma + beta, the statistics known
      return {d.elements, 1, 1, 4, 4};
    case OpKind::TransData:  // a strided copy into the target layout, padding written too
      return {d.elements, 1, out > 0 ? out / e : 1, 1, 1};
    case OpKind::AtomicAddrClean:  // a memset
      return {d.elements, 0, 1, 1, 1};
    case OpKind::FusedElementwise: {  // every operand read once, every result written once
      const auto ops = static_cast<double>(std::max<std::int64_t>(1, d.fused_ops));
      return {d.elements, static_cast<double>(d.operands), static_cast<double>(d.results) + (out > 0 ? out / e : 0),
              ops, std::max<std::int64_t>(1, d.fused_ops)};
    }
    case OpKind::Elementwise: {  // full-size operands and results once each, broadcast ones as small
      const auto ops = static_cast<double>(std::max<std::int64_t>(1, d.fused_ops));
      return {d.elements, static_cast<double>(d.operands) + (out > 0 ? out / e : 0), static_cast<double>(d.results),
              ops, std::max<std::int64_t>(1, d.fused_ops)};
    }
    case OpKind::MaxPool:
    case OpKind::AvgPool:
    case OpKind::MaxPoolGrad:
    case OpKind::AvgPoolGrad: {
      const double in = static_cast<double>(d.nchw_elements());
      const double o = static_cast<double>(d.batch * d.cin * d.conv_out_h() * d.conv_out_w());
      const double window = static_cast<double>(d.kh * d.kw);
      if (d.kind == OpKind::MaxPool || d.kind == OpKind::AvgPool)
        return {d.nchw_elements(), 1, o / in, o * window / in, d.kh * d.kw};
      if (d.kind == OpKind::MaxPoolGrad)  // compare x with y per window, select dy
        return {d.nchw_elements(), 1 + 2 * o / in, 1, 2 * o * window / in, 2 * d.kh * d.kw};
      return {d.nchw_elements(), o / in, 1, o * window / in, d.kh * d.kw};
    }
    default:
      throw std::logic_error("vector_profile: not a Vector op");
  }
}

Tiling tile_vector(const OpDesc& d, const AicoreConfig& cfg, const L0Tile* force) {
  Tiling out;
  const Profile p = vector_profile(d);
  const double ib = static_cast<double>(precision_bytes(d.precision));
  const double ob = static_cast<double>(precision_bytes(d.out_precision));
  VectorTiling v;
  v.elements = p.elements;
  v.read_per_element = p.read;
  v.write_per_element = p.write;
  v.ops_per_element = p.ops;
  v.instructions_per_pass = p.instructions;
  // UB bytes per element: operands in, results out, one fp32 working value.
  const double per_element = p.read * ib + p.write * ob + 4.0;
  const std::int64_t align = 32 / static_cast<std::int64_t>(ib);  // one 32-byte Vector block
  std::int64_t tile = static_cast<std::int64_t>(static_cast<double>(cfg.ub_kib * 1024) / 2.0 / per_element);
  tile = std::max<std::int64_t>(align, tile / align * align);
  if (force) {
    if (force->m < align || force->m % align || force->m > (std::int64_t{1} << 24))
      throw std::invalid_argument("tile of " + std::to_string(force->m) + " elements: give a multiple of " +
                                  std::to_string(align) + " (32 bytes), at most 16777216");
    tile = force->m;
  }
  v.tile_elements = std::min(tile, round_up(p.elements, align));
  v.tiles = ceil_div(p.elements, v.tile_elements);
  out.blocks = std::min(cfg.vector_core_count(), v.tiles);
  v.tiles_per_block = ceil_div(v.tiles, out.blocks);
  out.use.ub = 2 * static_cast<std::int64_t>(static_cast<double>(v.tile_elements) * per_element + 0.5);
  out.v = v;
  check(out.use.ub, cfg.ub_kib, "UB", d);
  return out;
}

}  // namespace

std::string Tiling::describe() const {
  if (attention) {
    const bool fwd = attention == 1;
    return "Br" + std::to_string(c.m_t) + " x Bc" + std::to_string(c.n_t) + " tiles of width " + std::to_string(c.k_t) +
           ", " + std::to_string(c.batch * (fwd ? c.tiles_m : c.tiles_n)) +
           (fwd ? " (head, query tile)" : " (head, key tile)") + " units x " + std::to_string(c.k_steps) +
           (fwd ? " key tiles" : " query tiles");
  }
  if (cube)
    return "m" + std::to_string(c.m_t) + " n" + std::to_string(c.n_t) + " k" + std::to_string(c.k_t) + ", " +
           std::to_string(c.tiles_m * c.tiles_n) + " output tiles x " + std::to_string(c.k_steps) + " k-steps" +
           (c.k_split > 1 ? ", K split " + std::to_string(c.k_split) + " ways" : "");
  return std::to_string(v.tile_elements) + " elements per tile, " + std::to_string(v.tiles) + " tiles";
}

std::int64_t Tiling::tile_count() const { return cube ? c.tiles_m * c.tiles_n * c.k_steps : v.tiles; }

namespace {
/// Fused attention: query tiles of Br rows against key tiles of Bc (128 each, FlashAttention-2's
/// and the Ascend kernel's usual base block; halved while a tile does not fit L0 or the UB). The
/// forward pass gives each block a run of (head, query tile) units, each streaming every key tile
/// (the diagonal's and those below it when causal); the gradient gives each block (head, key tile)
/// units, each streaming the query tiles.
Tiling tile_attention(const OpDesc& d, const AicoreConfig& cfg) {
  Tiling t;
  t.cube = true;
  t.attention = d.kind == OpKind::FlashAttention ? 1 : 2;
  CubeTiling& c = t.c;
  std::int64_t br = 128, bc = 128;
  const std::int64_t D = round_up(d.k, 16);
  auto fits = [&] {
    const std::int64_t q = br * D * 2, k = bc * D * 2, s = br * bc * 4;
    return q <= cfg.l0a_kib * 1024 && k <= cfg.l0b_kib * 1024 && s <= cfg.l0c_kib * 1024 &&
           2 * s + br * D * 4 <= cfg.ub_kib * 1024;
  };
  while (!fits() && br > 16) {
    br /= 2;
    bc /= 2;
  }
  if (!fits())
    throw std::logic_error(std::string(op_kind_name(d.kind)) + ": a head width of " + std::to_string(d.k) +
                           " leaves no 16-row tile that fits L0 and the UB");
  c.batch = std::max<std::int64_t>(1, d.batch);
  c.M = round_up(d.m, 16);
  c.N = round_up(d.n, 16);
  c.K = D;
  c.m_t = std::min(br, c.M);
  c.n_t = std::min(bc, c.N);
  c.k_t = D;
  c.tiles_m = ceil_div(c.M, c.m_t);
  c.tiles_n = ceil_div(c.N, c.n_t);
  const bool forward = d.kind == OpKind::FlashAttention;
  const std::int64_t units = c.batch * (forward ? c.tiles_m : c.tiles_n);
  const std::int64_t across = forward ? c.tiles_n : c.tiles_m;
  c.k_steps = d.causal ? (across + 1 + 1) / 2 : across;  // causal: the mean of 1 .. across, rounded up
  t.blocks = std::min<std::int64_t>(cfg.cores, units);
  c.tiles_per_block = ceil_div(units, t.blocks);
  c.k_steps_per_block = c.k_steps;
  t.use.l0a = c.m_t * D * 2;
  t.use.l0b = c.n_t * D * 2;
  t.use.l0c = c.m_t * c.n_t * 4;
  t.use.ub = 2 * c.m_t * c.n_t * 4 + c.m_t * D * 4;
  return t;
}
}  // namespace

double swept_bytes(double a_bytes, double b_bytes, const CubeDeal::Sweep& sweep, bool along_rows, double l2_bytes) {
  const double held = along_rows ? a_bytes : b_bytes, other = along_rows ? b_bytes : a_bytes;
  const auto bands = static_cast<double>(sweep.bands);
  return (held / bands <= l2_bytes ? held : held * static_cast<double>(sweep.rounds_per_band)) +
         (other <= l2_bytes ? other : other * bands);
}

CubeDeal deal_cube_tiles(const OpDesc& d, const Tiling& tiling, double l2_bytes) {
  const CubeTiling& t = tiling.c;
  const double b = static_cast<double>(precision_bytes(d.precision));
  const double a_item = static_cast<double>(t.m_t * t.k_t) * b * t.a_gm_factor;
  const double b_item = static_cast<double>(t.k_t * t.n_t) * b * t.b_gm_factor;
  CubeDeal deal;
  const std::int64_t active = deal.per_round = std::max<std::int64_t>(1, tiling.blocks / t.k_split);
  std::int64_t rows = 1, cols = std::min(active, t.tiles_n);
  double best = static_cast<double>(rows) * a_item + static_cast<double>(cols) * b_item;
  for (std::int64_t r = 1; r <= std::min(t.tiles_m, active); ++r) {
    const std::int64_t c = ceil_div(active, r);
    if (c > t.tiles_n) continue;
    const double fetched = static_cast<double>(r) * a_item + static_cast<double>(c) * b_item;
    if (fetched < best) {
      best = fetched;
      rows = r;
      cols = c;
    }
  }
  // Bytes of each operand, and what each sweep reads of them from HBM.
  const double a_all = a_item * static_cast<double>(t.tiles_m * t.k_steps);
  const double b_all = b_item * static_cast<double>(t.tiles_n * t.k_steps);
  // A band is as many rows of tiles (columns) as a patch, or as a round holds when it spans more.
  const std::int64_t band_rows = std::min(t.tiles_m, std::max(rows, ceil_div(active, t.tiles_n)));
  const std::int64_t band_cols = std::min(t.tiles_n, std::max(cols, ceil_div(active, t.tiles_m)));
  deal.rows_sweep = {ceil_div(t.tiles_m, band_rows),
                     std::max<std::int64_t>(1, ceil_div(band_rows * t.tiles_n, active))};
  deal.cols_sweep = {ceil_div(t.tiles_n, band_cols),
                     std::max<std::int64_t>(1, ceil_div(band_cols * t.tiles_m, active))};
  const bool along_rows = deal.along_rows = swept_bytes(a_all, b_all, deal.rows_sweep, true, l2_bytes) <=
                                            swept_bytes(a_all, b_all, deal.cols_sweep, false, l2_bytes);
  std::vector<std::int64_t>& order = deal.order;
  order.reserve(static_cast<std::size_t>(t.tiles_m * t.tiles_n));
  auto patch = [&](std::int64_t row, std::int64_t col) {
    for (std::int64_t i = row; i < std::min(t.tiles_m, row + rows); ++i)
      for (std::int64_t j = col; j < std::min(t.tiles_n, col + cols); ++j) order.push_back(i * t.tiles_n + j);
  };
  if (along_rows) {
    for (std::int64_t row = 0; row < t.tiles_m; row += rows)
      for (std::int64_t col = 0; col < t.tiles_n; col += cols) patch(row, col);
  } else {
    for (std::int64_t col = 0; col < t.tiles_n; col += cols)
      for (std::int64_t row = 0; row < t.tiles_m; row += rows) patch(row, col);
  }
  // The busiest block: the position whose tiles hold the most output. Positions repeat every
  // active / gcd(tiles per product, active) products: count that many, scale to the batch.
  const auto per_product = static_cast<std::int64_t>(order.size());
  std::vector<double> work(static_cast<std::size_t>(active), 0.0), m(work), n(work), cnt(work);
  std::vector<double> part_work(work), part_m(work), part_n(work), part_cnt(work);
  const std::int64_t period = active / std::gcd(per_product, active);
  const std::int64_t counted = std::min(t.batch, period), periods = t.batch / counted, rest = t.batch % counted;
  for (std::int64_t bi = 0; bi < counted; ++bi) {
    if (bi == rest) {  // the products after the last whole period
      part_work = work;
      part_m = m;
      part_n = n;
      part_cnt = cnt;
    }
    for (std::int64_t j = 0; j < per_product; ++j) {
      const std::int64_t tile = order[static_cast<std::size_t>(j)];
      const auto at = static_cast<std::size_t>((bi * per_product + j) % active);
      const auto rows_here = static_cast<double>(tile_extent(tile / t.tiles_n, t.m_t, t.M));
      const auto cols_here = static_cast<double>(tile_extent(tile % t.tiles_n, t.n_t, t.N));
      work[at] += rows_here * cols_here;
      m[at] += rows_here;
      n[at] += cols_here;
      cnt[at] += 1;
    }
  }
  for (std::size_t at = 0; at < work.size(); ++at) {
    const auto p = static_cast<double>(periods);
    const bool partial = rest > 0;
    work[at] = work[at] * p + (partial ? part_work[at] : 0.0);
    m[at] = m[at] * p + (partial ? part_m[at] : 0.0);
    n[at] = n[at] * p + (partial ? part_n[at] : 0.0);
    cnt[at] = cnt[at] * p + (partial ? part_cnt[at] : 0.0);
  }
  std::vector<std::int64_t> count(cnt.size());
  for (std::size_t at = 0; at < cnt.size(); ++at) count[at] = static_cast<std::int64_t>(cnt[at] + 0.5);
  const auto at = static_cast<std::size_t>(std::max_element(work.begin(), work.end()) - work.begin());
  deal.busiest = static_cast<std::int64_t>(at);
  deal.busiest_tiles = count[at];
  deal.mean_m = count[at] ? m[at] / static_cast<double>(count[at]) : static_cast<double>(t.m_t);
  deal.mean_n = count[at] ? n[at] / static_cast<double>(count[at]) : static_cast<double>(t.n_t);
  deal.mean_mn = count[at] ? work[at] / static_cast<double>(count[at]) : static_cast<double>(t.m_t * t.n_t);
  // Part 0 of K: full k-steps but the last of K, when it falls in that part.
  const std::int64_t steps = std::min(t.k_steps_per_block, t.k_steps);
  double k = 0;
  for (std::int64_t s = 0; s < steps; ++s) k += static_cast<double>(tile_extent(s, t.k_t, t.K));
  deal.mean_k = k / static_cast<double>(std::max<std::int64_t>(1, steps));
  return deal;
}

std::pair<std::int64_t, std::int64_t> attention_range(const OpDesc& d, const CubeTiling& c, std::int64_t unit) {
  const bool forward = d.kind == OpKind::FlashAttention;
  const std::int64_t own = unit % (forward ? c.tiles_m : c.tiles_n);
  const std::int64_t across = forward ? c.tiles_n : c.tiles_m;
  if (!d.causal) return {0, across};
  if (forward) return {0, std::min(across, own + 1)};
  return {std::min(across - 1, own), across};
}

std::vector<std::vector<std::int64_t>> deal_attention_units(const OpDesc& d, const Tiling& t) {
  const CubeTiling& c = t.c;
  const std::int64_t per_head = d.kind == OpKind::FlashAttention ? c.tiles_m : c.tiles_n;
  std::vector<std::vector<std::int64_t>> dealt(static_cast<std::size_t>(t.blocks));
  std::size_t next = 0;
  auto deal = [&](std::initializer_list<std::int64_t> units) {
    for (std::int64_t u : units) dealt[next].push_back(u);
    next = (next + 1) % dealt.size();
  };
  for (std::int64_t head = 0; head < c.batch; ++head) {
    const std::int64_t first = head * per_head;
    if (!d.causal) {
      for (std::int64_t i = 0; i < per_head; ++i) deal({first + i});
      continue;
    }
    // A unit near the start of the diagonal with one near its end: their lengths add up to the
    // same, so every block gets the same work, and head by head the heads in flight stay few.
    for (std::int64_t i = 0; i < per_head / 2; ++i) deal({first + i, first + per_head - 1 - i});
    if (per_head % 2) deal({first + per_head / 2});
  }
  return dealt;
}

std::vector<std::int64_t> attention_loads(const OpDesc& d, const CubeTiling& c,
                                          const std::vector<std::vector<std::int64_t>>& dealt) {
  std::vector<std::int64_t> loads;
  loads.reserve(dealt.size());
  for (const auto& units : dealt) {
    std::int64_t load = 0;
    for (std::int64_t u : units) {
      const auto r = attention_range(d, c, u);
      load += r.second - r.first;
    }
    loads.push_back(load);
  }
  return loads;
}

Tiling tile_op(const OpDesc& d, const AicoreConfig& cfg, const L0Tile* force) {
  d.validate();
  if (is_attention(d.kind)) {
    if (force) throw std::invalid_argument("a fused attention kernel's tile is its own (Br x Bc); it takes no other");
    return tile_attention(d, cfg);
  }
  return is_cube(d.kind) ? tile_cube(d, cfg, force) : tile_vector(d, cfg, force);
}

}  // namespace ascendsim::aicore
