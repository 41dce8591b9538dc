#include "workloads/mobilenet.h"

#include "workloads/net_builder.h"
#include "workloads/training.h"

namespace ascendsim::workloads {

namespace {

/// One inverted residual block: expand by `t` (1x1), depthwise 3x3 at `stride`, project to `out`
/// (1x1, no activation); the input is added back when the stride is 1 and the channels agree.
TensorId inverted_residual(NetBuilder& b, const std::string& name, TensorId x, std::int64_t t, std::int64_t out,
                           std::int64_t stride) {
  Graph& g = b.graph();
  const std::int64_t in = g.tensor(x).shape[1];
  TensorId y = x;
  int layer = 0;
  auto conv_bn = [&](TensorId v, std::int64_t cout, bool act) {
    const std::string at = name + ".conv." + std::to_string(layer++);
    v = b.bn(at + ".1", b.conv(at + ".0", v, cout, 1, 1, 0));
    return act ? b.relu6(at, v) : v;
  };
  if (t != 1) y = conv_bn(y, in * t, true);
  {
    const std::string at = name + ".conv." + std::to_string(layer++);
    y = b.relu6(at, b.bn(at + ".1", b.depthwise(at + ".0", y, 3, stride, 1)));
  }
  y = conv_bn(y, out, false);
  return stride == 1 && in == out ? g.add(name + "/Add", y, x) : y;
}

constexpr std::int64_t kLrScheduleEpochs = 200;  // the seed's MobileNetV2 run: 200 epochs

}  // namespace

Workload make_mobilenet_v2(std::int64_t batch_size, const Recipe& recipe) {
  Workload w;
  w.recipe = recipe;
  w.name = "mobilenetv2";
  w.description = "MobileNetV2 (width 1.0) on ImageNet 224x224, 1000 classes, O2 mixed precision";
  w.batch_size = batch_size;
  w.data = mobilenet_train_recipe();
  w.eval_data = imagenet_eval_recipe();
  Graph& g = w.graph;
  NetBuilder b(g, recipe);
  TensorId x = b.image_input(w);
  x = b.relu6("features.0", b.bn("features.0.1", b.conv("features.0.0", x, 32, 3, 2, 1)));
  // torchvision's inverted residual setting: expansion t, channels c, repeats n, first stride s.
  const std::int64_t setting[7][4] = {{1, 16, 1, 1}, {6, 24, 2, 2},  {6, 32, 3, 2}, {6, 64, 4, 2},
                                      {6, 96, 3, 1}, {6, 160, 3, 2}, {6, 320, 1, 1}};
  int index = 1;
  for (const auto& s : setting)
    for (std::int64_t i = 0; i < s[2]; ++i, ++index)
      x = inverted_residual(b, "features." + std::to_string(index), x, s[0], s[1], i == 0 ? s[3] : 1);
  const std::string last = "features." + std::to_string(index);
  x = b.relu6(last, b.bn(last + ".1", b.conv(last + ".0", x, 1280, 1, 1, 0)));
  x = g.reduce_mean("avgpool/ReduceMean", x);
  x = b.dense("classifier.1", x, 1000);

  b.train_classifier(w, recipe, x, 1000, 4e-5, "4e-5", kLrScheduleEpochs);
  return w;
}

}  // namespace ascendsim::workloads
