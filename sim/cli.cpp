#include "sim/cli.h"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <sstream>
#include <tuple>

#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cerrno>
#include <functional>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <boost/program_options.hpp>
#include <systemc>

#include "aicore/event_model.h"
#include "runtime/calibrate.h"
#include "runtime/data_pipeline.h"
#include "runtime/dataset_files.h"
#include "runtime/functional.h"
#include "runtime/graph_compiler.h"
#include "runtime/html_report.h"
#include "runtime/image_ops.h"
#include "runtime/report.h"
#include "sim/api.h"
#include "sim/config.h"
#include "sim/core/error.h"
#include "sim/core/stop.h"
#include "sim/outputs.h"
#include "sim/rank_table.h"
#include "sim/regression.h"
#include "sim/serve.h"
#include "sim/system.h"
#include "workloads/parallel.h"
#include "workloads/workload.h"

namespace ascendsim::sim {

namespace po = boost::program_options;
using nlohmann::ordered_json;

namespace {

constexpr int kExitInternal = 1;
constexpr int kExitInput = 2;
constexpr int kExitRunFailed = 3;

const char* kUsage =
    "usage: ascendsim <command> [options]\n"
    "\n"
    "commands:\n"
    "  compare   run the workload under all four strategies and compare them\n"
    "  train     run the workload under one strategy (--strategy)\n"
    "  sweep     run the strategies over values of sink_size or any parameter (--param, --values)\n"
    "  advise-fusion  search AllReduce fusion splits (all_reduce_fusion) for the shortest step\n"
    "  serve     LLM serving: requests batched continuously over a paged KV cache, per launch mode\n"
    "  tune      search a job's knobs for the best configuration, and say why (Optuna; python3 -m ascendsim tune)\n"
    "  info      parameters, MACs, ops and device memory of a workload\n"
    "  op        one op on the AI cores: cycles per pipe, tiling, what bounds it (--aicore-model event: timeline)\n"
    "  aicore-check  every op of a step timed by the analytic and the event AI-core model, side by side\n"
    "  params    every configuration parameter with unit, default and description\n"
    "  stats     every statistic a run reports, with unit and description\n"
    "  profile   AI-core op tables of one step with MindSpore profiler columns (--out DIR)\n"
    "  validate  published Ascend 910 figures against the simulated ones\n"
    "  calibrate  fit host parameters jointly to published figures, within bounds, with leave-one-out errors\n"
    "  suite     run a suite of named runs (YAML) into a directory of reports\n"
    "  diff      compare two reports or suite outputs figure by figure (exit 1 past --tolerance)\n"
    "  chips     the chip presets\n"
    "  servers   the server presets (host, link, devices, chip)\n"
    "  calibrate-host  measure this host's data-pipeline costs and write a host profile (--out)\n"
    "  make-image-folder  write an image folder of photo-like JPEGs (ImageNet-like sizes) for --dataset\n"
    "\n"
    "`ascendsim <command> --help` lists the command's options; `ascendsim --version` the version.\n";

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
  std::int64_t eval_every = 0;
  std::string eval_dataset;
  std::string dataset_index;
  std::string parallel_mode = "data", dataset_strategy, shard_strategy;
  std::int64_t tensor_parallel = 1;
  bool optimizer_shard = false, recompute = false;
  std::int64_t pipeline_stages = 1, micro_batches = 0;
  std::string trace, trace_steps, html, csv, per_step, step_trace;
  bool quiet = false;
  bool progress = false;
  std::vector<std::string> shortcut_sets;  // from --num-parallel-workers etc., applied before --set

  ConfigRequest request() const;
};

std::map<std::string, std::string>& typed();

/// A seed as typed: a whole number from 0 to 2^64 - 1. (Read straight into an unsigned integer,
/// "-1" would wrap round to 2^64 - 1.)
struct Seed {
  std::uint64_t value;
};
void validate(boost::any& v, const std::vector<std::string>& values, Seed*, int) {
  po::validators::check_first_occurrence(v);
  const std::string& s = po::validators::get_single_string(values);
  std::uint64_t x = 0;
  const bool digits = !s.empty() && s.size() <= 20 && std::all_of(s.begin(), s.end(), [](char c) {
    return std::isdigit(static_cast<unsigned char>(c));
  });
  if (digits) {
    errno = 0;
    x = std::strtoull(s.c_str(), nullptr, 10);
  }
  if (!digits || errno == ERANGE)
    throw InputError("--seed " + s + ": give a whole number from 0 to 18446744073709551615");
  v = boost::any(Seed{x});
}
/// The option value of a seed, stored in `into`.
po::typed_value<Seed>* seed_value(std::uint64_t& into) {
  return po::value<Seed>()->default_value(Seed{into}, std::to_string(into))->notifier([&into](Seed s) {
    into = s.value;
  });
}

/// A flag that stands for one parameter override: applied before the --set overrides, and an
/// error about it names the flag.
void shortcut(Options& o, const std::string& key, const std::string& flag, const std::string& value) {
  const std::string set = key + "=" + value;
  o.shortcut_sets.push_back(set);
  typed()[override_origin(set)] = flag + " " + value;
}

ConfigRequest Options::request() const {
  ConfigRequest r = config;
  r.dir = default_config_dir();
  r.sets.insert(r.sets.begin(), shortcut_sets.begin(), shortcut_sets.end());
  for (const auto& s : config.sets) typed().emplace(override_origin(s), "--set " + s);
  // Each parameter is set once: of two settings, neither silently wins.
  std::map<std::string, std::string> first;  // key -> the words that set it
  for (const auto& s : r.sets) {
    const std::string words = typed().at(override_origin(s));
    const auto [at, fresh] = first.emplace(s.substr(0, s.find('=')), words);
    if (!fresh)
      throw InputError(words + ": " + at->first + " is already set by " + at->second +
                       "; give each parameter once");
  }
  return r;
}

const std::string& op_types_help() {
  static const std::string text = [] {
    std::string t;
    for (auto k : aicore::all_op_kinds()) t += (t.empty() ? "" : " | ") + std::string(aicore::op_kind_name(k));
    return t;
  }();
  return text;
}

const std::string& workload_help() {
  static const std::string text = [] {
    std::string t = "workload:";
    for (const auto& n : workloads::workload_names()) t += " " + n;
    return t;
  }();
  return text;
}

po::options_description common_options(Options& o) {
  po::options_description d("options");
  d.add_options()("help,h", "show this help")("workload,w", po::value(&o.workload)->default_value(o.workload),
                                              workload_help().c_str())(
      "server", po::value(&o.config.server),
      "server preset (`ascendsim servers`): its host, link, HCCS networks, devices per host and chip (default "
      "generic-x86)")("chip", po::value(&o.config.chip),
                      "chip preset (`ascendsim chips`; default: the server's, ascend910 on generic-x86)")(
      "config", po::value(&o.config.config_file), "YAML file overriding preset parameters")(
      "set", po::value(&o.config.sets)->composing(), "override one parameter, key=value (repeatable)")(
      "model", po::value(&o.model),
      "an ONNX file (e.g. from torch.onnx.export): the network to run, instead of --workload (docs/onnx.md)")(
      "mode", po::value(&o.mode)->default_value(o.mode), "train | infer: a training step, or the forward pass only")(
      "loss", po::value(&o.loss),
      "an ONNX model's training loss: softmax-cross-entropy (of its output against integer labels; the default) | "
      "none (the model's output is its loss)")(
      "frozen", po::value(&o.frozen),
      "an ONNX model's initializers not trained, comma-separated (PyTorch's buffers read as data, e.g. rotary "
      "tables cos,sin); masks are found without it")(
      "batch-size", po::value<std::int64_t>()->notifier([&o](std::int64_t v) {
        o.batch_size = v;
        o.batch_given = true;
      }),
      "samples per step (default 32; with --model, the model's own unless its batch axis is symbolic)")(
      "amp-level", po::value<std::string>()->notifier([&o](const std::string& v) { o.recipe.amp_level = v; }),
      "O0 | O2 | O3: fp32; fp16 network with fp32 master weights; all fp16 (default: the workload's script — "
      "lenet5 O0, ResNet O2)")(
      "keep-batchnorm-fp32", po::value<std::string>()->notifier([&o](const std::string& v) {
        if (v != "true" && v != "false") throw InputError("--keep-batchnorm-fp32 '" + v + "': use true or false");
        o.recipe.keep_batchnorm_fp32 = v == "true";
      }),
      "true | false: O2 BatchNorm in fp32 between casts (default false, as the ResNet script)")(
      "loss-scale", po::value<double>()->notifier([&o](double v) { o.recipe.loss_scale = v; }),
      "fixed loss scale (default: ResNet 1024, lenet5 none)")(
      "graph-kernel-fusion", po::bool_switch()->notifier([&o](bool v) {
        if (v) o.recipe.graph_kernel_fusion = true;
      }),
      "fuse chains of element-wise ops into one kernel each, as MindSpore's enable_graph_kernel (default off)")(
      "optimizer", po::value<std::string>()->notifier([&o](const std::string& v) { o.recipe.optimizer = v; }),
      "momentum | lars: the workload script's Momentum, or LARS over it on the weights (MindSpore's nn.LARS, as "
      "MLPerf ResNet-50 submissions train at large batch: SquareSumAll and LARSUpdate per weight; ResNet and "
      "MobileNetV2)")("layers", po::value<std::int64_t>()->notifier([&o](std::int64_t v) { o.recipe.layers = v; }),
                      "transformers: layers (default: the preset's)")(
      "hidden", po::value<std::int64_t>()->notifier([&o](std::int64_t v) { o.recipe.hidden = v; }),
      "transformers: hidden width")("heads",
                                    po::value<std::int64_t>()->notifier([&o](std::int64_t v) { o.recipe.heads = v; }),
                                    "transformers: attention heads")(
      "ffn", po::value<std::int64_t>()->notifier([&o](std::int64_t v) { o.recipe.ffn = v; }),
      "transformers: the MLP's inner width")(
      "seq-length", po::value<std::int64_t>()->notifier([&o](std::int64_t v) { o.recipe.seq_length = v; }),
      "transformers: tokens per sequence (BERT's masked predictions follow: 20 per 128)")(
      "vocab", po::value<std::int64_t>()->notifier([&o](std::int64_t v) { o.recipe.vocab = v; }),
      "transformers: vocabulary size")(
      "flash-attention", po::value<std::string>()->notifier([&o](const std::string& v) {
        if (v != "true" && v != "false") throw InputError("--flash-attention '" + v + "': use true or false");
        o.recipe.flash_attention = v == "true";
      }),
      "transformers, true | false: attention as the fused FlashAttentionScore kernel (default: where the chip's "
      "backend has it, aicore.flash_attention: ascend910b)")(
      "ub-fusion", po::value<std::string>()->notifier([&o](const std::string& v) {
        if (v != "true" && v != "false") throw InputError("--ub-fusion '" + v + "': use true or false");
        o.recipe.ub_fusion = v == "true";
      }),
      "true | false: the Ascend backend's UB (buffer) fusion of a kernel with the consumers of its result, e.g. "
      "Conv2D + BNTrainingReduce, BNTrainingUpdate + ReLU (default true, as MindSpore's graph mode; not the "
      "AllReduce fusion of advise-fusion)")(
      "aicore-model", po::value<std::string>()->notifier([&o](const std::string& v) {
        shortcut(o, "aicore.model", "--aicore-model", v);
      }),
      "analytic | event: how each AI-core op is timed (aicore.model; default analytic; "
      "event simulates every pipe of the busiest block, docs/aicore.md)")(
      "json", po::value(&o.json)->implicit_value("-"), "write the JSON report to FILE ('-' or no value: stdout)");
  return d;
}

/// The preset values the shortcut flags stand for, for --help (the built-in ones if the presets
/// cannot be read).
const SystemConfig& help_defaults() {
  static const SystemConfig cfg = [] {
    ConfigRequest r;
    r.dir = default_config_dir();
    try {
      return load_config(r);
    } catch (const std::exception&) {
      return SystemConfig{};
    }
  }();
  return cfg;
}

/// How many devices and how the network is spread over them (run commands and info).
po::options_description parallel_options(Options& o) {
  po::options_description d("parallel options");
  d.add_options()("devices", po::value(&o.devices)->default_value(o.devices),
                  "devices on one server (1 to 8) or whole servers: data parallel, each rank reads 1/N of the "
                  "dataset and gradients are summed by AllReduce; or semi-auto (--parallel-mode)")(
      "parallel-mode", po::value(&o.parallel_mode)->default_value(o.parallel_mode),
      "data (every rank the whole model) | semi-auto (operators sharded by --dataset-strategy and "
      "--shard-strategy, with the collectives the layouts need)")(
      "dataset-strategy", po::value(&o.dataset_strategy),
      "semi-auto: how each batch tensor is cut, MindSpore's dataset_strategy, e.g. \"((1,1,1,4),(1,))\" (default: "
      "the batch across every device)")(
      "shard-strategy", po::value(&o.shard_strategy),
      "semi-auto: a YAML file of layer (op name or cell) to its shard strategy, e.g. layer1: \"((1,4),(1,4))\"")(
      "tensor-parallel", po::value(&o.tensor_parallel)->default_value(o.tensor_parallel),
      "transformers: Megatron tensor parallelism over groups of this many adjacent ranks (attention heads and MLP "
      "split; the groups data parallel); --batch-size is then each group's")(
      "optimizer-shard", po::bool_switch(&o.optimizer_shard),
      "shard the optimizer state across the ranks that hold the same weights (MindSpore's optimizer_shard, ZeRO-1): "
      "gradients reduce-scattered, each rank updating its piece, the pieces all-gathered")(
      "recompute", po::bool_switch(&o.recompute),
      "transformers: run every layer's forward again in the backward pass, keeping only each layer's input "
      "(MindSpore's recompute)")(
      "pipeline-stages", po::value(&o.pipeline_stages)->default_value(o.pipeline_stages),
      "transformers: divide the layers among this many stages of consecutive ranks, micro-batches in the 1F1B "
      "order (MindSpore's pipeline_stages); --batch-size is then each pipeline's")(
      "micro-batches", po::value(&o.micro_batches)->default_value(o.micro_batches),
      "pipeline parallelism: the micro-batches of a step (MindSpore's micro_size; 0: as many as the stages)");
  return d;
}

po::options_description run_options(Options& o) {
  static const std::string workers_help =
      fmt::format("data pipeline map workers (pipeline.num_parallel_workers; default {})",
                  help_defaults().pipeline.num_parallel_workers);
  static const std::string timeout_help =
      fmt::format("seconds a device op (GetNext) may wait before the run fails (aicpu.op_timeout_s; default {} s)",
                  help_defaults().chip.aicpu.op_timeout_s);
  static const std::string cache_help =
      fmt::format("data cache: none | source | map (after the last deterministic map) (pipeline.cache; default {})",
                  help_defaults().pipeline.cache);
  po::options_description d("run options");
  d.add_options()("epochs", po::value(&o.epochs)->default_value(o.epochs), "epochs (E)")(
      "sink-size", po::value(&o.sink_size)->default_value(o.sink_size),
      "loop sink: steps per graph launch (S); -1 = one epoch")(
      "steps-per-epoch", po::value<std::int64_t>()->notifier([&o](std::int64_t v) { o.steps_per_epoch = v; }),
      "use a synthetic dataset of this many batches per epoch (default: the workload's dataset)")(
      "scaling", po::bool_switch(&o.scaling),
      "also run the job on 1, 2, 4, 8 devices and whole servers doubling up to N; report samples/s and "
      "the scaling efficiency against one device")(
      "rank-set", po::value(&o.rank_sets)->composing(),
      "one rank's own host or pipeline setting, RANK:key=value (repeatable), e.g. "
      "3:pipeline.num_parallel_workers=1 for a straggler")(
      "every-rank", po::bool_switch(&o.every_rank),
      "simulate every rank of a cluster, even where servers are alike (by default a server kind is simulated "
      "once and stands for the others: the same report, faster; a trace always has every rank)")(
      "rank-table", po::value(&o.rank_table),
      "MindSpore rank table (RANK_TABLE_FILE, the seed's format or version 1.0): the job's devices and "
      "servers")("all-reduce-fusion", po::value(&o.all_reduce_fusion),
                 "AllReduce groups as each group's last gradient index in gradient order, e.g. 85,160 (MindSpore's "
                 "all_reduce_fusion_config; default one group after the backward pass)")(
      "parameter-broadcast", po::value<std::string>()->notifier([&o](const std::string& v) {
        if (v != "true" && v != "false") throw InputError("--parameter-broadcast '" + v + "': use true or false");
        o.parameter_broadcast = v == "true";
      }),
      "true | false: broadcast the initialised parameters from rank 0 before training (default true, as "
      "MindSpore's DATA_PARALLEL mode)")(
      "dataset", po::value(&o.dataset),
      "directory with MNIST idx files (lenet5) or CIFAR-10 binary batches (resnet50-cifar10); the epoch length "
      "comes from the files")("num-parallel-workers", po::value<std::string>()->notifier([&o](const std::string& v) {
    shortcut(o, "pipeline.num_parallel_workers", "--num-parallel-workers", v);
  }),
                              workers_help.c_str())("op-timeout",
                                                    po::value<std::string>()->notifier([&o](const std::string& v) {
                                                      shortcut(o, "aicpu.op_timeout_s", "--op-timeout", v);
                                                    }),
                                                    timeout_help.c_str())(
      "cache",
      po::value<std::string>()->notifier([&o](const std::string& v) { shortcut(o, "pipeline.cache", "--cache", v); }),
      cache_help.c_str())(
      "dataset-index", po::value(&o.dataset_index),
      "an image folder's JPEG headers cached in FILE (e.g. beside the report): read instead of the headers "
      "while every file keeps its name, size and time; written after a scan")(
      "eval-every", po::value(&o.eval_every),
      "evaluate on the evaluation dataset after every N epochs (sinks under loop sink), as MindSpore's "
      "EvalCallBack: a forward-only pass with its own pipeline and channel; the report times each pass")(
      "accuracy-curve", po::value(&o.accuracy_curve),
      "with --target-accuracy: a CSV of epoch,accuracy (measured or published; convergence is an input, not "
      "simulated); the run trains to the first evaluation (--eval-every) at which it reaches the target")(
      "target-accuracy", po::value(&o.target_accuracy),
      "the evaluation accuracy to reach (0.759 or 75.9%), read from --accuracy-curve")(
      "eval-dataset", po::value(&o.eval_dataset),
      "an image folder to evaluate on (ImageNet workloads; default: a synthetic 50,000-image validation set)")(
      "eval-cache", po::value<std::string>()->notifier([&o](const std::string& v) {
        shortcut(o, "pipeline.eval_cache", "--eval-cache", v);
      }),
      "none | map | source: cache the evaluation pipeline after its last map (the seed's eval cache) or its "
      "source; the first pass writes it, later passes read it")(
      "kernel-cache", po::value<std::string>()->notifier([&o](const std::string& v) {
        shortcut(o, "host.kernel_cache", "--kernel-cache", v);
      }),
      "warm | cold: the AI-core kernels come compiled from an earlier run (kernel_meta; the default), or the run "
      "compiles each distinct kernel first (host.kernel_compile_s each, charged to the initialisation)")(
      "trace", po::value(&o.trace),
      "write a timeline of every run to FILE: Perfetto's protobuf format if FILE ends in .pftrace "
      "(smaller, faster), else Chrome JSON (Perfetto UI, chrome://tracing)")(
      "trace-steps", po::value(&o.trace_steps), "trace only steps A to B-1, as A:B (steps numbered from 1)")(
      "html", po::value(&o.html), "write a self-contained HTML report with charts to FILE")(
      "step-trace", po::value(&o.step_trace),
      "print the step trace of steps A to B-1 per step, as A:B (steps numbered from 1, like --trace-steps)")(
      "per-step", po::value(&o.per_step),
      "write every step's time and iteration trajectory as CSV to FILE, steps numbered from 1 (the report keeps "
      "summaries)")(
      "functional", po::bool_switch(&o.functional.enabled),
      "also compute the values: read the dataset's samples, run every op of the training graph and print the "
      "loss as MindSpore's LossMonitor (needs --dataset: MNIST, CIFAR-10, an image folder, or a token stream, "
      "train-tokens.bin; one device, data parallel or semi-auto/tensor parallel)")(
      "eval", po::bool_switch(&o.functional.eval), "functional mode: report the test split's accuracy after training")(
      "seed", seed_value(o.functional.seed),
      "functional mode: seed of the initial weights, the shuffle and the random map ops")(
      "init", po::value(&o.functional.init)->default_value(o.functional.init),
      "functional mode: the parameters' initialisers, script (the workload's own: the seed's TruncatedNormal(0.02) "
      "for LeNet-5, a model file's initializers) | he-uniform (MindSpore 2's nn.Conv2d/nn.Dense defaults, as "
      "PyTorch's)")(
      "init-from", po::value(&o.functional.init_from),
      "functional mode: initial weights from FILE (a JSON index and its raw float32 data, docs/functional.md)")(
      "save-weights", po::value(&o.save_weights),
      "functional mode: write the weights after training to FILE (JSON index) and its .bin data beside it")(
      "dump-batches", po::value(&o.dump_batches),
      "functional mode: write the first --dump-steps batches fed to the device to directory DIR")(
      "dump-steps", po::value(&o.functional.dump_steps)->default_value(50), "batches --dump-batches writes")(
      "quiet,q", po::bool_switch(&o.quiet), "no progress on stderr")(
      "progress", po::bool_switch(&o.progress), "progress on stderr even when it is not a terminal");
  return d;
}

/// `s` as a whole number if all of it is one.
std::optional<std::int64_t> whole_number(const std::string& s) {
  try {
    std::size_t used = 0;
    const long long v = std::stoll(s, &used);
    if (used == s.size()) return v;
  } catch (const std::exception&) {
  }
  return std::nullopt;
}

/// `flag`'s A:B — steps A to B-1, numbered from 1 as every output numbers them — as the library's
/// 0-based step indices [A-1, B-1).
std::pair<std::int64_t, std::int64_t> parse_step_window(const std::string& s, const std::string& flag) {
  if (s.empty()) return {0, INT64_MAX};
  const auto colon = s.find(':');
  const auto a = colon == std::string::npos ? std::nullopt : whole_number(s.substr(0, colon));
  const auto b = colon == std::string::npos ? std::nullopt : whole_number(s.substr(colon + 1));
  if (!a || !b || *a < 1 || *b <= *a)
    throw InputError(flag + " '" + s +
                     "': expected A:B, steps A to B-1 with 1 <= A < B (steps are numbered from 1), e.g. 100:120");
  return {*a - 1, *b - 1};
}

bool progress_wanted(const Options& o) { return !o.quiet && (o.progress || isatty(2)); }

/// Parses the options; a word that is not an option's value is an error, not silently ignored.
po::variables_map parse_options(int argc, char* argv[], const po::options_description& desc, const std::string& command,
                                const po::positional_options_description* positional = nullptr) {
  auto parser = po::command_line_parser(argc, argv).options(desc);
  if (positional) parser.positional(*positional);
  const po::parsed_options parsed = parser.run();
  for (const auto& opt : parsed.options)
    if (opt.position_key >= 0 && !positional) {
      const std::string word = opt.value.empty() ? std::string() : opt.value.front();
      throw InputError("unexpected argument '" + word + "': options take the form --name value (see `ascendsim " +
                       command + " --help`)");
    }
  po::variables_map vm;
  po::store(parsed, vm);
  return vm;
}

bool parse(int argc, char* argv[], const po::options_description& desc, const std::string& command,
           const po::positional_options_description* positional = nullptr) {
  po::variables_map vm = parse_options(argc, argv, desc, command, positional);
  if (vm.count("help")) {
    std::cout << "usage: ascendsim " << command << " [options]\n\n" << desc << "\n";
    return false;
  }
  if (vm.count("model")) {
    const auto model = vm["model"].as<std::string>();
    if (vm.count("workload") && !vm["workload"].defaulted())
      throw InputError("--model " + model + ": the ONNX file is the network, instead of --workload " +
                       vm["workload"].as<std::string>() + "; give one of the two");
    typed()["workload"] = "--model " + model;  // an error about the network names the file
  }
  po::notify(vm);
  return true;
}

/// Writes one output (checked, staged, put in place).
void write_output(const std::string& path, const std::string& text, const std::string& option = "--json") {
  Outputs out;
  out.add(path, option);
  out.stage(path, text);
  out.commit();
}

/// What the user typed for each request key and parameter override, so that an error about one
/// names the flag (`--num-parallel-workers 0`) rather than the library's key. Filled while the
/// command line is parsed; one invocation per process.
std::map<std::string, std::string>& typed() {
  static std::map<std::string, std::string> m;
  return m;
}

/// The flag of each request key.
const std::map<std::string, std::string>& request_flags() {
  static const std::map<std::string, std::string> m = {{"workload", "--workload"},
                                                       {"model", "--model"},
                                                       {"mode", "--mode"},
                                                       {"loss", "--loss"},
                                                       {"frozen", "--frozen"},
                                                       {"batch_size", "--batch-size"},
                                                       {"epochs", "--epochs"},
                                                       {"sink_size", "--sink-size"},
                                                       {"steps_per_epoch", "--steps-per-epoch"},
                                                       {"dataset", "--dataset"},
                                                       {"eval_every", "--eval-every"},
                                                       {"eval_dataset", "--eval-dataset"},
                                                       {"target_accuracy", "--target-accuracy"},
                                                       {"accuracy_curve", "--accuracy-curve"},
                                                       {"dataset_index", "--dataset-index"},
                                                       {"parallel_mode", "--parallel-mode"},
                                                       {"dataset_strategy", "--dataset-strategy"},
                                                       {"shard_strategy", "--shard-strategy"},
                                                       {"tensor_parallel", "--tensor-parallel"},
                                                       {"optimizer_shard", "--optimizer-shard"},
                                                       {"recompute", "--recompute"},
                                                       {"pipeline_stages", "--pipeline-stages"},
                                                       {"micro_batches", "--micro-batches"},
                                                       {"devices", "--devices"},
                                                       {"all_reduce_fusion", "--all-reduce-fusion"},
                                                       {"parameter_broadcast", "--parameter-broadcast"},
                                                       {"strategy", "--strategy"},
                                                       {"param", "--param"},
                                                       {"values", "--values"},
                                                       {"trace", "--trace"},
                                                       {"trace_steps", "--trace-steps"},
                                                       {"gpt_size", "--gpt-size"},
                                                       {"launch", "--launch"},
                                                       {"rate", "--rate"},
                                                       {"rates", "--rates"},
                                                       {"requests", "--requests"},
                                                       {"arrivals", "--arrivals"},
                                                       {"prompt_tokens", "--prompt-tokens"},
                                                       {"output_tokens", "--output-tokens"},
                                                       {"length_spread", "--length-spread"},
                                                       {"max_seqs", "--max-seqs"},
                                                       {"max_batched_tokens", "--max-batched-tokens"},
                                                       {"chunked_prefill", "--chunked-prefill"},
                                                       {"block_size", "--block-size"},
                                                       {"kv_blocks", "--kv-blocks"},
                                                       {"memory_utilization", "--memory-utilization"},
                                                       {"multi_step", "--multi-step"},
                                                       {"sampling", "--sampling"},
                                                       {"capture", "--capture"},
                                                       {"graph_buckets", "--graph-buckets"},
                                                       {"decode_batches", "--decode-batches"},
                                                       {"slo_ttft_ms", "--slo-ttft-ms"},
                                                       {"slo_tpot_ms", "--slo-tpot-ms"},
                                                       {"layers", "--layers"},
                                                       {"hidden", "--hidden"},
                                                       {"heads", "--heads"},
                                                       {"ffn", "--ffn"},
                                                       {"vocab", "--vocab"}};
  return m;
}

/// The message of `e` in the words of the command line.
std::string cli_message(const InputError& e) {
  std::string origin = e.origin(), detail = e.detail();
  if (origin.empty()) return e.what();
  if (auto it = typed().find(origin); it != typed().end()) {
    origin = it->second;  // an override: what the user typed
  } else if (auto f = request_flags().find(origin); f != request_flags().end()) {
    origin = f->second;            // a request field: its flag
  } else if (origin == e.key()) {  // a parameter, named by its key: the override that set it, if any
    const std::string prefix = override_origin(e.key() + "=");
    for (const auto& [o, words] : typed())
      if (o.rfind(prefix, 0) == 0) origin = words;
    // The queue's preset depth, not set: its buffers are batches, the size is the one typed.
    if (origin == "queue.capacity") origin = "--batch-size";
  }
  // Request keys named in the advice ("reduce batch_size") become their flags; not the keys that
  // are also plain words in prose ("the dataset").
  for (const auto& [key, flag] : request_flags()) {
    if (key == "dataset" || key == "workload" || key == "devices" || key == "strategy" || key == "values" ||
        key == "param" || key == "model" || key == "mode" || key == "loss" || key == "trace" || key == "launch" ||
        key == "rate" || key == "rates" || key == "requests" || key == "arrivals" || key == "sampling" ||
        key == "capture" || key == "layers" || key == "hidden" || key == "heads" || key == "vocab" ||
        key == "prompt_tokens" || key == "output_tokens")
      continue;
    for (std::size_t at = detail.find(key); at != std::string::npos; at = detail.find(key, at + flag.size())) {
      const bool word_start = at == 0 || !(std::isalnum(static_cast<unsigned char>(detail[at - 1])) ||
                                           detail[at - 1] == '_' || detail[at - 1] == '.');
      const std::size_t end = at + key.size();
      const bool word_end =
          end == detail.size() || !(std::isalnum(static_cast<unsigned char>(detail[end])) || detail[end] == '_');
      if (word_start && word_end) detail.replace(at, key.size(), flag);
    }
  }
  return origin + ": " + detail;
}

/// The raw data file beside a weights index: FILE.json -> FILE.bin, else FILE.bin appended.
std::string weights_data_path(const std::string& index) {
  const std::filesystem::path p(index);
  return p.extension() == ".json" ? std::filesystem::path(p).replace_extension(".bin").string() : index + ".bin";
}

/// Every output of the command, checked before anything is simulated.
void add_outputs(Outputs& out, const Options& o) {
  out.add(o.json, "--json");
  out.add(o.html, "--html");
  out.add(o.trace, "--trace");
  out.add(o.csv, "--csv");
  out.add(o.per_step, "--per-step");
  if (!o.save_weights.empty()) {
    out.add(o.save_weights, "--save-weights");
    out.add(weights_data_path(o.save_weights), "--save-weights");
  }
  if (!o.dump_batches.empty()) {
    out.directory(o.dump_batches, "--dump-batches");
    for (const char* f : {"batches.json", "images.bin", "labels.bin"})
      out.add((std::filesystem::path(o.dump_batches) / f).string(), "--dump-batches");
  }
}

double parse_share(const std::string& text, const std::string& option, bool bare_is_percent);

RunRequest make_request(const Options& o, const std::vector<runtime::Strategy>& strategies) {
  RunRequest r;
  r.config = o.request();
  r.workload = o.workload;
  r.model = o.model;
  r.mode = o.mode;
  r.loss = o.loss;
  {
    std::stringstream names(o.frozen);
    for (std::string name; std::getline(names, name, ',');)
      if (!name.empty()) r.frozen.push_back(name);
  }
  r.batch_size = o.batch_given || o.model.empty() ? o.batch_size : 0;
  r.recipe = o.recipe;
  r.strategies = strategies;
  r.epochs = o.epochs;
  r.sink_size = o.sink_size;
  r.steps_per_epoch = o.steps_per_epoch;
  r.dataset = o.dataset;
  r.eval_every = o.eval_every;
  r.eval_dataset = o.eval_dataset;
  r.dataset_index = o.dataset_index;
  r.parallel_mode = o.parallel_mode;
  r.dataset_strategy = o.dataset_strategy;
  r.shard_strategy = o.shard_strategy;
  r.tensor_parallel = o.tensor_parallel;
  r.optimizer_shard = o.optimizer_shard;
  r.recompute = o.recompute;
  r.pipeline_stages = o.pipeline_stages;
  r.micro_batches = o.micro_batches;
  r.devices = o.devices;
  r.parameter_broadcast = o.parameter_broadcast;
  r.functional = o.functional;
  const auto& schemes = runtime::FunctionalModel::init_schemes();
  if (std::find(schemes.begin(), schemes.end(), o.functional.init) == schemes.end())
    throw InputError("--init " + o.functional.init + ": give one of " + fmt::format("{}", fmt::join(schemes, ", ")));
  const bool functional_only = o.functional.eval || o.functional.init != "script" || !o.functional.init_from.empty() ||
                               !o.save_weights.empty() || !o.dump_batches.empty();
  if (functional_only && !o.functional.enabled)
    throw InputError(
        "--eval, --init, --init-from, --save-weights and --dump-batches belong to functional mode; add --functional");
  if (!o.save_weights.empty() && o.devices > 1 && o.parallel_mode == "semi-auto")
    throw InputError("--save-weights writes one network's weights: give one device or data parallelism");
  if (o.functional.dump_steps < 0)
    throw InputError("--dump-steps " + std::to_string(o.functional.dump_steps) + ": give 0 or more");
  if (o.dump_batches.empty()) r.functional.dump_steps = 0;
  r.every_rank = o.every_rank;
  if (!o.target_accuracy.empty()) {
    if (o.epochs != 1)
      throw InputError("--epochs and --target-accuracy both set how long the run trains: give one of them");
    r.target_accuracy = parse_share(o.target_accuracy, "--target-accuracy", false);
    if (r.target_accuracy == 0) throw InputError("--target-accuracy 0: give the accuracy to reach, above 0");
  }
  r.accuracy_curve = o.accuracy_curve;
  for (const auto& set : o.rank_sets) {
    const auto colon = set.find(':');
    const auto rank = colon == std::string::npos ? std::nullopt : whole_number(set.substr(0, colon));
    if (!rank || *rank < 0)
      throw InputError("--rank-set '" + set + "': expected RANK:key=value, e.g. 3:pipeline.num_parallel_workers=1");
    r.rank_sets[*rank].push_back(set.substr(colon + 1));
  }
  if (!o.rank_table.empty()) {
    const RankTable t = load_rank_table(o.rank_table);
    const auto n = static_cast<std::int64_t>(t.devices.size());
    if (o.devices != 1 && o.devices != n)
      throw InputError("--devices " + std::to_string(o.devices) + " disagrees with --rank-table " + o.rank_table +
                       " (" + std::to_string(n) + " devices); give one of them");
    r.devices = n;
    r.devices_per_server = t.devices_per_server();
  }
  if (!o.all_reduce_fusion.empty()) {
    std::stringstream parts(o.all_reduce_fusion);
    for (std::string part; std::getline(parts, part, ',');) {
      const auto v = whole_number(part);
      if (!v)
        throw InputError("--all-reduce-fusion '" + o.all_reduce_fusion +
                         "': expected gradient indices separated by commas, e.g. 85,160");
      r.all_reduce_fusion.push_back(*v);
    }
  }
  if (!o.trace.empty()) {
    r.trace = true;
    r.trace_format = sim::trace_format_for(o.trace);
    std::tie(r.trace_first_step, r.trace_last_step) = parse_step_window(o.trace_steps, "--trace-steps");
  }
  if (progress_wanted(o)) r.progress = &std::cerr;
  r.per_step = !o.per_step.empty();
  if (!o.step_trace.empty()) {
    const auto [a, b] = parse_step_window(o.step_trace, "--step-trace");
    if (b - a > 1000) throw InputError("--step-trace " + o.step_trace + ": at most 1000 steps, e.g. 10:20");
    r.step_trace_first = a;
    r.step_trace_last = b;
  }
  r.warnings = &std::cerr;
  return r;
}

int run_strategies(const Options& o, const std::vector<runtime::Strategy>& strategies) {
  if (o.trace.empty() && !o.trace_steps.empty())
    throw InputError("--trace-steps " + o.trace_steps + ": it selects the steps of a trace; add --trace FILE");
  Outputs files;
  add_outputs(files, o);
  RunRequest req = make_request(o, strategies);
  if (req.trace) {
    req.trace_out = &files.stream(o.trace);  // written as the runs record it
    req.trace_space = files.free_bytes(o.trace);
    typed()["trace"] = "--trace " + o.trace;  // an error about the trace names its file
  }
  RunOutcome out = run(req);
  if (out.failed()) {
    std::istringstream lines(out.failure_message());
    for (std::string line; std::getline(lines, line);) std::cerr << "error: " << line << "\n";
    std::cerr << "\nwhere the time went up to that point:\n" << runtime::format_table(out.header, out.runs);
    std::cerr << "no report written\n";
    return kExitRunFailed;
  }
  std::string scaling;
  if (o.scaling) {
    if (req.devices <= 1) throw InputError("--scaling compares N devices with one; give --devices N > 1");
    const std::vector<ScalingPoint> curve = scaling_curve(req, out);
    const std::vector<double>& eff = curve.back().efficiency;
    for (std::size_t i = 0; i < out.runs.size(); ++i) {
      out.runs[i].scaling_efficiency = eff[i];
      out.runs[i].scaling = nlohmann::ordered_json::array();
      for (const auto& p : curve) {
        ordered_json lost;
        for (std::size_t c = 0; c < kScalingLosses.size(); ++c) lost[kScalingLosses[c]] = p.lost[i][c];
        out.runs[i].scaling.push_back({{"devices", p.devices},
                                       {"samples_per_s", p.samples_per_s[i]},
                                       {"step_ms", p.step_ms[i]},
                                       {"efficiency", p.efficiency[i]},
                                       {"lost", lost}});
      }
    }
    scaling =
        "\nscaling (samples/s across ranks and efficiency against one device; same batch per device and "
        "steps per rank)\n";
    std::vector<std::string> head = {"devices"};
    for (const auto& r : out.runs) head.push_back(runtime::strategy_name(r.session.strategy));
    runtime::TextTable t(head);
    for (const auto& p : curve) {
      std::vector<std::string> row = {std::to_string(p.devices)};
      for (std::size_t i = 0; i < p.samples_per_s.size(); ++i)
        row.push_back(fmt::format("{:.0f} ({:.1f}%)", p.samples_per_s[i], 100 * p.efficiency[i]));
      t.add(row);
    }
    scaling += t.render();
    // Where each point's efficiency went: its phases' time beyond one device's, as shares of its run.
    for (std::size_t i = 0; i < out.runs.size(); ++i) {
      scaling += fmt::format(
          "\nefficiency lost against one device, {} (% of the run's time: exposed collectives, waiting for "
          "stragglers, host, device compute, set-up, evaluation; they add up to 100% less the efficiency)\n",
          runtime::strategy_name(out.runs[i].session.strategy));
      std::vector<std::string> cols = {"devices", "efficiency"};
      for (const char* c : kScalingLosses) cols.emplace_back(c);
      runtime::TextTable lt(cols);
      for (const auto& p : curve) {
        std::vector<std::string> row = {std::to_string(p.devices), fmt::format("{:.1f}%", 100 * p.efficiency[i])};
        for (double v : p.lost[i]) row.push_back(fmt::format("{:.1f}%", 100 * v));
        lt.add(row);
      }
      scaling += lt.render();
    }
  }
  std::string losses;
  for (const auto& r : out.runs) {
    if (!r.functional) continue;
    const std::string who = out.runs.size() > 1 ? std::string(runtime::strategy_name(r.session.strategy)) + ": " : "";
    for (const auto& l : r.loss_values)
      losses += fmt::format("{}epoch: {} step: {}, loss is {}\n", who, l.epoch, l.step, l.loss);
    if (r.accuracy >= 0)
      losses += fmt::format("{}accuracy on the test split: {:.4f} ({} samples)\n", who, r.accuracy, r.eval_samples);
    if (!r.values) continue;
    const auto& opt = r.values->options();
    const std::string source = opt.init_from.empty() ? "--init " + opt.init : opt.init_from;
    if (r.devices > 1) {
      losses += fmt::format("{}values of {} steps on each of {} ranks; seed {}, weights from {}\n", who,
                            r.values->steps_computed(), r.devices, opt.seed, source);
    } else {
      losses +=
          fmt::format("{}values of {} steps computed in {:.2f} s wall ({:.0f} samples/s); seed {}, weights from {}\n",
                      who, r.values->steps_computed(), r.values->compute_wall_s(),
                      r.values->compute_wall_s() > 0
                          ? static_cast<double>(r.values->steps_computed() * r.batch_size) / r.values->compute_wall_s()
                          : 0.0,
                      opt.seed, source);
    }
  }
  if (!losses.empty()) losses += "\n";
  const auto* v = out.runs.empty() ? nullptr : out.runs.front().values.get();
  if (!v && (!o.save_weights.empty() || !o.dump_batches.empty()))  // before any file is written
    throw InputError(
        "--save-weights and --dump-batches write one network's values; this run has none (semi-auto "
        "ranks hold pieces): give one device or data parallelism");
  if (v) {
    if (!o.save_weights.empty()) {
      files.stage(o.save_weights,
                  v->weights_index(std::filesystem::path(weights_data_path(o.save_weights)).filename().string()));
      files.stage(weights_data_path(o.save_weights), v->weights_data());
    }
    if (!o.dump_batches.empty()) {
      const std::filesystem::path d(o.dump_batches);
      files.stage((d / "batches.json").string(), v->batches_index());
      files.stage((d / "images.bin").string(), v->batches_images());
      files.stage((d / "labels.bin").string(), v->batches_labels());
    }
  }
  if (!o.json.empty()) files.stage(o.json, out.report().dump(2) + "\n");
  if (!o.html.empty()) files.stage(o.html, runtime::html_compare(out.header, out.runs));
  if (!o.per_step.empty()) files.stage(o.per_step, out.per_step_csv());
  if (o.json != "-") files.print(losses + runtime::format_table(out.header, out.runs) + scaling);
  files.commit();
  return 0;
}

int cmd_compare(int argc, char* argv[]) {
  Options o;
  po::options_description desc = common_options(o);
  desc.add(run_options(o));
  desc.add(parallel_options(o));
  if (!parse(argc, argv, desc, "compare")) return 0;
  return run_strategies(o, runtime::all_strategies());
}

int cmd_train(int argc, char* argv[]) {
  Options o;
  po::options_description desc = common_options(o);
  desc.add(run_options(o));
  desc.add(parallel_options(o));
  desc.add_options()("strategy,s", po::value(&o.strategy),
                     "non-sink | data-sink | graph-sink | loop-sink (with --sink-size alone: loop-sink, as "
                     "Model.train(..., dataset_sink_mode=True, sink_size=N))");
  if (!parse(argc, argv, desc, "train")) return 0;
  if (o.strategy.empty()) {
    if (o.sink_size < 0)
      throw InputError(
          "train needs --strategy (non-sink, data-sink, graph-sink or loop-sink), or --sink-size N for "
          "loop sink");
    o.strategy = "loop-sink";
  }
  return run_strategies(o, {runtime::parse_strategy(o.strategy)});
}

std::vector<std::string> split_list(const std::string& s, const std::string& option) {
  std::vector<std::string> out;
  std::size_t start = 0;
  for (;;) {
    const auto comma = s.find(',', start);
    const std::string item = s.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    if (item.empty()) throw InputError(option + " '" + s + "': empty item; give a comma-separated list");
    out.push_back(item);
    if (comma == std::string::npos) return out;
    start = comma + 1;
  }
}

int cmd_advise_fusion(int argc, char* argv[]) {
  Options o;
  std::int64_t stride = 10;
  std::size_t top = 10;
  po::options_description desc = common_options(o);
  desc.add(run_options(o));
  desc.add(parallel_options(o));
  desc.add_options()("stride", po::value(&stride)->default_value(stride),
                     "one split at every STRIDE-th gradient, two at every 4*STRIDE-th")(
      "top", po::value(&top)->default_value(top), "splits to print");
  if (!parse(argc, argv, desc, "advise-fusion")) return 0;
  RunRequest req = make_request(o, {runtime::Strategy::LoopSink});
  req.progress = nullptr;
  const FusionAdvice advice = advise_fusion(req, stride);
  std::cout << fmt::format(
      "{} on {} devices, batch {} per device: {} gradients, {} splits simulated (loop sink, {} "
      "steps per rank); shortest mean step first\n\n",
      req.workload, req.devices, req.batch_size, advice.gradients, advice.candidates.size(),
      req.steps_per_epoch ? std::to_string(*req.steps_per_epoch) : std::string("an epoch of"));
  std::cout << advice.table(top);
  return 0;
}

int cmd_sweep(int argc, char* argv[]) {
  Options o;
  std::string strategies_arg;
  SweepRequest req;
  std::string values_arg;
  po::options_description desc = common_options(o);
  desc.add(run_options(o));
  desc.add(parallel_options(o));
  desc.add_options()("param", po::value(&req.param)->required(),
                     "what to sweep: sink_size, epochs, steps_per_epoch, batch_size, devices (the same job on clusters "
                     "of these sizes; with evaluation, a time to train per size), or any parameter key "
                     "(e.g. link.h2d_bandwidth_gbps, host.op_launch_us)")("values", po::value(&values_arg)->required(),
                                                                          "comma-separated values, e.g. 1,10,100,1000")(
      "strategies", po::value(&strategies_arg), "comma-separated strategies (default: all four)")(
      "csv", po::value(&o.csv), "write the rows as CSV to FILE");
  if (!parse(argc, argv, desc, "sweep")) return 0;
  req.values = split_list(values_arg, "--values");
  for (const auto& v : req.values)
    typed()[override_origin(req.param + "=" + v)] = "--param " + req.param + " value " + v;
  if (!o.per_step.empty())
    throw InputError(
        "--per-step: a sweep writes no per-step file; use `ascendsim train` or `ascendsim compare` for "
        "the point you want");
  if (!o.trace.empty() || !o.trace_steps.empty())
    throw InputError(
        "--trace: a sweep writes no timeline; trace the point you want with `ascendsim train` or "
        "`ascendsim compare` and its value");
  std::vector<runtime::Strategy> strategies = runtime::all_strategies();
  if (!strategies_arg.empty()) {
    strategies.clear();
    for (const auto& s : split_list(strategies_arg, "--strategies")) strategies.push_back(runtime::parse_strategy(s));
  }
  Outputs files;
  add_outputs(files, o);
  req.base = make_request(o, strategies);
  req.base.trace = false;
  const SweepOutcome out = sweep(req);
  if (out.failed()) {
    std::istringstream lines(out.failure_message());
    for (std::string line; std::getline(lines, line);) std::cerr << "error: " << line << "\n";
    std::cerr << "no report written\n";
    return kExitRunFailed;
  }
  if (!o.json.empty()) files.stage(o.json, out.report().dump(2) + "\n");
  if (!o.csv.empty()) files.stage(o.csv, out.csv());
  if (!o.html.empty()) files.stage(o.html, runtime::html_sweep(out.header, out.param, out.points, out.conclusion));
  if (o.json != "-") files.print(out.table());
  files.commit();
  return 0;
}

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

int cmd_serve(int argc, char* argv[]) {
  ServeRequest req;
  std::string launch = "eager", rates, buckets, batches, json, html, chunked = "false";
  bool quiet = false, progress = false, rate_given = false;
  auto shape_flag = [](std::optional<std::int64_t>& into) {
    return po::value<std::int64_t>()->notifier([&into](std::int64_t v) { into = v; });
  };
  po::options_description desc("options");
  desc.add_options()("help,h", "show this help")(
      "workload,w", po::value(&req.workload)->default_value(req.workload),
      "a decoder: gpt (its size by --gpt-size), gpt2-small, gpt2-medium, llama-7b")(
      "gpt-size", po::value(&req.gpt_size), "workload gpt's shape: gpt2-small (default), gpt2-medium, llama-7b")(
      "model", po::value<std::string>()->notifier([](const std::string& m) {
        throw InputError("--model " + m +
                         ": serve runs the built-in decoders (--workload gpt with --gpt-size, reshaped with --layers, "
                         "--hidden, --heads, --ffn, --vocab); an ONNX file has no KV cache to page. Time its steps "
                         "with `ascendsim train --model " +
                         m + " --mode infer`");
      }),
      "not taken: serve runs the built-in decoders (an ONNX model's steps: `ascendsim train --model F --mode "
      "infer`)")("layers", shape_flag(req.shape.layers), "layers (overriding the preset's)")(
      "hidden", shape_flag(req.shape.hidden), "hidden width (overriding the preset's)")(
      "heads", shape_flag(req.shape.heads), "attention heads (overriding the preset's)")(
      "ffn", shape_flag(req.shape.ffn), "the MLP's inner width (overriding the preset's)")(
      "vocab", shape_flag(req.shape.vocab), "vocabulary (overriding the preset's)")(
      "server", po::value(&req.config.server), "server preset (`ascendsim servers`; default generic-x86)")(
      "chip", po::value(&req.config.chip), "chip preset (`ascendsim chips`; default the server's)")(
      "config", po::value(&req.config.config_file), "YAML file overriding preset parameters")(
      "set", po::value(&req.config.sets)->composing(), "override one parameter, key=value (repeatable)")(
      "devices", po::value(&req.devices)->default_value(req.devices),
      "devices of one server: replicas of tensor-parallel groups, requests dealt to them in turn")(
      "tensor-parallel", po::value(&req.tensor_parallel)->default_value(req.tensor_parallel),
      "ranks of one replica (Megatron's split; an AllReduce after attention and after the MLP)")(
      "launch", po::value(&launch)->default_value(launch),
      "eager | graph | multi-step, comma-separated, or all: how a step is launched (eager: op by op, as non-sink; "
      "graph: a captured graph per batch-size bucket, as graph sink; multi-step: --multi-step decode steps per launch, "
      "as loop sink)")("rate", po::value(&req.rate)->default_value(req.rate),
                       "requests per second (Poisson arrivals; the runs' rate with --rates too)")(
      "requests", po::value(&req.requests)->default_value(req.requests), "requests to serve")(
      "prompt-tokens", po::value(&req.prompt_tokens)->default_value(req.prompt_tokens), "prompt length (mean)")(
      "output-tokens", po::value(&req.output_tokens)->default_value(req.output_tokens), "output length (mean)")(
      "length-spread", po::value(&req.length_spread)->default_value(req.length_spread),
      "each length uniform within mean x (1 +- this fraction)")(
      "arrivals", po::value(&req.arrivals),
      "a JSONL file of requests, one per line: {\"arrival_s\": 0.5, \"prompt_tokens\": 300, \"output_tokens\": 80} "
      "(instead of --rate and --requests)")("seed", seed_value(req.seed), "seed of the arrivals and lengths")(
      "max-seqs", po::value(&req.max_seqs)->default_value(req.max_seqs), "sequences per step (vLLM's max_num_seqs)")(
      "max-batched-tokens", po::value(&req.max_batched_tokens)->default_value(req.max_batched_tokens),
      "tokens per step (max_num_batched_tokens)")("chunked-prefill", po::value(&chunked)->default_value(chunked),
                                                  "true | false: prompts in chunks beside the decode tokens")(
      "block-size", po::value(&req.block_size)->default_value(req.block_size), "tokens per KV-cache block")(
      "kv-blocks", po::value(&req.kv_blocks)->default_value(req.kv_blocks),
      "KV-cache blocks (0: what device memory leaves)")(
      "memory-utilization", po::value(&req.memory_utilization)->default_value(req.memory_utilization, "0.9"),
      "the share of device memory the engine uses (vLLM's gpu_memory_utilization)")(
      "multi-step", po::value(&req.multi_step)->default_value(req.multi_step), "decode steps per launch in multi-step")(
      "sampling", po::value(&req.sampling)->default_value(req.sampling),
      "device | host: greedy sampling on the device, or the logits copied to the host")(
      "capture", po::value(&req.capture)->default_value(req.capture),
      "startup | first-use: when graph and multi-step modes capture a bucket's graph")(
      "graph-buckets", po::value(&buckets),
      "captured batch sizes, comma-separated (default 1,2,4,8,16,24,... max-seqs); graph and multi-step run a "
      "decode batch padded to the next, larger ones eager")(
      "rates", po::value(&rates),
      "a sweep: comma-separated request rates, each launch mode at each (the HTML charts "
      "latency against throughput)")("decode-batches", po::value(&batches),
                                     "batch sizes of the one-decode-step comparison (default 1,8,32,128, those up to "
                                     "--max-seqs and it), at the requests' mean prompt and half "
                                     "their mean output")(
      "slo-ttft-ms", po::value(&req.slo_ttft_ms)->default_value(req.slo_ttft_ms, "2000"),
      "the time to first token a request must meet to count in the goodput")(
      "slo-tpot-ms", po::value(&req.slo_tpot_ms)->default_value(req.slo_tpot_ms, "100"),
      "the time per output token a request must meet to count in the goodput")(
      "json", po::value(&json), "write the JSON report to FILE (- for stdout)")("html", po::value(&html),
                                                                                "write the HTML report to FILE")(
      "quiet,q", po::bool_switch(&quiet), "no progress lines")("progress", po::bool_switch(&progress),
                                                               "progress on stderr even when it is not a terminal");
  if (!parse(argc, argv, desc, "serve")) return 0;
  for (int a = 1; a < argc; ++a) {  // --rate as typed (its default does not count)
    const std::string word = argv[a];
    rate_given = rate_given || word == "--rate" || word.rfind("--rate=", 0) == 0;
  }
  if (rate_given && !req.arrivals.empty())
    throw InputError("rate", "rate", "the requests come from --arrivals with their own times; give one of the two");
  if (chunked != "true" && chunked != "false")
    throw InputError("chunked_prefill", "chunked_prefill", "'" + chunked + "': true or false");
  req.chunked_prefill = chunked == "true";
  req.launch.clear();
  for (const auto& m : split_list(launch == "all" ? "eager,graph,multi-step" : launch, "--launch"))
    req.launch.push_back(runtime::parse_launch_mode(m));
  auto numbers = [](const std::string& list, const char* flag, auto& into) {
    if (list.empty()) return;
    into.clear();
    for (const auto& v : split_list(list, flag)) {
      try {
        std::size_t used = 0;
        using T = typename std::decay_t<decltype(into)>::value_type;
        T x;
        if constexpr (std::is_integral_v<T>)
          x = std::stoll(v, &used);
        else
          x = std::stod(v, &used);
        if (used != v.size()) throw std::invalid_argument(v);
        into.push_back(x);
      } catch (const std::exception&) {
        throw InputError(std::string(flag) + " '" + v + "': not a number");
      }
    }
  };
  numbers(rates, "--rates", req.rates);
  numbers(buckets, "--graph-buckets", req.graph_buckets);
  numbers(batches, "--decode-batches", req.decode_batches);
  req.config.dir = default_config_dir();
  for (const auto& s : req.config.sets) typed().emplace(override_origin(s), "--set " + s);
  Outputs files;
  files.add(json, "--json");
  files.add(html, "--html");
  if (!quiet && (progress || isatty(2))) req.progress = &std::cerr;  // as every run command: a terminal's
  if (batches.empty()) {  // the default comparison's batch sizes, those max_seqs allows
    auto& b = req.decode_batches;
    const auto kept = std::remove_if(b.begin(), b.end(), [&](std::int64_t x) { return x > req.max_seqs; });
    const bool dropped = kept != b.end();
    b.erase(kept, b.end());
    if (dropped && (b.empty() || b.back() < req.max_seqs))
      req.decode_batches.push_back(req.max_seqs);
  }
  const ServeOutcome out = serve(req);
  const nlohmann::ordered_json report = out.report();
  if (!json.empty()) files.stage(json, report.dump(2) + "\n");
  if (!html.empty()) files.stage(html, out.html(report));
  if (json != "-") files.print(out.text(report));
  files.commit();
  return 0;
}

int cmd_info(int argc, char* argv[]) {
  Options o;
  po::options_description desc = common_options(o);
  desc.add(parallel_options(o));
  if (!parse(argc, argv, desc, "info")) return 0;
  const SystemConfig cfg = load_config(o.request());
  const workloads::Workload w = request_workload(make_request(o, {}), cfg);
  const runtime::CompiledGraph g = compile_for(cfg, w);
  // Pipeline stages: every stage's graph; the memory and the fit are the fullest stage's, the
  // parameters and MACs the whole network's.
  std::vector<runtime::CompiledGraph> stage_graphs;
  std::size_t fullest = 0;
  for (const auto& s : w.stages) {
    stage_graphs.push_back(compile_for(cfg, *s));
    if (stage_graphs.back().memory.peak_bytes() > stage_graphs[fullest].memory.peak_bytes())
      fullest = stage_graphs.size() - 1;
  }
  const workloads::Workload& mw = w.stages.empty() ? w : *w.stages[fullest];
  const runtime::CompiledGraph& mg = w.stages.empty() ? g : stage_graphs[fullest];
  const workloads::Workload& whole = w.stages.empty() || !w.whole ? w : *w.whole;

  ordered_json j;
  j["workload"] = w.name;
  j["description"] = w.description;
  j["server"] = cfg.server.name;
  j["chip"] = cfg.chip.name;
  j["batch_size"] = w.batch_size;
  j["parameters"] = workloads::parameter_count(whole.graph);
  {
    // The gradients all_reduce_fusion's indices count, in the rank's training graph.
    std::int64_t gradients = 0;
    for (const auto& t : w.graph.tensors()) gradients += t.role == workloads::TensorRole::Parameter;
    j["gradients"] = w.training ? gradients : 0;
  }
  j["forward_macs_per_sample"] = workloads::forward_macs(whole.graph) / whole.batch_size;
  j["ops_per_step"] = static_cast<std::int64_t>(g.step_tasks.size());
  j["ops_per_step_sink"] = static_cast<std::int64_t>(g.sink_tasks.size());
  j["peak_device_memory_bytes"] = mg.memory.peak_bytes();
  // The data queue's buffers count only in the sink modes.
  const std::string short_op_by_op = memory_shortfall(cfg, mw, mg.memory, false);
  const std::string short_sink = memory_shortfall(cfg, mw, mg.memory, true);
  if (!w.stages.empty()) {
    ordered_json stages = ordered_json::array();
    for (std::size_t s = 0; s < stage_graphs.size(); ++s)
      stages.push_back({{"stage", s},
                        {"layers",
                         {w.stages[s]->parallel.stage_first_layer,
                          w.stages[s]->parallel.stage_first_layer + w.stages[s]->parallel.stage_layers - 1}},
                        {"parameters", workloads::parameter_count(w.stages[s]->graph)},
                        {"ops_per_step", static_cast<std::int64_t>(stage_graphs[s].step_tasks.size())},
                        {"device_compute_per_step_s", stage_graphs[s].device_compute_s},
                        {"peak_device_memory_bytes", stage_graphs[s].memory.peak_bytes()}});
    j["pipeline_stages"] = stages;
    j["memory_stage"] = fullest;
  }
  j["fits_device_memory"] = {{"non-sink", short_op_by_op.empty()}, {"sink modes", short_sink.empty()}};
  j["memory"] = {{"persistent_bytes", mg.memory.persistent_bytes},
                 {"arena_bytes", mg.memory.arena_bytes},
                 {"live_peak_bytes", mg.memory.live_peak_bytes},
                 {"workspace_bytes", mg.memory.workspace_bytes},
                 {"queue_buffer_bytes", mg.memory.queue_buffer_bytes},
                 {"weights_bytes", mg.memory.weight_bytes},
                 {"optimizer_state_bytes", mg.memory.optimizer_state_bytes},
                 {"other_persistent_bytes", mg.memory.other_persistent_bytes},
                 {"peak_gradient_bytes", mg.memory.peak_gradient_bytes},
                 {"peak_activation_bytes", mg.memory.peak_activation_bytes},
                 {"peak_workspace_bytes", mg.memory.peak_workspace_bytes},
                 {"device_capacity_bytes", static_cast<std::int64_t>(cfg.chip.memory.hbm_gib * 1073741824.0)}};
  j["dataset"] = {{"format", workloads::dataset_format_name(w.data.dataset.format)},
                  {"source", w.data.dataset.source},
                  {"samples", w.data.dataset.samples}};
  j["steps_per_epoch"] = w.steps_per_epoch();
  j["batch_bytes"] = w.batch_bytes();
  const runtime::PipelineCosts pipeline_costs(cfg.host, cfg.pipeline, w.data, w.batch_size, w.steps_per_epoch());
  j["pipeline_tree"] = runtime::describe_tree(pipeline_costs, cfg.host.cpu_cores, static_cast<double>(w.batch_bytes()),
                                              cfg.link.h2d_bandwidth_gbps);
  j["optimizer"] = w.optimizer;
  j["mode"] = w.training ? "train" : "infer";
  j["recipe"] = {{"amp_level", w.recipe.amp_level},
                 {"keep_batchnorm_fp32", w.recipe.keep_batchnorm_fp32},
                 {"graph_kernel_fusion", w.recipe.graph_kernel_fusion},
                 {"ub_fusion", w.recipe.ub_fusion},
                 {"flash_attention", w.recipe.flash_attention},
                 {"loss_scale", w.recipe.loss_scale}};
  j["device_compute_per_step_s"] = g.device_compute_s;
  ordered_json passes = ordered_json::array();
  for (const auto& p : g.pass_effects) passes.push_back({{"pass", p.name}, {"ops", p.ops}, {"hbm_bytes", p.bytes}});
  j["graph_passes"] = passes;
  ordered_json ops = ordered_json::array();
  for (std::size_t i = 0; i < g.step_tasks.size(); ++i) {
    if (g.step_tasks[i].kind != hostif::TaskKind::AiCore) continue;  // events and collectives
    const auto& c = g.step_tasks[i].cost;
    const auto part = g.step_tasks[i].part;
    ops.push_back({{"name", g.step_tasks[i].name},
                   {"pass", part == hostif::StepPart::Forward    ? "forward"
                            : part == hostif::StepPart::Backward ? "backward"
                                                                 : "optimizer"},
                   {"op", g.descs[i].to_string()},
                   {"time_us", c.time_s * 1e6},
                   {"blocks", c.blocks},
                   {"macs", c.macs},
                   {"bound", aicore::bound_name(c.bound)}});
  }
  j["ops"] = ops;

  if (!o.json.empty()) {
    write_output(o.json, j.dump(2) + "\n");
    if (o.json == "-") {
      check_fits(cfg, mw, mg.memory, false);  // described, and refused if nothing fits: exit 2
      return 0;
    }
  }
  std::cout << fmt::format("{} — {}\n", w.name, w.description);
  std::cout << fmt::format("  server                    {} ({} host cores, {} devices per host)\n", cfg.server.name,
                           cfg.host.cpu_cores, cfg.server.devices_per_server);
  std::cout << fmt::format("  chip                      {}\n", cfg.chip.name);
  std::cout << fmt::format("  batch size                {}\n", w.batch_size);
  std::cout << fmt::format("  {:<25} {}\n", w.training ? "training" : "inference", w.recipe.describe());
  std::cout << fmt::format("  parameters                {}\n", j["parameters"].get<std::int64_t>());
  std::cout << fmt::format("  forward MACs per sample   {}\n", j["forward_macs_per_sample"].get<std::int64_t>());
  const std::string stage0 = w.stages.empty() ? "" : " (pipeline stage 0; every stage's below)";
  std::cout << fmt::format("  device ops per step       {} (+1 GetNext in the sink modes){}\n", g.step_tasks.size(),
                           stage0);
  std::cout << fmt::format("  device compute per step   {:.1f} us{}\n", g.device_compute_s * 1e6, stage0);
  std::cout << "  data pipeline             the execution tree, first epoch (per batch on one thread; batches/s its threads sustain)\n";
  for (const auto& st : j["pipeline_tree"])
    std::cout << fmt::format("    {:<44} {:>3} worker(s) {:>10.3f} ms {:>10.1f} batches/s{}\n",
                             st["stage"].get<std::string>(), st["workers"].get<std::int64_t>(),
                             st["batch_ms"].get<double>(), st["batches_per_s"].get<double>(),
                             st["bounds_pipeline"].get<bool>() ? "  <- bounds the pipeline" : "");
  if (!w.stages.empty())
    for (const auto& st : j["pipeline_stages"])
      std::cout << fmt::format(
          "  pipeline stage {:<10} layers {} to {}: {} parameters, {} ops, {:.1f} us compute, "
          "peak memory {}{}\n",
          st["stage"].get<std::int64_t>(), st["layers"][0].get<std::int64_t>(), st["layers"][1].get<std::int64_t>(),
          st["parameters"].get<std::int64_t>(), st["ops_per_step"].get<std::int64_t>(),
          1e6 * st["device_compute_per_step_s"].get<double>(),
          format_bytes(st["peak_device_memory_bytes"].get<double>()),
          st["stage"].get<std::size_t>() == fullest ? " (the memory below)" : "");
  std::cout << fmt::format("  peak device memory        {} (persistent {}, step {}, data queue {})\n",
                           format_bytes(static_cast<double>(mg.memory.peak_bytes())),
                           format_bytes(static_cast<double>(mg.memory.persistent_bytes)),
                           format_bytes(static_cast<double>(mg.memory.arena_bytes)),
                           format_bytes(static_cast<double>(mg.memory.queue_buffer_bytes)));
  auto bytes = [](std::int64_t b) { return format_bytes(static_cast<double>(b)); };
  std::cout << fmt::format(
      "  memory by part            weights {}, optimizer state {}, other {}; at the step's peak gradients {}, "
      "activations {}, workspaces {}\n",
      bytes(mg.memory.weight_bytes), bytes(mg.memory.optimizer_state_bytes), bytes(mg.memory.other_persistent_bytes),
      bytes(mg.memory.peak_gradient_bytes), bytes(mg.memory.peak_activation_bytes),
      bytes(mg.memory.peak_workspace_bytes));
  std::cout << fmt::format("  fits device memory        non-sink {}, sink modes {}\n",
                           short_op_by_op.empty() ? "yes" : "no", short_sink.empty() ? "yes" : "no");
  std::cout << fmt::format("  dataset                   {} samples, {} steps per epoch\n", w.data.dataset.samples,
                           w.steps_per_epoch());
  // The executed graph, pass by pass: device ops and the bytes they move in HBM.
  std::string passes_line;
  for (std::size_t i = 0; i < g.pass_effects.size(); ++i) {
    const auto& p = g.pass_effects[i];
    if (i > 0 && p.ops == g.pass_effects[i - 1].ops && p.bytes == g.pass_effects[i - 1].bytes) continue;
    passes_line += fmt::format("{}{} {} ops {}", passes_line.empty() ? "" : " -> ", p.name, p.ops,
                               format_bytes(static_cast<double>(p.bytes)));
  }
  std::cout << fmt::format("  executed graph            {}\n\n", passes_line);
  if (w.shard_plan) {  // semi-auto: every tensor's layout on each rank, and the collectives
    const auto& plan = *w.shard_plan;
    auto dims = [](const workloads::Shape& s) {
      std::string t;
      for (auto v : s) t += (t.empty() ? "" : "x") + std::to_string(v);
      return t;
    };
    std::cout << fmt::format(
        "  semi-auto layouts on {} devices (cuts per dimension; partial: a sum over that many ranks)\n",
        w.parallel.devices);
    std::cout << fmt::format("  {:<44} {:>16} {:>14} {:>12} {:>8}\n", "tensor", "shape", "on each rank", "cuts",
                             "partial");
    for (const auto& l : plan.layouts) {
      std::string cuts;
      for (auto c : l.cuts) cuts += (cuts.empty() ? "" : ",") + std::to_string(c);
      std::cout << fmt::format("  {:<44} {:>16} {:>14} {:>12} {:>8}\n", l.tensor, dims(l.global), dims(l.local),
                               "(" + cuts + ")", l.partial);
    }
    std::cout << "\n";
    for (const auto& c : plan.collectives)
      std::cout << fmt::format("  {} {} {}: {} ranks {} apart, {} bytes\n", c.forward ? "forward " : "backward", c.kind,
                               c.name, c.group_size, c.group_stride, c.bytes);
    std::cout << "\n";
  }
  std::cout << fmt::format("  {:<52} {:>10} {:>7} {:>9}\n", "op", "time us", "blocks", "bound");
  for (std::size_t i = 0; i < g.step_tasks.size(); ++i) {
    if (g.step_tasks[i].kind != hostif::TaskKind::AiCore) continue;
    const auto& c = g.step_tasks[i].cost;
    std::cout << fmt::format("  {:<52} {:>10.2f} {:>7} {:>9}\n", g.step_tasks[i].name, c.time_s * 1e6, c.blocks,
                             aicore::bound_name(c.bound));
  }
  check_fits(cfg, mw, mg.memory, false);  // described, and refused if nothing fits: exit 2
  return 0;
}

std::vector<std::string> comma_list(const std::string& s);

int cmd_op(int argc, char* argv[]) {
  Options o;
  std::string type, dtype = "fp16", out_dtype, pad = "0", tile;
  int columns = 72;
  aicore::OpDesc d;
  po::options_description desc("options");
  desc.add_options()("help,h", "show this help")("type", po::value(&type)->required(), op_types_help().c_str())(
      "server", po::value(&o.config.server), "server preset (`ascendsim servers`; default generic-x86)")(
      "chip", po::value(&o.config.chip), "chip preset (default: the server's)")(
      "config", po::value(&o.config.config_file), "YAML file overriding preset parameters")(
      "set", po::value(&o.config.sets)->composing(), "override one parameter, key=value (repeatable)")(
      "dtype", po::value(&dtype)->default_value(dtype), "fp16 | fp32 | int8 (Cube ops: fp16 or int8)")(
      "out-dtype", po::value(&out_dtype), "result dtype (cast); default: --dtype")(
      "m", po::value(&d.m), "matmul: rows of the result; flash_attention: queries")(
      "n", po::value<std::int64_t>(),
      "matmul: columns of the result; conv/pool/batchnorm: batch; flash_attention: keys")(
      "k", po::value<std::int64_t>(), "matmul: inner dimension; conv: output channels; flash_attention: head width")(
      "batch", po::value<std::int64_t>(),
      "matmul: independent products of m x k by k x n (BatchMatMul); flash_attention: batch x heads")(
      "causal", po::bool_switch(&d.causal), "flash_attention: a decoder's mask (the tiles above the diagonal skipped)")(
      "transpose-a", po::bool_switch(&d.transpose_a), "matmul: A stored transposed")(
      "transpose-b", po::bool_switch(&d.transpose_b), "matmul: B stored transposed")(
      "c", po::value(&d.cin), "input channels")("h", po::value(&d.h), "input height")(
      "w", po::value(&d.w), "input width")("r", po::value(&d.kh), "kernel/window height")(
      "s", po::value(&d.kw), "kernel/window width")("stride", po::value(&d.stride)->default_value(1), "stride")(
      "pad", po::value(&pad)->default_value(pad), "padding: P on every side, or H,W (height, width)")(
      "elements", po::value(&d.elements), "vector ops: elements of the main operand")(
      "out-elements", po::value(&d.out_elements),
      "reductions, bias, softmax, one-hot: elements of the reduced side (default 1 for a full reduction)")(
      "operands", po::value(&d.operands)->default_value(2), "addn: number of operands")(
      "aicore-model", po::value<std::string>()->notifier([&o](const std::string& v) {
        shortcut(o, "aicore.model", "--aicore-model", v);
      }),
      "analytic | event: the pipe schedule, or every pipe of the busiest block simulated with its flags (prints "
      "the pipes' timeline; aicore.model)")(
      "tile", po::value(&tile),
      "event model: the L0 tile instead of the tiler's choice, M,N,K for a Cube op (multiples of 16), or the "
      "elements per tile of a Vector op")("columns", po::value(&columns)->default_value(columns),
                                          "event model: width of the timeline chart (10 to 400)")(
      "json", po::value(&o.json)->implicit_value("-"), "write JSON to FILE ('-' or no value: stdout)");
  po::variables_map vm = parse_options(argc, argv, desc, "op");
  if (vm.count("help")) {
    std::cout << "usage: ascendsim op --type TYPE [options]\n\n" << desc << "\n";
    return 0;
  }
  po::notify(vm);
  {
    const auto comma = pad.find(',');
    const auto h = whole_number(pad.substr(0, comma));
    const auto w = comma == std::string::npos ? h : whole_number(pad.substr(comma + 1));
    if (!h || !w) throw InputError("--pad '" + pad + "': expected P or H,W in pixels, e.g. 1 or 0,3");
    d.pad_h = *h;
    d.pad_w = *w;
  }
  const auto kind = aicore::parse_op_kind(type);
  if (!kind) throw InputError("--type '" + type + "' is not an op type (" + op_types_help() + ")");
  d.kind = *kind;
  const auto prec = aicore::parse_precision(dtype);
  if (!prec) throw InputError("--dtype '" + dtype + "': use fp16, fp32 or int8");
  d.precision = *prec;
  const auto out_prec = out_dtype.empty() ? prec : aicore::parse_precision(out_dtype);
  if (!out_prec) throw InputError("--out-dtype '" + out_dtype + "': use fp16, fp32 or int8");
  d.out_precision = *out_prec;
  const bool gemm = d.kind == aicore::OpKind::MatMul || aicore::is_attention(d.kind);
  if (vm.count("n")) (gemm ? d.n : d.batch) = vm["n"].as<std::int64_t>();
  if (vm.count("k")) (gemm ? d.k : d.cout) = vm["k"].as<std::int64_t>();
  if (d.causal && !aicore::is_attention(d.kind)) throw InputError("--causal: a flash_attention's mask");
  if (vm.count("batch")) {
    if (!gemm) throw InputError("--batch: a matmul's or a flash_attention's; conv/pool/batchnorm take --n");
    d.batch = vm["batch"].as<std::int64_t>();
    if (d.batch < 1) throw InputError("--batch " + std::to_string(d.batch) + ": give 1 or more products");
  }
  if (d.kind == aicore::OpKind::BatchNorm || d.kind == aicore::OpKind::BatchNormGrad) d.kh = d.kw = 1;
  if (!vm.count("out-elements") && !aicore::is_cube(d.kind) && !aicore::takes_nchw(d.kind)) {
    switch (d.kind) {  // a full reduction / one-row softmax unless told otherwise
      case aicore::OpKind::BiasAddGrad:
      case aicore::OpKind::ReduceSum:
      case aicore::OpKind::ReduceMean:
      case aicore::OpKind::ReduceMeanGrad:
      case aicore::OpKind::SoftmaxCrossEntropy:
      case aicore::OpKind::SoftmaxCrossEntropyGrad:
      case aicore::OpKind::OneHot:
        d.out_elements = 1;
        break;
      default:
        break;
    }
  }
  if (d.out_elements < 0) throw InputError("--out-elements must not be negative");
  if (d.operands < 2) throw InputError("--operands must be at least 2");

  const SystemConfig cfg = load_config(o.request());
  if (aicore::is_attention(d.kind) && !cfg.chip.aicore.flash_attention)
    throw InputError("--type " + type + ": " + cfg.chip.name +
                     "'s backend has no fused attention kernel (aicore.flash_attention is false); the ascend910b "
                     "preset has it");
  const bool event = cfg.chip.aicore.model == "event";
  if (columns < 10 || columns > 400) throw InputError("--columns " + std::to_string(columns) + ": give 10 to 400");
  std::optional<aicore::L0Tile> forced;
  if (!tile.empty()) {
    if (!event) throw InputError("--tile works with the event model only: add --aicore-model event");
    const auto parts = comma_list(tile);
    aicore::L0Tile l0;
    std::vector<std::int64_t*> fields = {&l0.m, &l0.n, &l0.k};
    const std::size_t want = aicore::is_cube(d.kind) ? 3 : 1;
    if (aicore::is_attention(d.kind))
      throw InputError(
          "--tile: a fused attention kernel has its own Br x Bc tiles (docs/aicore.md); it takes no other");
    if (parts.size() != want)
      throw InputError(
          "--tile '" + tile + "': give " +
          (want == 3 ? "M,N,K for a Cube op, e.g. 128,256,64" : "the elements per tile of a Vector op, e.g. 8192"));
    for (std::size_t i = 0; i < want; ++i) {
      const auto v = whole_number(parts[i]);
      if (!v || *v <= 0) throw InputError("--tile '" + tile + "': '" + parts[i] + "' is not a positive whole number");
      *fields[i] = *v;
    }
    forced = l0;
  }
  aicore::OpCost c;
  try {
    aicore::EventOptions eo;
    eo.full_timeline = true;
    if (event)
      c = aicore::simulate_tiling(d, aicore::tile_op(d, cfg.chip.aicore, forced ? &*forced : nullptr), cfg.chip.aicore,
                                  cfg.chip.memory, eo);
    else
      c = aicore::make_pipe_cost_model(cfg.chip.aicore, cfg.chip.memory)->estimate(d);
  } catch (const aicore::EventModelError& e) {
    throw InputError(e.what());
  } catch (const std::invalid_argument& e) {
    throw InputError(e.what());
  } catch (const std::logic_error& e) {  // a footprint the buffers cannot hold
    throw InputError(std::string(e.what()) +
                     (forced ? " — choose a smaller --tile" : " — check the buffer sizes of the configuration"));
  }
  const auto& core = cfg.chip.aicore;
  const double peak_macs =
      static_cast<double>(core.cores * (d.precision == aicore::Precision::INT8 ? core.cube_int8_macs_per_cycle
                                                                               : core.cube_fp16_macs_per_cycle)) *
      core.freq_ghz * 1e9;
  const double achieved = c.time_s > 0 ? 2.0 * c.macs / c.time_s / 1e12 : 0.0;
  const double intensity = c.gm_bytes > 0 ? 2.0 * c.macs / c.gm_bytes : 0.0;

  ordered_json j;
  j["op"] = d.to_string();
  j["chip"] = cfg.chip.name;
  j["aicore_model"] = cfg.chip.aicore.model;
  j["cycles"] = c.block_cycles;
  j["span_cycles"] = c.span_cycles;
  j["hbm_floor_cycles"] = c.hbm_floor_cycles;
  j["time_us"] = c.time_s * 1e6;
  j["macs"] = c.macs;
  j["gm_bytes"] = c.gm_bytes;
  j["mte_bytes"] = c.mte_bytes;
  j["achieved_tflops"] = achieved;
  j["peak_tflops"] = 2.0 * peak_macs / 1e12;
  j["hbm_bandwidth_gbps"] = cfg.chip.memory.hbm_bandwidth_gbps;
  j["hbm_sustained_gbps"] = cfg.chip.memory.hbm_gbps();
  j["arithmetic_intensity_flop_per_byte"] = intensity;
  j["bound"] = aicore::bound_name(c.bound);
  j["blocks"] = c.blocks;
  j["tiling"] = c.tiling.describe();
  j["tiles"] = c.tiling.tile_count();
  ordered_json pipes = ordered_json::object();
  for (std::size_t p = 0; p < aicore::kPipeCount; ++p)
    pipes[aicore::pipe_name(static_cast<aicore::Pipe>(p))] = c.pipe_busy[p];
  pipes["start"] = c.overhead_cycles;
  j["pipes"] = pipes;
  j["buffers_bytes"] = {{"l1", c.tiling.use.l1},
                        {"l0a", c.tiling.use.l0a},
                        {"l0b", c.tiling.use.l0b},
                        {"l0c", c.tiling.use.l0c},
                        {"ub", c.tiling.use.ub}};
  ordered_json ratios = ordered_json::object();
  for (const auto& [name, pipe] : aicore::op_summary_ratios()) ratios[name] = aicore::pipe_ratio(c, pipe);
  j["op_summary"] = ratios;
  if (c.timeline) {  // the event model: when each pipe was busy, cycles from the op's start
    ordered_json tl = ordered_json::object();
    tl["steps"] = c.timeline->steps;
    for (std::size_t p = 0; p < aicore::kPipeCount; ++p) {
      ordered_json spans = ordered_json::array();
      for (const auto& i : c.timeline->pipes[p]) spans.push_back({i.start, i.end});
      tl[aicore::pipe_name(static_cast<aicore::Pipe>(p))] = spans;
    }
    j["timeline_cycles"] = tl;
    ordered_json waits = ordered_json::object();
    for (std::size_t p = 0; p < aicore::kPipeCount; ++p)
      waits[aicore::pipe_name(static_cast<aicore::Pipe>(p))] = {{"input", c.timeline->starved[p]},
                                                                {"free_half", c.timeline->blocked[p]}};
    j["pipes_waiting"] = waits;
  }
  if (!o.json.empty()) {
    write_output(o.json, j.dump(2) + "\n");
    if (o.json == "-") return 0;
  }
  std::cout << fmt::format("{} on {}\n", d.to_string(), cfg.chip.name);
  std::cout << fmt::format("  time            {:.3f} us ({:.0f} cycles, {} blocks)\n", c.time_s * 1e6, c.block_cycles,
                           c.blocks);
  // What the cycles are: the busiest block's pipes, unless the op's HBM bytes take longer.
  if (c.hbm_floor_cycles > c.span_cycles)
    std::cout << fmt::format(
        "  cycles          {:.0f} start-up + {:.0f} for the op's {:.0f} B through HBM at {:.0f} GB/s "
        "(the busiest block's pipes take {:.0f})\n",
        c.overhead_cycles, c.hbm_floor_cycles, c.gm_bytes, cfg.chip.memory.hbm_gbps(), c.span_cycles);
  else
    std::cout << fmt::format(
        "  cycles          {:.0f} start-up + {:.0f} of the busiest block's pipes (the op's HBM "
        "bytes alone would take {:.0f})\n",
        c.overhead_cycles, c.span_cycles, c.hbm_floor_cycles);
  std::cout << fmt::format("  bound           {}\n", aicore::bound_name(c.bound));
  std::cout << fmt::format("  tiling          {}\n", c.tiling.describe());
  if (c.macs > 0)
    std::cout << fmt::format("  compute         {:.0f} MACs, {:.2f} of {:.1f} TFLOPS ({:.1f}%)\n", c.macs, achieved,
                             2.0 * peak_macs / 1e12, 100.0 * achieved / (2.0 * peak_macs / 1e12));
  std::cout << fmt::format("  memory          {:.0f} B through HBM ({:.0f} B moved by MTE), {:.2f} FLOP/B\n",
                           c.gm_bytes, c.mte_bytes, intensity);
  if (c.timeline) {  // the event model: where each pipe's time went, working or waiting
    std::cout << "  pipe cycles (busiest block): busy, waiting for its input, waiting for a free half of its output\n";
    for (std::size_t p = 0; p < aicore::kPipeCount; ++p)
      std::cout << fmt::format("    {:<8} {:>14.0f} {:>14.0f} {:>14.0f}\n",
                               aicore::pipe_name(static_cast<aicore::Pipe>(p)), c.pipe_busy[p], c.timeline->starved[p],
                               c.timeline->blocked[p]);
  } else {
    std::cout << "  pipe busy (cycles, busiest block):\n";
    for (std::size_t p = 0; p < aicore::kPipeCount; ++p)
      std::cout << fmt::format("    {:<8} {:>14.0f}\n", aicore::pipe_name(static_cast<aicore::Pipe>(p)),
                               c.pipe_busy[p]);
  }
  std::cout << fmt::format("    {:<8} {:>14.0f}\n", "start", c.overhead_cycles);
  std::cout << fmt::format("  buffers (B)     L1 {}  L0A {}  L0B {}  L0C {}  UB {}\n", c.tiling.use.l1,
                           c.tiling.use.l0a, c.tiling.use.l0b, c.tiling.use.l0c, c.tiling.use.ub);
  std::string summary;
  for (const auto& [name, pipe] : aicore::op_summary_ratios())
    summary += fmt::format("{}{} {:.3f}", summary.empty() ? "" : "  ", name, aicore::pipe_ratio(c, pipe));
  std::cout << "  op summary      " << summary << "\n";
  if (c.timeline) {
    const auto& t = *c.timeline;
    const double end = c.block_cycles;
    std::cout << fmt::format(
                     "  pipe timeline of the busiest block ({} steps, {} buffer halves; each column {:.0f} "
                     "cycles; # busy, + over half, . some):\n",
                     t.steps, t.halves[0], end / columns)
              << aicore::timeline_chart(t, 0, end, columns);
    // The first steps, where the pipes fill: about twelve steps' worth after the start-up.
    const double first = c.overhead_cycles;
    const double span =
        std::min(end - first, 12.0 * (end - first) / static_cast<double>(std::max<std::int64_t>(1, t.steps)));
    if (t.steps > 12)
      std::cout << fmt::format("  the first 12 steps (cycles {:.0f} to {:.0f}; each column {:.1f} cycles):\n", first,
                               first + span, span / columns)
                << aicore::timeline_chart(t, first, first + span, columns);
  }
  return 0;
}

int cmd_params(int argc, char* argv[]) {
  Options o;
  po::options_description desc("options");
  desc.add_options()("help,h", "show this help")("server", po::value(&o.config.server),
                                                 "show values on this server preset (default generic-x86)")(
      "chip", po::value(&o.config.chip), "show values of this chip preset (default: the server's)")(
      "config", po::value(&o.config.config_file), "YAML file overriding preset parameters")(
      "set", po::value(&o.config.sets)->composing(), "override one parameter, key=value (repeatable)")(
      "json", po::value(&o.json)->implicit_value("-"), "write them as JSON to FILE ('-' or no value: stdout)");
  if (!parse(argc, argv, desc, "params")) return 0;
  SystemConfig cfg = load_config(o.request());
  SystemConfig defaults;
  const ParamSet ps = bind_params(cfg);
  const ParamSet ds = bind_params(defaults);
  if (!o.json.empty()) {
    const ordered_json values = ps.to_json();
    ordered_json j = ordered_json::object();
    for (const ParamSpec& s : ps.specs()) {
      ordered_json v = values;
      for (std::size_t at = 0, dot = 0; dot != std::string::npos; at = dot + 1) {  // "a.b.c" in the nested values
        dot = s.key.find('.', at);
        v = v.at(s.key.substr(at, dot == std::string::npos ? std::string::npos : dot - at));
      }
      j[s.key] = {{"value", v}, {"unit", s.unit}, {"range", ParamSet::range_string(s)}, {"description", s.description}};
    }
    write_output(o.json, j.dump(2) + "\n");
    return 0;
  }
  std::cout << fmt::format("{:<34} {:>12} {:>12} {:<9} {:<18} {}\n", "parameter", cfg.chip.name, "built-in", "unit",
                           "range", "description");
  for (std::size_t i = 0; i < ps.specs().size(); ++i) {
    const ParamSpec& s = ps.specs()[i];
    if (s.key == "chip.description" || s.key == "server.description") continue;
    std::cout << fmt::format("{:<34} {:>12} {:>12} {:<9} {:<18} {}\n", s.key, ParamSet::value_string(s),
                             ParamSet::value_string(ds.specs()[i]), s.unit, ParamSet::range_string(s), s.description);
  }
  return 0;
}

int cmd_stats(int argc, char* argv[]) {
  Options o;
  po::options_description desc = common_options(o);
  if (!parse(argc, argv, desc, "stats")) return 0;
  const auto stats = describe_statistics(make_request(o, runtime::all_strategies()));
  if (!o.json.empty()) {
    ordered_json j = ordered_json::array();
    for (const auto& s : stats) j.push_back({{"path", s.path}, {"unit", s.unit}, {"description", s.description}});
    write_output(o.json, j.dump(2) + "\n");
    if (o.json == "-") return 0;
  }
  std::cout << "statistics of each run, under runs[].stats in the JSON report (paths below the run)\n\n";
  std::cout << fmt::format("{:<36} {:<9} {}\n", "statistic", "unit", "description");
  for (const auto& s : stats) std::cout << fmt::format("{:<36} {:<9} {}\n", s.path, s.unit, s.description);
  return 0;
}

/// A non-negative share given as a percentage ("1%") or, without the sign, as a fraction ("0.01")
/// or, if `bare_is_percent`, as a percentage ("15").
double parse_share(const std::string& text, const std::string& option, bool bare_is_percent) {
  double v = -1;
  const bool pct = !text.empty() && text.back() == '%';
  const std::string num = pct ? text.substr(0, text.size() - 1) : text;
  try {
    std::size_t used = 0;
    v = std::stod(num, &used) / (pct || bare_is_percent ? 100.0 : 1.0);
    if (used != num.size()) v = -1;
  } catch (const std::exception&) {
    v = -1;
  }
  if (!(v >= 0) || !std::isfinite(v))
    throw InputError(option + " '" + text + "': give a non-negative " +
                     (bare_is_percent ? "percentage, e.g. 15%" : "fraction (0.01) or percentage (1%)"));
  return v;
}

int cmd_profile(int argc, char* argv[]) {
  Options o;
  std::string out_dir;
  po::options_description desc = common_options(o);
  desc.add_options()("out", po::value(&out_dir)->required(),
                     "directory for aicore_op_detail.csv and aicore_op_type.csv (MindSpore profiler columns) and "
                     "op_summary.csv (the CANN profiler's op summary: block dim, cycles, each pipe's ratio)");
  if (!parse(argc, argv, desc, "profile")) return 0;
  Outputs files;
  files.directory(out_dir, "--out");
  const OpProfile p = profile_ops(make_request(o, runtime::all_strategies()));
  const std::string detail = (std::filesystem::path(out_dir) / "aicore_op_detail.csv").string();
  const std::string types = (std::filesystem::path(out_dir) / "aicore_op_type.csv").string();
  const std::string summary = (std::filesystem::path(out_dir) / "op_summary.csv").string();
  files.add(detail, "--out");
  files.add(types, "--out");
  files.add(summary, "--out");
  std::string d = "full_kernel_name,op_type,execution_time_ms,execution_frequency,percent\n";
  for (const auto& op : p.ops)
    d += fmt::format("{},{},{:.6f},{},{:.4f}\n", op.full_name, op.type, op.time_ms, op.count,
                     p.step_ms > 0 ? 100 * op.time_ms * static_cast<double>(op.count) / p.step_ms : 0.0);
  std::string t = "op_type,execution_time_ms,execution_frequency,percent\n";
  for (const auto& ty : p.types)
    t += fmt::format("{},{:.6f},{},{:.4f}\n", ty.type, ty.time_ms, ty.count, 100 * ty.share);
  // CANN's op summary: one row per task, its duration and each pipe's share of the busiest block's
  // cycles (aic_: the Cube side, aiv_: the Vector unit's pipes).
  std::string s = "Op Name,OP Type,Task Type,Block Dim,Task Duration(us),aicore_model,aic_total_cycles";
  for (const auto& column : aicore::op_summary_ratios()) s += std::string(",") + column.first;
  s += ",bound\n";
  for (const auto& op : p.ops) {
    s += fmt::format("{},{},AI_CORE,{},{:.3f},{},{:.0f}", op.full_name, op.type, op.blocks, op.time_ms * 1e3,
                     p.aicore_model, op.cycles);
    for (double r : op.ratios) s += fmt::format(",{:.4f}", r);
    s += "," + op.bound + "\n";
  }
  files.stage(detail, d);
  files.stage(types, t);
  files.stage(summary, s);
  files.commit();
  runtime::TextTable table({"op_type", "time ms/step", "count", "share"});
  for (std::size_t i = 0; i < p.types.size() && i < 10; ++i)
    table.add({p.types[i].type, fmt::format("{:.3f}", p.types[i].time_ms), std::to_string(p.types[i].count),
               fmt::format("{:.1f}%", 100 * p.types[i].share)});
  std::cout << fmt::format("AI-core time of one step: {:.3f} ms in {} ops; top op types:\n", p.step_ms, p.ops.size())
            << table.render();
  return 0;
}

int cmd_aicore_check(int argc, char* argv[]) {
  Options o;
  std::string tolerance = "10%";
  std::int64_t top = 10;
  po::options_description desc = common_options(o);
  desc.add_options()("tolerance", po::value(&tolerance)->default_value(tolerance),
                     "difference between the models that counts as agreement (a percentage)")(
      "top", po::value(&top)->default_value(top), "ops beyond the tolerance to list (largest first)");
  if (!parse(argc, argv, desc, "aicore-check")) return 0;
  const double tol = parse_share(tolerance, "--tolerance", true);
  if (top < 0) throw InputError("--top " + std::to_string(top) + ": give 0 or more ops to list");
  const AicoreModelCheck check = check_aicore_models(make_request(o, runtime::all_strategies()));
  struct Type {
    std::string type;
    std::int64_t distinct = 0, count = 0;
    double analytic = 0, event = 0, worst = 0;
  };
  std::vector<Type> types;
  std::map<std::string, std::size_t> at;
  std::int64_t within = 0;
  for (const auto& op : check.ops) {
    auto it = at.try_emplace(op.type, types.size()).first;
    if (it->second == types.size()) types.push_back({op.type});
    Type& t = types[it->second];
    ++t.distinct;
    t.count += op.count;
    t.analytic += op.analytic_us * static_cast<double>(op.count);
    t.event += op.event_us * static_cast<double>(op.count);
    if (std::fabs(op.difference()) > std::fabs(t.worst)) t.worst = op.difference();
    if (std::fabs(op.difference()) <= tol) ++within;
  }
  double analytic = 0, event = 0;
  for (const auto& t : types) {
    analytic += t.analytic;
    event += t.event;
  }
  ordered_json j;
  j["workload"] = o.workload;
  j["tolerance"] = tol;
  j["ops"] = ordered_json::array();
  for (const auto& op : check.ops)
    j["ops"].push_back({{"type", op.type},
                        {"op", op.desc},
                        {"count", op.count},
                        {"analytic_us", op.analytic_us},
                        {"event_us", op.event_us},
                        {"difference", op.difference()},
                        {"analytic_bound", op.analytic_bound},
                        {"event_bound", op.event_bound}});
  j["step_analytic_ms"] = analytic / 1e3;
  j["step_event_ms"] = event / 1e3;
  j["not_compared"] = check.skipped;
  if (!o.json.empty()) {
    write_output(o.json, j.dump(2) + "\n");
    if (o.json == "-") return 0;
  }
  runtime::TextTable table({"op type", "distinct", "per step", "analytic ms", "event ms", "worst op"});
  for (const auto& t : types)
    table.add({t.type, std::to_string(t.distinct), std::to_string(t.count), fmt::format("{:.3f}", t.analytic / 1e3),
               fmt::format("{:.3f}", t.event / 1e3), fmt::format("{:+.1f}%", 100 * t.worst)});
  std::cout << fmt::format(
                   "{}: {} distinct AI-core ops of one step timed by both models ({:.1f} s of event simulation)\n",
                   o.workload, check.ops.size(), check.wall_s)
            << table.render()
            << fmt::format("step: analytic {:.3f} ms, event {:.3f} ms ({:+.1f}%); {} of {} ops agree within {:.3g}%\n",
                           analytic / 1e3, event / 1e3, analytic > 0 ? 100 * (event / analytic - 1) : 0.0, within,
                           check.ops.size(), 100 * tol);
  std::vector<const AicoreModelCheck::Op*> beyond;
  for (const auto& op : check.ops)
    if (std::fabs(op.difference()) > tol) beyond.push_back(&op);
  std::stable_sort(beyond.begin(), beyond.end(), [](const auto* a, const auto* b) {
    return std::fabs(a->difference()) > std::fabs(b->difference());
  });
  for (const auto& s : check.skipped) std::cout << "not compared: " << s << "\n";
  if (!beyond.empty() && top > 0) {
    std::cout << "beyond the tolerance (docs/aicore.md says why):\n";
    for (std::size_t i = 0; i < beyond.size() && static_cast<std::int64_t>(i) < top; ++i)
      std::cout << fmt::format("  {:+7.1f}%  {:.2f} -> {:.2f} us  {} -> {}  {}\n", 100 * beyond[i]->difference(),
                               beyond[i]->analytic_us, beyond[i]->event_us, beyond[i]->analytic_bound,
                               beyond[i]->event_bound, beyond[i]->desc);
  }
  return 0;
}

int cmd_validate(int argc, char* argv[]) {
  std::string file = std::string(ASCENDSIM_SOURCE_DIR) + "/bench/validation/figures.yaml", tolerance = "15%";
  std::string html, json;
  po::options_description desc("options");
  desc.add_options()("help,h", "show this help")("figures", po::value(&file)->default_value(file),
                                                 "published figures with the runs that reproduce them")(
      "tolerance", po::value(&tolerance)->default_value(tolerance), "error that counts as within (a percentage)")(
      "html", po::value(&html), "write the validation page (error per figure, table with sources) to FILE")(
      "json", po::value(&json), "write the rows as JSON to FILE");
  if (!parse(argc, argv, desc, "validate")) return 0;
  const double tol = parse_share(tolerance, "--tolerance", true);
  Outputs files;
  files.add(html, "--html");
  files.add(json, "--json");
  const auto rows = validate(load_figures(file, default_config_dir()));
  if (!html.empty()) files.stage(html, validation_html(rows, tol));
  if (!json.empty()) files.stage(json, validation_json(rows).dump(2) + "\n");
  files.print(validation_table(rows, tol));
  files.commit();
  return 0;
}

std::vector<std::string> comma_list(const std::string& s) {
  std::vector<std::string> out;
  if (s.empty()) return out;
  std::size_t from = 0;
  for (;;) {
    const std::size_t comma = s.find(',', from);
    out.push_back(s.substr(from, comma == std::string::npos ? std::string::npos : comma - from));
    if (comma == std::string::npos) return out;
    from = comma + 1;
  }
}

int cmd_calibrate(int argc, char* argv[]) {
  CalibrationRequest req;
  req.figures_path = std::string(ASCENDSIM_SOURCE_DIR) + "/bench/validation/figures.yaml";
  req.config_dir = default_config_dir();
  std::string fit, only, json, out;
  std::vector<std::string> starts;
  bool quiet = false;
  po::options_description desc("options");
  desc.add_options()("help,h", "show this help")(
      "figures", po::value(&req.figures_path)->default_value(req.figures_path),
      "published figures with their runs, and the `fit:` bounds of the parameters")(
      "fit", po::value(&fit), "parameter keys to fit, comma-separated (1 to 4, each with bounds in the figures file)")(
      "only", po::value(&only), "figure ids to fit to, comma-separated (default: those marked host_bound: true)")(
      "start", po::value(&starts)->composing(),
      "KEY=VALUE: start a fitted parameter here instead of at its configured value (repeatable)")(
      "max-iterations", po::value(&req.options.max_iterations)->default_value(req.options.max_iterations),
      "Levenberg-Marquardt iterations per fit at most")(
      "json", po::value(&json), "write parameters, figures and leave-one-out errors as JSON to FILE")(
      "out", po::value(&out), "write the fitted values as a configuration fragment (YAML, for --config) to FILE")(
      "quiet,q", po::bool_switch(&quiet), "no progress on stderr");
  if (!parse(argc, argv, desc, "calibrate")) return 0;
  if (fit.empty())
    throw InputError(
        "--fit: give the parameter keys to fit (1 to 4), e.g. --fit host.map_op_overhead_us,host.decode_ns_per_pixel");
  if (req.options.max_iterations < 1 || req.options.max_iterations > 1000)
    throw InputError("--max-iterations " + std::to_string(req.options.max_iterations) + ": give 1 to 1000");
  req.fit = comma_list(fit);
  req.only = comma_list(only);
  if (!only.empty())
    for (const auto& id : req.only)
      if (id.empty()) throw InputError("--only " + only + ": an empty figure id");
  req.start = starts;
  Outputs files;
  files.add(json, "--json");
  files.add(out, "--out");
  const auto t0 = std::chrono::steady_clock::now();
  if (!quiet) req.options.progress = [](const std::string& line) { std::cerr << "calibrate: " << line << "\n"; };
  const Calibration c = calibrate(req);
  if (!json.empty()) files.stage(json, calibration_json(c).dump(2) + "\n");
  if (!out.empty()) files.stage(out, calibration_yaml(c));
  files.print(calibration_table(c));
  files.commit();
  if (!quiet)
    std::cerr << fmt::format("calibrate: {:.1f} s\n",
                             std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  return 0;
}

int cmd_suite(int argc, char* argv[]) {
  std::string file, out_dir;
  bool quiet = false;
  po::options_description desc("options");
  desc.add_options()("help,h", "show this help")("suite", po::value(&file)->required(),
                                                 "suite file (YAML: name, runs; see bench/suites/)")(
      "out", po::value(&out_dir)->required(), "directory for one JSON report per run and index.json")(
      "quiet,q", po::bool_switch(&quiet), "no progress on stderr");
  po::positional_options_description pos;
  pos.add("suite", 1);
  if (!parse(argc, argv, desc, "suite", &pos)) return 0;
  std::string name;
  const auto entries = load_suite(file, default_config_dir(), &name);
  Outputs files;
  files.directory(out_dir, "--out");
  ordered_json index;
  index["suite"] = name;
  index["entries"] = ordered_json::array();
  for (const auto& e : entries) files.add((std::filesystem::path(out_dir) / (e.name + ".json")).string(), "--out");
  const std::string index_path = (std::filesystem::path(out_dir) / "index.json").string();
  files.add(index_path, "--out");
  for (std::size_t i = 0; i < entries.size(); ++i) {
    const auto& e = entries[i];
    if (!quiet) std::cerr << "[" << i + 1 << "/" << entries.size() << "] " << e.name << "\n";
    if (e.serve) {  // a serving run
      ServeOutcome served;
      try {
        served = serve(*e.serve);
      } catch (const InputError& err) {
        throw InputError(file + ": run '" + e.name + "': " + cli_message(err));
      }
      const std::string report_file = e.name + ".json";
      files.stage((std::filesystem::path(out_dir) / report_file).string(), served.report().dump(2) + "\n");
      ordered_json launches = ordered_json::array();
      for (auto m : served.modes) launches.push_back(runtime::launch_mode_name(m));
      index["entries"].push_back({{"name", e.name},
                                  {"file", report_file},
                                  {"workload", served.header["workload"]},
                                  {"chip", served.header["chip"]},
                                  {"serve", true},
                                  {"launches", launches}});
      continue;
    }
    RunOutcome out;
    try {
      out = run(e.request);
    } catch (const InputError& err) {
      throw InputError(file + ": run '" + e.name + "': " + cli_message(err));
    }
    if (out.failed()) {
      std::cerr << "error: " << file << ": run '" << e.name << "' failed: " << out.failure_message()
                << "no reports written\n";
      return kExitRunFailed;
    }
    const std::string report_file = e.name + ".json";
    files.stage((std::filesystem::path(out_dir) / report_file).string(), out.report().dump(2) + "\n");
    ordered_json strategies = ordered_json::array(), steps = ordered_json::array();
    for (const auto& r : out.runs) {
      strategies.push_back(runtime::strategy_name(r.session.strategy));
      steps.push_back(r.steps_completed);
    }
    index["entries"].push_back({{"name", e.name},
                                {"file", report_file},
                                {"workload", out.header.workload},
                                {"chip", out.header.chip},
                                {"strategies", strategies},
                                {"steps", steps}});
  }
  files.stage(index_path, index.dump(2) + "\n");
  files.commit();
  std::cout << fmt::format("{}: {} run(s), reports in {}\n", name, entries.size(), out_dir);
  return 0;
}

int cmd_diff(int argc, char* argv[]) {
  std::string base, now, tolerance_arg = "1%", junit;
  bool all = false;
  po::options_description desc("options");
  desc.add_options()("help,h", "show this help")("base", po::value(&base)->required(),
                                                 "the reference: a JSON report or a suite output directory")(
      "new", po::value(&now)->required(), "the report or suite output to compare with it")(
      "tolerance", po::value(&tolerance_arg)->default_value(tolerance_arg),
      "largest relative change that passes, as 1% or 0.01")(
      "junit", po::value(&junit), "write a JUnit XML report (one test case per figure) to FILE")(
      "all", po::bool_switch(&all), "list every figure compared, not only those that moved");
  po::positional_options_description pos;
  pos.add("base", 1).add("new", 1);
  if (!parse(argc, argv, desc, "diff", &pos)) return 0;
  const double tolerance = parse_share(tolerance_arg, "--tolerance", false);
  Outputs files;
  files.add(junit, "--junit");
  const DiffResult d = diff_reports(base, now, tolerance);
  if (!junit.empty()) files.stage(junit, diff_junit(d, tolerance));
  files.print(diff_table(d, tolerance, all));
  files.commit();
  return d.moved() ? 1 : 0;
}

/// `chips` and `servers`: every preset `presets` finds in the configuration directory (its
/// `subdir`), each loaded through `name_it`, printed as `line` gives it or written as `entry`.
int list_presets(int argc, char* argv[], const std::string& command, const std::string& subdir,
                 std::vector<std::string> (*presets)(const std::string&),
                 const std::function<void(ConfigRequest&, const std::string&)>& name_it,
                 const std::function<std::string(const std::string&, const SystemConfig&)>& line,
                 const std::function<ordered_json(const SystemConfig&)>& entry) {
  po::options_description desc("options");
  std::string json;
  desc.add_options()("help,h", "show this help")("json", po::value(&json)->implicit_value("-"),
                                                 "write them as JSON to FILE ('-' or no value: stdout)");
  if (!parse(argc, argv, desc, command)) return 0;
  const std::string dir = default_config_dir();
  const auto names = presets(dir);
  if (names.empty())
    throw InputError("no " + subdir.substr(0, subdir.size() - 1) + " presets in " + dir + "/" + subdir +
                     "; set ASCENDSIM_CONFIG_DIR");
  ordered_json j = ordered_json::object();
  for (const auto& n : names) {
    ConfigRequest req;
    req.dir = dir;
    name_it(req, n);
    const SystemConfig cfg = load_config(req);
    if (json.empty()) std::cout << line(n, cfg) << "\n";
    j[n] = entry(cfg);
  }
  if (!json.empty()) write_output(json, j.dump(2) + "\n");
  return 0;
}

int cmd_chips(int argc, char* argv[]) {
  return list_presets(
      argc, argv, "chips", "chips", chip_presets, [](ConfigRequest& r, const std::string& n) { r.chip = n; },
      [](const std::string& n, const SystemConfig& c) { return fmt::format("{:<12} {}", n, c.chip.description); },
      [](const SystemConfig& c) { return ordered_json(c.chip.description); });
}

int cmd_servers(int argc, char* argv[]) {
  return list_presets(
      argc, argv, "servers", "servers", server_presets, [](ConfigRequest& r, const std::string& n) { r.server = n; },
      [](const std::string& n, const SystemConfig& c) {
        return fmt::format("{:<14} {} (chip {}, {} devices, {} host cores)", n, c.server.description,
                           c.server.chip, c.server.devices_per_server, c.host.cpu_cores);
      },
      [](const SystemConfig& c) {
        return ordered_json{{"description", c.server.description},
                            {"chip", c.server.chip},
                            {"devices_per_server", c.server.devices_per_server},
                            {"host_cpu_cores", c.host.cpu_cores}};
      });
}

int cmd_make_image_folder(int argc, char* argv[]) {
  namespace fs = std::filesystem;
  po::options_description desc("options");
  std::string dir;
  std::int64_t classes = 10, per_class = 100;
  std::uint64_t seed = 1;
  desc.add_options()("help,h", "show this help")("out", po::value(&dir)->required(), "the folder to create")(
      "classes", po::value(&classes)->default_value(classes), "class subfolders")(
      "per-class", po::value(&per_class)->default_value(per_class), "JPEG files per class")(
      "seed", seed_value(seed), "seed of the sizes and contents");
  if (!parse(argc, argv, desc, "make-image-folder")) return 0;
  // A folder is a dataset for a run: up to a million files, in up to 100,000 classes.
  constexpr std::int64_t kMaxClasses = 100'000, kMaxFiles = 1'000'000;
  if (classes < 1 || classes > kMaxClasses)
    throw InputError(fmt::format("--classes {}: give 1 to {} class folders", classes, kMaxClasses));
  if (per_class < 1 || per_class > kMaxFiles / classes)
    throw InputError(
        fmt::format("--per-class {}: give 1 to {} files per class ({} files at most in all, here {} "
                    "classes)",
                    per_class, kMaxFiles / classes, kMaxFiles, classes));
  std::error_code ec;
  if (fs::exists(dir, ec) && !(fs::is_directory(dir, ec) && fs::is_empty(dir, ec)))
    throw InputError("--out " + dir + ": exists and is not an empty folder; give a new folder");
  // The folder is written under a staging name beside it and renamed into place when whole; its
  // missing parents are made, and removed again if the command fails.
  Outputs parents;
  const fs::path target = fs::absolute(dir, ec).lexically_normal();
  const fs::path real = (target.has_filename() ? target : target.parent_path());
  parents.directory(real.parent_path().string(), "--out");
  struct statvfs vfs {};
  if (::statvfs(real.parent_path().c_str(), &vfs) == 0) {
    const auto free = static_cast<std::int64_t>(vfs.f_bavail) * static_cast<std::int64_t>(vfs.f_frsize);
    const std::int64_t need = runtime::image::estimate_image_folder_bytes(classes, per_class, seed, 8,
                                                                          static_cast<std::int64_t>(vfs.f_frsize));
    if (need > free)
      throw InputError("--out " + dir + ": " + std::to_string(classes * per_class) + " images would take about " +
                       format_bytes(static_cast<double>(need)) + " but the file system has " +
                       format_bytes(static_cast<double>(free)) + " free; give fewer --classes or --per-class");
  }
  std::string staging = (real.parent_path() / ("." + real.filename().string() + ".XXXXXX")).string();
  if (::mkdtemp(staging.data()) == nullptr)
    throw InputError("--out " + dir + ": cannot create a folder in " + real.parent_path().string() + ": " +
                     std::strerror(errno));
  std::int64_t n = 0;
  try {
    n = runtime::image::write_image_folder(staging, static_cast<int>(classes), static_cast<int>(per_class), seed,
                                           [] { check_stop(); });
    ::chmod(
        staging.c_str(), 0777 & ~[] {
          const mode_t m = ::umask(0);
          ::umask(m);
          return m;
        }());
    check_stop();
    if (::rename(staging.c_str(), real.c_str()) != 0)
      throw InputError("--out " + dir + ": cannot put the folder in place: " + std::strerror(errno));
  } catch (const std::exception& e) {
    fs::remove_all(staging, ec);
    if (dynamic_cast<const Stopped*>(&e) || dynamic_cast<const InputError*>(&e)) throw;
    throw InputError("--out " + dir + ": " + e.what() + "; nothing was left behind");
  }
  parents.commit();
  std::cout << "wrote " << n << " JPEG files in " << classes << " class folders under " << dir << "\n";
  return 0;
}

int cmd_calibrate_host(int argc, char* argv[]) {
  po::options_description desc("options");
  runtime::CalibrateOptions opt;
  std::string out;
  bool quiet = false;
  desc.add_options()("help,h", "show this help")("threads", po::value(&opt.threads)->default_value(1),
                                                 "threads measuring at once (their contention is measured too)")(
      "out", po::value(&out), "write the host profile (YAML, for --config) to FILE; default: stdout")(
      "quick", po::bool_switch(&opt.quick), "fewer sizes and shorter timings (a rough profile in seconds)")(
      "quiet,q", po::bool_switch(&quiet), "no progress on stderr");
  if (!parse(argc, argv, desc, "calibrate-host")) return 0;
  if (opt.threads < 1 || opt.threads > 1024)
    throw InputError("--threads " + std::to_string(opt.threads) + ": give 1 to 1024");
  if (opt.quick) {
    opt.min_time_s = 0.005;
    opt.repeats = 3;
  }
  Outputs files;
  if (!out.empty() && out != "-") files.add(out, "--out");
  std::ostream* progress = quiet ? nullptr : &std::cerr;
  if (progress)
    *progress << "calibrate-host: timing this host's pipeline operations (" << opt.threads << " thread(s))\n";
  const runtime::HostCalibration c = runtime::calibrate_host(opt, progress);
  // The fitted costs next to the preset's assumed ones, and how well the lines explain the timings.
  ConfigRequest preset_request;
  preset_request.dir = default_config_dir();
  SystemConfig preset = load_config(preset_request);
  const ParamSet ps = bind_params(preset);
  const ordered_json values = ps.to_json();
  double worst = 0;
  std::string worst_key;
  if (progress) *progress << fmt::format("\n{:<32} {:>10} {:>10}\n", "cost", "preset", "measured");
  for (const auto& op : c.ops) {
    if (op.fit.max_rel_error > worst) {
      worst = op.fit.max_rel_error;
      worst_key = op.key;
    }
    const std::string name = op.key.substr(op.key.find('.') + 1);
    if (progress)
      *progress << fmt::format("{:<32} {:>10.4g} {:>10.4g}  ns/{}\n", op.key, values.at("host").at(name).get<double>(),
                               op.per_unit_ns(), op.unit);
  }
  if (progress)
    *progress << fmt::format("the fitted costs explain every timing within {:.1f}% (worst: {}); {:.1f} s\n",
                             100 * worst, worst_key, c.wall_s);
  const std::string yaml = runtime::host_profile_yaml(c);
  if (out.empty() || out == "-") {
    std::cout << yaml;
  } else {
    files.stage(out, yaml);
    files.commit();
  }
  return 0;
}

}  // namespace

/// Runs one command; options start after the command word.
int dispatch(const std::string& command, int argc, char* argv[]) {
  if (command == "compare") return cmd_compare(argc, argv);
  if (command == "train") return cmd_train(argc, argv);
  if (command == "info") return cmd_info(argc, argv);
  if (command == "op") return cmd_op(argc, argv);
  if (command == "sweep") return cmd_sweep(argc, argv);
  if (command == "serve") return cmd_serve(argc, argv);
  if (command == "tune") return cmd_tune(argc, argv);
  if (command == "advise-fusion") return cmd_advise_fusion(argc, argv);
  if (command == "params") return cmd_params(argc, argv);
  if (command == "chips") return cmd_chips(argc, argv);
  if (command == "servers") return cmd_servers(argc, argv);
  if (command == "calibrate-host") return cmd_calibrate_host(argc, argv);
  if (command == "make-image-folder") return cmd_make_image_folder(argc, argv);
  if (command == "stats") return cmd_stats(argc, argv);
  if (command == "suite") return cmd_suite(argc, argv);
  if (command == "profile") return cmd_profile(argc, argv);
  if (command == "validate") return cmd_validate(argc, argv);
  if (command == "aicore-check") return cmd_aicore_check(argc, argv);
  if (command == "calibrate") return cmd_calibrate(argc, argv);
  if (command == "diff") return cmd_diff(argc, argv);
  std::cerr << "error: unknown command '" << command << "'\n\n" << kUsage;
  return kExitInput;
}

int run_cli(int argc, char* argv[]) {
  sc_core::sc_report_handler::set_actions(sc_core::SC_INFO, sc_core::SC_DO_NOTHING);
  if (argc < 2 || std::string(argv[1]) == "--help" || std::string(argv[1]) == "-h") {
    std::cout << kUsage;
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
    const int code = dispatch(command, argc - 1, argv + 1);
    if (code == 0) check_stdout();  // a report lost on its way out is a failure
    return code;
  } catch (const Stopped& e) {
    std::cerr << "error: " << e.what() << "\n";
    return e.signal() != 0 ? 128 + e.signal() : kExitInput;
  } catch (const InputError& e) {
    std::cerr << "error: " << cli_message(e) << "\n";
    return kExitInput;
  } catch (const po::error& e) {
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
