// `ascendsim serve` and `make-image-folder` against hostile input, as a user types it: every bad
// value gets one `error:` line naming the flag, file or field, exit 2, and no output written or
// replaced; a signal stops a long run within a second with 128 + its number and nothing left.
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <set>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/cli_support.h"

namespace ascendsim {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::StartsWith;

class ServeCliTest : public test::CliFixture {
 protected:
  ServeCliTest() : CliFixture("ascendsim_serve_cli_") {}

  /// Every name in the test's directory (hidden ones too), but the captured streams.
  std::set<std::string> listing() const {
    std::set<std::string> out;
    for (const auto& e : fs::recursive_directory_iterator(m_dir)) {
      const std::string name = fs::relative(e.path(), m_dir).string();
      if (name != "stdout" && name != "stderr") out.insert(name);
    }
    return out;
  }
};

struct Hostile {
  const char* what;
  std::string args;   ///< after `serve`; {dir} is the test's directory
  const char* error;  ///< in the one error line
  const char* file = nullptr;
  const char* text = nullptr;  ///< the file's content (an arrivals file)
};

std::string expand(std::string s, const fs::path& dir) {
  for (auto at = s.find("{dir}"); at != std::string::npos; at = s.find("{dir}")) s.replace(at, 5, dir.string());
  return s;
}

TEST_F(ServeCliTest, EveryHostileInputGetsOneLineNamingWhatWasTypedAndWritesNothing) {
  const std::string llama = "--gpt-size llama-7b --server atlas800t-a2 --devices 4 --tensor-parallel 4 ";
  const std::vector<Hostile> cases = {
      {"a prompt past int64's sum", llama + "--prompt-tokens 9223372036854775807 --chunked-prefill true",
       "--prompt-tokens: from 1 to 2147483647 tokens, got 9223372036854775807"},
      {"a prompt no cache holds", llama + "--prompt-tokens 2147483647",
       "--prompt-tokens: a request of 2147483775 tokens (prompt and output) needs"},
      {"an output past int64", "--output-tokens 9223372036854775807", "--output-tokens: from 1 to 2147483647"},
      {"a negative seed", "--seed -1", "--seed -1: give a whole number from 0 to 18446744073709551615"},
      {"a seed past 2^64", "--seed 18446744073709551616", "--seed 18446744073709551616: give a whole number"},
      {"too many requests", "--requests 100000000000", "--requests: from 1 to 10000000 requests"},
      {"a rate that puts arrivals past the clock", "--rate 1e-300",
       "--rate: 100 requests at 1e-300 per second arrive past 1e+07 s"},
      {"a huge token budget", "--max-batched-tokens 9223372036854775807", "--max-batched-tokens: at most 2147483647"},
      {"a huge sequence budget", "--max-seqs 4000000000", "--max-seqs: at most 1048576"},
      {"a model that does not fit", "--gpt-size llama-7b --layers 200", "--gpt-size: no room for a KV cache block"},
      {"a cache beside a model that does not fit", "--gpt-size llama-7b --layers 200 --kv-blocks 10",
       "--gpt-size: no room for a KV cache block"},
      {"an ONNX model", "--model {dir}/m.onnx", "--model {dir}/m.onnx: serve runs the built-in decoders"},
      {"an arrivals directory", "--arrivals {dir}", "--arrivals: {dir} is a directory; give a JSONL file"},
      {"an arrival at 1e300 s", "--arrivals {dir}/a.jsonl",
       "{dir}/a.jsonl:1: arrival_s must be a number of seconds from 0 to 1e+07", "a.jsonl",
       "{\"arrival_s\": 1e300, \"prompt_tokens\": 10, \"output_tokens\": 5}\n"},
      {"a prompt past int64 in a file", llama + "--arrivals {dir}/a.jsonl",
       "{dir}/a.jsonl:1: prompt_tokens must be a whole number of tokens from 1 to 2147483647", "a.jsonl",
       "{\"arrival_s\": 1, \"prompt_tokens\": 9223372036854775807, \"output_tokens\": 5}\n"},
      {"a prompt past uint64's int64 in a file", "--arrivals {dir}/a.jsonl",
       "{dir}/a.jsonl:1: prompt_tokens must be a whole number", "a.jsonl",
       "{\"arrival_s\": 1, \"prompt_tokens\": 18446744073709551615, \"output_tokens\": 5}\n"},
      {"a fractional length", "--arrivals {dir}/a.jsonl", "{dir}/a.jsonl:1: output_tokens must be a whole number",
       "a.jsonl", "{\"arrival_s\": 1, \"prompt_tokens\": 5, \"output_tokens\": 2.5}\n"},
      {"an empty file", "--arrivals {dir}/a.jsonl", "--arrivals: {dir}/a.jsonl: holds no request", "a.jsonl", "\n"},
      {"arrivals out of order", "--arrivals {dir}/a.jsonl", "{dir}/a.jsonl:2: arrivals must be in time order",
       "a.jsonl",
       "{\"arrival_s\": 2, \"prompt_tokens\": 5, \"output_tokens\": 3}\n"
       "{\"arrival_s\": 1, \"prompt_tokens\": 5, \"output_tokens\": 3}\n"},
      {"a missing file", "--arrivals {dir}/none.jsonl", "--arrivals: {dir}/none.jsonl: cannot be read"},
      {"a rate beside a file", "--rate 3 --arrivals {dir}/a.jsonl", "--rate: the requests come from --arrivals",
       "a.jsonl", "{\"arrival_s\": 0, \"prompt_tokens\": 5, \"output_tokens\": 3}\n"},
      {"no KV heads", "--kv-heads 0", "--kv-heads: must be at least 1, got 0"},
      {"negative KV heads", "--kv-heads -2", "--kv-heads: must be at least 1, got -2"},
      {"KV heads past int64", "--kv-heads 9223372036854775808", "'--kv-heads' is invalid"},
      {"NaN KV heads", "--kv-heads nan", "'--kv-heads' is invalid"},
      {"KV heads that do not divide the heads", "--kv-heads 5", "--kv-heads: 5 key/value heads do not divide the 12"},
      {"an unknown framework", "--framework nope", "--framework: no preset 'nope'"},
      {"a framework given as a path", "--framework ../hosts/kunpeng920-4s",
       "--framework: '../hosts/kunpeng920-4s' is not a preset's name"},
      {"a framework given as a device", "--framework /dev/full", "--framework: '/dev/full' is not a preset's name"},
      {"a framework given as a directory", "--framework {dir}", "is not a preset's name"},
      {"a report into a directory", "--json {dir}", "--json {dir}: is a directory"},
      {"a report into a full device", "--requests 2 --json /dev/full", "--json /dev/full: cannot write"},
  };
  const fs::path keep = m_dir / "keep.json";
  for (const auto& c : cases) {
    SCOPED_TRACE(c.what);
    if (c.file) file(c.file, c.text);
    test::CliFixture::file("keep.json", "{\"old\": true}\n");
    struct stat kept {};
    ::stat(keep.c_str(), &kept);
    const std::set<std::string> before = listing();
    // A report destination that must not be touched, on every case but those naming their own.
    const std::string args = expand(c.args, m_dir);
    const bool own_json = args.find("--json") != std::string::npos;
    const test::CliResult r = run(
        "serve -q " + args + (own_json ? "" : " --json " + keep.string() + " --html " + (m_dir / "new.html").string()));
    EXPECT_EQ(r.code, 2) << r.err;
    EXPECT_THAT(r.err, StartsWith("error: "));
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;  // one line, no trace
    EXPECT_THAT(r.err, HasSubstr(expand(c.error, m_dir)));
    EXPECT_EQ(r.out, "");
    EXPECT_EQ(listing(), before) << "a file was written or left behind";
    EXPECT_EQ(slurp(keep), "{\"old\": true}\n");
    struct stat now {};
    ::stat(keep.c_str(), &now);
    EXPECT_EQ(now.st_ino, kept.st_ino) << "the report was replaced";
    if (c.file) fs::remove(m_dir / c.file);
  }
}

/// Runs `args` in a child with its streams in the test's directory; its pid.
pid_t spawn(const fs::path& dir, std::vector<std::string> args) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    const std::string err = (dir / "err").string();
    ::freopen("/dev/null", "w", stdout);
    ::freopen(err.c_str(), "w", stderr);
    ::setenv("ASCENDSIM_CONFIG_DIR", ASCENDSIM_SOURCE_DIR "/configs", 1);
    std::vector<char*> argv = {const_cast<char*>(ASCENDSIM_BIN)};
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    ::execv(ASCENDSIM_BIN, argv.data());
    ::_exit(127);
  }
  return pid;
}

/// Waits for `pid`; its status and the seconds it took.
std::pair<int, double> reap(pid_t pid) {
  const auto t0 = std::chrono::steady_clock::now();
  int status = 0;
  ::waitpid(pid, &status, 0);
  return {status, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count()};
}

class ServeSignalTest : public ServeCliTest, public ::testing::WithParamInterface<int> {};

TEST_P(ServeSignalTest, ALongServingRunStopsWithinASecondAndLeavesNothing) {
  const int signo = GetParam();
  const fs::path json = m_dir / "r.json";
  // Two million requests of 640 tokens: tens of seconds of scheduling, never done before the signal.
  const pid_t pid = spawn(m_dir, {"serve", "--requests", "2000000", "--rate", "30", "--json", json.string()});
  ASSERT_GT(pid, 0);
  ::usleep(3'000'000);
  ASSERT_EQ(::kill(pid, signo), 0);
  const auto [status, took] = reap(pid);
  ASSERT_TRUE(WIFEXITED(status)) << "killed by signal " << WTERMSIG(status);
  EXPECT_EQ(WEXITSTATUS(status), 128 + signo);
  EXPECT_LT(took, 1.0);
  EXPECT_THAT(slurp(m_dir / "err"), HasSubstr(std::string("stopped by SIG") + sigabbrev_np(signo)));
  EXPECT_EQ(listing(), std::set<std::string>{"err"});
}

INSTANTIATE_TEST_SUITE_P(Signals, ServeSignalTest, ::testing::Values(SIGINT, SIGTERM),
                         [](const auto& p) { return std::string(sigabbrev_np(p.param)); });

TEST_F(ServeCliTest, AKilledRunLeavesNoStagingFile) {
  // SIGKILL cannot be caught: the staged trace is an unnamed file, gone with the process.
  const fs::path trace = m_dir / "t.json";
  const pid_t pid = spawn(m_dir, {"compare", "--epochs", "500", "--trace", trace.string(), "--trace-steps", "1:21"});
  ASSERT_GT(pid, 0);
  bool staged = false, unnamed = false;  // the trace's staging file, open in the process
  for (int i = 0; i < 600 && !staged; ++i) {
    staged = staged_bytes(pid, &unnamed) > 0;
    if (!staged) ::usleep(20000);
  }
  ::kill(pid, SIGKILL);
  const auto [status, took] = reap(pid);
  ASSERT_TRUE(staged) << "the trace was never staged";
  EXPECT_TRUE(WIFSIGNALED(status));
  if (!unnamed) GTEST_SKIP() << m_dir << "'s file system has no unnamed files (O_TMPFILE): a hidden one was staged";
  EXPECT_EQ(listing(), std::set<std::string>{"err"});
}

TEST_F(ServeCliTest, AnImageFolderIsCheckedAgainstItsDiskAndStopsWholeOrNotAtAll) {
  const fs::path out = m_dir / "imgs";
  for (const auto& [args, error] : std::vector<std::pair<std::string, std::string>>{
           {"--classes 100000 --per-class 100000", "--per-class 100000: give 1 to 10 files per class"},
           {"--classes 0", "--classes 0: give 1 to 100000 class folders"},
           {"--per-class -3", "--per-class -3: give 1 to"},
           {"--seed -1", "--seed -1: give a whole number"}}) {
    SCOPED_TRACE(args);
    const test::CliResult r = run("make-image-folder --out " + out.string() + " " + args);
    EXPECT_EQ(r.code, 2);
    EXPECT_THAT(r.err, HasSubstr(error));
    EXPECT_EQ(listing(), std::set<std::string>{});
  }
  // A signal mid-way: exit 143, neither the folder nor its staging name left.
  const pid_t pid =
      spawn(m_dir, {"make-image-folder", "--out", out.string(), "--classes", "10", "--per-class", "100000"});
  bool writing = false;
  for (int i = 0; i < 500 && !writing; ++i) {
    for (const auto& name : listing()) writing = writing || name.find(".jpg") != std::string::npos;
    if (!writing) ::usleep(20000);
  }
  EXPECT_TRUE(writing);
  ASSERT_EQ(::kill(pid, SIGTERM), 0);
  const auto [status, took] = reap(pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 143);
  EXPECT_LT(took, 1.0);
  EXPECT_EQ(listing(), std::set<std::string>{"err"});
  // A whole folder appears under its name, and only then.
  const test::CliResult ok = run("make-image-folder --out " + out.string() + " --classes 2 --per-class 3");
  EXPECT_EQ(ok.code, 0) << ok.err;
  EXPECT_EQ(std::count_if(fs::recursive_directory_iterator(out), fs::recursive_directory_iterator(),
                          [](const auto& e) { return e.path().extension() == ".jpg"; }),
            6);
}

}  // namespace
}  // namespace ascendsim
