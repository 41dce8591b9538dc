#include "runtime/memory_plan.h"

#include <algorithm>
#include <numeric>

#include "workloads/op_registry.h"

namespace ascendsim::runtime {

using workloads::TensorId;

namespace {

std::int64_t align(std::int64_t bytes) {
  return (bytes + MemoryPlan::kAlignment - 1) / MemoryPlan::kAlignment * MemoryPlan::kAlignment;
}

bool overlap_in_time(const Allocation& a, const Allocation& b) { return a.first <= b.last && b.first <= a.last; }

}  // namespace

std::int64_t op_workspace_bytes(const workloads::Graph& g, const workloads::Op& op) {
  return op.def && op.def->workspace ? op.def->workspace(g, op) : 0;
}

MemoryPlan plan_memory(const workloads::Workload& w, std::int64_t queue_capacity) {
  return plan_memory(w, w.graph, queue_capacity);
}

MemoryPlan plan_memory(const workloads::Workload& w, const workloads::Graph& executed, std::int64_t queue_capacity) {
  const auto& g = executed;
  const auto& ops = g.ops();
  const std::size_t nt = g.tensors().size();

  // A view (Reshape) aliases its input: plan the root buffer for the union of their uses.
  std::vector<TensorId> root(nt);
  std::iota(root.begin(), root.end(), 0);
  for (const auto& op : ops)
    if (op.def->view) root[static_cast<std::size_t>(op.outputs[0])] = root[static_cast<std::size_t>(op.inputs[0])];

  std::vector<std::int64_t> first(nt, -1), last(nt, -1);
  for (auto t : w.batch_inputs) first[static_cast<std::size_t>(t)] = 0;
  for (std::size_t i = 0; i < ops.size(); ++i) {
    const auto idx = static_cast<std::int64_t>(i);
    for (auto t : ops[i].outputs) {
      const auto r = static_cast<std::size_t>(root[static_cast<std::size_t>(t)]);
      if (first[r] < 0) first[r] = idx;
      last[r] = std::max(last[r], idx);
    }
    for (auto t : ops[i].inputs) last[static_cast<std::size_t>(root[static_cast<std::size_t>(t)])] = idx;
  }

  MemoryPlan plan;
  for (std::size_t t = 0; t < nt; ++t) {
    const auto& tensor = g.tensors()[t];
    if (is_persistent(tensor.role)) {
      const std::int64_t bytes = align(tensor.bytes());
      plan.persistent_bytes += bytes;
      (tensor.role == workloads::TensorRole::Parameter        ? plan.weight_bytes
       : tensor.role == workloads::TensorRole::OptimizerState ? plan.optimizer_state_bytes
                                                              : plan.other_persistent_bytes) += bytes;
      continue;
    }
    if (root[t] != static_cast<TensorId>(t) || first[t] < 0) continue;
    plan.allocations.push_back(
        {static_cast<TensorId>(t), -1, align(tensor.bytes()), first[t], std::max(first[t], last[t]), 0});
  }
  for (std::size_t i = 0; i < ops.size(); ++i) {
    const std::int64_t ws = op_workspace_bytes(g, ops[i]);
    if (ws == 0) continue;
    const auto idx = static_cast<std::int64_t>(i);
    plan.allocations.push_back({-1, idx, align(ws), idx, idx, 0});
    plan.workspace_bytes = std::max(plan.workspace_bytes, align(ws));
  }

  // Lower bound: the most bytes live at once.
  std::vector<std::int64_t> delta(ops.size() + 1, 0);
  for (const auto& a : plan.allocations) {
    delta[static_cast<std::size_t>(a.first)] += a.bytes;
    delta[static_cast<std::size_t>(a.last) + 1] -= a.bytes;
  }
  std::int64_t live = 0, peak_at = -1;
  for (std::size_t i = 0; i < ops.size(); ++i)
    if ((live += delta[i]) > plan.live_peak_bytes) {
      plan.live_peak_bytes = live;
      peak_at = static_cast<std::int64_t>(i);
    }
  for (const auto& a : plan.allocations)  // what is live at the peak, by kind
    if (a.first <= peak_at && peak_at <= a.last)
      (a.tensor < 0                                                 ? plan.peak_workspace_bytes
       : g.tensor(a.tensor).role == workloads::TensorRole::Gradient ? plan.peak_gradient_bytes
                                                                    : plan.peak_activation_bytes) += a.bytes;

  // Greedy by size: largest first, each at the lowest offset free over its live range.
  std::vector<std::size_t> order(plan.allocations.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    const auto& x = plan.allocations[a];
    const auto& y = plan.allocations[b];
    return x.bytes != y.bytes ? x.bytes > y.bytes : x.first < y.first;
  });
  std::vector<std::size_t> placed;  // by offset
  for (std::size_t idx : order) {
    Allocation& a = plan.allocations[idx];
    std::int64_t offset = 0;
    for (std::size_t p : placed) {
      const Allocation& b = plan.allocations[p];
      if (!overlap_in_time(a, b)) continue;
      if (b.offset >= offset + a.bytes) break;
      offset = std::max(offset, b.offset + b.bytes);
    }
    a.offset = offset;
    plan.arena_bytes = std::max(plan.arena_bytes, offset + a.bytes);
    auto pos = std::upper_bound(placed.begin(), placed.end(), offset,
                                [&](std::int64_t off, std::size_t p) { return off < plan.allocations[p].offset; });
    placed.insert(pos, idx);
  }
  plan.queue_buffer_bytes = queue_capacity * align(w.batch_bytes());
  return plan;
}

}  // namespace ascendsim::runtime
