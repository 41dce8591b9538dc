#include "sim/outputs.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iostream>

#include "sim/core/error.h"

namespace ascendsim::sim {

namespace fs = std::filesystem;

namespace {

std::string reason(int err) { return std::strerror(err); }

/// Writes all of `text` to `fd`; false with errno set on failure.
bool write_all(int fd, const std::string& text) {
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

Outputs::~Outputs() {
  if (m_committed) return;
  for (const auto& e : m_entries)
    if (!e.temp.empty()) ::unlink(e.temp.c_str());
}

Outputs::Entry& Outputs::find(const std::string& path) {
  for (auto& e : m_entries)
    if (e.path == path) return e;
  throw std::logic_error("Outputs::stage: " + path + " was not added");
}

void Outputs::add(const std::string& path, const std::string& option) {
  if (path.empty()) return;
  Entry e{path, option, path, false, false, {}, {}, {}};
  if (path == "-") {
    m_entries.push_back(e);
    return;
  }
  const std::string what = option + " " + path + ": ";
  std::error_code ec;
  // Follow symlinks to the file that will receive the text.
  const fs::path real = fs::weakly_canonical(fs::absolute(path), ec);
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
  const std::string target = e.through ? e.real : make_temp(e);
  e.out = std::make_shared<std::ofstream>(target, std::ios::binary | (e.through ? std::ios::app : std::ios::trunc));
  if (!*e.out) throw InputError(e.option + " " + path + ": cannot write: " + reason(errno));
  return *e.out;
}

std::string Outputs::make_temp(Entry& e) {
  const fs::path real(e.real);
  std::string pattern = (real.parent_path() / ("." + real.filename().string() + ".XXXXXX")).string();
  const int fd = ::mkstemp(pattern.data());
  if (fd < 0) throw InputError(e.option + " " + e.path + ": cannot write: " + reason(errno));
  // A new file gets the usual permissions (mkstemp makes it private); a replaced one keeps its own.
  const mode_t mask = ::umask(0);
  ::umask(mask);
  struct stat old {};
  ::fchmod(fd, ::stat(e.real.c_str(), &old) == 0 ? (old.st_mode & 07777) : (0666 & ~mask));
  ::close(fd);
  e.temp = pattern;
  return pattern;
}

void Outputs::stage(const std::string& path, const std::string& text) {
  if (path.empty()) return;
  Entry& e = find(path);
  e.staged = true;
  if (path == "-" || e.through) {
    e.text = text;
    return;
  }
  const int fd = ::open(make_temp(e).c_str(), O_WRONLY | O_TRUNC);
  if (fd < 0) throw InputError(e.option + " " + path + ": cannot write: " + reason(errno));
  const bool ok = write_all(fd, text) && ::fsync(fd) == 0;
  const int err = errno;
  if (::close(fd) != 0 || !ok) throw InputError(e.option + " " + path + ": cannot write: " + reason(ok ? errno : err));
}

void Outputs::commit() {
  for (auto& e : m_entries) {
    if (!e.out) continue;
    e.out->flush();
    if (!*e.out) throw InputError(e.option + " " + e.path + ": cannot write: " + reason(errno));
    e.out->close();
    e.out.reset();
  }
  for (auto& e : m_entries) {
    if (!e.staged || e.temp.empty()) continue;
    if (::rename(e.temp.c_str(), e.real.c_str()) != 0)
      throw InputError(e.option + " " + e.path + ": cannot replace: " + reason(errno));
    e.temp.clear();
  }
  for (auto& e : m_entries) {
    if (!e.staged) continue;
    if (e.path == "-") {
      std::cout << e.text << std::flush;
      continue;
    }
    if (!e.through || e.text.empty()) continue;
    const int fd = ::open(e.real.c_str(), O_WRONLY | O_APPEND);
    if (fd < 0 || !write_all(fd, e.text)) {
      const int err = errno;
      if (fd >= 0) ::close(fd);
      throw InputError(e.option + " " + e.path + ": cannot write: " + reason(err));
    }
    ::close(fd);
  }
  m_committed = true;
}

}  // namespace ascendsim::sim
