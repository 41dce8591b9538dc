// MindSpore's rank table (RANK_TABLE_FILE): the devices of a distributed job, server by server.
// Two formats are read:
//   - the seed's (rank_table_8pcs.json): board_id, chip_info, deploy_mode, group_count,
//     group_list[{device_num, server_num, group_name, instance_count,
//     instance_list[{devices[{device_id, device_ip}], rank_id, server_id}]}],
//     para_plane_nic_location, para_plane_nic_name[], para_plane_nic_num, status;
//   - version "1.0": version, server_count, server_list[{server_id,
//     device[{device_id, device_ip, rank_id}], host_nic_ip}], status.
// Numbers are JSON strings, as MindSpore writes them. The simulator needs the shape of the
// cluster: servers of equal size, ranks 0..N-1 numbered server by server.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ascendsim::sim {

struct RankTable {
  struct Device {
    std::int64_t rank = 0, device_id = 0;
    std::string device_ip, server_id;
  };
  std::string format;                ///< "seed" or "1.0"
  std::vector<std::string> servers;  ///< server ids, in the order their ranks run
  std::vector<Device> devices;       ///< by rank
  std::int64_t devices_per_server() const {
    return servers.empty() ? 0 : static_cast<std::int64_t>(devices.size() / servers.size());
  }
};

/// Reads and checks a rank table; throws InputError naming the file, the entry and the field
/// (duplicate rank or device ids, a device id above 7, counts that disagree, missing fields, a
/// status other than "completed", servers of unequal size, ranks not numbered server by server).
RankTable load_rank_table(const std::string& path);
/// The same from the file's text (`path` names it in errors).
RankTable parse_rank_table(const std::string& text, const std::string& path);

}  // namespace ascendsim::sim
