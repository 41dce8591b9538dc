// What the AI core needs to know about one op to time it: its kind, precision and geometry.
// Independent of any graph IR; the runtime's graph compiler (or `ascendsim op`) fills it in.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace ascendsim::aicore {

enum class OpKind {
  // Cube ops (img2col + fractal GEMM)
  MatMul,                ///< C[m,n] = op(A)[m,k] op(B)[k,n]
  Conv2D,                ///< forward convolution
  Conv2DBackpropInput,   ///< dx from dy and w
  Conv2DBackpropFilter,  ///< dw from dy and x
  // Vector ops (Unified Buffer)
  Add,
  Mul,
  AddN,
  Relu,
  ReluGrad,
  Relu6,      ///< min(max(x, 0), 6)
  Relu6Grad,  ///< dy where 0 < y < 6
  Cast,
  BiasAdd,
  BiasAddGrad,
  ReduceSum,
  ReduceMean,
  ReduceMeanGrad,  ///< broadcast of a mean's gradient
  BatchNorm,       ///< training forward: batch statistics, normalise, scale, shift
  BatchNormGrad,
  MaxPool,
  MaxPoolGrad,
  AvgPool,
  AvgPoolGrad,
  SoftmaxCrossEntropy,
  SoftmaxCrossEntropyGrad,
  OneHot,
  Gather,
  AssignAdd,
  Momentum,  ///< ApplyMomentum
  // The kernels Ascend's backend runs BatchNorm training as, format conversion and workspace
  // clearing (`elements`: of the main operand; `out_elements` as noted).
  BNTrainingReduce,      ///< per-channel sum and sum of squares of x (out_elements: 2 x channels)
  BNTrainingUpdate,      ///< normalise, scale and shift x; update the moving statistics
  BNTrainingUpdateGrad,  ///< per-channel sums of dy and dy*x_hat (out_elements: 2 x channels)
  BNTrainingReduceGrad,  ///< dx from dy, x and the per-channel sums
  BNInfer,               ///< inference: normalise x by the moving statistics, scale and shift
  TransData,             ///< layout conversion (out_elements: elements written, padding included)
  AtomicAddrClean,       ///< zeroes an output that a kernel then accumulates into atomically
  /// Element-wise ops fused into one kernel (graph-kernel fusion): `operands` full-size inputs
  /// read and `results` full-size outputs written once each, `fused_ops` Vector operations per
  /// element, `out_elements` small (per-channel or scalar) results of a fused reduction.
  FusedElementwise,
  /// One element-wise op (activation, broadcasting arithmetic, copy): `operands` full-size inputs
  /// and `results` full-size outputs, `fused_ops` Vector operations per element, `out_elements`
  /// elements of smaller (broadcast) operands read.
  Elementwise,
  /// Fused attention (FlashAttentionScore: Dao et al., "FlashAttention", 2022): per (batch x
  /// head) of `batch`, softmax(Q K^T / sqrt(k)) V for `m` queries against `n` keys of width `k`,
  /// the scores kept on chip tile by tile (online softmax); `causal`: a decoder's mask, the tiles
  /// above the diagonal skipped. Its gradient recomputes the scores from the saved row statistics.
  FlashAttention,
  FlashAttentionGrad,
};
/// The name `ascendsim op --type` takes, e.g. "conv2d_backprop_filter".
const char* op_kind_name(OpKind k);
std::optional<OpKind> parse_op_kind(const std::string& name);
std::vector<OpKind> all_op_kinds();
bool is_cube(OpKind k);
/// The fused attention kernels (Cube and Vector work in one kernel).
bool is_attention(OpKind k);
/// Ops described by an NCHW input (conv, pool, BatchNorm).
bool takes_nchw(OpKind k);

enum class Precision { FP16, FP32, INT8 };
const char* precision_name(Precision p);
std::optional<Precision> parse_precision(const std::string& name);
std::int64_t precision_bytes(Precision p);

struct OpDesc {
  OpKind kind = OpKind::Add;
  Precision precision = Precision::FP16;      ///< compute precision and operand storage
  Precision out_precision = Precision::FP16;  ///< result storage (differs for Cast)
  // MatMul: `batch` independent products (BatchMatMul; 0 or 1: one), each m x k by k x n
  std::int64_t m = 0, n = 0, k = 0;
  bool transpose_a = false, transpose_b = false;
  // Conv, pooling and BatchNorm: NCHW input; conv weight Cout x Cin x kh x kw; pool window kh x kw
  std::int64_t batch = 0, cin = 0, h = 0, w = 0, cout = 0, kh = 0, kw = 0, stride = 1;
  /// Zero padding on each side of the height and of the width axis (ONNX pads [h, w, h, w]).
  std::int64_t pad_h = 0, pad_w = 0;
  // Other vector ops
  std::int64_t elements = 0;  ///< elements of the main operand
  std::int64_t out_elements =
      0;                       ///< elements of a reduced or broadcast side (reductions, BiasAdd channels, softmax rows)
  std::int64_t operands = 2;   ///< AddN arity; full-size inputs of a fused kernel
  std::int64_t results = 1;    ///< full-size outputs of a fused kernel
  std::int64_t fused_ops = 0;  ///< Vector operations per element of a fused kernel
  /// A Cube op with its consumers fused in the Unified Buffer (UB fusion): Vector operations per
  /// result element applied to each output tile in the UB before it is stored, further full-size
  /// operands read per result element (a residual Add's), and per-channel sums accumulated from
  /// the tile (a fused BNTrainingReduce's, fp32). All 0: the plain Cube op.
  std::int64_t epilogue_ops = 0, epilogue_operands = 0, epilogue_sums = 0;
  bool causal = false;  ///< FlashAttention: each query sees the keys up to its own position
  /// FlashAttention: query heads per key/value head (grouped-query attention; `batch` counts the
  /// query heads). The group's heads read the same key and value tiles.
  std::int64_t group = 1;

  bool operator==(const OpDesc& o) const;
  std::size_t hash() const;
  std::string to_string() const;
  /// "P" when both axes pad alike, else "H,W" (as `op --pad` takes it).
  std::string pad_string() const;

  std::int64_t conv_out_h() const { return (h + 2 * pad_h - kh) / stride + 1; }
  std::int64_t conv_out_w() const { return (w + 2 * pad_w - kw) / stride + 1; }
  /// Elements of the NCHW input.
  std::int64_t nchw_elements() const { return batch * cin * h * w; }
  /// Exact multiply-accumulates (0 for vector ops).
  std::int64_t macs() const;
  /// Throws std::invalid_argument naming the field if the geometry is impossible.
  void validate() const;
};

struct OpDescHash {
  std::size_t operator()(const OpDesc& d) const { return d.hash(); }
};

}  // namespace ascendsim::aicore
