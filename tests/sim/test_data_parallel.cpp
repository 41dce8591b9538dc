#define SC_INCLUDE_DYNAMIC_PROCESSES
// Data-parallel training on one server: the ring AllReduce against its formula, gradient groups,
// sharded data, and what scaling must respect.
#include <algorithm>
#include <fstream>
#include <memory>
#include <sstream>
#include <vector>

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "aicpu/hccl.h"
#include "hostif/dma_channel.h"
#include "runtime/graph_compiler.h"
#include "sim/api.h"
#include "sim/core/error.h"
#include "sim/core/time.h"
#include "sim/kernel.h"
#include "sim/report/html_report.h"
#include "sim/report/studies_report.h"
#include "sim/system.h"
#include "tests/test_support.h"

namespace ascendsim {
namespace {

/// N ranks that each start an AllReduce of `bytes` at time `arrive[r]`; returns when each left.
std::vector<double> collective_at(hostif::Collective kind, const aicpu::HcclConfig& cfg, std::int64_t bytes,
                                  const std::vector<double>& arrive, int per_server = 8) {
  sim::KernelScope kernel;
  const int n = static_cast<int>(arrive.size());
  aicpu::Hccl hccl("hccl", cfg, n, 1200, per_server);
  std::vector<double> left(arrive.size(), -1);
  for (int r = 0; r < n; ++r)
    sc_core::sc_spawn([&, r] {
      sc_core::wait(sc_core::sc_time(arrive[static_cast<std::size_t>(r)], sc_core::SC_SEC));
      hccl.collective(r, kind, bytes);
      left[static_cast<std::size_t>(r)] = sc_core::sc_time_stamp().to_seconds();
    });
  sc_core::sc_start();
  return left;
}

/// HCCL's configuration with rings between servers (hccl.inter_server_algorithm=ring), whose
/// formulas the tests below check; the default, auto, is tested in test_hccl_algorithms.cpp.
aicpu::HcclConfig rings() {
  aicpu::HcclConfig cfg;
  cfg.inter_server_algorithm = "ring";
  return cfg;
}

std::vector<double> all_reduce_at(const aicpu::HcclConfig& cfg, std::int64_t bytes, const std::vector<double>& arrive,
                                  int per_server = 8) {
  return collective_at(hostif::Collective::AllReduce, cfg, bytes, arrive, per_server);
}

TEST(DataParallel, RingAllReduceFollowsItsFormula) {
  const aicpu::HcclConfig cfg;  // α 54.6 µs, B 63 GB/s
  for (int n : {2, 4, 8})
    for (std::int64_t bytes : {std::int64_t{8192}, std::int64_t{64} << 20}) {
      SCOPED_TRACE(std::to_string(n) + " ranks, " + std::to_string(bytes) + " B");
      const std::vector<double> left = all_reduce_at(cfg, bytes, std::vector<double>(static_cast<std::size_t>(n), 0));
      const double s = static_cast<double>(bytes);
      const double expect = 2.0 * (n - 1) * (54.6e-6 + s / n / 63e9) + (n - 1) * 3.0 * s / n / 1200e9;
      for (double t : left) EXPECT_NEAR(t, expect, 0.02 * expect);
    }
  // C6's two points, which set α and B: 765 µs and 2630 µs on 8 ranks (reduction time aside).
  EXPECT_NEAR(aicpu::Hccl::ring_all_reduce_s(cfg, 8, 8192, 1e12), 765e-6, 0.01 * 765e-6);
  EXPECT_NEAR(aicpu::Hccl::ring_all_reduce_s(cfg, 8, 64.0 * 1024 * 1024, 1e12), 2630e-6, 0.01 * 2630e-6);
}

TEST(DataParallel, SubGroupCollectivesWaitOnlyForTheirMembersAndCostTheirRing) {
  // 8 ranks in two groups of 4 (stride 1: {0..3}, {4..7}): each group's AllReduce starts when its
  // own last member arrives and costs the 4-rank ring; groups of 2 four apart ({r, r+4}) likewise.
  const aicpu::HcclConfig cfg;
  const std::int64_t bytes = 1 << 20;
  sim::KernelScope kernel;
  aicpu::Hccl hccl("hccl", cfg, 8, 1200, 8);
  std::vector<double> left(8, -1), left_pairs(8, -1);
  for (int r = 0; r < 8; ++r)
    sc_core::sc_spawn([&, r] {
      sc_core::wait(sc_core::sc_time(r < 4 ? 0.0 : 1e-3, sc_core::SC_SEC));  // the second group arrives later
      hccl.collective(r, hostif::Collective::AllReduce, bytes, {4, 1});
      left[static_cast<std::size_t>(r)] = sc_core::sc_time_stamp().to_seconds();
      hccl.collective(r, hostif::Collective::AllGather, bytes, {2, 4});
      left_pairs[static_cast<std::size_t>(r)] = sc_core::sc_time_stamp().to_seconds();
    });
  sc_core::sc_start();
  const double ring4 = aicpu::Hccl::ring_s(cfg, hostif::Collective::AllReduce, 4, bytes, 1200);
  const double pair = aicpu::Hccl::ring_s(cfg, hostif::Collective::AllGather, 2, bytes, 1200);
  for (int r = 0; r < 8; ++r) {
    EXPECT_NEAR(left[static_cast<std::size_t>(r)], (r < 4 ? 0.0 : 1e-3) + ring4, 1e-9) << r;
    // A pair {r, r+4} waits for its later member, rank r+4.
    EXPECT_NEAR(left_pairs[static_cast<std::size_t>(r)], 1e-3 + ring4 + pair, 1e-9) << r;
  }
  EXPECT_EQ(hccl.members(5, {4, 1}), (std::vector<int>{4, 5, 6, 7}));
  EXPECT_EQ(hccl.members(6, {2, 4}), (std::vector<int>{2, 6}));
  EXPECT_EQ(hccl.members(3, {}).size(), 8u);
  EXPECT_THROW(hccl.members(0, {3, 1}), std::logic_error);  // 3 does not tile 8
}

TEST(DataParallel, MaxMinRatesShareEachPortFairly) {
  using aicpu::max_min_rates;
  auto near = [](const std::vector<double>& got, const std::vector<double>& want) {
    ASSERT_EQ(got.size(), want.size());
    for (std::size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-12) << i;
  };
  near(max_min_rates({{1}, {2}}), {1, 1});            // apart: each its full rate
  near(max_min_rates({{1, 2}, {2, 3}}), {0.5, 0.5});  // one port in common: half each
  // Port 1 has three flows (a third each); port 2 gives D what C leaves of it.
  near(max_min_rates({{1}, {1}, {1, 2}, {2}}), {1.0 / 3, 1.0 / 3, 1.0 / 3, 2.0 / 3});
  near(max_min_rates({{}, {4}}), {1, 1});
  // No port is ever over its capacity.
  const std::vector<std::vector<std::int64_t>> mesh{{1, 2, 3}, {2, 3}, {3, 4}, {4}, {1}};
  const std::vector<double> r = max_min_rates(mesh);
  for (std::int64_t port = 1; port <= 4; ++port) {
    double load = 0;
    for (std::size_t f = 0; f < mesh.size(); ++f)
      for (std::int64_t q : mesh[f]) load += q == port ? r[f] : 0.0;
    EXPECT_LE(load, 1.0 + 1e-12) << port;
  }
}

/// Two AllGathers of `bytes` on the same 4 ranks (each rank's two streams), the second starting
/// `later` seconds after the first; returns when each ended on rank 0, and the Hccl's shared stats.
struct TwoInFlight {
  double first = -1, second = -1, shared = 0, lost_s = 0;
};
TwoInFlight two_all_gathers(std::int64_t bytes, double later, const hostif::CommGroup& second_group = {}) {
  sim::KernelScope kernel;
  const aicpu::HcclConfig cfg;
  aicpu::Hccl hccl("hccl", cfg, 4, 1200, 4);
  TwoInFlight out;
  for (int r = 0; r < 4; ++r) {
    sc_core::sc_spawn([&, r] {
      hccl.collective(r, hostif::Collective::AllGather, bytes);
      if (r == 0) out.first = sc_core::sc_time_stamp().to_seconds();
    });
    sc_core::sc_spawn([&, r] {
      sc_core::wait(sc_core::sc_time(later, sc_core::SC_SEC));
      if (second_group.whole())
        hccl.collective(r, hostif::Collective::AllGather, bytes);
      else
        hccl.collective(r, hostif::Collective::AllGather, bytes, second_group);
      if (r == 0) out.second = sc_core::sc_time_stamp().to_seconds();
    });
  }
  sc_core::sc_start();
  out.shared = hccl.shared_count();
  out.lost_s = hccl.shared_lost_s();
  return out;
}

TEST(DataParallel, TwoCollectivesInFlightOnTheSameRanksShareTheirPorts) {
  // An AllGather on a ring of 4: F = 3α of latency, then W = 3·S/(4·B) of transfer.
  const double S = 64.0 * 1024 * 1024, F = 3 * 54.6e-6, W = 3 * S / 4 / 63e9;
  const double alone = aicpu::Hccl::ring_s(aicpu::HcclConfig{}, hostif::Collective::AllGather, 4, S, 1200);
  ASSERT_NEAR(alone, F + W, 1e-12);
  {  // Started together: latencies side by side, then both transfers at half the rate.
    const TwoInFlight t = two_all_gathers(64 << 20, 0);
    EXPECT_NEAR(t.first, F + 2 * W, 1e-9);
    EXPECT_NEAR(t.second, F + 2 * W, 1e-9);
    EXPECT_EQ(t.shared, 2);
    EXPECT_NEAR(t.lost_s, 2 * W, 1e-9);
  }
  {  // The second starts as the first's transfer does: the first runs alone through the second's
     // latency (F of its W), then both at half the rate until the first ends at 2W; the second
     // then has F of transfer left, alone.
    const TwoInFlight t = two_all_gathers(64 << 20, F);
    EXPECT_NEAR(t.first, 2 * W, 1e-9);
    EXPECT_NEAR(t.second, 2 * W + F, 1e-9);
    EXPECT_NEAR(t.lost_s, (2 * W - alone) + (2 * W + F - (F + alone)), 1e-9);
  }
  {  // Beside pairs {0,1} and {2,3} (F2 = α, W2 = S/(2B)): each pair's transfer runs alone through
     // the ring's longer latency (2α of it), then at half the rate beside the ring's until the pair
     // ends at 2·W2 − α; the ring then finishes its transfer alone, at W2 + W + α.
    const double a = 54.6e-6, W2 = S / 2 / 63e9;
    const TwoInFlight t = two_all_gathers(64 << 20, 0, {2, 1});
    EXPECT_NEAR(t.second, 2 * W2 - a, 1e-9);
    EXPECT_NEAR(t.first, W2 + W + a, 1e-9);
    EXPECT_EQ(t.shared, 3);  // the ring and both pairs
  }
  {  // Started after the first has ended: nothing shared, each its time alone to the picosecond.
    const TwoInFlight t = two_all_gathers(64 << 20, 1.0);
    EXPECT_EQ(t.first, sim::seconds(alone).to_seconds());
    EXPECT_EQ(t.second, (sc_core::sc_time(1.0, sc_core::SC_SEC) + sim::seconds(alone)).to_seconds());
    EXPECT_EQ(t.shared, 0);
  }
}

/// An AllGather of `bytes` on 8 ranks in two HCCS networks of four joined through PCIe, started
/// at `at` seconds, while rank 0's host-to-device DMA carries transfers of `dma` bytes (each its
/// own, all queued at time 0) over the same PCIe link.
struct DmaBeside {
  std::vector<double> left;
  double dma_end = -1, shared = 0, lost_s = 0, chunks = 0;
};
DmaBeside all_gather_beside_dma(std::int64_t bytes, const std::vector<std::uint64_t>& dma, double gbps, double at = 0,
                                int behind_uplink = 0) {
  sim::KernelScope kernel;
  aicpu::HcclConfig cfg;
  cfg.hccs_group_size = 4;
  cfg.pcie_bandwidth_gbps = gbps;
  aicpu::Hccl hccl("hccl", cfg, 8, 1200, 8);
  hostif::DmaChannel h2d("h2d", gbps, 0, 1 << 20, 0);
  h2d.set_sharer([&] { return hccl.pcie_taken(0); }, &hccl.pcie_changed(0), [&] { hccl.pcie_dma_changed(0); });
  hccl.add_pcie_dma(0, [&] { return h2d.link_demand(); });
  // With `behind_uplink` > 0: rank 0's link and as many other devices' links behind one switch
  // uplink of the same rate (fluid), each of those devices carrying transfers as rank 0's.
  hostif::DmaChannel uplink("uplink", gbps, 0, 1 << 20, 0, true);
  std::vector<std::unique_ptr<hostif::DmaChannel>> others;
  if (behind_uplink > 0) h2d.set_uplink(&uplink);
  for (int i = 0; i < behind_uplink; ++i) {
    others.push_back(std::make_unique<hostif::DmaChannel>(("h2d_" + std::to_string(i)).c_str(), gbps, 0, 1 << 20, 0));
    others.back()->set_uplink(&uplink);
  }
  DmaBeside out;
  out.left.assign(8, -1);
  for (int r = 0; r < 8; ++r)
    sc_core::sc_spawn([&, r] {
      sc_core::wait(sc_core::sc_time(at, sc_core::SC_SEC));
      hccl.collective(r, hostif::Collective::AllGather, bytes);
      out.left[static_cast<std::size_t>(r)] = sc_core::sc_time_stamp().to_seconds();
    });
  for (std::uint64_t d : dma) {
    sc_core::sc_spawn([&, d] {
      h2d.transfer(d);
      out.dma_end = std::max(out.dma_end, sc_core::sc_time_stamp().to_seconds());
    });
    for (auto& o : others)
      sc_core::sc_spawn([&, d, ch = o.get()] {
        ch->transfer(d);
        out.dma_end = std::max(out.dma_end, sc_core::sc_time_stamp().to_seconds());
      });
  }
  sc_core::sc_start();
  out.shared = hccl.shared_count();
  out.lost_s = hccl.shared_lost_s();
  out.chunks = h2d.stats().to_json()["chunks"].get<double>();
  return out;
}

TEST(DataParallel, ACollectiveBetweenTheMeshesSharesADevicesPcieLinkWithItsDma) {
  // The AllGather's PCIe phase (one step between the networks: α, then W = S/8 at the link's
  // rate) meets rank 0's DMA on its link: both at half the rate, so the collective takes W more
  // (every rank, as a collective ends for all at once) and the DMA loses W as well.
  const double gbps = 14.4035, S = 64.0 * 1024 * 1024, W = S / 8 / (gbps * 1e9);
  const std::uint64_t D = 200 << 20;  // 14.6 ms of DMA: it covers the collective's PCIe phase
  aicpu::HcclConfig cfg;
  cfg.hccs_group_size = 4;
  cfg.pcie_bandwidth_gbps = gbps;
  const aicpu::CollectiveCost alone = aicpu::Hccl::cost(cfg, hostif::Collective::AllGather, 1, 8, S, 1200);
  ASSERT_TRUE(alone.parts.front().pcie);
  ASSERT_NEAR(alone.parts.front().wire_s, W, 1e-15);
  const double dma_alone = static_cast<double>(D) / (gbps * 1e9);
  const DmaBeside t = all_gather_beside_dma(64 << 20, {D}, gbps);
  for (double left : t.left) EXPECT_NEAR(left, alone.seconds + W, 1e-9);
  EXPECT_NEAR(t.dma_end, dma_alone + W, 1e-9);
  EXPECT_EQ(t.shared, 1);
  EXPECT_NEAR(t.lost_s, W, 1e-9);
  // The DMA under way first when the collective starts: the same loss, from the collective's start.
  const double at = 1e-3;
  const DmaBeside later = all_gather_beside_dma(64 << 20, {D}, gbps, at);
  for (double left : later.left) EXPECT_NEAR(left, at + alone.seconds + W, 1e-9);
  EXPECT_NEAR(later.dma_end, dma_alone + W, 1e-9);
  // Two transfers sharing the channel a chunk at a time: together they lose W, and every chunk
  // cut short by the collective's share is finished as one chunk.
  const DmaBeside two = all_gather_beside_dma(64 << 20, {D / 2, D / 2}, gbps);
  for (double left : two.left) EXPECT_NEAR(left, alone.seconds + W, 1e-9);
  EXPECT_NEAR(two.dma_end, dma_alone + W, 1e-9);
  EXPECT_EQ(two.chunks, static_cast<double>(D >> 20));  // 1 MiB chunks
  // Behind a switch uplink that three other devices' transfers share, rank 0's transfer goes at a
  // quarter of its link: the collective's transfer takes the other three quarters (W / 0.75, a
  // third of W longer), and the transfers end when the uplink has carried all four, untouched.
  const DmaBeside shared = all_gather_beside_dma(64 << 20, {D}, gbps, 0, 3);
  for (double left : shared.left) EXPECT_NEAR(left, alone.seconds + W / 3, 1e-9);
  EXPECT_NEAR(shared.lost_s, W / 3, 1e-9);
  EXPECT_NEAR(shared.dma_end, 4 * dma_alone, 1e-9);
  // Without the DMA the collective takes its time alone, to the picosecond.
  const DmaBeside quiet = all_gather_beside_dma(64 << 20, {}, gbps);
  for (double left : quiet.left) EXPECT_EQ(left, sim::seconds(alone.seconds).to_seconds());
  EXPECT_EQ(quiet.shared, 0);
}

TEST(DataParallel, CollectivesOfDisjointGroupsInFlightTogetherKeepTheirTimes) {
  // Ranks {0,1} and {2,3} in AllGathers of their own at once: the groups share no rank, so no
  // port, and each takes the 2-ring's time alone to the picosecond.
  const aicpu::HcclConfig cfg;
  const double S = 64.0 * 1024 * 1024;
  const double pair = aicpu::Hccl::ring_s(cfg, hostif::Collective::AllGather, 2, S, 1200);
  sim::KernelScope kernel;
  aicpu::Hccl hccl("hccl", cfg, 4, 1200, 4);
  std::vector<double> left(4, -1);
  for (int r = 0; r < 4; ++r)
    sc_core::sc_spawn([&, r] {
      hccl.collective(r, hostif::Collective::AllGather, 64 << 20, {2, 1});
      left[static_cast<std::size_t>(r)] = sc_core::sc_time_stamp().to_seconds();
    });
  sc_core::sc_start();
  for (double t : left) EXPECT_EQ(t, sim::seconds(pair).to_seconds());
  EXPECT_EQ(hccl.shared_count(), 0);
}

TEST(DataParallel, AcrossServersAllReduceIsHierarchical) {
  // Reduce-scatter and all-gather on each server's ring of m, the pieces all-reduced on a ring of
  // the k servers over RoCE.
  const aicpu::HcclConfig cfg = rings();
  const double s = 100e6, m = 8, k = 4;
  const double expect = 2 * (m - 1) * (54.6e-6 + s / m / 63e9) + (m - 1) * 3 * s / m / 1200e9 +
                        2 * (k - 1) * (60e-6 + s / m / k / 12.5e9) + (k - 1) * 3 * s / m / k / 1200e9;
  const std::vector<double> left = all_reduce_at(cfg, 100000000, std::vector<double>(32, 0));
  for (double t : left) EXPECT_NEAR(t, expect, 0.02 * expect);
  // One server: the plain ring.
  EXPECT_DOUBLE_EQ(aicpu::Hccl::hierarchical_all_reduce_s(cfg, 1, 8, s, 1200),
                   aicpu::Hccl::ring_all_reduce_s(cfg, 8, s, 1200));
  // A cluster is whole servers.
  sim::KernelScope kernel;
  EXPECT_THROW(aicpu::Hccl("odd", cfg, 12, 1200, 8), std::invalid_argument);
}

TEST(DataParallel, AllReduceOnTwoServersOfEightEqualsItsFormula) {
  // Reduce-scatter on each server's ring of 8, the 8 pieces all-reduced on rings of 2 over RoCE
  // (both servers under one leaf), all-gather on each server's ring.
  const aicpu::HcclConfig cfg;
  const double s = 64.0 * 1024 * 1024, a = 54.6e-6, b = 63e9, ar = 60e-6, br = 12.5e9, h = 1200e9;
  const double expect = 2 * 7 * (a + s / 8 / b) + 7 * 3 * (s / 8) / h + 2 * (ar + s / 16 / br) + 3 * (s / 16) / h;
  for (double t : all_reduce_at(cfg, 64 << 20, std::vector<double>(16, 0))) EXPECT_NEAR(t, expect, 1e-9);
}

TEST(DataParallel, LeafOversubscriptionSlowsRingsBetweenLeavesByItsFactorOverTheServersPerLeaf) {
  // Between servers the rings of each local rank run side by side; a leaf's uplinks carry one hop
  // of each ring out of the leaf, so with L servers per leaf and o:1 oversubscription a ring
  // between leaves moves at min(1, L/o) of a port, and each of its steps crosses two more switches.
  const double s = 256.0 * 1024 * 1024, br = 12.5e9, ar = 60e-6, sw = 0.5e-6;
  auto inter = [&](const aicpu::HcclConfig& cfg, int servers) {  // the RoCE part of an AllReduce
    const auto c = aicpu::Hccl::cost(cfg, hostif::Collective::AllReduce, servers, 8, s, 1200);
    double t = 0;
    for (const auto& p : c.parts) t += p.roce ? p.seconds : 0.0;
    return t;
  };
  auto ring = [&](int k, double alpha, double bw) {  // its formula: 2(k-1) steps of S/(8k) and k-1 reductions
    return 2 * (k - 1) * (alpha + s / 8 / k / bw) + (k - 1) * 3 * (s / 8 / k) / 1200e9;
  };
  aicpu::HcclConfig cfg = rings();
  cfg.servers_per_leaf = 4;
  cfg.oversubscription = 1;
  EXPECT_NEAR(inter(cfg, 4), ring(4, ar, br), 1e-12);           // one leaf: no spine
  EXPECT_NEAR(inter(cfg, 8), ring(8, ar + 2 * sw, br), 1e-12);  // two leaves, non-blocking
  cfg.oversubscription = 2;
  EXPECT_NEAR(inter(cfg, 4), ring(4, ar, br), 1e-12);           // one leaf: unaffected
  EXPECT_NEAR(inter(cfg, 8), ring(8, ar + 2 * sw, br), 1e-12);  // 4 servers per leaf carry 2:1 at full rate
  cfg.servers_per_leaf = 1;                                     // a leaf per server: its uplinks halve the rings
  EXPECT_NEAR(inter(cfg, 8), ring(8, ar + 2 * sw, br / 2), 1e-12);
  cfg.servers_per_leaf = 2;
  cfg.oversubscription = 8;
  EXPECT_NEAR(inter(cfg, 8), ring(8, ar + 2 * sw, br / 4), 1e-12);
  // The transfer part grows by the factor exactly: bandwidth terms at 2:1 over one server per leaf
  // are twice the non-blocking ones.
  aicpu::HcclConfig open = cfg, over = cfg;
  open.servers_per_leaf = over.servers_per_leaf = 1;
  open.oversubscription = 1;
  over.oversubscription = 2;
  open.roce_step_latency_us = over.roce_step_latency_us = 0;
  open.switch_latency_us = over.switch_latency_us = 0;
  const double reductions = 7 * 3 * (s / 8 / 8) / 1200e9;
  EXPECT_NEAR(inter(over, 8) - reductions, 2 * (inter(open, 8) - reductions), 1e-12);
}

TEST(DataParallel, HalvingDoublingBetweenServersTakesLog2StepsAndCrossesLeavesOnlyWhereItsPartnersDo) {
  // Recursive halving-doubling on k servers of 8 (S' = S/8 per local rank): reduce-scatter
  // exchanges S'/2, S'/4, ... with partners k/2, k/4, ... apart, all-gather backwards. Four servers
  // to a leaf: only the step between partners 4 apart leaves its leaf (two more switches, and under
  // o:1 oversubscription the leaf's four servers share uplinks of 4/o ports).
  const double s = 256.0 * 1024 * 1024, sp = s / 8, a = 60e-6, b = 12.5e9, h = 1200e9, sw = 2 * 0.5e-6;
  auto inter = [&](const aicpu::HcclConfig& cfg, int servers) {
    const auto c = aicpu::Hccl::cost(cfg, hostif::Collective::AllReduce, servers, 8, s, 1200);
    double t = 0;
    for (const auto& p : c.parts) t += p.roce ? p.seconds : 0.0;
    return t;
  };
  aicpu::HcclConfig cfg;
  cfg.inter_server_algorithm = "halving-doubling";
  cfg.servers_per_leaf = 4;
  auto step = [&](double size, double latency, double rate, bool reduce) {
    return latency + size / (b * rate) + (reduce ? 3 * size / h : 0.0);
  };
  for (double o : {1.0, 2.0}) {
    cfg.oversubscription = o;
    const double far = std::min(1.0, 4 / (o * 4));  // all four of a leaf's servers send out
    double expect = 0;
    for (bool reduce : {true, false})
      expect += step(sp / 2, a + sw, far, reduce) + step(sp / 4, a, 1, reduce) + step(sp / 8, a, 1, reduce);
    EXPECT_NEAR(inter(cfg, 8), expect, 1e-12) << o;
  }
  // Six servers: two fold onto servers 0 and 1 first (S' each, across the leaves, two of leaf 1's
  // servers sending out: under 1:1 at a port's rate) and get the result back at the end.
  cfg.oversubscription = 1;
  double six = 0;
  for (bool reduce : {true, false})
    six += step(sp, a + sw, 1, reduce) + step(sp / 2, a, 1, reduce) + step(sp / 4, a, 1, reduce);
  EXPECT_NEAR(inter(cfg, 6), six, 1e-12);
  // Seven servers, three to a leaf, 2:1: the fold's senders are servers 4, 5, 6 (two on leaf 1:
  // 3/(2·2) of a port), the result goes back from servers 0, 1, 2 (all of leaf 0: 3/(2·3)); the
  // steps among 0..3 cross between leaves 0 and 1 one server each way (a port's rate).
  cfg.servers_per_leaf = 3;
  cfg.oversubscription = 2;
  const double seven = step(sp, a + sw, 0.75, true) + step(sp / 2, a + sw, 1, true) + step(sp / 4, a + sw, 1, true) +
                       step(sp, a + sw, 0.5, false) + step(sp / 2, a + sw, 1, false) + step(sp / 4, a + sw, 1, false);
  EXPECT_NEAR(inter(cfg, 7), seven, 1e-12);
  cfg.servers_per_leaf = 4;
  cfg.oversubscription = 1;
  // Against rings on 64 servers: 2·6 steps of latency instead of 2·63, the same bytes on the ports
  // but for the power of two's share.
  const aicpu::HcclConfig ring = rings();
  EXPECT_LT(inter(cfg, 64), 0.5 * inter(ring, 64));
  const auto hd = aicpu::Hccl::cost(cfg, hostif::Collective::AllReduce, 64, 8, s, 1200);
  const auto rg = aicpu::Hccl::cost(ring, hostif::Collective::AllReduce, 64, 8, s, 1200);
  EXPECT_NEAR(hd.roce_bytes, rg.roce_bytes, 1e-6 * rg.roce_bytes);  // 2(k-1)/k of S' per port either way
}

TEST(DataParallel, BroadcastGatherAndScatterFollowTheirFormulas) {
  const aicpu::HcclConfig cfg = rings();
  const double a = 54.6e-6, b = 63e9, h = 1200e9, ar = 60e-6, br = 12.5e9;
  using hostif::Collective;
  for (int n : {2, 4, 8}) {
    const double s = 64.0 * 1024 * 1024;
    SCOPED_TRACE(std::to_string(n) + " ranks");
    // AllGather: N-1 steps of S/N, no reduction; ReduceScatter: the same with a reduction each.
    const double gather = (n - 1) * (a + s / n / b);
    for (double t : collective_at(Collective::AllGather, cfg, 64 << 20, std::vector<double>(n, 0)))
      EXPECT_NEAR(t, gather, 0.02 * gather);
    const double scatter = gather + (n - 1) * 3 * s / n / h;
    for (double t : collective_at(Collective::ReduceScatter, cfg, 64 << 20, std::vector<double>(n, 0)))
      EXPECT_NEAR(t, scatter, 0.02 * scatter);
    // An AllReduce is a ReduceScatter followed by an AllGather.
    EXPECT_NEAR(aicpu::Hccl::ring_all_reduce_s(cfg, n, s, 1200), gather + scatter, 1e-12);
    // Broadcast: a pipelined ring, (N-2+c)(α + S/(cB)) at its best chunk count c, checked
    // against every c up to 1000: no chunk count does better, and one does as well.
    double best = INFINITY;
    for (int c = 1; c <= 1000; ++c) best = std::min(best, (n - 2 + c) * (a + s / c / b));
    for (double t : collective_at(Collective::Broadcast, cfg, 64 << 20, std::vector<double>(n, 0)))
      EXPECT_NEAR(t, best, 1e-9);
    // It is never faster than sending S once over one link, nor slower than N-1 whole hops.
    EXPECT_GE(best, s / b);
    EXPECT_LE(best, (n - 1) * (a + s / b));
  }
  // Across 4 servers of 8: Broadcast crosses the root's RoCE ring, then each server's ring;
  // AllGather gathers the S/8 pieces across servers, then within each server.
  const double s = 100e6;
  const double k4 = aicpu::Hccl::cost(cfg, Collective::Broadcast, 1, 4, s, 1200).seconds;  // a ring of 4
  aicpu::HcclConfig roce = cfg;
  roce.step_latency_us = 60;
  roce.link_bandwidth_gbps = 12.5;
  const double inter = aicpu::Hccl::cost(roce, Collective::Broadcast, 1, 4, s, 1200).seconds;
  const double intra = aicpu::Hccl::cost(cfg, Collective::Broadcast, 1, 8, s, 1200).seconds;
  EXPECT_GT(inter, k4);  // the RoCE ring is the slower one
  for (double t : collective_at(Collective::Broadcast, cfg, 100000000, std::vector<double>(32, 0)))
    EXPECT_NEAR(t, inter + intra, 1e-9);
  const double gather = 3 * (ar + s / 8 / 4 / br) + 7 * (a + s / 8 / b);
  for (double t : collective_at(Collective::AllGather, cfg, 100000000, std::vector<double>(32, 0)))
    EXPECT_NEAR(t, gather, 0.02 * gather);
  // The links carry what the algorithms send: an AllReduce puts 2(m-1)S/m on each ring link and
  // 2(k-1)S/(mk) out of each RoCE port.
  const aicpu::CollectiveCost c = aicpu::Hccl::cost(cfg, Collective::AllReduce, 4, 8, s, 1200);
  EXPECT_DOUBLE_EQ(c.hccs_bytes, 32 * 2 * 7 * s / 8);
  EXPECT_DOUBLE_EQ(c.roce_bytes, 32 * 2 * 3 * s / 32);
  double parts = 0;
  for (const auto& p : c.parts) parts += p.seconds;
  EXPECT_DOUBLE_EQ(parts, c.seconds);
}

TEST(DataParallel, AnAllReduceStartsWhenItsLastRankArrives) {
  const aicpu::HcclConfig cfg;
  const std::vector<double> left = all_reduce_at(cfg, 1 << 20, {0, 0.001, 0.003, 0.002});
  const double t = aicpu::Hccl::ring_all_reduce_s(cfg, 4, 1 << 20, 1200);
  for (double l : left) EXPECT_NEAR(l, 0.003 + t, 1e-12);  // everyone waits for the slowest
}

TEST(DataParallel, GradientOrderFollowsTheBackwardPass) {
  const auto w = workloads::make_workload("resnet50", 32);
  aicore::CachedCostModel model(aicore::make_pipe_cost_model({}, {}));
  runtime::CompileState s{w, model, 16, w.graph, {}, {}};
  for (const auto& p : runtime::default_passes()) p.run(s);
  const auto order = runtime::gradient_order(s.graph);
  ASSERT_EQ(order.size(), 161u);  // 53 convolutions, 53 BatchNorms' gamma and beta, the dense layer
  // The dense layer's gradients come first, the first convolution's last.
  EXPECT_EQ(w.graph.tensor(order.front()).name.rfind("fc.", 0), 0u) << w.graph.tensor(order.front()).name;
  EXPECT_EQ(w.graph.tensor(order.back()).name, "conv1.weight");
}

TEST(DataParallel, TheStepOrdersTheAllReducesAndAveragesEveryGradient) {
  auto w = workloads::make_workload("resnet50", 32);
  w.parallel.devices = 8;
  w.parallel.all_reduce_fusion = {85, 160};
  aicore::CachedCostModel model(aicore::make_pipe_cost_model({}, {}));
  const runtime::CompiledGraph c = runtime::compile(w, model, 16);
  ASSERT_EQ(c.comm_groups.size(), 2u);
  // Per group: ready on stream 0, start / AllReduce / done on stream 1, and stream 0 waits for
  // done before the group's 1/8 Muls (gradients_mean), which come before its optimizer ops.
  std::vector<std::size_t> comm, waits;
  std::size_t means = 0, first_mean[2] = {0, 0};
  for (std::size_t i = 0; i < c.step_tasks.size(); ++i) {
    const auto& t = c.step_tasks[i];
    if (t.kind == hostif::TaskKind::Comm) {
      comm.push_back(i);
      EXPECT_EQ(t.stream, 1);
      EXPECT_EQ(c.step_tasks[i - 1].kind, hostif::TaskKind::EventWait);
      EXPECT_EQ(c.step_tasks[i + 1].kind, hostif::TaskKind::EventRecord);
    }
    if (t.kind == hostif::TaskKind::EventWait && t.stream == 0) waits.push_back(i);
    if (t.name.rfind("GradientsMean/", 0) == 0) {
      if (means == 0) first_mean[0] = i;
      ++means;
      EXPECT_EQ(t.stream, 0);
    }
  }
  EXPECT_EQ(comm.size(), 2u);
  ASSERT_EQ(waits.size(), 2u);
  EXPECT_EQ(means, 161u);
  EXPECT_EQ(first_mean[0], waits[0] + 1);
  EXPECT_LT(comm[0], comm[1]);  // the first group (the later layers) is ready first
  EXPECT_EQ(c.comm_groups[0].bytes + c.comm_groups[1].bytes, 25557032 * 4);
  // The same workload on one device has none of it.
  auto one = workloads::make_workload("resnet50", 32);
  for (const auto& t : runtime::compile(one, model, 16).step_tasks) EXPECT_EQ(t.kind, hostif::TaskKind::AiCore);
}

sim::RunRequest resnet(std::int64_t devices, std::vector<std::int64_t> split = {}) {
  sim::RunRequest r;
  r.config = test::config_request();
  r.workload = "resnet50";
  r.batch_size = 32;
  r.strategies = {runtime::Strategy::LoopSink};
  r.steps_per_epoch = 30;
  r.devices = devices;
  r.all_reduce_fusion = std::move(split);
  return r;
}

TEST(DataParallel, TwoGroupsHideCommunicationThatOneGroupExposes) {
  const auto one = sim::run(resnet(8)).runs.front();
  const auto two = sim::run(resnet(8, {85, 160})).runs.front();
  ASSERT_TRUE(one.failure.empty() && two.failure.empty());
  EXPECT_EQ(one.comm_groups.size(), 1u);
  ASSERT_EQ(two.comm_groups.size(), 2u);
  // The groups cover the 161 gradients; their bytes are the parameters' (fp32 master weights).
  EXPECT_EQ(two.comm_groups[0]["first"], 0);
  EXPECT_EQ(two.comm_groups[0]["last"], 85);
  EXPECT_EQ(two.comm_groups[1]["last"], 160);
  EXPECT_EQ(two.comm_groups[0]["bytes"].get<std::int64_t>() + two.comm_groups[1]["bytes"].get<std::int64_t>(),
            one.comm_groups[0]["bytes"].get<std::int64_t>());
  EXPECT_EQ(one.comm_groups[0]["bytes"], 25557032 * 4);
  for (const auto& g : two.comm_groups)
    EXPECT_DOUBLE_EQ(
        g["all_reduce_ms"].get<double>(),
        1e3 * aicpu::Hccl::ring_all_reduce_s({}, 8, g["bytes"].get<double>(), aicore::MemoryConfig{}.hbm_gbps()));
  // The first group's AllReduce runs under the rest of the backward pass: a shorter tail, less
  // exposed communication, a shorter step.
  EXPECT_LT(two.steps.tail.stats().mean_ms, one.steps.tail.stats().mean_ms);
  const auto comm = static_cast<std::size_t>(sim::Phase::Comm);
  EXPECT_LT(two.breakdown_s[comm], one.breakdown_s[comm]);
  EXPECT_LT(two.steps.step.stats().mean_ms, one.steps.step.stats().mean_ms);
  // The ranks step together.
  ASSERT_EQ(two.rank_step_mean_ms.size(), 8u);
  for (double ms : two.rank_step_mean_ms) EXPECT_NEAR(ms, two.rank_step_mean_ms[0], 0.01 * ms);
}

TEST(DataParallel, EachGroupsTimingAddsUpToTheRunsCommunication) {
  const sim::RunOutcome out = sim::run(resnet(8, {85, 160}));
  const auto& r = out.runs.front();
  ASSERT_EQ(r.comm_groups.size(), 2u);
  // Each rank's exposed communication is its groups' exposed parts, step by step: the groups'
  // means times the steps, averaged over the ranks, equal the ranks' mean `comm` phase.
  double exposed = 0, rank_comm = 0;
  for (const auto& g : r.comm_groups) {
    exposed += g["exposed_ms"].get<double>() * 1e-3 * static_cast<double>(r.steps_completed);
    // A collective lasts at least its time once every rank has arrived; no more is exposed than it lasts.
    EXPECT_GE(g["duration_ms"].get<double>(), g["all_reduce_ms"].get<double>() * (1 - 1e-9));
    EXPECT_LE(g["exposed_ms"].get<double>(), g["duration_ms"].get<double>());
    EXPECT_LE(g["exposed_ms"].get<double>(), g["exposed_max_ms"].get<double>());
  }
  for (double s : r.rank_comm_s) rank_comm += s / 8;
  EXPECT_NEAR(exposed, rank_comm, 1e-6 * rank_comm);
  // The first group starts during the backward pass, the last after it.
  const double fp_bp = r.steps.fp_bp.stats().mean_ms;
  EXPECT_LT(r.comm_groups[0]["start_ms"].get<double>(), fp_bp);
  EXPECT_GE(r.comm_groups[1]["start_ms"].get<double>(), fp_bp);
  // The links carried each step's two AllReduces and the parameters' broadcast, on 8 ring links.
  const auto& l = r.cluster_links;
  const double b = l["broadcast_bytes"].get<double>();
  double expect = 7 * b;  // the broadcast: 7 of the ring's 8 links carry every byte
  for (const auto& g : r.comm_groups)
    expect += static_cast<double>(r.steps_completed) * 8 * 2 * 7 * g["bytes"].get<double>() / 8;
  EXPECT_NEAR(l["hccs"]["bytes"].get<double>(), expect, 1e-9 * expect);
  EXPECT_EQ(l["hccs"]["links"], 8);
  EXPECT_EQ(l["roce"]["ports"], 0);
  EXPECT_NEAR(l["hccs"]["utilisation"].get<double>(), expect / (8 * 63e9 * r.sim_time_s), 1e-9);
  EXPECT_GT(l["hccs"]["utilisation"].get<double>(), 0);
  EXPECT_LT(l["hccs"]["utilisation"].get<double>(), 1);
  // The broadcast holds the training network's persistent tensors (fp32 weights, their momentum,
  // the BatchNorm statistics) and is charged to `setup`, before the first step.
  EXPECT_GT(b, 2 * 25557032 * 4);
  EXPECT_NEAR(l["broadcast_ms"].get<double>(), 1e3 * aicpu::Hccl::ring_s({}, hostif::Collective::Broadcast, 8, b, 1200),
              1e-9);
  // The broadcast runs while the pipelines make their first batches, which take longer: without
  // it, the set-up — up to the first batch — is the same and so are the steps. (The graph loads
  // share the server's host links with the first batches the pipelines send, so the set-up also
  // moves by some microseconds with the pipeline's timing: 0.5% of the broadcast.)
  sim::RunRequest off = resnet(8, {85, 160});
  off.parameter_broadcast = false;
  const runtime::RunResult q = sim::run(off).runs.front();
  const auto setup = static_cast<std::size_t>(sim::Phase::Setup);
  EXPECT_GT(q.breakdown_s[setup], l["broadcast_ms"].get<double>() * 1e-3);
  EXPECT_NEAR(r.breakdown_s[setup], q.breakdown_s[setup], 0.005 * l["broadcast_ms"].get<double>() * 1e-3);
  // The batches' DMA shares each chip's HBM with the kernels it overlaps, and where it overlaps
  // moves with the pipeline's timing: the median step may move by that much (at 24 GB/s of
  // 1200 GB/s, at most 2% of the kernels the transfer overlaps), never by the broadcast.
  EXPECT_NEAR(q.steps.step.stats().p50_ms, r.steps.step.stats().p50_ms, 1e-3 * r.steps.step.stats().p50_ms);
}

TEST(DataParallel, DevicesBehindOnePcieSwitchShareItsUplink) {
  // Data sink, 8 devices: each step moves one batch per device host to device. With a 1 GB/s
  // uplink per switch, a switch of 4 devices needs 4 batches' bytes per step through it.
  sim::RunRequest r = resnet(8);
  r.strategies = {runtime::Strategy::DataSink};
  r.steps_per_epoch = 40;
  r.config.sets = {"link.pcie_uplink_gbps=1", "link.pcie_switch_devices=4"};
  const auto shared = sim::run(r).runs.front();
  r.config.sets = {"link.pcie_uplink_gbps=1", "link.pcie_switch_devices=1"};
  const auto own = sim::run(r).runs.front();
  ASSERT_TRUE(shared.failure.empty() && own.failure.empty());
  const double batch = static_cast<double>(shared.interactions.h2d_bytes) / static_cast<double>(shared.steps_completed);
  const double p50 = shared.steps.step.stats().p50_ms * 1e-3, own_p50 = own.steps.step.stats().p50_ms * 1e-3;
  EXPECT_GE(p50, 4 * batch / 1e9 * 0.999);  // the uplink bounds the step ...
  EXPECT_LE(p50, 4 * batch / 1e9 * 1.05);   // ... and nothing else does
  EXPECT_GE(own_p50, batch / 1e9 * 0.999);
  EXPECT_LT(own_p50, p50 / 3);
  // The uplinks carried every rank's batches; 2 switches of 4, nearly always busy.
  const auto& up = shared.cluster_links["pcie_uplinks"];
  EXPECT_EQ(up["switches"], 2);
  EXPECT_EQ(up["devices_per_switch"], 4);
  EXPECT_DOUBLE_EQ(up["h2d_bytes"].get<double>(), 8.0 * static_cast<double>(shared.interactions.h2d_bytes));
  EXPECT_GT(up["h2d_utilisation"].get<double>(), 0.9);
  EXPECT_LE(up["h2d_utilisation"].get<double>(), 1.0);
  EXPECT_EQ(own.cluster_links["pcie_uplinks"]["switches"], 8);
}

TEST(DataParallel, EachRankReadsItsShardAndScalingStaysBelowLinear) {
  sim::RunRequest r = resnet(8);
  r.workload = "resnet50-cifar10";
  r.steps_per_epoch.reset();
  r.epochs = 1;
  const auto eight = sim::run(r).runs.front();
  EXPECT_EQ(eight.session.steps_per_epoch, 50000 / 8 / 32);  // num_shards = 8: 195 steps per rank
  EXPECT_EQ(eight.devices, 8);
  r.devices = 1;
  r.steps_per_epoch = 195;
  const auto single = sim::run(r).runs.front();
  EXPECT_EQ(single.devices, 1);
  EXPECT_GT(eight.samples_per_s(), single.samples_per_s());
  EXPECT_LE(eight.samples_per_s(), 8 * single.samples_per_s());  // scaling efficiency <= 1
}

TEST(DataParallel, SlowingOneRanksPipelineSlowsEveryRank) {
  sim::RunRequest r = resnet(8);
  r.steps_per_epoch = 60;
  const auto even = sim::run(r).runs.front();
  r.rank_sets[3] = {"pipeline.num_parallel_workers=1"};
  const auto slow = sim::run(r).runs.front();
  ASSERT_TRUE(even.failure.empty() && slow.failure.empty());
  for (std::size_t k = 0; k < 8; ++k) {
    EXPECT_GT(slow.rank_step_mean_ms[k], 1.2 * even.rank_step_mean_ms[k]) << "rank " << k;  // everyone waits
    EXPECT_DOUBLE_EQ(slow.rank_step_mean_ms[k], slow.rank_step_mean_ms[3]);
  }
  // The straggler waits for its data; the others wait for it in the AllReduce.
  EXPECT_EQ(report::run_json(slow)["ranks"]["straggler"], 3);
  for (std::size_t k = 0; k < 8; ++k)
    if (k != 3) {
      EXPECT_GT(slow.rank_comm_s[k], slow.rank_comm_s[3]);
      EXPECT_LT(slow.rank_wait_data_s[k], slow.rank_wait_data_s[3]);
    }
  // The text report names one slow rank, the straggler, and says by what; the ranks' steps, in
  // lock step, single out none (no "slowest rank" beside it).
  const std::string cluster = report::format_cluster({slow});
  const std::string text = cluster.substr(0, cluster.find("AllReduce groups"));  // the ranks' table
  EXPECT_NE(text.find("the one with the least exposed communication"), std::string::npos) << text;
  EXPECT_NE(text.find("rank 3"), std::string::npos) << text;
  for (int k = 0; k < 8; ++k)
    if (k != 3) {
      EXPECT_EQ(text.find("rank " + std::to_string(k)), std::string::npos) << text;
    }
  EXPECT_EQ(text.find("slowest"), std::string::npos) << text;
  ASSERT_EQ(slow.rank_step_p50_ms.size(), 8u);
  // In lock step: each rank's median step is the straggler's, up to where each rank's step ends
  // after the AllReduce (its own last ops), well under a microsecond.
  for (std::size_t k = 0; k < 8; ++k)
    EXPECT_NEAR(slow.rank_step_p50_ms[k], slow.rank_step_p50_ms[3], 1e-5 * slow.rank_step_p50_ms[3]);
  EXPECT_EQ(report::run_json(slow)["ranks"]["step_time_ms_p50"].size(), 8u);
  // The HTML report shows every rank's waits and names the straggler.
  const std::string page = report::html_compare({}, {slow});
  EXPECT_NE(page.find("id=\"allreduce-groups\""), std::string::npos);
  EXPECT_NE(page.find("id=\"chart-ranks-loop-sink\""), std::string::npos);
  EXPECT_NE(page.find("wait for rank 3"), std::string::npos);
  std::size_t bars = 0;
  for (auto at = page.find("<title>rank "); at != std::string::npos; at = page.find("<title>rank ", at + 1)) ++bars;
  EXPECT_EQ(bars, 2u * 8);
  // A rank's own settings are its host's and pipeline's, for a rank that exists.
  r.rank_sets = {{3, {"aicore.cores=16"}}};
  EXPECT_THROW(sim::run(r), sim::InputError);
  r.rank_sets = {{8, {"pipeline.num_parallel_workers=1"}}};
  EXPECT_THROW(sim::run(r), sim::InputError);
}

TEST(DataParallel, TheFusionAdvisorFindsAStepNoLongerThanTheSplitsItWasGiven) {
  sim::RunRequest r = resnet(8, {85, 160});
  r.steps_per_epoch = 20;
  const sim::FusionAdvice advice = sim::advise_fusion(r, 40);
  EXPECT_EQ(advice.gradients, 161);
  ASSERT_EQ(advice.candidates.size(), 1u + 4 + 1);  // one group, splits at 39/79/119/159, the given one
  for (std::size_t i = 1; i < advice.candidates.size(); ++i)
    EXPECT_LE(advice.candidates[i - 1].step_ms, advice.candidates[i].step_ms);
  double one_group = -1, given = -1;
  for (const auto& c : advice.candidates) {
    if (c.split.empty()) one_group = c.step_ms;
    if (c.split == std::vector<std::int64_t>{85, 160}) given = c.step_ms;
  }
  EXPECT_LE(advice.candidates.front().step_ms, given);
  EXPECT_LT(advice.candidates.front().step_ms, one_group);
  EXPECT_THROW(sim::advise_fusion(resnet(1), 10), sim::InputError);
}

TEST(DataParallel, ScalingToThousandsOfDevicesAttributesEveryPointOfLostEfficiency) {
  // 1 to 1024 devices with a straggler (rank 3 on two workers): at every point the causes add up
  // to the efficiency lost, one device loses nothing, and the straggler's wait shows where rank 3
  // is in the run and not before.
  sim::RunRequest r = resnet(1024, {85, 160});
  r.steps_per_epoch = 10;
  r.rank_sets = {{3, {"pipeline.num_parallel_workers=1"}}};
  const std::vector<sim::ScalingPoint> curve = sim::scaling_curve(r, sim::run(r));
  ASSERT_EQ(curve.size(), 11u);  // 1, 2, 4, 8, ..., 1024
  for (const auto& p : curve) {
    SCOPED_TRACE(std::to_string(p.devices) + " devices");
    ASSERT_EQ(p.lost.size(), 1u);
    double sum = 0;
    for (double v : p.lost[0]) sum += v;
    EXPECT_NEAR(sum, 1 - p.efficiency[0], 1e-9);
    EXPECT_GE(p.lost[0][1], 0);  // waiting for stragglers is never negative
    if (p.devices == 1) {
      for (double v : p.lost[0]) EXPECT_EQ(v, 0);
    }
    if (p.devices <= 2) {
      // Rank 3 is not in the run yet: what is left is the ranks' own small differences (a batch's
      // DMA sharing the HBM with a different kernel on each), a hundredth of the 4-device wait.
      EXPECT_LT(p.lost[0][1], 1e-3);
    }
    if (p.devices >= 2) {
      EXPECT_GT(p.lost[0][0], 0);  // the gradients' AllReduce
    }
  }
  EXPECT_GT(curve[2].lost[0][1], 0.01);  // 4 devices: rank 3 on one worker holds the others back
  // More servers, longer rings: the exposed collectives' share grows from one server on.
  for (std::size_t i = 4; i < curve.size(); ++i) EXPECT_GT(curve[i].lost[0][0], curve[i - 1].lost[0][0]);
}

TEST(DataParallel, ScalingEfficiencyIsAtMostOne) {
  sim::RunRequest r = resnet(8, {85, 160});
  const sim::RunOutcome eight = sim::run(r);
  const std::vector<double> eff = sim::scaling_efficiency(r, eight);
  ASSERT_EQ(eff.size(), 1u);
  EXPECT_GT(eff[0], 0.3);
  EXPECT_LE(eff[0], 1.0);
  // The curve: 1, 2, 4 and 8 devices, more samples/s with every doubling, never above linear,
  // ending with the 8-device run itself.
  const std::vector<sim::ScalingPoint> curve = sim::scaling_curve(r, eight);
  ASSERT_EQ(curve.size(), 4u);
  for (std::size_t i = 0; i < curve.size(); ++i) {
    EXPECT_EQ(curve[i].devices, std::int64_t{1} << i);
    EXPECT_LE(curve[i].efficiency[0], 1.0 + 1e-12);
    if (i > 0) {
      EXPECT_GT(curve[i].samples_per_s[0], curve[i - 1].samples_per_s[0]);
    }
  }
  EXPECT_DOUBLE_EQ(curve.front().efficiency[0], 1.0);
  EXPECT_DOUBLE_EQ(curve.back().efficiency[0], eff[0]);
  EXPECT_DOUBLE_EQ(curve.back().samples_per_s[0], eight.runs.front().samples_per_s());
  // Two servers: 1, 2, 4, 8, 16.
  EXPECT_EQ(sim::scaling_curve(resnet(16), sim::run(resnet(16))).size(), 5u);
  // The HTML report draws the curve with its linear reference, and each group in a mean step.
  runtime::RunResult run = eight.runs.front();
  run.scaling = nlohmann::ordered_json::array();
  for (const auto& p : curve) {
    nlohmann::ordered_json lost;
    for (std::size_t c = 0; c < sim::kScalingLosses.size(); ++c) lost[sim::kScalingLosses[c]] = p.lost[0][c];
    run.scaling.push_back({{"devices", p.devices},
                           {"samples_per_s", p.samples_per_s[0]},
                           {"step_ms", p.step_ms[0]},
                           {"efficiency", p.efficiency[0]},
                           {"lost", lost}});
  }
  const std::string page = report::html_compare({}, {run});
  EXPECT_NE(page.find("id=\"chart-scaling\""), std::string::npos);
  // A bar per cluster size: the efficiency kept and each cause of the rest.
  EXPECT_NE(page.find("id=\"chart-scaling-lost-loop-sink\""), std::string::npos);
  EXPECT_NE(page.find(fmt::format("8 devices, collective: {:.1f}% of the run", 100 * curve.back().lost[0][0])),
            std::string::npos);
  EXPECT_NE(page.find("class=\"reference\""), std::string::npos);
  EXPECT_NE(page.find("id=\"chart-groups-loop-sink\""), std::string::npos);
  const std::string exposed = fmt::format("group 1: {:.3f} ms exposed", run.comm_groups[1]["exposed_ms"].get<double>());
  EXPECT_NE(page.find(exposed), std::string::npos) << exposed;
}

TEST(DataParallel, TwoServersSpendLongerInAllReduceThanOne) {
  const auto one = sim::run(resnet(8)).runs.front();
  const auto two = sim::run(resnet(16)).runs.front();
  ASSERT_TRUE(one.failure.empty() && two.failure.empty());
  const auto comm = static_cast<std::size_t>(sim::Phase::Comm);
  EXPECT_GT(two.breakdown_s[comm], one.breakdown_s[comm]);
  EXPECT_GT(two.steps.tail.stats().mean_ms, one.steps.tail.stats().mean_ms);
  EXPECT_EQ(two.rank_step_mean_ms.size(), 16u);
  EXPECT_GT(two.samples_per_s(), one.samples_per_s());
}

TEST(DataParallel, ServersAlikeSimulatedOnceReportWhatEveryRankSimulatedReports) {
  // A server kind simulated once stands for the servers alike; a rank of its own (a straggler)
  // makes its server a kind of its own. The report, text and JSON, is the one simulating every
  // rank gives — but for the count of ranks simulated.
  struct Case {
    std::int64_t devices;
    std::map<std::int64_t, std::vector<std::string>> rank_sets;
    std::int64_t simulated;
  };
  const std::vector<Case> cases{{8, {}, 8},
                                {16, {}, 8},
                                {64, {}, 8},
                                {16, {{3, {"pipeline.num_parallel_workers=1"}}}, 16},
                                {64, {{3, {"pipeline.num_parallel_workers=1"}}}, 16},
                                {64, {{12, {"host.cpu_cores=8"}}, {40, {"pipeline.num_parallel_workers=2"}}}, 24}};
  for (const Case& c : cases) {
    SCOPED_TRACE(std::to_string(c.devices) + " devices, " + std::to_string(c.rank_sets.size()) + " ranks of their own");
    sim::RunRequest r = resnet(c.devices, {85, 160});
    r.steps_per_epoch = 6;
    r.strategies = {runtime::Strategy::LoopSink, runtime::Strategy::DataSink};
    r.rank_sets = c.rank_sets;
    const sim::RunOutcome once = sim::run(r);
    r.every_rank = true;
    const sim::RunOutcome every = sim::run(r);
    nlohmann::ordered_json a = once.report(), b = every.report();
    for (std::size_t i = 0; i < a["runs"].size(); ++i) {
      EXPECT_EQ(a["runs"][i]["ranks"]["simulated"], c.simulated);
      EXPECT_EQ(b["runs"][i]["ranks"]["simulated"], c.devices);
      a["runs"][i]["ranks"].erase("simulated");
      b["runs"][i]["ranks"].erase("simulated");
    }
    EXPECT_EQ(a.dump(), b.dump());
    std::string text = report::format_table(once.header, once.runs);
    const auto line = text.find("ranks simulated: ");
    ASSERT_EQ(line != std::string::npos, c.simulated < c.devices);
    if (line != std::string::npos) text.erase(line, text.find('\n', line) + 1 - line);
    EXPECT_EQ(text, report::format_table(every.header, every.runs));
  }
}

TEST(DataParallel, ThousandsOfRanksRunAsOneServerAndTooManyThreadsAreRefusedBeforeBuilding) {
  // 4096 devices of servers alike: one server simulated.
  sim::RunRequest r = resnet(4096, {85, 160});
  r.steps_per_epoch = 3;
  const sim::RunOutcome out = sim::run(r);
  ASSERT_FALSE(out.failed()) << out.failure_message();
  EXPECT_EQ(out.runs.front().simulated_ranks, 8);
  EXPECT_EQ(out.runs.front().rank_comm_s.size(), 4096u);
  // Every rank of them: 40960 thread stacks, two mappings each, beyond Linux's default
  // vm.max_map_count — refused at once, naming the limit, instead of failing minutes later.
  std::ifstream limit_file("/proc/sys/vm/max_map_count");
  std::int64_t limit = 0;
  if (!(limit_file >> limit) || limit > 80000) GTEST_SKIP() << "vm.max_map_count is " << limit;
  r.every_rank = true;
  try {
    sim::run(r);
    ADD_FAILURE() << "not refused";
  } catch (const sim::InputError& e) {
    EXPECT_THAT(e.what(), ::testing::HasSubstr("vm.max_map_count"));
    EXPECT_THAT(e.what(), ::testing::HasSubstr("drop --every-rank"));
  }
}

TEST(DataParallel, TimeToTrainAddsUpToItsPartsWithEvaluationOnServersAlike) {
  // Two epochs on two servers, evaluating after each: the run from start to stop is its steps, its
  // evaluation passes, its set-up and its exposed communication — nothing left over, nothing twice.
  sim::RunRequest r = resnet(16, {85, 160});
  r.steps_per_epoch = 8;
  r.epochs = 2;
  r.eval_every = 1;
  const sim::RunOutcome once = sim::run(r);
  ASSERT_FALSE(once.failed()) << once.failure_message();
  const runtime::RunResult& run = once.runs.front();
  const runtime::TimeToTrain t = run.time_to_train();
  EXPECT_EQ(t.total, run.sim_time_s);
  EXPECT_NEAR(t.training + t.evaluation + t.initialisation + t.exposed_comm, t.total, 1e-12 * t.total);
  for (double part : {t.training, t.evaluation, t.initialisation, t.exposed_comm}) EXPECT_GT(part, 0);
  EXPECT_EQ(run.evaluation().passes, 2);
  EXPECT_NE(report::format_table(once.header, once.runs).find("time to train"), std::string::npos);
  const std::string page = report::html_compare(once.header, once.runs);
  EXPECT_NE(page.find(fmt::format("<td>{:.3f}</td><td>{:.3f}</td><td>{:.3f}</td>", t.total, t.training, t.evaluation)),
            std::string::npos);
  // The evaluation pipelines share the hosts' cores too: servers alike still report alike.
  r.every_rank = true;
  nlohmann::ordered_json a = once.report(), b = sim::run(r).report();
  a["runs"][0]["ranks"].erase("simulated");
  b["runs"][0]["ranks"].erase("simulated");
  EXPECT_EQ(a.dump(), b.dump());
}

TEST(DataParallel, ASweepOfDevicesTimesTheSameJobOnEachClusterSize) {
  // The same two epochs of CIFAR-10 (50,000 images) on 8 and 16 devices: each rank reads its
  // shard, so the steps per epoch halve; each point is the run of that size by itself.
  sim::SweepRequest q;
  q.base.config = test::config_request();
  q.base.workload = "resnet50-cifar10";
  q.base.batch_size = 32;
  q.base.strategies = {runtime::Strategy::LoopSink};
  q.base.epochs = 2;
  q.base.eval_every = 1;
  q.param = "devices";
  q.values = {"8", "16"};
  const sim::SweepOutcome out = sim::sweep(q);
  ASSERT_FALSE(out.failed()) << out.failure_message();
  ASSERT_EQ(out.points.size(), 2u);
  EXPECT_EQ(out.points[0].run.session.steps_per_epoch, 50000 / (32 * 8));
  EXPECT_EQ(out.points[1].run.session.steps_per_epoch, 50000 / (32 * 16));
  for (std::size_t i = 0; i < 2; ++i) {
    sim::RunRequest alone = q.base;
    alone.devices = std::stoll(q.values[i]);
    const sim::RunOutcome o = sim::run(alone);
    ASSERT_FALSE(o.failed()) << o.failure_message();
    EXPECT_EQ(out.points[i].run.sim_time_s, o.runs.front().sim_time_s) << q.values[i];
    const runtime::TimeToTrain a = out.points[i].run.time_to_train(), b = o.runs.front().time_to_train();
    EXPECT_EQ(a.training, b.training);
    EXPECT_EQ(a.evaluation, b.evaluation);
    EXPECT_EQ(a.initialisation, b.initialisation);
    EXPECT_EQ(a.exposed_comm, b.exposed_comm);
  }
  // Twice the devices, the same epochs: the training part shrinks.
  EXPECT_LT(out.points[1].run.time_to_train().training, out.points[0].run.time_to_train().training);
  // Text, JSON and a stacked bar per cluster size.
  EXPECT_NE(report::sweep_table(out).find("time to train"), std::string::npos);
  EXPECT_EQ(out.report()["rows"][1]["time_to_train_s"]["total"].get<double>(), out.points[1].run.sim_time_s);
  const std::string page = report::html_sweep(out.header, out.param, out.points, out.conclusion);
  const auto chart = page.find("id=\"chart-time-to-train\"");
  ASSERT_NE(chart, std::string::npos);
  const std::string svg = page.substr(chart, page.find("</svg>", chart) - chart);
  for (const char* size : {"8 devices, loop-sink", "16 devices, loop-sink"})
    for (const char* part : {"training", "evaluation", "initialisation", "exposed comm"})
      EXPECT_NE(svg.find(fmt::format("<title>{}, {}:", size, part)), std::string::npos) << size << ": " << part;
  // A device count that is not one is refused before anything runs.
  q.values = {"8", "0"};
  EXPECT_THROW(sim::sweep(q), sim::InputError);
}

TEST(DataParallel, EightRanksGiveTheSameReportEveryTime) {
  const sim::RunRequest r = resnet(8, {85, 160});
  const std::string first = sim::run(r).report().dump();
  EXPECT_EQ(sim::run(r).report().dump(), first);
  // A single device reports no cluster.
  EXPECT_FALSE(sim::run(resnet(1)).report()["runs"][0].contains("devices"));
}

/// The cells of a text table's line (two spaces or more apart).
std::vector<std::string> cells_of(const std::string& line) {
  std::vector<std::string> cells;
  std::size_t at = line.find_first_not_of(' ');
  while (at != std::string::npos) {
    const auto end = line.find("  ", at);
    cells.push_back(line.substr(at, end == std::string::npos ? std::string::npos : end - at));
    at = end == std::string::npos ? end : line.find_first_not_of(' ', end);
  }
  return cells;
}

// Eight LeNet-5 ranks for 200 steps: the first steps (graph load, pipeline filling) pull the sink
// modes' mean above their p99. Every table that prints a mean step prints the median beside it,
// and says why the mean stands above it.
TEST(DataParallel, TheMedianStandsBesideEveryMeanStep) {
  sim::RunRequest r;
  r.config = test::config_request();
  r.devices = 8;
  r.epochs = 1;
  r.steps_per_epoch = 200;
  const auto out = sim::run(r);
  const std::string table = report::format_table(out.header, out.runs);
  bool above_p99 = false;
  for (const auto& run : out.runs) {
    const runtime::StepStats st = run.steps.step.stats();
    EXPECT_LE(st.p50_ms, st.p99_ms);  // nearest-rank percentiles are ordered
    above_p99 = above_p99 || st.mean_ms > 1.01 * st.p99_ms;
    const std::string name = runtime::strategy_name(run.session.strategy);
    int rows = 0;
    std::istringstream lines(table);
    for (std::string line; std::getline(lines, line);) {
      const auto c = cells_of(line);
      if (c.empty() || c[0] != name) continue;
      ++rows;
      if (rows == 1) {  // the figures: mean, median, p99
        EXPECT_EQ(c[3], fmt::format("{:.4f}", st.mean_ms));
        EXPECT_EQ(c[4], fmt::format("{:.4f}", st.p50_ms));
        EXPECT_EQ(c[5], fmt::format("{:.4f}", st.p99_ms));
      } else if (rows == 4) {  // the step trace (after the breakdown and the time to train)
        const runtime::StepStats fb = run.steps.fp_bp.stats();
        EXPECT_EQ(c[2], fmt::format("{:.4f} / {:.4f} / {:.4f}", fb.mean_ms, fb.p50_ms, fb.p99_ms));
      } else if (rows == 5) {  // the cluster: the ranks' means and medians
        const auto [lo, hi] = std::minmax_element(run.rank_step_p50_ms.begin(), run.rank_step_p50_ms.end());
        EXPECT_EQ(c[2], fmt::format("{:.4f} to {:.4f}", *lo, *hi));
        EXPECT_DOUBLE_EQ(run.rank_step_p50_ms[0], st.p50_ms);  // rank 0's is the run's
      }
    }
    EXPECT_GE(rows, 5) << name;
  }
  ASSERT_TRUE(above_p99);  // the case the median is there for
  EXPECT_NE(table.find(report::kPulledUpNote), std::string::npos);
  // A run whose mean is within 5% of its median and 1% of its p99 draws no note.
  r.strategies = {runtime::Strategy::NonSink};
  r.steps_per_epoch = 50;  // p99 is the slowest step
  const auto steady = sim::run(r);
  const runtime::StepStats st = steady.runs[0].steps.step.stats();
  ASSERT_FALSE(report::mean_pulled_up(st));
  ASSERT_LT(st.mean_ms, st.p99_ms);
  EXPECT_EQ(report::format_table(steady.header, steady.runs).find(report::kPulledUpNote), std::string::npos);
  // The HTML summary carries the median too.
  EXPECT_NE(
      report::html_compare({}, out.runs).find(fmt::format("<td>{:.4f}</td>", out.runs[3].steps.step.stats().p50_ms)),
      std::string::npos);
}

}  // namespace
}  // namespace ascendsim

namespace ascendsim {
namespace {

TEST(DataParallelHbm, TheFirstGroupsAllReduceSharesTheHbmWithTheBackwardPass) {
  // ResNet-50 b32 on 8 devices, the seed's [85, 160] split: group 0's AllReduce overlaps the
  // backward pass and its traffic slows the kernels it meets; without the sharing it is free.
  sim::RunRequest r = resnet(8, {85, 160});
  r.trace = true;
  r.trace_first_step = 10;
  r.trace_last_step = 12;
  const auto on_out = sim::run(r);
  const runtime::RunResult& on = on_out.runs.front();
  r.config.sets.push_back("memory.hbm_contention=false");
  r.trace = false;
  const runtime::RunResult off = sim::run(r).runs.front();
  ASSERT_TRUE(on.failure.empty()) << on.failure;
  ASSERT_TRUE(off.failure.empty()) << off.failure;
  // Backward takes longer, by what the report charges; the tail (after backward) does not shrink.
  const double fp_bp_on = on.steps.fp_bp.stats().mean_ms, fp_bp_off = off.steps.fp_bp.stats().mean_ms;
  const auto& c = on.contention;
  const double lost = c["hbm_lost_ms_per_step"]["compute_stream"].get<double>();
  EXPECT_GT(fp_bp_on, fp_bp_off + 0.1);
  EXPECT_NEAR(fp_bp_on - fp_bp_off, lost, 0.1 * lost);
  EXPECT_GE(on.steps.tail.stats().p50_ms, off.steps.tail.stats().p50_ms - 1e-6);
  EXPECT_GT(on.steps.step.stats().p50_ms, off.steps.step.stats().p50_ms);
  // Charged to the collectives, nearly all of it (the batches' DMA is the rest).
  EXPECT_GT(c["hbm_lost_to_ms_per_step"]["collectives"].get<double>(), 0.9 * lost);
  EXPECT_NEAR(c["hbm_lost_to_ms_per_step"]["collectives"].get<double>() +
                  c["hbm_lost_to_ms_per_step"]["dma"].get<double>() +
                  c["hbm_lost_to_ms_per_step"]["kernels"].get<double>(),
              lost, 1e-9 + 1e-6 * lost);
  // Without sharing nothing is lost.
  EXPECT_EQ(off.contention["hbm_lost_ms_per_step"]["compute_stream"].get<double>(), 0);
  // Conservation: the HBM carried the kernels' bytes (as the AI cores count them) and the flows';
  // the collectives' flows are what the ring moves through each member's HBM.
  const auto& hbm = on.stats["chip"]["hbm"];
  EXPECT_DOUBLE_EQ(hbm["kernel_bytes"].get<double>(), on.stats["chip"]["aicore"]["gm_bytes"].get<double>());
  EXPECT_NEAR(hbm["bytes"].get<double>(), hbm["kernel_bytes"].get<double>() + hbm["flow_bytes"].get<double>(),
              1e-9 * hbm["bytes"].get<double>());
  double ring = 0;  // per step: reduce-scatter 5 pieces per step, all-gather 2, 7 steps, S/8 pieces
  for (const auto& g : on.comm_groups) ring += 7.0 * (5 + 2) * g["bytes"].get<double>() / 8;
  const double dma = on.stats["chip"]["hostif"]["h2d"]["bytes"].get<double>() +
                     on.stats["chip"]["hostif"]["d2h"]["bytes"].get<double>();
  const double broadcast = 2 * on.cluster_links["broadcast_bytes"].get<double>();
  EXPECT_NEAR(hbm["flow_bytes"].get<double>(), static_cast<double>(on.steps_completed) * ring + dma + broadcast,
              1e-6 * hbm["flow_bytes"].get<double>());
  EXPECT_EQ(hbm["flows_short"].get<double>(), 0);
  // In any window the chip's HBM moved no more than its bandwidth allows: the trace's counter of
  // each chip's traffic never exceeds its sustained bandwidth (843 GB/s), and reaches it where
  // kernels share it.
  const auto trace = nlohmann::json::parse(on_out.trace)["traceEvents"];
  double peak = 0;
  int samples = 0;
  for (const auto& e : trace)
    if (e.value("ph", "") == "C" && e.value("name", "") == "HBM GB/s") {
      peak = std::max(peak, e["args"]["value"].get<double>());
      ++samples;
    }
  EXPECT_GT(samples, 100);
  const double bandwidth = aicore::MemoryConfig{}.hbm_gbps();
  EXPECT_LE(peak, bandwidth + 0.05);  // (the counter is rounded to 0.1 GB/s)
  EXPECT_GT(peak, 0.9 * bandwidth);
}

}  // namespace
}  // namespace ascendsim
