// Shard strategies in MindSpore's notation: the input is the text of one strategy.
#include "tests/fuzz/fuzz_common.h"
#include "workloads/parallel.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text = ascendsim::fuzz::as_string(data, size);
  ascendsim::fuzz::expect_accept_or_reject([&] {
    const auto s = ascendsim::workloads::parse_shard_strategy(text);
    // An accepted strategy has tuples of cuts of at least 1, and reads back as it printed.
    if (s.empty()) __builtin_trap();
    for (const auto& t : s) {
      if (t.empty()) __builtin_trap();
      for (auto c : t)
        if (c < 1) __builtin_trap();
    }
    if (ascendsim::workloads::parse_shard_strategy(ascendsim::workloads::shard_strategy_string(s)) != s)
      __builtin_trap();
  });
  return 0;
}
