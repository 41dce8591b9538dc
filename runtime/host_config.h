// Host-side costs. The host is not cycle-simulated: these are the durations the SystemC threads
// playing the host's training thread, channel thread and data pipeline charge for each action.
#pragma once

#include <cstdint>
#include <string>

#include "sim/core/params.h"

namespace ascendsim::runtime {

struct HostConfig {
  /// The host preset (configs/hosts/<name>.yaml) these values come from, if any; its base preset
  /// and the parameters it marks as fitted (read by the configuration's loader).
  std::string name;
  std::string description;
  std::string base;
  std::string fitted;
  double op_launch_us = 10;       ///< one op launch: kernel selection, args, task submission
  /// The framework that launches ops op by op (configs/frameworks/<name>.yaml; "" none: the
  /// launches are host.op_launch_us alone, MindSpore's C++ executor). A Python framework's eager
  /// launch adds, on the reference core (divided by core_speed): per op its Python call, the
  /// dispatcher and the NPU adapter's launch (framework_op_us), per tensor argument its device
  /// tensor descriptor (framework_arg_us); per stream synchronize from Python framework_sync_us.
  std::string framework;
  std::string framework_description;
  std::string framework_fitted;
  double framework_op_us = 0, framework_arg_us = 0, framework_sync_us = 0;
  double collective_launch_us = 10;  ///< one collective launched by the host (op-by-op modes): the HCCL call
  double graph_launch_us = 30;    ///< one graph launch (model execute)
  double step_overhead_us = 150;  ///< framework work per returned step: training loop, callbacks
  double sync_wakeup_us = 15;     ///< stream synchronize wake-up after the completion notice
  double memcpy_setup_us = 8;     ///< synchronous memcpy call overhead (pin, descriptor, call)
  double queue_create_us = 2000;  ///< one-time: create the dataset channel and device queue
  double graph_load_us = 5000;    ///< one-time: host work to load a graph onto the device
  /// One-time, with a cold kernel cache: the kernel compiler's time per distinct AI-core kernel
  /// (an op at its shapes and types), one after another on the rank's process.
  double kernel_compile_s = 1.34;
  /// warm: the kernels were compiled by an earlier run (MindSpore's kernel_meta directory) and
  /// are loaded from it; cold: this run compiles each distinct kernel before its graph runs.
  std::string kernel_cache = "warm";
  std::int64_t cpu_cores = 32;    ///< host cores: caps the pipeline threads that really run at once
  /// The host's NUMA nodes (its cores divided equally): the pipelines bound to them
  /// (pipeline.numa_bind) each use their node's cores only.
  std::int64_t numa_nodes = 1;
  /// Speed of one host core relative to the core the per-value, per-pixel and per-row costs below
  /// are stated for: those costs are divided by it (byte copies, the storage and the device-queue
  /// push are not: memory, links and hand-shakes, not the core, set them).
  double core_speed = 1.0;
  // Data pipeline costs, per sample on one thread.
  double read_ns_per_byte = 0.5;         ///< source reader: file bytes from the page cache
  double decode_ns_per_pixel = 8;        ///< JPEG decode
  /// The share of a JPEG's decode time spent entropy-decoding (Huffman): a cropped decode pays it
  /// for every row down to the window's last, the rest of the decode for the window only.
  double entropy_decode_fraction = 0.4;
  double resize_ns_per_value = 1.0;      ///< bilinear resize, per output value
  double crop_ns_per_value = 0.2;        ///< crop copy, per output value
  double flip_ns_per_value = 0.3;        ///< horizontal flip, per value (applied to half the samples)
  double rescale_ns_per_value = 0.5;     ///< x * scale + shift, uint8 -> float
  double normalize_ns_per_value = 1.0;   ///< (x - mean) / std per channel
  double hwc2chw_ns_per_value = 0.7;     ///< layout transpose
  double typecast_ns_per_value = 0.4;    ///< dtype conversion
  /// RandomColorAdjust: brightness, contrast and saturation together, per output value
  double color_adjust_ns_per_value = 3.0;
  double map_op_overhead_us = 1.0;       ///< per op per sample: dispatch and row handling
  /// One row handed from one stage of the dataset engine's execution tree to the next: the push
  /// into the bounded connector, the pop and the consumer's wake-up. Paid by the receiving stage.
  double row_handoff_us = 2.0;
  /// One call into the Python interpreter from the dataset engine: a GeneratorDataset's yield (its
  /// NumPy arrays turned into tensors), or a map op written in Python, per row it handles.
  double python_call_us = 20;
  double batch_ns_per_byte = 0.1;        ///< batch op: copying samples into the batch tensor
  double cache_write_ns_per_byte = 1.0;  ///< first epoch with a cache: insert into the cache server
  double cache_read_ns_per_byte = 0.25;  ///< later epochs: fetch from the cache in memory
  double cache_insert_us = 100;          ///< first epoch with a cache: one insert request per sample
  /// The device-queue op's host work per batch it sends (MindSpore's DeviceQueueOp; TDT on
  /// Ascend): the push of the batch's tensors with the channel's acknowledgement, and a copy of
  /// its bytes into the host-device buffers before the DMA. On a host core, before the DMA.
  double device_queue_push_us = 20;
  double device_queue_ns_per_byte = 0.1;
  /// Where the dataset's files live (`storage.*`): each file read waits file_latency_us (up to
  /// parallel_reads of them at once) and its bytes at bandwidth_gbps, without holding a core.
  /// Zero latency and zero bandwidth: the page cache (no storage wait).
  double storage_bandwidth_gbps = 0;
  double storage_file_latency_us = 0;
  std::int64_t storage_parallel_reads = 1;
  /// The host's page cache for the dataset's files, shared by the server's ranks: a file read
  /// once is read from memory (no storage wait) in later epochs, as far as it holds them.
  double storage_page_cache_gib = 0;
  /// A page-cached file's open still asks the storage whether it changed (NFS close-to-open
  /// consistency: a GETATTR round trip), shared by the reads in flight like the latency.
  double storage_revalidate_us = 0;
  double cache_spill_ns_per_byte = 1.0;  ///< a spilled sample written to or read from local disk
  // Checkpoints and restarts (--checkpoint-every, --device-mtbf-hours; docs/model.md, "Checkpoints").
  double checkpoint_ns_per_byte = 0.5;  ///< serialising a checkpoint on the host (and parsing it on a restart)
  double relaunch_s = 180;              ///< after a failure: detection, stopping and launching the job again
  /// The server's checkpoint storage: write and read bandwidth, shared by the server's ranks.
  double storage_checkpoint_write_gbps = 2.0;
  double storage_checkpoint_read_gbps = 3.0;
  /// A checkpoint of `bytes` serialised (or parsed) on one core, in seconds.
  double checkpoint_serialise_s(double bytes) const { return bytes * checkpoint_ns_per_byte * 1e-9 / core_speed; }
  /// A checkpoint of `bytes` written (read) at its share of the server's storage, `sharers` ranks
  /// writing (reading) theirs at once, in seconds.
  double checkpoint_write_s(double bytes, double sharers) const {
    return bytes * sharers / (storage_checkpoint_write_gbps * 1e9);
  }
  double checkpoint_read_s(double bytes, double sharers) const {
    return bytes * sharers / (storage_checkpoint_read_gbps * 1e9);
  }
  // LLM serving (runtime/serving.h): the serving engine's own host work.
  double schedule_step_us = 300;   ///< one scheduler iteration: the policy, the queues, the step's input tensors
  double schedule_seq_us = 10;     ///< per sequence in the step: its block table row, inputs and output token
  double sample_ns_per_logit = 2;  ///< host sampling, per logit of a sequence's vocabulary row (softmax, draw)

  void declare(sim::ParamSet& ps);
};

/// The dataset pipeline as a user configures it (MindSpore's dataset API).
struct PipelineConfig {
  std::int64_t num_parallel_workers = 8;  ///< workers of each map() call (MindSpore default)
  /// Workers per map() call, in the script's order ("1,1,1,1,1"); empty: num_parallel_workers each.
  std::string map_workers;
  /// Capacity of each connector between two ops (MindSpore's op_connector_size, which
  /// ds.config.set_prefetch_size sets): rows before the batch op, batches after it.
  std::int64_t prefetch_size = 16;
  /// Rows a shuffle buffer fills before the first batch (0: the sampler shuffles); -1: the
  /// workload script's (MobileNetV2's 1000, none for the others).
  std::int64_t shuffle_buffer = -1;
  std::int64_t num_shards = 1;
  std::int64_t shard_id = 0;
  std::string cache = "none";  ///< none | source | map (after the last deterministic map)
  double cache_gib = 64;       ///< cache capacity; samples beyond it miss every epoch (or spill)
  /// With cache "map": the map ops the cache follows; -1: all up to the first random one.
  std::int64_t cache_after = -1;
  bool cache_allow_random = false;  ///< let the cache follow a random op (its randomness is lost)
  bool cache_spilling = false;      ///< samples beyond cache_gib go to local disk instead of missing
  /// Ranks whose pipelines share this server's cache server, page cache and storage bandwidth
  /// (set for data-parallel runs).
  std::int64_t cache_sharers = 1;
  /// The evaluation pipeline's cache (evaluation during training): none, or map (after its last
  /// map, as the seed's eval cache) or source; its size and spilling are the cache_gib and
  /// cache_spilling above (a session of its own on the same cache server).
  std::string eval_cache = "none";
  /// Workers of the source op (a dataset's num_parallel_workers): they share a batch's reads.
  std::int64_t reader_workers = 1;
  /// ds.config.set_numa_enable(True): each rank's pipeline threads bound to one NUMA node of the
  /// host (host.numa_nodes), the ranks spread over the nodes in order.
  bool numa_bind = false;

  void declare(sim::ParamSet& ps);
};

}  // namespace ascendsim::runtime
