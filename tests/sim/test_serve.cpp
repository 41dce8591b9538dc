// LLM serving end to end (sim/serve.h): the launch modes' order on a LLaMA-7B-shaped decoder,
// the interpolated step costs against simulated ones, a bit-identical report from an arrivals
// file, and the errors a user meets.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "runtime/graph_compiler.h"
#include "sim/config.h"
#include "sim/core/error.h"
#include "sim/report/serve_report.h"
#include "sim/serve.h"
#include "tests/test_support.h"
#include "workloads/serving.h"

namespace ascendsim::sim {
namespace {

using runtime::LaunchMode;
using runtime::ServePhase;

ServeRequest llama_tp4() {
  ServeRequest r;
  r.config = test::config_request();
  r.config.server = "atlas800t-a2";
  r.workload = "gpt";
  r.gpt_size = "llama-7b";
  r.devices = 4;
  r.tensor_parallel = 4;
  return r;
}

runtime::StepCost decode(const ServeRequest& r, LaunchMode m, std::int64_t batch, std::int64_t context,
                         bool interpolated = false) {
  runtime::StepQuery q;
  q.mode = m;
  q.steps = m == LaunchMode::MultiStep ? r.multi_step : 1;
  q.shape.decode_seqs = batch;
  q.shape.decode_context = context;
  runtime::StepCost c = serving_step_cost(r, q, interpolated);
  c.time_s /= static_cast<double>(q.steps);  // per decode step
  for (double& p : c.phase_s) p /= static_cast<double>(q.steps);
  return c;
}

double phase(const runtime::StepCost& c, ServePhase p) { return c.phase_s[static_cast<std::size_t>(p)]; }

TEST(Serve, AFrameworkChargesEachEagerLaunchOnTheHostsCores) {
  // LLaMA-7B on one 910B of the Atlas 800T A2 (Kunpeng cores, host.core_speed 0.2048): with a
  // Python framework's costs every eager launch pays op_us + arg_us per tensor argument on the
  // host's core, so a batch-1 decode step takes at least the launches' sum and at most that plus
  // the step without them; a captured graph launches once and does not pay them.
  ServeRequest r;
  r.config = test::config_request();
  r.config.server = "atlas800t-a2";
  r.workload = "gpt";
  r.gpt_size = "llama-7b";
  const auto plain = decode(r, LaunchMode::Eager, 1, 576), plain_graph = decode(r, LaunchMode::Graph, 1, 576);
  const double op_us = 20, arg_us = 1;
  r.config.sets = {"framework.op_us=20", "framework.arg_us=1"};
  const auto eager = decode(r, LaunchMode::Eager, 1, 576), graph = decode(r, LaunchMode::Graph, 1, 576);
  const SystemConfig cfg = load_config(r.config);
  ASSERT_NEAR(cfg.host.core_speed, 0.2048, 1e-9);
  workloads::StepShape step;
  step.decode_seqs = 1;
  step.decode_context = 576;
  workloads::ServingLayout layout;
  layout.kv_blocks = 8;
  const runtime::CompiledGraph g = runtime::compile(
      workloads::serving_step(*workloads::transformer_shape("llama-7b"), step, layout), test::cost_model(), 2);
  double launches_s = 0;
  for (const auto& t : g.step_tasks)
    launches_s += 1e-6 * (t.kind == hostif::TaskKind::Comm
                              ? cfg.host.collective_launch_us + op_us / cfg.host.core_speed
                              : cfg.host.op_launch_us + (op_us + arg_us * t.tensor_args) / cfg.host.core_speed);
  EXPECT_GT(g.step_tasks.size(), 300u);
  EXPECT_GE(eager.time_s, launches_s);
  EXPECT_LE(eager.time_s, launches_s + plain.time_s);
  EXPECT_GT(phase(eager, ServePhase::Launch), 0.7 * launches_s);  // the device idles behind the host
  EXPECT_NEAR(graph.time_s, plain_graph.time_s, 1e-6 * plain_graph.time_s);
  EXPECT_GT(eager.time_s, 3 * graph.time_s);
  // The shipped presets: each names itself; an unknown one is refused naming the key and the presets.
  r.config.sets.clear();
  r.config.framework = "vllm-ascend-eager";
  EXPECT_GT(load_config(r.config).host.framework_op_us, 0);
  r.config.framework = "pytorch-nightly";
  try {
    load_config(r.config);
    ADD_FAILURE() << "an unknown framework loaded";
  } catch (const InputError& e) {
    EXPECT_EQ(e.key(), "framework");
    EXPECT_NE(std::string(e.what()).find("vllm-ascend-eager"), std::string::npos) << e.what();
  }
}

TEST(Serve, LaunchModesOrderAndTheLaunchesExplainTheGap) {
  const ServeRequest r = llama_tp4();
  const auto eager1 = decode(r, LaunchMode::Eager, 1, 576), graph1 = decode(r, LaunchMode::Graph, 1, 576),
             multi1 = decode(r, LaunchMode::MultiStep, 1, 576);
  const auto eager128 = decode(r, LaunchMode::Eager, 128, 576), graph128 = decode(r, LaunchMode::Graph, 128, 576);
  // At batch 1 the host's launches bound the eager step; a captured graph removes them, a
  // multi-step launch also the per-step sync, copy and framework work.
  EXPECT_GT(eager1.time_s, 1.5 * graph1.time_s);
  EXPECT_LT(multi1.time_s, graph1.time_s);
  const double gap = eager1.time_s - graph1.time_s;
  EXPECT_GT(phase(eager1, ServePhase::Launch) - phase(graph1, ServePhase::Launch), 0.8 * gap);
  // The eager step launches each of its ~400 tasks (ops, collectives, events) at host.op_launch_us.
  EXPECT_GT(phase(eager1, ServePhase::Launch) + phase(eager1, ServePhase::DeviceCompute), 400 * 10e-6);
  // As the batch grows the device's work hides the launches: the gap shrinks.
  EXPECT_LT(eager128.time_s / graph128.time_s, 0.5 * (1 + eager1.time_s / graph1.time_s));
  EXPECT_GT(graph128.time_s, graph1.time_s);
  EXPECT_GT(phase(graph128, ServePhase::DeviceCompute), phase(graph1, ServePhase::DeviceCompute));
  // Tensor parallelism's AllReduces: some of their time is exposed on the device.
  EXPECT_GT(phase(graph1, ServePhase::Comm), 0);
}

TEST(Serve, InterpolatedStepCostsAgreeWithSimulatingTheShape) {
  // Shapes between the simulated anchors (batch buckets; contexts and prompt lengths 64, 96, 128,
  // 192, ...), each against the shape simulated itself. The cost model is step-like where a
  // mean context or a token count crosses an attention or MatMul tile (300 keys take the three
  // 128-key tiles 384 do); linear interpolation runs between the steps, so it stays within 3%
  // away from them and within 10% at them (docs/serving.md, "Step costs").
  ServeRequest r = llama_tp4();
  r.prompt_tokens = 1500;
  r.output_tokens = 500;
  double worst_decode = 0, worst_prefill = 0, smooth = 0;
  for (LaunchMode m : {LaunchMode::Eager, LaunchMode::Graph})
    for (std::int64_t b : {3, 12, 40, 100})
      for (std::int64_t c : {300, 760, 1500}) {
        const double error = decode(r, m, b, c, true).time_s / decode(r, m, b, c).time_s - 1;
        worst_decode = std::max(worst_decode, std::abs(error));
        if (c != 300) smooth = std::max(smooth, std::abs(error));
      }
  for (std::int64_t b : {1, 3, 5})
    for (std::int64_t t : {100, 300, 700}) {
      runtime::StepQuery q;
      q.shape.prefill_seqs = b;
      q.shape.prefill_tokens = q.shape.prefill_context = t;
      const double error = serving_step_cost(r, q, true).time_s / serving_step_cost(r, q, false).time_s - 1;
      worst_prefill = std::max(worst_prefill, std::abs(error));
    }
  EXPECT_LT(smooth, 0.03);
  EXPECT_LT(worst_decode, 0.10);
  EXPECT_LT(worst_prefill, 0.08);
  EXPECT_GT(worst_decode, 0);  // the points are between anchors, not on them
}

TEST(Serve, BatchesPastTheLargestBucketAreCostedAtTheirSize) {
  // Captured graphs up to batch 2 only: an eager batch of 100 is still costed as 100 sequences,
  // interpolated between the anchors 64 and 128 (within 6%: 100 rows take tiles 128 fill).
  ServeRequest r = llama_tp4();
  r.graph_buckets = {1, 2};
  const auto interpolated = decode(r, LaunchMode::Eager, 100, 576, true),
             exact = decode(r, LaunchMode::Eager, 100, 576);
  EXPECT_NEAR(interpolated.time_s / exact.time_s, 1, 0.06);
  EXPECT_GT(exact.time_s, decode(r, LaunchMode::Eager, 2, 576).time_s * 1.05);
}

ServeRequest small(const std::string& arrivals) {
  ServeRequest r;
  r.config = test::config_request();
  r.workload = "gpt";
  r.shape.layers = 2;
  r.shape.hidden = 256;
  r.shape.heads = 4;
  r.shape.ffn = 1024;
  r.shape.vocab = 2000;
  r.arrivals = arrivals;
  r.launch = {LaunchMode::Eager, LaunchMode::Graph, LaunchMode::MultiStep};
  r.max_seqs = 16;
  r.decode_batches = {1, 16};
  return r;
}

std::string write_arrivals(const std::string& name, const std::string& text) {
  const auto path = test::temp_path(name);
  std::ofstream(path) << text;
  return path.string();
}

TEST(Serve, AnArrivalsFileGivesABitIdenticalReport) {
  std::ostringstream lines;
  for (int i = 0; i < 60; ++i)
    lines << "{\"arrival_s\": " << 0.01 * i << ", \"prompt_tokens\": " << 20 + (i * 37) % 200
          << ", \"output_tokens\": " << 5 + (i * 13) % 40 << "}\n";
  const std::string file = write_arrivals("serve_arrivals.jsonl", lines.str());
  const ServeRequest r = small(file);
  const ServeOutcome a = serve(r), b = serve(r);
  const std::string ja = report::serve_json(a).dump(), jb = report::serve_json(b).dump();
  EXPECT_EQ(ja, jb);
  EXPECT_EQ(report::serve_html(a), report::serve_html(b));
  // In another process, through the command line: the same report.
  const auto json = test::temp_path("serve_report.json");
  const std::string cmd = std::string(ASCENDSIM_BIN) +
                          " serve --workload gpt --layers 2 --hidden 256 --heads 4 "
                          "--ffn 1024 --vocab 2000 --launch all --max-seqs 16 --decode-batches 1,16 -q --arrivals " +
                          file + " --json " + json.string() + " > /dev/null";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  std::ifstream in(json);
  std::stringstream cli;
  cli << in.rdbuf();
  auto from_cli = nlohmann::ordered_json::parse(cli.str()), here = report::serve_json(a);
  from_cli.erase("config");  // the configuration directory's path may differ; its values may not
  here.erase("config");
  EXPECT_EQ(from_cli.dump(), here.dump());
  // Serving units: every request, its latencies, the KV cache over time.
  const auto report = report::serve_json(a);
  const auto& run = report["runs"][0];
  EXPECT_EQ(run["requests"], 60);
  EXPECT_GT(run["ttft_ms"]["p99"].get<double>(), run["ttft_ms"]["p50"].get<double>());
  EXPECT_GT(run["kv_cache"]["timeline"].size(), 10u);
  EXPECT_EQ(report["decode_step_by_batch"].size(), 2u);
  std::filesystem::remove(file);
  std::filesystem::remove(json);
}

TEST(Serve, ErrorsNameTheKeyAndWhatToDo) {
  ServeRequest r = llama_tp4();
  r.requests = 3;
  r.kv_blocks = 10'000'000;
  try {
    serve(r);
    FAIL();
  } catch (const InputError& e) {
    EXPECT_EQ(e.key(), "kv_blocks");
    EXPECT_NE(std::string(e.what()).find("at most"), std::string::npos) << e.what();
  }
  r.kv_blocks = 0;
  r.block_size = 0;
  try {
    serve(r);
    FAIL();
  } catch (const InputError& e) {
    EXPECT_EQ(e.key(), "block_size");
  }
  r.block_size = 128;
  r.sampling = "host";
  r.launch = {LaunchMode::MultiStep};
  try {
    serve(r);
    FAIL();
  } catch (const InputError& e) {
    EXPECT_EQ(e.key(), "sampling");
  }
  r.sampling = "device";
  r.tensor_parallel = 3;
  r.devices = 3;
  try {
    serve(r);
    FAIL();
  } catch (const InputError& e) {
    EXPECT_EQ(e.key(), "tensor_parallel");
  }
  const std::string bad = write_arrivals("serve_bad.jsonl",
                                         "{\"arrival_s\": 0, \"prompt_tokens\": 5, \"output_tokens\": 3}\n"
                                         "{\"arrival_s\": 1, \"prompt\": 5}\n");
  try {
    serve(small(bad));
    FAIL();
  } catch (const InputError& e) {
    EXPECT_EQ(e.origin(), bad + ":2");
    EXPECT_NE(std::string(e.what()).find("unknown key 'prompt'"), std::string::npos) << e.what();
  }
  std::filesystem::remove(bad);
  // More replicas than requests: the idle replicas serve nothing.
  ServeRequest few = small("");
  few.arrivals.clear();
  few.requests = 2;
  few.devices = 4;
  const ServeOutcome out = serve(few);
  EXPECT_EQ(out.runs[0].log.requests.size(), 2u);
}

}  // namespace
}  // namespace ascendsim::sim
