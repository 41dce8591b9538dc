// A fixture for the tests that run the ascendsim binary: a fresh directory per test, the binary
// run through the shell on the source tree's presets, its exit code and both streams.
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>

#include <gtest/gtest.h>

namespace ascendsim::test {

struct CliResult {
  int code;
  std::string out, err;
};

class CliFixture : public ::testing::Test {
 protected:
  /// `prefix`: the test directory's name before the process id and the test's name.
  explicit CliFixture(std::string prefix) : m_prefix(std::move(prefix)) {}

  void SetUp() override {
    m_dir = std::filesystem::temp_directory_path() /
            (m_prefix + std::to_string(::getpid()) + "_" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(m_dir);
  }
  void TearDown() override { std::filesystem::remove_all(m_dir); }

  static std::string slurp(const std::filesystem::path& p) {
    std::ifstream f(p, std::ios::binary);
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
  }

  /// The shell words that run ascendsim with `args` on the source tree's presets.
  static std::string command(const std::string& args) {
    return "ASCENDSIM_CONFIG_DIR=" ASCENDSIM_SOURCE_DIR "/configs " ASCENDSIM_BIN " " + args;
  }

  CliResult run(const std::string& args) {
    const std::filesystem::path out = m_dir / "stdout", err = m_dir / "stderr";
    const std::string cmd = command(args) + " >" + out.string() + " 2>" + err.string();
    const int status = std::system(cmd.c_str());
    return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, slurp(out), slurp(err)};
  }

  /// Writes `text` to `name` in the test's directory; its path.
  std::string file(const std::string& name, const std::string& text) {
    std::ofstream(m_dir / name) << text;
    return (m_dir / name).string();
  }

  /// The bytes written so far to a file process `pid` is staging in the test's directory: an
  /// unnamed one (O_TMPFILE, seen in /proc/PID/fd as "DIR/#N (deleted)") or a hidden named one;
  /// -1 if there is none yet. `unnamed` tells which it was.
  std::int64_t staged_bytes(pid_t pid, bool* unnamed = nullptr) const {
    namespace fs = std::filesystem;
    std::error_code ec;
    std::int64_t most = -1;
    for (const auto& fd : fs::directory_iterator("/proc/" + std::to_string(pid) + "/fd", ec)) {
      const std::string to = fs::read_symlink(fd.path(), ec).string();
      if (ec || to.rfind(m_dir.string() + "/#", 0) != 0) continue;
      const auto size = fs::file_size(fd.path(), ec);
      if (ec) continue;
      most = std::max(most, static_cast<std::int64_t>(size));
      if (unnamed) *unnamed = true;
    }
    for (const auto& e : fs::directory_iterator(m_dir, ec))
      if (e.path().filename().string().front() == '.' && e.is_regular_file(ec)) {
        most = std::max(most, static_cast<std::int64_t>(e.file_size(ec)));
        if (unnamed) *unnamed = false;
      }
    return most;
  }

  std::filesystem::path m_dir;

 private:
  std::string m_prefix;
};

}  // namespace ascendsim::test
