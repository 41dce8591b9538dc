#define SC_INCLUDE_DYNAMIC_PROCESSES
// HCCL's algorithms between servers (hccl.inter_server_algorithm): each one's collective, run
// through Hccl as a training run's ranks call it, against its formula on power-of-two and other
// server counts; what "auto" picks on the 910 and the 910B presets; and that no algorithm gets
// faster with more bytes.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "aicpu/hccl.h"
#include "sim/config.h"
#include "sim/kernel.h"
#include "tests/cli_support.h"
#include "tests/test_support.h"

namespace ascendsim {
namespace {

using hostif::Collective;

const std::vector<std::string> kAlgorithms = {"ring", "halving-doubling", "nhr", "nb", "pipeline"};
const std::vector<int> kServers = {2, 3, 4, 6, 8, 16};

/// Every rank of `servers` servers of 8 starts `kind` of `bytes` at time 0; when the last left.
double simulated(const aicpu::HcclConfig& cfg, Collective kind, int servers, std::int64_t bytes) {
  sim::KernelScope kernel;
  const int n = 8 * servers;
  aicpu::Hccl hccl("hccl", cfg, n, 1200, 8);
  double left = 0;
  for (int r = 0; r < n; ++r)
    sc_core::sc_spawn([&, r] {
      hccl.collective(r, kind, bytes);
      left = std::max(left, sc_core::sc_time_stamp().to_seconds());
    });
  sc_core::sc_start();
  return left;
}

/// The generic-x86 values (aicpu::HcclConfig's defaults): α, B within a server; α_r, B_r between
/// servers; H the HBM bandwidth of the reductions. All servers under one leaf switch.
struct Formula {
  double a = 54.6e-6, b = 63e9, ar = 60e-6, br = 12.5e9, h = 1200e9, m = 8;
  /// A half on the server's ring of m: m−1 steps of S/m, with a reduction each in a reduce-scatter.
  double server_half(double s, bool reduce) const {
    return (m - 1) * (a + s / m / b) + (reduce ? (m - 1) * 3 * s / m / h : 0.0);
  }
  /// A level-1 half of S' between k servers: `steps` steps of latency, `volume`·S' sent by each
  /// server, with `volume`·S' reduced in a reduce-scatter.
  double level1(double steps, double volume, double sp, bool reduce) const {
    return steps * ar + volume * sp / br + (reduce ? 3 * volume * sp / h : 0.0);
  }
  /// One level-1 half of S' on k servers by `algo` (docs/model.md, "HCCL's algorithms between
  /// servers"): its step count and the bytes each server sends.
  double half(const std::string& algo, int k, double sp, bool reduce) const {
    const int p = 1 << static_cast<int>(std::floor(std::log2(k))), log_up = static_cast<int>(std::ceil(std::log2(k)));
    if (algo == "ring" || algo == "pipeline") return level1(k - 1, (k - 1.0) / k, sp, reduce);
    if (algo == "halving-doubling")  // log2 p steps of (p−1)/p, and a fold of S' when k > p
      return level1(std::log2(p) + (k > p), (p - 1.0) / p + (k > p), sp, reduce);
    return level1(log_up, (k - 1.0) / k, sp, reduce);  // nhr, nb: ⌈log2 k⌉ steps, (k−1)/k
  }
  /// The hierarchical AllReduce of S on k servers: the server's reduce-scatter, both level-1
  /// halves on S/m, the server's all-gather.
  double all_reduce(const std::string& algo, int k, double s) const {
    if (algo == "pipeline") return pipeline(k, s);
    return server_half(s, true) + half(algo, k, s / m, true) + half(algo, k, s / m, false) + server_half(s, false);
  }
  /// The pipeline: c chunks, the stages (server reduce-scatter, the rings between servers, server
  /// all-gather) on a chunk a, b, z: a + b + z + (c−1)·max(a, b, z) at the best c up to 64.
  double pipeline(int k, double s) const {
    double best = INFINITY;
    for (int c = 1; c <= 64; ++c) {
      const double x = s / c,
                   st[] = {server_half(x, true), half("ring", k, x / m, true) + half("ring", k, x / m, false),
                           server_half(x, false)};
      best = std::min(best, st[0] + st[1] + st[2] + (c - 1) * std::max({st[0], st[1], st[2]}));
    }
    return best;
  }
};

aicpu::HcclConfig with(const std::string& algo) {
  aicpu::HcclConfig cfg;
  cfg.inter_server_algorithm = algo;
  cfg.servers_per_leaf = 16;  // one leaf: no spine in the formulas
  return cfg;
}

TEST(HcclAlgorithms, EachAlgorithmsAllReduceEqualsItsFormulaOnPowerOfTwoAndOtherServerCounts) {
  const Formula f;
  for (const std::int64_t bytes : {std::int64_t{64} << 10, std::int64_t{100} << 20})
    for (const std::string& algo : kAlgorithms)
      for (int k : kServers) {
        const double expect = f.all_reduce(algo, k, static_cast<double>(bytes));
        EXPECT_NEAR(simulated(with(algo), Collective::AllReduce, k, bytes), expect, 1e-9 * expect + 2e-12)
            << algo << " on " << k << " servers, " << bytes << " B";
      }
}

TEST(HcclAlgorithms, ReduceScatterAndAllGatherAreTheAlgorithmsHalves) {
  const Formula f;
  const double s = 64.0 * 1024 * 1024;
  for (const char* algo : {"ring", "halving-doubling", "nhr", "nb"})
    for (int k : kServers) {
      // ReduceScatter: the server's reduce-scatter, then the level-1 one on S/m; AllGather the
      // level-1 all-gather on S/m, then the server's.
      const double rs = f.server_half(s, true) + f.half(algo, k, s / 8, true);
      const double ag = f.half(algo, k, s / 8, false) + f.server_half(s, false);
      EXPECT_NEAR(simulated(with(algo), Collective::ReduceScatter, k, 64 << 20), rs, 1e-9 * rs) << algo << " " << k;
      EXPECT_NEAR(simulated(with(algo), Collective::AllGather, k, 64 << 20), ag, 1e-9 * ag) << algo << " " << k;
    }
}

TEST(HcclAlgorithms, EveryAlgorithmSendsTheSameBytesThroughThePortsSummedOverThem) {
  // Summed over the ports an AllReduce sends 2(k−1)·S/m per local rank whatever the algorithm:
  // the ring's k ports (k−1)/k each, NHR's and NB's the same pieces in fewer steps, halving-
  // doubling's p ports (p−1)/p each and the k−p extra servers' fold S/m each.
  const double s = 100e6;
  for (const std::string& algo : kAlgorithms)
    for (int k : kServers) {
      const auto c = aicpu::Hccl::cost(with(algo), Collective::AllReduce, k, 8, s, 1200);
      EXPECT_NEAR(c.roce_bytes, 8 * 2 * (k - 1) * s / 8, 1e-6 * s) << algo << " " << k;
      EXPECT_NEAR(c.hccs_bytes, 8 * k * 2 * 7 * s / 8, 1e-6 * s) << algo << " " << k;
    }
}

TEST(HcclAlgorithms, LogarithmicAlgorithmsTakeFewerStepsThanTheRingAndThePipelineHidesTheSmallerStage) {
  // Latency-bound (4 KiB on 16 servers): ⌈log2 k⌉ steps beat k−1. Bandwidth-bound (1 GiB on 4
  // servers): the pipeline overlaps the server rings with the RoCE rings and beats the ring.
  auto t = [](const std::string& algo, int k, double s) {
    return aicpu::Hccl::cost(with(algo), Collective::AllReduce, k, 8, s, 1200).seconds;
  };
  for (const char* algo : {"halving-doubling", "nhr", "nb"}) EXPECT_LT(t(algo, 16, 4096), 0.5 * t("ring", 16, 4096));
  EXPECT_LT(t("pipeline", 4, 1 << 30), 0.9 * t("ring", 4, 1 << 30));
  // With one device per server there is nothing to overlap: the pipeline is the ring.
  const auto one = [](const std::string& algo) {
    return aicpu::Hccl::cost(with(algo), Collective::AllReduce, 4, 1, 1 << 30, 1200).seconds;
  };
  EXPECT_DOUBLE_EQ(one("pipeline"), one("ring"));
}

/// The HCCL configuration a run on `server` gets (its chip preset's rule among it).
aicpu::HcclConfig preset(const std::string& server) {
  sim::ConfigRequest req = test::config_request();
  req.server = server;
  return sim::load_config(req).chip.hccl;
}

aicpu::CollectiveSpan servers(const aicpu::HcclConfig& cfg, int k) {
  const int g = aicpu::Hccl::network_size(cfg, 8);
  return {k, 8 / g, g, aicpu::Hccl::leaves_of(cfg, k)};
}

TEST(HcclAlgorithms, AutoOnThe910PicksRingUnlessTheServersAreAPowerOfTwoAsF24States) {
  // F24: with HCCL_ALGO unset, Atlas training products (Ascend 910) use ring between servers when
  // the server count is not a power of 2, recursive halving-doubling otherwise — at any size.
  for (const char* server : {"atlas800-9000", "generic-x86"}) {
    const aicpu::HcclConfig cfg = preset(server);
    ASSERT_EQ(cfg.inter_server_algorithm, "auto") << server;
    ASSERT_EQ(cfg.auto_rule, "power-of-two-servers") << server;
    for (double bytes : {4096.0, 1e6, 1e8, 1e9}) {
      for (int k : {3, 6, 12})
        EXPECT_EQ(aicpu::Hccl::algorithm(cfg, Collective::AllReduce, servers(cfg, k), bytes, 1200), "ring") << k;
      for (int k : {2, 4, 8, 16, 512})
        EXPECT_EQ(aicpu::Hccl::algorithm(cfg, Collective::AllReduce, servers(cfg, k), bytes, 1200), "halving-doubling")
            << k;
    }
  }
  // What a run's collective takes is the chosen algorithm's.
  aicpu::HcclConfig cfg = preset("atlas800-9000");
  for (int k : kServers) {
    aicpu::HcclConfig chosen = cfg;
    chosen.inter_server_algorithm = (k & (k - 1)) == 0 ? "halving-doubling" : "ring";
    EXPECT_DOUBLE_EQ(simulated(cfg, Collective::AllReduce, k, 100 << 20),
                     simulated(chosen, Collective::AllReduce, k, 100 << 20))
        << k;
  }
}

TEST(HcclAlgorithms, AutoOnThe910BPicksTheSettableAlgorithmOfLeastModelledTime) {
  // F24 says only that Atlas A2 chooses by product, server count and data size; the model's rule
  // (assumed): the settable algorithm whose modelled time is least for that kind, span and size.
  const aicpu::HcclConfig cfg = preset("atlas800t-a2");
  ASSERT_EQ(cfg.auto_rule, "least-time");
  const double hbm = 1759.2 * 0.7025;
  for (Collective kind : {Collective::AllReduce, Collective::ReduceScatter, Collective::AllGather})
    for (int k : kServers)
      for (double bytes : {4096.0, 1e6, 1e8, 1e9}) {
        const std::string pick = aicpu::Hccl::algorithm(cfg, kind, servers(cfg, k), bytes, hbm);
        const double t = aicpu::Hccl::cost(cfg, kind, servers(cfg, k), bytes, hbm).seconds;
        for (const std::string& algo : kAlgorithms) {
          aicpu::HcclConfig other = cfg;
          other.inter_server_algorithm = algo;
          const double o = aicpu::Hccl::cost(other, kind, servers(cfg, k), bytes, hbm).seconds;
          EXPECT_LE(t, o) << k << " servers, " << bytes << " B: " << pick << " against " << algo;
          if (algo == pick) {
            EXPECT_DOUBLE_EQ(t, o);
          }
        }
      }
  // The choice follows the size: latency-bound small AllReduces on many servers take a
  // logarithmic algorithm, large ones the pipeline (the mesh and RoCE at once).
  const auto pick = [&](int k, double bytes) {
    return aicpu::Hccl::algorithm(cfg, Collective::AllReduce, servers(cfg, k), bytes, hbm);
  };
  EXPECT_THAT(pick(16, 4096), testing::AnyOf("halving-doubling", "nhr", "nb"));
  EXPECT_THAT(pick(6, 4096), testing::AnyOf("halving-doubling", "nhr", "nb"));
  EXPECT_EQ(pick(16, 1e9), "pipeline");
  EXPECT_EQ(pick(3, 1e9), "pipeline");
}

TEST(HcclAlgorithms, MoreBytesAreNeverFaster) {
  for (const char* server : {"atlas800-9000", "atlas800t-a2"}) {
    const aicpu::HcclConfig base = preset(server);
    std::vector<std::string> algos = kAlgorithms;
    algos.push_back("auto");
    for (const std::string& algo : algos) {
      aicpu::HcclConfig cfg = base;
      cfg.inter_server_algorithm = algo;
      for (Collective kind : {Collective::AllReduce, Collective::ReduceScatter, Collective::AllGather})
        for (int k : {2, 3, 6, 16}) {
          double last = 0;
          for (double bytes = 1024; bytes <= 4e9; bytes *= 1.37) {
            const double t = aicpu::Hccl::cost(cfg, kind, servers(cfg, k), bytes, 1200).seconds;
            EXPECT_GE(t, last) << server << " " << algo << " " << k << " servers at " << bytes << " B";
            last = t;
          }
        }
    }
  }
}

class HcclAlgorithmCli : public test::CliFixture {
 protected:
  HcclAlgorithmCli() : CliFixture("ascendsim_hccl_") {}
};

TEST_F(HcclAlgorithmCli, AnUnknownAlgorithmIsRefusedInOneLineNamingTheKeyAndTheAllowedValues) {
  const std::filesystem::path json = m_dir / "r.json", yaml = m_dir / "bad.yaml";
  { std::ofstream(yaml) << "hccl:\n  inter_server_algorithm: foo\n"; }
  for (const std::string& args : {std::string("--set hccl.inter_server_algorithm=foo"), "--config " + yaml.string(),
                                  std::string("--set hccl.auto_rule=fastest")}) {
    const auto r =
        run("train --strategy graph-sink --workload resnet50 --devices 16 " + args + " --json " + json.string());
    EXPECT_EQ(r.code, 2) << args << "\n" << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    if (args.find("auto_rule") != std::string::npos)
      EXPECT_THAT(r.err, testing::HasSubstr("'hccl.auto_rule' must be one of power-of-two-servers|least-time"));
    else
      EXPECT_THAT(r.err, testing::HasSubstr("'hccl.inter_server_algorithm' must be one of "
                                            "auto|ring|halving-doubling|nhr|nb|pipeline, got 'foo'"));
    EXPECT_FALSE(std::filesystem::exists(json)) << args;
  }
  // `ascendsim params` lists the key with its values.
  const auto p = run("params");
  EXPECT_THAT(p.out, testing::HasSubstr("auto|ring|halving-doubling|nhr|nb|pipeline"));
}

}  // namespace
}  // namespace ascendsim
