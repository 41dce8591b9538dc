#include "aicore/op_desc.h"

#include <functional>
#include <stdexcept>
#include <tuple>

namespace ascendsim::aicore {

namespace {
struct KindName {
  OpKind kind;
  const char* name;
};
constexpr KindName kKinds[] = {
    {OpKind::MatMul, "matmul"},
    {OpKind::Conv2D, "conv2d"},
    {OpKind::Conv2DBackpropInput, "conv2d_backprop_input"},
    {OpKind::Conv2DBackpropFilter, "conv2d_backprop_filter"},
    {OpKind::Add, "add"},
    {OpKind::Mul, "mul"},
    {OpKind::AddN, "addn"},
    {OpKind::Relu, "relu"},
    {OpKind::ReluGrad, "relu_grad"},
    {OpKind::Cast, "cast"},
    {OpKind::BiasAdd, "bias_add"},
    {OpKind::BiasAddGrad, "bias_add_grad"},
    {OpKind::ReduceSum, "reduce_sum"},
    {OpKind::ReduceMean, "reduce_mean"},
    {OpKind::ReduceMeanGrad, "reduce_mean_grad"},
    {OpKind::BatchNorm, "batchnorm"},
    {OpKind::BatchNormGrad, "batchnorm_grad"},
    {OpKind::MaxPool, "maxpool"},
    {OpKind::MaxPoolGrad, "maxpool_grad"},
    {OpKind::AvgPool, "avgpool"},
    {OpKind::AvgPoolGrad, "avgpool_grad"},
    {OpKind::SoftmaxCrossEntropy, "softmax_cross_entropy"},
    {OpKind::SoftmaxCrossEntropyGrad, "softmax_cross_entropy_grad"},
    {OpKind::OneHot, "one_hot"},
    {OpKind::Gather, "gather"},
    {OpKind::AssignAdd, "assign_add"},
    {OpKind::Momentum, "momentum"},
    {OpKind::BNTrainingReduce, "bn_training_reduce"},
    {OpKind::BNTrainingUpdate, "bn_training_update"},
    {OpKind::BNTrainingUpdateGrad, "bn_training_update_grad"},
    {OpKind::BNTrainingReduceGrad, "bn_training_reduce_grad"},
    {OpKind::BNInfer, "bn_infer"},
    {OpKind::Relu6, "relu6"},
    {OpKind::Relu6Grad, "relu6_grad"},
    {OpKind::TransData, "trans_data"},
    {OpKind::AtomicAddrClean, "atomic_addr_clean"},
    {OpKind::FusedElementwise, "fused_elementwise"},
    {OpKind::Elementwise, "elementwise"},
    {OpKind::FlashAttention, "flash_attention"},
    {OpKind::FlashAttentionGrad, "flash_attention_grad"},
};
}  // namespace

const char* op_kind_name(OpKind k) {
  for (const auto& e : kKinds)
    if (e.kind == k) return e.name;
  return "?";
}

std::optional<OpKind> parse_op_kind(const std::string& name) {
  for (const auto& e : kKinds)
    if (name == e.name) return e.kind;
  return std::nullopt;
}

std::vector<OpKind> all_op_kinds() {
  std::vector<OpKind> out;
  for (const auto& e : kKinds) out.push_back(e.kind);
  return out;
}

bool is_cube(OpKind k) {
  return k == OpKind::MatMul || k == OpKind::Conv2D || k == OpKind::Conv2DBackpropInput ||
         k == OpKind::Conv2DBackpropFilter;
}

bool is_attention(OpKind k) { return k == OpKind::FlashAttention || k == OpKind::FlashAttentionGrad; }

bool takes_nchw(OpKind k) {
  return k == OpKind::Conv2D || k == OpKind::Conv2DBackpropInput || k == OpKind::Conv2DBackpropFilter ||
         k == OpKind::BatchNorm || k == OpKind::BatchNormGrad || k == OpKind::MaxPool || k == OpKind::MaxPoolGrad ||
         k == OpKind::AvgPool || k == OpKind::AvgPoolGrad;
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

std::optional<Precision> parse_precision(const std::string& name) {
  for (auto p : {Precision::FP16, Precision::FP32, Precision::INT8})
    if (name == precision_name(p)) return p;
  return std::nullopt;
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
  return std::tie(d.kind, d.precision, d.out_precision, d.m, d.n, d.k, d.transpose_a, d.transpose_b, d.batch, d.cin,
                  d.h, d.w, d.cout, d.kh, d.kw, d.stride, d.pad_h, d.pad_w, d.elements, d.out_elements, d.operands,
                  d.results, d.fused_ops, d.epilogue_ops, d.epilogue_operands, d.epilogue_sums, d.causal, d.group);
}
}  // namespace

std::string OpDesc::pad_string() const {
  return pad_h == pad_w ? std::to_string(pad_h) : std::to_string(pad_h) + "," + std::to_string(pad_w);
}

bool OpDesc::operator==(const OpDesc& o) const { return tie(*this) == tie(o); }

std::size_t OpDesc::hash() const {
  std::size_t acc = (static_cast<std::size_t>(kind) * 31 + static_cast<std::size_t>(precision)) * 31 +
                    static_cast<std::size_t>(out_precision);
  for (std::int64_t v : {m,
                         n,
                         k,
                         static_cast<std::int64_t>(transpose_a),
                         static_cast<std::int64_t>(transpose_b),
                         batch,
                         cin,
                         h,
                         w,
                         cout,
                         kh,
                         kw,
                         stride,
                         pad_h,
                         pad_w,
                         elements,
                         out_elements,
                         operands,
                         results,
                         fused_ops,
                         epilogue_ops,
                         epilogue_operands,
                         epilogue_sums,
                         static_cast<std::int64_t>(causal),
                         group})
    acc = acc * 1000003u ^ std::hash<std::int64_t>()(v);
  return acc;
}

std::int64_t OpDesc::macs() const {
  switch (kind) {
    case OpKind::MatMul:
      return std::max<std::int64_t>(1, batch) * m * n * k;
    case OpKind::FlashAttention:      // QK^T and PV over the (unmasked) score tiles
    case OpKind::FlashAttentionGrad:  // QK^T again, dP, dV, dQ and dK
      return (kind == OpKind::FlashAttention ? 2 : 5) * std::max<std::int64_t>(1, batch) * m * n * k / (causal ? 2 : 1);
    case OpKind::Conv2D:
    case OpKind::Conv2DBackpropInput:
    case OpKind::Conv2DBackpropFilter:
      return batch * conv_out_h() * conv_out_w() * cout * cin * kh * kw;
    default:
      return 0;
  }
}

void OpDesc::validate() const {
  auto positive = [&](std::int64_t v, const char* field) {
    if (v <= 0)
      throw std::invalid_argument(std::string(op_kind_name(kind)) + ": --" + field + " must be positive, got " +
                                  std::to_string(v));
  };
  if (kind == OpKind::MatMul || is_attention(kind)) {
    positive(m, "m");
    positive(n, "n");
    positive(k, "k");
    if (is_attention(kind) && precision == Precision::FP32)
      throw std::invalid_argument(std::string(op_kind_name(kind)) + ": the fused attention kernel runs in fp16");
    if (is_attention(kind) && (group < 1 || std::max<std::int64_t>(1, batch) % group != 0))
      throw std::invalid_argument(std::string(op_kind_name(kind)) + ": --group " + std::to_string(group) +
                                  " must divide the " + std::to_string(std::max<std::int64_t>(1, batch)) +
                                  " query heads (query heads per key/value head)");
    if (is_attention(kind) && causal && m != n)
      throw std::invalid_argument(
          std::string(op_kind_name(kind)) + ": a causal mask here is a decoder's over its own " +
          "sequence: give as many keys as queries (m = n), not " + std::to_string(m) + " and " + std::to_string(n));
  } else if (takes_nchw(kind)) {
    positive(batch, "n");
    positive(cin, "c");
    positive(h, "h");
    positive(w, "w");
    if (kind != OpKind::BatchNorm && kind != OpKind::BatchNormGrad) {
      positive(kh, "r");
      positive(kw, "s");
      positive(stride, "stride");
      if (pad_h < 0 || pad_w < 0) throw std::invalid_argument(std::string(op_kind_name(kind)) + ": --pad must not be negative");
      if (conv_out_h() <= 0 || conv_out_w() <= 0)
        throw std::invalid_argument(std::string(op_kind_name(kind)) + ": window larger than the padded input");
    }
    if (is_cube(kind)) positive(cout, "k");
  } else {
    positive(elements, "elements");
  }
  if (epilogue_ops < 0 || epilogue_operands < 0 || epilogue_sums < 0 ||
      (!is_cube(kind) && (epilogue_ops || epilogue_operands || epilogue_sums)))
    throw std::invalid_argument(std::string(op_kind_name(kind)) +
                                ": a fused epilogue (UB fusion) is a Cube op's, with counts >= 0");
  if (is_cube(kind) && precision == Precision::FP32)
    throw std::invalid_argument(std::string(op_kind_name(kind)) +
                                ": the Cube has no fp32 mode; use fp16 (Ascend casts fp32 Cube operands to fp16)");
  const std::string name = op_kind_name(kind);
  if (takes_nchw(kind) && kind != OpKind::BatchNorm && kind != OpKind::BatchNormGrad && (pad_h >= kh || pad_w >= kw))
    throw std::invalid_argument(name + ": --pad " + pad_string() + " must be smaller than the window (" +
                                std::to_string(kh) + "x" + std::to_string(kw) + ")");
  // Sizes the model's integer arithmetic holds exactly: every operand at most 2^40 elements (far
  // beyond any device memory), at most 2^60 multiply-accumulates.
  constexpr std::int64_t kMaxElements = std::int64_t{1} << 40, kMaxMacs = std::int64_t{1} << 60;
  auto product = [&](std::initializer_list<std::int64_t> factors, std::int64_t limit, const char* what) {
    std::int64_t p = 1;
    for (std::int64_t f : factors)
      if (f > 0 && (__builtin_mul_overflow(p, f, &p) || p > limit))
        throw std::invalid_argument(name + ": " + what + " exceeds the 2^" +
                                    std::to_string(63 - __builtin_clzll(limit)) +
                                    " the model holds; use smaller dimensions");
    return p;
  };
  if (kind == OpKind::MatMul || is_attention(kind)) {
    if (batch < 0) throw std::invalid_argument(name + ": --batch must not be negative");  // 0 or 1: one product
    product({batch, m, k}, kMaxElements, "A's element count");
    product({batch, k, n}, kMaxElements, "B's element count");
    product({batch, m, n}, kMaxElements, "the result's element count");
    product({batch, m, n, k}, kMaxMacs, "the multiply-accumulate count");
  } else if (takes_nchw(kind)) {
    product({batch, cin, h, w}, kMaxElements, "the input's element count");
    if (is_cube(kind)) {
      product({cout, cin, kh, kw}, kMaxElements, "the weight's element count");
      product({batch, cout, conv_out_h(), conv_out_w()}, kMaxElements, "the output's element count");
      product({batch, conv_out_h(), conv_out_w(), cout, cin, kh, kw}, kMaxMacs, "the multiply-accumulate count");
    }
  } else {
    product({elements}, kMaxElements, "--elements");
    if (operands > 64) throw std::invalid_argument(name + ": --operands " + std::to_string(operands) + " exceeds 64");
    switch (kind) {  // ops whose second size is a part of the first: channels, rows, reduced groups
      case OpKind::BiasAdd:
      case OpKind::BiasAddGrad:
      case OpKind::ReduceSum:
      case OpKind::ReduceMean:
      case OpKind::ReduceMeanGrad:
      case OpKind::SoftmaxCrossEntropy:
      case OpKind::SoftmaxCrossEntropyGrad:
      case OpKind::OneHot:
        if (out_elements <= 0 || out_elements > elements || elements % out_elements != 0)
          throw std::invalid_argument(name + ": --out-elements " + std::to_string(out_elements) +
                                      " must divide --elements " + std::to_string(elements) +
                                      " (the reduced side is a part of the main operand)");
        break;
      default:
        break;
    }
  }
}

std::string OpDesc::to_string() const {
  std::string s = std::string(op_kind_name(kind)) + "/" + precision_name(precision);
  if (out_precision != precision) s += std::string("->") + precision_name(out_precision);
  const std::string epilogue =
      epilogue_ops || epilogue_operands || epilogue_sums
          ? " +ub(ops=" + std::to_string(epilogue_ops) + " in=" + std::to_string(epilogue_operands) +
                " sums=" + std::to_string(epilogue_sums) + ")"
          : std::string();
  if (is_attention(kind))
    return s + " heads=" + std::to_string(std::max<std::int64_t>(1, batch)) + " m=" + std::to_string(m) +
           " n=" + std::to_string(n) + " k=" + std::to_string(k) + (causal ? " causal" : "") +
           (group > 1 ? " group=" + std::to_string(group) : std::string());
  if (kind == OpKind::MatMul)
    return s + (batch > 1 ? " batch=" + std::to_string(batch) : std::string()) + " m=" + std::to_string(m) +
           " n=" + std::to_string(n) + " k=" + std::to_string(k) + (transpose_a ? " ta" : "") +
           (transpose_b ? " tb" : "") + epilogue;
  if (takes_nchw(kind)) {
    s += " n=" + std::to_string(batch) + " c=" + std::to_string(cin) + " h=" + std::to_string(h) +
         " w=" + std::to_string(w);
    if (is_cube(kind)) s += " k=" + std::to_string(cout);
    if (kind != OpKind::BatchNorm && kind != OpKind::BatchNormGrad)
      s += " r=" + std::to_string(kh) + " s=" + std::to_string(kw) + " stride=" + std::to_string(stride) +
           " pad=" + pad_string();
    return s + epilogue;
  }
  return s + " elements=" + std::to_string(elements) +
         (out_elements ? " out=" + std::to_string(out_elements) : std::string());
}

}  // namespace ascendsim::aicore
