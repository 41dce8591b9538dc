#include "sim/serve.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <sstream>
#include <tuple>

#include <fmt/format.h>

#include "sim/core/error.h"
#include "sim/core/params.h"
#include "sim/core/stop.h"
#include "sim/kernel.h"
#include "sim/report/report.h"
#include "sim/simulation.h"
#include "sim/system.h"
#include "workloads/transformer.h"

namespace ascendsim::sim {

using nlohmann::ordered_json;
using runtime::LaunchMode;
using runtime::ServePhase;
using workloads::StepShape;

namespace {

std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }

/// A request's prompt or output: at most 2^31 - 1 tokens, so that a sequence's length and its
/// blocks stay exact in 64-bit arithmetic (no model holds a context of that length).
constexpr std::int64_t kMaxRequestTokens = 2147483647;
/// Requests of one run: each is kept with its latencies (about 200 bytes), and a run this long
/// takes minutes; split a longer trace into runs.
constexpr std::int64_t kMaxRequests = 10'000'000;
/// The latest arrival: a run's clock counts in double seconds, exact to 2 ns up to here (about
/// 116 days); past it a step's microseconds would be lost in the arrival time.
constexpr double kMaxArrivalS = 1e7;

/// `s` with the request's shape overrides.
workloads::TransformerShape resized(workloads::TransformerShape s, const workloads::RecipeOverrides& o) {
  auto positive = [](std::optional<std::int64_t> v, const char* key, std::int64_t& field) {
    if (!v) return;
    if (*v < 1) throw InputError(key, key, "must be at least 1, got " + std::to_string(*v));
    field = *v;
  };
  positive(o.layers, "layers", s.layers);
  positive(o.hidden, "hidden", s.hidden);
  positive(o.heads, "heads", s.heads);
  positive(o.kv_heads, "kv_heads", s.kv_heads);
  positive(o.ffn, "ffn", s.ffn);
  positive(o.vocab, "vocab", s.vocab);
  if (o.seq_length) throw InputError("seq_length", "seq_length", "a served model's lengths are its requests'");
  if (s.hidden % s.heads != 0)
    throw InputError("heads", "heads",
                     std::to_string(s.heads) + " heads do not divide the hidden width " + std::to_string(s.hidden));
  if (s.heads % s.kv() != 0)
    throw InputError("kv_heads", "kv_heads",
                     std::to_string(s.kv()) + " key/value heads do not divide the " + std::to_string(s.heads) +
                         " query heads (each serves a group of them)");
  return s;
}

/// A Hugging Face config's decoder (hf_config), in place of a workload.
workloads::TransformerShape served_config(const ServeRequest& r) {
  const workloads::TransformerShape& base = *r.shape.base_shape;
  if (r.workload != ServeRequest{}.workload || !r.gpt_size.empty())
    throw InputError("hf_config", "hf_config",
                     "the model is a workload or a Hugging Face config; give one of the two (the config's is named " +
                         base.name + ")");
  if (base.kind == workloads::TransformerShape::Kind::Bert)
    throw InputError("hf_config", "hf_config",
                     base.origin + " is an encoder; serving generates with a decoder (LlamaForCausalLM, "
                                   "MistralForCausalLM, Qwen2ForCausalLM or GPT2LMHeadModel)");
  return resized(base, r.shape);
}

/// The decoder to serve: the preset (or a Hugging Face config's), its shape overrides.
workloads::TransformerShape serving_shape(const ServeRequest& r) {
  if (r.shape.base_shape) return served_config(r);
  std::string name = r.workload;
  if (!r.gpt_size.empty()) {
    if (r.workload != "gpt")
      throw InputError("gpt_size", "gpt_size", "chooses the size of workload gpt; " + r.workload + " has its own");
    name = r.gpt_size;
  }
  auto s = workloads::transformer_shape(name);
  if (!s || s->kind == workloads::TransformerShape::Kind::Bert) {
    std::string names;
    for (const auto& t : workloads::transformer_shapes())
      if (t.kind != workloads::TransformerShape::Kind::Bert) names += (names.empty() ? "" : ", ") + t.name;
    throw InputError(r.gpt_size.empty() ? "workload" : "gpt_size", r.gpt_size.empty() ? "workload" : "gpt_size",
                     "'" + name + "' is not a decoder to serve; give " +
                         (r.gpt_size.empty() ? "gpt or one of " + names : "one of " + names));
  }
  if (!r.gpt_size.empty()) s->name = name;
  return resized(*s, r.shape);
}

double unit(std::mt19937_64& rng) { return static_cast<double>(rng() >> 11) * 0x1.0p-53; }

std::int64_t spread_length(std::mt19937_64& rng, std::int64_t mean, double spread) {
  if (spread <= 0) return mean;
  const double lo = std::max(1.0, std::round(static_cast<double>(mean) * (1 - spread)));
  const double hi = std::round(static_cast<double>(mean) * (1 + spread));
  return static_cast<std::int64_t>(lo + std::floor(unit(rng) * (hi - lo + 1)));
}

std::vector<runtime::ServeArrival> read_trace(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    throw InputError("arrivals", "arrivals", path + " is a directory; give a JSONL file of requests");
  std::ifstream in(path);
  if (!in) throw InputError("arrivals", "arrivals", path + ": cannot be read");
  return parse_arrivals(in, path);
}

}  // namespace

std::vector<runtime::ServeArrival> parse_arrivals(std::istream& in, const std::string& path) {
  std::vector<runtime::ServeArrival> out;
  std::string line;
  for (std::int64_t n = 1; std::getline(in, line); ++n) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const std::string where = path + ":" + std::to_string(n);
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(line);
    } catch (const nlohmann::json::exception& e) {
      throw InputError(where, "arrivals", std::string("not a JSON object: ") + e.what());
    }
    if (!j.is_object()) throw InputError(where, "arrivals", "each line is a JSON object");
    for (auto it = j.begin(); it != j.end(); ++it)
      if (it.key() != "arrival_s" && it.key() != "prompt_tokens" && it.key() != "output_tokens")
        throw InputError(where, "arrivals",
                         "unknown key '" + it.key() + "' (a line has arrival_s, prompt_tokens, output_tokens)");
    runtime::ServeArrival a;
    for (const char* k : {"arrival_s", "prompt_tokens", "output_tokens"})
      if (!j.contains(k))
        throw InputError(where, "arrivals",
                         std::string("no '") + k + "' (a line has arrival_s, prompt_tokens and output_tokens)");
    if (!j["arrival_s"].is_number() || !(j["arrival_s"].get<double>() >= 0) ||
        !(j["arrival_s"].get<double>() <= kMaxArrivalS))
      throw InputError(where, "arrivals",
                       fmt::format("arrival_s must be a number of seconds from 0 to {:g} (a run's clock resolves "
                                   "microseconds up to there), got {}",
                                   kMaxArrivalS, j["arrival_s"].dump()));
    a.arrival_s = j["arrival_s"].get<double>();
    for (const char* k : {"prompt_tokens", "output_tokens"})
      if (!j[k].is_number_integer() || (j[k].is_number_unsigned() && j[k].get<std::uint64_t>() > kMaxRequestTokens) ||
          j[k].get<std::int64_t>() < 1 || j[k].get<std::int64_t>() > kMaxRequestTokens)
        throw InputError(where, "arrivals",
                         std::string(k) + " must be a whole number of tokens from 1 to " +
                             std::to_string(kMaxRequestTokens) + ", got " + j[k].dump());
    a.prompt_tokens = j["prompt_tokens"].get<std::int64_t>();
    a.output_tokens = j["output_tokens"].get<std::int64_t>();
    if (!out.empty() && a.arrival_s < out.back().arrival_s)
      throw InputError(where, "arrivals", "arrivals must be in time order (arrival_s not decreasing)");
    if (static_cast<std::int64_t>(out.size()) >= kMaxRequests)
      throw InputError(where, "arrivals",
                       "more than " + std::to_string(kMaxRequests) + " requests in one run; split the file");
    out.push_back(a);
  }
  if (in.bad()) throw InputError("arrivals", "arrivals", path + ": cannot be read");
  if (out.empty()) throw InputError("arrivals", "arrivals", path + ": holds no request");
  return out;
}

namespace {

/// Anchors doubling from `lo` up to `hi` (the last one `hi`); `halfway`: with the points 1.5 times
/// each between them (16, 24, 32, 48, ...), for costs that grow faster than linearly.
std::vector<std::int64_t> doubling(std::int64_t lo, std::int64_t hi, bool halfway = false) {
  std::vector<std::int64_t> a;
  for (std::int64_t v = std::min(lo, hi); v < hi; v *= 2) {
    a.push_back(v);
    if (halfway && v % 2 == 0 && v * 3 / 2 < hi) a.push_back(v * 3 / 2);
  }
  a.push_back(hi);
  return a;
}

/// A step's graph; the builder's errors (a layout the model cannot take) as the request's.
workloads::Workload step_workload(const workloads::TransformerShape& s, const StepShape& step,
                                  const workloads::ServingLayout& l) {
  try {
    return workloads::serving_step(s, step, l);
  } catch (const std::invalid_argument& e) {
    const std::string what = e.what();
    const auto colon = what.find(": ");
    const std::string key = colon == std::string::npos ? "workload" : what.substr(0, colon);
    throw InputError(key, key, colon == std::string::npos ? what : what.substr(colon + 2));
  }
}

/// The sorted union of two anchor lists.
std::vector<std::int64_t> anchors_of(std::vector<std::int64_t> a, const std::vector<std::int64_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  std::sort(a.begin(), a.end());
  a.erase(std::unique(a.begin(), a.end()), a.end());
  return a;
}

/// The anchors bracketing v, and v's weight on the upper one (v below the first: the first).
struct Bracket {
  std::int64_t lo, hi;
  double w;
};
Bracket bracket(const std::vector<std::int64_t>& a, double v) {
  if (v <= static_cast<double>(a.front())) return {a.front(), a.front(), 0};
  for (std::size_t i = 1; i < a.size(); ++i)
    if (v <= static_cast<double>(a[i])) {
      const double w = (v - static_cast<double>(a[i - 1])) / static_cast<double>(a[i] - a[i - 1]);
      return {a[i - 1], a[i], w};
    }
  return {a.back(), a.back(), 0};
}

/// Every step's cost: each shape at the anchors simulated once, shapes between them
/// interpolated (multilinearly, in each of the shape's dimensions).
class StepCosts {
 public:
  /// Batch sizes at the graph buckets and powers of two up to max_seqs; contexts up to max_len
  /// and prompt tokens up to max_tokens, neither past what the cache holds.
  StepCosts(const SystemConfig& cfg, const workloads::TransformerShape& shape, const workloads::ServingLayout& layout,
            const std::vector<std::int64_t>& buckets, std::int64_t max_seqs, std::int64_t max_len,
            std::int64_t max_tokens, std::int64_t multi_step, std::ostream* progress)
      : m_cfg(cfg),
        m_shape(shape),
        m_layout(layout),
        m_seqs(anchors_of(buckets, doubling(1, max_seqs))),
        m_context(
            doubling(64, std::min(std::max<std::int64_t>(64, max_len), layout.kv_blocks * layout.block_size), true)),
        m_tokens(
            doubling(16, std::min(std::max<std::int64_t>(16, max_tokens), layout.kv_blocks * layout.block_size), true)),
        m_prompts(doubling(1, max_seqs)),
        m_multi_step(multi_step),
        m_progress(progress) {
    // What a step's cost depends on besides its shape: every parameter, the model, the layout
    // (not the cache's size, which only has to fit: serve() checks it before any step).
    SystemConfig copy = cfg;
    m_identity = bind_params(copy).to_json().dump() + "|" +
                 fmt::format("{}/{}/{}/{}/{}/{}/{}/{}/{}/{}/{}|{}/{}/{}|{}", static_cast<int>(shape.kind), shape.layers,
                             shape.hidden, shape.heads, shape.kv(), shape.tied_embeddings, shape.qkv_bias, shape.ffn,
                             shape.vocab,
                             shape.max_positions, shape.seq, layout.tensor_parallel, layout.block_size,
                             layout.sample_on_device, multi_step);
  }

  runtime::StepCost operator()(const runtime::StepQuery& q) {
    if (q.mode == LaunchMode::MultiStep && q.steps != m_multi_step)
      throw std::logic_error("serving: a multi-step launch of " + std::to_string(q.steps) + " steps, not " +
                             std::to_string(m_multi_step));
    const StepShape& s = q.shape;
    // The dimensions the shape has, each bracketed; a corner picks lo or hi in each.
    std::vector<Bracket> dims;
    const bool decode = s.decode_seqs > 0, prefill = s.prefill_seqs > 0, mixed = decode && prefill;
    const bool whole = prefill && s.prefill_context == s.prefill_tokens;
    if (decode) {
      dims.push_back(bracket(m_seqs, static_cast<double>(s.decode_seqs)));
      dims.push_back(bracket(m_context, static_cast<double>(s.decode_context)));
    }
    // A mixed step's prompt chunks are timed as one of their tokens at their mean context.
    const std::int64_t p_seqs = mixed ? 1 : s.prefill_seqs;
    const std::int64_t p_tokens = mixed ? s.prefill_seqs * s.prefill_tokens : s.prefill_tokens;
    if (prefill) {
      dims.push_back(bracket(m_prompts, static_cast<double>(p_seqs)));
      dims.push_back(bracket(m_tokens, static_cast<double>(p_tokens)));
      if (!whole) dims.push_back(bracket(m_context, static_cast<double>(std::max(p_tokens, s.prefill_context))));
    }
    runtime::StepCost out;
    for (std::size_t corner = 0; corner < (std::size_t{1} << dims.size()); ++corner) {
      double weight = 1;
      std::vector<std::int64_t> v(dims.size());
      for (std::size_t d = 0; d < dims.size(); ++d) {
        const bool hi = (corner >> d) & 1;
        weight *= hi ? dims[d].w : 1 - dims[d].w;
        v[d] = hi ? dims[d].hi : dims[d].lo;
      }
      if (weight == 0) continue;
      StepShape c;
      std::size_t d = 0;
      if (decode) {
        c.decode_seqs = v[d++];
        c.decode_context = v[d++];
      }
      if (prefill) {
        c.prefill_seqs = v[d++];
        c.prefill_tokens = v[d++];
        c.prefill_context = whole ? c.prefill_tokens : std::max(c.prefill_tokens, v[d++]);
      }
      const runtime::StepCost& e = exact(q.mode, c);
      out.time_s += weight * e.time_s;
      out.capture_s += weight * e.capture_s;
      for (std::size_t p = 0; p < runtime::kServePhases; ++p) out.phase_s[p] += weight * e.phase_s[p];
    }
    return out;
  }

  std::int64_t simulated() const { return static_cast<std::int64_t>(m_memo.size()); }

  /// One shape under one launch mode, simulated (once); multi-step: a launch of multi_step steps.
  const runtime::StepCost& exact(LaunchMode mode, const StepShape& s) {
    const auto key = std::make_pair(static_cast<int>(mode), s);
    const auto found = m_memo.find(key);
    if (found != m_memo.end()) return found->second;
    // A shape simulated by an earlier call of this process with the same configuration, model and
    // layout costs the same (the simulation is deterministic): taken from the process's cache.
    const std::string global = m_identity + "|" + std::to_string(static_cast<int>(mode)) + "|" +
                               std::to_string(s.decode_seqs) + "," + std::to_string(s.decode_context) + "," +
                               std::to_string(s.prefill_seqs) + "," + std::to_string(s.prefill_tokens) + "," +
                               std::to_string(s.prefill_context);
    {
      const auto& cache = process_cache();
      const auto hit = cache.find(global);
      if (hit != cache.end()) return m_memo.emplace(key, hit->second).first->second;
    }
    if (m_progress)
      *m_progress << "simulating a " << runtime::launch_mode_name(mode) << " step: " << s.describe() << "\n";
    const workloads::Workload w = step_workload(m_shape, s, m_layout);
    constexpr std::int64_t kSteps = 3;  // per run; the first one's fill is set-up
    auto session = [&](runtime::Strategy strategy) {
      runtime::Session ss;
      ss.strategy = strategy;
      ss.epochs = strategy == runtime::Strategy::LoopSink ? 2 : 1;
      ss.steps_per_epoch = strategy == runtime::Strategy::LoopSink ? m_multi_step : kSteps;
      ss.sink_size = strategy == runtime::Strategy::LoopSink ? m_multi_step : -1;
      ss.dataset_steps_per_epoch = ss.steps_per_epoch;
      ss.result_bytes = workloads::step_result_bytes(m_shape, m_layout, s.seqs());
      return ss;
    };
    std::vector<runtime::RunResult> results;
    {
      KernelScope kernel;
      Simulation simulation;
      simulation.add(m_cfg, w, session(runtime::Strategy::NonSink));
      if (mode == LaunchMode::Graph) simulation.add(m_cfg, w, session(runtime::Strategy::GraphSink));
      if (mode == LaunchMode::MultiStep) simulation.add(m_cfg, w, session(runtime::Strategy::LoopSink));
      simulation.run();
      for (std::size_t i = 0; i < simulation.size(); ++i) results.push_back(simulation.result(i));
    }
    for (const auto& r : results)
      if (!r.failure.empty()) throw RunError("a serving step (" + s.describe() + ") failed: " + r.failure);
    // Per launch: the run's time by phase but its set-up (the first fill, the channel) and the
    // dataset pipeline's (the scheduler prepares a serving step's inputs).
    auto per_launch = [](const runtime::RunResult& r, double launches) {
      std::array<double, runtime::kServePhases> p{};
      auto at = [&](Phase ph) { return r.breakdown_s[static_cast<std::size_t>(ph)] / launches; };
      p[static_cast<std::size_t>(ServePhase::Launch)] = at(Phase::Launch);
      p[static_cast<std::size_t>(ServePhase::H2D)] = at(Phase::H2D) + at(Phase::WaitData);
      p[static_cast<std::size_t>(ServePhase::DeviceCompute)] = at(Phase::DeviceCompute);
      p[static_cast<std::size_t>(ServePhase::Comm)] = at(Phase::Comm);
      p[static_cast<std::size_t>(ServePhase::Sync)] = at(Phase::Sync);
      p[static_cast<std::size_t>(ServePhase::D2H)] = at(Phase::D2H);
      p[static_cast<std::size_t>(ServePhase::HostLoop)] = at(Phase::HostLoop);
      return p;
    };
    runtime::StepCost c;
    const auto eager = per_launch(results[0], static_cast<double>(kSteps));
    double eager_s = 0;
    for (double v : eager) eager_s += v;
    if (mode == LaunchMode::Eager) {
      c.phase_s = eager;
    } else {
      // A graph runs from the data queue in the simulation; a serving step's inputs depend on the
      // step before, so the host copies them before each launch, as the eager step does.
      c.phase_s = per_launch(results[1], mode == LaunchMode::MultiStep ? 2.0 : static_cast<double>(kSteps));
      c.phase_s[static_cast<std::size_t>(ServePhase::H2D)] += eager[static_cast<std::size_t>(ServePhase::H2D)];
      // The capture: the step run once as the launches it records, and the graph's load.
      c.capture_s = eager_s + m_cfg.host.graph_load_us * 1e-6;
    }
    for (double v : c.phase_s) c.time_s += v;
    auto& cache = process_cache();
    if (cache.size() < kProcessCacheShapes) cache.emplace(global, c);
    return m_memo.emplace(key, c).first->second;
  }

 private:
  using Phase = sim::Phase;
  const SystemConfig& m_cfg;
  workloads::TransformerShape m_shape;
  workloads::ServingLayout m_layout;
  std::vector<std::int64_t> m_seqs, m_context, m_tokens, m_prompts;
  std::int64_t m_multi_step;
  std::ostream* m_progress;
  std::map<std::pair<int, StepShape>, runtime::StepCost> m_memo;
  std::string m_identity;
  /// Shapes kept across calls (a tuning search serves many times in one process): up to this many.
  static constexpr std::size_t kProcessCacheShapes = 100000;
  static std::map<std::string, runtime::StepCost>& process_cache() {
    static std::map<std::string, runtime::StepCost> cache;
    return cache;
  }
};

/// The KV cache: what device memory leaves after the weights and the largest step's activations
/// (vLLM profiles a step of max_batched_tokens), at memory_utilization; or the request's blocks,
/// checked against it. Returns the blocks, a block's bytes per rank and the other bytes per rank.
std::tuple<std::int64_t, std::int64_t, std::int64_t> kv_cache_blocks(const SystemConfig& cfg,
                                                                     const workloads::TransformerShape& shape,
                                                                     const workloads::ServingLayout& layout,
                                                                     const ServeRequest& req) {
  const std::int64_t tp = layout.tensor_parallel;
  const double capacity = cfg.chip.memory.hbm_gib * 1024.0 * 1024.0 * 1024.0 * req.memory_utilization;
  const std::int64_t block_bytes = workloads::kv_block_bytes(shape, layout);
  std::int64_t others = 0;
  {
    StepShape profile;
    profile.prefill_seqs = 1;
    profile.prefill_tokens = profile.prefill_context = req.max_batched_tokens;
    workloads::ServingLayout l = layout;
    l.kv_blocks = ceil_div(req.max_batched_tokens, req.block_size);
    const auto g = compile_for(cfg, step_workload(shape, profile, l));
    others = g.memory.peak_bytes(true) - l.kv_blocks * block_bytes;
  }
  const auto free_bytes = static_cast<std::int64_t>(capacity) - others;
  const std::int64_t fit = free_bytes > 0 ? free_bytes / block_bytes : 0;
  std::int64_t blocks = req.kv_blocks;
  if (blocks < 0) throw InputError("kv_blocks", "kv_blocks", "must be 0 (what memory leaves) or positive");
  const std::string memory = format_bytes(static_cast<double>(others)) + " of weights and activations per rank (" +
                             shape.name + " on " + std::to_string(tp) + " rank" + (tp > 1 ? "s" : "") + ") of " +
                             cfg.chip.name + "'s " + format_bytes(cfg.chip.memory.hbm_gib * 1024.0 * 1024.0 * 1024.0) +
                             " at memory_utilization " + fmt::format("{}", req.memory_utilization);
  if (fit < 1) {  // the model itself does not fit, whatever the cache's size
    const char* model_key = req.gpt_size.empty() ? "workload" : "gpt_size";
    throw InputError(model_key, model_key,
                     "no room for a KV cache block of " + format_bytes(static_cast<double>(block_bytes)) + ": " +
                         memory + "; give more tensor_parallel ranks, a higher memory_utilization or a smaller model");
  }
  if (blocks == 0) {
    blocks = fit;
  } else if (blocks > fit) {
    throw InputError("kv_blocks", "kv_blocks",
                     std::to_string(blocks) + " blocks of " + std::to_string(req.block_size) + " tokens (" +
                         format_bytes(static_cast<double>(blocks * block_bytes)) + " per rank) do not fit beside " +
                         memory + ": at most " + std::to_string(fit) + " blocks");
  }
  return {blocks, block_bytes, others};
}

void check_request(const ServeRequest& req) {
  const std::int64_t tp = req.tensor_parallel;
  if (tp < 1 || tp > kDevicesPerServer)
    throw InputError("tensor_parallel", "tensor_parallel",
                     "a replica's ranks share one server: 1 to " + std::to_string(kDevicesPerServer) + ", got " +
                         std::to_string(tp));
  if (req.devices < 1 || req.devices > kDevicesPerServer || req.devices % tp != 0)
    throw InputError("devices", "devices",
                     std::to_string(req.devices) + ": give 1 to " + std::to_string(kDevicesPerServer) +
                         " devices of one server, a multiple of tensor_parallel (" + std::to_string(tp) +
                         "), each group of tensor_parallel ranks a replica");
  if (req.sampling != "device" && req.sampling != "host")
    throw InputError("sampling", "sampling", "'" + req.sampling + "': device or host");
  if (req.capture != "startup" && req.capture != "first-use")
    throw InputError("capture", "capture", "'" + req.capture + "': startup (every bucket before serving) or first-use");
  // Sizes past these bounds are no serving engine's; they would only overflow the arithmetic.
  auto at_most = [](const char* key, std::int64_t v, std::int64_t max) {
    if (v > max) throw InputError(key, key, "at most " + std::to_string(max) + ", got " + std::to_string(v));
  };
  at_most("max_seqs", req.max_seqs, 1 << 20);
  at_most("max_batched_tokens", req.max_batched_tokens, kMaxRequestTokens);
  at_most("block_size", req.block_size, 1 << 20);
  at_most("multi_step", req.multi_step, 1 << 16);
  at_most("kv_blocks", req.kv_blocks, kMaxRequestTokens);
  for (const auto b : req.decode_batches) at_most("decode_batches", b, 1 << 20);
  for (const auto b : req.graph_buckets) at_most("graph_buckets", b, 1 << 20);
  if (req.max_seqs < 1) throw InputError("max_seqs", "max_seqs", "must be at least 1");
  if (req.max_batched_tokens < req.max_seqs)
    throw InputError("max_batched_tokens", "max_batched_tokens",
                     "must be at least max_seqs (" + std::to_string(req.max_seqs) + "), a token per sequence");
  if (req.multi_step < 1) throw InputError("multi_step", "multi_step", "must be at least 1 decode step per launch");
  if (!(req.memory_utilization > 0 && req.memory_utilization <= 1))
    throw InputError("memory_utilization", "memory_utilization", "a fraction in (0, 1]");
  if (req.launch.empty()) throw InputError("launch", "launch", "give at least one launch mode");
  if (!(req.slo_ttft_ms > 0) || !(req.slo_tpot_ms > 0))
    throw InputError(req.slo_ttft_ms > 0 ? "slo_tpot_ms" : "slo_ttft_ms",
                     req.slo_ttft_ms > 0 ? "slo_tpot_ms" : "slo_ttft_ms",
                     "a service level is a positive number of milliseconds");
  for (std::size_t i = 0; i < req.launch.size(); ++i)
    for (std::size_t j = 0; j < i; ++j)
      if (req.launch[i] == req.launch[j])
        throw InputError(
            "launch", "launch",
            std::string(runtime::launch_mode_name(req.launch[i])) + " is given twice; name each mode once");
  if (req.block_size < 1)
    throw InputError("block_size", "block_size", "must be at least 1 token, got " + std::to_string(req.block_size));
  if (req.sampling == "host")
    for (auto m : req.launch)
      if (m == LaunchMode::MultiStep)
        throw InputError("sampling", "sampling",
                         "multi-step loops decode steps on the device, each feeding its sampled token to the next: "
                         "sample on the device (sampling device), or compare eager and graph with host sampling");
}

workloads::ServingLayout base_layout(const ServeRequest& req) {
  workloads::ServingLayout layout;
  layout.tensor_parallel = req.tensor_parallel;
  layout.block_size = req.block_size;
  layout.sample_on_device = req.sampling == "device";
  return layout;
}

}  // namespace

std::vector<runtime::ServeArrival> serve_arrivals(const ServeRequest& req, double rate) {
  if (!req.arrivals.empty()) return read_trace(req.arrivals);
  if (!(rate > 0) || !std::isfinite(rate))
    throw InputError("rate", "rate", "requests per second must be positive, got " + fmt::format("{}", rate));
  if (req.requests < 1 || req.requests > kMaxRequests)
    throw InputError(
        "requests", "requests",
        "from 1 to " + std::to_string(kMaxRequests) + " requests in one run, got " + std::to_string(req.requests));
  for (const auto& [key, v] : {std::pair{"prompt_tokens", req.prompt_tokens}, {"output_tokens", req.output_tokens}})
    if (v < 1 || v > kMaxRequestTokens)
      throw InputError(key, key,
                       "from 1 to " + std::to_string(kMaxRequestTokens) + " tokens, got " + std::to_string(v));
  if (req.length_spread < 0 || req.length_spread >= 1)
    throw InputError("length_spread", "length_spread",
                     "a fraction in [0, 1), got " + fmt::format("{}", req.length_spread));
  std::mt19937_64 rng(req.seed);
  std::vector<runtime::ServeArrival> out;
  double t = 0;
  for (std::int64_t i = 0; i < req.requests; ++i) {
    if (i % 65536 == 0) check_stop();
    t += -std::log(1 - unit(rng)) / rate;
    if (!(t <= kMaxArrivalS))
      throw InputError("rate", "rate",
                       fmt::format("{} requests at {:g} per second arrive past {:g} s, where a run's clock no longer "
                                   "resolves microseconds; raise --rate or give fewer --requests",
                                   req.requests, rate, kMaxArrivalS));
    runtime::ServeArrival a;
    a.arrival_s = t;
    a.prompt_tokens = spread_length(rng, req.prompt_tokens, req.length_spread);
    a.output_tokens = spread_length(rng, req.output_tokens, req.length_spread);
    out.push_back(a);
  }
  return out;
}

ServeOutcome serve(const ServeRequest& req) {
  const SystemConfig cfg = load_config(req.config);
  const workloads::TransformerShape shape = serving_shape(req);
  check_request(req);
  const std::int64_t tp = req.tensor_parallel;
  workloads::ServingLayout layout = base_layout(req);
  std::vector<std::int64_t> buckets = req.graph_buckets;
  if (buckets.empty()) buckets = runtime::default_graph_buckets(req.max_seqs);
  for (std::size_t i = 0; i < buckets.size(); ++i)
    if (buckets[i] < 1 || buckets[i] > req.max_seqs || (i > 0 && buckets[i] <= buckets[i - 1]))
      throw InputError("graph_buckets", "graph_buckets",
                       "batch sizes, each from 1 to max_seqs (" + std::to_string(req.max_seqs) +
                           ") and larger than the one before, got " + std::to_string(buckets[i]) +
                           (i > 0 ? " after " + std::to_string(buckets[i - 1]) : std::string()));

  // The arrivals (at the request's rate) fix the longest sequence.
  const double rate = req.arrivals.empty() ? req.rate : 0;
  const std::vector<runtime::ServeArrival> arrivals = serve_arrivals(req, req.rate);
  for (double r : req.rates)
    if (!(r > 0) || !std::isfinite(r)) throw InputError("rates", "rates", "each rate must be positive");
  if (!req.rates.empty() && !req.arrivals.empty())
    throw InputError("rates", "rates", "a sweep of rates draws Poisson arrivals; an arrivals file has its own times");
  std::vector<std::vector<runtime::ServeArrival>> swept;
  for (double r : req.rates) swept.push_back(serve_arrivals(req, r));
  std::int64_t longest = 1, longest_prompt = 1;
  auto longest_of = [&](const std::vector<runtime::ServeArrival>& set) {
    for (const auto& a : set) {
      longest = std::max(longest, a.prompt_tokens + a.output_tokens);
      longest_prompt = std::max(longest_prompt, a.prompt_tokens);
    }
  };
  longest_of(arrivals);
  for (const auto& set : swept) longest_of(set);
  const std::string lengths_key = req.arrivals.empty() ? "prompt_tokens" : "arrivals";
  if (shape.max_positions > 0 && longest > shape.max_positions)
    throw InputError(lengths_key, lengths_key,
                     "a sequence of " + std::to_string(longest) + " tokens (prompt and output) is longer than " +
                         shape.name + "'s " + std::to_string(shape.max_positions) +
                         " learned positions; shorten the requests");
  if (shape.max_context > 0 && longest > shape.max_context)
    throw InputError(lengths_key, lengths_key,
                     "a sequence of " + std::to_string(longest) + " tokens (prompt and output) is longer than the " +
                         std::to_string(shape.max_context) + " its configuration allows (" + shape.origin +
                         ": max_position_embeddings, the server's longest context); shorten the requests");

  const auto [blocks, block_bytes, others] = kv_cache_blocks(cfg, shape, layout, req);
  layout.kv_blocks = blocks;
  {
    // The longest request must fit the cache (and the admission watermark) alone.
    const std::int64_t need =
        ceil_div(longest, req.block_size) + static_cast<std::int64_t>(0.01 * static_cast<double>(blocks));
    if (need > blocks)
      throw InputError(
          req.kv_blocks > 0 ? "kv_blocks" : lengths_key, req.kv_blocks > 0 ? "kv_blocks" : lengths_key,
          "a request of " + std::to_string(longest) + " tokens (prompt and output) needs " + std::to_string(need) +
              " KV-cache blocks of " + std::to_string(req.block_size) +
              " tokens (with the 1% watermark) but the cache has " + std::to_string(blocks) +
              (req.kv_blocks > 0
                   ? "; raise kv_blocks (0: what memory leaves)"
                   : " (what memory leaves); give more tensor_parallel ranks, a higher memory_utilization (" +
                         fmt::format("{}", req.memory_utilization) + "), or shorter requests"));
  }

  runtime::SchedulerConfig sc;
  sc.max_seqs = req.max_seqs;
  sc.max_batched_tokens = req.max_batched_tokens;
  sc.block_size = req.block_size;
  sc.kv_blocks = blocks;
  sc.chunked_prefill = req.chunked_prefill;
  sc.multi_step = req.multi_step;
  sc.graph_buckets = buckets;
  sc.capture_at_startup = req.capture == "startup";
  sc.schedule_step_s = cfg.host.schedule_step_us * 1e-6;
  sc.schedule_seq_s = cfg.host.schedule_seq_us * 1e-6;
  sc.sample_s_per_logit = layout.sample_on_device ? 0 : cfg.host.sample_ns_per_logit * 1e-9;
  sc.vocab = shape.vocab;

  const std::int64_t max_tokens =
      req.chunked_prefill ? req.max_batched_tokens
                          : std::max(longest_prompt, std::min(req.max_batched_tokens, longest_prompt * req.max_seqs));
  StepCosts costs(cfg, shape, layout, buckets, req.max_seqs, ceil_div(longest, req.block_size) * req.block_size,
                  max_tokens, req.multi_step, req.progress);
  const runtime::StepCostFn fn = [&](const runtime::StepQuery& q) { return costs(q); };
  const std::int64_t replicas = req.devices / tp;

  auto run_mode = [&](LaunchMode m, const std::vector<runtime::ServeArrival>& all, double r) {
    runtime::SchedulerConfig c = sc;
    c.mode = m;
    ServeRun run;
    run.mode = m;
    run.rate = r;
    run.slo_ttft_s = req.slo_ttft_ms * 1e-3;
    run.slo_tpot_s = req.slo_tpot_ms * 1e-3;
    // Requests go to the replicas in turn; each serves its own with a cache of its own. The
    // merged log: every request and step (steps in time order, each with its replica), the
    // captures and preemptions of all, the cache's peak of the fullest.
    double area = 0;
    for (std::int64_t k = 0; k < replicas; ++k) {
      std::vector<runtime::ServeArrival> mine;
      for (std::size_t i = static_cast<std::size_t>(k); i < all.size(); i += static_cast<std::size_t>(replicas))
        mine.push_back(all[i]);
      if (mine.empty()) continue;  // more replicas than requests
      runtime::ServeLog log = runtime::serve(mine, c, fn);
      for (auto& s : log.steps) s.replica = k;
      area += log.mean_in_system * (log.end_s - mine.front().arrival_s);
      if (k == 0) {
        run.log = std::move(log);
        continue;
      }
      run.log.end_s = std::max(run.log.end_s, log.end_s);
      for (auto& x : log.requests) run.log.requests.push_back(x);
      for (auto& x : log.steps) run.log.steps.push_back(x);
      run.log.preemptions += log.preemptions;
      run.log.capture_s += log.capture_s;
      run.log.startup_s = std::max(run.log.startup_s, log.startup_s);
      for (std::size_t b = 0; b < log.captures.size(); ++b) run.log.captures[b] += log.captures[b];
      run.log.peak_kv_blocks = std::max(run.log.peak_kv_blocks, log.peak_kv_blocks);
      run.log.kv_blocks_left += log.kv_blocks_left;
    }
    if (replicas > 1) {
      std::stable_sort(run.log.requests.begin(), run.log.requests.end(),
                       [](const auto& a, const auto& b) { return a.arrival_s < b.arrival_s; });
      std::stable_sort(run.log.steps.begin(), run.log.steps.end(),
                       [](const auto& a, const auto& b) { return a.start_s < b.start_s; });
      run.log.mean_in_system = area / (run.log.end_s - all.front().arrival_s);
    }
    return run;
  };

  ServeOutcome out;
  out.modes = req.launch;
  for (LaunchMode m : req.launch) out.runs.push_back(run_mode(m, arrivals, rate));
  for (std::size_t i = 0; i < req.rates.size(); ++i)
    for (LaunchMode m : req.launch) out.sweep.push_back(run_mode(m, swept[i], req.rates[i]));
  // One decode step per launch mode at the batch sizes compared, at the requests' mean context
  // halfway through their output.
  double prompt_mean = 0, output_mean = 0;
  for (const auto& a : arrivals) {
    prompt_mean += static_cast<double>(a.prompt_tokens);
    output_mean += static_cast<double>(a.output_tokens);
  }
  prompt_mean /= static_cast<double>(arrivals.size());
  output_mean /= static_cast<double>(arrivals.size());
  const auto context = std::max<std::int64_t>(1, std::llround(prompt_mean + output_mean / 2));
  for (std::int64_t b : req.decode_batches) {
    if (b < 1 || b > req.max_seqs)
      throw InputError(
          "decode_batches", "decode_batches",
          "batch sizes from 1 to max_seqs (" + std::to_string(req.max_seqs) + "), got " + std::to_string(b));
    DecodeStepPoint p;
    p.batch = b;
    p.context = context;
    for (LaunchMode m : req.launch) {
      runtime::StepQuery q;
      q.shape.decode_seqs = b;
      q.shape.decode_context = context;
      q.mode = m;
      if (m == LaunchMode::MultiStep && req.multi_step == 1) q.mode = LaunchMode::Graph;
      q.steps = q.mode == LaunchMode::MultiStep ? req.multi_step : 1;
      runtime::StepCost c = costs(q);
      if (q.mode == LaunchMode::MultiStep) {  // per decode step
        c.time_s /= static_cast<double>(q.steps);
        for (double& v : c.phase_s) v /= static_cast<double>(q.steps);
      }
      p.by_mode.push_back(c);
    }
    out.decode_steps.push_back(p);
  }
  out.simulations = costs.simulated();

  out.header = {{"workload", shape.name},
                {"description",
                 (shape.origin.empty() ? "" : shape.origin + ": ") +
                 fmt::format("{} layers, hidden {}, {} heads{}, MLP {}, vocabulary {}; fp16 weights, inference",
                             shape.layers, shape.hidden, shape.heads,
                             shape.kv() != shape.heads ? fmt::format(" ({} key/value)", shape.kv()) : std::string(),
                             shape.ffn, shape.vocab)},
                {"chip", cfg.chip.name},
                {"server", cfg.server.name},
                {"devices", req.devices},
                {"tensor_parallel", tp},
                {"replicas", replicas},
                {"model",
                 {{"layers", shape.layers},
                  {"hidden", shape.hidden},
                  {"heads", shape.heads},
                  {"kv_heads", shape.kv()},
                  {"ffn", shape.ffn},
                  {"vocab", shape.vocab},
                  {"weight_bytes_per_rank", workloads::serving_weight_bytes(shape, layout)}}},
                {"kv_cache",
                 {{"block_size", req.block_size},
                  {"blocks", blocks},
                  {"block_bytes_per_rank", block_bytes},
                  {"tokens", blocks * req.block_size},
                  {"memory_utilization", req.memory_utilization},
                  {"weights_and_activations_bytes_per_rank", others}}},
                {"requests",
                 {{"source", req.arrivals.empty() ? "poisson" : req.arrivals},
                  {"rate", rate},
                  {"requests", static_cast<std::int64_t>(arrivals.size())},
                  {"prompt_tokens_mean", prompt_mean},
                  {"output_tokens_mean", output_mean},
                  {"length_spread", req.length_spread},
                  {"seed", req.seed}}},
                {"scheduler",
                 {{"max_seqs", req.max_seqs},
                  {"max_batched_tokens", req.max_batched_tokens},
                  {"chunked_prefill", req.chunked_prefill},
                  {"multi_step", req.multi_step},
                  {"sampling", req.sampling},
                  {"capture", req.capture},
                  {"graph_buckets", buckets}}},
                {"slo", {{"ttft_ms", req.slo_ttft_ms}, {"tpot_ms", req.slo_tpot_ms}}}};
  {
    SystemConfig copy = cfg;
    out.config = bind_params(copy).to_json();
  }
  return out;
}

}  // namespace ascendsim::sim

namespace ascendsim::sim {

runtime::StepCost serving_step_cost(const ServeRequest& req, const runtime::StepQuery& q, bool interpolated) {
  const SystemConfig cfg = load_config(req.config);
  const workloads::TransformerShape shape = serving_shape(req);
  check_request(req);
  workloads::ServingLayout layout = base_layout(req);
  layout.kv_blocks = std::get<0>(kv_cache_blocks(cfg, shape, layout, req));
  const std::int64_t longest =
      std::max({q.shape.decode_context, q.shape.prefill_context, req.prompt_tokens + req.output_tokens});
  StepCosts costs(cfg, shape, layout,
                  req.graph_buckets.empty() ? runtime::default_graph_buckets(req.max_seqs) : req.graph_buckets,
                  req.max_seqs, ceil_div(longest, req.block_size) * req.block_size,
                  req.chunked_prefill ? req.max_batched_tokens : std::max(req.prompt_tokens, q.shape.prefill_tokens),
                  q.steps, nullptr);
  return interpolated ? costs(q) : costs.exact(q.mode, q.shape);
}

}  // namespace ascendsim::sim
