// Pipeline parallelism: a transformer's layers divided among stages of consecutive ranks, each
// step's batch in micro-batches flowing through them in the 1F1B order (MindSpore's
// `pipeline_stages` with `PipelineCell(net, micro_size)`; Megatron-LM's non-interleaved schedule).
//
// The stages are cut from the training graph of one micro-batch, its backward pass already
// appended (and any tensor-parallel layout, recomputation or sharded optimizer already applied):
//   - a forward op belongs to the stage of its transformer layer (layer l of L on stage
//     floor(l·p/L)); the ops before the first layer (embeddings) to stage 0, those after the last
//     (final norm, head, loss) to the last stage; ops computed from the batch and constants alone
//     (a padding mask) run on every stage that reads them;
//   - a backward op belongs to the stage of the forward op or weight it differentiates (its name),
//     an op summing only a later stage's gradients to that stage;
//   - a tensor one stage computes and the next reads is sent forward after each micro-batch's
//     forward pass, its gradient back after the backward pass; tensors never skip a stage.
// Each stage's graph runs its ops once per micro-batch: stage s does min(p − s − 1, m) forward
// passes (warm-up), then alternates one forward and one backward pass, then finishes the
// backward passes (cool-down), exchanging with its neighbours as Megatron's schedule does —
// combined send-and-receive where a forward send meets a backward receive — so both ranks of a
// pair post their exchanges in the same order. With equal stages and free exchanges a step takes
// (m + p − 1) micro-batch times and each stage idles (p − 1) of them: the bubble.
// Each micro-batch's weight gradients are added into a persistent accumulator per weight
// (MindSpore's accu_grads; the last micro-batch's sum out of place, where the data-parallel
// AllReduce starts), the optimizer runs once on the sums, and the accumulators are cleared. A weight two stages read (a
// head tied to the token embeddings) is held by both; their gradients are AllReduced between them before the optimizer,
// as Megatron does for shared embeddings.
#pragma once

#include <cstdint>
#include <vector>

#include "workloads/workload.h"

namespace ascendsim::workloads {

/// 1F1B's warm-up forward passes on stage `stage` of `stages` with `micro_batches` micro-batches.
std::int64_t warmup_micro_batches(std::int64_t stages, std::int64_t stage, std::int64_t micro_batches);

/// The stages of the training workload `w` (one micro-batch on one rank of a stage): per stage,
/// its workload — a batch of `micro_batches` micro-batches, its ops in 1F1B order with the
/// exchanges to the stages `stage_ranks` ranks before and after it, its optimizer. Throws
/// std::invalid_argument naming --pipeline-stages for a network without enough transformer
/// layers, or whose tensors skip a stage.
std::vector<Workload> pipeline_stages(const Workload& w, std::int64_t stages, std::int64_t micro_batches,
                                      std::int64_t stage_ranks);

/// Gradient accumulation (MindFormers' gradient_accumulation_steps, DeepSpeed's and Megatron's
/// micro-batches of a global batch) without pipeline stages: the training workload `w` (one
/// micro-batch) run `micro_batches` times a step on the step's batch (`micro_batches` × w's),
/// each micro-batch's weight gradients added into a persistent accumulator per weight, the last
/// one's sum out of place where the gradients' collectives start, then one optimizer step and
/// the accumulators cleared — a one-stage pipeline. Any network, not only transformers. Throws
/// std::invalid_argument naming --gradient-accumulation for fewer than 1 or a graph without a
/// backward pass.
Workload accumulate_gradients(const Workload& w, std::int64_t micro_batches);

}  // namespace ascendsim::workloads
