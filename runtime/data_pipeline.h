// The host data pipeline (MindSpore's dataset engine) as SystemC threads standing for host CPU
// threads: one source reader, `num_parallel_workers` map workers, and the batch/prefetch
// connector that hands batches to the consumer in order. The threads share `host.cpu_cores`
// cores: a thread computes only while it holds one, so adding workers helps until the cores are
// all busy.
//
// The reader reads the samples of a batch at a time (or fetches them from the cache); the map
// workers share each batch's rows, one slice of ceil(batch / workers) rows per worker, as the
// dataset engine deals rows to its workers; a batch is ready when all its slices are. Per-sample
// costs come from the sample's geometry and the host preset. Repeat traverses the (sharded)
// dataset continuously, epoch after epoch; a shuffle buffer delays the first batch until it has
// filled. A data cache after the source, or after the last deterministic map, costs a write in
// the first epoch and replaces the work before it with a memory read afterwards.
#pragma once

#include <cstdint>
#include <deque>

#include <systemc>

#include <map>
#include <nlohmann/json.hpp>
#include <vector>

#include "runtime/host_config.h"

#include "sim/core/stats.h"
#include "sim/core/trace.h"
#include "workloads/dataset.h"

namespace ascendsim::runtime {

/// Per-sample costs of a recipe, in seconds on one thread.
class PipelineCosts {
 public:
  PipelineCosts(const HostConfig& host, const PipelineConfig& pipe, const workloads::DataRecipe& recipe,
                std::int64_t batch_size, std::int64_t steps_per_epoch);

  /// Reader time for batch `b` (file reads, or cache reads in later epochs): its CPU work plus
  /// the wait for storage.
  double read_s(std::int64_t b) const;
  /// read_s in its two parts: the CPU's (a core held) and the wait for storage (none held).
  struct ReadTime {
    double cpu_s = 0, storage_s = 0;
  };
  ReadTime read_parts(std::int64_t b) const;
  /// Worker time for batch `b` (map ops not served by the cache, cache writes, batching), or for
  /// its rows [first, last).
  double map_s(std::int64_t b) const;
  double map_s(std::int64_t b, std::int64_t first, std::int64_t last) const;
  /// Mean over the first epoch's first batches / over a later epoch's, for reports.
  double mean_read_s(bool later_epoch) const;
  /// The cache as the report gives it: placement, memory and spilled bytes, later epochs' hits.
  nlohmann::ordered_json cache_summary() const;
  double mean_map_s(bool later_epoch) const;

 private:
  struct SampleCost {
    double read, map;
    double io = 0;  ///< waiting for storage
  };
  SampleCost sample(std::int64_t index, bool first_epoch) const;
  /// Reader and worker time of rows [first, last) of batch `b`, in one pass over its samples.
  SampleCost batch(std::int64_t b, std::int64_t first, std::int64_t last) const;
  /// Samples of equal geometry cost the same: [first epoch][in the cache].
  SampleCost m_uniform[2][2]{};
  /// Samples of varying geometry (encoded files): each batch's per-row costs, computed once for
  /// the reader and the workers that share its rows; recent batches only.
  const std::vector<SampleCost>& rows(std::int64_t b) const;
  mutable std::map<std::int64_t, std::vector<SampleCost>> m_rows;
  bool m_cache_on = false;      ///< a cache of any kind
  bool m_source_cache = false;  ///< the cache holds the source records
  std::int64_t sample_index(std::int64_t batch, std::int64_t j) const;
  bool cached(std::int64_t dataset_index) const;
  bool spilled(std::int64_t dataset_index) const;
  bool page_cached(std::int64_t dataset_index) const;
  std::int64_t m_page_cache_samples = 0;
  bool m_random_cached = false;  ///< the cache follows a random op (allowed explicitly)
  double m_cached_bytes = 0;

  const HostConfig& m_host;
  const PipelineConfig& m_pipe;
  const workloads::DataRecipe& m_recipe;
  std::int64_t m_batch, m_steps_per_epoch;
  std::size_t m_cache_after = 0;  ///< maps served by the cache (0 with a source cache)
  std::int64_t m_cache_capacity_samples = 0;
};

/// The CPU cores of one host, shared by the pipelines of the ranks it feeds.
struct HostCores {
  explicit HostCores(std::int64_t cores) : free(cores) {}
  std::int64_t free;
  sc_core::sc_event freed;
};

class DataPipeline : public sc_core::sc_module {
 public:
  SC_HAS_PROCESS(DataPipeline);
  /// Produces `batches` batches of `batch_size` samples; an epoch is `steps_per_epoch` batches.
  /// `shared`: the host's cores when several ranks' pipelines share them (else its own
  /// `host.cpu_cores`).
  DataPipeline(sc_core::sc_module_name name, const HostConfig& host, const PipelineConfig& pipe,
               const workloads::DataRecipe& recipe, std::int64_t batches, std::int64_t batch_size,
               std::int64_t steps_per_epoch, HostCores* shared = nullptr);

  /// Blocks until the next batch (in order) is ready and takes it. Call from an SC_THREAD.
  void next();
  /// A pipeline that reads only when asked (an evaluation pass's): call gate() before the
  /// simulation starts; each open(n) lets the reader read n more batches.
  void gate() { m_open = 0; }
  void open(std::int64_t batches) {
    m_open += batches;
    m_open_event.notify(sc_core::SC_ZERO_TIME);
  }

  const PipelineCosts& costs() const { return m_costs; }
  sim::StatsGroup& stats() { return m_stats; }
  /// Records the reader's and each worker's batches on their own tracks.
  void set_trace(sim::TraceRecorder* trace);

 private:
  void reader();
  void worker(std::int64_t index);
  void acquire_core();
  void release_core();

  const PipelineConfig& m_pipe;
  std::int64_t m_cpu_cores;
  PipelineCosts m_costs;
  std::int64_t m_batches;
  std::int64_t m_shuffle_batches;

  std::int64_t m_slices;  // row slices per batch
  std::int64_t m_slice_rows;
  std::int64_t m_batch_size;
  std::int64_t m_read = 0;          // batches read
  std::int64_t m_claimed = 0;       // slices taken by workers
  std::int64_t m_consumed = 0;      // batches handed to the consumer
  std::int64_t m_open = INT64_MAX;  // batches the reader may read (gate(), open())
  sc_core::sc_event m_open_event;
  std::deque<std::int64_t> m_done;  // slices finished, per batch from m_consumed on
  HostCores m_own_cores;
  HostCores& m_cores;
  sc_core::sc_event m_read_event, m_ready_event, m_consumed_event;
  sim::TraceRecorder* m_trace = nullptr;
  int m_reader_track = 0;
  std::vector<int> m_worker_tracks;

  sim::StatsGroup m_stats;
  sim::Scalar& m_made;
  sim::Scalar& m_reader_busy_s;
  sim::Scalar& m_worker_busy_s;
  sim::Scalar& m_core_wait_s;
  sim::Scalar& m_consumer_wait_s;
};

}  // namespace ascendsim::runtime
