#include "runtime/host_config.h"

namespace ascendsim::runtime {

void HostConfig::declare(sim::ParamSet& ps) {
  ps.text("host.name", name, {}, "the host preset's name (configs/hosts/NAME.yaml), set by the preset");
  ps.text("host.description", description, {}, "one line on the host preset");
  ps.text("host.base", base, {}, "in a host preset: the preset it is made from (applied first)");
  ps.text("host.fitted", fitted, {},
          "in a host preset: the parameters its values were fitted for, space-separated (`ascendsim calibrate` "
          "with no --fit refits them)");
  ps.real("host.schedule_step_us", schedule_step_us, "us", 0, 1e7,
          "LLM serving: one scheduler iteration (batch policy, queues, the step's input tensors)");
  ps.real("host.schedule_seq_us", schedule_seq_us, "us", 0, 1e6,
          "LLM serving: per sequence of a step (its block-table row, inputs and output token)");
  ps.real("host.sample_ns_per_logit", sample_ns_per_logit, "ns/logit", 0, 1e6,
          "LLM serving with sampling on the host: per logit of a sequence's row (softmax and the draw)");
  ps.real("host.op_launch_us", op_launch_us, "us", 0, 1e6, "host cost of launching one op (op-by-op modes)");
  ps.text("framework.name", framework, {},
          "the framework preset launching ops op by op (configs/frameworks/NAME.yaml, --framework), set by the "
          "preset; empty: MindSpore's C++ launches, host.op_launch_us alone");
  ps.text("framework.description", framework_description, {}, "one line on the framework preset");
  ps.text("framework.fitted", framework_fitted, {},
          "in a framework preset: the parameters its values were fitted for, space-separated");
  ps.real("framework.op_us", framework_op_us, "us", 0, 1e5,
          "an op launched eagerly from Python (PyTorch with the NPU adapter): the Python call, the dispatcher and "
          "the adapter's launch, on the reference core (divided by host.core_speed), added to host.op_launch_us");
  ps.real("framework.arg_us", framework_arg_us, "us", 0, 1e4,
          "per tensor argument (input or output) of an op launched eagerly from Python: its device tensor "
          "descriptor, on the reference core (divided by host.core_speed)");
  ps.real("framework.sync_us", framework_sync_us, "us", 0, 1e5,
          "a stream synchronize called from Python (the call and the return to the interpreter), on the reference "
          "core (divided by host.core_speed), added to host.sync_wakeup_us");
  ps.real("host.collective_launch_us", collective_launch_us, "us", 0, 1e6,
          "host cost of launching one collective (op-by-op modes: an HCCL call on the communication stream)");
  ps.real("host.graph_launch_us", graph_launch_us, "us", 0, 1e6, "host cost of launching one graph execution");
  ps.real("host.step_overhead_us", step_overhead_us, "us", 0, 1e7,
          "framework work each time a step's result returns (training loop, callbacks)");
  ps.real("host.sync_wakeup_us", sync_wakeup_us, "us", 0, 1e6,
          "stream synchronize: host thread wake-up after the completion notice");
  ps.real("host.memcpy_setup_us", memcpy_setup_us, "us", 0, 1e6, "host overhead of one synchronous memcpy call");
  ps.real("host.queue_create_us", queue_create_us, "us", 0, 1e8, "one-time creation of the dataset channel");
  ps.real("host.graph_load_us", graph_load_us, "us", 0, 1e9, "one-time host work to load a graph onto the device");
  ps.real("host.kernel_compile_s", kernel_compile_s, "s", 0, 3600,
          "one-time, with a cold kernel cache: compiling one distinct AI-core kernel (an op at its shapes)");
  ps.text("host.kernel_cache", kernel_cache, {"warm", "cold"},
          "warm: the kernels come compiled from an earlier run (kernel_meta); cold: the run compiles each distinct "
          "kernel first (--kernel-cache)");
  ps.integer("host.cpu_cores", cpu_cores, "cores", 1, 4096, "host CPU cores the data pipeline threads share");
  ps.real("host.read_ns_per_byte", read_ns_per_byte, "ns/B", 0, 1e6, "source reader: file bytes read per sample");
  ps.real("host.decode_ns_per_pixel", decode_ns_per_pixel, "ns/pixel", 0, 1e6, "JPEG decode");
  ps.real("host.entropy_decode_fraction", entropy_decode_fraction, "fraction", 0, 1,
          "the share of a JPEG decode's time in entropy (Huffman) decoding, which a cropped decode "
          "(RandomCropDecodeResize) pays down to the window's last row across the whole width");
  ps.real("host.resize_ns_per_value", resize_ns_per_value, "ns/value", 0, 1e6, "bilinear resize, per output value");
  ps.real("host.crop_ns_per_value", crop_ns_per_value, "ns/value", 0, 1e6, "crop copy, per output value");
  ps.real("host.flip_ns_per_value", flip_ns_per_value, "ns/value", 0, 1e6,
          "horizontal flip per value (random flips touch half the samples)");
  ps.real("host.rescale_ns_per_value", rescale_ns_per_value, "ns/value", 0, 1e6, "rescale x * a + b");
  ps.real("host.normalize_ns_per_value", normalize_ns_per_value, "ns/value", 0, 1e6,
          "normalise (x - mean) / std per channel");
  ps.real("host.hwc2chw_ns_per_value", hwc2chw_ns_per_value, "ns/value", 0, 1e6, "HWC -> CHW transpose");
  ps.real("host.typecast_ns_per_value", typecast_ns_per_value, "ns/value", 0, 1e6, "dtype conversion");
  ps.real("host.color_adjust_ns_per_value", color_adjust_ns_per_value, "ns/value", 0, 1e6,
          "RandomColorAdjust: brightness, contrast and saturation together, per output value");
  ps.real("host.map_op_overhead_us", map_op_overhead_us, "us", 0, 1e6, "per map op per sample: dispatch, row handling");
  ps.real("host.row_handoff_us", row_handoff_us, "us", 0, 1e6,
          "one row handed between two stages of the dataset engine (connector push, pop, wake-up)");
  ps.real("host.python_call_us", python_call_us, "us", 0, 1e6,
          "one call into Python from the dataset engine: a generator's yield, or a Python map op per row");
  ps.real("host.core_speed", core_speed, "x", 1e-3, 1e3,
          "one host core's speed relative to the core the per-value, per-pixel and per-row costs are stated for "
          "(those costs are divided by it)");
  ps.integer("host.numa_nodes", numa_nodes, "nodes", 1, 64,
             "NUMA nodes of the host (its cores divided equally); used with pipeline.numa_bind");
  ps.real("host.batch_ns_per_byte", batch_ns_per_byte, "ns/B", 0, 1e6, "batch op: copying a sample into the batch");
  ps.real("host.cache_write_ns_per_byte", cache_write_ns_per_byte, "ns/B", 0, 1e6,
          "data cache: inserting a sample (first epoch)");
  ps.real("host.cache_read_ns_per_byte", cache_read_ns_per_byte, "ns/B", 0, 1e6,
          "data cache: fetching a sample from memory (later epochs)");
  ps.real("host.cache_insert_us", cache_insert_us, "us", 0, 1e6,
          "data cache: the request that inserts one sample into the cache server (first epoch)");
  ps.real("host.device_queue_push_us", device_queue_push_us, "us", 0, 1e6,
          "device-queue send: the host's push of one batch to the device channel (TDT), acknowledgement included");
  ps.real("host.device_queue_ns_per_byte", device_queue_ns_per_byte, "ns/B", 0, 1e6,
          "device-queue send: the host's copy of a batch into the host-device buffers, per byte, before the DMA");
  ps.real("host.cache_spill_ns_per_byte", cache_spill_ns_per_byte, "ns/B", 0, 1e6,
          "data cache: writing or reading a spilled sample on local disk");
  ps.real("storage.bandwidth_gbps", storage_bandwidth_gbps, "GB/s", 0, 1e5,
          "the dataset's storage: read bandwidth (0: unlimited, the page cache)");
  ps.real("storage.file_latency_us", storage_file_latency_us, "us", 0, 1e8,
          "the dataset's storage: latency of one file read (open and first byte; NFS round trips)");
  ps.integer("storage.parallel_reads", storage_parallel_reads, "reads", 1, 4096,
             "the dataset's storage: file reads the source keeps in flight");
  ps.real("storage.page_cache_gib", storage_page_cache_gib, "GiB", 0, 1 << 20,
          "the host's page cache for the dataset's files, shared by the server's ranks: files read once are read "
          "from memory in later epochs (0: none)");
  ps.real("storage.revalidate_us", storage_revalidate_us, "us", 0, 1e8,
          "the dataset's storage: opening a page-cached file still waits this (NFS close-to-open revalidation)");
  ps.real("host.checkpoint_ns_per_byte", checkpoint_ns_per_byte, "ns/B", 0, 1e6,
          "a checkpoint on the host: serialising its weights and optimizer state, per byte (MindSpore's "
          "save_checkpoint: the tensors into a protobuf message and its string), and parsing them again on a restart");
  ps.real("host.relaunch_s", relaunch_s, "s", 0, 1e6,
          "after a device failure: detecting it, stopping the job and launching it again on every server, before "
          "the run's initialisation and the checkpoint's load (--device-mtbf-hours)");
  ps.real("storage.checkpoint_write_gbps", storage_checkpoint_write_gbps, "GB/s", 1e-3, 1e5,
          "the server's storage where checkpoints go: write bandwidth, shared by the server's ranks saving at once");
  ps.real("storage.checkpoint_read_gbps", storage_checkpoint_read_gbps, "GB/s", 1e-3, 1e5,
          "the server's storage where checkpoints go: read bandwidth, shared by the server's ranks loading at once "
          "after a failure");
}

void PipelineConfig::declare(sim::ParamSet& ps) {
  ps.integer("pipeline.num_parallel_workers", num_parallel_workers, "threads", 1, 1024,
             "workers of each map() call (--num-parallel-workers)");
  ps.text("pipeline.map_workers", map_workers, {},
          "workers per map() call in the script's order, e.g. 1,1,1,1,1 (empty: num_parallel_workers each)");
  ps.integer("pipeline.prefetch_size", prefetch_size, "rows", 1, 1 << 16,
             "connector capacity between two ops (ds.config.set_prefetch_size): rows, batches after the batch op");
  ps.integer("pipeline.shuffle_buffer", shuffle_buffer, "rows", -1, 1 << 30,
             "shuffle buffer the reader fills before the first batch; 0 = the sampler shuffles; -1 = the workload "
             "script's (MobileNetV2: 1000; the others: 0)");
  ps.integer("pipeline.num_shards", num_shards, "shards", 1, 1 << 16, "dataset shards (one per device)");
  ps.integer("pipeline.shard_id", shard_id, "index", 0, (1 << 16) - 1, "this device's shard");
  ps.text("pipeline.cache", cache, {"none", "source", "map"},
          "data cache after the source or after the last deterministic map (--cache)");
  ps.real("pipeline.cache_gib", cache_gib, "GiB", 0, 1 << 20,
          "data cache capacity, shared by the ranks of a server (MindSpore's cache server size)");
  ps.integer("pipeline.cache_after", cache_after, "map ops", -1, 64,
             "cache map: the map ops the cache follows (-1: up to the first random one)");
  ps.boolean("pipeline.cache_allow_random", cache_allow_random,
             "let the cache follow a random map op (later epochs replay the first epoch's augmentation)");
  ps.text("pipeline.eval_cache", eval_cache, {"none", "source", "map"},
          "the evaluation pipeline's cache, after its source or its last map (--eval-cache)");
  ps.integer("pipeline.reader_workers", reader_workers, "threads", 1, 1024,
             "workers of the source op (the dataset's num_parallel_workers), sharing a batch's reads");
  ps.boolean("pipeline.numa_bind", numa_bind,
             "bind each rank's pipeline threads to one NUMA node (ds.config.set_numa_enable)");
  ps.boolean("pipeline.cache_spilling", cache_spilling,
             "samples beyond the cache's memory spill to local disk (DatasetCache spilling=True) instead of "
             "missing");
}

}  // namespace ascendsim::runtime
