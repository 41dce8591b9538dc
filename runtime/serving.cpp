#include "runtime/serving.h"

#include <algorithm>
#include <cmath>
#include <deque>
#include <map>
#include <stdexcept>

#include "sim/core/error.h"
#include "sim/core/stop.h"

namespace ascendsim::runtime {

const char* launch_mode_name(LaunchMode m) {
  switch (m) {
    case LaunchMode::Eager:
      return "eager";
    case LaunchMode::Graph:
      return "graph";
    case LaunchMode::MultiStep:
      return "multi-step";
  }
  return "?";
}

LaunchMode parse_launch_mode(const std::string& name) {
  for (auto m : {LaunchMode::Eager, LaunchMode::Graph, LaunchMode::MultiStep})
    if (name == launch_mode_name(m)) return m;
  throw sim::InputError("launch", "launch",
                        "'" + name +
                            "': eager (every op launched by the host), graph (a captured graph per batch "
                            "size) or multi-step (several decode steps per launch)");
}

const char* serve_phase_name(ServePhase p) {
  static const char* const names[] = {"scheduler", "launch", "h2d",      "device_compute", "comm",
                                      "sync",      "d2h",    "sampling", "host_loop"};
  return names[static_cast<std::size_t>(p)];
}

std::vector<std::int64_t> default_graph_buckets(std::int64_t max_seqs) {
  std::vector<std::int64_t> b;
  for (std::int64_t s : {1, 2, 4})
    if (s <= max_seqs) b.push_back(s);
  for (std::int64_t s = 8; s <= max_seqs; s += 8) b.push_back(s);
  if (b.empty() || b.back() < max_seqs) b.push_back(max_seqs);
  return b;
}

namespace {

std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }

/// A request in the engine.
struct Seq {
  std::size_t index = 0;      ///< into the log's requests
  std::int64_t original = 0;  ///< the request's prompt
  std::int64_t prompt = 0;    ///< tokens to prefill (a preempted request's output so far included)
  std::int64_t computed = 0;  ///< of them, in the cache
  std::int64_t generated = 0, output = 0;
  std::int64_t blocks = 0;
  bool prefilled() const { return computed >= prompt; }
  /// Tokens in the cache once the next decode step has fed its token: the prompt and every
  /// token generated so far (the last one is the step's input).
  std::int64_t length() const { return original + generated; }
};

class Engine {
 public:
  Engine(const std::vector<ServeArrival>& arrivals, const SchedulerConfig& cfg, const StepCostFn& cost)
      : m_arrivals(arrivals), m_cfg(cfg), m_cost(cost) {
    m_log.kv_blocks = cfg.kv_blocks;
    m_free = cfg.kv_blocks;
    m_watermark = static_cast<std::int64_t>(std::floor(cfg.watermark * static_cast<double>(cfg.kv_blocks)));
    m_log.captures.assign(cfg.graph_buckets.size(), 0);
    for (const auto& a : arrivals) {
      ServedRequest r;
      r.arrival_s = a.arrival_s;
      r.prompt_tokens = a.prompt_tokens;
      r.output_tokens = a.output_tokens;
      m_log.requests.push_back(r);
    }
  }

  ServeLog run() {
    check_requests();
    if (m_cfg.mode != LaunchMode::Eager && m_cfg.capture_at_startup) {
      // vLLM captures every bucket before it serves, at a short context.
      for (std::size_t b = 0; b < m_cfg.graph_buckets.size(); ++b) {
        StepQuery q;
        q.shape.decode_seqs = m_cfg.graph_buckets[b];
        q.shape.decode_context = m_cfg.block_size;
        q.mode = m_cfg.mode;
        q.steps = m_cfg.mode == LaunchMode::MultiStep ? m_cfg.multi_step : 1;
        m_log.startup_s += m_cost(q).capture_s;
        ++m_log.captures[b];
      }
      m_log.capture_s = m_log.startup_s;
    }
    // Arrival times count from the end of the start-up.
    m_t = 0;
    const double first = m_arrivals.empty() ? 0 : m_arrivals.front().arrival_s;
    for (std::uint64_t n = 0; m_finished < m_arrivals.size(); ++n) {
      if (n % 1024 == 0) sim::check_stop();  // a signal stops a long run within a second
      admit_arrivals(m_t);
      if (m_waiting.empty() && m_running.empty()) {  // idle until the next request
        m_t = std::max(m_t, m_arrivals[m_next].arrival_s);
        continue;
      }
      step();
    }
    m_log.end_s = m_t;
    m_log.kv_blocks_left = m_cfg.kv_blocks - m_free;
    const double span = m_t - first;
    m_log.mean_in_system = span > 0 ? m_area / span : 0;
    return std::move(m_log);
  }

 private:
  void check_requests() {
    for (const auto& a : m_arrivals) {
      const std::int64_t longest = a.prompt_tokens + a.output_tokens;
      const std::int64_t need = ceil_div(longest, m_cfg.block_size) + m_watermark;
      if (need > m_cfg.kv_blocks)
        throw sim::InputError("kv_blocks", "kv_blocks",
                              "a request of " + std::to_string(a.prompt_tokens) + " prompt and " +
                                  std::to_string(a.output_tokens) + " output tokens needs " + std::to_string(need) +
                                  " KV-cache blocks of " + std::to_string(m_cfg.block_size) +
                                  " tokens (the watermark's included) but the cache has " +
                                  std::to_string(m_cfg.kv_blocks) +
                                  "; give more devices or tensor_parallel, a smaller model, or shorter requests");
      // A preempted sequence is computed again whole: its prompt and all but its last token.
      if (!m_cfg.chunked_prefill && longest - 1 > m_cfg.max_batched_tokens)
        throw sim::InputError("max_batched_tokens", "max_batched_tokens",
                              "a request of " + std::to_string(a.prompt_tokens) + " prompt and " +
                                  std::to_string(a.output_tokens) +
                                  " output tokens may have to be computed again in one step after a preemption, " +
                                  std::to_string(longest - 1) + " tokens, more than a step's " +
                                  std::to_string(m_cfg.max_batched_tokens) +
                                  " (as vLLM requires without chunked prefill); raise max_batched_tokens or turn on "
                                  "chunked_prefill");
    }
  }

  /// Requests that arrived by `t` join the waiting queue; the time they spent in the system
  /// before `t` is counted.
  void admit_arrivals(double t) {
    while (m_next < m_arrivals.size() && m_arrivals[m_next].arrival_s <= t) {
      Seq s;
      s.index = m_next;
      s.original = s.prompt = m_arrivals[m_next].prompt_tokens;
      s.output = m_arrivals[m_next].output_tokens;
      m_area += t - m_arrivals[m_next].arrival_s;
      m_waiting.push_back(s);
      ++m_next;
    }
  }

  bool allocate(Seq& s, std::int64_t tokens, bool admission) {
    const std::int64_t need = ceil_div(tokens, m_cfg.block_size) - s.blocks;
    if (need <= 0) return true;
    if (m_free - need < (admission ? m_watermark : 0)) return false;
    m_free -= need;
    s.blocks += need;
    m_log.peak_kv_blocks = std::max(m_log.peak_kv_blocks, m_cfg.kv_blocks - m_free);
    return true;
  }
  void release(Seq& s) {
    m_free += s.blocks;
    s.blocks = 0;
  }

  /// Frees the last admitted running sequence's blocks and puts it first in the queue, to be
  /// computed again from its prompt and the tokens it generated (vLLM's recompute preemption).
  void preempt_last() {
    Seq s = m_running.back();
    m_running.pop_back();
    release(s);
    s.prompt = s.original + s.generated;
    s.computed = 0;
    m_waiting.push_front(s);
    ++m_log.requests[s.index].preemptions;
    ++m_log.preemptions;
  }

  void step() {
    ServedStep st;
    st.start_s = m_t;
    st.waiting = static_cast<std::int64_t>(m_waiting.size());
    std::vector<Seq*> decode, prefill;
    std::vector<std::int64_t> chunk;  // per prefill sequence: its tokens in this step
    std::int64_t k = 1;               // decode steps in the launch
    bool prompts = !m_waiting.empty();
    for (const Seq& s : m_running) prompts = prompts || !s.prefilled();
    if (m_cfg.chunked_prefill && prompts) {
      schedule_chunked(decode, prefill, chunk);
    } else if (m_cfg.chunked_prefill || !schedule_prompts(prefill, chunk)) {
      // k steps per launch where a captured graph holds the batch (preemption only shrinks it).
      const auto batch = static_cast<std::int64_t>(m_running.size());
      if (m_cfg.mode == LaunchMode::MultiStep && !m_cfg.graph_buckets.empty() && batch <= m_cfg.graph_buckets.back())
        k = m_cfg.multi_step;
      schedule_decode(decode, k);
    }
    if (decode.empty() && prefill.empty()) {
      // Nothing fits until a request finishes; cannot happen while the checks above hold.
      throw std::logic_error("serving: a step with nothing to run");
    }
    StepQuery q;
    q.steps = k;
    workloads::StepShape& shape = q.shape;
    shape.decode_seqs = static_cast<std::int64_t>(decode.size());
    std::int64_t keys = 0;
    for (const Seq* s : decode) keys += s->length();
    if (!decode.empty()) shape.decode_context = ceil_div(keys, shape.decode_seqs);
    shape.prefill_seqs = static_cast<std::int64_t>(prefill.size());
    if (!prefill.empty()) {
      std::int64_t tokens = 0, ctx = 0;
      bool whole = true;
      for (std::size_t i = 0; i < prefill.size(); ++i) {
        tokens += chunk[i];
        ctx += prefill[i]->computed + chunk[i];
        whole = whole && prefill[i]->computed == 0;
      }
      shape.prefill_tokens = ceil_div(tokens, shape.prefill_seqs);
      shape.prefill_context =
          whole ? shape.prefill_tokens : std::max(shape.prefill_tokens, ceil_div(ctx, shape.prefill_seqs));
    }
    // How it runs: decode-only batches as captured graphs up to the largest bucket.
    q.mode = LaunchMode::Eager;
    std::ptrdiff_t bucket = -1;
    if (m_cfg.mode != LaunchMode::Eager && prefill.empty()) {
      const auto& b = m_cfg.graph_buckets;
      const auto it = std::lower_bound(b.begin(), b.end(), shape.decode_seqs);
      if (it != b.end()) {
        bucket = it - b.begin();
        st.padded_seqs = *it;
        shape.decode_seqs = *it;  // the padding's slots read no keys
        shape.decode_context = std::max<std::int64_t>(1, ceil_div(keys, *it));
        // A single step in multi-step mode (prompts pending under chunked prefill) replays the graph.
        q.mode = m_cfg.mode == LaunchMode::MultiStep && k > 1 ? LaunchMode::MultiStep : LaunchMode::Graph;
      }
    }
    if (q.mode != LaunchMode::MultiStep) q.steps = 1;
    k = q.steps;
    const StepCost cost = m_cost(q);
    double capture = 0;
    if (bucket >= 0 && m_log.captures[static_cast<std::size_t>(bucket)] == 0) {
      capture = cost.capture_s;  // its first use (captured at start-up otherwise)
      ++m_log.captures[static_cast<std::size_t>(bucket)];
      m_log.capture_s += capture;
    }
    const auto seqs = static_cast<double>(decode.size() + prefill.size());
    st.phase_s = cost.phase_s;
    st.phase_s[static_cast<std::size_t>(ServePhase::Scheduler)] = m_cfg.schedule_step_s + m_cfg.schedule_seq_s * seqs;
    // Host sampling: every sequence that gets a token, each decode step of the launch.
    std::int64_t sampled = static_cast<std::int64_t>(decode.size()) * k;
    for (std::size_t i = 0; i < prefill.size(); ++i) sampled += prefill[i]->computed + chunk[i] >= prefill[i]->prompt;
    st.phase_s[static_cast<std::size_t>(ServePhase::Sampling)] =
        m_cfg.sample_s_per_logit * static_cast<double>(m_cfg.vocab) * static_cast<double>(sampled);
    const double end = m_t + capture + st.phase_s[static_cast<std::size_t>(ServePhase::Scheduler)] + cost.time_s +
                       st.phase_s[static_cast<std::size_t>(ServePhase::Sampling)];
    st.capture_s = capture;
    st.end_s = end;
    st.decode_seqs = static_cast<std::int64_t>(decode.size());
    st.prefill_seqs = static_cast<std::int64_t>(prefill.size());
    st.tokens = static_cast<std::int64_t>(decode.size()) * k;
    for (auto c : chunk) st.tokens += c;
    st.steps = k;
    st.kv_blocks_used = m_cfg.kv_blocks - m_free;
    // What the step's sequences hold in the cache by their lengths, counted apart from the allocator.
    for (const Seq* s : decode)
      st.kv_blocks_needed += ceil_div(s->length() + std::min(k, s->output - s->generated) - 1, m_cfg.block_size);
    for (std::size_t i = 0; i < prefill.size(); ++i)
      st.kv_blocks_needed += ceil_div(prefill[i]->computed + chunk[i], m_cfg.block_size);
    // Requests in the system meanwhile: those at the start, and arrivals during the step.
    m_area += static_cast<double>(m_next - m_finished) * (end - m_t);
    admit_arrivals(end);
    // Results at the end of the step.
    for (std::size_t i = 0; i < prefill.size(); ++i) {
      Seq& s = *prefill[i];
      s.computed += chunk[i];
      if (s.prefilled()) emit(s, end, 1);
    }
    for (Seq* s : decode) emit(*s, end, std::min(k, s->output - s->generated));
    m_t = end;
    m_log.steps.push_back(st);
    // Finished sequences leave; their blocks are freed.
    std::vector<Seq> still;
    for (Seq& s : m_running) {
      if (s.generated >= s.output) {
        release(s);
        m_log.requests[s.index].finish_s = end;
        ++m_finished;
      } else {
        still.push_back(s);
      }
    }
    m_running = std::move(still);
  }

  void emit(Seq& s, double t, std::int64_t tokens) {
    ServedRequest& r = m_log.requests[s.index];
    if (s.generated == 0 && tokens > 0) r.first_token_s = t;
    s.generated += tokens;
  }

  /// Prefill-first: whole prompts of waiting requests, first come first served, while the token
  /// budget, the sequence limit and the free blocks (above the watermark) allow.
  bool schedule_prompts(std::vector<Seq*>& prefill, std::vector<std::int64_t>& chunk) {
    std::int64_t tokens = 0;
    std::size_t admitted = 0;
    while (admitted < m_waiting.size()) {
      Seq& s = m_waiting[admitted];
      if (tokens + s.prompt > m_cfg.max_batched_tokens ||
          static_cast<std::int64_t>(m_running.size() + admitted + 1) > m_cfg.max_seqs)
        break;
      if (!allocate(s, s.prompt, true)) break;
      tokens += s.prompt;
      ++admitted;
    }
    if (admitted == 0) return false;
    for (std::size_t i = 0; i < admitted; ++i) {
      m_running.push_back(m_waiting.front());
      m_waiting.pop_front();
    }
    for (std::size_t i = m_running.size() - admitted; i < m_running.size(); ++i) {
      prefill.push_back(&m_running[i]);
      chunk.push_back(m_running[i].prompt);
    }
    return true;
  }

  /// Every running sequence generates `k` tokens (its cache grown to hold them), the last
  /// admitted preempted while the blocks run out.
  void schedule_decode(std::vector<Seq*>& decode, std::int64_t k) {
    for (std::size_t i = 0; i < m_running.size(); ++i) {
      Seq& s = m_running[i];
      if (!s.prefilled()) continue;
      const std::int64_t need = s.length() + std::min(k, s.output - s.generated) - 1;
      bool self = false;
      while (!self && !allocate(s, need, false)) {
        self = &m_running.back() == &s;
        preempt_last();
      }
      if (self) break;
    }
    for (Seq& s : m_running)
      if (s.prefilled()) decode.push_back(&s);
  }

  /// Chunked prefill: every running sequence's next token first, then prompts in chunks — the
  /// started ones, then waiting requests in order — filling the token budget.
  void schedule_chunked(std::vector<Seq*>& decode, std::vector<Seq*>& prefill, std::vector<std::int64_t>& chunk) {
    std::vector<Seq*> decoding;
    schedule_decode(decoding, 1);
    std::int64_t budget = m_cfg.max_batched_tokens - static_cast<std::int64_t>(decoding.size());
    std::vector<std::size_t> started;
    for (std::size_t i = 0; i < m_running.size() && budget > 0; ++i) {
      Seq& s = m_running[i];
      if (s.prefilled()) continue;
      const std::int64_t c = std::min(budget, s.prompt - s.computed);
      bool self = false;
      while (!self && !allocate(s, s.computed + c, false)) {  // as a decode token: the last admitted yields
        self = &m_running.back() == &s;
        preempt_last();
      }
      if (self) break;
      started.push_back(i);
      chunk.push_back(c);
      budget -= c;
    }
    while (budget > 0 && !m_waiting.empty() && static_cast<std::int64_t>(m_running.size()) < m_cfg.max_seqs) {
      Seq& s = m_waiting.front();
      const std::int64_t c = std::min(budget, s.prompt - s.computed);
      if (!allocate(s, s.computed + c, true)) break;
      m_running.push_back(s);
      m_waiting.pop_front();
      started.push_back(m_running.size() - 1);
      chunk.push_back(c);
      budget -= c;
    }
    // Pointers only once the running list stops growing.
    for (Seq& s : m_running)
      if (s.prefilled()) decode.push_back(&s);
    for (auto i : started) prefill.push_back(&m_running[i]);
  }

  const std::vector<ServeArrival>& m_arrivals;
  const SchedulerConfig& m_cfg;
  const StepCostFn& m_cost;
  ServeLog m_log;
  std::deque<Seq> m_waiting;
  std::vector<Seq> m_running;  ///< in admission order
  std::int64_t m_free = 0, m_watermark = 0;
  std::size_t m_next = 0, m_finished = 0;
  double m_t = 0, m_area = 0;
};

}  // namespace

ServeLog serve(const std::vector<ServeArrival>& arrivals, const SchedulerConfig& cfg, const StepCostFn& cost) {
  for (std::size_t i = 1; i < arrivals.size(); ++i)
    if (arrivals[i].arrival_s < arrivals[i - 1].arrival_s)
      throw std::invalid_argument("serve: arrivals must be in time order");
  return Engine(arrivals, cfg, cost).run();
}

}  // namespace ascendsim::runtime
