// The extension behind the ascendsim Python package: the command line run in-process, its output
// and errors captured. The package (ascendsim/__init__.py) turns arguments into a command and its
// JSON into a Report, so a Python call and the CLI give the same report, byte for byte, and the
// same error messages.
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

// libsystemc refers to sc_main (its own main calls it) and is resolved against the module, whose
// symbols are hidden by default; the module never enters through it.
extern "C" __attribute__((visibility("default"))) int sc_main(int, char*[]) { return 0; }

namespace {

// SystemC's current kernel context and the standard streams are process-wide: runs in one
// process take turns (each releases the GIL while it runs).
std::mutex g_run;

std::tuple<int, std::string, std::string> cli(const std::vector<std::string>& args) {
  std::vector<std::string> words = {"ascendsim"};
  words.insert(words.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& w : words) argv.push_back(w.data());
  argv.push_back(nullptr);
  std::ostringstream out, err;
  int code = 1;
  {
    pybind11::gil_scoped_release release;
    std::lock_guard<std::mutex> lock(g_run);
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
  }
  return {code, out.str(), err.str()};
}

}  // namespace

PYBIND11_MODULE(_ascendsim, m) {
  setenv("SC_COPYRIGHT_MESSAGE", "DISABLE", 1);  // no SystemC banner on import
  m.doc() = "ascendsim's command line, run in-process (use the ascendsim package's functions)";
  m.def("cli", &cli, pybind11::arg("args"),
        "Runs `ascendsim ARGS...`; returns (exit code, stdout, stderr). Exit codes: 0 success, 1 internal "
        "error, 2 bad input, 3 the simulated job failed.");
}
