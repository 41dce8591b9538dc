// Transformer training workloads: BERT pretraining (the model zoo's masked-LM and next-sentence
// heads, LAMB) and GPT-style decoders (GPT-2's LayerNorm, GeLU and learned positions; a
// LLaMA-shaped decoder's RMSNorm, SwiGLU and rotary embeddings; AdamW), built as the executed
// graph MindSpore's Ascend backend runs: dense layers as MatMul on [tokens, hidden], attention as
// Reshape, Transpose and BatchMatMul around a Softmax, the norms and activations on the Vector
// unit, the embeddings as lookups with a scatter-add gradient.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "workloads/parallel.h"
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
  /// Key and value heads (grouped-query attention: Ainslie et al. 2023; each serves heads /
  /// kv_heads query heads); 0: one per query head.
  std::int64_t kv_heads = 0;
  /// The output head is the token table (GPT-2, BERT's decoder); false: a weight of its own (LLaMA).
  bool tied_embeddings = false;
  /// Biases on the query, key and value projections of a LLaMA-shaped decoder (Qwen2), none on
  /// its output projection or MLP.
  bool qkv_bias = false;
  /// Where the shape was read, e.g. "Qwen2ForCausalLM from configs/hf/qwen2.5-7b.json" (a Hugging
  /// Face config, sim/hf_config.h); "" a preset. The descriptions of its runs begin with it.
  std::string origin = {};
  /// The longest sequence a rotary decoder's configuration states (a Hugging Face config's
  /// max_position_embeddings, which vLLM takes as its max_model_len); 0: none stated.
  std::int64_t max_context = 0;
  std::int64_t kv() const { return kv_heads > 0 ? kv_heads : heads; }
  std::int64_t head_dim() const { return hidden / heads; }
};

/// The built-in shapes: bert-base, bert-large (sequence 128, 20 predictions), gpt2-small,
/// gpt2-medium (sequence 1024), llama-7b (sequence 2048).
const std::vector<TransformerShape>& transformer_shapes();
std::optional<TransformerShape> transformer_shape(const std::string& name);
/// The transformer a workload `name` is under `o`: the shape `o` carries (o.base_shape, a Hugging
/// Face config's), else the preset's; none for the other workloads.
std::optional<TransformerShape> transformer_shape(const std::string& name, const RecipeOverrides& o);

/// The training workload of `shape` at `batch_size` sequences per step under `recipe` (amp O2 by
/// default, as the model zoo's BERT and MindFormers' GPT scripts).
Workload make_transformer(const TransformerShape& shape, std::int64_t batch_size, const Recipe& recipe);

/// The layer an op of a transformer's training graph belongs to ("h.3", "bert.encoder.layer.3"),
/// its backward ops ("Gradients/h.3.attn.q/MatMul/...") the forward op's; "" for the others
/// (embeddings, the head, the loss, the optimizer).
std::string transformer_layer_of(const std::string& op_name);

/// Activation recomputation (MindSpore's Cell.recompute(), Megatron's full recomputation of each
/// layer): every layer's forward ops run again in the backward pass, just before the layer's
/// first backward op, and its backward ops read the recomputed activations, so of the forward
/// pass only each layer's input stays alive. Returns the forward ops recomputed. The graph's
/// optimizer can no longer be replaced afterwards.
std::int64_t recompute_layers(Workload& w);

/// Megatron's sequence parallelism does not keep a layer's gathered activation for the backward
/// pass: the weight gradients' first reader gathers the sequence-split input again (an AllGather in
/// the backward pass), so only the split input stays alive. Applied to a sharded training graph:
/// each forward AllGather of a transformer layer whose result the backward pass reads is issued
/// again before its first backward reader, which reads the new one. Returns the gathers added.
std::int64_t regather_in_backward(Workload& w);

/// Megatron's tensor parallelism as semi-automatic shard strategies for the training workload
/// `w` of a transformer: on a device matrix of `dp` batch pieces by `tp` adjacent ranks, the
/// attention's Q, K and V projections and the MLP's first layer(s) split by columns
/// (((dp,1),(tp,1)): each rank its heads, its part of the inner width), the attention's output
/// projection and the MLP's last layer by rows (((dp,tp),(1,tp)): partial sums, AllReduced). The
/// embeddings, norms and the output head are whole on every rank. Throws std::invalid_argument
/// naming the flag when the heads, the key/value heads or the MLP's width do not divide into `tp`.
std::map<std::string, ShardStrategy> tensor_parallel_strategies(const Workload& w, std::int64_t heads,
                                                                std::int64_t kv_heads, std::int64_t ffn, std::int64_t dp,
                                                                std::int64_t tp);

/// Megatron's sequence parallelism over tensor_parallel_strategies' layout (Korthikanti et al.,
/// "Reducing Activation Recomputation in Large Transformer Models", 2022, section 4.2.2): the
/// layers' norms, dropouts and residual adds on the [tokens, hidden] activations cut along the
/// tokens among the group, ((dp·tp,1),...) in `layers` (the final norm too); the output of the
/// attention's projection and of the MLP's last layer brought to that cut, ((dp·tp,1)) in
/// `outputs` (a ReduceScatter where tensor parallelism AllReduces), as the embeddings' output (a
/// local slice); the column-split layers' input gathered by the machinery (an AllGather where
/// tensor parallelism mirrors it), as the head's, ((dp,1),(1,1)).
struct SequenceParallelStrategies {
  std::map<std::string, ShardStrategy> layers, outputs;
};
SequenceParallelStrategies sequence_parallel_strategies(const Workload& w, std::int64_t dp, std::int64_t tp);

}  // namespace ascendsim::workloads
