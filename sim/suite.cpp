// Suites (sim/regression.h): a suite file's runs read into requests, and the YAML of one run that
// suites and the figures files share (sim/run_yaml.h).
#include "sim/regression.h"

#include <cctype>
#include <cmath>
#include <filesystem>
#include <memory>
#include <optional>
#include <set>

#include <yaml-cpp/yaml.h>

#include "sim/config.h"
#include "sim/core/error.h"
#include "sim/data_script.h"
#include "sim/hf_config.h"
#include "sim/model_zoo.h"
#include "sim/rank_table.h"
#include "sim/run_yaml.h"

namespace ascendsim::sim {

namespace fs = std::filesystem;

namespace run_yaml {

std::string scalar(const YAML::Node& n, const std::string& where, const std::string& key) {
  if (!n.IsScalar()) throw InputError(where + ": '" + key + "' needs a single value");
  return n.Scalar();
}

std::int64_t whole(const YAML::Node& n, const std::string& where, const std::string& key) {
  const std::string s = scalar(n, where, key);
  std::size_t used = 0;
  std::int64_t v = 0;
  try {
    v = std::stoll(s, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != s.size() || s.empty())
    throw InputError(where + ": '" + key + "' expects a whole number, got '" + s + "'");
  return v;
}

bool valid_name(const std::string& n) {
  if (n.empty() || n[0] == '.') return false;
  for (char c : n)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.')) return false;
  return true;
}

}  // namespace run_yaml

namespace run_yaml {
bool boolean(const YAML::Node& v, const std::string& at, const std::string& key);

/// A run's `hf_config`: a Hugging Face config.json, a relative path in the configuration directory
/// (or a shipped config's name, hf/NAME.json there).
workloads::TransformerShape run_hf_config(const YAML::Node& v, const std::string& at, const std::string& config_dir) {
  const std::string given = scalar(v, at, "hf_config");
  fs::path file = fs::path(given).is_absolute() ? fs::path(given) : fs::path(config_dir) / given;
  std::error_code ec;
  if (!fs::exists(file, ec))
    if (const std::string shipped = hf_config_path(given, config_dir); shipped != given) file = shipped;
  return load_hf_config(file.string(), at + ": hf_config " + file.string());
}

RunRequest parse_run(const YAML::Node& run, const std::string& at, const std::string& config_dir, std::string* name) {
  RunRequest r;
  r.config.dir = config_dir;
  bool batch_given = false;
  std::optional<workloads::TransformerShape> hf;
  for (const auto& kv : run) {
    const std::string key = kv.first.as<std::string>();
    const YAML::Node& v = kv.second;
    if (key == "name" && name) {
      *name = scalar(v, at, key);
    } else if (key == "workload") {
      r.workload = scalar(v, at, key);
    } else if (key == "model") {
      r.model = scalar(v, at, key);
    } else if (key == "hf_config") {
      hf = run_hf_config(v, at, config_dir);
    } else if (key == "layers" || key == "hidden" || key == "heads" || key == "kv_heads" || key == "ffn" ||
               key == "seq_length" || key == "vocab") {  // a transformer's shape over its preset's (or config's)
      auto& field = key == "layers"       ? r.recipe.layers
                    : key == "hidden"     ? r.recipe.hidden
                    : key == "heads"      ? r.recipe.heads
                    : key == "kv_heads"   ? r.recipe.kv_heads
                    : key == "ffn"        ? r.recipe.ffn
                    : key == "seq_length" ? r.recipe.seq_length
                                          : r.recipe.vocab;
      field = whole(v, at, key);
    } else if (key == "flash_attention") {
      const std::string b = scalar(v, at, key);
      if (b != "true" && b != "false") throw InputError(at + ": 'flash_attention' is true or false");
      r.recipe.flash_attention = b == "true";
    } else if (key == "export") {  // a model zoo network: <cache>/NAME.onnx, made when missing (sim/model_zoo.h)
      if (run["model"]) throw InputError(at + ": give 'model' or 'export', not both");
      r.model = zoo_model(scalar(v, at, key), at);
    } else if (key == "mode") {
      r.mode = scalar(v, at, key);
    } else if (key == "loss") {
      r.loss = scalar(v, at, key);
    } else if (key == "strategies") {
      if (!v.IsSequence() || v.size() == 0) throw InputError(at + ": 'strategies' is a non-empty list");
      r.strategies.clear();
      for (const auto& s : v) r.strategies.push_back(runtime::parse_strategy(scalar(s, at, key)));
    } else if (key == "epochs") {
      r.epochs = whole(v, at, key);
    } else if (key == "steps_per_epoch") {
      r.steps_per_epoch = whole(v, at, key);
    } else if (key == "batch_size") {
      r.batch_size = whole(v, at, key);
      batch_given = true;
    } else if (key == "sink_size") {
      r.sink_size = whole(v, at, key);
    } else if (key == "devices") {
      r.devices = whole(v, at, key);
    } else if (key == "rank_table") {
      const RankTable t = load_rank_table(scalar(v, at, key));
      r.devices = static_cast<std::int64_t>(t.devices.size());
      r.devices_per_server = t.devices_per_server();
    } else if (key == "all_reduce_fusion") {
      if (!v.IsSequence()) throw InputError(at + ": 'all_reduce_fusion' is a list of gradient indices, e.g. [85, 160]");
      for (const auto& x : v) r.all_reduce_fusion.push_back(whole(x, at, key));
    } else if (key == "parameter_broadcast") {
      const std::string b = scalar(v, at, key);
      if (b != "true" && b != "false") throw InputError(at + ": 'parameter_broadcast' is true or false");
      r.parameter_broadcast = b == "true";
    } else if (key == "chip") {
      r.config.chip = scalar(v, at, key);
    } else if (key == "server") {
      r.config.server = scalar(v, at, key);
    } else if (key == "framework") {
      r.config.framework = scalar(v, at, key);
    } else if (key == "config") {  // as --config; a relative path is in the configuration directory
      const fs::path file = fs::path(scalar(v, at, key)).is_absolute() ? fs::path(scalar(v, at, key))
                                                                       : fs::path(config_dir) / scalar(v, at, key);
      if (!fs::is_regular_file(file))
        throw InputError(at + ": config: no file " + file.string() +
                         " (a YAML of parameters, as --config; relative to the configuration directory)");
      r.config.config_file = file.string();
    } else if (key == "dataset") {
      r.dataset = scalar(v, at, key);
    } else if (key == "dataset_index") {
      r.dataset_index = scalar(v, at, key);
    } else if (key == "data") {  // the pipeline as the script builds it, inline or a file
      DataScript d;
      if (v.IsScalar()) {
        const fs::path file = fs::path(v.Scalar()).is_absolute() ? fs::path(v.Scalar()) : fs::path(config_dir) / v.Scalar();
        d = load_data_script(file.string());
      } else {
        d = parse_data_script(v, at + ": data");
      }
      r.data = std::make_shared<const workloads::DataRecipe>(d.recipe);
      r.data_where = d.where;
      r.config.sets.insert(r.config.sets.begin(), d.sets.begin(), d.sets.end());
    } else if (key == "eval_every") {
      r.eval_every = whole(v, at, key);
    } else if (key == "checkpoint_every") {
      r.checkpoint_every = whole(v, at, key);
    } else if (key == "checkpoint_async") {
      r.checkpoint_async = boolean(v, at, key);
    } else if (key == "device_mtbf_hours") {
      r.device_mtbf_hours = number(v, at, key);
    } else if (key == "fault_seeds") {
      r.fault_seeds = whole(v, at, key);
    } else if (key == "amp_level") {
      r.recipe.amp_level = scalar(v, at, key);
    } else if (key == "keep_batchnorm_fp32") {
      const std::string b = scalar(v, at, key);
      if (b != "true" && b != "false") throw InputError(at + ": 'keep_batchnorm_fp32' is true or false");
      r.recipe.keep_batchnorm_fp32 = b == "true";
    } else if (key == "graph_kernel_fusion") {
      const std::string b = scalar(v, at, key);
      if (b != "true" && b != "false") throw InputError(at + ": 'graph_kernel_fusion' is true or false");
      r.recipe.graph_kernel_fusion = b == "true";
    } else if (key == "ub_fusion") {
      const std::string b = scalar(v, at, key);
      if (b != "true" && b != "false") throw InputError(at + ": 'ub_fusion' is true or false");
      r.recipe.ub_fusion = b == "true";
    } else if (key == "loss_scale") {
      r.recipe.loss_scale = static_cast<double>(whole(v, at, key));
    } else if (key == "optimizer") {
      r.recipe.optimizer = scalar(v, at, key);
    } else if (key == "tensor_parallel") {
      r.tensor_parallel = whole(v, at, key);
    } else if (key == "pipeline_stages") {
      r.pipeline_stages = whole(v, at, key);
    } else if (key == "micro_batches") {
      r.micro_batches = whole(v, at, key);
    } else if (key == "gradient_accumulation") {
      r.gradient_accumulation = whole(v, at, key);
    } else if (key == "optimizer_shard") {
      r.optimizer_shard = boolean(v, at, key);
    } else if (key == "optimizer_shard_level") {  // implies optimizer_shard
      r.optimizer_shard_level = whole(v, at, key);
      r.optimizer_shard = true;
    } else if (key == "recompute") {
      r.recompute = boolean(v, at, key);
    } else if (key == "sequence_parallel") {
      r.sequence_parallel = boolean(v, at, key);
    } else if (key == "set") {
      if (v.IsMap()) {
        for (const auto& p : v) r.config.sets.push_back(p.first.as<std::string>() + "=" + scalar(p.second, at, key));
      } else if (v.IsSequence()) {
        for (const auto& p : v) r.config.sets.push_back(scalar(p, at, key));
      } else {
        throw InputError(at + ": 'set' is a mapping of parameter keys to values (or a list of key=value)");
      }
    } else {
      throw InputError(at + ": unknown key '" + key + "' (a run takes " + (name ? "name, " : "") +
                       "workload, model, hf_config, mode, loss, strategies, epochs, steps_per_epoch, batch_size, "
                       "sink_size, devices, rank_table, "
                       "all_reduce_fusion, parameter_broadcast, server, framework, chip, config, "
                       "export, dataset, dataset_index, data, eval_every, checkpoint_every, checkpoint_async, "
                       "device_mtbf_hours, fault_seeds, "
                       "amp_level, keep_batchnorm_fp32, loss_scale, optimizer, graph_kernel_fusion, ub_fusion, flash_attention, "
                       "layers, hidden, heads, kv_heads, ffn, seq_length, vocab, tensor_parallel, sequence_parallel, "
                       "pipeline_stages, micro_batches, gradient_accumulation, optimizer_shard, optimizer_shard_level, recompute, set)");
    }
  }
  if (hf) use_hf_config(r, *hf, at + ": hf_config");
  if (!r.model.empty() && !batch_given) r.batch_size = 0;  // the model's own
  return r;
}

bool boolean(const YAML::Node& v, const std::string& at, const std::string& key) {
  const std::string b = scalar(v, at, key);
  if (b != "true" && b != "false") throw InputError(at + ": '" + key + "' is true or false");
  return b == "true";
}

/// `s` as a number if all of it is one.
std::optional<double> whole_real(const std::string& s) {
  std::size_t used = 0;
  double v = 0;
  try {
    v = std::stod(s, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (s.empty() || used != s.size()) return std::nullopt;
  return v;
}

double number(const YAML::Node& n, const std::string& at, const std::string& key) {
  const std::string s = scalar(n, at, key);
  const std::optional<double> parsed = whole_real(s);
  const double v = parsed.value_or(0);
  if (!parsed || !std::isfinite(v)) throw InputError(at + ": '" + key + "' expects a number, got '" + s + "'");
  return v;
}

/// A serving run of a suite (`serve: true`), its keys those of ServeRequest.
ServeRequest parse_serve_run(const YAML::Node& run, const std::string& at, const std::string& config_dir,
                             std::string* name) {
  ServeRequest r;
  r.config.dir = config_dir;
  auto list = [&](const YAML::Node& v, const std::string& key) {
    if (!v.IsSequence() || v.size() == 0) throw InputError(at + ": '" + key + "' is a non-empty list");
    return v;
  };
  for (const auto& kv : run) {
    const std::string key = kv.first.as<std::string>();
    const YAML::Node& v = kv.second;
    if (key == "name")
      *name = scalar(v, at, key);
    else if (key == "serve") {
      if (!boolean(v, at, key)) throw InputError(at + ": 'serve' is true for a serving run (leave it out otherwise)");
    } else if (key == "workload")
      r.workload = scalar(v, at, key);
    else if (key == "gpt_size")
      r.gpt_size = scalar(v, at, key);
    else if (key == "hf_config")
      r.shape.base_shape = std::make_shared<const workloads::TransformerShape>(run_hf_config(v, at, config_dir));
    else if (key == "layers")
      r.shape.layers = whole(v, at, key);
    else if (key == "hidden")
      r.shape.hidden = whole(v, at, key);
    else if (key == "heads")
      r.shape.heads = whole(v, at, key);
    else if (key == "kv_heads")
      r.shape.kv_heads = whole(v, at, key);
    else if (key == "ffn")
      r.shape.ffn = whole(v, at, key);
    else if (key == "vocab")
      r.shape.vocab = whole(v, at, key);
    else if (key == "server")
      r.config.server = scalar(v, at, key);
    else if (key == "framework")
      r.config.framework = scalar(v, at, key);
    else if (key == "chip")
      r.config.chip = scalar(v, at, key);
    else if (key == "devices")
      r.devices = whole(v, at, key);
    else if (key == "tensor_parallel")
      r.tensor_parallel = whole(v, at, key);
    else if (key == "launch") {
      r.launch.clear();
      for (const auto& m : list(v, key)) r.launch.push_back(runtime::parse_launch_mode(scalar(m, at, key)));
    } else if (key == "rate")
      r.rate = number(v, at, key);
    else if (key == "requests")
      r.requests = whole(v, at, key);
    else if (key == "prompt_tokens")
      r.prompt_tokens = whole(v, at, key);
    else if (key == "output_tokens")
      r.output_tokens = whole(v, at, key);
    else if (key == "length_spread")
      r.length_spread = number(v, at, key);
    else if (key == "arrivals")
      r.arrivals = scalar(v, at, key);
    else if (key == "seed")
      r.seed = static_cast<std::uint64_t>(whole(v, at, key));
    else if (key == "max_seqs")
      r.max_seqs = whole(v, at, key);
    else if (key == "max_batched_tokens")
      r.max_batched_tokens = whole(v, at, key);
    else if (key == "chunked_prefill")
      r.chunked_prefill = boolean(v, at, key);
    else if (key == "block_size")
      r.block_size = whole(v, at, key);
    else if (key == "kv_blocks")
      r.kv_blocks = whole(v, at, key);
    else if (key == "memory_utilization")
      r.memory_utilization = number(v, at, key);
    else if (key == "multi_step")
      r.multi_step = whole(v, at, key);
    else if (key == "sampling")
      r.sampling = scalar(v, at, key);
    else if (key == "capture")
      r.capture = scalar(v, at, key);
    else if (key == "slo_ttft_ms")
      r.slo_ttft_ms = number(v, at, key);
    else if (key == "slo_tpot_ms")
      r.slo_tpot_ms = number(v, at, key);
    else if (key == "graph_buckets") {
      r.graph_buckets.clear();
      for (const auto& b : list(v, key)) r.graph_buckets.push_back(whole(b, at, key));
    } else if (key == "rates") {
      for (const auto& b : list(v, key)) r.rates.push_back(number(b, at, key));
    } else if (key == "decode_batches") {
      r.decode_batches.clear();
      for (const auto& b : list(v, key)) r.decode_batches.push_back(whole(b, at, key));
    } else if (key == "set") {
      if (!v.IsMap()) throw InputError(at + ": 'set' is a mapping of parameter keys to values");
      for (const auto& p : v) r.config.sets.push_back(p.first.as<std::string>() + "=" + scalar(p.second, at, key));
    } else {
      throw InputError(
          at + ": unknown key '" + key +
          "' (a serving run takes name, serve, workload, gpt_size, hf_config, layers, hidden, heads, kv_heads, ffn, vocab, "
          "framework, "
          "server, chip, set, devices, tensor_parallel, launch, rate, requests, prompt_tokens, "
          "output_tokens, length_spread, arrivals, seed, max_seqs, max_batched_tokens, chunked_prefill, "
          "block_size, kv_blocks, memory_utilization, multi_step, sampling, capture, graph_buckets, rates, "
          "decode_batches, slo_ttft_ms, slo_tpot_ms)");
    }
  }
  return r;
}

}  // namespace run_yaml

std::vector<SuiteEntry> load_suite(const std::string& path, const std::string& config_dir, std::string* suite_name) {
  if (fs::is_directory(path)) throw InputError(path + ": is a directory; give a suite YAML file");
  if (!fs::exists(path)) throw InputError(path + ": no such suite file");
  YAML::Node root;
  try {
    root = YAML::LoadFile(path);
  } catch (const YAML::Exception& e) {
    throw InputError(path + ":" + std::to_string(e.mark.line + 1) + ": malformed YAML: " + e.msg);
  }
  if (!root.IsMap() || !root["runs"] || !root["runs"].IsSequence() || root["runs"].size() == 0)
    throw InputError(path + ": a suite is a mapping with `name` and a non-empty list `runs`");
  for (const auto& kv : root) {
    const std::string k = kv.first.as<std::string>();
    if (k != "name" && k != "runs") throw InputError(path + ": unknown key '" + k + "' (a suite has name and runs)");
  }
  if (suite_name) *suite_name = root["name"] ? run_yaml::scalar(root["name"], path, "name") : fs::path(path).stem().string();
  std::vector<SuiteEntry> out;
  std::set<std::string> names;
  std::size_t index = 0;
  for (const auto& run : root["runs"]) {
    ++index;
    const std::string at = path + ":" + std::to_string(run.Mark().line + 1) + ": run " + std::to_string(index);
    if (!run.IsMap()) throw InputError(at + ": a run is a mapping (name, workload, ...)");
    SuiteEntry e;
    if (run["serve"])
      e.serve = run_yaml::parse_serve_run(run, at, config_dir, &e.name);
    else
      e.request = run_yaml::parse_run(run, at, config_dir, &e.name);
    if (!run_yaml::valid_name(e.name))
      throw InputError(at + ": needs a `name` of letters, digits, '-', '_' or '.' (it names the report file)");
    if (!names.insert(e.name).second) throw InputError(at + ": the name '" + e.name + "' is used twice");
    out.push_back(std::move(e));
  }
  return out;
}


}  // namespace ascendsim::sim
