// The files one command writes, all or none. Every destination is checked before anything is
// simulated; the contents are staged beside their targets and put in place together at the end,
// so a failed invocation leaves no output behind and replaces nothing.
//
// A regular file (or a new one) is written to a temporary file with a unique name in the
// directory of its real path (symlinks followed) and renamed over it: a symlinked report path
// keeps its link and its target gets the report. A FIFO or a device (`/dev/null`) is written
// straight through, at commit. "-" is standard output.
#pragma once

#include <fstream>
#include <memory>
#include <string>
#include <vector>

namespace ascendsim::sim {

class Outputs {
 public:
  Outputs() = default;
  Outputs(const Outputs&) = delete;
  Outputs& operator=(const Outputs&) = delete;
  /// Removes whatever was staged and not committed.
  ~Outputs();

  /// Checks a destination now: its directory exists and is writable, it is not a directory.
  /// Throws InputError naming `option`, the path and the reason. An empty path is ignored.
  void add(const std::string& path, const std::string& option);
  /// Stages the text for a destination given to add(). Throws InputError naming the path and the
  /// reason (errno) if it cannot be written.
  void stage(const std::string& path, const std::string& text);
  /// A stream for a destination given to add(), written while the command runs (a trace): staged
  /// like stage()'s texts. Throws InputError naming the path and the reason if it cannot open.
  std::ostream& stream(const std::string& path);
  /// Puts every staged text in place.
  void commit();

 private:
  struct Entry {
    std::string path, option;
    std::string real;      ///< the path with symlinks resolved
    bool through = false;  ///< FIFO or device: written at commit
    bool staged = false;
    std::string temp;                    ///< the staged file (regular destinations)
    std::string text;                    ///< the staged text (write-through destinations, stdout)
    std::shared_ptr<std::ofstream> out;  ///< stream()'s file
  };
  Entry& find(const std::string& path);
  std::string make_temp(Entry& e);
  std::vector<Entry> m_entries;
  bool m_committed = false;
};

}  // namespace ascendsim::sim
