// The options every run command shares — workload, chip, server, --set, the run and parallel
// options, the outputs — and the request they make.

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "runtime/functional.h"
#include "sim/commands/messages.h"
#include "sim/commands/options.h"

#include "sim/data_script.h"
#include "sim/hf_config.h"
#include "sim/config.h"
#include "sim/core/error.h"
#include "sim/outputs.h"
#include "sim/rank_table.h"
#include "workloads/workload.h"

namespace ascendsim::sim::cli {

namespace {

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

}  // namespace

void shortcut(Options& o, const std::string& key, const std::string& flag, const std::string& value) {
  const std::string set = key + "=" + value;
  o.shortcut_sets.push_back(set);
  typed()[override_origin(set)] = flag + " " + value;
}

po::value_semantic* seed_value(std::uint64_t& into) {
  return po::value<Seed>()->default_value(Seed{into}, std::to_string(into))->notifier([&into](Seed s) {
    into = s.value;
  });
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
      "framework", po::value(&o.config.framework),
      "the framework launching ops op by op in non-sink mode (configs/frameworks; default none: MindSpore's C++ "
      "launches at host.op_launch_us)")(
      "data", po::value(&o.data),
      "a data script (YAML, docs/model.md \"The data script\"): the dataset, each map() call's ops with their "
      "parameters and workers, the reader's workers, prefetch, NUMA binding and dataset offload, as the training "
      "script builds them; replaces the workload's pipeline")(
      "set", po::value(&o.config.sets)->composing(), "override one parameter, key=value (repeatable)")(
      "model", po::value(&o.model),
      "an ONNX file (e.g. from torch.onnx.export): the network to run, instead of --workload (docs/onnx.md)")(
      "hf-config", po::value(&o.hf_config), kHfConfigHelp)(
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
      "kv-heads", po::value<std::int64_t>()->notifier([&o](std::int64_t v) { o.recipe.kv_heads = v; }),
      "transformers: key and value heads, each serving heads / kv-heads query heads (grouped-query attention; "
      "default one per query head)")(
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
      "sequence-parallel", po::bool_switch(&o.sequence_parallel),
      "with --tensor-parallel: Megatron's sequence parallelism, the norms, dropouts and residual adds on 1/T of the "
      "tokens (AllGather and ReduceScatter where tensor parallelism AllReduces)")(
      "optimizer-shard", po::bool_switch(&o.optimizer_shard),
      "shard the optimizer state across the ranks that hold the same weights (MindSpore's optimizer_shard, ZeRO-1): "
      "gradients reduce-scattered, each rank updating its piece, the pieces all-gathered")(
      "optimizer-shard-level", po::value(&o.optimizer_shard_level),
      "shard the optimizer at this level (implies --optimizer-shard): 1 the optimizer state (MindSpore's "
      "optimizer_level level1, ZeRO-1); 2 the gradients too (level2, DeepSpeed's ZeRO-2: each micro-batch's gradient "
      "reduce-scattered, only the rank's piece accumulated; fp16 weights, amp O3, updated in an fp32 master copy of "
      "the piece)")(
      "recompute", po::bool_switch(&o.recompute),
      "transformers: run every layer's forward again in the backward pass, keeping only each layer's input "
      "(MindSpore's recompute)")(
      "pipeline-stages", po::value(&o.pipeline_stages)->default_value(o.pipeline_stages),
      "transformers: divide the layers among this many stages of consecutive ranks, micro-batches in the 1F1B "
      "order (MindSpore's pipeline_stages); --batch-size is then each pipeline's")(
      "micro-batches", po::value(&o.micro_batches)->default_value(o.micro_batches),
      "pipeline parallelism: the micro-batches of a step (MindSpore's micro_size; 0: as many as the stages)")(
      "gradient-accumulation", po::value(&o.gradient_accumulation)->default_value(o.gradient_accumulation),
      "run each step's batch in this many micro-batches, their gradients added up before one optimizer step and "
      "one set of gradient collectives (MindFormers' gradient_accumulation_steps; --batch-size is the step's; "
      "with --pipeline-stages, this many rounds of --micro-batches)");
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
      "checkpoint-every", po::value<std::int64_t>()->notifier([&o](std::int64_t v) { o.checkpoint_every = v; }),
      "save a checkpoint at least every N steps and at the end, as MindSpore's ModelCheckpoint "
      "(save_checkpoint_steps): the weights and optimizer state copied to the host, serialised and written to the "
      "server's storage; the report times each part")(
      "checkpoint-async", po::bool_switch(&o.checkpoint_async),
      "with --checkpoint-every: ModelCheckpoint's async_save, the serialisation and write on a thread of their own "
      "(the steps wait for the copy only)")(
      "device-mtbf-hours", po::value<double>()->notifier([&o](double v) { o.device_mtbf_hours = v; }),
      "with --checkpoint-every: a device's mean time between failures, in hours; the report adds the expected "
      "time to train with failures and restarts from the last checkpoint, its spread over seeded draws, and the "
      "checkpoint interval that minimises it beside Young/Daly's")(
      "fault-seeds", po::value<std::int64_t>()->notifier([&o](std::int64_t v) { o.fault_seeds = v; }),
      "with --device-mtbf-hours: draws of the run with failures, seeds 0 to K-1 (default 100)")(
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

bool progress_wanted(const Options& o) { return !o.quiet && (o.progress || isatty(2)); }

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
  if (!o.hf_config.empty()) {
    use_hf_config(r, load_hf_config(hf_config_path(o.hf_config, default_config_dir()), "--hf-config " + o.hf_config),
                  "hf_config");
    typed()["workload"] = "--hf-config " + o.hf_config;  // what the user gave for the network
  }
  r.strategies = strategies;
  r.epochs = o.epochs;
  r.sink_size = o.sink_size;
  r.steps_per_epoch = o.steps_per_epoch;
  r.dataset = o.dataset;
  if (!o.data.empty()) {
    const DataScript d = load_data_script(o.data);
    r.data = std::make_shared<const workloads::DataRecipe>(d.recipe);
    r.data_where = "--data " + o.data;
    r.config.sets.insert(r.config.sets.begin(), d.sets.begin(), d.sets.end());
  }
  r.eval_every = o.eval_every;
  r.checkpoint_every = o.checkpoint_every;
  r.checkpoint_async = o.checkpoint_async;
  r.device_mtbf_hours = o.device_mtbf_hours;
  r.fault_seeds = o.fault_seeds;
  r.eval_dataset = o.eval_dataset;
  r.dataset_index = o.dataset_index;
  r.parallel_mode = o.parallel_mode;
  r.dataset_strategy = o.dataset_strategy;
  r.shard_strategy = o.shard_strategy;
  r.tensor_parallel = o.tensor_parallel;
  r.sequence_parallel = o.sequence_parallel;
  const bool level_given = o.optimizer_shard_level != std::numeric_limits<std::int64_t>::min();
  r.optimizer_shard = o.optimizer_shard || level_given;
  if (level_given) r.optimizer_shard_level = o.optimizer_shard_level;
  r.recompute = o.recompute;
  r.pipeline_stages = o.pipeline_stages;
  r.micro_batches = o.micro_batches;
  r.gradient_accumulation = o.gradient_accumulation;
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

}  // namespace ascendsim::sim::cli
