// CIFAR-10 binary batches as parsed from memory: the input is one or two batch files.
#include "tests/fuzz/fuzz_common.h"
#include "workloads/dataset.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 1) return 0;
  const std::string in = ascendsim::fuzz::as_string(data + 1, size - 1);
  std::vector<std::pair<std::string, std::string>> batches;
  if (data[0] & 1) {
    const std::size_t cut = in.size() / 2;
    batches = {{"data_batch_1.bin", in.substr(0, cut)}, {"data_batch_2.bin", in.substr(cut)}};
  } else {
    batches = {{"data_batch_1.bin", in}};
  }
  ascendsim::fuzz::expect_accept_or_reject([&] { ascendsim::workloads::parse_cifar10(batches); });
  return 0;
}
