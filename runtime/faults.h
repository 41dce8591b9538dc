// Device failures during a run with checkpoints (docs/model.md, "Checkpoints and failures"): the
// expected time to train, its spread over seeded draws, and the checkpoint interval that minimises
// it. Plain C++ over a run's figures: the run is simulated once without failures, and the failures
// are laid over its time line.
//
// The run is a chain of segments, each the work between two saves and the save that ends it (the
// first also holds the initialisation; without checkpoints the whole run is one segment). Failures
// strike the cluster as a Poisson process of rate 1/M (M = device MTBF / devices, exponential
// lifetimes), at any time, a restart included. A failure loses the segment's work done so far and
// costs a restart of R (relaunch, initialisation, the last checkpoint's load; before the first
// save a relaunch alone, the first segment holding the initialisation), after which the segment
// runs again from its start. A segment of length w then takes, in expectation (Daly 2006's wall
// time of one segment; the renewal argument in docs/model.md, "Checkpoints and failures"),
//   E(w) = M e^(R/M) (e^(w/M) - 1),
// and the run the sum over its segments.
#pragma once

#include <cstdint>
#include <vector>

namespace ascendsim::runtime {

/// What the fault model needs of a run, in seconds.
struct FaultInputs {
  double mtbf_s = 0;        ///< M: the cluster's mean time between failures (a device's over the devices)
  double restart_s = 0;     ///< R: from a failure to training again, from the last checkpoint
  /// R_1: from a failure before the first save to training again: a relaunch alone (the first
  /// segment, which holds the initialisation, runs again from its start; there is nothing to load)
  double first_restart_s = 0;
  double init_s = 0;        ///< the run's initialisation, before its first step
  double step_s = 0;        ///< a step's time, its share of evaluation and exposed communication included
  std::int64_t steps = 0;   ///< the run's steps
  std::int64_t granule = 1; ///< steps between two returns to the host (a sink under loop sink): saves fall on them
  double checkpoint_s = 0;  ///< one save, as long as the training thread waits for it
};

/// `count` segments of `length` seconds each, a failure in one costing a restart of `restart_s`.
struct Segment {
  double length = 0;
  std::int64_t count = 0;
  double restart_s = 0;
};

/// The run's segments with a save at least every `every` steps (at the first return to the host
/// that many steps after the last save, and at the end); 0: no checkpoints, one segment.
std::vector<Segment> segments(const FaultInputs& in, std::int64_t every);
/// The saves of a run with a save every `every` steps (0: none).
std::int64_t saves(const FaultInputs& in, std::int64_t every);
/// The time to train without failures: the segments' sum.
double failure_free_s(const std::vector<Segment>& segs);
/// The expected time to train with failures, in closed form: the sum of E(w) over the segments.
double expected_s(const FaultInputs& in, const std::vector<Segment>& segs);
/// One draw of the run's time with failures, deterministic per seed; `failures` counts them.
double draw_s(const FaultInputs& in, const std::vector<Segment>& segs, std::uint64_t seed, std::int64_t& failures);
/// Young's interval (1974), the reference Daly (2006) refines: sqrt(2 δ M), δ a save's cost.
double young_daly_interval_s(double checkpoint_s, double mtbf_s);

/// The interval in steps (a multiple of the granule) with the least expected time to train, and
/// that time: every interval up to 200,000 granules, beyond that a logarithmic grid refined around
/// its best.
struct BestInterval {
  std::int64_t every = 0;
  double expected_s = 0;
};
BestInterval best_interval(const FaultInputs& in);

/// The fault model's figures for one run (the report's `faults`).
struct FaultAnalysis {
  double device_mtbf_hours = 0;
  std::int64_t devices = 0;
  FaultInputs inputs;
  std::int64_t every = 0;  ///< the run's checkpoint interval, steps
  /// The restart's parts: relaunch, the run's initialisation, the last checkpoint's load (storage
  /// read at the rank's share, parsing, the copy to the device).
  double relaunch_s = 0, load_s = 0;
  double failure_free_s = 0, expected_s = 0, expected_failures = 0;
  std::int64_t seeds = 0;
  double mean_s = 0, p10_s = 0, p50_s = 0, p90_s = 0, min_s = 0, max_s = 0, failures_mean = 0;
  BestInterval best;
  double young_daly_s = 0;  ///< sqrt(2 δ M)
};

/// The analysis of a run: its segments at its own interval, `seeds` draws (seeds 0 to seeds - 1),
/// the best interval and Young/Daly's.
FaultAnalysis analyse_faults(const FaultInputs& in, std::int64_t every, std::int64_t seeds);

}  // namespace ascendsim::runtime
