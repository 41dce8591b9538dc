// The data pipeline as a training script builds it (MindSpore's dataset API): the dataset, each
// map() call with its ops, their parameters and workers, the reader's workers, prefetch, NUMA
// binding and dataset offload — read from YAML (`--data FILE`, or a run's `data:` mapping in a
// suite or figures file) into the workload's recipe and the pipeline's parameters. The format is
// docs/model.md's "The data script".
#pragma once

#include <string>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "workloads/dataset.h"

namespace ascendsim::sim {

struct DataScript {
  workloads::DataRecipe recipe;   ///< the dataset and its map ops, in map() calls
  std::vector<std::string> sets;  ///< pipeline.* overrides ("key=value"): workers, prefetch, NUMA
  std::string where;              ///< the file, or the figure or run, for messages
};

/// Reads a data script's mapping; errors name `at` and the key or op.
DataScript parse_data_script(const YAML::Node& node, const std::string& at);
/// Reads a data script file (`--data FILE`).
DataScript load_data_script(const std::string& path);

/// The ops a map(offload=True) call may leave to the device, as MindSpore's dataset offload
/// takes them (the trailing ones of the call).
bool offloadable(workloads::MapOpType t);

}  // namespace ascendsim::sim
