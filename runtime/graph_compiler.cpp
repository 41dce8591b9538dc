#include "runtime/graph_compiler.h"

#include <algorithm>
#include <stdexcept>

#include "sim/core/time.h"

namespace ascendsim::runtime {

using aicore::OpDesc;
using aicore::OpKind;
using aicore::Precision;
using workloads::OpType;

namespace {

Precision storage_precision(workloads::DType t) {
  switch (t) {
    case workloads::DType::F16:
      return Precision::FP16;
    case workloads::DType::I8:
      return Precision::INT8;
    default:
      return Precision::FP32;  // fp32 and int32 are 4 bytes
  }
}

// fp32 Cube operands are computed in fp16 (Ascend's default allow_fp32_to_fp16 precision mode).
Precision cube_precision(workloads::DType t) { return t == workloads::DType::I8 ? Precision::INT8 : Precision::FP16; }

void set_nchw(OpDesc& d, const workloads::Shape& x) {
  d.batch = x[0];
  d.cin = x[1];
  d.h = x[2];
  d.w = x[3];
}

OpDesc vector_op(OpKind kind, const workloads::Tensor& main, std::int64_t out_elements = 0) {
  OpDesc d;
  d.kind = kind;
  d.precision = storage_precision(main.dtype);
  d.out_precision = d.precision;
  d.elements = main.elements();
  d.out_elements = out_elements;
  return d;
}

}  // namespace

OpDesc lower_op(const workloads::Graph& g, const workloads::Op& op) {
  auto in = [&](std::size_t i) -> const workloads::Tensor& { return g.tensor(op.inputs.at(i)); };
  auto out = [&](std::size_t i) -> const workloads::Tensor& { return g.tensor(op.outputs.at(i)); };
  OpDesc d;
  switch (op.type) {
    case OpType::Conv2D:
    case OpType::Conv2DBackpropInput:
    case OpType::Conv2DBackpropFilter: {
      d.kind = op.type == OpType::Conv2D                ? OpKind::Conv2D
               : op.type == OpType::Conv2DBackpropInput ? OpKind::Conv2DBackpropInput
                                                        : OpKind::Conv2DBackpropFilter;
      d.precision = cube_precision(in(0).dtype);
      d.out_precision = storage_precision(out(0).dtype);
      // The forward geometry: input x and weight w of the convolution being differentiated.
      const workloads::Shape& x = op.type == OpType::Conv2D                ? in(0).shape
                                  : op.type == OpType::Conv2DBackpropInput ? out(0).shape
                                                                           : in(1).shape;
      const workloads::Shape& w = op.type == OpType::Conv2DBackpropFilter ? out(0).shape : in(1).shape;
      set_nchw(d, x);
      d.cout = w[0];
      d.kh = w[2];
      d.kw = w[3];
      d.stride = op.conv.stride;
      d.pad = op.conv.pad;
      return d;
    }
    case OpType::MatMul:
      d.kind = OpKind::MatMul;
      d.precision = cube_precision(in(0).dtype);
      d.out_precision = storage_precision(out(0).dtype);
      d.m = out(0).shape[0];
      d.n = out(0).shape[1];
      d.k = op.matmul.transpose_a ? in(0).shape[0] : in(0).shape[1];
      d.transpose_a = op.matmul.transpose_a;
      d.transpose_b = op.matmul.transpose_b;
      return d;
    case OpType::MaxPool:
    case OpType::MaxPoolGrad: {
      d = vector_op(op.type == OpType::MaxPool ? OpKind::MaxPool : OpKind::MaxPoolGrad, in(0));
      set_nchw(d, in(0).shape);
      d.kh = d.kw = op.pool.kernel;
      d.stride = op.pool.stride;
      d.pad = op.pool.pad;
      return d;
    }
    case OpType::BatchNorm:
    case OpType::BatchNormGrad: {
      const workloads::Tensor& x = op.type == OpType::BatchNorm ? in(0) : in(1);
      d = vector_op(op.type == OpType::BatchNorm ? OpKind::BatchNorm : OpKind::BatchNormGrad, x);
      set_nchw(d, x.shape);
      return d;
    }
    case OpType::BiasAdd:
      return vector_op(OpKind::BiasAdd, out(0), out(0).shape[1]);
    case OpType::BiasAddGrad:
      return vector_op(OpKind::BiasAddGrad, in(0), out(0).elements());
    case OpType::ReLU:
      return vector_op(OpKind::Relu, out(0));
    case OpType::ReluGrad:
      return vector_op(OpKind::ReluGrad, out(0));
    case OpType::SparseSoftmaxCrossEntropyWithLogits:
    case OpType::SoftmaxCrossEntropyWithLogits:
      return vector_op(OpKind::SoftmaxCrossEntropy, in(0), in(0).shape[0]);
    case OpType::SparseSoftmaxCrossEntropyWithLogitsGrad:
    case OpType::SoftmaxCrossEntropyWithLogitsGrad:
      return vector_op(OpKind::SoftmaxCrossEntropyGrad, in(0), in(0).shape[0]);
    case OpType::AddN: {
      d = vector_op(OpKind::AddN, out(0));
      d.operands = static_cast<std::int64_t>(op.inputs.size());
      return d;
    }
    case OpType::ApplyMomentum:
      return vector_op(OpKind::Momentum, in(0));
    case OpType::Add:
      return vector_op(OpKind::Add, out(0));
    case OpType::Mul:
      return vector_op(OpKind::Mul, out(0));
    case OpType::Cast:
      d = vector_op(OpKind::Cast, in(0));
      d.out_precision = storage_precision(out(0).dtype);
      return d;
    case OpType::ReduceMean:
      return vector_op(OpKind::ReduceMean, in(0), out(0).elements());
    case OpType::ReduceMeanGrad:
      return vector_op(OpKind::ReduceMeanGrad, out(0), in(0).elements());
    case OpType::OneHot:
      return vector_op(OpKind::OneHot, out(0), in(0).elements());
    case OpType::Gather:
      return vector_op(OpKind::Gather, out(0));
    case OpType::AssignAdd:
      return vector_op(OpKind::AssignAdd, out(0));
    case OpType::Reshape:
      break;
  }
  throw std::invalid_argument(op.name + ": " + workloads::op_type_name(op.type) + " does not run on the AI cores");
}

CompiledGraph compile(const workloads::Workload& w, const aicore::CostModel& model, std::int64_t queue_capacity) {
  CompiledGraph c;
  for (auto t : w.batch_inputs) c.input_bytes.push_back(w.graph.tensor(t).bytes());
  c.batch_bytes = w.batch_bytes();
  hostif::Task getnext;
  getnext.kind = hostif::TaskKind::GetNext;
  getnext.name = "GetNext";
  getnext.part = hostif::StepPart::Data;
  c.sink_tasks.push_back(getnext);
  for (const auto& op : w.graph.ops()) {
    if (!workloads::is_device_op(op.type)) continue;
    hostif::Task t;
    t.kind = hostif::TaskKind::AiCore;
    t.name = op.name;
    c.descs.push_back(lower_op(w.graph, op));
    t.cost = model.estimate(c.descs.back());
    t.time = sim::seconds(t.cost.time_s);
    t.part = op.pass == workloads::Pass::Forward    ? hostif::StepPart::Forward
             : op.pass == workloads::Pass::Backward ? hostif::StepPart::Backward
                                                    : hostif::StepPart::Optimizer;
    c.device_compute_s += t.cost.time_s;
    c.step_tasks.push_back(t);
    c.sink_tasks.push_back(t);
  }
  c.memory = plan_memory(w, queue_capacity);
  return c;
}

}  // namespace ascendsim::runtime
