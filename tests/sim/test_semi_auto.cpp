// Semi-automatic parallelism: strategies, layout propagation, the inserted collectives, per-device
// memory, and its equivalence with data parallelism when nothing but the batch is cut.
#include <fstream>

#include <gtest/gtest.h>

#include "aicpu/hccl.h"
#include "runtime/graph_compiler.h"
#include "sim/api.h"
#include "sim/core/error.h"
#include "sim/system.h"
#include "tests/test_support.h"
#include "workloads/parallel.h"

namespace ascendsim {
namespace {

using workloads::ShardPlan;
using workloads::ShardStrategy;

TEST(SemiAuto, StrategiesParseInMindSporesNotation) {
  EXPECT_EQ(workloads::parse_shard_strategy("((1,1,1,4),(1,))"), (ShardStrategy{{1, 1, 1, 4}, {1}}));
  EXPECT_EQ(workloads::parse_shard_strategy(" ( (2, 1) , (1, 4) ) "), (ShardStrategy{{2, 1}, {1, 4}}));
  EXPECT_EQ(workloads::shard_strategy_string({{1, 1, 1, 4}, {1}}), "((1,1,1,4),(1,))");
  for (const char* bad : {"", "(1,4)", "((1,4)", "((0,4),(1,))", "((1,x),(1,))", "((1,4),(1,)))", "(())"})
    EXPECT_THROW(workloads::parse_shard_strategy(bad), std::invalid_argument) << bad;
}

workloads::Workload sliced(const workloads::SemiAutoConfig& c, ShardPlan* plan, const std::string& name = "mlp-slice",
                           std::int64_t batch = 32) {
  return workloads::semi_auto(workloads::make_workload(name, batch), c, plan);
}

const ShardPlan::TensorLayout& layout_of(const ShardPlan& p, const std::string& tensor) {
  for (const auto& l : p.layouts)
    if (l.tensor == tensor) return l;
  throw std::runtime_error("no layout for " + tensor);
}

std::int64_t elements_of(const workloads::Workload& w, const std::string& name) {
  for (const auto& t : w.graph.tensors())
    if (t.name == name) return t.elements();
  return -1;
}

TEST(SemiAuto, AWidthSlicedImageFlowsThroughFlattenIntoARowSplitMatMul) {
  // Seed 002: 8 devices, each image cut into four 28x7 strips. Flatten keeps the cut (a strip is a
  // set of the 784 columns); layer1 follows it with its weight cut the same way, so each rank
  // computes partial sums of layer1's output, AllReduced among the 4 ranks of one image.
  workloads::SemiAutoConfig c;
  c.devices = 8;
  c.dataset = {{1, 1, 1, 4}, {1}};
  ShardPlan p;
  const auto w = sliced(c, &p);
  EXPECT_EQ(layout_of(p, "image").local, (workloads::Shape{32, 1, 28, 7}));
  EXPECT_EQ(layout_of(p, "flatten/Reshape:0").cuts, (std::vector<std::int64_t>{1, 4}));
  EXPECT_EQ(layout_of(p, "layer1/MatMul:0").partial, 4);
  EXPECT_EQ(layout_of(p, "layer1/BiasAdd:0").partial, 1);
  ASSERT_EQ(p.collectives.size(), 1u);
  EXPECT_EQ(p.collectives[0].kind, "AllReduce");
  EXPECT_EQ(p.collectives[0].group_size, 4);
  EXPECT_EQ(p.collectives[0].group_stride, 1);  // ranks 0-3 and 4-7: strip r mod 4
  EXPECT_EQ(p.collectives[0].bytes, 32 * 512 * 4);
  // Per device: layer1's weight in four, the rest whole; the batch is not cut, so every rank
  // reads the same samples and no gradient needs averaging.
  EXPECT_EQ(elements_of(w, "layer1.weight"), 512 * 784 / 4);
  EXPECT_EQ(p.parameters_global, 669706);
  EXPECT_EQ(p.parameters_local, 669706 - 512 * 784 * 3 / 4);
  EXPECT_EQ(w.parallel.gradient_group_size, 1);
  EXPECT_EQ(w.parallel.data_shards, 1);
  EXPECT_EQ(w.batch_size, 32);
  ASSERT_FALSE(w.data.maps.empty());
  EXPECT_EQ(w.data.maps.back().type, workloads::MapOpType::SlicePatches);
  // The compiled step: the forward AllReduce and nothing else to communicate (its backward passes
  // the gradient through).
  const sim::SystemConfig cfg = sim::load_config(test::config_request());
  const runtime::CompiledGraph g = sim::compile_for(cfg, w);
  std::int64_t comm = 0;
  for (const auto& t : g.step_tasks)
    if (t.kind == hostif::TaskKind::Comm) {
      ++comm;
      EXPECT_EQ(t.stream, 1);  // on the communication stream, ordered by events
      EXPECT_EQ(t.group.size, 4);
      EXPECT_EQ(t.comm_bytes, 32 * 512 * 4);
    }
  EXPECT_EQ(comm, 1);
  std::int64_t records = 0, waits = 0;
  for (const auto& t : g.step_tasks) {
    records += t.kind == hostif::TaskKind::EventRecord;
    waits += t.kind == hostif::TaskKind::EventWait;
  }
  EXPECT_EQ(records, 2);  // the producer's done, the collective's done
  EXPECT_EQ(waits, 2);
  EXPECT_EQ(g.input_bytes.front(), 32 * 28 * 7 * 4);  // the strip is what crosses PCIe
}

TEST(SemiAuto, RowAndColumnSplitMatMulsGetTheirCollectives) {
  workloads::SemiAutoConfig c;
  c.devices = 4;
  c.dataset = {{1, 1, 1, 1}, {1}};
  {  // layer2 split along its contraction: partial sums, AllReduced before the bias
    c.layers = {{"layer2", {{1, 4}, {1, 4}}}};
    ShardPlan p;
    const auto w = sliced(c, &p);
    EXPECT_EQ(layout_of(p, "layer2/MatMul:0").partial, 4);
    ASSERT_EQ(p.collectives.size(), 1u);
    EXPECT_EQ(p.collectives[0].kind, "AllReduce");
    EXPECT_EQ(elements_of(w, "layer2.weight"), 512 * 512 / 4);
    EXPECT_EQ(elements_of(w, "layer2.bias"), 512);
  }
  {  // layer2 split along its outputs: each rank its 128 features, the bias too; layer3 follows
     // its input (contraction cut 4) and AllReduces its partial sums
    c.layers = {{"layer2", {{1, 1}, {4, 1}}}};
    ShardPlan p;
    const auto w = sliced(c, &p);
    EXPECT_EQ(layout_of(p, "layer2/MatMul:0").cuts, (std::vector<std::int64_t>{1, 4}));
    EXPECT_EQ(layout_of(p, "layer2/MatMul:0").partial, 1);
    EXPECT_EQ(layout_of(p, "relu2/ReLU:0").local, (workloads::Shape{32, 128}));
    EXPECT_EQ(layout_of(p, "layer3/MatMul:0").partial, 4);
    // layer2's input is whole on the 4 ranks that each compute a quarter of its outputs: the input's
    // gradient is a partial sum on each, AllReduced in backward (MindSpore's MirrorOperator).
    ASSERT_EQ(p.collectives.size(), 2u);
    EXPECT_EQ(p.collectives[0].name, "layer2/MatMul/Mirror/AllReduce (backward)");
    EXPECT_FALSE(p.collectives[0].forward);
    EXPECT_EQ(p.collectives[0].bytes, 32 * 512 * 4);
    EXPECT_EQ(p.collectives[1].name, "layer3/BiasAdd/AllReduce");
    EXPECT_EQ(elements_of(w, "layer2.weight"), 512 * 512 / 4);
    EXPECT_EQ(elements_of(w, "layer2.bias"), 128);
    EXPECT_EQ(elements_of(w, "layer3.weight"), 10 * 512 / 4);
  }
  {  // the batch cut 2 and layer1 cut 2 along its outputs (a 2x2 device matrix): the 2 ranks of
     // one half of the batch hold different weights, the ranks of one weight piece different data
    c.dataset = {{2, 1, 1, 1}, {2}};
    c.layers = {{"layer1", {{2, 1}, {2, 1}}}};
    ShardPlan p;
    const auto w = sliced(c, &p);
    EXPECT_EQ(w.batch_size, 16);
    EXPECT_EQ(w.parallel.data_shards, 2);
    EXPECT_EQ(w.parallel.gradient_group_size, 2);
    EXPECT_EQ(elements_of(w, "layer1.weight"), 512 * 784 / 2);
  }
}

TEST(SemiAuto, ACutMovingToAnotherDimensionIsOneAllToAll) {
  // The batch cut 4 ways, layer1 cut along its contraction 4 ways on the same ranks: the flattened
  // input goes from batch pieces to column pieces in one AllToAll; the labels follow the whole
  // batch the loss sees (an AllGather).
  workloads::SemiAutoConfig c;
  c.devices = 4;
  c.dataset = {{4, 1, 1, 1}, {4}};
  c.layers = {{"layer1", {{1, 4}, {1, 4}}}};
  ShardPlan p;
  const auto w = sliced(c, &p);
  ASSERT_EQ(p.collectives.size(), 3u);
  EXPECT_EQ(p.collectives[0].kind, "AllToAll");
  EXPECT_EQ(p.collectives[0].bytes, 8 * 784 * 4);  // each rank's [8, 784] before the exchange
  EXPECT_EQ(p.collectives[1].kind, "AllReduce");
  EXPECT_EQ(p.collectives[2].kind, "AllGather");
  EXPECT_EQ(w.parallel.data_shards, 4);
  // Every weight's op saw the whole batch: nothing to average.
  std::int64_t params = 0;
  for (const auto& t : w.graph.tensors()) params += t.role == workloads::TensorRole::Parameter;
  EXPECT_EQ(static_cast<std::int64_t>(w.parallel.unreduced.size()), params);
  // An AllToAll costs what an all-gather half does: (N-1) rounds of one N-th of the buffer.
  const aicpu::HcclConfig hc;
  EXPECT_DOUBLE_EQ(aicpu::Hccl::ring_s(hc, hostif::Collective::AllToAll, 4, 1 << 20, 1200),
                   aicpu::Hccl::ring_s(hc, hostif::Collective::AllGather, 4, 1 << 20, 1200));
}

TEST(SemiAuto, APartialSumBroughtToAFinerCutIsOneReduceScatterGatheredBackOverItsRanks) {
  // 4 devices: the batch cut 2 over pairs of adjacent ranks (the repeated ranks fastest), layer2
  // split along its contraction within each pair. Its output strategy cuts the rows 4 ways — each
  // pair's rows in two — over the ranks of the partial sum: one ReduceScatter among the pair, no
  // AllReduce. layer3 wants the pair's rows back: an AllGather among the pair alone, whose
  // backward keeps the rank's piece of the gradient (layer3 is not split across the pair).
  workloads::SemiAutoConfig c;
  c.devices = 4;
  c.repeat_right = true;
  c.dataset = {{2, 1, 1, 1}, {2}};
  c.layers = {{"layer2", {{2, 2}, {1, 2}}}, {"layer3", {{2, 1}, {1, 1}}}};
  c.outputs = {{"layer2/MatMul", {{4, 1}}}};
  ShardPlan p;
  const auto w = sliced(c, &p);
  EXPECT_EQ(layout_of(p, "layer2/MatMul:0").cuts, (std::vector<std::int64_t>{4, 1}));
  EXPECT_EQ(layout_of(p, "layer2/MatMul:0").partial, 1);
  EXPECT_EQ(layout_of(p, "layer2/MatMul:0").local, (workloads::Shape{8, 512}));
  EXPECT_EQ(layout_of(p, "relu2/ReLU:0").local, (workloads::Shape{8, 512}));
  EXPECT_EQ(layout_of(p, "layer3/MatMul:0").local, (workloads::Shape{16, 10}));
  ASSERT_EQ(p.collectives.size(), 2u);
  EXPECT_EQ(p.collectives[0].name, "layer2/MatMul/ReduceScatter0");
  EXPECT_EQ(p.collectives[1].name, "layer3/MatMul/AllGather0");
  for (const auto& x : p.collectives) {
    EXPECT_EQ(x.group_size, 2) << x.name;
    EXPECT_EQ(x.group_stride, 1) << x.name;
    EXPECT_EQ(x.bytes, 16 * 512 * 4) << x.name;  // the pair's [16, 512] fp32
  }
  EXPECT_EQ(p.output_strategies.at("layer2/MatMul"), "((4,1))");
  std::map<std::string, std::string> backward;  // each collective's dual
  for (const auto& op : w.graph.ops())
    if (op.pass == workloads::Pass::Backward && op.name.rfind("Gradients/layer", 0) == 0 &&
        (op.type == "AllGather" || op.type == "ReduceScatter" || op.type == "Slice" || op.type == "AllReduce"))
      backward[op.name] = op.type;
  EXPECT_EQ(backward,
            (std::map<std::string, std::string>{{"Gradients/layer2/MatMul/ReduceScatter0/AllGather", "AllGather"},
                                                {"Gradients/layer3/MatMul/AllGather0/Slice", "Slice"},
                                                {"Gradients/layer2/MatMul/Slice1/AllGather", "AllGather"}}));
  // layer2's bias was added to a quarter of the batch on each rank: its gradient is the pair's
  // partial sum, AllReduced over the pair as the optimizer begins; the weights saw their pair's rows.
  ASSERT_EQ(w.optimizer_spec.partial_gradients.size(), 1u);
  const auto& [bias, group] = *w.optimizer_spec.partial_gradients.begin();
  EXPECT_EQ(w.graph.tensor(bias).name, "layer2.bias");
  EXPECT_EQ(group, (std::pair<std::int64_t, std::int64_t>{2, 1}));
  std::int64_t summed = 0;
  for (const auto& op : w.graph.ops())
    summed += op.type == "AllReduce" && op.name == "PartialGradients/layer2.bias/AllReduce";
  EXPECT_EQ(summed, 1);
  EXPECT_EQ(w.parallel.gradient_group_size, 2);  // and the batch's pieces averaged as before
  EXPECT_EQ(w.parallel.gradient_group_stride, 2);
}

TEST(SemiAuto, ElementWiseStrategiesCutTheRowsTheirInputsAgreeOn) {
  // A GPT-2 layer's first LayerNorm on half the tokens of each of 2 ranks: its scales whole; the
  // Q, K and V projections follow its rows.
  const workloads::Workload gpt =
      workloads::make_workload("gpt", 2, test::small_transformer("gpt", 1, 64, 4, 128, 16, 128).recipe);
  workloads::SemiAutoConfig c;
  c.devices = 2;
  c.dataset = {{1, 1}};
  c.layers = {{"h.0.ln_1/LayerNorm", {{2, 1}, {1}, {1}}}};
  ShardPlan p;
  workloads::semi_auto(gpt, c, &p);
  EXPECT_EQ(layout_of(p, "h.0.ln_1/LayerNorm:0").local, (workloads::Shape{16, 64}));
  EXPECT_EQ(layout_of(p, "h.0.attn.q/MatMul:0").local, (workloads::Shape{16, 64}));
  auto refused = [&](const std::map<std::string, ShardStrategy>& layers,
                     const std::map<std::string, ShardStrategy>& outputs, const std::string& words) {
    c.layers = layers;
    c.outputs = outputs;
    try {
      workloads::semi_auto(gpt, c, nullptr);
      ADD_FAILURE() << "accepted: " << words;
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
    }
  };
  refused({{"h.0.ln_1/LayerNorm", {{1, 2}, {1}, {1}}}}, {}, "works along its last axis, which are not cut");
  refused({{"h.0.ln_1/LayerNorm", {{2, 1}}}}, {}, "a LayerNorm takes 3 tuple(s), one per input");
  refused({{"h.0.ln_1/LayerNorm", {{2, 1}, {2}, {1}}}}, {}, "input 1's cuts are not input 0's");
  refused({{"h.0/Add_attention", {{2, 1, 1}, {2, 1}}}}, {}, "input 0 has 2 dimension(s), 3 cuts given");
  refused({}, {{"h.0.nope/MatMul", {{2, 1}}}}, "layer h.0.nope/MatMul: no forward op of gpt has this name");
  refused({}, {{"embed/Reshape", {{2}}}}, "one tuple of 2 cuts");
  refused({}, {{"embed/Reshape", {{3, 1}}}}, "does not divide the 2 devices");
}

TEST(SemiAuto, StrategiesThatDoNotFitAreRefusedNamingTheLayer) {
  workloads::SemiAutoConfig c;
  c.devices = 8;
  c.dataset = {{1, 1, 1, 1}, {1}};
  auto refused = [&](const std::map<std::string, ShardStrategy>& layers, const std::string& words) {
    c.layers = layers;
    try {
      sliced(c, nullptr);
      ADD_FAILURE() << "accepted: " << words;
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
    }
  };
  refused({{"layer1", {{1, 3}, {1, 3}}}}, "layer1");                  // 784 does not divide by 3
  refused({{"layer1", {{4, 4}, {1, 4}}}}, "does not divide the 8");   // 16 devices' worth
  refused({{"layer1", {{1, 2}, {1, 4}}}}, "the contraction is cut");  // x and weight disagree
  refused({{"relu1", {{2, 1}}}}, "relu1");                            // not a MatMul or Conv2D
  refused({{"layer9", {{1, 1}, {1, 1}}}}, "layer9");                  // no such layer
  c.layers.clear();
  c.dataset = {{1, 1, 1, 3}, {1}};  // 28 columns do not divide into 3 strips
  EXPECT_THROW(sliced(c, nullptr), std::invalid_argument);
  c.dataset = {{1, 1, 4}, {1}};  // three cuts for a 4-d image
  EXPECT_THROW(sliced(c, nullptr), std::invalid_argument);
}

TEST(SemiAuto, CuttingOnlyTheBatchIsDataParallel) {
  // MindSpore's semi-auto default: the batch cut across the devices and every layer following it.
  // That is data parallelism — the same step, the same gradient AllReduce — for a global batch of
  // 8 x 32 against 32 per device.
  for (const std::string wl : {"lenet5", "resnet50"}) {
    sim::RunRequest dp;
    dp.config = test::config_request();
    dp.workload = wl;
    dp.devices = 8;
    dp.batch_size = 32;
    dp.steps_per_epoch = 6;
    dp.parameter_broadcast = false;  // semi-auto ranks initialise their own pieces
    dp.strategies = {runtime::Strategy::LoopSink};
    sim::RunRequest sa = dp;
    sa.parallel_mode = "semi-auto";
    sa.batch_size = 256;
    const auto a = sim::run(dp).runs.front(), b = sim::run(sa).runs.front();
    EXPECT_EQ(a.steps.step.stats().mean_ms, b.steps.step.stats().mean_ms) << wl;
    EXPECT_EQ(a.sim_time_s, b.sim_time_s) << wl;
    EXPECT_EQ(a.interactions.h2d_bytes, b.interactions.h2d_bytes) << wl;
    EXPECT_DOUBLE_EQ(a.samples_per_s(), b.samples_per_s()) << wl;
  }
}

TEST(SemiAuto, TheSlicingSeedRunsOnEightDevicesAndReportsItsLayouts) {
  sim::RunRequest r;
  r.config = test::config_request();
  r.workload = "mlp-slice";
  r.devices = 8;
  r.parallel_mode = "semi-auto";
  r.dataset_strategy = "((1,1,1,4),(1,))";
  r.steps_per_epoch = 10;
  r.strategies = {runtime::Strategy::NonSink};
  const auto out = sim::run(r);
  ASSERT_FALSE(out.failed()) << out.failure_message();
  const auto j = out.report();
  const auto& p = j["parallel"];
  EXPECT_EQ(p["mode"], "semi-auto");
  EXPECT_EQ(p["collectives"].size(), 1u);
  EXPECT_GT(p["collectives"][0]["ms"].get<double>(), 0);
  EXPECT_LT(p["parameters"]["per_device"].get<std::int64_t>(), p["parameters"]["whole"].get<std::int64_t>());
  // Every rank reads the same samples (one reader's worth of samples per step), 1/4 of each image
  // crosses PCIe, and the communication shows in the time.
  const auto& run = out.runs.front();
  EXPECT_DOUBLE_EQ(run.samples_per_s(), 10.0 * 32 / run.sim_time_s);
  EXPECT_EQ(run.interactions.h2d_bytes, 10 * (32 * 28 * 7 * 4 + 32 * 4));
  EXPECT_GT(run.breakdown_s[static_cast<std::size_t>(sim::Phase::Comm)], 0);
  // Bad requests name their key.
  r.dataset_strategy = "((1,1,1,4)";
  try {
    sim::run(r);
    FAIL();
  } catch (const sim::InputError& e) {
    EXPECT_EQ(e.key(), "dataset_strategy");
  }
  r.dataset_strategy.clear();
  r.parallel_mode = "data";
  r.shard_strategy = "x.yaml";
  try {
    sim::run(r);
    FAIL();
  } catch (const sim::InputError& e) {
    EXPECT_EQ(e.key(), "shard_strategy");
  }
}

}  // namespace
}  // namespace ascendsim
