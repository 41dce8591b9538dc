// Training-step construction: reverse-mode differentiation of a forward graph and the optimizer.
// Every op's registration carries its backward rule, emitting the ops a framework would run on
// the device; a tensor read by several ops gets its gradient contributions summed by AddN.
#pragma once

#include <map>
#include <set>
#include <string>

#include "workloads/graph.h"

namespace ascendsim::workloads {

/// Appends the backward pass for the graph's current (forward) ops, seeded at the scalar `loss`
/// with the sensitivity tensor `sens` (the loss scale; a constant 1 when `sens` is -1). Returns
/// parameter -> gradient; every parameter gets one.
std::map<TensorId, TensorId> append_backward(Graph& g, TensorId loss, TensorId sens = -1);

struct OptimizerSpec {
  double loss_scale = 1;    ///< > 1: every gradient is unscaled by Mul(1/loss_scale) first
  double weight_decay = 0;  ///< applied as grad + wd * param (Mul, Add) to the `decayed` parameters
  std::set<TensorId> decayed;
  std::int64_t lr_schedule_steps = 0;  ///< > 0: a per-step learning-rate array on the device, read
                                       ///< by Gather at the global step, which AssignAdd advances
  /// LARS over Momentum on the `decayed` parameters (the weights; not BatchNorm or biases, as the
  /// model zoo's lars_filter): SquareSumAll and LARSUpdate scale each one's gradient, weight
  /// decay included, before its ApplyMomentum.
  bool lars = false;
  /// "momentum" (append_momentum, LARS included), "adamw" (AdamWeightDecay) or "lamb".
  std::string kind = "momentum";
  /// Adam and LAMB: clip the gradients by their global norm first (clip norm 1.0).
  bool clip_global_norm = false;
  /// Optimizer-state sharding (MindSpore's optimizer_shard, ZeRO-1) over the `shard_size` ranks
  /// `shard_stride` apart that hold the same weights and read different samples: each gradient
  /// whose first axis divides among them is reduce-scattered (instead of all-reduced), each rank
  /// updates its piece of the weight with its piece of the optimizer state, and the updated
  /// pieces are all-gathered into the weight. 1: none.
  std::int64_t shard_size = 1, shard_stride = 1;
  std::set<TensorId> unsharded;  ///< parameters whose gradients the ranks do not share: kept whole
  /// The gradients sharded too (MindSpore's optimizer_level "level2", DeepSpeed's ZeRO stage 2):
  /// with gradient accumulation each micro-batch's gradient is reduce-scattered and its piece
  /// added into an accumulator of the piece (workloads/pipeline.h); an fp16 weight's piece is
  /// updated in an fp32 master copy of it (an optimizer state), cast to fp16 and gathered.
  bool partition_gradients = false;
  /// The gradients given to the optimizer already are the rank's averaged pieces of the
  /// shardable weights (set by the accumulation that reduce-scattered them).
  bool gradients_are_pieces = false;
  /// Tensor parallelism: the `tensor_group_size` adjacent ranks among which the weights in `split`
  /// are cut. A norm (the global norm of clip_global_norm, LAMB's trust ratios) sums a weight's
  /// pieces over the ranks that hold different ones: its tensor group when split, its shard
  /// group when sharded, both (the block of shard_size x tensor_group_size ranks) when both.
  std::int64_t tensor_group_size = 1;
  std::set<TensorId> split;
  /// Pipeline parallelism: the global norm (clip_global_norm) sums the `pipeline_stages` stages'
  /// parts, `pipeline_stride` ranks apart (an AllReduce of one number); a weight in
  /// `norm_elsewhere` (a shared embedding's copy on the last stage) is counted on another stage.
  std::int64_t pipeline_stages = 1, pipeline_stride = 1;
  std::set<TensorId> norm_elsewhere;
  /// Per weight whose gradient is a partial sum on each rank (its op read rows cut more finely
  /// than the batch: Megatron's sequence-parallel norms and the biases after a ReduceScatter), the
  /// group {size, stride} it is AllReduced over before the update (once a step, after a pipeline's
  /// micro-batches).
  std::map<TensorId, std::pair<std::int64_t, std::int64_t>> partial_gradients;
};

/// The group over which the pieces of `param`'s gradient (or weight) make its whole: {size,
/// stride}, {1, 1} when this rank holds it whole. `sharded`: the optimizer shards it.
std::pair<std::int64_t, std::int64_t> norm_group(const OptimizerSpec& spec, TensorId param, bool sharded);

/// The gradients in spec.partial_gradients AllReduced over their groups, in `update`.
void sum_partial_gradients(Graph& g, std::map<TensorId, TensorId>& update, const OptimizerSpec& spec);
/// Whether the optimizer shards `param`: its first axis divides into spec.shard_size and its
/// gradient is shared by the shard group.
bool shardable(const Graph& g, TensorId param, const OptimizerSpec& spec);
/// A gradient reduce-scattered over the shard group and averaged (gradients_mean on the piece, as
/// the all_reduce pass scales an all-reduced one), its ops named PREFIX + "OptimizerShard/" + the
/// parameter's name; `mean` is the graph's gradients_mean constant (reduce_scatter_mean_constant).
TensorId reduce_scatter_gradient(Graph& g, const std::string& prefix, TensorId param, TensorId grad, TensorId mean,
                                 const OptimizerSpec& spec);
TensorId reduce_scatter_mean_constant(Graph& g);
/// Optimizer-state sharding's gradient side: each gradient of `update` whose parameter is
/// shardable is replaced by its ReduceScatter (unless spec.gradients_are_pieces); returns, per
/// such parameter, the rank's piece of it that the optimizer updates in its place — a Slice of
/// the weight, or with partition_gradients and an fp16 weight an fp32 master copy of the piece
/// (the gradient cast to fp32 for it).
std::map<TensorId, TensorId> shard_gradients(Graph& g, std::map<TensorId, TensorId>& update, const OptimizerSpec& spec);
/// Each updated piece all-gathered into its parameter (AllGatherInto), after the update; an fp32
/// master piece is cast to the weight's dtype first.
void gather_pieces(Graph& g, const std::map<TensorId, TensorId>& pieces, const OptimizerSpec& spec);
/// A tensor of square sums AllReduced over `group` ({size, stride}; itself for a group of one).
TensorId reduce_norm(Graph& g, const std::string& name, TensorId sums, std::pair<std::int64_t, std::int64_t> group);

/// Appends the optimizer: unscale, learning-rate lookup, weight decay and one ApplyMomentum per
/// parameter (in parameter creation order) with its accumulator. Values do not affect timing.
void append_momentum(Graph& g, const std::map<TensorId, TensorId>& grads, const OptimizerSpec& spec = {});

/// Each gradient multiplied by 1 / loss_scale (nothing for a scale of 1), in the optimizer pass.
void unscale_gradients(Graph& g, std::map<TensorId, TensorId>& grads, double loss_scale);

/// Appends AdamWeightDecay (spec.kind "adamw") or LAMB ("lamb") per parameter, each with its two
/// fp32 moments, after the unscale and the global-norm clipping (transformer.cpp).
void append_adam_family(Graph& g, const std::map<TensorId, TensorId>& grads, const OptimizerSpec& spec);

/// The optimizer `spec.kind` names.
void append_optimizer(Graph& g, const std::map<TensorId, TensorId>& grads, const OptimizerSpec& spec);

}  // namespace ascendsim::workloads
