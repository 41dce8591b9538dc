#include "runtime/session.h"

#include "sim/core/error.h"

namespace ascendsim::runtime {

const char* strategy_name(Strategy s) {
  switch (s) {
    case Strategy::NonSink:
      return "non-sink";
    case Strategy::DataSink:
      return "data-sink";
    case Strategy::GraphSink:
      return "graph-sink";
    case Strategy::LoopSink:
      return "loop-sink";
  }
  return "?";
}

std::vector<Strategy> all_strategies() {
  return {Strategy::NonSink, Strategy::DataSink, Strategy::GraphSink, Strategy::LoopSink};
}

Strategy parse_strategy(const std::string& name) {
  for (auto s : all_strategies())
    if (name == strategy_name(s)) return s;
  throw sim::InputError("strategy", "strategy",
                        "unknown strategy '" + name + "' (choose non-sink, data-sink, graph-sink or loop-sink)");
}

std::string Session::largest_factor() const {
  const bool sink = strategy == Strategy::LoopSink && sink_size > 0;
  const std::int64_t per_epoch = sink ? sink_size : steps_per_epoch;
  if (epochs >= per_epoch) return "epochs";
  return sink ? "sink_size" : "steps_per_epoch";
}

void Session::validate() const {
  if (epochs <= 0)
    throw sim::InputError("epochs", "epochs", "must be a positive whole number, got " + std::to_string(epochs));
  if (steps_per_epoch <= 0)
    throw sim::InputError(
        "steps_per_epoch", "steps_per_epoch",
        "must be positive, got " + std::to_string(steps_per_epoch) + " (is the dataset smaller than one batch?)");
  if (sink_size == 0 || sink_size < -1)
    throw sim::InputError(
        "sink_size", "sink_size",
        "must be -1 (the whole dataset) or a positive whole number, got " + std::to_string(sink_size));
  if (eval_every < 0)
    throw sim::InputError(
        "eval_every", "eval_every",
        "must be 0 (no evaluation) or a positive number of epochs, got " + std::to_string(eval_every));
  if (eval_every > 0 && eval_steps <= 0)
    throw sim::InputError("eval_every", "eval_every",
                          "the evaluation dataset makes no batch (" + std::to_string(eval_steps) +
                              " steps per pass); reduce batch_size or give a larger evaluation dataset");
  if (checkpoint_every < 0)
    throw sim::InputError("checkpoint_every", "checkpoint_every",
                          "must be a positive number of steps, got " + std::to_string(checkpoint_every));
  const std::int64_t per_epoch = strategy == Strategy::LoopSink ? effective_sink_size() : steps_per_epoch;
  if (per_epoch > kMaxSteps || epochs > kMaxSteps / per_epoch) {
    const std::string key = largest_factor();
    throw sim::InputError(key, key,
                          std::to_string(epochs) + " x " + std::to_string(per_epoch) +
                              " steps would simulate more than " + std::to_string(kMaxSteps) +
                              " steps — reduce epochs, steps_per_epoch or sink_size");
  }
}

}  // namespace ascendsim::runtime
