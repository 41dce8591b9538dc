// The commands of the ascendsim command line, in one table: each command's name, its line of
// `ascendsim --help` and the function that runs it. A command lives in a file of its own under
// sim/commands/ (a family of commands that share much, in one file) and is listed once, in
// commands.cpp; `ascendsim --help` and the dispatch in sim/cli.cpp read the table.
#pragma once

#include <string>
#include <vector>

namespace ascendsim::sim::cli {

/// Exit codes (sim/cli.h says when each is given).
constexpr int kExitInternal = 1;
constexpr int kExitInput = 2;
constexpr int kExitRunFailed = 3;

/// One command. `run` gets the words from the command on (argv[0] is the command's name) and
/// returns the exit code; it throws InputError, RunError or boost's option errors, which
/// run_cli turns into messages and exit codes.
struct Command {
  const char* name;
  const char* help;  ///< its line of `ascendsim --help`
  int (*run)(int argc, char* argv[]);
};

/// Every command, in the order `ascendsim --help` lists them.
const std::vector<Command>& commands();
/// The command named `name`, or null.
const Command* find_command(const std::string& name);
/// `ascendsim --help`: the commands of the table with their lines.
std::string usage();

// The commands' functions, each defined in its file of sim/commands/.
int cmd_compare(int argc, char* argv[]);            // run.cpp
int cmd_train(int argc, char* argv[]);              // run.cpp
int cmd_sweep(int argc, char* argv[]);              // sweep.cpp
int cmd_advise_fusion(int argc, char* argv[]);      // advise_fusion.cpp
int cmd_serve(int argc, char* argv[]);              // serve.cpp
int cmd_tune(int argc, char* argv[]);               // tune.cpp
int cmd_info(int argc, char* argv[]);               // info.cpp
int cmd_op(int argc, char* argv[]);                 // op.cpp
int cmd_aicore_check(int argc, char* argv[]);       // aicore_check.cpp
int cmd_params(int argc, char* argv[]);             // params.cpp
int cmd_stats(int argc, char* argv[]);              // stats.cpp
int cmd_profile(int argc, char* argv[]);            // profile.cpp
int cmd_validate(int argc, char* argv[]);           // validate.cpp
int cmd_calibrate(int argc, char* argv[]);          // validate.cpp
int cmd_suite(int argc, char* argv[]);              // suite.cpp
int cmd_diff(int argc, char* argv[]);               // diff.cpp
int cmd_chips(int argc, char* argv[]);              // presets.cpp
int cmd_servers(int argc, char* argv[]);            // presets.cpp
int cmd_calibrate_host(int argc, char* argv[]);     // validate.cpp
int cmd_make_image_folder(int argc, char* argv[]);  // make_image_folder.cpp

}  // namespace ascendsim::sim::cli
