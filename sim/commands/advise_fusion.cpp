// `advise-fusion`: AllReduce fusion splits (all_reduce_fusion) searched for the shortest step.

#include <cstddef>
#include <cstdint>
#include <iostream>
#include <string>

#include <fmt/format.h>

#include "sim/api.h"
#include "sim/commands/commands.h"
#include "sim/commands/options.h"
#include "sim/report/studies_report.h"

namespace ascendsim::sim::cli {

int cmd_advise_fusion(int argc, char* argv[]) {
  Options o;
  std::int64_t stride = 10;
  std::size_t top = 10;
  po::options_description desc = common_options(o);
  desc.add(run_options(o));
  desc.add(parallel_options(o));
  desc.add_options()("stride", po::value(&stride)->default_value(stride),
                     "one split at every STRIDE-th gradient, two at every 4*STRIDE-th")(
      "top", po::value(&top)->default_value(top), "splits to print");
  if (!parse(argc, argv, desc, "advise-fusion")) return 0;
  RunRequest req = make_request(o, {runtime::Strategy::LoopSink});
  req.progress = nullptr;
  const FusionAdvice advice = advise_fusion(req, stride);
  std::cout << fmt::format(
      "{} on {} devices, batch {} per device: {} gradients, {} splits simulated (loop sink, {} "
      "steps per rank); shortest mean step first\n\n",
      req.workload, req.devices, req.batch_size, advice.gradients, advice.candidates.size(),
      req.steps_per_epoch ? std::to_string(*req.steps_per_epoch) : std::string("an epoch of"));
  std::cout << report::fusion_table(advice, top);
  return 0;
}

}  // namespace ascendsim::sim::cli
