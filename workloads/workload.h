// A training workload: the training-step graph at a batch size plus the dataset it consumes.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "workloads/dataset.h"
#include "workloads/graph.h"

namespace ascendsim::workloads {

struct Workload {
  std::string name;
  std::string description;
  std::int64_t batch_size = 0;
  Graph graph;
  std::vector<TensorId> batch_inputs;  ///< tensors fed per step (image, label), in feed order
  TensorId loss = -1;
  DataRecipe data;        ///< the dataset (its samples fix the epoch length) and its map ops
  std::string optimizer;  ///< e.g. "Momentum(lr=0.01, momentum=0.9)"

  std::int64_t batch_bytes() const;
  std::int64_t steps_per_epoch() const { return data.dataset.samples / batch_size; }  // drop_remainder
};

/// Names accepted by make_workload.
std::vector<std::string> workload_names();
/// Builds a workload; throws std::invalid_argument for an unknown name or a non-positive batch.
Workload make_workload(const std::string& name, std::int64_t batch_size);

}  // namespace ascendsim::workloads
