// MindSpore rank tables: both formats read, every malformed one rejected naming its entry and field.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "sim/core/error.h"
#include "sim/rank_table.h"

namespace ascendsim {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;

TEST(RankTable, TheSampleTablesOfBothFormatsLoad) {
  const sim::RankTable seed = sim::load_rank_table(ASCENDSIM_SOURCE_DIR "/configs/rank_table_8pcs.json");
  EXPECT_EQ(seed.format, "seed");
  EXPECT_EQ(seed.devices.size(), 8u);
  EXPECT_EQ(seed.servers.size(), 1u);
  EXPECT_EQ(seed.devices_per_server(), 8);
  for (std::size_t r = 0; r < seed.devices.size(); ++r) EXPECT_EQ(seed.devices[r].rank, static_cast<std::int64_t>(r));
  const sim::RankTable v1 = sim::load_rank_table(ASCENDSIM_SOURCE_DIR "/configs/rank_table_16pcs.json");
  EXPECT_EQ(v1.format, "1.0");
  EXPECT_EQ(v1.devices.size(), 16u);
  EXPECT_EQ(v1.servers, (std::vector<std::string>{"10.155.111.140", "10.155.111.141"}));
  EXPECT_EQ(v1.devices[9].server_id, "10.155.111.141");
  EXPECT_EQ(v1.devices[9].device_id, 1);
}

json v1_table(int servers, int per_server) {
  json t = {{"version", "1.0"}, {"server_count", std::to_string(servers)}, {"status", "completed"}};
  t["server_list"] = json::array();
  for (int s = 0; s < servers; ++s) {
    json devices = json::array();
    for (int d = 0; d < per_server; ++d)
      devices.push_back({{"device_id", std::to_string(d)},
                         {"device_ip", "192.168." + std::to_string(s) + "." + std::to_string(d)},
                         {"rank_id", std::to_string(s * per_server + d)}});
    t["server_list"].push_back({{"server_id", "10.0.0." + std::to_string(s)}, {"device", devices}});
  }
  return t;
}

json seed_table(int devices) {
  json inst = json::array();
  for (int d = 0; d < devices; ++d)
    inst.push_back({{"devices", {{{"device_id", std::to_string(d)}, {"device_ip", "192.1.1." + std::to_string(d)}}}},
                    {"rank_id", std::to_string(d)},
                    {"server_id", "10.0.0.1"}});
  json names = json::array();
  for (int d = 0; d < devices; ++d) names.push_back("eth" + std::to_string(d));
  return {{"board_id", "0x0000"},
          {"chip_info", "910"},
          {"deploy_mode", "lab"},
          {"group_count", "1"},
          {"group_list",
           {{{"device_num", std::to_string(devices)},
             {"server_num", "1"},
             {"group_name", ""},
             {"instance_count", std::to_string(devices)},
             {"instance_list", inst}}}},
          {"para_plane_nic_location", "device"},
          {"para_plane_nic_name", names},
          {"para_plane_nic_num", std::to_string(devices)},
          {"status", "completed"}};
}

std::string rejected(const json& t) {
  try {
    sim::parse_rank_table(t.dump(), "rt.json");
  } catch (const sim::InputError& e) {
    return e.what();
  }
  return "accepted";
}

TEST(RankTable, MalformedTablesAreRejectedNamingTheEntryAndField) {
  EXPECT_NO_THROW(sim::parse_rank_table(v1_table(2, 8).dump(), "rt.json"));
  EXPECT_NO_THROW(sim::parse_rank_table(seed_table(8).dump(), "rt.json"));

  json t = v1_table(2, 8);
  t["server_list"][1]["device"][3]["rank_id"] = "2";
  EXPECT_THAT(rejected(t), HasSubstr("rank_id 2 appears twice"));
  t = v1_table(1, 8);
  t["server_list"][0]["device"][5]["device_id"] = "4";
  EXPECT_THAT(rejected(t), HasSubstr("device_id 4 appears twice on server 10.0.0.0"));
  t = v1_table(1, 8);
  t["server_list"][0]["device"][7]["device_id"] = "9";
  EXPECT_THAT(rejected(t), HasSubstr("server_list[0].device[7].device_id: 9 is above 7"));
  t = v1_table(2, 8);
  t["server_count"] = "3";
  EXPECT_THAT(rejected(t), HasSubstr("server_count: 3 disagrees with server_list's 2 entries"));
  t = v1_table(1, 8);
  t["server_list"][0]["device"][2].erase("device_ip");
  EXPECT_THAT(rejected(t), HasSubstr("server_list[0].device[2]: missing field 'device_ip'"));
  t = v1_table(1, 8);
  t["status"] = "initializing";
  EXPECT_THAT(rejected(t), HasSubstr("status: 'initializing'"));
  t = v1_table(1, 8);
  t["server_list"][0]["device"][1]["rank_id"] = "one";
  EXPECT_THAT(rejected(t), HasSubstr("device[1].rank_id: 'one' is not a whole number"));
  t = v1_table(1, 8);
  t["server_list"][0]["device"][1]["rank_id"] = 1;  // a JSON number: rank tables write strings
  EXPECT_THAT(rejected(t), HasSubstr("expected a string"));
  t = v1_table(1, 4);
  t["server_list"][0]["device"][3]["rank_id"] = "7";
  EXPECT_THAT(rejected(t), HasSubstr("rank ids must be 0 to 3"));
  t = v1_table(2, 8);
  t["server_list"][1]["device"].erase(7);
  EXPECT_THAT(rejected(t), HasSubstr("every server of a job must have the same number"));
  t = v1_table(2, 2);  // ranks 0,1 on server 0 and 2,3 on server 1 — then swap two across servers
  t["server_list"][0]["device"][1]["rank_id"] = "2";
  t["server_list"][1]["device"][0]["rank_id"] = "1";
  EXPECT_THAT(rejected(t), HasSubstr("not consecutive"));
  t = v1_table(1, 8);
  t["version"] = "2.0";
  EXPECT_THAT(rejected(t), HasSubstr("version: '2.0'"));

  json s = seed_table(8);
  s["group_list"][0]["instance_count"] = "7";
  EXPECT_THAT(rejected(s), HasSubstr("group_list[0].device_num: 8 disagrees with instance_count 7"));
  s = seed_table(8);
  s["para_plane_nic_num"] = "4";
  EXPECT_THAT(rejected(s), HasSubstr("para_plane_nic_num: 4 disagrees with the 8 devices"));
  s = seed_table(8);
  s["group_count"] = "2";
  EXPECT_THAT(rejected(s), HasSubstr("group_count: 2 disagrees"));
  s = seed_table(8);
  s["group_list"][0]["instance_list"][3].erase("server_id");
  EXPECT_THAT(rejected(s), HasSubstr("group_list[0].instance_list[3]: missing field 'server_id'"));
  s = seed_table(8);
  s["para_plane_nic_name"].erase(0);
  EXPECT_THAT(rejected(s), HasSubstr("para_plane_nic_name: lists 7 NICs"));

  EXPECT_THAT(rejected(json::array()), HasSubstr("expected a JSON object"));
  try {
    sim::parse_rank_table("{\"status\": ", "rt.json");
    FAIL();
  } catch (const sim::InputError& e) {
    EXPECT_THAT(e.what(), HasSubstr("rt.json: not JSON"));
  }
  EXPECT_THROW(sim::load_rank_table("/nonexistent/rank_table.json"), sim::InputError);
  // Found by fuzzing: a number beyond double's range is a rejection, not a crash.
  EXPECT_THROW(sim::parse_rank_table("{\"version\": [ 1e11111 ]}", "rt.json"), sim::InputError);
}

}  // namespace
}  // namespace ascendsim
