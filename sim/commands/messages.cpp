// Errors in the words of the command line: what the user typed for each request key and parameter
// override, and the flag of each request key.

#include <cctype>
#include <map>
#include <string>

#include "sim/commands/messages.h"
#include "sim/config.h"
#include "sim/core/error.h"

namespace ascendsim::sim::cli {

/// What the user typed for each request key and parameter override, so that an error about one
/// names the flag (`--num-parallel-workers 0`) rather than the library's key. Filled while the
/// command line is parsed; one invocation per process.
std::map<std::string, std::string>& typed() {
  static std::map<std::string, std::string> m;
  return m;
}

/// The flag of each request key.
const std::map<std::string, std::string>& request_flags() {
  static const std::map<std::string, std::string> m = {{"workload", "--workload"},
                                                       {"model", "--model"},
                                                       {"hf_config", "--hf-config"},
                                                       {"mode", "--mode"},
                                                       {"loss", "--loss"},
                                                       {"frozen", "--frozen"},
                                                       {"batch_size", "--batch-size"},
                                                       {"epochs", "--epochs"},
                                                       {"sink_size", "--sink-size"},
                                                       {"steps_per_epoch", "--steps-per-epoch"},
                                                       {"dataset", "--dataset"},
                                                       {"eval_every", "--eval-every"},
                                                       {"checkpoint_every", "--checkpoint-every"},
                                                       {"checkpoint_async", "--checkpoint-async"},
                                                       {"device_mtbf_hours", "--device-mtbf-hours"},
                                                       {"fault_seeds", "--fault-seeds"},
                                                       {"eval_dataset", "--eval-dataset"},
                                                       {"target_accuracy", "--target-accuracy"},
                                                       {"accuracy_curve", "--accuracy-curve"},
                                                       {"dataset_index", "--dataset-index"},
                                                       {"parallel_mode", "--parallel-mode"},
                                                       {"dataset_strategy", "--dataset-strategy"},
                                                       {"shard_strategy", "--shard-strategy"},
                                                       {"tensor_parallel", "--tensor-parallel"},
                                                       {"sequence_parallel", "--sequence-parallel"},
                                                       {"optimizer_shard", "--optimizer-shard"},
                                                       {"optimizer_shard_level", "--optimizer-shard-level"},
                                                       {"recompute", "--recompute"},
                                                       {"pipeline_stages", "--pipeline-stages"},
                                                       {"micro_batches", "--micro-batches"},
                                                       {"gradient_accumulation", "--gradient-accumulation"},
                                                       {"framework", "--framework"},
                                                       {"devices", "--devices"},
                                                       {"all_reduce_fusion", "--all-reduce-fusion"},
                                                       {"parameter_broadcast", "--parameter-broadcast"},
                                                       {"strategy", "--strategy"},
                                                       {"param", "--param"},
                                                       {"values", "--values"},
                                                       {"trace", "--trace"},
                                                       {"trace_steps", "--trace-steps"},
                                                       {"gpt_size", "--gpt-size"},
                                                       {"launch", "--launch"},
                                                       {"rate", "--rate"},
                                                       {"rates", "--rates"},
                                                       {"requests", "--requests"},
                                                       {"arrivals", "--arrivals"},
                                                       {"prompt_tokens", "--prompt-tokens"},
                                                       {"output_tokens", "--output-tokens"},
                                                       {"length_spread", "--length-spread"},
                                                       {"max_seqs", "--max-seqs"},
                                                       {"max_batched_tokens", "--max-batched-tokens"},
                                                       {"chunked_prefill", "--chunked-prefill"},
                                                       {"block_size", "--block-size"},
                                                       {"kv_blocks", "--kv-blocks"},
                                                       {"memory_utilization", "--memory-utilization"},
                                                       {"multi_step", "--multi-step"},
                                                       {"sampling", "--sampling"},
                                                       {"capture", "--capture"},
                                                       {"graph_buckets", "--graph-buckets"},
                                                       {"decode_batches", "--decode-batches"},
                                                       {"slo_ttft_ms", "--slo-ttft-ms"},
                                                       {"slo_tpot_ms", "--slo-tpot-ms"},
                                                       {"layers", "--layers"},
                                                       {"hidden", "--hidden"},
                                                       {"heads", "--heads"},
                                                       {"kv_heads", "--kv-heads"},
                                                       {"ffn", "--ffn"},
                                                       {"vocab", "--vocab"}};
  return m;
}

/// The message of `e` in the words of the command line.
std::string cli_message(const InputError& e) {
  std::string origin = e.origin(), detail = e.detail();
  if (origin.empty()) return e.what();
  if (auto it = typed().find(origin); it != typed().end()) {
    origin = it->second;  // an override: what the user typed
  } else if (auto f = request_flags().find(origin); f != request_flags().end()) {
    origin = f->second;            // a request field: its flag
  } else if (origin == e.key()) {  // a parameter, named by its key: the override that set it, if any
    const std::string prefix = override_origin(e.key() + "=");
    for (const auto& [o, words] : typed())
      if (o.rfind(prefix, 0) == 0) origin = words;
    // The queue's preset depth, not set: its buffers are batches, the size is the one typed.
    if (origin == "queue.capacity") origin = "--batch-size";
  }
  // Request keys named in the advice ("reduce batch_size") become their flags; not the keys that
  // are also plain words in prose ("the dataset").
  for (const auto& [key, flag] : request_flags()) {
    if (key == "dataset" || key == "workload" || key == "devices" || key == "strategy" || key == "values" ||
        key == "param" || key == "model" || key == "mode" || key == "loss" || key == "trace" || key == "launch" ||
        key == "rate" || key == "rates" || key == "requests" || key == "arrivals" || key == "sampling" ||
        key == "capture" || key == "layers" || key == "hidden" || key == "heads" || key == "kv_heads" || key == "vocab" ||
        key == "prompt_tokens" || key == "output_tokens")
      continue;
    for (std::size_t at = detail.find(key); at != std::string::npos; at = detail.find(key, at + flag.size())) {
      const bool word_start = at == 0 || !(std::isalnum(static_cast<unsigned char>(detail[at - 1])) ||
                                           detail[at - 1] == '_' || detail[at - 1] == '.');
      const std::size_t end = at + key.size();
      const bool word_end =
          end == detail.size() || !(std::isalnum(static_cast<unsigned char>(detail[end])) || detail[end] == '_');
      if (word_start && word_end) detail.replace(at, key.size(), flag);
    }
  }
  return origin + ": " + detail;
}

}  // namespace ascendsim::sim::cli
