// One chip's HBM bandwidth, shared as a fluid by everything that moves bytes through it. Two
// kinds of consumer:
//  - flows: traffic whose rate a link or an engine sets — a DMA transfer across PCIe, an HCCL
//    collective's transfers and reductions. A flow draws its bytes evenly over a known interval;
//    its own link decides when it ends, so the HBM never makes it longer.
//  - kernels: AI-core ops. Alone a kernel draws gm_bytes / time (the roofline the cost model gives
//    it; at most the HBM's bandwidth, the rest coming from L2); given less it progresses in
//    proportion, so only its memory-bound part grows: a kernel allotted r below its demand d runs
//    at r / d of its speed.
// The policy is max-min fairness (water-filling) over every consumer's demand: each gets its
// demand or an equal share of what the smaller demands leave, whichever is less. A flow allotted
// less than its demand keeps its interval (`flows_short` counts the flows a memory-bound kernel
// could hold below their rate: none while every flow draws under half the bandwidth). Events happen
// only when a consumer arrives or leaves or a flow starts or ends — no per-chunk events — and a
// kernel that meets no other consumer takes exactly its time.
//
// Runs of kernels that a task scheduler executes with one wait use kernel_end(): the end of a
// kernel among the flows known now (no other kernel runs beside a run); `arrived()` tells them
// when a new consumer invalidates that. A kernel's lost time is charged to the consumers it shared
// with, in proportion to their rates (HbmSource).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include <systemc>

#include "sim/core/stats.h"
#include "sim/core/trace.h"

namespace ascendsim::aicore {

/// What else moves bytes through the HBM: the consumers a kernel's lost time is charged to.
enum class HbmSource : std::uint8_t { Dma, Collective, Kernels };
inline constexpr std::size_t kHbmSources = 3;
/// Seconds per source (by HbmSource).
using HbmLost = std::array<double, kHbmSources>;
const char* hbm_source_name(HbmSource s);

class Hbm : public sc_core::sc_module {
 public:
  SC_HAS_PROCESS(Hbm);
  /// `contention` false: every consumer sees the whole bandwidth (nothing is shared).
  Hbm(sc_core::sc_module_name name, double bandwidth_gbps, bool contention = true);

  /// A flow of `bytes` drawn evenly over [now + `delay`, now + `delay` + `duration`). Does not block.
  void flow(double bytes, const sc_core::sc_time& delay, const sc_core::sc_time& duration, HbmSource source);
  /// Blocks the calling thread for `lead` (no HBM traffic) and then a kernel that alone takes `time`
  /// moving `gm_bytes`; returns what the kernel took beyond `time` (lost to other consumers), and
  /// adds that time to `by` by the consumers it shared with (in proportion to their rates).
  sc_core::sc_time kernel(const sc_core::sc_time& lead, const sc_core::sc_time& time, double gm_bytes,
                          HbmLost* by = nullptr);

  /// The end of a kernel that starts at `start` (not before now) with `remaining` of its
  /// alone-time to run, moving `gm_bytes` in `time` alone, among the flows known now and no other
  /// kernel. With `until` before that end, returns `until` and leaves in `remaining` the
  /// alone-time still to run then. Adds the time lost on the way to `by`, by flow source.
  sc_core::sc_time kernel_end(const sc_core::sc_time& start, sc_core::sc_time& remaining, const sc_core::sc_time& time,
                              double gm_bytes, const sc_core::sc_time& until = sc_core::SC_ZERO_TIME,
                              HbmLost* by = nullptr) const;
  /// Statistics and trace of a kernel a run executed without kernel(): [start, end), moving
  /// `gm_bytes`, `lost` of it to contention, shared among the sources as in `by`.
  void account_kernel(const sc_core::sc_time& start, const sc_core::sc_time& end, double gm_bytes,
                      const sc_core::sc_time& lost, const HbmLost* by = nullptr);

  /// While a planner may ask kernel_end() about times from `since` on, flows that end after it are
  /// kept (a run's kernel under way since then); release() lets them go.
  void hold(const sc_core::sc_time& since) {
    m_held = true;
    m_hold = since;
  }
  void release() { m_held = false; }
  /// Statistics of kernels a run executed alone (no flow slowed them): their bytes.
  void account_kernels(const sim::ExactSum& gm_bytes) {
    m_bytes += gm_bytes;
    m_kernel_bytes += gm_bytes;
  }
  /// Notified when a flow is announced or a kernel arrives: what kernel_end() knew has changed.
  const sc_core::sc_event& arrived() const { return m_arrived; }
  /// True while no flow is in flight or announced (kernel_end is then start + remaining).
  bool contention() const { return m_on; }
  /// True if a flow may slow a kernel that starts at `start` (else kernel_end is start + remaining).
  bool affects(const sc_core::sc_time& start) const { return m_on && m_flows_end > start; }
  /// The latest end of a flow announced so far.
  const sc_core::sc_time& flows_end() const { return m_flows_end; }

  /// Records the chip's HBM traffic as a counter while the recorder is active: its mean over each
  /// bin of kTraceBinPs, in GB/s.
  static constexpr std::uint64_t kTraceBinPs = 50'000'000;  // 50 us
  void set_trace(sim::TraceRecorder* trace);
  /// Writes the counter samples recorded so far (call at the end of the run).
  void flush_trace();
  /// Writes the counter's bins no consumer can still add to, once many intervals are kept (a
  /// scheduler calls it after a run): the trace's memory stays flat however long its window.
  void trace_progress();

  double bytes() const { return m_bytes.value(); }
  double lost_s() const { return m_lost_s.value(); }
  /// The kernels' lost time charged to each source, in seconds.
  HbmLost lost_to() const;
  sim::StatsGroup& stats() { return m_stats; }

  /// Max-min fair shares of `capacity` among `demands`: each its demand or the level the others
  /// leave. Returns the level (a demand at or below it is met).
  static double water_level(std::vector<double> demands, double capacity);

 private:
  struct Flow {
    sc_core::sc_time start, end;
    double rate;  ///< B/s
    HbmSource source;
  };
  struct Kernel {
    sc_core::sc_time start;  ///< its first byte (after the lead)
    double demand;           ///< B/s alone, at most the bandwidth
    double rate = 0;         ///< B/s allotted now
  };
  void boundary();    ///< a flow started or ended: reallocate
  void reallocate();  ///< kernels' rates from the flows and kernels active now
  void arm();         ///< schedule boundary() at the next flow start or end
  /// Keeps a consumer's interval and demand for the trace's counter.
  void note(const sc_core::sc_time& start, const sc_core::sc_time& end, double demand);
  /// The rate a lone kernel of `demand` gets beside the flows active over [at, next boundary), and
  /// that boundary (SC_ZERO_TIME: none); `rates`: the active flows' rates by source.
  double rate_among_flows(const sc_core::sc_time& at, double demand, sc_core::sc_time& next, HbmLost& rates) const;

  double m_bw;  ///< B/s
  bool m_on;
  std::vector<Flow> m_flows;       ///< in flight or announced
  std::vector<Kernel*> m_kernels;  ///< arrived (their start may lie ahead: still in their lead)
  std::vector<double> m_demands;   ///< scratch for reallocate()
  sc_core::sc_time m_flows_end;    ///< the latest end of a flow ever announced
  bool m_held = false;
  sc_core::sc_time m_hold;
  sc_core::sc_event m_arrived, m_changed, m_boundary;

  sim::TraceRecorder* m_trace = nullptr;
  struct Interval {
    std::uint64_t start, end;  ///< ps
    double demand;             ///< B/s
  };
  std::vector<Interval> m_intervals;                      ///< every consumer's while tracing, for the counter
  static constexpr std::size_t kTraceKeep = 1 << 16;      ///< intervals kept before trace_progress writes
  std::vector<std::pair<std::uint64_t, double>> m_edges;  ///< scratch for emit_counter
  std::vector<Interval> m_kept;                           ///< scratch for emit_counter
  double m_counter_last = -1;                             ///< the counter's last value written
  std::uint64_t m_counter_bin = 0;                        ///< the first bin not yet written
  /// Writes the counter's bins before `until` (ps, a bin boundary) from the intervals kept.
  void emit_counter(std::uint64_t until);

  sim::StatsGroup m_stats;
  // Order-independent sums: a run's kernels counted at once give what they give one by one.
  sim::ExactSum& m_bytes;
  sim::ExactSum& m_flow_bytes;
  sim::ExactSum& m_kernel_bytes;
  sim::Scalar& m_flow_short;
  sim::Scalar& m_lost_s;
  std::array<sim::Scalar*, kHbmSources> m_lost_to{};
  sim::Scalar& m_contended;
};

}  // namespace ascendsim::aicore
