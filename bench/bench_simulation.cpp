// Simulator speed through the library entry point (each sim::run in a fresh kernel context, so a
// benchmark may repeat): the main job, a long compute-bound loop-sink epoch, and op-by-op
// launches. Counters: simulated steps and seconds per wall second, wall time per simulated step,
// and the process's peak resident memory.
#include <sys/resource.h>

#include <filesystem>
#include <fstream>

#include <benchmark/benchmark.h>

#include "runtime/dataset_files.h"
#include "runtime/image_ops.h"
#include "sim/api.h"
#include "sim/serve.h"
#include "tests/test_support.h"

namespace {

using namespace ascendsim;

void run_and_count(benchmark::State& state, const sim::RunRequest& req) {
  double steps = 0, simulated_s = 0;
  for (auto _ : state) {
    const sim::RunOutcome out = sim::run(req);
    for (const auto& r : out.runs) {
      steps += static_cast<double>(r.steps_completed);
      simulated_s += r.sim_time_s;
    }
  }
  state.counters["sim_steps_per_s"] = benchmark::Counter(steps, benchmark::Counter::kIsRate);
  state.counters["wall_s_per_step"] =
      benchmark::Counter(steps, benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
  state.counters["sim_s_per_wall_s"] = benchmark::Counter(simulated_s, benchmark::Counter::kIsRate);
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  state.counters["peak_rss_mb"] = static_cast<double>(usage.ru_maxrss) / 1024.0;
}

/// `compare --workload lenet5 --epochs 10`: 4 x 18,750 steps.
void BM_LeNetCompare10Epochs(benchmark::State& state) {
  sim::RunRequest req;
  req.config = test::config_request();
  req.epochs = 10;
  run_and_count(state, req);
}
BENCHMARK(BM_LeNetCompare10Epochs)->Iterations(3)->UseRealTime()->Unit(benchmark::kMillisecond);

/// ResNet-50 at batch 256, one ImageNet epoch (5,004 steps) under loop sink.
void BM_ResNet50Batch256EpochLoopSink(benchmark::State& state) {
  sim::RunRequest req;
  req.config = test::config_request();
  req.workload = "resnet50";
  req.batch_size = 256;
  req.strategies = {runtime::Strategy::LoopSink};
  run_and_count(state, req);
}
BENCHMARK(BM_ResNet50Batch256EpochLoopSink)->Iterations(3)->UseRealTime()->Unit(benchmark::kMillisecond);

/// ResNet-50 at batch 32, one training step under loop sink with every op timed by the event model
/// (aicore.model=event): compiling the step, each distinct op simulated pipe by pipe, dominates.
void BM_ResNet50StepEventModel(benchmark::State& state) {
  sim::RunRequest req;
  req.config = test::config_request();
  req.config.sets.push_back("aicore.model=event");
  req.workload = "resnet50";
  req.batch_size = 32;
  req.steps_per_epoch = 1;
  req.strategies = {runtime::Strategy::LoopSink};
  run_and_count(state, req);
}
BENCHMARK(BM_ResNet50StepEventModel)->Iterations(1)->UseRealTime()->Unit(benchmark::kMillisecond);

/// ResNet-50 at batch 256 launched op by op (non-sink), 500 steps: 1,165 launches per step.
void BM_ResNet50Batch256NonSink(benchmark::State& state) {
  sim::RunRequest req;
  req.config = test::config_request();
  req.workload = "resnet50";
  req.batch_size = 256;
  req.steps_per_epoch = 500;
  req.strategies = {runtime::Strategy::NonSink};
  run_and_count(state, req);
}
BENCHMARK(BM_ResNet50Batch256NonSink)->Iterations(3)->UseRealTime()->Unit(benchmark::kMillisecond);

/// `compare --workload resnet50 --steps-per-epoch 200` untraced (0), traced to a Chrome JSON file
/// (1) and to a Perfetto protobuf file (2) in the temporary directory: the cost of a trace.
void BM_ResNet50Compare200StepsTraced(benchmark::State& state) {
  sim::RunRequest req;
  req.config = test::config_request();
  req.workload = "resnet50";
  req.steps_per_epoch = 200;
  const auto mode = state.range(0);
  const std::string path = (std::filesystem::temp_directory_path() /
                            (mode == 1 ? "ascendsim-bench-trace.json" : "ascendsim-bench-trace.pftrace"))
                               .string();
  std::ofstream file;
  if (mode > 0) {
    file.open(path, std::ios::binary | std::ios::trunc);
    req.trace = true;
    req.trace_out = &file;
    req.trace_format = mode == 1 ? sim::TraceFormat::Json : sim::TraceFormat::Perfetto;
  }
  run_and_count(state, req);
  if (mode > 0) {
    state.counters["trace_mb_per_run"] =
        static_cast<double>(file.tellp()) / 1e6 / static_cast<double>(state.iterations());
    file.close();
    std::filesystem::remove(path);
  }
  state.SetLabel(mode == 0 ? "untraced" : mode == 1 ? "json" : "perfetto");
}
BENCHMARK(BM_ResNet50Compare200StepsTraced)
    ->Arg(0)
    ->Arg(1)
    ->Arg(2)
    ->Iterations(3)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

/// ResNet-50 at batch 256 per device on 8 devices (one server), one ImageNet epoch per rank (625
/// steps), two AllReduce groups.
void BM_ResNet50Batch256EightDevicesEpoch(benchmark::State& state) {
  sim::RunRequest req;
  req.config = test::config_request();
  req.workload = "resnet50";
  req.batch_size = 256;
  req.devices = 8;
  req.all_reduce_fusion = {85, 160};
  req.strategies = {runtime::Strategy::LoopSink};
  run_and_count(state, req);
}
BENCHMARK(BM_ResNet50Batch256EightDevicesEpoch)->Iterations(1)->UseRealTime()->Unit(benchmark::kMillisecond);

/// ResNet-50 at batch 32 per device, [85, 160], loop sink, on `devices` (servers of 8).
sim::RunRequest resnet50_on(std::int64_t devices, std::int64_t steps) {
  sim::RunRequest req;
  req.config = test::config_request();
  req.workload = "resnet50";
  req.devices = devices;
  req.all_reduce_fusion = {85, 160};
  req.steps_per_epoch = steps;
  req.strategies = {runtime::Strategy::LoopSink};
  return req;
}

/// ResNet-50 on N devices, 20 steps per rank. Run the largest in its own process for its peak
/// memory: --benchmark_filter=BM_ResNet50Devices/1024$
void BM_ResNet50Devices(benchmark::State& state) { run_and_count(state, resnet50_on(state.range(0), 20)); }
BENCHMARK(BM_ResNet50Devices)->Arg(8)->Arg(64)->Arg(1024)->Iterations(1)->UseRealTime()->Unit(benchmark::kMillisecond);

/// A whole training run with checkpoints and failures: ResNet-50 on ImageNet on 1,024 devices (128
/// servers alike), 56 epochs of 39 steps per rank, a checkpoint every 4 epochs, a device MTBF of
/// 50,000 hours and 1,000 seeded draws of the run with failures, with the best interval's search.
void BM_ResNet50Devices1024CheckpointsAndFailures(benchmark::State& state) {
  sim::RunRequest req = resnet50_on(1024, 0);
  req.steps_per_epoch.reset();  // the dataset's: 1,281,167 images over 1,024 ranks of 32
  req.epochs = 56;
  req.checkpoint_every = 4 * 39;
  req.device_mtbf_hours = 50'000;
  req.fault_seeds = 1'000;
  run_and_count(state, req);
}
BENCHMARK(BM_ResNet50Devices1024CheckpointsAndFailures)->Iterations(1)->UseRealTime()->Unit(benchmark::kMillisecond);

/// The same with every rank simulated (the reference servers alike are checked against).
void BM_ResNet50DevicesEveryRank(benchmark::State& state) {
  sim::RunRequest req = resnet50_on(state.range(0), 20);
  req.every_rank = true;
  run_and_count(state, req);
}
BENCHMARK(BM_ResNet50DevicesEveryRank)->Arg(64)->Arg(1024)->Iterations(1)->UseRealTime()->Unit(benchmark::kMillisecond);

/// One training step of a transformer on 8 devices of its server (the workload built, compiled and
/// simulated): bert-large on the Atlas 800 9000, gpt2-medium on the Atlas 800T A2.
void BM_TransformerStepEightDevices(benchmark::State& state) {
  sim::RunRequest req;
  req.config = test::config_request();
  const bool bert = state.range(0) == 0;
  req.workload = bert ? "bert-large" : "gpt2-medium";
  req.config.server = bert ? "atlas800-9000" : "atlas800t-a2";
  req.batch_size = bert ? 32 : 4;
  req.devices = 8;
  req.steps_per_epoch = 1;
  req.strategies = {runtime::Strategy::LoopSink};
  state.SetLabel(req.workload);
  run_and_count(state, req);
}
BENCHMARK(BM_TransformerStepEightDevices)->Arg(0)->Arg(1)->Iterations(3)->UseRealTime()->Unit(benchmark::kMillisecond);

/// One step of the 32-layer LLaMA-7B on 8 Ascend 910B with Megatron tensor parallelism over all
/// eight (every rank simulated: the layers' AllReduces are group collectives), batch 1 of 2,048
/// tokens, the fused attention.
void BM_Llama7bTensorParallelStep(benchmark::State& state) {
  sim::RunRequest req;
  req.config = test::config_request();
  req.config.server = "atlas800t-a2";
  req.workload = "llama-7b";
  req.batch_size = 1;
  req.devices = 8;
  req.tensor_parallel = 8;
  req.steps_per_epoch = 1;
  req.strategies = {runtime::Strategy::LoopSink};
  run_and_count(state, req);
}
BENCHMARK(BM_Llama7bTensorParallelStep)->Iterations(3)->UseRealTime()->Unit(benchmark::kMillisecond);

/// One step of LLaMA-7B on two servers of eight 910B: tensor parallelism over each server, two
/// pipeline stages (a server each), eight micro-batches of one sequence in the 1F1B order.
void BM_Llama7bPipelineStep(benchmark::State& state) {
  sim::RunRequest req;
  req.config = test::config_request();
  req.config.server = "atlas800t-a2";
  req.workload = "llama-7b";
  req.batch_size = 8;
  req.devices = 16;
  req.tensor_parallel = 8;
  req.pipeline_stages = 2;
  req.micro_batches = 8;
  req.steps_per_epoch = 1;
  req.strategies = {runtime::Strategy::LoopSink};
  run_and_count(state, req);
}
BENCHMARK(BM_Llama7bPipelineStep)->Iterations(3)->UseRealTime()->Unit(benchmark::kMillisecond);

/// LLM serving: 10,000 requests (prompts 512 +-50%, outputs 128 +-50%, 10 per second) of
/// LLaMA-7B on four 910B with tensor parallelism, served under one launch mode (0 eager, 1 graph,
/// 2 multi-step); requests/s counts the requests served per wall second, the step shapes
/// simulated included.
void BM_ServeLlama7b10kRequests(benchmark::State& state) {
  sim::ServeRequest req;
  req.config = test::config_request();
  req.config.server = "atlas800t-a2";
  req.gpt_size = "llama-7b";
  req.devices = 4;
  req.tensor_parallel = 4;
  req.rate = 10;
  req.requests = 10000;
  req.length_spread = 0.5;
  req.launch = {static_cast<runtime::LaunchMode>(state.range(0))};
  double served = 0;
  std::int64_t shapes = 0;
  for (auto _ : state) {
    const sim::ServeOutcome out = sim::serve(req);
    served += static_cast<double>(out.runs.front().log.requests.size());
    shapes = out.simulations;
  }
  state.counters["requests_per_s"] = benchmark::Counter(served, benchmark::Counter::kIsRate);
  state.counters["shapes"] = static_cast<double>(shapes);
}
BENCHMARK(BM_ServeLlama7b10kRequests)->DenseRange(0, 2)->Iterations(1)->UseRealTime()->Unit(benchmark::kMillisecond);

/// `ascendsim tune`: 200 trials of a data-bound single-device ResNet-50 job (one map worker, loop
/// sink, 20 steps), the search, its simulations and the explanation's, through the command line
/// (Optuna runs in Python); trials per wall second.
void BM_Tune200ResNet50Trials(benchmark::State& state) {
  const std::string cmd = std::string(ASCENDSIM_BIN) +
                          " tune --workload resnet50 --strategy loop-sink --steps-per-epoch 20 --set "
                          "pipeline.num_parallel_workers=1 --budget 200 --seed 1 -q > /dev/null";
  double trials = 0;
  for (auto _ : state) {
    if (std::system(cmd.c_str()) != 0) {
      state.SkipWithError("ascendsim tune failed (is python3-optuna installed?)");
      return;
    }
    trials += 200;
  }
  state.counters["trials_per_s"] = benchmark::Counter(trials, benchmark::Counter::kIsRate);
}
BENCHMARK(BM_Tune200ResNet50Trials)->Iterations(1)->UseRealTime()->Unit(benchmark::kMillisecond);

/// `ascendsim validate` over every published figure (the goal: under 60 s on the 2-core machine
/// after the README's setup), through the command line; the model zoo's exports made once before
/// the timing (in the build's cache, as the tests keep them), so what is timed is the simulation.
void BM_ValidateAllFigures(benchmark::State& state) {
  const std::string cache = std::string("ASCENDSIM_MODEL_CACHE=") + ASCENDSIM_BUILD_DIR + "/model-cache ";
  const std::string cmd = cache + ASCENDSIM_BIN + " validate > /dev/null";
  if (std::system((cmd + " 2>/dev/null").c_str()) != 0) {  // makes the missing exports
    state.SkipWithError("ascendsim validate failed (the model zoo's exports need python3-torch)");
    return;
  }
  double figures = 0;
  for (auto _ : state) {
    if (std::system(cmd.c_str()) != 0) {
      state.SkipWithError("ascendsim validate failed");
      return;
    }
    figures += 1;
  }
  state.counters["runs_per_s"] = benchmark::Counter(figures, benchmark::Counter::kIsRate);
}
BENCHMARK(BM_ValidateAllFigures)->Iterations(3)->UseRealTime()->Unit(benchmark::kMillisecond);

/// A long run on a thousand-chip cluster: 4096 devices (512 servers alike), 1,000 steps per rank.
/// Run it in its own process for its peak memory: --benchmark_filter=BM_ResNet50Devices4096LongRun
void BM_ResNet50Devices4096LongRun(benchmark::State& state) { run_and_count(state, resnet50_on(4096, 1000)); }
BENCHMARK(BM_ResNet50Devices4096LongRun)->Iterations(1)->UseRealTime()->Unit(benchmark::kMillisecond);

/// Functional mode: one LeNet-5 epoch (1875 steps at batch 32) of Fashion-MNIST computed through
/// the simulated device under loop sink; samples/s counts the values computed.
void BM_LeNetFunctionalEpoch(benchmark::State& state) {
  if (!std::filesystem::exists("/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz")) {
    state.SkipWithError("dataset-fashion-mnist is not installed");
    return;
  }
  sim::RunRequest req;
  req.config = test::config_request();
  req.dataset = "/usr/share/datasets/fashion-mnist";
  req.functional.enabled = true;
  req.strategies = {runtime::Strategy::LoopSink};
  double samples = 0;
  for (auto _ : state) {
    const sim::RunOutcome out = sim::run(req);
    samples += static_cast<double>(out.runs.front().steps_completed * out.runs.front().batch_size);
  }
  state.counters["samples_per_s"] = benchmark::Counter(samples, benchmark::Counter::kIsRate);
}
BENCHMARK(BM_LeNetFunctionalEpoch)->Iterations(1)->UseRealTime()->Unit(benchmark::kMillisecond);

/// Reading the JPEG headers of a 20,000-file image folder (100 classes; the files are copies of
/// 20 generated photos, from the page cache): files per second.
/// Image folders: 20,000 JPEGs in 100 classes, their headers read (BM_ImageFolderScan) or taken
/// from the header index after checking every file's size and time (BM_ImageFolderIndexed).
void image_folder_bench(benchmark::State& state, bool indexed) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / "ascendsim_bench_image_folder";
  fs::remove_all(dir);
  const fs::path seed_dir = dir.string() + "_seed";
  fs::remove_all(seed_dir);
  runtime::image::write_image_folder(seed_dir.string(), 1, 20, 1);
  std::vector<fs::path> photos;
  for (const auto& e : fs::directory_iterator(seed_dir / "class0")) photos.push_back(e.path());
  for (int c = 0; c < 100; ++c) {
    fs::create_directories(dir / std::to_string(c));
    for (int i = 0; i < 200; ++i)
      fs::copy_file(photos[static_cast<std::size_t>(i) % photos.size()],
                    dir / std::to_string(c) / (std::to_string(i) + ".jpg"));
  }
  const std::string index = indexed ? dir.string() + ".headers" : "";
  if (indexed) runtime::load_dataset_dir(dir.string(), nullptr, index);  // writes it
  double files = 0;
  for (auto _ : state) files += static_cast<double>(runtime::load_dataset_dir(dir.string(), nullptr, index).samples);
  state.counters["files_per_s"] = benchmark::Counter(files, benchmark::Counter::kIsRate);
  fs::remove_all(dir);
  fs::remove_all(seed_dir);
  if (indexed) fs::remove(index);
}
void BM_ImageFolderScan(benchmark::State& state) { image_folder_bench(state, false); }
void BM_ImageFolderIndexed(benchmark::State& state) { image_folder_bench(state, true); }
BENCHMARK(BM_ImageFolderScan)->Iterations(3)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_ImageFolderIndexed)->Iterations(3)->UseRealTime()->Unit(benchmark::kMillisecond);

/// LeNet-5 under loop sink for N steps (one sink): memory must not grow with N. Run each size in
/// its own process (peak RSS is the process's): --benchmark_filter=BM_LeNetLoopSinkSteps/100000$
void BM_LeNetLoopSinkSteps(benchmark::State& state) {
  sim::RunRequest req;
  req.config = test::config_request();
  req.steps_per_epoch = state.range(0);
  req.strategies = {runtime::Strategy::LoopSink};
  run_and_count(state, req);
}
BENCHMARK(BM_LeNetLoopSinkSteps)
    ->Arg(100000)
    ->Arg(1000000)
    ->Arg(10000000)
    ->Iterations(1)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

}  // namespace
