#include "sim/report/data_verdict.h"

#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

#include <fmt/format.h>

namespace ascendsim::report {

using namespace runtime;

nlohmann::ordered_json verdict_json(const DataVerdict& v) {
  return {{"data_bound", v.data_bound},
          {"waiting_fraction", v.waiting_fraction},
          {"first_fill_s", v.first_fill_s},
          {"pipeline_batches_per_s", v.pipeline_batches_per_s},
          {"bounding_stage", v.bounding_stage},
          {"device_batches_per_s", v.device_batches_per_s},
          {"strategy_batches_per_s", v.strategy_batches_per_s},
          {"dominant", v.dominant},
          {"dominant_fraction", v.dominant_fraction},
          {"verdict", v.verdict},
          {"advice", v.advice}};
}

Dominant dominant_share(const RunResult& r) {
  using sim::Phase;
  auto at = [&](Phase p) { return r.breakdown_s[static_cast<std::size_t>(p)]; };
  // The host's exposed work, each part named only if the run spent time on it.
  const std::vector<std::pair<std::string, double>> host_parts = {
      {"launches", at(Phase::Launch)},
      {"syncs", at(Phase::Sync)},
      {"step work", at(Phase::HostLoop)},
      {"copies", at(Phase::H2D) + at(Phase::D2H)}};
  double host = 0;
  for (const auto& [name, s] : host_parts) host += s;
  const std::vector<std::pair<std::string, double>> shares = {
      {"device compute", at(Phase::DeviceCompute)},
      {"host", host},
      {"waiting for data", at(Phase::WaitData) + at(Phase::HostData) + r.first_fill_s},
      {"communication", at(Phase::Comm)},
      {"set-up", at(Phase::Setup) - r.first_fill_s},  // the first fill is waiting for data
      {"evaluation", at(Phase::Eval)},
      {"checkpoints", at(Phase::Checkpoint)}};
  Dominant d;
  double best = -1;
  for (const auto& [name, s] : shares)
    if (s > best) {  // the first of equal shares
      best = s;
      d.name = name;
    }
  d.fraction = r.sim_time_s > 0 ? best / r.sim_time_s : 0;
  if (d.name == "device compute") {
    d.words = "the device's compute";
  } else if (d.name == "host") {
    std::vector<std::pair<std::string, double>> parts;
    for (const auto& p : host_parts)
      if (p.second > 0) parts.push_back(p);
    std::stable_sort(parts.begin(), parts.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
    d.words = "the host's ";
    for (std::size_t i = 0; i < parts.size(); ++i)
      d.words += (i == 0 ? "" : i + 1 == parts.size() ? " and " : ", ") + parts[i].first;
    d.words += " while the device idles";
  } else if (d.name == "waiting for data") {
    d.words = "waiting for data";
  } else if (d.name == "communication") {
    d.words = "communication no computation hides";
  } else if (d.name == "set-up") {
    d.words =
        "one-time set-up (creating the data channel, compiling kernels with a cold cache, loading the graph, the "
        "parameters' broadcast): a longer run amortises it";
  } else if (d.name == "checkpoints") {
    d.words = "saving checkpoints (the copies to the host, serialisation and writes the steps wait for)";
  } else {
    d.words = "evaluation passes";
  }
  return d;
}

DataVerdict judge_data(const RunResult& r, const DataRates& rates, const HostConfig& host, const PipelineConfig& pipe) {
  DataVerdict v;
  // The wait for the first batch (set-up in the breakdown) is waiting for data too.
  const double wait = r.breakdown_s[static_cast<std::size_t>(sim::Phase::WaitData)] +
                      r.breakdown_s[static_cast<std::size_t>(sim::Phase::HostData)] + r.first_fill_s;
  v.first_fill_s = r.first_fill_s;
  v.waiting_fraction = r.sim_time_s > 0 ? wait / r.sim_time_s : 0;
  v.data_bound = v.waiting_fraction > 0.2;
  // Each stage sustains its threads (at most the host's cores) over its batch time; the pipeline,
  // its slowest stage.
  auto stage_rate = [&](const StageRate& st, bool later) {
    const double s = later ? st.later_s : st.first_s;
    if (s <= 0) return 1e300;
    const double threads = static_cast<double>(std::max<std::int64_t>(1, std::min(st.threads, host.cpu_cores)));
    if (st.source) {  // the reader's workers divide its CPU work, not the wait for storage
      const double io = std::min(s, later ? st.storage_later_s : st.storage_first_s);
      return 1 / (io + (s - io) / threads);
    }
    return threads / s;
  };
  auto slowest = [&](bool later) {
    std::size_t at = 0;
    double rate = 1e300;
    for (std::size_t i = 0; i < rates.stages.size(); ++i)
      if (stage_rate(rates.stages[i], later) < rate) rate = stage_rate(rates.stages[i], later), at = i;
    return std::make_pair(at, rate);
  };
  const bool later = rates.has_later_epochs;
  v.first_epoch_batches_per_s = slowest(false).second;
  const auto [bound, rate] = slowest(later);
  v.pipeline_batches_per_s = rate;
  const StageRate* b = rates.stages.empty() ? nullptr : &rates.stages[bound];
  if (b) v.bounding_stage = b->name;
  v.device_batches_per_s = rates.device_s_per_batch > 0 ? 1.0 / rates.device_s_per_batch : 0;
  // The strategy's own demand: its steps over the time it did not spend waiting for data (launches,
  // syncs and the host loop included, so non-sink asks far less than the device could take).
  const double busy_s = r.sim_time_s - wait - r.compile_s;  // a cold cache's compilation is no step's
  v.strategy_batches_per_s = busy_s > 0 ? static_cast<double>(r.steps_completed) / busy_s : v.device_batches_per_s;
  const Dominant top = dominant_share(r);
  v.dominant = top.name;
  v.dominant_fraction = top.fraction;
  v.verdict = fmt::format(
      "{}: waiting for data {:.1f}% of the time; the pipeline delivers {:.1f} batches/s{}{}, {} consumes {:.1f} "
      "batches/s when not waiting (the device alone could take {:.1f}); the largest share of the run's time "
      "({:.1f}%) goes to {}",
      v.data_bound ? "data-bound" : "not data-bound", 100 * v.waiting_fraction, v.pipeline_batches_per_s,
      b ? fmt::format(", bounded by {}", b->name) : "",
      later && v.first_epoch_batches_per_s != v.pipeline_batches_per_s
          ? fmt::format(" ({:.1f} in the first epoch)", v.first_epoch_batches_per_s)
          : "",
      strategy_name(r.session.strategy), v.strategy_batches_per_s, v.device_batches_per_s, 100 * top.fraction,
      top.words);
  if (!v.data_bound || !b) {
    v.advice = v.pipeline_batches_per_s < 1.25 * v.strategy_batches_per_s
                   ? "little headroom: a slower host or heavier augmentation would make this run data-bound"
                   : "none needed for the data pipeline";
    return v;
  }
  if (later && v.first_epoch_batches_per_s < v.strategy_batches_per_s &&
      v.pipeline_batches_per_s >= v.strategy_batches_per_s) {
    v.advice =
        "only the first epoch is data-bound, while the cache fills; later epochs keep up — train longer to "
        "amortise it";
    return v;
  }
  if (b->source) {
    const double s = later ? b->later_s : b->first_s;
    const double io = std::min(s, later ? b->storage_later_s : b->storage_first_s);
    const std::string more = fmt::format(
        "; its {} worker(s) share a batch's reads, so more of them (pipeline.reader_workers, the dataset's "
        "num_parallel_workers) shorten its CPU part",
        b->threads);
    if (b->name == "GeneratorDataset")
      v.advice = "the Python generator is the bottleneck: its calls (host.python_call_us a yield) and the "
                 "arrays' copies; yield whole batches, or give the source more workers (pipeline.reader_workers)";
    else if (io >= 0.5 * s)
      v.advice = pipe.cache == "none"
                     ? "the source reader is the bottleneck, waiting for storage: cache the dataset (--cache "
                       "source) so later epochs read from memory, or read from faster storage"
                     : "the source reader is the bottleneck even with the cache: enlarge pipeline.cache_gib or read "
                       "from faster storage";
    else
      v.advice = (pipe.cache == "none" ? std::string("the source reader is the bottleneck: cache the dataset "
                                                     "(--cache source) so later epochs read from memory")
                                       : std::string("the source reader is the bottleneck even with the cache: "
                                                     "enlarge pipeline.cache_gib")) +
                 more;
    return v;
  }
  const double stage_s = later ? b->later_s : b->first_s;
  const auto needed = static_cast<std::int64_t>(std::ceil(stage_s * v.strategy_batches_per_s));
  const bool map = b->name.rfind("Map(", 0) == 0;
  if (b->name == "DeviceQueue") {
    v.advice =
        "the device-queue op's one thread bounds the pipeline (its push of each batch to the device and the "
        "batch's copy and DMA): larger batches amortise the per-batch push; a faster host-device link or host "
        "shortens the rest";
  } else if (!map) {
    v.advice = fmt::format(
        "the {} op's one thread bounds the pipeline (its per-row hand-off{}): {}", b->name,
        b->name == "Batch" ? " and copy" : "",
        b->name == "Shuffle" ? "shuffle through the source's sampler (shuffle=True) instead of a shuffle buffer"
                             : "fewer, larger rows per batch or a lighter row hand-off (a faster host) would help");
  } else if (needed > host.cpu_cores) {
    v.advice = fmt::format(
        "{} workers on {} would be needed but the host has {} cores: {}lighten the augmentation, or use a "
        "larger host",
        needed, b->name, host.cpu_cores,
        rates.map_cache_possible ? "cache after the last deterministic map (--cache map), " : "");
  } else if (needed > b->threads) {
    v.advice = fmt::format(
        "raise the workers of {} to at least {} (now {}): pipeline.map_workers per map() call, or "
        "--num-parallel-workers for every call",
        b->name, needed, b->threads);
  } else {
    v.advice =
        "the pipeline keeps up on average but its latency shows: raise pipeline.prefetch_size or "
        "queue.capacity so bursts are absorbed";
  }
  return v;
}

}  // namespace ascendsim::report
