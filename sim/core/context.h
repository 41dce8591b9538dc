// SystemC kernel contexts. SystemC 2.3 elaborates once per context, has no supported reset and
// keeps one current context per process (a global, not per thread). A ScopedContext makes a fresh
// sc_simcontext current for its lifetime and restores the one before (the one sc_main runs in, if
// any); everything simulated in it must be destroyed before it ends. It holds systemc_mutex() for
// its lifetime, so contexts made on other threads wait; on its own thread a context may be made
// inside another while the outer one is not running (an op's event model while a run elaborates).
#pragma once

#include <mutex>

#include <systemc>

namespace ascendsim::sim {

/// Held by every ScopedContext: SystemC's current context is one per process.
std::recursive_mutex& systemc_mutex();

class ScopedContext {
 public:
  ScopedContext();
  ~ScopedContext();
  ScopedContext(const ScopedContext&) = delete;
  ScopedContext& operator=(const ScopedContext&) = delete;

 private:
  std::unique_lock<std::recursive_mutex> m_lock;
  sc_core::sc_simcontext* m_previous;
  sc_core::sc_simcontext* m_previous_default;
  sc_core::sc_simcontext* m_context;
};

/// AddressSanitizer builds: SystemC switches between the kernel's and its processes' stacks
/// without telling the sanitizer, so the frames sc_start ran on this thread's stack can keep
/// stale poison that a later, deeper call (an exception's constructor) trips over. Call right
/// after sc_start returns: everything below the caller's frame is dead, and its shadow is
/// cleared. Does nothing in other builds.
void clear_dead_stack();

}  // namespace ascendsim::sim
