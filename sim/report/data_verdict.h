// Is a run data-bound, and what would help? Compares what the data pipeline can deliver with what
// the device consumes, and reads how long the device (or the host loop) actually waited.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "runtime/host_config.h"
#include "runtime/run_result.h"

namespace ascendsim::report {

using runtime::HostConfig;
using runtime::PipelineConfig;
using runtime::RunResult;


/// One stage of the pipeline's execution tree as the verdict weighs it.
struct StageRate {
  std::string name;
  std::int64_t threads = 1;         ///< the threads that share a batch's rows: min(workers, batch)
  bool source = false;              ///< the reader (its rate: one batch per read_s)
  double first_s = 0, later_s = 0;  ///< one batch on one thread: first epoch, later epochs (differ with a cache)
  /// The source's wait for storage within first_s and later_s: its workers do not divide it.
  double storage_first_s = 0, storage_later_s = 0;
};

struct DataRates {
  std::vector<StageRate> stages;  ///< the execution tree, source first
  bool has_later_epochs = false;
  double device_s_per_batch = 0;
  /// The recipe begins with a deterministic map op, which a map cache can hold (--cache map).
  bool map_cache_possible = true;
};

struct DataVerdict {
  bool data_bound = false;
  double waiting_fraction = 0;        ///< of simulated time, the device or host loop waiting for data
  double first_fill_s = 0;            ///< of it, the wait for the first batch (in the breakdown's set-up)
  double pipeline_batches_per_s = 0;  ///< what the slowest stage sustains (later epochs if any)
  std::string bounding_stage;         ///< that stage
  double first_epoch_batches_per_s = 0;
  double device_batches_per_s = 0;    ///< what the device's compute alone would consume
  double strategy_batches_per_s = 0;  ///< what the strategy consumes while it does not wait for data
  std::string dominant;               ///< the share of the run's time that is largest (see Dominant)
  double dominant_fraction = 0;       ///< its fraction of the simulated time
  std::string verdict;
  std::string advice;
};

/// The verdict's object in a run's "data" (docs/reports.md).
nlohmann::ordered_json verdict_json(const DataVerdict& v);

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

}  // namespace ascendsim::report
