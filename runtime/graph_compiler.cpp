#include "runtime/graph_compiler.h"

#include <algorithm>
#include <stdexcept>

namespace ascendsim::runtime {

using aicore::OpDesc;
using aicore::OpKind;
using aicore::Precision;
using workloads::OpType;

namespace {

Precision vector_precision(workloads::DType t) {
  switch (t) {
    case workloads::DType::F16:
      return Precision::FP16;
    case workloads::DType::I8:
      return Precision::INT8;
    default:
      return Precision::FP32;
  }
}

Precision cube_precision(workloads::DType t) { return t == workloads::DType::I8 ? Precision::INT8 : Precision::FP16; }

void set_conv(OpDesc& d, const workloads::Shape& x, const workloads::Shape& w, const workloads::ConvAttr& a) {
  d.batch = x[0];
  d.cin = x[1];
  d.h = x[2];
  d.w = x[3];
  d.cout = w[0];
  d.kh = w[2];
  d.kw = w[3];
  d.stride = a.stride;
  d.pad = a.pad;
}

OpDesc vector_op(OpKind kind, const workloads::Tensor& t, std::int64_t inputs, std::int64_t out_elements,
                 std::int64_t passes) {
  OpDesc d;
  d.kind = kind;
  d.precision = vector_precision(t.dtype);
  d.elements = t.elements();
  d.inputs = inputs;
  d.out_elements = out_elements;
  d.passes = passes;
  return d;
}

}  // namespace

OpDesc lower_op(const workloads::Graph& g, const workloads::Op& op) {
  auto in = [&](std::size_t i) -> const workloads::Tensor& { return g.tensor(op.inputs.at(i)); };
  auto out = [&](std::size_t i) -> const workloads::Tensor& { return g.tensor(op.outputs.at(i)); };
  OpDesc d;
  switch (op.type) {
    case OpType::Conv2D:
      d.kind = OpKind::Conv2D;
      d.precision = cube_precision(in(0).dtype);
      set_conv(d, in(0).shape, in(1).shape, op.conv);
      return d;
    case OpType::Conv2DBackpropInput:
      d.kind = OpKind::Conv2DBackpropInput;
      d.precision = cube_precision(in(0).dtype);
      set_conv(d, out(0).shape, in(1).shape, op.conv);
      return d;
    case OpType::Conv2DBackpropFilter:
      d.kind = OpKind::Conv2DBackpropFilter;
      d.precision = cube_precision(in(0).dtype);
      set_conv(d, in(1).shape, out(0).shape, op.conv);
      return d;
    case OpType::MatMul: {
      d.kind = OpKind::MatMul;
      d.precision = cube_precision(in(0).dtype);
      d.m = out(0).shape[0];
      d.n = out(0).shape[1];
      d.k = op.matmul.transpose_a ? in(0).shape[0] : in(0).shape[1];
      return d;
    }
    case OpType::BiasAdd:
      return vector_op(OpKind::Elementwise, out(0), 1, out(0).elements(), 1);
    case OpType::BiasAddGrad:
      return vector_op(OpKind::Reduce, in(0), 1, out(0).elements(), 1);
    case OpType::ReLU:
      return vector_op(OpKind::Elementwise, out(0), 1, out(0).elements(), 1);
    case OpType::ReluGrad:
      return vector_op(OpKind::Elementwise, out(0), 2, out(0).elements(), 2);
    case OpType::MaxPool: {
      OpDesc p = vector_op(OpKind::Pool, in(0), 1, out(0).elements(), 1);
      p.window = 1;  // window == stride: each input element is compared once
      return p;
    }
    case OpType::MaxPoolGrad:
      return vector_op(OpKind::PoolGrad, out(0), 2, out(0).elements(), 3);
    case OpType::SparseSoftmaxCrossEntropyWithLogits:
      return vector_op(OpKind::SoftmaxCrossEntropy, in(0), 1, 1, 5);
    case OpType::SparseSoftmaxCrossEntropyWithLogitsGrad: {
      OpDesc s = vector_op(OpKind::SoftmaxCrossEntropy, in(0), 1, in(0).elements(), 4);
      s.grad = true;
      return s;
    }
    case OpType::AddN: {
      const auto n = static_cast<std::int64_t>(op.inputs.size());
      return vector_op(OpKind::Elementwise, out(0), n, out(0).elements(), n - 1);
    }
    case OpType::ApplyMomentum:  // reads param, accum, grad; writes param, accum
      return vector_op(OpKind::Momentum, in(0), 3, 2 * in(0).elements(), 4);
    case OpType::Reshape:
      break;
  }
  throw std::invalid_argument(op.name + ": " + workloads::op_type_name(op.type) + " does not run on the AI cores");
}

MemoryPlan plan_memory(const workloads::Workload& w, std::int64_t queue_capacity) {
  const auto& g = w.graph;
  const auto& ops = g.ops();
  const std::size_t nt = g.tensors().size();
  // Live range of each per-step tensor: [first write (or step start for batch inputs), last read].
  std::vector<std::int64_t> first(nt, -1), last(nt, -1);
  for (auto t : w.batch_inputs) first[static_cast<std::size_t>(t)] = 0;
  for (std::size_t i = 0; i < ops.size(); ++i) {
    const auto idx = static_cast<std::int64_t>(i);
    for (auto t : ops[i].outputs)
      if (first[static_cast<std::size_t>(t)] < 0) first[static_cast<std::size_t>(t)] = idx;
    for (auto t : ops[i].inputs) last[static_cast<std::size_t>(t)] = idx;
    for (auto t : ops[i].outputs) last[static_cast<std::size_t>(t)] = std::max(last[static_cast<std::size_t>(t)], idx);
  }
  // Views alias their input: a Reshape output takes no memory of its own.
  std::vector<bool> view(nt, false);
  for (const auto& op : ops)
    if (op.type == OpType::Reshape) view[static_cast<std::size_t>(op.outputs[0])] = true;
  MemoryPlan plan;
  std::vector<std::int64_t> delta(ops.size() + 1, 0);
  for (std::size_t t = 0; t < nt; ++t) {
    const auto& tensor = g.tensors()[t];
    if (is_persistent(tensor.role)) {
      plan.persistent_bytes += tensor.bytes();
      continue;
    }
    if (first[t] < 0 || view[t]) continue;
    delta[static_cast<std::size_t>(first[t])] += tensor.bytes();
    delta[static_cast<std::size_t>(std::max(first[t], last[t])) + 1] -= tensor.bytes();
  }
  std::int64_t live = 0;
  for (std::size_t i = 0; i < ops.size(); ++i) {
    live += delta[i];
    plan.peak_step_bytes = std::max(plan.peak_step_bytes, live);
  }
  plan.queue_buffer_bytes = queue_capacity * w.batch_bytes();
  return plan;
}

CompiledGraph compile(const workloads::Workload& w, const aicore::CostModel& model, std::int64_t queue_capacity) {
  CompiledGraph c;
  for (auto t : w.batch_inputs) c.input_bytes.push_back(w.graph.tensor(t).bytes());
  c.batch_bytes = w.batch_bytes();
  aicpu::Task getnext;
  getnext.kind = aicpu::TaskKind::GetNext;
  getnext.name = "GetNext";
  c.sink_tasks.push_back(getnext);
  for (const auto& op : w.graph.ops()) {
    if (!workloads::is_device_op(op.type)) continue;
    aicpu::Task t;
    t.kind = aicpu::TaskKind::AiCore;
    t.name = op.name;
    c.descs.push_back(lower_op(w.graph, op));
    t.cost = model.estimate(c.descs.back());
    c.device_compute_s += t.cost.time_s;
    c.step_tasks.push_back(t);
    c.sink_tasks.push_back(t);
  }
  c.memory = plan_memory(w, queue_capacity);
  return c;
}

}  // namespace ascendsim::runtime
