// A training session: which execution strategy, how many epochs, the sink size, the dataset's
// steps per epoch — and what that implies for the number of steps run (docs/design.md, "The four strategies").
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ascendsim::runtime {

enum class Strategy { NonSink, DataSink, GraphSink, LoopSink };

const char* strategy_name(Strategy s);
/// Throws sim::InputError for an unknown name, listing the known ones.
Strategy parse_strategy(const std::string& name);
std::vector<Strategy> all_strategies();
/// Data reaches the device through the data queue (GetNext) rather than a per-step memcpy.
inline bool uses_queue(Strategy s) { return s != Strategy::NonSink; }
/// The step runs as a loaded graph rather than op-by-op launches.
inline bool uses_graph(Strategy s) { return s == Strategy::GraphSink || s == Strategy::LoopSink; }

struct Session {
  /// Per-step times are kept for the percentiles; this bounds the memory they take (800 MB).
  static constexpr std::int64_t kMaxSteps = 100'000'000;

  Strategy strategy = Strategy::NonSink;
  std::int64_t epochs = 1;
  std::int64_t sink_size = -1;       ///< loop sink: steps per graph launch; -1 = steps_per_epoch
  std::int64_t steps_per_epoch = 1;  ///< D: batches in one pass over the dataset
  /// The batches of the workload's whole dataset shard, when steps_per_epoch simulates fewer
  /// (0: not known; equal to steps_per_epoch unless a request shortened the epoch).
  std::int64_t dataset_steps_per_epoch = 0;
  /// Evaluation during training (MindSpore's EvalCallBack): a pass over the evaluation dataset
  /// after every `eval_every` epochs (sinks under loop sink, as MindSpore counts them); 0: none.
  std::int64_t eval_every = 0;
  std::int64_t eval_steps = 0;  ///< batches in one evaluation pass (this rank's shard)
  /// What the host copies back after each returned step: the loss (an fp32 scalar), or a serving
  /// step's sampled tokens or logits (workloads/serving.h).
  std::int64_t result_bytes = 4;
  /// Checkpoints (MindSpore's ModelCheckpoint, save_checkpoint_steps): the weights and optimizer
  /// state saved once at least `checkpoint_every` steps have run since the last save (at a sink's
  /// end under loop sink, where the callback runs) and once more at the end of training; 0: none.
  std::int64_t checkpoint_every = 0;
  /// ModelCheckpoint's async_save: the host serialises and writes on a thread of its own, the
  /// training thread waiting only for the copy to the host (and for the save before it).
  bool checkpoint_async = false;

  /// Throws sim::InputError for non-positive epochs/steps, a sink size that is neither -1 nor > 0,
  /// or more than kMaxSteps steps.
  void validate() const;
  /// The request key of the larger factor of the run's steps (epochs, or the steps of one epoch:
  /// sink_size or steps_per_epoch): the one an error about too many steps names.
  std::string largest_factor() const;
  /// S: steps per graph launch under loop sink.
  std::int64_t effective_sink_size() const { return sink_size < 0 ? steps_per_epoch : sink_size; }
  /// E x D, or E x S under loop sink.
  std::int64_t steps() const {
    return strategy == Strategy::LoopSink ? epochs * effective_sink_size() : epochs * steps_per_epoch;
  }
  /// Evaluation passes in the run: one after every eval_every epochs.
  std::int64_t eval_passes() const { return eval_every > 0 ? epochs / eval_every : 0; }
};

}  // namespace ascendsim::runtime
