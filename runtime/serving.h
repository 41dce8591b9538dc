// The serving engine's host loop (docs/serving.md): requests arrive, a scheduler with continuous
// batching (vLLM's policy) forms each step's batch from them as the paged KV cache allows, and
// each step runs under a launch mode — eager (every op launched by the host, as non-sink), graph
// (one captured graph per batch-size bucket, as graph sink) or multi-step (k decode steps per
// host round trip, as loop sink). A step's device and launch time comes from a cost function the
// caller gives (sim/serve.h simulates each step shape); the loop adds the host's own work (the
// scheduler, host sampling), keeps the clock and the KV blocks, and measures requests.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "workloads/serving.h"

namespace ascendsim::runtime {

/// One request: when it arrives and its prompt and output lengths in tokens.
struct ServeArrival {
  double arrival_s = 0;
  std::int64_t prompt_tokens = 1, output_tokens = 1;
};

enum class LaunchMode { Eager, Graph, MultiStep };
const char* launch_mode_name(LaunchMode m);
/// Throws sim::InputError (key "launch") for an unknown name.
LaunchMode parse_launch_mode(const std::string& name);

/// Where a serving step's time goes, the training breakdown's phases with the host's serving work.
enum class ServePhase : std::size_t {
  Scheduler,      ///< the scheduler forms the batch and prepares its inputs (host)
  Launch,         ///< op or graph launches (host)
  H2D,            ///< the step's inputs copied to the device
  DeviceCompute,  ///< the host waits while the device computes
  Comm,           ///< communication no computation hides
  Sync,           ///< completion notice and wake-up
  D2H,            ///< sampled tokens or logits copied back
  Sampling,       ///< host sampling over the logits
  HostLoop,       ///< the engine's per-step framework work (outputs, bookkeeping)
  Count
};
inline constexpr std::size_t kServePhases = static_cast<std::size_t>(ServePhase::Count);
const char* serve_phase_name(ServePhase p);

/// What a step of the device costs, as the cost function returns it: its time from the launch
/// to the results on the host, by phase (the scheduler's and sampling's excluded), and the graph
/// capture of its bucket (graph mode).
struct StepCost {
  double time_s = 0;
  std::array<double, kServePhases> phase_s{};
  double capture_s = 0;
};

/// A step as the cost function is asked for it.
struct StepQuery {
  workloads::StepShape shape;           ///< decode part, prefill part
  LaunchMode mode = LaunchMode::Eager;  ///< how this step runs (prefill steps run eager in graph modes)
  std::int64_t steps = 1;               ///< decode steps per launch (multi-step)
};
using StepCostFn = std::function<StepCost(const StepQuery&)>;

struct SchedulerConfig {
  LaunchMode mode = LaunchMode::Eager;
  std::int64_t max_seqs = 256;             ///< sequences in a step (vLLM's max_num_seqs)
  std::int64_t max_batched_tokens = 8192;  ///< tokens in a step (max_num_batched_tokens)
  std::int64_t block_size = 128;
  std::int64_t kv_blocks = 0;  ///< the cache pool
  /// Blocks kept free when admitting a prompt (vLLM's watermark, 1% of the pool).
  double watermark = 0.01;
  bool chunked_prefill = false;  ///< decode tokens first, prompts in chunks filling the token budget
  std::int64_t multi_step = 8;   ///< decode steps per launch in multi-step mode
  /// Graph mode: the batch sizes captured, ascending (a decode batch runs padded to the next);
  /// larger batches, and steps with prompt tokens, run eager.
  std::vector<std::int64_t> graph_buckets;
  bool capture_at_startup = true;                  ///< every bucket before serving (vLLM); false: each at its first use
  double schedule_step_s = 0, schedule_seq_s = 0;  ///< the scheduler's host work per step and per sequence
  double sample_s_per_logit = 0;                   ///< host sampling (0: sampling on the device)
  std::int64_t vocab = 0;
};

struct ServedRequest {
  double arrival_s = 0, first_token_s = 0, finish_s = 0;
  std::int64_t prompt_tokens = 0, output_tokens = 0, preemptions = 0;
  double ttft_s() const { return first_token_s - arrival_s; }
  double e2e_s() const { return finish_s - arrival_s; }
  /// Time per output token after the first (0 for a one-token output).
  double tpot_s() const {
    return output_tokens > 1 ? (finish_s - first_token_s) / static_cast<double>(output_tokens - 1) : 0;
  }
};

/// One step as it ran.
struct ServedStep {
  double start_s = 0, end_s = 0;
  std::int64_t decode_seqs = 0, prefill_seqs = 0, tokens = 0;
  std::int64_t padded_seqs = 0;     ///< graph mode: the bucket the decode batch ran at (0: eager)
  std::int64_t steps = 1;           ///< decode steps in the launch (multi-step)
  std::int64_t kv_blocks_used = 0;  ///< after the step's allocations
  /// The blocks the step's sequences need for what the step writes, by their lengths (at most
  /// kv_blocks_used: other running sequences hold blocks too).
  std::int64_t kv_blocks_needed = 0;
  std::int64_t waiting = 0;         ///< requests arrived and not admitted, at the step's start
  double capture_s = 0;             ///< graph mode: its bucket's capture, at its first use
  std::int64_t replica = 0;         ///< the replica that ran it (devices / tensor_parallel of them)
  std::array<double, kServePhases> phase_s{};
};

struct ServeLog {
  std::vector<ServedRequest> requests;  ///< in arrival order
  std::vector<ServedStep> steps;
  double startup_s = 0;  ///< graph captures before serving
  /// Per bucket (graph_buckets' order): the captures paid.
  std::vector<std::int64_t> captures;
  double capture_s = 0;  ///< all captures' time (startup's and first uses')
  std::int64_t preemptions = 0;
  std::int64_t kv_blocks = 0, peak_kv_blocks = 0;
  std::int64_t kv_blocks_left = 0;  ///< allocated at the end (0 when every request finished)
  /// The time-average of requests in the system (arrived, not finished) from the first arrival to
  /// the last departure, from the queues' lengths.
  double mean_in_system = 0;
  double end_s = 0;
};

/// Serves `arrivals` (sorted by arrival) to completion. Throws sim::InputError naming kv_blocks
/// when a request can never fit the cache, or max_batched_tokens when a prompt exceeds it without
/// chunked prefill.
ServeLog serve(const std::vector<ServeArrival>& arrivals, const SchedulerConfig& cfg, const StepCostFn& cost);

/// vLLM's default capture sizes up to `max_seqs`: 1, 2, 4, then multiples of 8.
std::vector<std::int64_t> default_graph_buckets(std::int64_t max_seqs);

}  // namespace ascendsim::runtime
