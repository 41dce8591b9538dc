// SystemC tests: each runs in its own process (gtest_discover_tests).
#define SC_INCLUDE_DYNAMIC_PROCESSES
#include <functional>
#include <vector>

#include <gtest/gtest.h>
#include <systemc>

#include "hostif/data_queue.h"
#include "hostif/dma_channel.h"
#include "sim/core/time.h"

namespace ascendsim::hostif {
namespace {

using sc_core::sc_time;

/// Runs each function in its own SC_THREAD.
struct Threads : sc_core::sc_module {
  explicit Threads(sc_core::sc_module_name n, std::vector<std::function<void()>> fns) : sc_module(n) {
    for (auto& f : fns) sc_core::sc_spawn(f);
  }
};

constexpr double kBw = 10.0;  // GB/s: 1 byte = 0.1 ns
constexpr double kLatencyNs = 500;
constexpr double kSetupNs = 200;
constexpr std::int64_t kChunk = 64 * 1024;

TEST(DmaChannel, SingleTransferTakesSetupPlusSizeOverBandwidthPlusLatency) {
  DmaChannel ch("h2d", kBw, kLatencyNs, kChunk, kSetupNs);
  sc_time done;
  Threads t("t", {[&] {
              ch.transfer(1'000'000);
              done = sc_core::sc_time_stamp();
            }});
  sc_core::sc_start();
  EXPECT_EQ(done, sim::ns(kSetupNs) + sim::transfer_time(1'000'000, kBw) + sim::ns(kLatencyNs));
  EXPECT_DOUBLE_EQ(ch.stats().to_json()["bytes"].get<double>(), 1e6);
}

TEST(DmaChannel, ConcurrentTransfersShareTheLink) {
  DmaChannel ch("h2d", kBw, kLatencyNs, kChunk, kSetupNs);
  const std::uint64_t bytes = 1'000'000;
  sc_time a, b;
  Threads t("t", {[&] {
                    ch.transfer(bytes);
                    a = sc_core::sc_time_stamp();
                  },
                  [&] {
                    ch.transfer(bytes);
                    b = sc_core::sc_time_stamp();
                  }});
  sc_core::sc_start();
  const sc_time both = sim::ns(kSetupNs) + sim::transfer_time(2.0 * bytes, kBw) + sim::ns(kLatencyNs);
  const sc_time chunk = sim::transfer_time(kChunk, kBw);
  // The link is never idle while data waits: the last byte lands after exactly 2 MB of link time.
  EXPECT_LE(std::max(a, b) - both, sim::ps(1000)) << std::max(a, b) << " vs " << both;
  EXPECT_GE(std::max(a, b) + sim::ps(1000), both);
  // Round-robin chunks: the other finishes at most one chunk earlier.
  EXPECT_LE(std::max(a, b) - std::min(a, b), chunk + sim::ps(1000));
}

TEST(DmaChannel, LateArrivalInterruptsAStreamingTransfer) {
  DmaChannel ch("h2d", kBw, kLatencyNs, kChunk, kSetupNs);
  sc_time small_done;
  Threads t("t", {[&] { ch.transfer(10'000'000); },  // 1 ms alone
                  [&] {
                    sc_core::wait(sim::us(100));
                    ch.transfer(kChunk);
                    small_done = sc_core::sc_time_stamp();
                  }});
  sc_core::sc_start();
  // The small transfer waits at most one chunk of the big one, not the whole millisecond.
  EXPECT_LT(small_done, sim::us(100) + sim::ns(kSetupNs) + 3 * sim::transfer_time(kChunk, kBw) + sim::ns(kLatencyNs));
}

TEST(DmaChannel, AFluidLinkSharesItsBandwidthEvenlyAndAnUplinkBoundsItsDevices) {
  // Fluid sharing: 1 MB and 3 MB start together on 10 GB/s: both move at 5 GB/s until the
  // smaller is done (0.2 ms), then the larger alone at 10 GB/s (0.2 ms more).
  DmaChannel up("uplink", kBw, 0, kChunk, 0, true);
  DmaChannel a("a", 100 * kBw, 0, kChunk, 0), b("b", 100 * kBw, 0, kChunk, 0);
  a.set_uplink(&up);
  b.set_uplink(&up);
  sc_time small, large;
  Threads t("t", {[&] {
                    a.transfer(1'000'000);
                    small = sc_core::sc_time_stamp();
                  },
                  [&] {
                    b.transfer(3'000'000);
                    large = sc_core::sc_time_stamp();
                  }});
  sc_core::sc_start();
  EXPECT_NEAR(small.to_seconds(), 2e-4, 1e-12);
  EXPECT_NEAR(large.to_seconds(), 4e-4, 1e-12);
  // The uplink carried both, busy the whole time.
  EXPECT_DOUBLE_EQ(up.bytes(), 4e6);
  EXPECT_NEAR(up.busy_s(), 4e-4, 1e-12);
}

TEST(DataQueue, BoundedConservesBytesAndBlocksBothSides) {
  DataQueue q("q", 4);
  std::int64_t max_depth = 0;
  int popped = 0;
  Threads t("t", {[&] {
                    for (int i = 0; i < 50; ++i) {
                      q.reserve();
                      sc_core::wait(sim::us(1));
                      q.commit(1000 + static_cast<std::uint64_t>(i));
                      max_depth = std::max(max_depth, q.depth());
                    }
                  },
                  [&] {
                    for (int i = 0; i < 50; ++i) {
                      ASSERT_TRUE(q.pop(sim::seconds(1)));
                      ++popped;
                      sc_core::wait(sim::us(i < 25 ? 5 : 0.1));  // slow consumer first, then fast
                    }
                  }});
  sc_core::sc_start();
  const auto s = q.stats().to_json();
  EXPECT_EQ(popped, 50);
  EXPECT_LE(max_depth, 4);
  EXPECT_LE(s["max_depth"].get<double>(), 4);
  EXPECT_EQ(s["pushes"].get<double>(), 50);
  EXPECT_EQ(s["pops"].get<double>(), 50);
  EXPECT_EQ(s["bytes_pushed"].get<double>(), s["bytes_popped"].get<double>());
  EXPECT_GT(s["full_wait_s"].get<double>(), 0);   // the slow consumer made the producer wait
  EXPECT_GT(s["empty_wait_s"].get<double>(), 0);  // the fast consumer waited for the producer
}

TEST(DataQueue, PopTimesOutOnAStarvedQueue) {
  DataQueue q("q", 4);
  bool ok = true;
  sc_time when;
  Threads t("t", {[&] {
              ok = q.pop(sim::us(50));
              when = sc_core::sc_time_stamp();
            }});
  sc_core::sc_start();
  EXPECT_FALSE(ok);
  EXPECT_EQ(when, sim::us(50));
}

}  // namespace
}  // namespace ascendsim::hostif
