// The files one command writes, all or none. Every destination is checked before anything is
// simulated; the contents are staged beside their targets and put in place together at the end,
// so a failed invocation leaves no output behind and replaces nothing.
//
// A regular file (or a new one) is written to an unnamed file (O_TMPFILE) in the directory of its
// real path (symlinks followed), which a killed process cannot leave behind; at commit it is
// linked under a hidden name and renamed over the destination: a symlinked report path
// keeps its link and its target gets the report. A FIFO or a device (`/dev/null`) is written
// straight through, at commit. "-" is standard output.
//
// A streamed output (a trace) that cannot be written — a full disk, an I/O error, a file-size
// limit — requests a stop (sim/core/stop.h) at the write that fails: the run ends at its next
// check and the staged files are removed. Standard output is checked before anything is put in
// place: a report that could not be printed fails the command, and no file is left behind.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <ostream>
#include <streambuf>
#include <string>
#include <vector>

namespace ascendsim::sim {

/// A buffered stream buffer over a file descriptor that keeps the errno of the first write that
/// failed (later writes are dropped) and passes it to `on_fail`, once.
class FdBuf : public std::streambuf {
 public:
  /// `owned`: close() syncs and closes the descriptor, and so does the destructor.
  explicit FdBuf(int fd, bool owned = false, std::function<void(int)> on_fail = {});
  ~FdBuf() override;
  FdBuf(const FdBuf&) = delete;
  FdBuf& operator=(const FdBuf&) = delete;
  /// 0, or the errno of the first write that failed.
  int error() const { return m_error; }
  /// Writes what is buffered (and, if owned, syncs and closes); returns error().
  int close();

 protected:
  int_type overflow(int_type c) override;
  std::streamsize xsputn(const char* s, std::streamsize n) override;
  int sync() override { return drain() ? 0 : -1; }

 private:
  static constexpr std::size_t kBlock = std::size_t{1} << 16;
  bool drain();
  bool put(const char* p, std::size_t n);
  void fail(int err);
  int m_fd;
  bool m_owned;
  std::function<void(int)> m_on_fail;
  std::vector<char> m_block;
  int m_error = 0;
};

/// Flushes standard output and throws InputError if anything printed to it was lost (a full
/// device, a closed descriptor, a pipe whose reader left). The reason is exact when std::cout
/// writes through an FdBuf, as the ascendsim binary's does.
void check_stdout();

class FileStream;

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
  /// Makes a directory for outputs, with its missing parents (as `mkdir -p`); the directories it
  /// made are removed again, if still empty, unless the outputs are committed. Throws InputError
  /// naming `option`, the directory and the reason.
  void directory(const std::string& dir, const std::string& option);
  /// Stages the text for a destination given to add(). Throws InputError naming the path and the
  /// reason (errno) if it cannot be written.
  void stage(const std::string& path, const std::string& text);
  /// A stream for a destination given to add(), written while the command runs (a trace): staged
  /// like stage()'s texts. Throws InputError naming the path and the reason if it cannot open.
  std::ostream& stream(const std::string& path);
  /// Bytes an unprivileged user may still write on the file system of a destination given to
  /// add(); unset for standard output, a FIFO or a device.
  std::optional<std::int64_t> free_bytes(const std::string& path);
  /// Text for standard output, printed at commit once every device and FIFO took its text.
  void print(const std::string& text) { m_printed += text; }
  /// Writes the devices' and FIFOs' texts, prints what print() was given and checks standard
  /// output (everything printed so far reached it), then puts every staged file in place. Throws
  /// InputError naming the destination and the reason.
  void commit();

 private:
  struct Entry {
    std::string path, option;
    std::string real;      ///< the path with symlinks resolved
    bool through = false;  ///< FIFO or device: written at commit
    bool staged = false;
    int tmpfd = -1;                      ///< the unnamed staged file (O_TMPFILE), until commit names it
    std::string temp;                    ///< the staged file's name (regular destinations)
    std::string text;                    ///< the staged text (write-through destinations, stdout)
    std::shared_ptr<FileStream> out;  ///< stream()'s file
  };
  Entry& find(const std::string& path);
  /// A descriptor to write a regular destination's staged text through: an unnamed file in its
  /// directory, or where the file system has none, a hidden named one.
  int open_staging(Entry& e);
  /// Gives an unnamed staged file a hidden name beside its destination (renamed over it next).
  void name_staged(Entry& e);
  std::vector<Entry> m_entries;
  std::vector<std::string> m_made;  ///< directories directory() made, parents first
  std::string m_printed;            ///< print()'s text
  bool m_committed = false;
};

}  // namespace ascendsim::sim
