#include "hostif/host_interface.h"

#include "sim/core/time.h"

namespace ascendsim::hostif {

HostInterface::HostInterface(sc_core::sc_module_name name, const LinkConfig& link, const QueueConfig& queue_cfg)
    : sc_module(name),
      device("device"),
      h2d("h2d", link.h2d_bandwidth_gbps, link.latency_ns, link.dma_chunk_kib * 1024, link.dma_setup_ns),
      d2h("d2h", link.d2h_bandwidth_gbps, link.latency_ns, link.dma_chunk_kib * 1024, link.dma_setup_ns),
      queue("queue", queue_cfg.capacity),
      eval_queue("eval_queue", queue_cfg.capacity),
      m_doorbell(sim::ns(link.doorbell_ns)),
      m_completion(sim::ns(link.completion_ns)),
      m_stats(*this),
      m_doorbells(m_stats.scalar("doorbells", "count", "host submissions (op or graph launches)")),
      m_completions(m_stats.scalar("completions", "count", "completion notices delivered to the host")) {}

void HostInterface::submit_task(const Task& task, const sc_core::sc_time& issued, bool ends_step) {
  ++m_doorbells;
  device->submit_task(task, issued + m_doorbell, ends_step);
}

void HostInterface::submit_graph(const TaskList& graph, std::int64_t iterations, bool loop_control) {
  ++m_doorbells;
  device->submit_graph(graph, iterations, loop_control, sc_core::sc_time_stamp() + m_doorbell);
}

void HostInterface::wait_all_completed() {
  if (!busy()) return;
  while (busy()) wait(device->drained_event());
  ++m_completions;
  wait(m_completion);
}

void HostInterface::step_ended(const StepMarks& marks) {
  for (const auto& fn : m_step_subscribers) fn(marks);
}

void HostInterface::device_failed(const std::string& reason) {
  if (!m_failure.empty()) return;  // the first failure stops the run; later ones follow from it
  m_failure = reason;
  for (const auto& fn : m_failure_subscribers) fn(reason);
}

}  // namespace ascendsim::hostif
