#define SC_INCLUDE_DYNAMIC_PROCESSES
// Server presets (configs/servers/): their sources' values, where they sit in the precedence of
// the configuration, the host a server's ranks share, and the HCCS networks its collectives use.
#include <sys/wait.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <tuple>
#include <utility>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "aicpu/hccl.h"
#include "sim/api.h"
#include "sim/config.h"
#include "sim/core/error.h"
#include "sim/kernel.h"
#include "sim/rank_table.h"
#include "sim/regression.h"
#include "tests/test_support.h"

namespace ascendsim {
namespace {

namespace fs = std::filesystem;
using hostif::Collective;
using ::testing::AllOf;
using ::testing::HasSubstr;

sim::SystemConfig on_server(const std::string& server) {
  sim::ConfigRequest req = test::config_request();
  req.server = server;
  return sim::load_config(req);
}

std::string error_of(const sim::ConfigRequest& req) {
  try {
    sim::load_config(req);
  } catch (const sim::InputError& e) {
    return e.what();
  }
  return "";
}

TEST(Servers, Atlas800CarriesItsSourcesValues) {
  const sim::SystemConfig c = on_server("atlas800-9000");
  EXPECT_EQ(c.server.name, "atlas800-9000");
  EXPECT_EQ(c.server.chip, "ascend910");
  EXPECT_EQ(c.chip.name, "ascend910");        // the server's chip, as none was named
  EXPECT_EQ(c.host.cpu_cores, 4 * 48);        // S1: 4 x Kunpeng 920 of 48 cores; S3: 192 cores
  EXPECT_EQ(c.server.devices_per_server, 8);  // S1: 8 x Ascend 910 per node
  EXPECT_EQ(c.chip.hccl.hccs_group_size, 4);  // S2: devices 0-3 and 4-7
  // S1's "PCIE 3.0 x16": 8 GT/s x 16 lanes, 128b/130b encoding, 256 B payload per 280 B TLP.
  const double pcie3_x16 = 8.0 * 16 * 128 / 130 / 8 * 256 / 280;
  EXPECT_NEAR(c.link.h2d_bandwidth_gbps, pcie3_x16, 1e-4);
  EXPECT_NEAR(c.link.d2h_bandwidth_gbps, pcie3_x16, 1e-4);
  EXPECT_NEAR(c.link.pcie_uplink_gbps, pcie3_x16, 1e-4);
  EXPECT_NEAR(c.chip.hccl.pcie_bandwidth_gbps, pcie3_x16, 1e-4);  // the meshes are joined by the same links
  // Slower than the PCIe 4.0 x16 the chip is marketed with (S4), by about the generations' ratio.
  const sim::SystemConfig generic = on_server("generic-x86");
  EXPECT_LT(c.link.h2d_bandwidth_gbps, generic.link.h2d_bandwidth_gbps);
  EXPECT_THAT(sim::server_presets(test::config_request().dir),
              ::testing::IsSupersetOf({std::string("atlas800-9000"), std::string("generic-x86")}));
}

TEST(Servers, Atlas800A2CarriesItsSourcesValues) {
  // S6 (Huawei's modelling tool): 313 TFLOPS fp16, 1.6 TiB/s of HBM, a full mesh of 196 GB/s at
  // 0.5 us within the server, 25 GB/s at 1.5 us between servers.
  const sim::SystemConfig c = on_server("atlas800t-a2");
  EXPECT_EQ(c.chip.name, "ascend910b");
  const auto& core = c.chip.aicore;
  EXPECT_NEAR(2.0 * static_cast<double>(core.cores * core.cube_fp16_macs_per_cycle) * core.freq_ghz * 1e9, 313e12,
              0.001 * 313e12);
  EXPECT_NEAR(c.chip.memory.hbm_bandwidth_gbps, 1.6 * 1099511627776.0 / 1e9, 0.1);
  EXPECT_EQ(c.chip.memory.hbm_gib, 64);
  EXPECT_EQ(c.chip.hccl.hccs_group_size, 8);
  EXPECT_EQ(c.chip.hccl.link_bandwidth_gbps, 196);
  EXPECT_EQ(c.chip.hccl.step_latency_us, 0.5);
  EXPECT_EQ(c.chip.hccl.roce_bandwidth_gbps, 25);
  EXPECT_EQ(c.chip.hccl.roce_step_latency_us, 1.5);
}

TEST(Servers, GenericIsTheDefaultAndKeepsTheBuiltInValues) {
  const sim::SystemConfig unnamed = sim::load_config(test::config_request());
  const sim::SystemConfig generic = on_server("generic-x86");
  sim::SystemConfig a = unnamed, b = generic, built_in;
  EXPECT_EQ(sim::bind_params(a).to_json(), sim::bind_params(b).to_json());
  // Its link and collectives are the built-in (former ascend910 preset's) values.
  EXPECT_EQ(sim::bind_params(a).to_json()["link"], sim::bind_params(built_in).to_json()["link"]);
  EXPECT_EQ(sim::bind_params(a).to_json()["hccl"], sim::bind_params(built_in).to_json()["hccl"]);
  EXPECT_EQ(generic.host.cpu_cores, 32);
}

class ServerPrecedence : public ::testing::Test {
 protected:
  void SetUp() override {
    m_dir = fs::temp_directory_path() /
            ("ascendsim_srv_" + std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()) + "_" +
             std::to_string(::getpid()));
    fs::create_directories(m_dir / "servers");
    fs::create_directories(m_dir / "chips");
    put("host.yaml", "host:\n  cpu_cores: 16\n  op_launch_us: 1\n");
    put("servers/s.yaml",
        "server:\n  name: s\n  chip: c\n  devices_per_server: 4\n"
        "host:\n  cpu_cores: 64\n"
        "link:\n  h2d_bandwidth_gbps: 5\n  d2h_bandwidth_gbps: 5\n  latency_ns: 100\n");
    put("chips/c.yaml", "chip:\n  name: c\nlink:\n  h2d_bandwidth_gbps: 7\n");
    put("chips/d.yaml", "chip:\n  name: d\n");
    put("user.yaml", "link:\n  h2d_bandwidth_gbps: 9\n");
  }
  void TearDown() override { fs::remove_all(m_dir); }
  void put(const std::string& name, const std::string& text) { std::ofstream(m_dir / name) << text; }
  sim::ConfigRequest request() const {
    sim::ConfigRequest r;
    r.dir = m_dir.string();
    r.server = "s";
    return r;
  }
  fs::path m_dir;
};

TEST_F(ServerPrecedence, ServerBelowChipBelowConfigBelowSet) {
  sim::ConfigRequest req = request();
  sim::SystemConfig c = sim::load_config(req);
  EXPECT_EQ(c.chip.name, "c");                     // the server's chip
  EXPECT_EQ(c.host.cpu_cores, 64);                 // the server over host.yaml
  EXPECT_DOUBLE_EQ(c.host.op_launch_us, 1);        // host.yaml where the server is silent
  EXPECT_DOUBLE_EQ(c.link.d2h_bandwidth_gbps, 5);  // the server where the chip is silent
  EXPECT_DOUBLE_EQ(c.link.h2d_bandwidth_gbps, 7);  // the chip over the server
  EXPECT_EQ(c.server.devices_per_server, 4);
  req.config_file = (m_dir / "user.yaml").string();
  EXPECT_DOUBLE_EQ(sim::load_config(req).link.h2d_bandwidth_gbps, 9);  // --config over the chip
  req.sets = {"link.h2d_bandwidth_gbps=11", "host.cpu_cores=8"};
  c = sim::load_config(req);
  EXPECT_DOUBLE_EQ(c.link.h2d_bandwidth_gbps, 11);  // --set over --config
  EXPECT_EQ(c.host.cpu_cores, 8);
  // A named chip replaces the server's; the server's values stay where the chip is silent.
  req = request();
  req.chip = "d";
  c = sim::load_config(req);
  EXPECT_EQ(c.chip.name, "d");
  EXPECT_DOUBLE_EQ(c.link.h2d_bandwidth_gbps, 5);
  // The presets' names are not parameters to override.
  for (const char* set : {"server.name=t", "server.chip=d"}) {
    req = request();
    req.sets = {set};
    EXPECT_THAT(error_of(req),
                AllOf(HasSubstr(std::string(set).substr(0, std::string(set).find('='))), HasSubstr("cannot be set")));
  }
}

TEST_F(ServerPrecedence, UnknownServerNamesItsFileAndListsThePresets) {
  sim::ConfigRequest req = request();
  req.server = "atlas900";
  EXPECT_THAT(error_of(req),
              AllOf(HasSubstr("unknown server 'atlas900'"), HasSubstr("servers/atlas900.yaml"), HasSubstr(": s;")));
  // A file whose name disagrees with the preset inside it.
  put("servers/u.yaml", "server:\n  name: s\n");
  req.server = "u";
  EXPECT_THAT(error_of(req), AllOf(HasSubstr("u.yaml"), HasSubstr("server.name is 's'")));
  // HCCS networks that do not tile the server.
  req = request();
  req.sets = {"hccl.hccs_group_size=3"};
  EXPECT_THAT(error_of(req), AllOf(HasSubstr("hccl.hccs_group_size 3"), HasSubstr("devices_per_server 4")));
}

TEST_F(ServerPrecedence, PresetsMadeFromOthersApplyTheirBaseFirst) {
  // A chip made from c (its clock), a server made from s (its chip): each base first, then its own keys.
  put("chips/fast.yaml", "chip:\n  name: fast\n  base: c\naicore:\n  freq_ghz: 1.5\n");
  put("servers/t.yaml", "server:\n  name: t\n  base: s\n  chip: fast\nhost:\n  cpu_cores: 96\n");
  sim::ConfigRequest req = request();
  req.server = "t";
  const sim::SystemConfig c = sim::load_config(req);
  EXPECT_EQ(c.server.name, "t");
  EXPECT_EQ(c.chip.name, "fast");
  EXPECT_DOUBLE_EQ(c.chip.aicore.freq_ghz, 1.5);   // its own key
  EXPECT_DOUBLE_EQ(c.link.h2d_bandwidth_gbps, 7);  // c's, through its base
  EXPECT_DOUBLE_EQ(c.link.d2h_bandwidth_gbps, 5);  // s's, through the server's base
  EXPECT_EQ(c.server.devices_per_server, 4);       // s's
  EXPECT_EQ(c.host.cpu_cores, 96);                 // t's over s's
  EXPECT_TRUE(c.chip.base.empty());                // read empty once applied
  EXPECT_TRUE(c.server.base.empty());
  // A missing base names the file that asks for it; a circle is refused; the key is a preset's.
  put("chips/orphan.yaml", "chip:\n  name: orphan\n  base: nowhere\n");
  req.chip = "orphan";
  EXPECT_THAT(error_of(req), AllOf(HasSubstr("orphan.yaml"), HasSubstr("chip preset 'nowhere'")));
  put("chips/loop.yaml", "chip:\n  name: loop\n  base: loop\n");
  req.chip = "loop";
  EXPECT_THAT(error_of(req), HasSubstr("chip.base goes round in a circle"));
  for (const char* set : {"chip.base=c", "server.base=s", "host.base=x"}) {
    req = request();
    req.sets = {set};
    EXPECT_THAT(error_of(req), AllOf(HasSubstr(std::string(set).substr(0, std::string(set).find('='))),
                                     HasSubstr("belongs in a preset file")));
  }
  put("user.yaml", "chip:\n  base: d\n");
  req = request();
  req.config_file = (m_dir / "user.yaml").string();
  EXPECT_THAT(error_of(req), AllOf(HasSubstr("user.yaml"), HasSubstr("chip.base")));
}

TEST(Servers, CloudBrainIIIsTheAtlas800WithTheProAChip) {
  // S1: the CloudBrain II nodes are Atlas 800 9000 servers with 8 x Ascend 910 Pro A at 1.1 GHz.
  const sim::SystemConfig cb = on_server("cloudbrain2"), atlas = on_server("atlas800-9000");
  EXPECT_EQ(cb.chip.name, "ascend910-pro-a");
  EXPECT_DOUBLE_EQ(cb.chip.aicore.freq_ghz, 1.1);
  EXPECT_DOUBLE_EQ(atlas.chip.aicore.freq_ghz, 1.0);
  // Everything else is the Atlas 800's and the 910's: the same parameters but the clock and the names.
  sim::SystemConfig a = cb, b = atlas;
  nlohmann::json ja = sim::bind_params(a).to_json(), jb = sim::bind_params(b).to_json();
  for (auto* j : {&ja, &jb}) {
    (*j)["aicore"].erase("freq_ghz");
    (*j).erase("chip");
    (*j).erase("server");
  }
  EXPECT_EQ(ja, jb);
  EXPECT_EQ(cb.host.name, "kunpeng920-4s");
}

TEST(Servers, UnknownServerOnTheCommandLineExitsTwoWithoutAReport) {
  const fs::path out = fs::temp_directory_path() / ("ascendsim_srv_cli_" + std::to_string(::getpid()) + ".json");
  const fs::path err = fs::path(out).replace_extension(".err");
  for (const std::string& cmd : std::vector<std::string>{
           "train --strategy loop-sink --server atlas900 -q --json " + out.string(), "info --server atlas900",
           "op --type matmul --m 16 --n 16 --k 16 --server atlas900", "params --server atlas900"}) {
    SCOPED_TRACE(cmd);
    const std::string line = "ASCENDSIM_CONFIG_DIR=" ASCENDSIM_SOURCE_DIR "/configs " ASCENDSIM_BIN " " + cmd +
                             " >/dev/null 2>" + err.string();
    const int status = std::system(line.c_str());
    ASSERT_TRUE(WIFEXITED(status));
    EXPECT_EQ(WEXITSTATUS(status), 2);
    std::ifstream e(err);
    std::stringstream text;
    text << e.rdbuf();
    EXPECT_THAT(text.str(), AllOf(HasSubstr("atlas900"), HasSubstr("atlas800-9000"), HasSubstr("generic-x86")));
    EXPECT_FALSE(fs::exists(out));
  }
  fs::remove(err);
}

/// The most host cores the pipelines of a run's first rank's host held at once (its stat), and
/// the time their threads waited for one.
double peak_cores(const sim::RunOutcome& o) { return o.runs.front().stats["pipeline"]["host_cores_peak"].get<double>(); }
double core_wait_s(const sim::RunOutcome& o) { return o.runs.front().stats["pipeline"]["core_wait_s"].get<double>(); }

sim::RunRequest busy_pipelines(const std::string& server) {
  sim::RunRequest req;
  req.config = test::config_request();
  req.config.server = server;
  // 8 ranks x (a reader and 32 workers on each of two map calls) > 192
  req.config.sets = {"pipeline.num_parallel_workers=32"};
  req.workload = "resnet50";
  req.batch_size = 32;
  req.devices = 8;
  req.steps_per_epoch = 3;
  req.strategies = {runtime::Strategy::LoopSink};
  req.parameter_broadcast = false;
  req.trace = true;
  return req;
}

TEST(Servers, EightRanksShareTheAtlasHostsCores) {
  const sim::RunOutcome atlas = sim::run(busy_pipelines("atlas800-9000"));
  ASSERT_FALSE(atlas.failed()) << atlas.failure_message();
  EXPECT_EQ(atlas.header.servers, 1);  // 8 devices on one server of 8: one host
  // Over 500 threads want a core: the server's 192 are all in use at some instant, never more.
  EXPECT_EQ(peak_cores(atlas), 192);
  // The same job on the generic server: its 32 cores bound the 8 ranks together.
  const sim::RunOutcome generic = sim::run(busy_pipelines("generic-x86"));
  ASSERT_FALSE(generic.failed()) << generic.failure_message();
  EXPECT_EQ(peak_cores(generic), 32);
  // The report's links: two meshes of four on the Atlas server and its gradients' AllReduces
  // crossing PCIe between them; one network of 8 on the generic server, nothing on PCIe.
  const auto& mesh = atlas.runs.front().cluster_links["hccs_networks"];
  EXPECT_EQ(mesh["per_server"], 2);
  EXPECT_EQ(mesh["devices"], 4);
  EXPECT_EQ(mesh["pcie_paths"], 8);
  EXPECT_GT(mesh["pcie_bytes"].get<double>(), 0);
  EXPECT_GT(mesh["pcie_utilisation"].get<double>(), 0);
  EXPECT_LT(mesh["pcie_utilisation"].get<double>(), 1);
  const auto& ring = generic.runs.front().cluster_links["hccs_networks"];
  EXPECT_EQ(ring["per_server"], 1);
  EXPECT_EQ(ring["pcie_bytes"].get<double>(), 0);
  // Servers of 4 devices: 8 ranks on two hosts, 2 x 192 cores between them.
  sim::RunRequest halves = busy_pipelines("atlas800-9000");
  halves.config.sets.push_back("server.devices_per_server=4");
  const sim::RunOutcome two = sim::run(halves);
  ASSERT_FALSE(two.failed()) << two.failure_message();
  EXPECT_EQ(two.header.servers, 2);
  // Each host's 192 cores are all in use at some instant; four ranks per host wait less for them.
  EXPECT_EQ(peak_cores(two), 192);
  EXPECT_LT(core_wait_s(two), core_wait_s(atlas));
}

TEST(Servers, SuitesAndFiguresNameTheirServer) {
  const fs::path dir = fs::temp_directory_path() / ("ascendsim_srv_suite_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  std::ofstream(dir / "s.yaml") << "name: s\nruns:\n  - name: a\n    server: atlas800-9000\n  - name: b\n";
  const auto entries = sim::load_suite((dir / "s.yaml").string(), test::config_request().dir, nullptr);
  ASSERT_EQ(entries.size(), 2u);
  EXPECT_EQ(entries[0].request.config.server, "atlas800-9000");
  EXPECT_EQ(entries[1].request.config.server, "");  // generic-x86
  fs::remove_all(dir);
  // Every published figure names the server its source states.
  const auto figures =
      sim::load_figures(ASCENDSIM_SOURCE_DIR "/bench/validation/figures.yaml", test::config_request().dir);
  ASSERT_FALSE(figures.empty());
  for (const auto& f : figures) {
    SCOPED_TRACE(f.id);
    EXPECT_FALSE(f.run.config.server.empty());
    const bool model_zoo = f.id == "C1" || f.id == "C3" || f.id == "C4" || f.id == "C5" || f.id.rfind("C8", 0) == 0;
    if (model_zoo) {
      EXPECT_EQ(f.run.config.server, "atlas800-9000");
    }
    if (f.id.rfind("C9", 0) == 0) {  // seed 004's GPU server: shown, never counted
      EXPECT_EQ(f.run.config.server, "gpu-server");
      EXPECT_FALSE(f.not_compared.empty());
      EXPECT_FALSE(f.host_bound);
    }
  }
}

TEST(Servers, ARankTablePlacesTheRanksOnItsServers) {
  // configs/rank_table_16pcs.json: two servers of 8. Its servers win over the preset's size.
  const sim::RankTable t = sim::load_rank_table(ASCENDSIM_SOURCE_DIR "/configs/rank_table_16pcs.json");
  sim::RunRequest req;
  req.config = test::config_request();
  req.config.server = "atlas800-9000";
  req.config.sets = {"server.devices_per_server=4"};
  req.devices = static_cast<std::int64_t>(t.devices.size());
  req.devices_per_server = t.devices_per_server();
  req.steps_per_epoch = 3;
  req.strategies = {runtime::Strategy::LoopSink};
  const sim::RunOutcome out = sim::run(req);
  ASSERT_FALSE(out.failed()) << out.failure_message();
  EXPECT_EQ(req.devices, 16);
  EXPECT_EQ(out.header.servers, 2);
  // Without a table the preset's size places them: 16 ranks on servers of 4.
  req.devices_per_server = 0;
  EXPECT_EQ(sim::run(req).header.servers, 4);
}

TEST(Servers, AllReduceAcrossTheTwoMeshesCostsWhatTheFormulaSays) {
  const aicpu::HcclConfig h = on_server("atlas800-9000").chip.hccl;
  const double hbm = 1200, a = h.step_latency_us * 1e-6, b = h.link_bandwidth_gbps * 1e9,
               bp = h.pcie_bandwidth_gbps * 1e9, hb = hbm * 1e9;
  for (double s : {8192.0, 64.0 * 1024 * 1024}) {
    SCOPED_TRACE(s);
    const double mesh4 = aicpu::Hccl::cost(h, Collective::AllReduce, 1, 4, s, hbm).seconds;
    const double two_meshes = aicpu::Hccl::cost(h, Collective::AllReduce, 1, 8, s, hbm).seconds;
    // Within one mesh: the ring of 4.
    EXPECT_NEAR(mesh4, 2 * 3 * (a + s / 4 / b) + 3 * 3 * s / 4 / hb, 1e-12);
    // Across the two: the S/4 pieces all-reduced between the meshes over PCIe on rings of two.
    const double extra = 2 * (a + s / 8 / bp) + 3 * s / 8 / hb;
    EXPECT_NEAR(two_meshes - mesh4, extra, 1e-12);
    EXPECT_GT(two_meshes, mesh4);
    // What the simulated ranks wait: every one of the 8 leaves at that time.
    sim::KernelScope kernel;
    aicpu::Hccl hccl("hccl", h, 8, hbm, 8);
    std::vector<double> left(8, -1);
    for (int r = 0; r < 8; ++r)
      sc_core::sc_spawn([&, r] {
        hccl.all_reduce(r, static_cast<std::int64_t>(s));
        left[static_cast<std::size_t>(r)] = sc_core::sc_time_stamp().to_seconds();
      });
    sc_core::sc_start();
    for (double t : left) EXPECT_NEAR(t, two_meshes, 1e-9);
    // The links: each device puts 2·(3/4)·S on its mesh's ring and 2·(1/2)·S/4 over PCIe.
    EXPECT_DOUBLE_EQ(hccl.hccs_bytes(), 8 * 2 * 3 * s / 4);
    EXPECT_DOUBLE_EQ(hccl.pcie_bytes(), 8 * 2 * 1 * s / 8);
    EXPECT_NEAR(hccl.pcie_busy_s(), 2 * (a + s / 8 / bp) + 3 * s / 8 / hb, 1e-12);
  }
  // Groups inside the server: four ranks on one mesh are its ring; four spread over both meshes
  // cross PCIe.
  const aicpu::CollectiveSpan one = aicpu::Hccl::span_of(h, {0, 1, 2, 3}, 8);
  EXPECT_EQ(std::make_tuple(one.servers, one.networks, one.devices), std::make_tuple(1, 1, 4));
  const aicpu::CollectiveSpan both = aicpu::Hccl::span_of(h, {0, 2, 4, 6}, 8);
  EXPECT_EQ(std::make_tuple(both.servers, both.networks, both.devices), std::make_tuple(1, 2, 2));
  // On the generic server one ring of 8, as before servers were presets.
  const aicpu::HcclConfig g = on_server("generic-x86").chip.hccl;
  const double s = 100e6;
  EXPECT_NEAR(aicpu::Hccl::cost(g, Collective::AllReduce, 1, 8, s, hbm).seconds,
              2 * 7 * (a + s / 8 / (g.link_bandwidth_gbps * 1e9)) + 7 * 3 * s / 8 / hb, 1e-12);
}

TEST(Servers, ReportsNameTheServer) {
  sim::RunRequest req;
  req.config = test::config_request();
  req.config.server = "atlas800-9000";
  req.steps_per_epoch = 2;
  req.strategies = {runtime::Strategy::LoopSink};
  const sim::RunOutcome out = sim::run(req);
  ASSERT_FALSE(out.failed());
  const auto report = out.report();
  EXPECT_EQ(report["config"]["server"]["name"], "atlas800-9000");
  EXPECT_THAT(out.header.setting, HasSubstr("server atlas800-9000: host 192 cores"));
  // 6 devices do not fill the server's meshes of 4.
  req.devices = 6;
  try {
    sim::run(req);
    ADD_FAILURE() << "6 devices on atlas800-9000 ran";
  } catch (const sim::InputError& e) {
    EXPECT_THAT(e.what(), AllOf(HasSubstr("HCCS networks of 4"), HasSubstr("atlas800-9000")));
  }
}

}  // namespace
}  // namespace ascendsim
