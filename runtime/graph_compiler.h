// Graph compiler: turns a workload's training-step graph into device tasks with their modelled
// cost, and plans the step's device memory. Compilation is a pipeline of named passes over a
// shared state, in this order by default:
//
//   cube_precision, bn_split, formats, atomic_clean
//                the backend passes (backend_passes.h): the graph the device executes
//   lower        every device op to the AI core's description (its registration's lowering)
//   precision    the chip's precision mode: fp32 Cube operands compute in fp16 (Ascend's default
//                allow_fp32_to_fp16; after cube_precision no Cube op has any left)
//   cost         each lowered op's device time from the cost model; the tasks of a step
//   memory_plan  the device memory of a step, workspaces included
//
// Further passes (operator fusion, graph rewrites) are inserted by name with insert_pass().
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "aicore/cost_model.h"
#include "hostif/task.h"
#include "runtime/memory_plan.h"
#include "workloads/workload.h"

namespace ascendsim::runtime {

struct CompiledGraph {
  hostif::TaskList step_tasks;  ///< one step launched op by op (non-sink): device ops in order
  hostif::TaskList sink_tasks;  ///< one step fed from the data queue: GetNext, then the device ops
  /// Once before the first step, on every rank of a cluster: the parameters' Broadcast.
  hostif::TaskList setup_tasks;
  std::vector<aicore::OpDesc> descs;  ///< per step_tasks entry
  std::vector<std::string> op_types;  ///< per step_tasks entry: the graph op's registered type (or the task kind's
                                      ///< name for communication and events)
  /// Per AllReduce group (several devices): its gradients and bytes.
  struct CommGroup {
    std::int64_t first = 0, last = 0;  ///< gradient indices, in gradient order
    std::int64_t bytes = 0;
  };
  std::vector<CommGroup> comm_groups;
  /// Per pass, in order: its name and the executed graph's device ops and HBM bytes after it
  /// (the first entry, "framework", is the graph before any pass).
  struct PassEffect {
    std::string name;
    std::int64_t ops = 0, bytes = 0;
  };
  std::vector<PassEffect> pass_effects;
  std::vector<std::int64_t> input_bytes;  ///< per batch input tensor, feed order
  std::int64_t batch_bytes = 0;
  MemoryPlan memory;
  double device_compute_s = 0;  ///< sum of AI core task times of one step
};

/// What the passes share: the input, the device ops as they are lowered, and the output.
struct CompileState {
  const workloads::Workload& workload;
  const aicore::CostModel& model;
  std::int64_t queue_capacity;
  workloads::Graph graph;                 ///< the executed graph: the workload's, as the backend passes rewrite it
  std::vector<const workloads::Op*> ops;  ///< the device ops of `graph`, in order (after `lower`)
  CompiledGraph out;
};

struct CompilePass {
  std::string name;
  std::function<void(CompileState&)> run;
};

/// cube_precision, bn_split, formats, atomic_clean, lower, precision, cost, memory_plan.
std::vector<CompilePass> default_passes();
/// The AllReduce of each gradient group on a communication stream (stream 1), ordered by events
/// against the compute stream: a group's AllReduce starts once the backward pass has produced its
/// last gradient, and the optimizer reads the group's gradients only after it, each scaled by
/// 1/devices first (gradients_mean: a Mul per gradient). Runs after `cost`
/// on a workload trained on several devices (compile() inserts it). Throws
/// std::invalid_argument for a fusion split that is not increasing or names no gradient.
CompilePass all_reduce_pass();
/// Semi-auto parallelism's redistribution collectives (Comm tasks the cost pass left on the compute
/// stream) moved to the communication stream (stream 1), ordered by events as the gradient
/// AllReduce is: an EventRecord after the producer, the collective on stream 1, and an EventWait
/// before the consumer. Runs last.
CompilePass comm_stream_pass();
/// The parameters in gradient order (the order the backward pass finishes their gradients).
std::vector<workloads::TensorId> gradient_order(const workloads::Graph& executed);
/// Inserts `pass` after the pass named `after`; throws std::invalid_argument if there is none.
void insert_pass(std::vector<CompilePass>& passes, const std::string& after, CompilePass pass);

/// The chip's precision mode on a lowered op: fp32 Cube operands compute in fp16.
void apply_precision_mode(aicore::OpDesc& d);
/// Lowers one graph op to the AI core's description as the default passes give it (lowering and
/// precision mode). Throws std::invalid_argument for ops that do not run on AI cores.
aicore::OpDesc lower_op(const workloads::Graph& g, const workloads::Op& op);

/// Compiles a workload with the default passes (and graph-kernel fusion after atomic_clean when
/// its recipe asks for it). `queue_capacity` sizes the data queue buffers in the memory plan.
/// The distinct AI-core kernels of `g` (an op at its shapes and types: the kernel compiler builds
/// each once) that `known`, a graph compiled before it, does not already have.
std::int64_t kernels_to_compile(const CompiledGraph& g, const CompiledGraph* known = nullptr);

CompiledGraph compile(const workloads::Workload& w, const aicore::CostModel& model, std::int64_t queue_capacity);
/// Compiles with the given passes, in order.
CompiledGraph compile(const workloads::Workload& w, const aicore::CostModel& model, std::int64_t queue_capacity,
                      const std::vector<CompilePass>& passes);

}  // namespace ascendsim::runtime
