// The layers the ImageNet workloads are built from, under a training recipe: convolutions
// (dense and depthwise, no bias), BatchNorm, activations and the dense head, with the recipe's
// precision — fp32 master weights cast to the compute precision every step under O2, BatchNorm
// in fp32 between casts when kept in fp32 — and the weights that take weight decay.
#pragma once

#include <cstdio>
#include <set>
#include <string>

#include "workloads/graph.h"
#include "workloads/training.h"
#include "workloads/workload.h"

namespace ascendsim::workloads {

class NetBuilder {
 public:
  NetBuilder(Graph& g, const Recipe& r)
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
    return m_g.conv2d(name + "/Conv2D", x, w, {k, k, stride, pad, pad});
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
  TensorId relu6(const std::string& name, TensorId x) { return m_g.apply("ReLU6", name + "/ReLU6", {x})[0]; }

  /// Depthwise conv without bias: one k x k filter per channel.
  TensorId depthwise(const std::string& name, TensorId x, std::int64_t k, std::int64_t stride, std::int64_t pad) {
    const std::int64_t c = m_g.tensor(x).shape[1];
    TensorId w = m_g.add_tensor({name + ".weight", {c, 1, k, k}, m_master, TensorRole::Parameter});
    m_decayed.insert(w);
    if (m_master != m_compute) w = m_g.cast(name + "/Cast", w, m_compute);
    OpAttrs a;
    a.conv = {k, k, stride, pad, pad};
    return m_g.apply("DepthwiseConv2dNative", name + "/DepthwiseConv2dNative", {x, w}, a)[0];
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

  /// The batch of `w`: an [n, 3, 224, 224] image and its labels; returns the image in the
  /// compute precision.
  TensorId image_input(Workload& w) {
    const std::int64_t n = w.batch_size;
    TensorId image = m_g.add_tensor({"image", {n, 3, 224, 224}, DType::F32, TensorRole::Input});
    m_label = m_g.add_tensor({"label", {n}, DType::I32, TensorRole::Label});
    w.batch_inputs = {image, m_label};
    return m_compute == DType::F32 ? image : m_g.cast("input/Cast", image, m_compute);
  }

  /// Trains the classifier whose logits are `x`, as the model zoo's ImageNet scripts: softmax
  /// cross entropy over a one-hot with label smoothing 0.1, in fp32; the loss scale as the
  /// backward sensitivity; Momentum 0.9 with `weight_decay` on the decayed weights and a per-step
  /// learning-rate schedule over `schedule_epochs`.
  void train_classifier(Workload& w, const Recipe& recipe, TensorId x, std::int64_t classes, double weight_decay,
                        const char* weight_decay_text, std::int64_t schedule_epochs) {
    TensorId logits = m_compute == DType::F32 ? x : m_g.cast("loss/CastLogits", x, DType::F32);
    TensorId onehot = m_g.one_hot("loss/OneHot", m_label, classes, DType::F32);  // on 0.9 + 0.1/C, off 0.1/C
    TensorId per_sample = m_g.softmax_cross_entropy("loss/SoftmaxCrossEntropyWithLogits", logits, onehot);
    w.loss = m_g.reduce_mean("loss/ReduceMean", per_sample);
    TensorId sens = m_g.add_tensor({"loss_scale", {1}, DType::F32, TensorRole::Constant});
    OptimizerSpec opt;
    opt.loss_scale = recipe.loss_scale;
    opt.weight_decay = weight_decay;
    w.hyper = {0.1, 0.9, opt.weight_decay};
    opt.decayed = m_decayed;
    opt.lr_schedule_steps = schedule_epochs * w.steps_per_epoch();
    opt.lars = recipe.optimizer == "lars";
    char scale[32];
    std::snprintf(scale, sizeof scale, "%g", recipe.loss_scale);
    w.optimizer =
        std::string(opt.lars ? "LARS(Momentum(momentum=0.9), weight_decay=" : "Momentum(momentum=0.9, weight_decay=") +
        weight_decay_text + "), loss scale " + scale + ", per-step lr schedule";
    w.sens = sens;
    w.optimizer_spec = opt;
    append_momentum(m_g, append_backward(m_g, w.loss, sens), opt);
  }

  const std::set<TensorId>& decayed() const { return m_decayed; }
  Graph& graph() { return m_g; }

 private:
  Graph& m_g;
  DType m_compute, m_master;
  bool m_bn_fp32;
  std::set<TensorId> m_decayed;
  TensorId m_label = -1;
};

}  // namespace ascendsim::workloads
