// Device tasks: what the host submits through the host interface and the device executes. This
// is the contract between the host runtime and the device; the device side (aicpu/) implements
// DeviceIf, the host side (runtime/) sees only HostInterface.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <systemc>

#include "aicore/cost_model.h"

namespace ascendsim::hostif {

enum class TaskKind : std::uint8_t {
  AiCore,       ///< an op on the AI cores
  GetNext,      ///< AICPU: pop one batch from the device data queue
  EventRecord,  ///< marks `event` recorded on this task's stream
  EventWait,    ///< blocks this task's stream until `event` has been recorded (one record per wait)
  Comm,         ///< communication: a collective of comm_bytes across the cluster's ranks, or (comm_bytes
                ///< 0) a transfer occupying its stream for cost.time_s; no AI core
};
const char* task_kind_name(TaskKind k);

/// HCCL's collectives. `bytes` of a Comm task: AllReduce and ReduceScatter, the buffer each rank
/// contributes; AllGather, the gathered result (each rank contributes bytes/N); Broadcast, the
/// root's buffer.
/// AllToAll: each rank's buffer of `bytes` in N pieces, piece i to rank i (a layout change from
/// one cut dimension to another).
/// SendRecv: a point-to-point exchange between two ranks (pipeline parallelism's activations and
/// their gradients): `bytes` each way at most, both ranks waiting for each other.
enum class Collective : std::uint8_t { AllReduce, Broadcast, AllGather, ReduceScatter, AllToAll, SendRecv };

/// The ranks a collective runs among: `size` ranks `stride` apart — rank r's group is
/// {b + i·stride : i < size} with b = r - (r / stride mod size)·stride (the whole cluster when size
/// is 0). Semi-automatic parallelism's groups: the 4 ranks that hold one image's strips (size 4,
/// stride 1), or the ranks that hold copies of one weight shard (size 2, stride 4).
/// A pair (pipeline parallelism): `peer` != 0, the rank and the one `peer` ranks from it.
struct CommGroup {
  std::int32_t size = 0;  ///< 0: every rank of the cluster
  std::int32_t stride = 1;
  std::int32_t peer = 0;  ///< != 0: the pair {rank, rank + peer} (size and stride unused)
  bool whole() const { return size == 0 && peer == 0; }
  /// The members of `rank`'s group among `ranks` ranks, in piece order (all of them when whole).
  std::vector<int> members(int rank, int ranks) const;
};
const char* collective_name(Collective c);

/// Where a task sits in a training step, for the step trace.
enum class StepPart : std::uint8_t {
  Data,
  Forward,
  Backward,
  Optimizer,
  Setup,  ///< one-time work before the first step (the parameters' broadcast); charged to `setup`
};

struct Task {
  TaskKind kind = TaskKind::AiCore;
  aicore::OpCost cost;  ///< AiCore tasks: the op's modelled cost; Comm tasks: time_s
  std::string name;
  StepPart part = StepPart::Forward;
  std::int32_t stream = 0;      ///< device stream; tasks of one stream run in order, streams concurrently
  std::int32_t event = -1;      ///< EventRecord / EventWait: the event id
  std::int64_t comm_bytes = 0;  ///< Comm: the collective's size (see Collective)
  Collective collective = Collective::AllReduce;  ///< Comm: which collective
  std::int32_t comm_group = -1;                   ///< Comm: the gradient group it reduces (-1: none)
  CommGroup group;                                ///< Comm: the ranks it runs among
  /// Comm: among ranks of different pipeline stages (an exchange, a shared weight's gradient, the
  /// stages' global norm): what its ranks wait in it is the pipeline's skew, the bubble.
  bool across_stages = false;
  /// GetNext: the dataset channel it pops, 0 the training data's, 1 the evaluation data's (each
  /// dataset has its own channel, as MindSpore's).
  std::int32_t queue = 0;
  /// The op's tensor arguments (inputs and outputs): what an eager launch from Python describes.
  std::int32_t tensor_args = 0;
  sc_core::sc_time time;  ///< cost.time_s as simulation time, set once when the graph is compiled
};

/// Per-step marks on the device (MindSpore's iteration trajectory).
struct StepMarks {
  sc_core::sc_time fp_start;  ///< the first forward task starts
  sc_core::sc_time bp_end;    ///< the last backward task ends
  sc_core::sc_time end;       ///< the step's last task (optimizer, loop control) ends
};

/// A loaded graph: the tasks of one training step, in stream order per stream.
using TaskList = std::vector<Task>;

/// The streams a task list uses, ascending.
std::vector<std::int32_t> streams_of(const TaskList& tasks);

}  // namespace ascendsim::hostif
