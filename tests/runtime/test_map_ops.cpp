// The model zoo's ImageNet map ops: RandomCropDecodeResize (the random resized crop's mean window,
// its cost) and RandomColorAdjust (its pixels against hand-computed references, its cost); the
// ResNet and MobileNetV2 recipes built from them.
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "runtime/data_pipeline.h"
#include "runtime/image_ops.h"
#include "sim/api.h"
#include "sim/core/error.h"
#include "tests/test_support.h"
#include "workloads/dataset.h"
#include "workloads/workload.h"

namespace ascendsim {
namespace {

using workloads::DataRecipe;
using workloads::MapOp;
using workloads::MapOpType;

using test::raw_recipe;

/// One row's CPU time on the image's map() call (stage 1), in ns.
double image_call_ns(const runtime::HostConfig& host, const DataRecipe& r) {
  runtime::PipelineConfig pipe;
  const runtime::PipelineCosts costs(host, pipe, r, 1, 10);
  EXPECT_EQ(costs.stages()[1].kind, runtime::Stage::Kind::Map);
  return costs.stage_s(1, 0, 0, 1) * 1e9;
}

TEST(RandomResizedCrop, TheMeanWindowAgreesWithTheSamplersOwnDraws) {
  // The analytic mean against 100,000 windows the functional mode's sampler draws, for the
  // synthetic ImageNet's mean geometry and the extremes of its spread (aspects 0.6 to 1.67).
  std::mt19937_64 rng(17);
  for (const auto& [h, w] : std::vector<std::pair<std::int64_t, std::int64_t>>{
           {350, 400}, {300, 300}, {437, 300}, {262, 500}}) {
    const int n = 100000;
    double sum = 0;
    for (int i = 0; i < n; ++i) {
      const auto win = runtime::image::random_resized_crop_window(h, w, 0.08, 1.0, 0.75, 4.0 / 3, rng);
      ASSERT_LE(win.h, h);
      ASSERT_LE(win.w, w);
      ASSERT_LE(win.y0 + win.h, h);
      ASSERT_LE(win.x0 + win.w, w);
      sum += static_cast<double>(win.h * win.w) / static_cast<double>(h * w);
    }
    const double analytic = workloads::random_resized_crop_mean_area(static_cast<double>(w) / static_cast<double>(h));
    // Sampling error ~0.0009 (sd 0.29 / sqrt(n)); the sampler's rounding to whole pixels ~0.002.
    EXPECT_NEAR(sum / n, analytic, 0.005) << h << "x" << w;
  }
  // Rejections pull the accepted windows below the scale's mean (0.54 = (0.08 + 1) / 2), the
  // whole-image fallback pushes up: for 400x350, 0.469; the farther from square, the smaller.
  const double mean = workloads::random_resized_crop_mean_area(400.0 / 350);
  EXPECT_LT(mean, 0.54);
  EXPECT_GT(mean, 0.08);
  EXPECT_GT(workloads::random_resized_crop_mean_area(1.0), mean);
  EXPECT_GT(mean, workloads::random_resized_crop_mean_area(1.6));
  // Degenerate ranges by hand: a fixed scale that always fits keeps exactly it; one that never
  // fits (a square window in a 2:1 image at full area) falls back to the whole image.
  EXPECT_NEAR(workloads::random_resized_crop_mean_area(1.0, 0.3, 0.3, 1.0, 1.0), 0.3, 1e-12);
  EXPECT_NEAR(workloads::random_resized_crop_mean_area(2.0, 1.0, 1.0, 1.0, 1.0), 1.0, 1e-12);
  // A square image, a square window, scale uniform on [0.2, 1]: every draw fits, mean 0.6.
  EXPECT_NEAR(workloads::random_resized_crop_mean_area(1.0, 0.2, 1.0, 1.0, 1.0), 0.6, 1e-12);
}

TEST(RandomCropDecodeResize, ItsCostIsTheWindowsDecodePlusTheResizePlusOneOp) {
  runtime::HostConfig host;
  host.decode_ns_per_pixel = 8;
  host.resize_ns_per_value = 1.5;
  host.map_op_overhead_us = 1;
  host.row_handoff_us = 2;
  const DataRecipe fused = raw_recipe(350, 400, {{MapOpType::RandomCropDecodeResize, 224, 224}});
  host.entropy_decode_fraction = 0.4;
  const double f = workloads::random_resized_crop_mean_area(400.0 / 350);
  // The entropy decoding (0.4 of a decode) down to the window's mean last row, (1 + sqrt(f)) / 2 of
  // the image's rows, across the width; the rest of the decode over the window.
  const double decoded = 350 * 400 * (0.4 * (1 + std::sqrt(f)) / 2 + 0.6 * f);
  const double expected = 8 * decoded + 1.5 * 224 * 224 * 3 + 1000 + 2000;  // + the row's hand-off
  EXPECT_NEAR(image_call_ns(host, fused), expected, 1e-6 * expected);
  // A cropped decode costs less than a full one, more than the window's alone.
  EXPECT_LT(decoded, 350 * 400);
  EXPECT_GT(decoded, 350 * 400 * f);
  host.entropy_decode_fraction = 0;  // all of a decode per decoded pixel: the window's pixels only
  EXPECT_NEAR(image_call_ns(host, fused), 8 * 350 * 400 * f + 1.5 * 224 * 224 * 3 + 3000, 1e-6 * expected);
}

TEST(RandomCropDecodeResize, TheFusedRecipeSavesTheDecodeOutsideTheWindowTheCropAndTwoOps) {
  // ResNet's training call as the old three ops (Decode, RandomCrop of the same mean area,
  // Resize) and as the fused one; the rest alike.
  runtime::HostConfig host;
  const double f = workloads::random_resized_crop_mean_area(400.0 / 350);
  const std::vector<MapOp> tail = {{MapOpType::RandomHorizontalFlip}, {MapOpType::Normalize}, {MapOpType::HWC2CHW}};
  std::vector<MapOp> three = {{MapOpType::Decode}, {MapOpType::RandomCrop, 0, 0, f}, {MapOpType::Resize, 224, 224}};
  std::vector<MapOp> one = {{MapOpType::RandomCropDecodeResize, 224, 224}};
  three.insert(three.end(), tail.begin(), tail.end());
  one.insert(one.end(), tail.begin(), tail.end());
  host.entropy_decode_fraction = 0;  // the window's pixels decoded, as the three ops' crop keeps them
  const double old_ns = image_call_ns(host, raw_recipe(350, 400, three));
  const double new_ns = image_call_ns(host, raw_recipe(350, 400, one));
  const double saved = host.decode_ns_per_pixel * 350 * 400 * (1 - f)  // the rows and columns not decoded
                       + host.crop_ns_per_value * 350 * 400 * f * 3     // no separate crop copy
                       + 2 * host.map_op_overhead_us * 1e3;             // one op instead of three
  EXPECT_LT(new_ns, old_ns);
  EXPECT_NEAR(old_ns - new_ns, saved, 1e-6 * old_ns);
  // The decode saved is most of it.
  EXPECT_GT(host.decode_ns_per_pixel * 350 * 400 * (1 - f), 0.5 * saved);
}

TEST(RandomColorAdjust, ItsCostIsPerOutputValue) {
  runtime::HostConfig host;
  host.color_adjust_ns_per_value = 2.5;
  host.map_op_overhead_us = 1;
  host.row_handoff_us = 2;
  MapOp jitter{MapOpType::RandomColorAdjust};
  jitter.brightness = jitter.contrast = jitter.saturation = 0.4;
  const double expected = 2.5 * 224 * 224 * 3 + 1000 + 2000;
  EXPECT_NEAR(image_call_ns(host, raw_recipe(224, 224, {jitter})), expected, 1e-6 * expected);
  // Doubling the parameter doubles the op's share.
  host.color_adjust_ns_per_value = 5;
  EXPECT_NEAR(image_call_ns(host, raw_recipe(224, 224, {jitter})), expected + 2.5 * 224 * 224 * 3, 1e-6 * expected);
}

/// A 2x2 RGB image of 8-bit values.
std::vector<float> tiny() { return {200, 100, 50, 10, 20, 30, 255, 255, 255, 0, 128, 64}; }

TEST(RandomColorAdjust, TheBlendsAgainstHandComputedReferences) {
  namespace image = runtime::image;
  // Factor 1 for all three: the identity (each step's rounding leaves whole numbers alone).
  std::vector<float> img = tiny();
  image::color_adjust(img, 2, 2, 3, 1, 1, 1);
  EXPECT_EQ(img, tiny());
  // The grey of each pixel, 0.299 R + 0.587 G + 0.114 B rounded: 124.2 -> 124, 18.15 -> 18,
  // 255, 82.43 -> 82.
  const std::vector<float> grey = {124, 124, 124, 18, 18, 18, 255, 255, 255, 82, 82, 82};
  img = tiny();
  image::color_adjust(img, 2, 2, 3, 1, 1, 0, {2, -1, -1});  // saturation 0: the grey image
  EXPECT_EQ(img, grey);
  // Contrast 0: every value the grey image's mean, (124 + 18 + 255 + 82) / 4 = 119.75 -> 120.
  img = tiny();
  image::color_adjust(img, 2, 2, 3, 1, 0, 1, {1, -1, -1});
  EXPECT_EQ(img, std::vector<float>(12, 120.0f));
  // Brightness 1.2: x * 1.2 rounded, 255 at most (200 -> 240, 255 -> 255, 128 -> 153.6 -> 154).
  img = tiny();
  image::color_adjust(img, 2, 2, 3, 1.2, 1, 1, {0, -1, -1});
  EXPECT_EQ(img, (std::vector<float>{240, 120, 60, 12, 24, 36, 255, 255, 255, 0, 154, 77}));
  // Saturation 2 pushes away from the grey, clamped: 124 + 2 (200 - 124) = 276 -> 255,
  // 124 + 2 (100 - 124) = 76, 124 + 2 (50 - 124) = -24 -> 0.
  img = tiny();
  image::color_adjust(img, 2, 2, 3, 1, 1, 2, {2, -1, -1});
  EXPECT_EQ(img[0], 255.0f);
  EXPECT_EQ(img[1], 76.0f);
  EXPECT_EQ(img[2], 0.0f);
  // Contrast 0.5 about the mean 120: 120 + 0.5 (200 - 120) = 160, 120 + 0.5 (10 - 120) = 65.
  img = tiny();
  image::color_adjust(img, 2, 2, 3, 1, 0.5, 1, {1, -1, -1});
  EXPECT_EQ(img[0], 160.0f);
  EXPECT_EQ(img[3], 65.0f);
}

TEST(RandomColorAdjust, TheRandomFactorsStayInTheirRangeAndRepeatWithTheSeed) {
  namespace image = runtime::image;
  // A flat grey image: contrast and saturation leave it alone, brightness scales it by a factor in
  // [0.6, 1.4]; over many draws both ends are reached.
  double lo = 2, hi = 0;
  std::mt19937_64 rng(3);
  for (int i = 0; i < 2000; ++i) {
    std::vector<float> img(4 * 4 * 3, 100.0f);
    image::random_color_adjust(img, 4, 4, 3, 0.4, 0.4, 0.4, rng);
    for (float v : img) EXPECT_EQ(v, img[0]);
    lo = std::min(lo, img[0] / 100.0);
    hi = std::max(hi, img[0] / 100.0);
  }
  EXPECT_GE(lo, 0.6 - 0.005);
  EXPECT_LE(hi, 1.4 + 0.005);
  EXPECT_LT(lo, 0.62);
  EXPECT_GT(hi, 1.38);
  // Deterministic given the generator's state; a different state gives other pixels.
  std::mt19937_64 a(9), b(9), c(10);
  std::vector<float> x = tiny(), y = tiny(), z = tiny();
  image::random_color_adjust(x, 2, 2, 3, 0.4, 0.4, 0.4, a);
  image::random_color_adjust(y, 2, 2, 3, 0.4, 0.4, 0.4, b);
  image::random_color_adjust(z, 2, 2, 3, 0.4, 0.4, 0.4, c);
  EXPECT_EQ(x, y);
  EXPECT_NE(x, z);
  // Ranges of 0 leave the image alone.
  std::vector<float> same = tiny();
  image::random_color_adjust(same, 2, 2, 3, 0, 0, 0, a);
  EXPECT_EQ(same, tiny());
}

TEST(ModelZooRecipes, ResNetAndMobileNetV2TrainAsTheirScripts) {
  const auto resnet = workloads::make_workload("resnet50", 32);
  std::vector<std::string> names;
  for (const auto& c : resnet.data.calls()) names.push_back(c.name);
  EXPECT_EQ(names, (std::vector<std::string>{"Map(RandomCropDecodeResize,RandomHorizontalFlip,Normalize,HWC2CHW)",
                                             "Map(TypeCast)"}));
  const auto mobilenet = workloads::make_workload("mobilenetv2", 32);
  names.clear();
  for (const auto& c : mobilenet.data.calls()) names.push_back(c.name);
  EXPECT_EQ(names, (std::vector<std::string>{
                       "Map(RandomCropDecodeResize,RandomHorizontalFlip,RandomColorAdjust,Normalize,HWC2CHW)",
                       "Map(TypeCast)"}));
  for (const auto& op : mobilenet.data.maps)
    if (op.type == MapOpType::RandomColorAdjust) {
      EXPECT_EQ(op.brightness, 0.4);
      EXPECT_EQ(op.contrast, 0.4);
      EXPECT_EQ(op.saturation, 0.4);
    }
  // Its evaluation recipe is ResNet's.
  ASSERT_EQ(mobilenet.eval_data.maps.size(), resnet.eval_data.maps.size());
  for (std::size_t i = 0; i < resnet.eval_data.maps.size(); ++i)
    EXPECT_EQ(mobilenet.eval_data.maps[i].type, resnet.eval_data.maps[i].type);
  // MobileNetV2's shuffle buffer of 1000 rows is a Shuffle stage before the batch; ResNet has none;
  // pipeline.shuffle_buffer, when set, replaces the script's.
  runtime::HostConfig host;
  runtime::PipelineConfig pipe;
  auto stages = [&](const DataRecipe& r) {
    std::vector<std::string> out;
    const runtime::PipelineCosts costs(host, pipe, r, 32, 10);
    for (const auto& st : costs.stages()) out.push_back(st.name);
    return out;
  };
  EXPECT_EQ(runtime::PipelineCosts(host, pipe, mobilenet.data, 32, 10).shuffle_buffer(), 1000);
  EXPECT_EQ(stages(mobilenet.data)[3], "Shuffle");
  EXPECT_EQ(stages(resnet.data)[3], "Batch");
  pipe.shuffle_buffer = 0;
  EXPECT_EQ(stages(mobilenet.data)[3], "Batch");
  pipe.shuffle_buffer = 64;
  EXPECT_EQ(stages(resnet.data)[3], "Shuffle");
  // Both new ops are random: a map cache after either is refused, naming it.
  pipe = runtime::PipelineConfig();
  pipe.cache = "map";
  for (std::int64_t after : {1, 3}) {
    pipe.cache_after = after;
    try {
      runtime::PipelineCosts(host, pipe, mobilenet.data, 32, 10);
      ADD_FAILURE() << "a cache after " << after << " ops accepted";
    } catch (const sim::InputError& e) {
      EXPECT_NE(std::string(e.what()).find("RandomCropDecodeResize, a random augmentation"), std::string::npos)
          << e.what();
    }
  }
  // With the first op deterministic, a cache after RandomColorAdjust names it.
  DataRecipe jitter_only = mobilenet.data;
  jitter_only.maps = {{MapOpType::Decode}, jitter_only.maps[2]};
  pipe.cache_after = 2;
  try {
    runtime::PipelineCosts(host, pipe, jitter_only, 32, 10);
    ADD_FAILURE() << "a cache after RandomColorAdjust accepted";
  } catch (const sim::InputError& e) {
    EXPECT_NE(std::string(e.what()).find("RandomColorAdjust, a random augmentation"), std::string::npos) << e.what();
  }
}

TEST(ModelZooRecipes, TheAdviceOffersAMapCacheOnlyWhereOneCanHoldSomething) {
  // A host of 1 core under a heavy decode: more workers than cores would be needed. LeNet's recipe
  // begins with a deterministic resize, so a map cache is advised; ResNet's begins with the random
  // RandomCropDecodeResize, where a map cache is refused, so it is not.
  auto advice = [](const std::string& workload, const std::vector<std::string>& sets) {
    sim::RunRequest r;
    r.config = test::config_request();
    r.config.sets = sets;
    r.workload = workload;
    r.batch_size = 32;
    r.steps_per_epoch = 10;
    r.strategies = {runtime::Strategy::DataSink};
    return sim::run(r).report()["runs"][0]["data"]["advice"].get<std::string>();
  };
  const std::string resnet = advice("resnet50", {"host.cpu_cores=1", "host.decode_ns_per_pixel=200"});
  EXPECT_NE(resnet.find("but the host has 1 cores"), std::string::npos) << resnet;
  EXPECT_EQ(resnet.find("--cache map"), std::string::npos) << resnet;
  const std::string lenet = advice("lenet5", {"host.cpu_cores=1", "host.resize_ns_per_value=2000"});
  EXPECT_NE(lenet.find("but the host has 1 cores"), std::string::npos) << lenet;
  EXPECT_NE(lenet.find("--cache map"), std::string::npos) << lenet;
}

}  // namespace
}  // namespace ascendsim
