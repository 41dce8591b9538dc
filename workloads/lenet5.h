// LeNet-5 as MindSpore's model zoo defines it (`LeNet5`): 32x32x1 input; conv 1->6 5x5 and
// conv 6->16 5x5, valid padding, no bias, each followed by ReLU and 2x2/2 max pooling; flatten;
// Dense 400->120->84->10 with bias, ReLU between; sparse softmax cross entropy (mean);
// Momentum(lr=0.01, momentum=0.9). 61,684 parameters, 416,520 forward MACs per sample.
#pragma once

#include "workloads/workload.h"

namespace ascendsim::workloads {

Workload make_lenet5(std::int64_t batch_size);

}  // namespace ascendsim::workloads
