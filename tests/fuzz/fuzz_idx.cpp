// MNIST idx files as parsed from memory: the input is an images file and a labels file, split at
// the first byte's value (as a fraction of the input).
#include "tests/fuzz/fuzz_common.h"
#include "workloads/dataset.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 1) return 0;
  const std::string in = ascendsim::fuzz::as_string(data + 1, size - 1);
  const std::size_t cut = in.size() * data[0] / 255;
  const std::string images = in.substr(0, cut), labels = in.substr(cut);
  const std::string header = images.substr(0, 16);
  const auto tail = static_cast<std::int64_t>(images.size() > 16 ? images.size() - 16 : 0);
  ascendsim::fuzz::expect_accept_or_reject(
      [&] { ascendsim::workloads::parse_mnist("images", header, tail, "labels", labels); });
  return 0;
}
