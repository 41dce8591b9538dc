// Shared by the tests: the configuration request for the presets in the source tree, and the
// default chip's cost model.
#pragma once

#include <unistd.h>

#include <filesystem>
#include <string>

#include "aicore/cost_model.h"
#include "sim/api.h"
#include "sim/config.h"

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

}  // namespace ascendsim::test
