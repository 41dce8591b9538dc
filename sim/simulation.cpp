#define SC_INCLUDE_DYNAMIC_PROCESSES  // the process that ends the others is spawned at the end
#include "sim/simulation.h"

#include <algorithm>
#include <chrono>
#include <fstream>
#include <iostream>
#include <stdexcept>

#include "sim/core/error.h"
#include "sim/core/stop.h"
#include "sim/core/time.h"
#include "sim/kernel.h"

namespace ascendsim::sim {

namespace {
void collect_processes(sc_core::sc_object* o, std::vector<sc_core::sc_process_handle>& out) {
  sc_core::sc_process_handle h(o);
  if (h.valid()) out.push_back(h);
  for (auto* c : o->get_child_objects()) collect_processes(c, out);
}

/// The memory mappings a process may have (Linux's vm.max_map_count; 65530 by default), or 0.
std::int64_t max_map_count() {
  std::ifstream f("/proc/sys/vm/max_map_count");
  std::int64_t n = 0;
  return f >> n ? n : 0;
}

/// Refuses a cluster whose simulated ranks' threads would need more coroutine stacks than the
/// process may map (each stack is a mapping, two with its guard page), which SystemC would
/// otherwise report as a failed stack setup minutes into building the model.
void check_stacks(const System& first, std::int64_t ranks, std::int64_t simulated, std::int64_t before,
                  bool every_rank) {
  std::vector<sc_core::sc_process_handle> processes;
  collect_processes(const_cast<System*>(&first), processes);
  std::int64_t threads = 0;
  for (const auto& h : processes) threads += h.proc_kind() != sc_core::SC_METHOD_PROC_;
  const std::int64_t limit = max_map_count(), needed = 2 * threads * (simulated + before);
  if (limit <= 0 || needed + 4096 < limit) return;
  throw InputError(
      "devices", "devices",
      std::to_string(simulated) + " of the " + std::to_string(ranks) + " ranks simulated" +
          (before > 0 ? " (and " + std::to_string(before) + " of the process's other runs)" : std::string()) + ", " +
          std::to_string(threads) + " threads each, need " + std::to_string(needed / 2) +
          " coroutine stacks, two memory mappings each (the stack and its guard page); this machine allows a "
          "process " +
          std::to_string(limit) + " (vm.max_map_count). " +
          (every_rank
               ? std::string("Let servers alike be simulated once (drop --every-rank and --trace), or raise it: ")
               : std::string("Raise it: ")) +
          "sudo sysctl -w vm.max_map_count=" + std::to_string(2 * needed));
}
}  // namespace

std::size_t Simulation::add(const SystemConfig& cfg, const workloads::Workload& workload,
                            const runtime::Session& session, const std::map<std::int64_t, SystemConfig>& rank_cfgs,
                            const runtime::FunctionalOptions& functional) {
  if (m_ran) throw std::logic_error("Simulation::add after run()");
  const std::string name = "run" + std::to_string(m_runs.size());
  Run run;
  run.first = m_systems.size();
  run.data_shards = workload.parallel.data_shards;
  run.tensor_parallel = workload.parallel.tensor_parallel;
  run.stages = workload.parallel.pipeline_stages;
  run.micro_batches = workload.parallel.micro_batches;
  for (const auto& s : workload.stages)
    run.stage_layers.emplace_back(s->parallel.stage_first_layer, s->parallel.stage_layers);
  const std::int64_t devices = workload.parallel.devices;
  if (devices <= 1) {
    m_systems.push_back(
        std::make_unique<System>(name.c_str(), cfg, workload, session, RankPlace{}, nullptr, functional));
  } else {
    if (functional.enabled) {
      if (workload.parallel.semi_auto &&
          (functional.eval || !functional.init_from.empty() || functional.dump_steps > 0))
        throw InputError("functional", "functional",
                         "semi-auto functional mode prints rank 0's loss; --eval, --init-from and --dump-batches are "
                         "for one device or data parallelism");
      const std::string& dir = workload.data.dataset.source;
      run.eval = functional.eval;
      if (workload.parallel.semi_auto)
        run.values = std::make_unique<runtime::ClusterValues>(workload, devices, functional,
                                                              dir == "synthetic" ? "" : dir, session.steps_per_epoch);
      else
        run.values = std::make_unique<runtime::DataParallelValues>(
            workload, devices, functional, dir == "synthetic" ? "" : dir, session.steps_per_epoch);
    }
    // Each pipeline stage's graph (one for the whole cluster without stages).
    std::vector<runtime::CompiledGraph> graphs;
    if (workload.stages.empty())
      graphs.push_back(compile_checked(cfg, workload, session));
    else
      for (const auto& s : workload.stages) graphs.push_back(compile_checked(cfg, *s, session));
    const std::int64_t stage_ranks = devices / static_cast<std::int64_t>(graphs.size());
    run.ranks = static_cast<std::size_t>(devices);
    run.hccl = std::make_unique<aicpu::Hccl>((name + "_hccl").c_str(), cfg.chip.hccl, static_cast<int>(devices),
                                             cfg.chip.memory.hbm_gbps(),
                                             static_cast<int>(workload.parallel.devices_per_server));
    const std::int64_t per_server = workload.parallel.devices_per_server;
    const std::int64_t servers = devices / per_server;
    // Server kinds. A server is simulated unless an earlier one is alike: no rank of either has a
    // configuration of its own, the ranks' values are not computed, and every collective spans the
    // whole cluster (data parallelism) — then its ranks do exactly what the earlier server's do.
    const bool alike = !m_every_rank && !functional.enabled && !workload.parallel.grouped();
    // Per server: the server simulated for it; `plain`, the first with no rank of its own.
    std::vector<std::int64_t> kind_of(static_cast<std::size_t>(servers));
    std::int64_t plain = -1;
    for (std::int64_t s = 0; s < servers; ++s) {
      bool own = false;
      for (std::int64_t r = s * per_server; r < (s + 1) * per_server; ++r) own = own || rank_cfgs.count(r) > 0;
      if (!alike || own) {
        kind_of[static_cast<std::size_t>(s)] = s;
        continue;
      }
      if (plain < 0) plain = s;
      kind_of[static_cast<std::size_t>(s)] = plain;
    }
    // Per simulated server: the servers it stands for (itself included).
    std::vector<std::int64_t> stands_for(static_cast<std::size_t>(servers), 0);
    for (std::int64_t s = 0; s < servers; ++s)
      ++stands_for[static_cast<std::size_t>(kind_of[static_cast<std::size_t>(s)])];
    // Each server's devices sit behind PCIe switches of link.pcie_switch_devices, in rank order.
    const std::int64_t per_switch = std::min(cfg.link.pcie_switch_devices, per_server);
    const std::int64_t switches_per_server = (per_server + per_switch - 1) / per_switch;
    run.switches = servers * switches_per_server;
    run.system_of.resize(static_cast<std::size_t>(devices));
    run.h2d_uplink_of.resize(static_cast<std::size_t>(run.switches));
    std::vector<std::size_t> first_system(static_cast<std::size_t>(servers), 0);  // of each simulated server
    std::vector<std::size_t> first_switch(static_cast<std::size_t>(servers), 0);  // its first uplink's index
    run.simulated = 0;
    std::int64_t to_simulate = 0;
    for (std::int64_t s = 0; s < servers; ++s)
      to_simulate += kind_of[static_cast<std::size_t>(s)] == s ? per_server : 0;
    for (std::int64_t s = 0; s < servers; ++s) {
      if (kind_of[static_cast<std::size_t>(s)] != s) continue;
      // The server's host: its cores, or with the pipelines bound to NUMA nodes
      // (ds.config.set_numa_enable) each node's, its ranks spread over the nodes in order.
      const std::int64_t nodes = cfg.pipeline.numa_bind ? std::max<std::int64_t>(1, cfg.host.numa_nodes) : 1;
      const std::size_t first_node = run.host_cores.size();
      for (std::int64_t n = 0; n < nodes; ++n) {
        run.host_cores.push_back(std::make_unique<runtime::HostCores>(
            std::max<std::int64_t>(1, cfg.host.cpu_cores / nodes)));
        run.host_cores.back()->arbitrated = true;  // its ranks' requests in an order of their own
      }
      first_switch[static_cast<std::size_t>(s)] = run.h2d_uplinks.size();
      for (std::int64_t w = 0; w < switches_per_server; ++w)
        for (auto* v : {&run.h2d_uplinks, &run.d2h_uplinks})
          v->push_back(std::make_unique<hostif::DmaChannel>(
              (name + (v == &run.h2d_uplinks ? "_h2d_uplink" : "_d2h_uplink") +
               std::to_string(s * switches_per_server + w))
                  .c_str(),
              cfg.link.pcie_uplink_gbps, 0.0, cfg.link.dma_chunk_kib * 1024, 0.0, true));
      first_system[static_cast<std::size_t>(s)] = m_systems.size();
      for (std::int64_t r = s * per_server; r < (s + 1) * per_server; ++r) {
        const auto sw =
            first_switch[static_cast<std::size_t>(s)] + static_cast<std::size_t>(r % per_server / per_switch);
        RankPlace place{static_cast<int>(r),
                        run.hccl.get(),
                        run.host_cores[first_node + static_cast<std::size_t>(r % per_server * nodes / per_server)].get(),
                        run.h2d_uplinks[sw].get(),
                        run.d2h_uplinks[sw].get(),
                        r == 0 ? run.values.get() : nullptr,
                        static_cast<int>(r % per_server)};
        const auto own = rank_cfgs.find(r);
        SystemConfig rank_cfg = own == rank_cfgs.end() ? cfg : own->second;
        rank_cfg.pipeline.cache_sharers = per_server;  // a server's ranks share its cache server
        const auto stage = static_cast<std::size_t>(r / stage_ranks);
        m_systems.push_back(std::make_unique<System>((name + "_rank" + std::to_string(r)).c_str(), rank_cfg,
                                                     workload.stages.empty() ? workload : *workload.stages[stage],
                                                     session, place, &graphs[stage]));
        run.hccl->set_hbm(static_cast<int>(r), &m_systems.back()->hbm());
        if (run.hccl->networks_per_server() > 1) {  // collectives between the networks cross its PCIe link
          aicpu::Hccl* h = run.hccl.get();
          const int rank = static_cast<int>(r);
          for (hostif::DmaChannel* ch :
               {&m_systems.back()->host_interface().h2d, &m_systems.back()->host_interface().d2h}) {
            ch->set_sharer([h, rank] { return h->pcie_taken(rank); }, &h->pcie_changed(rank),
                           [h, rank] { h->pcie_dma_changed(rank); });
            h->add_pcie_dma(rank, [ch] { return ch->link_demand(); });
          }
        }
        // It arrives at each collective for its local rank on every server of its kind.
        run.hccl->set_stands_for(static_cast<int>(r), static_cast<int>(stands_for[static_cast<std::size_t>(s)]));
        // Every run of the process shares its mappings: the systems built so far and this run's.
        if (run.simulated++ == 0)
          check_stacks(*m_systems.back(), devices, to_simulate, static_cast<std::int64_t>(m_systems.size()) - 1,
                       m_every_rank);
      }
    }
    for (std::int64_t s = 0; s < servers; ++s) {
      const auto k = static_cast<std::size_t>(kind_of[static_cast<std::size_t>(s)]);
      for (std::int64_t l = 0; l < per_server; ++l)
        run.system_of[static_cast<std::size_t>(s * per_server + l)] = first_system[k] + static_cast<std::size_t>(l);
      for (std::int64_t w = 0; w < switches_per_server; ++w)
        run.h2d_uplink_of[static_cast<std::size_t>(s * switches_per_server + w)] =
            run.h2d_uplinks[first_switch[k] + static_cast<std::size_t>(w)].get();
    }
  }
  m_runs.push_back(std::move(run));
  return m_runs.size() - 1;
}

void Simulation::run() {
  if (m_ran) throw std::logic_error("Simulation::run called twice");
  m_ran = true;
  // Run in slices of simulated time, sized to take about a tenth of a second of wall time each:
  // between slices a requested stop (a signal, an output that failed) ends the run, and progress
  // is reported about once a second after the first second. Slicing changes no result: a slice's
  // end only pauses the kernel between two instants. Every run ends before the time limit or is
  // reported as having run out of time (System::result).
  using clock = std::chrono::steady_clock;
  const auto t0 = clock::now();
  auto last = t0;
  bool printed = false;
  sc_core::sc_time slice(1, sc_core::SC_MS);
  // Starting the processes in a delta cycle of their own is not worth SystemC's warning (W571)
  // when they schedule nothing more in it (a short run); it would go to standard output.
  sc_core::sc_report_handler::set_actions(sc_core::SC_ID_NO_SC_START_ACTIVITY_, sc_core::SC_DO_NOTHING);
  sc_core::sc_start(sc_core::SC_ZERO_TIME);  // elaborate and start the processes
  std::int64_t total = 0;
  for (const auto& s : m_systems) total += s->steps_total();
  while (!stop_requested() && sc_core::sc_pending_activity() && sc_core::sc_time_stamp() < time_limit()) {
    const auto before = clock::now();
    const sc_core::sc_time left = time_limit() - sc_core::sc_time_stamp();
    if (sc_core::sc_time_to_pending_activity() >= left) break;  // the next event lies beyond the limit
    sc_core::sc_start(slice < left ? slice : left, sc_core::SC_EXIT_ON_STARVATION);
    const auto now = clock::now();
    const double took = std::chrono::duration<double>(now - before).count();
    if (took < 0.05) slice = slice * 2;
    if (took > 0.2 && slice > sc_core::sc_time(1, sc_core::SC_US)) slice = slice / 2;
    const double wall = std::chrono::duration<double>(now - t0).count();
    if (!m_progress || wall < 1.0 || std::chrono::duration<double>(now - last).count() < 1.0) continue;
    last = now;
    std::int64_t done = 0;
    for (const auto& s : m_systems) done += s->steps_done();
    const double rate = static_cast<double>(done) / wall;
    const double eta = rate > 0 ? static_cast<double>(total - done) / rate : 0;
    *m_progress << "\r" << done << "/" << total << " steps, " << sc_core::sc_time_stamp().to_seconds()
                << " s simulated, " << static_cast<std::int64_t>(rate) << " steps/s, ETA "
                << static_cast<int>(eta + 0.5) << " s   " << std::flush;
    printed = true;
  }
  clear_dead_stack();
  if (printed) *m_progress << "\r" << std::string(72, ' ') << "\r" << std::flush;
  check_stop();  // the runs did not finish: no result, no trace's end
  if (m_trace) {
    for (auto& sys : m_systems) sys->flush_trace();  // what the systems keep until the end
    for (auto& run : m_runs)
      if (run.hccl) run.hccl->flush_trace();
    m_trace->close();
  }
}

runtime::RunResult Simulation::result(std::size_t index) {
  const Run& run = m_runs.at(index);
  runtime::RunResult r = m_systems.at(run.first)->result();
  if (run.ranks == 1) return r;
  if (const auto* dp = dynamic_cast<const runtime::DataParallelValues*>(run.values.get())) {
    r.values = dp->rank0();  // rank 0's network: its weights and batches for the files
    if (run.eval && r.failure.empty()) {
      r.accuracy = dp->rank0()->evaluate();
      r.eval_samples = dp->rank0()->evaluated();
    }
  }
  r.devices = static_cast<std::int64_t>(run.ranks);
  r.simulated_ranks = static_cast<std::int64_t>(run.simulated);
  r.data_shards = run.data_shards;
  r.tensor_parallel = run.tensor_parallel;
  std::map<std::size_t, runtime::RunResult> others;  // the other simulated ranks' results
  for (std::size_t k = 0; k < run.ranks; ++k) {
    const std::size_t sys = run.system_of[k];
    if (sys != run.first && !others.count(sys)) others.emplace(sys, m_systems.at(sys)->result());
    const runtime::RunResult& rank = sys == run.first ? r : others.at(sys);
    r.rank_step_mean_ms.push_back(rank.steps.step.stats().mean_ms);
    r.rank_step_p50_ms.push_back(rank.steps.step.stats().p50_ms);
    // The device's waits in GetNext, the first batch's included (set-up in the breakdown).
    r.rank_wait_data_s.push_back(rank.breakdown_s[static_cast<std::size_t>(Phase::WaitData)] +
                                 (runtime::uses_queue(rank.session.strategy) ? rank.first_fill_s : 0.0));
    r.rank_comm_s.push_back(rank.breakdown_s[static_cast<std::size_t>(Phase::Comm)]);
    r.sim_time_s = std::max(r.sim_time_s, rank.sim_time_s);
    r.checkpoints.largest_bytes = std::max(r.checkpoints.largest_bytes, rank.checkpoints.bytes);
    if (r.failure.empty() && !rank.failure.empty()) r.failure = "rank " + std::to_string(k) + ": " + rank.failure;
  }
  // Each gradient group: its collective's time once every rank has arrived, and as the ranks saw
  // it per step — when it started after the step's first forward op, how long it took with the
  // wait for the last rank, and the part no computation hid (mean over ranks; the most exposed).
  r.comm_groups = nlohmann::ordered_json::array();
  const auto& groups = m_systems.at(run.first)->compiled().comm_groups;
  for (std::size_t g = 0; g < groups.size(); ++g) {
    double start = 0, duration = 0, exposed = 0, exposed_max = 0;
    for (std::size_t k = 0; k < run.ranks; ++k) {
      const auto& timing = m_systems.at(run.system_of[k])->comm_timing();
      if (g >= timing.size() || timing[g].count == 0) continue;
      const auto& t = timing[g];
      const auto n = static_cast<double>(t.count);
      start += t.start_s / n;
      duration += t.duration_s / n;
      exposed += t.exposed_s / n;
      exposed_max = std::max(exposed_max, t.exposed_s / n);
    }
    const auto ranks = static_cast<double>(run.ranks);
    // The collective's own time: on the whole cluster, or (semi-auto) on rank 0's gradient group.
    double all_reduce_s = run.hccl->all_reduce_s(static_cast<double>(groups[g].bytes));
    for (const auto& t : m_systems.at(run.first)->compiled().step_tasks)
      if (t.kind == hostif::TaskKind::Comm && t.comm_group == static_cast<std::int32_t>(g) && !t.group.whole()) {
        all_reduce_s = run.hccl
                           ->group_cost(hostif::Collective::AllReduce, run.hccl->members(0, t.group),
                                        static_cast<double>(groups[g].bytes))
                           .seconds;
        break;
      }
    r.comm_groups.push_back({{"first", groups[g].first},
                             {"last", groups[g].last},
                             {"bytes", groups[g].bytes},
                             {"all_reduce_ms", 1e3 * all_reduce_s},
                             {"start_ms", 1e3 * start / ranks},
                             {"duration_ms", 1e3 * duration / ranks},
                             {"exposed_ms", 1e3 * exposed / ranks},
                             {"exposed_max_ms", 1e3 * exposed_max}});
  }
  // Pipeline stages: per stage (its first rank), its step, its collectives among stages (the
  // exchanges, a shared weight's gradient, the global norm) and the time its device waited in
  // them — less their own time, the bubble (a lower bound: a hidden transfer takes nothing from it).
  if (run.stages > 1) {
    const std::int64_t R = static_cast<std::int64_t>(run.ranks) / run.stages;
    nlohmann::ordered_json stages = nlohmann::ordered_json::array();
    for (std::int64_t s = 0; s < run.stages; ++s) {
      const auto first = static_cast<std::size_t>(s * R);
      const std::size_t sys = run.system_of[first];
      const runtime::RunResult& rank = sys == run.first ? r : others.at(sys);
      const auto& system = *m_systems.at(sys);
      const runtime::CompiledGraph& cg = system.compiled();
      // The device's busy time per step (measured), of which the optimizer's kernels and their
      // dispatch (as compiled) are not the micro-batches'.
      double transfer = 0, bytes = 0, optimizer = 0;
      std::int64_t n = 0;
      const double dispatch = 1e-9 * system.config().chip.aicpu.dispatch_ns;
      for (const auto& t : cg.step_tasks)
        if (t.kind == hostif::TaskKind::AiCore && t.part == hostif::StepPart::Optimizer)
          optimizer += dispatch + t.cost.time_s;
      const double steps = static_cast<double>(std::max<std::int64_t>(1, rank.steps_completed));
      const double busy = rank.breakdown_s[static_cast<std::size_t>(Phase::DeviceCompute)] / steps;
      for (const auto& t : cg.step_tasks)
        if (t.kind == hostif::TaskKind::Comm && t.across_stages) {
          const auto members = run.hccl->members(static_cast<int>(first), t.group);
          transfer += run.hccl->group_cost(t.collective, members, static_cast<double>(t.comm_bytes)).seconds;
          bytes += static_cast<double>(t.comm_bytes);
          ++n;
        }
      const double step = rank.steps.step.stats().mean_ms;
      const double exposed = rank.exposed_comm.is_object() ? rank.exposed_comm.value("pipeline_ms_per_step", 0.0) : 0.0;
      const double bubble = std::max(0.0, exposed - 1e3 * transfer);
      const auto [first_layer, layers] = run.stage_layers.at(static_cast<std::size_t>(s));
      stages.push_back(
          {{"stage", s},
           {"first_rank", s * R},
           {"layers", {first_layer, first_layer + layers - 1}},
           {"step_ms", step},
           {"device_compute_ms", 1e3 * cg.device_compute_s},
           {"busy_ms", 1e3 * busy},
           {"optimizer_ms", 1e3 * optimizer},
           {"micro_batch_ms", 1e3 * std::max(0.0, busy - optimizer) / static_cast<double>(run.micro_batches)},
           {"exchanges", n},
           {"exchange_bytes", bytes},
           {"exchange_ms", 1e3 * transfer},
           {"exposed_exchange_ms", exposed},
           {"bubble_ms", bubble},
           {"bubble_fraction", step > 0 ? bubble / step : 0.0},
           {"memory", {{"persistent_bytes", cg.memory.persistent_bytes}, {"step_bytes", cg.memory.arena_bytes}}}});
    }
    r.pipeline = {{"stages", run.stages},
                  {"micro_batches", run.micro_batches},
                  {"ideal_bubble_fraction",
                   static_cast<double>(run.stages - 1) / static_cast<double>(run.micro_batches + run.stages - 1)},
                  {"per_stage", stages}};
  }
  // The optimizer's own collectives (a sharded optimizer's ReduceScatter and AllGather, the norms'
  // AllReduce): per step, their count (fused units) and bytes by kind.
  {
    nlohmann::ordered_json kinds = nlohmann::ordered_json::object();
    for (const auto& t : m_systems.at(run.first)->compiled().step_tasks)
      if (t.kind == hostif::TaskKind::Comm && t.part == hostif::StepPart::Optimizer && t.comm_group < 0) {
        auto& k = kinds[hostif::collective_name(t.collective)];
        if (k.is_null()) k = {{"collectives", 0}, {"bytes", 0}};
        k["collectives"] = k["collectives"].get<std::int64_t>() + 1;
        k["bytes"] = k["bytes"].get<std::int64_t>() + t.comm_bytes;
      }
    if (!kinds.empty()) r.optimizer_collectives = kinds;
  }
  // The links: bytes carried over the run and utilisation (bytes / (links · bandwidth · run time)).
  const aicpu::Hccl& h = *run.hccl;
  const auto& setup = m_systems.at(run.first)->compiled().setup_tasks;
  const double broadcast_bytes = setup.empty() ? 0.0 : static_cast<double>(setup.front().comm_bytes);
  r.cluster_links = {{"broadcast_bytes", broadcast_bytes},
                     {"broadcast_ms", 1e3 * h.seconds(hostif::Collective::Broadcast, broadcast_bytes)},
                     {"hccs",
                      {{"links", h.hccs_links()},
                       {"gbps", h.config().link_bandwidth_gbps},
                       {"bytes", h.hccs_bytes()},
                       {"busy_s", h.hccs_busy_s()},
                       {"utilisation", h.hccs_utilisation(r.sim_time_s)}}},
                     {"roce",
                      {{"ports", h.roce_ports()},
                       {"gbps", h.config().roce_bandwidth_gbps},
                       {"bytes", h.roce_bytes()},
                       {"busy_s", h.roce_busy_s()},
                       {"utilisation", h.roce_utilisation(r.sim_time_s)}}},
                     {"hccs_networks",  // a server's HCCS networks and the PCIe paths between them
                      {{"per_server", h.networks_per_server()},
                       {"devices", h.per_server() / h.networks_per_server()},
                       {"pcie_paths", h.pcie_paths()},
                       {"pcie_gbps", h.config().pcie_bandwidth_gbps},
                       {"pcie_bytes", h.pcie_bytes()},
                       {"pcie_busy_s", h.pcie_busy_s()},
                       {"pcie_utilisation", h.pcie_utilisation(r.sim_time_s)}}},
                     // The RoCE fabric: leaves of servers, their uplinks to the spines.
                     {"network",
                      {{"servers_per_leaf", h.config().servers_per_leaf},
                       {"leaves", h.leaves()},
                       {"oversubscription", h.config().oversubscription},
                       {"switch_latency_us", h.config().switch_latency_us},
                       {"spine_rate", h.leaves() > 1 ? aicpu::Hccl::spine_rate(h.config()) : 1.0}}},
                     // Collectives in flight at once that shared a device's port (aicpu/hccl.h).
                     {"shared_ports", {{"collectives", h.shared_count()}, {"lost_s", h.shared_lost_s()}}}};
  // The PCIe switches' uplinks to the host: bytes and utilisation, host to device.
  double up_bytes = 0, up_busy = 0;
  for (const auto* u : run.h2d_uplink_of) {
    up_bytes += u->bytes();
    up_busy += u->busy_s();
  }
  const double up_gbps = m_systems.at(run.first)->config().link.pcie_uplink_gbps;
  const auto switches = static_cast<double>(run.switches);
  r.cluster_links["pcie_uplinks"] = {
      {"switches", run.switches},
      {"devices_per_switch", static_cast<std::int64_t>(run.ranks) / run.switches},
      {"gbps", up_gbps},
      {"h2d_bytes", up_bytes},
      {"h2d_busy_s", up_busy},
      {"h2d_utilisation", r.sim_time_s > 0 ? up_bytes / (switches * up_gbps * 1e9 * r.sim_time_s) : 0.0}};
  return r;
}

Simulation::~Simulation() {
  if (!m_ran || m_systems.empty()) return;
  try {
    // A process that kills the others: each unwinds (its destructors run) the moment it is killed.
    sc_core::sc_spawn(
        [] {
          std::vector<sc_core::sc_process_handle> processes;
          for (auto* o : sc_core::sc_get_top_level_objects()) collect_processes(o, processes);
          const sc_core::sc_process_handle self = sc_core::sc_get_current_process_handle();
          for (auto& h : processes)
            if (h != self && !h.terminated()) h.kill();
        },
        "teardown");
    sc_core::sc_start();
    clear_dead_stack();
  } catch (...) {  // a destructor must not throw; the context is deleted by its owner anyway
  }
}

void Simulation::enable_trace(std::ostream& os, TraceFormat format, std::int64_t first_step, std::int64_t last_step) {
  if (m_ran) throw std::logic_error("Simulation::enable_trace after run()");
  m_trace = make_trace_sink(format, os);
  for (std::size_t i = 0; i < m_systems.size(); ++i)
    m_systems[i]->enable_trace(*m_trace, static_cast<int>(i + 1), first_step, last_step);
  // A cluster's links: a process after the ranks', recording while rank 0 records its steps.
  int pid = static_cast<int>(m_systems.size());
  for (std::size_t i = 0; i < m_runs.size(); ++i) {
    Run& run = m_runs[i];
    if (!run.hccl) continue;
    run.links = std::make_unique<TraceRecorder>(*m_trace, ++pid, "links (run" + std::to_string(i) + ")");
    run.hccl->set_trace(run.links.get(), m_systems[run.first]->trace_recorder());
  }
}

}  // namespace ascendsim::sim
