// The ascendsim command line: compare, train, info, params, chips.
#pragma once

namespace ascendsim::sim {

/// Exit codes: 0 success, 1 internal error, 2 bad input (options, config, files), 3 the simulated
/// job failed (e.g. GetNext timeout).
int run_cli(int argc, char* argv[]);

}  // namespace ascendsim::sim
