// A network of the user's own, from an ONNX file (PyTorch's torch.onnx.export, MindSpore's
// export(..., file_format="ONNX")): its forward graph becomes the IR through the op registry, and
// for training the loss, the backward pass (reverse-mode differentiation, training.h) and the
// optimizer are appended as for the built-in workloads, under the training recipe.
//
// What an ONNX operator becomes is documented in docs/onnx.md. Shapes must be static but for the
// batch axis; Shape, Gather, Unsqueeze, Concat and the like on static shapes are folded. An
// operator outside the supported set is an error listing every unsupported type with the first
// node of each; nothing is simulated then.
#pragma once

#include <cstdint>
#include <map>
#include <stdexcept>
#include <string>

#include "workloads/workload.h"

namespace ascendsim::workloads {

struct OnnxOptions {
  std::int64_t batch_size = 0;  ///< 0: the model's own (its input's first dimension must be fixed)
  bool inference = false;       ///< forward only: no loss, gradients or optimizer
  /// true: softmax cross entropy of output 0 (the logits [N, classes]) against integer labels;
  /// false: output 0 is the model's own loss (a scalar), its labels an integer input if any.
  bool loss = true;
  RecipeOverrides recipe;  ///< over the importer's default: amp O0, no loss scale (MindSpore's Model)
  /// Keep the initializers' and constants' values (Workload::initial_values) for functional mode.
  bool values = false;
  /// Initializers not trained (PyTorch's buffers an op reads as data: a rotary table): constants.
  std::vector<std::string> frozen;
};

/// What was imported, beyond the workload: for `info` and the report's description.
struct OnnxSummary {
  std::string producer;  ///< e.g. "pytorch 1.13.1"
  std::int64_t opset = 0;
  std::int64_t nodes = 0;
  std::map<std::string, std::int64_t> node_types;  ///< ONNX op type -> nodes
  std::int64_t initializers = 0;
  std::int64_t parameters = 0;      ///< elements of the trainable initializers
  std::int64_t state_elements = 0;  ///< elements of the BatchNorm running statistics
  std::int64_t folded_nodes = 0;    ///< nodes computed at import (static shapes, constants)
};

/// Reads and imports `path`. Throws std::invalid_argument naming the file and what is wrong:
/// not ONNX, truncated, an unsupported operator (all of them, with the first node of each), a
/// shape that cannot be resolved, a batch size the model does not allow.
Workload import_onnx(const std::string& path, const OnnxOptions& options, OnnxSummary* summary = nullptr);
/// The same from the file's bytes; `name` stands for the file in messages and the workload name.
Workload import_onnx_bytes(const std::string& name, const std::string& bytes, const OnnxOptions& options,
                           OnnxSummary* summary = nullptr);

}  // namespace ascendsim::workloads
