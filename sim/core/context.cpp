#include "sim/core/context.h"

#include <cstddef>

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define ASCENDSIM_ASAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__)
#define ASCENDSIM_ASAN 1
#endif
#ifdef ASCENDSIM_ASAN
#include <pthread.h>
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#endif

namespace ascendsim::sim {

#ifdef ASCENDSIM_ASAN
void clear_dead_stack() {
  // SystemC tells the sanitizer when it switches to a process's stack but not always when the
  // kernel resumes on the thread's own stack: the sanitizer then takes a process's stack for this
  // thread's ("ASan is ignoring requested __asan_handle_no_return") and the next exception trips
  // over stale poison. Announce the switch back to this thread's stack, then clear what the
  // kernel's frames left below this one.
  pthread_attr_t attr;
  if (pthread_getattr_np(pthread_self(), &attr) == 0) {
    void* base = nullptr;
    std::size_t size = 0;
    if (pthread_attr_getstack(&attr, &base, &size) == 0) {
      void* fake = nullptr;
      __sanitizer_start_switch_fiber(&fake, base, size);
      __sanitizer_finish_switch_fiber(fake, nullptr, nullptr);
    }
    pthread_attr_destroy(&attr);
  }
  char here = 0;
  constexpr std::size_t kDepth = std::size_t{1} << 20;  // the kernel's frames lie well within 1 MiB
  __asan_unpoison_memory_region(&here - kDepth, kDepth);
}
#else
void clear_dead_stack() {}
#endif

std::recursive_mutex& systemc_mutex() {
  static std::recursive_mutex m;
  return m;
}

ScopedContext::ScopedContext()
    : m_lock(systemc_mutex()),
      m_previous(sc_core::sc_curr_simcontext),
      m_previous_default(sc_core::sc_default_global_context),
      m_context(new sc_core::sc_simcontext) {
  sc_core::sc_curr_simcontext = m_context;
  sc_core::sc_default_global_context = m_context;
}

ScopedContext::~ScopedContext() {
  // Processes still suspended (a channel thread blocked on a full queue when its run ended) are
  // dropped with the context; their coroutine stacks are freed without unwinding.
  delete m_context;
  sc_core::sc_curr_simcontext = m_previous;
  sc_core::sc_default_global_context = m_previous_default;
}

}  // namespace ascendsim::sim
