#include "aicore/aicore_cluster.h"

#include "sim/core/time.h"

namespace ascendsim::aicore {

AiCoreCluster::AiCoreCluster(sc_core::sc_module_name name)
    : sc_module(name),
      m_stats("aicore"),
      m_tasks(m_stats.scalar("tasks", "count", "ops executed on the AI cores")),
      m_busy_s(m_stats.scalar("busy_s", "s", "time at least one AI core was busy")),
      m_core_busy_s(m_stats.scalar("core_busy_s", "core*s", "sum over cores of busy time")),
      m_macs(m_stats.scalar("macs", "MAC", "multiply-accumulates executed")),
      m_gm_bytes(m_stats.scalar("gm_bytes", "B", "bytes moved between GM and the cores")) {}

sc_core::sc_time AiCoreCluster::execute(const OpCost& cost, const sc_core::sc_time& lead) {
  const sc_core::sc_time t = sim::seconds(cost.time_s);
  ++m_tasks;
  m_busy_s += t.to_seconds();
  m_core_busy_s += t.to_seconds() * static_cast<double>(cost.blocks);
  m_macs += cost.macs;
  m_gm_bytes += cost.gm_bytes;
  wait(lead + t);
  return t;
}

}  // namespace ascendsim::aicore
