// Time base. SystemC runs at 1 ps resolution; a clock domain only stores its period and turns
// cycle counts into time once (no process is sensitive to a clock).
#pragma once

#include <cmath>
#include <cstdint>

#include <systemc>

namespace ascendsim::sim {

/// The simulated time a run may reach: 2^63 ps, about 106.75 days. A run stops there (and is
/// reported as failed) instead of letting the kernel's 64-bit picosecond clock overflow.
inline constexpr double kTimeLimitPs = 9223372036854775808.0;
inline sc_core::sc_time time_limit() { return sc_core::sc_time::from_value(static_cast<sc_dt::uint64>(1) << 63); }

/// A duration in picoseconds; anything at or beyond the limit becomes the limit, which lies past
/// the end of every run, so an overlong wait ends the run instead of wrapping the clock.
inline sc_core::sc_time ps(double v) {
  if (!(v < kTimeLimitPs)) return time_limit();
  return sc_core::sc_time(static_cast<double>(std::llround(v)), sc_core::SC_PS);
}
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
