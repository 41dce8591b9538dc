// A batch of independent runs simulated in one SystemC elaboration (the kernel elaborates once
// per process): add every run, then run() them together.
#pragma once

#include <memory>
#include <vector>

#include "sim/system.h"

namespace ascendsim::sim {

class Simulation {
 public:
  /// Adds a run; returns its index. Throws InputError for a run that cannot start (bad session,
  /// out of device memory). Must be called before run().
  std::size_t add(const SystemConfig& cfg, const workloads::Workload& workload, const runtime::Session& session);
  /// Simulates all runs to completion (or failure).
  void run();
  runtime::RunResult result(std::size_t index);
  std::size_t size() const { return m_systems.size(); }

 private:
  std::vector<std::unique_ptr<System>> m_systems;
  bool m_ran = false;
};

}  // namespace ascendsim::sim
