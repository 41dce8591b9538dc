// Semi-automatic parallelism (MindSpore's `parallel_mode="semi_auto"`): the network is written as
// for one device; a dataset strategy says how each batch tensor is cut across the devices and
// per-layer shard strategies say how an op's inputs are cut (`shard(in_strategy=((2,1),(1,4)))`:
// per input, the cuts of each dimension). This builds one rank's graph: every tensor at its local
// shape, the redistribution collectives a layout change needs inserted (AllReduce of partial sums,
// AllGather, ReduceScatter in backward, local slices), then the backward pass and the optimizer
// appended as for one device, and the gradient AllReduce limited to the ranks that hold copies of
// a parameter and saw different data.
//
// Layouts. A tensor's layout gives each dimension a number of cuts and a stride in rank space: on
// rank r the dimension's piece is (r / stride) mod cuts; ranks that agree on every piece hold the
// same data. A layout may also be a partial sum over a group (a MatMul whose contraction is cut).
// A batch tensor of a dataset strategy takes strides row-major over its cut dimensions (the last
// dimension varies fastest), so seed 002's ((1,1,1,4),(1,)) gives rank r the strip r mod 4; an
// op's strategy lays out its device matrix the same way.
//
// Op rules (forward):
//   MatMul     x[m,k] · w[n,k]ᵀ (or w[k,n]) with strategy ((a,b),(c,b)): output [m/a, n/c], a
//              partial sum over the b ranks of the contraction (AllReduced where a consumer needs
//              the value); without a strategy it follows x's layout (a, b from x; c = 1).
//   Conv2D     x[N,C,H,W] * w[O,C,kh,kw] with ((n,c,1,1),(o,c,1,1)): output [N/n, O/o, Ho, Wo],
//              partial over c; H and W are never cut (no halo exchange); without a strategy it
//              follows x's N and C.
//   Reshape    a flatten keeps the batch cut and passes a cut of one merged dimension to the
//              merged dimension (a width strip becomes a set of columns: a MatMul's contraction
//              does not care which columns it holds).
//   Reshape    (any other) splits or merges axes: a group of input axes that becomes a group of
//              output axes passes the cut of its outermost axis to the outermost output axis
//              ([tokens, H/T] -> [B, S, heads/T, d]); other cuts are gathered first.
//   Transpose  permutes the cuts.
//   BatchMatMul  batch axes and rows follow x; y brought to them; contraction and columns whole.
//   EmbeddingLookup  follows its ids; the table whole along its width (a computed table's rows
//              cut more finely than the batch are gathered to the batch's cut first).
//   FlashAttentionScore  k, v and the outputs follow q's batch and heads; sequence and width whole.
//   element-wise (Add, Sub, Mul, RealDiv, Dropout, GeLU, SiLU, Tanh, ...) follow the computed
//              input of the highest rank, the others aligned to its trailing axes (broadcast
//              axes whole); Softmax, LayerNorm and RMSNorm want their last axis whole, rotary
//              embeddings their last two, a StridedSlice its axis. A strategy gives that input's
//              cuts (the others' must be its, aligned): ((8,1),(1,),(1,)) runs a LayerNorm on
//              1/8 of the rows.
//   others     BatchNorm, pooling, ReLU, Cast, BiasAdd and ReduceMean follow input 0 (partial sums
//              reduced first, pooled or reduced dimensions uncut), other inputs are brought to its
//              layout; the loss keeps the batch cut and needs the classes whole; an op without a
//              rule gets whole inputs and gives a whole output.
// A computed input held whole by a group that an op splits passes one Mirror per group (its
// consumers' gradients summed before the Mirror's backward AllReduce).
//
// Redistribution (a value brought to the layout an op wants; once per value, layout and the
// group its consumer splits): a partial sum is AllReduced, or ReduceScattered where the wanted
// layout cuts a dimension over the partial sum's ranks (within the cut it has: MindSpore's
// out_strategy ((8,1)) of a MatMul whose contraction is cut 2 ways, on 4 batch pieces of 2
// ranks); a dimension cut more finely than wanted is gathered over the ranks of the finer cut
// alone, one cut more coarsely is sliced over them; other cuts are gathered whole and sliced. A
// gather's backward reduce-scatters where its consumer is split over the gathered ranks (each
// rank's gradient a partial sum; no Mirror then), else keeps the rank's piece of the whole
// gradient. An op's output strategy (`SemiAutoConfig::outputs`) redistributes its output right
// after it. A weight whose op read rows cut more finely than the batch (1/T of a batch piece's
// tokens) has its gradient AllReduced over those ranks as the optimizer begins
// (OptimizerSpec::partial_gradients; Megatron's sequence-parallel norms).
// A strategy whose cuts do not divide a dimension, whose cuts do not fit the devices, or that
// disagrees with itself (a MatMul's two k cuts) is an error naming the layer.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "workloads/workload.h"

namespace ascendsim::workloads {

/// Per input, the cuts of each dimension.
using ShardStrategy = std::vector<std::vector<std::int64_t>>;

/// Parses MindSpore's notation, "((1,1,1,4),(1,))" or "((2,1),(1,4))"; throws
/// std::invalid_argument saying what is wrong with `text`.
ShardStrategy parse_shard_strategy(const std::string& text);
std::string shard_strategy_string(const ShardStrategy& s);

struct SemiAutoConfig {
  std::int64_t devices = 1;
  /// The batch tensors' cuts (empty: the batch cut across every device, MindSpore's default).
  ShardStrategy dataset;
  /// Per layer — an op's name or the part of it before the first '/' (its cell, e.g. "layer1") —
  /// the op's strategy.
  std::map<std::string, ShardStrategy> layers;
  /// Per op (its name), the layout its output is brought to right after it: one tuple of cuts
  /// (MindSpore's out_strategy; a partial sum's ranks cutting one of them: a ReduceScatter).
  std::map<std::string, ShardStrategy> outputs;
  /// Where the ranks that repeat a piece sit when a strategy's cuts use fewer than all devices:
  /// false, the slowest-varying (seed 002's strips: rank r holds strip r mod 4 on 8 devices);
  /// true, the fastest-varying (MindSpore's device matrix with the repeated number on its right,
  /// which tensor parallelism uses: a data-parallel batch piece repeated on a tensor-parallel
  /// group of adjacent ranks).
  bool repeat_right = false;
};

/// What the sharding did, for reports.
struct ShardPlan {
  struct TensorLayout {
    std::string tensor, op;          ///< the tensor and the forward op that produced it
    Shape global, local;             ///< its shape on one device, and on each rank
    std::vector<std::int64_t> cuts;  ///< per dimension
    std::int64_t partial = 1;        ///< ranks whose partial sums it is (1: a value)
  };
  std::vector<TensorLayout> layouts;  ///< every forward op's output and the batch tensors
  struct Collective {
    std::string name, kind;  ///< the op's name; AllReduce, AllGather, ReduceScatter
    std::int64_t group_size = 0, group_stride = 1, bytes = 0;
    bool forward = true;
  };
  std::vector<Collective> collectives;                       ///< forward redistribution; backward ones are their duals
  std::int64_t parameters_global = 0, parameters_local = 0;  ///< elements
  std::int64_t gradient_group_size = 0, gradient_group_stride = 1;  ///< 1: no gradient AllReduce
  std::map<std::string, std::string> strategies;                    ///< per layer given, as written
  std::map<std::string, std::string> output_strategies;             ///< per op given an output strategy, as written
  /// Which piece of a whole tensor each rank holds, for the batch tensors and the weights: per
  /// dimension its cuts and stride (the piece on rank r is (r / stride) mod cuts); a dimension
  /// that a flatten merged from several (`merged`: their whole shape, one of them, `merged_axis`,
  /// cut) holds the columns of that sub-dimension's piece.
  struct Piece {
    Shape whole;
    std::vector<std::int64_t> cuts, strides, merged_axis;
    std::vector<Shape> merged;
  };
  std::map<std::string, Piece> pieces;
};

/// For every element of rank `rank`'s piece (in its local row-major order), the index of the same
/// element in the whole tensor.
std::vector<std::int64_t> piece_indices(const ShardPlan::Piece& p, std::int64_t rank);

/// One rank's training graph of `train` under semi-automatic parallelism (see above). Throws
/// std::invalid_argument naming the layer (or the dataset strategy) for a strategy that does not
/// fit.
Workload semi_auto(const Workload& train, const SemiAutoConfig& cfg, ShardPlan* plan = nullptr);

}  // namespace ascendsim::workloads
