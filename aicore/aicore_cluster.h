// The AI cores of one chip as SystemC sees them: one task at a time occupies `blocks` cores for
// the op's modelled time. One wait per task; no per-cycle or per-block events.
#pragma once

#include <systemc>

#include "aicore/cost_model.h"
#include "sim/core/stats.h"

namespace ascendsim::aicore {

class AiCoreCluster : public sc_core::sc_module {
 public:
  explicit AiCoreCluster(sc_core::sc_module_name name);

  /// Blocks the calling thread for `lead` (the dispatch before the op reaches the cores) plus the
  /// op's device time, in one wait, and returns the op's time. Call from an SC_THREAD.
  sc_core::sc_time execute(const OpCost& cost, const sc_core::sc_time& lead);

  sim::StatsGroup& stats() { return m_stats; }

 private:
  sim::StatsGroup m_stats;
  sim::Scalar& m_tasks;
  sim::Scalar& m_busy_s;
  sim::Scalar& m_core_busy_s;
  sim::Scalar& m_macs;
  sim::Scalar& m_gm_bytes;
};

}  // namespace ascendsim::aicore
