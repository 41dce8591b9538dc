// Hugging Face configs (sim/hf_config.h): a config.json into a transformer's shape.
#include "sim/hf_config.h"

#include <algorithm>
#include <cstdint>
#include <memory>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "sim/core/error.h"

namespace ascendsim::sim {

namespace fs = std::filesystem;
using nlohmann::json;
using workloads::TransformerShape;

namespace {

/// Past 2^31 a dimension is no model's, and the sizes made from it would overflow (as the flags').
constexpr std::int64_t kMaxDimension = 2147483647;
/// A config.json is a few kilobytes; a file far larger is not one.
constexpr std::uintmax_t kMaxBytes = std::uintmax_t{16} << 20;

/// A value as a message shows it: its JSON, cut short.
std::string shown(const json& v) {
  std::string s = v.dump(-1, ' ', false, json::error_handler_t::replace);
  return s.size() > 40 ? s.substr(0, 37) + "..." : s;
}

std::string article(const json& v) {
  if (v.is_string()) return "a string";
  if (v.is_boolean()) return "a boolean";
  if (v.is_null()) return "null";
  if (v.is_array()) return "a list";
  if (v.is_object()) return "an object";
  return "a number with a fraction";
}

/// The fields of one config, each read once, errors naming the file and the field.
class Fields {
 public:
  Fields(const json& root, std::string path, std::string arch)
      : m_root(root), m_path(std::move(path)), m_arch(std::move(arch)) {}

  [[noreturn]] void refuse(const std::string& detail) const { throw InputError(m_path + ": " + detail); }

  bool has(const char* key) const { return m_root.contains(key) && !m_root.at(key).is_null(); }

  /// A whole number from 1 to 2^31 - 1; `what` says what it is when it is missing.
  std::int64_t count(const char* key, const std::string& what) const {
    if (!m_root.contains(key))
      refuse(std::string("'") + key + "' is missing: a " + m_arch + " config gives " + what + " there");
    return count_of(key, m_root.at(key));
  }
  /// As count(), or `otherwise` when absent or null.
  std::int64_t count_or(const char* key, std::int64_t otherwise) const {
    return has(key) ? count_of(key, m_root.at(key)) : otherwise;
  }
  /// true or false, or `otherwise` when absent or null.
  bool flag_or(const char* key, bool otherwise) const {
    if (!has(key)) return otherwise;
    const json& v = m_root.at(key);
    if (!v.is_boolean()) refuse(std::string("'") + key + "' is " + shown(v) + " (" + article(v) + "): give true or false");
    return v.get<bool>();
  }

 private:
  std::int64_t count_of(const char* key, const json& v) const {
    const std::string range = "give a whole number from 1 to " + std::to_string(kMaxDimension);
    if (!v.is_number_integer()) refuse(std::string("'") + key + "' is " + shown(v) + " (" + article(v) + "): " + range);
    // (JSON's non-negative integers read as unsigned: 0 among them)
    if (v.is_number_unsigned() ? v.get<std::uint64_t>() < 1 || v.get<std::uint64_t>() > std::uint64_t{kMaxDimension}
                               : v.get<std::int64_t>() < 1 || v.get<std::int64_t>() > kMaxDimension)
      refuse(std::string("'") + key + "' is " + shown(v) + ": " + range);
    return v.get<std::int64_t>();
  }

  const json& m_root;
  std::string m_path, m_arch;
};

/// The workload's name: the file's stem; a downloaded config.json's model name, else its type.
std::string name_of(const json& root, const std::string& path) {
  const std::string stem = fs::path(path).stem().string();
  if (stem != "config" && !stem.empty()) return stem;
  if (root.contains("_name_or_path") && root["_name_or_path"].is_string()) {
    const std::string given = root["_name_or_path"].get<std::string>();
    const std::string last = given.substr(given.find_last_of('/') == std::string::npos ? 0 : given.find_last_of('/') + 1);
    if (!last.empty()) return last;
  }
  if (root.contains("model_type") && root["model_type"].is_string() && !root["model_type"].get<std::string>().empty())
    return root["model_type"].get<std::string>();
  return "config";
}

}  // namespace

const std::string& hf_architectures() {
  static const std::string text =
      "LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM (a LLaMA-shaped decoder), GPT2LMHeadModel or "
      "BertForPreTraining";
  return text;
}

const char kHfConfigHelp[] =
    "a Hugging Face config.json (LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM, GPT2LMHeadModel or "
    "BertForPreTraining), or the name of one shipped in the configs' hf folder (llama-2-7b, qwen2.5-7b, "
    "qwen2.5-0.5b): the transformer, instead of --workload, named after the file; --layers, --hidden, ... override "
    "its fields (docs/model.md)";

TransformerShape parse_hf_config(const std::string& text, const std::string& path) {
  using K = TransformerShape::Kind;
  json root;
  try {
    root = json::parse(text);
  } catch (const json::parse_error& e) {
    std::string what = e.what();
    if (const auto close = what.find("] "); what.rfind("[json.exception", 0) == 0 && close != std::string::npos)
      what = what.substr(close + 2);
    const auto upto = std::min<std::size_t>(e.byte == 0 ? 0 : e.byte - 1, text.size());
    const auto line = 1 + std::count(text.begin(), text.begin() + static_cast<std::ptrdiff_t>(upto), '\n');
    throw InputError(path + ":" + std::to_string(line) + ": malformed JSON: " + what);
  }
  if (!root.is_object())
    throw InputError(path + ": a Hugging Face config is a JSON object (\"architectures\", \"hidden_size\", ...), got " +
                     article(root));
  if (!root.contains("architectures"))
    throw InputError(path + ": 'architectures' is missing: give the model's class, e.g. [\"LlamaForCausalLM\"] (" +
                     hf_architectures() + ")");
  const json& archs = root["architectures"];
  if (!archs.is_array() || archs.empty() || !archs[0].is_string())
    throw InputError(path + ": 'architectures' is " + shown(archs) + ": give a list of the model's class, e.g. " +
                     "[\"LlamaForCausalLM\"] (" + hf_architectures() + ")");
  const std::string arch = archs[0].get<std::string>();
  TransformerShape s;
  s.name = name_of(root, path);
  s.origin = arch + " from " + path;
  const Fields f(root, path, arch);
  if (arch == "LlamaForCausalLM" || arch == "MistralForCausalLM" || arch == "Qwen2ForCausalLM") {
    s.kind = K::Llama;
    s.layers = f.count("num_hidden_layers", "the layers");
    s.hidden = f.count("hidden_size", "the hidden width");
    s.heads = f.count("num_attention_heads", "the attention heads");
    // Absent (HF's default) or as many as the query heads: one per query head, which --heads then keeps.
    s.kv_heads = f.count_or("num_key_value_heads", s.heads);
    if (s.kv_heads == s.heads) s.kv_heads = 0;
    s.ffn = f.count("intermediate_size", "the MLP's inner width");
    s.vocab = f.count("vocab_size", "the vocabulary");
    s.seq = f.count("max_position_embeddings", "the longest sequence (the training sequence here)");
    s.max_context = s.seq;
    s.tied_embeddings = f.flag_or("tie_word_embeddings", false);
    s.qkv_bias = arch == "Qwen2ForCausalLM";
    if (f.flag_or("attention_bias", false))
      f.refuse("'attention_bias' is true: biases on every attention projection are not modelled (Qwen2ForCausalLM's "
               "on the query, key and value projections are); give false");
    if (f.flag_or("mlp_bias", false)) f.refuse("'mlp_bias' is true: biases in the MLP are not modelled; give false");
    if (root.contains("hidden_act") && root["hidden_act"] != "silu")
      f.refuse("'hidden_act' is " + shown(root["hidden_act"]) +
               ": the LLaMA-shaped MLP is SwiGLU, its gate \"silu\"; other activations are not modelled");
    // A sliding window (Mistral's; Qwen2's when use_sliding_window): accepted, not modelled.
    if (f.has("sliding_window")) {
      const std::int64_t window = f.count_or("sliding_window", 0);
      if (f.flag_or("use_sliding_window", arch != "Qwen2ForCausalLM"))
        s.origin += " (its sliding window of " + std::to_string(window) +
                    " tokens not modelled: attention over the whole sequence)";
    }
  } else if (arch == "GPT2LMHeadModel") {
    s.kind = K::Gpt2;
    s.layers = f.count("n_layer", "the layers");
    s.hidden = f.count("n_embd", "the hidden width");
    s.heads = f.count("n_head", "the attention heads");
    s.ffn = f.count_or("n_inner", 4 * s.hidden);  // null: 4 x n_embd, as GPT-2's
    s.vocab = f.count("vocab_size", "the vocabulary");
    s.max_positions = f.count("n_positions", "the learned positions");
    s.seq = s.max_positions;
    s.tied_embeddings = f.flag_or("tie_word_embeddings", true);
  } else if (arch == "BertForPreTraining") {
    s.kind = K::Bert;
    s.layers = f.count("num_hidden_layers", "the layers");
    s.hidden = f.count("hidden_size", "the hidden width");
    s.heads = f.count("num_attention_heads", "the attention heads");
    s.ffn = f.count("intermediate_size", "the MLP's inner width");
    s.vocab = f.count("vocab_size", "the vocabulary");
    s.max_positions = f.count("max_position_embeddings", "the learned positions");
    // Pretraining's phase 1 (sequence 128, 20 predictions), as bert-base; --seq-length for phase 2.
    s.seq = std::min<std::int64_t>(128, s.max_positions);
    s.masked_per_seq = 20;
    s.tied_embeddings = true;
    if (const std::int64_t types = f.count_or("type_vocab_size", 2); types != 2)
      f.refuse("'type_vocab_size' is " + std::to_string(types) +
               ": BERT pretraining's two segments (next sentence) are modelled; give 2");
    if (!f.flag_or("tie_word_embeddings", true))
      f.refuse("'tie_word_embeddings' is false: BERT's masked-LM decoder is the token table here; give true");
  } else {
    throw InputError(path + ": architectures[0] '" + arch + "' is not modelled: give " + hf_architectures() +
                     (arch.rfind("Bert", 0) == 0 ? " (BERT trains here as BertForPreTraining: masked LM and next "
                                                   "sentence)"
                                                 : std::string()));
  }
  const char* hidden = s.kind == K::Gpt2 ? "n_embd" : "hidden_size";
  const char* heads = s.kind == K::Gpt2 ? "n_head" : "num_attention_heads";
  if (s.hidden % s.heads != 0)
    f.refuse(std::string("'") + hidden + "' " + std::to_string(s.hidden) + " is not a multiple of '" + heads + "' " +
             std::to_string(s.heads) + ": the heads split the hidden width");
  if (s.kv() > s.heads || s.heads % s.kv() != 0)
    f.refuse("'num_key_value_heads' is " + std::to_string(s.kv()) + ": it must divide the " +
             std::to_string(s.heads) + " query heads ('num_attention_heads'), each key and value head serving a "
             "group of them");
  if (f.has("head_dim") && f.count_or("head_dim", 0) != s.hidden / s.heads)
    f.refuse("'head_dim' is " + std::to_string(f.count_or("head_dim", 0)) + ", but " + hidden + " / " + heads +
             " is " + std::to_string(s.hidden / s.heads) + ": a head width of its own is not modelled");
  if (s.kind == K::Llama && (s.hidden / s.heads) % 2 != 0)
    f.refuse("the head width " + std::to_string(s.hidden / s.heads) +
             " (hidden_size / num_attention_heads) is odd: rotary embeddings rotate pairs");
  return s;
}

std::string hf_config_path(const std::string& given, const std::string& config_dir) {
  std::error_code ec;
  if (fs::exists(fs::symlink_status(given, ec)) || given.empty() || given.find('/') != std::string::npos)
    return given;
  for (const std::string& name : {given, given + ".json"}) {
    const fs::path shipped = fs::path(config_dir) / "hf" / name;
    if (fs::is_regular_file(shipped, ec)) return shipped.string();
  }
  return given;
}

TransformerShape load_hf_config(const std::string& path, const std::string& what) {
  std::error_code ec;
  const std::string kind = "give a Hugging Face config.json (e.g. configs/hf/llama-2-7b.json)";
  if (fs::is_directory(path, ec)) throw InputError(what + ": a directory; " + kind);
  if (!fs::exists(path, ec)) throw InputError(what + ": no such file");
  if (!fs::is_regular_file(path, ec))
    throw InputError(what + ": not a regular file (a device, a FIFO or a socket); " + kind);
  if (fs::file_size(path, ec) > kMaxBytes) throw InputError(what + ": larger than 16 MiB; " + kind);
  std::ifstream in(path, std::ios::binary);
  if (!in.is_open()) throw InputError(what + ": cannot be read");
  std::stringstream text;
  text << in.rdbuf();
  return parse_hf_config(text.str(), path);
}

void use_hf_config(RunRequest& r, const TransformerShape& shape, const std::string& origin) {
  if (!r.model.empty())
    throw InputError(origin, "hf_config", "the network is a model file or a Hugging Face config; give one of the two");
  if (r.workload != RunRequest{}.workload)
    throw InputError(origin, "hf_config",
                     "the network is a workload or a Hugging Face config; give one of the two (the config's "
                     "workload is named " +
                         shape.name + ")");
  r.workload = shape.name;
  r.recipe.base_shape = std::make_shared<const TransformerShape>(shape);
}

}  // namespace ascendsim::sim
