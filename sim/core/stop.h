// Why a command stops before its end: a signal (SIGINT, SIGTERM, SIGHUP) or an output that can no
// longer be written (a full disk, an I/O error, a file-size limit). The signal handler only stores
// the signal's number; a failing write stores its reason. Long-running loops — the simulation
// kernel between slices of simulated time, a sweep between points — call check_stop(), which
// throws Stopped; the exception unwinds through the normal clean-up path (staged outputs are
// removed by their owner's destructor).
#pragma once

#include <stdexcept>
#include <string>

namespace ascendsim::sim {

/// A command stopped early. `signal()` is the signal's number, or 0 when an output failed.
class Stopped : public std::runtime_error {
 public:
  Stopped(const std::string& why, int signo) : std::runtime_error(why), m_signal(signo) {}
  int signal() const { return m_signal; }

 private:
  int m_signal;
};

/// Installs handlers for SIGINT, SIGTERM and SIGHUP that request a stop (a second signal of the
/// same kind ends the process at once, as the default would), and ignores SIGPIPE and SIGXFSZ so
/// that a closed pipe or a file-size limit fails the write that meets it instead of killing the
/// process. For a command-line front end; a library embedding ascendsim keeps its own handlers.
void install_stop_handlers();

/// Async-signal-safe: records a stop for `signo`.
void request_stop_for_signal(int signo) noexcept;
/// Records a stop because an output failed; the first reason given is kept.
void request_stop(const std::string& why);
/// Whether a stop was requested (cheap; polled by the kernel loop).
bool stop_requested() noexcept;
/// Throws Stopped if a stop was requested.
void check_stop();
/// Forgets a requested stop (before a new command in the same process, and in tests).
void clear_stop() noexcept;

}  // namespace ascendsim::sim
