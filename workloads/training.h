// Training-step construction: reverse-mode differentiation of a forward graph and the optimizer.
// Every forward op type has one backward rule emitting the ops a framework would run on the
// device; a tensor read by several ops gets its gradient contributions summed by AddN.
#pragma once

#include <map>

#include "workloads/graph.h"

namespace ascendsim::workloads {

/// Appends the backward pass for the graph's current (forward) ops, seeded at `loss`, which must
/// be the output of a SparseSoftmaxCrossEntropyWithLogits op. Returns parameter -> gradient.
std::map<TensorId, TensorId> append_backward(Graph& g, TensorId loss);

/// Appends one ApplyMomentum per parameter (in parameter creation order) with its accumulator and
/// the scalar learning-rate and momentum tensors it reads. Values do not affect timing.
void append_momentum(Graph& g, const std::map<TensorId, TensorId>& grads);

}  // namespace ascendsim::workloads
