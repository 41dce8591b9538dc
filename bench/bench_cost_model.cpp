// Cost-model throughput: cold evaluation (a fresh model, nothing cached) of every op of a LeNet-5
// and a ResNet-50 training step, cached lookups, and compiling a step.

#include <cstdlib>

#include <benchmark/benchmark.h>

#include "aicore/cost_model.h"
#include "runtime/graph_compiler.h"
#include "workloads/op_registry.h"
#include "workloads/workload.h"

namespace {

using namespace ascendsim;

std::vector<aicore::OpDesc> step_ops(const std::string& name, std::int64_t batch) {
  const auto w = workloads::make_workload(name, batch);
  std::vector<aicore::OpDesc> ops;
  for (const auto& op : w.graph.ops())
    if (!op.def->view) ops.push_back(runtime::lower_op(w.graph, op));
  return ops;
}

void cold_step(benchmark::State& state, const std::string& name, std::int64_t batch) {
  const auto ops = step_ops(name, batch);
  for (auto _ : state) {
    auto model = aicore::make_pipe_cost_model({}, {});
    for (const auto& d : ops) benchmark::DoNotOptimize(model->estimate(d));
  }
  state.counters["ops_per_step"] = static_cast<double>(ops.size());
  state.counters["evaluations_per_s"] =
      benchmark::Counter(static_cast<double>(state.iterations() * ops.size()), benchmark::Counter::kIsRate);
}

void BM_CostModelColdLeNetStep(benchmark::State& state) { cold_step(state, "lenet5", 32); }
BENCHMARK(BM_CostModelColdLeNetStep)->Unit(benchmark::kMicrosecond);

void BM_CostModelColdResNet50Step(benchmark::State& state) { cold_step(state, "resnet50", state.range(0)); }
BENCHMARK(BM_CostModelColdResNet50Step)->Arg(32)->Arg(256)->Unit(benchmark::kMillisecond);

void BM_CostModelCachedLookup(benchmark::State& state) {
  const auto ops = step_ops("resnet50", 32);
  aicore::CachedCostModel model(aicore::make_pipe_cost_model({}, {}));
  for (auto _ : state)
    for (const auto& d : ops) benchmark::DoNotOptimize(model.estimate(d));
  state.counters["lookups_per_s"] =
      benchmark::Counter(static_cast<double>(state.iterations() * ops.size()), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_CostModelCachedLookup)->Unit(benchmark::kMicrosecond);

void BM_CompileResNet50Step(benchmark::State& state) {
  const auto w = workloads::make_workload("resnet50", 32);
  for (auto _ : state) {
    aicore::CachedCostModel model(aicore::make_pipe_cost_model({}, {}));
    benchmark::DoNotOptimize(runtime::compile(w, model, 16));
  }
}
BENCHMARK(BM_CompileResNet50Step)->Unit(benchmark::kMillisecond);

}  // namespace
