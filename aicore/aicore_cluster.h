// The AI cores of one chip as SystemC sees them: a shared resource that tasks on concurrently
// running streams acquire. A task takes min(blocks, pool size) cores of its pool — the Cube cores
// for Cube ops, the vector cores for vector-only ops (the same pool when the chip has no separate
// vector cores) — for the op's modelled time, after the scheduler's dispatch. When enough cores
// are free the task costs one wait; otherwise it waits, after its dispatch, until cores are
// released (first come, first served). No per-cycle or per-block events.
#pragma once

#include <cstdint>

#include <systemc>

#include "aicore/cost_model.h"
#include "aicore/hbm.h"
#include "sim/core/stats.h"

namespace ascendsim::aicore {

class AiCoreCluster : public sc_core::sc_module {
 public:
  /// `cube_cores` AI cores with a Cube unit; `vector_cores` separate vector cores (0: vector-only
  /// ops run on the AI cores).
  AiCoreCluster(sc_core::sc_module_name name, std::int64_t cube_cores, std::int64_t vector_cores);

  /// Blocks the calling thread for `lead` (the dispatch before the op reaches the cores), the wait
  /// for free cores if any, and the op's device time `time` (`cost.time_s` as simulation time).
  /// Returns the op's start on the cores. Call from an SC_THREAD. With the chip's HBM shared
  /// (set_hbm), the op runs as an HBM kernel and `lost` (if given) receives what other consumers
  /// of the HBM added to its time.
  sc_core::sc_time execute(const OpCost& cost, const sc_core::sc_time& time, const sc_core::sc_time& lead,
                           sc_core::sc_time* lost = nullptr);
  /// The chip's HBM, which the ops' GM traffic draws on (nullptr: not modelled as shared).
  void set_hbm(Hbm* hbm) { m_hbm = hbm; }
  Hbm* hbm() const { return m_hbm; }

  /// True if no task holds or waits for cores.
  bool idle() const {
    return m_cube.free == m_cube.size && m_cube.waiting == 0 && m_vector.free == m_vector.size && m_vector.waiting == 0;
  }
  /// Accounts a task that a caller runs on idle cores without waiting here (a run of tasks
  /// executed with one wait): starts at `start`, lasts `time`. Starts must not decrease.
  void account_free_run(const OpCost& cost, const sc_core::sc_time& start, const sc_core::sc_time& time);
  /// Accounts `tasks` consecutive tasks run as account_free_run() would, in one call: the first
  /// starts at `start` (not before the busy time already counted: see busy_until()), the last
  /// ends at `end`; `time` their times summed, `core_time` each time by its blocks summed, `macs`
  /// and `gm_bytes` theirs summed. The statistics are those of the tasks counted one by one.
  void account_free_runs(std::int64_t tasks, const sc_core::sc_time& start, const sc_core::sc_time& end,
                         const sim::TimeSum& time, const sim::TimeSum& core_time, const sim::ExactSum& macs,
                         const sim::ExactSum& gm_bytes);
  /// The end of the busy time counted so far.
  const sc_core::sc_time& busy_until() const { return m_busy_until; }

  sim::StatsGroup& stats() { return m_stats; }

 private:
  struct Pool {
    std::int64_t size = 0;
    std::int64_t free = 0;
    std::int64_t waiting = 0;  ///< tasks waiting for cores
    sc_core::sc_event released;
  };
  Pool& pool(bool cube) { return cube || !m_split ? m_cube : m_vector; }
  void account(const OpCost& cost, const sc_core::sc_time& start, const sc_core::sc_time& time);
  void count(const OpCost& cost, const sc_core::sc_time& time);
  /// Runs the op on the shared HBM from now; busy time by the number of ops running.
  sc_core::sc_time run_shared(const OpCost& cost, const sc_core::sc_time& time);

  Hbm* m_hbm = nullptr;
  std::int64_t m_running = 0;  ///< ops running under run_shared
  sc_core::sc_time m_running_since;
  bool m_split;
  Pool m_cube, m_vector;
  sc_core::sc_time m_busy_until;

  sim::StatsGroup m_stats;
  sim::Scalar& m_tasks;
  // Sums independent of the order of their terms: a run counted in one addition gives the value
  // of its tasks counted one by one.
  sim::TimeSum& m_busy_s;
  sim::TimeSum& m_core_busy_s;
  sim::Scalar& m_core_wait_s;
  sim::ExactSum& m_macs;
  sim::ExactSum& m_gm_bytes;
};

}  // namespace ascendsim::aicore
