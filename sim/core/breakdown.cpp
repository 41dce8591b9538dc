#include "sim/core/breakdown.h"

#include <algorithm>
#include <iterator>

namespace ascendsim::sim {

const char* phase_name(Phase p) {
  switch (p) {
    case Phase::HostData:
      return "host_data";
    case Phase::H2D:
      return "h2d";
    case Phase::Launch:
      return "launch";
    case Phase::DeviceCompute:
      return "device_compute";
    case Phase::D2H:
      return "d2h";
    case Phase::HostLoop:
      return "host_loop";
    case Phase::WaitData:
      return "wait_data";
    case Phase::Sync:
      return "sync";
    case Phase::Comm:
      return "comm";
    case Phase::Setup:
      return "setup";
    case Phase::Eval:
      return "eval";
    case Phase::Checkpoint:
      return "checkpoint";
    case Phase::Count:
      break;
  }
  return "?";
}

Phase BreakdownAccountant::current() const {
  if (m_host == Phase::Eval || m_host == Phase::Checkpoint) return m_host;
  if (m_device[static_cast<std::size_t>(Device::Busy)] > 0) return Phase::DeviceCompute;
  if (m_device[static_cast<std::size_t>(Device::Comm)] > 0) return Phase::Comm;
  if (m_device[static_cast<std::size_t>(Device::Waiting)] > 0) return m_filling ? Phase::Setup : Phase::WaitData;
  return m_filling && m_host == Phase::HostData ? Phase::Setup : m_host;
}

bool BreakdownAccountant::waiting_first_fill() const {
  if (!m_filling || m_host == Phase::Eval || m_host == Phase::Checkpoint || m_device[static_cast<std::size_t>(Device::Busy)] > 0 ||
      m_device[static_cast<std::size_t>(Device::Comm)] > 0)
    return false;
  return m_device[static_cast<std::size_t>(Device::Waiting)] > 0 || m_host == Phase::HostData;
}

void BreakdownAccountant::schedule(const sc_core::sc_time& at, Device d, int delta) {
  if (m_closed) return;
  if (at <= sc_core::sc_time_stamp()) {
    change([&] { m_device[static_cast<std::size_t>(d)] += delta; });
    return;
  }
  auto pos = m_pending.end();  // after every transition at or before `at`: announcement order
  while (pos != m_pending.begin() && std::prev(pos)->at > at) --pos;
  m_pending.insert(pos, {at, d, delta});
}

void BreakdownAccountant::retract(Device d) {
  if (m_closed) return;
  charge(sc_core::sc_time_stamp());
  m_pending.erase(std::remove_if(m_pending.begin(), m_pending.end(), [&](const Transition& t) { return t.device == d; }),
                  m_pending.end());
}

void BreakdownAccountant::charge(const sc_core::sc_time& now) {
  while (!m_pending.empty() && m_pending.front().at <= now) {
    const Transition t = m_pending.front();
    m_pending.pop_front();
    charge_until(t.at);
    m_device[static_cast<std::size_t>(t.device)] += t.delta;
  }
  charge_until(now);
}

void BreakdownAccountant::charge_until(const sc_core::sc_time& now) {
  if (now <= m_last) return;
  m_time[static_cast<std::size_t>(current())] += now - m_last;
  if (waiting_first_fill()) m_fill += now - m_last;
  m_last = now;
}

const std::array<double, kPhaseCount>& BreakdownAccountant::close(const sc_core::sc_time& at) {
  if (!m_closed) {
    charge(at);
    m_closed = true;
    for (std::size_t i = 0; i < kPhaseCount; ++i) m_seconds[i] = m_time[i].to_seconds();
  }
  return m_seconds;
}

}  // namespace ascendsim::sim
