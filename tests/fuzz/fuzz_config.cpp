// Configuration input: the input is a YAML file given as --config (first byte even) or a list of
// --set overrides, one per line (first byte odd), loaded onto the presets of the source tree.
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "sim/config.h"
#include "tests/fuzz/fuzz_common.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 1) return 0;
  const std::string body = ascendsim::fuzz::as_string(data + 1, size - 1);
  ascendsim::sim::ConfigRequest req;
  req.dir = ASCENDSIM_SOURCE_DIR "/configs";
  static const std::string file =
      (std::filesystem::temp_directory_path() / ("ascendsim_fuzz_" + std::to_string(::getpid()) + ".yaml")).string();
  if (data[0] % 2 == 0) {
    std::ofstream(file, std::ios::binary) << body;
    req.config_file = file;
  } else {
    std::istringstream lines(body);
    for (std::string line; std::getline(lines, line);) req.sets.push_back(line);
  }
  ascendsim::fuzz::expect_accept_or_reject([&] { ascendsim::sim::load_config(req); });
  return 0;
}
