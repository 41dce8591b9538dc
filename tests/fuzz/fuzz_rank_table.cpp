// Rank tables: the input is the file's text, in either format.
#include "sim/rank_table.h"
#include "tests/fuzz/fuzz_common.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string body = ascendsim::fuzz::as_string(data, size);
  ascendsim::fuzz::expect_accept_or_reject([&] {
    const auto t = ascendsim::sim::parse_rank_table(body, "rank_table.json");
    // An accepted table is a cluster the simulator can build: ranks 0..N-1, servers of one size.
    if (t.devices.empty() || t.servers.empty() || t.devices.size() % t.servers.size() != 0) __builtin_trap();
    for (std::size_t r = 0; r < t.devices.size(); ++r)
      if (t.devices[r].rank != static_cast<std::int64_t>(r) || t.devices[r].device_id > 7) __builtin_trap();
  });
  return 0;
}
