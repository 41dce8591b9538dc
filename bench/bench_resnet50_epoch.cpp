// Simulator speed on a long compute-bound run: ResNet-50 at batch 256, one ImageNet epoch
// (5,004 steps) under loop sink. Reports simulated seconds per wall second, simulated steps per
// second and the process's peak resident memory.
#include <sys/resource.h>

#include <cstdlib>

#include <benchmark/benchmark.h>

#include "sim/config.h"
#include "sim/simulation.h"
#include "tests/test_support.h"
#include "workloads/workload.h"

namespace {

using namespace ascendsim;

void BM_ResNet50Batch256EpochLoopSink(benchmark::State& state) {
  double steps = 0, simulated_s = 0;
  for (auto _ : state) {
    const auto w = workloads::make_workload("resnet50", 256);
    sim::Simulation simulation;
    runtime::Session session;
    session.strategy = runtime::Strategy::LoopSink;
    session.steps_per_epoch = w.steps_per_epoch();
    simulation.add(sim::load_config(test::config_request()), w, session);
    simulation.run();
    const auto r = simulation.result(0);
    steps += static_cast<double>(r.steps_completed);
    simulated_s += r.sim_time_s;
  }
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  state.counters["sim_steps_per_s"] = benchmark::Counter(steps, benchmark::Counter::kIsRate);
  state.counters["sim_s_per_wall_s"] = benchmark::Counter(simulated_s, benchmark::Counter::kIsRate);
  state.counters["peak_rss_mb"] = static_cast<double>(usage.ru_maxrss) / 1024.0;
}
// The SystemC kernel elaborates once per process: one iteration, real time.
BENCHMARK(BM_ResNet50Batch256EpochLoopSink)->Iterations(1)->UseRealTime()->Unit(benchmark::kMillisecond);

}  // namespace
