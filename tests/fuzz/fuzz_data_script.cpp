// Data scripts (sim/data_script.h): the input is a data script's YAML. An accepted script is built
// into a pipeline's execution tree on the default host and its first batches are costed: every
// stage's time is finite and not negative, whatever the ops, sizes and workers.
#include <cmath>
#include <cstdlib>

#include <yaml-cpp/yaml.h>

#include "runtime/data_pipeline.h"
#include "sim/data_script.h"
#include "tests/fuzz/fuzz_common.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string body = ascendsim::fuzz::as_string(data, size);
  ascendsim::fuzz::expect_accept_or_reject([&] {
    YAML::Node root;
    try {
      root = YAML::Load(body);
    } catch (const YAML::Exception&) {
      return;  // yaml-cpp's own refusal: load_data_script turns it into a message naming the file
    }
    const ascendsim::sim::DataScript d = ascendsim::sim::parse_data_script(root, "fuzz.yaml:1");
    ascendsim::workloads::DataRecipe recipe = d.recipe;
    if (recipe.dataset.rows_per_yield < 0) recipe.dataset.rows_per_yield = 4;
    if (recipe.dataset.samples < 4) return;
    const ascendsim::runtime::HostConfig host;
    const ascendsim::runtime::PipelineConfig pipe;
    const ascendsim::runtime::PipelineCosts costs(host, pipe, recipe, 4, 2);
    for (std::size_t s = 0; s < costs.stages().size(); ++s) {
      const double t = s == 0 ? costs.read_s(0) : costs.stage_s(s, 0, 0, 4);
      if (!std::isfinite(t) || t < 0) std::abort();
    }
  });
  return 0;
}
