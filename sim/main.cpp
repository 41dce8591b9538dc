#include <cstdlib>

#include <systemc>

#include "sim/cli.h"

// The SystemC kernel prints its banner before sc_main unless told not to in the environment.
int main(int argc, char* argv[]) {
  setenv("SC_COPYRIGHT_MESSAGE", "DISABLE", 1);
  return sc_core::sc_elab_and_sim(argc, argv);
}

int sc_main(int argc, char* argv[]) { return ascendsim::sim::run_cli(argc, argv); }
