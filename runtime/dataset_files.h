// Opening dataset files: MNIST idx (plain or .gz) and CIFAR-10 binary batches in a directory.
#pragma once

#include <string>

#include "workloads/dataset.h"

namespace ascendsim::runtime {

/// Reads the training set in `dir`: train-images-idx3-ubyte / train-labels-idx1-ubyte (each
/// plain or .gz), or data_batch_*.bin (also inside cifar-10-batches-bin/). Throws
/// sim::InputError naming the file and what is wrong with it.
workloads::DatasetSpec load_dataset_dir(const std::string& dir);

}  // namespace ascendsim::runtime
