// Opening dataset files: MNIST idx (plain or .gz) and CIFAR-10 binary batches in a directory.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "workloads/dataset.h"

namespace ascendsim::runtime {

/// Reads the training set in `dir`: train-images-idx3-ubyte / train-labels-idx1-ubyte (each
/// plain or .gz), or data_batch_*.bin (also inside cifar-10-batches-bin/). Throws
/// sim::InputError naming the file and what is wrong with it.
/// Or an image folder: one subfolder per class of JPEG files (each file's dimensions read from its
/// header, not decoded; a line of progress on `progress` once reading takes over a second).
/// `index`: a file that caches an image folder's headers (written after a scan; read instead of
/// scanning while every file keeps its name, size and modification time; see docs/model.md).
workloads::DatasetSpec load_dataset_dir(const std::string& dir, std::ostream* progress = nullptr,
                                        const std::string& index = "");

/// A dataset's samples as stored: 8-bit pixels, height x width x channels per sample, and labels.
struct DatasetValues {
  std::int64_t height = 0, width = 0, channels = 0, classes = 0;
  std::vector<std::uint8_t> pixels;  ///< sample after sample, HWC
  std::vector<std::int32_t> labels;
  std::vector<std::string> files;  ///< an image folder: each sample's JPEG file (pixels empty)
  /// A token stream (train-tokens.bin, test-tokens.bin: little-endian int32): a sequence model's
  /// samples are its windows (FunctionalModel); pixels and labels are empty.
  std::vector<std::int32_t> tokens;
  std::int64_t count() const { return static_cast<std::int64_t>(labels.size()); }
  const std::uint8_t* sample(std::int64_t i) const { return pixels.data() + i * height * width * channels; }
};

/// Reads every sample of the training split (`test` false) or the test split (t10k-*-idx*-ubyte,
/// test_batch.bin) in `dir`; an image folder gives its files and class labels (decoded when
/// used; it has no test split). Throws sim::InputError naming the file and what is wrong.
DatasetValues load_dataset_values(const std::string& dir, bool test);

}  // namespace ascendsim::runtime
