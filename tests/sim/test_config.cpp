#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "sim/config.h"
#include "sim/core/error.h"
#include "tests/test_support.h"

namespace ascendsim::sim {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

class ConfigTest : public ::testing::Test {
 protected:
  void SetUp() override {
    m_dir = std::filesystem::temp_directory_path() /
            ("ascendsim_cfg_" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) + "_" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(m_dir);
  }
  void TearDown() override { std::filesystem::remove_all(m_dir); }

  std::string write(const std::string& name, const std::string& text) {
    const auto p = m_dir / name;
    std::ofstream(p) << text;
    return p.string();
  }

  std::string error_of(const ConfigRequest& req) {
    try {
      load_config(req);
    } catch (const InputError& e) {
      return e.what();
    }
    return "";
  }

  std::filesystem::path m_dir;
};

TEST_F(ConfigTest, EveryPresetLoadsAndNamesItself) {
  const auto names = chip_presets(test::config_request().dir);
  EXPECT_EQ(std::set<std::string>(names.begin(), names.end()),
            (std::set<std::string>{"ascend310", "ascend910", "ascend910-pro-a", "ascend910b"}));
  for (const auto& n : names) {
    ConfigRequest req = test::config_request();
    req.chip = n;
    EXPECT_EQ(load_config(req).chip.name, n);
  }
}

TEST_F(ConfigTest, AServersHostPresetIsAppliedAfterItsBaseAndUnderTheServersOwnKeys) {
  ConfigRequest atlas = test::config_request(), a2 = test::config_request();
  atlas.server = "atlas800-9000";
  a2.server = "atlas800t-a2";
  const SystemConfig k = load_config(atlas), b = load_config(a2);
  ASSERT_EQ(k.host_presets.size(), 1u);
  EXPECT_EQ(k.host_presets[0].name, "kunpeng920-4s");
  ASSERT_EQ(b.host_presets.size(), 2u);  // the base first
  EXPECT_EQ(b.host_presets[0].name, "kunpeng920-4s");
  EXPECT_EQ(b.host_presets[1].name, "atlas800t-a2");
  EXPECT_EQ(b.host_presets[1].fitted, std::vector<std::string>{"host.core_speed"});
  // The A2's host is the Kunpeng host but for its core speed: the same per-op and device-queue costs.
  EXPECT_EQ(b.host.cpu_cores, k.host.cpu_cores);
  EXPECT_EQ(b.host.device_queue_push_us, k.host.device_queue_push_us);
  EXPECT_EQ(b.host.device_queue_ns_per_byte, k.host.device_queue_ns_per_byte);
  EXPECT_EQ(b.host.decode_ns_per_pixel, k.host.decode_ns_per_pixel);
  EXPECT_NE(b.host.core_speed, k.host.core_speed);
  // Each preset's marks are recorded and read back empty, so a --set or --config cannot add some.
  EXPECT_TRUE(k.host.fitted.empty());
  EXPECT_FALSE(k.host_presets[0].fitted.empty());
  // A --set still wins over a preset.
  atlas.sets = {"host.core_speed=2"};
  EXPECT_EQ(load_config(atlas).host.core_speed, 2.0);
}

TEST_F(ConfigTest, ABadHostPresetIsNamed) {
  namespace fs = std::filesystem;
  const fs::path dir = m_dir / "configs";
  fs::create_directories(dir / "servers");
  fs::create_directories(dir / "hosts");
  fs::copy(fs::path(test::config_request().dir) / "chips", dir / "chips");
  auto server = [&](const std::string& host) {
    std::ofstream(dir / "servers" / "s.yaml") << "server:\n  name: s\n  host: " << host << "\n";
  };
  ConfigRequest req;
  req.dir = dir.string();
  req.server = "s";
  server("nohost");
  EXPECT_THAT(error_of(req), HasSubstr("host preset 'nohost': no file"));
  std::ofstream(dir / "hosts" / "a.yaml") << "host:\n  name: a\n  base: b\n";
  std::ofstream(dir / "hosts" / "b.yaml") << "host:\n  name: b\n  base: a\n";
  server("a");
  EXPECT_THAT(error_of(req), HasSubstr("host.base goes round in a circle"));
  std::ofstream(dir / "hosts" / "a.yaml") << "host:\n  name: other\n";
  EXPECT_THAT(error_of(req), HasSubstr("host.name is 'other' but the file is the 'a' preset"));
  std::ofstream(dir / "hosts" / "a.yaml") << "host:\n  name: a\n  fitted: host.cpu_cores\n";
  EXPECT_THAT(error_of(req), HasSubstr("host.fitted names 'host.cpu_cores', which is no real-valued parameter"));
}

TEST_F(ConfigTest, Ascend910PresetCarriesThePublicFigures) {
  const SystemConfig c = load_config(test::config_request());
  EXPECT_EQ(c.chip.aicore.cores, 32);
  EXPECT_EQ(c.chip.aicore.cube_fp16_macs_per_cycle, 4096);
  EXPECT_EQ(c.chip.aicore.vector_bytes_per_cycle, 256);
  EXPECT_EQ(c.chip.aicore.l0c_kib, 256);
  EXPECT_EQ(c.chip.aicore.ub_kib, 256);
  EXPECT_DOUBLE_EQ(c.chip.memory.hbm_gib, 32);
  EXPECT_EQ(c.chip.queue.capacity, 16);
  // about 256 TFLOPS fp16 (1 GHz gives 262)
  EXPECT_NEAR(2.0 * static_cast<double>(c.chip.aicore.cores * c.chip.aicore.cube_fp16_macs_per_cycle) *
                  c.chip.aicore.freq_ghz * 1e9,
              2.56e14, 0.08e14);
}

TEST_F(ConfigTest, SetOverridesPresetAndConfigFile) {
  ConfigRequest req = test::config_request();
  req.config_file = write("user.yaml", "link:\n  h2d_bandwidth_gbps: 12\nhost:\n  op_launch_us: 4\n");
  req.sets = {"host.op_launch_us=7.5"};
  const SystemConfig c = load_config(req);
  EXPECT_DOUBLE_EQ(c.link.h2d_bandwidth_gbps, 12);
  EXPECT_DOUBLE_EQ(c.host.op_launch_us, 7.5);
}

TEST_F(ConfigTest, MalformedYamlNamesFileAndLine) {
  ConfigRequest req = test::config_request();
  req.config_file = write("bad.yaml", "link:\n  h2d_bandwidth_gbps: [1, 2\nhost: {\n");
  EXPECT_THAT(error_of(req), AllOf(HasSubstr("bad.yaml"), HasSubstr("malformed YAML")));
}

TEST_F(ConfigTest, UnknownKeyNamesKeyAndSuggests) {
  ConfigRequest req = test::config_request();
  req.config_file = write("typo.yaml", "link:\n  h2d_bandwith_gbps: 12\n");
  EXPECT_THAT(error_of(req), AllOf(HasSubstr("typo.yaml:2"), HasSubstr("link.h2d_bandwith_gbps"),
                                   HasSubstr("link.h2d_bandwidth_gbps")));
  req.config_file = write("section.yaml", "pcie:\n  lanes: 16\n");
  EXPECT_THAT(error_of(req), HasSubstr("pcie"));
}

TEST_F(ConfigTest, WrongTypeAndOutOfRangeAreRejected) {
  ConfigRequest req = test::config_request();
  req.sets = {"link.h2d_bandwidth_gbps=fast"};
  EXPECT_THAT(error_of(req), AllOf(HasSubstr("link.h2d_bandwidth_gbps"), HasSubstr("number"), HasSubstr("fast")));
  req.sets = {"aicore.cores=-3"};
  EXPECT_THAT(error_of(req), AllOf(HasSubstr("aicore.cores"), HasSubstr("-3")));
  req.sets = {"queue.capacity=1"};
  EXPECT_THAT(error_of(req), AllOf(HasSubstr("queue.capacity"), HasSubstr("[2, 8192]")));
  req.sets = {"aicore.cores=2.5"};
  EXPECT_THAT(error_of(req), HasSubstr("whole number"));
  req.sets = {"nokey"};
  EXPECT_THAT(error_of(req), HasSubstr("key=value"));
  req.sets = {};
  req.config_file = write("list.yaml", "host:\n  op_launch_us:\n");
  EXPECT_THAT(error_of(req), AllOf(HasSubstr("host.op_launch_us"), HasSubstr("no value")));
}

TEST_F(ConfigTest, UnknownChipListsPresets) {
  ConfigRequest req = test::config_request();
  req.chip = "ascend920";
  EXPECT_THAT(error_of(req), AllOf(HasSubstr("ascend920"), HasSubstr("ascend910b")));
}

TEST_F(ConfigTest, EveryParameterIsDocumented) {
  SystemConfig c;
  const ParamSet ps = bind_params(c);
  EXPECT_GT(ps.specs().size(), 30u);
  for (const auto& s : ps.specs()) {
    EXPECT_FALSE(s.description.empty()) << s.key;
    if (s.type == ParamType::Real || s.type == ParamType::Integer) {
      EXPECT_FALSE(s.unit.empty()) << s.key;
      EXPECT_LE(s.min, s.max) << s.key;
    }
  }
  // docs/model.md lists every parameter.
  std::ifstream doc(ASCENDSIM_SOURCE_DIR "/docs/model.md");
  const std::string text((std::istreambuf_iterator<char>(doc)), std::istreambuf_iterator<char>());
  ASSERT_FALSE(text.empty());
  std::string missing;
  for (const auto& s : ps.specs())
    if (text.find("`" + s.key + "`") == std::string::npos) missing += " " + s.key;
  EXPECT_TRUE(missing.empty()) << "docs/model.md does not list:" << missing;
}

TEST_F(ConfigTest, BuiltInDefaultsEqualTheAscend910Preset) {
  SystemConfig defaults;
  SystemConfig loaded = load_config(test::config_request());
  EXPECT_EQ(bind_params(defaults).to_json(), bind_params(loaded).to_json());
}

}  // namespace
}  // namespace ascendsim::sim

namespace ascendsim::sim {
namespace {

class ConfigInputTest : public ::testing::Test {
 protected:
  std::string error_of_file(const std::string& text) {
    const auto p = std::filesystem::temp_directory_path() / ("ascendsim_yaml_" + std::to_string(::getpid()) + ".yaml");
    std::ofstream(p) << text;
    ConfigRequest req = test::config_request();
    req.config_file = p.string();
    std::string msg;
    try {
      load_config(req);
    } catch (const InputError& e) {
      msg = e.what();
    }
    std::filesystem::remove(p);
    return msg;
  }
  static std::string error_of_set(const std::string& set) {
    ConfigRequest req = test::config_request();
    req.sets = {set};
    try {
      load_config(req);
    } catch (const InputError& e) {
      return e.what();
    }
    return "";
  }
};

TEST_F(ConfigInputTest, YamlThatWouldBeMisreadIsRejectedPrecisely) {
  EXPECT_THAT(error_of_file("host:\n  op_launch_us: 5\n  op_launch_us: 6\n"),
              HasSubstr(":3: 'host.op_launch_us' is given twice"));
  EXPECT_THAT(error_of_file("host:\n  op_launch_us: 5\n---\nhost:\n  op_launch_us: 6\n"),
              HasSubstr("a second YAML document"));
  EXPECT_THAT(error_of_file("? [a, b]\n: 1\n"), HasSubstr("a key must be a plain name"));
  // Found by fuzzing: yaml-cpp reads no document from a key that starts with ',' (and its LoadAll
  // never ends on it); the file is rejected, not skipped or looped over.
  EXPECT_THAT(error_of_file(",ost:\n  op_launch_us: 2\n"), HasSubstr("malformed YAML: no mapping could be read"));
  EXPECT_THAT(error_of_file("host:\n  op_launch_us: 5\n...\nhost:\n  op_launch_us: 6\n"),
              HasSubstr(":4: a second YAML document"));
  EXPECT_EQ(error_of_file("---\nhost:\n  op_launch_us: 5\n...\n# the end\n"), "");
  EXPECT_THAT(error_of_file("chip:\n  name: ascend310\n"), HasSubstr("chip.name is the preset's name"));
  ConfigRequest dir = test::config_request();
  dir.config_file = std::filesystem::temp_directory_path().string();
  try {
    load_config(dir);
    FAIL() << "a directory was read as a configuration file";
  } catch (const InputError& e) {
    EXPECT_THAT(e.what(), HasSubstr("is a directory"));
  }
}

TEST_F(ConfigInputTest, OverridesAreTakenLiterally) {
  EXPECT_THAT(error_of_set("aicore.cores= 16"), HasSubstr("spaces around the key or value"));
  EXPECT_THAT(error_of_set("aicore.cores=16 "), HasSubstr("spaces around the key or value"));
  EXPECT_THAT(error_of_set("host.op_launch_us=1e-310"), HasSubstr("too close to zero"));
  EXPECT_THAT(error_of_set("host.op_launch_us=1e400"), HasSubstr("too large"));
  EXPECT_THAT(error_of_set("chip.name=foo"), HasSubstr("chip.name is the preset's name"));
  EXPECT_EQ(error_of_set("aicore.cores=16"), "");
}

}  // namespace
}  // namespace ascendsim::sim
