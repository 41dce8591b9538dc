// `profile`: AI-core op tables of one step with MindSpore's and CANN's profiler columns.

#include <cstddef>
#include <filesystem>
#include <iostream>
#include <string>

#include <fmt/format.h>

#include "aicore/event_model.h"
#include "sim/api.h"
#include "sim/commands/commands.h"
#include "sim/commands/options.h"
#include "sim/outputs.h"
#include "sim/report/report.h"

namespace ascendsim::sim::cli {

int cmd_profile(int argc, char* argv[]) {
  Options o;
  std::string out_dir;
  po::options_description desc = common_options(o);
  desc.add_options()("out", po::value(&out_dir)->required(),
                     "directory for aicore_op_detail.csv and aicore_op_type.csv (MindSpore profiler columns) and "
                     "op_summary.csv (the CANN profiler's op summary: block dim, cycles, each pipe's ratio)");
  if (!parse(argc, argv, desc, "profile")) return 0;
  Outputs files;
  files.directory(out_dir, "--out");
  const OpProfile p = profile_ops(make_request(o, runtime::all_strategies()));
  const std::string detail = (std::filesystem::path(out_dir) / "aicore_op_detail.csv").string();
  const std::string types = (std::filesystem::path(out_dir) / "aicore_op_type.csv").string();
  const std::string summary = (std::filesystem::path(out_dir) / "op_summary.csv").string();
  files.add(detail, "--out");
  files.add(types, "--out");
  files.add(summary, "--out");
  std::string d = "full_kernel_name,op_type,execution_time_ms,execution_frequency,percent\n";
  for (const auto& op : p.ops)
    d += fmt::format("{},{},{:.6f},{},{:.4f}\n", op.full_name, op.type, op.time_ms, op.count,
                     p.step_ms > 0 ? 100 * op.time_ms * static_cast<double>(op.count) / p.step_ms : 0.0);
  std::string t = "op_type,execution_time_ms,execution_frequency,percent\n";
  for (const auto& ty : p.types)
    t += fmt::format("{},{:.6f},{},{:.4f}\n", ty.type, ty.time_ms, ty.count, 100 * ty.share);
  // CANN's op summary: one row per task, its duration and each pipe's share of the busiest block's
  // cycles (aic_: the Cube side, aiv_: the Vector unit's pipes).
  std::string s = "Op Name,OP Type,Task Type,Block Dim,Task Duration(us),aicore_model,aic_total_cycles";
  for (const auto& column : aicore::op_summary_ratios()) s += std::string(",") + column.first;
  s += ",bound\n";
  for (const auto& op : p.ops) {
    s += fmt::format("{},{},AI_CORE,{},{:.3f},{},{:.0f}", op.full_name, op.type, op.blocks, op.time_ms * 1e3,
                     p.aicore_model, op.cycles);
    for (double r : op.ratios) s += fmt::format(",{:.4f}", r);
    s += "," + op.bound + "\n";
  }
  files.stage(detail, d);
  files.stage(types, t);
  files.stage(summary, s);
  files.commit();
  report::TextTable table({"op_type", "time ms/step", "count", "share"});
  for (std::size_t i = 0; i < p.types.size() && i < 10; ++i)
    table.add({p.types[i].type, fmt::format("{:.3f}", p.types[i].time_ms), std::to_string(p.types[i].count),
               fmt::format("{:.1f}%", 100 * p.types[i].share)});
  std::cout << fmt::format("AI-core time of one step: {:.3f} ms in {} ops; top op types:\n", p.step_ms, p.ops.size())
            << table.render();
  return 0;
}

}  // namespace ascendsim::sim::cli
