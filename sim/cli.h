// The ascendsim command line: `ascendsim <command> [options]`; the commands are in sim/commands/.
#pragma once

namespace ascendsim::sim {

/// Exit codes: 0 success, 1 internal error, 2 bad input (options, config, files) or an output that
/// could not be written, 3 the simulated job failed (e.g. GetNext timeout), 128 + N stopped by
/// signal N (when the caller installed sim/core/stop.h's handlers, as the ascendsim binary does).
int run_cli(int argc, char* argv[]);

}  // namespace ascendsim::sim
