// Statistics as a tree that follows the module hierarchy. Each module owns a StatsGroup named
// after it and registers its counters once with name, unit and description; hot paths only add
// to them. Derived values (utilisation, bandwidth) are formulas evaluated when the tree is dumped.
// A statistic's path is its module's path below the run plus its name, e.g.
// `chip.hostif.h2d.bytes`; stats_tree() walks a module's subtree, so a module added anywhere
// appears in the report without a hand-written list.
#pragma once

#include <deque>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <systemc>

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
  void set(double v) { m_value = v; }
  void sample_max(double v) {
    if (v > m_value) m_value = v;
  }
  double value() const { return m_value; }

 private:
  double m_value = 0;
};

/// A statistic as documentation sees it.
struct StatInfo {
  std::string path;  ///< "chip.hostif.h2d.bytes"
  std::string unit;
  std::string description;
};

class StatsGroup {
 public:
  /// The statistics of `owner`, a module; the group is found through it when the tree is walked.
  explicit StatsGroup(const sc_core::sc_object& owner);
  ~StatsGroup();
  StatsGroup(const StatsGroup&) = delete;
  StatsGroup& operator=(const StatsGroup&) = delete;

  /// Registers a counter; the reference stays valid for the group's lifetime.
  Scalar& scalar(const std::string& name, const std::string& unit, const std::string& description);
  /// Registers a value computed at dump time.
  void formula(const std::string& name, const std::string& unit, const std::string& description,
               std::function<double()> fn);

  /// {"counter": value, ...} in registration order.
  nlohmann::ordered_json to_json() const;
  /// Each statistic with its path, `prefix` + name.
  void describe(const std::string& prefix, std::vector<StatInfo>& out) const;

  /// The group of a module, or nullptr.
  static const StatsGroup* of(const sc_core::sc_object& owner);

 private:
  struct Entry {
    std::string name, unit, description;
    Scalar* scalar = nullptr;
    std::function<double()> fn;
  };
  const sc_core::sc_object* m_owner;
  std::deque<Scalar> m_scalars;
  std::deque<Entry> m_entries;
};

/// The statistics below `root` (excluded) as nested objects named after the modules:
/// {"chip": {"hostif": {"doorbells": 3, "h2d": {"bytes": ...}}}}. Modules without statistics in
/// their subtree are left out.
nlohmann::ordered_json stats_tree(const sc_core::sc_object& root);
/// Every statistic below `root` with its path, unit and description, in tree order.
std::vector<StatInfo> describe_stats(const sc_core::sc_object& root);

}  // namespace ascendsim::sim
