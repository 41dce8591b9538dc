// The pipeline as a script builds it (sim/data_script.h): each new map op's cost formula, the
// reader's workers, a Python generator's yields, a host core's speed, a scan of one map's workers
// (falls near-linearly until another stage bounds) and dataset offload (Normalize's cost moves to
// device kernels, the pushed batch shrinks 4x). Bad scripts are refused naming the key or op.
#include <cmath>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include "runtime/data_pipeline.h"
#include "sim/api.h"
#include "sim/config.h"
#include "sim/core/error.h"
#include "sim/data_script.h"
#include "tests/test_support.h"
#include "workloads/dataset.h"
#include "workloads/workload.h"

namespace ascendsim {
namespace {

using workloads::DataRecipe;
using workloads::MapOp;
using workloads::MapOpType;

using test::raw_recipe;

/// One row's CPU time on the image's map() call (stage 1), in ns, without the per-op and hand-off costs.
double op_ns(runtime::HostConfig host, const DataRecipe& r) {
  host.map_op_overhead_us = 0;
  host.row_handoff_us = 0;
  runtime::PipelineConfig pipe;
  const runtime::PipelineCosts costs(host, pipe, r, 1, 10);
  return costs.stage_s(1, 0, 0, 1) * 1e9;
}

sim::DataScript script(const std::string& yaml) { return sim::parse_data_script(YAML::Load(yaml), "test.yaml:1"); }

TEST(DataScriptOps, RandomCropWithPaddingCopiesThePaddedImageThenTheCrop) {
  runtime::HostConfig host;
  host.crop_ns_per_value = 0.25;
  MapOp crop{MapOpType::RandomCrop, 32, 32};
  crop.pad = 4;
  EXPECT_NEAR(op_ns(host, raw_recipe(32, 32, {crop})), 0.25 * (40 * 40 * 3 + 32 * 32 * 3), 1e-9);
  crop.pad = 0;
  EXPECT_NEAR(op_ns(host, raw_recipe(32, 32, {crop})), 0.25 * 32 * 32 * 3, 1e-9);
}

TEST(DataScriptOps, CutOutWritesItsSquaresInsideTheImage) {
  runtime::HostConfig host;
  host.crop_ns_per_value = 0.5;
  MapOp cut{MapOpType::CutOut, 112, 112};
  EXPECT_NEAR(op_ns(host, raw_recipe(227, 227, {cut})), 0.5 * 112 * 112 * 3, 1e-9);
  cut.patches = 3;
  EXPECT_NEAR(op_ns(host, raw_recipe(227, 227, {cut})), 3 * 0.5 * 112 * 112 * 3, 1e-9);
  // A square larger than the image erases the image, no more.
  cut.patches = 1;
  cut.height = cut.width = 500;
  EXPECT_NEAR(op_ns(host, raw_recipe(227, 227, {cut})), 0.5 * 227 * 227 * 3, 1e-9);
}

TEST(DataScriptOps, RandomErasingChargesItsProbabilityTimesTheMeanErasedArea) {
  runtime::HostConfig host;
  host.crop_ns_per_value = 0.5;
  host.python_call_us = 30;
  MapOp erase{MapOpType::RandomErasing};
  erase.prob = 0.25;
  erase.scale_min = 0.02;
  erase.scale_max = 1.0 / 3;
  erase.ratio_min = 0.3;
  erase.ratio_max = 3.3;
  const double a = workloads::random_erasing_mean_area(1.0);
  // Rejected attempts (a tall or wide rectangle of a large area) keep the mean below the scale's.
  EXPECT_GT(a, 0.10);
  EXPECT_LT(a, (0.02 + 1.0 / 3) / 2);
  EXPECT_NEAR(op_ns(host, raw_recipe(224, 224, {erase})), 0.25 * 0.5 * 224 * 224 * 3 * a, 1e-6);
  erase.python = true;  // MindCV's, a Python transform: one call into the interpreter a row
  EXPECT_NEAR(op_ns(host, raw_recipe(224, 224, {erase})), 0.25 * 0.5 * 224 * 224 * 3 * a + 30e3, 1e-6);
}

TEST(DataScriptOps, RandomErasingsMeanAreaAgreesWithDraws) {
  // Monte Carlo of timm's sampler: ten attempts, the first that fits.
  std::mt19937_64 rng(5);
  std::uniform_real_distribution<double> u(0, 1);
  const double H = 224, W = 300;
  double sum = 0;
  const int n = 200000;
  for (int i = 0; i < n; ++i) {
    for (int k = 0; k < 10; ++k) {
      const double s = 0.02 + (1.0 / 3 - 0.02) * u(rng);
      const double r = std::exp(std::log(0.3) + (std::log(3.3) - std::log(0.3)) * u(rng));
      const double h = std::sqrt(s * H * W * r), w = std::sqrt(s * H * W / r);
      if (h <= H && w <= W) {
        sum += s;
        break;
      }
    }
  }
  EXPECT_NEAR(workloads::random_erasing_mean_area(W / H), sum / n, 0.002);
}

TEST(DataScriptOps, AFasterCoreDividesTheComputeButNotTheCopies) {
  runtime::HostConfig host;
  const DataRecipe r = raw_recipe(32, 32, {{MapOpType::Resize, 224, 224}, {MapOpType::Normalize}});
  const double base = op_ns(host, r);
  host.core_speed = 2;
  EXPECT_NEAR(op_ns(host, r), base / 2, 1e-9 * base);
  // The batch op's copy and the device queue's bytes are memory's, not the core's.
  runtime::PipelineConfig pipe;
  host.core_speed = 1;
  const runtime::PipelineCosts one(host, pipe, r, 8, 10);
  host.core_speed = 4;
  const runtime::PipelineCosts four(host, pipe, r, 8, 10);
  const std::size_t batch = one.stages().size() - 1;
  EXPECT_EQ(one.stages()[batch].kind, runtime::Stage::Kind::Batch);
  EXPECT_NEAR(four.stage_s(batch, 0, 0, 8), one.stage_s(batch, 0, 0, 8) - 8 * 0.75 * host.row_handoff_us * 1e-6,
              1e-12);
  EXPECT_DOUBLE_EQ(four.send_s(1e6), one.send_s(1e6));
}

TEST(DataScriptOps, AGeneratorPaysOnePythonCallAYield) {
  runtime::HostConfig host;
  host.python_call_us = 50;
  host.read_ns_per_byte = 0.5;
  runtime::PipelineConfig pipe;
  DataRecipe rows = raw_recipe(1, 64, {});
  rows.dataset.format = workloads::DatasetFormat::Generator;
  rows.dataset.record_bytes = 256;
  const runtime::PipelineCosts by_row(host, pipe, rows, 64, 10);
  EXPECT_NEAR(by_row.read_s(0), 64 * (50e-6 + 256 * 0.5e-9), 1e-12);
  DataRecipe batches = rows;
  batches.dataset.rows_per_yield = 64;
  const runtime::PipelineCosts by_batch(host, pipe, batches, 64, 10);
  EXPECT_NEAR(by_batch.read_s(0), 50e-6 + 64 * 256 * 0.5e-9, 1e-12);
  EXPECT_EQ(by_batch.stages()[0].name, "GeneratorDataset");
}

/// The steady step (ms) of a one-device run of resnet18 on CIFAR-10 under `yaml`, with the sets.
double steady_ms(const std::string& yaml, std::vector<std::string> sets = {}, std::int64_t batch = 32,
                 const std::string& workload = "resnet18") {
  sim::RunRequest r;
  r.config = test::config_request();
  const sim::DataScript d = script(yaml);
  r.config.sets = d.sets;
  r.config.sets.insert(r.config.sets.end(), sets.begin(), sets.end());
  r.data = std::make_shared<const DataRecipe>(d.recipe);
  r.data_where = "test.yaml";
  r.workload = workload;
  r.batch_size = batch;
  r.steps_per_epoch = 60;
  r.strategies = {runtime::Strategy::LoopSink};
  const auto out = sim::run(r);
  EXPECT_FALSE(out.failed()) << out.failure_message();
  return out.runs.front().steps.steady.stats().mean_ms;
}

std::string cifar_script(int workers) {
  return "dataset: cifar10\nreader_workers: 4\nmaps:\n  - workers: " + std::to_string(workers) +
         "\n    ops: [{RandomCrop: {size: 32, padding: 4}}, RandomHorizontalFlip, {Resize: {size: [224, 224]}}, "
         "Rescale, Normalize, HWC2CHW]\n  - {column: label, workers: 2, ops: [TypeCast]}\n";
}

TEST(DataScriptRuns, AScanOfOneMapsWorkersFallsNearLinearlyUntilAnotherStageBounds) {
  // A slow resize makes the image's map the bound up to 8 workers: the step halves as the workers
  // double. From 16 workers the device queue's push (10 ms a batch here) bounds instead, and the
  // step stops falling.
  const std::vector<std::string> sets = {"host.resize_ns_per_value=20", "host.device_queue_push_us=10000",
                                         "host.cpu_cores=64"};
  const double w1 = steady_ms(cifar_script(1), sets), w2 = steady_ms(cifar_script(2), sets),
               w4 = steady_ms(cifar_script(4), sets), w8 = steady_ms(cifar_script(8), sets),
               w16 = steady_ms(cifar_script(16), sets), w32 = steady_ms(cifar_script(32), sets);
  const double map1 = 32 * 20 * 224 * 224 * 3 * 1e-6;  // ms of resize a batch on one worker
  EXPECT_GT(w1, map1);
  EXPECT_LT(w1, 1.15 * map1);  // and the call's other ops, lighter
  EXPECT_NEAR(w2 / w1, 0.5, 0.03);
  EXPECT_NEAR(w4 / w2, 0.5, 0.03);
  EXPECT_NEAR(w8 / w4, 0.5, 0.05);
  EXPECT_GT(w8, w16);
  EXPECT_NEAR(w32, w16, 0.02 * w16);  // bounded by another stage: more workers give nothing
  EXPECT_GE(w16, 10.0);
}

TEST(DataScriptRuns, TheReadersWorkersShareItsReadsAndTheVerdictCountsThem) {
  // A slow reader (5 ns a byte of CIFAR-10's records) bounds the pipeline with one worker; four
  // share a batch's reads: the verdict's pipeline rate, and the run's step, follow.
  auto report = [](int readers) {
    sim::RunRequest r;
    r.config = test::config_request();
    const sim::DataScript d = script("dataset: cifar10\nreader_workers: " + std::to_string(readers) +
                                     "\nmaps:\n  - {workers: 16, ops: [{Resize: {size: [224, 224]}}, Rescale, HWC2CHW]}\n");
    r.config.sets = d.sets;
    r.config.sets.push_back("host.read_ns_per_byte=2000");
    r.config.sets.push_back("host.cpu_cores=64");
    r.data = std::make_shared<const DataRecipe>(d.recipe);
    r.data_where = "t.yaml";
    r.workload = "resnet18";
    r.steps_per_epoch = 40;
    r.strategies = {runtime::Strategy::LoopSink};
    return sim::run(r).report()["runs"][0]["data"];
  };
  const auto one = report(1), four = report(4);
  EXPECT_EQ(one["bounding_stage"], "Cifar10Dataset");
  // Its CPU, not storage: the advice says so, and offers the reader's workers.
  EXPECT_NE(one["advice"].get<std::string>().find("pipeline.reader_workers"), std::string::npos) << one["advice"];
  EXPECT_EQ(one["advice"].get<std::string>().find("faster storage"), std::string::npos) << one["advice"];
  EXPECT_NEAR(four["pipeline_batches_per_s"].get<double>() / one["pipeline_batches_per_s"].get<double>(), 4.0, 0.05);
}

TEST(DataScriptRuns, OffloadMovesNormalizeToTheDeviceAndShrinksThePushedBatchFourfold) {
  const std::string host_side =
      "dataset: imagenet\nmaps:\n  - ops: [{RandomCropDecodeResize: {size: 224}}, RandomHorizontalFlip]\n"
      "  - ops: [Normalize, HWC2CHW]\n  - {column: label, ops: [TypeCast]}\n";
  const std::string offloaded =
      "dataset: imagenet\nmaps:\n  - ops: [{RandomCropDecodeResize: {size: 224}}, RandomHorizontalFlip]\n"
      "  - {offload: true, ops: [Normalize, HWC2CHW]}\n  - {column: label, ops: [TypeCast]}\n";
  auto info = [](const std::string& yaml) {
    sim::RunRequest r;
    r.config = test::config_request();
    const sim::DataScript d = script(yaml);
    r.data = std::make_shared<const DataRecipe>(d.recipe);
    r.data_where = "test.yaml";
    r.workload = "resnet50";
    r.batch_size = 32;
    return sim::request_workload(r, sim::load_config(r.config));
  };
  const workloads::Workload on_host = info(host_side), on_device = info(offloaded);
  EXPECT_EQ(on_host.batch_bytes() - 32 * 4, 32 * 224 * 224 * 3 * 4);  // float CHW (and the labels)
  EXPECT_EQ(on_device.batch_bytes() - 32 * 4, 32 * 224 * 224 * 3);    // bytes, HWC
  // The device's graph begins with the offloaded ops: a cast, the normalisation, the transpose.
  std::vector<std::string> first;
  for (std::size_t i = 0; i < 4; ++i) first.push_back(on_device.graph.ops()[i].type);
  EXPECT_EQ(first, (std::vector<std::string>{"Cast", "Sub", "Mul", "Transpose"}));
  EXPECT_EQ(on_device.graph.ops().size(), on_host.graph.ops().size() + 4);
  // The host's execution tree loses Normalize and HWC2CHW: their call is no stage.
  runtime::HostConfig host;
  runtime::PipelineConfig pipe;
  const runtime::PipelineCosts h(host, pipe, on_host.data, 32, 10), d(host, pipe, on_device.data, 32, 10);
  EXPECT_EQ(h.stages().size(), d.stages().size() + 1);
  const double normalize = 32 * (host.normalize_ns_per_value + host.hwc2chw_ns_per_value) * 224 * 224 * 3 * 1e-9;
  double host_total = 0, device_total = 0;
  for (std::size_t s = 1; s < h.stages().size(); ++s) host_total += h.stage_s(s, 0, 0, 32);
  for (std::size_t s = 1; s < d.stages().size(); ++s) device_total += d.stage_s(s, 0, 0, 32);
  EXPECT_GT(host_total - device_total, normalize);  // and the batch copy of a quarter the bytes
}

TEST(DataScriptErrors, BadScriptsAreRefusedNamingTheKeyOrOp) {
  auto refused = [](const std::string& yaml, const std::string& words) {
    try {
      script(yaml);
      ADD_FAILURE() << "accepted: " << yaml;
    } catch (const sim::InputError& e) {
      EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
    }
  };
  refused("maps: []", "give 'dataset'");
  refused("dataset: svhn", "'dataset' is svhn");
  refused("dataset: cifar10\nmaps:\n  - ops: [Sharpen]", "unknown map op 'Sharpen'");
  refused("dataset: cifar10\nmaps:\n  - ops: [{Resize: {size: -3}}]", "'size' is -3");
  refused("dataset: cifar10\nmaps:\n  - ops: [{Resize: {sise: 3}}]", "unknown parameter 'sise'");
  refused("dataset: cifar10\nmaps:\n  - ops: [Resize]", "give its size");
  refused("dataset: cifar10\nmaps:\n  - {ops: [HWC2CHW], workers: 0}", "'workers' is 0");
  refused("dataset: cifar10\nmaps:\n  - {offload: true, ops: [RandomHorizontalFlip]}", "does not run on the device");
  refused("dataset: cifar10\nmaps:\n  - {ops: [TypeCast]}", "maps the label");
  refused("dataset: cifar10\nprefetch: 0", "'prefetch' is 0");
  refused("dataset: generator\nsamples: 10", "needs 'image'");
  refused("dataset: cifar10\nworkers: 3", "unknown key 'workers'");
  refused("dataset: cifar10\nmaps:\n  - {ops: [HWC2CHW], workers: 2}\n  - {column: label, ops: [TypeCast]}",
          "every map() call its 'workers'");
  // Decoding is a JPEG dataset's, once, first.
  refused("dataset: cifar10\nmaps:\n  - ops: [{RandomCropDecodeResize: {size: 224}}]", "decodes JPEG files, but a");
  refused("dataset: imagenet\nmaps:\n  - ops: [{Resize: {size: 256}}, Decode]", "Resize on JPEG bytes");
  refused("dataset: imagenet\nmaps:\n  - ops: [Decode, Decode]", "decodes the image a second time");
  refused("dataset: imagenet\nmaps:\n  - {column: label, ops: [TypeCast]}", "the JPEG files are never decoded");
  refused("dataset: generator\nsamples: 10\nimage: [1, 1, 4]\ncolumns: [image, label]", "'columns' is a count");
}

TEST(DataScriptErrors, ARecordRowShorterThanTheNetworksSampleOrNotFloatIsRefused) {
  auto error = [](const std::string& yaml) {
    sim::RunRequest r;
    r.config = test::config_request();
    r.data = std::make_shared<const DataRecipe>(script(yaml).recipe);
    r.data_where = "g.yaml";
    r.workload = "resnet18";
    try {
      sim::request_workload(r, sim::load_config(r.config));
    } catch (const sim::InputError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_NE(error("dataset: generator\nsamples: 100\nimage: [100, 100, 3]").find("30000 values, but resnet18 takes 150528"),
            std::string::npos);
  EXPECT_NE(error("dataset: generator\nsamples: 100\nimage: [3, 224, 224]\nrecord_bytes: 150528")
                .find("less than the 150528 float32 values"),
            std::string::npos);
  EXPECT_EQ(error("dataset: generator\nsamples: 100\nimage: [3, 224, 224]"), "");  // float32 rows
  EXPECT_EQ(error("dataset: generator\nsamples: 100\nimage: [3, 224, 224]\nrecord_bytes: 150528\n"
                  "maps:\n  - ops: [Rescale]"),
            "");
}

TEST(DataScriptErrors, AScriptWhoseImageIsNotTheNetworksInputIsRefused) {
  sim::RunRequest r;
  r.config = test::config_request();
  const sim::DataScript d =
      script("dataset: cifar10\nmaps:\n  - ops: [{Resize: {size: [227, 227]}}, Rescale, HWC2CHW]\n");
  r.data = std::make_shared<const DataRecipe>(d.recipe);
  r.data_where = "f.yaml";
  r.workload = "resnet18";
  try {
    sim::request_workload(r, sim::load_config(r.config));
    ADD_FAILURE() << "accepted";
  } catch (const sim::InputError& e) {
    EXPECT_NE(std::string(e.what()).find("227x227x3"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("224x224x3"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace ascendsim
