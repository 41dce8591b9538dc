// sc_spawn starts the map workers.
#define SC_INCLUDE_DYNAMIC_PROCESSES
#include "runtime/data_pipeline.h"

#include <algorithm>
#include <cmath>

#include "sim/core/error.h"
#include "sim/core/time.h"

namespace ascendsim::runtime {

using workloads::MapOpType;

namespace {

/// A sample's geometry as the map ops change it.
struct Shape {
  double h, w, c;
  double bytes_per_value = 1;  // uint8 until Rescale/Normalize make it float

  explicit Shape(const workloads::DatasetSpec::Geometry& g)
      : h(static_cast<double>(g.height)), w(static_cast<double>(g.width)), c(static_cast<double>(g.channels)) {}
  double values() const { return h * w * c; }
  double bytes() const { return values() * bytes_per_value; }

  void apply(const workloads::MapOp& op) {
    switch (op.type) {
      case MapOpType::Resize:
        if (op.width == 0) {  // the shorter side to `height`, the aspect kept
          const double scale = static_cast<double>(op.height) / std::min(h, w);
          h *= scale;
          w *= scale;
        } else {
          h = static_cast<double>(op.height);
          w = static_cast<double>(op.width);
        }
        break;
      case MapOpType::RandomCrop:
      case MapOpType::CenterCrop:
      case MapOpType::SlicePatches:
        if (op.height > 0) {
          h = static_cast<double>(op.height);
          w = static_cast<double>(op.width);
        } else {
          h *= std::sqrt(op.area);
          w *= std::sqrt(op.area);
        }
        break;
      case MapOpType::Rescale:
      case MapOpType::Normalize:
        bytes_per_value = 4;
        break;
      default:
        break;
    }
  }
};

}  // namespace

PipelineCosts::PipelineCosts(const HostConfig& host, const PipelineConfig& pipe, const workloads::DataRecipe& recipe,
                             std::int64_t batch_size, std::int64_t steps_per_epoch)
    : m_host(host), m_pipe(pipe), m_recipe(recipe), m_batch(batch_size), m_steps_per_epoch(steps_per_epoch) {
  m_cache_on = pipe.cache != "none";
  m_source_cache = pipe.cache == "source";
  m_cache_after = 0;
  if (pipe.cache == "map") {
    m_cache_after = pipe.cache_after < 0 ? recipe.first_random() : static_cast<std::size_t>(pipe.cache_after);
    if (m_cache_after > recipe.maps.size())
      throw sim::InputError(
          "pipeline.cache_after", "pipeline.cache_after",
          std::to_string(pipe.cache_after) + ": the recipe has " + std::to_string(recipe.maps.size()) + " map ops");
    for (std::size_t i = 0; i < m_cache_after; ++i)
      if (recipe.maps[i].random() && !pipe.cache_allow_random)
        throw sim::InputError(
            "pipeline.cache_after", "pipeline.cache_after",
            std::to_string(m_cache_after) + " puts the cache after " + workloads::map_op_name(recipe.maps[i].type) +
                ", a random augmentation: the first epoch's random results would be cached and every later epoch "
                "would read them again, so the data loses its randomness and the network's accuracy suffers. "
                "Cache after the source (pipeline.cache=source) or before the first random op "
                "(pipeline.cache_after=-1); pipeline.cache_allow_random=true accepts it");
    m_random_cached = false;
    for (std::size_t i = 0; i < m_cache_after; ++i) m_random_cached = m_random_cached || recipe.maps[i].random();
  }
  // Bytes a cached sample takes: the raw record, or the mean sample after the cached maps.
  Shape s(recipe.dataset.sample(0));
  double cached_bytes = static_cast<double>(recipe.dataset.record_bytes);
  for (std::size_t i = 0; i < recipe.maps.size(); ++i) {
    s.apply(recipe.maps[i]);
    if (i + 1 == m_cache_after) cached_bytes = s.bytes();
  }
  const double capacity =
      pipe.cache_gib * 1073741824.0 / static_cast<double>(std::max<std::int64_t>(1, pipe.cache_sharers));
  m_cache_capacity_samples = cached_bytes > 0 ? static_cast<std::int64_t>(capacity / cached_bytes) : 0;
  // The page cache: the server's share for this rank, in mean files.
  const double page_cache =
      host.storage_page_cache_gib * 1073741824.0 / static_cast<double>(std::max<std::int64_t>(1, pipe.cache_sharers));
  m_page_cache_samples = recipe.dataset.record_bytes > 0
                             ? static_cast<std::int64_t>(page_cache / static_cast<double>(recipe.dataset.record_bytes))
                             : 0;
  if (!recipe.dataset.encoded && m_page_cache_samples < recipe.dataset.samples) m_page_cache_samples = 0;
  m_cached_bytes = cached_bytes;
  if (!recipe.dataset.encoded) {
    // Every sample has the same geometry: cost the four cases once. Sample 0 is cached whenever
    // any sample is; the last one is the first to miss.
    const std::int64_t miss_index = recipe.dataset.samples - 1;
    for (int first = 0; first < 2; ++first) {
      m_uniform[first][1] = sample(0, first == 1);
      m_uniform[first][0] = sample(cached(miss_index) ? 0 : miss_index, first == 1);
    }
  }
}

const std::vector<PipelineCosts::SampleCost>& PipelineCosts::rows(std::int64_t b) const {
  auto it = m_rows.find(b);
  if (it != m_rows.end()) return it->second;
  constexpr std::int64_t kKeep = 256;  // batches in flight stay well within this window
  while (!m_rows.empty() && m_rows.begin()->first + kKeep < b) m_rows.erase(m_rows.begin());
  std::vector<SampleCost> costs(static_cast<std::size_t>(m_batch));
  const bool first = b < m_steps_per_epoch;
  for (std::int64_t j = 0; j < m_batch; ++j) costs[static_cast<std::size_t>(j)] = sample(sample_index(b, j), first);
  return m_rows.emplace(b, std::move(costs)).first->second;
}

PipelineCosts::SampleCost PipelineCosts::batch(std::int64_t b, std::int64_t first_row, std::int64_t last_row) const {
  SampleCost total{0, 0};
  const bool first = b < m_steps_per_epoch;
  if (m_recipe.dataset.encoded) {
    const auto& costs = rows(b);
    for (std::int64_t j = first_row; j < last_row; ++j) {
      total.read += costs[static_cast<std::size_t>(j)].read;
      total.map += costs[static_cast<std::size_t>(j)].map;
      total.io += costs[static_cast<std::size_t>(j)].io;
    }
    return total;
  }
  for (std::int64_t j = first_row; j < last_row; ++j) {
    const SampleCost& c = m_uniform[first ? 1 : 0][m_cache_on && cached(sample_index(b, j)) ? 1 : 0];
    total.read += c.read;
    total.map += c.map;
    total.io += c.io;
  }
  return total;
}

std::int64_t PipelineCosts::sample_index(std::int64_t batch, std::int64_t j) const {
  // Position within the shard's epoch, mapped to the dataset; epochs visit samples in a new order.
  const std::int64_t epoch = batch / m_steps_per_epoch;
  const std::int64_t pos = (batch % m_steps_per_epoch) * m_batch + j;
  const std::int64_t shard_samples = m_recipe.dataset.samples;  // already this shard's
  const std::int64_t in_shard = (pos * 2654435761LL + epoch * 40503LL) % std::max<std::int64_t>(1, shard_samples);
  return m_pipe.shard_id + in_shard * m_pipe.num_shards;
}

bool PipelineCosts::cached(std::int64_t dataset_index) const {
  return m_cache_on && (m_pipe.cache_spilling || dataset_index / m_pipe.num_shards < m_cache_capacity_samples);
}

bool PipelineCosts::page_cached(std::int64_t dataset_index) const {
  return dataset_index / m_pipe.num_shards < m_page_cache_samples;
}

bool PipelineCosts::spilled(std::int64_t dataset_index) const {
  return m_cache_on && m_pipe.cache_spilling && dataset_index / m_pipe.num_shards >= m_cache_capacity_samples;
}

nlohmann::ordered_json PipelineCosts::cache_summary() const {
  const std::int64_t samples = m_recipe.dataset.samples;  // this shard's
  const std::int64_t in_memory = m_cache_on ? std::min(samples, m_cache_capacity_samples) : 0;
  const std::int64_t on_disk = m_cache_on && m_pipe.cache_spilling ? samples - in_memory : 0;
  return {{"placement", !m_cache_on      ? std::string("none")
                        : m_source_cache ? std::string("after the source")
                                         : "after " + std::to_string(m_cache_after) + " map op(s)"},
          {"bytes_per_sample", m_cache_on ? m_cached_bytes : 0.0},
          {"memory_bytes", static_cast<double>(in_memory) * m_cached_bytes},
          {"spilled_bytes", static_cast<double>(on_disk) * m_cached_bytes},
          {"later_epoch_hit_fraction",
           samples > 0 ? static_cast<double>(in_memory + on_disk) / static_cast<double>(samples) : 0.0},
          {"randomness_lost", m_random_cached}};
}

PipelineCosts::SampleCost PipelineCosts::sample(std::int64_t index, bool first_epoch) const {
  const auto g = m_recipe.dataset.sample(index);
  const bool hit = !first_epoch && cached(index);
  const bool write = first_epoch && cached(index);
  const double spill = spilled(index) ? m_host.cache_spill_ns_per_byte : 0.0;  // local disk, both ways
  SampleCost cost{0, 0};
  Shape s(g);
  const double file_bytes = static_cast<double>(g.file_bytes);
  const bool source_cache = m_source_cache;
  // Reader: the file, or the cache.
  if (hit && source_cache)
    cost.read = file_bytes * (m_host.cache_read_ns_per_byte + spill);
  else
    cost.read =
        file_bytes * (m_host.read_ns_per_byte + (write && source_cache ? m_host.cache_write_ns_per_byte + spill : 0)) +
        (write && source_cache ? m_host.cache_insert_us * 1e3 : 0);
  const std::size_t first = hit ? m_cache_after : 0;  // maps the cache serves
  double cache_bytes = 0;
  for (std::size_t i = 0; i < m_recipe.maps.size(); ++i) {
    const auto& op = m_recipe.maps[i];
    s.apply(op);  // costs are per output value (Decode: per decoded pixel)
    double ns = 0;
    switch (op.type) {
      case MapOpType::Decode:
        ns = m_host.decode_ns_per_pixel * s.h * s.w;
        break;
      case MapOpType::Resize:
        ns = m_host.resize_ns_per_value * s.values();
        break;
      case MapOpType::RandomCrop:
      case MapOpType::CenterCrop:
        ns = m_host.crop_ns_per_value * s.values();
        break;
      case MapOpType::RandomHorizontalFlip:
        ns = 0.5 * m_host.flip_ns_per_value * s.values();
        break;
      case MapOpType::Rescale:
        ns = m_host.rescale_ns_per_value * s.values();
        break;
      case MapOpType::Normalize:
        ns = m_host.normalize_ns_per_value * s.values();
        break;
      case MapOpType::HWC2CHW:
        ns = m_host.hwc2chw_ns_per_value * s.values();
        break;
      case MapOpType::TypeCast:
        ns = m_host.typecast_ns_per_value;
        break;                       // the label
      case MapOpType::SlicePatches:  // every patch copied out (`area` of them); the rank's one kept (project)
        ns = m_host.crop_ns_per_value * s.values() * op.area;
        break;
    }
    if (i + 1 == m_cache_after) cache_bytes = s.bytes();
    if (i < first) continue;  // served by the cache
    cost.map += ns + m_host.map_op_overhead_us * 1e3;
    if (write && i + 1 == m_cache_after)
      cost.map += (m_host.cache_write_ns_per_byte + spill) * cache_bytes + m_host.cache_insert_us * 1e3;
  }
  if (hit && m_cache_after > 0) cost.read = (m_host.cache_read_ns_per_byte + spill) * cache_bytes;  // not the file
  cost.map += m_host.batch_ns_per_byte * s.values() * 4;  // float values into the batch
  cost.read *= 1e-9;
  cost.map *= 1e-9;
  // Storage: a file read (not a cache hit, nor in the page cache after the first epoch) waits
  // its latency, shared by the reads in flight, and its bytes at this rank's share of the
  // storage's bandwidth (the server's ranks read at once).
  const double in_flight = static_cast<double>(std::max<std::int64_t>(1, m_host.storage_parallel_reads));
  if (!hit && !(!first_epoch && page_cached(index))) {
    cost.io = m_host.storage_file_latency_us * 1e-6 / in_flight;
    if (m_host.storage_bandwidth_gbps > 0)
      cost.io += file_bytes * static_cast<double>(std::max<std::int64_t>(1, m_pipe.cache_sharers)) /
                 (m_host.storage_bandwidth_gbps * 1e9);
  } else if (!hit) {  // in the page cache: the open's revalidation only
    cost.io = m_host.storage_revalidate_us * 1e-6 / in_flight;
  }
  return cost;
}

double PipelineCosts::read_s(std::int64_t b) const {
  const ReadTime t = read_parts(b);
  return t.cpu_s + t.storage_s;
}

PipelineCosts::ReadTime PipelineCosts::read_parts(std::int64_t b) const {
  const SampleCost c = batch(b, 0, m_batch);
  return {c.read, c.io};
}

double PipelineCosts::map_s(std::int64_t b) const { return batch(b, 0, m_batch).map; }

double PipelineCosts::map_s(std::int64_t b, std::int64_t first, std::int64_t last) const {
  return batch(b, first, last).map;
}

double PipelineCosts::mean_read_s(bool later) const {
  const std::int64_t base = later ? m_steps_per_epoch : 0;
  double s = 0;
  for (std::int64_t b = 0; b < 8; ++b) s += read_s(base + b);
  return s / 8;
}

double PipelineCosts::mean_map_s(bool later) const {
  const std::int64_t base = later ? m_steps_per_epoch : 0;
  double s = 0;
  for (std::int64_t b = 0; b < 8; ++b) s += map_s(base + b);
  return s / 8;
}

DataPipeline::DataPipeline(sc_core::sc_module_name name, const HostConfig& host, const PipelineConfig& pipe,
                           const workloads::DataRecipe& recipe, std::int64_t batches, std::int64_t batch_size,
                           std::int64_t steps_per_epoch, HostCores* shared)
    : sc_module(name),
      m_pipe(pipe),
      m_cpu_cores(host.cpu_cores),
      m_costs(host, pipe, recipe, batch_size, steps_per_epoch),
      m_batches(batches),
      m_shuffle_batches((pipe.shuffle_buffer + batch_size - 1) / batch_size),
      m_slices(std::min(pipe.num_parallel_workers, batch_size)),
      m_slice_rows((batch_size + m_slices - 1) / m_slices),
      m_batch_size(batch_size),
      m_own_cores(host.cpu_cores),
      m_cores(shared ? *shared : m_own_cores),
      m_stats(*this),
      m_made(m_stats.scalar("batches", "count", "batches produced")),
      m_reader_busy_s(m_stats.scalar("reader_busy_s", "s", "time the source reader worked")),
      m_worker_busy_s(m_stats.scalar("worker_busy_s", "thread*s", "time map workers worked, summed")),
      m_core_wait_s(m_stats.scalar("core_wait_s", "thread*s", "time pipeline threads waited for a free host core")),
      m_consumer_wait_s(m_stats.scalar("consumer_wait_s", "s", "time the consumer waited for a batch")) {
  SC_THREAD(reader);
  for (std::int64_t i = 0; i < pipe.num_parallel_workers; ++i)
    sc_core::sc_spawn(sc_bind(&DataPipeline::worker, this, i));
}

void DataPipeline::set_trace(sim::TraceRecorder* trace) {
  m_trace = trace;
  if (!trace) return;
  m_reader_track = trace->track("pipeline reader");
  for (std::int64_t i = 0; i < m_pipe.num_parallel_workers; ++i)
    m_worker_tracks.push_back(trace->track("pipeline worker " + std::to_string(i)));
}

void DataPipeline::acquire_core() {
  const sc_core::sc_time start = sc_core::sc_time_stamp();
  while (m_cores.free == 0) wait(m_cores.freed);
  --m_cores.free;
  m_core_wait_s += (sc_core::sc_time_stamp() - start).to_seconds();
}

void DataPipeline::release_core() {
  ++m_cores.free;
  m_cores.freed.notify(sc_core::SC_ZERO_TIME);
}

void DataPipeline::reader() {
  for (std::int64_t b = 0; b < m_batches; ++b) {
    // Reads run ahead of the consumer by at most the prefetch depth, the workers' batches and
    // what the shuffle buffer holds.
    while (b >= m_consumed + m_pipe.prefetch_batches + m_pipe.num_parallel_workers + m_shuffle_batches)
      wait(m_consumed_event);
    while (b >= m_open) wait(m_open_event);
    // The storage wait first (no core held), then the CPU's part of the read.
    const PipelineCosts::ReadTime r = m_costs.read_parts(b);
    const sc_core::sc_time wait_io = sim::seconds(r.storage_s);
    if (r.storage_s > 0) wait(wait_io);
    acquire_core();
    const sc_core::sc_time cpu = sim::seconds(r.cpu_s);
    wait(cpu);
    release_core();
    const sc_core::sc_time t = wait_io + cpu;
    if (m_trace && m_trace->active())
      m_trace->span(m_reader_track, "read batch " + std::to_string(b), sc_core::sc_time_stamp() - t,
                    sc_core::sc_time_stamp());
    m_reader_busy_s += t.to_seconds();
    ++m_read;
    m_read_event.notify(sc_core::SC_ZERO_TIME);
  }
}

void DataPipeline::worker(std::int64_t index) {
  for (;;) {
    // Claim the next slice once its batch is within the prefetch window and read (and, with a
    // shuffle buffer, the buffer has filled behind it).
    while (m_claimed >= m_batches * m_slices || m_claimed / m_slices >= m_consumed + m_pipe.prefetch_batches) {
      if (m_claimed >= m_batches * m_slices) return;
      wait(m_consumed_event);
    }
    const std::int64_t slice = m_claimed++;
    const std::int64_t b = slice / m_slices;
    const std::int64_t first = (slice % m_slices) * m_slice_rows;
    const std::int64_t last = std::min(m_batch_size, first + m_slice_rows);
    while (m_read < std::min(m_batches, b + 1 + m_shuffle_batches)) wait(m_read_event);
    acquire_core();
    const sc_core::sc_time t = sim::seconds(first < last ? m_costs.map_s(b, first, last) : 0.0);
    wait(t);
    release_core();
    if (m_trace && m_trace->active())
      m_trace->span(m_worker_tracks[static_cast<std::size_t>(index)],
                    "map batch " + std::to_string(b) + " rows " + std::to_string(first) + "-" + std::to_string(last),
                    sc_core::sc_time_stamp() - t, sc_core::sc_time_stamp());
    m_worker_busy_s += t.to_seconds();
    const auto at = static_cast<std::size_t>(b - m_consumed);
    if (m_done.size() <= at) m_done.resize(at + 1, 0);
    if (++m_done[at] == m_slices) {
      ++m_made;
      m_ready_event.notify(sc_core::SC_ZERO_TIME);
    }
  }
}

void DataPipeline::next() {
  const sc_core::sc_time start = sc_core::sc_time_stamp();
  while (m_done.empty() || m_done.front() < m_slices) wait(m_ready_event);
  m_done.pop_front();
  ++m_consumed;
  m_consumer_wait_s += (sc_core::sc_time_stamp() - start).to_seconds();
  m_consumed_event.notify(sc_core::SC_ZERO_TIME);
}

}  // namespace ascendsim::runtime
