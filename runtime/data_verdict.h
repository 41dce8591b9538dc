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
  std::string dominant;               ///< the share of the run's time that is largest (see Dominant)
  double dominant_fraction = 0;       ///< its fraction of the simulated time
  std::string verdict;
  std::string advice;
  nlohmann::ordered_json to_json() const;
};

/// The largest share of a run's time, its phases (breakdown_s) grouped as the verdict names them:
/// "device compute", "host" (launches, syncs, step work and copies while the device idles),
/// "waiting for data", "communication", "set-up" (one-time) or "evaluation".
struct Dominant {
  std::string name;
  double fraction = 0;  ///< of the simulated time
  std::string words;    ///< as the verdict says it; the host's parts named only if the run spent time on them
};
Dominant dominant_share(const RunResult& r);

/// Data-bound when more than 20% of the run waits for data. The verdict names the largest share
/// of the run's time (dominant_share), set-up included.
DataVerdict judge_data(const RunResult& r, const DataRates& rates, const HostConfig& host, const PipelineConfig& pipe);

}  // namespace ascendsim::runtime
