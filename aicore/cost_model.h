// The per-op cost model interface: an op and a block count in, device time and its pipe
// breakdown out. Plain C++ (no SystemC). The SystemC side sees one event per task.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <unordered_map>

#include "aicore/aicore_config.h"
#include "aicore/op_desc.h"

namespace ascendsim::aicore {

enum class Bound { Cube, Vector, Memory, Overhead };
const char* bound_name(Bound b);

struct OpCost {
  std::int64_t blocks = 1;  ///< blocks the op is split into (one per core, at most `cores`)
  double block_cycles = 0;  ///< cycles of the slowest block, start-up included
  double cube_cycles = 0;   ///< per block, busy cycles of each pipe
  double vector_cycles = 0;
  double mte_cycles = 0;
  double overhead_cycles = 0;  ///< per block start-up
  double time_s = 0;           ///< device time of the whole op
  double macs = 0;             ///< exact MACs
  double gm_bytes = 0;         ///< bytes moved between GM and the cores
  Bound bound = Bound::Overhead;
};

class CostModel {
 public:
  virtual ~CostModel() = default;
  /// Device time of one op. Pure: the same desc always gives the same cost.
  virtual OpCost estimate(const OpDesc& desc) const = 0;
};

/// The pipe model: Cube MACs/cycle, Vector bytes/cycle and GM traffic overlapped as pipes per
/// block, blocks spread over the cores, HBM bandwidth shared by the active blocks.
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
