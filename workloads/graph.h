// Graph IR of a training step: typed tensors and the ops that read and write them, in execution
// order. Shapes are inferred and checked as ops are added, so a graph that builds is consistent.
// The IR carries no timing: the runtime's graph compiler turns it into device tasks.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace ascendsim::workloads {

enum class DType { F32, F16, I32, I8 };
std::int64_t dtype_bytes(DType t);
const char* dtype_name(DType t);

using Shape = std::vector<std::int64_t>;

/// Memory layout of a tensor on the device, as Ascend's backend chooses it: ND (row-major, NCHW
/// for images), NC1HWC0 (5HD: channels in blocks of C0 = 16, for feature maps), FracZ (conv
/// weights in Cube fractals), FracNZ (MatMul operands in 16x16 fractals). Any: an op that
/// takes its input as it is and gives its output in the same layout.
enum class Format { Any, ND, NC1HWC0, FracZ, FracNZ };
const char* format_name(Format f);
std::string shape_string(const Shape& s);

enum class TensorRole {
  Input,           ///< a batch tensor fed from the dataset (image)
  Label,           ///< a batch tensor fed from the dataset (labels)
  Parameter,       ///< trainable weight, persistent
  OptimizerState,  ///< persistent optimizer slot (momentum accumulator), hyper-parameters, step counter
  State,           ///< persistent non-trainable state (BatchNorm moving mean/variance)
  Constant,        ///< persistent constant (loss-scale sensitivity)
  Activation,      ///< produced and consumed within a step
  Gradient,        ///< produced in backward, consumed by the optimizer
  Loss,            ///< the scalar returned to the host
};
bool is_persistent(TensorRole r);

struct Tensor {
  std::string name;
  Shape shape;
  DType dtype = DType::F32;
  TensorRole role = TensorRole::Activation;
  Format format = Format::ND;  ///< set by the compiler's format pass
  std::int64_t elements() const;
  std::int64_t bytes() const { return elements() * dtype_bytes(dtype); }
};

enum class Pass { Forward, Backward, Optimizer };

struct ConvAttr {
  std::int64_t kernel_h = 1, kernel_w = 1, stride = 1;
  /// Zero padding on both sides of the height and of the width axis (Inception's 1x7 and 7x1
  /// convolutions pad one axis only).
  std::int64_t pad_h = 0, pad_w = 0;
  /// Grouped convolution: the channels in `group` equal groups, each convolved with its own
  /// Cout/group filters of Cin/group channels (weight [Cout, Cin/group, kh, kw]).
  std::int64_t group = 1;
};
struct PoolAttr {
  std::int64_t kernel = 2, stride = 2, pad = 0;
  /// ceil_mode (MaxPool): a last, partial window where the windows do not fit the input exactly
  /// (starting inside the input or its leading padding), as PyTorch's and ONNX's ceil_mode.
  bool ceil = false;
  /// A window of kernel x kernel_w (0: square). A rectangular one spans the whole input (a global
  /// pool, as TextCNN's max over the sentence): its one output needs no stride.
  std::int64_t kernel_w = 0;
  std::int64_t width() const { return kernel_w > 0 ? kernel_w : kernel; }
};
struct MatMulAttr {
  bool transpose_a = false, transpose_b = false;
};

using TensorId = std::int32_t;

/// An op's attributes; each op type reads the ones it needs.
struct OpAttrs {
  ConvAttr conv;
  PoolAttr pool;
  MatMulAttr matmul;
  Shape shape;               ///< a target shape (Reshape, gradients of shaped ops)
  DType dtype = DType::F32;  ///< a target dtype (Cast, OneHot)
  std::int64_t count = 0;    ///< a count (OneHot classes), a start (StridedSlice), AvgPool's count_include_pad
  TensorRole role = TensorRole::Activation;  ///< the role of output 0 where the caller decides it
  Format format = Format::ND;                ///< a target layout (TransData)
  /// Communication and slicing (semi-automatic parallelism): the group of `group_size` ranks
  /// `group_stride` apart (hostif::CommGroup) and the tensor axis gathered, scattered or sliced.
  std::int64_t group_size = 1, group_stride = 1, axis = 0;
  std::int64_t concat_axis = 0;  ///< AllToAll: `axis` is split among the group, this one gathered
  /// AllGather: the group's ranks consume the gathered tensor alike, so each one's gradient of it
  /// is whole (not a partial sum): the backward keeps the rank's piece (a local Slice) instead of
  /// reduce-scattering.
  bool whole_gradient = false;
  /// Pipeline parallelism: a pair's other rank, this many ranks away (Send, Receive, SendReceive;
  /// an AllReduce of a weight two stages share); 0: the group above.
  std::int64_t peer = 0;
  /// Scalar parameters: ClipByValue's bounds, HSigmoid's slope and offset, Dropout's keep probability.
  double alpha = 0, beta = 0;
  bool causal = false;  ///< FlashAttentionScore: a decoder's mask (each query sees the keys up to its own)
};

struct OpDef;

struct Op : OpAttrs {
  const OpDef* def = nullptr;  ///< the op's registration (op_registry.h)
  std::string type;            ///< the registered name, e.g. "Conv2D"
  std::string name;
  Pass pass = Pass::Forward;
  std::vector<TensorId> inputs;
  std::vector<TensorId> outputs;
};

class Graph {
 public:
  TensorId add_tensor(Tensor t);
  const Tensor& tensor(TensorId id) const { return m_tensors.at(static_cast<std::size_t>(id)); }
  void set_role(TensorId id, TensorRole role) { m_tensors.at(static_cast<std::size_t>(id)).role = role; }
  void set_format(TensorId id, Format f) { m_tensors.at(static_cast<std::size_t>(id)).format = f; }
  const std::vector<Tensor>& tensors() const { return m_tensors; }
  const std::vector<Op>& ops() const { return m_ops; }

  /// Appends an op of a registered type after its shape rule checked the operands; returns its
  /// outputs. Throws std::invalid_argument for an unknown type or inconsistent operands.
  std::vector<TensorId> apply(const std::string& type, const std::string& name, std::vector<TensorId> inputs,
                              const OpAttrs& attrs = {});
  /// Builds an op as apply() does (its outputs become tensors of the graph) without appending it:
  /// for compiler passes that rewrite the op sequence.
  Op make_op(const std::string& type, const std::string& name, std::vector<TensorId> inputs, const OpAttrs& attrs,
             Pass pass);
  /// Replaces the op sequence (compiler passes, recomputation); the optimizer's mark is dropped.
  void set_ops(std::vector<Op> ops) {
    m_ops = std::move(ops);
    m_optimizer_ops = m_optimizer_tensors = -1;
  }

  // The built-in ops, by their builders; each returns the op's first output.
  TensorId conv2d(const std::string& name, TensorId x, TensorId w, ConvAttr attr);
  TensorId conv2d_backprop_input(const std::string& name, TensorId dy, TensorId w, const Shape& x_shape, ConvAttr attr);
  TensorId conv2d_backprop_filter(const std::string& name, TensorId dy, TensorId x, const Shape& w_shape,
                                  ConvAttr attr);
  TensorId matmul(const std::string& name, TensorId a, TensorId b, MatMulAttr attr, TensorRole out_role);
  TensorId bias_add(const std::string& name, TensorId x, TensorId b);
  TensorId bias_add_grad(const std::string& name, TensorId dy);
  TensorId relu(const std::string& name, TensorId x);
  TensorId relu_grad(const std::string& name, TensorId dy, TensorId y);
  TensorId max_pool(const std::string& name, TensorId x, PoolAttr attr);
  TensorId max_pool_grad(const std::string& name, TensorId x, TensorId y, TensorId dy, PoolAttr attr);
  TensorId reshape(const std::string& name, TensorId x, const Shape& shape);
  TensorId sparse_softmax_cross_entropy(const std::string& name, TensorId logits, TensorId labels);
  TensorId sparse_softmax_cross_entropy_grad(const std::string& name, TensorId logits, TensorId labels);
  TensorId add_n(const std::string& name, const std::vector<TensorId>& xs);
  /// Updates param and accum in place: accum = momentum * accum + grad; param -= lr * accum.
  void apply_momentum(const std::string& name, TensorId param, TensorId accum, TensorId lr, TensorId grad,
                      TensorId momentum);

  // ResNet and mixed precision.
  /// Outputs y (x's shape and dtype), batch mean and variance ([C], fp32); reads and updates
  /// moving_mean and moving_var in place.
  TensorId batch_norm(const std::string& name, TensorId x, TensorId gamma, TensorId beta, TensorId moving_mean,
                      TensorId moving_var);
  /// Outputs dx, dgamma, dbeta (in that order in the op's outputs); returns dx.
  TensorId batch_norm_grad(const std::string& name, TensorId dy, TensorId x, TensorId gamma, TensorId mean,
                           TensorId var);
  TensorId add(const std::string& name, TensorId a, TensorId b);
  TensorId mul(const std::string& name, TensorId x, TensorId scalar, TensorRole out_role);
  TensorId cast(const std::string& name, TensorId x, DType to);
  /// [N,C,H,W] -> [N,C] (global average pool) or [N] -> [1].
  TensorId reduce_mean(const std::string& name, TensorId x);
  TensorId reduce_mean_grad(const std::string& name, TensorId dy, const Shape& x_shape);
  TensorId one_hot(const std::string& name, TensorId labels, std::int64_t classes, DType dtype);
  TensorId softmax_cross_entropy(const std::string& name, TensorId logits, TensorId onehot);
  TensorId softmax_cross_entropy_grad(const std::string& name, TensorId logits, TensorId onehot, TensorId dloss);
  TensorId gather(const std::string& name, TensorId table, TensorId index);
  void assign_add(const std::string& name, TensorId counter, TensorId one);

  void set_pass(Pass p) { m_pass = p; }

  /// Marks where the optimizer begins — the ops and tensors so far — and the gradients it reads
  /// (per parameter), so that another optimizer can replace it (drop_optimizer, then append
  /// again: optimizer-state sharding does).
  void begin_optimizer(const std::map<TensorId, TensorId>& gradients);
  bool has_optimizer() const { return m_optimizer_ops >= 0; }
  const std::map<TensorId, TensorId>& optimizer_gradients() const { return m_gradients; }
  /// Removes every op and tensor added since begin_optimizer; throws std::logic_error without one.
  void drop_optimizer();

 private:
  std::vector<Tensor> m_tensors;
  std::vector<Op> m_ops;
  Pass m_pass = Pass::Forward;
  std::int64_t m_optimizer_ops = -1, m_optimizer_tensors = -1;
  std::map<TensorId, TensorId> m_gradients;
};

/// True if `op` writes `t` in place: an output that is also one of its inputs.
bool updates_in_place(const Op& op, TensorId t);
/// Per tensor of `g`: the index in g.ops() of the op that produces it (in-place updates do not
/// count), or -1 for tensors nothing produces (batch inputs, parameters, state).
std::vector<int> tensor_producers(const Graph& g);

/// Multiply-accumulates of a Conv2D/MatMul-family op (0 for others).
std::int64_t op_macs(const Graph& g, const Op& op);
/// Sum of Parameter tensor elements.
std::int64_t parameter_count(const Graph& g);
/// Forward conv + dense MACs for the whole batch.
std::int64_t forward_macs(const Graph& g);
/// Ops launched on the device per step (views excluded).
std::int64_t device_op_count(const Graph& g);

}  // namespace ascendsim::workloads
