// The reports of the calls that run one job several times (sim/studies.cpp): the sweep's JSON,
// table and CSV, and the AllReduce fusion advice's table.
#pragma once

#include <cstddef>
#include <string>

#include <nlohmann/json.hpp>

#include "sim/api.h"

namespace ascendsim::report {

/// The sweep's JSON report: {"workload", "chip", "batch_size", "param", "values",
/// "break_even_sink_size", "conclusion", "rows": [...], "config"} (docs/reports.md).
nlohmann::ordered_json sweep_json(const sim::SweepOutcome& o);
/// The sweep's table printed on stdout, with the time to train when it differs from the run's
/// time, and the conclusion.
std::string sweep_table(const sim::SweepOutcome& o);
/// A row per value and strategy: the figures, the interactions and the time per phase.
std::string sweep_csv(const sim::SweepOutcome& o);

/// The first `top` fusion splits, shortest mean step first.
std::string fusion_table(const sim::FusionAdvice& a, std::size_t top);

}  // namespace ascendsim::report
