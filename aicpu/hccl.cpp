#include "aicpu/hccl.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "sim/core/time.h"

namespace ascendsim::aicpu {

using hostif::Collective;

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
                              "its end, summed")),
      m_broadcasts(m_stats.scalar("broadcasts", "count", "Broadcast collectives completed (the parameters at start)")),
      m_gathers(m_stats.scalar("gathers", "count", "AllGather and ReduceScatter collectives completed")),
      m_hccs_bytes(m_stats.scalar("hccs_bytes", "B", "bytes the server rings' links carried, summed over links")),
      m_hccs_busy_s(m_stats.scalar("hccs_busy_s", "s", "time a collective used the server rings")),
      m_roce_bytes(m_stats.scalar("roce_bytes", "B", "bytes the devices' RoCE ports sent, summed over ports")),
      m_roce_busy_s(m_stats.scalar("roce_busy_s", "s", "time a collective used the RoCE rings between servers")),
      m_pcie_bytes(m_stats.scalar("pcie_bytes", "B",
                                  "bytes the devices sent over PCIe between a server's HCCS networks, summed")),
      m_pcie_busy_s(
          m_stats.scalar("pcie_busy_s", "s", "time a collective used PCIe between a server's HCCS networks")) {
  if (ranks < 1 || per_server < 1 || ranks % m_per_server != 0)
    throw std::invalid_argument("a cluster is whole servers of " + std::to_string(per_server) + " devices");
}

namespace {
/// One ring of n devices with step latency `alpha` (s) and link bandwidth `bw` (B/s).
struct Ring {
  double n, alpha, bw, hbm;
  /// (n-1) steps each moving one piece of `bytes`/n, with a reduction of it when `reduce`.
  double half(double bytes, bool reduce) const {
    if (n <= 1) return 0;
    const double piece = bytes / n;
    return (n - 1) * (alpha + piece / bw) + (reduce ? (n - 1) * 3 * piece / hbm : 0.0);
  }
  /// The HBM bytes of one member in half(): per step the piece sent (read) and received
  /// (written), and with a reduction two pieces read and one written.
  double half_hbm(double bytes, bool reduce) const { return n > 1 ? (n - 1) * bytes / n * (reduce ? 5 : 2) : 0.0; }
  /// The same for broadcast(): each member writes what it receives and reads what it forwards.
  double broadcast_hbm(double bytes) const { return n > 1 ? 2 * bytes : 0.0; }
  /// Pipelined broadcast in the number of chunks that minimises (n-2+c)·(α + S/(c·B)).
  double broadcast(double bytes) const {
    if (n <= 1) return 0;
    const double best = std::sqrt(std::max(0.0, (n - 2) * bytes / (alpha * bw)));
    double t = INFINITY;
    for (double c : {std::floor(best), std::ceil(best)}) {
      c = std::max(1.0, c);
      t = std::min(t, (n - 2 + c) * (alpha + bytes / c / bw));
    }
    return t;
  }
};
}  // namespace

double Hccl::ring_s(const HcclConfig& cfg, Collective kind, int ranks, double bytes, double hbm_gbps) {
  return cost(cfg, kind, 1, ranks, bytes, hbm_gbps).seconds;
}

int Hccl::network_size(const HcclConfig& cfg, int per_server) {
  const int g = static_cast<int>(std::min<std::int64_t>(cfg.hccs_group_size, per_server));
  return g >= 1 && per_server % g == 0 ? g : per_server;
}

CollectiveCost Hccl::cost(const HcclConfig& cfg, Collective kind, int servers, int per_server, double bytes,
                          double hbm_gbps) {
  const int g = network_size(cfg, per_server);
  return cost(cfg, kind, CollectiveSpan{servers, per_server / g, g}, bytes, hbm_gbps);
}

CollectiveSpan Hccl::span_of(const HcclConfig& cfg, const std::vector<int>& members, int per_server) {
  const int g = network_size(cfg, per_server);
  std::vector<int> servers, networks;
  for (int r : members) {
    if (std::find(servers.begin(), servers.end(), r / per_server) == servers.end()) servers.push_back(r / per_server);
    if (std::find(networks.begin(), networks.end(), r / g) == networks.end()) networks.push_back(r / g);
  }
  const int n = static_cast<int>(members.size()), k = static_cast<int>(servers.size()),
            q = static_cast<int>(networks.size());
  return {k, q / k, n / q};
}

CollectiveCost Hccl::cost(const HcclConfig& cfg, Collective kind, const CollectiveSpan& span, double bytes,
                          double hbm_gbps) {
  // g devices on each HCCS network, p networks per server (joined through PCIe), k servers.
  const double g = span.devices, p = span.networks, k = std::max(1, span.servers), m = g * p;
  const Ring intra{g, cfg.step_latency_us * 1e-6, cfg.link_bandwidth_gbps * 1e9, hbm_gbps * 1e9};
  const Ring cross{p, cfg.step_latency_us * 1e-6, cfg.pcie_bandwidth_gbps * 1e9, hbm_gbps * 1e9};
  const Ring inter{k, cfg.roce_step_latency_us * 1e-6, cfg.roce_bandwidth_gbps * 1e9, hbm_gbps * 1e9};
  CollectiveCost c;
  auto part = [&](const char* what, bool roce, double s, double hbm, bool pcie = false) {
    if (s > 0) c.parts.push_back({what, roce, s, pcie, hbm});
    c.seconds += s;
  };
  // Bytes one ring link carries in a half (reduce-scatter or all-gather) of `bytes` on n devices.
  auto half_bytes = [](double n, double s) { return n > 1 ? (n - 1) * s / n : 0.0; };
  const double links = g > 1 ? m * k : 0, ports = k > 1 ? m * k : 0, paths = p > 1 ? m * k : 0;
  switch (kind) {
    case Collective::AllReduce:
      part("reduce-scatter", false, intra.half(bytes, true), intra.half_hbm(bytes, true));
      part("reduce-scatter", false, cross.half(bytes / g, true), cross.half_hbm(bytes / g, true), true);
      part("all-reduce", true, inter.half(bytes / m, true) + inter.half(bytes / m, false),
           inter.half_hbm(bytes / m, true) + inter.half_hbm(bytes / m, false));
      part("all-gather", false, cross.half(bytes / g, false), cross.half_hbm(bytes / g, false), true);
      part("all-gather", false, intra.half(bytes, false), intra.half_hbm(bytes, false));
      c.hccs_bytes = links * 2 * half_bytes(g, bytes);
      c.pcie_bytes = paths * 2 * half_bytes(p, bytes / g);
      c.roce_bytes = ports * 2 * half_bytes(k, bytes / m);
      break;
    case Collective::ReduceScatter:
      part("reduce-scatter", false, intra.half(bytes, true), intra.half_hbm(bytes, true));
      part("reduce-scatter", false, cross.half(bytes / g, true), cross.half_hbm(bytes / g, true), true);
      part("reduce-scatter", true, inter.half(bytes / m, true), inter.half_hbm(bytes / m, true));
      c.hccs_bytes = links * half_bytes(g, bytes);
      c.pcie_bytes = paths * half_bytes(p, bytes / g);
      c.roce_bytes = ports * half_bytes(k, bytes / m);
      break;
    case Collective::AllGather:
      part("all-gather", true, inter.half(bytes / m, false), inter.half_hbm(bytes / m, false));
      part("all-gather", false, cross.half(bytes / g, false), cross.half_hbm(bytes / g, false), true);
      part("all-gather", false, intra.half(bytes, false), intra.half_hbm(bytes, false));
      c.hccs_bytes = links * half_bytes(g, bytes);
      c.pcie_bytes = paths * half_bytes(p, bytes / g);
      c.roce_bytes = ports * half_bytes(k, bytes / m);
      break;
    case Collective::AllToAll:
      // A pairwise exchange: N-1 rounds, each sending one N-th of the buffer to one peer — the
      // time and link bytes of an all-gather half, across servers and networks for the pieces
      // that leave one.
      part("all-to-all", true, inter.half(bytes / m, false), inter.half_hbm(bytes / m, false));
      part("all-to-all", false, cross.half(bytes / g, false), cross.half_hbm(bytes / g, false), true);
      part("all-to-all", false, intra.half(bytes, false), intra.half_hbm(bytes, false));
      c.hccs_bytes = links * half_bytes(g, bytes);
      c.pcie_bytes = paths * half_bytes(p, bytes / g);
      c.roce_bytes = ports * half_bytes(k, bytes / m);
      break;
    case Collective::Broadcast:
      // The root's RoCE ring to the other servers (k-1 ports send S), then on every server a
      // ring of its networks over PCIe (p-1 paths carry S), then every network's ring (g-1 links
      // each carry S).
      part("broadcast", true, inter.broadcast(bytes), inter.broadcast_hbm(bytes));
      part("broadcast", false, cross.broadcast(bytes), cross.broadcast_hbm(bytes), true);
      part("broadcast", false, intra.broadcast(bytes), intra.broadcast_hbm(bytes));
      c.hccs_bytes = g > 1 ? k * p * (g - 1) * bytes : 0.0;
      c.pcie_bytes = p > 1 ? k * (p - 1) * bytes : 0.0;
      c.roce_bytes = k > 1 ? (k - 1) * bytes : 0.0;
      break;
  }
  return c;
}

double Hccl::hccs_utilisation(double seconds) const {
  const double cap = hccs_links() * m_cfg.link_bandwidth_gbps * 1e9 * seconds;
  return cap > 0 ? m_hccs_bytes.value() / cap : 0.0;
}

double Hccl::roce_utilisation(double seconds) const {
  const double cap = roce_ports() * m_cfg.roce_bandwidth_gbps * 1e9 * seconds;
  return cap > 0 ? m_roce_bytes.value() / cap : 0.0;
}

double Hccl::pcie_utilisation(double seconds) const {
  const double cap = pcie_paths() * m_cfg.pcie_bandwidth_gbps * 1e9 * seconds;
  return cap > 0 ? m_pcie_bytes.value() / cap : 0.0;
}

void Hccl::set_trace(sim::TraceRecorder* trace, const sim::TraceRecorder* window) {
  m_trace = trace;
  m_window = window;
  m_server_tracks.clear();
  if (!trace) return;
  if (m_per_server > 1)
    for (int s = 0; s < servers(); ++s)
      m_server_tracks.push_back(trace->track("server " + std::to_string(s) + " HCCS ring"));
  if (servers() > 1) m_roce_track = trace->track("RoCE rings between servers");
}

void Hccl::trace_collective(const CollectiveCost& c, Collective kind, std::int64_t bytes) {
  sc_core::sc_time at = sc_core::sc_time_stamp();
  for (const auto& p : c.parts) {
    const sc_core::sc_time end = at + sim::seconds(p.seconds);
    const std::string name = std::string(hostif::collective_name(kind)) + " " + p.what +
                             (p.pcie ? " over PCIe " : " ") + std::to_string(bytes) + " B";
    if (p.roce)
      m_trace->span(m_roce_track, name, at, end);
    else
      for (int t : m_server_tracks) m_trace->span(t, name, at, end);
    at = end;
  }
}

void Hccl::collective(int rank, Collective kind, std::int64_t bytes) {
  if (rank < 0 || rank >= m_ranks) throw std::logic_error("Hccl: no rank " + std::to_string(rank));
  const std::int64_t seq = m_calls[static_cast<std::size_t>(rank)]++;
  Instance& in = m_open[seq];
  if (in.bytes >= 0 && (in.bytes != bytes || in.kind != kind))
    throw std::logic_error("Hccl: ranks disagree on collective " + std::to_string(seq));
  in.bytes = bytes;
  in.kind = kind;
  if (++in.arrived == m_ranks) {
    const CollectiveCost c = cost(m_cfg, kind, servers(), m_per_server, static_cast<double>(bytes), m_hbm_gbps);
    account(kind, bytes, c);
    draw(c, {});
    in.done.notify(sim::seconds(c.seconds));
  }
  sc_core::wait(in.done);
  if (++in.left == m_ranks) m_open.erase(seq);
}

void Hccl::set_hbm(int rank, aicore::Hbm* hbm) {
  if (rank < 0 || rank >= m_ranks) throw std::logic_error("Hccl: no rank " + std::to_string(rank));
  m_hbm.resize(static_cast<std::size_t>(m_ranks), nullptr);
  m_hbm[static_cast<std::size_t>(rank)] = hbm;
}

void Hccl::draw(const CollectiveCost& c, const std::vector<int>& members) {
  if (m_hbm.empty()) return;
  auto on = [&](int r) {
    aicore::Hbm* h = m_hbm[static_cast<std::size_t>(r)];
    if (!h) return;
    sc_core::sc_time at;
    for (const auto& p : c.parts) {
      const sc_core::sc_time d = sim::seconds(p.seconds);
      h->flow(p.hbm_bytes, at, d, aicore::HbmSource::Collective);
      at += d;
    }
  };
  if (members.empty())
    for (int r = 0; r < m_ranks; ++r) on(r);
  else
    for (int r : members) on(r);
}

void Hccl::account(Collective kind, std::int64_t bytes, const CollectiveCost& c) {
  switch (kind) {
    case Collective::AllReduce:
      ++m_count;
      m_bytes += static_cast<double>(bytes);
      m_busy_s += c.seconds;
      break;
    case Collective::Broadcast:
      ++m_broadcasts;
      break;
    case Collective::AllGather:
    case Collective::ReduceScatter:
    case Collective::AllToAll:
      ++m_gathers;
      break;
  }
  m_hccs_bytes += c.hccs_bytes;
  m_roce_bytes += c.roce_bytes;
  m_pcie_bytes += c.pcie_bytes;
  for (const auto& p : c.parts) (p.roce ? m_roce_busy_s : p.pcie ? m_pcie_busy_s : m_hccs_busy_s) += p.seconds;
  if (m_trace && (!m_window || m_window->active())) trace_collective(c, kind, bytes);
}

std::vector<int> Hccl::members(int rank, const hostif::CommGroup& g) const {
  if (!g.whole() && (g.size < 1 || g.stride < 1 || m_ranks % (g.size * g.stride) != 0))
    throw std::logic_error("Hccl: a group of " + std::to_string(g.size) + " ranks " + std::to_string(g.stride) +
                           " apart does not tile " + std::to_string(m_ranks) + " ranks");
  return g.members(rank, m_ranks);
}

CollectiveCost Hccl::group_cost(Collective kind, const std::vector<int>& members, double bytes) const {
  return cost(m_cfg, kind, span_of(m_cfg, members, m_per_server), bytes, m_hbm_gbps);
}

void Hccl::collective(int rank, Collective kind, std::int64_t bytes, const hostif::CommGroup& group) {
  if (group.whole()) return collective(rank, kind, bytes);
  if (rank < 0 || rank >= m_ranks) throw std::logic_error("Hccl: no rank " + std::to_string(rank));
  const std::vector<int> m = members(rank, group);
  if (m.size() == 1) return;  // a group of one: nothing to exchange
  const std::string key = std::to_string(group.size) + "x" + std::to_string(group.stride) + "@" + std::to_string(m[0]);
  const std::int64_t seq = m_group_calls[{key, rank}]++;
  Instance& in = m_group_open[{key, seq}];
  if (in.bytes >= 0 && (in.bytes != bytes || in.kind != kind))
    throw std::logic_error("Hccl: group " + key + " disagrees on collective " + std::to_string(seq));
  in.bytes = bytes;
  in.kind = kind;
  const int n = static_cast<int>(m.size());
  if (++in.arrived == n) {
    const CollectiveCost c = group_cost(kind, m, static_cast<double>(bytes));
    account(kind, bytes, c);
    draw(c, m);
    in.done.notify(sim::seconds(c.seconds));
  }
  sc_core::wait(in.done);
  if (++in.left == n) m_group_open.erase({key, seq});
}

}  // namespace ascendsim::aicpu
