// The model zoo seen from the simulator: networks that are not built in, exported to ONNX by the
// package's python/ascendsim/zoo.py (PyTorch definitions, no weights downloaded) into a cache,
// and made on demand when a suite or figures run names one (`export: NAME`). The export itself
// (torch) is the package's; this only finds the file and runs the command that makes it.
#pragma once

#include <string>

namespace ascendsim::sim {

/// The folder of the exports: $ASCENDSIM_MODEL_CACHE, else ${XDG_CACHE_HOME:-$HOME/.cache}/ascendsim/onnx
/// (absolute).
std::string model_cache_dir();

/// The command that makes entry `name` in `cache`: `[PYTHONPATH=TREE] PYTHON -m ascendsim.zoo --out
/// CACHE NAME`, PYTHON being $ASCENDSIM_PYTHON or /usr/bin/python3 and TREE the build tree's package
/// next to this binary (as `tune` finds it), quoted for a shell.
std::string zoo_command(const std::string& name, const std::string& cache);

/// The file of zoo entry `name`, <cache>/NAME.onnx; when it is missing, makes it by running
/// zoo_command (a note on stderr; SIGINT, SIGTERM and SIGHUP stop the export, which leaves no partial
/// file, and throw Stopped). Throws InputError "`at`: ..." in one line naming the entry, the missing
/// file, why it could not be made (the zoo's own error) and the command that makes it.
std::string zoo_model(const std::string& name, const std::string& at);

}  // namespace ascendsim::sim
