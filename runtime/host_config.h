// Host-side costs. The host is not cycle-simulated: these are the durations the SystemC threads
// playing the host's training thread, channel thread and data pipeline charge for each action.
#pragma once

#include <cstdint>

#include "sim/core/params.h"

namespace ascendsim::runtime {

struct HostConfig {
  double op_launch_us = 10;            ///< one op launch: kernel selection, args, task submission
  double graph_launch_us = 30;         ///< one graph launch (model execute)
  double step_overhead_us = 150;       ///< framework work per returned step: training loop, callbacks
  double sync_wakeup_us = 15;          ///< stream synchronize wake-up after the completion notice
  double memcpy_setup_us = 8;          ///< synchronous memcpy call overhead (pin, descriptor, call)
  double queue_create_us = 2000;       ///< one-time: create the dataset channel and device queue
  double graph_load_us = 5000;         ///< one-time: host work to load a graph onto the device
  double data_ns_per_byte = 1.0;       ///< data pipeline cost per output byte of a sample, one worker
  std::int64_t data_workers = 8;       ///< map workers (MindSpore num_parallel_workers default)
  std::int64_t cpu_cores = 32;         ///< host cores: caps the workers that really run in parallel
  std::int64_t prefetch_batches = 16;  ///< batches the pipeline may run ahead of its consumer

  void declare(sim::ParamSet& ps);
};

}  // namespace ascendsim::runtime
