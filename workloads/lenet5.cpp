#include "workloads/lenet5.h"

#include "workloads/training.h"

namespace ascendsim::workloads {

namespace {

TensorId param(Graph& g, const std::string& name, Shape shape) {
  return g.add_tensor({name, std::move(shape), DType::F32, TensorRole::Parameter});
}

TensorId dense(Graph& g, const std::string& name, TensorId x, std::int64_t in, std::int64_t out) {
  TensorId w = param(g, name + ".weight", {out, in});
  TensorId b = param(g, name + ".bias", {out});
  TensorId y = g.matmul(name + "/MatMul", x, w, {false, true}, TensorRole::Activation);
  return g.bias_add(name + "/BiasAdd", y, b);
}

}  // namespace

Workload make_lenet5(std::int64_t batch_size) {
  Workload w;
  w.name = "lenet5";
  w.description = "LeNet-5 on MNIST-shaped 32x32x1 images, 10 classes";
  w.batch_size = batch_size;
  // MNIST-shaped until a real dataset is given: 60,000 28x28 grey images; MindSpore's LeNet
  // pipeline resizes to 32x32, rescales, normalises, transposes to CHW and casts the label.
  w.data = mnist_recipe(32, 32);
  // Evaluation: the 10,000 test images through the same maps (none of them random).
  w.eval_data = w.data;
  w.eval_data.dataset.samples = 10000;
  w.optimizer = "Momentum(lr=0.01, momentum=0.9)";
  Graph& g = w.graph;
  const std::int64_t n = batch_size;

  TensorId image = g.add_tensor({"image", {n, 1, 32, 32}, DType::F32, TensorRole::Input});
  TensorId label = g.add_tensor({"label", {n}, DType::I32, TensorRole::Label});
  w.batch_inputs = {image, label};

  const ConvAttr valid{5, 5, 1, 0, 0};
  const PoolAttr pool{2, 2};
  TensorId x = g.conv2d("conv1/Conv2D", image, param(g, "conv1.weight", {6, 1, 5, 5}), valid);
  x = g.relu("relu1/ReLU", x);
  x = g.max_pool("pool1/MaxPool", x, pool);
  x = g.conv2d("conv2/Conv2D", x, param(g, "conv2.weight", {16, 6, 5, 5}), valid);
  x = g.relu("relu2/ReLU", x);
  x = g.max_pool("pool2/MaxPool", x, pool);
  x = g.reshape("flatten/Reshape", x, {n, 16 * 5 * 5});
  x = g.relu("relu3/ReLU", dense(g, "fc1", x, 400, 120));
  x = g.relu("relu4/ReLU", dense(g, "fc2", x, 120, 84));
  x = dense(g, "fc3", x, 84, 10);
  w.loss = g.sparse_softmax_cross_entropy("loss/SparseSoftmaxCrossEntropyWithLogits", x, label);

  append_momentum(g, append_backward(g, w.loss));
  return w;
}

}  // namespace ascendsim::workloads
