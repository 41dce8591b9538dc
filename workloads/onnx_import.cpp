#include "workloads/onnx_import.h"

#include <onnx/onnx_pb.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <numeric>
#include <optional>
#include <set>
#include <sstream>
#include <vector>

#include "workloads/dataset.h"
#include "workloads/kernels.h"
#include "workloads/op_registry.h"
#include "workloads/op_rules.h"
#include "workloads/training.h"

namespace ascendsim::workloads {

namespace {

[[noreturn]] void fail(const std::string& what) { throw std::invalid_argument(what); }

/// A value known at import: an initializer, a Constant node's value or a folded result. Its
/// numbers are kept when small or integral (shapes, axes, bounds); a weight keeps its shape only.
struct Const {
  Shape shape;
  int elem_type = onnx::TensorProto::FLOAT;
  std::optional<std::vector<double>> data;
  bool initializer = false;        ///< from the graph's initializers (a weight, unless scalar)
  std::int64_t elements() const {  // every Const's shape is checked when made (checked_elements)
    std::int64_t n = 1;
    for (auto d : shape) n *= d;
    return n;
  }
};

bool is_float(int t) {
  return t == onnx::TensorProto::FLOAT || t == onnx::TensorProto::FLOAT16 || t == onnx::TensorProto::DOUBLE ||
         t == onnx::TensorProto::BFLOAT16;
}
bool is_integer(int t) {
  return t == onnx::TensorProto::INT64 || t == onnx::TensorProto::INT32 || t == onnx::TensorProto::INT16 ||
         t == onnx::TensorProto::INT8 || t == onnx::TensorProto::UINT8 || t == onnx::TensorProto::BOOL;
}

constexpr std::int64_t kMaxDataElements = 1 << 16;  // numbers kept of a float constant
constexpr std::int64_t kMaxFoldElements = 1 << 24;  // of a constant computed at import (a mask of 4096^2)
constexpr std::int64_t kMaxDim = std::int64_t{1} << 31;
constexpr std::int64_t kMaxElements = std::int64_t{1} << 40;  // of any tensor

/// A constant's number as a whole number (a shape, an axis, an index).
std::int64_t whole(double d, const std::string& where) {
  if (!(std::fabs(d) <= static_cast<double>(kMaxElements)))
    fail(where + ": the constant " + std::to_string(d) + " is not a usable size or index");
  return static_cast<std::int64_t>(d);
}

/// The elements of `shape`, every dimension 0 to 2^31 and the product at most 2^40.
std::int64_t checked_elements(const Shape& shape, const std::string& where) {
  std::int64_t n = 1;
  for (auto d : shape) {
    if (d < 0 || d > kMaxDim) fail(where + ": dimension " + std::to_string(d) + " in " + shape_string(shape));
    if (__builtin_mul_overflow(n, d, &n) || n > kMaxElements)
      fail(where + ": a tensor of " + shape_string(shape) + " has more elements than a device holds");
  }
  return n;
}

/// The `n` values of a tensor stored as T: its little-endian raw bytes, or its typed field.
template <typename T, typename Out, typename Field>
std::vector<Out> values_of(const std::string& raw, const Field& field, std::int64_t n, const std::string& where) {
  std::vector<Out> v;
  if (raw.empty()) {
    for (auto x : field) v.push_back(static_cast<Out>(static_cast<T>(x)));
  } else {
    if (raw.size() != static_cast<std::size_t>(n) * sizeof(T))
      fail(where + ": raw data of " + std::to_string(raw.size()) + " bytes for " + std::to_string(n) +
           " elements (truncated?)");
    v.resize(static_cast<std::size_t>(n));
    for (std::size_t k = 0; k < v.size(); ++k) {
      T x;
      std::memcpy(&x, raw.data() + k * sizeof(T), sizeof(T));
      v[k] = static_cast<Out>(x);
    }
  }
  if (static_cast<std::int64_t>(v.size()) != n)
    fail(where + ": " + std::to_string(v.size()) + " values for " + std::to_string(n) + " elements (truncated?)");
  return v;
}

/// Checks that a tensor in the file holds a value per element (its raw bytes or its typed field),
/// whether or not its values are read: one rule for every mode and size.
void check_data_length(const onnx::TensorProto& t, std::int64_t n, const std::string& where) {
  std::int64_t bytes = 4, stored = t.int32_data_size();  // int32, int16, int8, uint8, bool, fp16, bf16: int32_data
  switch (t.data_type()) {
    case onnx::TensorProto::FLOAT:
      stored = t.float_data_size();
      break;
    case onnx::TensorProto::DOUBLE:
      bytes = 8, stored = t.double_data_size();
      break;
    case onnx::TensorProto::INT64:
      bytes = 8, stored = t.int64_data_size();
      break;
    case onnx::TensorProto::INT16:
    case onnx::TensorProto::FLOAT16:
    case onnx::TensorProto::BFLOAT16:
      bytes = 2;
      break;
    case onnx::TensorProto::INT8:
    case onnx::TensorProto::UINT8:
    case onnx::TensorProto::BOOL:
      bytes = 1;
      break;
    default:
      break;
  }
  if (!t.raw_data().empty()) {
    if (t.raw_data().size() != static_cast<std::size_t>(n * bytes))
      fail(where + ": raw data of " + std::to_string(t.raw_data().size()) + " bytes for " + std::to_string(n) +
           " elements of " + std::to_string(bytes) + " bytes (truncated?)");
  } else if (stored != n) {
    fail(where + ": " + std::to_string(stored) + " values for " + std::to_string(n) + " elements (truncated?)");
  }
}

Const read_tensor(const onnx::TensorProto& t, const std::string& where) {
  Const c;
  c.elem_type = t.data_type();
  c.shape.assign(t.dims().begin(), t.dims().end());
  const std::int64_t n = checked_elements(c.shape, where);
  if (!is_float(c.elem_type) && !is_integer(c.elem_type))
    fail(where + ": tensor type " + std::to_string(c.elem_type) + " (" +
         onnx::TensorProto::DataType_Name(static_cast<onnx::TensorProto::DataType>(c.elem_type)) +
         ") is not supported");
  if (t.data_location() == onnx::TensorProto::EXTERNAL) return c;  // a weight in a side file: its shape suffices
  check_data_length(t, n, where);
  if (is_float(c.elem_type) && n > kMaxDataElements) return c;
  const std::string& raw = t.raw_data();
  switch (c.elem_type) {
    case onnx::TensorProto::FLOAT:
      c.data = values_of<float, double>(raw, t.float_data(), n, where);
      break;
    case onnx::TensorProto::DOUBLE:
      c.data = values_of<double, double>(raw, t.double_data(), n, where);
      break;
    case onnx::TensorProto::INT64:
      c.data = values_of<std::int64_t, double>(raw, t.int64_data(), n, where);
      break;
    case onnx::TensorProto::INT32:
      c.data = values_of<std::int32_t, double>(raw, t.int32_data(), n, where);
      break;
    case onnx::TensorProto::INT8:
      c.data = values_of<std::int8_t, double>(raw, t.int32_data(), n, where);
      break;
    case onnx::TensorProto::BOOL:
    case onnx::TensorProto::UINT8:
      c.data = values_of<std::uint8_t, double>(raw, t.int32_data(), n, where);
      break;
    default:
      break;  // fp16, bf16, int16: the shape only
  }
  return c;
}

/// Every value of a float initializer, for functional mode (fp32 or fp64 data in the file).
std::vector<float> float_values(const onnx::TensorProto& t, const std::string& file) {
  const std::string where = file + ": initializer '" + t.name() + "'";
  if (t.data_location() == onnx::TensorProto::EXTERNAL)
    fail(where + ": its values are in an external file, which functional mode does not read");
  std::int64_t n = 1;
  for (auto d : t.dims()) n *= d;  // checked by read_tensor
  if (t.data_type() == onnx::TensorProto::FLOAT) return values_of<float, float>(t.raw_data(), t.float_data(), n, where);
  if (t.data_type() == onnx::TensorProto::DOUBLE)
    return values_of<double, float>(t.raw_data(), t.double_data(), n, where);
  fail(where + ": functional mode reads fp32 initializers; this one is " +
       onnx::TensorProto::DataType_Name(static_cast<onnx::TensorProto::DataType>(t.data_type())));
}

/// The ops computed at import when every input is a known constant (some only then: Constant,
/// Shape, Gather, Slice, ConstantOfShape have no handler of their own).
const std::set<std::string> kFoldable = {
    "Constant", "Shape", "Gather", "Unsqueeze", "Squeeze", "Concat",          "Cast",    "Reshape", "Slice", "Identity",
    "Add",      "Sub",   "Mul",    "Div",       "Equal",   "ConstantOfShape", "Flatten", "Where",   "Range", "Expand",
    "Sin",      "Cos",   "Neg",    "Sqrt",      "Pow"};

/// Numpy broadcasting of two shapes; fails naming `where` when they do not broadcast.
Shape broadcast_of(const Shape& a, const Shape& b, const std::string& where) {
  try {
    return rules::broadcast_shape(a, b);
  } catch (const std::invalid_argument& e) {
    fail(where + ": " + e.what());
  }
}

/// The values of a constant of shape `from` broadcast to `to` (row-major).
std::vector<double> broadcast_values(const std::vector<double>& v, const Shape& from, const Shape& to) {
  std::vector<double> out;
  for (auto i : broadcast_index(from, to)) out.push_back(v[static_cast<std::size_t>(i)]);
  return out;
}

const onnx::AttributeProto* find_attr(const onnx::NodeProto& n, const std::string& name) {
  for (const auto& a : n.attribute())
    if (a.name() == name) return &a;
  return nullptr;
}

class Importer {
 public:
  Importer(const std::string& file, const onnx::ModelProto& m, const OnnxOptions& o, OnnxSummary& s)
      : m_file(file), m_model(m), m_opt(o), m_sum(s) {}

  Workload run();

 private:
  using Handler = std::function<void(const onnx::NodeProto&)>;

  // ---- values ---------------------------------------------------------------------------------
  struct Value {
    TensorId tensor = -1;
    std::optional<Const> c;
    bool unknown = false;  ///< computed by a node that is refused: what reads it is not checked
  };
  /// Thrown when a node reads a value of a refused node: not a problem of its own.
  struct Downstream {};

  std::string where(const onnx::NodeProto& n) const {
    return m_file + ": node '" + (n.name().empty() ? n.op_type() : n.name()) + "' (" + n.op_type() + ")";
  }
  std::string op_name(const onnx::NodeProto& n) const {
    std::string s = n.name().empty() ? n.op_type() + "_" + std::to_string(m_node_index) : n.name();
    if (!s.empty() && s[0] == '/') s.erase(0, 1);
    return s;
  }

  const Value& value(const onnx::NodeProto& n, int i) const {
    if (i >= n.input_size() || n.input(i).empty()) fail(where(n) + ": input " + std::to_string(i) + " is missing");
    const auto it = m_values.find(n.input(i));
    if (it == m_values.end()) fail(where(n) + ": input '" + n.input(i) + "' is not produced before it is read");
    if (it->second.unknown) throw Downstream{};
    return it->second;
  }
  bool has_input(const onnx::NodeProto& n, int i) const { return i < n.input_size() && !n.input(i).empty(); }
  bool is_const(const onnx::NodeProto& n, int i) const { return value(n, i).c.has_value(); }
  const Const& constant(const onnx::NodeProto& n, int i, bool with_data = true) const {
    const Value& v = value(n, i);
    if (!v.c) fail(where(n) + ": input '" + n.input(i) + "' must be a constant known at import");
    if (with_data && !v.c->data) fail(where(n) + ": input '" + n.input(i) + "' must be a constant with its values");
    return *v.c;
  }
  /// The initializer a value is (through Identity or a float Cast), or the value's own name.
  const std::string& source(const std::string& name) const {
    const auto it = m_alias.find(name);
    return it == m_alias.end() ? name : it->second;
  }
  /// Output 0 of `n` is its input 0, a weight: the same initializer, read as a constant and as the
  /// one parameter (PyTorch's eval export writes initializers of equal values once, and the other
  /// readers read it through an Identity: the zero biases of a fresh network's folded BatchNorms).
  bool pass_weight(const onnx::NodeProto& n) {
    if (!has_input(n, 0) || n.output_size() < 1 || n.output(0).empty()) return false;
    const std::string& from = source(n.input(0));
    if (!m_weights.count(from)) return false;
    Value v = value(n, 0);
    m_values[n.output(0)] = std::move(v);
    m_alias[n.output(0)] = from;
    return true;
  }
  void set(const onnx::NodeProto& n, int out, TensorId t) {
    if (out < n.output_size() && !n.output(out).empty()) m_values[n.output(out)] = Value{t, std::nullopt};
  }
  void set(const onnx::NodeProto& n, int out, Const c) {
    checked_elements(c.shape, where(n));
    if (out < n.output_size() && !n.output(out).empty()) m_values[n.output(out)] = Value{-1, std::move(c)};
  }

  /// A graph tensor for input i: a computed tensor as it is; an initializer as a parameter in the
  /// master precision cast to the compute precision (once per initializer); another constant as
  /// a constant tensor in the compute precision.
  TensorId tensor(const onnx::NodeProto& n, int i, bool decayed = false) {
    const Value& v = value(n, i);
    if (v.tensor >= 0) return v.tensor;
    const std::string& name = source(n.input(i));
    if (auto it = m_consts.find(name); it != m_consts.end()) return it->second;
    const Const& c = *v.c;
    if (!is_float(c.elem_type)) fail(where(n) + ": integer constant '" + name + "' used as a tensor");
    TensorId t;
    if (c.initializer && m_weights.count(name)) {  // one element too: a bias (find_weights)
      const TensorId p = m_g.add_tensor({name, c.shape, m_master, TensorRole::Parameter});
      if (decayed) m_decayed.insert(p);
      t = m_master == m_compute ? p : m_g.cast(name + "/Cast", p, m_compute);
    } else {
      t = m_g.add_tensor({name, c.shape.empty() ? Shape{1} : c.shape, m_compute, TensorRole::Constant});
      if (m_opt.values) {
        if (!c.data) fail(where(n) + ": the values of constant '" + name + "' cannot be read");
        m_values_out[name] = std::vector<float>(c.data->begin(), c.data->end());
      }
    }
    m_consts[name] = t;
    return t;
  }
  /// An initializer as a parameter of `shape` (its own elements) in the master precision.
  TensorId master_param(const onnx::NodeProto& n, int i, Shape shape, TensorRole role, DType dtype) {
    const Const& c = constant(n, i, false);
    if (!c.initializer) fail(where(n) + ": input '" + n.input(i) + "' must be an initializer");
    Shape want = shape;
    std::int64_t e = 1;
    for (auto d : want) e *= d;
    if (e != c.elements())
      fail(where(n) + ": '" + n.input(i) + "' is " + shape_string(c.shape) + ", expected " + shape_string(shape));
    const std::string& name = source(n.input(i));
    if (role == TensorRole::Parameter && std::find(m_opt.frozen.begin(), m_opt.frozen.end(), name) != m_opt.frozen.end())
      role = TensorRole::Constant;  // frozen: not trained
    return m_g.add_tensor({name, std::move(shape), dtype, role});
  }
  const Shape& shape_of(TensorId t) const { return m_g.tensor(t).shape; }

  // ---- attributes -----------------------------------------------------------------------------
  std::int64_t attr_int(const onnx::NodeProto& n, const std::string& a, std::int64_t def) const {
    const auto* p = find_attr(n, a);
    return p ? p->i() : def;
  }
  double attr_float(const onnx::NodeProto& n, const std::string& a, double def) const {
    const auto* p = find_attr(n, a);
    return p ? p->f() : def;
  }
  std::vector<std::int64_t> attr_ints(const onnx::NodeProto& n, const std::string& a) const {
    std::vector<std::int64_t> v;
    if (const auto* p = find_attr(n, a)) v.assign(p->ints().begin(), p->ints().end());
    return v;
  }
  std::string attr_string(const onnx::NodeProto& n, const std::string& a, const std::string& def) const {
    const auto* p = find_attr(n, a);
    return p ? p->s() : def;
  }
  /// An int list given as an attribute (older opsets) or as constant input `i` (newer ones).
  /// `bounds`: a slice's starts or ends, where PyTorch writes "to the end" as INT64_MAX (clamped).
  std::vector<std::int64_t> ints_attr_or_input(const onnx::NodeProto& n, const std::string& a, int i,
                                               bool bounds = false) const {
    const double big = static_cast<double>(kMaxElements);
    std::vector<std::int64_t> v;
    if (find_attr(n, a)) {
      v = attr_ints(n, a);
      if (bounds)
        for (auto& x : v) x = std::clamp<std::int64_t>(x, -kMaxElements, kMaxElements);
      return v;
    }
    if (has_input(n, i))
      for (double d : *constant(n, i).data) v.push_back(whole(bounds ? std::clamp(d, -big, big) : d, where(n)));
    return v;
  }

  /// A 2-D window's stride (equal on both axes) and its padding, the same on both sides of each
  /// axis (pads [h, w, h, w]); anything else is an error. `kh`, `kw`: the window (a convolution's
  /// weight gives it).
  void window(const onnx::NodeProto& n, std::int64_t kh, std::int64_t kw, std::int64_t& stride, std::int64_t& pad_h,
              std::int64_t& pad_w, std::int64_t in_h, std::int64_t in_w) {
    const std::string auto_pad = attr_string(n, "auto_pad", "NOTSET");
    auto s = attr_ints(n, "strides");
    if (s.empty()) s = {1, 1};
    for (auto v : s)
      if (v < 1 || v > kMaxDim)
        fail(where(n) + ": strides " + shape_string(s) + ": a stride must be a positive number of pixels (1 to 2^31)");
    if (s.size() != 2 || s[0] != s[1]) fail(where(n) + ": equal strides on both axes are supported, " + shape_string(s));
    stride = s[0];
    for (auto d : attr_ints(n, "dilations"))
      if (d != 1) fail(where(n) + ": dilations other than 1 are not supported");
    auto p = attr_ints(n, "pads");
    if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
      auto same = [&](std::int64_t in, std::int64_t k) {
        return std::max<std::int64_t>(0, (in + stride - 1) / stride * stride - stride + k - in);
      };
      const std::int64_t th = same(in_h, kh), tw = same(in_w, kw);
      if (th % 2 || tw % 2) fail(where(n) + ": auto_pad " + auto_pad + " pads one side more than the other here");
      p = {th / 2, tw / 2, th / 2, tw / 2};
    } else if (auto_pad == "VALID") {
      p = {0, 0, 0, 0};
    } else if (auto_pad != "NOTSET") {
      fail(where(n) + ": auto_pad '" + auto_pad + "' is not an ONNX value");
    }
    if (p.empty()) p = {0, 0, 0, 0};
    for (auto v : p)
      if (v < 0 || v > kMaxDim) fail(where(n) + ": pads " + shape_string(p) + ": padding must be 0 to 2^31 pixels");
    if (p.size() != 4 || p[0] != p[2] || p[1] != p[3])
      fail(where(n) + ": the same padding at both ends of each axis is supported (pads [h, w, h, w]), pads " +
           shape_string(p));
    pad_h = p[0];
    pad_w = p[1];
    if (pad_h >= kh || pad_w >= kw)
      fail(where(n) + ": pads " + shape_string(p) + " not below the window " + std::to_string(kh) + "x" +
           std::to_string(kw));
  }

  /// A pooling window: square, its padding equal on every side; or rectangular and spanning the
  /// whole unpadded input (a global pool: TextCNN's max over the sentence), whatever its strides.
  void pool_window(const onnx::NodeProto& n, PoolAttr& a, std::int64_t in_h, std::int64_t in_w) {
    const auto k = attr_ints(n, "kernel_shape");
    if (k.size() == 2 && k[0] != k[1] && k[0] == in_h && k[1] == in_w) {
      const auto p = attr_ints(n, "pads");
      const std::string auto_pad = attr_string(n, "auto_pad", "NOTSET");
      for (auto d : attr_ints(n, "dilations"))
        if (d != 1) fail(where(n) + ": dilations other than 1 are not supported");
      if (std::any_of(p.begin(), p.end(), [](std::int64_t v) { return v != 0; }) ||
          (auto_pad != "NOTSET" && auto_pad != "VALID"))
        fail(where(n) + ": a rectangular window spanning the input is supported without padding, pads " +
             shape_string(p));
      a.kernel = k[0];
      a.kernel_w = k[1];
      a.stride = 1;  // one window: no stride
      a.pad = 0;
      return;
    }
    if (k.size() != 2 || k[0] != k[1])
      fail(where(n) + ": a square 2-D window, or one spanning the whole input (a global pool), is supported, "
           "kernel_shape " + shape_string(k) + " over " + std::to_string(in_h) + "x" + std::to_string(in_w));
    a.kernel = k[0];
    if (a.kernel < 1 || a.kernel > kMaxDim) fail(where(n) + ": kernel_shape " + shape_string(k) + " out of range");
    std::int64_t pad_w = 0;
    window(n, a.kernel, a.kernel, a.stride, a.pad, pad_w, in_h, in_w);
    if (pad_w != a.pad)
      fail(where(n) + ": a pool's padding must be equal on every side, pads " + shape_string(attr_ints(n, "pads")));
  }

  TensorId reshape(const onnx::NodeProto& n, TensorId x, const Shape& s, const std::string& suffix = "/Reshape") {
    if (shape_of(x) == s) return x;
    return m_g.reshape(op_name(n) + suffix, x, s);
  }

  // ---- the handlers ---------------------------------------------------------------------------
  void install();
  void fold(const onnx::NodeProto& n);
  bool foldable(const onnx::NodeProto& n) const;
  void refuse(const onnx::NodeProto& n);
  void find_weights();
  Workload build();
  std::string types_message() const;
  void batch_norm(const onnx::NodeProto& n);
  DataRecipe data_for(const Shape& input, std::int64_t classes, bool eval) const;
  DataRecipe sequence_data(const Shape& input, bool per_token, std::int64_t classes, bool eval) const;

  const std::string& m_file;
  const onnx::ModelProto& m_model;
  const OnnxOptions& m_opt;
  OnnxSummary& m_sum;
  Graph m_g;
  DType m_compute = DType::F32, m_master = DType::F32;
  bool m_bn_fp32 = true;
  std::map<std::string, Value> m_values;
  std::map<std::string, TensorId> m_consts;
  std::map<std::string, std::string> m_alias;  // an Identity's (a float Cast's) output -> the weight it is
  std::map<std::string, std::vector<float>> m_values_out;  // OnnxOptions::values
  std::set<TensorId> m_decayed;
  std::set<std::string> m_weights;  // the initializers that are trained (find_weights)
  std::map<std::string, Handler> m_handlers;
  std::int64_t m_batch = 0;
  int m_node_index = 0;
  std::map<std::string, std::string> m_unsupported;  // operator type -> its first node
  std::map<std::string, std::int64_t> m_pad_for_pool;  // a zero Pad's output -> its padding, for the pool reading it
  bool m_listed = false;                             // the refusal lists every blocker
};

// Whether `n` is folded: a kFoldable op whose inputs are all constants with their values.
bool Importer::foldable(const onnx::NodeProto& n) const {
  if (!kFoldable.count(n.op_type())) return false;
  if (n.op_type() == "Constant") return true;
  for (int i = 0; i < n.input_size(); ++i) {
    if (n.input(i).empty()) continue;
    if (m_weights.count(source(n.input(i))) && n.op_type() != "Shape") return false;  // a weight is trained, not folded
    const auto it = m_values.find(n.input(i));
    if (it != m_values.end() && it->second.unknown) return false;  // the handler's read reports it
    if (n.op_type() == "Shape") return true;  // static shapes: the shape of any value is known
    if (it == m_values.end() || !it->second.c || !it->second.c->data) return false;
  }
  return true;
}

// The initializers that are trained weights: every float initializer of more than one element an
// op reads, except the ones `frozen` names and the masks — what flows, through ops of constants
// (Slice, Reshape, Unsqueeze, Squeeze, Cast, Expand, Gather), only into the condition of a Where
// or an Equal (a causal mask buffer of ones), or holds non-finite values (an additive mask of
// -inf). Masks are constants, folded where an op of constants reads them.
void Importer::find_weights() {
  const auto& g = m_model.graph();
  std::map<std::string, const onnx::TensorProto*> inits;
  for (const auto& t : g.initializer())
    if (is_float(t.data_type())) inits[t.name()] = &t;
  std::map<std::string, std::vector<std::pair<const onnx::NodeProto*, int>>> readers;
  for (const auto& n : g.node())
    for (int i = 0; i < n.input_size(); ++i)
      if (!n.input(i).empty()) readers[n.input(i)].emplace_back(&n, i);
  const std::set<std::string> passing = {"Slice", "Reshape", "Unsqueeze", "Squeeze",
                                         "Cast",  "Expand",  "Gather",    "Identity"};
  // Whether value `v` flows only into conditions (a mask), through ops that pass it on.
  std::function<bool(const std::string&, int)> mask_only = [&](const std::string& v, int depth) {
    const auto it = readers.find(v);
    if (it == readers.end() || depth > 16) return false;
    for (const auto& [n, i] : it->second) {
      if (n->op_type() == "Equal" || (n->op_type() == "Where" && i == 0)) continue;
      if (!passing.count(n->op_type()) || i != 0) return false;
      for (const auto& o : n->output())
        if (!o.empty() && !mask_only(o, depth + 1)) return false;
    }
    return true;
  };
  for (const auto& [name, t] : inits) {
    std::int64_t elements = 1;
    for (auto d : t->dims()) elements *= d;
    if (elements < 1 || !readers.count(name)) continue;
    // One element is a constant (an epsilon, a scale), unless it is a layer's weight or bias: the
    // bias of a convolution of one output channel (SRCNN's last), of a dense layer of one output.
    if (elements == 1 && std::none_of(readers.at(name).begin(), readers.at(name).end(), [](const auto& r) {
          const std::string& op = r.first->op_type();
          return r.second >= 1 && (op == "Conv" || op == "ConvTranspose" || op == "Gemm");
        }))
      continue;
    if (std::find(m_opt.frozen.begin(), m_opt.frozen.end(), name) != m_opt.frozen.end()) continue;
    if (mask_only(name, 0)) continue;
    // An op's weight (a product's, a convolution's, a norm's, a lookup table) is never a mask:
    // only the others' values are scanned for -inf (a model's weights are not decoded twice).
    const bool weight = std::any_of(readers.at(name).begin(), readers.at(name).end(), [](const auto& r) {
      static const std::set<std::string> weighted = {
          "MatMul", "Gemm", "Conv", "ConvTranspose", "BatchNormalization", "LayerNormalization", "Transpose", "Gather"};
      return weighted.count(r.first->op_type()) > 0;
    });
    if (!weight && t->data_location() != onnx::TensorProto::EXTERNAL &&
        (t->data_type() == onnx::TensorProto::FLOAT || t->data_type() == onnx::TensorProto::DOUBLE)) {
      const auto v = float_values(*t, m_file);
      if (std::any_of(v.begin(), v.end(), [](float x) { return !std::isfinite(x); })) continue;
    }
    m_weights.insert(name);
  }
  for (const auto& f : m_opt.frozen)
    if (!inits.count(f)) fail(m_file + ": frozen initializer '" + f + "' is not a float initializer of the model");
}

// A refused node's outputs: unknown, so that the nodes reading them are not checked (ONNX's own
// shape inference could give their shapes, but libonnx's divides by a zero stride, for one).
void Importer::refuse(const onnx::NodeProto& n) {
  for (const auto& o : n.output())
    if (!o.empty()) m_values[o] = Value{-1, std::nullopt, true};
}

void Importer::fold(const onnx::NodeProto& n) {
  const std::string& t = n.op_type();
  ++m_sum.folded_nodes;
  auto ints = [&](const Const& c) {
    std::vector<std::int64_t> v;
    for (double d : *c.data) v.push_back(whole(d, where(n)));
    return v;
  };
  auto int_const = [](const std::vector<std::int64_t>& v, Shape shape) {
    Const c;
    c.elem_type = onnx::TensorProto::INT64;
    c.shape = std::move(shape);
    c.data = std::vector<double>(v.begin(), v.end());
    return c;
  };
  if (t == "Constant") {
    const auto* a = find_attr(n, "value");
    if (a && a->has_t()) return set(n, 0, read_tensor(a->t(), where(n)));
    if ((a = find_attr(n, "value_float"))) {
      Const c;
      c.data = std::vector<double>{a->f()};
      return set(n, 0, c);
    }
    if ((a = find_attr(n, "value_int"))) return set(n, 0, int_const({a->i()}, {}));
    if ((a = find_attr(n, "value_ints")))
      return set(n, 0, int_const({a->ints().begin(), a->ints().end()}, {a->ints_size()}));
    fail(where(n) + ": a Constant without a supported value attribute");
  }
  if (t == "Shape") {
    const Value& v = value(n, 0);
    const Shape s = v.tensor >= 0 ? shape_of(v.tensor) : v.c->shape;
    return set(n, 0, int_const(s, {static_cast<std::int64_t>(s.size())}));
  }
  const Const& a = constant(n, 0);
  if (t == "Identity" || t == "Cast") {
    Const c = a;
    if (t == "Cast") c.elem_type = static_cast<int>(attr_int(n, "to", onnx::TensorProto::FLOAT));
    if (t == "Cast" && is_integer(c.elem_type))
      for (auto& d : *c.data) d = std::trunc(d);
    c.initializer = false;
    return set(n, 0, c);
  }
  if (t == "ConstantOfShape") {
    std::vector<std::int64_t> s = ints(a);
    Const c;
    c.shape = s;
    double fill = 0;
    if (const auto* v = find_attr(n, "value"); v && v->has_t()) {
      Const f = read_tensor(v->t(), where(n));
      c.elem_type = f.elem_type;
      if (f.data && !f.data->empty()) fill = (*f.data)[0];
    }
    if (checked_elements(c.shape, where(n)) > kMaxFoldElements) fail(where(n) + ": a constant too large to fold");
    c.data = std::vector<double>(static_cast<std::size_t>(c.elements()), fill);
    return set(n, 0, c);
  }
  const auto rank = static_cast<std::int64_t>(a.shape.size());
  auto axis_of = [&](std::int64_t ax, std::int64_t r) {
    if (ax < 0) ax += r;
    if (ax < 0 || ax >= r) fail(where(n) + ": axis out of range");
    return ax;
  };
  if (t == "Gather") {
    const Const& idx = constant(n, 1);
    const std::int64_t ax = axis_of(attr_int(n, "axis", 0), rank);
    Shape s;
    for (std::int64_t k = 0; k < ax; ++k) s.push_back(a.shape[static_cast<std::size_t>(k)]);
    for (auto d : idx.shape) s.push_back(d);
    for (std::int64_t k = ax + 1; k < rank; ++k) s.push_back(a.shape[static_cast<std::size_t>(k)]);
    std::int64_t outer = 1, inner = 1;
    for (std::int64_t k = 0; k < ax; ++k) outer *= a.shape[static_cast<std::size_t>(k)];
    for (std::int64_t k = ax + 1; k < rank; ++k) inner *= a.shape[static_cast<std::size_t>(k)];
    const std::int64_t dim = a.shape[static_cast<std::size_t>(ax)];
    Const c;
    c.elem_type = a.elem_type;
    c.shape = s;
    std::vector<double> v;
    for (std::int64_t o = 0; o < outer; ++o)
      for (double id : *idx.data) {
        auto i = whole(id, where(n));
        if (i < 0) i += dim;
        if (i < 0 || i >= dim) fail(where(n) + ": index " + std::to_string(i) + " out of range");
        for (std::int64_t in = 0; in < inner; ++in)
          v.push_back((*a.data)[static_cast<std::size_t>((o * dim + i) * inner + in)]);
      }
    c.data = std::move(v);
    return set(n, 0, c);
  }
  if (t == "Unsqueeze" || t == "Squeeze" || t == "Reshape" || t == "Flatten") {
    Const c = a;
    c.initializer = false;
    if (t == "Flatten") {
      const std::int64_t ax = attr_int(n, "axis", 1) < 0 ? attr_int(n, "axis", 1) + rank : attr_int(n, "axis", 1);
      std::int64_t lo = 1, hi = 1;
      for (std::int64_t k = 0; k < rank; ++k) (k < ax ? lo : hi) *= a.shape[static_cast<std::size_t>(k)];
      c.shape = {lo, hi};
    } else if (t == "Reshape") {
      c.shape.clear();
      for (auto d : ints(constant(n, 1))) c.shape.push_back(d);
      std::int64_t known = 1, infer = -1;
      for (std::size_t k = 0; k < c.shape.size(); ++k) {
        if (c.shape[k] == 0 && k < a.shape.size()) c.shape[k] = a.shape[k];
        if (c.shape[k] == -1)
          infer = static_cast<std::int64_t>(k);
        else if (c.shape[k] < 0 || __builtin_mul_overflow(known, c.shape[k], &known) || known > kMaxElements)
          fail(where(n) + ": the shape " + shape_string(c.shape) + " is not a usable shape");
      }
      if (infer >= 0) c.shape[static_cast<std::size_t>(infer)] = known ? a.elements() / known : 0;
    } else {
      auto axes = ints_attr_or_input(n, "axes", 1);
      if (t == "Unsqueeze") {
        const auto r = rank + static_cast<std::int64_t>(axes.size());
        for (auto& x : axes) x = axis_of(x, r);
        std::sort(axes.begin(), axes.end());
        if (std::adjacent_find(axes.begin(), axes.end()) != axes.end()) fail(where(n) + ": an axis given twice");
        for (auto x : axes) c.shape.insert(c.shape.begin() + x, 1);
      } else {
        for (auto& x : axes) x = axis_of(x, rank);
        Shape s;
        for (std::int64_t k = 0; k < rank; ++k) {
          const bool drop =
              axes.empty() ? a.shape[static_cast<std::size_t>(k)] == 1 : std::count(axes.begin(), axes.end(), k) > 0;
          if (!drop) s.push_back(a.shape[static_cast<std::size_t>(k)]);
        }
        c.shape = s;
      }
    }
    if (c.elements() != a.elements()) fail(where(n) + ": the new shape changes the element count");
    return set(n, 0, c);
  }
  if (t == "Concat") {
    // Along any axis (a rotary table's two halves): per index of the axes before it, each input's
    // block in turn.
    const std::int64_t ax = axis_of(attr_int(n, "axis", 0), rank);
    std::int64_t outer = 1, inner = 1;
    for (std::int64_t k = 0; k < ax; ++k) outer *= a.shape[static_cast<std::size_t>(k)];
    for (std::int64_t k = ax + 1; k < rank; ++k) inner *= a.shape[static_cast<std::size_t>(k)];
    Const c = a;
    c.initializer = false;
    c.data = std::vector<double>{};
    c.shape[static_cast<std::size_t>(ax)] = 0;
    for (int i = 0; i < n.input_size(); ++i) {
      const Const& x = constant(n, i);
      if (x.shape.size() != a.shape.size()) fail(where(n) + ": constants of different ranks");
      for (std::int64_t k = 0; k < rank; ++k)
        if (k != ax && x.shape[static_cast<std::size_t>(k)] != a.shape[static_cast<std::size_t>(k)])
          fail(where(n) + ": constants differ beyond the axis");
      c.shape[static_cast<std::size_t>(ax)] += x.shape[static_cast<std::size_t>(ax)];
    }
    for (std::int64_t o = 0; o < outer; ++o)
      for (int i = 0; i < n.input_size(); ++i) {
        const Const& x = constant(n, i);
        const std::int64_t block = x.shape[static_cast<std::size_t>(ax)] * inner;
        c.data->insert(c.data->end(), x.data->begin() + o * block, x.data->begin() + (o + 1) * block);
      }
    return set(n, 0, c);
  }
  if (t == "Slice") {  // any axes, step 1 (a causal mask cut to the sequence)
    auto starts = ints_attr_or_input(n, "starts", 1, true), ends = ints_attr_or_input(n, "ends", 2, true);
    auto axes = ints_attr_or_input(n, "axes", 3);
    auto steps = has_input(n, 4) ? ints(constant(n, 4)) : std::vector<std::int64_t>(starts.size(), 1);
    if (axes.empty())
      for (std::size_t k = 0; k < starts.size(); ++k) axes.push_back(static_cast<std::int64_t>(k));
    if (ends.size() != starts.size() || axes.size() != starts.size() || steps.size() != starts.size())
      fail(where(n) + ": starts, ends, axes and steps of different lengths");
    Shape lo(a.shape.size(), 0), hi = a.shape;
    for (std::size_t k = 0; k < starts.size(); ++k) {
      const std::int64_t ax = axis_of(axes[k], rank), len = a.shape[static_cast<std::size_t>(ax)];
      if (steps[k] != 1) fail(where(n) + ": constants are sliced with step 1");
      auto clamp = [len](std::int64_t v) { return std::clamp<std::int64_t>(v < 0 ? v + len : v, 0, len); };
      lo[static_cast<std::size_t>(ax)] = clamp(starts[k]);
      hi[static_cast<std::size_t>(ax)] = std::max(lo[static_cast<std::size_t>(ax)], clamp(ends[k]));
    }
    Const c = a;
    c.initializer = false;
    c.shape.clear();
    for (std::size_t k = 0; k < lo.size(); ++k) c.shape.push_back(hi[k] - lo[k]);
    std::vector<double> v;
    std::vector<std::int64_t> at(lo.size(), 0);
    for (std::int64_t i = 0; i < c.elements(); ++i) {
      std::int64_t src = 0;  // row-major index in a of lo + at
      for (std::size_t k = 0; k < lo.size(); ++k) src = src * a.shape[k] + lo[k] + at[k];
      v.push_back((*a.data)[static_cast<std::size_t>(src)]);
      for (std::size_t k = lo.size(); k-- > 0;)
        if (++at[k] < c.shape[k])
          break;
        else
          at[k] = 0;
    }
    c.data = std::move(v);
    return set(n, 0, c);
  }
  if (t == "Sin" || t == "Cos" || t == "Neg" || t == "Sqrt") {  // rotary tables computed at export
    Const c = a;
    c.initializer = false;
    for (auto& x : *c.data) x = t == "Sin" ? std::sin(x) : t == "Cos" ? std::cos(x) : t == "Neg" ? -x : std::sqrt(x);
    return set(n, 0, c);
  }
  if (t == "Pow") {  // numpy broadcasting (10000 ** (arange(0, d, 2) / d))
    const Const& e = constant(n, 1);
    const Shape s = broadcast_of(a.shape, e.shape, where(n));
    if (checked_elements(s, where(n)) > kMaxFoldElements) fail(where(n) + ": a constant too large to fold");
    const auto av = broadcast_values(*a.data, a.shape, s), ev = broadcast_values(*e.data, e.shape, s);
    Const c = a;
    c.initializer = false;
    c.shape = s;
    c.data = std::vector<double>(av.size());
    for (std::size_t k = 0; k < av.size(); ++k) (*c.data)[k] = std::pow(av[k], ev[k]);
    return set(n, 0, c);
  }
  if (t == "Range") {
    const double start = a.data->at(0), limit = constant(n, 1).data->at(0), delta = constant(n, 2).data->at(0);
    if (delta == 0) fail(where(n) + ": a range with step 0");
    Const c = a;
    c.initializer = false;
    c.data = std::vector<double>{};
    for (double x = start; delta > 0 ? x < limit : x > limit; x += delta) c.data->push_back(x);
    c.shape = {static_cast<std::int64_t>(c.data->size())};
    return set(n, 0, c);
  }
  if (t == "Expand") {  // a constant broadcast to a shape
    const auto want = ints(constant(n, 1));
    const Shape s = broadcast_of(a.shape, Shape(want.begin(), want.end()), where(n));
    if (checked_elements(s, where(n)) > kMaxFoldElements) fail(where(n) + ": a constant too large to fold");
    Const c = a;
    c.initializer = false;
    c.shape = s;
    c.data = broadcast_values(*a.data, a.shape, s);
    return set(n, 0, c);
  }
  if (t == "Where") {
    const Const& x = constant(n, 1);
    const Const& y = constant(n, 2);
    Shape s = broadcast_of(broadcast_of(a.shape, x.shape, where(n)), y.shape, where(n));
    if (checked_elements(s, where(n)) > kMaxFoldElements) fail(where(n) + ": a constant too large to fold");
    const auto cv = broadcast_values(*a.data, a.shape, s), xv = broadcast_values(*x.data, x.shape, s),
               yv = broadcast_values(*y.data, y.shape, s);
    Const c = x;
    c.initializer = false;
    c.shape = s;
    c.data = std::vector<double>(cv.size());
    for (std::size_t k = 0; k < cv.size(); ++k) (*c.data)[k] = cv[k] != 0 ? xv[k] : yv[k];
    return set(n, 0, c);
  }
  // Add, Sub, Mul, Div on constants, broadcast as numpy.
  const Const& b = constant(n, 1);
  const Shape bs = broadcast_of(a.shape, b.shape, where(n));  // numpy broadcasting ([1, S] - [S, 1]: [S, S])
  if (checked_elements(bs, where(n)) > kMaxFoldElements) fail(where(n) + ": a constant too large to fold");
  const std::vector<double> av = broadcast_values(*a.data, a.shape, bs), bv = broadcast_values(*b.data, b.shape, bs);
  Const c = a.elements() >= b.elements() ? a : b;
  c.shape = bs;
  c.data = std::vector<double>(av.size());
  c.initializer = false;
  const bool integral = is_integer(a.elem_type) && is_integer(b.elem_type);
  if (t == "Equal") c.elem_type = onnx::TensorProto::BOOL;
  for (std::size_t k = 0; k < c.data->size(); ++k) {
    const double x = av[k], y = bv[k];
    double r = t == "Add" ? x + y : t == "Sub" ? x - y : t == "Mul" ? x * y : t == "Equal" ? double(x == y) : 0;
    if (t == "Div") {
      if (y == 0) fail(where(n) + ": division by zero in a constant");
      r = integral ? std::trunc(x / y) : x / y;
    }
    (*c.data)[k] = r;
  }
  set(n, 0, c);
}

void Importer::batch_norm(const onnx::NodeProto& n) {
  TensorId x = tensor(n, 0);
  const Shape xs = shape_of(x);
  if (xs.size() != 4) fail(where(n) + ": BatchNormalization of an NCHW input is supported, got " + shape_string(xs));
  if (m_opt.values) {  // the values: functional mode's BatchNorm kernel has MindSpore's constants
    const double eps = attr_float(n, "epsilon", 1e-5), momentum = attr_float(n, "momentum", 0.9);
    if (std::fabs(eps - 1e-5) > 1e-9 || std::fabs(momentum - 0.9) > 1e-6)
      fail(where(n) + ": epsilon " + std::to_string(eps) + " and momentum " + std::to_string(momentum) +
           ": functional mode computes BatchNorm with epsilon 1e-5 and momentum 0.9 (PyTorch's 0.1), as MindSpore");
  }
  const Shape c{xs[1]};
  const TensorId gamma = master_param(n, 1, c, TensorRole::Parameter, m_master);
  const TensorId beta = master_param(n, 2, c, TensorRole::Parameter, m_master);
  const TensorId mean = master_param(n, 3, c, TensorRole::State, DType::F32);
  const TensorId var = master_param(n, 4, c, TensorRole::State, DType::F32);
  for (int k = 1; k < n.output_size(); ++k)
    if (!n.output(k).empty()) m_values.erase(n.output(k));  // the running statistics: updated in place
  const std::string name = op_name(n);
  TensorId y;
  if (!m_bn_fp32 || m_compute == DType::F32) {
    y = m_g.batch_norm(name + "/BatchNorm", x, gamma, beta, mean, var);
  } else {
    const TensorId x32 = m_g.cast(name + "/CastIn", x, DType::F32);
    y = m_g.cast(name + "/CastOut", m_g.batch_norm(name + "/BatchNorm", x32, gamma, beta, mean, var), m_compute);
  }
  set(n, 0, y);
}

void Importer::install() {
  auto& h = m_handlers;
  h["Conv"] = [this](const onnx::NodeProto& n) {
    const TensorId x = tensor(n, 0);
    const Const& wc = constant(n, 1, false);
    const Shape xs = shape_of(x);
    if (xs.size() != 4 || wc.shape.size() != 4)
      fail(where(n) + ": a 2-D convolution (NCHW input, OIHW weight) is supported");
    const std::int64_t group = attr_int(n, "group", 1);
    ConvAttr a{wc.shape[2], wc.shape[3], 1, 0, 0};
    if (!attr_ints(n, "kernel_shape").empty() &&
        attr_ints(n, "kernel_shape") != std::vector<std::int64_t>{wc.shape[2], wc.shape[3]})
      fail(where(n) + ": kernel_shape differs from the weight's");
    window(n, a.kernel_h, a.kernel_w, a.stride, a.pad_h, a.pad_w, xs[2], xs[3]);
    const TensorId w = tensor(n, 1, true);
    const std::string name = op_name(n);
    TensorId y;
    if (group != 1 && (group < 1 || xs[1] % group || wc.shape[0] % group || wc.shape[1] * group != xs[1]))
      fail(where(n) + ": group " + std::to_string(group) + " of " + std::to_string(xs[1]) +
           " input channels with a weight " + shape_string(wc.shape) +
           ": the group must divide the input and output channels, the weight being [Cout, Cin/group, kh, kw]");
    if (group == 1) {
      y = m_g.conv2d(name + "/Conv2D", x, w, a);
    } else if (group == xs[1] && wc.shape[0] == xs[1]) {  // one filter per channel
      OpAttrs at;
      at.conv = a;
      y = m_g.apply("DepthwiseConv2dNative", name + "/DepthwiseConv2dNative", {x, w}, at)[0];
    } else {  // a grouped convolution: G GEMMs of Cin/G to Cout/G channels on the Cube
      a.group = group;
      y = m_g.conv2d(name + "/Conv2D", x, w, a);
    }
    if (has_input(n, 2)) {
      const Const& bc = constant(n, 2, false);
      if (bc.elements() != wc.shape[0]) fail(where(n) + ": the bias is not one per output channel");
      y = m_g.bias_add(name + "/BiasAdd", y, tensor(n, 2));
    }
    set(n, 0, y);
  };
  h["ConvTranspose"] = [this](const onnx::NodeProto& n) {
    const TensorId x = tensor(n, 0);
    const Const& wc = constant(n, 1, false);
    const Shape xs = shape_of(x);
    if (xs.size() != 4 || wc.shape.size() != 4 || wc.shape[0] != xs[1])
      fail(where(n) + ": a 2-D transposed convolution (NCHW input, [Cin, Cout, kh, kw] weight) is supported");
    if (attr_int(n, "group", 1) != 1) fail(where(n) + ": a grouped transposed convolution is not supported");
    if (!attr_ints(n, "output_shape").empty()) fail(where(n) + ": output_shape is not supported; give pads");
    if (wc.shape[2] != wc.shape[3]) fail(where(n) + ": a square kernel is supported");
    const std::int64_t kernel = wc.shape[2];
    ConvAttr a{wc.shape[2], wc.shape[3], 1, 0, 0};
    window(n, a.kernel_h, a.kernel_w, a.stride, a.pad_h, a.pad_w, xs[2], xs[3]);
    if (a.pad_h != a.pad_w) fail(where(n) + ": a transposed convolution's padding must be equal on both axes");
    auto op = attr_ints(n, "output_padding");
    if (op.empty()) op = {0, 0};
    if (op.size() != 2 || op[0] != op[1] || op[0] < 0 || op[0] >= a.stride)
      fail(where(n) + ": output_padding must be equal on both axes and below the stride");
    const std::int64_t ho = (xs[2] - 1) * a.stride - 2 * a.pad_h + kernel + op[0];
    const std::int64_t wo = (xs[3] - 1) * a.stride - 2 * a.pad_w + kernel + op[1];
    if (ho <= 0 || wo <= 0) fail(where(n) + ": the output would be empty");
    const std::string name = op_name(n);
    TensorId y =
        m_g.conv2d_backprop_input(name + "/Conv2DTranspose", x, tensor(n, 1, true), {xs[0], wc.shape[1], ho, wo}, a);
    if (has_input(n, 2)) y = m_g.bias_add(name + "/BiasAdd", y, tensor(n, 2));
    set(n, 0, y);
  };
  auto dense = [this](const onnx::NodeProto& n, bool gemm) {
    const TensorId x = tensor(n, 0);
    const bool trans_b = gemm && attr_int(n, "transB", 0);
    if (gemm && (attr_int(n, "transA", 0) || attr_float(n, "alpha", 1) != 1 || attr_float(n, "beta", 1) != 1))
      fail(where(n) + ": Gemm with transA, alpha or beta other than 1 is not supported");
    const TensorId w = tensor(n, 1, true);
    const Shape xs = shape_of(x), ws = shape_of(w);
    const std::string name = op_name(n);
    if (!gemm && xs.size() >= 3 && ws.size() == xs.size()) {  // batched: attention's QK^T and PV
      if (!std::equal(xs.begin(), xs.end() - 2, ws.begin()))
        fail(where(n) + ": a batched product needs equal batch axes, got " + shape_string(xs) + " x " +
             shape_string(ws) + " (broadcast batch axes are not supported)");
      OpAttrs a;
      return set(n, 0, m_g.apply("BatchMatMul", name + "/BatchMatMul", {x, w}, a)[0]);
    }
    if (!gemm && xs.size() >= 3 && ws.size() == 2) {  // [..., K] x [K, N]: the rows of every leading axis
      std::int64_t rows = 1;
      for (std::size_t k = 0; k + 1 < xs.size(); ++k) rows *= xs[k];
      const TensorId x2 = reshape(n, x, {rows, xs.back()}, "/Reshape");
      TensorId y = m_g.matmul(name + "/MatMul", x2, w, {false, false}, TensorRole::Activation);
      Shape ys = xs;
      ys.back() = ws[1];
      return set(n, 0, reshape(n, y, ys, "/ReshapeBack"));
    }
    if (xs.size() != 2 || ws.size() != 2)
      fail(where(n) + ": a product of matrices, of a batch of them, or of rows by a matrix is supported, got " +
           shape_string(xs) + " x " + shape_string(ws));
    TensorId y = m_g.matmul(name + "/MatMul", x, w, {false, trans_b}, TensorRole::Activation);
    if (gemm && has_input(n, 2)) {
      const Value& bv = value(n, 2);
      const std::int64_t out = shape_of(y)[1];
      if (bv.c && bv.c->initializer && bv.c->elements() == out) {
        const TensorId b = master_param(n, 2, {out}, TensorRole::Parameter, m_master);
        y = m_g.bias_add(name + "/BiasAdd", y, m_master == m_compute ? b : m_g.cast(name + "/CastB", b, m_compute));
      } else {
        y = m_g.add(name + "/Add", y, tensor(n, 2));
      }
    }
    set(n, 0, y);
  };
  h["Gemm"] = [dense](const onnx::NodeProto& n) { dense(n, true); };
  h["MatMul"] = [dense](const onnx::NodeProto& n) { dense(n, false); };
  h["Relu"] = [this](const onnx::NodeProto& n) { set(n, 0, m_g.relu(op_name(n) + "/ReLU", tensor(n, 0))); };
  auto unary = [this](const std::string& type) {
    return [this, type](const onnx::NodeProto& n) {
      OpAttrs a;
      if (type == "HSigmoid") {
        a.alpha = attr_float(n, "alpha", 0.2);
        a.beta = attr_float(n, "beta", 0.5);
      }
      set(n, 0, m_g.apply(type, op_name(n) + "/" + type, {tensor(n, 0)}, a)[0]);
    };
  };
  h["Sigmoid"] = unary("Sigmoid");
  h["HardSigmoid"] = unary("HSigmoid");
  h["HardSwish"] = unary("HSwish");
  h["Neg"] = unary("Neg");
  h["Tanh"] = unary("Tanh");
  h["Sqrt"] = unary("Sqrt");
  h["Erf"] = unary("Erf");
  // A power by a constant: the square and cube a LayerNorm, an RMSNorm or a tanh GeLU writes out
  // (Mul), the square root (Sqrt).
  h["Pow"] = [this](const onnx::NodeProto& n) {
    const TensorId x = tensor(n, 0);
    const Const& e = constant(n, 1);
    if (e.elements() != 1) fail(where(n) + ": a power by one constant exponent is supported");
    const double p = e.data->at(0);
    const std::string name = op_name(n);
    if (p == 1) return set(n, 0, x);
    if (p == 0.5) return set(n, 0, m_g.apply("Sqrt", name + "/Sqrt", {x})[0]);
    if (p != 2 && p != 3) fail(where(n) + ": powers 0.5, 1, 2 and 3 are supported, got " + std::to_string(p));
    TensorId y = m_g.mul(name + "/Square", x, x, TensorRole::Activation);
    if (p == 3) y = m_g.mul(name + "/Cube", y, x, TensorRole::Activation);
    set(n, 0, y);
  };
  h["LayerNormalization"] = [this](const onnx::NodeProto& n) {
    const TensorId x = tensor(n, 0);
    const Shape xs = shape_of(x);
    std::int64_t axis = attr_int(n, "axis", -1);
    if (axis < 0) axis += static_cast<std::int64_t>(xs.size());
    if (axis != static_cast<std::int64_t>(xs.size()) - 1)
      fail(where(n) + ": normalisation over the last axis is supported, axis " + std::to_string(axis));
    const Shape width{xs.back()};
    const TensorId gamma = tensor(n, 1);
    TensorId beta;
    if (has_input(n, 2)) {
      beta = tensor(n, 2);
    } else {  // no bias: zeros
      beta = m_g.add_tensor({op_name(n) + ".zero_bias", width, m_compute, TensorRole::Constant});
      if (m_opt.values)
        m_values_out[op_name(n) + ".zero_bias"] = std::vector<float>(static_cast<std::size_t>(width[0]), 0);
    }
    if (shape_of(gamma) != width || shape_of(beta) != width)
      fail(where(n) + ": a scale and a bias of " + shape_string(width) + " expected");
    OpAttrs a;
    a.alpha = attr_float(n, "epsilon", 1e-5);  // the kernel's epsilon (functional mode)
    const auto out = m_g.apply("LayerNorm", op_name(n) + "/LayerNorm", {x, gamma, beta}, a);
    for (int k = 0; k < 3; ++k) set(n, k, out[static_cast<std::size_t>(k)]);
  };
  // Expand of a weight or a computed tensor (ViT's class token to the batch): an Add of zeros of the
  // shape, whose gradient sums back over the broadcast axes.
  h["Expand"] = [this](const onnx::NodeProto& n) {
    const TensorId x = tensor(n, 0);
    Shape want;
    for (double d : *constant(n, 1).data) want.push_back(whole(d, where(n)));
    const Shape s = broadcast_of(shape_of(x), want, where(n));
    if (s == shape_of(x)) return set(n, 0, x);
    const std::string name = op_name(n) + ".zeros";
    const TensorId zeros = m_g.add_tensor({name, s, m_g.tensor(x).dtype, TensorRole::Constant});
    if (m_opt.values)
      m_values_out[name] = std::vector<float>(static_cast<std::size_t>(m_g.tensor(zeros).elements()), 0);
    set(n, 0, m_g.add(op_name(n) + "/BroadcastTo", x, zeros));
  };
  // An embedding: the rows of a [V, H] weight at integer ids (the input's, or constant positions).
  h["Gather"] = [this](const onnx::NodeProto& n) {
    const Value& table = value(n, 0);
    if (table.tensor >= 0) {  // one position of a computed tensor (ViT's class token: x[:, 0])
      const TensorId x = table.tensor;
      Shape xs = shape_of(x);
      const Const& idx = constant(n, 1);
      auto axis = attr_int(n, "axis", 0);
      if (axis < 0) axis += static_cast<std::int64_t>(xs.size());
      if (axis < 0 || axis >= static_cast<std::int64_t>(xs.size()) || idx.elements() != 1)
        fail(where(n) + ": one constant index of a computed tensor, or rows of an embedding, are supported");
      const std::int64_t dim = xs[static_cast<std::size_t>(axis)];
      std::int64_t i = whole(idx.data->at(0), where(n));
      if (i < 0) i += dim;
      if (i < 0 || i >= dim) fail(where(n) + ": index " + std::to_string(i) + " out of range");
      OpAttrs a;
      a.axis = axis;
      a.count = i;
      a.shape = xs;
      a.shape[static_cast<std::size_t>(axis)] = 1;
      TensorId y = m_g.apply("StridedSlice", op_name(n) + "/StridedSlice", {x}, a)[0];
      Shape ys = a.shape;
      if (idx.shape.empty()) ys.erase(ys.begin() + axis);  // a scalar index drops the axis
      return set(n, 0, reshape(n, y, ys));
    }
    if (attr_int(n, "axis", 0) != 0 || !table.c || !table.c->initializer || table.c->shape.size() != 2)
      fail(where(n) + ": a lookup of rows of a [V, H] initializer (an embedding) is supported");
    const TensorId w = tensor(n, 0, true);
    const Value& iv = value(n, 1);
    TensorId ids = iv.tensor;
    if (ids >= 0 && m_g.tensor(ids).dtype != DType::I32) fail(where(n) + ": integer ids expected");
    bool scalar = false;
    if (ids < 0) {  // constant positions: negative ones count from the end, a scalar drops its axis
      const Const& c = constant(n, 1);
      if (!is_integer(c.elem_type)) fail(where(n) + ": integer ids expected");
      const std::int64_t rows = table.c->shape[0];
      std::vector<float> v;
      for (double d : *c.data) {
        std::int64_t i = whole(d, where(n));
        if (i < 0) i += rows;
        if (i < 0 || i >= rows) fail(where(n) + ": index " + std::to_string(whole(d, where(n))) + " out of range");
        v.push_back(static_cast<float>(i));
      }
      scalar = c.shape.empty();
      const std::string name = op_name(n) + ".ids";
      ids = m_g.add_tensor({name, scalar ? Shape{1} : c.shape, DType::I32, TensorRole::Constant});
      if (m_opt.values) m_values_out[name] = v;
    }
    const TensorId y = m_g.apply("EmbeddingLookup", op_name(n) + "/EmbeddingLookup", {w, ids})[0];
    set(n, 0, scalar ? reshape(n, y, {shape_of(w)[1]}) : y);
  };
  // Where with a constant condition: masking a computed tensor by a constant (a causal mask's
  // -inf, an additive one), as Mul and Add by constants — or one Add where the fill is infinite.
  h["Where"] = [this](const onnx::NodeProto& n) {
    const Const& c = constant(n, 0, false);
    const bool x_computed = !is_const(n, 1), y_computed = !is_const(n, 2);
    if (x_computed == y_computed)
      fail(where(n) + ": a choice between a computed tensor and a constant by a constant condition is supported");
    const int t = x_computed ? 1 : 2;  // the computed side, taken where the condition is (t == 1) true
    if (m_weights.count(source(n.input(3 - t))))
      fail(where(n) + ": the fill '" + n.input(3 - t) + "' is a trained weight; a constant fill is supported");
    const TensorId x = tensor(n, t);
    const Const& fill = constant(n, 3 - t, false);
    // The constants' shape: the condition's and the fill's, broadcast over the tensor by the ops.
    const Shape cs = broadcast_of(c.shape, fill.shape, where(n));
    const Shape s = broadcast_of(cs, shape_of(x), where(n));
    const std::string name = op_name(n);
    std::vector<double> keep, add;
    bool infinite = true;
    if (c.data && fill.data) {
      const auto cv = broadcast_values(*c.data, c.shape, cs), fv = broadcast_values(*fill.data, fill.shape, cs);
      for (std::size_t k = 0; k < cv.size(); ++k) {
        const bool take_x = (cv[k] != 0) == (t == 1);
        keep.push_back(take_x ? 1.0 : 0.0);
        add.push_back(take_x ? 0.0 : fv[k]);
        infinite = infinite && (take_x || std::isinf(fv[k]));
      }
    } else if (m_opt.values) {
      fail(where(n) + ": the condition's or the fill's values are too large to keep (functional mode)");
    }
    auto constant_tensor = [&](const std::string& suffix, const std::vector<double>& v) {
      const std::string cname = name + suffix;
      const TensorId k = m_g.add_tensor({cname, cs, m_compute, TensorRole::Constant});
      if (m_opt.values) m_values_out[cname] = std::vector<float>(v.begin(), v.end());
      return k;
    };
    TensorId y = x;
    if (!infinite) y = m_g.mul(name + "/Mul", y, constant_tensor(".keep", keep), TensorRole::Activation);
    y = m_g.add(name + "/Add", y, constant_tensor(".fill", add));
    if (shape_of(y) != s) fail(where(n) + ": the condition broadcasts the tensor to " + shape_string(s));
    set(n, 0, y);
  };
  h["Softmax"] = [this](const onnx::NodeProto& n) {
    const TensorId x = tensor(n, 0);
    const auto rank = static_cast<std::int64_t>(shape_of(x).size());
    std::int64_t axis = attr_int(n, "axis", m_sum.opset >= 13 ? -1 : 1);
    if (axis < 0) axis += rank;
    if (axis < 0 || axis >= rank) fail(where(n) + ": axis " + std::to_string(axis) + " out of range");
    if (m_sum.opset < 13 && axis != rank - 1)  // older opsets flatten from the axis on
      fail(where(n) + ": softmax over the last axis is supported before opset 13, axis " + std::to_string(axis));
    if (axis == rank - 1) return set(n, 0, m_g.apply("Softmax", op_name(n) + "/Softmax", {x})[0]);
    OpAttrs t;  // another axis: brought last and back
    for (std::int64_t k = 0; k < rank; ++k) t.shape.push_back(k);
    std::swap(t.shape[static_cast<std::size_t>(axis)], t.shape.back());
    const TensorId y = m_g.apply("Transpose", op_name(n) + "/Transpose", {x}, t)[0];
    const TensorId s = m_g.apply("Softmax", op_name(n) + "/Softmax", {y})[0];
    set(n, 0, m_g.apply("Transpose", op_name(n) + "/TransposeBack", {s}, t)[0]);
  };
  h["Clip"] = [this](const onnx::NodeProto& n) {
    double lo = -std::numeric_limits<double>::infinity(), hi = std::numeric_limits<double>::infinity();
    if (find_attr(n, "min")) lo = attr_float(n, "min", lo);
    if (find_attr(n, "max")) hi = attr_float(n, "max", hi);
    if (has_input(n, 1)) lo = constant(n, 1).data->at(0);
    if (has_input(n, 2)) hi = constant(n, 2).data->at(0);
    const TensorId x = tensor(n, 0);
    const std::string name = op_name(n);
    if (lo == 0 && hi == 6) return set(n, 0, m_g.apply("ReLU6", name + "/ReLU6", {x})[0]);
    if (lo == 0 && std::isinf(hi)) return set(n, 0, m_g.relu(name + "/ReLU", x));
    OpAttrs a;
    a.alpha = lo;
    a.beta = hi;
    set(n, 0, m_g.apply("ClipByValue", name + "/ClipByValue", {x}, a)[0]);
  };
  auto pool = [this](const std::string& type) {
    return [this, type](const onnx::NodeProto& n) {
      const TensorId x = tensor(n, 0);
      const Shape xs = shape_of(x);
      if (xs.size() != 4) fail(where(n) + ": 2-D pooling of an NCHW input is supported");
      PoolAttr p;
      pool_window(n, p, xs[2], xs[3]);
      const auto padded = m_pad_for_pool.find(n.input(0));  // a zero Pad before it: its padding, counted
      if (padded != m_pad_for_pool.end()) {
        if (p.pad != 0 || p.kernel_w > 0 || padded->second >= p.kernel)
          fail(where(n) + ": a Pad of " + std::to_string(padded->second) + " before a pool of window " +
               std::to_string(p.kernel) + " and padding " + std::to_string(p.pad) + " is not supported");
        p.pad = padded->second;
      }
      if (attr_int(n, "ceil_mode", 0)) {  // the same as floor when the windows fit exactly
        for (std::int64_t d : {xs[2], xs[3]})
          if ((d + 2 * p.pad - p.kernel) % p.stride) p.ceil = true;
        if (p.ceil && type != "MaxPool")
          fail(where(n) + ": ceil_mode adds a partial window here; an average pool rounds down only");
      }
      if (n.output_size() > 1 && !n.output(1).empty()) fail(where(n) + ": MaxPool's indices are not supported");
      OpAttrs a;
      a.pool = p;
      if (type == "AvgPool")  // divide by the whole window
        a.count = padded != m_pad_for_pool.end() ? 1 : attr_int(n, "count_include_pad", 0);
      set(n, 0, m_g.apply(type, op_name(n) + "/" + type, {x}, a)[0]);
    };
  };
  h["MaxPool"] = pool("MaxPool");
  h["AveragePool"] = pool("AvgPool");
  h["GlobalAveragePool"] = [this](const onnx::NodeProto& n) {
    const TensorId x = tensor(n, 0);
    const Shape xs = shape_of(x);
    if (xs.size() != 4) fail(where(n) + ": an NCHW input is supported");
    const TensorId m = m_g.reduce_mean(op_name(n) + "/ReduceMean", x);
    set(n, 0, reshape(n, m, {xs[0], xs[1], 1, 1}));
  };
  h["ReduceMean"] = [this](const onnx::NodeProto& n) {
    const TensorId x = tensor(n, 0);
    const Shape xs = shape_of(x);
    auto axes = ints_attr_or_input(n, "axes", 1);
    for (auto& a : axes)
      if (a < 0) a += static_cast<std::int64_t>(xs.size());
    std::sort(axes.begin(), axes.end());
    std::vector<std::int64_t> all(xs.size());
    std::iota(all.begin(), all.end(), 0);
    if (axes.empty() || axes == all) {  // the mean of every element (a loss): of the tensor as a vector
      const std::int64_t e = m_g.tensor(x).elements();
      const TensorId m = m_g.reduce_mean(op_name(n) + "/ReduceMean", reshape(n, x, {e}));
      return set(n, 0, attr_int(n, "keepdims", 1) ? reshape(n, m, Shape(xs.size(), 1), "/Reshape1") : m);
    }
    if (xs.size() == 4 && axes == std::vector<std::int64_t>{2, 3}) {  // the spatial mean of an NCHW image
      const TensorId m = m_g.reduce_mean(op_name(n) + "/ReduceMean", x);
      return set(n, 0, attr_int(n, "keepdims", 1) ? reshape(n, m, {xs[0], xs[1], 1, 1}) : m);
    }
    // Any other axes (a LayerNorm or RMSNorm written out, the mean over a sequence): ReduceMeanD.
    OpAttrs a;
    a.shape = xs;
    for (auto ax : axes) {
      if (ax < 0 || ax >= static_cast<std::int64_t>(xs.size())) fail(where(n) + ": axis out of range");
      a.shape[static_cast<std::size_t>(ax)] = 1;
    }
    const TensorId m = m_g.apply("ReduceMeanD", op_name(n) + "/ReduceMeanD", {x}, a)[0];
    if (attr_int(n, "keepdims", 1)) return set(n, 0, m);
    Shape kept;
    for (std::size_t k = 0; k < xs.size(); ++k)
      if (!std::count(axes.begin(), axes.end(), static_cast<std::int64_t>(k))) kept.push_back(xs[k]);
    set(n, 0, reshape(n, m, kept));
  };
  h["BatchNormalization"] = [this](const onnx::NodeProto& n) { batch_norm(n); };
  auto binary = [this](const std::string& type) {
    return [this, type](const onnx::NodeProto& n) {
      set(n, 0, m_g.apply(type, op_name(n) + "/" + type, {tensor(n, 0), tensor(n, 1)})[0]);
    };
  };
  h["Add"] = binary("Add");
  h["Sub"] = binary("Sub");
  h["Mul"] = binary("Mul");
  h["Div"] = binary("RealDiv");
  h["Concat"] = [this](const onnx::NodeProto& n) {
    std::vector<TensorId> xs;
    for (int i = 0; i < n.input_size(); ++i) xs.push_back(tensor(n, i));
    OpAttrs a;
    a.axis = attr_int(n, "axis", 0);
    set(n, 0, m_g.apply("Concat", op_name(n) + "/Concat", xs, a)[0]);
  };
  h["Flatten"] = [this](const onnx::NodeProto& n) {
    const TensorId x = tensor(n, 0);
    const Shape xs = shape_of(x);
    std::int64_t ax = attr_int(n, "axis", 1);
    if (ax < 0) ax += static_cast<std::int64_t>(xs.size());
    std::int64_t lo = 1, hi = 1;
    for (std::size_t k = 0; k < xs.size(); ++k) (static_cast<std::int64_t>(k) < ax ? lo : hi) *= xs[k];
    set(n, 0, reshape(n, x, {lo, hi}, "/Flatten"));
  };
  h["Reshape"] = [this](const onnx::NodeProto& n) {
    const TensorId x = tensor(n, 0);
    const Shape xs = shape_of(x);
    Shape s;
    for (double d : *constant(n, 1).data) s.push_back(whole(d, where(n)));
    std::int64_t known = 1, infer = -1;
    const bool allowzero = attr_int(n, "allowzero", 0);
    for (std::size_t k = 0; k < s.size(); ++k) {
      if (s[k] == 0 && !allowzero) {
        if (k >= xs.size()) fail(where(n) + ": a 0 in the shape beyond the input's rank");
        s[k] = xs[k];
      }
      if (s[k] == -1) {
        if (infer >= 0) fail(where(n) + ": two -1 in the shape");
        infer = static_cast<std::int64_t>(k);
      } else if (s[k] < 0 || __builtin_mul_overflow(known, s[k], &known) || known > kMaxElements) {
        fail(where(n) + ": the shape " + shape_string(s) + " is not a usable shape");
      }
    }
    const std::int64_t e = m_g.tensor(x).elements();
    if (infer >= 0) {
      if (known == 0 || e % known)
        fail(where(n) + ": " + shape_string(xs) + " cannot take the shape " + shape_string(s));
      s[static_cast<std::size_t>(infer)] = e / known;
    }
    if (checked_elements(s, where(n)) != e)
      fail(where(n) + ": " + shape_string(xs) + " cannot take the shape " + shape_string(s) +
           (m_batch != xs[0] ? "" : " (a shape fixed at export for another batch size? export with dynamic_axes)"));
    set(n, 0, reshape(n, x, s));
  };
  auto squeeze = [this](bool un) {
    return [this, un](const onnx::NodeProto& n) {
      const TensorId x = tensor(n, 0);
      Shape s = shape_of(x);
      auto axes = ints_attr_or_input(n, "axes", 1);
      const auto rank = static_cast<std::int64_t>(s.size()) + (un ? static_cast<std::int64_t>(axes.size()) : 0);
      for (auto& a : axes) {
        if (a < 0) a += rank;
        if (a < 0 || a >= rank) fail(where(n) + ": axis out of range");
      }
      std::sort(axes.begin(), axes.end());
      if (std::adjacent_find(axes.begin(), axes.end()) != axes.end()) fail(where(n) + ": an axis given twice");
      if (un) {
        for (auto a : axes) s.insert(s.begin() + a, 1);
      } else {
        Shape t;
        for (std::int64_t k = 0; k < static_cast<std::int64_t>(s.size()); ++k) {
          const bool listed = std::count(axes.begin(), axes.end(), k) > 0;
          if (listed && s[static_cast<std::size_t>(k)] != 1) fail(where(n) + ": squeezing an axis that is not 1");
          if (!(listed || (axes.empty() && s[static_cast<std::size_t>(k)] == 1)))
            t.push_back(s[static_cast<std::size_t>(k)]);
        }
        s = t;
      }
      set(n, 0, reshape(n, x, s, un ? "/Unsqueeze" : "/Squeeze"));
    };
  };
  h["Squeeze"] = squeeze(false);
  h["Unsqueeze"] = squeeze(true);
  h["Transpose"] = [this](const onnx::NodeProto& n) {
    const TensorId x = tensor(n, 0);
    OpAttrs a;
    a.shape = attr_ints(n, "perm");
    if (a.shape.empty())
      for (auto k = static_cast<std::int64_t>(shape_of(x).size()); k-- > 0;) a.shape.push_back(k);
    set(n, 0, m_g.apply("Transpose", op_name(n) + "/Transpose", {x}, a)[0]);
  };
  // Slice and Split of an activation: a StridedSlice per sliced axis and piece (step 1).
  auto piece = [this](const onnx::NodeProto& n, TensorId x, std::int64_t axis, std::int64_t begin, std::int64_t len,
                      const std::string& suffix) {
    Shape s = shape_of(x);
    if (begin == 0 && len == s[static_cast<std::size_t>(axis)]) return x;
    OpAttrs a;
    a.axis = axis;
    a.count = begin;
    s[static_cast<std::size_t>(axis)] = len;
    a.shape = s;
    return m_g.apply("StridedSlice", op_name(n) + "/StridedSlice" + suffix, {x}, a)[0];
  };
  auto axis_in = [this](const onnx::NodeProto& n, std::int64_t axis, std::size_t rank) {
    const auto r = static_cast<std::int64_t>(rank);
    if (axis < -r || axis >= r)
      fail(where(n) + ": axis " + std::to_string(axis) + " out of range for a tensor of rank " + std::to_string(r));
    return axis < 0 ? axis + r : axis;
  };
  h["Slice"] = [this, piece, axis_in](const onnx::NodeProto& n) {
    TensorId x = tensor(n, 0);
    const Shape xs = shape_of(x);
    const auto starts = ints_attr_or_input(n, "starts", 1, true), ends = ints_attr_or_input(n, "ends", 2, true);
    auto axes = ints_attr_or_input(n, "axes", 3);
    const auto steps = has_input(n, 4) ? ints_attr_or_input(n, "steps", 4) : std::vector<std::int64_t>{};
    if (axes.empty())
      for (std::size_t k = 0; k < starts.size(); ++k) axes.push_back(static_cast<std::int64_t>(k));
    if (starts.size() != ends.size() || axes.size() != starts.size() || (!steps.empty() && steps.size() != starts.size()))
      fail(where(n) + ": starts, ends, axes and steps of different lengths");
    std::set<std::int64_t> seen;
    for (std::size_t k = 0; k < starts.size(); ++k) {
      const std::int64_t ax = axis_in(n, axes[k], xs.size());
      if (!seen.insert(ax).second) fail(where(n) + ": axis " + std::to_string(ax) + " sliced twice");
      if (!steps.empty() && steps[k] != 1)
        fail(where(n) + ": a slice with step " + std::to_string(steps[k]) + " along axis " + std::to_string(ax) +
             " is not supported (step 1 only)");
      const std::int64_t dim = xs[static_cast<std::size_t>(ax)];
      auto clamp = [dim](std::int64_t v) { return std::clamp<std::int64_t>(v < 0 ? v + dim : v, 0, dim); };
      const std::int64_t b = clamp(starts[k]), e = clamp(ends[k]);
      if (e <= b)
        fail(where(n) + ": the slice [" + std::to_string(starts[k]) + ", " + std::to_string(ends[k]) + ") of axis " +
             std::to_string(ax) + " (" + std::to_string(dim) + ") is empty");
      x = piece(n, x, ax, b, e - b, starts.size() > 1 ? std::to_string(k) : "");
    }
    set(n, 0, x);
  };
  h["Split"] = [this, piece, axis_in](const onnx::NodeProto& n) {
    const TensorId x = tensor(n, 0);
    const Shape xs = shape_of(x);
    const std::int64_t ax = axis_in(n, attr_int(n, "axis", 0), xs.size());
    const std::int64_t dim = xs[static_cast<std::size_t>(ax)], parts = n.output_size();
    std::vector<std::int64_t> split = ints_attr_or_input(n, "split", 1);
    if (split.empty()) {  // equal parts (the last one smaller when they do not divide)
      if (parts < 1) fail(where(n) + ": a Split without outputs");
      const std::int64_t each = (dim + parts - 1) / parts;
      for (std::int64_t k = 0, left = dim; k < parts; ++k, left -= each) split.push_back(std::min(each, left));
    }
    if (static_cast<std::int64_t>(split.size()) != parts)
      fail(where(n) + ": " + std::to_string(split.size()) + " split sizes for " + std::to_string(parts) + " outputs");
    std::int64_t begin = 0;
    for (std::int64_t k = 0; k < parts; ++k) {
      const std::int64_t len = split[static_cast<std::size_t>(k)];
      if (len <= 0 || begin + len > dim)
        fail(where(n) + ": split sizes " + shape_string(split) + " do not divide axis " + std::to_string(ax) + " of " +
             shape_string(xs) + " into non-empty pieces");
      set(n, static_cast<int>(k), piece(n, x, ax, begin, len, std::to_string(k)));
      begin += len;
    }
    if (begin != dim)
      fail(where(n) + ": split sizes " + shape_string(split) + " add up to " + std::to_string(begin) + ", not axis " +
           std::to_string(ax) + "'s " + std::to_string(dim));
  };
  h["Identity"] = [this](const onnx::NodeProto& n) {
    if (!pass_weight(n)) set(n, 0, tensor(n, 0));
  };
  // PyTorch exports avg_pool2d(padding=p) counting the padding as a zero Pad and an AveragePool
  // without pads: the pool takes the padding (count_include_pad) when it is the only reader.
  h["Pad"] = [this](const onnx::NodeProto& n) {
    const std::vector<std::int64_t> pads = ints_attr_or_input(n, "pads", 1);
    const TensorId x = tensor(n, 0);
    if (std::none_of(pads.begin(), pads.end(), [](std::int64_t p) { return p != 0; })) return set(n, 0, x);
    const double value = has_input(n, 2) ? constant(n, 2).data->at(0) : attr_float(n, "value", 0);
    const bool spatial = pads.size() == 8 && pads[0] == 0 && pads[1] == 0 && pads[4] == 0 && pads[5] == 0 &&
                         pads[2] == pads[3] && pads[2] == pads[6] && pads[2] == pads[7] && pads[2] > 0;
    bool only_pools = true, read = false;
    for (const auto& m : m_model.graph().node())
      for (const auto& in : m.input())
        if (in == n.output(0)) {
          read = true;
          only_pools = only_pools && m.op_type() == "AveragePool" && (m.domain().empty() || m.domain() == "ai.onnx");
        }
    if (!spatial || attr_string(n, "mode", "constant") != "constant" || value != 0 || !only_pools || !read)
      fail(where(n) + ": padding by a Pad node is supported as the equal zero padding of an average pool's input "
           "(pads " + shape_string(pads) + "); give the padding to the convolution or pooling that follows");
    m_pad_for_pool[n.output(0)] = pads[2];
    set(n, 0, x);
  };
  h["Cast"] = [this](const onnx::NodeProto& n) {  // the recipe decides the precision of the network
    if (!is_float(static_cast<int>(attr_int(n, "to", onnx::TensorProto::FLOAT))))
      fail(where(n) + ": a cast of a tensor to an integer type is not supported");
    if (!pass_weight(n)) set(n, 0, tensor(n, 0));
  };
  h["Dropout"] = [this](const onnx::NodeProto& n) {
    const TensorId x = tensor(n, 0);
    double ratio = attr_float(n, "ratio", 0.5);
    if (has_input(n, 1)) ratio = constant(n, 1).data->at(0);
    bool training = m_sum.opset < 12 ? !attr_int(n, "is_test", 0) : true;
    if (has_input(n, 2)) training = constant(n, 2).data->at(0) != 0;
    if (n.output_size() > 1 && !n.output(1).empty()) m_values.erase(n.output(1));
    if (!training || ratio <= 0 || m_opt.inference) return set(n, 0, x);
    if (ratio >= 1) fail(where(n) + ": a drop ratio of 1 drops everything");
    OpAttrs a;
    a.alpha = 1 - ratio;
    set(n, 0, m_g.apply("Dropout", op_name(n) + "/Dropout", {x}, a)[0]);
  };
}

// The dataset an input of this shape suggests, and its training (or evaluation) maps: MNIST-shaped
// for one channel, CIFAR-10 for small colour images, ImageNet JPEGs for larger ones, binary records
// of the input's geometry for other channel counts.
DataRecipe Importer::data_for(const Shape& in, std::int64_t classes, bool eval) const {
  const std::int64_t c = in[1], h = in[2], w = in[3];
  DataRecipe r;
  if (c == 1) {  // MNIST-shaped: LeNet's pipeline, resized to the input
    r = mnist_recipe(h, w);
  } else if (c != 3 || (h <= 64 && w <= 64)) {  // CIFAR-10-shaped; other channel counts as such records
    r.dataset = synthetic_cifar10();
    r.dataset.height = c == 3 ? 32 : h;
    r.dataset.width = c == 3 ? 32 : w;
    r.dataset.channels = c;
    r.dataset.record_bytes = 1 + c * r.dataset.height * r.dataset.width;
    r.maps = {{MapOpType::RandomCrop, r.dataset.height, r.dataset.width, 1.0}, {MapOpType::RandomHorizontalFlip}};
    if (h != r.dataset.height || w != r.dataset.width) r.maps.push_back({MapOpType::Resize, h, w});
    for (auto t : {MapOpType::Rescale, MapOpType::Normalize, MapOpType::HWC2CHW, MapOpType::TypeCast})
      r.maps.push_back({t});
  } else {  // ImageNet-shaped JPEGs, cropped to the input (evaluation: the centre crop of 256/224)
    r = eval ? imagenet_eval_recipe() : imagenet_train_recipe();
    for (auto& m : r.maps) {
      if (m.type == MapOpType::Resize && m.width == 0)
        m.height = (h * 256 + 223) / 224;
      else if (m.type == MapOpType::Resize || m.type == MapOpType::CenterCrop)
        m.height = h, m.width = w;
    }
  }
  r.dataset.classes = classes;
  if (eval) {
    if (c != 3 || h <= 64) r.dataset.samples = 10000;  // the test split
    std::vector<MapOp> maps;
    for (const auto& m : r.maps)
      if (!m.random()) maps.push_back(m);
    r.maps = maps;
  }
  return r;
}

// A sequence model's dataset: records of int32 columns (MindRecord, as the built-in
// transformers'), the input — token ids, or features — and the labels (a class, or a token per
// position), each column cast by a TypeCast map of its own.
DataRecipe Importer::sequence_data(const Shape& in, bool per_token, std::int64_t classes, bool eval) const {
  DataRecipe r;
  std::int64_t values = 1;
  for (std::size_t k = 1; k < in.size(); ++k) values *= in[k];
  values += per_token ? in[1] : 1;
  r.dataset.format = DatasetFormat::MindRecord;
  r.dataset.source = "synthetic";
  r.dataset.samples = eval ? 10000 : 1000000;
  r.dataset.height = 1;
  r.dataset.width = values;
  r.dataset.channels = 1;
  r.dataset.record_bytes = values * 4;
  r.dataset.classes = classes;
  for (std::int64_t c = 0; c < 2; ++c) {
    MapOp cast{MapOpType::TypeCast};
    cast.call = c;
    r.maps.push_back(cast);
  }
  return r;
}

Workload Importer::run() {
  const auto& graph = m_model.graph();
  for (const auto& o : m_model.opset_import())
    if (o.domain().empty() || o.domain() == "ai.onnx") m_sum.opset = o.version();
  m_sum.producer =
      m_model.producer_name() + (m_model.producer_version().empty() ? "" : " " + m_model.producer_version());
  m_sum.nodes = graph.node_size();
  if (graph.node_size() == 0) fail(m_file + ": the model's graph has no nodes");
  if (graph.output_size() == 0) fail(m_file + ": the model's graph has no outputs");
  install();

  // Every operator outside the supported set, with its first node, before anything is built.
  std::map<std::string, std::string>& unsupported = m_unsupported;
  for (const auto& n : graph.node()) {
    ++m_sum.node_types[n.op_type()];
    const bool std_domain = n.domain().empty() || n.domain() == "ai.onnx";
    const std::string type = std_domain ? n.op_type() : n.domain() + "::" + n.op_type();
    const bool known = std_domain && (m_handlers.count(n.op_type()) || kFoldable.count(n.op_type()));
    if (!known && !unsupported.count(type)) unsupported[type] = n.name().empty() ? "(unnamed)" : n.name();
  }
  try {
    return build();
  } catch (const std::invalid_argument&) {
    if (unsupported.empty() || m_listed) throw;
    // Refused before its nodes were read (its inputs, say): the operator types come first.
    fail(types_message() + "\n(docs/onnx.md lists the supported operators)");
  }
}

std::string Importer::types_message() const {
  std::string msg = m_file + ": " + std::to_string(m_unsupported.size()) + " operator type" +
                    (m_unsupported.size() > 1 ? "s" : "") + " not supported, nothing simulated:";
  for (const auto& [type, node] : m_unsupported) msg += "\n  " + type + " (first at node '" + node + "')";
  return msg;
}

Workload Importer::build() {
  const auto& graph = m_model.graph();
  const std::map<std::string, std::string>& unsupported = m_unsupported;

  // The recipe.
  const RecipeOverrides& o = m_opt.recipe;
  Recipe recipe;
  recipe.amp_level = o.amp_level.value_or("O0");
  if (recipe.amp_level != "O0" && recipe.amp_level != "O2" && recipe.amp_level != "O3")
    fail("amp level '" + recipe.amp_level + "': use O0, O2 or O3");
  recipe.keep_batchnorm_fp32 = o.keep_batchnorm_fp32.value_or(true);
  recipe.optimizer = o.optimizer.value_or("momentum");
  if (recipe.optimizer != "momentum" && recipe.optimizer != "lars")
    fail("optimizer '" + recipe.optimizer + "': use momentum or lars");
  recipe.loss_scale = o.loss_scale.value_or(1);
  if (!(recipe.loss_scale >= 1 && recipe.loss_scale <= 16777216)) fail("loss scale must lie in [1, 16777216]");
  recipe.graph_kernel_fusion = o.graph_kernel_fusion.value_or(false);
  recipe.ub_fusion = o.ub_fusion.value_or(true);
  m_compute = recipe.amp_level == "O0" ? DType::F32 : DType::F16;
  m_master = recipe.amp_level == "O3" ? DType::F16 : DType::F32;
  m_bn_fp32 = recipe.amp_level == "O0" || (recipe.amp_level == "O2" && recipe.keep_batchnorm_fp32);

  // Initializers.
  std::set<std::string> init_names;
  for (const auto& t : graph.initializer()) {
    if (t.name().empty()) fail(m_file + ": an initializer without a name");
    Const c = read_tensor(t, m_file + ": initializer '" + t.name() + "'");
    c.initializer = true;
    if (m_opt.values && is_float(c.elem_type)) m_values_out[t.name()] = float_values(t, m_file);
    m_values[t.name()] = Value{-1, std::move(c)};
    init_names.insert(t.name());
  }
  m_sum.initializers = static_cast<std::int64_t>(init_names.size());
  find_weights();
  // A constant initializer too large for read_tensor to keep (a causal mask buffer of 1024^2):
  // its values, to fold what reads it.
  for (const auto& t : graph.initializer()) {
    auto& v = m_values[t.name()];
    if (m_weights.count(t.name()) || !v.c || v.c->data || !is_float(t.data_type()) ||
        t.data_location() == onnx::TensorProto::EXTERNAL || v.c->elements() > kMaxFoldElements ||
        (t.data_type() != onnx::TensorProto::FLOAT && t.data_type() != onnx::TensorProto::DOUBLE))
      continue;
    const auto f = float_values(t, m_file);
    v.c->data = std::vector<double>(f.begin(), f.end());
  }

  // Inputs: the image (NCHW, float) or a sequence (token ids [N, S], or features [N, S, F]) and,
  // for a model with its own loss, integer labels.
  TensorId image = -1, label = -1;
  std::string image_name;
  for (const auto& in : graph.input()) {
    if (in.name().empty()) fail(m_file + ": an input without a name; give every input of the graph a name");
    if (init_names.count(in.name())) continue;  // an initializer listed as an input (older exporters)
    const auto& tt = in.type().tensor_type();
    const std::string input = m_file + ": input '" + in.name() + "'";
    if (!in.type().has_tensor_type()) fail(input + " is not a tensor");
    // The element type: a float tensor (images, features) or integers (token ids, labels).
    const int et = tt.elem_type();
    if (!is_float(et) && (!is_integer(et) || et == onnx::TensorProto::BOOL))
      fail(input + " holds " +
           (onnx::TensorProto::DataType_IsValid(et) && et != onnx::TensorProto::UNDEFINED
                ? onnx::TensorProto::DataType_Name(static_cast<onnx::TensorProto::DataType>(et))
                : "elements of type " + std::to_string(et)) +
           " elements; a model's input is a float tensor (images, features) or integers (token ids, labels): "
           "export the model from a float or integer input");
    if (!tt.has_shape())
      fail(input + " has no shape; export the model with its input's shape (a batch of samples)");
    Shape s;
    for (int k = 0; k < tt.shape().dim_size(); ++k) {
      const auto& d = tt.shape().dim(k);
      if (d.has_dim_value() && (d.dim_value() <= 0 || d.dim_value() > kMaxDim))
        fail(input + " has a fixed dimension of " + std::to_string(d.dim_value()) + " at axis " + std::to_string(k) +
             " (" + (k == 0 ? "the batch" : "a sample's") + "); a dimension must be 1 to 2^31: export the model " +
             (k == 0 ? "from an example batch of one or more samples, or with a dynamic batch axis (dynamic_axes)"
                     : "from an example input of its real size"));
      if (d.has_dim_value()) {
        s.push_back(d.dim_value());
        continue;
      }
      const std::string sym = d.has_dim_param() ? "'" + d.dim_param() + "'" : "unknown";
      if (k != 0)
        fail(m_file + ": input '" + in.name() + "' has a " + sym + " dimension at axis " + std::to_string(k) +
             "; only the batch axis may be symbolic (export with a fixed input size)");
      if (m_opt.batch_size <= 0)
        fail(m_file + ": input '" + in.name() + "' has a symbolic batch dimension " + sym + "; give batch_size");
      if (m_opt.batch_size > kMaxDim)
        fail(input + ": a batch of " + std::to_string(m_opt.batch_size) + " samples; give a batch_size of 1 to 2^31");
      s.push_back(m_opt.batch_size);
    }
    if (s.empty()) fail(m_file + ": input '" + in.name() + "' is a scalar; a batch of samples is expected");
    // Every dimension is at most 2^31; their product must fit a device (2^40 elements), and its
    // bytes an int64.
    std::int64_t elements = 1;
    for (auto d : s)
      if (__builtin_mul_overflow(elements, d, &elements) || elements > kMaxElements)
        fail(input + " is " + shape_string(s) +
             ", more than 2^40 elements: no device holds it; give a smaller batch, or export the model from a "
             "smaller input");
    if (m_opt.batch_size > 0 && s[0] != m_opt.batch_size)
      fail(m_file + ": input '" + in.name() + "' fixes the batch at " + std::to_string(s[0]) + ", not " +
           std::to_string(m_opt.batch_size) +
           "; give no batch_size, or export the model with a dynamic batch axis (dynamic_axes)");
    if (m_batch && s[0] != m_batch) fail(m_file + ": the inputs disagree on the batch size");
    m_batch = s[0];
    if (is_integer(tt.elem_type()) && s.size() == 2 && image < 0) {  // token ids [N, S]
      image = m_g.add_tensor({in.name(), s, DType::I32, TensorRole::Input});
      image_name = in.name();
      m_values[in.name()] = Value{image, std::nullopt};
      continue;
    }
    if (is_integer(tt.elem_type())) {
      if (label >= 0 || s.size() != 1)
        fail(m_file + ": integer input '" + in.name() + "' is neither token ids [N, S] nor a label vector [N]");
      label = m_g.add_tensor({in.name(), s, DType::I32, TensorRole::Label});
      m_values[in.name()] = Value{label, std::nullopt};
      continue;
    }
    if (image >= 0) fail(m_file + ": more than one data input ('" + image_name + "', '" + in.name() + "')");
    if (s.size() != 4 && s.size() != 3)
      fail(m_file + ": input '" + in.name() + "' is " + shape_string(s) +
           "; an NCHW image batch, a sequence of features [N, S, F] or token ids [N, S] is expected");
    image = m_g.add_tensor({in.name(), s, DType::F32, TensorRole::Input});
    image_name = in.name();
    m_values[in.name()] =
        Value{m_compute == DType::F32 ? image : m_g.cast("input/Cast", image, m_compute), std::nullopt};
  }
  if (image < 0)
    fail(m_file +
         ": the model has no data input (an NCHW image batch, a sequence of features [N, S, F] or token ids "
         "[N, S])");

  // The nodes, in their (topological) order. A node that cannot be imported is noted and the
  // import goes on, so that a refusal lists every blocker: the operator types outside the table,
  // then each supported operator in a form that is not (the same problem once, with its count).
  struct Problem {
    std::string first;  // the first node's message
    int more = 0;       // other nodes of the same type with the same problem
  };
  std::map<std::pair<std::string, std::string>, Problem> problems;  // by (type, problem)
  std::vector<std::pair<std::string, std::string>> problem_order;
  for (const auto& n : graph.node()) {
    const bool std_domain = n.domain().empty() || n.domain() == "ai.onnx";
    const std::string type = std_domain ? n.op_type() : n.domain() + "::" + n.op_type();
    bool downstream = false;  // reads what a refused node computes: not checked
    for (const auto& in : n.input()) {
      const auto it = in.empty() ? m_values.end() : m_values.find(in);
      downstream = downstream || (it != m_values.end() && it->second.unknown);
    }
    try {
      if (unsupported.count(type) || downstream)
        refuse(n);
      else if (foldable(n))
        fold(n);
      else if (m_handlers.count(n.op_type()))
        m_handlers.at(n.op_type())(n);
      else
        fail(where(n) + ": its inputs must be constants known at import (static shapes)");
    } catch (const Downstream&) {
      refuse(n);
    } catch (const std::invalid_argument& e) {
      std::string msg = e.what();
      if (msg.rfind(m_file, 0) != 0) msg = where(n) + ": " + msg;
      const std::string prefix = where(n) + ": ";
      const std::string detail = msg.rfind(prefix, 0) == 0 ? msg.substr(prefix.size()) : msg;
      const auto key = std::make_pair(type, detail);
      if (auto it = problems.find(key); it != problems.end()) {
        ++it->second.more;
      } else {
        problems[key] = Problem{msg};
        problem_order.push_back(key);
      }
      refuse(n);
    }
    ++m_node_index;
  }
  if (unsupported.empty() && problem_order.size() == 1 && problems.begin()->second.more == 0)
    fail(problems.begin()->second.first);
  if (!unsupported.empty() || !problem_order.empty()) {
    std::string msg = m_file + ": ";
    if (!unsupported.empty()) {
      msg = types_message();
      if (!problem_order.empty()) msg += "\nand ";
    }
    if (!problem_order.empty()) {
      msg += std::to_string(problem_order.size()) + " operator form" + (problem_order.size() > 1 ? "s" : "") +
             " not supported" + (unsupported.empty() ? ", nothing simulated:" : ":");
      for (const auto& key : problem_order) {
        const Problem& p = problems.at(key);
        msg += "\n  " + (p.first.rfind(m_file + ": ", 0) == 0 ? p.first.substr(m_file.size() + 2) : p.first);
        if (p.more) msg += " (and " + std::to_string(p.more) + " more such node" + (p.more > 1 ? "s" : "") + ")";
      }
    }
    if (!unsupported.empty()) msg += "\n(nodes reading what a refused node computes are not checked)";
    m_listed = true;
    fail(msg + "\n(docs/onnx.md lists the supported operators and their forms)");
  }

  // The output and the loss.
  const std::string& out_name = graph.output(0).name();
  const auto it = m_values.find(out_name);
  if (it == m_values.end() || it->second.tensor < 0)
    fail(m_file + ": output '" + out_name + "' is not computed from the input");
  TensorId y = it->second.tensor;
  Workload w;
  w.recipe = recipe;
  std::string base = m_file;
  if (auto slash = base.find_last_of('/'); slash != std::string::npos) base.erase(0, slash + 1);
  w.name = base;
  w.batch_size = m_batch;
  const Shape ys = shape_of(y);
  const Shape in_shape = m_g.tensor(image).shape;
  const bool sequence = in_shape.size() != 4;
  // A language model: logits [N, S, V] of token ids [N, S], each position's next token its label.
  const bool per_token = sequence && m_g.tensor(image).dtype == DType::I32 && ys.size() == 3 && ys[0] == in_shape[0] &&
                         ys[1] == in_shape[1];
  const std::int64_t classes = per_token ? ys[2] : ys.size() == 2 ? ys[1] : 0;
  if (sequence) {
    w.data = sequence_data(in_shape, per_token, classes > 1 ? classes : 10, false);
    w.eval_data = sequence_data(in_shape, per_token, classes > 1 ? classes : 10, true);
    w.tokens_per_sample = in_shape[1];
  } else {
    w.data = data_for(in_shape, classes > 1 ? classes : 10, false);
    w.eval_data = data_for(in_shape, classes > 1 ? classes : 10, true);
  }
  w.batch_inputs = {image};
  if (label >= 0) w.batch_inputs.push_back(label);

  if (m_opt.inference) {  // the forward pass over the evaluation dataset (Model.predict)
    w.data = w.eval_data;
    w.training = false;
    w.optimizer = "none (inference)";
    w.parallel.parameter_broadcast = false;
  } else {
    TensorId loss;
    if (m_opt.loss && per_token) {  // a language model: each position's next token
      if (label >= 0)
        fail(m_file + ": the model takes labels ('" + m_g.tensor(label).name +
             "'); choose the loss none (the model computes its own)");
      label = m_g.add_tensor({"label", {m_batch, ys[1]}, DType::I32, TensorRole::Label});
      w.batch_inputs.push_back(label);
      const std::int64_t rows = m_batch * ys[1];
      const TensorId flat = m_g.reshape("loss/Reshape", y, {rows, ys[2]});
      const TensorId logits = m_compute == DType::F32 ? flat : m_g.cast("loss/CastLogits", flat, DType::F32);
      loss = m_g.sparse_softmax_cross_entropy("loss/SparseSoftmaxCrossEntropyWithLogits", logits,
                                              m_g.reshape("loss/ReshapeLabels", label, {rows}));
    } else if (m_opt.loss) {
      if (ys.size() != 2 || ys[1] < 2)
        fail(m_file + ": output '" + out_name + "' is " + shape_string(ys) +
             "; softmax cross entropy needs logits [N, classes], or [N, S, vocabulary] of token ids [N, S] (or the "
             "loss none, for a model that ends in its own loss)");
      if (label >= 0)
        fail(m_file + ": the model takes labels ('" + m_g.tensor(label).name +
             "'); choose the loss none (the model computes its own)");
      label = m_g.add_tensor({"label", {m_batch}, DType::I32, TensorRole::Label});
      w.batch_inputs.push_back(label);
      const TensorId logits = m_compute == DType::F32 ? y : m_g.cast("loss/CastLogits", y, DType::F32);
      loss = m_g.sparse_softmax_cross_entropy("loss/SparseSoftmaxCrossEntropyWithLogits", logits, label);
    } else {
      if (m_g.tensor(y).elements() != 1)
        fail(m_file + ": output '" + out_name + "' is " + shape_string(ys) + "; a model's own loss must be a scalar");
      loss = m_compute == DType::F32 ? y : m_g.cast("loss/Cast", y, DType::F32);
      m_g.set_role(loss, TensorRole::Loss);
    }
    w.loss = loss;
    OptimizerSpec opt;
    opt.loss_scale = recipe.loss_scale;
    opt.decayed = m_decayed;
    opt.lars = recipe.optimizer == "lars";
    if (recipe.loss_scale != 1) w.sens = m_g.add_tensor({"loss_scale", {1}, DType::F32, TensorRole::Constant});
    w.optimizer_spec = opt;
    w.hyper = {0.01, 0.9, 0};
    char scale[32];
    std::snprintf(scale, sizeof scale, "%g", recipe.loss_scale);
    w.optimizer = std::string(opt.lars ? "LARS(Momentum(lr=0.01, momentum=0.9))" : "Momentum(lr=0.01, momentum=0.9)") +
                  (recipe.loss_scale != 1 ? ", loss scale " + std::string(scale) : "");
    append_momentum(m_g, append_backward(m_g, loss, w.sens), opt);
  }
  w.graph = std::move(m_g);
  if (m_opt.values) {
    std::map<std::string, std::vector<float>> used;  // the graph's tensors only
    for (const auto& t : w.graph.tensors())
      if (auto v = m_values_out.find(t.name); v != m_values_out.end()) used[t.name] = std::move(v->second);
    w.initial_values = std::make_shared<const std::map<std::string, std::vector<float>>>(std::move(used));
  }
  for (const auto& t : w.graph.tensors())
    if (t.role == TensorRole::Parameter)
      m_sum.parameters += t.elements();
    else if (t.role == TensorRole::State)
      m_sum.state_elements += t.elements();
  w.description = "ONNX model " + base + " (" + (m_sum.producer.empty() ? "unknown producer" : m_sum.producer) +
                  ", opset " + std::to_string(m_sum.opset) + "): " + std::to_string(m_sum.nodes) + " nodes (" +
                  std::to_string(m_sum.folded_nodes) + " folded at import), " + std::to_string(m_sum.initializers) +
                  " initializers (" + std::to_string(m_sum.parameters) + " parameters, " +
                  std::to_string(m_sum.state_elements) + " BatchNorm statistics), input " +
                  shape_string(w.graph.tensor(image).shape) + ", " + (m_opt.inference ? "inference" : "training");
  return w;
}

}  // namespace

namespace {

Workload import_model(const std::string& name, const onnx::ModelProto& model, const OnnxOptions& options,
                      OnnxSummary* summary) {
  if (!model.has_graph()) fail(name + ": not an ONNX model (a ModelProto without a graph)");
  if (model.ir_version() < 3)
    fail(name + ": ONNX IR version " + std::to_string(model.ir_version()) + " is too old (3 or later expected)");
  OnnxSummary local;
  Importer imp(name, model, options, summary ? *summary : local);
  return imp.run();
}

const char* const kNotOnnx = ": not an ONNX model (the protobuf does not parse: truncated, or another format)";

}  // namespace

Workload import_onnx_bytes(const std::string& name, const std::string& bytes, const OnnxOptions& options,
                           OnnxSummary* summary) {
  if (bytes.empty()) fail(name + ": the file is empty; an ONNX model (a ModelProto) is expected");
  onnx::ModelProto model;
  if (!model.ParseFromString(bytes)) fail(name + kNotOnnx);
  return import_model(name, model, options, summary);
}

Workload import_onnx(const std::string& path, const OnnxOptions& options, OnnxSummary* summary) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec))
    fail(path + (std::filesystem::exists(path, ec) ? ": not a file; give an ONNX model file"
                                                   : ": cannot open the model file (no such file)"));
  std::ifstream f(path, std::ios::binary);
  if (!f) fail(path + ": cannot open the model file");
  if (f.peek() == std::char_traits<char>::eof())
    fail(path + ": the file is empty; an ONNX model (a ModelProto) is expected");
  onnx::ModelProto model;  // parsed from the stream: the file's bytes are not held twice
  if (!model.ParseFromIstream(&f)) fail(path + kNotOnnx);
  return import_model(path, model, options, summary);
}

}  // namespace ascendsim::workloads
