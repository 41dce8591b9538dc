// Evaluation during training (--eval-every): the forward-only graph, the evaluation pipeline and
// channel, the passes' timing and accounting, and the evaluation cache.
#include <filesystem>
#include <fstream>
#include <numeric>

#include <unistd.h>

#include <gtest/gtest.h>

#include "runtime/graph_compiler.h"
#include "sim/accuracy_curve.h"
#include "sim/api.h"
#include "sim/core/breakdown.h"
#include "sim/core/error.h"
#include "sim/report/report.h"
#include "sim/system.h"
#include "tests/test_support.h"
#include "workloads/workload.h"

namespace ascendsim {
namespace {

using runtime::Strategy;

sim::RunRequest lenet_eval(std::int64_t eval_every) {
  sim::RunRequest r;
  r.config = test::config_request();
  r.steps_per_epoch = 50;
  r.epochs = 4;
  r.eval_every = eval_every;
  return r;
}

double phase(const runtime::RunResult& r, sim::Phase p) { return r.breakdown_s[static_cast<std::size_t>(p)]; }

TEST(Evaluation, TheInferenceGraphIsTheForwardPassWithBatchNormOnItsStatistics) {
  const auto train = workloads::make_workload("resnet50", 32);
  const auto infer = workloads::inference_workload(train);
  EXPECT_FALSE(infer.training);
  std::int64_t bn = 0, params_train = 0, params_infer = 0;
  for (const auto& op : train.graph.ops()) bn += op.type == "BatchNorm";
  for (const auto& op : infer.graph.ops()) EXPECT_EQ(op.pass, workloads::Pass::Forward) << op.name;
  for (const auto& t : train.graph.tensors()) params_train += t.role == workloads::TensorRole::Parameter;
  for (const auto& t : infer.graph.tensors()) {
    params_infer += t.role == workloads::TensorRole::Parameter;
    EXPECT_NE(t.role, workloads::TensorRole::OptimizerState) << t.name;
    EXPECT_NE(t.role, workloads::TensorRole::Gradient) << t.name;
  }
  EXPECT_EQ(params_infer, params_train);  // every weight is read by the forward pass
  ASSERT_EQ(bn, 53);                      // ResNet-50's BatchNorm layers

  const sim::SystemConfig cfg = sim::load_config(test::config_request());
  const runtime::CompiledGraph g = sim::compile_for(cfg, infer);
  const runtime::CompiledGraph t = sim::compile_for(cfg, train);
  std::int64_t bn_infer = 0, bn_training = 0;
  for (const auto& task : g.step_tasks) {
    bn_infer += task.name.find("/BNInfer") != std::string::npos;
    bn_training += task.name.find("/BNTraining") != std::string::npos;
    EXPECT_NE(task.part, hostif::StepPart::Backward) << task.name;
    EXPECT_NE(task.part, hostif::StepPart::Optimizer) << task.name;
  }
  EXPECT_EQ(bn_infer, bn);
  EXPECT_EQ(bn_training, 0);
  // A forward pass costs less than a training step but more than a third of its forward half.
  EXPECT_LT(g.device_compute_s, 0.6 * t.device_compute_s);
  EXPECT_GT(g.device_compute_s, 0.2 * t.device_compute_s);
  EXPECT_TRUE(g.setup_tasks.empty());

  // On several devices: no collectives in the inference graph, no parameters' broadcast.
  auto par = workloads::make_workload("resnet50", 32);
  par.parallel.devices = 8;
  const runtime::CompiledGraph p = sim::compile_for(cfg, workloads::inference_workload(par));
  for (const auto& task : p.step_tasks) EXPECT_NE(task.kind, hostif::TaskKind::Comm) << task.name;
  EXPECT_TRUE(p.setup_tasks.empty());
}

TEST(Evaluation, PassesFollowEveryEEpochsAndTheirTimeIsChargedToEval) {
  for (const std::int64_t every : {1, 2, 3}) {
    const auto out = sim::run(lenet_eval(every));
    ASSERT_FALSE(out.failed()) << out.failure_message();
    for (const auto& r : out.runs) {
      const char* s = runtime::strategy_name(r.session.strategy);
      // LeNet-5 evaluates the 10,000 test images: 312 batches of 32.
      EXPECT_EQ(r.session.eval_steps, 312) << s;
      ASSERT_EQ(static_cast<std::int64_t>(r.eval_passes.size()), 4 / every) << s;
      double sum = 0;
      for (std::size_t k = 0; k < r.eval_passes.size(); ++k) {
        EXPECT_EQ(r.eval_passes[k].after_epoch, static_cast<std::int64_t>(k + 1) * every) << s;
        EXPECT_EQ(r.eval_passes[k].steps, 312) << s;
        EXPECT_GT(r.eval_passes[k].time_s, 0) << s;
        if (k > 0) {
          EXPECT_GT(r.eval_passes[k].start_s, r.eval_passes[k - 1].start_s + r.eval_passes[k - 1].time_s);
        }
        sum += r.eval_passes[k].time_s;
      }
      // The passes' time is exactly the eval phase, and the phases still add up to the run.
      EXPECT_NEAR(phase(r, sim::Phase::Eval), sum, 1e-9) << s;
      EXPECT_NEAR(std::accumulate(r.breakdown_s.begin(), r.breakdown_s.end(), 0.0), r.sim_time_s, 1e-9) << s;
      // Training is what it was: its steps and interactions, and the passes' own interactions.
      EXPECT_EQ(r.steps_completed, 200) << s;
      const auto& io = r.eval_interactions;
      const std::int64_t steps = 312 * static_cast<std::int64_t>(r.eval_passes.size());
      EXPECT_EQ(io.host_syncs, steps) << s;
      EXPECT_EQ(io.d2h_copies, steps) << s;
      EXPECT_EQ(io.d2h_bytes, steps * 4 * (32 * 10 + 1)) << s;  // logits and loss, fp32
      switch (r.session.strategy) {
        case Strategy::NonSink:
          EXPECT_EQ(io.h2d_copies, 2 * steps) << s;  // image and label per step
          EXPECT_GT(io.op_launches, 0);
          EXPECT_EQ(io.op_launches % steps, 0);
          EXPECT_EQ(io.graph_launches, 0);
          break;
        case Strategy::DataSink:
          EXPECT_EQ(io.h2d_copies, 2 * steps) << s;  // through the evaluation channel
          EXPECT_EQ(io.op_launches % steps, 0);
          EXPECT_EQ(io.graph_launches, 0);
          break;
        case Strategy::GraphSink:
        case Strategy::LoopSink:
          EXPECT_EQ(io.graph_launches, steps) << s;      // one step per launch
          EXPECT_EQ(io.h2d_copies, 2 * steps + 1) << s;  // the batches and the graph's load, once
          EXPECT_EQ(io.op_launches, 0);
          break;
      }
    }
  }
}

TEST(Evaluation, TrainingIsTheSameWithOrWithoutPasses) {
  const auto with = sim::run(lenet_eval(1));
  const auto without = sim::run(lenet_eval(0));
  for (std::size_t i = 0; i < with.runs.size(); ++i) {
    const auto& a = with.runs[i];
    const auto& b = without.runs[i];
    const char* s = runtime::strategy_name(a.session.strategy);
    EXPECT_TRUE(b.eval_passes.empty());
    EXPECT_EQ(phase(b, sim::Phase::Eval), 0);
    EXPECT_EQ(a.interactions.op_launches, b.interactions.op_launches) << s;
    EXPECT_EQ(a.interactions.graph_launches, b.interactions.graph_launches) << s;
    EXPECT_EQ(a.interactions.h2d_copies, b.interactions.h2d_copies) << s;
    EXPECT_EQ(a.interactions.host_syncs, b.interactions.host_syncs) << s;
    // The run is longer by the passes; each epoch takes about what it took without them (the
    // training queue refills during a pass, so the next epoch may start a little ahead).
    const double passes = phase(a, sim::Phase::Eval);
    EXPECT_NEAR(a.sim_time_s - passes, b.sim_time_s, 0.02 * b.sim_time_s) << s;
    ASSERT_EQ(a.epoch_s().size(), b.epoch_s().size());
    for (std::size_t e = 0; e < a.epoch_s().size(); ++e)
      EXPECT_NEAR(a.epoch_s()[e], b.epoch_s()[e], 0.05 * b.epoch_s()[e]) << s << " epoch " << e;
  }
}

/// ResNet-50 on 4 devices at batch 64, evaluation bound by its pipeline (two workers per rank).
sim::RunRequest resnet_eval(const std::string& cache) {
  sim::RunRequest r;
  r.config = test::config_request();
  r.config.sets = {"pipeline.eval_cache=" + cache, "pipeline.num_parallel_workers=2"};
  r.workload = "resnet50";
  r.batch_size = 64;
  r.devices = 4;
  r.strategies = {Strategy::LoopSink};
  r.steps_per_epoch = 5;
  r.epochs = 3;
  r.eval_every = 1;
  return r;
}

TEST(Evaluation, ItsCacheCostsTheFirstPassAndSpeedsUpTheLaterOnes) {
  const auto plain = sim::run(resnet_eval("none")).runs.front();
  const auto cached = sim::run(resnet_eval("map")).runs.front();
  ASSERT_EQ(plain.eval_passes.size(), 3u);
  ASSERT_EQ(cached.eval_passes.size(), 3u);
  // 50,000 validation images over 4 ranks: 12,500 each, 195 batches of 64.
  EXPECT_EQ(plain.session.eval_steps, 195);
  // Without a cache the pipeline starts each pass afresh: every pass takes the same time (a
  // pipeline that read ahead between passes would make the later ones faster).
  EXPECT_NEAR(plain.eval_passes[1].time_s, plain.eval_passes[0].time_s, 0.01 * plain.eval_passes[0].time_s);
  EXPECT_NEAR(plain.eval_passes[2].time_s, plain.eval_passes[1].time_s, 0.01 * plain.eval_passes[1].time_s);
  // With it: the first pass writes the cache (slower), the later ones read it (faster).
  EXPECT_GT(cached.eval_passes[0].time_s, plain.eval_passes[0].time_s);
  EXPECT_LT(cached.eval_passes[1].time_s, 0.8 * plain.eval_passes[1].time_s);
  EXPECT_LT(cached.eval_passes[2].time_s, 0.8 * plain.eval_passes[2].time_s);
  const auto& c = cached.eval_cache;
  EXPECT_EQ(c["placement"], "after 6 map op(s)");  // after the evaluation recipe's last map
  EXPECT_EQ(c["randomness_lost"], false);
  EXPECT_DOUBLE_EQ(c["bytes_per_sample"].get<double>(), 224.0 * 224 * 3 * 4);  // float CHW
  EXPECT_EQ(plain.eval_cache["placement"], "none");
  // The report carries it.
  const auto j = report::run_json(cached);
  EXPECT_EQ(j["evaluation"]["passes"].size(), 3u);
  EXPECT_LT(j["evaluation"]["later_pass_mean_s"].get<double>(), j["evaluation"]["first_pass_s"].get<double>());
}

TEST(Evaluation, BadSettingsAreRefusedNamingTheKey) {
  auto r = lenet_eval(-1);
  try {
    sim::run(r);
    FAIL() << "a negative eval_every ran";
  } catch (const sim::InputError& e) {
    EXPECT_EQ(e.key(), "eval_every");
  }
  r = lenet_eval(0);
  r.eval_dataset = "/nonexistent";
  try {
    sim::run(r);
    FAIL() << "an evaluation dataset without eval_every ran";
  } catch (const sim::InputError& e) {
    EXPECT_EQ(e.key(), "eval_dataset");
  }
  // A batch larger than a rank's share of the evaluation set makes no evaluation step.
  r = lenet_eval(1);
  r.batch_size = 20000;
  r.steps_per_epoch = 1;
  EXPECT_THROW(sim::run(r), sim::InputError);
}

}  // namespace
}  // namespace ascendsim

namespace ascendsim {
namespace {

/// Writes `text` to a file of the test's own; returns its path.
std::string curve_file(const std::string& name, const std::string& text) {
  const auto path = std::filesystem::temp_directory_path() / ("ascendsim_curve_" + std::to_string(::getpid()) + name);
  std::ofstream(path) << text;
  return path.string();
}

TEST(AccuracyCurve, EpochsToATargetAreTheFirstEvaluationTheCurveReachesItAt) {
  const std::string path = curve_file("a.csv", "epoch,top1\n# a comment\n\n4,0.30\n8,55%\n16,0.761\n");
  const sim::AccuracyCurve c = sim::load_accuracy_curve(path);
  ASSERT_EQ(c.points.size(), 3u);
  EXPECT_DOUBLE_EQ(c.at(8), 0.55);
  EXPECT_DOUBLE_EQ(c.at(12), 0.55 + (0.761 - 0.55) / 2);  // between two points: on the line
  EXPECT_LT(c.at(3), 0);                                  // before the first: unknown
  EXPECT_LT(c.at(17), 0);                                  // after the last: unknown
  // Evaluating every 4 epochs the curve passes 0.6 between epochs 8 and 16: first at 12 (0.6555).
  EXPECT_EQ(sim::epochs_to_target(c, 0.6, 4).first, 12);
  EXPECT_DOUBLE_EQ(sim::epochs_to_target(c, 0.6, 4).second, c.at(12));
  EXPECT_EQ(sim::epochs_to_target(c, 0.6, 1).first, 10);  // 0.55 + 0.2110/8·2 = 0.6028 at epoch 10
  EXPECT_EQ(sim::epochs_to_target(c, 0.761, 16).first, 16);
  EXPECT_EQ(sim::epochs_to_target(c, 0.3, 3).first, 6);  // epoch 3 lies before the curve: not an evaluation on it
  // Not reached at an evaluation: epoch 16 is not a multiple of 5, so the last evaluation is 15.
  EXPECT_THROW(sim::epochs_to_target(c, 0.761, 5), sim::InputError);
  EXPECT_THROW(sim::epochs_to_target(c, 0.8, 4), sim::InputError);
  EXPECT_THROW(sim::epochs_to_target(c, 0.5, 0), sim::InputError);  // no evaluation to stop at
  EXPECT_THROW(sim::epochs_to_target(c, 1.5, 4), sim::InputError);
  std::filesystem::remove(path);
}

TEST(AccuracyCurve, MalformedCurvesAreRefusedNamingTheLine) {
  for (const auto& [text, says] : std::vector<std::pair<std::string, std::string>>{
           {"4,0.3\n3,0.4\n", ":2: '3,0.4': epochs must increase"},
           {"4,1.3\n", ":1: '4,1.3': the accuracy is a fraction"},
           {"4.5,0.3\n", "the epoch is a whole number"},
           {"4,0.3\nfour,0.4\n", ":2: 'four,0.4': expected epoch,accuracy"},
           {"4\n", ":1: '4': expected epoch,accuracy"},
           {"# only a comment\n", "no epoch,accuracy line"}}) {
    const std::string path = curve_file("b.csv", text);
    try {
      sim::load_accuracy_curve(path);
      ADD_FAILURE() << "accepted: " << text;
    } catch (const sim::InputError& e) {
      EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(says), std::string::npos) << e.what();
    }
    std::filesystem::remove(path);
  }
  EXPECT_THROW(sim::load_accuracy_curve("/nonexistent/curve.csv"), sim::InputError);
}

TEST(AccuracyCurve, ARunToATargetTrainsTheEpochsTheCurveGivesAndSaysSo) {
  const std::string path = curve_file("c.csv", "2,0.5\n4,0.7\n6,0.8\n");
  sim::RunRequest r = lenet_eval(2);
  r.epochs = 1;
  r.steps_per_epoch = 20;
  r.accuracy_curve = path;
  r.target_accuracy = 0.75;
  const sim::RunOutcome out = sim::run(r);
  ASSERT_FALSE(out.failed()) << out.failure_message();
  EXPECT_EQ(out.header.target["epochs"], 6);  // evaluations at 2, 4, 6: 0.8 at 6 is the first ≥ 0.75
  for (const auto& run : out.runs) {
    EXPECT_EQ(run.session.epochs, 6);
    EXPECT_EQ(run.evaluation().passes, 3);
  }
  EXPECT_EQ(out.report()["target"]["accuracy"], 0.8);
  EXPECT_NE(report::format_table(out.header, out.runs).find("trains to epoch 6"), std::string::npos);
  r.target_accuracy = 0;  // a curve without a target
  EXPECT_THROW(sim::run(r), sim::InputError);
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace ascendsim
