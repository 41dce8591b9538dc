#include "sim/report/report.h"

#include <algorithm>
#include <cctype>
#include <map>

#include <fmt/format.h>

namespace ascendsim::report {

using namespace runtime;

const char* const kPulledUpNote =
    "a mean well above the median: a few slow steps pull it up (the first loads the graph and fills the pipeline; "
    "under loop sink a sink's first step follows its launch); the median leaves them out, as the steady-state "
    "step does\n";

nlohmann::ordered_json make_report(const ReportHeader& h, const std::vector<RunResult>& runs,
                                   const nlohmann::ordered_json& config) {
  nlohmann::ordered_json j;
  j["workload"] = h.workload;
  j["chip"] = h.chip;
  j["batch_size"] = h.batch_size;
  j["devices"] = h.devices;
  if (!h.mode.empty()) j["mode"] = h.mode;
  if (!h.recipe.is_null()) j["recipe"] = h.recipe;
  if (!h.graph_passes.is_null()) j["graph_passes"] = h.graph_passes;
  if (!h.parallel.is_null()) j["parallel"] = h.parallel;
  if (!h.target.is_null()) j["target"] = h.target;
  if (h.gradient_accumulation > 1) j["gradient_accumulation"] = h.gradient_accumulation;
  j["runs"] = nlohmann::ordered_json::array();
  for (const auto& r : runs) j["runs"].push_back(run_json(r));
  j["config"] = config;
  return j;
}

std::optional<std::int64_t> break_even_sink_size(std::vector<std::pair<std::int64_t, double>> points) {
  std::sort(points.begin(), points.end());
  std::optional<std::int64_t> be;
  for (std::size_t i = points.size(); i-- > 1;) {
    if ((points[i - 1].second - points[i].second) / points[i - 1].second >= 0.01) break;
    be = points[i - 1].first;
  }
  return be;
}

TextTable::TextTable(std::vector<std::string> header, std::vector<std::size_t> left)
    : m_rows{std::move(header)}, m_left(std::move(left)) {}

void TextTable::add(std::vector<std::string> row) { m_rows.push_back(std::move(row)); }

std::string TextTable::render() const {
  std::vector<std::size_t> width(m_rows.front().size(), 0);
  for (const auto& row : m_rows)
    for (std::size_t c = 0; c < row.size() && c < width.size(); ++c) width[c] = std::max(width[c], row[c].size());
  std::string out;
  for (const auto& row : m_rows) {
    std::string line;
    for (std::size_t c = 0; c < row.size() && c < width.size(); ++c) {
      if (c > 0) line += "  ";
      // The first column (names) to the left, numbers to the right.
      const bool to_left = c == 0 || std::find(m_left.begin(), m_left.end(), c) != m_left.end();
      line += to_left ? fmt::format("{:<{}}", row[c], width[c]) : fmt::format("{:>{}}", row[c], width[c]);
    }
    line.erase(line.find_last_not_of(' ') + 1);
    out += line + "\n";
  }
  return out;
}

/// What the AI core tasks lost to the HBM shared with DMA, collectives and other streams' kernels,
/// and to waits for free cores; only where some run lost a microsecond per step or more.
std::string format_contention(const std::vector<RunResult>& runs) {
  auto ms = [](const nlohmann::ordered_json& c, const char* part, const char* key) {
    return c.contains(part) ? c[part].value(key, 0.0) : 0.0;
  };
  bool any = false;
  for (const auto& r : runs) {
    const auto& c = r.contention;
    if (!c.is_object()) continue;
    any = any || ms(c, "hbm_lost_ms_per_step", "compute_stream") + ms(c, "hbm_lost_ms_per_step", "other_streams") +
                         c.value("core_wait_ms_per_step", 0.0) >=
                     1e-3;
  }
  if (!any) return "";
  std::string out = fmt::format(
      "\ncontention (ms per step): what the AI core tasks took beyond their time alone because the HBM ({:g} GB/s) "
      "was shared,\nmax-min fair, with DMA, collectives and other streams' kernels — by stream and by the consumer "
      "charged — and their waits for free cores\n",
      runs.front().contention.value("hbm_gbps", 0.0));
  TextTable t({"strategy", "compute stream", "other streams", "to collectives", "to DMA", "to kernels",
               "kernels slowed", "core waits"});
  for (const auto& r : runs) {
    const auto& c = r.contention;
    if (!c.is_object()) continue;
    t.add({strategy_name(r.session.strategy), fmt::format("{:.3f}", ms(c, "hbm_lost_ms_per_step", "compute_stream")),
           fmt::format("{:.3f}", ms(c, "hbm_lost_ms_per_step", "other_streams")),
           fmt::format("{:.3f}", ms(c, "hbm_lost_to_ms_per_step", "collectives")),
           fmt::format("{:.3f}", ms(c, "hbm_lost_to_ms_per_step", "dma")),
           fmt::format("{:.3f}", ms(c, "hbm_lost_to_ms_per_step", "kernels")),
           fmt::format("{:.1f}", c.value("kernels_slowed_per_step", 0.0)),
           fmt::format("{:.3f}", c.value("core_wait_ms_per_step", 0.0))});
  }
  out += t.render();
  // Which collectives the compute met: the AllReduce groups that start before the backward pass ends.
  for (const auto& r : runs) {
    if (!r.comm_groups.is_array() || r.contention.is_null() ||
        ms(r.contention, "hbm_lost_to_ms_per_step", "collectives") < 1e-3)
      continue;
    const double fp_bp = r.steps.fp_bp.stats().mean_ms;
    std::string groups;
    for (std::size_t g = 0; g < r.comm_groups.size(); ++g) {
      const auto& c = r.comm_groups[g];
      const double start = c.value("start_ms", 0.0), end = start + c.value("duration_ms", 0.0);
      if (start < fp_bp)
        groups +=
            fmt::format("{}group {} ({:.3f} to {:.3f} ms)", groups.empty() ? "" : ", ", g, start, std::min(end, fp_bp));
    }
    if (!groups.empty())
      out += fmt::format(
          "{:<11} the backward pass (to {:.3f} ms after the step's first forward op) shares the HBM with AllReduce "
          "{}\n",
          strategy_name(r.session.strategy), fp_bp, groups);
  }
  return out;
}

std::string format_cluster(const std::vector<RunResult>& runs) {
  std::string out =
      "\ncluster: the ranks step together, each AllReduce waiting for the last rank to arrive; that rank is the "
      "straggler,\nthe one with the least exposed communication (named when the ranks' exposed communication differs "
      "by over 1% of the run)\nper rank: its mean and median step (the lowest to the highest over the ranks) and "
      "exposed "
      "communication\n";
  {
    TextTable t({"strategy", "step ms mean", "median", "comm s (mean / max)", "straggler", "scaling"});
    auto spread = [](const std::vector<double>& v) {
      if (v.empty()) return std::string("-");
      const auto [lo, hi] = std::minmax_element(v.begin(), v.end());
      return fmt::format("{:.4f} to {:.4f}", *lo, *hi);
    };
    for (const auto& r : runs) {
      if (r.rank_step_mean_ms.empty()) continue;
      double comm = 0, comm_max = 0;
      for (double v : r.rank_comm_s) {
        comm += v / static_cast<double>(r.rank_comm_s.size());
        comm_max = std::max(comm_max, v);
      }
      const std::int64_t s = r.straggler();
      t.add({strategy_name(r.session.strategy), spread(r.rank_step_mean_ms), spread(r.rank_step_p50_ms),
             fmt::format("{:.4f} / {:.4f}", comm, comm_max), s >= 0 ? "rank " + std::to_string(s) : std::string("none"),
             r.scaling_efficiency >= 0 ? fmt::format("{:.3f}", r.scaling_efficiency) : std::string("-")});
    }
    out += t.render();
    for (const auto& r : runs)
      if (r.simulated_ranks > 0 && r.simulated_ranks < r.devices) {
        out += fmt::format(
            "ranks simulated: {} of {} (servers alike simulated once, each standing for the others of its kind)\n",
            r.simulated_ranks, r.devices);
        break;
      }
    // The optimizer's own collectives (a sharded optimizer's), which no group table lists.
    for (const auto& r : runs) {
      if (!r.optimizer_collectives.is_object()) continue;
      std::string parts;
      for (const auto& [kind, k] : r.optimizer_collectives.items())
        parts += fmt::format("{}{} {:.1f} MB in {}", parts.empty() ? "" : ", ", kind, k["bytes"].get<double>() / 1e6,
                             k["collectives"].get<std::int64_t>());
      out += fmt::format("{:<11} the optimizer's collectives per step (fused units): {}\n",
                         strategy_name(r.session.strategy), parts);
    }
    // The exposed communication by what it was for, where the layouts communicate too.
    for (const auto& r : runs) {
      const auto& e = r.exposed_comm;
      if (!e.is_object() || (e.value("operators_ms_per_step", 0.0) <= 0 && !r.optimizer_collectives.is_object() &&
                             !e.contains("pipeline_ms_per_step")))
        continue;
      out += fmt::format(
          "{:<11} exposed communication per step: {:.3f} ms in the operators' collectives ({}), {:.3f} ms in the "
          "gradients' and the optimizer's (data parallel, norms){}\n",
          strategy_name(r.session.strategy), e.value("operators_ms_per_step", 0.0),
          r.tensor_parallel > 1 ? "tensor parallel" : "the layouts' redistribution",
          e.value("gradients_ms_per_step", 0.0),
          e.contains("pipeline_ms_per_step")
              ? fmt::format(", {:.3f} ms in the collectives among pipeline stages (their own time and the waits "
                            "for the other stages)",
                            e.value("pipeline_ms_per_step", 0.0))
              : std::string());
    }
    // Pipeline stages: each stage's step, exchanges and bubble (its first rank).
    for (const auto& r : runs) {
      if (!r.pipeline.is_object()) continue;
      const auto& p = r.pipeline;
      out += fmt::format(
          "\n{} pipeline: {} stages x {} micro-batches in the 1F1B order; on equal stages with free exchanges the "
          "bubble is (p-1)/(m+p-1) = {:.1f}% of the step\nper stage (its first rank), its collectives among stages "
          "(the exchanges, a shared weight's gradient, the global norm): waited = the device idle in them, bubble = "
          "waited less their own time\n",
          strategy_name(r.session.strategy), p["stages"].get<std::int64_t>(), p["micro_batches"].get<std::int64_t>(),
          100 * p["ideal_bubble_fraction"].get<double>());
      TextTable st({"stage", "ranks from", "layers", "step ms", "compute ms", "collectives", "MB", "their ms",
                    "waited ms", "bubble ms", "bubble", "weights+opt MiB", "step MiB"});
      for (const auto& s : p["per_stage"])
        st.add({std::to_string(s["stage"].get<std::int64_t>()), std::to_string(s["first_rank"].get<std::int64_t>()),
                fmt::format("{} to {}", s["layers"][0].get<std::int64_t>(), s["layers"][1].get<std::int64_t>()),
                fmt::format("{:.3f}", s["step_ms"].get<double>()),
                fmt::format("{:.3f}", s["device_compute_ms"].get<double>()),
                std::to_string(s["exchanges"].get<std::int64_t>()),
                fmt::format("{:.1f}", s["exchange_bytes"].get<double>() / 1e6),
                fmt::format("{:.3f}", s["exchange_ms"].get<double>()),
                fmt::format("{:.3f}", s["exposed_exchange_ms"].get<double>()),
                fmt::format("{:.3f}", s["bubble_ms"].get<double>()),
                fmt::format("{:.1f}%", 100 * s["bubble_fraction"].get<double>()),
                fmt::format("{:.1f}", s["memory"]["persistent_bytes"].get<double>() / 1048576.0),
                fmt::format("{:.1f}", s["memory"]["step_bytes"].get<double>() / 1048576.0)});
      out += st.render();
    }
  }
  const bool groups = std::any_of(runs.begin(), runs.end(), [](const RunResult& r) { return !r.comm_groups.empty(); });
  if (groups) {
    out +=
        "\nAllReduce groups (ms per step, ranks' mean: start after the step's first forward op, duration with the wait "
        "for the last rank, exposed = not hidden by computation)\n";
    TextTable t(
        {"strategy", "group", "gradients", "MB", "AllReduce ms", "start", "duration", "exposed", "exposed max"});
    for (const auto& r : runs)
      for (std::size_t g = 0; g < r.comm_groups.size(); ++g) {
        const auto& c = r.comm_groups[g];
        t.add({strategy_name(r.session.strategy), std::to_string(g),
               fmt::format("{} to {}", c["first"].get<std::int64_t>(), c["last"].get<std::int64_t>()),
               fmt::format("{:.1f}", c["bytes"].get<double>() / 1e6),
               fmt::format("{:.3f}", c.value("all_reduce_ms", 0.0)), fmt::format("{:.3f}", c.value("start_ms", 0.0)),
               fmt::format("{:.3f}", c.value("duration_ms", 0.0)), fmt::format("{:.3f}", c.value("exposed_ms", 0.0)),
               fmt::format("{:.3f}", c.value("exposed_max_ms", 0.0))});
      }
    out += t.render();
  }
  const auto& l = runs.front().cluster_links;
  if (l.is_object()) {
    if (l["broadcast_bytes"].get<double>() > 0)
      out += fmt::format("parameters broadcast from rank 0 before training: {:.1f} MB in {:.3f} ms\n",
                         l["broadcast_bytes"].get<double>() / 1e6, l["broadcast_ms"].get<double>());
    else
      out += "\n";
    for (const auto& r : runs) {
      const auto& k = r.cluster_links;
      std::string line = fmt::format("{:<11} links: HCCS {} x {:g} GB/s, {:.1f}% used",
                                     strategy_name(r.session.strategy), k["hccs"]["links"].get<int>(),
                                     k["hccs"]["gbps"].get<double>(), 100 * k["hccs"]["utilisation"].get<double>());
      if (k["roce"]["ports"].get<int>() > 0)
        line += fmt::format("; RoCE {} x {:g} GB/s, {:.1f}% used", k["roce"]["ports"].get<int>(),
                            k["roce"]["gbps"].get<double>(), 100 * k["roce"]["utilisation"].get<double>());
      if (k.contains("network") && k["network"]["leaves"].get<int>() > 1)
        line += fmt::format(
            "; {} leaf switches of {} server{}, {:g}:1 to the spines (rings between leaves at {:.0f}% "
            "of a port)",
            k["network"]["leaves"].get<int>(), k["network"]["servers_per_leaf"].get<int>(),
            k["network"]["servers_per_leaf"].get<int>() == 1 ? "" : "s", k["network"]["oversubscription"].get<double>(),
            100 * k["network"]["spine_rate"].get<double>());
      if (k.contains("shared_ports") && k["shared_ports"]["collectives"].get<double>() > 0)
        line += fmt::format(
            "; {:g} collectives slowed sharing a device's port with another in flight or its PCIe link with the "
            "data's DMA, {:.3f} ms lost",
            k["shared_ports"]["collectives"].get<double>(), 1e3 * k["shared_ports"]["lost_s"].get<double>());
      out += line + "\n";
    }
  }
  return out;
}

/// Semi-automatic parallelism: per device what the sharding keeps, and the collectives it inserted.
std::string format_semi_auto(const nlohmann::ordered_json& p) {
  auto mib = [](const nlohmann::ordered_json& v) { return fmt::format("{:.2f} MiB", v.get<double>() / 1048576.0); };
  const auto& m = p["memory_per_device_bytes"];
  const bool pipeline = p.contains("pipeline") && p["pipeline"].is_object();
  std::string out = fmt::format(
      "\n{} parallel on {} devices ({} reading different samples): per device{} {} of {} parameters; "
      "memory per device{}: weights and optimizer {}, step {}, data queue {}, a batch {}\n",
      pipeline ? "pipeline" : "semi-auto", p["devices"].get<std::int64_t>(),
      std::max<std::int64_t>(1, p["data_shards"].get<std::int64_t>()), pipeline ? " (stage 0)" : "",
      p["parameters"]["per_device"].get<std::int64_t>(), p["parameters"]["whole"].get<std::int64_t>(),
      pipeline ? " (stage 0; every stage's in the pipeline table)" : "", mib(m["persistent"]), mib(m["step"]),
      mib(m["queue"]), mib(m["input_per_batch"]));
  const auto& g = p["gradient_group"];
  const bool sharded = p.value("optimizer_shard", std::int64_t{1}) > 1;
  out += g["size"].get<std::int64_t>() == 1
             ? std::string(pipeline ? "gradients: no AllReduce (no data parallelism within a stage)\n"
                                    : "gradients: no AllReduce (the ranks that hold a weight's copies saw the same "
                                      "samples)\n")
             : fmt::format("gradients: {} over {} ranks {} apart\n",
                           sharded ? "reduce-scattered (the optimizer state sharded; AllReduce for the weights left "
                                     "whole)"
                                   : "AllReduce",
                           g["size"].get<std::int64_t>(), g["stride"].get<std::int64_t>());
  // One row per collective, or per family of them: names that differ only in their numbers (the
  // layers of a transformer) with the same pass, kind, group and size share a row and a count.
  struct Row {
    std::string name, pass, kind, group;
    std::int64_t bytes = 0, count = 0;
    double ms = 0;
  };
  std::vector<Row> rows;
  std::map<std::string, std::size_t> row_of;
  for (const auto& c : p["collectives"]) {
    const std::string name = c["name"].get<std::string>();
    // A layer's number: digits between dots (or a dot and a slash), h.3.attn -> h.*.attn.
    std::string family;
    for (std::size_t i = 0; i < name.size(); ++i) {
      std::size_t j = i;
      while (j < name.size() && std::isdigit(static_cast<unsigned char>(name[j]))) ++j;
      const bool number =
          j > i && i > 0 && name[i - 1] == '.' && (j == name.size() || name[j] == '.' || name[j] == '/');
      if (number) {
        family += '*';
        i = j - 1;
      } else {
        family += name[i];
      }
    }
    Row r{name,
          c["pass"].get<std::string>(),
          c["kind"].get<std::string>(),
          fmt::format("{} ranks, {} apart", c["group"]["size"].get<std::int64_t>(),
                      c["group"]["stride"].get<std::int64_t>()),
          c["bytes"].get<std::int64_t>(),
          1,
          c["ms"].get<double>()};
    const std::string key = family + "|" + r.pass + "|" + r.kind + "|" + r.group + "|" + std::to_string(r.bytes);
    if (auto it = row_of.find(key); it != row_of.end()) {
      Row& f = rows[it->second];
      f.name = family;
      ++f.count;
      f.ms += r.ms;
    } else {
      row_of[key] = rows.size();
      rows.push_back(r);
    }
  }
  TextTable t(
      {"collective (a forward one's backward is its dual)", "pass", "kind", "group", "bytes", "count", "ms each"});
  for (const auto& r : rows)
    t.add({r.name, r.pass, r.kind, r.group, std::to_string(r.bytes), std::to_string(r.count),
           fmt::format("{:.4f}", r.ms / static_cast<double>(r.count))});
  if (!rows.empty()) out += t.render();
  return out;
}

namespace {
/// The checkpoints of the runs that saved them, each save's parts; and, where failures were laid
/// over the runs, the expected time to train with them and the best interval.
std::string format_checkpoints(const std::vector<RunResult>& runs) {
  std::string out =
      "\ncheckpoints (MindSpore's ModelCheckpoint; per save, s: the copy to the host, the serialisation, the write at "
      "the rank's share of the server's storage, and what the steps waited for)\n";
  TextTable t({"strategy", "every", "saving", "MB per rank", "writers", "saves", "d2h", "serialise", "write", "waited"});
  for (const auto& r : runs) {
    const CheckpointRecord& c = r.checkpoints;
    if (r.session.checkpoint_every <= 0) continue;
    const double n = static_cast<double>(std::max<std::int64_t>(1, c.saves));
    t.add({strategy_name(r.session.strategy), std::to_string(r.session.checkpoint_every),
           r.session.checkpoint_async ? "async" : "sync", fmt::format("{:.1f}", static_cast<double>(c.bytes) / 1e6),
           std::to_string(c.writers), std::to_string(c.saves), fmt::format("{:.4f}", c.d2h_s / n),
           fmt::format("{:.4f}", c.serialise_s / n), fmt::format("{:.4f}", c.write_s / n),
           fmt::format("{:.4f}", c.wait_s / n)});
  }
  out += t.render();
  if (std::none_of(runs.begin(), runs.end(), [](const RunResult& r) { return r.faults_analysed(); })) return out;
  const FaultAnalysis& first =
      std::find_if(runs.begin(), runs.end(), [](const RunResult& r) { return r.faults_analysed(); })->faults;
  out += fmt::format(
      "\nwith failures (a device MTBF of {:g} h over {} devices: a failure every {:.4g} s; after one, the work since "
      "the last checkpoint is lost and a restart takes relaunch + initialisation + checkpoint load, before the first "
      "save a relaunch and the run from its start; {} seeded draws; Young/Daly's interval sqrt(2 x checkpoint x MTBF) "
      "beside the best)\n",
      first.device_mtbf_hours, first.devices, first.inputs.mtbf_s, first.seeds);
  TextTable f({"strategy", "restart s", "time to train", "expected", "mean", "p10", "p90", "failures", "best every",
               "its expected", "Young/Daly every"});
  for (const auto& r : runs) {
    if (!r.faults_analysed()) continue;
    const FaultAnalysis& a = r.faults;
    f.add({strategy_name(r.session.strategy),
           fmt::format("{:.1f} = {:.1f} + {:.1f} + {:.1f}", a.inputs.restart_s, a.relaunch_s, a.inputs.init_s,
                       a.load_s),
           fmt::format("{:.3f}", a.failure_free_s), fmt::format("{:.3f}", a.expected_s), fmt::format("{:.3f}", a.mean_s),
           fmt::format("{:.3f}", a.p10_s), fmt::format("{:.3f}", a.p90_s), fmt::format("{:.2f}", a.failures_mean),
           std::to_string(a.best.every), fmt::format("{:.3f}", a.best.expected_s),
           fmt::format("{:.0f} ({:.1f} s)", a.inputs.step_s > 0 ? a.young_daly_s / a.inputs.step_s : 0.0,
                       a.young_daly_s)});
  }
  return out + f.render();
}

/// ", gradient accumulation ..." for the header line ("" without).
std::string accumulation(const ReportHeader& h) {
  const std::int64_t n = h.gradient_accumulation;
  if (n <= 1) return "";
  const auto& pp = h.parallel.is_object() ? h.parallel["pipeline"] : nlohmann::ordered_json();
  if (pp.is_object())
    return fmt::format(" (gradient accumulation: {} rounds of {})", n, pp["micro_batches"].get<std::int64_t>() / n);
  return fmt::format(" in {} micro-batches of {} (gradient accumulation: one optimizer step)", n, h.batch_size / n);
}
}  // namespace

std::string format_table(const ReportHeader& h, const std::vector<RunResult>& runs) {
  std::string out;
  if (!runs.empty()) {
    const Session& s = runs.front().session;
    if (h.devices > 1) {
      // A semi-auto rank's batch is its piece: the batch in all is that times the pieces.
      std::string batch = fmt::format("batch {} per device", h.batch_size), mode = "data parallel";
      if (h.parallel.is_object()) {
        const std::int64_t shards = std::max<std::int64_t>(1, h.parallel.value("data_shards", std::int64_t{1}));
        const std::int64_t tp = h.parallel.value("tensor_parallel", std::int64_t{1});
        const auto& pp = h.parallel["pipeline"];
        const std::string sp = h.parallel.value("sequence_parallel", false) ? " (sequence parallel)" : "";
        mode = tp > 1 ? fmt::format("tensor parallel {}{} x data parallel {}", tp, sp, shards) : "semi-auto parallel";
        if (pp.is_object())
          mode = fmt::format("pipeline {} x {}data parallel {}", pp["stages"].get<std::int64_t>(),
                             tp > 1 ? fmt::format("tensor parallel {}{} x ", tp, sp) : std::string(), shards);
        batch = pp.is_object() ? fmt::format("batch {} per pipeline in {} micro-batches of {}, {} in all", h.batch_size,
                                             pp["micro_batches"].get<std::int64_t>(),
                                             pp["micro_batch"].get<std::int64_t>(), h.batch_size * shards)
                : tp > 1
                    ? fmt::format("batch {} per tensor-parallel group, {} in all", h.batch_size, h.batch_size * shards)
                : shards > 1 ? fmt::format("batch {} in all, {} per data-parallel piece (the dataset strategy cuts it)",
                                           h.batch_size * shards, h.batch_size)
                             : fmt::format("batch {} in all (every rank reads it)", h.batch_size);
      }
      out += fmt::format("{} on {} x {} ({}, {}), {}{}, {} epoch(s) x {} steps per rank", h.workload, h.devices,
                         h.chip, h.servers > 1 ? std::to_string(h.servers) + " servers" : std::string("one server"),
                         mode, batch, accumulation(h), s.epochs, s.steps_per_epoch);
    } else
      out += fmt::format("{} on {}, batch {}{}, {} epoch(s) x {} steps", h.workload, h.chip, h.batch_size,
                         accumulation(h), s.epochs, s.steps_per_epoch);
    // Say what runs where a strategy runs something else: loop sink's sinks of S steps.
    for (const auto& r : runs)
      if (r.session.strategy == Strategy::LoopSink && r.session.effective_sink_size() != r.session.steps_per_epoch) {
        out += fmt::format("; loop-sink: {} sink(s) of {} steps = {} steps", r.session.epochs,
                           r.session.effective_sink_size(), r.session.steps());
        break;
      }
    out += "\n";
    if (!h.setting.empty()) out += h.setting + "\n";
    if (!h.target.is_null())
      out += fmt::format("trains to epoch {}: the first evaluation (every {} epoch(s)) at which {} reaches {:g} ({:.4g} "
                         "there)\n",
                         h.target["epochs"].get<std::int64_t>(), h.target["eval_every"].get<std::int64_t>(),
                         h.target["curve"].get<std::string>(), h.target["target_accuracy"].get<double>(),
                         h.target["accuracy"].get<double>());
    out += "\n";
  }
  {
    TextTable t({"strategy", "steps", "sim s", "step ms mean", "median", "p99", "steady", "warm-up s", "samples/s",
                 "busy", "|", "op launch", "graph", "H2D", "D2H", "syncs"});
    bool pulled_up = false;
    std::int64_t steady_from = -1;
    for (const auto& r : runs) {
      const StepStats st = r.steps.step.stats();
      const Interactions& io = r.interactions;
      pulled_up = pulled_up || mean_pulled_up(st);
      steady_from = r.steps.steady_from;
      t.add({strategy_name(r.session.strategy), std::to_string(r.steps_completed), fmt::format("{:.3f}", r.sim_time_s),
             fmt::format("{:.4f}", st.mean_ms), fmt::format("{:.4f}", st.p50_ms), fmt::format("{:.4f}", st.p99_ms),
             r.steps.steady.count() > 0 ? fmt::format("{:.4f}", r.steps.steady.stats().mean_ms) : "-",
             fmt::format("{:.4f}", r.steps.warmup_s()), fmt::format("{:.0f}", r.samples_per_s()),
             fmt::format("{:.1f}%", 100.0 * r.device_busy_fraction()), "|", std::to_string(io.op_launches),
             std::to_string(io.graph_launches), std::to_string(io.h2d_copies), std::to_string(io.d2h_copies),
             std::to_string(io.host_syncs)});
    }
    out += t.render();
    if (steady_from >= 0)
      out += fmt::format(
          "steady: the mean step from step {} on ({}); warm-up: what the steps before it took beyond as many steady "
          "steps (graph load, pipeline fill, a cache's first epoch)\n",
          steady_from + 1,
          runs.front().session.steps() > runs.front().session.steps_per_epoch ? "the second epoch"
                                                                              : "the run's second half");
    if (pulled_up) out += kPulledUpNote;
    // Sequence models in the field's units: tokens/s and the model FLOPs utilisation (steady).
    for (const auto& r : runs)
      if (r.tokens_per_sample > 0)
        out += fmt::format(
            "{}: {:.0f} tokens/s, model FLOPs utilisation {:.1f}% of {} x {:.0f} TFLOPS (steady state)\n",
            strategy_name(r.session.strategy), r.steady_samples_per_s() * static_cast<double>(r.tokens_per_sample),
            100 * r.mfu(), r.devices, r.peak_flops_per_device / 1e12);
  }
  out += "\nwhere the time goes (% of simulated time; device work first, host work only where the device idles)\n";
  {
    // A phase no run has (communication on one device) gets no column.
    std::vector<std::size_t> shown;
    for (std::size_t i = 0; i < sim::kPhaseCount; ++i)
      if ((static_cast<sim::Phase>(i) != sim::Phase::Comm && static_cast<sim::Phase>(i) != sim::Phase::Eval &&
           static_cast<sim::Phase>(i) != sim::Phase::Checkpoint) ||
          std::any_of(runs.begin(), runs.end(), [i](const RunResult& r) { return r.breakdown_s[i] > 0; }))
        shown.push_back(i);
    std::vector<std::string> head = {"strategy"};
    for (std::size_t i : shown) head.push_back(sim::phase_name(static_cast<sim::Phase>(i)));
    TextTable t(head);
    for (const auto& r : runs) {
      std::vector<std::string> row = {strategy_name(r.session.strategy)};
      for (std::size_t i : shown)
        row.push_back(fmt::format("{:.1f}%", r.sim_time_s > 0 ? 100.0 * r.breakdown_s[i] / r.sim_time_s : 0.0));
      t.add(row);
    }
    out += t.render();
  }
  // Time to train, in parts, where it has parts beyond the steps: evaluation during training, or
  // a cluster's communication.
  const bool checkpoints =
      std::any_of(runs.begin(), runs.end(), [](const RunResult& r) { return r.session.checkpoint_every > 0; });
  if (std::any_of(runs.begin(), runs.end(), [](const RunResult& r) { return r.time_to_train_has_parts(); })) {
    out += std::string(
               "\ntime to train (s, from the run's start to its stop; MLPerf's timed region leaves out the "
               "initialisation): the steps, the evaluation passes, the one-time set-up, the communication no "
               "computation hid") +
           (checkpoints ? ", the checkpoints the steps waited for" : "") + "\n";
    std::vector<std::string> head = {"strategy", "time to train", "training", "evaluation", "initialisation",
                                     "exposed comm"};
    if (checkpoints) head.push_back("checkpoint");
    TextTable t(head);
    for (const auto& r : runs) {
      const TimeToTrain v = r.time_to_train();
      std::vector<std::string> row = {strategy_name(r.session.strategy), fmt::format("{:.3f}", v.total),
                                      fmt::format("{:.3f}", v.training),  fmt::format("{:.3f}", v.evaluation),
                                      fmt::format("{:.3f}", v.initialisation), fmt::format("{:.3f}", v.exposed_comm)};
      if (checkpoints) row.push_back(fmt::format("{:.3f}", v.checkpoint));
      t.add(row);
    }
    out += t.render();
  }
  if (checkpoints) out += format_checkpoints(runs);
  out +=
      "\nstep trace (ms per step, mean / median / p99; MindSpore profiler's iteration_interval, fp_and_bp, "
      "tail)\n";
  {
    TextTable t({"strategy", "iteration_interval", "fp_and_bp", "tail"});
    auto cell = [](const StepSummary& v) {
      const StepStats s = v.stats();
      return fmt::format("{:.4f} / {:.4f} / {:.4f}", s.mean_ms, s.p50_ms, s.p99_ms);
    };
    for (const auto& r : runs)
      t.add({strategy_name(r.session.strategy), cell(r.steps.interval), cell(r.steps.fp_bp), cell(r.steps.tail)});
    out += t.render();
  }
  out += format_contention(runs);
  if (h.devices > 1) out += format_cluster(runs);
  if (h.parallel.is_object()) out += format_semi_auto(h.parallel);
  // Per step for a chosen window (--step-trace A:B), steps numbered from 1.
  for (const auto& r : runs) {
    const std::vector<NumberedStep> w = r.steps.window_steps();
    if (w.empty()) continue;
    out += fmt::format("\nstep trace of {}, steps {} to {} (ms)\n", strategy_name(r.session.strategy), w.front().number,
                       w.back().number);
    TextTable t({"step", "iteration_interval", "fp_and_bp", "tail", "step"});
    for (const auto& k : w)
      t.add({std::to_string(k.number), fmt::format("{:.4f}", 1e3 * k.interval_s),
             fmt::format("{:.4f}", 1e3 * k.fp_bp_s), fmt::format("{:.4f}", 1e3 * k.tail_s),
             fmt::format("{:.4f}", 1e3 * k.step_s)});
    out += t.render();
  }
  out += "\ndata pipeline\n";
  for (const auto& r : runs) {
    if (r.data.is_null()) continue;
    out += fmt::format("{:<11} {}\n", strategy_name(r.session.strategy), r.data["verdict"].get<std::string>());
    out += fmt::format("{:<11} advice: {}\n", "", r.data["advice"].get<std::string>());
    if (r.data.contains("tree")) {  // each stage's threads' busy fraction; the busiest (the slowest) marked
      std::string tree;
      for (const auto& st : r.data["tree"]) {
        tree += fmt::format("{}{} ({}) {:.0f}%{}", tree.empty() ? "" : " > ", st["stage"].get<std::string>(),
                            st["workers"].get<std::int64_t>(), 100 * st["busy_fraction"].get<double>(),
                            st["bounds_pipeline"].get<bool>() ? " [slowest]" : "");
      }
      out += fmt::format("{:<11} tree, busy: {}\n", "", tree);
    }
    const auto epochs = r.epoch_s();
    if (epochs.size() > 1) {
      out += fmt::format("{:<11} epoch times:", "");
      for (std::size_t i = 0; i < epochs.size() && i < 8; ++i) out += fmt::format(" {:.3f}s", epochs[i]);
      out += epochs.size() > 8 ? " ...\n" : "\n";
    }
  }
  if (std::any_of(runs.begin(), runs.end(), [](const RunResult& r) { return !r.eval_passes.empty(); })) {
    out += "\nevaluation during training (a forward-only pass over the evaluation dataset; MindSpore's eval_cost)\n";
    TextTable t({"strategy", "passes", "steps/pass", "first pass", "later passes (mean)", "cache", "accuracy"});
    for (const auto& r : runs) {
      if (r.eval_passes.empty()) continue;
      const EvalSummary s = r.evaluation();
      const double acc = r.eval_passes.back().accuracy;
      t.add({strategy_name(r.session.strategy), std::to_string(s.passes), std::to_string(r.session.eval_steps),
             fmt::format("{:.3f} s", s.first_s), s.passes > 1 ? fmt::format("{:.3f} s", s.later_mean_s) : "-",
             r.eval_cache.is_object() ? r.eval_cache.value("placement", "none") : "none",
             acc >= 0 ? fmt::format("{:.2f}%", 100 * acc) : "-"});
    }
    out += t.render();
  }
  return out;
}

std::string per_step_csv(const std::vector<RunResult>& runs) {
  std::string out = "strategy,step,step_s,iteration_interval_s,fp_bp_s,tail_s\n";
  for (const auto& r : runs) {
    for (const auto& k : r.steps.kept_steps())
      out += fmt::format("{},{},{:.12g},{:.12g},{:.12g},{:.12g}\n", strategy_name(r.session.strategy), k.number,
                         k.step_s, k.interval_s, k.fp_bp_s, k.tail_s);
  }
  return out;
}

}  // namespace ascendsim::report
