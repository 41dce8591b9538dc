// A SystemC kernel context for one library call (a run, a sweep, a serving step's shapes): a
// ScopedContext (sim/core/context.h), at most one at a time. Everything simulated in the scope
// must be destroyed before the scope ends.
#pragma once

#include <memory>

#include "sim/core/context.h"

namespace ascendsim::sim {

class KernelScope {
 public:
  KernelScope();
  ~KernelScope();
  KernelScope(const KernelScope&) = delete;
  KernelScope& operator=(const KernelScope&) = delete;

 private:
  std::unique_ptr<ScopedContext> m_context;
};

}  // namespace ascendsim::sim
