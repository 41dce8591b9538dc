// The options the commands share, parsed by one definition: the workload and its recipe, chip,
// server and --set (common_options), how long and what a run writes (run_options), how many
// devices and how the network is spread over them (parallel_options), into one `Options`, and the
// RunRequest they make. And reading a command line: parse() (with --help), the values options
// take, one output written.
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <boost/program_options.hpp>
#include <nlohmann/json.hpp>

#include "runtime/functional.h"
#include "sim/api.h"
#include "sim/config.h"
#include "workloads/workload.h"

namespace ascendsim::sim {
class Outputs;
}

namespace ascendsim::sim::cli {

namespace po = boost::program_options;
using nlohmann::ordered_json;

/// What the shared options set (each command reads the ones it adds).
struct Options {
  std::string workload = "lenet5";
  std::string model, mode = "train", loss = "softmax-cross-entropy", frozen;
  bool batch_given = false;  // --batch-size typed (else 32, or an ONNX model's own)
  workloads::RecipeOverrides recipe;
  std::string strategy;
  ConfigRequest config;
  std::int64_t epochs = 1;
  std::int64_t sink_size = -1;
  std::int64_t batch_size = 32;
  std::optional<std::int64_t> steps_per_epoch;  // unset: from the dataset
  std::int64_t devices = 1;
  std::string all_reduce_fusion, rank_table;
  std::vector<std::string> rank_sets;
  bool scaling = false;
  bool every_rank = false;
  std::string accuracy_curve, target_accuracy;
  bool parameter_broadcast = true;
  runtime::FunctionalOptions functional;
  std::string dump_batches, save_weights;
  std::string json;     // "" none, "-" stdout
  std::string dataset;  // directory of real files
  std::string data;     // a data script (sim/data_script.h): the pipeline as the training script builds it
  std::string hf_config;  // a Hugging Face config.json (sim/hf_config.h): the transformer, instead of --workload
  std::int64_t eval_every = 0;
  std::optional<std::int64_t> checkpoint_every, fault_seeds;
  bool checkpoint_async = false;
  std::optional<double> device_mtbf_hours;
  std::string eval_dataset;
  std::string dataset_index;
  std::string parallel_mode = "data", dataset_strategy, shard_strategy;
  std::int64_t tensor_parallel = 1;
  bool sequence_parallel = false;
  bool optimizer_shard = false, recompute = false;
  std::int64_t pipeline_stages = 1, micro_batches = 0, gradient_accumulation = 1;
  /// Not given: the lowest value (level 1 with --optimizer-shard); any value given is checked.
  std::int64_t optimizer_shard_level = std::numeric_limits<std::int64_t>::min();
  std::string trace, trace_steps, html, csv, per_step, step_trace;
  bool quiet = false;
  bool progress = false;
  std::vector<std::string> shortcut_sets;  // from --num-parallel-workers etc., applied before --set

  ConfigRequest request() const;
};


/// The workload, its recipe, the presets, --set, --json: every command that builds a workload.
po::options_description common_options(Options& o);
/// How long to run, the dataset, evaluation, the outputs, functional mode (run commands).
po::options_description run_options(Options& o);
/// How many devices and how the network is spread over them (run commands and info).
po::options_description parallel_options(Options& o);
/// --help's "workload:" list of the built-in workloads.
const std::string& workload_help();

/// A flag that stands for one parameter override (`--aicore-model event` for aicore.model=event):
/// applied before the --set overrides, and an error about it names the flag.
void shortcut(Options& o, const std::string& key, const std::string& flag, const std::string& value);

/// The option value of a seed (a whole number from 0 to 2^64 - 1), stored in `into`.
po::value_semantic* seed_value(std::uint64_t& into);

/// The request the options make, running `strategies`; checks the options that go together.
RunRequest make_request(const Options& o, const std::vector<runtime::Strategy>& strategies);
/// Every output of the command, checked before anything is simulated.
void add_outputs(Outputs& out, const Options& o);
/// The raw data file beside a weights index: FILE.json -> FILE.bin, else FILE.bin appended.
std::string weights_data_path(const std::string& index);
/// Progress on stderr: --progress, or a terminal unless --quiet.
bool progress_wanted(const Options& o);

/// Parses the options; a word that is not an option's value is an error, not silently ignored.
po::variables_map parse_options(int argc, char* argv[], const po::options_description& desc, const std::string& command,
                                const po::positional_options_description* positional = nullptr);
/// Parses and stores the options; false (the help printed) for --help.
bool parse(int argc, char* argv[], const po::options_description& desc, const std::string& command,
           const po::positional_options_description* positional = nullptr);
/// Writes one output (checked, staged, put in place).
void write_output(const std::string& path, const std::string& text, const std::string& option = "--json");

/// `s` as a whole number if all of it is one.
std::optional<std::int64_t> whole_number(const std::string& s);
/// `flag`'s A:B — steps A to B-1, numbered from 1 as every output numbers them — as the library's
/// 0-based step indices [A-1, B-1).
std::pair<std::int64_t, std::int64_t> parse_step_window(const std::string& s, const std::string& flag);
/// A comma-separated list of non-empty items; an empty item is an error naming `option`.
std::vector<std::string> split_list(const std::string& s, const std::string& option);
/// A comma-separated list as given, empty items kept; none for "".
std::vector<std::string> comma_list(const std::string& s);
/// A non-negative share given as a percentage ("1%") or, without the sign, as a fraction ("0.01")
/// or, if `bare_is_percent`, as a percentage ("15").
double parse_share(const std::string& text, const std::string& option, bool bare_is_percent);

}  // namespace ascendsim::sim::cli
