// The values an op computes, for functional mode: each registered op's kernel (OpDef::compute)
// reads its inputs and writes its outputs as float arrays in the graph's layouts (NCHW images,
// OIHW convolution weights, row-major matrices). fp16 tensors hold fp16 values (the caller rounds
// what a kernel writes to a tensor of that type, round-to-nearest-even); int32 tensors hold whole
// numbers. Convolution, matrix multiplication and ReLU run on oneDNN; the rest are written here.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "workloads/graph.h"

namespace ascendsim::workloads {

/// What a kernel works with: the op, its operands' buffers and shapes, and a slot for what the
/// kernel keeps between calls (oneDNN primitives built once per op).
struct KernelIO {
  const Graph& graph;
  const Op& op;
  std::vector<float*> in;   ///< per input
  std::vector<float*> out;  ///< per output; an in-place output is its input's buffer
  std::shared_ptr<void>* state = nullptr;
  /// The network runs as evaluated (Model.eval, inference): BatchNorm normalises with its moving
  /// statistics and updates nothing, Dropout passes its input through.
  bool inference = false;

  const Shape& in_shape(std::size_t i) const { return graph.tensor(op.inputs.at(i)).shape; }
  const Shape& out_shape(std::size_t i) const { return graph.tensor(op.outputs.at(i)).shape; }
  std::int64_t in_elements(std::size_t i) const { return graph.tensor(op.inputs.at(i)).elements(); }
  std::int64_t out_elements(std::size_t i) const { return graph.tensor(op.outputs.at(i)).elements(); }
};

/// The op's kept state (KernelIO::state), made by `make` on the first call.
template <typename T, typename Make>
T& kept(KernelIO& io, Make&& make) {
  if (!*io.state) *io.state = std::make_shared<T>(make());
  return *static_cast<T*>(io.state->get());
}

class OpRegistry;
/// Gives the built-in ops of `r` their kernels (called by register_builtin_ops).
void register_builtin_kernels(OpRegistry& r);
/// The kernels of ops_nn.cpp's ops and of the broadcasting Add and Mul (kernels_nn.cpp).
void register_nn_kernels(OpRegistry& r);
/// The kernels of the transformers' ops (kernels_transformer.cpp).
void register_transformer_kernels(OpRegistry& r);

/// For each element of a tensor of shape `out` (row-major), its index in an operand of shape `in`
/// broadcast to it (numpy's rules: trailing axes align, an axis of 1 repeats).
std::vector<std::int64_t> broadcast_index(const Shape& in, const Shape& out);

/// `x` rounded to the nearest fp16 value (ties to even), as a float.
float round_to_fp16(float x);

}  // namespace ascendsim::workloads
