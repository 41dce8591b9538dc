#include "runtime/data_verdict.h"

#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

#include <fmt/format.h>

namespace ascendsim::runtime {

nlohmann::ordered_json DataVerdict::to_json() const {
  return {{"data_bound", data_bound},
          {"waiting_fraction", waiting_fraction},
          {"pipeline_batches_per_s", pipeline_batches_per_s},
          {"device_batches_per_s", device_batches_per_s},
          {"strategy_batches_per_s", strategy_batches_per_s},
          {"dominant", dominant},
          {"dominant_fraction", dominant_fraction},
          {"verdict", verdict},
          {"advice", advice}};
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
      {"waiting for data", at(Phase::WaitData) + at(Phase::HostData)},
      {"communication", at(Phase::Comm)},
      {"set-up", at(Phase::Setup)},
      {"evaluation", at(Phase::Eval)}};
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
    d.words = "one-time set-up (creating the data channel, loading the graph): a longer run amortises it";
  } else {
    d.words = "evaluation passes";
  }
  return d;
}

DataVerdict judge_data(const RunResult& r, const DataRates& rates, const HostConfig& host, const PipelineConfig& pipe) {
  DataVerdict v;
  const double wait = r.breakdown_s[static_cast<std::size_t>(sim::Phase::WaitData)] +
                      r.breakdown_s[static_cast<std::size_t>(sim::Phase::HostData)];
  v.waiting_fraction = r.sim_time_s > 0 ? wait / r.sim_time_s : 0;
  v.data_bound = v.waiting_fraction > 0.2;
  const double workers = static_cast<double>(std::min(pipe.num_parallel_workers, host.cpu_cores));
  auto rate = [&](double read_s, double map_s) {
    return std::min(read_s > 0 ? 1.0 / read_s : 1e300, map_s > 0 ? workers / map_s : 1e300);
  };
  v.first_epoch_batches_per_s = rate(rates.first_read_s, rates.first_map_s);
  const double read_s = rates.has_later_epochs ? rates.later_read_s : rates.first_read_s;
  const double map_s = rates.has_later_epochs ? rates.later_map_s : rates.first_map_s;
  v.pipeline_batches_per_s = rate(read_s, map_s);
  v.device_batches_per_s = rates.device_s_per_batch > 0 ? 1.0 / rates.device_s_per_batch : 0;
  // The strategy's own demand: its steps over the time it did not spend waiting for data (launches,
  // syncs and the host loop included, so non-sink asks far less than the device could take).
  const double busy_s = r.sim_time_s - wait;
  v.strategy_batches_per_s = busy_s > 0 ? static_cast<double>(r.steps_completed) / busy_s : v.device_batches_per_s;
  const Dominant top = dominant_share(r);
  v.dominant = top.name;
  v.dominant_fraction = top.fraction;
  v.verdict = fmt::format(
      "{}: waiting for data {:.1f}% of the time; the pipeline delivers {:.1f} batches/s{}, {} consumes {:.1f} "
      "batches/s when not waiting (the device alone could take {:.1f}); the largest share of the run's time "
      "({:.1f}%) goes to {}",
      v.data_bound ? "data-bound" : "not data-bound", 100 * v.waiting_fraction, v.pipeline_batches_per_s,
      rates.has_later_epochs && v.first_epoch_batches_per_s != v.pipeline_batches_per_s
          ? fmt::format(" ({:.1f} in the first epoch)", v.first_epoch_batches_per_s)
          : "",
      strategy_name(r.session.strategy), v.strategy_batches_per_s, v.device_batches_per_s, 100 * top.fraction,
      top.words);
  if (!v.data_bound) {
    v.advice = v.pipeline_batches_per_s < 1.25 * v.strategy_batches_per_s
                   ? "little headroom: a slower host or heavier augmentation would make this run data-bound"
                   : "none needed for the data pipeline";
    return v;
  }
  if (rates.has_later_epochs && v.first_epoch_batches_per_s < v.strategy_batches_per_s &&
      v.pipeline_batches_per_s >= v.strategy_batches_per_s) {
    v.advice =
        "only the first epoch is data-bound, while the cache fills; later epochs keep up — train longer to "
        "amortise it";
    return v;
  }
  if (read_s > 0 && 1.0 / read_s < v.strategy_batches_per_s) {
    v.advice = pipe.cache == "none"
                   ? "the source reader is the bottleneck: cache the dataset (--cache source) so later "
                     "epochs read from memory, or read from faster storage"
                   : "the source reader is the bottleneck even with the cache: enlarge "
                     "pipeline.cache_gib or read from faster storage";
    return v;
  }
  const auto needed = static_cast<std::int64_t>(std::ceil(map_s * v.strategy_batches_per_s));
  if (needed > host.cpu_cores)
    v.advice = fmt::format(
        "{} map workers would be needed but the host has {} cores: cache after the last "
        "deterministic map (--cache map), lighten the augmentation, or use a larger host",
        needed, host.cpu_cores);
  else if (needed > pipe.num_parallel_workers)
    v.advice = fmt::format("raise --num-parallel-workers to at least {} (now {})", needed, pipe.num_parallel_workers);
  else
    v.advice =
        "the pipeline keeps up on average but its latency shows: raise pipeline.prefetch_batches or "
        "queue.capacity so bursts are absorbed";
  return v;
}

}  // namespace ascendsim::runtime
