// SystemC tests of the data pipeline feeding the device: all runs of a test share one simulation.
#include <algorithm>
#include <cstdlib>
#include <map>

#include <gmock/gmock.h>

#include <gtest/gtest.h>

#include "sim/config.h"
#include "sim/simulation.h"
#include "tests/test_support.h"
#include "workloads/workload.h"

namespace ascendsim {
namespace {

using runtime::RunResult;
using runtime::Strategy;

struct Spec {
  Strategy strategy;
  std::int64_t epochs, steps;
  std::vector<std::string> sets;
  std::string workload = "lenet5";
};

class PipelineTest : public ::testing::Test {
 protected:
  std::vector<RunResult> run(const std::vector<Spec>& specs) {
    sim::Simulation simulation;
    for (const auto& s : specs) {
      sim::ConfigRequest req = test::config_request();
      req.sets = s.sets;
      runtime::Session session;
      session.strategy = s.strategy;
      session.epochs = s.epochs;
      session.steps_per_epoch = s.steps;
      simulation.add(sim::load_config(req), workloads::make_workload(s.workload, 32), session);
    }
    simulation.keep_each_step(true);
    simulation.run();
    std::vector<RunResult> out;
    for (std::size_t i = 0; i < specs.size(); ++i) out.push_back(simulation.result(i));
    return out;
  }
};

TEST_F(PipelineTest, ThroughputGrowsWithWorkersUntilTheHostCoresSaturate) {
  // Heavy normalisation makes its map() call the pipeline's bottleneck; the host has 4 cores,
  // shared by that call's workers and the other stages' one thread each.
  std::vector<Spec> specs;
  for (int workers : {1, 2, 4, 8, 16})
    specs.push_back({Strategy::LoopSink,
                     1,
                     120,
                     {"host.normalize_ns_per_value=200", "host.cpu_cores=4",
                      "pipeline.map_workers=1,1,1," + std::to_string(workers) + ",1"}});
  const auto r = run(specs);
  std::vector<double> rate;
  for (const auto& x : r) {
    ASSERT_TRUE(x.failure.empty());
    rate.push_back(static_cast<double>(x.steps_completed) / x.sim_time_s);
    EXPECT_TRUE(x.data["data_bound"].get<bool>());
  }
  EXPECT_GT(rate[1], 1.6 * rate[0]);              // 1 -> 2 workers
  EXPECT_GT(rate[2], 1.6 * rate[1]);              // 2 -> 4 workers
  EXPECT_NEAR(rate[3], rate[2], 0.05 * rate[2]);  // 8 workers on 4 cores: no faster
  EXPECT_NEAR(rate[4], rate[2], 0.05 * rate[2]);
  EXPECT_GT(r[4].stats["pipeline"]["core_wait_s"].get<double>(), 0);
}

TEST_F(PipelineTest, CacheMakesLaterEpochsFasterWhenTheReaderDominates) {
  const std::vector<std::string> slow_reader = {"host.read_ns_per_byte=200"};
  std::vector<std::string> cached = slow_reader;
  cached.push_back("pipeline.cache=source");
  std::vector<std::string> map_cached = slow_reader;
  map_cached.push_back("pipeline.cache=map");
  const auto r = run({{Strategy::LoopSink, 3, 60, slow_reader},
                      {Strategy::LoopSink, 3, 60, cached},
                      {Strategy::LoopSink, 3, 60, map_cached}});
  const auto plain = r[0].epoch_s(), source = r[1].epoch_s(), map = r[2].epoch_s();
  ASSERT_EQ(plain.size(), 3u);
  ASSERT_EQ(source.size(), 3u);
  // Without a cache every epoch reads the files again.
  EXPECT_NEAR(plain[1], plain[0], 0.05 * plain[0]);
  EXPECT_NEAR(plain[2], plain[1], 0.01 * plain[1]);
  // The first cached epoch also writes the cache; later ones read memory.
  EXPECT_GT(source[0], plain[0]);
  EXPECT_LT(source[1], 0.2 * source[0]);
  EXPECT_LT(source[2], 0.2 * source[0]);
  EXPECT_LT(map[1], 0.2 * map[0]);
  EXPECT_LT(r[1].sim_time_s, r[0].sim_time_s);
}

TEST_F(PipelineTest, ShuffleBufferDelaysTheFirstBatch) {
  // A 2.5 ms read per batch: filling a 640-row buffer (20 batches) takes about 50 ms.
  const auto r = run({{Strategy::DataSink, 1, 30, {"host.read_ns_per_byte=100"}},
                      {Strategy::DataSink, 1, 30, {"host.read_ns_per_byte=100", "pipeline.shuffle_buffer=640"}}});
  EXPECT_GT(r[1].steps.step_s.front(), r[0].steps.step_s.front() + 0.04);
  EXPECT_EQ(r[0].steps_completed, r[1].steps_completed);
}

TEST_F(PipelineTest, AShuffleBufferLargerThanTheEpochHoldsTheEpochOnly) {
  // 10 batches of 32 per epoch: a buffer of 320 rows and one of 100,000 both hold the whole epoch
  // (its end flushes the buffer), so the first batch waits for the same 10 batches' reads; a
  // buffer of 160 rows, for 5 of them.
  const std::vector<std::string> slow = {"host.read_ns_per_byte=100"};
  auto with = [&](const std::string& rows) {
    auto sets = slow;
    sets.push_back("pipeline.shuffle_buffer=" + rows);
    return sets;
  };
  const auto r = run({{Strategy::DataSink, 2, 10, with("320")},
                      {Strategy::DataSink, 2, 10, with("100000")},
                      {Strategy::DataSink, 2, 10, with("160")},
                      {Strategy::DataSink, 2, 10, with("0")}});
  EXPECT_DOUBLE_EQ(r[1].steps.step_s.front(), r[0].steps.step_s.front());
  const double five = r[2].steps.step_s.front() - r[3].steps.step_s.front(),
               ten = r[0].steps.step_s.front() - r[3].steps.step_s.front();
  EXPECT_GT(five, 0);
  EXPECT_NEAR(ten, 2 * five, 0.1 * ten);
}

TEST_F(PipelineTest, ResNet50DataBoundWithOneWorkerNotWithTwelve) {
  const auto r = run({{Strategy::LoopSink, 1, 50, {"pipeline.num_parallel_workers=1"}, "resnet50"},
                      {Strategy::LoopSink, 1, 50, {"pipeline.num_parallel_workers=12"}, "resnet50"}});
  EXPECT_TRUE(r[0].data["data_bound"].get<bool>()) << r[0].data["verdict"];
  EXPECT_GT(r[0].breakdown_s[static_cast<std::size_t>(sim::Phase::WaitData)], 0.3 * r[0].sim_time_s);
  EXPECT_NE(r[0].data["advice"].get<std::string>().find("--num-parallel-workers"), std::string::npos);
  EXPECT_FALSE(r[1].data["data_bound"].get<bool>()) << r[1].data["verdict"];
  EXPECT_LT(r[1].sim_time_s, r[0].sim_time_s);
  // Queue depth over time is reported and never above the capacity.
  for (const auto& x : r) {
    ASSERT_FALSE(x.data["queue_depth_over_time"].empty());
    for (const auto& p : x.data["queue_depth_over_time"]) EXPECT_LE(p[1].get<std::int64_t>(), 16);
  }
}

TEST_F(PipelineTest, SmallQueueStaysWithinCapacityAndConservesBytes) {
  const auto r = run({{Strategy::DataSink, 1, 80, {"queue.capacity=2"}}});
  const auto& q = r[0].stats["chip"]["hostif"]["queue"];
  EXPECT_LE(q["max_depth"].get<double>(), 2);
  EXPECT_EQ(q["bytes_pushed"].get<double>(), q["bytes_popped"].get<double>());
  EXPECT_GT(q["full_wait_s"].get<double>(), 0);  // a fast pipeline waits for the small queue
}

// ---- the execution tree ----------------------------------------------------------------------

// LeNet-5's seed pipeline (one worker per map call) with a slow resize: the pipeline bounds the run.
const std::vector<std::string> kSlowResize = {"pipeline.num_parallel_workers=1", "host.resize_ns_per_value=50"};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

TEST_F(PipelineTest, TheTreeIsTheScriptsOpsEachOnItsOwnWorkers) {
  std::vector<std::string> seed = {"pipeline.num_parallel_workers=1", "pipeline.shuffle_buffer=10000"};
  const auto r = run({{Strategy::LoopSink, 1, 400, seed}, {Strategy::LoopSink, 1, 20, {}, "resnet50"}});
  // Seed 000's create_dataset: the source, five map() calls of one worker each (the label's cast
  // first), the shuffle buffer, the batch op; then the device-queue op (the dataset channel).
  std::vector<std::string> names;
  for (const auto& st : r[0].data["tree"]) {
    names.push_back(st["stage"]);
    if (st["kind"] == "map") {
      EXPECT_EQ(st["workers"].get<std::int64_t>(), 1) << st;
    }
    EXPECT_EQ(st["batches"].get<std::int64_t>(), 400) << st;
    EXPECT_GE(st["busy_fraction"].get<double>(), 0.0);
    EXPECT_LE(st["busy_fraction"].get<double>(), 1.0);
  }
  EXPECT_EQ(names, (std::vector<std::string>{"MnistDataset", "Map(TypeCast)", "Map(Resize)", "Map(Rescale)",
                                             "Map(Normalize)", "Map(HWC2CHW)", "Shuffle", "Batch", "DeviceQueue"}));
  // The stage that bounds it is named in the verdict and marked once in the tree: the busiest.
  int marked = 0;
  double top = 0;
  std::string busiest;
  for (const auto& st : r[0].data["tree"]) {
    marked += st["bounds_pipeline"].get<bool>() ? 1 : 0;
    if (st["busy_fraction"].get<double>() > top) top = st["busy_fraction"], busiest = st["stage"];
  }
  EXPECT_EQ(marked, 1);
  EXPECT_EQ(r[0].data["bounding_stage"], busiest);
  EXPECT_THAT(r[0].data["verdict"].get<std::string>(), ::testing::HasSubstr("bounded by " + busiest));
  // The model zoo's ResNet script: the image's operations in one map() call, the label's cast in
  // another, each with num_parallel_workers.
  names.clear();
  for (const auto& st : r[1].data["tree"]) names.push_back(st["stage"]);
  EXPECT_EQ(names, (std::vector<std::string>{"ImageFolderDataset",
                                             "Map(RandomCropDecodeResize,RandomHorizontalFlip,Normalize,HWC2CHW)",
                                             "Map(TypeCast)", "Batch", "DeviceQueue"}));
}

TEST_F(PipelineTest, SteadyStateRateIsTheSlowestStagesRate) {
  // Map(Resize) takes 32 rows x (1024 values x 50 ns + 1 us op overhead + 2 us hand-off) per batch
  // on its one worker; every other stage takes far less. In steady state one batch leaves per
  // Map(Resize) batch time: the median step equals it within 2%.
  const auto r = run({{Strategy::LoopSink, 1, 300, kSlowResize}});
  const double resize_batch_s = 32 * (1024 * 50e-9 + 1e-6 + 2e-6);
  EXPECT_NEAR(median(r[0].steps.step_s), resize_batch_s, 0.02 * resize_batch_s);
  EXPECT_EQ(r[0].data["bounding_stage"], "Map(Resize)");
  EXPECT_NEAR(r[0].data["pipeline_batches_per_s"].get<double>(), 1 / resize_batch_s, 1e-6 / resize_batch_s);
  // The stage before the bottleneck fills its connector; the ones after it find theirs empty
  // (MindSpore's profiler reads a bottleneck off its queues the same way).
  std::map<std::string, double> usage, busy;
  for (const auto& st : r[0].data["tree"])
    if (!st["queue_usage"].is_null()) usage[st["stage"]] = st["queue_usage"], busy[st["stage"]] = st["busy_fraction"];
  EXPECT_GT(usage["Map(TypeCast)"], 0.9);
  EXPECT_LT(usage["Map(Resize)"], 0.1);
  EXPECT_LT(usage["Map(Rescale)"], 0.1);
  EXPECT_GT(busy["Map(Resize)"], 0.9);
  EXPECT_LT(busy["Map(Rescale)"], 0.5);
}

TEST_F(PipelineTest, EveryStageAfterTheSourcePaysOneHandOffPerRow) {
  // LeNet-5's tree: five map calls and the batch op receive every row: 6 hand-offs per row. Each
  // microsecond more per hand-off adds 32 us per batch to the bottleneck, Map(Resize).
  std::vector<std::string> dearer = kSlowResize;
  dearer.push_back("host.row_handoff_us=12");
  // With the shuffle buffer a seventh stage receives them.
  std::vector<std::string> shuffled = kSlowResize;
  shuffled.push_back("pipeline.shuffle_buffer=64");
  const auto r = run({{Strategy::LoopSink, 1, 200, kSlowResize},
                      {Strategy::LoopSink, 1, 200, dearer},
                      {Strategy::LoopSink, 1, 200, shuffled}});
  EXPECT_EQ(r[0].stats["pipeline"]["row_handoffs"].get<double>(), 200.0 * 32 * 6);
  EXPECT_EQ(r[1].stats["pipeline"]["row_handoffs"].get<double>(), 200.0 * 32 * 6);
  EXPECT_EQ(r[2].stats["pipeline"]["row_handoffs"].get<double>(), 200.0 * 32 * 7);
  EXPECT_NEAR(median(r[1].steps.step_s) - median(r[0].steps.step_s), 32 * 10e-6, 0.02 * 32 * 10e-6);
}

TEST_F(PipelineTest, MoreWorkersOnTheBottleneckMoveItToTheNextStage) {
  // Resize at 54.2 us per row and normalise at 23.5 us: with four workers on the resize call its
  // 13.5 us per row is no longer the slowest; the normalise call is, and the rate becomes its.
  std::vector<std::string> base = kSlowResize;
  base.push_back("host.normalize_ns_per_value=20");
  std::vector<std::string> wider = base;
  wider.push_back("pipeline.map_workers=1,4,1,1,1");
  const auto r = run({{Strategy::LoopSink, 1, 300, base}, {Strategy::LoopSink, 1, 300, wider}});
  EXPECT_EQ(r[0].data["bounding_stage"], "Map(Resize)");
  EXPECT_EQ(r[1].data["bounding_stage"], "Map(Normalize)");
  const double normalize_batch_s = 32 * (1024 * 20e-9 + 1e-6 + 2e-6);
  EXPECT_NEAR(median(r[1].steps.step_s), normalize_batch_s, 0.02 * normalize_batch_s);
  EXPECT_LT(r[1].sim_time_s, r[0].sim_time_s);
  for (const auto& st : r[1].data["tree"]) {
    if (st["stage"] == "Map(Resize)") {
      EXPECT_EQ(st["workers"].get<std::int64_t>(), 4);
    }
  }
  EXPECT_THAT(r[0].data["advice"].get<std::string>(), ::testing::HasSubstr("raise the workers of Map(Resize)"));
}

TEST_F(PipelineTest, TheDeviceQueueOpsPushOfEachBatchCanBoundTheRun) {
  // The device-queue op's host work per batch: a push of 2 ms (far beyond LeNet-5's device step)
  // and a copy per byte, on its one thread before the batch's DMA. Each step then takes one push,
  // one copy and one DMA: doubling the per-byte cost adds the batch's bytes once more per step.
  const auto bytes = static_cast<double>(workloads::make_workload("lenet5", 32).batch_bytes());
  const std::vector<std::string> push = {"host.device_queue_push_us=2000", "host.device_queue_ns_per_byte=100"};
  std::vector<std::string> dearer = push;
  dearer.back() = "host.device_queue_ns_per_byte=200";
  const auto r = run({{Strategy::LoopSink, 1, 100, push},
                      {Strategy::LoopSink, 1, 100, dearer},
                      {Strategy::NonSink, 1, 100, push}});
  const double host_s = 2e-3 + 100e-9 * bytes;
  const double dma_s = bytes / 24e9;  // the generic server's PCIe 4.0 x16 link, setup and latency aside
  EXPECT_GT(median(r[0].steps.step_s), host_s + dma_s);
  EXPECT_LT(median(r[0].steps.step_s), host_s + dma_s + 20e-6);
  EXPECT_NEAR(median(r[1].steps.step_s) - median(r[0].steps.step_s), 100e-9 * bytes, 1e-3 * 100e-9 * bytes);
  EXPECT_EQ(r[0].data["bounding_stage"], "DeviceQueue");
  EXPECT_THAT(r[0].data["advice"].get<std::string>(), ::testing::HasSubstr("device-queue op's one thread"));
  const auto& send = r[0].data["tree"].back();
  EXPECT_EQ(send["stage"], "DeviceQueue");
  EXPECT_TRUE(send["bounds_pipeline"].get<bool>());
  EXPECT_GT(send["busy_fraction"].get<double>(), 0.95);
  // Non-sink has no device-queue op (the training thread copies each batch): the push is not paid
  // and the verdict does not name it.
  EXPECT_LT(median(r[2].steps.step_s), 2e-3);
  EXPECT_NE(r[2].data["bounding_stage"], "DeviceQueue");
}

}  // namespace
}  // namespace ascendsim
