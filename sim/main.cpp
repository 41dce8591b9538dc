#include <unistd.h>

#include <cstdlib>
#include <iostream>

#include <systemc>

#include "sim/cli.h"
#include "sim/core/stop.h"
#include "sim/outputs.h"

// The SystemC kernel prints its banner before sc_main unless told not to in the environment.
int main(int argc, char* argv[]) {
  setenv("SC_COPYRIGHT_MESSAGE", "DISABLE", 1);
  return sc_core::sc_elab_and_sim(argc, argv);
}

// The command line's own process: a signal stops a run through its normal clean-up path.
// Standard output goes through a buffer that remembers why a write failed (a full device, a
// closed descriptor, a pipe whose reader left), for the message that fails the command.
int sc_main(int argc, char* argv[]) {
  ascendsim::sim::install_stop_handlers();
  ascendsim::sim::FdBuf out(STDOUT_FILENO);
  std::streambuf* const previous = std::cout.rdbuf(&out);
  const int code = ascendsim::sim::run_cli(argc, argv);
  std::cout.flush();
  std::cout.rdbuf(previous);
  return code;
}
