// `serve`: LLM serving, requests batched continuously over a paged KV cache, per launch mode.

#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <iostream>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "sim/commands/commands.h"
#include "sim/commands/messages.h"
#include "sim/commands/options.h"
#include "sim/config.h"
#include "sim/core/error.h"
#include "sim/hf_config.h"
#include "sim/outputs.h"
#include "sim/report/serve_report.h"
#include "sim/serve.h"

namespace ascendsim::sim::cli {

int cmd_serve(int argc, char* argv[]) {
  ServeRequest req;
  std::string launch = "eager", rates, buckets, batches, json, html, chunked = "false", hf_config;
  bool quiet = false, progress = false, rate_given = false;
  auto shape_flag = [](std::optional<std::int64_t>& into) {
    return po::value<std::int64_t>()->notifier([&into](std::int64_t v) { into = v; });
  };
  po::options_description desc("options");
  desc.add_options()("help,h", "show this help")(
      "workload,w", po::value(&req.workload)->default_value(req.workload),
      "a decoder: gpt (its size by --gpt-size), gpt2-small, gpt2-medium, llama-7b")(
      "gpt-size", po::value(&req.gpt_size), "workload gpt's shape: gpt2-small (default), gpt2-medium, llama-7b")(
      "hf-config", po::value(&hf_config), kHfConfigHelp)(
      "model", po::value<std::string>()->notifier([](const std::string& m) {
        throw InputError("--model " + m +
                         ": serve runs the built-in decoders (--workload gpt with --gpt-size, reshaped with --layers, "
                         "--hidden, --heads, --ffn, --vocab); an ONNX file has no KV cache to page. Time its steps "
                         "with `ascendsim train --model " +
                         m + " --mode infer`");
      }),
      "not taken: serve runs the built-in decoders (an ONNX model's steps: `ascendsim train --model F --mode "
      "infer`)")("layers", shape_flag(req.shape.layers), "layers (overriding the preset's)")(
      "hidden", shape_flag(req.shape.hidden), "hidden width (overriding the preset's)")(
      "heads", shape_flag(req.shape.heads), "attention heads (overriding the preset's)")(
      "kv-heads", shape_flag(req.shape.kv_heads),
      "key and value heads, each serving heads / kv-heads query heads (grouped-query attention; default one per "
      "query head)")("ffn", shape_flag(req.shape.ffn), "the MLP's inner width (overriding the preset's)")(
      "vocab", shape_flag(req.shape.vocab), "vocabulary (overriding the preset's)")(
      "server", po::value(&req.config.server), "server preset (`ascendsim servers`; default generic-x86)")(
      "framework", po::value(&req.config.framework),
      "the framework launching an eager step's ops (configs/frameworks: vllm-ascend-eager, PyTorch's Python "
      "launches on the server's CPU; default none, launches at host.op_launch_us alone)")(
      "chip", po::value(&req.config.chip), "chip preset (`ascendsim chips`; default the server's)")(
      "config", po::value(&req.config.config_file), "YAML file overriding preset parameters")(
      "set", po::value(&req.config.sets)->composing(), "override one parameter, key=value (repeatable)")(
      "devices", po::value(&req.devices)->default_value(req.devices),
      "devices of one server: replicas of tensor-parallel groups, requests dealt to them in turn")(
      "tensor-parallel", po::value(&req.tensor_parallel)->default_value(req.tensor_parallel),
      "ranks of one replica (Megatron's split; an AllReduce after attention and after the MLP)")(
      "launch", po::value(&launch)->default_value(launch),
      "eager | graph | multi-step, comma-separated, or all: how a step is launched (eager: op by op, as non-sink; "
      "graph: a captured graph per batch-size bucket, as graph sink; multi-step: --multi-step decode steps per launch, "
      "as loop sink)")("rate", po::value(&req.rate)->default_value(req.rate),
                       "requests per second (Poisson arrivals; the runs' rate with --rates too)")(
      "requests", po::value(&req.requests)->default_value(req.requests), "requests to serve")(
      "prompt-tokens", po::value(&req.prompt_tokens)->default_value(req.prompt_tokens), "prompt length (mean)")(
      "output-tokens", po::value(&req.output_tokens)->default_value(req.output_tokens), "output length (mean)")(
      "length-spread", po::value(&req.length_spread)->default_value(req.length_spread),
      "each length uniform within mean x (1 +- this fraction)")(
      "arrivals", po::value(&req.arrivals),
      "a JSONL file of requests, one per line: {\"arrival_s\": 0.5, \"prompt_tokens\": 300, \"output_tokens\": 80} "
      "(instead of --rate and --requests)")("seed", seed_value(req.seed), "seed of the arrivals and lengths")(
      "max-seqs", po::value(&req.max_seqs)->default_value(req.max_seqs), "sequences per step (vLLM's max_num_seqs)")(
      "max-batched-tokens", po::value(&req.max_batched_tokens)->default_value(req.max_batched_tokens),
      "tokens per step (max_num_batched_tokens)")("chunked-prefill", po::value(&chunked)->default_value(chunked),
                                                  "true | false: prompts in chunks beside the decode tokens")(
      "block-size", po::value(&req.block_size)->default_value(req.block_size), "tokens per KV-cache block")(
      "kv-blocks", po::value(&req.kv_blocks)->default_value(req.kv_blocks),
      "KV-cache blocks (0: what device memory leaves)")(
      "memory-utilization", po::value(&req.memory_utilization)->default_value(req.memory_utilization, "0.9"),
      "the share of device memory the engine uses (vLLM's gpu_memory_utilization)")(
      "multi-step", po::value(&req.multi_step)->default_value(req.multi_step), "decode steps per launch in multi-step")(
      "sampling", po::value(&req.sampling)->default_value(req.sampling),
      "device | host: greedy sampling on the device, or the logits copied to the host")(
      "capture", po::value(&req.capture)->default_value(req.capture),
      "startup | first-use: when graph and multi-step modes capture a bucket's graph")(
      "graph-buckets", po::value(&buckets),
      "captured batch sizes, comma-separated (default 1,2,4,8,16,24,... max-seqs); graph and multi-step run a "
      "decode batch padded to the next, larger ones eager")(
      "rates", po::value(&rates),
      "a sweep: comma-separated request rates, each launch mode at each (the HTML charts "
      "latency against throughput)")("decode-batches", po::value(&batches),
                                     "batch sizes of the one-decode-step comparison (default 1,8,32,128, those up to "
                                     "--max-seqs and it), at the requests' mean prompt and half "
                                     "their mean output")(
      "slo-ttft-ms", po::value(&req.slo_ttft_ms)->default_value(req.slo_ttft_ms, "2000"),
      "the time to first token a request must meet to count in the goodput")(
      "slo-tpot-ms", po::value(&req.slo_tpot_ms)->default_value(req.slo_tpot_ms, "100"),
      "the time per output token a request must meet to count in the goodput")(
      "json", po::value(&json), "write the JSON report to FILE (- for stdout)")("html", po::value(&html),
                                                                                "write the HTML report to FILE")(
      "quiet,q", po::bool_switch(&quiet), "no progress lines")("progress", po::bool_switch(&progress),
                                                               "progress on stderr even when it is not a terminal");
  if (!parse(argc, argv, desc, "serve")) return 0;
  for (int a = 1; a < argc; ++a) {  // --rate as typed (its default does not count)
    const std::string word = argv[a];
    rate_given = rate_given || word == "--rate" || word.rfind("--rate=", 0) == 0;
  }
  if (rate_given && !req.arrivals.empty())
    throw InputError("rate", "rate", "the requests come from --arrivals with their own times; give one of the two");
  if (chunked != "true" && chunked != "false")
    throw InputError("chunked_prefill", "chunked_prefill", "'" + chunked + "': true or false");
  req.chunked_prefill = chunked == "true";
  req.launch.clear();
  for (const auto& m : split_list(launch == "all" ? "eager,graph,multi-step" : launch, "--launch"))
    req.launch.push_back(runtime::parse_launch_mode(m));
  auto numbers = [](const std::string& list, const char* flag, auto& into) {
    if (list.empty()) return;
    into.clear();
    for (const auto& v : split_list(list, flag)) {
      try {
        std::size_t used = 0;
        using T = typename std::decay_t<decltype(into)>::value_type;
        T x;
        if constexpr (std::is_integral_v<T>)
          x = std::stoll(v, &used);
        else
          x = std::stod(v, &used);
        if (used != v.size()) throw std::invalid_argument(v);
        into.push_back(x);
      } catch (const std::exception&) {
        throw InputError(std::string(flag) + " '" + v + "': not a number");
      }
    }
  };
  numbers(rates, "--rates", req.rates);
  numbers(buckets, "--graph-buckets", req.graph_buckets);
  numbers(batches, "--decode-batches", req.decode_batches);
  req.config.dir = default_config_dir();
  if (!hf_config.empty()) {
    req.shape.base_shape = std::make_shared<const workloads::TransformerShape>(
        load_hf_config(hf_config_path(hf_config, req.config.dir), "--hf-config " + hf_config));
    typed()["workload"] = "--hf-config " + hf_config;  // what the user gave for the model
  }
  for (const auto& s : req.config.sets) typed().emplace(override_origin(s), "--set " + s);
  Outputs files;
  files.add(json, "--json");
  files.add(html, "--html");
  if (!quiet && (progress || isatty(2))) req.progress = &std::cerr;  // as every run command: a terminal's
  if (batches.empty()) {  // the default comparison's batch sizes, those max_seqs allows
    auto& b = req.decode_batches;
    const auto kept = std::remove_if(b.begin(), b.end(), [&](std::int64_t x) { return x > req.max_seqs; });
    const bool dropped = kept != b.end();
    b.erase(kept, b.end());
    if (dropped && (b.empty() || b.back() < req.max_seqs))
      req.decode_batches.push_back(req.max_seqs);
  }
  const ServeOutcome out = serve(req);
  const nlohmann::ordered_json report = report::serve_json(out);
  if (!json.empty()) files.stage(json, report.dump(2) + "\n");
  if (!html.empty()) files.stage(html, report::serve_html(out, report));
  if (json != "-") files.print(report::serve_text(out, report));
  files.commit();
  return 0;
}

}  // namespace ascendsim::sim::cli
