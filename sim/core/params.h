// Parameter declarations. Each component declares its parameters once — key, unit, range,
// description — bound to the fields of its typed config struct. The loader sets them from YAML
// and --set, rejecting unknown keys, wrong types and out-of-range values; `ascendsim params`
// and the report's resolved config are printed from the same declarations.
#pragma once

#include <cstdint>
#include <string>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

namespace ascendsim::sim {

enum class ParamType { Real, Integer, Boolean, Text };

struct ParamSpec {
  std::string key;  ///< dotted, e.g. "link.h2d_bandwidth_gbps"
  std::string unit;
  std::string description;
  ParamType type = ParamType::Real;
  double min = 0;  ///< numeric range, inclusive
  double max = 0;
  std::vector<std::string> choices;  ///< allowed values of a Text parameter; empty = any
  std::variant<double*, std::int64_t*, bool*, std::string*> target;
};

class ParamSet {
 public:
  void real(const std::string& key, double& field, const std::string& unit, double min, double max,
            const std::string& description);
  void integer(const std::string& key, std::int64_t& field, const std::string& unit, std::int64_t min, std::int64_t max,
               const std::string& description);
  void boolean(const std::string& key, bool& field, const std::string& description);
  void text(const std::string& key, std::string& field, std::vector<std::string> choices,
            const std::string& description);

  /// The declaration of `key`, or nullptr.
  const ParamSpec* find(const std::string& key) const;
  /// True if some declared key starts with "prefix.".
  bool is_section(const std::string& prefix) const;

  /// Parses `value` for `key` and stores it. Throws InputError naming `origin`, the key and the
  /// reason (unknown key with its closest known keys, wrong type, out of range).
  void set(const std::string& key, const std::string& value, const std::string& origin);

  /// The current value, formatted as it would be written in YAML.
  static std::string value_string(const ParamSpec& spec);
  static nlohmann::ordered_json value_json(const ParamSpec& spec);
  /// "[min, max]" or the list of choices.
  static std::string range_string(const ParamSpec& spec);

  const std::vector<ParamSpec>& specs() const { return m_specs; }
  /// Every parameter's current value, nested by section.
  nlohmann::ordered_json to_json() const;

 private:
  void add(ParamSpec spec);
  std::vector<ParamSpec> m_specs;
};

}  // namespace ascendsim::sim
