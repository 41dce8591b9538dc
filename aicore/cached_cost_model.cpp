#include "aicore/cost_model.h"

namespace ascendsim::aicore {

OpCost CachedCostModel::estimate(const OpDesc& desc) const {
  std::lock_guard<std::mutex> lock(m_mutex);
  auto it = m_cache.find(desc);
  if (it != m_cache.end()) return it->second;
  OpCost c = m_inner->estimate(desc);
  m_cache.emplace(desc, c);
  return c;
}

std::size_t CachedCostModel::size() const {
  std::lock_guard<std::mutex> lock(m_mutex);
  return m_cache.size();
}

}  // namespace ascendsim::aicore
