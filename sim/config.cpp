#include "sim/config.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <fstream>
#include <set>
#include <sstream>

#include <yaml-cpp/yaml.h>

#include "sim/core/error.h"

#include <dlfcn.h>
#include <sys/auxv.h>

#ifndef ASCENDSIM_DEFAULT_CONFIG_DIR
#define ASCENDSIM_DEFAULT_CONFIG_DIR "configs"
#endif
#ifndef ASCENDSIM_CONFIG_FROM_BIN
#define ASCENDSIM_CONFIG_FROM_BIN "../share/ascendsim/configs"
#endif
#ifndef ASCENDSIM_CONFIG_FROM_PYTHON
#define ASCENDSIM_CONFIG_FROM_PYTHON "../../../../share/ascendsim/configs"
#endif

namespace ascendsim::sim {

namespace fs = std::filesystem;

void ServerConfig::declare(ParamSet& ps) {
  ps.text("server.name", name, {}, "preset name of the server (`--server`)");
  ps.text("server.description", description, {}, "one-line description of the server");
  ps.text("server.chip", chip, {}, "the chip preset the server carries, used unless a chip is named");
  ps.text("server.base", base, {}, "in a server preset: the preset it is made from (applied first)");
  ps.integer("server.devices_per_server", devices_per_server, "devices", 1, 8,
             "devices one host feeds: a run's ranks fill servers of this many, each sharing its host's cores");
  ps.text("server.host", host, {},
          "the host preset the server carries (configs/hosts/NAME.yaml; `ascendsim servers` shows it), its values "
          "under the server's own");
}

ParamSet bind_params(SystemConfig& cfg) {
  ParamSet ps;
  cfg.server.declare(ps);
  ps.text("chip.name", cfg.chip.name, {}, "preset name of the chip");
  ps.text("chip.description", cfg.chip.description, {}, "one-line description of the chip");
  ps.text("chip.base", cfg.chip.base, {}, "in a chip preset: the preset it is made from (applied first)");
  cfg.chip.aicore.declare(ps);
  cfg.chip.memory.declare(ps);
  cfg.chip.aicpu.declare(ps);
  cfg.chip.queue.declare(ps);
  cfg.chip.hccl.declare(ps);
  cfg.link.declare(ps);
  cfg.host.declare(ps);
  cfg.pipeline.declare(ps);
  return ps;
}

namespace {
/// The presets of an installed copy: PREFIX/share/ascendsim/configs seen from the file this code
/// was loaded from (PREFIX/bin/ascendsim, or the Python package's extension module), or "".
std::string installed_config_dir() {
  static const char anchor = 0;
  Dl_info self{}, exe{};
  if (!dladdr(&anchor, &self)) return "";
  const auto phdr = getauxval(AT_PHDR);  // the main program's headers
  const bool in_exe = phdr && dladdr(reinterpret_cast<const void*>(phdr), &exe) && exe.dli_fbase == self.dli_fbase;
  std::error_code ec;
  const fs::path file = in_exe ? fs::read_symlink("/proc/self/exe", ec)
                               : (self.dli_fname ? fs::absolute(self.dli_fname, ec) : fs::path());
  if (ec || file.empty()) return "";
  const fs::path dir = (file.parent_path() / (in_exe ? ASCENDSIM_CONFIG_FROM_BIN : ASCENDSIM_CONFIG_FROM_PYTHON))
                           .lexically_normal();
  return fs::is_regular_file(dir / "host.yaml", ec) ? dir.string() : "";
}
}  // namespace

std::string default_config_dir() {
  if (const char* env = std::getenv("ASCENDSIM_CONFIG_DIR"); env && *env) return env;
  if (std::string installed = installed_config_dir(); !installed.empty()) return installed;
  return ASCENDSIM_DEFAULT_CONFIG_DIR;
}

std::string override_origin(const std::string& set) { return "override " + set; }

namespace {
std::string trim(const std::string& s) {
  const auto a = s.find_first_not_of(" \t\r\n");
  if (a == std::string::npos) return "";
  const auto b = s.find_last_not_of(" \t\r\n");
  return s.substr(a, b - a + 1);
}
}  // namespace

namespace {
std::vector<std::string> presets(const std::string& dir_name, const char* kind) {
  std::vector<std::string> names;
  const fs::path dir = fs::path(dir_name) / kind;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec))
    if (entry.path().extension() == ".yaml") names.push_back(entry.path().stem().string());
  std::sort(names.begin(), names.end());
  return names;
}
}  // namespace

std::vector<std::string> chip_presets(const std::string& dir) { return presets(dir, "chips"); }
std::vector<std::string> server_presets(const std::string& dir) { return presets(dir, "servers"); }

namespace {

void walk(ParamSet& ps, const YAML::Node& node, const std::string& prefix, const std::string& path) {
  std::set<std::string> seen;
  for (const auto& kv : node) {
    const std::string where = path + ":" + std::to_string(kv.first.Mark().line + 1);
    if (!kv.first.IsScalar())
      throw InputError(where + ": a key must be a plain name (a section or parameter), not a " +
                       (kv.first.IsMap()        ? "mapping"
                        : kv.first.IsSequence() ? "list"
                                                : "null"));
    const std::string name = kv.first.Scalar();
    const std::string key = prefix.empty() ? name : prefix + "." + name;
    if (!seen.insert(name).second) throw InputError(where + ": '" + key + "' is given twice; keep one");
    const YAML::Node& v = kv.second;
    if (v.IsMap()) {
      if (!ps.is_section(key)) {
        if (ps.find(key)) throw InputError(where + ": parameter '" + key + "' expects a single value, not a mapping");
        ps.set(key, "", where);  // reports the unknown key with suggestions
      }
      walk(ps, v, key, path);
    } else if (v.IsScalar()) {
      if (ps.is_section(key) && !ps.find(key))
        throw InputError(where + ": '" + key + "' is a section; give its parameters as a mapping");
      ps.set(key, v.Scalar(), where);
    } else {
      throw InputError(where + ": parameter '" + key + "' has no value (or a list); give a single value");
    }
  }
}

}  // namespace

void apply_yaml_file(ParamSet& ps, const std::string& path) {
  if (fs::is_directory(path)) throw InputError(path + ": is a directory; give a YAML configuration file");
  if (!fs::exists(path)) throw InputError(path + ": no such configuration file");
  std::ifstream file(path, std::ios::binary);
  if (!file) throw InputError(path + ": cannot read the configuration file");
  std::stringstream text;
  text << file.rdbuf();
  // One document: a '---' (or a '...' end) after content starts another. Found by line, because
  // yaml-cpp's LoadAll never returns on some malformed inputs (",key: 1" yields empty documents
  // without end).
  bool content = false;
  {
    std::istringstream lines(text.str());
    bool ended = false;
    int number = 0;
    for (std::string line; std::getline(lines, line);) {
      ++number;
      const bool marker = line.rfind("---", 0) == 0 && (line.size() == 3 || line[3] == ' ' || line[3] == '\r');
      const bool end = line.rfind("...", 0) == 0 && (line.size() == 3 || line[3] == ' ' || line[3] == '\r');
      const auto first = line.find_first_not_of(" \t\r");
      const bool blank = first == std::string::npos || line[first] == '#';
      if ((marker && content) || (ended && !blank && !end))
        throw InputError(path + ":" + std::to_string(number) + ": a second YAML document ('---'); " +
                         "a configuration file holds one");
      if (end) ended = true;
      if (!blank && !marker && !end) content = true;
    }
  }
  YAML::Node root;
  try {
    root = YAML::Load(text.str());
  } catch (const YAML::Exception& e) {
    throw InputError(path + ":" + std::to_string(e.mark.line + 1) + ":" + std::to_string(e.mark.column + 1) +
                     ": malformed YAML: " + e.msg);
  }
  if (root.IsNull() && content)  // yaml-cpp reads nothing from some malformed text (",key: 1")
    throw InputError(path +
                     ": malformed YAML: no mapping could be read (a key may start with a flow indicator "
                     "such as ',', '[' or '{'; quote it)");
  if (root.IsNull()) return;  // an empty file changes nothing
  if (!root.IsMap())
    throw InputError(path + ": the top level must be a mapping of sections (chip, aicore, link, host, ...)");
  try {
    walk(ps, root, "", path);
  } catch (const YAML::Exception& e) {
    throw InputError(path + ":" + std::to_string(e.mark.line + 1) + ": " + e.msg);
  }
}

void check_combinations(const SystemConfig& cfg) {
  // The smallest Cube tile is one 16x16 fractal, with a ping-pong half for each buffer.
  const auto& a = cfg.chip.aicore;
  struct Need {
    const char* key;
    std::int64_t kib, need_bytes;
    const char* what;
  };
  for (const Need& n : {Need{"aicore.l0a_kib", a.l0a_kib, 2 * 16 * 16 * 2, "two 16x16 fp16 operand fractals"},
                        Need{"aicore.l0b_kib", a.l0b_kib, 2 * 16 * 16 * 2, "two 16x16 fp16 operand fractals"},
                        Need{"aicore.l0c_kib", a.l0c_kib, 2 * 16 * 16 * 4, "two 16x16 fp32 accumulator fractals"},
                        Need{"aicore.l1_kib", a.l1_kib, 2 * 2 * 16 * 16 * 2, "both operands of two k-steps"},
                        Need{"aicore.ub_kib", a.ub_kib, 4 * 1024, "two vector tiles and a drained Cube tile"}})
    if (n.kib * 1024 < n.need_bytes)
      throw InputError(std::string(n.key) + " = " + std::to_string(n.kib) + " KiB cannot hold " + n.what + " (" +
                       std::to_string(n.need_bytes) + " B); raise it");
  const std::int64_t group = cfg.chip.hccl.hccs_group_size, per_server = cfg.server.devices_per_server;
  if (group < per_server && per_server % group != 0)
    throw InputError("hccl.hccs_group_size " + std::to_string(group) + " does not divide server.devices_per_server " +
                     std::to_string(per_server) + "; give a size whose groups fill the server");
  if (cfg.pipeline.shard_id >= cfg.pipeline.num_shards)
    throw InputError("pipeline.shard_id " + std::to_string(cfg.pipeline.shard_id) +
                     " is not below pipeline.num_shards " + std::to_string(cfg.pipeline.num_shards));
  if (!a.double_buffer && a.model != "event")
    throw InputError(
        "aicore.double_buffer = false is the event model's: the analytic model always schedules two "
        "halves; set aicore.model=event (--aicore-model event) as well");
}

namespace {

/// Applies DIR/<kind>/<name>.yaml after the preset it is made from (`<section>.base`, applied
/// first, as far back as eight presets), checks that the file names itself (`<section>.name`), and
/// calls `applied` after each file with its path and name.
void apply_preset_chain(ParamSet& ps, const fs::path& dir, const std::string& kind, const std::string& section,
                        const std::string& name, const std::string& named_by, int depth,
                        const std::function<void(const fs::path&, const std::string&)>& applied) {
  const fs::path file = dir / kind / (name + ".yaml");
  if (!fs::is_regular_file(file))
    throw InputError(named_by + ": " + section + " preset '" + name + "': no file " + file.string());
  if (depth > 8) throw InputError(file.string() + ": " + section + ".base goes round in a circle (" + name + ")");
  std::string base;
  try {
    const YAML::Node root = YAML::LoadFile(file.string());
    if (root.IsMap() && root[section] && root[section].IsMap() && root[section]["base"])
      base = root[section]["base"].as<std::string>();
  } catch (const YAML::Exception& e) {
    throw InputError(file.string() + ":" + std::to_string(e.mark.line + 1) + ": malformed YAML: " + e.msg);
  }
  if (!base.empty()) apply_preset_chain(ps, dir, kind, section, base, file.string(), depth + 1, applied);
  apply_yaml_file(ps, file.string());
  const std::string key = section + ".name";
  if (const ParamSpec* spec = ps.find(key); spec && ParamSet::value_string(*spec) != name)
    throw InputError(file.string() + ": " + key + " is '" + ParamSet::value_string(*spec) + "' but the file is the '" +
                     name + "' preset");
  applied(file, name);
}

/// Applies configs/hosts/<name>.yaml after its base, recording each preset's fitted parameters
/// (`host.fitted`, which then reads empty again).
void apply_host_preset(ParamSet& ps, SystemConfig& cfg, const fs::path& dir, const std::string& name,
                       const std::string& named_by) {
  cfg.host.fitted.clear();
  apply_preset_chain(ps, dir, "hosts", "host", name, named_by, 0, [&](const fs::path& file, const std::string& n) {
    HostPresetUse use{n, {}};
    std::istringstream keys(cfg.host.fitted);
    for (std::string k; keys >> k;) {
      const ParamSpec* spec = ps.find(k);
      if (!spec || spec->type != ParamType::Real)
        throw InputError(file.string() + ": host.fitted names '" + k + "', which is no real-valued parameter");
      use.fitted.push_back(k);
    }
    cfg.host.fitted.clear();
    cfg.host.base.clear();
    cfg.host_presets.push_back(std::move(use));
  });
}

}  // namespace

SystemConfig load_config(const ConfigRequest& req) {
  SystemConfig cfg;
  ParamSet ps = bind_params(cfg);
  if (req.dir.empty()) throw InputError("no configuration directory given (it holds host.yaml, servers/ and chips/)");
  if (!fs::is_directory(req.dir))
    throw InputError("configuration directory " + req.dir +
                     " does not exist (it holds host.yaml, servers/ and chips/)");
  const fs::path dir(req.dir);
  const fs::path host = dir / "host.yaml";
  if (fs::exists(host)) apply_yaml_file(ps, host.string());

  const auto listing = [](const std::vector<std::string>& names) {
    std::string known;
    for (const auto& n : names) known += (known.empty() ? "" : ", ") + n;
    return known.empty() ? std::string("none found; set ASCENDSIM_CONFIG_DIR") : known;
  };
  // The server: the one named, else generic-x86 if the directory has it (a directory without
  // servers/ keeps the built-in values).
  const std::string server_name = req.server.empty() ? kDefaultServer : req.server;
  const fs::path server = dir / "servers" / (server_name + ".yaml");
  if (fs::is_regular_file(server)) {
    // The server preset after the one it is made from (`server.base`), then its host preset (its
    // base first), then the server's own keys again, so that they win over the host's.
    const auto apply_server = [&] {
      apply_preset_chain(ps, dir, "servers", "server", server_name, server.string(), 0,
                         [&](const fs::path&, const std::string&) { cfg.server.base.clear(); });
    };
    apply_server();
    if (!cfg.server.host.empty()) {
      apply_host_preset(ps, cfg, dir, cfg.server.host, server.string());
      apply_server();
    }
  } else if (!req.server.empty()) {
    throw InputError("unknown server '" + req.server + "': no file " + server.string() + " (presets in " +
                     (dir / "servers").string() + ": " + listing(server_presets(req.dir)) +
                     "; `ascendsim servers` lists them)");
  }

  const std::string chip_name = req.chip.empty() ? cfg.server.chip : req.chip;
  const fs::path chip = dir / "chips" / (chip_name + ".yaml");
  if (!fs::is_regular_file(chip)) {
    const std::string whose = req.chip.empty() ? " (the chip of server " + cfg.server.name + ")" : "";
    throw InputError("unknown chip '" + chip_name + "'" + whose + " (presets in " + (dir / "chips").string() + ": " +
                     listing(chip_presets(req.dir)) + ")");
  }
  const ServerConfig before_chip = cfg.server;
  // The chip preset, after the one it is made from (`chip.base`: a variant differing in a few keys).
  apply_preset_chain(
      ps, dir, "chips", "chip", chip_name, chip.string(), 0, [&](const fs::path& file, const std::string&) {
        if (cfg.server.name != before_chip.name || cfg.server.chip != before_chip.chip)
          throw InputError(file.string() +
                           ": a chip preset does not name a server or its chip (server.name, server.chip)");
        cfg.chip.base.clear();
      });
  // The chip's and the server's names are the presets': a configuration file or an override
  // changes parameters, it does not relabel the hardware.
  const auto renamed = [&](const std::string& origin, const std::string& key) {
    if (key == "chip.base" || key == "host.base" || key == "server.base")
      return InputError(origin, key,
                        key + " belongs in a preset file (the preset it is made from); make a preset in " +
                            (dir / (key == "chip.base" ? "chips" : key == "host.base" ? "hosts" : "servers")).string() + " to build on another");
    if (key.rfind("server.", 0) == 0)
      return InputError(origin, key,
                        key + " is the server preset's and cannot be set; choose the server with its preset (" +
                            server_name + " is in use; `ascendsim servers` lists them) and the chip with --chip");
    return InputError(origin, key,
                      "chip.name is the preset's name and cannot be set; choose the chip with its preset (" +
                          chip_name + " is in use; `ascendsim chips` lists them)");
  };
  const std::string server_chip = cfg.server.chip;
  const auto relabelled = [&]() -> std::string {
    if (cfg.chip.name != chip_name) return "chip.name";
    if (cfg.server.name != server_name) return "server.name";
    if (cfg.server.chip != server_chip) return "server.chip";
    if (!cfg.chip.base.empty()) return "chip.base";
    if (!cfg.host.base.empty()) return "host.base";
    if (!cfg.server.base.empty()) return "server.base";
    return "";
  };
  if (!req.framework.empty()) {  // the framework launching ops op by op (eager serving, non-sink)
    const bool a_name = req.framework.front() != '.' &&
                        std::all_of(req.framework.begin(), req.framework.end(), [](unsigned char c) {
                          return std::isalnum(c) || c == '-' || c == '_' || c == '.';
                        });
    const fs::path file = dir / "frameworks" / (req.framework + ".yaml");
    if (!a_name || !fs::is_regular_file(file)) {
      const std::vector<std::string> names = presets(req.dir, "frameworks");
      throw InputError("framework", "framework",
                       a_name ? "no preset '" + req.framework + "': no file " + file.string() + " (presets: " +
                                    listing(names) + ")"
                              : "'" + req.framework + "' is not a preset's name (presets: " + listing(names) +
                                    "; the files in " + (dir / "frameworks").string() + ")");
    }
    apply_yaml_file(ps, file.string());
    if (cfg.host.framework != req.framework)
      throw InputError(file.string() + ": framework.name is '" + cfg.host.framework + "' but the file is the '" +
                       req.framework + "' preset");
  }
  if (!req.config_file.empty()) {
    apply_yaml_file(ps, req.config_file);
    if (const std::string key = relabelled(); !key.empty()) throw renamed(req.config_file, key);
  }
  for (const auto& s : req.sets) {
    const auto eq = s.find('=');
    if (eq == std::string::npos || eq == 0)
      throw InputError(override_origin(s), "", "expected key=value, e.g. link.h2d_bandwidth_gbps=48");
    const std::string key = s.substr(0, eq), value = s.substr(eq + 1);
    if (key != trim(key) || value != trim(value))
      throw InputError(
          override_origin(s), trim(key),
          "spaces around the key or value; write key=value without them, e.g. " + trim(key) + "=" + trim(value));
    if (key == "chip.name" || key == "server.name" || key == "server.chip" || key == "chip.base" ||
        key == "host.base" || key == "server.base")
      throw renamed(override_origin(s), key);
    ps.set(key, value, override_origin(s));
  }
  check_combinations(cfg);
  return cfg;
}

}  // namespace ascendsim::sim
