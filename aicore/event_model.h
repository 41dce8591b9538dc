// The event model of an op on a DaVinci core (`aicore.model: event`): the busiest block's steps
// run through the pipes as SystemC processes, one per pipe (Scalar, MTE2, MTE1, Cube, FixPipe,
// Vector, MTE3), synchronised by set_flag/wait_flag pairs over the buffers between them, as a
// kernel written for the core synchronises its pipes.
//
// Each pipe works through the block's steps in order (a Cube op's k-steps of each output tile, a
// Vector op's tiles). For every step a pipe with work waits for the flag its producer (the
// previous pipe with work in that step) sets when the step's data is in the buffer between them,
// waits for a free half of its own output buffer, works, then frees its input half and sets its
// consumer's flag. A flag is seen `flag_sync_cycles` after it is set. A buffer has two halves
// (ping-pong) where the tiling's footprint fits the buffer twice and `aicore.double_buffer` is
// on, else one. The Cube's accumulator (L0C) is held from an output tile's first k-step to its
// last, then drained by FixPipe into the UB, post-processed by the Vector unit and stored by MTE3.
//
// Memory: the other blocks run the same programme at the same time, so each step's GM reads are
// those of every block in that round: an LRU model of the chip's L2 (memory.l2_mib) decides which
// tiles of the operands hit; a step's loads last at least the round's misses at the whole HBM
// bandwidth and its hits at the whole L2 bandwidth (the blocks of a round move together), and its
// stores the round's stores at the HBM bandwidth. Edge tiles have their own sizes.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "aicore/cost_model.h"

namespace ascendsim::aicore {

struct EventOptions {
  /// Keep up to kFullTimelineIntervals busy intervals per pipe (`ascendsim op`'s timeline);
  /// otherwise at most kTimelineIntervals. The shortest gaps are merged to keep within either.
  bool full_timeline = false;
};
inline constexpr std::size_t kFullTimelineIntervals = std::size_t{1} << 16;

/// Steps of the busiest block beyond which the event model refuses an op.
inline constexpr std::int64_t kMaxSteps = 2'000'000;

/// An op the event model will not simulate: its busiest block has more than kMaxSteps steps.
/// (A call while a simulation runs, or flags that deadlock — which no tiling the tiler accepts can
/// cause — are std::logic_error: faults, not input.)
class EventModelError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// The event model of one op. Throws EventModelError for an op too large to simulate,
/// std::logic_error when the tiling does not fit the buffers (the tiler's refusal) or the pipes'
/// flags deadlock (naming the waiting pipes).
OpCost simulate_op(const OpDesc& d, const AicoreConfig& core, const MemoryConfig& mem, const EventOptions& opt = {});

/// The event model of one op with a given tiling (tile_op() with a forced L0 tile: a user's or a
/// fuzzer's choice).
OpCost simulate_tiling(const OpDesc& d, const Tiling& t, const AicoreConfig& core, const MemoryConfig& mem,
                       const EventOptions& opt = {});

/// The pipes' busy time in [from, to) cycles as text, one row per pipe and `columns` columns:
/// '#' busy for all of a column, '+' more than half, '.' some of it, ' ' idle.
std::string timeline_chart(const PipeTimeline& t, double from, double to, int columns);

/// The event model as a CostModel.
std::unique_ptr<CostModel> make_event_cost_model(const AicoreConfig& core, const MemoryConfig& mem);

}  // namespace ascendsim::aicore
