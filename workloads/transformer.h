// Transformer training workloads: BERT pretraining (the model zoo's masked-LM and next-sentence
// heads, LAMB) and GPT-style decoders (GPT-2's LayerNorm, GeLU and learned positions; a
// LLaMA-shaped decoder's RMSNorm, SwiGLU and rotary embeddings; AdamW), built as the executed
// graph MindSpore's Ascend backend runs: dense layers as MatMul on [tokens, hidden], attention as
// Reshape, Transpose and BatchMatMul around a Softmax, the norms and activations on the Vector
// unit, the embeddings as lookups with a scatter-add gradient.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "workloads/workload.h"

namespace ascendsim::workloads {

struct TransformerShape {
  std::string name;  ///< the workload name, e.g. "gpt2-small"
  enum class Kind { Bert, Gpt2, Llama } kind = Kind::Gpt2;
  std::int64_t layers = 0, hidden = 0, heads = 0;
  std::int64_t ffn = 0;  ///< the MLP's inner width
  std::int64_t seq = 0;  ///< tokens per sequence
  std::int64_t vocab = 0;
  std::int64_t max_positions = 0;   ///< learned position table rows (BERT, GPT-2); 0: rotary (LLaMA)
  std::int64_t masked_per_seq = 0;  ///< BERT: masked-LM predictions per sequence
  std::string description;
};

/// The built-in shapes: bert-base, bert-large (sequence 128, 20 predictions), gpt2-small,
/// gpt2-medium (sequence 1024), llama-7b (sequence 2048).
const std::vector<TransformerShape>& transformer_shapes();
std::optional<TransformerShape> transformer_shape(const std::string& name);

/// The training workload of `shape` at `batch_size` sequences per step under `recipe` (amp O2 by
/// default, as the model zoo's BERT and MindFormers' GPT scripts).
Workload make_transformer(const TransformerShape& shape, std::int64_t batch_size, const Recipe& recipe);

}  // namespace ascendsim::workloads
