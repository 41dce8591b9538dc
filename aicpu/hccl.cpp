#include "aicpu/hccl.h"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <stdexcept>
#include <string>
#include <utility>

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
      m_exchanges(m_stats.scalar("exchanges", "count", "point-to-point exchanges (pipeline stages) completed")),
      m_hccs_bytes(m_stats.scalar("hccs_bytes", "B", "bytes the server rings' links carried, summed over links")),
      m_hccs_busy_s(m_stats.scalar("hccs_busy_s", "s", "time a collective used the server rings")),
      m_roce_bytes(m_stats.scalar("roce_bytes", "B", "bytes the devices' RoCE ports sent, summed over ports")),
      m_roce_busy_s(m_stats.scalar("roce_busy_s", "s", "time a collective used the RoCE rings between servers")),
      m_pcie_bytes(m_stats.scalar("pcie_bytes", "B",
                                  "bytes the devices sent over PCIe between a server's HCCS networks, summed")),
      m_pcie_busy_s(m_stats.scalar("pcie_busy_s", "s", "time a collective used PCIe between a server's HCCS networks")),
      m_shared(m_stats.scalar("shared", "count",
                              "collectives slowed by another sharing a device's port, or by the data's DMA sharing "
                              "its PCIe link")),
      m_shared_lost_s(
          m_stats.scalar("shared_lost_s", "s", "time those collectives took beyond their time alone, summed")) {
  if (ranks < 1 || per_server < 1 || ranks % m_per_server != 0)
    throw std::invalid_argument("a cluster is whole servers of " + std::to_string(per_server) + " devices");
  m_in_flight.assign(static_cast<std::size_t>(ranks), 0);
  m_dma_demand.resize(static_cast<std::size_t>(ranks));
  m_pcie_taken.assign(static_cast<std::size_t>(ranks), 0.0);
  for (int r = 0; r < ranks; ++r) m_pcie_changed.push_back(std::make_unique<sc_core::sc_event>());
  m_stands_for.assign(static_cast<std::size_t>(ranks), 1);
  SC_METHOD(on_tick);
  sensitive << m_tick;
  dont_initialize();
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
  /// Of half(), the transfers: (n-1) pieces at the link's rate.
  double half_wire(double bytes) const { return n > 1 ? (n - 1) * (bytes / n / bw) : 0.0; }
  /// The HBM bytes of one member in half(): per step the piece sent (read) and received
  /// (written), and with a reduction two pieces read and one written.
  double half_hbm(double bytes, bool reduce) const { return n > 1 ? (n - 1) * bytes / n * (reduce ? 5 : 2) : 0.0; }
  /// The same for broadcast(): each member writes what it receives and reads what it forwards.
  double broadcast_hbm(double bytes) const { return n > 1 ? 2 * bytes : 0.0; }
  /// Pipelined broadcast in the number of chunks that minimises (n-2+c)·(α + S/(c·B)); `wire`
  /// gets its transfers, (n-2+c)·S/(c·B).
  double broadcast(double bytes, double* wire = nullptr) const {
    if (wire) *wire = 0;
    if (n <= 1) return 0;
    const double best = std::sqrt(std::max(0.0, (n - 2) * bytes / (alpha * bw)));
    double t = INFINITY;
    for (double c : {std::floor(best), std::ceil(best)}) {
      c = std::max(1.0, c);
      const double tc = (n - 2 + c) * (alpha + bytes / c / bw);
      if (tc < t && wire) *wire = (n - 2 + c) * (bytes / c / bw);
      t = std::min(t, tc);
    }
    return t;
  }
  double broadcast_wire(double bytes) const {
    double w = 0;
    broadcast(bytes, &w);
    return w;
  }
};
/// HCCL's level-1 algorithms between servers, in HcclConfig::kAlgorithms' order (their names).
enum class Level1 { Ring, HalvingDoubling, Nhr, Nb, Pipeline };

Level1 level1(const std::string& name) {
  for (std::size_t i = 0; i < std::size(HcclConfig::kAlgorithms); ++i)
    if (name == HcclConfig::kAlgorithms[i]) return static_cast<Level1>(i);
  throw std::logic_error("Hccl: no algorithm '" + name + "' (the configuration allows only known ones)");
}

int pow2_floor(int k) {
  int p = 1;
  while (2 * p <= k) p *= 2;
  return p;
}

/// ⌈log2 k⌉ for k ≥ 1.
int log2_ceil(int k) {
  int j = 0;
  while ((1 << j) < k) ++j;
  return j;
}

/// Between k servers, HCCL's level-1 algorithm for a reduce-scatter or all-gather half on S' bytes
/// per server (the formulas: docs/model.md, "HCCL's algorithms between servers"):
///   ring              k−1 steps of S'/k to the next server (Ring, with the fabric's rate for
///                     rings on several leaves); also the pipeline's level 1;
///   halving-doubling  log2 p steps (p = 2^⌊log2 k⌋) exchanging S'/2, S'/4, …, S'/p with the
///                     server p/2, p/4, …, 1 apart (XOR partners); with k > p the k − p extra
///                     servers first fold their S' into servers 0.. (reduce-scatter) or at the end
///                     get the result back (all-gather): one step of S' more (Thakur, Rabenseifner
///                     & Gropp 2005);
///   nb                ⌈log2 k⌉ steps, step i to the server 2^i ahead with min(2^i, k − 2^i)
///                     pieces of S'/k (Bruck et al. 1997): (k−1)/k of S' in all;
///   nhr               the same pieces in the opposite order: the most to the nearest server.
/// Servers sit L to a leaf switch in order: a step whose partners lie on different leaves crosses
/// two more switches, and a leaf whose c servers all send out shares uplinks of L·B/o among them.
struct Between {
  Ring ring;
  Level1 algo;
  int k, per_leaf;
  double alpha, bw, hbm, spine_alpha, oversubscription;

  /// How a step pairs the servers: the extra servers with the first ones, XOR partners d apart
  /// among the first 2^⌊log2 k⌋, or every server with the one d ahead around the k.
  enum class Pairs { Fold, Xor, Shift };
  struct Step {
    Pairs pairs;
    int d;
    double size;  ///< bytes each sender sends
    bool back;    ///< a fold in the all-gather: the result goes back to the extra servers
  };
  /// The steps of a half on `bytes` per server; `reduce` (the reduce-scatter) only turns a fold's
  /// direction: the two halves run the same steps in opposite orders, and a half's time does not
  /// depend on their order.
  std::vector<Step> steps(double bytes, bool reduce) const {
    std::vector<Step> s;
    if (k <= 1) return s;
    if (algo == Level1::HalvingDoubling) {
      const int p2 = pow2_floor(k);
      if (p2 < k) s.push_back({Pairs::Fold, 0, bytes, !reduce});
      double size = bytes;
      for (int d = p2 / 2; d >= 1; d /= 2) s.push_back({Pairs::Xor, d, size /= 2, false});
      return s;
    }
    // Bruck's step i moves min(2^i, k − 2^i) of the k pieces; NHR gives step i step j−1−i's.
    const int j = log2_ceil(k);
    for (int i = 0; i < j; ++i) {
      const int t = algo == Level1::Nb ? i : j - 1 - i;
      s.push_back({Pairs::Shift, 1 << i, std::min(1 << t, k - (1 << t)) * bytes / k, false});
    }
    return s;
  }
  /// Servers that send in a step.
  int senders(const Step& st) const {
    return st.pairs == Pairs::Fold ? k - pow2_floor(k) : st.pairs == Pairs::Xor ? pow2_floor(k) : k;
  }
  /// A step's latency and its rate as a fraction of a port's.
  void crossing(const Step& st, double& latency, double& rate) const {
    std::vector<int> out((static_cast<std::size_t>(k) + per_leaf - 1) / per_leaf, 0);  // per leaf: servers sending out
    const int p2 = pow2_floor(k), n = senders(st);
    for (int s = 0; s < n; ++s) {
      int from = s, to = 0;
      switch (st.pairs) {
        case Pairs::Fold:
          from = p2 + s;
          to = s;
          break;
        case Pairs::Xor:
          to = s ^ st.d;
          break;
        case Pairs::Shift:
          to = (s + st.d) % k;
          break;
      }
      if (st.back) std::swap(from, to);
      if (from / per_leaf != to / per_leaf) ++out[static_cast<std::size_t>(from / per_leaf)];
    }
    const int most = *std::max_element(out.begin(), out.end());
    latency = alpha + (most > 0 ? spine_alpha : 0.0);
    rate = most > 0 ? std::min(1.0, per_leaf / (oversubscription * most)) : 1.0;
  }
  bool on_ring() const { return algo == Level1::Ring || algo == Level1::Pipeline; }
  /// A half (reduce-scatter or all-gather) of `bytes` per server: its time, and of it the
  /// transfers at their rates (`wire`). A step takes its latency, its size at its rate, and in
  /// the reduce-scatter the reduction of what it received (two pieces read, one written).
  double half(double bytes, bool reduce, double* wire = nullptr) const {
    if (on_ring()) {
      if (wire) *wire = ring.half_wire(bytes);
      return ring.half(bytes, reduce);
    }
    double t = 0, w = 0;
    for (const Step& st : steps(bytes, reduce)) {
      double latency = 0, rate = 1;
      crossing(st, latency, rate);
      const double x = st.size / (bw * rate);
      t += latency + x + (reduce ? 3 * st.size / hbm : 0.0);
      w += x;
    }
    if (wire) *wire = w;
    return t;
  }
  double half_wire(double bytes) const {
    double w = 0;
    half(bytes, false, &w);
    return w;
  }
  /// The HBM bytes of one member: as the ring's, each step reads what it sends and writes what
  /// it receives, a reduction reads two pieces and writes one.
  double half_hbm(double bytes, bool reduce) const {
    if (on_ring()) return ring.half_hbm(bytes, reduce);
    double sent = 0;
    for (const Step& st : steps(bytes, reduce)) sent += st.size;
    return sent * (reduce ? 5 : 2);
  }
  /// Bytes all of one local rank's ports send in a half, summed over the k servers.
  double port_bytes(double bytes) const {
    if (k <= 1) return 0;
    if (on_ring()) return (k - 1) * bytes;  // k ports, (k-1)/k of the bytes each
    double sent = 0;
    for (const Step& st : steps(bytes, true)) sent += senders(st) * st.size;
    return sent;
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
  return cost(cfg, kind, CollectiveSpan{servers, per_server / g, g, leaves_of(cfg, servers)}, bytes, hbm_gbps);
}

CollectiveSpan Hccl::span_of(const HcclConfig& cfg, const std::vector<int>& members, int per_server) {
  const int g = network_size(cfg, per_server);
  const auto per_leaf = static_cast<int>(std::max<std::int64_t>(1, cfg.servers_per_leaf));
  std::vector<int> servers, networks, leaves;
  for (int r : members) {
    if (std::find(servers.begin(), servers.end(), r / per_server) == servers.end()) servers.push_back(r / per_server);
    if (std::find(networks.begin(), networks.end(), r / g) == networks.end()) networks.push_back(r / g);
    const int leaf = r / per_server / per_leaf;
    if (std::find(leaves.begin(), leaves.end(), leaf) == leaves.end()) leaves.push_back(leaf);
  }
  const int n = static_cast<int>(members.size()), k = static_cast<int>(servers.size()),
            q = static_cast<int>(networks.size());
  return {k, q / k, n / q, static_cast<int>(leaves.size())};
}

namespace {
using Part = CollectiveCost::Part;

/// A half (reduce-scatter or all-gather) on one of a server's rings: `x` bytes on HCCS, or between
/// its networks over PCIe.
Part on_ring(const char* what, const Ring& r, double x, bool reduce, bool pcie) {
  return {what, false, r.half(x, reduce), pcie, r.half_hbm(x, reduce), r.half_wire(x)};
}

/// The phases of a hierarchical AllReduce, ReduceScatter or AllGather of `bytes` on servers of m
/// devices in HCCS networks of g: each network's ring, the ring of a server's networks over PCIe,
/// the servers' level 1 on the S/m pieces (over each device's RoCE port), in the kind's order.
std::vector<Part> hierarchical(Collective kind, const Ring& intra, const Ring& cross, const Between& between, double g,
                               double m, double bytes) {
  const double x = bytes / m;  // what each local rank carries between servers
  const Part rs_roce{"reduce-scatter",    true, between.half(x, true), false, between.half_hbm(x, true),
                     between.half_wire(x)};
  const Part ag_roce{"all-gather",        true, between.half(x, false), false, between.half_hbm(x, false),
                     between.half_wire(x)};
  const std::vector<Part> rs{on_ring("reduce-scatter", intra, bytes, true, false),
                             on_ring("reduce-scatter", cross, bytes / g, true, true)};
  const std::vector<Part> ag{on_ring("all-gather", cross, bytes / g, false, true),
                             on_ring("all-gather", intra, bytes, false, false)};
  switch (kind) {
    case Collective::AllReduce:
      return {rs[0],
              rs[1],
              {"all-reduce", true, rs_roce.seconds + ag_roce.seconds, false, rs_roce.hbm_bytes + ag_roce.hbm_bytes,
               rs_roce.wire_s + ag_roce.wire_s},
              ag[0],
              ag[1]};
    case Collective::ReduceScatter:
      return {rs[0], rs[1], rs_roce};
    case Collective::AllGather:
      return {ag_roce, ag[0], ag[1]};
    default:
      throw std::logic_error("Hccl: no hierarchical algorithm for this collective");
  }
}

/// Chunks HCCL's pipeline may cut a collective into.
constexpr int kMaxChunks = 64;

/// HCCL's pipeline: the hierarchical phases on c chunks of the data, a chunk's RoCE phase
/// overlapping the server rings' phases of the chunks beside it. Three stages — the phases before
/// the RoCE one, it, the phases after — take a + b + z on a chunk, and c chunks take
/// a + b + z + (c−1)·max(a, b, z), with c from 1 to kMaxChunks the one of least time (the fewest
/// on a tie). The parts: the first chunk's phases before its RoCE phase, the other chunks in the
/// slowest stage's time (on the RoCE ports if that is the RoCE stage, else on HCCS), the last
/// chunk's RoCE phase and the phases after it.
std::vector<Part> pipelined(Collective kind, const Ring& intra, const Ring& cross, const Between& between, double g,
                            double m, double bytes) {
  std::vector<Part> best;
  double best_s = INFINITY;
  for (int c = 1; c <= kMaxChunks; ++c) {
    const std::vector<Part> chunk = hierarchical(kind, intra, cross, between, g, m, bytes / c);
    double stage[3] = {0, 0, 0}, wire[3] = {0, 0, 0}, hbm = 0;
    int at = 0;
    for (const Part& p : chunk) {
      if (p.roce) at = 1;
      stage[at] += p.seconds;
      wire[at] += p.wire_s;
      hbm += p.hbm_bytes;
      if (p.roce) at = 2;
    }
    const int slow = static_cast<int>(std::max_element(stage, stage + 3) - stage);
    const double s = stage[0] + stage[1] + stage[2] + (c - 1) * stage[slow];
    if (s >= best_s) continue;
    best_s = s;
    best.clear();
    for (const Part& p : chunk) {
      if (p.roce)
        best.push_back({"pipelined", slow == 1, (c - 1) * stage[slow], false, (c - 1) * hbm, (c - 1) * wire[slow]});
      best.push_back(p);
    }
  }
  return best;
}
}  // namespace

std::string Hccl::algorithm(const HcclConfig& cfg, Collective kind, const CollectiveSpan& span, double bytes,
                            double hbm_gbps) {
  if (cfg.inter_server_algorithm != "auto") return cfg.inter_server_algorithm;
  const int k = span.servers;
  const bool chosen =
      kind == Collective::AllReduce || kind == Collective::ReduceScatter || kind == Collective::AllGather;
  if (k <= 1 || !chosen) return "ring";  // no level 1, or one that is always the ring
  if (cfg.auto_rule == "power-of-two-servers") return (k & (k - 1)) == 0 ? "halving-doubling" : "ring";
  if (cfg.auto_rule != "least-time") throw std::logic_error("Hccl: no rule '" + cfg.auto_rule + "' for auto");
  HcclConfig one = cfg;
  std::string best;
  double best_s = INFINITY;
  for (const char* name : HcclConfig::kAlgorithms) {
    one.inter_server_algorithm = name;
    const double s = cost(one, kind, span, bytes, hbm_gbps).seconds;
    if (s < best_s) {
      best_s = s;
      best = name;
    }
  }
  return best;
}

CollectiveCost Hccl::cost(const HcclConfig& cfg, Collective kind, const CollectiveSpan& span, double bytes,
                          double hbm_gbps) {
  // g devices on each HCCS network, p networks per server (joined through PCIe), k servers.
  const double g = span.devices, p = span.networks, k = std::max(1, span.servers), m = g * p;
  const Ring intra{g, cfg.step_latency_us * 1e-6, cfg.link_bandwidth_gbps * 1e9, hbm_gbps * 1e9};
  const Ring cross{p, cfg.step_latency_us * 1e-6, cfg.pcie_bandwidth_gbps * 1e9, hbm_gbps * 1e9};
  // Between servers on several leaves, a ring step's hop between leaves crosses a spine and the far
  // leaf (two more switches), and the leaf's uplinks share their bandwidth among the rings.
  const bool spine = span.leaves > 1;
  const Ring inter{k, (cfg.roce_step_latency_us + (spine ? 2 * cfg.switch_latency_us : 0.0)) * 1e-6,
                   cfg.roce_bandwidth_gbps * 1e9 * (spine ? spine_rate(cfg) : 1.0), hbm_gbps * 1e9};
  // The AllReduce, ReduceScatter and AllGather halves between servers, by hccl.inter_server_algorithm.
  const Level1 algo = level1(algorithm(cfg, kind, span, bytes, hbm_gbps));
  const Between between{inter,
                        algo,
                        static_cast<int>(k),
                        static_cast<int>(std::max<std::int64_t>(1, cfg.servers_per_leaf)),
                        cfg.roce_step_latency_us * 1e-6,
                        cfg.roce_bandwidth_gbps * 1e9,
                        hbm_gbps * 1e9,
                        2 * cfg.switch_latency_us * 1e-6,
                        std::max(1.0, cfg.oversubscription)};
  CollectiveCost c;
  auto part = [&](const char* what, bool roce, double s, double hbm, double wire, bool pcie = false) {
    if (s > 0) c.parts.push_back({what, roce, s, pcie, hbm, std::min(wire, s)});
    c.seconds += s;
  };
  // Bytes one ring link carries in a half (reduce-scatter or all-gather) of `bytes` on n devices.
  auto half_bytes = [](double n, double s) { return n > 1 ? (n - 1) * s / n : 0.0; };
  const double links = g > 1 ? m * k : 0, ports = k > 1 ? m * k : 0, paths = p > 1 ? m * k : 0;
  switch (kind) {
    case Collective::AllReduce:
    case Collective::ReduceScatter:
    case Collective::AllGather: {
      const bool pipeline = algo == Level1::Pipeline && k > 1 && m > 1;
      for (const Part& q : (pipeline ? pipelined : hierarchical)(kind, intra, cross, between, g, m, bytes))
        part(q.what, q.roce, q.seconds, q.hbm_bytes, q.wire_s, q.pcie);
      // An AllReduce is both halves; each half puts its ring's share on every link and port.
      const double halves = kind == Collective::AllReduce ? 2 : 1;
      c.hccs_bytes = links * halves * half_bytes(g, bytes);
      c.pcie_bytes = paths * halves * half_bytes(p, bytes / g);
      c.roce_bytes = k > 1 ? m * halves * between.port_bytes(bytes / m) : 0.0;
      break;
    }
    case Collective::AllToAll:
      // A pairwise exchange: N-1 rounds, each sending one N-th of the buffer to one peer — the
      // time and link bytes of an all-gather half, across servers and networks for the pieces
      // that leave one.
      part("all-to-all", true, inter.half(bytes / m, false), inter.half_hbm(bytes / m, false),
           inter.half_wire(bytes / m));
      part("all-to-all", false, cross.half(bytes / g, false), cross.half_hbm(bytes / g, false),
           cross.half_wire(bytes / g), true);
      part("all-to-all", false, intra.half(bytes, false), intra.half_hbm(bytes, false), intra.half_wire(bytes));
      c.hccs_bytes = links * half_bytes(g, bytes);
      c.pcie_bytes = paths * half_bytes(p, bytes / g);
      c.roce_bytes = ports * half_bytes(k, bytes / m);
      break;
    case Collective::SendRecv: {
      // Two ranks exchange up to `bytes` each way at once (full duplex): one step's latency and
      // the transfer on the link class between them — HCCS within a network, PCIe between a
      // server's networks, RoCE (through the spine on different leaves) between servers. The
      // traffic counted is one direction's `bytes` (a link's direction, as the rings' counts),
      // read from the sender's HBM and written to the receiver's.
      const bool roce = k > 1, pcie = !roce && p > 1;
      const Ring& on = roce ? inter : pcie ? cross : intra;
      part("send-receive", roce, on.alpha + bytes / on.bw, bytes, bytes / on.bw, pcie);
      (roce ? c.roce_bytes : pcie ? c.pcie_bytes : c.hccs_bytes) = bytes;
      break;
    }
    case Collective::Broadcast:
      // The root's RoCE ring to the other servers (k-1 ports send S), then on every server a
      // ring of its networks over PCIe (p-1 paths carry S), then every network's ring (g-1 links
      // each carry S).
      part("broadcast", true, inter.broadcast(bytes), inter.broadcast_hbm(bytes), inter.broadcast_wire(bytes));
      part("broadcast", false, cross.broadcast(bytes), cross.broadcast_hbm(bytes), cross.broadcast_wire(bytes), true);
      part("broadcast", false, intra.broadcast(bytes), intra.broadcast_hbm(bytes), intra.broadcast_wire(bytes));
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

void Hccl::trace_collective(const Running& r) {
  sc_core::sc_time at = r.start;
  for (std::size_t i = 0; i < r.cost.parts.size() && i < r.part_ends.size(); ++i) {
    const auto& p = r.cost.parts[i];
    const sc_core::sc_time end = r.part_ends[i];
    const std::string name = std::string(hostif::collective_name(r.kind)) + " " + p.what +
                             (p.pcie ? " over PCIe " : " ") + std::to_string(r.bytes) + " B";
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
  const int weight = m_stands_for[static_cast<std::size_t>(rank)];
  if ((in.arrived += weight) == m_ranks) {
    auto [known, fresh] = m_cluster_costs.try_emplace({static_cast<int>(kind), bytes});
    if (fresh) known->second = cost(m_cfg, kind, servers(), m_per_server, static_cast<double>(bytes), m_hbm_gbps);
    const CollectiveCost& c = known->second;
    account(kind, bytes, c);
    draw(c, {});
    start(c, {}, kind, bytes, &in.done);
  }
  sc_core::wait(in.done);
  if ((in.left += weight) == m_ranks) m_open.erase(seq);
}

void Hccl::set_stands_for(int rank, int ranks) {
  if (rank < 0 || rank >= m_ranks || ranks < 1)
    throw std::logic_error("Hccl: bad stand-in for rank " + std::to_string(rank));
  m_stands_for[static_cast<std::size_t>(rank)] = ranks;
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
    case Collective::SendRecv:
      ++m_exchanges;
      break;
  }
  m_hccs_bytes += c.hccs_bytes;
  m_roce_bytes += c.roce_bytes;
  m_pcie_bytes += c.pcie_bytes;
  for (const auto& p : c.parts) (p.roce ? m_roce_busy_s : p.pcie ? m_pcie_busy_s : m_hccs_busy_s) += p.seconds;
}

// ---- ports shared by collectives in flight ----

std::vector<double> max_min_rates(const std::vector<std::vector<std::int64_t>>& ports) {
  return max_min_rates(ports, std::vector<double>(ports.size(), 1.0));
}

std::vector<double> max_min_rates(const std::vector<std::vector<std::int64_t>>& ports,
                                  const std::vector<double>& caps) {
  const std::size_t n = ports.size();
  std::vector<double> rate(n, 0.0);
  std::vector<bool> frozen(n, false);
  std::map<std::int64_t, double> room;  // each port's capacity left
  for (const auto& f : ports)
    for (std::int64_t p : f) room.emplace(p, 1.0);
  std::size_t left = 0;
  for (std::size_t f = 0; f < n; ++f) {
    frozen[f] = ports[f].empty();  // crosses nothing: its full rate
    if (frozen[f])
      rate[f] = caps[f];
    else
      ++left;
  }
  std::map<std::int64_t, int> users;
  while (left > 0) {
    users.clear();
    for (std::size_t f = 0; f < n; ++f)
      if (!frozen[f])
        for (std::int64_t p : ports[f]) ++users[p];
    double step = INFINITY;
    for (std::size_t f = 0; f < n; ++f)
      if (!frozen[f]) step = std::min(step, caps[f] - rate[f]);
    for (const auto& [p, k] : users) step = std::min(step, room[p] / k);
    step = std::max(step, 0.0);
    for (std::size_t f = 0; f < n; ++f)
      if (!frozen[f]) rate[f] += step;
    for (const auto& [p, k] : users) room[p] -= step * k;
    for (std::size_t f = 0; f < n; ++f) {
      if (frozen[f]) continue;
      bool full = rate[f] >= caps[f] - 1e-12;
      for (std::int64_t p : ports[f]) full = full || room[p] <= 1e-12;
      if (full) {
        frozen[f] = true;
        --left;
      }
    }
  }
  return rate;
}

namespace {
/// A segment's time still to run below this is rounding: it has ended.
constexpr double kEndSlack = 1.5e-12;
}  // namespace

double Hccl::segment_s(const Running& r, std::size_t seg) const {
  const CollectiveCost::Part& p = r.cost.parts[seg / 2];
  return seg % 2 == 1 ? p.wire_s : p.seconds - p.wire_s;
}

void Hccl::seek(Running& r) {
  double elapsed = (sc_core::sc_time_stamp() - r.start).to_seconds();
  const std::size_t segs = 2 * r.cost.parts.size();
  sc_core::sc_time at = r.start;
  r.part_ends.clear();
  for (r.seg = 0; r.seg < segs; ++r.seg) {
    const double s = segment_s(r, r.seg);
    if (elapsed < s) break;
    elapsed -= s;
    at += sim::seconds(s);
    if (r.seg % 2 == 1) r.part_ends.push_back(at);
  }
  r.left = r.seg < segs ? segment_s(r, r.seg) - elapsed : 0.0;
}

void Hccl::start(const CollectiveCost& c, std::vector<int> members, Collective kind, std::int64_t bytes,
                 sc_core::sc_event* done) {
  advance();
  if (members.empty()) {
    members.resize(static_cast<std::size_t>(m_ranks));
    for (int r = 0; r < m_ranks; ++r) members[static_cast<std::size_t>(r)] = r;
  }
  auto run = std::make_unique<Running>();
  run->cost = c;
  run->kind = kind;
  run->bytes = bytes;
  run->done = done;
  run->start = sc_core::sc_time_stamp();
  run->alone_end = run->start + sim::seconds(c.seconds);
  run->traced = m_trace && (!m_window || m_window->active());
  done->notify(sim::seconds(c.seconds));  // its end alone, unless another shares a port with it
  // Does it share a member with a collective in flight, or a member's PCIe link with its busy
  // DMA? Then they are tracked segment by segment.
  bool meets = false;
  for (int r : members) meets = meets || m_in_flight[static_cast<std::size_t>(r)] > 0;
  run->members = members;
  const bool dma = meets_dma(*run);
  if (meets) {
    std::vector<bool> mine(static_cast<std::size_t>(m_ranks), false);
    for (int r : members) mine[static_cast<std::size_t>(r)] = true;
    for (auto& o : m_running) {
      if (o->watched) continue;
      bool shares = false;
      for (int r : o->members) shares = shares || mine[static_cast<std::size_t>(r)];
      if (!shares) continue;
      o->watched = true;
      seek(*o);
    }
  }
  if (meets || dma) {
    run->watched = true;
    seek(*run);
  }
  for (int r : members) ++m_in_flight[static_cast<std::size_t>(r)];
  m_running.push_back(std::move(run));
  if (meets || dma) {
    reallocate();
    schedule();
  }
}

bool Hccl::meets_dma(const Running& r) const {
  if (!over_pcie(r)) return false;
  for (int m : r.members)
    if (dma_demand(static_cast<std::size_t>(m)) > 0) return true;
  return false;
}

double Hccl::dma_demand(std::size_t rank) const {
  double d = 0;
  for (const auto& f : m_dma_demand[rank]) d = std::max(d, f());
  return std::min(d, 1.0);
}

void Hccl::add_pcie_dma(int rank, std::function<double()> demand) {
  m_dma_demand.at(static_cast<std::size_t>(rank)).push_back(std::move(demand));
}

void Hccl::pcie_dma_changed(int rank) {
  // The collectives with a phase over this rank's link are tracked segment by segment from now.
  advance();
  const bool drawing = dma_demand(static_cast<std::size_t>(rank)) > 0;
  for (auto& r : m_running) {
    if (!drawing) break;
    if (r->watched || std::find(r->members.begin(), r->members.end(), rank) == r->members.end()) continue;
    if (!over_pcie(*r)) continue;
    r->watched = true;
    seek(*r);
  }
  reallocate();  // the rates, and the link's part the collectives take
  schedule();
}

void Hccl::advance() {
  const sc_core::sc_time now = sc_core::sc_time_stamp();
  const double dt = (now - m_last).to_seconds();
  m_last = now;
  for (auto& r : m_running) {
    if (!r->watched) continue;
    const std::size_t segs = 2 * r->cost.parts.size();
    if (r->seg >= segs) continue;
    const bool wire = r->seg % 2 == 1;
    r->left -= wire ? dt * r->rate : dt;
    // The segments that end now (a tick lands on one end; zero-length ones follow it).
    while (r->seg < segs && r->left / (r->seg % 2 == 1 ? r->rate : 1.0) <= kEndSlack) {
      if (r->seg % 2 == 1) r->part_ends.push_back(now);
      if (++r->seg < segs) r->left = segment_s(*r, r->seg);
    }
  }
  // Drop the finished: tracked ones whose segments have all run, untracked ones past their end.
  for (std::size_t i = 0; i < m_running.size();) {
    Running& r = *m_running[i];
    // One never slowed ends at its time alone (its segments, rounded to the picosecond, may
    // trail it); its rank threads have then left.
    const bool over = r.shared ? r.seg >= 2 * r.cost.parts.size() : r.alone_end <= now;
    if (!over) {
      ++i;
      continue;
    }
    finish(r, r.shared ? now : r.alone_end);
    for (int m : r.members) --m_in_flight[static_cast<std::size_t>(m)];
    m_running.erase(m_running.begin() + static_cast<std::ptrdiff_t>(i));
  }
}

void Hccl::finish(Running& r, const sc_core::sc_time& end) {
  if (r.shared) {
    r.done->notify(sc_core::SC_ZERO_TIME);
    const double lost = (end - r.alone_end).to_seconds();
    ++m_shared;
    m_shared_lost_s += lost;
    if (r.kind == Collective::AllReduce) m_busy_s += lost;
    // The part that ran longer carries the difference on its link class.
    for (std::size_t p = 0; p < r.cost.parts.size() && p < r.part_ends.size(); ++p) {
      const sc_core::sc_time from = p == 0 ? r.start : r.part_ends[p - 1];
      const double took = (r.part_ends[p] - from).to_seconds() - r.cost.parts[p].seconds;
      const auto& part = r.cost.parts[p];
      (part.roce ? m_roce_busy_s : part.pcie ? m_pcie_busy_s : m_hccs_busy_s) += took;
    }
  }
  if (!r.traced || !m_trace) return;
  if (!r.shared) {  // its parts as they ran alone
    r.part_ends.clear();
    sc_core::sc_time at = r.start;
    for (const auto& p : r.cost.parts) r.part_ends.push_back(at += sim::seconds(p.seconds));
  }
  trace_collective(r);
}

void Hccl::reallocate() {
  std::vector<Running*> flows;
  std::vector<std::vector<std::int64_t>> ports;
  for (auto& r : m_running) {
    if (!r->watched || r->seg >= 2 * r->cost.parts.size()) continue;
    if (r->seg % 2 == 0) continue;  // latency or reduction: no port
    const auto& part = r->cost.parts[r->seg / 2];
    const std::int64_t cls = part.roce ? 2 : part.pcie ? 1 : 0;
    std::vector<std::int64_t> p;
    p.reserve(r->members.size());
    for (int m : r->members) p.push_back(cls * m_ranks + m);
    flows.push_back(r.get());
    ports.push_back(std::move(p));
  }
  // A rank's DMA is one more flow on its PCIe port (the device's own link), at most its demand.
  std::vector<double> caps(ports.size(), 1.0);
  for (std::size_t m = 0; m < m_dma_demand.size(); ++m) {
    const double d = m_dma_demand[m].empty() ? 0.0 : dma_demand(m);
    if (d <= 0) continue;
    ports.push_back({m_ranks + static_cast<std::int64_t>(m)});
    caps.push_back(d);
  }
  const std::vector<double> rate = max_min_rates(ports, caps);
  std::vector<double> taken(m_pcie_taken.size(), 0.0);
  for (std::size_t f = 0; f < flows.size(); ++f) {
    Running& r = *flows[f];
    r.rate = rate[f];
    if (r.rate < 1.0 - 1e-12 && !r.shared) {
      r.shared = true;
      r.done->cancel();  // it ends when its segments have run
    }
    if (r.cost.parts[r.seg / 2].pcie)
      for (int m : r.members) taken[static_cast<std::size_t>(m)] += r.rate;
  }
  for (std::size_t m = 0; m < taken.size(); ++m)
    if (taken[m] != m_pcie_taken[m]) {
      m_pcie_taken[m] = taken[m];
      m_pcie_changed[m]->notify(sc_core::SC_ZERO_TIME);
    }
}

void Hccl::schedule() {
  double next = INFINITY;
  for (const auto& r : m_running) {
    if (!r->watched || r->seg >= 2 * r->cost.parts.size()) continue;
    next = std::min(next, r->seg % 2 == 1 ? r->left / r->rate : r->left);
  }
  m_tick.cancel();
  if (std::isfinite(next)) m_tick.notify(sim::seconds(std::max(next, 0.0)));
}

void Hccl::on_tick() {
  advance();
  reallocate();
  schedule();
}

void Hccl::flush_trace() {
  for (auto& r : m_running)
    if (!r->shared) finish(*r, r->alone_end);
}

std::vector<int> Hccl::members(int rank, const hostif::CommGroup& g) const {
  if (g.peer != 0) {
    if (rank + g.peer < 0 || rank + g.peer >= m_ranks)
      throw std::logic_error("Hccl: rank " + std::to_string(rank) + " has no peer " + std::to_string(g.peer) +
                             " ranks away among " + std::to_string(m_ranks));
    return g.members(rank, m_ranks);
  }
  if (!g.whole() && (g.size < 1 || g.stride < 1 || m_ranks % (g.size * g.stride) != 0))
    throw std::logic_error("Hccl: a group of " + std::to_string(g.size) + " ranks " + std::to_string(g.stride) +
                           " apart does not tile " + std::to_string(m_ranks) + " ranks");
  return g.members(rank, m_ranks);
}

CollectiveCost Hccl::group_cost(Collective kind, const std::vector<int>& members, double bytes) const {
  return cost(m_cfg, kind, span_of(m_cfg, members, m_per_server), bytes, m_hbm_gbps);
}

void Hccl::collective(int rank, Collective kind, std::int64_t bytes, const hostif::CommGroup& group) {
  // A group of every rank in order is the cluster (servers alike may stand for each other).
  if (group.whole() || (group.size == m_ranks && group.stride == 1)) return collective(rank, kind, bytes);
  if (rank < 0 || rank >= m_ranks) throw std::logic_error("Hccl: no rank " + std::to_string(rank));
  const std::vector<int> m = members(rank, group);
  if (m.size() == 1) return;  // a group of one: nothing to exchange
  if (m_stands_for[static_cast<std::size_t>(rank)] != 1)
    throw std::logic_error("Hccl: a group collective needs every member simulated");
  const std::string key =
      group.peer != 0 ? "pair@" + std::to_string(m[0]) + "-" + std::to_string(m[1])
                      : std::to_string(group.size) + "x" + std::to_string(group.stride) + "@" + std::to_string(m[0]);
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
    start(c, m, kind, bytes, &in.done);
  }
  sc_core::wait(in.done);
  if (++in.left == n) m_group_open.erase({key, seq});
}

}  // namespace ascendsim::aicpu
