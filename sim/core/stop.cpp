#include "sim/core/stop.h"

#include <signal.h>

#include <atomic>
#include <csignal>
#include <cstring>
#include <mutex>

namespace ascendsim::sim {

namespace {

volatile std::sig_atomic_t g_signal = 0;  // the signal that asked for a stop
std::atomic<bool> g_failed{false};        // an output failed
std::mutex g_mutex;
std::string g_reason;  // why it failed (guarded by g_mutex)

extern "C" void on_stop_signal(int signo) { request_stop_for_signal(signo); }

}  // namespace

void request_stop_for_signal(int signo) noexcept { g_signal = signo; }

void request_stop(const std::string& why) {
  std::lock_guard<std::mutex> lock(g_mutex);
  if (!g_failed.load()) g_reason = why;
  g_failed.store(true);
}

bool stop_requested() noexcept { return g_signal != 0 || g_failed.load(std::memory_order_relaxed); }

void check_stop() {
  if (g_failed.load()) {
    std::lock_guard<std::mutex> lock(g_mutex);
    throw Stopped(g_reason, 0);
  }
  if (const int signo = g_signal; signo != 0)
    throw Stopped(std::string("stopped by SIG") + sigabbrev_np(signo) + "; no output written", signo);
}

void clear_stop() noexcept {
  g_signal = 0;
  std::lock_guard<std::mutex> lock(g_mutex);
  g_failed.store(false);
  g_reason.clear();
}

void install_stop_handlers() {
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESETHAND | SA_RESTART;  // a second signal of the kind takes the default action
  for (int signo : {SIGINT, SIGTERM, SIGHUP}) sigaction(signo, &sa, nullptr);
  std::signal(SIGPIPE, SIG_IGN);  // a closed pipe fails the write (EPIPE)
  std::signal(SIGXFSZ, SIG_IGN);  // a file-size limit fails the write (EFBIG)
}

}  // namespace ascendsim::sim
