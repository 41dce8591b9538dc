// A batch of independent runs simulated in one SystemC elaboration (the kernel elaborates once
// per process): add every run, then run() them together.
#pragma once

#include <map>
#include <memory>
#include <ostream>
#include <vector>

#include "aicpu/hccl.h"
#include "runtime/functional_cluster.h"
#include "sim/system.h"

namespace ascendsim::sim {

/// Devices of one server: its ranks share the server's host cores.
constexpr int kDevicesPerServer = 8;

class Simulation {
 public:
  Simulation() = default;
  Simulation(const Simulation&) = delete;
  Simulation& operator=(const Simulation&) = delete;
  /// Ends every process still suspended (threads waiting for work that will never come) by
  /// unwinding its stack, so nothing of the run outlives it.
  ~Simulation();
  /// Adds a run; returns its index. A workload trained on several devices (its `parallel`) adds
  /// one system per rank: the ranks share the compiled graph, the cluster's collectives and, on
  /// one server, the host's cores. Throws InputError for a run that cannot start (bad session,
  /// out of device memory). `rank_cfgs`: a rank's own configuration where it differs (its host
  /// and pipeline; the chip must be the run's). Must be called before run().
  std::size_t add(const SystemConfig& cfg, const workloads::Workload& workload, const runtime::Session& session,
                  const std::map<std::int64_t, SystemConfig>& rank_cfgs = {},
                  const runtime::FunctionalOptions& functional = {});
  /// true: simulate every rank of a cluster, even where servers are alike (the reference the
  /// rank classes must equal; a trace of every rank). Call before add().
  void simulate_every_rank(bool on) { m_every_rank = on; }
  /// Simulates all runs to completion (or failure).
  void run();
  runtime::RunResult result(std::size_t index);
  /// Records every run's timeline, for steps in [first, last). Call before run().
  /// Streams every run's timeline to `os` as it is recorded, for steps in [first, last); the
  /// file is complete once run() returns. Call before run().
  void enable_trace(std::ostream& os, TraceFormat format, std::int64_t first_step, std::int64_t last_step);
  /// Keep every step's values in each run's result, not only their summary. Call before run().
  void keep_each_step(bool keep) {
    for (auto& s : m_systems) s->keep_each_step(keep);
  }
  /// Keep the values of the steps in [first, last) only. Call before run().
  void keep_steps(std::int64_t first, std::int64_t last) {
    for (auto& s : m_systems) s->keep_steps(first, last);
  }
  /// false: one wait per device task, the reference for the runs of tasks. Call before run().
  void set_task_runs(bool on) {
    for (auto& s : m_systems) s->set_task_runs(on);
  }
  /// Prints progress (steps, simulated time, rate, ETA) to `os` about once a second of wall time.
  void show_progress(std::ostream* os) { m_progress = os; }
  /// Runs added.
  std::size_t size() const { return m_runs.size(); }
  /// A run's system (rank 0's, for a data-parallel run).
  const System& system(std::size_t index) const { return *m_systems.at(m_runs.at(index).first); }

 private:
  /// A run: its ranks' systems (from m_systems[first], rank 0's) and what they share. Servers
  /// alike — the same configuration on every rank, no rank of its own (--rank-set) — are one
  /// server kind, simulated once on its first server: `system_of[r]` is the system that stands
  /// for rank r (its own, or the same local rank of its kind's first server).
  struct Run {
    std::size_t first = 0, ranks = 1;
    std::size_t simulated = 1;            ///< ranks simulated
    std::vector<std::size_t> system_of;  ///< per rank: its system's index in m_systems
    std::int64_t switches = 0;           ///< PCIe switches of the whole cluster
    std::int64_t data_shards = 0;              ///< ranks reading different samples (0: every rank)
    std::int64_t tensor_parallel = 1;          ///< ranks of a tensor-parallel group
    std::int64_t stages = 1, micro_batches = 1;                       ///< pipeline parallelism
    std::vector<std::pair<std::int64_t, std::int64_t>> stage_layers;  ///< per stage: its first layer, its layers
    std::unique_ptr<hostif::ValuesIf> values;  ///< functional mode on several devices: every rank's values
    bool eval = false;                         ///< data-parallel functional mode: evaluate rank 0's network
    std::unique_ptr<aicpu::Hccl> hccl;
    std::vector<std::unique_ptr<runtime::HostCores>> host_cores;  ///< per server
    std::unique_ptr<TraceRecorder> links;                         ///< the links' tracks, when tracing
    /// Per PCIe switch of a simulated server: its uplink to the host, h2d and d2h.
    std::vector<std::unique_ptr<hostif::DmaChannel>> h2d_uplinks, d2h_uplinks;
    /// Per switch of the cluster (servers × switches per server): the uplink that stands for it.
    std::vector<const hostif::DmaChannel*> h2d_uplink_of;
  };
  bool m_every_rank = false;
  std::vector<Run> m_runs;
  std::vector<std::unique_ptr<System>> m_systems;
  bool m_ran = false;
  std::unique_ptr<TraceSink> m_trace;
  std::ostream* m_progress = nullptr;
};

}  // namespace ascendsim::sim
