// Errors in the words of the command line: an InputError about a request key or a parameter names
// the flag the user typed (`--num-parallel-workers 0`), not the library's key.
#pragma once

#include <map>
#include <string>

#include "sim/core/error.h"

namespace ascendsim::sim::cli {

/// What the user typed for each request key and parameter override (by override_origin), so
/// that an error about one names the flag. Filled while the command line is parsed; one
/// invocation per process.
std::map<std::string, std::string>& typed();

/// The flag of each request key.
const std::map<std::string, std::string>& request_flags();

/// The message of `e` in the words of the command line.
std::string cli_message(const InputError& e);

}  // namespace ascendsim::sim::cli
