#define SC_INCLUDE_DYNAMIC_PROCESSES  // the process that ends the others is spawned at the end
#include "sim/simulation.h"

#include <algorithm>
#include <chrono>
#include <stdexcept>

#include "sim/core/time.h"

namespace ascendsim::sim {

std::size_t Simulation::add(const SystemConfig& cfg, const workloads::Workload& workload,
                            const runtime::Session& session, const std::map<std::int64_t, SystemConfig>& rank_cfgs) {
  if (m_ran) throw std::logic_error("Simulation::add after run()");
  const std::string name = "run" + std::to_string(m_runs.size());
  Run run;
  run.first = m_systems.size();
  const std::int64_t devices = workload.parallel.devices;
  if (devices <= 1) {
    m_systems.push_back(std::make_unique<System>(name.c_str(), cfg, workload, session));
  } else {
    const runtime::CompiledGraph graph = compile_checked(cfg, workload, session);
    run.ranks = static_cast<std::size_t>(devices);
    run.hccl = std::make_unique<aicpu::Hccl>((name + "_hccl").c_str(), cfg.chip.hccl, static_cast<int>(devices),
                                             cfg.chip.memory.hbm_bandwidth_gbps,
                                             static_cast<int>(workload.parallel.devices_per_server));
    const std::int64_t per_server = workload.parallel.devices_per_server;
    for (std::int64_t s = 0; s < devices / per_server; ++s)
      run.host_cores.push_back(std::make_unique<runtime::HostCores>(cfg.host.cpu_cores));  // each server's host
    for (std::int64_t r = 0; r < devices; ++r) {
      RankPlace place{static_cast<int>(r), run.hccl.get(),
                      run.host_cores[static_cast<std::size_t>(r / per_server)].get()};
      const auto own = rank_cfgs.find(r);
      m_systems.push_back(std::make_unique<System>((name + "_rank" + std::to_string(r)).c_str(),
                                                   own == rank_cfgs.end() ? cfg : own->second, workload, session, place,
                                                   &graph));
    }
  }
  m_runs.push_back(std::move(run));
  return m_runs.size() - 1;
}

void Simulation::run() {
  if (m_ran) throw std::logic_error("Simulation::run called twice");
  m_ran = true;
  // Every run ends before the time limit or is reported as having run out of time (System::result).
  if (!m_progress) {
    sc_core::sc_start(time_limit(), sc_core::SC_EXIT_ON_STARVATION);
    if (m_trace) m_trace->close();
    return;
  }
  // Run in slices of simulated time, sized to take about a tenth of a second of wall time each,
  // and report about once a second after the first second.
  using clock = std::chrono::steady_clock;
  const auto t0 = clock::now();
  auto last = t0;
  bool printed = false;
  sc_core::sc_time slice(1, sc_core::SC_MS);
  sc_core::sc_start(sc_core::SC_ZERO_TIME);  // elaborate and start the processes
  std::int64_t total = 0;
  for (const auto& s : m_systems) total += s->steps_total();
  while (sc_core::sc_pending_activity() && sc_core::sc_time_stamp() < time_limit()) {
    const auto before = clock::now();
    const sc_core::sc_time left = time_limit() - sc_core::sc_time_stamp();
    if (sc_core::sc_time_to_pending_activity() >= left) break;  // the next event lies beyond the limit
    sc_core::sc_start(slice < left ? slice : left, sc_core::SC_EXIT_ON_STARVATION);
    const auto now = clock::now();
    const double took = std::chrono::duration<double>(now - before).count();
    if (took < 0.05) slice = slice * 2;
    if (took > 0.2 && slice > sc_core::sc_time(1, sc_core::SC_US)) slice = slice / 2;
    const double wall = std::chrono::duration<double>(now - t0).count();
    if (wall < 1.0 || std::chrono::duration<double>(now - last).count() < 1.0) continue;
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
  if (printed) *m_progress << "\r" << std::string(72, ' ') << "\r" << std::flush;
  if (m_trace) m_trace->close();
}

runtime::RunResult Simulation::result(std::size_t index) {
  const Run& run = m_runs.at(index);
  runtime::RunResult r = m_systems.at(run.first)->result();
  if (run.ranks == 1) return r;
  r.devices = static_cast<std::int64_t>(run.ranks);
  for (std::size_t k = 0; k < run.ranks; ++k) {
    runtime::RunResult other;
    if (k > 0) other = m_systems.at(run.first + k)->result();
    const runtime::RunResult& rank = k == 0 ? r : other;
    r.rank_step_mean_ms.push_back(rank.steps.step.stats().mean_ms);
    r.rank_wait_data_s.push_back(rank.breakdown_s[static_cast<std::size_t>(Phase::WaitData)]);
    r.rank_comm_s.push_back(rank.breakdown_s[static_cast<std::size_t>(Phase::Comm)]);
    r.sim_time_s = std::max(r.sim_time_s, rank.sim_time_s);
    if (r.failure.empty() && !rank.failure.empty()) r.failure = "rank " + std::to_string(k) + ": " + rank.failure;
  }
  r.comm_groups = nlohmann::ordered_json::array();
  for (const auto& g : m_systems.at(run.first)->compiled().comm_groups)
    r.comm_groups.push_back({{"first", g.first},
                             {"last", g.last},
                             {"bytes", g.bytes},
                             {"all_reduce_ms", 1e3 * run.hccl->all_reduce_s(static_cast<double>(g.bytes))}});
  return r;
}

namespace {
void collect_processes(sc_core::sc_object* o, std::vector<sc_core::sc_process_handle>& out) {
  sc_core::sc_process_handle h(o);
  if (h.valid()) out.push_back(h);
  for (auto* c : o->get_child_objects()) collect_processes(c, out);
}
}  // namespace

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
  } catch (...) {  // a destructor must not throw; the context is deleted by its owner anyway
  }
}

void Simulation::enable_trace(std::ostream& os, TraceFormat format, std::int64_t first_step, std::int64_t last_step) {
  if (m_ran) throw std::logic_error("Simulation::enable_trace after run()");
  m_trace = make_trace_sink(format, os);
  for (std::size_t i = 0; i < m_systems.size(); ++i)
    m_systems[i]->enable_trace(*m_trace, static_cast<int>(i + 1), first_step, last_step);
}

}  // namespace ascendsim::sim
