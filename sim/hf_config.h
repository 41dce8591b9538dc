// Hugging Face configs (`--hf-config FILE`, a suite or figures run's `hf_config:`, Python's
// hf_config=): the architecture and sizes of a model's config.json read into a transformer's
// shape (workloads/transformer.h) — LLaMA, Mistral and Qwen2 decoders as the LLaMA shape, GPT-2,
// BERT pretraining. docs/model.md "Hugging Face configs" lists the fields read.
#pragma once

#include <string>

#include "sim/api.h"
#include "workloads/transformer.h"

namespace ascendsim::sim {

/// The architectures a config may name (architectures[0]).
const std::string& hf_architectures();
/// --hf-config's help (the run commands, serve).
extern const char kHfConfigHelp[];

/// The shape a config's JSON text gives; `path` names the file in errors and in the shape's
/// origin, and its stem the workload (a downloaded "config.json": its _name_or_path's last part,
/// else its model_type). Throws InputError naming the file and the field for an architecture not
/// modelled, a field missing, of the wrong type or out of range, sizes that do not fit together.
workloads::TransformerShape parse_hf_config(const std::string& text, const std::string& path);

/// The file a config names: `given` if there is anything at that path, else a bare name's shipped
/// config (<config_dir>/hf/NAME.json, NAME with or without .json) if there is one, else `given`.
std::string hf_config_path(const std::string& given, const std::string& config_dir);

/// Reads the config at `path`. `what` names it in errors about the file itself ("--hf-config
/// PATH"): missing, a directory, a device, unreadable.
workloads::TransformerShape load_hf_config(const std::string& path, const std::string& what);

/// The request's network from a config's shape: the workload its name, the recipe's base shape
/// (the request's shape fields still override it). Refuses a request that names another network
/// (a workload other than the default, a model file); `origin` begins those errors.
void use_hf_config(RunRequest& r, const workloads::TransformerShape& shape, const std::string& origin);

}  // namespace ascendsim::sim
