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
  d.out_precision = d.precision;
  d.elements = t.elements();
  d.inputs = inputs;
  d.out_elements = out_elements;
  d.passes = passes;
  return d;
}

std::int64_t pool_passes(const workloads::PoolAttr& p) {
  return std::max<std::int64_t>(1, (p.kernel * p.kernel + p.stride * p.stride - 1) / (p.stride * p.stride));
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
    case OpType::MaxPool:  // each input element takes part in about (k/s)^2 window comparisons
      return vector_op(OpKind::Pool, in(0), 1, out(0).elements(), pool_passes(op.pool));
    case OpType::MaxPoolGrad:
      return vector_op(OpKind::PoolGrad, out(0), 2, out(0).elements(), 3 * pool_passes(op.pool));
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
    case OpType::BatchNorm:  // reduce pass (sum, sum of squares), then normalise, scale and shift
      return vector_op(OpKind::Elementwise, in(0), 2, out(0).elements(), 6);
    case OpType::BatchNormGrad:  // reduce dy and dy*x, then apply
      return vector_op(OpKind::Elementwise, in(1), 4, out(0).elements(), 8);
    case OpType::Add:
      return vector_op(OpKind::Elementwise, out(0), 2, out(0).elements(), 1);
    case OpType::Mul:
      return vector_op(OpKind::Elementwise, out(0), 1, out(0).elements(), 1);
    case OpType::Cast: {
      OpDesc c = vector_op(OpKind::Elementwise, in(0), 1, out(0).elements(), 1);
      c.out_precision = vector_precision(out(0).dtype);
      return c;
    }
    case OpType::ReduceMean:
      return vector_op(OpKind::Reduce, in(0), 1, out(0).elements(), 1);
    case OpType::ReduceMeanGrad:
      return vector_op(OpKind::Elementwise, out(0), 0, out(0).elements(), 1);
    case OpType::OneHot:
      return vector_op(OpKind::Elementwise, out(0), 0, out(0).elements(), 1);
    case OpType::SoftmaxCrossEntropyWithLogits:
      return vector_op(OpKind::SoftmaxCrossEntropy, in(0), 2, out(0).elements(), 5);
    case OpType::SoftmaxCrossEntropyWithLogitsGrad: {
      OpDesc s = vector_op(OpKind::SoftmaxCrossEntropy, in(0), 2, out(0).elements(), 4);
      s.grad = true;
      return s;
    }
    case OpType::Gather:
    case OpType::AssignAdd:
      return vector_op(OpKind::Elementwise, out(0), 1, 1, 1);
    case OpType::Reshape:
      break;
  }
  throw std::invalid_argument(op.name + ": " + workloads::op_type_name(op.type) + " does not run on the AI cores");
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
