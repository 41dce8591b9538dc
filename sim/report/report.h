// Report assembly: the JSON report (docs/design.md, "The report contract") and the table printed on stdout.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "runtime/run_result.h"

namespace ascendsim::report {

using runtime::RunResult;
using runtime::StepStats;


struct ReportHeader {
  std::string workload;
  std::string chip;
  std::int64_t batch_size = 0;
  std::int64_t devices = 1;
  std::string setting;            ///< data source, recipe and host in one line (empty: not printed)
  nlohmann::ordered_json recipe;  ///< the training recipe (null: not reported)
  /// The executed graph pass by pass: [{"pass", "ops", "hbm_bytes"}] (null: not reported).
  nlohmann::ordered_json graph_passes;
  std::int64_t servers = 1;  ///< the servers the devices fill
  /// Semi-automatic parallelism: strategies, layouts, collectives and per-device memory (null:
  /// data parallel).
  nlohmann::ordered_json parallel;
  std::string mode;  ///< "train" or "infer" (the forward pass only); empty: not reported
  /// A run to a target accuracy: {"curve", "target_accuracy", "eval_every", "epochs", "accuracy"}
  /// (null: the epochs were given).
  nlohmann::ordered_json target;
  std::string server;  ///< the server preset the devices sit in (empty: not reported)
  /// Gradient accumulation: the micro-batches (or, with pipeline stages, the rounds of the
  /// pipeline's micro-batches) whose gradients one optimizer step takes; 1: none (not reported).
  std::int64_t gradient_accumulation = 1;
};

/// One run's object in the report's "runs" (docs/reports.md).
nlohmann::ordered_json run_json(const RunResult& r);
/// A run's "evaluation" object (docs/reports.md).
nlohmann::ordered_json evaluation_json(const RunResult& r);

/// {"workload", "chip", "batch_size", "devices", "runs": [...], "config": {...}}
nlohmann::ordered_json make_report(const ReportHeader& h, const std::vector<RunResult>& runs,
                                   const nlohmann::ordered_json& config);

/// The smallest sink size from which every larger one improves loop sink's mean step time by less
/// than 1%, given (sink size, mean step ms) pairs; none if the largest still gains 1% or more.
std::optional<std::int64_t> break_even_sink_size(std::vector<std::pair<std::int64_t, double>> sink_and_step_ms);

/// A mean step over 1% above its p99 or over 5% above its median draws kPulledUpNote under the
/// table that prints them: a few slow steps pull the mean up, the median is the steady state.
extern const char* const kPulledUpNote;
inline bool mean_pulled_up(const StepStats& s) { return s.mean_ms > 1.01 * s.p99_ms || s.mean_ms > 1.05 * s.p50_ms; }

/// A text table whose columns are as wide as their widest cell: the first column to the left,
/// the others to the right, two spaces between.
class TextTable {
 public:
  /// `left`: columns (by index) aligned to the left besides the first.
  explicit TextTable(std::vector<std::string> header, std::vector<std::size_t> left = {});
  void add(std::vector<std::string> row);
  std::string render() const;

 private:
  std::vector<std::vector<std::string>> m_rows;
  std::vector<std::size_t> m_left;
};

/// The tables: per-strategy figures and interactions, where the time goes, the step trace.
/// The cluster part of the text report (data-parallel runs): ranks, AllReduce groups, links.
std::string format_cluster(const std::vector<RunResult>& runs);
std::string format_table(const ReportHeader& h, const std::vector<RunResult>& runs);

/// Every kept step of every run as CSV (strategy, step numbered from 1, step, iteration interval,
/// forward and backward, tail), for runs that keep their steps (RunRequest::per_step).
std::string per_step_csv(const std::vector<RunResult>& runs);

}  // namespace ascendsim::report
