// Checkpoints (--checkpoint-every) and device failures laid over a run (--device-mtbf-hours): a
// save's parts and the storage its server's ranks share; the expected time with failures against
// the draws; the best interval against Young/Daly's; the same seed, the same figures.
#include <cmath>
#include <cstring>

#include <gtest/gtest.h>

#include "runtime/faults.h"
#include "sim/api.h"
#include "sim/core/breakdown.h"
#include "sim/core/error.h"
#include "tests/test_support.h"

namespace ascendsim {
namespace {

using runtime::FaultInputs;

/// ResNet-50 on 8 devices, loop sink, 4 sinks of 5 steps, a checkpoint every 10 steps.
sim::RunRequest resnet_saving(std::int64_t devices_per_server) {
  sim::RunRequest r;
  r.config = test::config_request();
  r.workload = "resnet50";
  r.strategies = {runtime::Strategy::LoopSink};
  r.devices = 8;
  r.devices_per_server = devices_per_server;
  r.steps_per_epoch = 5;
  r.epochs = 4;
  r.checkpoint_every = 10;
  return r;
}

double phase(const runtime::RunResult& r, sim::Phase p) { return r.breakdown_s[static_cast<std::size_t>(p)]; }

TEST(Checkpoints, ASaveIsItsCopySerialisationAndWriteAndTheServersRanksShareTheStorage) {
  const sim::SystemConfig cfg = sim::load_config(test::config_request());
  const runtime::RunResult four = sim::run(resnet_saving(4)).runs.at(0);
  const runtime::RunResult eight = sim::run(resnet_saving(8)).runs.at(0);
  for (const runtime::RunResult* r : {&four, &eight}) {
    const runtime::CheckpointRecord& c = r->checkpoints;
    EXPECT_EQ(c.saves, 2);  // steps 10 and 20, the last one the end's
    // What the memory plan keeps between steps: ResNet-50's fp32 weights and Momentum's state.
    EXPECT_GT(c.bytes, 200'000'000);
    EXPECT_LT(c.bytes, 230'000'000);
    // Synchronous saves: the steps wait for all three parts, one after another.
    EXPECT_NEAR(c.wait_s, c.d2h_s + c.serialise_s + c.write_s, 1e-9 * c.wait_s);
    EXPECT_NEAR(phase(*r, sim::Phase::Checkpoint), c.wait_s, 1e-9);
    const runtime::TimeToTrain t = r->time_to_train();
    EXPECT_NEAR(t.checkpoint, c.wait_s, 1e-12);
    EXPECT_NEAR(t.training + t.evaluation + t.initialisation + t.exposed_comm + t.checkpoint, t.total,
                1e-9 * t.total);
    // The copy crosses the device's PCIe link and its switch's uplink, shared with the switch's
    // other devices saving at once: never faster than the link alone.
    const double bytes = static_cast<double>(c.bytes) * static_cast<double>(c.saves);
    EXPECT_GE(c.d2h_s, bytes / (cfg.link.d2h_bandwidth_gbps * 1e9));
    EXPECT_NEAR(c.serialise_s, bytes * cfg.host.checkpoint_ns_per_byte * 1e-9 / cfg.host.core_speed,
                1e-9 * c.serialise_s);
    EXPECT_NEAR(c.write_s, bytes * static_cast<double>(c.writers) / (cfg.host.storage_checkpoint_write_gbps * 1e9),
                1e-9 * c.write_s);
    EXPECT_DOUBLE_EQ(cfg.host.checkpoint_write_s(1e9, 4), 2.0);  // 4 GB at the preset's 2 GB/s
  }
  EXPECT_EQ(four.checkpoints.writers, 4);
  EXPECT_EQ(eight.checkpoints.writers, 8);
  EXPECT_EQ(four.checkpoints.bytes, eight.checkpoints.bytes);
  // Twice the ranks writing to one server's storage: each write takes twice as long.
  EXPECT_NEAR(eight.checkpoints.write_s, 2 * four.checkpoints.write_s, 1e-9 * eight.checkpoints.write_s);
  // The step times are the steps': a save is no step's, as an evaluation pass.
  EXPECT_LT(eight.steps.step.stats().p99_ms * 1e-3, eight.checkpoints.wait_s / 2);
}

TEST(Checkpoints, AsyncSaveLeavesTheStepsOnlyTheCopyAndTheLastSave) {
  sim::RunRequest r = resnet_saving(8);
  r.steps_per_epoch = 100;  // saves 100 steps (about 2 s) apart: each done before the next
  r.epochs = 3;
  r.checkpoint_every = 100;
  const runtime::RunResult sync = sim::run(r).runs.at(0);
  r.checkpoint_async = true;
  const runtime::RunResult async = sim::run(r).runs.at(0);
  const runtime::CheckpointRecord& c = async.checkpoints;
  EXPECT_EQ(c.saves, 3);
  EXPECT_NEAR(c.write_s, sync.checkpoints.write_s, 1e-9 * c.write_s);
  // The steps wait for each copy, and at the end for the last save's serialisation and write.
  const double last = (c.serialise_s + c.write_s) / 3;
  EXPECT_NEAR(c.wait_s, c.d2h_s + last, 1e-6 * c.wait_s);
  EXPECT_LT(async.sim_time_s, sync.sim_time_s - 1.5 * last);
}

TEST(Checkpoints, WithoutTheFlagsTheReportHasNoneOfTheirKeys) {
  sim::RunRequest r = resnet_saving(8);
  r.checkpoint_every.reset();
  const nlohmann::ordered_json run = sim::run(r).report()["runs"][0];
  EXPECT_FALSE(run["breakdown_s"].contains("checkpoint"));
  EXPECT_FALSE(run["time_to_train_s"].contains("checkpoint"));
  EXPECT_FALSE(run.contains("checkpoint"));
  EXPECT_FALSE(run.contains("faults"));
}

/// A day-long job on a cluster failing every hour: a dozen failures or so.
FaultInputs hourly() {
  FaultInputs in;
  in.mtbf_s = 3600;
  in.restart_s = 300;
  in.first_restart_s = 180;
  in.init_s = 60;
  in.step_s = 1.0;
  in.steps = 20'000;
  in.checkpoint_s = 30;
  return in;
}

TEST(Faults, TheDrawsAgreeWithTheClosedForm) {
  for (const std::int64_t every : {300, 1'000, 20'000}) {
    const FaultInputs in = hourly();
    const runtime::FaultAnalysis a = runtime::analyse_faults(in, every, 4'000);
    // Without failures: the segments add up to the run.
    EXPECT_NEAR(a.failure_free_s, in.init_s + 20'000 * in.step_s + static_cast<double>(runtime::saves(in, every)) * 30,
                1e-6);
    EXPECT_GT(a.expected_s, a.failure_free_s);
    EXPECT_NEAR(a.mean_s, a.expected_s, 0.05 * a.expected_s) << every;
    EXPECT_NEAR(a.failures_mean, a.expected_failures, 0.05 * a.expected_failures + 0.05) << every;
    EXPECT_LE(a.p10_s, a.p50_s);
    EXPECT_LE(a.p50_s, a.p90_s);
  }
  // The closed form of one segment, Daly's M e^(R/M) (e^(w/M) - 1): the run's only segment is its
  // first, which a failure restarts with a relaunch (R_1), no checkpoint to load.
  FaultInputs one = hourly();
  one.init_s = 0;
  one.steps = 1000;
  const double w = 1000 * one.step_s + one.checkpoint_s;
  EXPECT_NEAR(runtime::expected_s(one, runtime::segments(one, 1000)),
              3600 * std::exp(180.0 / 3600) * std::expm1(w / 3600), 1e-9);
}

TEST(Faults, AFailureBeforeTheFirstSaveRelaunchesAndStartsOverWithNothingToLoad) {
  const FaultInputs in = hourly();
  const auto segs = runtime::segments(in, 1'000);
  ASSERT_EQ(segs.size(), 2u);  // the first 1,000 steps with the initialisation, then 19 alike
  EXPECT_DOUBLE_EQ(segs[0].length, 60 + 1'000 + 30);
  EXPECT_DOUBLE_EQ(segs[0].restart_s, 180);
  EXPECT_EQ(segs[1].count, 19);
  EXPECT_DOUBLE_EQ(segs[1].restart_s, 300);
  // The sum of Daly's segment over both kinds, each with its own restart.
  const double M = 3600;
  EXPECT_NEAR(runtime::expected_s(in, segs),
              M * std::exp(180 / M) * std::expm1(1'090 / M) + 19 * M * std::exp(300 / M) * std::expm1(1'030 / M), 1e-9);
  // A dearer restart from a checkpoint costs more; the first segment's is not the checkpoint's.
  FaultInputs dearer = in;
  dearer.restart_s = 600;
  EXPECT_GT(runtime::expected_s(dearer, runtime::segments(dearer, 1'000)), runtime::expected_s(in, segs));
  FaultInputs first_dearer = in;
  first_dearer.first_restart_s = 600;
  EXPECT_NEAR(runtime::expected_s(first_dearer, runtime::segments(first_dearer, 1'000)) - runtime::expected_s(in, segs),
              M * (std::exp(600 / M) - std::exp(180 / M)) * std::expm1(1'090 / M), 1e-6);
  // The draws follow it: with a failure every 600 s and the whole run one segment of 1,090 s, a
  // dearer first restart shows in the mean.
  FaultInputs often = in;
  often.mtbf_s = 600;
  often.steps = 1'000;
  FaultInputs often_dearer = often;
  often_dearer.first_restart_s = 300;
  const runtime::FaultAnalysis a = runtime::analyse_faults(often, 2'000, 2'000);
  const runtime::FaultAnalysis b = runtime::analyse_faults(often_dearer, 2'000, 2'000);
  EXPECT_NEAR(a.mean_s, a.expected_s, 0.05 * a.expected_s);
  EXPECT_NEAR(b.mean_s, b.expected_s, 0.05 * b.expected_s);
  EXPECT_GT(b.expected_s, a.expected_s);
}

TEST(Faults, TheBestIntervalLiesNearYoungDalys) {
  FaultInputs in;
  in.mtbf_s = 36'000;  // a cluster failing every ten hours
  in.restart_s = 600;
  in.init_s = 60;
  in.step_s = 1.0;
  in.steps = 1'000'000;  // beyond the exhaustive search: the grid and its refinement
  in.checkpoint_s = 10;
  const runtime::BestInterval best = runtime::best_interval(in);
  const double young = runtime::young_daly_interval_s(in.checkpoint_s, in.mtbf_s);  // 848.5 s
  EXPECT_NEAR(static_cast<double>(best.every) * in.step_s, young, 0.1 * young);
  // Nothing on either side does better.
  for (const std::int64_t every : {best.every - 1, best.every + 1, best.every / 2, best.every * 2})
    EXPECT_GE(runtime::expected_s(in, runtime::segments(in, every)), best.expected_s) << every;
  // The exhaustive search over a shorter run finds the same neighbourhood.
  in.steps = 100'000;
  EXPECT_NEAR(static_cast<double>(runtime::best_interval(in).every), young, 0.1 * young);
  // Under loop sink saves fall on sinks' ends: the best is a whole number of sinks.
  in.granule = 64;
  EXPECT_EQ(runtime::best_interval(in).every % 64, 0);
}

TEST(Faults, TheSameSeedGivesTheSameFiguresBitForBit) {
  const FaultInputs in = hourly();
  const auto segs = runtime::segments(in, 500);
  std::int64_t f1 = 0, f2 = 0, f3 = 0;
  const double a = runtime::draw_s(in, segs, 7, f1), b = runtime::draw_s(in, segs, 7, f2),
               c = runtime::draw_s(in, segs, 8, f3);
  EXPECT_EQ(std::memcmp(&a, &b, sizeof a), 0);
  EXPECT_EQ(f1, f2);
  EXPECT_NE(a, c);
  // A whole run with failures, twice: the same report.
  sim::RunRequest r = resnet_saving(8);
  r.device_mtbf_hours = 1.0;
  r.fault_seeds = 50;
  const nlohmann::ordered_json one = sim::run(r).report()["runs"][0]["faults"];
  const nlohmann::ordered_json two = sim::run(r).report()["runs"][0]["faults"];
  EXPECT_EQ(one.dump(), two.dump());
  EXPECT_EQ(one["draws"]["seeds"], 50);
}

TEST(Faults, TheRunsTimeLineIsTheModelsWithoutFailures) {
  sim::RunRequest r = resnet_saving(8);
  r.device_mtbf_hours = 1000.0;
  const runtime::RunResult run = sim::run(r).runs.at(0);
  ASSERT_TRUE(run.faults_analysed());
  const runtime::FaultAnalysis& a = run.faults;
  EXPECT_NEAR(a.failure_free_s, run.sim_time_s, 1e-9 * run.sim_time_s);
  EXPECT_EQ(a.every, 10);
  EXPECT_EQ(a.inputs.granule, 5);  // a sink: the callback's step_end
  EXPECT_DOUBLE_EQ(a.inputs.mtbf_s, 1000.0 * 3600 / 8);
  EXPECT_NEAR(a.inputs.restart_s, a.relaunch_s + a.inputs.init_s + a.load_s, 1e-9);
  EXPECT_DOUBLE_EQ(a.inputs.first_restart_s, a.relaunch_s);  // before the first save: nothing to load
  EXPECT_GT(a.load_s, 0);
  EXPECT_DOUBLE_EQ(run.time_to_train().expected_with_failures, a.expected_s);
  EXPECT_GT(a.expected_s, run.sim_time_s);
}

TEST(Faults, APipelinesRestartWaitsForItsFullestStagesCheckpoint) {
  // LLaMA's last stage holds the final norm beside the output layer, the first the embedding of
  // the same size: the last stage's save is the larger, by the norm's weight and its state.
  sim::RunRequest r;
  r.config = test::config_request();
  r.workload = "llama-7b";
  r.recipe.layers = 4;
  r.recipe.hidden = 1024;
  r.strategies = {runtime::Strategy::LoopSink};
  r.devices = 2;
  r.pipeline_stages = 2;
  r.micro_batches = 2;
  r.batch_size = 2;
  r.steps_per_epoch = 4;
  r.checkpoint_every = 2;
  r.device_mtbf_hours = 100;
  const sim::RunOutcome out = sim::run(r);
  ASSERT_FALSE(out.failed()) << out.failure_message();
  const runtime::RunResult& run = out.runs.at(0);
  const runtime::CheckpointRecord& c = run.checkpoints;
  EXPECT_GT(c.largest_bytes, c.bytes);                   // rank 0, the first stage, saves less
  EXPECT_LT(c.largest_bytes - c.bytes, c.bytes / 1000);  // by a norm's weight and state
  // The restart's load is the largest rank's: read, parsed and copied to its device.
  const sim::SystemConfig cfg = sim::load_config(r.config);
  const double b = static_cast<double>(c.largest_bytes), k = static_cast<double>(c.writers);
  const double per_switch = std::min(static_cast<double>(cfg.link.pcie_switch_devices), k);
  const double h2d = std::min(cfg.link.h2d_bandwidth_gbps, cfg.link.pcie_uplink_gbps / std::max(1.0, per_switch));
  EXPECT_NEAR(run.faults.load_s,
              cfg.host.checkpoint_read_s(b, k) + cfg.host.checkpoint_serialise_s(b) + b / (h2d * 1e9),
              1e-12 * run.faults.load_s);
  EXPECT_EQ(out.report()["runs"][0]["checkpoint"]["largest_rank_bytes"], c.largest_bytes);
  // One rank alone: its own save is the largest.
  const runtime::RunResult one = sim::run(resnet_saving(8)).runs.at(0);
  EXPECT_EQ(one.checkpoints.largest_bytes, one.checkpoints.bytes);
}

TEST(Faults, HostileRequestsNameTheirKey) {
  auto key_of = [](const sim::RunRequest& r) {
    try {
      (void)sim::run(r);
    } catch (const sim::InputError& e) {
      return e.key();
    }
    return std::string("(ran)");
  };
  sim::RunRequest r = resnet_saving(8);
  r.checkpoint_every = 0;
  EXPECT_EQ(key_of(r), "checkpoint_every");
  r = resnet_saving(8);
  for (const double h : {0.0, -1.0, std::nan(""), 9.2e18, HUGE_VAL}) {
    r.device_mtbf_hours = h;
    EXPECT_EQ(key_of(r), "device_mtbf_hours") << h;
  }
  r.device_mtbf_hours = 1e-6;  // a failure every few milliseconds: more failures than draws can take
  EXPECT_EQ(key_of(r), "device_mtbf_hours");
  r.device_mtbf_hours = 10;
  r.fault_seeds = 0;
  EXPECT_EQ(key_of(r), "fault_seeds");
  r = resnet_saving(8);
  r.checkpoint_every.reset();
  r.device_mtbf_hours = 10;
  EXPECT_EQ(key_of(r), "device_mtbf_hours");  // a restart needs a checkpoint's cost
}

}  // namespace
}  // namespace ascendsim
