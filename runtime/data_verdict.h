// Is a run data-bound, and what would help? Compares what the data pipeline can deliver with what
// the device consumes, and reads how long the device (or the host loop) actually waited.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "runtime/host_config.h"
#include "runtime/run_result.h"

namespace ascendsim::runtime {

struct DataRates {
  double first_read_s = 0, first_map_s = 0;  ///< per batch in the first epoch: reader thread, one map worker
  double later_read_s = 0, later_map_s = 0;  ///< in later epochs (differ with a cache)
  bool has_later_epochs = false;
  double device_s_per_batch = 0;
};

struct DataVerdict {
  bool data_bound = false;
  double waiting_fraction = 0;        ///< of simulated time, the device or host loop waiting for data
  double pipeline_batches_per_s = 0;  ///< what reader and workers sustain together (later epochs if any)
  double first_epoch_batches_per_s = 0;
  double device_batches_per_s = 0;    ///< what the device's compute alone would consume
  double strategy_batches_per_s = 0;  ///< what the strategy consumes while it does not wait for data
  std::string verdict;
  std::string advice;
  nlohmann::ordered_json to_json() const;
};

/// Data-bound when more than 20% of the run waits for data.
DataVerdict judge_data(const RunResult& r, const DataRates& rates, const HostConfig& host, const PipelineConfig& pipe);

}  // namespace ascendsim::runtime
