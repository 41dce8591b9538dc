// ONNX models: the input is the bytes of a model file, imported for training and for inference.
#include "tests/fuzz/fuzz_common.h"
#include "workloads/onnx_import.h"

namespace {

void check(const ascendsim::workloads::Workload& w, bool inference) {
  using namespace ascendsim::workloads;
  // An accepted model is a consistent graph: a positive batch, operands that exist, a loss to
  // train on, and nothing but forward ops in inference.
  if (w.batch_size < 1 || w.batch_inputs.empty()) __builtin_trap();
  const auto n = static_cast<TensorId>(w.graph.tensors().size());
  for (const auto& op : w.graph.ops()) {
    for (auto t : op.inputs)
      if (t < 0 || t >= n) __builtin_trap();
    for (auto t : op.outputs)
      if (t < 0 || t >= n) __builtin_trap();
    if (inference && op.pass != Pass::Forward) __builtin_trap();
  }
  if (!inference && (w.loss < 0 || w.loss >= n)) __builtin_trap();
  if (parameter_count(w.graph) < 0 || forward_macs(w.graph) < 0) __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string bytes = ascendsim::fuzz::as_string(data, size);
  for (bool inference : {false, true}) {
    ascendsim::workloads::OnnxOptions o;
    o.inference = inference;
    o.batch_size = inference ? 3 : 0;
    ascendsim::fuzz::expect_accept_or_reject(
        [&] { check(ascendsim::workloads::import_onnx_bytes("fuzz.onnx", bytes, o), inference); });
  }
  return 0;
}
