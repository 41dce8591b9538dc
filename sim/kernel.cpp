#include "sim/kernel.h"

#include <cstddef>
#include <stdexcept>

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define ASCENDSIM_ASAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__)
#define ASCENDSIM_ASAN 1
#endif
#ifdef ASCENDSIM_ASAN
#include <sanitizer/asan_interface.h>
#endif

namespace ascendsim::sim {

namespace {
bool g_active = false;  // one scope at a time: SystemC has one current context per process
}  // namespace

#ifdef ASCENDSIM_ASAN
__attribute__((noinline)) void clear_dead_stack() {
  char here = 0;
  constexpr std::size_t kDepth = std::size_t{1} << 20;  // the kernel's frames lie well within 1 MiB
  __asan_unpoison_memory_region(&here - kDepth, kDepth);
}
#else
void clear_dead_stack() {}
#endif

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
