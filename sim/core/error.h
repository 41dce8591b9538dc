// Errors a user can act on. Every component throws one of these for bad input; the CLI prints
// the message and exits non-zero. Nothing below the CLI calls exit() or abort().
#pragma once

#include <stdexcept>
#include <string>

namespace ascendsim::sim {

/// A configuration, option or input file was rejected. The message names the file, key or value
/// and says what to do instead. An error about one request field or parameter also carries its
/// key (`batch_size`, `pipeline.num_parallel_workers`) and the message without its origin, so a
/// front end can name what its user typed (`--num-parallel-workers 0`) instead.
class InputError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
  /// what() is "origin: detail".
  InputError(const std::string& origin, std::string key, std::string detail)
      : std::runtime_error(origin + ": " + detail),
        m_origin(origin),
        m_key(std::move(key)),
        m_detail(std::move(detail)) {}
  const std::string& origin() const { return m_origin; }
  const std::string& key() const { return m_key; }
  const std::string& detail() const { return m_detail; }

 private:
  std::string m_origin, m_key, m_detail;
};

/// The simulated job failed the way the real one would (e.g. a GetNext timeout). The message is
/// the diagnosis a user of the real system would get.
class RunError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace ascendsim::sim
