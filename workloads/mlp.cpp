#include "workloads/mlp.h"

#include "workloads/training.h"

namespace ascendsim::workloads {

Workload make_mlp_slice(std::int64_t batch_size) {
  Workload w;
  w.name = "mlp-slice";
  w.description = "seed 002's dataset-slicing network: Flatten, Dense 784-512-512-10 on MNIST 28x28x1, 10 classes";
  w.batch_size = batch_size;
  w.data.dataset = synthetic_mnist();
  w.data.maps = {{MapOpType::Rescale}, {MapOpType::Normalize}, {MapOpType::HWC2CHW}, {MapOpType::TypeCast}};
  w.eval_data = w.data;
  w.eval_data.dataset.samples = 10000;
  // nn.SGD(lr=0.01): the update of Momentum with momentum 0 (the accumulator holds the gradient).
  w.optimizer = "SGD(lr=0.01)";
  w.hyper = {0.01, 0.0, 0};
  Graph& g = w.graph;
  const std::int64_t n = batch_size;
  TensorId image = g.add_tensor({"image", {n, 1, 28, 28}, DType::F32, TensorRole::Input});
  TensorId label = g.add_tensor({"label", {n}, DType::I32, TensorRole::Label});
  w.batch_inputs = {image, label};
  auto dense = [&](const std::string& name, TensorId x, std::int64_t in, std::int64_t out) {
    TensorId wt = g.add_tensor({name + ".weight", {out, in}, DType::F32, TensorRole::Parameter});
    TensorId b = g.add_tensor({name + ".bias", {out}, DType::F32, TensorRole::Parameter});
    TensorId y = g.matmul(name + "/MatMul", x, wt, {false, true}, TensorRole::Activation);
    return g.bias_add(name + "/BiasAdd", y, b);
  };
  TensorId x = g.reshape("flatten/Reshape", image, {n, 28 * 28});
  x = g.relu("relu1/ReLU", dense("layer1", x, 784, 512));
  x = g.relu("relu2/ReLU", dense("layer2", x, 512, 512));
  x = dense("layer3", x, 512, 10);
  w.loss = g.sparse_softmax_cross_entropy("loss/SparseSoftmaxCrossEntropyWithLogits", x, label);
  append_momentum(g, append_backward(g, w.loss));
  return w;
}

}  // namespace ascendsim::workloads
