// The model zoo's exports: the cache, and running python/ascendsim/zoo.py for a missing one.
#include "sim/model_zoo.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <string>
#include <system_error>
#include <vector>

#include "sim/core/error.h"
#include "sim/core/stop.h"

extern char** environ;

namespace ascendsim::sim {

namespace fs = std::filesystem;

namespace {

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

/// `s` as one shell word.
std::string quoted(const std::string& s) {
  bool plain = !s.empty();
  for (char c : s)
    plain = plain && (std::isalnum(static_cast<unsigned char>(c)) || std::strchr("/._-+=:,@%", c) != nullptr);
  if (plain) return s;
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

/// The build tree's package next to this binary (bin/ascendsim -> python/ascendsim), or "".
std::string package_tree() {
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (ec) return "";
  const fs::path tree = exe.parent_path().parent_path() / "python";
  return fs::exists(tree / "ascendsim" / "zoo.py", ec) ? tree.string() : "";
}

std::string interpreter() {
  const std::string p = env("ASCENDSIM_PYTHON");
  return p.empty() ? "/usr/bin/python3" : p;
}

bool valid_entry(const std::string& n) {
  if (n.empty() || n[0] == '.' || n.size() > 128) return false;
  for (char c : n)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.')) return false;
  return true;
}

struct Outcome {
  bool ran = false;     // the interpreter started
  int status = 0;       // its exit status (128 + a signal that ended it)
  std::string error;    // its last `error: ` line, without the prefix; or why it did not start
};

/// Runs `args` with the package's PYTHONPATH, its stdout discarded and its stderr read for the last
/// `error:` line; a stop request (a signal) is passed on to it as SIGTERM and then thrown.
Outcome run_zoo(const std::vector<std::string>& args, const std::string& tree) {
  Outcome out;
  std::vector<std::string> envs;
  for (char** e = environ; *e; ++e)
    if (std::strncmp(*e, "PYTHONPATH=", 11) != 0) envs.emplace_back(*e);
  std::string path = tree;
  if (const std::string old = env("PYTHONPATH"); !old.empty()) path += (path.empty() ? "" : ":") + old;
  if (!path.empty()) envs.push_back("PYTHONPATH=" + path);
  std::vector<char*> argp, envp;
  std::vector<std::string> a = args;
  for (auto& s : a) argp.push_back(s.data());
  argp.push_back(nullptr);
  for (auto& s : envs) envp.push_back(s.data());
  envp.push_back(nullptr);

  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) {
    out.error = std::string("cannot make a pipe: ") + std::strerror(errno);
    return out;
  }
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_adddup2(&fa, fds[1], 2);
  pid_t pid = 0;
  const int spawned = posix_spawn(&pid, args[0].c_str(), &fa, nullptr, argp.data(), envp.data());
  posix_spawn_file_actions_destroy(&fa);
  close(fds[1]);
  if (spawned != 0) {
    close(fds[0]);
    out.error = "cannot run " + args[0] + ": " + std::strerror(spawned);
    return out;
  }
  out.ran = true;
  std::string err;
  bool open = true, stopped = false;
  int status = 0;
  for (;;) {
    if (!stopped && stop_requested()) {
      ::kill(pid, SIGTERM);  // the zoo removes its temporary file and exits
      stopped = true;
    }
    if (open) {
      pollfd p{fds[0], POLLIN, 0};
      if (poll(&p, 1, 50) > 0) {
        char buf[4096];
        const ssize_t n = read(fds[0], buf, sizeof buf);
        if (n > 0)
          err.append(buf, static_cast<std::size_t>(n));
        else if (n == 0 || errno != EINTR)
          open = false;
        continue;
      }
    } else {
      usleep(50000);
    }
    const pid_t w = waitpid(pid, &status, WNOHANG);
    if (w == pid) break;
    if (w < 0 && errno != EINTR) break;
  }
  close(fds[0]);
  check_stop();
  out.status = WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status);
  // The last `error: ` line (the zoo says why in one).
  std::size_t at = std::string::npos, from = 0;
  while ((from = err.find("error: ", from)) != std::string::npos) {
    if (from == 0 || err[from - 1] == '\n') at = from;
    from += 7;
  }
  if (at != std::string::npos) {
    out.error = err.substr(at + 7, err.find('\n', at) - (at + 7));
  } else if (!err.empty()) {  // not the zoo (another interpreter, a traceback): its last line
    std::string e = err;
    while (!e.empty() && (e.back() == '\n' || e.back() == ' ')) e.pop_back();
    out.error = e.substr(e.rfind('\n') == std::string::npos ? 0 : e.rfind('\n') + 1);
  }
  if (out.error.size() > 300) out.error = out.error.substr(0, 300) + "...";
  return out;
}

}  // namespace

std::string model_cache_dir() {
  std::string dir = env("ASCENDSIM_MODEL_CACHE");
  if (dir.empty()) {
    std::string base = env("XDG_CACHE_HOME");
    if (base.empty()) {
      const std::string home = env("HOME");
      if (home.empty())
        throw InputError(
            "the model cache: neither ASCENDSIM_MODEL_CACHE, XDG_CACHE_HOME nor HOME is set; set "
            "ASCENDSIM_MODEL_CACHE to a folder for the exported models");
      base = home + "/.cache";
    }
    dir = base + "/ascendsim/onnx";
  }
  std::error_code ec;
  const fs::path abs = fs::absolute(dir, ec);
  return ec ? dir : abs.lexically_normal().string();
}

std::string zoo_command(const std::string& name, const std::string& cache) {
  const std::string tree = package_tree();
  return (tree.empty() ? "" : "PYTHONPATH=" + quoted(tree) + " ") + quoted(interpreter()) + " -m ascendsim.zoo --out " +
         quoted(cache) + " " + quoted(name);
}

std::string zoo_model(const std::string& name, const std::string& at) {
  if (!valid_entry(name))
    throw InputError(at + ": 'export' names a model zoo entry (letters, digits, '-', '_', '.'), got '" + name +
                     "'; `python3 -m ascendsim.zoo --list` names them");
  const std::string cache = model_cache_dir();
  const std::string file = (fs::path(cache) / (name + ".onnx")).string();
  std::error_code ec;
  if (fs::is_regular_file(file, ec)) return file;
  const std::string command = zoo_command(name, cache);
  std::cerr << "exporting " << name << " to " << file << ": " << command << std::endl;
  const Outcome o = run_zoo({interpreter(), "-m", "ascendsim.zoo", "--out", cache, name}, package_tree());
  if (o.ran && o.status == 0 && fs::is_regular_file(file, ec)) return file;
  std::string why = o.error;
  if (why.empty()) why = o.ran ? "the command exited with status " + std::to_string(o.status) : "it did not start";
  if (o.ran && o.status == 0) why = "the command exited 0 without writing it";
  throw InputError(at + ": export '" + name + "': " + file + " is missing and could not be made (" + why +
                   "); make it with: " + command);
}

}  // namespace ascendsim::sim
