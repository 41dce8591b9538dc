#include "workloads/resnet.h"

#include <cstdio>
#include <set>

#include "workloads/training.h"

namespace ascendsim::workloads {

const std::vector<ResNetSpec>& resnet_specs() {
  static const std::vector<ResNetSpec> specs = {
      {"resnet18",
       false,
       {2, 2, 2, 2},
       1000,
       1281167,
       "ResNet-18 on ImageNet 224x224, 1000 classes, O2 mixed precision"},
      {"resnet34",
       false,
       {3, 4, 6, 3},
       1000,
       1281167,
       "ResNet-34 on ImageNet 224x224, 1000 classes, O2 mixed precision"},
      {"resnet50",
       true,
       {3, 4, 6, 3},
       1000,
       1281167,
       "ResNet-50 v1.5 on ImageNet 224x224, 1000 classes, O2 mixed precision"},
      {"resnet101",
       true,
       {3, 4, 23, 3},
       1000,
       1281167,
       "ResNet-101 v1.5 on ImageNet 224x224, 1000 classes, O2 mixed precision"},
      {"resnet152",
       true,
       {3, 8, 36, 3},
       1000,
       1281167,
       "ResNet-152 v1.5 on ImageNet 224x224, 1000 classes, O2 mixed precision"},
      {"resnet18-cifar10",
       false,
       {2, 2, 2, 2},
       10,
       50000,
       "ResNet-18 on CIFAR-10 resized to 224x224, 10 classes, O2 mixed precision"},
      {"resnet50-cifar10",
       true,
       {3, 4, 6, 3},
       10,
       50000,
       "ResNet-50 v1.5 on CIFAR-10 resized to 224x224, 10 classes, O2 mixed precision"},
  };
  return specs;
}

namespace {

constexpr std::int64_t kLrScheduleEpochs = 90;  // the model zoo's ImageNet schedule length

class Builder {
 public:
  Builder(Graph& g, const Recipe& r)
      : m_g(g),
        m_compute(r.amp_level == "O0" ? DType::F32 : DType::F16),
        m_master(r.amp_level == "O3" ? DType::F16 : DType::F32),
        m_bn_fp32(r.amp_level == "O0" || (r.amp_level == "O2" && r.keep_batchnorm_fp32)) {}

  DType compute() const { return m_compute; }

  /// Conv without bias.
  TensorId conv(const std::string& name, TensorId x, std::int64_t cout, std::int64_t k, std::int64_t stride,
                std::int64_t pad) {
    const std::int64_t cin = m_g.tensor(x).shape[1];
    TensorId w = m_g.add_tensor({name + ".weight", {cout, cin, k, k}, m_master, TensorRole::Parameter});
    m_decayed.insert(w);
    if (m_master != m_compute) w = m_g.cast(name + "/Cast", w, m_compute);
    return m_g.conv2d(name + "/Conv2D", x, w, {k, k, stride, pad});
  }

  /// BatchNorm in fp32 between casts (O2 with keep_batchnorm_fp32), or in the network's precision.
  TensorId bn(const std::string& name, TensorId x) {
    const std::int64_t c = m_g.tensor(x).shape[1];
    TensorId gamma = m_g.add_tensor({name + ".gamma", {c}, m_master, TensorRole::Parameter});
    TensorId beta = m_g.add_tensor({name + ".beta", {c}, m_master, TensorRole::Parameter});
    TensorId mean = m_g.add_tensor({name + ".moving_mean", {c}, DType::F32, TensorRole::State});
    TensorId var = m_g.add_tensor({name + ".moving_variance", {c}, DType::F32, TensorRole::State});
    if (!m_bn_fp32 || m_compute == DType::F32) return m_g.batch_norm(name + "/BatchNorm", x, gamma, beta, mean, var);
    TensorId x32 = m_g.cast(name + "/CastIn", x, DType::F32);
    TensorId y = m_g.batch_norm(name + "/BatchNorm", x32, gamma, beta, mean, var);
    return m_g.cast(name + "/CastOut", y, m_compute);
  }

  TensorId relu(const std::string& name, TensorId x) { return m_g.relu(name + "/ReLU", x); }

  TensorId block(const std::string& name, TensorId x, std::int64_t planes, std::int64_t stride, bool bottleneck) {
    const std::int64_t inplanes = m_g.tensor(x).shape[1];
    const std::int64_t out = bottleneck ? planes * 4 : planes;
    TensorId y;
    if (bottleneck) {
      y = relu(name + ".relu1", bn(name + ".bn1", conv(name + ".conv1", x, planes, 1, 1, 0)));
      y = relu(name + ".relu2", bn(name + ".bn2", conv(name + ".conv2", y, planes, 3, stride, 1)));
      y = bn(name + ".bn3", conv(name + ".conv3", y, out, 1, 1, 0));
    } else {
      y = relu(name + ".relu1", bn(name + ".bn1", conv(name + ".conv1", x, planes, 3, stride, 1)));
      y = bn(name + ".bn2", conv(name + ".conv2", y, planes, 3, 1, 1));
    }
    TensorId shortcut = x;
    if (stride != 1 || inplanes != out)
      shortcut = bn(name + ".downsample.1", conv(name + ".downsample.0", x, out, 1, stride, 0));
    return relu(name + ".relu3", m_g.add(name + "/Add", y, shortcut));
  }

  TensorId dense(const std::string& name, TensorId x, std::int64_t out) {
    const std::int64_t in = m_g.tensor(x).shape[1];
    TensorId w = m_g.add_tensor({name + ".weight", {out, in}, m_master, TensorRole::Parameter});
    TensorId b = m_g.add_tensor({name + ".bias", {out}, m_master, TensorRole::Parameter});
    m_decayed.insert(w);
    if (m_master != m_compute) w = m_g.cast(name + "/CastW", w, m_compute);
    TensorId y = m_g.matmul(name + "/MatMul", x, w, {false, true}, TensorRole::Activation);
    if (m_master != m_compute) b = m_g.cast(name + "/CastB", b, m_compute);
    return m_g.bias_add(name + "/BiasAdd", y, b);
  }

  const std::set<TensorId>& decayed() const { return m_decayed; }

 private:
  Graph& m_g;
  DType m_compute, m_master;
  bool m_bn_fp32;
  std::set<TensorId> m_decayed;
};

}  // namespace

Workload make_resnet(const ResNetSpec& spec, std::int64_t batch_size, const Recipe& recipe) {
  Workload w;
  w.recipe = recipe;
  w.name = spec.name;
  w.description = spec.description;
  w.batch_size = batch_size;
  if (spec.classes == 10) {  // CIFAR-10: random crop with padding 4, flip, resize to 224, rescale, normalise
    w.data.dataset.format = DatasetFormat::Cifar10Binary;
    w.data.dataset.source = "synthetic";
    w.data.dataset.samples = spec.dataset_samples;
    w.data.dataset.height = w.data.dataset.width = 32;
    w.data.dataset.channels = 3;
    w.data.dataset.classes = 10;
    w.data.dataset.record_bytes = 3073;
    w.data.maps = {{MapOpType::RandomCrop, 32, 32, 1.0},
                   {MapOpType::RandomHorizontalFlip},
                   {MapOpType::Resize, 224, 224},
                   {MapOpType::Rescale},
                   {MapOpType::Normalize},
                   {MapOpType::HWC2CHW},
                   {MapOpType::TypeCast}};
    // Evaluation: the 10,000 test images, resized and normalised, nothing random.
    w.eval_data.dataset = w.data.dataset;
    w.eval_data.dataset.samples = 10000;
    w.eval_data.maps = {{MapOpType::Resize, 224, 224},
                        {MapOpType::Rescale},
                        {MapOpType::Normalize},
                        {MapOpType::HWC2CHW},
                        {MapOpType::TypeCast}};
  } else {  // ImageNet: decode, random resized crop (mean 54% of the area kept) to 224, flip, normalise
    w.data.dataset = synthetic_imagenet(spec.dataset_samples);
    w.data.maps = {{MapOpType::Decode},           {MapOpType::RandomCrop, 0, 0, 0.54},
                   {MapOpType::Resize, 224, 224}, {MapOpType::RandomHorizontalFlip},
                   {MapOpType::Normalize},        {MapOpType::HWC2CHW},
                   {MapOpType::TypeCast}};
    // Evaluation (the model zoo's create_dataset(do_train=False)): the 50,000 validation JPEGs,
    // decoded, the shorter side resized to 256, the centre 224x224 cropped, normalised.
    w.eval_data.dataset = synthetic_imagenet(50000);
    w.eval_data.maps = {{MapOpType::Decode},    {MapOpType::Resize, 256, 0}, {MapOpType::CenterCrop, 224, 224},
                        {MapOpType::Normalize}, {MapOpType::HWC2CHW},        {MapOpType::TypeCast}};
  }
  char scale[32];
  std::snprintf(scale, sizeof scale, "%g", recipe.loss_scale);
  w.optimizer =
      std::string("Momentum(momentum=0.9, weight_decay=1e-4), loss scale ") + scale + ", per-step lr schedule";
  Graph& g = w.graph;
  Builder b(g, recipe);
  const std::int64_t n = batch_size;

  TensorId image = g.add_tensor({"image", {n, 3, 224, 224}, DType::F32, TensorRole::Input});
  TensorId label = g.add_tensor({"label", {n}, DType::I32, TensorRole::Label});
  w.batch_inputs = {image, label};

  TensorId x = b.compute() == DType::F32 ? image : g.cast("input/Cast", image, b.compute());
  x = b.relu("relu", b.bn("bn1", b.conv("conv1", x, 64, 7, 2, 3)));
  x = g.max_pool("maxpool/MaxPool", x, {3, 2, 1});
  const std::int64_t planes[4] = {64, 128, 256, 512};
  for (int stage = 0; stage < 4; ++stage)
    for (std::int64_t i = 0; i < spec.blocks[static_cast<std::size_t>(stage)]; ++i)
      x = b.block("layer" + std::to_string(stage + 1) + "." + std::to_string(i), x, planes[stage],
                  (stage > 0 && i == 0) ? 2 : 1, spec.bottleneck);
  x = g.reduce_mean("avgpool/ReduceMean", x);
  x = b.dense("fc", x, spec.classes);

  TensorId logits = b.compute() == DType::F32 ? x : g.cast("loss/CastLogits", x, DType::F32);
  TensorId onehot = g.one_hot("loss/OneHot", label, spec.classes, DType::F32);  // on 0.9 + 0.1/C, off 0.1/C
  TensorId per_sample = g.softmax_cross_entropy("loss/SoftmaxCrossEntropyWithLogits", logits, onehot);
  w.loss = g.reduce_mean("loss/ReduceMean", per_sample);

  TensorId sens = g.add_tensor({"loss_scale", {1}, DType::F32, TensorRole::Constant});
  OptimizerSpec opt;
  opt.loss_scale = recipe.loss_scale;
  opt.weight_decay = 1e-4;
  w.hyper = {0.1, 0.9, opt.weight_decay};
  opt.decayed = b.decayed();
  opt.lr_schedule_steps = kLrScheduleEpochs * w.steps_per_epoch();
  append_momentum(g, append_backward(g, w.loss, sens), opt);
  return w;
}

}  // namespace ascendsim::workloads
