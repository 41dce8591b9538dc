#include "sim/config.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>

#include <yaml-cpp/yaml.h>

#include "sim/core/error.h"

#ifndef ASCENDSIM_DEFAULT_CONFIG_DIR
#define ASCENDSIM_DEFAULT_CONFIG_DIR "configs"
#endif

namespace ascendsim::sim {

namespace fs = std::filesystem;

ParamSet bind_params(SystemConfig& cfg) {
  ParamSet ps;
  ps.text("chip.name", cfg.chip.name, {}, "preset name of the chip");
  ps.text("chip.description", cfg.chip.description, {}, "one-line description of the chip");
  cfg.chip.aicore.declare(ps);
  cfg.chip.memory.declare(ps);
  cfg.chip.aicpu.declare(ps);
  cfg.chip.queue.declare(ps);
  cfg.link.declare(ps);
  cfg.host.declare(ps);
  cfg.pipeline.declare(ps);
  return ps;
}

std::string default_config_dir() {
  if (const char* env = std::getenv("ASCENDSIM_CONFIG_DIR"); env && *env) return env;
  return ASCENDSIM_DEFAULT_CONFIG_DIR;
}

std::string override_origin(const std::string& set) { return "override " + set; }

std::vector<std::string> chip_presets(const std::string& dir_name) {
  std::vector<std::string> names;
  const fs::path dir = fs::path(dir_name) / "chips";
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec))
    if (entry.path().extension() == ".yaml") names.push_back(entry.path().stem().string());
  std::sort(names.begin(), names.end());
  return names;
}

namespace {

void walk(ParamSet& ps, const YAML::Node& node, const std::string& prefix, const std::string& path) {
  for (const auto& kv : node) {
    const std::string key = prefix.empty() ? kv.first.as<std::string>() : prefix + "." + kv.first.as<std::string>();
    const YAML::Node& v = kv.second;
    const std::string where = path + ":" + std::to_string(kv.first.Mark().line + 1);
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
  if (!fs::is_regular_file(path)) throw InputError(path + ": no such configuration file");
  YAML::Node root;
  try {
    root = YAML::LoadFile(path);
  } catch (const YAML::Exception& e) {
    throw InputError(path + ":" + std::to_string(e.mark.line + 1) + ":" + std::to_string(e.mark.column + 1) +
                     ": malformed YAML: " + e.msg);
  }
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
  if (cfg.pipeline.shard_id >= cfg.pipeline.num_shards)
    throw InputError("pipeline.shard_id " + std::to_string(cfg.pipeline.shard_id) +
                     " is not below pipeline.num_shards " + std::to_string(cfg.pipeline.num_shards));
}

SystemConfig load_config(const ConfigRequest& req) {
  SystemConfig cfg;
  ParamSet ps = bind_params(cfg);
  if (req.dir.empty()) throw InputError("no configuration directory given (it holds host.yaml and chips/)");
  if (!fs::is_directory(req.dir))
    throw InputError("configuration directory " + req.dir + " does not exist (it holds host.yaml and chips/)");
  const fs::path dir(req.dir);
  const fs::path host = dir / "host.yaml";
  if (fs::exists(host)) apply_yaml_file(ps, host.string());

  const fs::path chip = dir / "chips" / (req.chip + ".yaml");
  if (!fs::is_regular_file(chip)) {
    std::string known;
    for (const auto& n : chip_presets(req.dir)) known += (known.empty() ? "" : ", ") + n;
    throw InputError("unknown chip '" + req.chip + "' (presets in " + (dir / "chips").string() + ": " +
                     (known.empty() ? "none found; set ASCENDSIM_CONFIG_DIR" : known) + ")");
  }
  apply_yaml_file(ps, chip.string());
  if (cfg.chip.name != req.chip)
    throw InputError(chip.string() + ": chip.name is '" + cfg.chip.name + "' but the file is the '" + req.chip +
                     "' preset");
  if (!req.config_file.empty()) apply_yaml_file(ps, req.config_file);
  for (const auto& s : req.sets) {
    const auto eq = s.find('=');
    if (eq == std::string::npos || eq == 0)
      throw InputError(override_origin(s), "", "expected key=value, e.g. link.h2d_bandwidth_gbps=48");
    ps.set(s.substr(0, eq), s.substr(eq + 1), override_origin(s));
  }
  check_combinations(cfg);
  return cfg;
}

}  // namespace ascendsim::sim
