// MobileNetV2 for training (torchvision's definition, width 1.0, 224x224x3, 1000 classes):
// a 3x3 stem, 17 inverted residual blocks — a 1x1 expansion (except in the first), a 3x3
// depthwise convolution, a 1x1 linear projection, the input added back where the shapes allow —
// a 1x1 convolution to 1280 channels, global average pooling and a dense head; ReLU6 throughout.
//
// Training as MindSpore's model zoo runs it on Ascend (the seed's NFS example, 004): an fp16
// network with fp32 master weights, BatchNorm in fp16, a fixed loss scale of 1024, softmax cross
// entropy with label smoothing 0.1, Momentum 0.9 with weight decay 4e-5 on the convolution and
// dense weights. The ImageNet data recipe is the ResNet workloads'.
#pragma once

#include "workloads/workload.h"

namespace ascendsim::workloads {

Workload make_mobilenet_v2(std::int64_t batch_size, const Recipe& recipe);

}  // namespace ascendsim::workloads
