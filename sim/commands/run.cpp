// `compare` and `train`: the workload under all four strategies, or under one, with the report
// files the run options ask for.

#include <filesystem>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "sim/api.h"
#include "sim/commands/commands.h"
#include "sim/commands/messages.h"
#include "sim/commands/options.h"
#include "sim/core/error.h"
#include "sim/outputs.h"
#include "sim/report/html_report.h"
#include "sim/report/report.h"

namespace ascendsim::sim::cli {

namespace {

int run_strategies(const Options& o, const std::vector<runtime::Strategy>& strategies) {
  if (o.trace.empty() && !o.trace_steps.empty())
    throw InputError("--trace-steps " + o.trace_steps + ": it selects the steps of a trace; add --trace FILE");
  Outputs files;
  add_outputs(files, o);
  RunRequest req = make_request(o, strategies);
  if (req.trace) {
    req.trace_out = &files.stream(o.trace);  // written as the runs record it
    req.trace_space = files.free_bytes(o.trace);
    typed()["trace"] = "--trace " + o.trace;  // an error about the trace names its file
  }
  RunOutcome out = run(req);
  if (out.failed()) {
    std::istringstream lines(out.failure_message());
    for (std::string line; std::getline(lines, line);) std::cerr << "error: " << line << "\n";
    std::cerr << "\nwhere the time went up to that point:\n" << report::format_table(out.header, out.runs);
    std::cerr << "no report written\n";
    return kExitRunFailed;
  }
  std::string scaling;
  if (o.scaling) {
    if (req.devices <= 1) throw InputError("--scaling compares N devices with one; give --devices N > 1");
    const std::vector<ScalingPoint> curve = scaling_curve(req, out);
    const std::vector<double>& eff = curve.back().efficiency;
    for (std::size_t i = 0; i < out.runs.size(); ++i) {
      out.runs[i].scaling_efficiency = eff[i];
      out.runs[i].scaling = nlohmann::ordered_json::array();
      for (const auto& p : curve) {
        ordered_json lost;
        for (std::size_t c = 0; c < kScalingLosses.size(); ++c) lost[kScalingLosses[c]] = p.lost[i][c];
        out.runs[i].scaling.push_back({{"devices", p.devices},
                                       {"samples_per_s", p.samples_per_s[i]},
                                       {"step_ms", p.step_ms[i]},
                                       {"efficiency", p.efficiency[i]},
                                       {"lost", lost}});
      }
    }
    scaling =
        "\nscaling (samples/s across ranks and efficiency against one device; same batch per device and "
        "steps per rank)\n";
    std::vector<std::string> head = {"devices"};
    for (const auto& r : out.runs) head.push_back(runtime::strategy_name(r.session.strategy));
    report::TextTable t(head);
    for (const auto& p : curve) {
      std::vector<std::string> row = {std::to_string(p.devices)};
      for (std::size_t i = 0; i < p.samples_per_s.size(); ++i)
        row.push_back(fmt::format("{:.0f} ({:.1f}%)", p.samples_per_s[i], 100 * p.efficiency[i]));
      t.add(row);
    }
    scaling += t.render();
    // Where each point's efficiency went: its phases' time beyond one device's, as shares of its run.
    for (std::size_t i = 0; i < out.runs.size(); ++i) {
      scaling += fmt::format(
          "\nefficiency lost against one device, {} (% of the run's time: exposed collectives, waiting for "
          "stragglers, host, device compute, set-up, evaluation; they add up to 100% less the efficiency)\n",
          runtime::strategy_name(out.runs[i].session.strategy));
      std::vector<std::string> cols = {"devices", "efficiency"};
      for (const char* c : kScalingLosses) cols.emplace_back(c);
      report::TextTable lt(cols);
      for (const auto& p : curve) {
        std::vector<std::string> row = {std::to_string(p.devices), fmt::format("{:.1f}%", 100 * p.efficiency[i])};
        for (double v : p.lost[i]) row.push_back(fmt::format("{:.1f}%", 100 * v));
        lt.add(row);
      }
      scaling += lt.render();
    }
  }
  std::string losses;
  for (const auto& r : out.runs) {
    if (!r.functional) continue;
    const std::string who = out.runs.size() > 1 ? std::string(runtime::strategy_name(r.session.strategy)) + ": " : "";
    for (const auto& l : r.loss_values)
      losses += fmt::format("{}epoch: {} step: {}, loss is {}\n", who, l.epoch, l.step, l.loss);
    if (r.accuracy >= 0)
      losses += fmt::format("{}accuracy on the test split: {:.4f} ({} samples)\n", who, r.accuracy, r.eval_samples);
    if (!r.values) continue;
    const auto& opt = r.values->options();
    const std::string source = opt.init_from.empty() ? "--init " + opt.init : opt.init_from;
    if (r.devices > 1) {
      losses += fmt::format("{}values of {} steps on each of {} ranks; seed {}, weights from {}\n", who,
                            r.values->steps_computed(), r.devices, opt.seed, source);
    } else {
      losses +=
          fmt::format("{}values of {} steps computed in {:.2f} s wall ({:.0f} samples/s); seed {}, weights from {}\n",
                      who, r.values->steps_computed(), r.values->compute_wall_s(),
                      r.values->compute_wall_s() > 0
                          ? static_cast<double>(r.values->steps_computed() * r.batch_size) / r.values->compute_wall_s()
                          : 0.0,
                      opt.seed, source);
    }
  }
  if (!losses.empty()) losses += "\n";
  const auto* v = out.runs.empty() ? nullptr : out.runs.front().values.get();
  if (!v && (!o.save_weights.empty() || !o.dump_batches.empty()))  // before any file is written
    throw InputError(
        "--save-weights and --dump-batches write one network's values; this run has none (semi-auto "
        "ranks hold pieces): give one device or data parallelism");
  if (v) {
    if (!o.save_weights.empty()) {
      files.stage(o.save_weights,
                  v->weights_index(std::filesystem::path(weights_data_path(o.save_weights)).filename().string()));
      files.stage(weights_data_path(o.save_weights), v->weights_data());
    }
    if (!o.dump_batches.empty()) {
      const std::filesystem::path d(o.dump_batches);
      files.stage((d / "batches.json").string(), v->batches_index());
      files.stage((d / "images.bin").string(), v->batches_images());
      files.stage((d / "labels.bin").string(), v->batches_labels());
    }
  }
  if (!o.json.empty()) files.stage(o.json, out.report().dump(2) + "\n");
  if (!o.html.empty()) files.stage(o.html, report::html_compare(out.header, out.runs));
  if (!o.per_step.empty()) files.stage(o.per_step, report::per_step_csv(out.runs));
  if (o.json != "-") files.print(losses + report::format_table(out.header, out.runs) + scaling);
  files.commit();
  return 0;
}

}  // namespace

int cmd_compare(int argc, char* argv[]) {
  Options o;
  po::options_description desc = common_options(o);
  desc.add(run_options(o));
  desc.add(parallel_options(o));
  if (!parse(argc, argv, desc, "compare")) return 0;
  return run_strategies(o, runtime::all_strategies());
}

int cmd_train(int argc, char* argv[]) {
  Options o;
  po::options_description desc = common_options(o);
  desc.add(run_options(o));
  desc.add(parallel_options(o));
  desc.add_options()("strategy,s", po::value(&o.strategy),
                     "non-sink | data-sink | graph-sink | loop-sink (with --sink-size alone: loop-sink, as "
                     "Model.train(..., dataset_sink_mode=True, sink_size=N))");
  if (!parse(argc, argv, desc, "train")) return 0;
  if (o.strategy.empty()) {
    if (o.sink_size < 0)
      throw InputError(
          "train needs --strategy (non-sink, data-sink, graph-sink or loop-sink), or --sink-size N for "
          "loop sink");
    o.strategy = "loop-sink";
  }
  return run_strategies(o, {runtime::parse_strategy(o.strategy)});
}

}  // namespace ascendsim::sim::cli
