// Functional mode: the values computed beside the timing. The PyTorch comparison is its own test
// (tests/functional/lenet_reference.py); these check what functional mode promises of itself.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>

#include <gtest/gtest.h>
#include <unistd.h>
#include <nlohmann/json.hpp>

#include "runtime/functional_cluster.h"
#include "runtime/image_ops.h"
#include "sim/api.h"
#include "sim/core/error.h"
#include "tests/test_support.h"
#include "workloads/kernels.h"
#include "workloads/op_registry.h"

namespace ascendsim {
namespace {

namespace fs = std::filesystem;
constexpr const char* kFashion = "/usr/share/datasets/fashion-mnist";

sim::RunRequest lenet(std::int64_t steps) {
  sim::RunRequest r;
  r.config = test::config_request();
  r.dataset = kFashion;
  r.steps_per_epoch = steps;
  r.functional.enabled = true;
  return r;
}

#define NEED_FASHION_MNIST()                                              \
  if (!fs::exists(std::string(kFashion) + "/train-images-idx3-ubyte.gz")) \
  GTEST_SKIP() << "dataset-fashion-mnist is not installed (scripts/install-deps.sh installs it)"

TEST(Functional, Fp16RoundingIsToNearestEven) {
  EXPECT_EQ(workloads::round_to_fp16(1.0f + std::ldexp(1.0f, -11)), 1.0f);  // a tie: to the even 1.0
  EXPECT_EQ(workloads::round_to_fp16(1.0f + 3 * std::ldexp(1.0f, -11)), 1.0f + std::ldexp(1.0f, -9));
  EXPECT_EQ(workloads::round_to_fp16(1.0f + std::ldexp(1.0f, -10)), 1.0f + std::ldexp(1.0f, -10));  // exact
  EXPECT_TRUE(std::isinf(workloads::round_to_fp16(65520.0f)));  // beyond fp16's largest, 65504
  EXPECT_EQ(workloads::round_to_fp16(65504.0f), 65504.0f);
  EXPECT_EQ(workloads::round_to_fp16(65519.0f), 65504.0f);
  EXPECT_EQ(workloads::round_to_fp16(-1.0f - std::ldexp(1.0f, -11)), -1.0f);
  // Subnormals: multiples of 2^-24, a tie to the even one; NaN stays NaN.
  EXPECT_EQ(workloads::round_to_fp16(std::ldexp(1.0f, -25)), 0.0f);
  EXPECT_EQ(workloads::round_to_fp16(3 * std::ldexp(1.0f, -25)), std::ldexp(1.0f, -23));
  EXPECT_EQ(workloads::round_to_fp16(std::ldexp(5.3f, -24)), 5 * std::ldexp(1.0f, -24));
  EXPECT_TRUE(std::isnan(workloads::round_to_fp16(NAN)));
  // Every fp16 value is a fixed point, and the midpoint between two neighbours rounds to the one
  // with the even mantissa.
  for (int e = -14; e <= 15; ++e)
    for (int m = 0; m < 1023; m += 37) {
      const float v = std::ldexp(1.0f + static_cast<float>(m) / 1024, e);
      EXPECT_EQ(workloads::round_to_fp16(v), v);
      const float next = std::ldexp(1.0f + static_cast<float>(m + 1) / 1024, e);
      EXPECT_EQ(workloads::round_to_fp16((v + next) / 2), m % 2 == 0 ? v : next) << v;
    }
}

TEST(Functional, TheTimingReportIsTheSameWithValues) {
  NEED_FASHION_MNIST();
  sim::RunRequest r = lenet(12);
  r.epochs = 2;
  r.sink_size = 5;
  const auto with = sim::run(r).report();
  r.functional.enabled = false;
  const auto without = sim::run(r).report();
  auto stripped = with;
  for (auto& run : stripped["runs"]) {
    ASSERT_TRUE(run.contains("functional"));
    run.erase("functional");
  }
  EXPECT_EQ(stripped.dump(), without.dump());
}

TEST(Functional, EveryStrategyComputesTheSameTrainingAndReportsItsOwnWay) {
  NEED_FASHION_MNIST();
  // 3 sinks of 8 steps under loop sink; 24 steps (two epochs of 12) for the others: the same
  // batches in the same order, so the same values, read back at different points.
  sim::RunRequest r = lenet(12);
  r.epochs = 2;
  sim::RunRequest loop = lenet(12);
  loop.strategies = {runtime::Strategy::LoopSink};
  loop.sink_size = 8;
  loop.epochs = 3;
  const auto all = sim::run(r);
  const auto sinks = sim::run(loop).runs.front();
  ASSERT_EQ(all.runs.size(), 4u);
  const auto& per_step = all.runs.front().loss_values;
  ASSERT_EQ(per_step.size(), 24u);
  for (std::size_t i = 0; i < per_step.size(); ++i) {
    EXPECT_EQ(per_step[i].epoch, static_cast<std::int64_t>(i / 12 + 1));
    EXPECT_EQ(per_step[i].step, static_cast<std::int64_t>(i % 12 + 1));
    EXPECT_TRUE(std::isfinite(per_step[i].loss) && per_step[i].loss > 0);
  }
  for (const auto& run : all.runs) {
    if (run.session.strategy == runtime::Strategy::LoopSink) continue;  // one per epoch of 12 here
    ASSERT_EQ(run.loss_values.size(), per_step.size()) << runtime::strategy_name(run.session.strategy);
    for (std::size_t i = 0; i < per_step.size(); ++i)
      EXPECT_EQ(run.loss_values[i].loss, per_step[i].loss) << runtime::strategy_name(run.session.strategy) << " " << i;
  }
  // Loop sink: LossMonitor prints once per sink, "epoch: k step: 8", the sink's last step's loss.
  ASSERT_EQ(sinks.loss_values.size(), 3u);
  for (std::size_t k = 0; k < 3; ++k) {
    EXPECT_EQ(sinks.loss_values[k].epoch, static_cast<std::int64_t>(k + 1));
    EXPECT_EQ(sinks.loss_values[k].step, 8);
    EXPECT_EQ(sinks.loss_values[k].loss, per_step[8 * k + 7].loss);
  }
  // The same seed gives the same values; another seed other ones.
  r.strategies = {runtime::Strategy::NonSink};
  EXPECT_EQ(sim::run(r).runs.front().loss_values.back().loss, per_step.back().loss);
  r.functional.seed = 2;
  EXPECT_NE(sim::run(r).runs.front().loss_values.back().loss, per_step.back().loss);
}

TEST(Functional, EvaluationPassesReportAccuracyAndLeaveTrainingAlone) {
  NEED_FASHION_MNIST();
  // Two epochs of 40 steps, an evaluation pass after each: the test split's accuracy then (the
  // last pass's equals --eval's after training: the same weights on the same images), and the
  // training losses exactly those of the run without evaluation.
  for (const auto strategy : {runtime::Strategy::NonSink, runtime::Strategy::LoopSink}) {
    sim::RunRequest r = lenet(40);
    r.strategies = {strategy};
    r.epochs = 2;
    const auto plain = sim::run(r).runs.front();
    r.eval_every = 1;
    r.functional.eval = true;
    const auto evaluated = sim::run(r).runs.front();
    const char* s = runtime::strategy_name(strategy);
    ASSERT_EQ(evaluated.loss_values.size(), plain.loss_values.size()) << s;
    for (std::size_t i = 0; i < plain.loss_values.size(); ++i)
      EXPECT_EQ(evaluated.loss_values[i].loss, plain.loss_values[i].loss) << s << " " << i;
    ASSERT_EQ(evaluated.eval_passes.size(), 2u) << s;
    for (const auto& p : evaluated.eval_passes) {
      EXPECT_GE(p.accuracy, 0.0) << s;
      EXPECT_LE(p.accuracy, 1.0) << s;
    }
    EXPECT_EQ(evaluated.eval_passes.back().accuracy, evaluated.accuracy) << s;
    EXPECT_EQ(evaluated.eval_samples, 10000) << s;
  }
}

TEST(Functional, TheSlicingSeedsNetworkLearnsFromItsFirstSteps) {
  NEED_FASHION_MNIST();
  // Seed 002's network with nn.Dense's default initialisation and SGD(0.01): its log falls from
  // 2.28 to 1.30 over 40 steps on MNIST; on Fashion-MNIST it falls too.
  sim::RunRequest r = lenet(41);
  r.workload = "mlp-slice";
  r.strategies = {runtime::Strategy::NonSink};
  const auto run = sim::run(r).runs.front();
  ASSERT_EQ(run.loss_values.size(), 41u);
  EXPECT_NEAR(run.loss_values.front().loss, std::log(10.0), 0.1);  // about uniform at first
  EXPECT_LT(run.loss_values.back().loss, run.loss_values.front().loss - 0.2);
  for (std::size_t i = 10; i < run.loss_values.size(); i += 10)
    EXPECT_LT(run.loss_values[i].loss, run.loss_values[i - 10].loss) << i;
  EXPECT_EQ(workloads::parameter_count(workloads::make_workload("mlp-slice", 32).graph), 669706);
}

TEST(Functional, TheSlicedEightDeviceRunComputesTheOneDeviceRun) {
  NEED_FASHION_MNIST();
  // Seed 002: each image cut into four strips over 8 devices. The communication makes the sliced
  // computation the whole one: every step's loss equals the one-device run's, from the same
  // initial weights on the same batches; also with layer2 split along its outputs, and fed
  // through the device queue.
  sim::RunRequest one = lenet(20);
  one.workload = "mlp-slice";
  one.strategies = {runtime::Strategy::NonSink};
  const auto reference = sim::run(one).runs.front().loss_values;
  ASSERT_EQ(reference.size(), 20u);
  const fs::path strategy = test::temp_path("ascendsim_layer2_columns.yaml");
  std::ofstream(strategy) << "layer2: \"((1,1),(4,1))\"\n";
  for (const bool columns : {false, true})
    for (const auto s : {runtime::Strategy::NonSink, runtime::Strategy::DataSink}) {
      sim::RunRequest r = one;
      r.devices = 8;
      r.parallel_mode = "semi-auto";
      r.dataset_strategy = "((1,1,1,4),(1,))";
      if (columns) r.shard_strategy = strategy.string();
      r.strategies = {s};
      const auto sliced = sim::run(r);
      ASSERT_FALSE(sliced.failed()) << sliced.failure_message();
      const auto& losses = sliced.runs.front().loss_values;
      ASSERT_EQ(losses.size(), reference.size());
      for (std::size_t i = 0; i < losses.size(); ++i)
        EXPECT_NEAR(losses[i].loss, reference[i].loss, 1e-4 * std::fabs(reference[i].loss))
            << (columns ? "layer2 by columns, " : "") << runtime::strategy_name(s) << ", step " << i + 1;
      // layer1's partial sums; with layer2 by columns also layer3's and layer2's input gradient.
      EXPECT_EQ(sliced.report()["parallel"]["collectives"].size(), columns ? 3u : 1u);
    }
  // The batch cut 4 ways and layer1's contraction 4 ways on the same ranks: an AllToAll moves the
  // cut, and the values are still the one-device run's.
  std::ofstream(strategy) << "layer1: \"((1,4),(1,4))\"\n";
  sim::RunRequest moved = one;
  moved.devices = 4;
  moved.parallel_mode = "semi-auto";
  moved.dataset_strategy = "((4,1,1,1),(4,))";
  moved.shard_strategy = strategy.string();
  const auto by_alltoall = sim::run(moved).runs.front().loss_values;
  ASSERT_EQ(by_alltoall.size(), reference.size());
  for (std::size_t i = 0; i < by_alltoall.size(); ++i)
    EXPECT_NEAR(by_alltoall[i].loss, reference[i].loss, 1e-4 * std::fabs(reference[i].loss))
        << "AllToAll, step " << i + 1;
  fs::remove(strategy);
  // A cut batch would need the gradients averaged across its ranks: refused, saying so.
  sim::RunRequest cut = one;
  cut.devices = 8;
  cut.parallel_mode = "semi-auto";
  cut.batch_size = 64;
  cut.dataset_strategy = "((2,1,1,4),(2,))";
  try {
    sim::run(cut);
    FAIL() << "a functional run with a cut batch ran";
  } catch (const sim::InputError& e) {
    EXPECT_NE(std::string(e.what()).find("batch"), std::string::npos) << e.what();
  }
}

TEST(Functional, OneEpochOfLeNetLearnsFashionMnist) {
  NEED_FASHION_MNIST();
  sim::RunRequest r = lenet(0);
  r.steps_per_epoch.reset();  // the whole training split: 60,000 images, 1875 steps
  r.strategies = {runtime::Strategy::DataSink};
  r.functional.eval = true;
  const auto run = sim::run(r).runs.front();
  ASSERT_EQ(run.loss_values.size(), 1875u);
  double first = 0, last = 0;
  for (std::size_t i = 0; i < 100; ++i) {
    first += run.loss_values[i].loss / 100;
    last += run.loss_values[1775 + i].loss / 100;
  }
  EXPECT_NEAR(first, std::log(10.0), 0.05);  // ten classes, small initial weights: chance
  EXPECT_LT(last, first - 1.0);
  // MindSpore's TruncatedNormal(0.02) start keeps LeNet near chance for several hundred steps;
  // after one epoch the accuracy depends on when it leaves that plateau (0.64-0.82 over seeds
  // 1-20, docs/functional.md). Chance is 0.1.
  EXPECT_EQ(run.eval_samples, 10000);
  EXPECT_GT(run.accuracy, 0.65);
  EXPECT_LE(run.accuracy, 1.0);
}

TEST(Functional, OneEpochFromTheFrameworksDefaultInitialisersReachesEightyPercent) {
  NEED_FASHION_MNIST();
  // The seed's hyperparameters (batch 32, Momentum 0.01/0.9) from MindSpore 2's nn.Conv2d and
  // nn.Dense defaults, which leave no plateau: 0.84-0.86 over seeds 1-10 (docs/functional.md).
  sim::RunRequest r = lenet(0);
  r.steps_per_epoch.reset();
  r.strategies = {runtime::Strategy::LoopSink};
  r.functional.eval = true;
  r.functional.init = "he-uniform";
  const auto run = sim::run(r).runs.front();
  EXPECT_EQ(run.eval_samples, 10000);
  EXPECT_GE(run.accuracy, 0.80);
  EXPECT_LE(run.accuracy, 1.0);
}

TEST(Functional, HeUniformDrawsWithinEachWeightsFanInAndLeavesBatchNormAlone) {
  NEED_FASHION_MNIST();
  runtime::FunctionalOptions opt;
  opt.enabled = true;
  opt.init = "he-uniform";
  // The bound of a weight and of its bias is 1/sqrt(fan_in); a uniform draw has variance
  // bound^2/3 and reaches close to the bound.
  auto check = [](const workloads::Workload& w, const runtime::FunctionalModel& m, int& weights, int& biases) {
    const auto& ts = w.graph.tensors();
    std::map<std::string, std::int64_t> fan_in;
    for (const auto& t : ts)
      if (t.role == workloads::TensorRole::Parameter && t.shape.size() >= 2)
        fan_in[t.name.substr(0, t.name.rfind('.'))] = t.elements() / t.shape[0];
    for (std::size_t i = 0; i < ts.size(); ++i) {
      const auto& t = ts[i];
      if (t.role != workloads::TensorRole::Parameter) continue;
      const auto& v = m.value(static_cast<workloads::TensorId>(i));
      const std::string layer = t.name.substr(0, t.name.rfind('.'));
      const std::string kind = t.name.substr(t.name.rfind('.') + 1);
      if (kind == "gamma" || kind == "beta") {
        for (float x : v) ASSERT_EQ(x, kind == "gamma" ? 1.0f : 0.0f) << t.name;
        continue;
      }
      ASSERT_TRUE(fan_in.count(layer)) << t.name;
      const double bound = 1.0 / std::sqrt(static_cast<double>(fan_in[layer]));
      double sq = 0, top = 0;
      for (float x : v) {
        ASSERT_LE(std::fabs(x), bound * (1 + 1e-6)) << t.name;
        sq += static_cast<double>(x) * x;
        top = std::max(top, std::fabs(static_cast<double>(x)));
      }
      if (v.size() >= 100) {
        EXPECT_GT(top, 0.9 * bound) << t.name;
      }
      if (v.size() >= 1000) {
        EXPECT_NEAR(sq / static_cast<double>(v.size()), bound * bound / 3, 0.1 * bound * bound / 3) << t.name;
      }
      ++(t.shape.size() >= 2 ? weights : biases);
    }
  };
  int weights = 0, biases = 0;
  const auto lenet5 = workloads::make_workload("lenet5", 32);
  check(lenet5, runtime::FunctionalModel(lenet5, opt, kFashion, 10), weights, biases);
  EXPECT_EQ(weights, 5);
  EXPECT_EQ(biases, 3);
  // The seed's TruncatedNormal(0.02) is another draw: conv2's values stay within 0.04, far inside
  // its he-uniform bound of 1/sqrt(150).
  runtime::FunctionalOptions script = opt;
  script.init = "script";
  const runtime::FunctionalModel seed(lenet5, script, kFashion, 10);
  for (std::size_t i = 0; i < lenet5.graph.tensors().size(); ++i)
    if (lenet5.graph.tensors()[i].name == "conv2.weight") {
      for (float x : seed.value(static_cast<workloads::TensorId>(i))) ASSERT_LE(std::fabs(x), 0.04f + 1e-7f);
    }
  // A ResNet: convolutions and the dense layer by their fan-in, BatchNorm at 1 and 0.
  const fs::path dir = test::temp_path("ascendsim_functional_he_uniform");
  fs::create_directories(dir);
  {
    std::ofstream f(dir / "data_batch_1.bin", std::ios::binary);
    for (int i = 0; i < 8; ++i) f << static_cast<char>(i) << std::string(3072, static_cast<char>(40 * i));
  }
  weights = biases = 0;
  const auto resnet = workloads::make_workload("resnet18-cifar10", 2);
  check(resnet, runtime::FunctionalModel(resnet, opt, dir.string(), 2), weights, biases);
  EXPECT_EQ(weights, 21);  // 20 convolutions and the dense layer
  EXPECT_EQ(biases, 1);
  fs::remove_all(dir);
}

TEST(Functional, DataParallelRanksTrainAsOneDeviceOnTheirWholeBatch) {
  NEED_FASHION_MNIST();
  // Two ranks of batch 16, their gradients averaged, against one device of batch 32: each step's
  // two half batches are the one device's batch, so the weights stay the same (to float rounding:
  // the gradient of a mean over 32 is summed in another order) and the ranks' mean loss is its loss.
  runtime::FunctionalOptions opt;
  opt.enabled = true;
  const auto half = workloads::make_workload("lenet5", 16), whole = workloads::make_workload("lenet5", 32);
  runtime::DataParallelValues ranks(half, 2, opt, kFashion, 1875);
  runtime::FunctionalModel one(whole, opt, kFashion, 1875);
  double worst_loss = 0;
  for (int s = 0; s < 30; ++s) {
    // Non-sink's path for the ranks, the queue's for the one device: the batches are the same.
    ranks.copy_batch_to_device();
    ranks.step();
    one.send_batch_to_queue();
    one.get_next();
    one.step();
    const double mean = (ranks.rank(0).value(half.loss)[0] + ranks.rank(1).value(half.loss)[0]) / 2;
    worst_loss = std::max(worst_loss, std::fabs(mean - one.value(whole.loss)[0]) / one.value(whole.loss)[0]);
    EXPECT_EQ(ranks.read_loss(), ranks.rank(0).value(half.loss)[0]);
  }
  EXPECT_LT(worst_loss, 1e-5);
  int compared = 0;
  for (std::size_t i = 0; i < half.graph.tensors().size(); ++i) {
    if (half.graph.tensors()[i].role != workloads::TensorRole::Parameter) continue;
    const auto t = static_cast<workloads::TensorId>(i);
    const auto& a = ranks.rank(0).value(t);
    EXPECT_EQ(a, ranks.rank(1).value(t)) << half.graph.tensors()[i].name;  // the same update on both ranks
    const auto& b = one.value(t);  // the same parameters in the same order in both graphs
    ASSERT_EQ(a.size(), b.size());
    double diff = 0, scale = 0, moved = 0;
    const auto start = runtime::FunctionalModel(whole, opt, kFashion, 1875).value(t);
    for (std::size_t e = 0; e < a.size(); ++e) {
      diff = std::max(diff, static_cast<double>(std::fabs(a[e] - b[e])));
      scale = std::max(scale, static_cast<double>(std::fabs(b[e])));
      moved = std::max(moved, static_cast<double>(std::fabs(b[e] - start[e])));
    }
    EXPECT_LT(diff, 1e-5 * scale) << half.graph.tensors()[i].name;
    EXPECT_GT(moved, 1000 * diff) << half.graph.tensors()[i].name;  // training moved it far more than that
    ++compared;
  }
  EXPECT_EQ(compared, 8);
  // Not averaging would leave the ranks apart: each rank's own gradient differs.
  EXPECT_NE(ranks.rank(0).value(half.loss)[0], ranks.rank(1).value(half.loss)[0]);
}

TEST(Functional, DataParallelRunsPrintRankZerosLossAndEvaluateItsNetwork) {
  NEED_FASHION_MNIST();
  sim::RunRequest r = lenet(6);
  r.devices = 4;
  r.strategies = {runtime::Strategy::DataSink};
  r.functional.eval = true;
  r.functional.dump_steps = 2;
  const auto with = sim::run(r).runs.front();
  ASSERT_EQ(with.loss_values.size(), 6u);
  for (const auto& l : with.loss_values) EXPECT_NEAR(l.loss, std::log(10.0), 0.1);
  // Rank 0's network: its weights for --save-weights, its batches for --dump-batches, and the
  // accuracy over the whole test split.
  ASSERT_TRUE(with.values);
  EXPECT_EQ(with.values->steps_computed(), 6);
  EXPECT_EQ(with.values->options().shard_id, 0);
  EXPECT_EQ(with.values->options().num_shards, 4);
  EXPECT_EQ(nlohmann::json::parse(with.values->batches_index())["batches"], 2);
  EXPECT_EQ(with.eval_samples, 10000);
  EXPECT_GE(with.accuracy, 0.0);
  EXPECT_LE(with.accuracy, 1.0);
  r.functional.eval = false;
  r.functional.dump_steps = 0;
  // The timing is the same without the values.
  r.functional.enabled = false;
  const auto without = sim::run(r).runs.front();
  EXPECT_EQ(with.sim_time_s, without.sim_time_s);
  EXPECT_EQ(with.steps_completed, without.steps_completed);
}

TEST(Functional, BadInputIsRefusedBeforeAnythingRuns) {
  NEED_FASHION_MNIST();
  sim::RunRequest r = lenet(4);
  r.dataset.clear();
  EXPECT_THROW(
      {
        try {
          sim::run(r);
        } catch (const sim::InputError& e) {
          EXPECT_NE(std::string(e.what()).find("--dataset"), std::string::npos) << e.what();
          throw;
        }
      },
      sim::InputError);
  // Semi-auto ranks hold pieces of the network: --eval (like --init-from and --dump-batches) is for
  // one device or data parallelism.
  r = lenet(4);
  r.workload = "mlp-slice";
  r.devices = 8;
  r.parallel_mode = "semi-auto";
  r.dataset_strategy = "((1,1,1,4),(1,))";
  r.functional.eval = true;
  try {
    sim::run(r);
    ADD_FAILURE() << "accepted --eval for semi-auto ranks";
  } catch (const sim::InputError& e) {
    EXPECT_NE(std::string(e.what()).find("are for one device or data parallelism"), std::string::npos) << e.what();
  }
  // Weights files: a missing parameter, a wrong shape, a tensor the network does not have.
  const fs::path dir = fs::temp_directory_path() / ("ascendsim_functional_weights_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  std::ofstream(dir / "w.bin", std::ios::binary) << std::string(4 * 150, '\0');
  auto index = [&](const std::string& tensors) {
    std::ofstream(dir / "w.json") << "{\"data\": \"w.bin\", \"tensors\": [" << tensors << "]}";
    r.functional.init_from = (dir / "w.json").string();
  };
  auto refused = [&](const std::string& part) {
    try {
      sim::run(r);
      ADD_FAILURE() << "accepted";
    } catch (const sim::InputError& e) {
      EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
    }
  };
  r = lenet(4);
  index("{\"name\": \"conv1.weight\", \"shape\": [6, 1, 5, 5], \"offset\": 0}");
  refused("no tensor 'conv2.weight'");
  index("{\"name\": \"conv1.weight\", \"shape\": [6, 1, 5, 4], \"offset\": 0}");
  refused("has shape [6,1,5,4], lenet5 needs [6,1,5,5]");
  // Entries that are not entries: a name twice, an offset past any file (no overflow), a negative or
  // fractional offset, a dtype that is not a string, a size that is not one.
  index(
      "{\"name\": \"conv1.weight\", \"shape\": [6, 1, 5, 5], \"offset\": 0}, "
      "{\"name\": \"conv1.weight\", \"shape\": [6, 1, 5, 5], \"offset\": 0}");
  refused("tensor 'conv1.weight' is listed twice");
  index("{\"name\": \"conv1.weight\", \"shape\": [6, 1, 5, 5], \"offset\": 9223372036854775807}");
  refused("needs an offset");
  index("{\"name\": \"conv1.weight\", \"shape\": [6, 1, 5, 5], \"offset\": 4611686018427387000}");
  refused("lies outside");
  index("{\"name\": \"conv1.weight\", \"shape\": [6, 1, 5, 5], \"offset\": -4}");
  refused("needs an offset");
  index("{\"name\": \"conv1.weight\", \"shape\": [6, 1, 5, 5], \"offset\": 0.5}");
  refused("needs an offset");
  index("{\"name\": \"conv1.weight\", \"shape\": [6, 1, 5, 5], \"offset\": 0, \"dtype\": 7}");
  refused("is 7, not float32");
  index("{\"name\": \"conv1.weight\", \"shape\": [6, -1, 5, 5], \"offset\": 0}");
  refused("its shape holds -1, not a size");
  std::ofstream(dir / "w.json") << "not json";
  refused("not a JSON weights index");
  fs::remove_all(dir);
}

TEST(Functional, AnImageNetRecipeDecodesAnImageFolder) {
  // ResNet-18's ImageNet recipe (decode, random resized crop, resize to 224, flip, normalise on
  // 0-255 values, HWC2CHW) on photo-like JPEGs: 1000 classes start at ln 1000.
  const fs::path dir = test::temp_path("ascendsim_functional_images");
  fs::remove_all(dir);
  runtime::image::write_image_folder(dir.string(), 2, 3, 9);
  sim::RunRequest r;
  r.config = test::config_request();
  r.workload = "resnet18";
  r.batch_size = 2;
  r.steps_per_epoch = 2;
  r.strategies = {runtime::Strategy::NonSink};
  r.dataset = dir.string();
  r.functional.enabled = true;
  r.functional.dump_steps = 1;
  const auto run = sim::run(r).runs.front();
  ASSERT_EQ(run.loss_values.size(), 2u);
  EXPECT_NEAR(run.loss_values[0].loss, std::log(1000.0), 1.5);
  EXPECT_TRUE(std::isfinite(run.loss_values[1].loss));
  // The batch fed: 2 x 3 x 224 x 224 normalised values, centred near zero.
  const std::string images = run.values->batches_images();
  ASSERT_EQ(images.size(), 2u * 3 * 224 * 224 * sizeof(float));
  std::vector<float> v(images.size() / sizeof(float));
  std::memcpy(v.data(), images.data(), images.size());
  double mean = 0;
  for (float x : v) mean += x / static_cast<double>(v.size());
  EXPECT_LT(std::fabs(mean), 1.5);
  EXPECT_LT(*std::max_element(v.begin(), v.end()), 3.0f);  // (255 - 103.5) / 57.4 at most
  // A file that is no JPEG is named when the batch is made.
  std::ofstream(dir / "class0" / "img0.jpg") << "not a jpeg";
  EXPECT_THROW(sim::run(r), sim::InputError);
  fs::remove_all(dir);
}

TEST(Functional, TheFusedCropDecodeResizeGivesTheThreeOpsPixels) {
  // ResNet-18's training recipe (RandomCropDecodeResize, flip, normalise, HWC2CHW) against the same
  // recipe as Decode, RandomCrop, Resize: one generator's draws, one window, so the same batch
  // value for value (a cropped decode's pixels are the whole decode's in the window).
  const fs::path dir = fs::temp_directory_path() / ("ascendsim_functional_fused_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  runtime::image::write_image_folder(dir.string(), 2, 2, 11);
  const auto fused = workloads::make_workload("resnet18", 2);
  ASSERT_EQ(fused.data.maps.front().type, workloads::MapOpType::RandomCropDecodeResize);
  auto three = fused;
  three.data.maps.erase(three.data.maps.begin());
  three.data.maps.insert(three.data.maps.begin(), {{workloads::MapOpType::Decode},
                                                   {workloads::MapOpType::RandomCrop, 0, 0, 0.47},
                                                   {workloads::MapOpType::Resize, 224, 224}});
  runtime::FunctionalOptions opt;
  opt.enabled = true;
  opt.seed = 5;
  runtime::FunctionalModel a(fused, opt, dir.string(), 2), b(three, opt, dir.string(), 2);
  for (int batch = 0; batch < 2; ++batch) {
    a.copy_batch_to_device();
    b.copy_batch_to_device();
    const auto& x = a.value(fused.batch_inputs[0]);
    ASSERT_EQ(x.size(), 2u * 3 * 224 * 224);
    EXPECT_EQ(x, b.value(three.batch_inputs[0])) << "batch " << batch;
  }
  fs::remove_all(dir);
}

TEST(Functional, AnOpWithoutAKernelIsNamed) {
  NEED_FASHION_MNIST();
  // A test op registered without a kernel (ReLU's shape rule and lowering), added to LeNet-5.
  auto& reg = workloads::OpRegistry::global();
  if (!reg.find("TestReluWithoutKernel")) {
    workloads::OpDef d;
    d.name = "TestReluWithoutKernel";
    d.infer = reg.at("ReLU").infer;
    d.lower = reg.at("ReLU").lower;
    reg.add(d);
  }
  auto w = workloads::make_workload("lenet5", 32);
  w.graph.apply("TestReluWithoutKernel", "extra/TestReluWithoutKernel", {w.batch_inputs[0]});
  runtime::FunctionalOptions opt;
  opt.enabled = true;
  try {
    runtime::FunctionalModel m(w, opt, kFashion, 10);
    ADD_FAILURE() << "accepted";
  } catch (const sim::InputError& e) {
    EXPECT_NE(std::string(e.what()).find("TestReluWithoutKernel (first: extra/TestReluWithoutKernel)"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace ascendsim

namespace ascendsim {
namespace {

TEST(Functional, TensorParallelismComputesTheOneDeviceRun) {
  // A LLaMA-shaped decoder of two layers (RMSNorm, rotary embeddings, SwiGLU, AdamW with its
  // global-norm clip) on a token stream — the README's bytes, windows of 16 and their next
  // tokens — on one device and split by Megatron's tensor parallelism over two (with its sequence
  // parallelism too): the same loss at every one of 20 steps, from the same initial weights on the
  // same batches.
  const fs::path dir = test::temp_path("ascendsim_readme_tokens");
  fs::create_directories(dir);
  {
    std::ifstream text(ASCENDSIM_SOURCE_DIR "/README.md", std::ios::binary);
    std::ofstream tokens(dir / "train-tokens.bin", std::ios::binary);
    for (char c; text.get(c);) {
      const std::int32_t t = static_cast<unsigned char>(c);
      tokens.write(reinterpret_cast<const char*>(&t), sizeof t);  // little-endian on this machine
    }
  }
  sim::RunRequest r = test::small_transformer("llama-7b", 2, 64, 4, 176, 16, 256);
  r.recipe.amp_level = "O0";
  r.batch_size = 4;
  r.functional.enabled = true;
  r.dataset = dir.string();
  r.steps_per_epoch = 20;
  r.strategies = {runtime::Strategy::NonSink};
  const sim::RunOutcome one = sim::run(r);
  ASSERT_FALSE(one.failed()) << one.failure_message();
  // The loss scale (65,536 by default) scales the backward pass and is taken out before the
  // update: in fp32 the run is the one without it.
  sim::RunRequest unscaled = r;
  unscaled.recipe.loss_scale = 1;
  const sim::RunOutcome plain = sim::run(unscaled);
  ASSERT_FALSE(plain.failed()) << plain.failure_message();
  for (std::size_t i = 0; i < plain.runs.front().loss_values.size(); ++i)
    EXPECT_NEAR(plain.runs.front().loss_values[i].loss, one.runs.front().loss_values.at(i).loss,
                1e-4 * std::fabs(plain.runs.front().loss_values[i].loss))
        << "loss scale 1 against the default, step " << i + 1;
  r.devices = 2;
  r.tensor_parallel = 2;
  const sim::RunOutcome two = sim::run(r);
  ASSERT_FALSE(two.failed()) << two.failure_message();
  const auto& a = one.runs.front().loss_values;
  const auto& b = two.runs.front().loss_values;
  ASSERT_EQ(a.size(), 20u);
  ASSERT_EQ(b.size(), a.size());
  double lo = a[0].loss, hi = a[0].loss;
  for (std::size_t i = 0; i < a.size(); ++i) {
    EXPECT_NEAR(b[i].loss, a[i].loss, 1e-4 * std::fabs(a[i].loss)) << "step " << i + 1;
    lo = std::min(lo, a[i].loss);
    hi = std::max(hi, a[i].loss);
  }
  EXPECT_GT(hi - lo, 1e-3);                       // the losses move: the weights train
  EXPECT_NEAR(a[0].loss, std::log(256.0), 0.05);  // small initial weights: about uniform over the bytes
  // With sequence parallelism too: the norms and residual adds on each rank's half of the tokens,
  // the column-split layers' input gathered, the row-split layers' partial sums reduce-scattered,
  // the head's input gathered (its gradient's piece kept), the norms' scales' gradients summed
  // over the two — the same losses again.
  r.sequence_parallel = true;
  const sim::RunOutcome sp = sim::run(r);
  ASSERT_FALSE(sp.failed()) << sp.failure_message();
  const auto& c = sp.runs.front().loss_values;
  ASSERT_EQ(c.size(), a.size());
  for (std::size_t i = 0; i < a.size(); ++i)
    EXPECT_NEAR(c[i].loss, a[i].loss, 1e-4 * std::fabs(a[i].loss)) << "step " << i + 1;
  fs::remove_all(dir);
}

}  // namespace
}  // namespace ascendsim
