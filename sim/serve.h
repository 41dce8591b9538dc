// LLM serving (docs/serving.md): `ascendsim serve` and ascendsim.serve(). Requests of a decoder
// (GPT-2 or LLaMA shape) arrive at a rate or from a trace; the serving loop (runtime/serving.h)
// batches them continuously over a paged KV cache; every step it runs is timed by simulating a
// step of that shape — its graph built by workloads::serving_step, run under the strategy its
// launch mode is (eager: non-sink, graph: graph sink, multi-step: loop sink) on the tensor-
// parallel group's devices — on a grid of shapes, interpolated between them.
#pragma once

#include <cstdint>
#include <istream>
#include <map>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "runtime/serving.h"
#include "sim/config.h"
#include "workloads/serving.h"
#include "workloads/workload.h"

namespace ascendsim::sim {

/// What to serve. Errors about a field name it by the key in brackets.
struct ServeRequest {
  ConfigRequest config;
  std::string workload = "gpt";  ///< [workload] a decoder: gpt, gpt2-small, gpt2-medium, llama-7b
  /// [gpt_size] the built-in shape of workload gpt (gpt2-small, gpt2-medium, llama-7b)
  std::string gpt_size;
  workloads::RecipeOverrides shape;  ///< [layers, hidden, heads, ffn, vocab] over the preset
  std::int64_t devices = 1;          ///< [devices] replicas x tensor_parallel, within one server
  std::int64_t tensor_parallel = 1;  ///< [tensor_parallel] ranks of one replica
  std::vector<runtime::LaunchMode> launch = {runtime::LaunchMode::Eager};  ///< [launch] one run each
  double rate = 1;                                        ///< [rate] requests per second (Poisson arrivals)
  std::int64_t requests = 100;                            ///< [requests]
  std::int64_t prompt_tokens = 512, output_tokens = 128;  ///< [prompt_tokens, output_tokens] mean lengths
  /// [length_spread] each length uniform in mean x (1 +- spread); 0: every request alike
  double length_spread = 0;
  std::string arrivals;    ///< [arrivals] a JSONL file of arrival_s, prompt_tokens, output_tokens (instead of rate)
  std::uint64_t seed = 1;  ///< [seed] the arrivals and lengths
  std::int64_t max_seqs = 256;              ///< [max_seqs] sequences per step (vLLM's max_num_seqs)
  std::int64_t max_batched_tokens = 8192;   ///< [max_batched_tokens] tokens per step
  bool chunked_prefill = false;             ///< [chunked_prefill]
  std::int64_t block_size = 128;            ///< [block_size] tokens per KV-cache block
  std::int64_t kv_blocks = 0;               ///< [kv_blocks] the cache's blocks; 0: what memory leaves
  double memory_utilization = 0.9;          ///< [memory_utilization] of device memory the engine may use
  std::int64_t multi_step = 8;              ///< [multi_step] decode steps per launch in multi-step mode
  std::string sampling = "device";          ///< [sampling] device or host
  std::string capture = "startup";          ///< [capture] startup, or first-use
  std::vector<std::int64_t> graph_buckets;  ///< [graph_buckets] empty: 1, 2, 4, 8, 16, 24, ... max_seqs
  std::vector<double> rates;                ///< [rates] a sweep of request rates (each launch mode at each)
  /// [decode_batches] batch sizes of the launch-mode comparison of one decode step
  std::vector<std::int64_t> decode_batches = {1, 8, 32, 128};
  /// [slo_ttft_ms, slo_tpot_ms] the service levels a request must meet to count in the goodput
  double slo_ttft_ms = 2000, slo_tpot_ms = 100;
  std::ostream* progress = nullptr;
};

/// One launch mode's run.
struct ServeRun {
  runtime::LaunchMode mode = runtime::LaunchMode::Eager;
  double rate = 0;  ///< the request rate (0: a trace)
  double slo_ttft_s = 0, slo_tpot_s = 0;  ///< the service levels of the goodput
  runtime::ServeLog log;
};

/// A decode step of `batch` sequences at the mean context, per launch mode.
struct DecodeStepPoint {
  std::int64_t batch = 1, context = 1;
  std::vector<runtime::StepCost> by_mode;  ///< in the request's launch order
};

struct ServeOutcome {
  nlohmann::ordered_json header;  ///< the model, the layout, the cache, the requests and the scheduler
  std::vector<runtime::LaunchMode> modes;
  std::vector<ServeRun> runs;   ///< per launch mode (at the request's rate)
  std::vector<ServeRun> sweep;  ///< per rate, then launch mode
  std::vector<DecodeStepPoint> decode_steps;
  std::int64_t simulations = 0;   ///< step shapes simulated
  nlohmann::ordered_json config;  ///< every parameter as resolved
  // Its report: sim/report/serve_report.h.
};

ServeOutcome serve(const ServeRequest& req);

/// One step's cost as serve() times it: interpolated between the simulated shapes around it, or
/// (interpolated false) that shape itself simulated. The request gives the model, layout and
/// configuration; q.steps the decode steps of a multi-step launch.
runtime::StepCost serving_step_cost(const ServeRequest& req, const runtime::StepQuery& q, bool interpolated);

/// The arrivals of a request: Poisson at its rate or read from its arrivals file.
std::vector<runtime::ServeArrival> serve_arrivals(const ServeRequest& req, double rate);
/// An arrivals file's requests (JSONL: arrival_s, prompt_tokens, output_tokens per line, in time
/// order); `path` names it in errors. Throws InputError naming the line and the field; what it
/// returns is non-empty, in time order, every length within 1 to 2^31 - 1 tokens and every
/// arrival within 0 to 10^7 s.
std::vector<runtime::ServeArrival> parse_arrivals(std::istream& in, const std::string& path);

}  // namespace ascendsim::sim
