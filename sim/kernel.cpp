#include "sim/kernel.h"

#include <stdexcept>

namespace ascendsim::sim {

namespace {
bool g_active = false;  // one run's scope at a time
}  // namespace

KernelScope::KernelScope() {
  if (g_active) throw std::logic_error("a simulation is already running in this process");
  g_active = true;
  m_context = std::make_unique<ScopedContext>();
}

KernelScope::~KernelScope() {
  m_context.reset();
  g_active = false;
}

}  // namespace ascendsim::sim
