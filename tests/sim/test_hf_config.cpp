// Hugging Face configs (sim/hf_config.h): the shipped configs give PyTorch's parameter counts in
// the training graph and the serving step's weights, a GPT-2 and a BERT config their presets'
// counts, flags override a config's fields, and every bad config or file is refused naming the
// file and the field — through the library and the command line (exit 2).
#include <filesystem>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "sim/core/error.h"
#include "sim/hf_config.h"
#include "sim/regression.h"
#include "tests/cli_support.h"
#include "workloads/serving.h"
#include "workloads/transformer.h"

namespace ascendsim::sim {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using workloads::TransformerShape;

const std::string kHf = ASCENDSIM_SOURCE_DIR "/configs/hf/";

/// GPT-2 small's config.json (openai-community/gpt2): n_inner null, so 4 x n_embd.
const char* kGpt2 = R"({
  "activation_function": "gelu_new", "architectures": ["GPT2LMHeadModel"], "attn_pdrop": 0.1,
  "bos_token_id": 50256, "embd_pdrop": 0.1, "eos_token_id": 50256, "initializer_range": 0.02,
  "layer_norm_epsilon": 1e-05, "model_type": "gpt2", "n_ctx": 1024, "n_embd": 768, "n_head": 12,
  "n_inner": null, "n_layer": 12, "n_positions": 1024, "resid_pdrop": 0.1, "vocab_size": 50257})";

/// bert-base-uncased's config.json with the pretraining heads' class.
const char* kBert = R"({
  "architectures": ["BertForPreTraining"], "attention_probs_dropout_prob": 0.1, "hidden_act": "gelu",
  "hidden_dropout_prob": 0.1, "hidden_size": 768, "initializer_range": 0.02, "intermediate_size": 3072,
  "layer_norm_eps": 1e-12, "max_position_embeddings": 512, "model_type": "bert", "num_attention_heads": 12,
  "num_hidden_layers": 12, "pad_token_id": 0, "position_embedding_type": "absolute", "type_vocab_size": 2,
  "vocab_size": 30522})";

/// A small LLaMA config whose fields the tests change one at a time.
nlohmann::json small_llama() {
  return {{"architectures", {"LlamaForCausalLM"}}, {"hidden_size", 256}, {"intermediate_size", 512},
          {"max_position_embeddings", 128},       {"num_attention_heads", 4}, {"num_hidden_layers", 2},
          {"num_key_value_heads", 2},             {"vocab_size", 1000},       {"hidden_act", "silu"}};
}

workloads::Workload training(const TransformerShape& s, workloads::RecipeOverrides o = {}) {
  o.base_shape = std::make_shared<const TransformerShape>(s);
  o.seq_length = o.seq_length.value_or(64);  // the count does not depend on it; a short graph builds fast
  return workloads::make_workload(s.name, 1, o);
}

/// The serving step's weights (one rank, one short decode step).
std::int64_t serving_parameters(const TransformerShape& s) {
  workloads::StepShape step;
  step.decode_seqs = 1;
  step.decode_context = 16;
  workloads::ServingLayout l;
  l.block_size = 16;
  l.kv_blocks = 2;
  return workloads::parameter_count(workloads::serving_step(s, step, l).graph);
}

std::string refusal(const std::string& text, const std::string& path = "m.json") {
  try {
    parse_hf_config(text, path);
  } catch (const InputError& e) {
    return e.what();
  }
  return "(accepted)";
}

TEST(HfConfig, TheShippedConfigsGivePyTorchsParameterCounts) {
  // PyTorch's sum(p.numel() for p in model.parameters()) of each model (a tied table once).
  const std::pair<const char*, std::int64_t> models[] = {
      {"llama-2-7b", 6'738'415'616}, {"qwen2.5-7b", 7'615'616'512}, {"qwen2.5-0.5b", 494'032'768}};
  for (const auto& [name, count] : models) {
    const TransformerShape s = load_hf_config(kHf + name + ".json", name);
    EXPECT_EQ(s.name, name);
    EXPECT_EQ(workloads::parameter_count(training(s).graph), count) << name;
    EXPECT_EQ(serving_parameters(s), count) << name;
    workloads::ServingLayout one;
    EXPECT_EQ(workloads::serving_weight_bytes(s, one), 2 * count) << name << ": fp16 weights";
  }
  const TransformerShape qwen = load_hf_config(kHf + "qwen2.5-7b.json", "qwen");
  EXPECT_EQ(qwen.kind, TransformerShape::Kind::Llama);
  EXPECT_TRUE(qwen.qkv_bias);
  EXPECT_EQ(qwen.kv(), 4);
  EXPECT_EQ(qwen.seq, 32768);  // max_position_embeddings: the training sequence unless --seq-length
  EXPECT_FALSE(qwen.tied_embeddings);
  EXPECT_TRUE(load_hf_config(kHf + "qwen2.5-0.5b.json", "q").tied_embeddings);
  // A tensor-parallel rank holds its part of the split layers (and of Qwen2's q, k, v biases).
  workloads::ServingLayout two;
  two.tensor_parallel = 2;
  const std::int64_t h = 3584, qkv = (28 + 2 * 4) * 128, f = 18944, split = (qkv + h) * h + qkv + 3 * h * f;
  EXPECT_EQ(workloads::serving_weight_bytes(qwen, two), 2 * (7'615'616'512 - 28 * split / 2));
}

TEST(HfConfig, GptTwoAndBertConfigsGiveTheirPresetsCounts) {
  const TransformerShape gpt = parse_hf_config(kGpt2, "gpt2.json"), bert = parse_hf_config(kBert, "bert.json");
  EXPECT_EQ(gpt.name, "gpt2");
  EXPECT_EQ(gpt.ffn, 3072);
  EXPECT_EQ(gpt.seq, 1024);
  EXPECT_EQ(bert.seq, 128);  // pretraining's phase 1, as bert-base; the table has 512 rows
  const std::int64_t gpt_count = 124'439'808, bert_count = 110'106'428;
  EXPECT_EQ(workloads::parameter_count(training(gpt).graph), gpt_count);
  EXPECT_EQ(serving_parameters(gpt), gpt_count);
  EXPECT_EQ(workloads::parameter_count(training(bert).graph), bert_count);
  EXPECT_EQ(workloads::parameter_count(workloads::make_workload("gpt2-small", 1).graph), gpt_count);
  EXPECT_EQ(workloads::parameter_count(workloads::make_workload("bert-base", 1).graph), bert_count);
}

TEST(HfConfig, FieldsFlagsAndNames) {
  nlohmann::json c = small_llama();
  c.erase("num_key_value_heads");  // absent: one per query head, as HF's default
  EXPECT_EQ(parse_hf_config(c.dump(), "m.json").kv(), 4);
  EXPECT_EQ(parse_hf_config(c.dump(), "m.json").kv_heads, 0);  // so --heads alone keeps one per query head
  // A downloaded config.json is named after its model, else its type.
  c["_name_or_path"] = "meta-llama/Llama-2-7b-hf";
  EXPECT_EQ(parse_hf_config(c.dump(), "/x/config.json").name, "Llama-2-7b-hf");
  c.erase("_name_or_path");
  c["model_type"] = "llama";
  EXPECT_EQ(parse_hf_config(c.dump(), "/x/config.json").name, "llama");
  // Flags override the config's fields; the description names the config and the sizes run.
  workloads::RecipeOverrides o;
  o.layers = 1;
  o.kv_heads = 1;
  const TransformerShape s = parse_hf_config(small_llama().dump(), "dir/small.json");
  const workloads::Workload w = training(s, o);
  EXPECT_EQ(w.name, "small");
  EXPECT_THAT(w.description, HasSubstr("LlamaForCausalLM from dir/small.json: 1 layers, hidden 256, 4 heads (1 "
                                       "key/value), MLP 512, sequence 64"));
  // Mistral's sliding window is accepted and said not to be modelled; Qwen2's only when in use.
  c = small_llama();
  c["architectures"] = {"MistralForCausalLM"};
  c["sliding_window"] = 4096;
  EXPECT_THAT(parse_hf_config(c.dump(), "m.json").origin, HasSubstr("sliding window of 4096 tokens not modelled"));
  c["architectures"] = {"Qwen2ForCausalLM"};
  EXPECT_EQ(parse_hf_config(c.dump(), "m.json").origin, "Qwen2ForCausalLM from m.json");
  c["use_sliding_window"] = true;
  EXPECT_THAT(parse_hf_config(c.dump(), "m.json").origin, HasSubstr("not modelled"));
  c["sliding_window"] = nullptr;
  EXPECT_EQ(parse_hf_config(c.dump(), "m.json").origin, "Qwen2ForCausalLM from m.json");
}

TEST(HfConfig, BadConfigsAreRefusedNamingTheFileAndTheField) {
  auto with = [](const char* key, const nlohmann::json& v) {
    nlohmann::json c = small_llama();
    c[key] = v;
    return c.dump();
  };
  auto without = [](const char* key) {
    nlohmann::json c = small_llama();
    c.erase(key);
    return c.dump();
  };
  EXPECT_THAT(refusal(with("architectures", {"T5ForConditionalGeneration"})),
              HasSubstr("m.json: architectures[0] 'T5ForConditionalGeneration' is not modelled: give LlamaForCausalLM"));
  EXPECT_THAT(refusal(with("architectures", {"BertForMaskedLM"})), HasSubstr("BERT trains here as BertForPreTraining"));
  EXPECT_THAT(refusal(without("architectures")), HasSubstr("m.json: 'architectures' is missing"));
  EXPECT_THAT(refusal(with("architectures", "LlamaForCausalLM")), HasSubstr("'architectures' is \"LlamaForCausalLM\""));
  EXPECT_THAT(refusal(without("num_hidden_layers")),
              HasSubstr("m.json: 'num_hidden_layers' is missing: a LlamaForCausalLM config gives the layers there"));
  EXPECT_THAT(refusal(without("max_position_embeddings")), HasSubstr("'max_position_embeddings' is missing"));
  EXPECT_THAT(refusal(with("hidden_size", "256")),
              HasSubstr("'hidden_size' is \"256\" (a string): give a whole number from 1 to 2147483647"));
  EXPECT_THAT(refusal(with("hidden_size", 256.5)), HasSubstr("'hidden_size' is 256.5 (a number with a fraction)"));
  EXPECT_THAT(refusal(with("num_hidden_layers", true)), HasSubstr("(a boolean)"));
  EXPECT_THAT(refusal(with("num_hidden_layers", nullptr)), HasSubstr("'num_hidden_layers' is null (null)"));
  EXPECT_THAT(refusal(with("num_hidden_layers", 0)), HasSubstr("'num_hidden_layers' is 0: give a whole number"));
  EXPECT_THAT(refusal(with("vocab_size", -5)), HasSubstr("'vocab_size' is -5"));
  EXPECT_THAT(refusal(with("vocab_size", 2147483648LL)), HasSubstr("'vocab_size' is 2147483648"));
  EXPECT_THAT(refusal(with("vocab_size", 18446744073709551615ULL)), HasSubstr("'vocab_size' is 18446744073709551615"));
  EXPECT_THAT(refusal(with("num_key_value_heads", 3)), HasSubstr("'num_key_value_heads' is 3: it must divide the 4"));
  EXPECT_THAT(refusal(with("head_dim", 128)), HasSubstr("'head_dim' is 128, but hidden_size / num_attention_heads is 64"));
  EXPECT_EQ(refusal(with("head_dim", 64)), "(accepted)");
  EXPECT_THAT(refusal(with("hidden_size", 250)), HasSubstr("'hidden_size' 250 is not a multiple of 'num_attention_heads' 4"));
  EXPECT_THAT(refusal(with("tie_word_embeddings", "yes")), HasSubstr("'tie_word_embeddings' is \"yes\" (a string): give true"));
  EXPECT_THAT(refusal(with("attention_bias", true)), HasSubstr("'attention_bias' is true"));
  EXPECT_THAT(refusal(with("hidden_act", "gelu")), HasSubstr("'hidden_act' is \"gelu\""));
  EXPECT_THAT(refusal(with("sliding_window", "4096")), HasSubstr("'sliding_window' is \"4096\""));
  nlohmann::json bert = nlohmann::json::parse(kBert);
  bert["type_vocab_size"] = 3;
  EXPECT_THAT(refusal(bert.dump()), HasSubstr("'type_vocab_size' is 3: BERT pretraining's two segments"));
  nlohmann::json gpt = nlohmann::json::parse(kGpt2);
  gpt.erase("n_positions");
  EXPECT_THAT(refusal(gpt.dump()), HasSubstr("'n_positions' is missing: a GPT2LMHeadModel config gives"));
  EXPECT_THAT(refusal("{\n  \"architectures\": [\"LlamaForCausalLM\"],\n}"), HasSubstr("m.json:3: malformed JSON: "));
  EXPECT_THAT(refusal(""), HasSubstr("m.json:1: malformed JSON"));
  EXPECT_THAT(refusal("[1, 2]"), HasSubstr("m.json: a Hugging Face config is a JSON object"));
  EXPECT_THAT(refusal("\"\xff\""), HasSubstr("malformed JSON"));
}

class HfConfigCli : public test::CliFixture {
 protected:
  HfConfigCli() : CliFixture("ascendsim_hf_") {}
};

TEST_F(HfConfigCli, InfoTrainAndServeTakeAConfig) {
  // info: the config's name, description and PyTorch's count. At its own sequence (32768) one
  // sequence's activations fit no device: described, then refused naming the config.
  test::CliResult r = run("info --hf-config " + kHf + "qwen2.5-0.5b.json --batch-size 1 --json -");
  EXPECT_EQ(r.code, 2) << r.err;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["workload"], "qwen2.5-0.5b");
  EXPECT_EQ(j["parameters"], 494'032'768);
  EXPECT_THAT(j["description"].get<std::string>(),
              HasSubstr("Qwen2ForCausalLM from " + kHf + "qwen2.5-0.5b.json: 24 layers, hidden 896, 14 heads (2 "
                        "key/value), MLP 4864, sequence 32768, vocabulary 151936"));
  r = run("info --hf-config qwen2.5-7b --batch-size 1 --seq-length 512");  // a shipped config by its name
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.err, HasSubstr("error: --hf-config qwen2.5-7b: qwen2.5-7b at batch 1 needs"));
  r = run("info --hf-config qwen2.5-0.5b --batch-size 1 --seq-length 4096 --json -");
  ASSERT_EQ(r.code, 0) << r.err;
  // Flags override the config's fields.
  r = run("info --hf-config llama-2-7b --layers 2 --seq-length 256 --batch-size 1 --json -");
  ASSERT_EQ(r.code, 0) << r.err;
  j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["workload"], "llama-2-7b");
  EXPECT_EQ(j["parameters"], 2 * 202'383'360 + 2 * 32000 * 4096 + 4096);
  EXPECT_THAT(j["description"].get<std::string>(), HasSubstr(": 2 layers, hidden 4096, 32 heads, MLP 11008, sequence 256"));
  // train: no --workload needed; the report names the config's workload.
  r = run("train --hf-config qwen2.5-0.5b --layers 2 --seq-length 128 --batch-size 2 --steps-per-epoch 2 "
          "--strategy non-sink --json - -q");
  ASSERT_EQ(r.code, 0) << r.err;
  j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["workload"], "qwen2.5-0.5b");
  // serve: the config's decoder.
  r = run("serve --hf-config qwen2.5-0.5b --layers 2 --requests 4 --prompt-tokens 64 --output-tokens 8 "
          "--decode-batches 1 --json - -q");
  ASSERT_EQ(r.code, 0) << r.err;
  j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["workload"], "qwen2.5-0.5b");
  EXPECT_THAT(j["description"].get<std::string>(), HasSubstr("Qwen2ForCausalLM from "));
}

TEST_F(HfConfigCli, BadConfigsExitTwoNamingThem) {
  const std::string unknown = file("t5.json", R"({"architectures": ["T5ForConditionalGeneration"], "d_model": 512})");
  nlohmann::json c = small_llama();
  c.erase("intermediate_size");
  const std::string missing = file("nolayers.json", c.dump());
  const std::string cases[][2] = {
      {"info --hf-config " + unknown, unknown + ": architectures[0] 'T5ForConditionalGeneration' is not modelled"},
      {"train --strategy non-sink --hf-config " + missing,
       missing + ": 'intermediate_size' is missing: a LlamaForCausalLM config gives the MLP's inner width there"},
      {"serve --hf-config " + missing, "'intermediate_size' is missing"},
      {"info --hf-config nosuch.json", "error: --hf-config nosuch.json: no such file"},
      {"info --hf-config " + m_dir.string(), "--hf-config " + m_dir.string() + ": a directory; give a Hugging Face"},
      {"info --hf-config /dev/full", "--hf-config /dev/full: not a regular file"},
      {"info --hf-config llama-2-7b --workload gpt2-small",
       "--hf-config: the network is a workload or a Hugging Face config; give one of the two"},
      {"serve --hf-config llama-2-7b --gpt-size llama-7b", "--hf-config: the model is a workload or a Hugging Face"},
      {"serve --hf-config " + file("bert.json", kBert), "is an encoder; serving generates with a decoder"},
      {"info --hf-config llama-2-7b --model x.onnx", "--hf-config: the network is a model file or a Hugging Face"},
      // Longer than max_position_embeddings (4096): as vLLM's max_model_len, refused before any run.
      {"serve --hf-config llama-2-7b --layers 2 --requests 2 --prompt-tokens 4000 --output-tokens 97",
       "--prompt-tokens: a sequence of 4097 tokens (prompt and output) is longer than the 4096 its configuration "
       "allows"},
  };
  for (const auto& [args, says] : cases) {
    const test::CliResult r = run(args);
    EXPECT_EQ(r.code, 2) << args;
    EXPECT_THAT(r.err, HasSubstr(says)) << args;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << args << ": one line\n" << r.err;
  }
}

TEST_F(HfConfigCli, SuiteRunsTakeAConfigRelativeToTheConfigurationDirectory) {
  const std::string suite = file("s.yaml", R"(name: hf
runs:
  - {name: qwen, hf_config: hf/qwen2.5-0.5b.json, layers: 2, seq_length: 128, batch_size: 2, steps_per_epoch: 2,
     strategies: [non-sink], flash_attention: false}
  - {name: llama, hf_config: llama-2-7b, layers: 1, seq_length: 64, batch_size: 1, steps_per_epoch: 2,
     strategies: [non-sink]}
  - {name: served, serve: true, hf_config: qwen2.5-0.5b, layers: 2, requests: 4, prompt_tokens: 64,
     output_tokens: 8, decode_batches: [1]}
)");
  const auto runs = load_suite(suite, ASCENDSIM_SOURCE_DIR "/configs", nullptr);
  ASSERT_EQ(runs.size(), 3u);
  EXPECT_EQ(runs[0].request.workload, "qwen2.5-0.5b");
  ASSERT_TRUE(runs[0].request.recipe.base_shape);
  EXPECT_EQ(runs[0].request.recipe.layers, 2);
  EXPECT_EQ(runs[0].request.recipe.seq_length, 128);
  EXPECT_EQ(runs[0].request.recipe.flash_attention, false);
  EXPECT_EQ(runs[1].request.workload, "llama-2-7b");
  ASSERT_TRUE(runs[2].serve && runs[2].serve->shape.base_shape);
  EXPECT_EQ(runs[2].serve->shape.base_shape->name, "qwen2.5-0.5b");
  const test::CliResult r = run("suite " + suite + " --out " + (m_dir / "out").string() + " -q");
  ASSERT_EQ(r.code, 0) << r.err << r.out;
  EXPECT_TRUE(fs::exists(m_dir / "out" / "qwen.json"));
  // A missing config names the run and the path tried; a config with a workload is refused.
  const std::string bad = file("bad.yaml", "name: b\nruns:\n  - {name: x, hf_config: nosuch.json}\n");
  try {
    load_suite(bad, ASCENDSIM_SOURCE_DIR "/configs", nullptr);
    ADD_FAILURE() << "accepted";
  } catch (const InputError& e) {
    EXPECT_THAT(e.what(), HasSubstr("run 1: hf_config " ASCENDSIM_SOURCE_DIR "/configs/nosuch.json: no such file"));
  }
  const std::string both = file("both.yaml", "name: b\nruns:\n  - {name: x, workload: gpt, hf_config: llama-2-7b}\n");
  try {
    load_suite(both, ASCENDSIM_SOURCE_DIR "/configs", nullptr);
    ADD_FAILURE() << "accepted";
  } catch (const InputError& e) {
    EXPECT_THAT(e.what(), HasSubstr("run 1: hf_config: the network is a workload or a Hugging Face config"));
  }
}

}  // namespace
}  // namespace ascendsim::sim
