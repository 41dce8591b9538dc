// Graph ops, each declared once. An op's registration holds everything the rest of the simulator
// needs to know about it: its name, its shape rule (outputs from inputs and attributes, checked),
// its backward rule (the ops that compute its inputs' gradients), its lowering to the AI core cost
// model (an aicore::OpDesc: the kernel class that runs it and its geometry), the device workspace
// it needs and its multiply-accumulates. The graph builder, reverse-mode differentiation, the
// graph compiler and the memory planner all read the registration; none switches on op types.
//
// The built-in ops are registered in ops.cpp. A workload, a test or a model importer adds its own
// with OpRegistry::global().add(); an op that is not registered is an error naming it.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "aicore/op_desc.h"
#include "workloads/graph.h"

namespace ascendsim::workloads {

/// One output of an op as its shape rule gives it: a new tensor, or an input updated in place.
struct OutputSpec {
  Tensor tensor;            ///< a new tensor (its name is given by the graph: "<op>:<index>")
  int alias_of_input = -1;  ///< >= 0: the output is this input, updated in place
  static OutputSpec alias(int input) {
    OutputSpec o;
    o.alias_of_input = input;
    return o;
  }
};

/// What a backward rule works with: the graph, which tensors need a gradient, and where to add
/// gradient contributions (summed with AddN when a tensor gets several).
class BackwardContext {
 public:
  virtual ~BackwardContext() = default;
  virtual Graph& graph() = 0;
  /// True if `t` needs a gradient (a parameter or computed from one).
  virtual bool wants(TensorId t) const = 0;
  /// Adds `grad` to the gradient of `t` (ignored if `t` needs none).
  virtual void give(TensorId t, TensorId grad) = 0;
};

struct KernelIO;
/// Functional mode: computes an op's outputs from its inputs (kernels.h).
using Compute = std::function<void(KernelIO&)>;

struct OpDef {
  std::string name;  ///< "Conv2D"; what Op::type names
  /// A view (Reshape): metadata only, never launched, its output aliases its input's buffer.
  bool view = false;
  /// Output tensors from the inputs and attributes (which it may complete, e.g. a convolution's
  /// kernel size from its weight); throws std::invalid_argument saying what is wrong (the graph
  /// prefixes the op's name).
  std::function<std::vector<OutputSpec>(const Graph&, const std::vector<TensorId>& inputs, OpAttrs& attrs)> infer{};
  /// Emits the ops computing the inputs' gradients from `dy`, the gradient of output 0, under the
  /// name prefix `gname`. Unset: the op has no gradient (differentiating through it is an error).
  std::function<void(BackwardContext&, const Op& op, TensorId dy, const std::string& gname)> backward{};
  /// The AI core kernel class and geometry, with operands in their storage precision (the
  /// compiler's precision pass applies the chip's precision mode). Unset for views.
  std::function<aicore::OpDesc(const Graph&, const Op&)> lower{};
  /// Device workspace bytes the op needs while it runs (unset: none).
  std::function<std::int64_t(const Graph&, const Op&)> workspace{};
  /// Exact multiply-accumulates (unset: none).
  std::function<std::int64_t(const Graph&, const Op&)> macs{};
  /// Runs on the Cube, which has no fp32 path: the compiler casts fp32 operands to fp16 (the
  /// result keeps its type: the Cube accumulates in fp32).
  bool cube = false;
  /// The layout the device kernel wants for each input (Any, or missing: as it comes) and gives
  /// its outputs (Any: input 0's layout when the rank is kept, else ND). Tensors of rank <= 1
  /// have no layout to convert.
  std::vector<Format> formats{};
  Format out_format = Format::Any;
  /// Graph-kernel fusion: an element-wise op joins a fused kernel with its producers and consumers;
  /// a reduction may end one (its element-wise producers fused into it).
  enum class Fusion { None, Elementwise, Reduction } fusion = Fusion::None;
  std::int64_t vector_ops = 1;  ///< Vector operations per element, as part of a fused kernel
  /// Functional mode: the op's values (unset: the op cannot be computed; functional mode names it).
  Compute compute{};
  /// A collective among the ranks of the op's group (OpAttrs::group_size, group_stride): the
  /// compiler makes it a communication task, not an AI core kernel.
  /// SendRecv: a pipeline stage's exchange with the rank OpAttrs::peer ranks away.
  enum class Collective { None, AllReduce, AllGather, ReduceScatter, AllToAll, SendRecv } collective = Collective::None;
  /// An op of training only (Dropout): the inference graph passes its input 0 through as its output 0.
  bool identity_in_inference = false;
};

class OpRegistry {
 public:
  /// The process-wide registry, with the built-in ops.
  static OpRegistry& global();

  /// Registers an op; throws std::logic_error if the name is taken or a device op has no lowering.
  const OpDef& add(OpDef def);
  /// The op named `name`, or nullptr.
  const OpDef* find(const std::string& name) const;
  /// The op named `name`; throws std::invalid_argument naming it and the known ops.
  const OpDef& at(const std::string& name) const;
  std::vector<std::string> names() const;
  /// Gives a registered op its kernel; throws std::invalid_argument for an unknown op.
  void set_compute(const std::string& name, Compute fn);

 private:
  std::map<std::string, std::unique_ptr<OpDef>> m_ops;
};

/// Registers the built-in ops into `r` (ops.cpp), with the activations, pooling, arithmetic and
/// shuffling ops imported networks use (ops_nn.cpp, register_nn_ops).
void register_builtin_ops(OpRegistry& r);
void register_nn_ops(OpRegistry& r);
/// Transformers' ops: BatchMatMul, LayerNorm, RMSNorm, GeLU, SiLU, rotary embeddings, embedding
/// lookups and the Adam and LAMB kernels (ops_transformer.cpp).
void register_transformer_ops(OpRegistry& r);

/// Elements a tensor of `shape` occupies in layout `f`: NC1HWC0 pads channels, FracZ both weight
/// channel dimensions and FRACTAL_NZ both matrix dimensions to multiples of 16.
std::int64_t stored_elements(const Shape& shape, Format f);

/// Storage precision of a tensor dtype (fp32 and int32 both 4 bytes).
aicore::Precision storage_precision(DType t);

}  // namespace ascendsim::workloads
