#include "runtime/host_config.h"

namespace ascendsim::runtime {

void HostConfig::declare(sim::ParamSet& ps) {
  ps.real("host.op_launch_us", op_launch_us, "us", 0, 1e6, "host cost of launching one op (op-by-op modes)");
  ps.real("host.graph_launch_us", graph_launch_us, "us", 0, 1e6, "host cost of launching one graph execution");
  ps.real("host.step_overhead_us", step_overhead_us, "us", 0, 1e7,
          "framework work each time a step's result returns (training loop, callbacks)");
  ps.real("host.sync_wakeup_us", sync_wakeup_us, "us", 0, 1e6,
          "stream synchronize: host thread wake-up after the completion notice");
  ps.real("host.memcpy_setup_us", memcpy_setup_us, "us", 0, 1e6, "host overhead of one synchronous memcpy call");
  ps.real("host.queue_create_us", queue_create_us, "us", 0, 1e8, "one-time creation of the dataset channel");
  ps.real("host.graph_load_us", graph_load_us, "us", 0, 1e9, "one-time host work to load a graph onto the device");
  ps.real("host.data_ns_per_byte", data_ns_per_byte, "ns/B", 0, 1e6,
          "data pipeline cost per output byte of one sample on one worker");
  ps.integer("host.data_workers", data_workers, "threads", 1, 1024, "data pipeline map workers");
  ps.integer("host.cpu_cores", cpu_cores, "cores", 1, 4096, "host CPU cores available to the pipeline");
  ps.integer("host.prefetch_batches", prefetch_batches, "batches", 1, 1 << 16,
             "batches the host pipeline may prepare ahead of its consumer");
}

}  // namespace ascendsim::runtime
