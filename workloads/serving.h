// LLM serving's device steps: one forward step of a decoder (GPT-2 or LLaMA shape) over the
// tokens a serving engine batches — fresh prompts (prefill) or one new token per sequence
// (decode) — with the keys and values of every token kept in a paged KV cache, as vLLM runs it
// on Ascend: the cache in blocks of `block_size` tokens, each layer's new keys and values written
// at their slots (ReshapeAndCache), attention reading each sequence's blocks (PagedAttention,
// FlashAttention-style for a prefill), the logits of each sequence's last token, and greedy
// sampling on the device or the logits copied to the host. Built for one rank of Megatron's
// tensor parallelism: each rank its heads and its part of the MLP, an AllReduce after the
// attention's output projection and after the MLP (docs/serving.md).
#pragma once

#include <cstdint>

#include "workloads/transformer.h"
#include "workloads/workload.h"

namespace ascendsim::workloads {

/// How a serving engine lays a model out on its devices.
struct ServingLayout {
  std::int64_t tensor_parallel = 1;  ///< ranks of the tensor-parallel group (each holds heads / tp)
  std::int64_t block_size = 128;     ///< tokens per KV-cache block (vLLM-Ascend's default)
  std::int64_t kv_blocks = 1;        ///< blocks of the cache pool (each rank holds its heads' part of each)
  bool sample_on_device = true;      ///< greedy sampling on the device; false: the logits go to the host
};

/// One step's batch, as its cost depends on it: sequences generating a token each (decode) and
/// sequences whose prompt, or a chunk of it, the step computes (prefill).
struct StepShape {
  std::int64_t decode_seqs = 0;
  std::int64_t decode_context = 0;  ///< their mean keys (the new token's included)
  std::int64_t prefill_seqs = 0;
  std::int64_t prefill_tokens = 0;   ///< mean tokens of a prefill sequence in the step
  std::int64_t prefill_context = 0;  ///< their mean keys; equal to prefill_tokens: whole prompts (causal)
  std::int64_t seqs() const { return decode_seqs + prefill_seqs; }
  std::int64_t tokens() const { return decode_seqs + prefill_seqs * prefill_tokens; }
  bool operator<(const StepShape& o) const;
  std::string describe() const;  ///< "decode 8 x 1024 keys + prefill 2 x 512"
};

/// Bytes of one KV-cache block on one rank: keys and values of block_size tokens, every layer,
/// heads / tp heads, fp16.
std::int64_t kv_block_bytes(const TransformerShape& s, const ServingLayout& l);
/// Bytes of one rank's fp16 weights.
std::int64_t serving_weight_bytes(const TransformerShape& s, const ServingLayout& l);
/// What the host copies back per step: the sampled token ids (int32), or the fp16 logits of each
/// sequence's last token when the host samples.
std::int64_t step_result_bytes(const TransformerShape& s, const ServingLayout& l, std::int64_t seqs);

/// The forward step of one rank: an inference workload (no loss; `batch_size` the step's
/// sequences) whose batch inputs are what the host prepares per step — token ids, positions,
/// slots, the block table, context lengths and, in a prefill, each sequence's last token's row.
/// Throws std::invalid_argument naming the field for a shape it cannot take (BERT, heads or MLP
/// width not divisible by tensor_parallel, a context the blocks cannot hold).
Workload serving_step(const TransformerShape& s, const StepShape& step, const ServingLayout& l);

}  // namespace ascendsim::workloads
