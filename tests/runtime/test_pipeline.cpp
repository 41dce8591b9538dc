// SystemC tests of the data pipeline feeding the device: all runs of a test share one simulation.
#include <cstdlib>

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
  // Heavy normalisation makes the pipeline the bottleneck; the host has 4 cores.
  std::vector<Spec> specs;
  for (int workers : {1, 2, 4, 8, 16})
    specs.push_back({Strategy::LoopSink,
                     1,
                     120,
                     {"host.normalize_ns_per_value=200", "host.cpu_cores=4",
                      "pipeline.num_parallel_workers=" + std::to_string(workers)}});
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

}  // namespace
}  // namespace ascendsim
