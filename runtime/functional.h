// Functional mode: the training graph computed on real values while the timing model runs. The
// host side reads the dataset's samples and applies the workload's map recipe (resize, rescale,
// normalize, crops and flips with a seeded generator, HWC2CHW) in a seeded shuffle, batch after
// batch; each batch moves by the strategy's path (hostif::ValuesIf: H2D copy, or the device data
// queue and GetNext); each device step runs every op of the graph — forward, backward, optimizer —
// through its registered kernel (workloads/kernels.h), in the graph's precision (fp16 tensors are
// rounded to fp16 after every op that writes them). The values take no simulated time: the timing
// report is the same with or without them.
//
// The graph computed is the training graph as the framework builds it (after autodiff and the
// recipe's mixed precision); the backend's changes of layout (TransData) and kernel boundaries
// (BatchNorm split, fusion) do not change values, and the Cube's fp16 execution of fp32
// convolutions is not applied.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "hostif/values_if.h"
#include "runtime/dataset_files.h"
#include "workloads/workload.h"

namespace ascendsim::runtime {

struct FunctionalOptions {
  bool enabled = false;
  bool eval = false;       ///< after training: accuracy over the dataset's test split
  std::uint64_t seed = 1;  ///< initial weights, shuffle and random map ops
  /// The parameters' initialisers: "script" (the workload's own: the seed's TruncatedNormal(0.02)
  /// for LeNet-5, the model zoo's for the ResNets, a model file's initializers) or "he-uniform"
  /// (the defaults of MindSpore 2's nn.Conv2d and nn.Dense, which are PyTorch's: weights and
  /// biases uniform in ±1/sqrt(fan_in)). BatchNorm's gamma and beta stay 1 and 0.
  std::string init = "script";
  std::string init_from;        ///< weights file (see docs/functional.md) replacing the initialisers
  std::int64_t dump_steps = 0;  ///< keep the first this many batches fed to the device (--dump-batches)
  /// Data parallelism: this rank's shard of every pass, every `num_shards`-th sample of the
  /// pass's permutation from `shard_id` (so the ranks' batches of a step are together the one
  /// device's batch of num_shards times the size).
  std::int64_t num_shards = 1, shard_id = 0;
};

/// A weights file's index (docs/functional.md): its data file (relative to the index) and each
/// tensor's entry.
struct WeightsIndex {
  struct Entry {
    std::vector<std::int64_t> shape;
    std::int64_t offset = -1;
  };
  std::string data;
  std::map<std::string, Entry> tensors;
};
/// Parses the index `text` of the weights file `path`; InputError naming `path` and what is wrong.
WeightsIndex parse_weights_index(const std::string& text, const std::string& path);
/// Sets the parameters of `g` (every one must be given) and the statistics given from the index and
/// its raw data `bytes`, into `values` (per tensor; fp16 tensors rounded). InputError naming `path`
/// and the tensor for a missing parameter, a wrong shape, data outside `bytes`, or a name `g` does
/// not have; `network` names the network in the messages.
void read_weights(const WeightsIndex& index, const std::string& bytes, const workloads::Graph& g,
                  const std::string& network, const std::string& path, std::vector<std::vector<float>>& values);

/// Computes `op` of `g` on `values` (per tensor), its kernel keeping `state`; fp16 outputs are
/// rounded to fp16 (round to nearest even).
void compute_op(const workloads::Graph& g, const workloads::Op& op, std::vector<std::vector<float>>& values,
                std::shared_ptr<void>* state, bool inference = false);

class FunctionalModel : public hostif::ValuesIf {
 public:
  /// Reads the samples of `dataset_dir` (InputError if it has none or the workload cannot be
  /// computed: an op without a kernel, a map op without a transform) and initialises the tensors.
  FunctionalModel(const workloads::Workload& w, const FunctionalOptions& opt, const std::string& dataset_dir,
                  std::int64_t steps_per_epoch);
  ~FunctionalModel() override;

  /// The names `FunctionalOptions::init` accepts.
  static const std::vector<std::string>& init_schemes();
  const FunctionalOptions& options() const { return m_opt; }

  // hostif::ValuesIf
  void copy_batch_to_device() override;
  void send_batch_to_queue() override;
  void get_next() override;
  void step() override;
  /// An evaluation pass moves no training values; its end evaluates the test set (evaluate()).
  double evaluating(bool on) override;
  double read_loss() override;

  /// Top-1 accuracy of the current weights over the dataset's test split, batch by batch (a last
  /// partial batch is padded and only its real samples count). Sets evaluated().
  double evaluate();
  std::int64_t evaluated() const { return m_evaluated; }

  /// A training step in two halves, for data parallelism: the forward and backward passes, then
  /// (after the ranks' gradients are averaged) the optimizer. step() is both.
  void forward_backward();
  void optimize();
  /// The gradients the optimizer reads: the tensors the backward pass writes and the optimizer
  /// reads.
  std::vector<workloads::TensorId> gradients() const;
  std::vector<float>& mutable_value(workloads::TensorId t) { return m_values.at(static_cast<std::size_t>(t)); }

  std::int64_t steps_computed() const { return m_steps; }
  /// The value of tensor `t` of the workload's graph (the inputs as last fed, the weights).
  const std::vector<float>& value(workloads::TensorId t) const { return m_values.at(static_cast<std::size_t>(t)); }
  double compute_wall_s() const { return m_wall_s; }

  /// The trainable parameters in the weights format: a JSON index naming `bin_name` and the raw
  /// little-endian float32 data.
  std::string weights_index(const std::string& bin_name) const;
  std::string weights_data() const;
  /// The first dump_steps batches fed to the device: a JSON index, images (float32) and labels
  /// (int32), raw little-endian.
  std::string batches_index() const;
  std::string batches_images() const;
  std::string batches_labels() const;

 private:
  struct Batch {
    std::vector<float> image, label;
  };
  Batch make_batch(std::int64_t index);
  /// Sample `sample` through the map recipe, appended to `out`; random ops only if `augment`.
  void transform(std::int64_t epoch, std::int64_t sample, std::vector<float>& out, bool augment);
  /// The batch becomes the device's input tensors; `keep`: it counts for --dump-batches.
  void feed(Batch b, bool keep = true);
  void init_tensors();
  void load_weights(const std::string& path);
  enum class Passes { All, Forward, ForwardBackward, Optimizer };
  /// The graph's ops of `passes`, as evaluated if `inference`.
  void run_ops(Passes passes, bool inference);

  workloads::Workload m_w;
  FunctionalOptions m_opt;
  std::string m_dir;
  DatasetValues m_data;
  std::vector<double> m_mean, m_std;  ///< the recipe's Normalize, per channel
  std::int64_t m_steps_per_epoch;
  std::vector<std::vector<float>> m_values;    ///< per tensor
  std::vector<std::shared_ptr<void>> m_state;  ///< per op: its kernel's kept state
  std::deque<Batch> m_queue;                   ///< the device data queue's batches
  std::int64_t m_next_batch = 0;               ///< the host's next batch, counted from 0
  std::vector<std::int64_t> m_perm;            ///< this epoch's sample order
  std::int64_t m_perm_epoch = -1;
  /// A token stream's sequence model: the sequence (S) and the stream's windows of S + 1 tokens,
  /// each a sample (inputs its first S, labels its last S); 0 for image datasets.
  std::int64_t m_seq = 0, m_windows = 0;
  bool m_records = false;  ///< one input of S + 1 tokens a sample (the built-in decoders)
  std::vector<Batch> m_dumped;
  std::int64_t m_steps = 0, m_evaluated = 0;
  bool m_evaluating = false;
  double m_wall_s = 0;
};

}  // namespace ascendsim::runtime
