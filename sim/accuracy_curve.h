// Epochs to converge, as an input: a curve of evaluation accuracy by epoch that the user supplies
// (measured on real hardware, or published), and the accuracy a run must reach. The simulator
// does not model convergence; it times the run the curve says it takes.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace ascendsim::sim {

/// (epoch, accuracy) points, epochs increasing from 1, accuracy a fraction in [0, 1].
struct AccuracyCurve {
  std::string file;
  std::vector<std::pair<double, double>> points;
  /// The accuracy at `epoch`: linear between the points around it; before the first point or
  /// beyond the last, negative (the curve does not say).
  double at(double epoch) const;
};

/// Reads a CSV of `epoch,accuracy` lines (an optional header line, `#` comments, blank lines);
/// accuracy as a fraction (0.759) or a percentage (75.9%). InputError naming the file and line for
/// anything else.
AccuracyCurve load_accuracy_curve(const std::string& path);

/// The run MLPerf times: evaluation after every `eval_every` epochs, stopping at the first whose
/// accuracy reaches `target`. Returns (epochs, the accuracy there); InputError if the curve never
/// reaches it at an evaluation.
std::pair<std::int64_t, double> epochs_to_target(const AccuracyCurve& curve, double target, std::int64_t eval_every);

}  // namespace ascendsim::sim
