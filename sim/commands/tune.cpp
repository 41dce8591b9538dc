// `tune`: the knob search, which runs in Python (Optuna); this starts it and passes signals on.

#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>
#include <system_error>

#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <iterator>
#include <string>
#include <vector>

#include "sim/commands/commands.h"
#include "sim/commands/options.h"
#include "sim/core/error.h"

namespace ascendsim::sim::cli {

/// `ascendsim tune`: the search runs in Python (Optuna, python3 -m ascendsim tune, docs/tune.md);
/// this runs it with Debian's interpreter, the build tree's package first when the binary is in one.
int cmd_tune(int argc, char* argv[]) {
  std::vector<std::string> args = {"/usr/bin/python3", "-m", "ascendsim", "tune"};
  for (int a = 1; a < argc; ++a) args.emplace_back(argv[a]);
  std::string path;
  std::error_code ec;
  const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  const std::filesystem::path tree = exe.parent_path().parent_path() / "python";
  if (!ec && std::filesystem::exists(tree / "ascendsim" / "__init__.py")) path = tree.string();
  if (const char* old = std::getenv("PYTHONPATH"); old && *old) path += (path.empty() ? "" : ":") + std::string(old);
  std::vector<std::string> env;
  for (char** e = environ; *e; ++e)
    if (std::string(*e).rfind("PYTHONPATH=", 0) != 0 && std::string(*e).rfind("ASCENDSIM_PROG=", 0) != 0)
      env.emplace_back(*e);
  if (!path.empty()) env.push_back("PYTHONPATH=" + path);
  env.push_back("ASCENDSIM_PROG=ascendsim");  // its usage and errors say `ascendsim tune`
  std::vector<char*> argp, envp;
  for (auto& s : args) argp.push_back(s.data());
  argp.push_back(nullptr);
  for (auto& s : env) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::cout.flush();
  // SIGINT, SIGTERM and SIGHUP are passed on to the search, which stops within a second, removes
  // what it staged and exits 128 + the signal; this process then exits with its status. The
  // signals are blocked here until the child's id is known (one that arrives meanwhile is passed
  // on when they are unblocked), and in the child until its handlers are in place (its main()
  // unblocks them): one that comes while Python starts waits for them.
  static volatile sig_atomic_t child = 0;
  constexpr int kForwarded[] = {SIGINT, SIGTERM, SIGHUP};
  struct sigaction forward {}, previous[std::size(kForwarded)]{};
  forward.sa_handler = [](int signo) {
    if (child > 0) ::kill(static_cast<pid_t>(child), signo);
  };
  sigemptyset(&forward.sa_mask);
  forward.sa_flags = SA_RESTART;
  sigset_t block, unblocked;
  sigemptyset(&block);
  for (int s : kForwarded) sigaddset(&block, s);
  sigprocmask(SIG_BLOCK, &block, &unblocked);
  for (std::size_t i = 0; i < std::size(kForwarded); ++i) sigaction(kForwarded[i], &forward, &previous[i]);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t starting = unblocked;
  for (int s : kForwarded) sigaddset(&starting, s);
  posix_spawnattr_setsigmask(&attr, &starting);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK);
  pid_t pid = 0;
  const int spawned = posix_spawn(&pid, args[0].c_str(), nullptr, &attr, argp.data(), envp.data());
  posix_spawnattr_destroy(&attr);
  if (spawned == 0) child = pid;
  sigprocmask(SIG_SETMASK, &unblocked, nullptr);  // a signal that came meanwhile is passed on now
  int status = 0;
  bool lost = false;
  while (spawned == 0 && waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) {
      lost = true;
      break;
    }
  child = 0;
  for (std::size_t i = 0; i < std::size(kForwarded); ++i) sigaction(kForwarded[i], &previous[i], nullptr);
  if (spawned != 0)
    throw InputError("tune: cannot run /usr/bin/python3 (the search needs Debian's python3 with python3-optuna)");
  if (lost) throw InputError("tune: lost the search's process");
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return WEXITSTATUS(status);
}

}  // namespace ascendsim::sim::cli
