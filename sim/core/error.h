// Errors a user can act on. Every component throws one of these for bad input; the CLI prints
// the message and exits non-zero. Nothing below the CLI calls exit() or abort().
#pragma once

#include <stdexcept>
#include <string>

namespace ascendsim::sim {

/// A configuration, option or input file was rejected. The message names the file, key or value
/// and says what to do instead.
class InputError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// The simulated job failed the way the real one would (e.g. a GetNext timeout). The message is
/// the diagnosis a user of the real system would get.
class RunError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace ascendsim::sim
