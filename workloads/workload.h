// A training workload: the training-step graph at a batch size plus the dataset it consumes.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "workloads/dataset.h"
#include "workloads/graph.h"
#include "workloads/training.h"

namespace ascendsim::workloads {

/// How a workload trains, as MindSpore expresses it (`Model(..., amp_level=..., keep_batchnorm_fp32=...)`,
/// `FixedLossScaleManager(loss_scale, drop_overflow_update=False)`).
struct Recipe {
  std::string amp_level = "O0";      ///< O0 fp32; O2 fp16 network, fp32 master weights; O3 all fp16
  bool keep_batchnorm_fp32 = true;   ///< O2: BatchNorm in fp32 between casts (false: in fp16)
  bool has_batchnorm = true;         ///< false: the network has none (transformers); describe() omits it
  double loss_scale = 1;             ///< fixed loss scale (1: none)
  bool graph_kernel_fusion = false;  ///< `enable_graph_kernel`: fuse element-wise chains into one kernel
  /// The Ascend backend's UB (buffer) fusion, on by default in graph mode: a kernel and the consumers
  /// of its result it computes while the result is still in the Unified Buffer, as one kernel.
  bool ub_fusion = true;
  /// "momentum", or "lars": LARS over Momentum (MindSpore's nn.LARS, the large-batch optimizer of
  /// MLPerf ResNet-50 submissions) on the weights.
  std::string optimizer = "momentum";
  /// Transformers: attention as the fused FlashAttentionScore kernel where the chip's backend has
  /// it (aicore.flash_attention: Ascend 910B), else softmax(QK^T)V op by op.
  bool flash_attention = false;
  /// Set as the run lays the network out (sim/run_build.cpp): every transformer layer recomputed in the
  /// backward pass; the optimizer state sharded over this many ranks (1: not sharded), and the
  /// gradients too (ZeRO-2).
  bool recompute = false;
  std::int64_t optimizer_shard = 1;
  bool gradients_sharded = false;
  std::string describe() const;      ///< "amp O2, BatchNorm fp16, loss scale 1024"
};

/// A recipe to apply over a workload's own defaults; unset fields keep them.
struct TransformerShape;  // workloads/transformer.h

struct RecipeOverrides {
  std::optional<std::string> amp_level;
  std::optional<bool> keep_batchnorm_fp32;
  std::optional<double> loss_scale;
  std::optional<bool> graph_kernel_fusion;
  std::optional<bool> ub_fusion;
  std::optional<bool> flash_attention;
  std::optional<std::string> optimizer;
  /// A transformer's shape over its preset's: layers, hidden width, heads, the MLP's inner width,
  /// the sequence, the vocabulary and the key/value heads (other workloads refuse them).
  std::optional<std::int64_t> layers, hidden, heads, ffn, seq_length, vocab, kv_heads;
  /// A transformer's whole shape in place of the named preset's (a Hugging Face config.json,
  /// --hf-config); the fields above override it in turn.
  std::shared_ptr<const TransformerShape> base_shape;
  bool shapes_transformer() const { return layers || hidden || heads || ffn || seq_length || vocab || kv_heads; }
};

/// Data-parallel training (MindSpore's `set_auto_parallel_context(device_num=..., parallel_mode=
/// DATA_PARALLEL, all_reduce_fusion_config=...)`): every rank holds the whole model and 1/devices
/// of the dataset; gradients are summed across ranks by AllReduce, in groups.
struct Parallel {
  std::int64_t devices = 1;
  std::int64_t devices_per_server = 8;  ///< the ranks of one server share its host
  /// The index of each group's last gradient, in gradient order (the order the backward pass
  /// produces them); empty: one group of every gradient, after the backward pass.
  std::vector<std::int64_t> all_reduce_fusion;
  /// Broadcast the initialised parameters from rank 0 before training (MindSpore's
  /// `parameter_broadcast`, on by default in DATA_PARALLEL mode).
  bool parameter_broadcast = true;
  /// Semi-automatic parallelism (workloads/parallel.h): the graph is one rank's; gradients are
  /// averaged over the group of gradient_group_size ranks gradient_group_stride apart (0: every
  /// rank; 1: none), except the weights in `unreduced` (each rank's piece is its own).
  bool semi_auto = false;
  std::int32_t gradient_group_size = 0, gradient_group_stride = 1;
  std::set<TensorId> unreduced;
  /// Weights whose gradients the graph itself reduce-scatters (a sharded optimizer): left out of
  /// the gradient AllReduce groups.
  std::set<TensorId> reduce_scattered;
  std::int64_t data_shards = 0;  ///< the ranks that divide the dataset among them (0: every rank)
  std::int64_t tensor_parallel = 1;  ///< Megatron tensor parallelism: the ranks of a group (1: none)
  /// Megatron's sequence parallelism with it: the norms, dropouts and residual adds on 1/T of the tokens
  bool sequence_parallel = false;
  /// Pipeline parallelism (workloads/pipeline.h): the stages, each of devices / pipeline_stages
  /// consecutive ranks, and the micro-batches of a step; `stage` is this graph's.
  std::int64_t pipeline_stages = 1, micro_batches = 1, stage = 0;
  /// Gradient accumulation: of the step's micro_batches, how many rounds of the pipeline's
  /// (without stages, all of them); each micro-batch's gradients added into accumulators, one
  /// optimizer step and one set of gradient collectives per step.
  std::int64_t gradient_accumulation = 1;
  std::int64_t stage_first_layer = 0, stage_layers = 0;  ///< the transformer layers of this stage
  /// The gradients' AllReduce runs within a group (gradient_group_size, gradient_group_stride),
  /// not the whole cluster: semi-auto layouts and pipeline stages.
  bool grouped() const { return semi_auto || pipeline_stages > 1; }
};

struct ShardPlan;

struct Workload {
  std::string name;
  std::string description;
  std::int64_t batch_size = 0;
  Graph graph;
  std::vector<TensorId> batch_inputs;  ///< tensors fed per step (image, label), in feed order
  TensorId loss = -1;
  DataRecipe data;        ///< the dataset (its samples fix the epoch length) and its map ops
  std::string optimizer;  ///< e.g. "Momentum(lr=0.01, momentum=0.9)"
  Recipe recipe;          ///< how it trains
  /// How its backward pass and optimizer were appended (append_backward's sensitivity, -1 for a
  /// constant 1; append_momentum's spec): semi-automatic parallelism appends them again to the
  /// sliced forward graph.
  TensorId sens = -1;
  OptimizerSpec optimizer_spec;
  /// The optimizer's hyper-parameters (functional mode's values; a per-step schedule holds the
  /// base rate at every step).
  struct Hyper {
    double learning_rate = 0.01, momentum = 0.9, weight_decay = 0;
  } hyper;
  Parallel parallel;                            ///< on how many devices
  std::shared_ptr<const ShardPlan> shard_plan;  ///< semi-automatic parallelism: what it did (parallel.h)
  std::shared_ptr<const Workload> whole;        ///< semi-automatic parallelism: the network as written
  /// false: an inference graph (forward ops only, BatchNorm by its moving statistics); no
  /// gradients, optimizer or collectives.
  bool training = true;
  /// The evaluation dataset and its map ops (MindSpore's `create_dataset(do_train=False)`):
  /// evaluation during training reads it.
  DataRecipe eval_data;
  /// Functional mode's initial values of tensors, by name, where the workload brings its own (an
  /// imported model's initializers and constants); the others take the initialisers.
  std::shared_ptr<const std::map<std::string, std::vector<float>>> initial_values;

  /// Tokens per sample of a sequence model (transformers: the sequence); 0 for the others.
  std::int64_t tokens_per_sample = 0;

  /// Pipeline parallelism: every stage's workload, in stage order (this one is stage 0's); empty
  /// without.
  std::vector<std::shared_ptr<const Workload>> stages;

  std::int64_t batch_bytes() const;
  std::int64_t steps_per_epoch() const { return data.dataset.samples / batch_size; }  // drop_remainder
};

/// The forward-only network of a training workload, as MindSpore's eval network runs it: the
/// forward ops (the loss included), BatchNorm in inference, no backward pass or optimizer.
Workload inference_workload(const Workload& train);

/// Names accepted by make_workload.
std::vector<std::string> workload_names();
/// Builds a workload with its default recipe (MindSpore's script for it) and any overrides;
/// throws std::invalid_argument for an unknown name, a non-positive batch or a recipe the
/// workload does not support.
Workload make_workload(const std::string& name, std::int64_t batch_size, const RecipeOverrides& recipe = {});

/// `w`'s optimizer appended again under `spec`, to the same gradients (w.optimizer_spec becomes
/// `spec`). Throws std::logic_error for a graph without one.
void replace_optimizer(Workload& w, const OptimizerSpec& spec);

}  // namespace ascendsim::workloads
