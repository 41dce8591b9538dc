// Shared by the tests: the configuration request for the presets in the source tree, and the
// default chip's cost model.
#pragma once

#include <unistd.h>

#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "aicore/cost_model.h"
#include "sim/api.h"
#include "sim/config.h"
#include "workloads/dataset.h"

namespace ascendsim::test {

inline sim::ConfigRequest config_request() {
  sim::ConfigRequest r;
  r.dir = ASCENDSIM_SOURCE_DIR "/configs";
  return r;
}

/// A path in the temporary directory of this process's own: `name` with the process id, so that
/// test runs side by side (two checkouts, ctest -j) do not share files.
inline std::filesystem::path temp_path(const std::string& name) {
  return std::filesystem::temp_directory_path() / (name + "_" + std::to_string(::getpid()));
}

/// A run of a built-in transformer made small: `workload` ("gpt", "llama-7b", ...) with `layers`
/// layers of width `hidden`, `heads` heads, an MLP of `ffn`, sequences of `seq` tokens and a
/// vocabulary of `vocab`, on the source tree's presets.
inline sim::RunRequest small_transformer(const std::string& workload, std::int64_t layers, std::int64_t hidden,
                                         std::int64_t heads, std::int64_t ffn, std::int64_t seq, std::int64_t vocab) {
  sim::RunRequest r;
  r.config = config_request();
  r.workload = workload;
  r.recipe.layers = layers;
  r.recipe.hidden = hidden;
  r.recipe.heads = heads;
  r.recipe.ffn = ffn;
  r.recipe.seq_length = seq;
  r.recipe.vocab = vocab;
  return r;
}

/// The default chip's cost model (the ascend910 preset's values), cached.
inline const aicore::CostModel& cost_model() {
  static aicore::CachedCostModel m(aicore::make_pipe_cost_model({}, {}));
  return m;
}

/// A recipe on `h` x `w` x 3 raw (not encoded) samples, so every row has the same geometry.
inline workloads::DataRecipe raw_recipe(std::int64_t h, std::int64_t w, std::vector<workloads::MapOp> maps) {
  workloads::DataRecipe r;
  r.dataset.format = workloads::DatasetFormat::Cifar10Binary;
  r.dataset.samples = 100;
  r.dataset.height = h;
  r.dataset.width = w;
  r.dataset.channels = 3;
  r.dataset.classes = 10;
  r.dataset.record_bytes = h * w * 3;
  r.maps = std::move(maps);
  return r;
}

}  // namespace ascendsim::test
