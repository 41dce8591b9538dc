// Time base. SystemC runs at 1 ps resolution; a clock domain only stores its period and turns
// cycle counts into time once (no process is sensitive to a clock).
#pragma once

#include <cmath>
#include <cstdint>

#include <systemc>

namespace ascendsim::sim {

inline sc_core::sc_time ps(double v) { return sc_core::sc_time(std::llround(v), sc_core::SC_PS); }
inline sc_core::sc_time ns(double v) { return ps(v * 1e3); }
inline sc_core::sc_time us(double v) { return ps(v * 1e6); }
inline sc_core::sc_time seconds(double v) { return ps(v * 1e12); }
inline double to_seconds(const sc_core::sc_time& t) { return t.to_seconds(); }

/// A clock domain: frequency in GHz, cycles -> time.
class ClockDomain {
 public:
  explicit ClockDomain(double freq_ghz) : m_period_ps(1e3 / freq_ghz) {}
  double period_ps() const { return m_period_ps; }
  sc_core::sc_time cycles(double n) const { return ps(n * m_period_ps); }
  double cycles_to_seconds(double n) const { return n * m_period_ps * 1e-12; }

 private:
  double m_period_ps;
};

/// Transfer time of `bytes` at `gb_per_s` (decimal GB/s, as PCIe and HBM are quoted).
inline sc_core::sc_time transfer_time(double bytes, double gb_per_s) { return ps(bytes / gb_per_s * 1e3); }

}  // namespace ascendsim::sim
