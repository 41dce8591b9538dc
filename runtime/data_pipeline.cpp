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
  workloads::DataRecipe::Output o;

  explicit Shape(const workloads::DatasetSpec::Geometry& g)
      : o{static_cast<double>(g.height), static_cast<double>(g.width), static_cast<double>(g.channels), 1} {}
  double values() const { return o.values(); }
  double bytes() const { return o.values() * o.bytes_per_value; }
  double h() const { return o.height; }
  double w() const { return o.width; }
  double c() const { return o.channels; }
  void apply(const workloads::MapOp& op) {
    if (!op.offload) workloads::apply_map_geometry(op, o);
  }
};

}  // namespace

PipelineCosts::PipelineCosts(const HostConfig& host, const PipelineConfig& pipe, const workloads::DataRecipe& recipe,
                             std::int64_t batch_size, std::int64_t steps_per_epoch)
    : m_host(scaled(host)), m_pipe(pipe), m_recipe(recipe), m_batch(batch_size), m_steps_per_epoch(steps_per_epoch) {
  m_shuffle_buffer = pipe.shuffle_buffer >= 0 ? pipe.shuffle_buffer : recipe.shuffle_buffer;
  build_stages();
  const auto& d = recipe.dataset;
  if (d.encoded && (!d.files || d.files->empty())) {  // synthetic sizes: sides of 75% to 125% (DatasetSpec::sample)
    m_crop_h0 = static_cast<std::int64_t>(0.75 * static_cast<double>(d.height));
    m_crop_w0 = static_cast<std::int64_t>(0.75 * static_cast<double>(d.width));
    m_crop_hn = static_cast<std::int64_t>(1.25 * static_cast<double>(d.height)) - m_crop_h0 + 1;
    m_crop_wn = static_cast<std::int64_t>(1.25 * static_cast<double>(d.width)) - m_crop_w0 + 1;
    m_crop_area.resize(recipe.maps.size());
  }
  m_cache_on = pipe.cache != "none";
  m_source_cache = pipe.cache == "source";
  m_cache_after = 0;
  if (pipe.cache == "map") {
    m_cache_after = pipe.cache_after < 0 ? recipe.first_random() : static_cast<std::size_t>(pipe.cache_after);
    if (m_cache_after > recipe.maps.size())
      throw sim::InputError(
          "pipeline.cache_after", "pipeline.cache_after",
          std::to_string(pipe.cache_after) + ": the recipe has " + std::to_string(recipe.maps.size()) + " map ops");
    if (m_cache_after == 0 && !recipe.maps.empty())
      throw sim::InputError(
          "pipeline.cache", "pipeline.cache",
          std::string("map: the recipe's first map op, ") + workloads::map_op_name(recipe.maps[0].type) +
              ", is random, so no deterministic map ops precede it for a map cache to hold. Cache the source "
              "(pipeline.cache=source), or follow a random op explicitly (pipeline.cache_after=N with "
              "pipeline.cache_allow_random=true)");
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
  // Every stage after the source receives a row through a connector: a map call only if the cache
  // does not serve all of its ops (a cached row enters the tree above them).
  for (int served_by_cache = 0; served_by_cache < 2; ++served_by_cache) {
    const std::size_t first = served_by_cache ? m_cache_after : 0;  // maps the cache serves
    for (std::size_t k = 1; k < m_stages.size(); ++k) {
      const Stage& st = m_stages[k];
      const bool served = st.kind == Stage::Kind::Map &&
                          std::all_of(st.ops.begin(), st.ops.end(), [&](std::size_t op) { return op < first; });
      m_handoff_ns[static_cast<std::size_t>(served_by_cache)][k] = served ? 0.0 : m_host.row_handoff_us * 1e3;
    }
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

HostConfig PipelineCosts::scaled(const HostConfig& host) {
  HostConfig h = host;
  const double k = host.core_speed > 0 ? 1.0 / host.core_speed : 1.0;
  for (double* v : {&h.decode_ns_per_pixel, &h.resize_ns_per_value, &h.crop_ns_per_value, &h.flip_ns_per_value,
                    &h.rescale_ns_per_value, &h.normalize_ns_per_value, &h.hwc2chw_ns_per_value,
                    &h.typecast_ns_per_value, &h.color_adjust_ns_per_value, &h.map_op_overhead_us, &h.row_handoff_us,
                    &h.python_call_us})
    *v *= k;
  return h;
}

void PipelineCosts::build_stages() {
  const auto f = m_recipe.dataset.format;
  const std::string source = f == workloads::DatasetFormat::MnistIdx        ? "MnistDataset"
                             : f == workloads::DatasetFormat::Cifar10Binary ? "Cifar10Dataset"
                             : f == workloads::DatasetFormat::MindRecord    ? "MindDataset"
                             : f == workloads::DatasetFormat::Generator     ? "GeneratorDataset"
                                                                            : "ImageFolderDataset";
  m_stages.push_back({Stage::Kind::Source, source, std::max<std::int64_t>(1, m_pipe.reader_workers), {}});
  const auto calls = m_recipe.calls();
  std::vector<std::int64_t> workers(calls.size(), m_pipe.num_parallel_workers);
  if (!m_pipe.map_workers.empty()) {
    std::vector<std::int64_t> given;
    std::size_t at = 0;
    const std::string& w = m_pipe.map_workers;
    while (at <= w.size()) {
      const std::size_t comma = std::min(w.find(',', at), w.size());
      const std::string item = w.substr(at, comma - at);
      std::size_t used = 0;
      long long v = 0;
      try {
        v = std::stoll(item, &used);
      } catch (const std::exception&) {
        used = 0;
      }
      if (used == 0 || used != item.size() || v < 1 || v > 1024)
        throw sim::InputError("pipeline.map_workers", "pipeline.map_workers",
                              "'" + w + "': expected one whole number of workers (1 to 1024) per map() call, "
                              "comma-separated");
      given.push_back(v);
      at = comma + 1;
    }
    if (given.size() != calls.size()) {
      std::string names;
      for (const auto& c : calls) names += (names.empty() ? "" : ", ") + c.name;
      throw sim::InputError("pipeline.map_workers", "pipeline.map_workers",
                            "'" + w + "' gives " + std::to_string(given.size()) + " worker count(s) but the recipe has " +
                                std::to_string(calls.size()) + " map() call(s): " + names);
    }
    workers = given;
  }
  m_stage_of_op.assign(m_recipe.maps.size(), 0);
  for (std::size_t i = 0; i < calls.size(); ++i) {
    // Offloaded ops leave the call (they run on the device); a call left empty is no stage.
    std::vector<std::size_t> host_ops;
    std::string name;
    for (std::size_t op : calls[i].ops) {
      m_offloaded = m_offloaded || m_recipe.maps[op].offload;
      if (m_recipe.maps[op].offload) continue;
      host_ops.push_back(op);
      name += (name.empty() ? "" : ",") + std::string(workloads::map_op_name(m_recipe.maps[op].type));
    }
    if (host_ops.empty()) continue;
    for (std::size_t op : host_ops) m_stage_of_op[op] = m_stages.size();
    m_stages.push_back({Stage::Kind::Map, host_ops.size() == calls[i].ops.size() ? calls[i].name : "Map(" + name + ")",
                        workers[i], host_ops});
  }
  if (m_shuffle_buffer > 0) m_stages.push_back({Stage::Kind::Shuffle, "Shuffle", 1, {}});
  m_batch_stage = m_stages.size();
  m_stages.push_back({Stage::Kind::Batch, "Batch", 1, {}});
  if (m_stages.size() > kMaxStages)
    throw sim::InputError("the dataset recipe has " + std::to_string(calls.size()) +
                          " map() calls; the pipeline model takes at most " + std::to_string(kMaxStages - 3));
}

const std::vector<double>& PipelineCosts::rows(std::int64_t b) const {
  auto it = m_rows.find(b);
  if (it != m_rows.end()) return it->second;
  // Batches in flight stay well within this window; one evicted is recomputed if asked again.
  constexpr std::int64_t kKeep = 64;
  std::vector<double> costs;
  while (!m_rows.empty() && m_rows.begin()->first + kKeep < b) {
    costs = std::move(m_rows.begin()->second);  // its storage, reused
    m_rows.erase(m_rows.begin());
  }
  // Row-major, a row's read, its stages after the source, its storage wait.
  const std::size_t n = m_stages.size();
  costs.resize(static_cast<std::size_t>(m_batch) * (n + 1));
  const bool first = b < m_steps_per_epoch;
  for (std::int64_t j = 0; j < m_batch; ++j)
    sample_into(sample_index(b, j), first, &costs[static_cast<std::size_t>(j) * (n + 1)]);
  return m_rows.emplace(b, std::move(costs)).first->second;
}

PipelineCosts::SampleCost PipelineCosts::batch(std::int64_t b, std::int64_t first_row, std::int64_t last_row) const {
  SampleCost total;
  const std::size_t n = m_stages.size();
  auto add = [&](const SampleCost& c) {
    total.read += c.read;
    total.io += c.io;
    for (std::size_t s = 1; s < n; ++s) total.stage[s] += c.stage[s];
  };
  if (m_recipe.dataset.encoded) {
    const auto& costs = rows(b);
    for (std::int64_t j = first_row; j < last_row; ++j) {
      const double* row = &costs[static_cast<std::size_t>(j) * (n + 1)];
      total.read += row[0];
      for (std::size_t s = 1; s < n; ++s) total.stage[s] += row[s];
      total.io += row[n];
    }
    return total;
  }
  const bool first = b < m_steps_per_epoch;
  if (!m_cache_on) {  // every row alike
    const SampleCost& c = m_uniform[first ? 1 : 0][0];
    const auto rows = static_cast<double>(last_row - first_row);
    total.read = rows * c.read;
    total.io = rows * c.io;
    for (std::size_t s = 1; s < n; ++s) total.stage[s] = rows * c.stage[s];
    return total;
  }
  for (std::int64_t j = first_row; j < last_row; ++j) add(m_uniform[first ? 1 : 0][cached(sample_index(b, j)) ? 1 : 0]);
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

double PipelineCosts::erasing_area(std::size_t op, double h, double w) const {
  const auto key = std::make_pair(op, w / h);
  auto it = m_erasing_area.find(key);
  if (it != m_erasing_area.end()) return it->second;
  const auto& o = m_recipe.maps[op];
  const double a = workloads::random_erasing_mean_area(w / h, o.scale_min, o.scale_max, o.ratio_min, o.ratio_max);
  m_erasing_area.emplace(key, a);
  return a;
}

double PipelineCosts::crop_area(std::size_t op, double h, double w) const {
  const auto& o = m_recipe.maps[op];
  auto exact = [&] {
    return workloads::random_resized_crop_mean_area(w / h, o.scale_min, o.scale_max, o.ratio_min, o.ratio_max);
  };
  const auto hi = static_cast<std::int64_t>(h), wi = static_cast<std::int64_t>(w);
  const std::int64_t dh = hi - m_crop_h0, dw = wi - m_crop_w0;
  if (m_crop_hn == 0 || static_cast<double>(hi) != h || static_cast<double>(wi) != w || dh < 0 || dw < 0 ||
      dh >= m_crop_hn || dw >= m_crop_wn)
    return exact();
  std::vector<double>& table = m_crop_area[op];
  if (table.empty()) table.assign(static_cast<std::size_t>(m_crop_hn * m_crop_wn), -1.0);
  double& v = table[static_cast<std::size_t>(dh * m_crop_wn + dw)];
  if (v < 0) v = exact();
  return v;
}

PipelineCosts::SampleCost PipelineCosts::sample(std::int64_t index, bool first_epoch) const {
  std::array<double, kMaxStages + 1> row{};
  sample_into(index, first_epoch, row.data());
  const std::size_t n = m_stages.size();
  SampleCost cost;
  cost.read = row[0];
  for (std::size_t s = 1; s < n; ++s) cost.stage[s] = row[s];
  cost.io = row[n];
  return cost;
}

void PipelineCosts::sample_into(std::int64_t index, bool first_epoch, double* row) const {
  const std::size_t n = m_stages.size();
  double* const stages = row;  // [1, n): row[0] is the read, set below
  std::fill(stages + 1, stages + n, 0.0);
  double read = 0, io = 0;
  const auto g = m_recipe.dataset.sample(index);
  const bool hit = !first_epoch && cached(index);
  const bool write = first_epoch && cached(index);
  const double spill = spilled(index) ? m_host.cache_spill_ns_per_byte : 0.0;  // local disk, both ways
  Shape s(g);
  const double file_bytes = static_cast<double>(g.file_bytes);
  const bool source_cache = m_source_cache;
  // Reader: the file, or the cache; a Python generator's yield (its call, and the NumPy arrays'
  // bytes turned into tensors), shared by the rows of a yield.
  const bool generator = m_recipe.dataset.format == workloads::DatasetFormat::Generator;
  const double per_yield = 1.0 / static_cast<double>(std::max<std::int64_t>(1, m_recipe.dataset.rows_per_yield));
  if (generator)
    read = file_bytes * m_host.read_ns_per_byte + m_host.python_call_us * 1e3 * per_yield;
  else if (hit && source_cache)
    read = file_bytes * (m_host.cache_read_ns_per_byte + spill);
  else
    read =
        file_bytes * (m_host.read_ns_per_byte + (write && source_cache ? m_host.cache_write_ns_per_byte + spill : 0)) +
        (write && source_cache ? m_host.cache_insert_us * 1e3 : 0);
  const std::size_t first = hit ? m_cache_after : 0;  // maps the cache serves
  double cache_bytes = 0;
  for (std::size_t i = 0; i < m_recipe.maps.size(); ++i) {
    const auto& op = m_recipe.maps[i];
    const Shape in = s;
    s.apply(op);  // costs are per output value (Decode: per decoded pixel)
    double ns = 0;
    switch (op.type) {
      case MapOpType::Decode:
        ns = m_host.decode_ns_per_pixel * s.h() * s.w();
        break;
      case MapOpType::Resize:
        ns = m_host.resize_ns_per_value * s.values();
        break;
      case MapOpType::RandomCrop:  // padded first (a copy into the larger image), then the crop's copy
        ns = m_host.crop_ns_per_value *
             (s.values() + (op.pad > 0 ? (in.h() + 2.0 * static_cast<double>(op.pad)) *
                                             (in.w() + 2.0 * static_cast<double>(op.pad)) * in.c()
                                       : 0.0));
        break;
      case MapOpType::CenterCrop:
        ns = m_host.crop_ns_per_value * s.values();
        break;
      case MapOpType::RandomHorizontalFlip:
        ns = op.prob * m_host.flip_ns_per_value * s.values();
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
      case MapOpType::RandomCropDecodeResize: {
        // A cropped decode (libjpeg-turbo's jpeg_crop_scanline and jpeg_skip_scanlines): the
        // entropy (Huffman) decoding runs over every row down to the window's last, across the
        // whole width; the rest of a decode (inverse DCT, upsampling, colour conversion) over the
        // window only. The window's last row lies at (H + h) / 2 on average (its top uniform in
        // [0, H - h]), h = sqrt(a) H for a window of the mean area a. Then the resize.
        const double a = crop_area(i, in.h(), in.w());
        const double f = m_host.entropy_decode_fraction;
        ns = m_host.decode_ns_per_pixel * in.h() * in.w() * (f * (1 + std::sqrt(a)) / 2 + (1 - f) * a) +
             m_host.resize_ns_per_value * s.values();
        break;
      }
      case MapOpType::RandomColorAdjust:
        ns = m_host.color_adjust_ns_per_value * s.values();
        break;
      case MapOpType::CutOut:  // each square filled with zeros, a strided write (bounded: inside the image)
        ns = m_host.crop_ns_per_value * std::min(static_cast<double>(op.height), s.h()) *
             std::min(static_cast<double>(op.height), s.w()) * s.c() * static_cast<double>(op.patches);
        break;
      case MapOpType::RandomErasing:  // the erased rectangle's values, written when it erases
        ns = op.prob * m_host.crop_ns_per_value * s.values() * erasing_area(i, s.h(), s.w());
        break;
    }
    if (op.offload) ns = 0;  // a kernel of the device's step (the graph's), not the host's
    if (op.python && !op.offload) ns += m_host.python_call_us * 1e3;
    if (i + 1 == m_cache_after) cache_bytes = s.bytes();
    if (i < first || op.offload) continue;  // served by the cache, or a device kernel
    double& stage = stages[m_stage_of_op[i]];
    stage += ns + m_host.map_op_overhead_us * 1e3;
    if (write && i + 1 == m_cache_after)
      stage += (m_host.cache_write_ns_per_byte + spill) * cache_bytes + m_host.cache_insert_us * 1e3;
  }
  if (hit && m_cache_after > 0) read = (m_host.cache_read_ns_per_byte + spill) * cache_bytes;  // not the file
  // Every stage after the source receives the row through a connector (m_handoff_ns).
  // A generator's whole batches pass a connector once per yield.
  const auto& handoff = m_handoff_ns[first > 0 ? 1 : 0];
  for (std::size_t k = 1; k < n; ++k) stages[k] += handoff[k] * per_yield;
  // The sample's bytes into the batch: float32 values, or bytes where the ops that make them float
  // run on the device (dataset offload).
  stages[m_batch_stage] += m_host.batch_ns_per_byte * s.values() * (m_offloaded ? s.o.bytes_per_value : 4.0) *
                           (generator && m_recipe.dataset.rows_per_yield > 1 ? 0.0 : 1.0);  // yielded as a batch
  read *= 1e-9;
  for (std::size_t k = 1; k < n; ++k) stages[k] *= 1e-9;
  // Storage: a file read (not a cache hit, nor in the page cache after the first epoch) waits
  // its latency, shared by the reads in flight, and its bytes at this rank's share of the
  // storage's bandwidth (the server's ranks read at once).
  const double in_flight = static_cast<double>(std::max<std::int64_t>(1, m_host.storage_parallel_reads));
  if (!hit && !(!first_epoch && page_cached(index))) {
    io = m_host.storage_file_latency_us * 1e-6 / in_flight;
    if (m_host.storage_bandwidth_gbps > 0)
      io += file_bytes * static_cast<double>(std::max<std::int64_t>(1, m_pipe.cache_sharers)) /
            (m_host.storage_bandwidth_gbps * 1e9);
  } else if (!hit) {  // in the page cache: the open's revalidation only
    io = m_host.storage_revalidate_us * 1e-6 / in_flight;
  }
  row[0] = read;
  row[n] = io;
}

double PipelineCosts::read_s(std::int64_t b) const {
  const ReadTime t = read_parts(b);
  return t.cpu_s + t.storage_s;
}

PipelineCosts::ReadTime PipelineCosts::read_parts(std::int64_t b) const { return read_parts(b, 0, m_batch); }

PipelineCosts::ReadTime PipelineCosts::read_parts(std::int64_t b, std::int64_t first, std::int64_t last) const {
  const SampleCost c = batch(b, first, last);
  return {c.read, c.io};
}

double PipelineCosts::stage_s(std::size_t s, std::int64_t b, std::int64_t first, std::int64_t last) const {
  double sum = 0;
  if (m_recipe.dataset.encoded) {
    const auto& costs = rows(b);
    const std::size_t stride = m_stages.size() + 1;
    for (std::int64_t j = first; j < last; ++j) sum += costs[static_cast<std::size_t>(j) * stride + s];
    return sum;
  }
  const auto& uniform = m_uniform[b < m_steps_per_epoch ? 1 : 0];
  if (!m_cache_on) return static_cast<double>(last - first) * uniform[0].stage[s];  // every row alike
  for (std::int64_t j = first; j < last; ++j) sum += uniform[cached(sample_index(b, j)) ? 1 : 0].stage[s];
  return sum;
}

double PipelineCosts::mean_stage_s(std::size_t s, bool later) const {
  const std::int64_t base = later ? m_steps_per_epoch : 0;
  double sum = 0;
  for (std::int64_t b = 0; b < 8; ++b) sum += s == 0 ? read_s(base + b) : batch(base + b, 0, m_batch).stage[s];
  return sum / 8;
}

double PipelineCosts::mean_storage_s(bool later) const {
  const std::int64_t base = later ? m_steps_per_epoch : 0;
  double sum = 0;
  for (std::int64_t b = 0; b < 8; ++b) sum += read_parts(base + b).storage_s;
  return sum / 8;
}

nlohmann::ordered_json describe_tree(const PipelineCosts& costs, std::int64_t cpu_cores, double send_bytes,
                                     double h2d_gbps) {
  const auto& stages = costs.stages();
  std::vector<double> rate(stages.size());
  std::size_t slowest = 0;
  for (std::size_t s = 0; s < stages.size(); ++s) {
    const double t = costs.mean_stage_s(s, false);
    const std::int64_t threads = std::min({stages[s].workers, costs.batch_size(), cpu_cores});
    rate[s] = t > 0 ? static_cast<double>(threads) / t : 0;
    if (s == 0 && t > 0) {  // the reader: the storage wait does not divide among its workers
      const double io = costs.mean_storage_s(false);
      rate[s] = 1 / (io + (t - io) / static_cast<double>(threads));
    }
    if (t > 0 && (rate[slowest] <= 0 || rate[s] < rate[slowest])) slowest = s;
  }
  // The device-queue op: its host work on a batch, then the batch's DMA, on its one thread.
  const double send = costs.send_and_dma_s(send_bytes, h2d_gbps);
  const double send_rate = send > 0 ? 1 / send : 0;
  const bool send_bounds = send > 0 && (rate[slowest] <= 0 || send_rate < rate[slowest]);
  const char* kinds[] = {"source", "map", "shuffle", "batch"};
  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  for (std::size_t s = 0; s < stages.size(); ++s)
    out.push_back({{"stage", stages[s].name},
                   {"kind", kinds[static_cast<int>(stages[s].kind)]},
                   {"workers", stages[s].workers},
                   {"batch_ms", 1e3 * costs.mean_stage_s(s, false)},
                   {"batches_per_s", rate[s]},
                   {"bounds_pipeline", !send_bounds && s == slowest}});
  out.push_back({{"stage", "DeviceQueue"},
                 {"kind", "send"},
                 {"workers", 1},
                 {"batch_ms", 1e3 * send},
                 {"batches_per_s", send_rate},
                 {"bounds_pipeline", send_bounds}});
  return out;
}

DataPipeline::DataPipeline(sc_core::sc_module_name name, const HostConfig& host, const PipelineConfig& pipe,
                           const workloads::DataRecipe& recipe, std::int64_t batches, std::int64_t batch_size,
                           std::int64_t steps_per_epoch, HostCores* shared)
    : sc_module(name),
      m_pipe(pipe),
      m_costs(host, pipe, recipe, batch_size, steps_per_epoch),
      m_batches(batches),
      m_batch_size(batch_size),
      m_rows_room(std::max<std::int64_t>(1, (pipe.prefetch_size + batch_size - 1) / batch_size)),
      m_state(m_costs.stages().size()),
      m_own_cores(host.cpu_cores),
      m_cores(shared ? *shared : m_own_cores),
      m_stats(*this),
      m_made(m_stats.scalar("batches", "count", "batches produced")),
      m_reader_busy_s(m_stats.scalar("reader_busy_s", "s", "time the source reader worked")),
      m_worker_busy_s(m_stats.scalar("worker_busy_s", "thread*s", "time the threads of every later stage worked, summed")),
      m_handoffs(m_stats.scalar("row_handoffs", "count", "rows handed from one stage to the next")),
      m_core_wait_s(m_stats.scalar("core_wait_s", "thread*s", "time pipeline threads waited for a free host core")),
      m_host_cores_peak(m_stats.scalar("host_cores_peak", "cores",
                                       "the most host cores pipeline threads held at once (of every rank the host feeds)")),
      m_consumer_wait_s(m_stats.scalar("consumer_wait_s", "s", "time the consumer waited for a batch")) {
  const auto& stages = m_costs.stages();
  for (std::size_t s = 0; s < stages.size(); ++s) {
    StageState& st = m_state[s];
    st.slices = std::min(stages[s].workers, batch_size);
    // A shuffle buffer holds back its rows' batches; one larger than the epoch holds the epoch
    // (its end flushes the buffer).
    if (stages[s].kind == Stage::Kind::Shuffle)
      st.lag = std::min((m_costs.shuffle_buffer() + batch_size - 1) / batch_size,
                        std::max<std::int64_t>(1, steps_per_epoch));
  }
  SC_THREAD(source);
  for (std::size_t s = 1; s < stages.size(); ++s) sc_core::sc_spawn(sc_bind(&DataPipeline::stage_thread, this, s));
}

void DataPipeline::set_trace(sim::TraceRecorder* trace) {
  m_trace = trace;
  if (!trace) return;
  const auto& stages = m_costs.stages();
  for (std::size_t s = 0; s < stages.size(); ++s) m_state[s].tracks = {trace->track("pipeline " + stages[s].name)};
}

std::int64_t DataPipeline::ready(std::size_t s) const {
  const StageState& st = m_state[s];
  return st.done >= m_batches ? m_batches : std::max<std::int64_t>(0, st.done - st.lag);
}

std::int64_t DataPipeline::started_after(std::size_t s) const {
  return s + 1 == m_state.size() ? m_consumed : m_state[s + 1].claimed;
}

std::int64_t DataPipeline::room(std::size_t s) const {
  const bool after_batch = m_costs.stages()[s].kind == Stage::Kind::Batch;
  return (after_batch ? m_pipe.prefetch_size : m_rows_room) + m_state[s].lag;
}

void DataPipeline::account_usage(std::size_t s) {
  // The output connector's batches (made, not yet begun by the next stage), integrated over time.
  StageState& st = m_state[s];
  const sc_core::sc_time now = sc_core::sc_time_stamp();
  const std::int64_t held = ready(s) - started_after(s);
  if (held > 0) st.usage_area += static_cast<double>(held) * static_cast<double>((now - st.usage_since).value());
  st.usage_since = now;
}

void DataPipeline::wait_counted(sc_core::sc_event& e, int& waiters) {
  ++waiters;
  wait(e);
  --waiters;
}

void HostCores::arbitrate() {
  const std::uint64_t now = sc_core::sc_delta_count();
  if (now == arbitrated_delta) return;
  arbitrated_delta = now;
  for (std::size_t i = 0; i < releases.size();) {
    if (releases[i].second < now) {
      free += releases[i].first;
      releases[i] = releases.back();
      releases.pop_back();
    } else {
      ++i;
    }
  }
  // First come, first served; requests of one delta cycle in the order of their keys.
  std::sort(requests.begin(), requests.end(), [](const Request* a, const Request* b) {
    return a->delta != b->delta ? a->delta < b->delta : a->key < b->key;
  });
  std::vector<Request*> waiting;
  bool blocked = false;
  for (Request* q : requests) {
    if (!blocked && q->delta < now) {
      if (free > 0) {
        q->granted = std::min(q->wanted, free);
        free -= q->granted;
        peak_held = std::max(peak_held, total - free);
        continue;
      }
      blocked = true;  // the later requests wait behind it
    }
    waiting.push_back(q);
  }
  requests.swap(waiting);
}

std::int64_t DataPipeline::acquire_cores(std::int64_t wanted, std::int64_t key) {
  const sc_core::sc_time start = sc_core::sc_time_stamp();
  std::int64_t k = 0;
  if (m_cores.arbitrated) {
    HostCores::Request q{m_host_slot * 1024 + key, wanted, sc_core::sc_delta_count()};
    m_cores.requests.push_back(&q);
    m_cores.kick.notify(sc_core::SC_ZERO_TIME);
    while (q.granted == 0) {
      wait(m_cores.kick);
      m_cores.arbitrate();
    }
    k = q.granted;
  } else {
    while (m_cores.free == 0) wait_counted(m_cores.freed, m_cores.waiting);
    k = std::min(wanted, m_cores.free);
    m_cores.free -= k;
  }
  m_cores.peak_held = std::max(m_cores.peak_held, m_cores.total - m_cores.free);
  m_host_cores_peak.sample_max(static_cast<double>(m_cores.peak_held));
  m_core_wait_s += (sc_core::sc_time_stamp() - start).to_seconds();
  return k;
}

void DataPipeline::send_work(double bytes) {
  const double s = m_costs.send_s(bytes);
  if (s <= 0) return;
  const std::int64_t k = acquire_cores(1, static_cast<std::int64_t>(m_state.size()));  // after the stages
  wait(sc_core::sc_time(s, sc_core::SC_SEC));
  release_cores(k);
}

void DataPipeline::release_cores(std::int64_t k) {
  if (m_cores.arbitrated) {
    m_cores.releases.emplace_back(k, sc_core::sc_delta_count());
    m_cores.kick.notify(sc_core::SC_ZERO_TIME);
    return;
  }
  m_cores.free += k;
  notify_waiters(m_cores.freed, m_cores.waiting);
}

DataPipeline::Shared DataPipeline::share_rows(std::int64_t slices, std::int64_t key, double row_s,
                                              const std::function<double(std::int64_t, std::int64_t)>& cost) {
  // Each of the W = slices threads a share of ceil(rows / W). As many run at once as the host has
  // cores free (at least one); with fewer than W, the threads that run take a quarter of a share
  // and the rest wait for the next round, taken with the cores free then (as workers that find a
  // core join the batch).
  Shared out;
  for (std::int64_t next = 0; next < m_batch_size;) {
    const std::int64_t left = m_batch_size - next;
    const std::int64_t full = (left + slices - 1) / slices;
    const std::int64_t k = acquire_cores(std::min(slices, left), key);
    const std::int64_t share = k * full >= left ? full : std::max<std::int64_t>(1, full / 4);
    out.threads = std::max(out.threads, k);
    double longest = 0;
    if (row_s >= 0) {  // every slice costs its rows times one row's cost
      const std::int64_t rows = std::min(left, k * share);
      longest = static_cast<double>(std::min(share, rows)) * row_s;
      out.work_s += static_cast<double>(rows) * row_s;
      next += rows;
    } else {
      for (std::int64_t i = 0; i < k && next < m_batch_size; ++i, next += share) {
        const double t = cost(next, std::min(m_batch_size, next + share));
        longest = std::max(longest, t);
        out.work_s += t;
      }
    }
    wait(sim::seconds(longest));
    release_cores(k);
  }
  return out;
}

void DataPipeline::source() {
  StageState& st = m_state[0];
  for (std::int64_t b = 0; b < m_batches; ++b) {
    while (b >= started_after(0) + room(0)) wait_counted(m_state[1].started, m_state[1].started_waiters);
    while (b >= m_open) wait(m_open_event);
    ++st.claimed;  // (nothing before the source: no connector to account)
    // The storage wait first (no core held; the storage's own parallelism is its reads in flight),
    // then the CPU's part of the read, the batch's rows shared by the reader's workers as a map
    // stage's (one worker: the whole batch on one thread).
    const PipelineCosts::ReadTime r = m_costs.read_parts(b);
    const sc_core::sc_time wait_io = sim::seconds(r.storage_s);
    if (r.storage_s > 0) wait(wait_io);
    const sc_core::sc_time cpu_began = sc_core::sc_time_stamp();
    share_rows(st.slices, 0, -1,
               [&](std::int64_t first, std::int64_t last) { return m_costs.read_parts(b, first, last).cpu_s; });
    const sc_core::sc_time cpu = sc_core::sc_time_stamp() - cpu_began;
    const sc_core::sc_time t = wait_io + cpu;
    if (m_trace && m_trace->active() && !st.tracks.empty())
      m_trace->span(st.tracks[0], "read batch " + std::to_string(b + 1), sc_core::sc_time_stamp() - t,
                    sc_core::sc_time_stamp());
    m_reader_busy_s += t.to_seconds();
    st.busy_s += wait_io.to_seconds() + r.cpu_s;  // its threads' work (the rows' reads, summed)
    account_usage(0);
    ++st.done;
    notify_waiters(st.ready, st.ready_waiters);
  }
}

void DataPipeline::stage_thread(std::size_t s) {
  StageState& st = m_state[s];
  StageState& before = m_state[s - 1];
  for (std::int64_t b = 0; b < m_batches; ++b) {
    // The batch, once the stage before has finished it and the connector after this stage has
    // room for it.
    while (ready(s - 1) <= b || b >= started_after(s) + room(s)) {
      if (ready(s - 1) <= b)
        wait_counted(before.ready, before.ready_waiters);
      else if (s + 1 == m_state.size())
        wait_counted(m_consumed_event, m_consumed_waiters);
      else
        wait_counted(m_state[s + 1].started, m_state[s + 1].started_waiters);
    }
    account_usage(s - 1);  // the connector before gives the batch
    st.claimed = b + 1;
    notify_waiters(st.started, st.started_waiters);
    const sc_core::sc_time began = sc_core::sc_time_stamp();
    const auto [work, threads] =
        share_rows(st.slices, static_cast<std::int64_t>(s), m_costs.rows_alike() ? m_costs.stage_s(s, b, 0, 1) : -1,
                   [&](std::int64_t first, std::int64_t last) { return m_costs.stage_s(s, b, first, last); });
    if (m_trace && m_trace->active() && !st.tracks.empty())
      m_trace->span(st.tracks[0], "batch " + std::to_string(b + 1) + " on " + std::to_string(threads) + " thread(s)",
                    began, sc_core::sc_time_stamp());
    m_worker_busy_s += work;
    st.busy_s += work;
    m_handoffs += static_cast<double>(m_batch_size);
    account_usage(s);
    const std::int64_t was = ready(s);
    ++st.done;
    if (ready(s) > was) {
      if (s + 1 == m_state.size()) ++m_made;
      notify_waiters(st.ready, st.ready_waiters);
    }
  }
}

void DataPipeline::next() {
  const sc_core::sc_time start = sc_core::sc_time_stamp();
  const std::size_t last = m_state.size() - 1;
  while (ready(last) <= m_consumed) wait_counted(m_state[last].ready, m_state[last].ready_waiters);
  account_usage(last);
  ++m_consumed;
  m_consumer_wait_s += (sc_core::sc_time_stamp() - start).to_seconds();
  notify_waiters(m_consumed_event, m_consumed_waiters);
}

nlohmann::ordered_json DataPipeline::tree(double now_s) const {
  const auto& stages = m_costs.stages();
  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  std::size_t bound = 0;
  double top = -1;
  std::vector<double> busy(stages.size());
  for (std::size_t s = 0; s < stages.size(); ++s) {
    busy[s] = now_s > 0 ? m_state[s].busy_s / (static_cast<double>(stages[s].workers) * now_s) : 0;
    if (busy[s] > top) top = busy[s], bound = s;
  }
  const double send_busy = now_s > 0 ? m_send_busy_s / now_s : 0.0;  // the device-queue op's, after the tree
  const bool send_bounds = send_busy > top;
  if (send_bounds) bound = stages.size();
  const char* kinds[] = {"source", "map", "shuffle", "batch"};
  for (std::size_t s = 0; s < stages.size(); ++s) {
    const StageState& st = m_state[s];
    // The output connector's mean usage: batches held over the time until now, against its room.
    const double held = now_s > 0 ? st.usage_area * sc_core::sc_get_time_resolution().to_seconds() / now_s : 0;
    out.push_back({{"stage", stages[s].name},
                   {"kind", kinds[static_cast<int>(stages[s].kind)]},
                   {"workers", stages[s].workers},
                   {"batches", st.done},
                   {"busy_fraction", busy[s]},
                   {"queue_usage", held / static_cast<double>(room(s))},
                   {"bounds_pipeline", s == bound}});
  }
  out.push_back({{"stage", "DeviceQueue"},
                 {"kind", "send"},
                 {"workers", 1},
                 {"batches", m_consumed},
                 {"busy_fraction", send_busy},
                 {"queue_usage", nullptr},
                 {"bounds_pipeline", send_bounds}});
  return out;
}

}  // namespace ascendsim::runtime
