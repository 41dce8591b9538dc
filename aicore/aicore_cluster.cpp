#include "aicore/aicore_cluster.h"

#include <algorithm>
#include <stdexcept>

namespace ascendsim::aicore {

AiCoreCluster::AiCoreCluster(sc_core::sc_module_name name, std::int64_t cube_cores, std::int64_t vector_cores)
    : sc_module(name),
      m_split(vector_cores > 0),
      m_stats(*this),
      m_tasks(m_stats.scalar("tasks", "count", "ops executed on the AI cores")),
      m_busy_s(m_stats.time_sum("busy_s", "s", "time at least one AI core was busy")),
      m_core_busy_s(m_stats.time_sum("core_busy_s", "core*s", "sum over cores of busy time")),
      m_core_wait_s(m_stats.scalar("core_wait_s", "s", "time dispatched ops waited for free cores")),
      m_macs(m_stats.sum("macs", "MAC", "multiply-accumulates executed")),
      m_gm_bytes(m_stats.sum("gm_bytes", "B", "bytes moved between GM and the cores")) {
  if (cube_cores < 1) throw std::invalid_argument("AiCoreCluster: at least one AI core");
  m_cube.size = m_cube.free = cube_cores;
  m_vector.size = m_vector.free = m_split ? vector_cores : 0;
}

void AiCoreCluster::account(const OpCost& cost, const sc_core::sc_time& start, const sc_core::sc_time& time) {
  // Starts never decrease, so the union of busy intervals grows by what lies past m_busy_until.
  const sc_core::sc_time end = start + time;
  if (end > m_busy_until) {
    m_busy_s.add(end - std::max(start, m_busy_until));
    m_busy_until = end;
  }
  count(cost, time);
}

void AiCoreCluster::count(const OpCost& cost, const sc_core::sc_time& time) {
  ++m_tasks;
  m_core_busy_s.add(time, cost.blocks);
  m_macs += cost.macs;
  m_gm_bytes += cost.gm_bytes;
}

void AiCoreCluster::account_free_run(const OpCost& cost, const sc_core::sc_time& start, const sc_core::sc_time& time) {
  if (start < m_busy_until) {  // overlaps what is already counted busy
    account(cost, start, time);
    return;
  }
  m_busy_s.add(time);  // start past every earlier busy span
  m_busy_until = start + time;
  count(cost, time);
}

void AiCoreCluster::account_free_runs(std::int64_t tasks, const sc_core::sc_time& start, const sc_core::sc_time& end,
                                      const sim::TimeSum& time, const sim::TimeSum& core_time,
                                      const sim::ExactSum& macs, const sim::ExactSum& gm_bytes) {
  if (start < m_busy_until) throw std::logic_error("AiCoreCluster::account_free_runs: starts before the busy time");
  m_busy_s += time;
  m_busy_until = end;
  m_tasks += static_cast<double>(tasks);
  m_core_busy_s += core_time;
  m_macs += macs;
  m_gm_bytes += gm_bytes;
}

sc_core::sc_time AiCoreCluster::run_shared(const OpCost& cost, const sc_core::sc_time& time) {
  // Several ops may overlap and stretch: the busy union is the time at least one runs.
  if (m_running++ == 0) m_running_since = std::max(sc_core::sc_time_stamp(), m_busy_until);
  const sc_core::sc_time lost = m_hbm->kernel(sc_core::SC_ZERO_TIME, time, cost.gm_bytes);
  const sc_core::sc_time now = sc_core::sc_time_stamp();
  if (--m_running == 0 && now > m_running_since) {
    m_busy_s.add(now - m_running_since);
    m_busy_until = std::max(m_busy_until, now);
  }
  count(cost, time + lost);
  return lost;
}

sc_core::sc_time AiCoreCluster::execute(const OpCost& cost, const sc_core::sc_time& time,
                                        const sc_core::sc_time& lead, sc_core::sc_time* lost) {
  Pool& p = pool(cost.tiling.cube);
  const std::int64_t need = std::clamp<std::int64_t>(cost.blocks, 1, p.size);
  const bool shared = m_hbm && m_hbm->contention();
  sc_core::sc_time start, extra;
  if (p.waiting == 0 && p.free >= need) {  // the usual case: one wait (two with the HBM shared)
    p.free -= need;
    start = sc_core::sc_time_stamp() + lead;
    if (shared) {
      wait(lead);
      extra = run_shared(cost, time);
    } else {
      account(cost, start, time);
      wait(lead + time);
    }
  } else {
    wait(lead);
    const sc_core::sc_time ready = sc_core::sc_time_stamp();
    ++p.waiting;
    while (p.free < need) wait(p.released);
    --p.waiting;
    p.free -= need;
    start = sc_core::sc_time_stamp();
    m_core_wait_s += (start - ready).to_seconds();
    if (shared) {
      extra = run_shared(cost, time);
    } else {
      account(cost, start, time);
      wait(time);
    }
  }
  if (m_hbm && !shared) m_hbm->account_kernel(start, start + time, cost.gm_bytes, sc_core::SC_ZERO_TIME);
  p.free += need;
  if (p.waiting > 0) p.released.notify(sc_core::SC_ZERO_TIME);
  if (lost) *lost = extra;
  return start;
}

}  // namespace ascendsim::aicore
