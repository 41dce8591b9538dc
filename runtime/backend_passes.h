// The backend passes: they turn the framework's training graph into the graph the device executes,
// as Ascend's backend does before it builds kernels. Each rewrites CompileState::graph and runs
// before `lower`, in this order:
//
//   cube_precision  the Cube has no fp32 path: each fp32 operand of a Cube op is cast to fp16
//                   once per step (shared by every Cube op that reads it; O2's fp16 weights are
//                   already cast by the network, so it adds nothing there)
//   bn_split        BatchNorm training as BNTrainingReduce + BNTrainingUpdate, its gradient as
//                   BNTrainingUpdateGrad + BNTrainingReduceGrad
//   formats         each tensor's layout (NC1HWC0 feature maps, FracZ conv weights, FRACTAL_NZ
//                   MatMul operands, ND elsewhere) from what the kernels want; a TransData where a
//                   tensor's layout differs from what its consumer wants (parameters are stored
//                   in the layout of their first consumer and never converted per step)
//   atomic_clean    an AtomicAddrClean before each kernel whose blocks add partial results into
//                   its output (Cube ops with K split over blocks, reductions over several blocks)
//   momentum_fusion the optimizer chains Ascend's IR fusion passes merge by default: the unscale
//                   Mul and ApplyMomentum become FusedMulApplyMomentum, with weight decay
//                   (Mul, Add) FusedWeightScaleApplyMomentum
//   graph_kernel_fusion (optional, --graph-kernel-fusion; after momentum_fusion) element-wise ops
//                   joined through tensors only they use (same pass, same size) become one
//                   kernel that reads its inputs and writes its outputs once; a reduction may end
//                   such a group (e.g. BNTrainingUpdate + ReLU, Add + ReLU, the unscale, weight
//                   decay and Momentum of a parameter)
//   ub_fusion       (on by default, --ub-fusion; last, after graph_kernel_fusion) the TBE backend's
//                   buffer fusion: a kernel and the consumers of its result computed while it is
//                   still in the Unified Buffer, as one kernel (Conv2D + BNTrainingReduce,
//                   Conv2D/MatMul/Conv2DBackpropInput + element-wise, BNTrainingUpdate + element-wise,
//                   element-wise + BNTrainingUpdateGrad; docs/model.md has the rules). Not the
//                   AllReduce fusion of advise-fusion.
#pragma once

#include <cstdint>

#include "runtime/graph_compiler.h"

namespace ascendsim::runtime {

CompilePass cube_precision_pass();
CompilePass bn_split_pass();
CompilePass format_pass();
CompilePass atomic_clean_pass();
CompilePass momentum_fusion_pass();
CompilePass graph_kernel_fusion_pass();
CompilePass ub_fusion_pass();

/// Device ops (views excluded) and the bytes they read and write in HBM, each tensor counted in
/// its stored layout (padding included): the measure of a pass's effect.
struct GraphTraffic {
  std::int64_t ops = 0;
  std::int64_t bytes = 0;
};
GraphTraffic graph_traffic(const workloads::Graph& g);

}  // namespace ascendsim::runtime
