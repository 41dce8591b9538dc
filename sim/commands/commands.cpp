// The table of commands: a new command is a file of sim/commands/ and one line here.

#include "sim/commands/commands.h"

#include <fmt/format.h>

namespace ascendsim::sim::cli {

const std::vector<Command>& commands() {
  static const std::vector<Command> table = {
      {"compare", "run the workload under all four strategies and compare them", cmd_compare},
      {"train", "run the workload under one strategy (--strategy)", cmd_train},
      {"sweep", "run the strategies over values of sink_size or any parameter (--param, --values)", cmd_sweep},
      {"advise-fusion", "search AllReduce fusion splits (all_reduce_fusion) for the shortest step",
       cmd_advise_fusion},
      {"serve", "LLM serving: requests batched continuously over a paged KV cache, per launch mode", cmd_serve},
      {"tune",
       "search a job's knobs for the best configuration, and say why (Optuna; python3 -m ascendsim tune)",
       cmd_tune},
      {"info", "parameters, MACs, ops and device memory of a workload", cmd_info},
      {"op",
       "one op on the AI cores: cycles per pipe, tiling, what bounds it (--aicore-model event: timeline)",
       cmd_op},
      {"aicore-check", "every op of a step timed by the analytic and the event AI-core model, side by side",
       cmd_aicore_check},
      {"params", "every configuration parameter with unit, default and description", cmd_params},
      {"stats", "every statistic a run reports, with unit and description", cmd_stats},
      {"profile", "AI-core op tables of one step with MindSpore profiler columns (--out DIR)", cmd_profile},
      {"validate", "published Ascend 910 figures against the simulated ones", cmd_validate},
      {"calibrate", "fit host parameters jointly to published figures, within bounds, with leave-one-out errors",
       cmd_calibrate},
      {"suite", "run a suite of named runs (YAML) into a directory of reports", cmd_suite},
      {"diff", "compare two reports or suite outputs figure by figure (exit 1 past --tolerance)", cmd_diff},
      {"chips", "the chip presets", cmd_chips},
      {"servers", "the server presets (host, link, devices, chip)", cmd_servers},
      {"calibrate-host", "measure this host's data-pipeline costs and write a host profile (--out)",
       cmd_calibrate_host},
      {"make-image-folder", "write an image folder of photo-like JPEGs (ImageNet-like sizes) for --dataset",
       cmd_make_image_folder},
  };
  return table;
}

const Command* find_command(const std::string& name) {
  for (const Command& c : commands())
    if (name == c.name) return &c;
  return nullptr;
}

std::string usage() {
  std::string text = "usage: ascendsim <command> [options]\n\ncommands:\n";
  for (const Command& c : commands()) text += fmt::format("  {:<8}  {}\n", c.name, c.help);
  return text + "\n`ascendsim <command> --help` lists the command's options; `ascendsim --version` the version.\n";
}

}  // namespace ascendsim::sim::cli
