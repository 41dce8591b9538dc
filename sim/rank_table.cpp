#include "sim/rank_table.h"

#include <algorithm>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "sim/core/error.h"

namespace ascendsim::sim {

namespace {

using nlohmann::json;

/// Where in the file an error is: "rank_table.json: server_list[1].device[3]".
struct At {
  const std::string& path;
  std::string where;
  At operator()(const std::string& sub) const { return {path, where.empty() ? sub : where + "." + sub}; }
  At index(std::size_t i) const { return {path, where + "[" + std::to_string(i) + "]"}; }
  [[noreturn]] void fail(const std::string& what) const {
    throw InputError(path + (where.empty() ? "" : ": " + where) + ": " + what +
                     " (see MindSpore's rank table format: RANK_TABLE_FILE)");
  }
};

const json& field(const json& obj, const char* key, const At& at) {
  if (!obj.is_object()) at.fail("expected an object");
  const auto it = obj.find(key);
  if (it == obj.end()) at.fail(std::string("missing field '") + key + "'");
  return *it;
}

std::string text(const json& obj, const char* key, const At& at) {
  const json& v = field(obj, key, at);
  if (!v.is_string()) at(key).fail("expected a string (rank tables write numbers as strings too)");
  return v.get<std::string>();
}

/// A whole number written as a string, as rank tables do ("8").
std::int64_t number(const json& obj, const char* key, const At& at) {
  const std::string s = text(obj, key, at);
  std::size_t used = 0;
  long long v = -1;
  try {
    v = std::stoll(s, &used, 10);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != s.size() || v < 0) at(key).fail("'" + s + "' is not a whole number");
  return v;
}

const json& list(const json& obj, const char* key, const At& at) {
  const json& v = field(obj, key, at);
  if (!v.is_array()) at(key).fail("expected a list");
  return v;
}

RankTable::Device device_entry(const json& d, const At& at, std::int64_t rank, const std::string& server) {
  RankTable::Device dev;
  dev.rank = rank;
  dev.device_id = number(d, "device_id", at);
  if (dev.device_id > 7) at("device_id").fail(std::to_string(dev.device_id) + " is above 7 (a server has 8 devices)");
  dev.device_ip = text(d, "device_ip", at);
  dev.server_id = server;
  return dev;
}

void parse_seed_format(const json& j, const At& root, RankTable& t) {
  const std::int64_t groups = number(j, "group_count", root);
  const json& group_list = list(j, "group_list", root);
  if (static_cast<std::int64_t>(group_list.size()) != groups)
    root("group_count")
        .fail(std::to_string(groups) + " disagrees with group_list's " + std::to_string(group_list.size()) +
              " entries");
  std::int64_t total = 0;
  for (std::size_t g = 0; g < group_list.size(); ++g) {
    const At at = root("group_list").index(g);
    const json& group = group_list[g];
    const std::int64_t device_num = number(group, "device_num", at);
    const std::int64_t instances = number(group, "instance_count", at);
    number(group, "server_num", at);
    const json& instance_list = list(group, "instance_list", at);
    if (device_num != instances)
      at("device_num").fail(std::to_string(device_num) + " disagrees with instance_count " + std::to_string(instances));
    if (static_cast<std::int64_t>(instance_list.size()) != instances)
      at("instance_count")
          .fail(std::to_string(instances) + " disagrees with instance_list's " + std::to_string(instance_list.size()) +
                " entries");
    for (std::size_t i = 0; i < instance_list.size(); ++i) {
      const At ai = at("instance_list").index(i);
      const json& inst = instance_list[i];
      const std::int64_t rank = number(inst, "rank_id", ai);
      const std::string server = text(inst, "server_id", ai);
      const json& devices = list(inst, "devices", ai);
      if (devices.size() != 1) ai("devices").fail("an instance holds exactly one device");
      t.devices.push_back(device_entry(devices[0], ai("devices").index(0), rank, server));
    }
    total += device_num;
  }
  const std::int64_t nics = number(j, "para_plane_nic_num", root);
  if (nics != total)
    root("para_plane_nic_num").fail(std::to_string(nics) + " disagrees with the " + std::to_string(total) + " devices");
  const json& names = list(j, "para_plane_nic_name", root);
  if (static_cast<std::int64_t>(names.size()) != nics)
    root("para_plane_nic_name")
        .fail("lists " + std::to_string(names.size()) + " NICs, para_plane_nic_num says " + std::to_string(nics));
  text(j, "board_id", root);
}

void parse_v1_format(const json& j, const At& root, RankTable& t) {
  const std::int64_t count = number(j, "server_count", root);
  const json& servers = list(j, "server_list", root);
  if (static_cast<std::int64_t>(servers.size()) != count)
    root("server_count")
        .fail(std::to_string(count) + " disagrees with server_list's " + std::to_string(servers.size()) + " entries");
  for (std::size_t s = 0; s < servers.size(); ++s) {
    const At at = root("server_list").index(s);
    const std::string server = text(servers[s], "server_id", at);
    const json& devices = list(servers[s], "device", at);
    if (devices.empty()) at("device").fail("a server lists no device");
    for (std::size_t d = 0; d < devices.size(); ++d) {
      const At ad = at("device").index(d);
      t.devices.push_back(device_entry(devices[d], ad, number(devices[d], "rank_id", ad), server));
    }
  }
}

}  // namespace

RankTable parse_rank_table(const std::string& body, const std::string& path) {
  const At root{path, ""};
  json j;
  try {
    j = json::parse(body);
  } catch (const json::exception& e) {  // a syntax error, or a number out of range
    root.fail(std::string("not JSON: ") + e.what());
  }
  if (!j.is_object()) root.fail("expected a JSON object");
  RankTable t;
  if (j.contains("version")) {
    const std::string v = text(j, "version", root);
    if (v != "1.0") root("version").fail("'" + v + "' is not a version this simulator reads (1.0)");
    t.format = "1.0";
    parse_v1_format(j, root, t);
  } else {
    t.format = "seed";
    parse_seed_format(j, root, t);
  }
  const std::string status = text(j, "status", root);
  if (status != "completed")
    root("status").fail("'" + status + "': the table is not complete (expected \"completed\")");
  if (t.devices.empty()) root.fail("no devices");

  // Ranks 0..N-1, each once; device ids unique on a server.
  std::map<std::int64_t, std::size_t> by_rank;
  std::map<std::string, std::set<std::int64_t>> ids;
  for (std::size_t i = 0; i < t.devices.size(); ++i) {
    const auto& d = t.devices[i];
    if (!by_rank.emplace(d.rank, i).second)
      root.fail("rank_id " + std::to_string(d.rank) + " appears twice (server " + d.server_id + ")");
    if (!ids[d.server_id].insert(d.device_id).second)
      root.fail("device_id " + std::to_string(d.device_id) + " appears twice on server " + d.server_id);
  }
  const auto n = static_cast<std::int64_t>(t.devices.size());
  if (by_rank.rbegin()->first != n - 1)
    root.fail("rank ids must be 0 to " + std::to_string(n - 1) + " for " + std::to_string(n) + " devices; found " +
              std::to_string(by_rank.rbegin()->first));
  std::vector<RankTable::Device> ordered;
  for (const auto& [rank, i] : by_rank) ordered.push_back(t.devices[i]);
  t.devices = std::move(ordered);
  // Servers in rank order, each holding consecutive ranks, all of one size.
  for (const auto& d : t.devices)
    if (t.servers.empty() || t.servers.back() != d.server_id) {
      if (std::find(t.servers.begin(), t.servers.end(), d.server_id) != t.servers.end())
        root.fail("server " + d.server_id + "'s ranks are not consecutive (rank " + std::to_string(d.rank) +
                  "); number the ranks server by server");
      t.servers.push_back(d.server_id);
    }
  for (const auto& [server, devices] : ids)
    if (static_cast<std::int64_t>(devices.size()) != n / static_cast<std::int64_t>(t.servers.size()) ||
        n % static_cast<std::int64_t>(t.servers.size()) != 0)
      root.fail("server " + server + " has " + std::to_string(devices.size()) +
                " devices; every server of a job must have the same number");
  return t;
}

RankTable load_rank_table(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw InputError(path + ": cannot read the rank table (no such file, or not readable)");
  std::stringstream body;
  body << f.rdbuf();
  return parse_rank_table(body.str(), path);
}

}  // namespace ascendsim::sim
