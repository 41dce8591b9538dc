// The dataset-slicing example's network (seed 002): Flatten, Dense 784->512, ReLU, Dense
// 512->512, ReLU, Dense 512->10, softmax cross entropy, SGD with learning rate 0.01, on MNIST
// (28x28 grey, rescaled, normalised, CHW), in fp32. Written as for one device; semi-automatic
// parallelism (workloads/parallel.h) slices it.
#pragma once

#include "workloads/workload.h"

namespace ascendsim::workloads {

Workload make_mlp_slice(std::int64_t batch_size);

}  // namespace ascendsim::workloads
