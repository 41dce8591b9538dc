// Statistics. Each module owns a StatsGroup and registers its counters once with name, unit and
// description; hot paths only add to them. Derived values (utilisation, bandwidth) are formulas
// evaluated when the group is dumped.
#pragma once

#include <deque>
#include <functional>
#include <string>

#include <nlohmann/json.hpp>

namespace ascendsim::sim {

class Scalar {
 public:
  Scalar& operator+=(double v) {
    m_value += v;
    return *this;
  }
  Scalar& operator++() {
    m_value += 1;
    return *this;
  }
  void sample_max(double v) {
    if (v > m_value) m_value = v;
  }
  double value() const { return m_value; }

 private:
  double m_value = 0;
};

class StatsGroup {
 public:
  explicit StatsGroup(std::string name) : m_name(std::move(name)) {}
  StatsGroup(const StatsGroup&) = delete;
  StatsGroup& operator=(const StatsGroup&) = delete;

  /// Registers a counter; the reference stays valid for the group's lifetime.
  Scalar& scalar(const std::string& name, const std::string& unit, const std::string& description);
  /// Registers a value computed at dump time.
  void formula(const std::string& name, const std::string& unit, const std::string& description,
               std::function<double()> fn);

  const std::string& name() const { return m_name; }
  /// {"counter": value, ...} in registration order.
  nlohmann::ordered_json to_json() const;

 private:
  struct Entry {
    std::string name, unit, description;
    Scalar* scalar = nullptr;
    std::function<double()> fn;
  };
  std::string m_name;
  std::deque<Scalar> m_scalars;
  std::deque<Entry> m_entries;
};

}  // namespace ascendsim::sim
