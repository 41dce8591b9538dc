// `op`: one op on the AI cores — cycles per pipe, tiling, what bounds it; the event model's timeline.

#include <cstddef>
#include <cstdint>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "aicore/event_model.h"
#include "sim/commands/commands.h"
#include "sim/commands/options.h"
#include "sim/config.h"
#include "sim/core/error.h"

namespace ascendsim::sim::cli {

namespace {

const std::string& op_types_help() {
  static const std::string text = [] {
    std::string t;
    for (auto k : aicore::all_op_kinds()) t += (t.empty() ? "" : " | ") + std::string(aicore::op_kind_name(k));
    return t;
  }();
  return text;
}

}  // namespace

int cmd_op(int argc, char* argv[]) {
  Options o;
  std::string type, dtype = "fp16", out_dtype, pad = "0", tile;
  int columns = 72;
  aicore::OpDesc d;
  po::options_description desc("options");
  desc.add_options()("help,h", "show this help")("type", po::value(&type)->required(), op_types_help().c_str())(
      "server", po::value(&o.config.server), "server preset (`ascendsim servers`; default generic-x86)")(
      "chip", po::value(&o.config.chip), "chip preset (default: the server's)")(
      "config", po::value(&o.config.config_file), "YAML file overriding preset parameters")(
      "set", po::value(&o.config.sets)->composing(), "override one parameter, key=value (repeatable)")(
      "dtype", po::value(&dtype)->default_value(dtype), "fp16 | fp32 | int8 (Cube ops: fp16 or int8)")(
      "out-dtype", po::value(&out_dtype), "result dtype (cast); default: --dtype")(
      "m", po::value(&d.m), "matmul: rows of the result; flash_attention: queries")(
      "n", po::value<std::int64_t>(),
      "matmul: columns of the result; conv/pool/batchnorm: batch; flash_attention: keys")(
      "k", po::value<std::int64_t>(), "matmul: inner dimension; conv: output channels; flash_attention: head width")(
      "batch", po::value<std::int64_t>(),
      "matmul: independent products of m x k by k x n (BatchMatMul); flash_attention: batch x heads")(
      "causal", po::bool_switch(&d.causal), "flash_attention: a decoder's mask (the tiles above the diagonal skipped)")(
      "group", po::value(&d.group)->default_value(1),
      "flash_attention: query heads per key/value head (grouped-query attention; the group reads the same key and "
      "value tiles)")(
      "transpose-a", po::bool_switch(&d.transpose_a), "matmul: A stored transposed")(
      "transpose-b", po::bool_switch(&d.transpose_b), "matmul: B stored transposed")(
      "c", po::value(&d.cin), "input channels")("h", po::value(&d.h), "input height")(
      "w", po::value(&d.w), "input width")("r", po::value(&d.kh), "kernel/window height")(
      "s", po::value(&d.kw), "kernel/window width")("stride", po::value(&d.stride)->default_value(1), "stride")(
      "pad", po::value(&pad)->default_value(pad), "padding: P on every side, or H,W (height, width)")(
      "elements", po::value(&d.elements), "vector ops: elements of the main operand")(
      "out-elements", po::value(&d.out_elements),
      "reductions, bias, softmax, one-hot: elements of the reduced side (default 1 for a full reduction)")(
      "operands", po::value(&d.operands)->default_value(2), "addn: number of operands")(
      "aicore-model", po::value<std::string>()->notifier([&o](const std::string& v) {
        shortcut(o, "aicore.model", "--aicore-model", v);
      }),
      "analytic | event: the pipe schedule, or every pipe of the busiest block simulated with its flags (prints "
      "the pipes' timeline; aicore.model)")(
      "tile", po::value(&tile),
      "event model: the L0 tile instead of the tiler's choice, M,N,K for a Cube op (multiples of 16), or the "
      "elements per tile of a Vector op")("columns", po::value(&columns)->default_value(columns),
                                          "event model: width of the timeline chart (10 to 400)")(
      "json", po::value(&o.json)->implicit_value("-"), "write JSON to FILE ('-' or no value: stdout)");
  po::variables_map vm = parse_options(argc, argv, desc, "op");
  if (vm.count("help")) {
    std::cout << "usage: ascendsim op --type TYPE [options]\n\n" << desc << "\n";
    return 0;
  }
  po::notify(vm);
  {
    const auto comma = pad.find(',');
    const auto h = whole_number(pad.substr(0, comma));
    const auto w = comma == std::string::npos ? h : whole_number(pad.substr(comma + 1));
    if (!h || !w) throw InputError("--pad '" + pad + "': expected P or H,W in pixels, e.g. 1 or 0,3");
    d.pad_h = *h;
    d.pad_w = *w;
  }
  const auto kind = aicore::parse_op_kind(type);
  if (!kind) throw InputError("--type '" + type + "' is not an op type (" + op_types_help() + ")");
  d.kind = *kind;
  const auto prec = aicore::parse_precision(dtype);
  if (!prec) throw InputError("--dtype '" + dtype + "': use fp16, fp32 or int8");
  d.precision = *prec;
  const auto out_prec = out_dtype.empty() ? prec : aicore::parse_precision(out_dtype);
  if (!out_prec) throw InputError("--out-dtype '" + out_dtype + "': use fp16, fp32 or int8");
  d.out_precision = *out_prec;
  const bool gemm = d.kind == aicore::OpKind::MatMul || aicore::is_attention(d.kind);
  if (vm.count("n")) (gemm ? d.n : d.batch) = vm["n"].as<std::int64_t>();
  if (vm.count("k")) (gemm ? d.k : d.cout) = vm["k"].as<std::int64_t>();
  if (d.causal && !aicore::is_attention(d.kind)) throw InputError("--causal: a flash_attention's mask");
  if (d.group != 1 && !aicore::is_attention(d.kind)) throw InputError("--group: a flash_attention's key/value groups");
  if (vm.count("batch")) {
    if (!gemm) throw InputError("--batch: a matmul's or a flash_attention's; conv/pool/batchnorm take --n");
    d.batch = vm["batch"].as<std::int64_t>();
    if (d.batch < 1) throw InputError("--batch " + std::to_string(d.batch) + ": give 1 or more products");
  }
  if (d.kind == aicore::OpKind::BatchNorm || d.kind == aicore::OpKind::BatchNormGrad) d.kh = d.kw = 1;
  if (!vm.count("out-elements") && !aicore::is_cube(d.kind) && !aicore::takes_nchw(d.kind)) {
    switch (d.kind) {  // a full reduction / one-row softmax unless told otherwise
      case aicore::OpKind::BiasAddGrad:
      case aicore::OpKind::ReduceSum:
      case aicore::OpKind::ReduceMean:
      case aicore::OpKind::ReduceMeanGrad:
      case aicore::OpKind::SoftmaxCrossEntropy:
      case aicore::OpKind::SoftmaxCrossEntropyGrad:
      case aicore::OpKind::OneHot:
        d.out_elements = 1;
        break;
      default:
        break;
    }
  }
  if (d.out_elements < 0) throw InputError("--out-elements must not be negative");
  if (d.operands < 2) throw InputError("--operands must be at least 2");

  const SystemConfig cfg = load_config(o.request());
  if (aicore::is_attention(d.kind) && !cfg.chip.aicore.flash_attention)
    throw InputError("--type " + type + ": " + cfg.chip.name +
                     "'s backend has no fused attention kernel (aicore.flash_attention is false); the ascend910b "
                     "preset has it");
  const bool event = cfg.chip.aicore.model == "event";
  if (columns < 10 || columns > 400) throw InputError("--columns " + std::to_string(columns) + ": give 10 to 400");
  std::optional<aicore::L0Tile> forced;
  if (!tile.empty()) {
    if (!event) throw InputError("--tile works with the event model only: add --aicore-model event");
    const auto parts = comma_list(tile);
    aicore::L0Tile l0;
    std::vector<std::int64_t*> fields = {&l0.m, &l0.n, &l0.k};
    const std::size_t want = aicore::is_cube(d.kind) ? 3 : 1;
    if (aicore::is_attention(d.kind))
      throw InputError(
          "--tile: a fused attention kernel has its own Br x Bc tiles (docs/aicore.md); it takes no other");
    if (parts.size() != want)
      throw InputError(
          "--tile '" + tile + "': give " +
          (want == 3 ? "M,N,K for a Cube op, e.g. 128,256,64" : "the elements per tile of a Vector op, e.g. 8192"));
    for (std::size_t i = 0; i < want; ++i) {
      const auto v = whole_number(parts[i]);
      if (!v || *v <= 0) throw InputError("--tile '" + tile + "': '" + parts[i] + "' is not a positive whole number");
      *fields[i] = *v;
    }
    forced = l0;
  }
  aicore::OpCost c;
  try {
    aicore::EventOptions eo;
    eo.full_timeline = true;
    if (event)
      c = aicore::simulate_tiling(d, aicore::tile_op(d, cfg.chip.aicore, forced ? &*forced : nullptr), cfg.chip.aicore,
                                  cfg.chip.memory, eo);
    else
      c = aicore::make_pipe_cost_model(cfg.chip.aicore, cfg.chip.memory)->estimate(d);
  } catch (const aicore::EventModelError& e) {
    throw InputError(e.what());
  } catch (const std::invalid_argument& e) {
    throw InputError(e.what());
  } catch (const std::logic_error& e) {  // a footprint the buffers cannot hold
    throw InputError(std::string(e.what()) +
                     (forced ? " — choose a smaller --tile" : " — check the buffer sizes of the configuration"));
  }
  const auto& core = cfg.chip.aicore;
  const double peak_macs =
      static_cast<double>(core.cores * (d.precision == aicore::Precision::INT8 ? core.cube_int8_macs_per_cycle
                                                                               : core.cube_fp16_macs_per_cycle)) *
      core.freq_ghz * 1e9;
  const double achieved = c.time_s > 0 ? 2.0 * c.macs / c.time_s / 1e12 : 0.0;
  const double intensity = c.gm_bytes > 0 ? 2.0 * c.macs / c.gm_bytes : 0.0;

  ordered_json j;
  j["op"] = d.to_string();
  j["chip"] = cfg.chip.name;
  j["aicore_model"] = cfg.chip.aicore.model;
  j["cycles"] = c.block_cycles;
  j["span_cycles"] = c.span_cycles;
  j["hbm_floor_cycles"] = c.hbm_floor_cycles;
  j["time_us"] = c.time_s * 1e6;
  j["macs"] = c.macs;
  j["gm_bytes"] = c.gm_bytes;
  j["mte_bytes"] = c.mte_bytes;
  j["achieved_tflops"] = achieved;
  j["peak_tflops"] = 2.0 * peak_macs / 1e12;
  j["hbm_bandwidth_gbps"] = cfg.chip.memory.hbm_bandwidth_gbps;
  j["hbm_sustained_gbps"] = cfg.chip.memory.hbm_gbps();
  j["arithmetic_intensity_flop_per_byte"] = intensity;
  j["bound"] = aicore::bound_name(c.bound);
  j["blocks"] = c.blocks;
  j["tiling"] = c.tiling.describe();
  j["tiles"] = c.tiling.tile_count();
  ordered_json pipes = ordered_json::object();
  for (std::size_t p = 0; p < aicore::kPipeCount; ++p)
    pipes[aicore::pipe_name(static_cast<aicore::Pipe>(p))] = c.pipe_busy[p];
  pipes["start"] = c.overhead_cycles;
  j["pipes"] = pipes;
  j["buffers_bytes"] = {{"l1", c.tiling.use.l1},
                        {"l0a", c.tiling.use.l0a},
                        {"l0b", c.tiling.use.l0b},
                        {"l0c", c.tiling.use.l0c},
                        {"ub", c.tiling.use.ub}};
  ordered_json ratios = ordered_json::object();
  for (const auto& [name, pipe] : aicore::op_summary_ratios()) ratios[name] = aicore::pipe_ratio(c, pipe);
  j["op_summary"] = ratios;
  if (c.timeline) {  // the event model: when each pipe was busy, cycles from the op's start
    ordered_json tl = ordered_json::object();
    tl["steps"] = c.timeline->steps;
    for (std::size_t p = 0; p < aicore::kPipeCount; ++p) {
      ordered_json spans = ordered_json::array();
      for (const auto& i : c.timeline->pipes[p]) spans.push_back({i.start, i.end});
      tl[aicore::pipe_name(static_cast<aicore::Pipe>(p))] = spans;
    }
    j["timeline_cycles"] = tl;
    ordered_json waits = ordered_json::object();
    for (std::size_t p = 0; p < aicore::kPipeCount; ++p)
      waits[aicore::pipe_name(static_cast<aicore::Pipe>(p))] = {{"input", c.timeline->starved[p]},
                                                                {"free_half", c.timeline->blocked[p]}};
    j["pipes_waiting"] = waits;
  }
  if (!o.json.empty()) {
    write_output(o.json, j.dump(2) + "\n");
    if (o.json == "-") return 0;
  }
  std::cout << fmt::format("{} on {}\n", d.to_string(), cfg.chip.name);
  std::cout << fmt::format("  time            {:.3f} us ({:.0f} cycles, {} blocks)\n", c.time_s * 1e6, c.block_cycles,
                           c.blocks);
  // What the cycles are: the busiest block's pipes, unless the op's HBM bytes take longer.
  if (c.hbm_floor_cycles > c.span_cycles)
    std::cout << fmt::format(
        "  cycles          {:.0f} start-up + {:.0f} for the op's {:.0f} B through HBM at {:.0f} GB/s "
        "(the busiest block's pipes take {:.0f})\n",
        c.overhead_cycles, c.hbm_floor_cycles, c.gm_bytes, cfg.chip.memory.hbm_gbps(), c.span_cycles);
  else
    std::cout << fmt::format(
        "  cycles          {:.0f} start-up + {:.0f} of the busiest block's pipes (the op's HBM "
        "bytes alone would take {:.0f})\n",
        c.overhead_cycles, c.span_cycles, c.hbm_floor_cycles);
  std::cout << fmt::format("  bound           {}\n", aicore::bound_name(c.bound));
  std::cout << fmt::format("  tiling          {}\n", c.tiling.describe());
  if (c.macs > 0)
    std::cout << fmt::format("  compute         {:.0f} MACs, {:.2f} of {:.1f} TFLOPS ({:.1f}%)\n", c.macs, achieved,
                             2.0 * peak_macs / 1e12, 100.0 * achieved / (2.0 * peak_macs / 1e12));
  std::cout << fmt::format("  memory          {:.0f} B through HBM ({:.0f} B moved by MTE), {:.2f} FLOP/B\n",
                           c.gm_bytes, c.mte_bytes, intensity);
  if (c.timeline) {  // the event model: where each pipe's time went, working or waiting
    std::cout << "  pipe cycles (busiest block): busy, waiting for its input, waiting for a free half of its output\n";
    for (std::size_t p = 0; p < aicore::kPipeCount; ++p)
      std::cout << fmt::format("    {:<8} {:>14.0f} {:>14.0f} {:>14.0f}\n",
                               aicore::pipe_name(static_cast<aicore::Pipe>(p)), c.pipe_busy[p], c.timeline->starved[p],
                               c.timeline->blocked[p]);
  } else {
    std::cout << "  pipe busy (cycles, busiest block):\n";
    for (std::size_t p = 0; p < aicore::kPipeCount; ++p)
      std::cout << fmt::format("    {:<8} {:>14.0f}\n", aicore::pipe_name(static_cast<aicore::Pipe>(p)),
                               c.pipe_busy[p]);
  }
  std::cout << fmt::format("    {:<8} {:>14.0f}\n", "start", c.overhead_cycles);
  std::cout << fmt::format("  buffers (B)     L1 {}  L0A {}  L0B {}  L0C {}  UB {}\n", c.tiling.use.l1,
                           c.tiling.use.l0a, c.tiling.use.l0b, c.tiling.use.l0c, c.tiling.use.ub);
  std::string summary;
  for (const auto& [name, pipe] : aicore::op_summary_ratios())
    summary += fmt::format("{}{} {:.3f}", summary.empty() ? "" : "  ", name, aicore::pipe_ratio(c, pipe));
  std::cout << "  op summary      " << summary << "\n";
  if (c.timeline) {
    const auto& t = *c.timeline;
    const double end = c.block_cycles;
    std::cout << fmt::format(
                     "  pipe timeline of the busiest block ({} steps, {} buffer halves; each column {:.0f} "
                     "cycles; # busy, + over half, . some):\n",
                     t.steps, t.halves[0], end / columns)
              << aicore::timeline_chart(t, 0, end, columns);
    // The first steps, where the pipes fill: about twelve steps' worth after the start-up.
    const double first = c.overhead_cycles;
    const double span =
        std::min(end - first, 12.0 * (end - first) / static_cast<double>(std::max<std::int64_t>(1, t.steps)));
    if (t.steps > 12)
      std::cout << fmt::format("  the first 12 steps (cycles {:.0f} to {:.0f}; each column {:.1f} cycles):\n", first,
                               first + span, span / columns)
                << aicore::timeline_chart(t, first, first + span, columns);
  }
  return 0;
}

}  // namespace ascendsim::sim::cli
