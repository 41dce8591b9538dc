// The typed configuration tree of a simulated system and its loading from YAML presets.
//
// Precedence, lowest first: built-in defaults (the ascend910 values), configs/host.yaml, the server
// preset configs/servers/<server>.yaml (generic-x86 unless one is named; after the server preset it
// is made from, `server.base`) — with the host preset it names (`server.host`:
// configs/hosts/<host>.yaml, after the host preset that one is made from, `host.base`, and before
// the server's own keys) — the chip preset configs/chips/<chip>.yaml (the one named, else the
// server's `server.chip`; after its `chip.base`), --config FILE, then
// each --set key=value in order. Unknown keys, wrong types and out-of-range values are rejected
// naming the file (and line) and key.
#pragma once

#include <string>
#include <vector>

#include "aicore/aicore_config.h"
#include "aicpu/aicpu_config.h"
#include "hostif/link_config.h"
#include "runtime/host_config.h"
#include "sim/core/params.h"

namespace ascendsim::sim {

struct ChipConfig {
  std::string name = "ascend910";
  std::string description = "Ascend 910: 32 DaVinci Max AI cores, 32 GB HBM2, PCIe 4.0 x16";
  std::string base;  ///< in a chip preset: the preset it is made from (read empty once applied)
  aicore::AicoreConfig aicore;
  aicore::MemoryConfig memory;
  aicpu::AicpuConfig aicpu;
  hostif::QueueConfig queue;
  aicpu::HcclConfig hccl;
};

/// The machine the chips sit in: which chip and how many of them one host feeds. Its host's and
/// link's values are the `host` and `link` sections a server preset sets.
struct ServerConfig {
  std::string name = "generic-x86";
  std::string description = "generic dual-socket x86 host (32 cores), 8 devices on PCIe 4.0 x16, one HCCS ring";
  std::string chip = "ascend910";       ///< the chip preset it carries (unless a chip is named)
  std::string base;                     ///< in a server preset: the preset it is made from (read empty once applied)
  std::int64_t devices_per_server = 8;  ///< devices one host feeds (a rank table's servers override it)
  /// The host preset it carries (configs/hosts/<host>.yaml), its values under the server's own;
  /// "" none (host.yaml's and the server's values only).
  std::string host;

  void declare(ParamSet& ps);
};

/// A host preset as load_config applied it: its name and the parameters it marks as fitted
/// (`host.fitted`: `ascendsim calibrate` with no --fit refits them, on the figures whose servers
/// carry this preset).
struct HostPresetUse {
  std::string name;
  std::vector<std::string> fitted;
};

struct SystemConfig {
  ServerConfig server;
  ChipConfig chip;
  hostif::LinkConfig link;
  runtime::HostConfig host;
  runtime::PipelineConfig pipeline;
  /// The host presets applied, the base first (empty without `server.host`).
  std::vector<HostPresetUse> host_presets;
};

/// Declares every parameter of `cfg`, bound to its fields. `cfg` must outlive the set and not move.
ParamSet bind_params(SystemConfig& cfg);

struct ConfigRequest {
  std::string dir;                ///< holds host.yaml, servers/ and chips/ (see default_config_dir())
  std::string server;             ///< server preset; "" generic-x86 (none if servers/ lacks it: the built-in values)
  std::string chip;               ///< chip preset; "" the server's chip
  std::string config_file;        ///< optional user YAML
  /// framework preset (configs/frameworks/NAME.yaml) launching ops op by op; "" none (MindSpore's C++)
  std::string framework;
  std::vector<std::string> sets;  ///< "key=value"; an error names it as "override key=value"
};
/// The origin an error about the override `set` ("key=value") names.
std::string override_origin(const std::string& set);

/// What front ends put in ConfigRequest::dir: the ASCENDSIM_CONFIG_DIR environment variable, else
/// PREFIX/share/ascendsim/configs for an installed binary or Python module (found from its own
/// file), else the source tree's configs/. The library itself never reads the environment.
std::string default_config_dir();
/// Preset names found in dir/chips.
std::vector<std::string> chip_presets(const std::string& dir);
/// Preset names found in dir/servers.
std::vector<std::string> server_presets(const std::string& dir);
/// The server preset used when none is named.
inline constexpr const char* kDefaultServer = "generic-x86";
/// Loads and checks a configuration; throws InputError naming file, key and reason.
SystemConfig load_config(const ConfigRequest& req);
/// Rejects combinations no run can use (buffers too small for one tile, a shard id out of range).
void check_combinations(const SystemConfig& cfg);
/// Applies one YAML file onto the parameters.
void apply_yaml_file(ParamSet& ps, const std::string& path);

}  // namespace ascendsim::sim
