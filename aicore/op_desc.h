// What the AI core needs to know about one op to time it: its kind, compute precision and
// geometry. Independent of any graph IR; the runtime's graph compiler fills it in.
#pragma once

#include <cstdint>
#include <string>

namespace ascendsim::aicore {

enum class OpKind {
  MatMul,                ///< C[m,n] = A[m,k] B[k,n] (transposes are a layout matter for the Cube)
  Conv2D,                ///< forward conv, img2col + Cube
  Conv2DBackpropInput,   ///< dx from dy and w
  Conv2DBackpropFilter,  ///< dw from dy and x
  Elementwise,           ///< ReLU, ReluGrad, BiasAdd, AddN, Cast, ...: `passes` Vector passes per element
  Reduce,                ///< BiasAddGrad, mean/sum: reads `elements`, writes `out_elements`
  Pool,                  ///< max/avg pooling: window of `window` elements per output
  PoolGrad,              ///< pooling backward
  SoftmaxCrossEntropy,   ///< forward loss over [rows, classes] (and its grad: `grad`)
  Momentum,              ///< ApplyMomentum over `elements` parameters
};
const char* op_kind_name(OpKind k);

enum class Precision { FP16, FP32, INT8 };
const char* precision_name(Precision p);
std::int64_t precision_bytes(Precision p);

struct OpDesc {
  OpKind kind = OpKind::Elementwise;
  Precision precision = Precision::FP16;      ///< compute precision and operand storage
  Precision out_precision = Precision::FP16;  ///< result storage (differs for Cast)
  // MatMul
  std::int64_t m = 0, n = 0, k = 0;
  // Conv family: forward geometry (NCHW input, Cout x Cin x kh x kw weight)
  std::int64_t batch = 0, cin = 0, h = 0, w = 0, cout = 0, kh = 0, kw = 0, stride = 1, pad = 0;
  // Vector family
  std::int64_t elements = 0;      ///< elements of the largest operand
  std::int64_t out_elements = 0;  ///< elements written
  std::int64_t inputs = 1;        ///< operands of `elements` read
  std::int64_t passes = 1;        ///< Vector instructions per element
  std::int64_t window = 1;        ///< pooling window size
  bool grad = false;

  bool operator==(const OpDesc& o) const;
  std::size_t hash() const;
  std::string to_string() const;

  std::int64_t conv_out_h() const { return (h + 2 * pad - kh) / stride + 1; }
  std::int64_t conv_out_w() const { return (w + 2 * pad - kw) / stride + 1; }
  /// Exact multiply-accumulates of the op (unpadded).
  std::int64_t macs() const;
};

struct OpDescHash {
  std::size_t operator()(const OpDesc& d) const { return d.hash(); }
};

}  // namespace ascendsim::aicore
