// Where the time goes. Every instant of a run is charged to exactly one phase, so the phases
// add up to the run's simulated time:
//   - while any device stream executes a task (AI core op, AICPU kernel, dispatch) -> device_compute
//   - else while a stream runs communication the computation does not hide        -> comm
//   - else while a stream is blocked in GetNext on an empty data queue            -> wait_data
//   - else (the device idle), whatever the host's training thread is doing        -> that phase
// except while the host evaluates (an evaluation pass during training): all of it    -> eval
// and while the host saves a checkpoint (the training thread waits for it): all of it  -> checkpoint
// This charges host work only where it is exposed, i.e. where the device has nothing to do: the
// interaction cost a strategy removes is exactly what disappears from the host phases.
#pragma once

#include <array>
#include <cstddef>
#include <deque>

#include <systemc>

namespace ascendsim::sim {

enum class Phase : std::size_t {
  HostData,       ///< host thread waits for the data pipeline
  H2D,            ///< synchronous host-to-device copy (incl. memcpy setup, graph load)
  Launch,         ///< op or graph launch on the host
  DeviceCompute,  ///< device executes a task
  D2H,            ///< device-to-host copy of results
  HostLoop,       ///< framework work per step (training loop, callbacks)
  WaitData,       ///< device waits in GetNext for the data queue
  Sync,           ///< completion notification and host wake-up after the device finished
  Comm,           ///< device communication (collectives) that no computation hides
  Setup,          ///< one-time set-up: the dataset channel, a cold cache's kernel compilation, the graph's load (host
                  ///< work and its DMA), the parameters' broadcast, the pipeline's first fill
  Eval,           ///< evaluation passes during training: all their time, the device's included
  Checkpoint,     ///< checkpoints the training thread waits for (--checkpoint-every): all their time
  Count
};

const char* phase_name(Phase p);
inline constexpr std::size_t kPhaseCount = static_cast<std::size_t>(Phase::Count);

class BreakdownAccountant {
 public:
  void set_host(Phase p) {
    change([&] { m_host = p; });
  }
  /// Device activity is counted per stream: each call pair brackets one stream's activity.
  enum class Device : std::size_t { Busy, Comm, Waiting, Count };
  void begin(Device d) {
    change([&] { ++m_device[static_cast<std::size_t>(d)]; });
  }
  void end(Device d) {
    change([&] { --m_device[static_cast<std::size_t>(d)]; });
  }
  /// The same at a later simulated time `at` (now or later): a device model that runs several
  /// tasks with one wait announces their activity in advance. Transitions apply in time order.
  void begin_at(Device d, const sc_core::sc_time& at) { schedule(at, d, +1); }
  void end_at(Device d, const sc_core::sc_time& at) { schedule(at, d, -1); }
  /// Withdraws the transitions of `d` announced for after now (a device model that re-plans the
  /// tasks it announced).
  void retract(Device d);
  /// The first training batch has reached its consumer (GetNext on the device, or the host's
  /// training thread without sink). Until then, waiting for data is the pipeline's first fill and
  /// is charged to set-up, once; from then on to wait_data or host_data.
  void filled() {
    if (m_filling) change([&] { m_filling = false; });
  }

  /// Of the set-up time, the pipeline's first fill (waiting for the first batch), in seconds; valid
  /// once closed.
  double first_fill_s() const { return m_fill.to_seconds(); }

  /// The time charged to `p` so far, up to now.
  sc_core::sc_time charged(Phase p) {
    if (!m_closed) charge(sc_core::sc_time_stamp());
    return m_time[static_cast<std::size_t>(p)];
  }

  /// Charges the time up to `at` and stops accounting; later changes are ignored. Returns the
  /// per-phase totals in seconds.
  const std::array<double, kPhaseCount>& close(const sc_core::sc_time& at);
  bool closed() const { return m_closed; }

 private:
  template <typename F>
  void change(F&& f) {
    if (m_closed) return;
    charge(sc_core::sc_time_stamp());
    f();
  }
  void charge(const sc_core::sc_time& now);
  void charge_until(const sc_core::sc_time& now);
  void schedule(const sc_core::sc_time& at, Device d, int delta);
  Phase current() const;
  /// Waiting for the first batch now: device idle in GetNext, or the host on the pipeline.
  bool waiting_first_fill() const;

  struct Transition {
    sc_core::sc_time at;
    Device device;
    int delta;
  };
  std::deque<Transition> m_pending;  ///< announced transitions, in time order

  Phase m_host = Phase::HostLoop;
  bool m_filling = true;
  sc_core::sc_time m_fill = sc_core::SC_ZERO_TIME;  ///< of set-up, the first fill's waiting
  std::array<int, static_cast<std::size_t>(Device::Count)> m_device{};
  bool m_closed = false;
  sc_core::sc_time m_last = sc_core::SC_ZERO_TIME;
  std::array<sc_core::sc_time, kPhaseCount> m_time{};
  std::array<double, kPhaseCount> m_seconds{};
};

}  // namespace ascendsim::sim
