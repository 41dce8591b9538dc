// The interfaces at the host interface, in both directions. The host interface owns them; the
// device (aicpu::TaskScheduler, or a test's fake device) implements DeviceIf and reaches the host
// interface and the data queue through DeviceEventsIf and BatchSourceIf. All are bound through
// SystemC ports, so a missing binding fails at elaboration, before any simulated time passes.
#pragma once

#include <cstdint>
#include <string>

#include <systemc>

#include "hostif/task.h"

namespace ascendsim::hostif {

/// The device as the host interface drives it.
class DeviceIf : public virtual sc_core::sc_interface {
 public:
  /// One task submitted op by op; it reaches the device at `arrival` (>= now, non-decreasing
  /// per stream). `task` must outlive its execution. `ends_step`: the step's last task.
  virtual void submit_task(const Task& task, const sc_core::sc_time& arrival, bool ends_step) = 0;
  /// A loaded graph run for `iterations`, under on-device loop control if `loop_control`.
  virtual void submit_graph(const TaskList& graph, std::int64_t iterations, bool loop_control,
                            const sc_core::sc_time& arrival) = 0;
  virtual std::uint64_t submitted() const = 0;
  virtual std::uint64_t completed() const = 0;
  /// Notified when every submission so far has completed (the device drained).
  virtual const sc_core::sc_event& drained_event() const = 0;
  /// Bytes of the task descriptors a graph load moves to the device.
  virtual std::int64_t graph_image_bytes(const TaskList& graph) const = 0;
};

/// Notifications from the device to the host interface.
class DeviceEventsIf : public virtual sc_core::sc_interface {
 public:
  /// A training step's last task finished.
  virtual void step_ended(const StepMarks& marks) = 0;
  /// A task failed the run; the device stops executing.
  virtual void device_failed(const std::string& reason) = 0;
};

/// Source of batches for GetNext (the device data queue implements it).
class BatchSourceIf : public virtual sc_core::sc_interface {
 public:
  /// Blocks until a batch is available or `timeout` passes; false on timeout. Call from an SC_THREAD.
  virtual bool pop(const sc_core::sc_time& timeout) = 0;
};

}  // namespace ascendsim::hostif
