#include "runtime/functional_cluster.h"

#include <stdexcept>

#include "hostif/task.h"
#include "sim/core/error.h"
#include "workloads/kernels.h"
#include "workloads/op_registry.h"

namespace ascendsim::runtime {

using workloads::TensorId;

namespace {

/// A row-major tensor seen as [outer, axis, inner].
struct Axis {
  std::int64_t outer = 1, len = 1, inner = 1;
  Axis(const workloads::Shape& s, std::int64_t axis) {
    for (std::int64_t d = 0; d < static_cast<std::int64_t>(s.size()); ++d)
      (d < axis ? outer : d == axis ? len : inner) *= s[static_cast<std::size_t>(d)];
  }
};

}  // namespace

ClusterValues::ClusterValues(const workloads::Workload& local, std::int64_t ranks, const FunctionalOptions& opt,
                             const std::string& dataset_dir, std::int64_t steps_per_epoch)
    : m_local(local),
      m_ranks(ranks),
      m_whole(*local.whole, opt, dataset_dir, steps_per_epoch),
      m_values(static_cast<std::size_t>(ranks)),
      m_state(static_cast<std::size_t>(ranks)) {
  const auto& par = local.parallel;
  std::int64_t params = 0;
  for (const auto& t : local.graph.tensors()) params += t.role == workloads::TensorRole::Parameter;
  if (par.gradient_group_size != 1 && static_cast<std::int64_t>(par.unreduced.size()) < params)
    throw sim::InputError("functional", "functional",
                          "functional mode computes semi-auto runs whose ranks share a batch; with the batch cut (" +
                              std::to_string(par.data_shards) +
                              " pieces) the gradients' averaging is not computed — cut the image, not the batch");
  for (const auto& op : local.graph.ops())
    if (!op.def->compute && op.def->collective == workloads::OpDef::Collective::None && op.type != "Slice")
      throw sim::InputError("functional", "functional",
                            local.name + " cannot be computed in functional mode: no kernel for " + op.type);
  // Each rank's tensors: its pieces of the whole network's weights and state, the rest zero (or,
  // where shapes agree, the whole network's value: hyper-parameters, scalars).
  const auto& whole = *local.whole;
  std::map<std::string, TensorId> by_name;
  for (std::size_t i = 0; i < whole.graph.tensors().size(); ++i)
    by_name[whole.graph.tensors()[i].name] = static_cast<TensorId>(i);
  const auto& plan = *local.shard_plan;
  // Each rank's piece of every batch tensor, once (every step scatters a batch by them).
  for (auto t : whole.batch_inputs) {
    const auto& piece = plan.pieces.at(whole.graph.tensor(t).name);
    auto& per_rank = m_input_pieces.emplace_back();
    for (std::int64_t r = 0; r < ranks; ++r) per_rank.push_back(workloads::piece_indices(piece, r));
  }
  for (std::int64_t r = 0; r < ranks; ++r) {
    auto& v = m_values[static_cast<std::size_t>(r)];
    v.resize(local.graph.tensors().size());
    m_state[static_cast<std::size_t>(r)].resize(local.graph.ops().size());
    for (std::size_t i = 0; i < local.graph.tensors().size(); ++i) {
      const auto& t = local.graph.tensors()[i];
      v[i].assign(static_cast<std::size_t>(t.elements()), 0.0f);
      if (!workloads::is_persistent(t.role)) continue;
      const auto it = by_name.find(t.name);
      if (it == by_name.end()) continue;
      const auto& src = m_whole.value(it->second);
      if (const auto p = plan.pieces.find(t.name); p != plan.pieces.end()) {
        const auto idx = workloads::piece_indices(p->second, r);
        for (std::size_t e = 0; e < idx.size(); ++e) v[i][e] = src[static_cast<std::size_t>(idx[e])];
      } else if (src.size() == v[i].size()) {
        v[i] = src;
      }
    }
  }
}

void ClusterValues::scatter_inputs() {
  const auto& whole = *m_local.whole;
  for (std::size_t k = 0; k < m_local.batch_inputs.size(); ++k) {
    const auto& src = m_whole.value(whole.batch_inputs[k]);
    for (std::int64_t r = 0; r < m_ranks; ++r) {
      const auto& idx = m_input_pieces[k][static_cast<std::size_t>(r)];
      auto& dst = m_values[static_cast<std::size_t>(r)][static_cast<std::size_t>(m_local.batch_inputs[k])];
      for (std::size_t e = 0; e < idx.size(); ++e) dst[e] = src[static_cast<std::size_t>(idx[e])];
    }
  }
}

void ClusterValues::copy_batch_to_device() {
  m_whole.copy_batch_to_device();
  scatter_inputs();
}

void ClusterValues::send_batch_to_queue() { m_whole.send_batch_to_queue(); }

void ClusterValues::get_next() {
  m_whole.get_next();
  scatter_inputs();
}

void ClusterValues::collective(const workloads::Op& op) {
  using C = workloads::OpDef::Collective;
  const auto& g = m_local.graph;
  const auto in = static_cast<std::size_t>(op.inputs[0]), out = static_cast<std::size_t>(op.outputs[0]);
  const std::int64_t size = op.group_size, stride = op.group_stride;
  const Axis a_in(g.tensor(op.inputs[0]).shape, op.axis), a_out(g.tensor(op.outputs[0]).shape, op.axis);
  std::vector<std::vector<float>> result(static_cast<std::size_t>(m_ranks));
  for (std::int64_t r = 0; r < m_ranks; ++r) {
    const auto members = hostif::CommGroup{static_cast<std::int32_t>(size), static_cast<std::int32_t>(stride)}.members(
        static_cast<int>(r), static_cast<int>(m_ranks));
    const std::int64_t piece = (r / stride) % size;
    auto& res = result[static_cast<std::size_t>(r)];
    res.assign(static_cast<std::size_t>(g.tensor(op.outputs[0]).elements()), 0.0f);
    const auto& mine = m_values[static_cast<std::size_t>(r)][in];
    if (op.def->collective == C::AllReduce || op.def->collective == C::ReduceScatter) {
      std::vector<float> sum(mine.size(), 0.0f);
      for (auto m : members) {
        const auto& x = m_values[static_cast<std::size_t>(m)][in];
        for (std::size_t e = 0; e < sum.size(); ++e) sum[e] += x[e];
      }
      if (op.def->collective == C::AllReduce) {
        res = sum;
        continue;
      }
      for (std::int64_t o = 0; o < a_out.outer; ++o)  // the rank's piece of the sum
        for (std::int64_t l = 0; l < a_out.len; ++l)
          for (std::int64_t i = 0; i < a_out.inner; ++i)
            res[static_cast<std::size_t>((o * a_out.len + l) * a_out.inner + i)] =
                sum[static_cast<std::size_t>((o * a_in.len + piece * a_out.len + l) * a_in.inner + i)];
    } else if (op.def->collective == C::AllToAll) {
      // From member k: its piece (this rank's, along `axis`), placed k-th along `concat_axis`.
      const auto& gs = g.tensor(op.inputs[0]).shape;
      const auto& os = g.tensor(op.outputs[0]).shape;
      const std::size_t n = gs.size();
      std::vector<std::int64_t> idx(n, 0);
      const std::int64_t count = static_cast<std::int64_t>(res.size());
      for (std::int64_t e = 0; e < count; ++e) {
        std::vector<std::int64_t> src = idx;  // output index -> (member, input index)
        const auto ca = static_cast<std::size_t>(op.concat_axis), sa = static_cast<std::size_t>(op.axis);
        const std::int64_t member = idx[ca] / gs[ca];
        src[ca] = idx[ca] % gs[ca];
        src[sa] = piece * os[sa] + idx[sa];
        std::int64_t lin = 0;
        for (std::size_t d = 0; d < n; ++d) lin = lin * gs[d] + src[d];
        res[static_cast<std::size_t>(e)] = m_values[static_cast<std::size_t>(members[static_cast<std::size_t>(member)])]
                                                   [in][static_cast<std::size_t>(lin)];
        for (std::size_t d = n; d-- > 0;) {
          if (++idx[d] < os[d]) break;
          idx[d] = 0;
        }
      }
    } else if (op.def->collective == C::AllGather) {
      for (std::size_t k = 0; k < members.size(); ++k) {
        const auto& x = m_values[static_cast<std::size_t>(members[k])][in];
        for (std::int64_t o = 0; o < a_in.outer; ++o)
          for (std::int64_t l = 0; l < a_in.len; ++l)
            for (std::int64_t i = 0; i < a_in.inner; ++i)
              res[static_cast<std::size_t>((o * a_out.len + static_cast<std::int64_t>(k) * a_in.len + l) * a_in.inner +
                                           i)] = x[static_cast<std::size_t>((o * a_in.len + l) * a_in.inner + i)];
      }
    } else {  // Slice: the rank's piece of its own whole tensor
      for (std::int64_t o = 0; o < a_out.outer; ++o)
        for (std::int64_t l = 0; l < a_out.len; ++l)
          for (std::int64_t i = 0; i < a_out.inner; ++i)
            res[static_cast<std::size_t>((o * a_out.len + l) * a_out.inner + i)] =
                mine[static_cast<std::size_t>((o * a_in.len + piece * a_out.len + l) * a_in.inner + i)];
    }
  }
  for (std::int64_t r = 0; r < m_ranks; ++r)
    m_values[static_cast<std::size_t>(r)][out] = std::move(result[static_cast<std::size_t>(r)]);
}

void ClusterValues::step() {
  const auto& g = m_local.graph;
  for (std::size_t i = 0; i < g.ops().size(); ++i) {
    const auto& op = g.ops()[i];
    if (op.def->collective != workloads::OpDef::Collective::None || op.type == "Slice") {
      collective(op);
      continue;
    }
    for (std::int64_t r = 0; r < m_ranks; ++r)
      compute_op(g, op, m_values[static_cast<std::size_t>(r)], &m_state[static_cast<std::size_t>(r)][i]);
  }
}

double ClusterValues::read_loss() { return m_values[0][static_cast<std::size_t>(m_local.loss)].at(0); }

DataParallelValues::DataParallelValues(const workloads::Workload& w, std::int64_t ranks, const FunctionalOptions& opt,
                                       const std::string& dataset_dir, std::int64_t steps_per_epoch) {
  for (std::int64_t r = 0; r < ranks; ++r) {
    FunctionalOptions mine = opt;
    mine.num_shards = ranks;
    mine.shard_id = r;
    if (r > 0) mine.dump_steps = 0;  // --dump-batches writes rank 0's
    m_ranks.push_back(std::make_shared<FunctionalModel>(w, mine, dataset_dir, steps_per_epoch));
  }
  m_gradients = m_ranks.front()->gradients();
  for (auto t : m_gradients) m_fp16.push_back(w.graph.tensor(t).dtype == workloads::DType::F16);
}

void DataParallelValues::copy_batch_to_device() {
  for (auto& r : m_ranks) r->copy_batch_to_device();
}

void DataParallelValues::send_batch_to_queue() {
  for (auto& r : m_ranks) r->send_batch_to_queue();
}

void DataParallelValues::get_next() {
  if (m_evaluating) return;
  for (auto& r : m_ranks) r->get_next();
}

void DataParallelValues::step() {
  if (m_evaluating) return;
  for (auto& r : m_ranks) r->forward_backward();
  const auto n = static_cast<double>(m_ranks.size());
  for (std::size_t k = 0; k < m_gradients.size(); ++k) {
    const auto t = m_gradients[k];
    m_sum.assign(m_ranks.front()->value(t).size(), 0.0);
    for (const auto& r : m_ranks) {
      const auto& g = r->value(t);
      for (std::size_t e = 0; e < m_sum.size(); ++e) m_sum[e] += g[e];
    }
    for (auto& r : m_ranks) {
      auto& g = r->mutable_value(t);
      for (std::size_t e = 0; e < m_sum.size(); ++e) {
        const auto mean = static_cast<float>(m_sum[e] / n);
        g[e] = m_fp16[k] ? workloads::round_to_fp16(mean) : mean;
      }
    }
  }
  for (auto& r : m_ranks) r->optimize();
}

double DataParallelValues::read_loss() { return m_ranks.front()->read_loss(); }

double DataParallelValues::evaluating(bool on) {
  m_evaluating = on;
  return -1;
}

}  // namespace ascendsim::runtime
