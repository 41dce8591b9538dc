// The host data pipeline as its consumer sees it: batches produced at the rate the map workers
// sustain (per-sample cost scales with the sample's output bytes; parallel workers are capped by
// the host cores), up to `prefetch_batches` ahead of the consumer. One SystemC thread stands for
// the worker pool.
#pragma once

#include <cstdint>

#include <systemc>

#include "runtime/host_config.h"
#include "sim/core/stats.h"

namespace ascendsim::runtime {

class DataPipeline : public sc_core::sc_module {
 public:
  SC_HAS_PROCESS(DataPipeline);
  /// Produces `batches` batches of `batch_size` samples of `sample_bytes` each.
  DataPipeline(sc_core::sc_module_name name, const HostConfig& cfg, std::int64_t batches, std::int64_t batch_size,
               std::int64_t sample_bytes);

  /// Blocks until the next batch is ready and takes it. Call from an SC_THREAD.
  void next();

  /// Time one batch costs the worker pool.
  sc_core::sc_time batch_time() const { return m_batch_time; }
  sim::StatsGroup& stats() { return m_stats; }

 private:
  void produce();

  std::int64_t m_batches;
  std::int64_t m_prefetch;
  std::int64_t m_ready = 0;
  sc_core::sc_time m_batch_time;
  sc_core::sc_event m_produced;
  sc_core::sc_event m_taken;

  sim::StatsGroup m_stats;
  sim::Scalar& m_made;
  sim::Scalar& m_consumer_wait_s;
};

}  // namespace ascendsim::runtime
