#include "sim/kernel.h"

#include <stdexcept>

namespace ascendsim::sim {

namespace {
bool g_active = false;  // one run's scope at a time; read and written under systemc_mutex()
}  // namespace

KernelScope::KernelScope() {
  // Another thread's scope holds the mutex: this one waits for it to end. On this thread a second
  // scope would elaborate inside the first: refused.
  auto context = std::make_unique<ScopedContext>();
  if (g_active) throw std::logic_error("a simulation is already running in this thread");
  g_active = true;
  m_context = std::move(context);
}

KernelScope::~KernelScope() {
  g_active = false;
  m_context.reset();
}

}  // namespace ascendsim::sim
