#include "sim/outputs.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <streambuf>
#include <string_view>

#include "sim/core/error.h"
#include "sim/core/stop.h"

namespace ascendsim::sim {

namespace fs = std::filesystem;

namespace {

std::string reason(int err) { return std::strerror(err); }

/// Writes all of `text` to `fd`; false with errno set on failure.
bool write_all(int fd, std::string_view text) {
  const char* p = text.data();
  std::size_t left = text.size();
  while (left > 0) {
    const ssize_t n = ::write(fd, p, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    p += n;
    left -= static_cast<std::size_t>(n);
  }
  return true;
}

}  // namespace

FdBuf::FdBuf(int fd, bool owned, std::function<void(int)> on_fail)
    : m_fd(fd), m_owned(owned), m_on_fail(std::move(on_fail)), m_block(kBlock) {
  setp(m_block.data(), m_block.data() + m_block.size());
}

FdBuf::~FdBuf() {
  if (m_owned && m_fd >= 0) ::close(m_fd);
}

int FdBuf::close() {
  drain();
  if (m_owned && m_fd >= 0) {
    if (m_error == 0 && ::fsync(m_fd) != 0 && errno != EINVAL) fail(errno);  // EINVAL: a FIFO
    if (::close(m_fd) != 0 && m_error == 0) fail(errno);
    m_fd = -1;
  }
  return m_error;
}

FdBuf::int_type FdBuf::overflow(int_type c) {
  if (!drain()) return traits_type::eof();
  if (traits_type::eq_int_type(c, traits_type::eof())) return traits_type::not_eof(c);
  *pptr() = traits_type::to_char_type(c);
  pbump(1);
  return c;
}

std::streamsize FdBuf::xsputn(const char* s, std::streamsize n) {
  if (n > epptr() - pptr()) {  // a large block goes straight to the file
    if (!drain() || !put(s, static_cast<std::size_t>(n))) return 0;
    return n;
  }
  std::copy(s, s + n, pptr());
  pbump(static_cast<int>(n));
  return n;
}

bool FdBuf::drain() {
  const auto n = static_cast<std::size_t>(pptr() - pbase());
  setp(m_block.data(), m_block.data() + m_block.size());
  return n == 0 || put(m_block.data(), n);
}

bool FdBuf::put(const char* p, std::size_t n) {
  if (m_error != 0) return false;
  if (write_all(m_fd, std::string_view(p, n))) return true;
  fail(errno);
  return false;
}

void FdBuf::fail(int err) {
  m_error = err;
  if (m_on_fail) m_on_fail(err);
}

/// An output file written through its descriptor: the first write that fails requests a stop
/// naming the output.
class FileStream : public std::ostream {
 public:
  FileStream(int fd, const std::string& what)
      : std::ostream(nullptr), m_buf(fd, true, [what](int err) {
          request_stop(what + ": cannot write: " + reason(err) + "; the run stopped and nothing was written");
        }) {
    rdbuf(&m_buf);
  }
  /// Writes what is buffered and closes the descriptor; 0 or the errno of the first failure.
  int close() { return m_buf.close(); }

 private:
  FdBuf m_buf;
};

void check_stdout() {
  std::cout.flush();
  errno = 0;
  const bool flushed = std::fflush(stdout) == 0;
  int err = errno;
  if (const auto* own = dynamic_cast<const FdBuf*>(std::cout.rdbuf()); own && own->error() != 0) err = own->error();
  if (flushed && err == 0 && !std::ferror(stdout) && std::cout.good()) return;
  throw InputError("standard output: the report could not be written (" +
                   (err != 0 ? reason(err) : std::string("a write failed")) +
                   "); no file was written — print it somewhere with room, or give --json FILE");
}

Outputs::~Outputs() {
  for (auto& e : m_entries)
    if (e.tmpfd >= 0) ::close(e.tmpfd);  // an unnamed staging file vanishes with its last descriptor
  if (m_committed) return;
  for (auto& e : m_entries) {
    e.out.reset();  // closes the descriptor
    if (!e.temp.empty()) ::unlink(e.temp.c_str());
  }
  for (auto it = m_made.rbegin(); it != m_made.rend(); ++it) ::rmdir(it->c_str());  // only if empty
}

void Outputs::directory(const std::string& dir, const std::string& option) {
  const std::string what = option + " " + dir + ": ";
  std::error_code ec;
  const fs::path target = fs::absolute(dir, ec);
  if (ec) throw InputError(what + "cannot resolve the path: " + ec.message());
  std::vector<fs::path> missing;  // the deepest first
  for (fs::path p = target; !p.empty() && !fs::exists(p, ec); p = p.parent_path()) {
    missing.push_back(p);
    if (p == p.parent_path()) break;
  }
  if (fs::exists(target, ec) && !fs::is_directory(target, ec)) throw InputError(what + "is a file; give a directory");
  for (auto it = missing.rbegin(); it != missing.rend(); ++it) {
    if (::mkdir(it->c_str(), 0777) != 0 && errno != EEXIST)
      throw InputError(what + "cannot create the directory " + it->string() + ": " + reason(errno));
    m_made.push_back(it->string());
  }
  if (::access(target.c_str(), W_OK) != 0) throw InputError(what + "cannot write in the directory: " + reason(errno));
}

Outputs::Entry& Outputs::find(const std::string& path) {
  for (auto& e : m_entries)
    if (e.path == path) return e;
  throw std::logic_error("Outputs::stage: " + path + " was not added");
}

void Outputs::add(const std::string& path, const std::string& option) {
  if (path.empty()) return;
  Entry e{path, option, path, false, false, -1, {}, {}, {}};
  if (path == "-") {
    m_entries.push_back(e);
    return;
  }
  const std::string what = option + " " + path + ": ";
  std::error_code ec;
  // Follow symlinks to the file that will receive the text, a link to a file not yet made too
  // (the link stays, its target is created).
  fs::path link = fs::absolute(path, ec);
  struct stat ls {};
  for (int hops = 0; !ec && ::lstat(link.c_str(), &ls) == 0 && S_ISLNK(ls.st_mode); ++hops) {
    if (hops == 40) throw InputError(what + "too many levels of symbolic links");
    const fs::path to = fs::read_symlink(link, ec);
    link = to.is_absolute() ? to : link.parent_path() / to;
  }
  const fs::path real = ec ? fs::path() : fs::weakly_canonical(link, ec);
  if (ec) throw InputError(what + "cannot resolve the path: " + ec.message());
  e.real = real.string();
  struct stat st {};
  if (::stat(e.real.c_str(), &st) == 0) {
    if (S_ISDIR(st.st_mode)) throw InputError(what + "is a directory; give a file name");
    if (!S_ISREG(st.st_mode)) {  // FIFO, device, socket: written straight through
      if (::access(e.real.c_str(), W_OK) != 0) throw InputError(what + "cannot write: " + reason(errno));
      e.through = true;
      m_entries.push_back(e);
      return;
    }
  } else if (errno != ENOENT) {
    throw InputError(what + "cannot write: " + reason(errno));
  }
  const fs::path dir = real.parent_path();
  struct stat ds {};
  if (::stat(dir.c_str(), &ds) != 0 || !S_ISDIR(ds.st_mode))
    throw InputError(what + "directory " + dir.string() + " does not exist");
  if (::access(dir.c_str(), W_OK) != 0)
    throw InputError(what + "cannot write in " + dir.string() + ": " + reason(errno));
  for (const auto& other : m_entries)
    if (other.real == e.real && other.path != "-")
      throw InputError(what + "is also the destination of " + other.option + "; give each output its own file");
  m_entries.push_back(e);
}

std::ostream& Outputs::stream(const std::string& path) {
  Entry& e = find(path);
  e.staged = true;
  const int fd = e.through ? ::open(e.real.c_str(), O_WRONLY | O_CLOEXEC | O_APPEND) : open_staging(e);
  if (fd < 0) throw InputError(e.option + " " + path + ": cannot write: " + reason(errno));
  e.out = std::make_shared<FileStream>(fd, e.option + " " + path);
  return *e.out;
}

std::optional<std::int64_t> Outputs::free_bytes(const std::string& path) {
  const Entry& e = find(path);
  if (path == "-" || e.through) return std::nullopt;
  struct statvfs fs {};
  if (::statvfs(std::filesystem::path(e.real).parent_path().c_str(), &fs) != 0) return std::nullopt;
  return static_cast<std::int64_t>(fs.f_bavail) * static_cast<std::int64_t>(fs.f_frsize);
}

int Outputs::open_staging(Entry& e) {
  const fs::path real(e.real);
  // A new file gets the usual permissions; a replaced one keeps its own.
  const mode_t mask = ::umask(0);
  ::umask(mask);
  struct stat old {};
  const mode_t mode = ::stat(e.real.c_str(), &old) == 0 ? (old.st_mode & 07777) : (0666 & ~mask);
  // An unnamed file in the destination's directory: nothing is left behind however the process
  // ends, even by SIGKILL. It gets its name at commit.
  int tmp = ::open(real.parent_path().c_str(), O_TMPFILE | O_WRONLY | O_CLOEXEC, 0600);
  if (tmp >= 0 && tmp <= STDERR_FILENO) {  // never in a closed standard stream's place
    const int high = ::fcntl(tmp, F_DUPFD_CLOEXEC, STDERR_FILENO + 1);
    ::close(tmp);
    tmp = high;
  }
  if (tmp >= 0) {
    ::fchmod(tmp, mode);
    e.tmpfd = tmp;
    const int fd = ::fcntl(tmp, F_DUPFD_CLOEXEC, STDERR_FILENO + 1);
    if (fd < 0) throw InputError(e.option + " " + e.path + ": cannot write: " + reason(errno));
    return fd;
  }
  // A file system without unnamed files: a hidden one beside the destination, removed on failure.
  std::string pattern = (real.parent_path() / ("." + real.filename().string() + ".XXXXXX")).string();
  const int fd = ::mkstemp(pattern.data());
  if (fd < 0) throw InputError(e.option + " " + e.path + ": cannot write: " + reason(errno));
  ::fchmod(fd, mode);
  e.temp = pattern;
  return fd;
}

void Outputs::name_staged(Entry& e) {
  if (e.tmpfd < 0) return;
  const fs::path real(e.real);
  const std::string proc = "/proc/self/fd/" + std::to_string(e.tmpfd);
  for (unsigned n = 0;; ++n) {
    const std::string name = (real.parent_path() / ("." + real.filename().string() + "." + std::to_string(::getpid()) +
                                                    "." + std::to_string(n)))
                                 .string();
    if (::linkat(AT_FDCWD, proc.c_str(), AT_FDCWD, name.c_str(), AT_SYMLINK_FOLLOW) == 0 ||
        ::linkat(e.tmpfd, "", AT_FDCWD, name.c_str(), AT_EMPTY_PATH) == 0) {
      e.temp = name;
      break;
    }
    if (errno != EEXIST || n > 1000) throw InputError(e.option + " " + e.path + ": cannot write: " + reason(errno));
  }
  ::close(e.tmpfd);
  e.tmpfd = -1;
}

void Outputs::stage(const std::string& path, const std::string& text) {
  if (path.empty()) return;
  Entry& e = find(path);
  e.staged = true;
  if (path == "-" || e.through) {
    e.text = text;
    return;
  }
  const int fd = open_staging(e);
  const bool ok = write_all(fd, text) && ::fsync(fd) == 0;
  const int err = errno;
  if (::close(fd) != 0 || !ok) throw InputError(e.option + " " + path + ": cannot write: " + reason(ok ? errno : err));
}

void Outputs::commit() {
  check_stop();  // a signal before the end: nothing is put in place
  for (auto& e : m_entries) {
    if (!e.out) continue;
    const int err = e.out->close();
    e.out.reset();
    if (err != 0) throw InputError(e.option + " " + e.path + ": cannot write: " + reason(err));
  }
  // Devices and FIFOs first: one that cannot take its text (/dev/full) fails the command before
  // anything is printed or put in place.
  for (auto& e : m_entries) {
    if (!e.staged || !e.through || e.text.empty()) continue;
    const int fd = ::open(e.real.c_str(), O_WRONLY | O_APPEND);
    if (fd < 0 || !write_all(fd, e.text)) {
      const int err = errno;
      if (fd >= 0) ::close(fd);
      throw InputError(e.option + " " + e.path + ": cannot write: " + reason(err));
    }
    ::close(fd);
  }
  for (const auto& e : m_entries)
    if (e.staged && e.path == "-") std::cout << e.text;
  std::cout << m_printed;
  check_stdout();  // the printed report reached its reader before any file is put in place
  for (auto& e : m_entries)
    if (e.staged) name_staged(e);
  for (auto& e : m_entries) {
    if (!e.staged || e.temp.empty()) continue;
    if (::rename(e.temp.c_str(), e.real.c_str()) != 0)
      throw InputError(e.option + " " + e.path + ": cannot replace: " + reason(errno));
    e.temp.clear();
  }
  m_committed = true;
}

}  // namespace ascendsim::sim
