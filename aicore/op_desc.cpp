#include "aicore/op_desc.h"

#include <functional>
#include <tuple>

namespace ascendsim::aicore {

const char* op_kind_name(OpKind k) {
  switch (k) {
    case OpKind::MatMul:
      return "matmul";
    case OpKind::Conv2D:
      return "conv2d";
    case OpKind::Conv2DBackpropInput:
      return "conv2d_backprop_input";
    case OpKind::Conv2DBackpropFilter:
      return "conv2d_backprop_filter";
    case OpKind::Elementwise:
      return "elementwise";
    case OpKind::Reduce:
      return "reduce";
    case OpKind::Pool:
      return "pool";
    case OpKind::PoolGrad:
      return "pool_grad";
    case OpKind::SoftmaxCrossEntropy:
      return "softmax_cross_entropy";
    case OpKind::Momentum:
      return "momentum";
  }
  return "?";
}

const char* precision_name(Precision p) {
  switch (p) {
    case Precision::FP16:
      return "fp16";
    case Precision::FP32:
      return "fp32";
    case Precision::INT8:
      return "int8";
  }
  return "?";
}

std::int64_t precision_bytes(Precision p) {
  switch (p) {
    case Precision::FP16:
      return 2;
    case Precision::FP32:
      return 4;
    case Precision::INT8:
      return 1;
  }
  return 0;
}

namespace {
auto tie(const OpDesc& d) {
  return std::tie(d.kind, d.precision, d.out_precision, d.m, d.n, d.k, d.batch, d.cin, d.h, d.w, d.cout, d.kh, d.kw, d.stride, d.pad,
                  d.elements, d.out_elements, d.inputs, d.passes, d.window, d.grad);
}
}  // namespace

bool OpDesc::operator==(const OpDesc& o) const { return tie(*this) == tie(o); }

std::size_t OpDesc::hash() const {
  std::size_t h_acc = (static_cast<std::size_t>(kind) * 31 + static_cast<std::size_t>(precision)) * 31 +
                      static_cast<std::size_t>(out_precision);
  for (std::int64_t v : {m, n, k, batch, cin, h, w, cout, kh, kw, stride, pad, elements, out_elements, inputs, passes,
                         window, static_cast<std::int64_t>(grad)})
    h_acc = h_acc * 1000003u ^ std::hash<std::int64_t>()(v);
  return h_acc;
}

std::int64_t OpDesc::macs() const {
  switch (kind) {
    case OpKind::MatMul:
      return m * n * k;
    case OpKind::Conv2D:
    case OpKind::Conv2DBackpropInput:
    case OpKind::Conv2DBackpropFilter:
      return batch * conv_out_h() * conv_out_w() * cout * cin * kh * kw;
    default:
      return 0;
  }
}

std::string OpDesc::to_string() const {
  std::string s = std::string(op_kind_name(kind)) + "/" + precision_name(precision);
  switch (kind) {
    case OpKind::MatMul:
      return s + " m=" + std::to_string(m) + " n=" + std::to_string(n) + " k=" + std::to_string(k);
    case OpKind::Conv2D:
    case OpKind::Conv2DBackpropInput:
    case OpKind::Conv2DBackpropFilter:
      return s + " n=" + std::to_string(batch) + " c=" + std::to_string(cin) + " h=" + std::to_string(h) +
             " w=" + std::to_string(w) + " k=" + std::to_string(cout) + " r=" + std::to_string(kh) +
             " s=" + std::to_string(kw) + " stride=" + std::to_string(stride) + " pad=" + std::to_string(pad);
    default:
      return s + " elements=" + std::to_string(elements);
  }
}

}  // namespace ascendsim::aicore
