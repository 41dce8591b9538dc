// The host interface of one chip: the only door between the host runtime and the device. It holds
// the two DMA directions of the PCIe link and the device data queue, rings doorbells for
// submissions (host -> device), delivers completion notices and fans the device's step-end and
// failure notifications out to every subscriber (device -> host).
//
// Bindings (made in sim/chip.cpp): `device` to the device's DeviceIf; the device's
// DeviceEventsIf port to this module and its BatchSourceIf port to `queue`, then `eval_queue`.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <systemc>

#include "hostif/data_queue.h"
#include "hostif/device_if.h"
#include "hostif/dma_channel.h"
#include "hostif/link_config.h"
#include "sim/core/stats.h"

namespace ascendsim::hostif {

class HostInterface : public sc_core::sc_module, public DeviceEventsIf {
 public:
  HostInterface(sc_core::sc_module_name name, const LinkConfig& link, const QueueConfig& queue);

  sc_core::sc_port<DeviceIf> device;
  DmaChannel h2d;
  DmaChannel d2h;
  DataQueue queue;       ///< the training dataset's channel
  DataQueue eval_queue;  ///< the evaluation dataset's channel (evaluation during training)

  // Host side.
  /// Submits one task, issued by the host at `issued` (now or later): the doorbell delays its
  /// arrival on the device.
  void submit_task(const Task& task, const sc_core::sc_time& issued, bool ends_step);
  /// Submits a loaded graph now, to run `iterations` times (under loop control if asked).
  void submit_graph(const TaskList& graph, std::int64_t iterations, bool loop_control);
  /// Bytes a graph load moves (the device's task descriptors).
  std::int64_t graph_image_bytes(const TaskList& graph) const { return device->graph_image_bytes(graph); }
  /// True if submissions are outstanding.
  bool busy() const { return device->completed() < device->submitted(); }
  /// Blocks the host thread until every submission has completed and the completion notice has
  /// reached the host; returns at once if nothing is outstanding. Call from an SC_THREAD.
  void wait_all_completed();
  /// Subscribes to step ends and failures; every subscriber is called, in subscription order.
  void on_step_end(std::function<void(const StepMarks&)> fn) { m_step_subscribers.push_back(std::move(fn)); }
  void on_failure(std::function<void(const std::string&)> fn) { m_failure_subscribers.push_back(std::move(fn)); }
  /// The first failure the device reported, or empty.
  const std::string& failure() const { return m_failure; }

  // Device side (DeviceEventsIf).
  void step_ended(const StepMarks& marks) override;
  void device_failed(const std::string& reason) override;

  sim::StatsGroup& stats() { return m_stats; }

 private:
  sc_core::sc_time m_doorbell;
  sc_core::sc_time m_completion;
  std::vector<std::function<void(const StepMarks&)>> m_step_subscribers;
  std::vector<std::function<void(const std::string&)>> m_failure_subscribers;
  std::string m_failure;
  sim::StatsGroup m_stats;
  sim::Scalar& m_doorbells;
  sim::Scalar& m_completions;
};

}  // namespace ascendsim::hostif
