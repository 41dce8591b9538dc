// JPEG headers as an image folder's reader parses them: any prefix of a file, whole or not.
#include "tests/fuzz/fuzz_common.h"
#include "workloads/dataset.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 1) return 0;
  const std::string in = ascendsim::fuzz::as_string(data + 1, size - 1);
  const auto h = ascendsim::workloads::parse_jpeg_header(in, (data[0] & 1) != 0);
  using S = ascendsim::workloads::JpegHeader::Status;
  // A found frame has a size; a bad one says why; a whole file never needs more.
  if (h.status == S::Found && (h.width <= 0 || h.height <= 0 || h.channels <= 0)) __builtin_trap();
  if (h.status == S::Bad && h.problem.empty()) __builtin_trap();
  if ((data[0] & 1) && h.status == S::NeedMore) __builtin_trap();
  return 0;
}
