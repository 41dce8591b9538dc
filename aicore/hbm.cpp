#include "aicore/hbm.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

#include "sim/core/time.h"

namespace ascendsim::aicore {

using sc_core::sc_time;

const char* hbm_source_name(HbmSource s) {
  switch (s) {
    case HbmSource::Dma:
      return "dma";
    case HbmSource::Collective:
      return "collectives";
    case HbmSource::Kernels:
      return "kernels";
  }
  return "?";
}

namespace {
/// Adds `seconds` to `by`, shared in proportion to `rates`.
void charge(HbmLost* by, const HbmLost& rates, double seconds) {
  if (!by || !(seconds > 0)) return;
  double sum = 0;
  for (double r : rates) sum += r;
  if (!(sum > 0)) return;
  for (std::size_t i = 0; i < kHbmSources; ++i) (*by)[i] += seconds * rates[i] / sum;
}
}  // namespace

Hbm::Hbm(sc_core::sc_module_name name, double bandwidth_gbps, bool contention)
    : sc_module(name),
      m_bw(bandwidth_gbps * 1e9),
      m_on(contention),
      m_stats(*this),
      m_bytes(m_stats.sum("bytes", "B", "bytes moved through the chip's HBM (kernels and flows)")),
      m_flow_bytes(
          m_stats.sum("flow_bytes", "B", "bytes of flows: DMA transfers, collectives' transfers and reductions")),
      m_kernel_bytes(m_stats.sum("kernel_bytes", "B", "bytes AI-core kernels moved between HBM and the cores")),
      m_flow_short(m_stats.scalar("flows_short", "count",
                                  "flows above the share a memory-bound kernel beside them would leave (they keep "
                                  "their interval)")),
      m_lost_s(m_stats.scalar("kernel_lost_s", "s", "time AI-core kernels took beyond their time alone, summed")),
      m_contended(m_stats.scalar("contended_kernels", "count", "AI-core kernels another consumer of the HBM slowed")) {
  for (std::size_t i = 0; i < kHbmSources; ++i)
    m_lost_to[i] =
        &m_stats.scalar(std::string("kernel_lost_to_") + hbm_source_name(static_cast<HbmSource>(i)) + "_s", "s",
                        std::string("kernel_lost_s charged to ") + hbm_source_name(static_cast<HbmSource>(i)) +
                            ", in proportion to their rates while they shared the HBM");
  if (!(bandwidth_gbps > 0)) throw std::invalid_argument("Hbm: bandwidth must be positive");
  SC_METHOD(boundary);
  sensitive << m_boundary;
  dont_initialize();
}

double Hbm::water_level(std::vector<double> demands, double capacity) {
  std::sort(demands.begin(), demands.end());
  double left = capacity;
  auto n = static_cast<double>(demands.size());
  for (double d : demands) {
    if (d * n > left) return left / n;  // d above the equal share of what is left: everyone from here gets it
    left -= d;
    n -= 1;
  }
  return std::numeric_limits<double>::infinity();  // every demand met
}

void Hbm::note(const sc_time& start, const sc_time& end, double demand) {
  if (!m_trace || !m_trace->active() || !(end > start) || !(demand > 0)) return;
  m_intervals.push_back({start.value(), end.value(), std::min(demand, m_bw)});
}

void Hbm::set_trace(sim::TraceRecorder* trace) { m_trace = trace; }

void Hbm::flush_trace() { emit_counter(std::numeric_limits<std::uint64_t>::max()); }

void Hbm::trace_progress() {
  if (!m_trace || m_intervals.size() < kTraceKeep) return;
  // No interval noted from now on starts before now, a kernel under way, or a run's plan.
  sc_time horizon = sc_core::sc_time_stamp();
  for (const Kernel* k : m_kernels) horizon = std::min(horizon, k->start);
  if (m_held) horizon = std::min(horizon, m_hold);
  emit_counter(horizon.value() / kTraceBinPs * kTraceBinPs);
}

void Hbm::emit_counter(std::uint64_t until) {
  // The traffic at each instant is what the policy allots the consumers active then: all of their
  // demands while they fit the bandwidth, the whole bandwidth once they exceed it (water-filling
  // leaves none unused). The counter gives its mean over each bin of kTraceBinPs, for the bins
  // before `until` (a bin boundary, or the end); what lies after it is kept.
  if (!m_trace || m_intervals.empty()) return;
  auto& edges = m_edges;  // (ps, demand change) before `until`
  auto& kept = m_kept;
  edges.clear();
  kept.clear();
  for (const Interval& i : m_intervals) {
    if (i.start >= until) {
      kept.push_back(i);
      continue;
    }
    edges.emplace_back(i.start, i.demand);
    edges.emplace_back(std::min(i.end, until), -i.demand);
    if (i.end > until) kept.push_back({until, i.end, i.demand});
  }
  m_intervals.swap(kept);
  if (edges.empty()) return;
  std::sort(edges.begin(), edges.end(), [](const auto& x, const auto& y) { return x.first < y.first; });
  const std::string name = "HBM GB/s";
  auto emit = [&](std::uint64_t b, double value) {
    const double gbps = std::max(0.0, std::round(value / 1e8) / 10);  // GB/s to 0.1
    if (gbps != m_counter_last) m_trace->counter(name, sc_time::from_value(b * kTraceBinPs), gbps);
    m_counter_last = gbps;
  };
  double sum = 0, bytes = 0;  // the current rate; the bytes in the current bin
  std::uint64_t bin = edges.front().first / kTraceBinPs, at = edges.front().first;
  if (bin > m_counter_bin) emit(m_counter_bin, 0);  // idle since the last bin written
  for (const auto& [t, change] : edges) {
    const double rate = m_on ? std::min(std::max(sum, 0.0), m_bw) : std::max(sum, 0.0);
    while (t >= (bin + 1) * kTraceBinPs) {  // close the bins [at, t) leaves behind
      const std::uint64_t end = (bin + 1) * kTraceBinPs;
      bytes += rate * static_cast<double>(end - at) * 1e-12;
      emit(bin, bytes / (static_cast<double>(kTraceBinPs) * 1e-12));
      bytes = 0;
      at = end;
      ++bin;
      if (rate == 0 && t >= (bin + 1) * kTraceBinPs) {  // idle bins: one sample of 0 covers them
        emit(bin, 0);
        bin = t / kTraceBinPs;
        at = bin * kTraceBinPs;
      }
    }
    bytes += rate * static_cast<double>(t - at) * 1e-12;
    at = t;
    sum += change;
  }
  if (until == std::numeric_limits<std::uint64_t>::max() || (bin + 1) * kTraceBinPs <= until) {
    emit(bin, bytes / (static_cast<double>(kTraceBinPs) * 1e-12));  // the last bin is whole
    m_counter_bin = bin + 1;
  } else {
    m_counter_bin = bin;  // the bin that starts at `until`: the next call writes it
  }
  if (until == std::numeric_limits<std::uint64_t>::max()) emit(m_counter_bin, 0);
}

HbmLost Hbm::lost_to() const {
  HbmLost out{};
  for (std::size_t i = 0; i < kHbmSources; ++i) out[i] = m_lost_to[i]->value();
  return out;
}

void Hbm::flow(double bytes, const sc_time& delay, const sc_time& duration, HbmSource source) {
  if (!(bytes > 0)) return;
  m_bytes += bytes;
  m_flow_bytes += bytes;
  const sc_time start = sc_core::sc_time_stamp() + delay, end = start + duration;
  const double rate = duration > sc_core::SC_ZERO_TIME ? bytes / duration.to_seconds() : 0.0;
  note(start, end, rate);
  if (!m_on || rate == 0) return;
  // Short if a memory-bound kernel beside it and the flows it meets could hold it below its rate.
  std::vector<double> demands{rate, m_bw};
  for (const Flow& f : m_flows)
    if (f.start < end && start < f.end) demands.push_back(f.rate);
  if (rate > water_level(std::move(demands), m_bw)) ++m_flow_short;
  m_flows.push_back({start, end, rate, source});
  m_flows_end = std::max(m_flows_end, end);
  if (delay == sc_core::SC_ZERO_TIME) reallocate();
  arm();
  m_arrived.notify();
}

void Hbm::arm() {
  const sc_time now = sc_core::sc_time_stamp();
  sc_time next = sc_core::SC_ZERO_TIME;
  for (const Flow& f : m_flows) {
    const sc_time t = f.start > now ? f.start : f.end;
    if (t > now && (next == sc_core::SC_ZERO_TIME || t < next)) next = t;
  }
  if (next > now) m_boundary.notify(next - now);
}

void Hbm::boundary() {
  const sc_time now = sc_core::sc_time_stamp(), keep = m_held ? std::min(now, m_hold) : now;
  m_flows.erase(std::remove_if(m_flows.begin(), m_flows.end(), [&](const Flow& f) { return f.end <= keep; }),
                m_flows.end());
  reallocate();
  arm();
}

void Hbm::reallocate() {
  if (m_kernels.empty()) return;  // flows keep their rates; no kernel to tell
  const sc_time now = sc_core::sc_time_stamp();
  std::vector<double>& demands = m_demands;
  demands.clear();
  for (const Flow& f : m_flows)
    if (f.start <= now && now < f.end) demands.push_back(f.rate);
  for (const Kernel* k : m_kernels)
    if (k->start <= now) demands.push_back(k->demand);
  const double level = water_level(demands, m_bw);
  for (Kernel* k : m_kernels) k->rate = k->start <= now ? std::min(k->demand, level) : k->demand;
  m_changed.notify();
}

double Hbm::rate_among_flows(const sc_time& at, double demand, sc_time& next, HbmLost& rates) const {
  next = sc_core::SC_ZERO_TIME;
  rates = {};
  double sum = 0, largest = 0;
  std::size_t active = 0;
  for (const Flow& f : m_flows) {
    if (f.end <= at) continue;
    const sc_time t = f.start > at ? f.start : f.end;
    if (next == sc_core::SC_ZERO_TIME || t < next) next = t;
    if (f.start <= at) {
      rates[static_cast<std::size_t>(f.source)] += f.rate;
      sum += f.rate;
      largest = std::max(largest, f.rate);
      ++active;
    }
  }
  if (sum + demand <= m_bw) return demand;       // everyone met
  if (largest <= m_bw - sum) return m_bw - sum;  // the flows met, the kernel takes the rest
  std::vector<double> demands{demand};           // a flow above the kernel's share: water-fill
  demands.reserve(active + 1);
  for (const Flow& f : m_flows)
    if (f.start <= at && at < f.end) demands.push_back(f.rate);
  return std::min(demand, water_level(std::move(demands), m_bw));
}

namespace {
/// Alone-time a kernel progresses in `elapsed` at `rho` of its speed (exact at full speed).
sc_time progress(const sc_time& elapsed, double rho) {
  return rho >= 1 ? elapsed : sim::seconds(elapsed.to_seconds() * rho);
}
/// Time to progress `remaining` of alone-time at `rho` of its speed.
sc_time needed(const sc_time& remaining, double rho) {
  return rho >= 1 ? remaining : sim::seconds(remaining.to_seconds() / rho);
}
}  // namespace

sc_time Hbm::kernel_end(const sc_time& start, sc_time& remaining, const sc_time& time, double gm_bytes,
                        const sc_time& until, HbmLost* by) const {
  const bool bounded = until != sc_core::SC_ZERO_TIME;
  if (bounded && until <= start) return until;
  if (!m_on || m_flows_end <= start || !(gm_bytes > 0) || time == sc_core::SC_ZERO_TIME) {
    const sc_time end = start + remaining;
    if (bounded && until < end) {
      remaining -= until - start;
      return until;
    }
    remaining = sc_core::SC_ZERO_TIME;
    return end;
  }
  const double demand = std::min(gm_bytes / time.to_seconds(), m_bw);
  sc_time at = start;
  for (;;) {
    sc_time next;
    HbmLost rates;
    const double rho = rate_among_flows(at, demand, next, rates) / demand;
    const sc_time end = at + needed(remaining, rho);
    const bool ends = next == sc_core::SC_ZERO_TIME || end <= next;
    const sc_time piece_end = ends ? end : next;
    const bool stops = bounded && until < piece_end;
    if (rho < 1) charge(by, rates, ((stops ? until : piece_end) - at).to_seconds() * (1 - rho));
    if (stops) {
      remaining -= std::min(remaining, progress(until - at, rho));
      return until;
    }
    if (ends) {
      remaining = sc_core::SC_ZERO_TIME;
      return end;
    }
    remaining -= std::min(remaining, progress(next - at, rho));
    at = next;
  }
}

void Hbm::account_kernel(const sc_time& start, const sc_time& end, double gm_bytes, const sc_time& lost,
                         const HbmLost* by) {
  if (!(gm_bytes > 0)) return;
  m_bytes += gm_bytes;
  m_kernel_bytes += gm_bytes;
  if (lost > sc_core::SC_ZERO_TIME) {
    m_lost_s += lost.to_seconds();
    ++m_contended;
    double sum = 0;
    if (by)
      for (double v : *by) sum += v;
    if (sum > 0)  // the exact lost time, shared as the attribution says
      for (std::size_t i = 0; i < kHbmSources; ++i) *m_lost_to[i] += lost.to_seconds() * (*by)[i] / sum;
  }
  if (m_trace && end - lost > start) note(start, end, gm_bytes / (end - lost - start).to_seconds());
}

sc_time Hbm::kernel(const sc_time& lead, const sc_time& time, double gm_bytes, HbmLost* by) {
  if (!m_on || !(gm_bytes > 0) || time == sc_core::SC_ZERO_TIME) {
    const sc_time start = sc_core::sc_time_stamp() + lead;
    wait(lead + time);
    account_kernel(start, start + time, gm_bytes, sc_core::SC_ZERO_TIME);
    return sc_core::SC_ZERO_TIME;
  }
  Kernel k;
  k.start = sc_core::sc_time_stamp() + lead;
  k.demand = std::min(gm_bytes / time.to_seconds(), m_bw);
  sc_time remaining = time;
  const bool quiet = m_flows_end <= sc_core::sc_time_stamp() && m_kernels.empty();
  m_kernels.push_back(&k);
  m_arrived.notify();
  if (quiet) {
    // Alone now: one wait for the lead and the kernel, unless another consumer arrives.
    k.rate = k.demand;
    const sc_time begin = sc_core::sc_time_stamp();
    wait(lead + time, m_changed);
    const sc_time now = sc_core::sc_time_stamp();
    if (now - begin >= lead + time) {
      remaining = sc_core::SC_ZERO_TIME;
    } else if (now < k.start) {
      wait(k.start - now);  // the rest of the lead
      reallocate();
    } else {
      remaining -= now - k.start;  // alone so far, at full speed
    }
  } else {
    if (lead > sc_core::SC_ZERO_TIME) wait(lead);
    reallocate();
  }
  HbmLost mine{};
  while (remaining > sc_core::SC_ZERO_TIME) {
    const double rho = k.rate / k.demand;
    const sc_time dt = needed(remaining, rho);
    const sc_time t0 = sc_core::sc_time_stamp();
    HbmLost rates{};  // who else draws on the HBM meanwhile
    if (rho < 1) {
      for (const Flow& f : m_flows)
        if (f.start <= t0 && t0 < f.end) rates[static_cast<std::size_t>(f.source)] += f.rate;
      for (const Kernel* o : m_kernels)
        if (o != &k && o->start <= t0) rates[static_cast<std::size_t>(HbmSource::Kernels)] += o->rate;
    }
    wait(dt, m_changed);
    const sc_time elapsed = sc_core::sc_time_stamp() - t0;
    if (rho < 1) charge(&mine, rates, std::min(elapsed, dt).to_seconds() * (1 - rho));
    if (elapsed >= dt) break;
    remaining -= std::min(remaining, progress(elapsed, rho));
  }
  m_kernels.erase(std::find(m_kernels.begin(), m_kernels.end(), &k));
  if (!m_kernels.empty() || !m_flows.empty()) reallocate();
  const sc_time end = sc_core::sc_time_stamp();
  const sc_time took = end - k.start;
  const sc_time lost = took > time ? took - time : sc_core::SC_ZERO_TIME;
  account_kernel(k.start, end, gm_bytes, lost, &mine);
  if (by)
    for (std::size_t i = 0; i < kHbmSources; ++i) (*by)[i] += mine[i];
  trace_progress();
  return lost;
}

}  // namespace ascendsim::aicore
