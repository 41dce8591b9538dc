// `aicore-check`: every op of a step timed by the analytic and the event AI-core model, side by side.

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <iostream>
#include <map>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "sim/api.h"
#include "sim/commands/commands.h"
#include "sim/commands/options.h"
#include "sim/core/error.h"
#include "sim/report/report.h"

namespace ascendsim::sim::cli {

int cmd_aicore_check(int argc, char* argv[]) {
  Options o;
  std::string tolerance = "10%";
  std::int64_t top = 10;
  po::options_description desc = common_options(o);
  desc.add_options()("tolerance", po::value(&tolerance)->default_value(tolerance),
                     "difference between the models that counts as agreement (a percentage)")(
      "top", po::value(&top)->default_value(top), "ops beyond the tolerance to list (largest first)");
  if (!parse(argc, argv, desc, "aicore-check")) return 0;
  const double tol = parse_share(tolerance, "--tolerance", true);
  if (top < 0) throw InputError("--top " + std::to_string(top) + ": give 0 or more ops to list");
  const RunRequest req = make_request(o, runtime::all_strategies());
  const AicoreModelCheck check = check_aicore_models(req);
  struct Type {
    std::string type;
    std::int64_t distinct = 0, count = 0;
    double analytic = 0, event = 0, worst = 0;
  };
  std::vector<Type> types;
  std::map<std::string, std::size_t> at;
  std::int64_t within = 0;
  for (const auto& op : check.ops) {
    auto it = at.try_emplace(op.type, types.size()).first;
    if (it->second == types.size()) types.push_back({op.type});
    Type& t = types[it->second];
    ++t.distinct;
    t.count += op.count;
    t.analytic += op.analytic_us * static_cast<double>(op.count);
    t.event += op.event_us * static_cast<double>(op.count);
    if (std::fabs(op.difference()) > std::fabs(t.worst)) t.worst = op.difference();
    if (std::fabs(op.difference()) <= tol) ++within;
  }
  double analytic = 0, event = 0;
  for (const auto& t : types) {
    analytic += t.analytic;
    event += t.event;
  }
  ordered_json j;
  j["workload"] = req.workload;  // a Hugging Face config's name (--hf-config)
  j["tolerance"] = tol;
  j["ops"] = ordered_json::array();
  for (const auto& op : check.ops)
    j["ops"].push_back({{"type", op.type},
                        {"op", op.desc},
                        {"count", op.count},
                        {"analytic_us", op.analytic_us},
                        {"event_us", op.event_us},
                        {"difference", op.difference()},
                        {"analytic_bound", op.analytic_bound},
                        {"event_bound", op.event_bound}});
  j["step_analytic_ms"] = analytic / 1e3;
  j["step_event_ms"] = event / 1e3;
  j["not_compared"] = check.skipped;
  if (!o.json.empty()) {
    write_output(o.json, j.dump(2) + "\n");
    if (o.json == "-") return 0;
  }
  report::TextTable table({"op type", "distinct", "per step", "analytic ms", "event ms", "worst op"});
  for (const auto& t : types)
    table.add({t.type, std::to_string(t.distinct), std::to_string(t.count), fmt::format("{:.3f}", t.analytic / 1e3),
               fmt::format("{:.3f}", t.event / 1e3), fmt::format("{:+.1f}%", 100 * t.worst)});
  std::cout << fmt::format(
                   "{}: {} distinct AI-core ops of one step timed by both models ({:.1f} s of event simulation)\n",
                   req.workload, check.ops.size(), check.wall_s)
            << table.render()
            << fmt::format("step: analytic {:.3f} ms, event {:.3f} ms ({:+.1f}%); {} of {} ops agree within {:.3g}%\n",
                           analytic / 1e3, event / 1e3, analytic > 0 ? 100 * (event / analytic - 1) : 0.0, within,
                           check.ops.size(), 100 * tol);
  std::vector<const AicoreModelCheck::Op*> beyond;
  for (const auto& op : check.ops)
    if (std::fabs(op.difference()) > tol) beyond.push_back(&op);
  std::stable_sort(beyond.begin(), beyond.end(), [](const auto* a, const auto* b) {
    return std::fabs(a->difference()) > std::fabs(b->difference());
  });
  for (const auto& s : check.skipped) std::cout << "not compared: " << s << "\n";
  if (!beyond.empty() && top > 0) {
    std::cout << "beyond the tolerance (docs/aicore.md says why):\n";
    for (std::size_t i = 0; i < beyond.size() && static_cast<std::int64_t>(i) < top; ++i)
      std::cout << fmt::format("  {:+7.1f}%  {:.2f} -> {:.2f} us  {} -> {}  {}\n", 100 * beyond[i]->difference(),
                               beyond[i]->analytic_us, beyond[i]->event_us, beyond[i]->analytic_bound,
                               beyond[i]->event_bound, beyond[i]->desc);
  }
  return 0;
}

}  // namespace ascendsim::sim::cli
