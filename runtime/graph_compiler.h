// Graph compiler: turns a workload's training-step graph into device tasks with their modelled
// cost, and plans the step's device memory.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "aicore/cost_model.h"
#include "hostif/task.h"
#include "runtime/memory_plan.h"
#include "workloads/workload.h"

namespace ascendsim::runtime {

struct CompiledGraph {
  hostif::TaskList step_tasks;             ///< one step launched op by op (non-sink): device ops in order
  hostif::TaskList sink_tasks;             ///< one step fed from the data queue: GetNext, then the device ops
  std::vector<aicore::OpDesc> descs;      ///< per step_tasks entry
  std::vector<std::int64_t> input_bytes;  ///< per batch input tensor, feed order
  std::int64_t batch_bytes = 0;
  MemoryPlan memory;
  double device_compute_s = 0;  ///< sum of AI core task times of one step
};

/// Lowers one graph op to the AI core's description (fp32 Cube ops compute as fp16, Ascend's
/// default precision mode). Throws std::invalid_argument for ops that do not run on AI cores.
aicore::OpDesc lower_op(const workloads::Graph& g, const workloads::Op& op);

/// Compiles a workload. `queue_capacity` sizes the data queue buffers in the memory plan.
CompiledGraph compile(const workloads::Workload& w, const aicore::CostModel& model, std::int64_t queue_capacity);

}  // namespace ascendsim::runtime
