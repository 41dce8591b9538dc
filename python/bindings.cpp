// The extension behind the ascendsim Python package: the command line run in-process, its output
// and errors captured. The package (ascendsim/__init__.py) turns arguments into a command and its
// JSON into a Report, so a Python call and the CLI give the same report, byte for byte, and the
// same error messages.
#include <signal.h>

#include <csignal>
#include <cstdlib>
#include <iostream>
#include <mutex>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "sim/cli.h"
#include "sim/core/stop.h"

// libsystemc refers to sc_main (its own main calls it) and is resolved against the module, whose
// symbols are hidden by default; the module never enters through it.
extern "C" __attribute__((visibility("default"))) int sc_main(int, char*[]) { return 0; }

namespace {

// SystemC's current kernel context and the standard streams are process-wide: runs in one
// process take turns (each releases the GIL while it runs).
std::mutex g_run;

// Signals during a run. A run holds no GIL, so Python's own handlers (which only run between
// bytecodes, in the main thread) would wait for it to end. For the length of a run, SIGINT, SIGTERM
// and SIGHUP are therefore handled in C: the handler records the signal and asks the run to stop
// (sim/core/stop.h), which it does within a second, through its normal clean-up, returning 128 +
// the signal. The previous handlers are then put back and the signal is raised again, so the
// process reacts as it would have without the run: Python's SIGINT handler raises
// KeyboardInterrupt, SIGTERM's default ends the process (143), a Python handler of the user's runs.
// A signal the process ignores (nohup's SIGHUP) stays ignored. Repeated signals during a run are
// one stop.
constexpr int kStopSignals[] = {SIGINT, SIGTERM, SIGHUP};
volatile std::sig_atomic_t g_caught = 0;  // the signal that arrived during the run, or 0

extern "C" void on_run_signal(int signo) {
  g_caught = signo;
  ascendsim::sim::request_stop_for_signal(signo);
}

class SignalScope {
 public:
  SignalScope() {
    g_caught = 0;
    struct sigaction sa {};
    sa.sa_handler = on_run_signal;
    sigemptyset(&sa.sa_mask);
    for (int s : kStopSignals) sigaddset(&sa.sa_mask, s);
    sa.sa_flags = SA_RESTART;
    for (std::size_t i = 0; i < std::size(kStopSignals); ++i) {
      if (sigaction(kStopSignals[i], nullptr, &m_old[i]) != 0 || m_old[i].sa_handler == SIG_IGN) continue;
      m_installed[i] = sigaction(kStopSignals[i], &sa, nullptr) == 0;
    }
  }
  /// Puts the previous handlers back; the signal that arrived meanwhile, or 0.
  int restore() {
    for (std::size_t i = 0; i < std::size(kStopSignals); ++i)
      if (m_installed[i]) sigaction(kStopSignals[i], &m_old[i], nullptr), m_installed[i] = false;
    return g_caught;
  }
  ~SignalScope() { restore(); }
  SignalScope(const SignalScope&) = delete;
  SignalScope& operator=(const SignalScope&) = delete;

 private:
  struct sigaction m_old[std::size(kStopSignals)] {};
  bool m_installed[std::size(kStopSignals)] = {};
};

std::tuple<int, std::string, std::string> cli(const std::vector<std::string>& args) {
  std::vector<std::string> words = {"ascendsim"};
  words.insert(words.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& w : words) argv.push_back(w.data());
  argv.push_back(nullptr);
  std::ostringstream out, err;
  int code = 1;
  int caught = 0;
  {
    pybind11::gil_scoped_release release;
    std::lock_guard<std::mutex> lock(g_run);
    SignalScope signals;
    std::streambuf* o = std::cout.rdbuf(out.rdbuf());
    std::streambuf* e = std::cerr.rdbuf(err.rdbuf());
    try {
      code = ascendsim::sim::run_cli(static_cast<int>(words.size()), argv.data());
    } catch (const std::exception& x) {
      err << "error: " << x.what() << "\n";
      code = 1;
    }
    std::cout.rdbuf(o);
    std::cerr.rdbuf(e);
    caught = signals.restore();
  }
  if (caught != 0) {
    // Delivered again to the handler the process had (in this thread, before raise returns): with
    // Python's, its handler runs now if this is the main thread, or in the main thread soon.
    std::raise(caught);
    if (PyErr_CheckSignals() != 0) throw pybind11::error_already_set();
  }
  return {code, out.str(), err.str()};
}

}  // namespace

PYBIND11_MODULE(_ascendsim, m) {
  setenv("SC_COPYRIGHT_MESSAGE", "DISABLE", 1);  // no SystemC banner on import
  m.doc() = "ascendsim's command line, run in-process (use the ascendsim package's functions)";
  m.def("cli", &cli, pybind11::arg("args"),
        "Runs `ascendsim ARGS...`; returns (exit code, stdout, stderr). Exit codes: 0 success, 1 internal "
        "error, 2 bad input, 3 the simulated job failed, 128 + N stopped by signal N (SIGINT, SIGTERM, SIGHUP: "
        "handled in C during the run, then raised again for the process's own handler).");
}
