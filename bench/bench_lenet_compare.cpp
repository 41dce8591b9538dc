// Simulator speed on the main job: `compare --workload lenet5 --epochs 10` (4 x 18,750 steps).
// Reports simulated steps per wall second and simulated seconds per wall second.
#include <sys/resource.h>

#include <chrono>
#include <cstdlib>

#include <benchmark/benchmark.h>

#include "sim/config.h"
#include "sim/simulation.h"
#include "tests/test_support.h"
#include "workloads/workload.h"

namespace {

using namespace ascendsim;

void BM_LeNetCompare10Epochs(benchmark::State& state) {
  double steps = 0, simulated_s = 0;
  for (auto _ : state) {
    const auto w = workloads::make_workload("lenet5", 32);
    const auto cfg = sim::load_config(test::config_request());
    sim::Simulation simulation;
    for (auto s : runtime::all_strategies()) {
      runtime::Session session;
      session.strategy = s;
      session.epochs = 10;
      session.steps_per_epoch = w.steps_per_epoch();
      simulation.add(cfg, w, session);
    }
    simulation.run();
    for (std::size_t i = 0; i < simulation.size(); ++i) {
      const auto r = simulation.result(i);
      steps += static_cast<double>(r.steps_completed);
      simulated_s += r.sim_time_s;
    }
  }
  state.counters["sim_steps_per_s"] = benchmark::Counter(steps, benchmark::Counter::kIsRate);
  state.counters["sim_s_per_wall_s"] = benchmark::Counter(simulated_s, benchmark::Counter::kIsRate);
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  state.counters["peak_rss_mb"] = static_cast<double>(usage.ru_maxrss) / 1024.0;
}
// The SystemC kernel elaborates once per process: one iteration, real time.
BENCHMARK(BM_LeNetCompare10Epochs)->Iterations(1)->UseRealTime()->Unit(benchmark::kMillisecond);

}  // namespace
