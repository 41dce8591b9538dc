// The per-op cost model interface: an op and a block count in, device time and its pipe
// breakdown out. Plain C++ (no SystemC). The SystemC side sees one event per task.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <utility>
#include <vector>

#include "aicore/aicore_config.h"
#include "aicore/op_desc.h"
#include "aicore/pipe_schedule.h"
#include "aicore/tiling.h"

namespace ascendsim::aicore {

enum class Bound { Cube, Vector, Memory, Overhead };
const char* bound_name(Bound b);

/// When each pipe of the busiest block was busy (the event model's record), in cycles from the
/// op's start: the block's start-up first, then the pipes.
struct PipeTimeline {
  struct Interval {
    double start = 0, end = 0;
  };
  std::array<std::vector<Interval>, kPipeCount> pipes;
  std::int64_t steps = 0;                ///< steps the block ran (k-steps of its output tiles, or tiles)
  std::array<int, kPipeCount> halves{};  ///< buffer halves of each pipe's output (2: ping-pong)
  /// Cycles each pipe waited for its input (its producer's flag: the data was not there yet) and
  /// for a free half of its output (its consumer had not finished with it). Until a pipe's last
  /// step ends, it is always working or waiting: busy + starved + blocked is that end.
  PipeCycles starved{}, blocked{};
};
/// Busy intervals kept per pipe of an op's timeline in a run's cost (the trace's pipe tracks).
inline constexpr std::size_t kTimelineIntervals = 64;

struct OpCost {
  std::int64_t blocks = 1;     ///< blocks the op is split into (at most one per core)
  double block_cycles = 0;     ///< cycles of the busiest block, start-up included
  PipeCycles pipe_busy{};      ///< busy cycles of each pipe in the busiest block
  double overhead_cycles = 0;  ///< block start-up
  double span_cycles = 0;      ///< the busiest block's pipes, first start to last end
  double hbm_floor_cycles = 0;  ///< the op's HBM bytes at the whole bandwidth: block_cycles is the
                                ///< larger of this and span_cycles, plus overhead_cycles
  double time_s = 0;           ///< device time of the whole op
  double macs = 0;             ///< exact multiply-accumulates
  double gm_bytes = 0;         ///< bytes that cross HBM (L2 misses and results)
  double mte_bytes = 0;        ///< all bytes MTE2 and MTE3 move (L2 hits included)
  Bound bound = Bound::Overhead;
  Tiling tiling;
  /// The event model's record of the busiest block's pipes (null from the analytic model).
  std::shared_ptr<const PipeTimeline> timeline;
};

/// A pipe's busy cycles over the busiest block's cycles, start-up included: the CANN profiler's
/// op summary ratios (aic_mac_ratio for the Cube, aic_mte2_ratio, ...).
double pipe_ratio(const OpCost& c, Pipe p);
/// The op summary's ratio columns and the pipe each measures: aic_ the AI core's Cube-side pipes,
/// aiv_ the Vector unit's (inside the AI core on the 910, on the vector cores of the 910B).
const std::vector<std::pair<const char*, Pipe>>& op_summary_ratios();

class CostModel {
 public:
  virtual ~CostModel() = default;
  /// Device time of one op. Pure: the same desc always gives the same cost.
  virtual OpCost estimate(const OpDesc& desc) const = 0;
};

/// The cost model `core.model` names: "analytic" (the DaVinci pipe model: per-op tiling, a
/// pipe-level schedule of each block's tiles with flag synchronisation and ping-pong buffers,
/// blocks spread over the cores sharing HBM and L2) or "event" (aicore/event_model.h).
std::unique_ptr<CostModel> make_pipe_cost_model(const AicoreConfig& core, const MemoryConfig& mem);

/// Memoises another model per unique OpDesc. Thread-safe.
class CachedCostModel final : public CostModel {
 public:
  explicit CachedCostModel(std::unique_ptr<CostModel> inner) : m_inner(std::move(inner)) {}
  OpCost estimate(const OpDesc& desc) const override;
  std::size_t size() const;

 private:
  std::unique_ptr<CostModel> m_inner;
  mutable std::mutex m_mutex;
  mutable std::unordered_map<OpDesc, OpCost, OpDescHash> m_cache;
};

}  // namespace ascendsim::aicore
