#include "sim/kernel.h"

#include <stdexcept>

namespace ascendsim::sim {

namespace {
bool g_active = false;  // one scope at a time: SystemC has one current context per process
}

KernelScope::KernelScope()
    : m_previous(sc_core::sc_curr_simcontext), m_previous_default(sc_core::sc_default_global_context) {
  if (g_active) throw std::logic_error("a simulation is already running in this process");
  g_active = true;
  m_context = new sc_core::sc_simcontext;
  sc_core::sc_curr_simcontext = m_context;
  sc_core::sc_default_global_context = m_context;
}

KernelScope::~KernelScope() {
  // Processes still suspended (a channel thread blocked on a full queue when its run ended) are
  // dropped with the context; their coroutine stacks are freed without unwinding.
  delete m_context;
  sc_core::sc_curr_simcontext = m_previous;
  sc_core::sc_default_global_context = m_previous_default;
  g_active = false;
}

}  // namespace ascendsim::sim
