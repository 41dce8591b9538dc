// Serving arrivals files (`serve --arrivals`): the input is the file's text. An accepted file is
// requests the scheduler can serve: then they are served with a cost per token, a cache that fits
// the longest, and every request must finish after it arrived.
#include <sstream>

#include "runtime/serving.h"
#include "sim/serve.h"
#include "tests/fuzz/fuzz_common.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace ascendsim;
  std::istringstream in(fuzz::as_string(data, size));
  fuzz::expect_accept_or_reject([&] {
    const auto arrivals = sim::parse_arrivals(in, "arrivals.jsonl");
    if (arrivals.empty()) __builtin_trap();
    std::int64_t tokens = 0, longest = 0;
    for (std::size_t i = 0; i < arrivals.size(); ++i) {
      const auto& a = arrivals[i];
      if (!(a.arrival_s >= 0 && a.arrival_s <= 1e7) || (i > 0 && a.arrival_s < arrivals[i - 1].arrival_s))
        __builtin_trap();
      for (std::int64_t n : {a.prompt_tokens, a.output_tokens})
        if (n < 1 || n > 2147483647) __builtin_trap();
      tokens += a.prompt_tokens + a.output_tokens;
      longest = std::max(longest, a.prompt_tokens + a.output_tokens);
    }
    if (tokens > 20000) return;  // served only while a run stays short
    runtime::SchedulerConfig c;
    c.max_seqs = 8;
    c.max_batched_tokens = 512;
    c.block_size = 16;
    c.chunked_prefill = longest > c.max_batched_tokens || (size % 2 == 1);
    c.kv_blocks = 2 * ((longest + c.block_size - 1) / c.block_size) + 4;
    const runtime::StepCostFn cost = [](const runtime::StepQuery& q) {
      runtime::StepCost s;
      s.time_s = 1e-3 + 1e-6 * static_cast<double>(q.shape.decode_seqs + q.shape.prefill_seqs * q.shape.prefill_tokens);
      s.phase_s[static_cast<std::size_t>(runtime::ServePhase::DeviceCompute)] = s.time_s;
      return s;
    };
    const runtime::ServeLog log = runtime::serve(arrivals, c, cost);
    if (log.requests.size() != arrivals.size()) __builtin_trap();
    for (const auto& r : log.requests)
      if (!(r.first_token_s >= r.arrival_s && r.finish_s >= r.first_token_s)) __builtin_trap();
  });
  return 0;
}
