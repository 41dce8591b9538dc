// Pipeline parallelism (workloads/pipeline.h): the stages cut from a transformer's training
// graph, their exchanges in Megatron's 1F1B order, and the bubble a run measures.
#include <algorithm>
#include <map>
#include <numeric>
#include <set>

#include <gtest/gtest.h>

#include "hostif/task.h"
#include "runtime/graph_compiler.h"
#include "sim/api.h"
#include "sim/config.h"
#include "sim/core/error.h"
#include "sim/kernel.h"
#include "sim/simulation.h"
#include "tests/test_support.h"
#include "workloads/mlp.h"
#include "workloads/op_registry.h"
#include "workloads/pipeline.h"
#include "workloads/training.h"
#include "workloads/transformer.h"
#include "workloads/workload.h"

namespace ascendsim::workloads {
namespace {

sim::RunRequest pipelined_gpt(std::int64_t devices, std::int64_t stages, std::int64_t micro, std::int64_t batch) {
  sim::RunRequest r = test::small_transformer("gpt", 4, 64, 4, 256, 16, 128);
  r.batch_size = batch;
  r.devices = devices;
  r.pipeline_stages = stages;
  r.micro_batches = micro;
  r.steps_per_epoch = 4;
  r.strategies = {runtime::Strategy::GraphSink};
  return r;
}

/// The op name without its micro-batch prefix ("Micro3/").
std::string unprefixed(const std::string& name) {
  const auto slash = name.find('/');
  return name.rfind("Micro", 0) == 0 ? name.substr(slash + 1) : name;
}

std::int64_t parameters(const Graph& g) {
  std::int64_t n = 0;
  for (const auto& t : g.tensors()) n += t.role == TensorRole::Parameter ? t.elements() : 0;
  return n;
}

TEST(PipelineParallel, StagesDivideTheLayersAndRunEachOpOncePerMicroBatch) {
  const sim::SystemConfig cfg = sim::load_config(test::config_request());
  sim::RunRequest one = pipelined_gpt(1, 1, 0, 2);
  one.pipeline_stages = 1;
  const Workload whole = sim::request_workload(one, cfg);  // one micro-batch, every layer
  const std::int64_t P = 4, M = 6;
  const Workload w = sim::request_workload(pipelined_gpt(4, P, M, 2 * M), cfg);
  ASSERT_EQ(w.stages.size(), static_cast<std::size_t>(P));
  // Each forward op of the whole network runs on exactly one stage (a mask computed from the
  // batch alone would run on every stage that reads it; this decoder has none), M times.
  std::map<std::string, std::int64_t> runs;
  for (const auto& s : w.stages)
    for (const auto& op : s->graph.ops())
      if (op.pass == Pass::Forward && op.name.rfind("Micro", 0) == 0 && op.name.find("/Slice/") == std::string::npos &&
          op.def->collective == OpDef::Collective::None)
        ++runs[unprefixed(op.name)];
  std::int64_t forward = 0;
  for (const auto& op : whole.graph.ops()) {
    if (op.pass != Pass::Forward) continue;
    ++forward;
    EXPECT_EQ(runs[op.name], M) << op.name;
  }
  EXPECT_EQ(static_cast<std::int64_t>(runs.size()), forward);
  // Layer l of L on stage floor(l P / L); the embeddings with stage 0, the head with the last.
  for (std::int64_t s = 0; s < P; ++s) {
    const Workload& st = *w.stages[static_cast<std::size_t>(s)];
    EXPECT_EQ(st.parallel.stage, s);
    EXPECT_EQ(st.parallel.stage_first_layer, s);
    EXPECT_EQ(st.parallel.stage_layers, 1);
    EXPECT_EQ(st.batch_size, 2 * M);
    // Each op of a layer on its stage, but for the sum of a layer output's gradient contributions,
    // which runs where they are (the next stage), so one tensor crosses back.
    for (const auto& op : st.graph.ops()) {
      const std::string layer = transformer_layer_of(unprefixed(op.name));
      if (layer.empty()) continue;
      if (op.type == "AddN" && layer == "h." + std::to_string(s - 1)) continue;
      EXPECT_EQ(layer, "h." + std::to_string(s)) << op.name;
    }
  }
  // The weights: each stage's own, the token table on the first and (tied to the head) the
  // last; together the network's.
  std::set<std::string> names;
  std::int64_t held = 0;
  for (const auto& s : w.stages)
    for (const auto& t : s->graph.tensors())
      if (t.role == TensorRole::Parameter) {
        held += t.elements();
        names.insert(t.name);
      }
  std::int64_t whole_params = parameters(whole.graph), table = 0;
  for (const auto& t : whole.graph.tensors())
    if (t.name == "wte") table = t.elements();
  ASSERT_GT(table, 0);
  EXPECT_EQ(held, whole_params + table);
  std::int64_t distinct = 0;
  for (const auto& t : whole.graph.tensors())
    if (t.role == TensorRole::Parameter) distinct += names.count(t.name);
  EXPECT_EQ(distinct, static_cast<std::int64_t>(names.size()));
  // One optimizer per stage over its weights: as many updates as weights.
  for (const auto& s : w.stages) {
    std::int64_t weights = 0, updates = 0;
    for (const auto& t : s->graph.tensors()) weights += t.role == TensorRole::Parameter;
    for (const auto& op : s->graph.ops()) updates += op.type == "AdamWeightDecay";
    EXPECT_EQ(updates, weights);
  }
}

TEST(PipelineParallel, NeighboursPostTheirExchangesInTheSameOrder) {
  // Each pair of ranks must post the collectives between them in one order (HCCL matches them by
  // their sequence): compiled, on the communication stream, as the ranks will run them — with
  // tensor parallelism, a sharded optimizer and the token table shared by the first and last
  // stages.
  const sim::SystemConfig cfg = sim::load_config(test::config_request());
  for (std::int64_t P : {2, 4})  // two stages: the neighbours are also the token table's holders
    for (std::int64_t M : {1, 3, 4, 8})
      for (std::int64_t tp : {1, 2}) {
        const std::int64_t R = 2;
        sim::RunRequest r = pipelined_gpt(P * R, P, M, 2 * M);
        r.tensor_parallel = tp;
        r.optimizer_shard = tp == 1;
        const Workload w = sim::request_workload(r, cfg);
        // Per stage and peer offset: the collectives with that peer, in stream order, as (kind,
        // what this side does, bytes).
        struct Ex {
          hostif::Collective kind;
          std::string role;
          std::int64_t bytes;
        };
        std::vector<std::map<std::int32_t, std::vector<Ex>>> ex(P);
        for (std::int64_t s = 0; s < P; ++s) {
          const runtime::CompiledGraph c =
              runtime::compile(*w.stages[static_cast<std::size_t>(s)], test::cost_model(), 2);
          for (const auto& t : c.step_tasks) {
            if (t.kind != hostif::TaskKind::Comm || t.group.peer == 0) continue;
            EXPECT_TRUE(t.across_stages) << t.name;
            EXPECT_EQ(t.group.peer % R, 0) << t.name;
            std::string role = "AllReduce";
            for (const std::string k : {"/Send/", "/Receive/", "/SendReceive/"})
              if (t.name.find("Pipeline" + k) != std::string::npos) role = k;
            ex[static_cast<std::size_t>(s)][t.group.peer].push_back({t.collective, role, t.comm_bytes});
          }
        }
        auto mirror = [](const std::string& role) {
          return role == "/Send/" ? std::string("/Receive/") : role == "/Receive/" ? std::string("/Send/") : role;
        };
        for (std::int64_t s = 0; s < P; ++s)
          for (const auto& [peer, mine] : ex[static_cast<std::size_t>(s)]) {
            const std::int64_t other = s + peer / R;
            ASSERT_TRUE(other >= 0 && other < P) << s << " " << peer;
            const auto& theirs = ex[static_cast<std::size_t>(other)][-peer];
            ASSERT_EQ(mine.size(), theirs.size()) << "M " << M << " tp " << tp << " stages " << s << ", " << other;
            for (std::size_t i = 0; i < mine.size(); ++i) {
              EXPECT_EQ(mine[i].kind, theirs[i].kind) << "M " << M << " s " << s << " #" << i;
              EXPECT_EQ(mine[i].role, mirror(theirs[i].role)) << "M " << M << " s " << s << " #" << i;
              EXPECT_EQ(mine[i].bytes, theirs[i].bytes) << "M " << M << " s " << s << " #" << i;
            }
            // 1F1B: a micro-batch's forward and backward cross each way once, paired where they
            // meet: M + the warm-up exchanges between neighbours.
            if (peer == R) {
              std::int64_t exchanges = 0;
              for (const auto& e : mine) exchanges += e.kind == hostif::Collective::SendRecv;
              EXPECT_EQ(exchanges, M + warmup_micro_batches(P, s, M)) << "M " << M << " s " << s;
            }
          }
        // The token table the head reads: its gradient summed between the first and last stages.
        const auto& ends = ex[0][static_cast<std::int32_t>((P - 1) * R)];
        EXPECT_EQ(std::count_if(ends.begin(), ends.end(),
                                [](const Ex& e) { return e.kind == hostif::Collective::AllReduce; }),
                  1);
      }
}

/// A network of `layers` equal dense layers (h.0, h.1, ...: MatMul [n, H] x [H, H] and ReLU) and a
/// small head, trained by SGD, its inputs and labels constants (the data pipeline reads one sample
/// a micro-batch): equal stages but for the head's few ops and the first layer's input gradient.
Workload equal_layers(std::int64_t layers, std::int64_t n, std::int64_t H) {
  Workload w = make_mlp_slice(1);  // its dataset and SGD
  w.name = "equal-layers";
  w.data.maps.clear();
  w.graph = Graph();
  Graph& g = w.graph;
  const TensorId x0 = g.add_tensor({"x", {n, H}, DType::F16, TensorRole::Constant});
  const TensorId label = g.add_tensor({"label", {n}, DType::I32, TensorRole::Constant});
  w.batch_inputs = {};
  // A scale learnt on the input: the first layer computes its input's gradient as the others do.
  const TensorId scale = g.add_tensor({"scale", {1}, DType::F16, TensorRole::Parameter});
  TensorId x = g.mul("scale/Mul", x0, scale, TensorRole::Activation);
  for (std::int64_t l = 0; l < layers; ++l) {
    const std::string p = "h." + std::to_string(l);
    const TensorId wt = g.add_tensor({p + ".weight", {H, H}, DType::F16, TensorRole::Parameter});
    x = g.relu(p + "/ReLU", g.matmul(p + "/MatMul", x, wt, {false, true}, TensorRole::Activation));
  }
  const TensorId head = g.add_tensor({"head.weight", {16, H}, DType::F16, TensorRole::Parameter});
  w.loss =
      g.sparse_softmax_cross_entropy("loss/SparseSoftmaxCrossEntropyWithLogits",
                                     g.matmul("head/MatMul", x, head, {false, true}, TensorRole::Activation), label);
  append_momentum(g, append_backward(g, w.loss));
  return w;
}

/// Per stage: its bubble and its micro-batches' busy time over `steps` steps of `w`, in ms.
std::vector<std::pair<double, double>> stage_totals(const sim::SystemConfig& cfg, const Workload& w,
                                                    std::int64_t steps) {
  runtime::Session session;
  session.strategy = runtime::Strategy::LoopSink;
  session.steps_per_epoch = steps;
  sim::KernelScope kernel;
  sim::Simulation simulation;
  simulation.add(cfg, w, session, {}, {});
  simulation.run();
  const runtime::RunResult r = simulation.result(0);
  EXPECT_TRUE(r.failure.empty()) << r.failure;
  std::vector<std::pair<double, double>> out;
  const auto n = static_cast<double>(steps), m = static_cast<double>(w.parallel.micro_batches);
  for (const auto& s : r.pipeline["per_stage"])
    out.emplace_back(n * s["bubble_ms"].get<double>(), n * m * s["micro_batch_ms"].get<double>());
  return out;
}

TEST(PipelineParallel, TheBubbleIsTheFillAndDrainOfEqualStages) {
  // Equal stages and free exchanges: each stage idles (p-1) micro-batch times a step, so the
  // bubble is (p-1)/(m+p-1) of the pipeline's time, (m+p-1) micro-batch times. Measured in the
  // steady state: what 4 more steps add.
  const std::int64_t P = 4, L = 8;
  sim::SystemConfig cfg = sim::load_config(test::config_request());
  cfg.chip.hccl.step_latency_us = 0;
  cfg.chip.hccl.link_bandwidth_gbps = 1e5;
  double before = 1;
  for (std::int64_t M : {4, 8, 16}) {
    std::vector<Workload> stages = pipeline_stages(equal_layers(L, 4096, 8192), P, M, 1);
    std::vector<std::shared_ptr<const Workload>> held;
    for (auto& s : stages) {
      s.parallel.devices = P;
      s.parallel.devices_per_server = P;
      s.parallel.gradient_group_size = 1;
      held.push_back(std::make_shared<const Workload>(s));
    }
    Workload w = stages.front();
    w.stages = held;
    const auto a = stage_totals(cfg, w, 4), b = stage_totals(cfg, w, 8);
    ASSERT_EQ(a.size(), static_cast<std::size_t>(P));
    // Per step: each stage's bubble and its micro-batches' time.
    std::vector<double> bubble, busy;
    for (std::size_t s = 0; s < a.size(); ++s) {
      bubble.push_back((b[s].first - a[s].first) / 4);
      busy.push_back((b[s].second - a[s].second) / 4);
      ASSERT_GT(busy.back(), 0);
    }
    // Every stage's step is its micro-batches and its bubble: the same step on every stage.
    const double step = bubble[0] + busy[0];
    for (std::size_t s = 1; s < busy.size(); ++s) EXPECT_NEAR(bubble[s] + busy[s], step, 0.005 * step) << s;
    // The step is (m+p-1) micro-batch times, between the fastest stage's one and the slowest's
    // (stage 0's m micro-batches and the others' p-1 of its fill and drain).
    const double fastest_mb = *std::min_element(busy.begin(), busy.end()) / static_cast<double>(M),
                 slowest_mb = *std::max_element(busy.begin(), busy.end()) / static_cast<double>(M);
    const double per = step / static_cast<double>(M + P - 1);
    EXPECT_GE(per, 0.99 * fastest_mb) << "M " << M;
    EXPECT_LE(per, 1.01 * slowest_mb) << "M " << M;
    // So the bubble is (p-1)/(m+p-1) of the step (these stages differ by about 2%: the first one's
    // input scale).
    const double ideal = static_cast<double>(P - 1) / static_cast<double>(M + P - 1);
    const double mean = std::accumulate(bubble.begin(), bubble.end(), 0.0) / static_cast<double>(P) / step;
    EXPECT_NEAR(mean, ideal, 0.05 * ideal) << "M " << M;
    EXPECT_LT(mean, before);  // more micro-batches, less bubble
    before = mean;
  }
}

TEST(PipelineParallel, EarlierStagesHoldMoreMicroBatchesActivations) {
  // 1F1B keeps min(p - s, m) micro-batches' activations on stage s: the first stage's step memory
  // is the largest, the equal middle stages' fall with s.
  const sim::SystemConfig cfg = sim::load_config(test::config_request());
  sim::RunRequest r = pipelined_gpt(4, 4, 8, 16);
  r.recipe.layers = 8;
  r.recipe.seq_length = 64;
  const Workload w = sim::request_workload(r, cfg);
  std::vector<std::int64_t> step;
  for (const auto& s : w.stages) step.push_back(runtime::compile(*s, test::cost_model(), 2).memory.arena_bytes);
  EXPECT_GT(step[1], step[2]);
  EXPECT_GT(step[0], step[3]);
  EXPECT_GE(step[0], step[1]);
}

TEST(PipelineParallel, WithTensorParallelismAndShardedOptimizerTheRunsFinishAlike) {
  sim::RunRequest r = pipelined_gpt(8, 2, 4, 8);
  r.tensor_parallel = 2;
  r.optimizer_shard = true;
  const sim::RunOutcome x = sim::run(r), y = sim::run(r);
  ASSERT_FALSE(x.failed()) << x.failure_message();
  EXPECT_EQ(x.report().dump(), y.report().dump());
  const auto report = x.report();
  EXPECT_EQ(report["parallel"]["pipeline"]["stages"], 2);
  EXPECT_EQ(report["parallel"]["tensor_parallel"], 2);
  const auto& e = x.runs.front().exposed_comm;
  EXPECT_GT(e["operators_ms_per_step"].get<double>(), 0);  // the tensor-parallel AllReduces
  EXPECT_GT(e["pipeline_ms_per_step"].get<double>(), 0);
  EXPECT_TRUE(x.runs.front().optimizer_collectives.contains("ReduceScatter"));
}

TEST(PipelineParallel, RequestsThatCannotBePipelinedAreRefusedNamingTheKey) {
  const sim::SystemConfig cfg = sim::load_config(test::config_request());
  auto refused = [&](sim::RunRequest r, const std::string& key, const std::string& words) {
    try {
      sim::request_workload(r, cfg);
      ADD_FAILURE() << "accepted; expected " << key;
    } catch (const sim::InputError& e) {
      EXPECT_EQ(e.key(), key) << e.what();
      EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
    }
  };
  refused(pipelined_gpt(8, 8, 8, 8), "pipeline_stages", "4 transformer layer(s)");
  refused(pipelined_gpt(6, 4, 4, 8), "pipeline_stages", "do not divide the 6 device(s)");
  refused(pipelined_gpt(4, 4, 3, 8), "micro_batches", "does not divide into 3 micro-batches");
  sim::RunRequest lenet = pipelined_gpt(2, 2, 2, 8);
  lenet.workload = "lenet5";
  lenet.recipe = {};
  refused(lenet, "pipeline_stages", "not lenet5");
  sim::RunRequest tp = pipelined_gpt(4, 2, 2, 8);
  tp.tensor_parallel = 4;
  refused(tp, "tensor_parallel", "each of the 2 stages has 2 rank(s)");
  sim::RunRequest micro = pipelined_gpt(2, 1, 4, 8);
  refused(micro, "micro_batches", "pipeline_stages 2 or more");
  sim::RunRequest functional = pipelined_gpt(2, 2, 2, 8);
  functional.functional.enabled = true;
  refused(functional, "pipeline_stages", "functional mode");
}

}  // namespace
}  // namespace ascendsim::workloads

namespace ascendsim::workloads {
namespace {

TEST(PipelineParallel, DataParallelStagesReduceTheirGradientsAfterTheLastExchange) {
  // Two ranks a stage: the parameters are broadcast within the stage, and a stage's gradient
  // AllReduce starts after its last exchange, which would otherwise queue behind it.
  sim::RunRequest r = pipelined_gpt(4, 2, 2, 4);
  const sim::RunOutcome out = sim::run(r);
  ASSERT_FALSE(out.failed()) << out.failure_message();
  EXPECT_EQ(out.report()["parallel"]["data_shards"], 2);
  const sim::SystemConfig cfg = sim::load_config(test::config_request());
  const Workload w = sim::request_workload(r, cfg);
  for (const auto& s : w.stages) {
    const runtime::CompiledGraph c = runtime::compile(*s, test::cost_model(), 2);
    ASSERT_FALSE(c.setup_tasks.empty());
    EXPECT_EQ(c.setup_tasks.front().group.size, 2);  // the broadcast, within the stage
    std::int64_t last_exchange = -1, first_reduce = -1, i = 0;
    for (const auto& t : c.step_tasks) {
      if (t.stream == 1 && t.collective == hostif::Collective::SendRecv) last_exchange = i;
      if (t.stream == 1 && t.comm_group >= 0 && first_reduce < 0) first_reduce = i;
      ++i;
    }
    ASSERT_GE(first_reduce, 0);
    EXPECT_GT(first_reduce, last_exchange) << "stage " << s->parallel.stage;
  }
  // Evaluation during training and semi-auto strategies are refused with stages.
  r.eval_every = 1;
  EXPECT_THROW(sim::request_workload(r, cfg), sim::InputError);
}

TEST(GradientAccumulation, NMicroBatchesComputeWithOneOptimizerStepAndOneSetOfCollectives) {
  // ResNet-50 on 2 data-parallel ranks, a step of 32 per rank: as 4 micro-batches of 8 (gradient
  // accumulation) against one batch of 32 and one micro-batch of 8 alone.
  const sim::SystemConfig cfg = sim::load_config(test::config_request());
  sim::RunRequest r;
  r.config = test::config_request();
  r.workload = "resnet50";
  r.devices = 2;
  r.batch_size = 32;
  r.steps_per_epoch = 2;
  r.strategies = {runtime::Strategy::GraphSink};
  const std::int64_t N = 4;
  sim::RunRequest micro = r, acc = r;
  micro.batch_size = 8;
  acc.gradient_accumulation = N;
  const Workload w32 = sim::request_workload(r, cfg), w8 = sim::request_workload(micro, cfg),
                 wa = sim::request_workload(acc, cfg);
  EXPECT_EQ(wa.batch_size, 32);
  EXPECT_EQ(wa.parallel.gradient_accumulation, N);
  EXPECT_EQ(wa.parallel.pipeline_stages, 1);
  // The arithmetic is the whole batch's, as N micro-batches'.
  EXPECT_EQ(forward_macs(wa.graph), N * forward_macs(w8.graph));
  EXPECT_EQ(forward_macs(wa.graph), forward_macs(w32.graph));
  const auto grads = static_cast<std::int64_t>(w32.graph.optimizer_gradients().size());
  std::map<std::string, std::int64_t> optimizer_ops, plain_optimizer_ops;
  std::int64_t accumulate = 0, last = 0, clear = 0;
  for (const auto& op : wa.graph.ops()) {
    if (op.pass == Pass::Optimizer && op.type != "AtomicAddrClean") ++optimizer_ops[op.type];
    if (op.type == "AccumulateGrad") ++accumulate;
    if (op.type == "Add" && op.name.find("GradientAccumulation/") != std::string::npos) ++last;
    if (op.type == "AtomicAddrClean" && op.name.find("ClearGradients/") != std::string::npos) ++clear;
  }
  for (const auto& op : w32.graph.ops())
    if (op.pass == Pass::Optimizer) ++plain_optimizer_ops[op.type];
  EXPECT_EQ(optimizer_ops, plain_optimizer_ops);  // one optimizer step, as the plain step's
  EXPECT_EQ(accumulate, (N - 1) * grads);         // into the accumulators, the last out of place
  EXPECT_EQ(last, grads);
  EXPECT_EQ(clear, grads);
  // Compiled: the micro-batches' kernels are N times one micro-batch's; the optimizer's kernels
  // the plain step's; the gradients' collectives the plain step's, once.
  const runtime::CompiledGraph ca = runtime::compile(wa, test::cost_model(), 2),
                               c8 = runtime::compile(w8, test::cost_model(), 2),
                               c32 = runtime::compile(w32, test::cost_model(), 2);
  auto sums = [](const runtime::CompiledGraph& c) {
    struct {
      double passes = 0, optimizer = 0, comm_bytes = 0;
      std::int64_t comms = 0;
    } out;
    for (const auto& t : c.step_tasks) {
      if (t.kind == hostif::TaskKind::Comm) {
        ++out.comms;
        out.comm_bytes += static_cast<double>(t.comm_bytes);
      }
      if (t.kind != hostif::TaskKind::AiCore) continue;
      const bool bookkeeping = t.name.find("/Slice/") != std::string::npos ||
                               t.name.find("GradientAccumulation/") != std::string::npos ||
                               t.name.find("ClearGradients/") != std::string::npos;
      if (t.part == hostif::StepPart::Optimizer && !bookkeeping)
        out.optimizer += t.cost.time_s;
      else if (!bookkeeping)
        out.passes += t.cost.time_s;
    }
    return out;
  };
  const auto sa = sums(ca), s8 = sums(c8), s32 = sums(c32);
  EXPECT_NEAR(sa.passes, static_cast<double>(N) * s8.passes, 1e-9 * sa.passes);
  EXPECT_NEAR(sa.optimizer, s32.optimizer, 1e-9 * sa.optimizer);
  EXPECT_EQ(sa.comms, s32.comms);
  EXPECT_EQ(sa.comm_bytes, s32.comm_bytes);
  EXPECT_GT(sa.comms, 0);
  // Memory: the weights and optimizer state are the plain step's, plus the accumulators (MindSpore's
  // accu_grads, one per gradient); the activations are a micro-batch's.
  std::int64_t accumulators = 0;
  for (const auto& t : wa.graph.tensors())
    if (t.name.rfind("accu_grads.", 0) == 0) accumulators += t.bytes();
  EXPECT_GT(accumulators, 0);
  EXPECT_EQ(ca.memory.weight_bytes, c32.memory.weight_bytes);
  EXPECT_EQ(ca.memory.optimizer_state_bytes, c32.memory.optimizer_state_bytes);  // the learning rates per step
  EXPECT_GE(ca.memory.other_persistent_bytes, c32.memory.other_persistent_bytes + accumulators);
  EXPECT_LE(ca.memory.other_persistent_bytes,
            c32.memory.other_persistent_bytes + accumulators + grads * runtime::MemoryPlan::kAlignment);
  EXPECT_LT(ca.memory.peak_activation_bytes, c32.memory.peak_activation_bytes / 2);
  // A run reports it, and takes the whole batch per step from the pipeline.
  const sim::RunOutcome out = sim::run(acc);
  ASSERT_FALSE(out.failed()) << out.failure_message();
  EXPECT_EQ(out.report()["gradient_accumulation"], N);
  EXPECT_EQ(out.report()["batch_size"], 32);
}

TEST(GradientAccumulation, ShardedGradientsAreReduceScatteredEachMicroBatchIntoPieces) {
  // ZeRO-2 (optimizer_shard_level 2) against ZeRO-1 (level 1): 4 data-parallel ranks, fp16 weights
  // (amp O3), AdamW, a step of N micro-batches.
  const sim::SystemConfig cfg = sim::load_config(test::config_request());
  const std::int64_t N = 4, D = 4;
  sim::RunRequest one = pipelined_gpt(D, 1, 0, 4 * N);
  one.pipeline_stages = 1;
  one.gradient_accumulation = N;
  one.recipe.amp_level = "O3";
  one.optimizer_shard = true;
  sim::RunRequest two = one;
  two.optimizer_shard_level = 2;
  const Workload w1 = sim::request_workload(one, cfg), w2 = sim::request_workload(two, cfg);
  EXPECT_EQ(w2.recipe.describe().find("optimizer state and gradients sharded over 4 ranks") != std::string::npos, true);
  auto count = [](const Workload& w, const std::string& type, Pass pass) {
    std::int64_t n = 0;
    for (const auto& op : w.graph.ops()) n += op.type == type && op.pass == pass;
    return n;
  };
  const std::int64_t sharded = count(w1, "AllGatherInto", Pass::Optimizer);
  ASSERT_GT(sharded, 0);
  EXPECT_EQ(count(w2, "AllGatherInto", Pass::Optimizer), sharded);  // the same weights sharded
  // Level 1 reduce-scatters the step's sums once, in the optimizer; level 2 each micro-batch's
  // gradient as the backward pass computes it, and the optimizer none.
  EXPECT_EQ(count(w1, "ReduceScatter", Pass::Optimizer), sharded);
  EXPECT_EQ(count(w1, "ReduceScatter", Pass::Backward), 0);
  EXPECT_EQ(count(w2, "ReduceScatter", Pass::Optimizer), 0);
  EXPECT_EQ(count(w2, "ReduceScatter", Pass::Backward), N * sharded);
  // The accumulators of level 2 are the pieces (1/D), in the gradients' fp16; each sharded fp16
  // weight's piece has an fp32 master copy among the optimizer state, cast to fp16 before the gather.
  std::int64_t acc1 = 0, acc2 = 0, masters = 0, master_bytes = 0, piece_elements = 0;
  for (const auto& t : w1.graph.tensors())
    if (t.name.rfind("accu_grads.", 0) == 0) acc1 += t.bytes();
  for (const auto& t : w2.graph.tensors()) {
    if (t.name.rfind("accu_grads.", 0) == 0) acc2 += t.bytes();
    if (t.name.rfind("master.", 0) == 0) {
      ++masters;
      master_bytes += t.bytes();
      piece_elements += t.elements();
      EXPECT_EQ(t.dtype, DType::F32) << t.name;
      EXPECT_EQ(t.role, TensorRole::OptimizerState) << t.name;
    }
  }
  EXPECT_EQ(masters, sharded);
  EXPECT_LT(acc2, acc1);
  EXPECT_GE(acc2 * D, acc1 - acc1 / 4);  // whole-kept (unshardable) gradients stay whole
  for (const auto& op : w2.graph.ops())
    if (op.type == "AllGatherInto") {
      EXPECT_EQ(w2.graph.tensor(op.inputs[0]).dtype, DType::F16) << op.name;
      EXPECT_EQ(w2.graph.tensor(op.inputs[1]).dtype, DType::F16) << op.name;
    }
  // Compiled: level 2's reduce-scatters move N times level 1's bytes; its persistent memory holds
  // the fp32 masters and only the accumulators' pieces.
  const runtime::CompiledGraph c1 = runtime::compile(w1, test::cost_model(), D),
                               c2 = runtime::compile(w2, test::cost_model(), D);
  auto scattered = [](const runtime::CompiledGraph& c) {
    double bytes = 0;
    for (const auto& t : c.step_tasks)
      if (t.kind == hostif::TaskKind::Comm && t.collective == hostif::Collective::ReduceScatter)
        bytes += static_cast<double>(t.comm_bytes);
    return bytes;
  };
  EXPECT_GT(scattered(c1), 0);
  EXPECT_DOUBLE_EQ(scattered(c2), static_cast<double>(N) * scattered(c1));
  EXPECT_EQ(c2.memory.weight_bytes, c1.memory.weight_bytes);  // the fp16 weights, whole on every rank
  EXPECT_GE(c2.memory.optimizer_state_bytes, c1.memory.optimizer_state_bytes + master_bytes);
  EXPECT_EQ(master_bytes, 4 * piece_elements);
  EXPECT_LT(c2.memory.other_persistent_bytes, c1.memory.other_persistent_bytes);
  // A run of it; an unknown level is refused naming the key.
  const sim::RunOutcome out = sim::run(two);
  ASSERT_FALSE(out.failed()) << out.failure_message();
  EXPECT_EQ(out.report()["recipe"]["gradients_sharded"], true);
  EXPECT_EQ(out.report()["recipe"]["optimizer_shard"], D);
  sim::RunRequest bad = two;
  bad.optimizer_shard_level = 3;
  try {
    sim::request_workload(bad, cfg);
    ADD_FAILURE() << "level 3 accepted";
  } catch (const sim::InputError& e) {
    EXPECT_EQ(e.key(), "optimizer_shard_level");
  }
}

TEST(GradientAccumulation, WithPipelineStagesItRunsRoundsOfTheMicroBatchesInOneSchedule) {
  const sim::SystemConfig cfg = sim::load_config(test::config_request());
  sim::RunRequest r = pipelined_gpt(2, 2, 2, 8);
  r.gradient_accumulation = 2;
  const Workload w = sim::request_workload(r, cfg);
  ASSERT_EQ(w.stages.size(), 2u);
  for (const auto& s : w.stages) {
    EXPECT_EQ(s->parallel.micro_batches, 4);
    EXPECT_EQ(s->parallel.gradient_accumulation, 2);
    std::int64_t optimizer_steps = 0;
    for (const auto& op : s->graph.ops()) optimizer_steps += op.type == "AdamWeightDecay" ? 1 : 0;
    std::int64_t weights = 0;
    for (const auto& t : s->graph.tensors()) weights += t.role == TensorRole::Parameter ? 1 : 0;
    EXPECT_EQ(optimizer_steps, weights) << "stage " << s->parallel.stage;  // each weight updated once a step
  }
  const sim::RunOutcome out = sim::run(r);
  ASSERT_FALSE(out.failed()) << out.failure_message();
  EXPECT_EQ(out.report()["parallel"]["pipeline"]["micro_batches"], 4);
  EXPECT_EQ(out.report()["gradient_accumulation"], 2);
}

TEST(GradientAccumulation, RequestsThatCannotAccumulateAreRefusedNamingTheKey) {
  const sim::SystemConfig cfg = sim::load_config(test::config_request());
  sim::RunRequest r;
  r.config = test::config_request();
  r.workload = "lenet5";
  r.batch_size = 32;
  auto key_of = [&](const sim::RunRequest& q) -> std::string {
    try {
      sim::request_workload(q, cfg);
    } catch (const sim::InputError& e) {
      return e.key();
    }
    return "";
  };
  sim::RunRequest q = r;
  q.gradient_accumulation = 0;
  EXPECT_EQ(key_of(q), "gradient_accumulation");
  q.gradient_accumulation = -3;
  EXPECT_EQ(key_of(q), "gradient_accumulation");
  q.gradient_accumulation = 5;  // 32 does not divide into 5
  EXPECT_EQ(key_of(q), "gradient_accumulation");
  q.gradient_accumulation = 4;
  q.eval_every = 1;
  EXPECT_EQ(key_of(q), "eval_every");
  q.eval_every = 0;
  q.mode = "infer";
  EXPECT_EQ(key_of(q), "gradient_accumulation");
  q.mode = "train";
  EXPECT_EQ(key_of(q), "");
}

}  // namespace
}  // namespace ascendsim::workloads
