// Device memory plan of one training step. Persistent tensors (weights, optimizer state,
// BatchNorm statistics, constants) get their own region; every per-step buffer — batch inputs,
// activations kept for backward, gradients, op workspaces — gets an offset in one step arena,
// where buffers whose live ranges do not overlap may share addresses (greedy by size, the
// placement TFLite and MindSpore's somas use in spirit). The data queue's slots come on top.
#pragma once

#include <cstdint>
#include <vector>

#include "workloads/workload.h"

namespace ascendsim::runtime {

struct Allocation {
  workloads::TensorId tensor = -1;   ///< -1 for an op workspace
  std::int64_t op = -1;              ///< the op a workspace belongs to
  std::int64_t bytes = 0;            ///< aligned size
  std::int64_t first = 0, last = 0;  ///< live range in op indices, inclusive
  std::int64_t offset = 0;           ///< within the step arena
};

struct MemoryPlan {
  static constexpr std::int64_t kAlignment = 512;

  std::int64_t persistent_bytes = 0;
  std::int64_t arena_bytes = 0;      ///< step arena after placement
  std::int64_t live_peak_bytes = 0;  ///< largest sum of simultaneously live step buffers (a lower bound)
  std::int64_t workspace_bytes = 0;  ///< largest single op workspace
  std::int64_t queue_buffer_bytes = 0;
  /// What the memory holds (aligned bytes). The persistent region: the weights (parameters), the
  /// optimizer's state, the rest (BatchNorm statistics, constants); they add up to
  /// persistent_bytes. At the live peak (the op at which the most step buffers are live): the
  /// gradients, the activations (batch inputs, outputs kept for the backward pass, the fp16 copies
  /// of weights) and the op workspaces; they add up to live_peak_bytes.
  std::int64_t weight_bytes = 0, optimizer_state_bytes = 0, other_persistent_bytes = 0;
  std::int64_t peak_gradient_bytes = 0, peak_activation_bytes = 0, peak_workspace_bytes = 0;
  std::vector<Allocation> allocations;

  std::int64_t peak_bytes() const { return persistent_bytes + arena_bytes + queue_buffer_bytes; }
  /// What a strategy allocates: the data queue's buffers only in the sink modes.
  std::int64_t peak_bytes(bool with_queue) const {
    return persistent_bytes + arena_bytes + (with_queue ? queue_buffer_bytes : 0);
  }
};

/// Plans a workload's step. `queue_capacity` batches of the data queue are added (sink modes).
MemoryPlan plan_memory(const workloads::Workload& w, std::int64_t queue_capacity);
/// The plan of `executed`, the workload's graph as the compiler's passes rewrote it.
MemoryPlan plan_memory(const workloads::Workload& w, const workloads::Graph& executed, std::int64_t queue_capacity);

/// Op workspace in device memory, from the op's registration (0 for most ops; an fp16
/// Conv2DBackpropFilter accumulates the weight gradient in fp32).
std::int64_t op_workspace_bytes(const workloads::Graph& g, const workloads::Op& op);

}  // namespace ascendsim::runtime
