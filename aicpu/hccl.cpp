#include "aicpu/hccl.h"

#include <algorithm>
#include <stdexcept>

#include "sim/core/time.h"

namespace ascendsim::aicpu {

Hccl::Hccl(sc_core::sc_module_name name, const HcclConfig& cfg, int ranks, double hbm_gbps, int per_server)
    : sc_module(name),
      m_cfg(cfg),
      m_ranks(ranks),
      m_per_server(std::min(ranks, per_server)),
      m_hbm_gbps(hbm_gbps),
      m_calls(static_cast<std::size_t>(ranks), 0),
      m_stats(*this),
      m_count(m_stats.scalar("all_reduces", "count", "AllReduce collectives completed (each counted once)")),
      m_bytes(m_stats.scalar("all_reduce_bytes", "B", "bytes each rank contributed to AllReduce collectives")),
      m_busy_s(m_stats.scalar("all_reduce_s", "s",
                              "time from each AllReduce's start (its last rank's arrival) to "
                              "its end, summed")) {
  if (ranks < 1 || per_server < 1 || ranks % m_per_server != 0)
    throw std::invalid_argument("a cluster is whole servers of " + std::to_string(per_server) + " devices");
}

double Hccl::hierarchical_all_reduce_s(const HcclConfig& cfg, int servers, int per_server, double bytes,
                                       double hbm_gbps) {
  if (servers <= 1) return ring_all_reduce_s(cfg, per_server, bytes, hbm_gbps);
  const double m = per_server, k = servers, piece = bytes / m;
  // Reduce-scatter and all-gather on the server's ring: (m-1) steps each, m-1 reductions.
  const double intra = 2 * (m - 1) * (cfg.step_latency_us * 1e-6 + piece / (cfg.link_bandwidth_gbps * 1e9)) +
                       (m - 1) * 3 * piece / (hbm_gbps * 1e9);
  // The S/m piece on a ring of the k servers over RoCE.
  const double inter = 2 * (k - 1) * (cfg.roce_step_latency_us * 1e-6 + piece / k / (cfg.roce_bandwidth_gbps * 1e9)) +
                       (k - 1) * 3 * piece / k / (hbm_gbps * 1e9);
  return intra + inter;
}

double Hccl::all_reduce_s(double bytes) const {
  return hierarchical_all_reduce_s(m_cfg, m_ranks / m_per_server, m_per_server, bytes, m_hbm_gbps);
}

double Hccl::ring_all_reduce_s(const HcclConfig& cfg, int ranks, double bytes, double hbm_gbps) {
  if (ranks <= 1) return 0;
  const double n = ranks, piece = bytes / n;
  const double transfer = 2 * (n - 1) * (cfg.step_latency_us * 1e-6 + piece / (cfg.link_bandwidth_gbps * 1e9));
  const double reduce = (n - 1) * 3 * piece / (hbm_gbps * 1e9);
  return transfer + reduce;
}

double Hccl::ring_broadcast_s(const HcclConfig& cfg, int ranks, double bytes, int chunks) {
  if (ranks <= 1) return 0;
  chunks = std::max(1, chunks);
  // A chunk takes one step per hop; the pipeline is full after N-1 hops.
  const double step = cfg.step_latency_us * 1e-6 + bytes / chunks / (cfg.link_bandwidth_gbps * 1e9);
  return (ranks - 1 + chunks - 1) * step;
}

void Hccl::all_reduce(int rank, std::int64_t bytes) {
  if (rank < 0 || rank >= m_ranks) throw std::logic_error("Hccl: no rank " + std::to_string(rank));
  const std::int64_t seq = m_calls[static_cast<std::size_t>(rank)]++;
  Instance& in = m_open[seq];
  if (in.bytes >= 0 && in.bytes != bytes)
    throw std::logic_error("Hccl: ranks disagree on AllReduce " + std::to_string(seq) + "'s size");
  in.bytes = bytes;
  if (++in.arrived == m_ranks) {
    const double t = all_reduce_s(static_cast<double>(bytes));
    ++m_count;
    m_bytes += static_cast<double>(bytes);
    m_busy_s += t;
    in.done.notify(sim::seconds(t));
  }
  sc_core::wait(in.done);
  if (++in.left == m_ranks) m_open.erase(seq);
}

}  // namespace ascendsim::aicpu
