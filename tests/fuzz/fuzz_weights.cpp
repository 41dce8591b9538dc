// Weights files (--init-from): the input is the JSON index, then a NUL byte, then the raw data
// (no NUL: the index alone, with no data), read into LeNet-5's parameters.
#include "runtime/functional.h"
#include "tests/fuzz/fuzz_common.h"
#include "workloads/workload.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace ascendsim;
  static const workloads::Workload lenet = workloads::make_workload("lenet5", 32);
  const std::string input = fuzz::as_string(data, size);
  const auto nul = input.find('\0');
  const std::string text = input.substr(0, nul), bytes = nul == std::string::npos ? "" : input.substr(nul + 1);
  std::vector<std::vector<float>> values(lenet.graph.tensors().size());
  fuzz::expect_accept_or_reject([&] {
    const auto index = runtime::parse_weights_index(text, "w.json");
    runtime::read_weights(index, bytes, lenet.graph, lenet.name, "w.json", values);
    // Accepted: every parameter has all its values, taken from inside the data.
    for (std::size_t i = 0; i < values.size(); ++i) {
      const auto& t = lenet.graph.tensors()[i];
      if (t.role == workloads::TensorRole::Parameter && static_cast<std::int64_t>(values[i].size()) != t.elements())
        __builtin_trap();
    }
  });
  return 0;
}
