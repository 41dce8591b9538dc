// The host runtime against a fake device through the host interface only: the executor never
// sees the device's implementation, so any DeviceIf drives it. The fake runs every task in a
// fixed time, so each strategy's step time is a closed formula of the host and link costs.
#include <functional>

#include <gtest/gtest.h>

#include "hostif/host_interface.h"
#include "runtime/data_pipeline.h"
#include "runtime/executor.h"
#include "runtime/graph_compiler.h"
#include "sim/core/time.h"
#include "workloads/workload.h"

namespace ascendsim {
namespace {

using hostif::Task;
using hostif::TaskList;

/// Runs each submission's tasks back to back, `tau` per task, in arrival order; fails the run at
/// step `fail_at` if set.
class FakeDevice : public sc_core::sc_module, public hostif::DeviceIf {
 public:
  SC_HAS_PROCESS(FakeDevice);
  FakeDevice(sc_core::sc_module_name n, sc_core::sc_time tau) : sc_module(n), host("host"), m_tau(tau) {
    SC_THREAD(run);
  }
  sc_core::sc_port<hostif::DeviceEventsIf> host;
  std::int64_t fail_at = -1;

  void submit_task(const Task&, const sc_core::sc_time& arrival, bool ends_step) override {
    m_queue.push_back({arrival, 1, 1, ends_step});
    ++m_submitted;
    m_arrived.notify(sc_core::SC_ZERO_TIME);
  }
  void submit_graph(const TaskList& g, std::int64_t iterations, bool, const sc_core::sc_time& arrival) override {
    m_queue.push_back({arrival, static_cast<std::int64_t>(g.size()), iterations, true});
    ++m_submitted;
    m_arrived.notify(sc_core::SC_ZERO_TIME);
  }
  std::uint64_t submitted() const override { return m_submitted; }
  std::uint64_t completed() const override { return m_completed; }
  const sc_core::sc_event& drained_event() const override { return m_drained; }
  std::int64_t graph_image_bytes(const TaskList& g) const override { return static_cast<std::int64_t>(g.size()) * 100; }

 private:
  struct Sub {
    sc_core::sc_time arrival;
    std::int64_t tasks, iterations;
    bool ends_step;
  };
  void run() {
    for (;;) {
      while (m_queue.empty()) wait(m_arrived);
      const Sub s = m_queue.front();
      m_queue.pop_front();
      if (s.arrival > sc_core::sc_time_stamp()) wait(s.arrival - sc_core::sc_time_stamp());
      for (std::int64_t i = 0; i < s.iterations; ++i) {
        wait(m_tau * static_cast<double>(s.tasks));
        if (!s.ends_step) continue;
        if (++m_steps == fail_at) {
          host->device_failed("fake device failed");
          return;
        }
        host->step_ended({sc_core::sc_time_stamp(), sc_core::sc_time_stamp(), sc_core::sc_time_stamp()});
      }
      if (++m_completed == m_submitted) m_drained.notify(sc_core::SC_ZERO_TIME);
    }
  }
  sc_core::sc_time m_tau;
  std::deque<Sub> m_queue;
  sc_core::sc_event m_arrived, m_drained;
  std::uint64_t m_submitted = 0, m_completed = 0;
  std::int64_t m_steps = 0;
};

struct Rig {
  runtime::HostConfig host;
  runtime::PipelineConfig pipe;
  hostif::LinkConfig link;
  hostif::QueueConfig queue;
  workloads::Workload w = workloads::make_workload("lenet5", 32);
  runtime::CompiledGraph graph;
  runtime::Session session;
  sim::BreakdownAccountant account;
  std::unique_ptr<hostif::HostInterface> hif;
  std::unique_ptr<FakeDevice> device;
  std::unique_ptr<runtime::DataPipeline> pipeline;
  std::unique_ptr<runtime::Executor> executor;
  std::int64_t second_subscriber_steps = 0;
  std::string second_subscriber_failure;

  /// `configure` sets the host, pipeline and graph before anything is built from them.
  Rig(runtime::Strategy s, std::int64_t steps, const std::function<void(Rig&)>& configure = {}) {
    Task t;
    t.name = "op";
    for (int i = 0; i < 5; ++i) graph.step_tasks.push_back(t);
    graph.sink_tasks = graph.step_tasks;
    graph.input_bytes = {1000, 100};
    graph.batch_bytes = 1100;
    session.strategy = s;
    session.epochs = 1;
    session.steps_per_epoch = steps;
    if (configure) configure(*this);
    hif = std::make_unique<hostif::HostInterface>("hostif", link, queue);
    device = std::make_unique<FakeDevice>("fake", sim::us(2));
    pipeline = std::make_unique<runtime::DataPipeline>("pipeline", host, pipe, w.data, steps, 32, steps);
    // connect
    hif->device(*device);
    device->host(*hif);
    executor = runtime::make_executor("host", host, session, graph, 32, *hif, *pipeline, account);
    hif->on_step_end([this](const hostif::StepMarks&) { ++second_subscriber_steps; });
    hif->on_failure([this](const std::string& r) { second_subscriber_failure = r; });
  }
};

TEST(ExecutorOnFakeDevice, GraphSinkStepIsTheHostLoopAroundTheDeviceTime) {
  Rig rig(runtime::Strategy::GraphSink, 6);
  rig.executor->keep_each_step(true);
  sc_core::sc_start();
  const runtime::RunResult r = rig.executor->result();
  ASSERT_EQ(r.steps_completed, 6);
  EXPECT_EQ(rig.second_subscriber_steps, 6);  // every subscriber hears every step end
  EXPECT_EQ(r.interactions.graph_launches, 6);
  EXPECT_EQ(r.interactions.host_syncs, 6);
  // A steady step: graph launch, doorbell, 5 tasks of 2 us, completion notice, wake-up, the loss
  // copy (memcpy call, DMA setup, 4 bytes, link latency), framework step work.
  const auto& h = rig.host;
  const auto& l = rig.link;
  const sc_core::sc_time expected = sim::us(h.graph_launch_us) + sim::ns(l.doorbell_ns) + sim::us(10) +
                                    sim::ns(l.completion_ns) + sim::us(h.sync_wakeup_us) + sim::us(h.memcpy_setup_us) +
                                    sim::ns(l.dma_setup_ns) + sim::transfer_time(4, l.d2h_bandwidth_gbps) +
                                    sim::ns(l.latency_ns) + sim::us(h.step_overhead_us);
  for (std::size_t i = 1; i + 1 < r.steps.step_s.size(); ++i)
    EXPECT_DOUBLE_EQ(r.steps.step_s[i], expected.to_seconds());
  // The graph load moved the fake device's image size.
  EXPECT_EQ(rig.hif->h2d.stats().to_json()["bytes"].get<double>(), 5 * 100 + 6 * 1100);
}

TEST(ExecutorOnFakeDevice, NonSinkLaunchesEachOpAndWaitsOnce) {
  Rig rig(runtime::Strategy::NonSink, 4);
  sc_core::sc_start();
  const runtime::RunResult r = rig.executor->result();
  ASSERT_EQ(r.steps_completed, 4);
  EXPECT_EQ(r.interactions.op_launches, 4 * 5);
  EXPECT_EQ(rig.hif->stats().to_json()["doorbells"].get<double>(), 4 * 5);
  EXPECT_EQ(rig.hif->stats().to_json()["completions"].get<double>(), 4);  // one notice per sync
}

TEST(ExecutorOnFakeDevice, ThePipelinesFirstFillIsSetUpItsLaterWaitsHostData) {
  // One map worker per call, each op 100 us a sample, makes the pipeline slower than the fake
  // device: the host waits for every batch. The wait for the first is the pipeline's fill, set-up; the later ones
  // host_data.
  const auto setup = static_cast<std::size_t>(sim::Phase::Setup);
  const auto host_data = static_cast<std::size_t>(sim::Phase::HostData);
  runtime::RunResult warm;
  {
    Rig rig(runtime::Strategy::NonSink, 6, [](Rig& g) {
      g.pipe.num_parallel_workers = 1;
      g.host.map_op_overhead_us = 100;
    });
    sc_core::sc_start();
    warm = rig.executor->result();
  }
  ASSERT_EQ(warm.steps_completed, 6);
  EXPECT_GE(warm.breakdown_s[setup], 32 * 100e-6);  // at least one map op's work on the first batch
  EXPECT_GT(warm.breakdown_s[host_data], 0);
  EXPECT_EQ(warm.interactions.kernels_compiled, 0);
  EXPECT_DOUBLE_EQ(warm.time_to_train().initialisation, warm.breakdown_s[setup]);
  // Without sink there is no channel or graph to set up: the set-up is the first fill alone.
  EXPECT_DOUBLE_EQ(warm.first_fill_s, warm.breakdown_s[setup]);
}

TEST(ExecutorOnFakeDevice, AColdKernelCacheCompilesEachDistinctKernelOnce) {
  Rig rig(runtime::Strategy::NonSink, 6, [](Rig& g) {
    g.pipe.num_parallel_workers = 1;
    g.host.kernel_cache = "cold";
    g.host.kernel_compile_s = 0.25;
    // Five ops, two kernels: three Adds of one size and two of another.
    for (std::int64_t elements : {100, 100, 200, 100, 200}) {
      aicore::OpDesc d;
      d.kind = aicore::OpKind::Add;
      d.elements = elements;
      g.graph.descs.push_back(d);
    }
  });
  EXPECT_EQ(runtime::kernels_to_compile(rig.graph), 2);
  EXPECT_EQ(runtime::kernels_to_compile(rig.graph, &rig.graph), 0);  // a graph of the same kernels adds none
  rig.executor->keep_each_step(true);
  sc_core::sc_start();
  const runtime::RunResult r = rig.executor->result();
  ASSERT_EQ(r.steps_completed, 6);
  EXPECT_EQ(r.interactions.kernels_compiled, 2);
  // The pipeline filled while the kernels compiled: the first batch was waiting, so the set-up is
  // the compilation alone, to the picosecond.
  EXPECT_EQ(sim::seconds(r.breakdown_s[static_cast<std::size_t>(sim::Phase::Setup)]), sim::seconds(2 * 0.25));
  EXPECT_EQ(r.first_fill_s, 0);
  // The compilation is no step's: the steps add up to the run without it.
  double steps = 0;
  for (double s : r.steps.step_s) steps += s;
  EXPECT_NEAR(steps, r.sim_time_s - 0.5, 1e-9);
}

TEST(ExecutorOnFakeDevice, AFailureReachesEverySubscriberAndEndsTheRun) {
  Rig rig(runtime::Strategy::GraphSink, 10);
  rig.device->fail_at = 3;
  sc_core::sc_start();
  const runtime::RunResult r = rig.executor->result();
  EXPECT_EQ(r.steps_completed, 2);
  EXPECT_EQ(r.failure, "fake device failed");
  EXPECT_EQ(rig.second_subscriber_failure, "fake device failed");
  EXPECT_TRUE(rig.executor->finished());
}

TEST(ExecutorOnFakeDevice, AnUnboundDeviceFailsAtElaboration) {
  runtime::HostConfig host;
  hostif::LinkConfig link;
  hostif::QueueConfig queue;
  hostif::HostInterface hif("lonely", link, queue);
  sc_core::sc_report_handler::set_actions(sc_core::SC_ERROR, sc_core::SC_THROW);
  try {
    sc_core::sc_start();
    FAIL() << "the simulation started with an unbound port";
  } catch (const sc_core::sc_report& e) {
    EXPECT_NE(std::string(e.what()).find("lonely.device"), std::string::npos) << e.what();
    EXPECT_EQ(sc_core::sc_time_stamp(), sc_core::SC_ZERO_TIME);
  }
}

}  // namespace
}  // namespace ascendsim
