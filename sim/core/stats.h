// Statistics as a tree that follows the module hierarchy. Each module owns a StatsGroup named
// after it and registers its counters once with name, unit and description; hot paths only add
// to them. Derived values (utilisation, bandwidth) are formulas evaluated when the tree is dumped.
// A statistic's path is its module's path below the run plus its name, e.g.
// `chip.hostif.h2d.bytes`; stats_tree() walks a module's subtree, so a module added anywhere
// appears in the report without a hand-written list.
#pragma once

#include <cmath>
#include <cstdint>
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

/// A sum whose value does not depend on the order of its terms, so that tasks counted in one
/// addition give the very value they give counted one by one: each term is rounded to the nearest
/// multiple of 2^-20 (exactly: integers, and values that are multiples of 2^-20 already, such as
/// any of 2^32 or more, are kept as they are) and the multiples are added exactly, up to 2^107.
/// Sums may be subtracted (prefix sums) without rounding. A term that is not finite makes the
/// value NaN.
class ExactSum {
 public:
  ExactSum& operator+=(double v) {
    if (!std::isfinite(v)) {
      m_nan = true;
      return *this;
    }
    const double x = std::nearbyint(v * 0x1p20);  // scaling by a power of two is exact
    m_fixed += x > -0x1p62 && x < 0x1p62 ? static_cast<std::int64_t>(x) : static_cast<Fixed>(x);
    return *this;
  }
  ExactSum& operator+=(const ExactSum& o) {
    m_fixed += o.m_fixed;
    m_nan = m_nan || o.m_nan;
    return *this;
  }
  friend ExactSum operator-(ExactSum a, const ExactSum& b) {
    a.m_fixed -= b.m_fixed;
    a.m_nan = a.m_nan || b.m_nan;
    return a;
  }
  double value() const { return m_nan ? std::nan("") : static_cast<double>(m_fixed) * 0x1p-20; }

 private:
  __extension__ using Fixed = __int128;
  Fixed m_fixed = 0;
  bool m_nan = false;
};

/// A sum of times, each a whole number of the kernel's time resolution (optionally times a count,
/// such as the cores an op holds), kept exactly: its value does not depend on the order of its
/// terms either.
class TimeSum {
 public:
  void add(const sc_core::sc_time& t, std::int64_t times = 1) {
    m_units += static_cast<Units>(t.value()) * static_cast<Units>(times);
  }
  TimeSum& operator+=(const TimeSum& o) {
    m_units += o.m_units;
    return *this;
  }
  friend TimeSum operator-(TimeSum a, const TimeSum& b) {
    a.m_units -= b.m_units;
    return a;
  }
  double seconds() const { return static_cast<double>(m_units) * sc_core::sc_get_time_resolution().to_seconds(); }

 private:
  __extension__ using Units = __int128;
  Units m_units = 0;
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
  /// Registers a sum independent of the order of its terms (ExactSum).
  ExactSum& sum(const std::string& name, const std::string& unit, const std::string& description);
  /// Registers a sum of times (TimeSum), shown in seconds (`unit` "s", or "core*s" and the like).
  TimeSum& time_sum(const std::string& name, const std::string& unit, const std::string& description);
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
  /// Adds a statistic; its name must be new in the group.
  void add(Entry e);
  const sc_core::sc_object* m_owner;
  std::deque<Scalar> m_scalars;
  std::deque<ExactSum> m_sums;
  std::deque<TimeSum> m_time_sums;
  std::deque<Entry> m_entries;
};

/// The statistics below `root` (excluded) as nested objects named after the modules:
/// {"chip": {"hostif": {"doorbells": 3, "h2d": {"bytes": ...}}}}. Modules without statistics in
/// their subtree are left out.
nlohmann::ordered_json stats_tree(const sc_core::sc_object& root);
/// Every statistic below `root` with its path, unit and description, in tree order.
std::vector<StatInfo> describe_stats(const sc_core::sc_object& root);

}  // namespace ascendsim::sim
