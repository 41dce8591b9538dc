#include "sim/core/stats.h"

#include <stdexcept>

namespace ascendsim::sim {

Scalar& StatsGroup::scalar(const std::string& name, const std::string& unit, const std::string& description) {
  for (const auto& e : m_entries)
    if (e.name == name) throw std::logic_error("stat registered twice: " + m_name + "." + name);
  m_scalars.emplace_back();
  m_entries.push_back({name, unit, description, &m_scalars.back(), {}});
  return m_scalars.back();
}

void StatsGroup::formula(const std::string& name, const std::string& unit, const std::string& description,
                         std::function<double()> fn) {
  m_entries.push_back({name, unit, description, nullptr, std::move(fn)});
}

nlohmann::ordered_json StatsGroup::to_json() const {
  nlohmann::ordered_json out = nlohmann::ordered_json::object();
  for (const auto& e : m_entries) out[e.name] = e.scalar ? e.scalar->value() : e.fn();
  return out;
}


}  // namespace ascendsim::sim
