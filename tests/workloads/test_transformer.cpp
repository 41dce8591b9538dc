// The transformer workloads' graphs (workloads/transformer.h) and their operators: shapes,
// gradients, multiply-accumulates, the ops per layer, the optimizers; their parameter and MAC
// counts against PyTorch are tests/python/test_transformers.py's.
#include <map>

#include <gtest/gtest.h>

#include "aicore/aicore_config.h"
#include "aicore/cost_model.h"
#include "aicpu/hccl.h"
#include "hostif/task.h"
#include "runtime/graph_compiler.h"
#include "sim/api.h"
#include "sim/config.h"
#include "sim/core/error.h"
#include "sim/report/report.h"
#include "tests/test_support.h"
#include "workloads/training.h"
#include "workloads/op_registry.h"
#include "workloads/serving.h"
#include "workloads/transformer.h"
#include "workloads/workload.h"

namespace ascendsim::workloads {
namespace {

std::map<std::string, std::int64_t> op_counts(const Graph& g, Pass pass) {
  std::map<std::string, std::int64_t> n;
  for (const auto& op : g.ops())
    if (op.pass == pass) ++n[op.type];
  return n;
}

/// make_workload(name) over `r` throws, saying `says`.
void refused(const std::string& name, const RecipeOverrides& r, const std::string& says) {
  try {
    make_workload(name, 1, r);
    ADD_FAILURE() << name << " built";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find(says), std::string::npos) << e.what();
  }
}

TEST(Transformer, BatchMatMulGradientsHaveTheirOperandsShapesUnderEveryTranspose) {
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      Graph g;
      const Shape a = ta ? Shape{2, 3, 5, 4} : Shape{2, 3, 4, 5};  // op(a): [2, 3, 4, 5]
      const Shape b = tb ? Shape{2, 3, 6, 5} : Shape{2, 3, 5, 6};  // op(b): [2, 3, 5, 6]
      const TensorId x = g.add_tensor({"x", a, DType::F16, TensorRole::Parameter});
      const TensorId y = g.add_tensor({"y", b, DType::F16, TensorRole::Parameter});
      OpAttrs at;
      at.matmul = {ta, tb};
      const TensorId z = g.apply("BatchMatMul", "bmm", {x, y}, at)[0];
      EXPECT_EQ(g.tensor(z).shape, (Shape{2, 3, 4, 6}));
      EXPECT_EQ(forward_macs(g), 2 * 3 * 4 * 6 * 5);
      const TensorId logits = g.reshape("flat", g.cast("cast", z, DType::F32), {2 * 3 * 4, 6});
      const TensorId labels = g.add_tensor({"labels", {2 * 3 * 4}, DType::I32, TensorRole::Label});
      const TensorId loss = g.sparse_softmax_cross_entropy("loss", logits, labels);
      const auto grads = append_backward(g, loss);
      EXPECT_EQ(g.tensor(grads.at(x)).shape, a) << ta << tb;
      EXPECT_EQ(g.tensor(grads.at(y)).shape, b) << ta << tb;
    }
  Graph g;
  const TensorId x = g.add_tensor({"x", {2, 4, 5}, DType::F16, TensorRole::Input});
  const TensorId y = g.add_tensor({"y", {3, 5, 6}, DType::F16, TensorRole::Input});
  EXPECT_THROW(g.apply("BatchMatMul", "bad", {x, y}), std::invalid_argument);  // batch axes differ
}

TEST(Transformer, ABatchOfProductsCostsItsMembers) {
  // 1024 x 1024 x 2048 fp16 products, Cube-bound (4.3 GFLOP per 10 MB of operands): from two on, the
  // batch's output tiles fill every core, so each further product adds the same time (the op's
  // fixed costs paid once). (With k = 512 the batch crosses from its pipes to its HBM floor
  // between 2 and 8 products at the sustained bandwidth, and the steps differ.)
  const aicore::CostModel& model = test::cost_model();
  aicore::OpDesc one;
  one.kind = aicore::OpKind::MatMul;
  one.m = one.n = 1024;
  one.k = 2048;
  auto time = [&](std::int64_t b) {
    aicore::OpDesc d = one;
    d.batch = b;
    return model.estimate(d).time_s;
  };
  EXPECT_NEAR(time(8) - time(4), 2 * (time(4) - time(2)), 0.02 * (time(8) - time(4)));
  aicore::OpDesc eight = one;
  eight.batch = 8;
  EXPECT_EQ(eight.macs(), 8 * one.macs());
  EXPECT_NE(eight.to_string().find("batch=8"), std::string::npos);
  EXPECT_FALSE(one == eight);
  // Products too small to occupy every core alone: a batch of them does, so it beats running them
  // one after another, and never beats the Cube's peak.
  one.m = one.n = 256;
  one.k = 256;
  eight = one;
  eight.batch = 8;
  const double t1 = model.estimate(one).time_s, t8 = model.estimate(eight).time_s;
  EXPECT_LT(t8, 8 * t1);
  const aicore::AicoreConfig core;  // the default chip's, as test::cost_model()
  EXPECT_GE(t8, static_cast<double>(eight.macs()) /
                    (static_cast<double>(core.cores * core.cube_fp16_macs_per_cycle) * core.freq_ghz * 1e9));
}

TEST(Transformer, TheLayersOpsAreTheirArchitecturesOwn) {
  const Workload gpt = make_workload("gpt2-small", 2);
  auto f = op_counts(gpt.graph, Pass::Forward);
  EXPECT_EQ(f["BatchMatMul"], 2 * 12);
  EXPECT_EQ(f["Softmax"], 12);
  EXPECT_EQ(f["LayerNorm"], 2 * 12 + 1);
  EXPECT_EQ(f["GeLU"], 12);
  EXPECT_EQ(f["EmbeddingLookup"], 2);  // tokens, positions
  EXPECT_EQ(f["RmsNorm"], 0);
  auto b = op_counts(gpt.graph, Pass::Backward);
  EXPECT_EQ(b["BatchMatMul"], 2 * 2 * 12);  // each product's two operands
  EXPECT_EQ(b["LayerNormXBackprop"], 25);
  EXPECT_EQ(b["UnsortedSegmentSum"], 2);
  auto o = op_counts(gpt.graph, Pass::Optimizer);
  std::int64_t params = 0;
  for (const auto& t : gpt.graph.tensors()) params += t.role == TensorRole::Parameter;
  EXPECT_EQ(o["AdamWeightDecay"], params);
  EXPECT_EQ(o["SquareSumV1"], params);  // global-norm clipping
  EXPECT_EQ(gpt.recipe.optimizer, "adamw");

  const Workload llama = make_workload("llama-7b", 1);
  f = op_counts(llama.graph, Pass::Forward);
  EXPECT_EQ(f["RmsNorm"], 2 * 32 + 1);
  EXPECT_EQ(f["RotaryEmbedding"], 2 * 32);  // Q and K
  EXPECT_EQ(f["SiLU"], 32);
  EXPECT_EQ(f["LayerNorm"], 0);
  EXPECT_EQ(f["Dropout"], 0);
  EXPECT_EQ(f["BiasAdd"], 0);

  const Workload bert = make_workload("bert-base", 2);
  f = op_counts(bert.graph, Pass::Forward);
  EXPECT_EQ(f["LayerNorm"], 2 * 12 + 2);                   // the embeddings' and the masked-LM head's
  EXPECT_EQ(f["EmbeddingLookup"], 3 + 2);                  // tokens, positions, segments; masked positions, [CLS]
  EXPECT_EQ(f["SparseSoftmaxCrossEntropyWithLogits"], 2);  // masked LM and next sentence
  o = op_counts(bert.graph, Pass::Optimizer);
  EXPECT_EQ(o["LambNextMV"], o["LambUpdateWithLR"]);
  EXPECT_GT(o["LambNextMV"], 0);
  EXPECT_EQ(o["AdamWeightDecay"], 0);
  // The record's seven columns, fed whole: three of a sequence, three of the predictions, the
  // next-sentence label; a decoder's record is its sequence and the next token.
  EXPECT_EQ(bert.batch_bytes(), 2 * (3 * 128 + 3 * 20 + 1) * 4);
  EXPECT_EQ(bert.batch_bytes(), 2 * bert.data.dataset.record_bytes);
  EXPECT_EQ(gpt.batch_bytes(), 2 * (1024 + 1) * 4);
  EXPECT_EQ(gpt.batch_bytes(), 2 * gpt.data.dataset.record_bytes);
}

TEST(Transformer, GraphKernelFusionKeepsEachKernelWithinItsOperandLimit) {
  // The global norm's square sums, summed by AddNs of 64 and a last one: fusion must not join
  // them into one kernel of every gradient's sum (a Vector kernel reads at most 64 tensors).
  RecipeOverrides o;
  o.graph_kernel_fusion = true;
  const Workload w = make_workload("gpt2-small", 1, o);
  const runtime::CompiledGraph g = runtime::compile(w, test::cost_model(), 2);
  std::int64_t fused = 0;
  for (const auto& d : g.descs) {
    EXPECT_LE(d.operands, 64) << d.to_string();
    fused += d.kind == aicore::OpKind::FusedElementwise && d.fused_ops > 1;
  }
  EXPECT_GT(fused, 0);
}

/// A small GPT-2-shaped decoder: 2 layers, hidden 64, 4 heads, MLP 256, sequence 16, 128 tokens.
sim::RunRequest small_gpt(std::int64_t devices, std::int64_t tp, std::int64_t batch = 2) {
  sim::RunRequest r = test::small_transformer("gpt", 2, 64, 4, 256, 16, 128);
  r.batch_size = batch;
  r.devices = devices;
  r.tensor_parallel = tp;
  r.steps_per_epoch = 4;
  r.strategies = {runtime::Strategy::LoopSink};
  return r;
}

TEST(Transformer, TensorParallelSplitsTheHeadsAndTheMlpAsMegatronDoes) {
  const sim::SystemConfig cfg = sim::load_config(test::config_request());
  const Workload whole = sim::request_workload(small_gpt(1, 1), cfg);
  const Workload w = sim::request_workload(small_gpt(2, 2), cfg);
  ASSERT_TRUE(w.shard_plan);
  const auto& p = *w.shard_plan;
  const std::int64_t H = 64, F = 256, B = 2, S = 16, heads = 4, tokens = B * S;
  // Per layer, Q, K, V and the first MLP layer are cut by columns (weights and biases), the output
  // projection and the second MLP layer by rows (weights; their biases whole).
  const std::int64_t split = 3 * (H * H + H) + H * H + (H * F + F) + F * H;
  EXPECT_EQ(p.parameters_global, parameter_count(whole.graph));
  EXPECT_EQ(p.parameters_local, p.parameters_global - 2 * split / 2);
  // Each rank its heads: the scores [B, heads / 2, S, S].
  int softmax = 0;
  for (const auto& l : p.layouts)
    if (l.tensor == "h.0.attn/Softmax:0") {
      ++softmax;
      EXPECT_EQ(l.local, (Shape{B, heads / 2, S, S}));
      EXPECT_EQ(l.global, (Shape{B, heads, S, S}));
    }
  EXPECT_EQ(softmax, 1);
  // Megatron's f and g: per layer two forward AllReduces of the row-split outputs and two
  // backward ones of the column-split layers' input gradients, fp16 [tokens, H], among the 2.
  ASSERT_EQ(p.collectives.size(), 2u * 4);
  int forward = 0;
  for (const auto& c : p.collectives) {
    EXPECT_EQ(c.kind, "AllReduce") << c.name;
    EXPECT_EQ(c.group_size, 2) << c.name;
    EXPECT_EQ(c.group_stride, 1) << c.name;
    EXPECT_EQ(c.bytes, tokens * H * 2) << c.name;
    forward += c.forward;
  }
  EXPECT_EQ(forward, 4);
  // The split layers' multiply-accumulates halve on each rank; the embeddings and the head stay.
  const std::int64_t split_macs = 2 * (4 * tokens * H * H + 2 * B * heads * S * S * (H / heads) + 2 * tokens * H * F);
  EXPECT_EQ(forward_macs(w.graph), forward_macs(whole.graph) - split_macs / 2);
  EXPECT_EQ(w.batch_size, B);
  EXPECT_EQ(w.parallel.gradient_group_size, 1);  // one group: nothing to average
}

TEST(Transformer, TensorParallelGroupsAreAdjacentRanksAndTheBatchDividesAmongThem) {
  // 4 devices, groups of 2: ranks {0,1} and {2,3} split the layers; {0,2} and {1,3} hold the same
  // pieces and read different samples (the gradient AllReduce's group). The batch is each group's.
  const sim::SystemConfig cfg = sim::load_config(test::config_request());
  const Workload w = sim::request_workload(small_gpt(4, 2, 3), cfg);
  EXPECT_EQ(w.batch_size, 3);
  EXPECT_EQ(w.parallel.data_shards, 2);
  EXPECT_EQ(w.parallel.tensor_parallel, 2);
  EXPECT_EQ(w.parallel.gradient_group_size, 2);
  EXPECT_EQ(w.parallel.gradient_group_stride, 2);
  for (const auto& c : w.shard_plan->collectives) EXPECT_EQ(c.group_stride, 1) << c.name;
  const sim::RunOutcome out = sim::run(small_gpt(4, 2, 3));
  ASSERT_FALSE(out.failed()) << out.failure_message();
  const std::string text = report::format_table(out.header, out.runs);
  EXPECT_NE(text.find("tensor parallel 2 x data parallel 2), batch 3 per tensor-parallel group, 6 in all"),
            std::string::npos)
      << text;
  // Both kinds of exposed communication, adding up to the comm phase.
  const runtime::RunResult& x = out.runs.front();
  const double ops = x.exposed_comm["operators_ms_per_step"].get<double>(),
               grads = x.exposed_comm["gradients_ms_per_step"].get<double>();
  EXPECT_GT(ops, 0);
  EXPECT_GT(grads, 0);
  EXPECT_NEAR((ops + grads) * static_cast<double>(x.steps_completed) / 1e3,
              x.breakdown_s[static_cast<std::size_t>(sim::Phase::Comm)], 1e-9);
  EXPECT_NE(text.find("in the operators' collectives (tensor parallel)"), std::string::npos) << text;
  // The gradient group's AllReduce is the two ranks' (0 and 2, one server), not the cluster's.
  ASSERT_EQ(x.comm_groups.size(), 1u);
  EXPECT_DOUBLE_EQ(x.comm_groups[0]["all_reduce_ms"].get<double>(),
                   1e3 * aicpu::Hccl::ring_s(cfg.chip.hccl, hostif::Collective::AllReduce, 2,
                                             x.comm_groups[0]["bytes"].get<double>(), cfg.chip.memory.hbm_gbps()));
}

TEST(Transformer, TensorParallelTakesDeviceComputeOffEachRankAndPaysItsAllReduces) {
  const sim::RunOutcome one = sim::run(small_gpt(1, 1, 8)), two = sim::run(small_gpt(2, 2, 8));
  ASSERT_FALSE(one.failed() || two.failed());
  const auto compute = [](const sim::RunOutcome& o) {
    return o.runs.front().breakdown_s[static_cast<std::size_t>(sim::Phase::DeviceCompute)];
  };
  // Half the layers' work, the embeddings, norms and head whole: between half and all of it.
  EXPECT_LT(compute(two), compute(one));
  EXPECT_GT(compute(two), 0.5 * compute(one));
  EXPECT_GT(two.runs.front().breakdown_s[static_cast<std::size_t>(sim::Phase::Comm)], 0);
  // One group, no data parallelism: of the gradients' and optimizer's side only the global norm's
  // AllReduce of a scalar among the two, far less than the layers' AllReduces.
  const auto& e = two.runs.front().exposed_comm;
  EXPECT_LT(e["gradients_ms_per_step"].get<double>(), 0.2 * e["operators_ms_per_step"].get<double>());
  EXPECT_TRUE(two.runs.front().comm_groups.empty());
}

TEST(Transformer, TensorParallelRequestsThatCannotSplitAreRefusedNamingTheKey) {
  const sim::SystemConfig cfg = sim::load_config(test::config_request());
  auto refused = [&](sim::RunRequest r, const std::string& key, const std::string& says) {
    try {
      sim::request_workload(r, cfg);
      ADD_FAILURE() << "accepted: " << says;
    } catch (const sim::InputError& e) {
      EXPECT_EQ(e.key(), key) << e.what();
      EXPECT_NE(std::string(e.what()).find(says), std::string::npos) << e.what();
    }
  };
  refused(small_gpt(6, 3), "tensor_parallel", "4 attention heads do not divide among 3");
  refused(small_gpt(4, 3), "tensor_parallel", "do not divide the 4 device(s)");
  sim::RunRequest lenet = small_gpt(2, 2);
  lenet.workload = "lenet5";
  lenet.recipe = {};
  refused(lenet, "tensor_parallel", "not lenet5");
  sim::RunRequest given = small_gpt(2, 2);
  given.dataset_strategy = "((2,1))";
  refused(given, "dataset_strategy", "gives the strategies itself");
  sim::RunRequest alone = small_gpt(2, 2);
  alone.optimizer_shard = true;  // one data-parallel group: no two ranks to share the state
  refused(alone, "optimizer_shard", "there is one");
  sim::RunRequest attention = lenet;
  attention.tensor_parallel = 1;
  attention.recipe.flash_attention = true;
  refused(attention, "flash_attention", "lenet5 has no attention");
  // Scaling compares with one device, which cannot hold a group; fusion advice splits an AllReduce
  // a sharded optimizer does not run.
  try {
    sim::scaling_efficiency(small_gpt(4, 2), sim::RunOutcome{});
    ADD_FAILURE() << "scaled a tensor-parallel run";
  } catch (const sim::InputError& e) {
    EXPECT_EQ(e.key(), "tensor_parallel") << e.what();
  }
  sim::RunRequest sharded = small_gpt(4, 1);
  sharded.optimizer_shard = true;
  try {
    sim::advise_fusion(sharded, 4);
    ADD_FAILURE() << "advised fusion for a sharded optimizer";
  } catch (const sim::InputError& e) {
    EXPECT_EQ(e.key(), "optimizer_shard") << e.what();
  }
}

/// small_gpt with Megatron's sequence parallelism over its tensor-parallel groups.
sim::RunRequest sequence_parallel_gpt(std::int64_t devices, std::int64_t tp, std::int64_t batch = 2) {
  sim::RunRequest r = small_gpt(devices, tp, batch);
  r.sequence_parallel = true;
  return r;
}

/// The bytes each rank of a ring moves for one collective of `bytes` among `n`: a ReduceScatter
/// or an AllGather (n-1)/n of them, an AllReduce (one of each) twice that.
double ring_bytes(const hostif::Task& t, std::int64_t n) {
  const double share = static_cast<double>(n - 1) / static_cast<double>(n) * static_cast<double>(t.comm_bytes);
  return t.collective == hostif::Collective::AllReduce ? 2 * share : share;
}

TEST(Transformer, SequenceParallelMovesMegatronsVolumes) {
  // Per layer, forward: the attention's and the MLP's input gathered along the tokens and their
  // row-split outputs' partial sums reduce-scattered along them — 2 AllGather and 2 ReduceScatter
  // of fp16 [tokens, H] among the T ranks where tensor parallelism AllReduces twice; backward their
  // duals. A ring AllReduce being a ReduceScatter and an AllGather, each rank moves the bytes it
  // moved. Beyond the layers, the head's input is gathered (its gradient's piece kept) and the
  // embeddings' output scattered (a local slice; its gradient gathered): two AllGathers a step more.
  const sim::SystemConfig cfg = sim::load_config(test::config_request());
  const std::int64_t H = 64, B = 3, S = 16, T = 2, tokens = B * S, layers = 2;
  for (std::int64_t devices : {2, 4}) {  // one group; two data-parallel groups of two
    const Workload tp = sim::request_workload(small_gpt(devices, T, B), cfg);
    const Workload sp = sim::request_workload(sequence_parallel_gpt(devices, T, B), cfg);
    EXPECT_TRUE(sp.parallel.sequence_parallel);
    std::map<std::string, std::int64_t> in_layers;
    for (const auto& c : sp.shard_plan->collectives) {
      EXPECT_TRUE(c.forward) << c.name;  // no Mirror: a gathered input's gradient is reduce-scattered
      EXPECT_EQ(c.group_size, T) << c.name;
      EXPECT_EQ(c.group_stride, 1) << c.name;
      EXPECT_EQ(c.bytes, tokens * H * 2) << c.name;  // the whole of a batch piece's [tokens, H]
      if (!transformer_layer_of(c.name).empty())
        ++in_layers[c.kind];
      else
        EXPECT_EQ(c.name, "lm_head/MatMul/AllGather0");
    }
    EXPECT_EQ(in_layers,
              (std::map<std::string, std::int64_t>{{"AllGather", 2 * layers}, {"ReduceScatter", 2 * layers}}))
        << devices;
    // The compiled steps: per layer the same bytes per rank, in as many collectives again.
    const runtime::CompiledGraph a = runtime::compile(tp, test::cost_model(), 2),
                                 b = runtime::compile(sp, test::cost_model(), 2);
    struct Moved {
      double layers = 0, rest = 0, regathered = 0;
      std::int64_t regathers = 0;
      std::map<std::pair<hostif::StepPart, hostif::Collective>, std::int64_t> count;
    };
    auto moved = [&](const runtime::CompiledGraph& g) {
      Moved m;
      for (const auto& t : g.step_tasks) {
        if (t.kind != hostif::TaskKind::Comm || t.comm_group >= 0 || t.part == hostif::StepPart::Optimizer) continue;
        EXPECT_EQ(t.comm_bytes, tokens * H * 2) << t.name;
        if (t.name.rfind("Regather/", 0) == 0) {  // Megatron's gather again in the backward pass
          EXPECT_EQ(t.part, hostif::StepPart::Backward) << t.name;
          EXPECT_EQ(t.collective, hostif::Collective::AllGather) << t.name;
          EXPECT_FALSE(transformer_layer_of(t.name.substr(9)).empty()) << t.name;
          ++m.regathers;
          m.regathered += ring_bytes(t, T);
          continue;
        }
        (transformer_layer_of(t.name).empty() ? m.rest : m.layers) += ring_bytes(t, T);
        if (!transformer_layer_of(t.name).empty()) ++m.count[{t.part, t.collective}];
      }
      return m;
    };
    const Moved x = moved(a), y = moved(b);
    using C = hostif::Collective;
    using P = hostif::StepPart;
    EXPECT_EQ(x.count, (std::map<std::pair<P, C>, std::int64_t>{{{P::Forward, C::AllReduce}, 2 * layers},
                                                                {{P::Backward, C::AllReduce}, 2 * layers}}));
    EXPECT_EQ(y.count, (std::map<std::pair<P, C>, std::int64_t>{{{P::Forward, C::AllGather}, 2 * layers},
                                                                {{P::Forward, C::ReduceScatter}, 2 * layers},
                                                                {{P::Backward, C::AllGather}, 2 * layers},
                                                                {{P::Backward, C::ReduceScatter}, 2 * layers}}));
    EXPECT_DOUBLE_EQ(y.layers, x.layers);
    // The gathered inputs are not kept for the backward pass: the weight gradients' first reader
    // gathers each again, two AllGathers a layer more than plain tensor parallelism moves.
    EXPECT_EQ(x.regathers, 0);
    EXPECT_EQ(y.regathers, 2 * layers);
    EXPECT_DOUBLE_EQ(y.regathered, 2.0 * layers * (T - 1) / T * static_cast<double>(tokens * H * 2));
    EXPECT_DOUBLE_EQ(x.rest, 0);
    EXPECT_DOUBLE_EQ(y.rest, 2.0 * (T - 1) / T * static_cast<double>(tokens * H * 2));
    // The norms' scales and the biases added after a ReduceScatter saw their rank's tokens only:
    // their gradients are AllReduced over the group as the optimizer begins, in one fused
    // collective (Megatron's all-reduce of the sequence-parallel gradients).
    std::int64_t partial = 0;
    for (const auto& t : b.step_tasks)
      if (t.kind == hostif::TaskKind::Comm && t.name.rfind("PartialGradients/", 0) == 0) {
        ++partial;
        EXPECT_EQ(t.group.size, T);
        EXPECT_EQ(t.comm_bytes, (6 * layers + 2) * H * 4) << t.name;  // per layer 2 norms' 2, 2 biases; ln_f's 2
      }
    EXPECT_EQ(partial, 1);
  }
}

TEST(Transformer, SequenceParallelDividesTheNormsAndTheirActivationsByTheGroup) {
  // Each rank's norms, dropouts and residual adds see tokens / T rows; the multiply-accumulates of
  // the step are tensor parallelism's; the step's peak of activations falls.
  const sim::SystemConfig cfg = sim::load_config(test::config_request());
  for (const std::string wl : {"gpt", "llama-7b", "bert-base"}) {
    sim::RunRequest plain = test::small_transformer(wl, 2, 128, 4, 512, 128, 128), split = plain;
    plain.batch_size = split.batch_size = 4;
    plain.devices = split.devices = 2;
    plain.tensor_parallel = split.tensor_parallel = 2;
    split.sequence_parallel = true;
    const Workload tp = sim::request_workload(plain, cfg), sp = sim::request_workload(split, cfg);
    const std::int64_t tokens = 4 * 128;
    std::int64_t region = 0;
    for (const auto& op : sp.graph.ops()) {
      const bool norm =
          op.type == "LayerNorm" || op.type == "RmsNorm" || op.type == "LayerNormXBackprop" || op.type == "RmsNormGrad";
      const bool layer = !transformer_layer_of(op.name).empty() || op.name.find("ln_f") != std::string::npos ||
                         op.name.rfind("norm/", 0) == 0;
      if (!norm || !layer) continue;
      ++region;
      EXPECT_EQ(sp.graph.tensor(op.inputs.at(0)).shape.at(0), tokens / 2) << wl << " " << op.name;
    }
    EXPECT_GT(region, 0) << wl;
    for (const auto& op : tp.graph.ops())
      if ((op.type == "LayerNorm" || op.type == "RmsNorm") && !transformer_layer_of(op.name).empty()) {
        EXPECT_EQ(tp.graph.tensor(op.inputs.at(0)).shape.at(0), tokens) << wl << " " << op.name;
      }
    EXPECT_EQ(forward_macs(sp.graph), forward_macs(tp.graph)) << wl;
    const runtime::CompiledGraph a = runtime::compile(tp, test::cost_model(), 2),
                                 b = runtime::compile(sp, test::cost_model(), 2);
    auto macs = [](const runtime::CompiledGraph& g) {
      std::int64_t n = 0;
      for (const auto& d : g.descs) n += d.macs();
      return n;
    };
    EXPECT_EQ(macs(b), macs(a)) << wl;
    EXPECT_LT(b.memory.peak_activation_bytes, a.memory.peak_activation_bytes) << wl;
    EXPECT_EQ(b.memory.persistent_bytes, a.memory.persistent_bytes) << wl;
  }
}

TEST(Transformer, SequenceParallelComposesWithPipelinesRecomputationAndAShardedOptimizer) {
  const sim::SystemConfig cfg = sim::load_config(test::config_request());
  sim::RunRequest r = sequence_parallel_gpt(8, 2, 4);
  r.recipe.layers = 4;
  r.pipeline_stages = 2;
  r.micro_batches = 2;
  r.recompute = true;
  r.optimizer_shard = true;
  const sim::RunOutcome x = sim::run(r), y = sim::run(r);
  ASSERT_FALSE(x.failed()) << x.failure_message();
  EXPECT_EQ(x.report().dump(), y.report().dump());
  EXPECT_EQ(x.report()["parallel"]["sequence_parallel"], true);
  EXPECT_TRUE(x.runs.front().optimizer_collectives.contains("ReduceScatter"));
  const std::string text = report::format_table(x.header, x.runs);
  EXPECT_NE(text.find("pipeline 2 x tensor parallel 2 (sequence parallel) x data parallel 2"), std::string::npos)
      << text;
  // Between the stages goes each rank's share of the tokens: half what tensor parallelism sends.
  sim::RunRequest plain = r;
  plain.sequence_parallel = false;
  auto exchanged = [&](const sim::RunRequest& q) {
    std::int64_t bytes = 0;
    const Workload w = sim::request_workload(q, cfg);
    for (const auto& op : w.stages.front()->graph.ops())
      if (op.type == "Send" || op.type == "SendReceive")
        bytes += w.stages.front()->graph.tensor(op.inputs.at(0)).bytes();
    return bytes;
  };
  EXPECT_EQ(2 * exchanged(r), exchanged(plain));
  // Recomputation runs a layer's gathers and scatters again with it.
  const Workload w = sim::request_workload(r, cfg);
  std::int64_t again = 0;
  for (const auto& op : w.stages.front()->graph.ops())
    again += op.name.find("Recompute/") != std::string::npos && op.type == "ReduceScatter";
  EXPECT_GT(again, 0);
}

TEST(Transformer, SequenceParallelRequestsThatCannotSplitAreRefusedNamingTheKey) {
  const sim::SystemConfig cfg = sim::load_config(test::config_request());
  auto refused = [&](sim::RunRequest r, const std::string& says) {
    try {
      sim::request_workload(r, cfg);
      ADD_FAILURE() << "accepted: " << says;
    } catch (const sim::InputError& e) {
      EXPECT_EQ(e.key(), "sequence_parallel") << e.what();
      EXPECT_NE(std::string(e.what()).find(says), std::string::npos) << e.what();
    }
  };
  refused(sequence_parallel_gpt(2, 1), "give tensor_parallel 2 or more (it is 1)");
  sim::RunRequest odd = sequence_parallel_gpt(2, 2, 1);
  odd.recipe.seq_length = 15;
  refused(odd, "the 15 tokens a tensor-parallel group computes at once (1 sequence(s) of 15");
  sim::RunRequest micro = sequence_parallel_gpt(4, 2, 2);
  micro.recipe.seq_length = 15;
  micro.pipeline_stages = 2;  // a micro-batch of one sequence
  refused(micro, "do not divide among its 2 ranks");
}

TEST(Transformer, OptimizerShardingDividesTheOptimizerStateByTheGroup) {
  const sim::SystemConfig cfg = sim::load_config(test::config_request());
  sim::RunRequest dp = small_gpt(4, 1);
  const Workload whole = sim::request_workload(dp, cfg);
  dp.optimizer_shard = true;
  const Workload sharded = sim::request_workload(dp, cfg);
  // Every weight's first axis divides by 4 here (vocabulary 128): both moments of each hold a
  // quarter of it, the weights stay whole.
  auto elements = [](const Workload& w, TensorRole role) {
    std::int64_t n = 0;
    for (const auto& t : w.graph.tensors())
      if (t.role == role && t.name != "learning_rate") n += t.elements();
    return n;
  };
  const std::int64_t params = parameter_count(whole.graph);
  EXPECT_EQ(elements(whole, TensorRole::OptimizerState), 2 * params);
  EXPECT_EQ(elements(sharded, TensorRole::OptimizerState), 2 * params / 4);
  EXPECT_EQ(parameter_count(sharded.graph), params);
  // Gradients reduce-scattered and weights gathered, fused in one collective each (under 64 MB);
  // no gradient AllReduce is left.
  const runtime::CompiledGraph a = runtime::compile(whole, test::cost_model(), 2),
                               b = runtime::compile(sharded, test::cost_model(), 2);
  EXPECT_LT(b.memory.optimizer_state_bytes, a.memory.optimizer_state_bytes / 4 + 512 * 200);
  EXPECT_TRUE(b.comm_groups.empty());
  std::map<hostif::Collective, std::int64_t> tasks, bytes;
  for (const auto& t : b.step_tasks)
    if (t.kind == hostif::TaskKind::Comm) {
      ++tasks[t.collective];
      bytes[t.collective] += t.comm_bytes;
      EXPECT_EQ(t.stream, 1) << t.name;
    }
  EXPECT_EQ(tasks[hostif::Collective::ReduceScatter], 1);
  EXPECT_EQ(tasks[hostif::Collective::AllGather], 1);
  EXPECT_EQ(bytes[hostif::Collective::ReduceScatter], 4 * params);  // the fp32 gradients
  EXPECT_EQ(bytes[hostif::Collective::AllGather], 4 * params);      // the fp32 weights
  // A weight whose first axis does not divide stays whole and is all-reduced (MindSpore's rule):
  // a vocabulary of 130 keeps the token table out.
  dp.recipe.vocab = 130;
  const Workload odd = sim::request_workload(dp, cfg);
  const runtime::CompiledGraph c = runtime::compile(odd, test::cost_model(), 2);
  ASSERT_EQ(c.comm_groups.size(), 1u);
  EXPECT_EQ(c.comm_groups[0].bytes, 130 * 64 * 4);
  // Sharded runs finish, LAMB's too, and the same inputs give the same report.
  for (const std::string wl : {"gpt", "bert-base"}) {
    sim::RunRequest r = small_gpt(4, 1);
    r.workload = wl;
    r.optimizer_shard = true;
    const sim::RunOutcome x = sim::run(r), y = sim::run(r);
    ASSERT_FALSE(x.failed()) << wl << ": " << x.failure_message();
    EXPECT_EQ(x.report().dump(), y.report().dump()) << wl;
    // The report lists the optimizer's collectives and records the sharding.
    const auto& oc = x.runs.front().optimizer_collectives;
    ASSERT_TRUE(oc.contains("ReduceScatter")) << wl;
    EXPECT_EQ(oc["ReduceScatter"]["bytes"], oc["AllGather"]["bytes"]) << wl;
    EXPECT_EQ(x.report()["recipe"]["optimizer_shard"], 4) << wl;
    if (wl == "gpt") {
      EXPECT_EQ(oc["ReduceScatter"]["bytes"].get<std::int64_t>(), 4 * params);
    }
  }
}

TEST(Transformer, RecomputationTradesTheLayersForwardForTheirActivations) {
  const sim::SystemConfig cfg = sim::load_config(test::config_request());
  sim::RunRequest r = small_gpt(1, 1, 4);
  const Workload base = sim::request_workload(r, cfg);
  r.recompute = true;
  const Workload again = sim::request_workload(r, cfg);
  // Every forward op of a layer once more, in the backward pass, and nothing else.
  std::int64_t layer_ops = 0;
  for (const auto& op : base.graph.ops())
    layer_ops += op.pass == Pass::Forward && !transformer_layer_of(op.name).empty();
  ASSERT_GT(layer_ops, 0);
  EXPECT_EQ(again.graph.ops().size(), base.graph.ops().size() + static_cast<std::size_t>(layer_ops));
  for (const auto& op : again.graph.ops())
    if (op.name.rfind("Recompute/", 0) == 0) {
      EXPECT_EQ(op.pass, Pass::Backward) << op.name;
    }
  // The device's compute grows by exactly the layers' forward kernels; the activations the step
  // holds at its peak shrink.
  const runtime::CompiledGraph a = runtime::compile(base, test::cost_model(), 2),
                               b = runtime::compile(again, test::cost_model(), 2);
  // (The layout conversions the backward pass needs of an activation move with it to its copy.)
  double forward = 0;
  for (const auto& t : a.step_tasks)
    if (t.kind == hostif::TaskKind::AiCore && t.part == hostif::StepPart::Forward &&
        !transformer_layer_of(t.name).empty())
      forward += t.cost.time_s;
  EXPECT_GT(forward, 0);
  EXPECT_NEAR(b.device_compute_s - a.device_compute_s, forward, 1e-12);
  // Where the layers' activations dominate (4 layers of 256 tokens a sequence), the step's memory
  // falls to what one layer needs again beside the layers' inputs: here to less than a third.
  sim::RunRequest longer = small_gpt(1, 1, 8);
  longer.recipe.layers = 4;
  longer.recipe.seq_length = 256;
  const runtime::CompiledGraph c = runtime::compile(sim::request_workload(longer, cfg), test::cost_model(), 2);
  longer.recompute = true;
  const runtime::CompiledGraph d = runtime::compile(sim::request_workload(longer, cfg), test::cost_model(), 2);
  EXPECT_LT(3 * d.memory.arena_bytes, c.memory.arena_bytes);
  EXPECT_EQ(d.memory.persistent_bytes, c.memory.persistent_bytes);
  // It runs, and it is refused where there are no layers to recompute.
  const sim::RunOutcome out = sim::run(r);
  ASSERT_FALSE(out.failed()) << out.failure_message();
  r.workload = "lenet5";
  r.recipe = {};
  try {
    sim::request_workload(r, cfg);
    ADD_FAILURE() << "lenet5 recomputed";
  } catch (const sim::InputError& e) {
    EXPECT_EQ(e.key(), "recompute") << e.what();
  }
}

TEST(Transformer, TheNineTenBRunsAttentionAsOneFusedKernel) {
  // A LLaMA-shaped decoder of 2 layers: on the 910B each layer's scores, mask, softmax and PV are
  // one FlashAttentionScore (its gradient one FlashAttentionScoreGrad); on the 910 op by op.
  sim::RunRequest r;
  r.config = test::config_request();
  r.workload = "llama-7b";
  r.recipe.layers = 2;
  r.recipe.hidden = 512;
  r.recipe.heads = 4;
  r.recipe.ffn = 1024;
  r.recipe.seq_length = 1024;
  r.recipe.vocab = 1000;
  r.batch_size = 2;
  r.config.chip = "ascend910b";
  const sim::SystemConfig b = sim::load_config(r.config);
  const Workload fused = sim::request_workload(r, b);
  auto fwd = op_counts(fused.graph, Pass::Forward), bwd = op_counts(fused.graph, Pass::Backward);
  EXPECT_EQ(fwd["FlashAttentionScore"], 2);
  EXPECT_EQ(bwd["FlashAttentionScoreGrad"], 2);
  EXPECT_EQ(fwd["Softmax"] + fwd["BatchMatMul"], 0);
  EXPECT_TRUE(fused.recipe.flash_attention);
  r.recipe.flash_attention = false;
  const Workload plain = sim::request_workload(r, b);
  EXPECT_EQ(op_counts(plain.graph, Pass::Forward)["Softmax"], 2);
  // The same model FLOPs either way; less device time and memory fused (no [S, S] scores in HBM).
  EXPECT_EQ(forward_macs(fused.graph), forward_macs(plain.graph));
  const aicore::CachedCostModel model(aicore::make_pipe_cost_model(b.chip.aicore, b.chip.memory));
  const runtime::CompiledGraph f = runtime::compile(fused, model, 2), p = runtime::compile(plain, model, 2);
  EXPECT_LT(f.device_compute_s, p.device_compute_s);
  EXPECT_LT(f.memory.arena_bytes, p.memory.arena_bytes);
  // Tensor parallelism splits it by heads like the unfused attention: Megatron's four AllReduces a
  // layer and nothing gathered.
  sim::RunRequest tp = r;
  tp.recipe.flash_attention.reset();
  tp.devices = 2;
  tp.tensor_parallel = 2;
  const Workload split = sim::request_workload(tp, b);
  ASSERT_TRUE(split.shard_plan);
  EXPECT_EQ(split.shard_plan->collectives.size(), 2u * 4);
  for (const auto& c : split.shard_plan->collectives) EXPECT_EQ(c.kind, "AllReduce") << c.name;
  // The 910's backend has no such kernel: asking for it is refused, naming the key.
  r.config.chip = "ascend910";
  r.recipe.flash_attention.reset();
  EXPECT_EQ(op_counts(sim::request_workload(r, sim::load_config(r.config)).graph, Pass::Forward)["FlashAttentionScore"],
            0);
  r.recipe.flash_attention = true;
  try {
    sim::request_workload(r, sim::load_config(r.config));
    ADD_FAILURE() << "fused attention on the 910";
  } catch (const sim::InputError& e) {
    EXPECT_EQ(e.key(), "flash_attention") << e.what();
  }
}

TEST(Transformer, TokensPerSecondAndUtilisationFollowTheSteadyState) {
  sim::RunRequest r;
  r.config = test::config_request();
  r.workload = "bert-base";
  r.batch_size = 8;
  r.strategies = {runtime::Strategy::LoopSink};
  r.steps_per_epoch = 6;
  const sim::RunOutcome out = sim::run(r);
  ASSERT_FALSE(out.failed()) << out.failure_message();
  const runtime::RunResult& x = out.runs.front();
  const Workload w = make_workload("bert-base", 8);
  EXPECT_DOUBLE_EQ(x.model_flops_per_sample, 6.0 * static_cast<double>(forward_macs(w.graph)) / 8);
  EXPECT_EQ(x.tokens_per_sample, 128);
  const auto j = report::run_json(x)["model_flops"];
  EXPECT_DOUBLE_EQ(j["tokens_per_s"].get<double>(), 128 * x.steady_samples_per_s());
  // The ascend910 preset's peak: 32 cores x 4096 MACs x 2 at its clock; the device cannot do
  // more than that while busy, so the utilisation stays under the busy fraction.
  const aicore::AicoreConfig core = sim::load_config(r.config).chip.aicore;
  EXPECT_DOUBLE_EQ(x.peak_flops_per_device, 2.0 * 32 * 4096 * core.freq_ghz * 1e9);
  EXPECT_GT(x.mfu(), 0.05);
  EXPECT_LT(x.mfu(), x.device_busy_fraction());
  EXPECT_NE(report::format_table(out.header, out.runs).find("tokens/s, model FLOPs utilisation"), std::string::npos);
}

TEST(Transformer, OutOfMemoryNamesThePartToShard) {
  // LLaMA-7B with AdamW: 6.74 G fp32 weights (25.1 GiB) and twice that in moments (50.2 GiB).
  sim::RunRequest r;
  r.config = test::config_request();
  r.config.chip = "ascend910b";
  r.workload = "llama-7b";
  r.batch_size = 1;
  r.strategies = {runtime::Strategy::LoopSink};
  r.steps_per_epoch = 1;
  try {
    sim::run(r);
    FAIL() << "LLaMA-7B fit 64 GiB";
  } catch (const sim::InputError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("weights 25.10 GiB, optimizer state 50.21 GiB"), std::string::npos) << what;
    EXPECT_NE(what.find("optimizer_shard"), std::string::npos) << what;
  }
  // Twice the layers on two devices of one tensor-parallel group: no two ranks hold the same
  // weights, so sharding needs more devices; with it on over two groups, it is already sharded.
  r.recipe.layers = 64;
  r.devices = 2;
  r.tensor_parallel = 2;
  auto says = [&](const std::string& key, const std::string& words) {
    try {
      sim::run(r);
      ADD_FAILURE() << "fit: " << words;
    } catch (const sim::InputError& e) {
      EXPECT_EQ(e.key(), key) << e.what();
      EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
    }
  };
  says("devices", "give more devices");
  r.devices = 4;
  says("optimizer_shard", "shard it across the data-parallel ranks");
  r.optimizer_shard = true;
  says("devices", "already sharded across 2 ranks");
}

TEST(Transformer, AShapeOverThePresetCountsItsOwnParameters) {
  RecipeOverrides o;
  o.layers = 2;
  o.hidden = 256;
  o.heads = 4;
  o.ffn = 1024;
  o.seq_length = 128;
  o.vocab = 1000;
  const Workload gpt = make_workload("gpt", 2, o);
  const std::int64_t H = 256, F = 1024, V = 1000, P = 1024;  // GPT-2's 1,024 positions kept
  const std::int64_t layer = 4 * (H * H + H) + 2 * 2 * H + (H * F + F) + (F * H + H);
  EXPECT_EQ(parameter_count(gpt.graph), V * H + P * H + 2 * layer + 2 * H);
  EXPECT_EQ(gpt.tokens_per_sample, 128);
  EXPECT_EQ(gpt.name, "gpt");
  // A longer sequence than the table: the table grows with it; BERT's predictions follow the
  // sequence (80 at 512, as the model zoo's phase 2).
  RecipeOverrides longer;
  longer.seq_length = 2048;
  const Workload g2 = make_workload("gpt2-small", 1, longer);
  EXPECT_EQ(parameter_count(g2.graph), 124439808 + (2048 - 1024) * 768);
  RecipeOverrides bert512;
  bert512.seq_length = 512;
  const Workload b = make_workload("bert-base", 1, bert512);
  EXPECT_EQ(parameter_count(b.graph), 110106428);
  EXPECT_EQ(b.batch_bytes(), (3 * 512 + 3 * 80 + 1) * 4);
  // Shapes that cannot be built are refused, naming the flag.
  RecipeOverrides bad;
  bad.heads = 5;
  refused("gpt", bad, "--heads");
  bad = {};
  bad.hidden = 4096 + 32 * 3;  // head width 131: odd
  refused("llama-7b", bad, "must be even");
  bad = {};
  bad.layers = 0;
  refused("bert-base", bad, "--layers 0");
  bad = {};
  bad.layers = 3;
  refused("resnet50", bad, "fixed shape");
  refused("lenet5", bad, "fixed shape");
  refused("mlp-slice", bad, "fixed shape");
}

TEST(Transformer, GroupedKvHeadsShrinkTheKeyAndValueProjectionsAndTheCache) {
  // LLaMA-7B's shape with 8 key/value heads (LLaMA-2-70B's and Qwen2.5's grouping, 4 query heads
  // each): the K and V projections are 4096 x 1024, so 32 layers lose 2 x 4096 x 3072 weights;
  // their MACs go with them and the attention's own (QK^T, PV per query head) stay.
  RecipeOverrides o;
  const Workload mha = make_workload("llama-7b", 1, o);
  o.kv_heads = 8;
  const Workload gqa = make_workload("llama-7b", 1, o);
  EXPECT_EQ(parameter_count(mha.graph), 6738415616);
  EXPECT_EQ(parameter_count(mha.graph) - parameter_count(gqa.graph), 32 * 2 * 4096 * (4096 - 1024));
  EXPECT_EQ(forward_macs(mha.graph) - forward_macs(gqa.graph), std::int64_t{32} * 2 * 2048 * 4096 * (4096 - 1024));
  EXPECT_NE(gqa.description.find("32 heads (8 key/value)"), std::string::npos) << gqa.description;
  // Unfused attention repeats each key and value head for its 4 query heads (a Concat a layer
  // each); the fused kernel reads them grouped, and its cost sees the group.
  std::int64_t repeats = 0;
  for (const auto& op : gqa.graph.ops())
    if (op.pass == Pass::Forward && op.type == "Concat") ++repeats;
  EXPECT_EQ(repeats, 2 * 32);
  sim::ConfigRequest chip = test::config_request();
  chip.chip = "ascend910b";
  const sim::SystemConfig b = sim::load_config(chip);
  auto op_desc = [](const Graph& graph, const Op& op) { return OpRegistry::global().at(op.type).lower(graph, op); };
  RecipeOverrides fo = o;
  fo.flash_attention = true;
  fo.layers = 2;
  const Workload fused = make_workload("llama-7b", 1, fo);
  int flash = 0;
  for (const auto& op : fused.graph.ops()) {
    if (op.type != "FlashAttentionScore" && op.type != "FlashAttentionScoreGrad") continue;
    ++flash;
    EXPECT_EQ(fused.graph.tensor(op.inputs[1]).shape, (Shape{1, 8, 2048, 128})) << op.name;
    EXPECT_EQ(op_desc(fused.graph, op).group, 4) << op.name;
  }
  EXPECT_EQ(flash, 4);

  // Serving: a KV-cache block holds kv_heads / heads of the keys and values; the fused QKV
  // projection is (32 + 2 x 8) heads wide; a decode step at a long context reads less.
  TransformerShape s = *transformer_shape("llama-7b");
  ServingLayout l;
  l.kv_blocks = 64;
  const std::int64_t block_mha = kv_block_bytes(s, l), weights_mha = serving_weight_bytes(s, l);
  TransformerShape g = s;
  g.kv_heads = 8;
  EXPECT_EQ(kv_block_bytes(g, l) * 4, block_mha);
  EXPECT_EQ(block_mha, 2 * 128 * 32 * 4096 * 2);
  EXPECT_EQ(weights_mha - serving_weight_bytes(g, l), 2 * 32 * 2 * 4096 * (4096 - 1024));
  l.tensor_parallel = 2;
  EXPECT_EQ(kv_block_bytes(g, l) * 2 * 4, block_mha);
  l.tensor_parallel = 1;
  StepShape step;
  step.decode_seqs = 16;
  step.decode_context = 4096;
  const aicore::CachedCostModel model(aicore::make_pipe_cost_model(b.chip.aicore, b.chip.memory));
  auto attention_bytes = [&](const TransformerShape& shape) {
    const Workload w = serving_step(shape, step, l);
    double bytes = 0;
    for (const auto& op : w.graph.ops())
      if (op.type == "PagedAttention") bytes += model.estimate(op_desc(w.graph, op)).gm_bytes;
    return bytes;
  };
  const double read_mha = attention_bytes(s), read_gqa = attention_bytes(g);
  EXPECT_LT(read_gqa, read_mha / 4 * 1.25);
  EXPECT_GT(read_gqa, read_mha / 4 * 0.75);

  // What cannot be grouped is refused, naming the flag.
  RecipeOverrides bad;
  bad.kv_heads = 5;
  refused("llama-7b", bad, "--kv-heads 5");
  bad.kv_heads = 64;
  refused("llama-7b", bad, "--kv-heads 64");
  bad.kv_heads = 4;
  refused("bert-base", bad, "--kv-heads applies to the decoders");
  TransformerShape odd = s;
  odd.kv_heads = 8;
  l.tensor_parallel = 16;
  EXPECT_THROW(serving_step(odd, step, l), std::invalid_argument);
}

TEST(Transformer, TheMemoryPlanSaysWhatItHolds) {
  // AdamW keeps two fp32 moments per weight: twice the weights, within the 512-byte alignment of
  // each tensor (and the learning rate's scalar). The parts add up to the region and the peak.
  const Workload w = make_workload("gpt2-small", 2);
  const runtime::CompiledGraph g = runtime::compile(w, test::cost_model(), 2);
  const runtime::MemoryPlan& m = g.memory;
  std::int64_t tensors = 0;
  for (const auto& t : w.graph.tensors()) tensors += t.role == TensorRole::Parameter;
  EXPECT_GE(m.weight_bytes, 124439808 * 4);
  EXPECT_LE(m.weight_bytes, 124439808 * 4 + 512 * tensors);
  EXPECT_NEAR(static_cast<double>(m.optimizer_state_bytes), 2.0 * static_cast<double>(m.weight_bytes), 512.0);
  EXPECT_EQ(m.weight_bytes + m.optimizer_state_bytes + m.other_persistent_bytes, m.persistent_bytes);
  EXPECT_EQ(m.peak_gradient_bytes + m.peak_activation_bytes + m.peak_workspace_bytes, m.live_peak_bytes);
  EXPECT_GT(m.peak_activation_bytes, 0);
}

TEST(Transformer, AColdCacheCompilesEveryKernelOnceAndTheVerdictLeavesItOut) {
  sim::RunRequest r;
  r.config = test::config_request();
  r.config.sets = {"host.kernel_cache=cold", "host.kernel_compile_s=2"};
  r.workload = "bert-base";
  r.batch_size = 4;
  r.strategies = {runtime::Strategy::LoopSink};
  r.steps_per_epoch = 4;
  const sim::RunOutcome out = sim::run(r);
  ASSERT_FALSE(out.failed()) << out.failure_message();
  const runtime::RunResult& x = out.runs.front();
  const Workload w = make_workload("bert-base", 4);
  const std::int64_t kernels = runtime::kernels_to_compile(runtime::compile(w, test::cost_model(), 16));
  EXPECT_EQ(x.interactions.kernels_compiled, kernels);
  EXPECT_NEAR(x.compile_s, 2.0 * static_cast<double>(kernels), 1e-9);
  EXPECT_GE(x.time_to_train().initialisation, x.compile_s);
  // The strategy's demand: its steps over the time it neither waited for data nor compiled.
  const double waited = x.breakdown_s[static_cast<std::size_t>(sim::Phase::WaitData)] +
                        x.breakdown_s[static_cast<std::size_t>(sim::Phase::HostData)] + x.first_fill_s;
  EXPECT_NEAR(x.data["strategy_batches_per_s"].get<double>(), 4 / (x.sim_time_s - waited - x.compile_s), 1e-6);
}

TEST(Transformer, UnknownOrUnsupportedRecipesAreRefused) {
  RecipeOverrides lars;
  lars.optimizer = "lars";
  EXPECT_THROW(make_workload("bert-base", 2, lars), std::invalid_argument);
  RecipeOverrides bn;
  bn.keep_batchnorm_fp32 = true;
  EXPECT_THROW(make_workload("gpt2-small", 2, bn), std::invalid_argument);
}

}  // namespace
}  // namespace ascendsim::workloads
