// The ResNet family for training, one parameterised builder for the torchvision definitions:
// ResNet-18/34 (BasicBlock) and ResNet-50/101/152 (Bottleneck, stride on the 3x3 convolution as
// in v1.5), 224x224x3 input, and resnet50-cifar10 (CIFAR-10 resized to 224, 10 classes).
//
// Training as MindSpore's model zoo runs it with amp_level="O2": fp16 convolutions and dense
// layer, fp32 master weights (cast to fp16 each step), BatchNorm in fp32 between casts, the loss
// in fp32 — softmax cross entropy with label smoothing 0.1 over a one-hot of the labels — a fixed
// loss scale of 1024 fed as the backward sensitivity and unscaled before the update, Momentum 0.9
// with weight decay 1e-4 on conv and dense weights (not on BatchNorm gamma/beta or biases), and
// a per-step learning-rate schedule held on the device.
#pragma once

#include <array>
#include <string>
#include <vector>

#include "workloads/workload.h"

namespace ascendsim::workloads {

struct ResNetSpec {
  std::string name;
  bool bottleneck = false;
  std::array<std::int64_t, 4> blocks{};
  std::int64_t classes = 1000;
  std::int64_t dataset_samples = 1281167;  ///< ImageNet-1k training set
  std::string description;
};

const std::vector<ResNetSpec>& resnet_specs();
/// Builds the network under a training recipe: O0 all fp32; O2 an fp16 network whose fp32 master
/// weights are cast to fp16 every step, BatchNorm in fp32 between casts or in fp16
/// (keep_batchnorm_fp32); O3 all fp16. A loss scale above 1 scales the loss and unscales every
/// gradient.
Workload make_resnet(const ResNetSpec& spec, std::int64_t batch_size, const Recipe& recipe);

}  // namespace ascendsim::workloads
