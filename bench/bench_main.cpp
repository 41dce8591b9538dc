// main for the benchmarks: Google Benchmark runs inside sc_main, without the kernel's banner.
#include <cstdlib>

#include <benchmark/benchmark.h>
#include <systemc>

int main(int argc, char** argv) {
  setenv("SC_COPYRIGHT_MESSAGE", "DISABLE", 1);
  return sc_core::sc_elab_and_sim(argc, argv);
}

int sc_main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
