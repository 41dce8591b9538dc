#include "runtime/data_pipeline.h"

#include <algorithm>

#include "sim/core/time.h"

namespace ascendsim::runtime {

DataPipeline::DataPipeline(sc_core::sc_module_name name, const HostConfig& cfg, std::int64_t batches,
                           std::int64_t batch_size, std::int64_t sample_bytes)
    : sc_module(name),
      m_batches(batches),
      m_prefetch(cfg.prefetch_batches),
      m_stats("pipeline"),
      m_made(m_stats.scalar("batches", "count", "batches produced")),
      m_consumer_wait_s(m_stats.scalar("consumer_wait_s", "s", "time the consumer waited for a batch")) {
  const double workers = static_cast<double>(std::min(cfg.data_workers, cfg.cpu_cores));
  const double per_sample_ns = cfg.data_ns_per_byte * static_cast<double>(sample_bytes);
  m_batch_time = sim::ns(per_sample_ns * static_cast<double>(batch_size) / workers);
  m_stats.formula("batch_time_s", "s", "worker-pool time per batch", [this] { return m_batch_time.to_seconds(); });
  SC_THREAD(produce);
}

void DataPipeline::produce() {
  for (std::int64_t i = 0; i < m_batches; ++i) {
    while (m_ready >= m_prefetch) wait(m_taken);
    wait(m_batch_time);
    ++m_ready;
    ++m_made;
    m_produced.notify(sc_core::SC_ZERO_TIME);
  }
}

void DataPipeline::next() {
  const sc_core::sc_time start = sc_core::sc_time_stamp();
  while (m_ready == 0) wait(m_produced);
  --m_ready;
  m_consumer_wait_s += (sc_core::sc_time_stamp() - start).to_seconds();
  m_taken.notify(sc_core::SC_ZERO_TIME);
}

}  // namespace ascendsim::runtime
