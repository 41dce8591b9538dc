// A SystemC kernel context for one library call. SystemC 2.3 elaborates once per context and has
// no supported reset, so each call builds its modules in a fresh sc_simcontext and deletes it
// afterwards, restoring the context that was current before (the one sc_main runs in, if any).
// Everything simulated in the scope must be destroyed before the scope ends.
#pragma once

#include <systemc>

namespace ascendsim::sim {

class KernelScope {
 public:
  KernelScope();
  ~KernelScope();
  KernelScope(const KernelScope&) = delete;
  KernelScope& operator=(const KernelScope&) = delete;

 private:
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
