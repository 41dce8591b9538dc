#include "sim/simulation.h"

#include <stdexcept>

namespace ascendsim::sim {

std::size_t Simulation::add(const SystemConfig& cfg, const workloads::Workload& workload,
                            const runtime::Session& session) {
  if (m_ran) throw std::logic_error("Simulation::add after run()");
  const std::string name = "run" + std::to_string(m_systems.size());
  m_systems.push_back(std::make_unique<System>(name.c_str(), cfg, workload, session));
  return m_systems.size() - 1;
}

void Simulation::run() {
  if (m_ran) throw std::logic_error("Simulation::run called twice");
  m_ran = true;
  sc_core::sc_start();
}

runtime::RunResult Simulation::result(std::size_t index) { return m_systems.at(index)->result(); }

}  // namespace ascendsim::sim
