// Device tasks as the task scheduler sees them.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <systemc>

#include "aicore/cost_model.h"

namespace ascendsim::aicpu {

enum class TaskKind {
  AiCore,   ///< an op on the AI cores
  GetNext,  ///< AICPU: pop one batch from the device data queue
};

/// Where a task sits in a training step, for the step trace.
enum class StepPart : std::uint8_t { Data, Forward, Backward, Optimizer };

struct Task {
  TaskKind kind = TaskKind::AiCore;
  aicore::OpCost cost;  ///< AiCore tasks
  std::string name;
  StepPart part = StepPart::Forward;
};

/// Per-step marks on the device (MindSpore's iteration trajectory).
struct StepMarks {
  sc_core::sc_time fp_start;  ///< the first forward task starts
  sc_core::sc_time bp_end;    ///< the last backward task ends
  sc_core::sc_time end;       ///< the step's last task (optimizer, loop control) ends
};

/// A loaded graph: the tasks of one training step, in stream order.
using TaskList = std::vector<Task>;

/// Source of batches for GetNext (the device data queue implements it).
class BatchSource {
 public:
  virtual ~BatchSource() = default;
  /// Blocks until a batch is available or `timeout` passes; false on timeout. Call from an SC_THREAD.
  virtual bool pop(const sc_core::sc_time& timeout) = 0;
};

}  // namespace ascendsim::aicpu
