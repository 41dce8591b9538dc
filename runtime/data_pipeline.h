// The host data pipeline as MindSpore's dataset engine executes it: an execution tree of ops,
// each on threads of its own (SystemC threads standing for host CPU threads), handing rows to the
// next op through bounded connectors.
//
// The stages, in order: the source (one reader: file reads, or the cache in later epochs), one
// stage per map() call of the script with its own `num_parallel_workers`, a shuffle op when the
// script shuffles through a buffer, the batch op. The dataset channel's thread (the executor's)
// takes batches from the last stage as MindSpore's device-queue op does and sends them; its
// sending time is reported with the tree. Work moves a batch's rows at a time: a stage takes one
// batch at a time once the stage before has finished it and the connector after it has room
// (`pipeline.prefetch_size` rows, at least one batch, before the batch op; that many batches
// after it), and its W workers share the batch's rows — k = min(W, batch, cores free) slices at
// once, the batch done when the longest is. Every stage but the source pays
// `host.row_handoff_us` per row it receives. All threads share `host.cpu_cores` cores: a thread
// computes only while it holds one.
//
// Per-row costs come from the sample's geometry and the host preset. Repeat traverses the
// (sharded) dataset continuously, epoch after epoch; a shuffle buffer holds back its rows until
// it has filled. A data cache after the source, or after the last deterministic map, costs a
// write in the first epoch and replaces the work before it with a memory read afterwards.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <string>

#include <systemc>

#include <map>
#include <nlohmann/json.hpp>
#include <vector>

#include "runtime/host_config.h"

#include "sim/core/stats.h"
#include "sim/core/trace.h"
#include "workloads/dataset.h"

namespace ascendsim::runtime {

/// One op of the execution tree.
struct Stage {
  enum class Kind { Source, Map, Shuffle, Batch };
  Kind kind = Kind::Map;
  std::string name;               ///< "MnistDataset", "Map(Resize)", "Shuffle", "Batch"
  std::int64_t workers = 1;       ///< its threads
  std::vector<std::size_t> ops;   ///< Map: indices into the recipe's maps
};

/// Per-sample costs of a recipe, in seconds on one thread.
class PipelineCosts {
 public:
  /// The tree's stages are at most this many (the source, the batch op and the map calls between).
  static constexpr std::size_t kMaxStages = 16;

  PipelineCosts(const HostConfig& host, const PipelineConfig& pipe, const workloads::DataRecipe& recipe,
                std::int64_t batch_size, std::int64_t steps_per_epoch);
  /// `host` on a core host.core_speed times as fast: the decode, resize, per-value map, per-op,
  /// per-row hand-off and Python call costs divided by it; byte copies (reads, the batch, the
  /// cache, the device queue), the storage and the device-queue push unchanged.
  static HostConfig scaled(const HostConfig& host);

  /// The execution tree, source first.
  const std::vector<Stage>& stages() const { return m_stages; }
  std::int64_t batch_size() const { return m_batch; }
  /// Rows of the shuffle buffer before the batch op: pipeline.shuffle_buffer, or the recipe's when
  /// that is unset (-1).
  std::int64_t shuffle_buffer() const { return m_shuffle_buffer; }
  /// Every row of every batch costs the same on each stage (one geometry, no cache).
  bool rows_alike() const { return !m_recipe.dataset.encoded && !m_cache_on; }
  /// CPU time of stage `s` (not the source) for rows [first, last) of batch `b`.
  double stage_s(std::size_t s, std::int64_t b, std::int64_t first, std::int64_t last) const;
  /// Mean over the first epoch's first batches / over a later epoch's: one batch's time on stage
  /// `s` (the source: its read, storage wait included) on one thread.
  double mean_stage_s(std::size_t s, bool later_epoch) const;
  /// The same for the source's wait for storage alone (the part its workers do not divide).
  double mean_storage_s(bool later_epoch) const;

  /// Reader time for batch `b` (file reads, or cache reads in later epochs): its CPU work plus
  /// the wait for storage.
  double read_s(std::int64_t b) const;
  /// read_s in its two parts: the CPU's (a core held) and the wait for storage (none held).
  struct ReadTime {
    double cpu_s = 0, storage_s = 0;
  };
  ReadTime read_parts(std::int64_t b) const;
  /// The same for rows [first, last) of batch `b` (the reader's workers share a batch's rows).
  ReadTime read_parts(std::int64_t b, std::int64_t first, std::int64_t last) const;
  /// The device-queue op's host work on one batch of `bytes` (host.device_queue_*), seconds.
  double send_s(double bytes) const {
    return m_host.device_queue_push_us * 1e-6 + m_host.device_queue_ns_per_byte * 1e-9 * bytes;
  }
  /// The device-queue op's whole time on a batch, its one thread's: send_s(bytes) and the batch's
  /// DMA at `h2d_gbps` (link contention aside), what its rate in the tree and the verdict is from.
  double send_and_dma_s(double bytes, double h2d_gbps) const {
    return send_s(bytes) + (h2d_gbps > 0 ? bytes / (h2d_gbps * 1e9) : 0);
  }
  /// The cache as the report gives it: placement, memory and spilled bytes, later epochs' hits.
  nlohmann::ordered_json cache_summary() const;

 private:
  /// RandomCropDecodeResize's mean crop window (map op `op`) for an image of h x w, from a table
  /// filled as the synthetic dataset's sizes appear (they are whole pixels in a known range).
  double crop_area(std::size_t op, double h, double w) const;
  mutable std::vector<std::vector<double>> m_crop_area;  ///< per map op: by (h - h0) * span + (w - w0)
  std::int64_t m_crop_h0 = 0, m_crop_w0 = 0, m_crop_hn = 0, m_crop_wn = 0;
  struct SampleCost {
    double read = 0;
    double io = 0;  ///< waiting for storage
    std::array<double, kMaxStages> stage{};  ///< per stage after the source (index 0 unused)
  };
  SampleCost sample(std::int64_t index, bool first_epoch) const;
  /// The same into a row of `rows`' layout: [0] the read, [1, stages) the stages, [stages] the
  /// storage wait.
  void sample_into(std::int64_t index, bool first_epoch, double* row) const;
  void build_stages();
  /// Reader and worker time of rows [first, last) of batch `b`, in one pass over its samples.
  SampleCost batch(std::int64_t b, std::int64_t first, std::int64_t last) const;
  /// Samples of equal geometry cost the same: [first epoch][in the cache].
  SampleCost m_uniform[2][2]{};
  /// Samples of varying geometry (encoded files): each batch's per-row costs, computed once for
  /// the reader and the workers that share its rows; recent batches only.
  const std::vector<double>& rows(std::int64_t b) const;
  mutable std::map<std::int64_t, std::vector<double>> m_rows;
  bool m_cache_on = false;      ///< a cache of any kind
  bool m_offloaded = false;     ///< a map op runs on the device (dataset offload): the batch stays as it left the host
  /// RandomErasing's mean erased fraction (map op `op`) for an image of h x w, cached per geometry.
  double erasing_area(std::size_t op, double h, double w) const;
  mutable std::map<std::pair<std::size_t, double>, double> m_erasing_area;
  bool m_source_cache = false;  ///< the cache holds the source records
  std::int64_t sample_index(std::int64_t batch, std::int64_t j) const;
  bool cached(std::int64_t dataset_index) const;
  bool spilled(std::int64_t dataset_index) const;
  bool page_cached(std::int64_t dataset_index) const;
  std::int64_t m_page_cache_samples = 0;
  bool m_random_cached = false;  ///< the cache follows a random op (allowed explicitly)
  double m_cached_bytes = 0;
  std::int64_t m_shuffle_buffer = 0;

  /// The host's costs with the compute ones divided by host.core_speed (PipelineCosts::scaled).
  const HostConfig m_host;
  const PipelineConfig& m_pipe;
  const workloads::DataRecipe& m_recipe;
  std::vector<Stage> m_stages;
  std::vector<std::size_t> m_stage_of_op;  ///< the stage of each map op
  /// Per stage, the row's hand-off into it (ns): [0] a row the cache does not serve, [1] one it does.
  std::array<std::array<double, kMaxStages>, 2> m_handoff_ns{};
  std::size_t m_batch_stage = 0;
  std::int64_t m_batch, m_steps_per_epoch;
  std::size_t m_cache_after = 0;  ///< maps served by the cache (0 with a source cache)
  std::int64_t m_cache_capacity_samples = 0;
};

/// The execution tree as `info` gives it, before any run: per stage its workers, one batch's time
/// on one of its threads (first epoch), the batches per second its threads sustain (at most
/// `cpu_cores` of them), and whether it is the slowest (the one that bounds the pipeline).
/// The device-queue op follows the tree: its host work on a batch of `send_bytes` and the
/// batch's DMA at `h2d_gbps`, on its one thread.
nlohmann::ordered_json describe_tree(const PipelineCosts& costs, std::int64_t cpu_cores, double send_bytes,
                                     double h2d_gbps);

/// The CPU cores of one host, shared by the pipelines of the ranks it feeds.
struct HostCores {
  explicit HostCores(std::int64_t cores) : total(cores), free(cores) {}
  std::int64_t total;
  std::int64_t free;
  std::int64_t peak_held = 0;  ///< the most held at once
  sc_core::sc_event freed;
  int waiting = 0;  ///< threads waiting for `freed` (none: no notification needed)

  /// Arbitrated (a host several ranks share): the requests and releases of one delta cycle take
  /// effect together in the next, served in the order of their keys (the rank's place on the
  /// host, then its pipeline stage) — not in the order the kernel happens to run its processes,
  /// which other servers' events at the same instant change. Servers alike then run alike.
  bool arbitrated = false;
  struct Request {
    std::int64_t key, wanted;
    std::uint64_t delta;
    std::int64_t granted = 0;
  };
  std::vector<Request*> requests;                               ///< waiting
  std::vector<std::pair<std::int64_t, std::uint64_t>> releases;  ///< cores and the delta they were freed in
  std::uint64_t arbitrated_delta = ~std::uint64_t{0};
  sc_core::sc_event kick;  ///< a request or release to serve in the next delta
  /// Applies the releases and serves the requests made before this delta cycle, by key, while
  /// cores are free; once per delta (the first waiting thread to run does it for all).
  void arbitrate();
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
  /// Its rank's place among those its host's cores serve: the first part of its requests' keys.
  void set_host_slot(std::int64_t slot) { m_host_slot = slot; }
  /// The consumer's (the device-queue op's) work on a batch it took: reported with the tree.
  void note_send(double seconds) { m_send_busy_s += seconds; }
  /// The device-queue op's host work on a batch of `bytes` it is about to send: send_s(bytes) on
  /// one of the host's cores. Call from an SC_THREAD.
  void send_work(double bytes);
  /// A pipeline that reads only when asked (an evaluation pass's): call gate() before the
  /// simulation starts; each open(n) lets the reader read n more batches.
  void gate() { m_open = 0; }
  void open(std::int64_t batches) {
    m_open += batches;
    m_open_event.notify(sc_core::SC_ZERO_TIME);
  }

  const PipelineCosts& costs() const { return m_costs; }
  sim::StatsGroup& stats() { return m_stats; }
  /// Records each stage's workers on their own tracks.
  void set_trace(sim::TraceRecorder* trace);
  /// The execution tree as it ran until `now_s`: per stage its workers, busy fraction (of its
  /// workers' time), batches, the mean usage of its output connector, and the stage that bounds
  /// the pipeline (the busiest); then the device-queue op's.
  nlohmann::ordered_json tree(double now_s) const;

 private:
  struct StageState {
    std::int64_t slices = 1;                  ///< threads that share a batch: min(workers, batch)
    std::int64_t lag = 0;                     ///< batches held back (a shuffle buffer)
    std::int64_t claimed = 0;                 ///< batches begun
    std::int64_t done = 0;                    ///< batches finished, in order
    double busy_s = 0;
    double usage_area = 0;                    ///< the output connector's batches integrated over time (resolution units)
    sc_core::sc_time usage_since;
    sc_core::sc_event ready, started;         ///< `ready()` rose; a batch was begun
    int ready_waiters = 0, started_waiters = 0;  ///< threads waiting for them
    std::vector<int> tracks;
  };
  /// Batches stage `s` has made available to the next one.
  std::int64_t ready(std::size_t s) const;
  /// Batches the stage after `s` (the consumer after the last) has begun.
  std::int64_t started_after(std::size_t s) const;
  /// Batches the connector after stage `s` may hold.
  std::int64_t room(std::size_t s) const;
  void account_usage(std::size_t s);
  void source();
  /// A stage after the source: one batch at a time, its rows shared by as many of its workers as
  /// the host has cores free (at least one).
  void stage_thread(std::size_t stage);
  /// `key`: the requesting thread among the pipeline's (0 the source, s a stage, then the
  /// device-queue op), for an arbitrated host's order.
  std::int64_t acquire_cores(std::int64_t wanted, std::int64_t key);
  /// A stage's `slices` workers sharing a batch's rows (the reader's and every map stage's): the
  /// work's seconds summed over the threads and the most threads that ran at once. `row_s` >= 0:
  /// every row costs that; else `cost(first, last)` prices rows [first, last). Call from an SC_THREAD.
  struct Shared {
    double work_s = 0;
    std::int64_t threads = 0;
  };
  Shared share_rows(std::int64_t slices, std::int64_t key, double row_s,
                    const std::function<double(std::int64_t, std::int64_t)>& cost);
  /// Waits for `e`, counted in `waiters` (a notification is sent only when someone waits; every
  /// waiter re-checks its condition on the state, which changes before the notification).
  void wait_counted(sc_core::sc_event& e, int& waiters);
  static void notify_waiters(sc_core::sc_event& e, int waiters) {
    if (waiters > 0) e.notify(sc_core::SC_ZERO_TIME);
  }

  void release_cores(std::int64_t k);

  const PipelineConfig& m_pipe;
  PipelineCosts m_costs;
  std::int64_t m_batches;
  std::int64_t m_batch_size;
  std::int64_t m_rows_room;         ///< connector capacity before the batch op, in batches
  std::vector<StageState> m_state;  ///< one per stage
  std::int64_t m_consumed = 0;      // batches handed to the consumer
  std::int64_t m_open = INT64_MAX;  // batches the reader may read (gate(), open())
  sc_core::sc_event m_open_event;
  sc_core::sc_event m_consumed_event;
  int m_consumed_waiters = 0;
  HostCores m_own_cores;
  HostCores& m_cores;
  std::int64_t m_host_slot = 0;
  sim::TraceRecorder* m_trace = nullptr;
  double m_send_busy_s = 0;

  sim::StatsGroup m_stats;
  sim::Scalar& m_made;
  sim::Scalar& m_reader_busy_s;
  sim::Scalar& m_worker_busy_s;
  sim::Scalar& m_handoffs;
  sim::Scalar& m_core_wait_s;
  sim::Scalar& m_host_cores_peak;
  sim::Scalar& m_consumer_wait_s;
};

}  // namespace ascendsim::runtime
