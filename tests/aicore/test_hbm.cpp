// The chip's HBM as a shared fluid (aicore/hbm.h). SystemC tests: each runs in its own process.
#define SC_INCLUDE_DYNAMIC_PROCESSES
#include <cmath>
#include <functional>
#include <limits>
#include <sstream>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <systemc>

#include "aicore/hbm.h"
#include "sim/core/time.h"
#include "sim/core/trace.h"

namespace ascendsim::aicore {
namespace {

using sc_core::sc_time;

struct Threads : sc_core::sc_module {
  explicit Threads(sc_core::sc_module_name n, std::vector<std::function<void()>> fns) : sc_module(n) {
    for (auto& f : fns) sc_core::sc_spawn(f);
  }
};

constexpr double kGbps = 1000;  // 1 byte per ps
constexpr double kBps = kGbps * 1e9;

TEST(Hbm, WaterLevelIsMaxMinFair) {
  EXPECT_EQ(Hbm::water_level({}, 10), std::numeric_limits<double>::infinity());
  EXPECT_EQ(Hbm::water_level({2, 3}, 10), std::numeric_limits<double>::infinity());  // both met
  EXPECT_DOUBLE_EQ(Hbm::water_level({8, 8}, 10), 5);                                 // equal halves
  EXPECT_DOUBLE_EQ(Hbm::water_level({1, 8, 8}, 10), 4.5);                            // the small one met first
  EXPECT_DOUBLE_EQ(Hbm::water_level({9, 1, 2}, 10), 7);
}

TEST(Hbm, ALoneKernelTakesExactlyItsTime) {
  Hbm hbm("hbm", kGbps);
  sc_time end, lost = sim::ps(1);
  const sc_time lead = sim::ns(3), time = sim::ps(1'234'567);
  // Demanding more than the HBM gives (its excess comes from L2): still exactly its time.
  Threads t("t", {[&] {
              lost = hbm.kernel(lead, time, 5.0 * 1'234'567);
              end = sc_core::sc_time_stamp();
            }});
  sc_core::sc_start();
  EXPECT_EQ(end, lead + time);
  EXPECT_EQ(lost, sc_core::SC_ZERO_TIME);
  EXPECT_DOUBLE_EQ(hbm.bytes(), 5.0 * 1'234'567);
}

TEST(Hbm, TwoEqualKernelsStartedTogetherFinishTogetherAtHalfTheRate) {
  Hbm hbm("hbm", kGbps);
  const sc_time time = sim::us(1);
  const double bytes = kBps * 1e-6;  // the whole bandwidth for 1 us
  sc_time a, b;
  Threads t("t", {[&] {
                    hbm.kernel(sc_core::SC_ZERO_TIME, time, bytes);
                    a = sc_core::sc_time_stamp();
                  },
                  [&] {
                    hbm.kernel(sc_core::SC_ZERO_TIME, time, bytes);
                    b = sc_core::sc_time_stamp();
                  }});
  sc_core::sc_start();
  EXPECT_EQ(a, b);
  EXPECT_EQ(a, sim::us(2));
  EXPECT_NEAR(hbm.lost_s(), 2e-6, 1e-15);  // each lost 1 us
}

TEST(Hbm, ACollectiveSlowsAMemoryBoundKernelAndNotAComputeBoundOne) {
  // A collective's phase drawing 40% of the bandwidth leaves 60%: a kernel demanding 30% (compute
  // bound: its bytes take a third of its time) runs at full speed, one demanding all of it
  // (memory bound) at 60% — and what it lost is charged to the collective.
  Hbm hbm("hbm", kGbps);
  const sc_time time = sim::us(1);
  sc_time light, heavy;
  Threads t("t", {[&] {
              hbm.flow(0.4 * kBps * 10e-6, sc_core::SC_ZERO_TIME, sim::us(10), HbmSource::Collective);
              hbm.kernel(sc_core::SC_ZERO_TIME, time, 0.3 * kBps * 1e-6);
              light = sc_core::sc_time_stamp();
              hbm.kernel(sc_core::SC_ZERO_TIME, time, kBps * 1e-6);
              heavy = sc_core::sc_time_stamp() - light;
            }});
  sc_core::sc_start();
  EXPECT_EQ(light, time);
  EXPECT_LE(std::abs(heavy.to_seconds() - 1e-6 / 0.6), 2e-12) << heavy;
  EXPECT_EQ(hbm.stats().to_json()["flows_short"].get<double>(), 0);
  EXPECT_NEAR(hbm.lost_to()[static_cast<std::size_t>(HbmSource::Collective)], heavy.to_seconds() - 1e-6, 1e-15);
  EXPECT_EQ(hbm.lost_to()[static_cast<std::size_t>(HbmSource::Dma)], 0);
}

TEST(Hbm, AFlowAboveItsFairShareIsCountedShortAndKeepsItsInterval) {
  // Max-min fairness: a flow of 60% beside a kernel demanding all of it gets half, like the
  // kernel; the flow's own link sets its end, the kernel runs at half speed.
  Hbm hbm("hbm", kGbps);
  sc_time end;
  Threads t("t", {[&] {
              hbm.flow(0.6 * kBps * 10e-6, sc_core::SC_ZERO_TIME, sim::us(10), HbmSource::Dma);
              hbm.kernel(sc_core::SC_ZERO_TIME, sim::us(1), kBps * 1e-6);
              end = sc_core::sc_time_stamp();
            }});
  sc_core::sc_start();
  EXPECT_EQ(end, sim::us(2));
  EXPECT_GE(hbm.stats().to_json()["flows_short"].get<double>(), 1);
}

TEST(Hbm, AKernelSpeedsUpWhenTheFlowEnds) {
  // A full-bandwidth kernel of 2 us starts beside a flow of half the bandwidth that lasts 1 us:
  // 1 us at half speed (0.5 us of its work), then the remaining 1.5 us alone.
  Hbm hbm("hbm", kGbps);
  sc_time end;
  Threads t("t", {[&] {
              hbm.flow(0.5 * kBps * 1e-6, sc_core::SC_ZERO_TIME, sim::us(1), HbmSource::Dma);
              hbm.kernel(sc_core::SC_ZERO_TIME, sim::us(2), kBps * 2e-6);
              end = sc_core::sc_time_stamp();
            }});
  sc_core::sc_start();
  EXPECT_EQ(end, sim::ps(2'500'000));
}

TEST(Hbm, KernelEndAgreesWithARunningKernel) {
  // The planner (kernel_end) and the event-driven kernel give the same end for the same flows,
  // including a flow announced to start later.
  Hbm hbm("hbm", kGbps);
  sc_time planned, ran, left_at;
  sc_time remaining;
  Threads t("t", {[&] {
              hbm.flow(0.7 * kBps * 3e-6, sim::us(1), sim::us(3), HbmSource::Dma);
              sc_time left = sim::us(4);
              planned = hbm.kernel_end(sim::ns(100), left, sim::us(4), kBps * 4e-6);
              remaining = sim::us(4);
              left_at = hbm.kernel_end(sim::ns(100), remaining, sim::us(4), kBps * 4e-6, sim::us(2));
              hbm.kernel(sim::ns(100), sim::us(4), kBps * 4e-6);
              ran = sc_core::sc_time_stamp();
            }});
  sc_core::sc_start();
  // 0.9 us alone, 3 us at 0.5 (water level: 0.5 each as 0.7 > 0.5), then the last 1.6 us alone.
  EXPECT_EQ(planned, sim::ns(100) + sim::ns(900) + sim::us(3) + sim::ns(1600));
  EXPECT_EQ(ran, planned);
  // By 2 us: 0.9 us alone and 1 us at half speed: 1.4 us done, 2.6 us left.
  EXPECT_EQ(left_at, sim::us(2));
  EXPECT_EQ(remaining, sim::ns(2600));
}

TEST(Hbm, BytesInAnyWindowNeverExceedTheBandwidth) {
  // Three kernels and two flows overlapping in different ways: the traffic the trace samples
  // describe never exceeds the bandwidth, and each kernel's bytes are conserved.
  Hbm hbm("hbm", kGbps);
  std::vector<std::pair<sc_time, sc_time>> spans(3);
  const double bytes[3] = {kBps * 2e-6, kBps * 0.5e-6, kBps * 1e-6};
  const sc_time times[3] = {sim::us(2), sim::us(1), sim::us(1)};
  const sc_time leads[3] = {sc_core::SC_ZERO_TIME, sim::ns(500), sim::ns(1500)};
  std::vector<std::function<void()>> fns;
  for (int i = 0; i < 3; ++i)
    fns.push_back([&, i] {
      const sc_time lost = hbm.kernel(leads[i], times[i], bytes[i]);
      spans[static_cast<std::size_t>(i)] = {sc_core::sc_time_stamp() - times[i] - lost, sc_core::sc_time_stamp()};
    });
  fns.push_back([&] {
    hbm.flow(0.2 * kBps * 2e-6, sim::ns(200), sim::us(2), HbmSource::Dma);
    hbm.flow(0.1 * kBps * 1e-6, sim::us(1), sim::us(1), HbmSource::Dma);
  });
  Threads t("t", fns);
  sc_core::sc_start();
  // Total bytes over the busy span fit the bandwidth: the HBM cannot have moved more.
  sc_time first = spans[0].first, last = spans[0].second;
  for (const auto& s : spans) {
    first = std::min(first, s.first);
    last = std::max(last, s.second);
  }
  last = std::max(last, sim::ns(2200));
  // (Each fluid share is rounded to the picosecond: a few ps of slack.)
  EXPECT_LE(hbm.bytes(), kBps * (last - first + sim::ps(10)).to_seconds());
  // Every kernel moved its bytes no faster than the bandwidth allows and took at least its time.
  for (int i = 0; i < 3; ++i) {
    const auto& s = spans[static_cast<std::size_t>(i)];
    EXPECT_GE(s.second - s.first, times[i]);
    EXPECT_LE(bytes[i], kBps * (s.second - s.first + sim::ps(10)).to_seconds());
  }
  EXPECT_DOUBLE_EQ(hbm.bytes(), bytes[0] + bytes[1] + bytes[2] + 0.2 * kBps * 2e-6 + 0.1 * kBps * 1e-6);
}

TEST(Hbm, WithoutContentionEveryKernelTakesItsTime) {
  Hbm hbm("hbm", kGbps, false);
  sc_time a, b;
  Threads t("t", {[&] {
                    hbm.flow(kBps * 1e-6, sc_core::SC_ZERO_TIME, sim::us(1), HbmSource::Dma);
                    hbm.kernel(sc_core::SC_ZERO_TIME, sim::us(1), kBps * 1e-6);
                    a = sc_core::sc_time_stamp();
                  },
                  [&] {
                    hbm.kernel(sc_core::SC_ZERO_TIME, sim::us(1), kBps * 1e-6);
                    b = sc_core::sc_time_stamp();
                  }});
  sc_core::sc_start();
  EXPECT_EQ(a, sim::us(1));
  EXPECT_EQ(b, sim::us(1));
  EXPECT_EQ(hbm.lost_s(), 0);
}

}  // namespace
}  // namespace ascendsim::aicore

namespace ascendsim::aicore {
namespace {

TEST(HbmTrace, TheCounterIsEachBinsMeanTrafficAcrossIncrementalWrites) {
  // 70,000 back-to-back kernels of 1 us with demands of 100 to 700 GB/s: more than the HBM keeps
  // before it writes the bins no kernel can still add to, so the counter is written in parts.
  // Every 50 us bin holds 50 kernels; the counter must read their mean in every bin.
  std::ostringstream out;
  auto sink = sim::make_trace_sink(sim::TraceFormat::Json, out);
  sim::TraceRecorder rec(*sink, 1, "run");
  Hbm hbm("hbm", kGbps);
  hbm.set_trace(&rec);
  constexpr int kKernels = 70'000;
  auto demand = [](int i) { return 1e11 * (i % 7 + 1); };  // B/s
  Threads t("t", {[&] {
              for (int i = 0; i < kKernels; ++i) hbm.kernel(sc_core::SC_ZERO_TIME, sim::us(1), demand(i) * 1e-6);
            }});
  sc_core::sc_start();
  hbm.flush_trace();
  sink->close();
  std::vector<std::pair<double, double>> samples;  // (us, GB/s)
  const auto trace = nlohmann::json::parse(out.str());
  for (const auto& e : trace["traceEvents"])
    if (e.value("ph", "") == "C") samples.emplace_back(e["ts"].get<double>(), e["args"]["value"].get<double>());
  ASSERT_GT(samples.size(), 100u);
  for (std::size_t i = 1; i < samples.size(); ++i) ASSERT_LT(samples[i - 1].first, samples[i].first);
  std::size_t k = 0;
  for (int bin = 0; bin < kKernels / 50; ++bin) {
    double mean = 0;
    for (int i = 50 * bin; i < 50 * bin + 50; ++i) mean += demand(i) / 50;
    while (k + 1 < samples.size() && samples[k + 1].first <= 50.0 * bin + 1e-6) ++k;
    ASSERT_NEAR(samples[k].second, mean / 1e9, 0.051) << "bin " << bin;
  }
  EXPECT_EQ(samples.back().second, 0);  // idle after the last kernel
  EXPECT_NEAR(samples.back().first, 1e6 * 70'000e-6, 1e-6);
}

}  // namespace
}  // namespace ascendsim::aicore
