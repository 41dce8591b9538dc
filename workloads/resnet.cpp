#include "workloads/resnet.h"

#include <cstdio>
#include <set>

#include "workloads/net_builder.h"
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

TensorId block(NetBuilder& b, const std::string& name, TensorId x, std::int64_t planes, std::int64_t stride,
               bool bottleneck) {
  Graph& g = b.graph();
  const std::int64_t inplanes = g.tensor(x).shape[1];
  const std::int64_t out = bottleneck ? planes * 4 : planes;
  TensorId y;
  if (bottleneck) {
    y = b.relu(name + ".relu1", b.bn(name + ".bn1", b.conv(name + ".conv1", x, planes, 1, 1, 0)));
    y = b.relu(name + ".relu2", b.bn(name + ".bn2", b.conv(name + ".conv2", y, planes, 3, stride, 1)));
    y = b.bn(name + ".bn3", b.conv(name + ".conv3", y, out, 1, 1, 0));
  } else {
    y = b.relu(name + ".relu1", b.bn(name + ".bn1", b.conv(name + ".conv1", x, planes, 3, stride, 1)));
    y = b.bn(name + ".bn2", b.conv(name + ".conv2", y, planes, 3, 1, 1));
  }
  TensorId shortcut = x;
  if (stride != 1 || inplanes != out)
    shortcut = b.bn(name + ".downsample.1", b.conv(name + ".downsample.0", x, out, 1, stride, 0));
  return b.relu(name + ".relu3", g.add(name + "/Add", y, shortcut));
}

}  // namespace

Workload make_resnet(const ResNetSpec& spec, std::int64_t batch_size, const Recipe& recipe) {
  Workload w;
  w.recipe = recipe;
  w.name = spec.name;
  w.description = spec.description;
  w.batch_size = batch_size;
  if (spec.classes == 10) {  // CIFAR-10: random crop with padding 4, flip, resize to 224, rescale, normalise
    w.data.dataset = synthetic_cifar10(spec.dataset_samples);
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
  } else {
    w.data = imagenet_train_recipe(spec.dataset_samples);
    w.eval_data = imagenet_eval_recipe();
  }
  Graph& g = w.graph;
  NetBuilder b(g, recipe);
  TensorId x = b.image_input(w);
  x = b.relu("relu", b.bn("bn1", b.conv("conv1", x, 64, 7, 2, 3)));
  x = g.max_pool("maxpool/MaxPool", x, {3, 2, 1});
  const std::int64_t planes[4] = {64, 128, 256, 512};
  for (int stage = 0; stage < 4; ++stage)
    for (std::int64_t i = 0; i < spec.blocks[static_cast<std::size_t>(stage)]; ++i)
      x = block(b, "layer" + std::to_string(stage + 1) + "." + std::to_string(i), x, planes[stage],
                (stage > 0 && i == 0) ? 2 : 1, spec.bottleneck);
  x = g.reduce_mean("avgpool/ReduceMean", x);
  x = b.dense("fc", x, spec.classes);

  b.train_classifier(w, recipe, x, spec.classes, 1e-4, "1e-4", kLrScheduleEpochs);
  return w;
}

}  // namespace ascendsim::workloads
