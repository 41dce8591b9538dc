// The entry of the command line: the command word looked up in the table of commands
// (sim/commands/commands.cpp), and what a command throws turned into a message and an exit code.
#include "sim/cli.h"

#include <exception>
#include <iostream>
#include <string>

#include <boost/program_options/errors.hpp>
#include <systemc>

#include "sim/commands/commands.h"
#include "sim/commands/messages.h"
#include "sim/core/error.h"
#include "sim/core/stop.h"
#include "sim/outputs.h"

namespace ascendsim::sim {

int run_cli(int argc, char* argv[]) {
  using namespace cli;
  sc_core::sc_report_handler::set_actions(sc_core::SC_INFO, sc_core::SC_DO_NOTHING);
  if (argc < 2 || std::string(argv[1]) == "--help" || std::string(argv[1]) == "-h") {
    std::cout << usage();
    return argc < 2 ? kExitInput : 0;
  }
  if (std::string(argv[1]) == "--version") {
    std::cout << "ascendsim " << ASCENDSIM_VERSION << " (SystemC " << SC_VERSION_MAJOR << "." << SC_VERSION_MINOR << "."
              << SC_VERSION_PATCH << ")\n";
    return 0;
  }
  const std::string command = argv[1];
  clear_stop();  // an earlier command's stop (the Python package runs many in one process)
  try {
    const Command* c = find_command(command);
    if (!c) {
      std::cerr << "error: unknown command '" << command << "'\n\n" << usage();
      return kExitInput;
    }
    // Options start after the command word.
    const int code = c->run(argc - 1, argv + 1);
    if (code == 0) check_stdout();  // a report lost on its way out is a failure
    return code;
  } catch (const Stopped& e) {
    std::cerr << "error: " << e.what() << "\n";
    return e.signal() != 0 ? 128 + e.signal() : kExitInput;
  } catch (const InputError& e) {
    std::cerr << "error: " << cli_message(e) << "\n";
    return kExitInput;
  } catch (const boost::program_options::error& e) {
    std::cerr << "error: " << e.what() << " (see `ascendsim " << command << " --help`)\n";
    return kExitInput;
  } catch (const RunError& e) {
    std::cerr << "error: " << e.what() << "\n";
    return kExitRunFailed;
  } catch (const std::exception& e) {
    std::cerr << "internal error: " << e.what() << "\n";
    return kExitInternal;
  }
}

}  // namespace ascendsim::sim
