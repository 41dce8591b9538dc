// Cost-model throughput: cold (a fresh model per evaluation of a LeNet-5 step) and cached.
#include <cstdlib>

#include <benchmark/benchmark.h>

#include "aicore/cost_model.h"
#include "runtime/graph_compiler.h"
#include "workloads/workload.h"

namespace {

using namespace ascendsim;

std::vector<aicore::OpDesc> lenet_ops() {
  const auto w = workloads::make_workload("lenet5", 32);
  std::vector<aicore::OpDesc> ops;
  for (const auto& op : w.graph.ops())
    if (workloads::is_device_op(op.type)) ops.push_back(runtime::lower_op(w.graph, op));
  return ops;
}

void BM_CostModelColdLeNetStep(benchmark::State& state) {
  const auto ops = lenet_ops();
  for (auto _ : state) {
    auto model = aicore::make_pipe_cost_model({}, {});
    for (const auto& d : ops) benchmark::DoNotOptimize(model->estimate(d));
  }
  state.counters["evaluations_per_s"] =
      benchmark::Counter(static_cast<double>(state.iterations() * ops.size()), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_CostModelColdLeNetStep);

void BM_CostModelCachedLookup(benchmark::State& state) {
  const auto ops = lenet_ops();
  aicore::CachedCostModel model(aicore::make_pipe_cost_model({}, {}));
  for (auto _ : state)
    for (const auto& d : ops) benchmark::DoNotOptimize(model.estimate(d));
  state.counters["lookups_per_s"] =
      benchmark::Counter(static_cast<double>(state.iterations() * ops.size()), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_CostModelCachedLookup);

void BM_LeNetCompile(benchmark::State& state) {
  const auto w = workloads::make_workload("lenet5", 32);
  for (auto _ : state) {
    aicore::CachedCostModel model(aicore::make_pipe_cost_model({}, {}));
    benchmark::DoNotOptimize(runtime::compile(w, model, 16));
  }
}
BENCHMARK(BM_LeNetCompile);

}  // namespace
