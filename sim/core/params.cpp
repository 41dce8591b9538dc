#include "sim/core/params.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <sstream>

#include "sim/core/error.h"

namespace ascendsim::sim {
namespace {

std::string format_number(double v) {
  std::ostringstream os;
  os.precision(15);
  os << v;
  return os.str();
}

// Edit distance, for "did you mean" on unknown keys.
std::size_t distance(const std::string& a, const std::string& b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diag = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      std::size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

bool parse_real(const std::string& s, double& out) {
  if (s.empty()) return false;
  char* end = nullptr;
  errno = 0;
  out = std::strtod(s.c_str(), &end);
  return errno == 0 && end == s.c_str() + s.size() && std::isfinite(out);
}

bool parse_integer(const std::string& s, std::int64_t& out) {
  if (s.empty()) return false;
  char* end = nullptr;
  errno = 0;
  long long v = std::strtoll(s.c_str(), &end, 10);
  if (errno != 0 || end != s.c_str() + s.size()) return false;
  out = v;
  return true;
}

}  // namespace

void ParamSet::add(ParamSpec spec) {
  if (find(spec.key)) throw std::logic_error("parameter declared twice: " + spec.key);
  m_specs.push_back(std::move(spec));
}

void ParamSet::real(const std::string& key, double& field, const std::string& unit, double min, double max,
                    const std::string& description) {
  add({key, unit, description, ParamType::Real, min, max, {}, &field});
}

void ParamSet::integer(const std::string& key, std::int64_t& field, const std::string& unit, std::int64_t min,
                       std::int64_t max, const std::string& description) {
  add({key, unit, description, ParamType::Integer, static_cast<double>(min), static_cast<double>(max), {}, &field});
}

void ParamSet::boolean(const std::string& key, bool& field, const std::string& description) {
  add({key, "", description, ParamType::Boolean, 0, 1, {}, &field});
}

void ParamSet::text(const std::string& key, std::string& field, std::vector<std::string> choices,
                    const std::string& description) {
  add({key, "", description, ParamType::Text, 0, 0, std::move(choices), &field});
}

const ParamSpec* ParamSet::find(const std::string& key) const {
  for (const auto& s : m_specs)
    if (s.key == key) return &s;
  return nullptr;
}

bool ParamSet::is_section(const std::string& prefix) const {
  const std::string p = prefix + ".";
  return std::any_of(m_specs.begin(), m_specs.end(),
                     [&](const ParamSpec& s) { return s.key.compare(0, p.size(), p) == 0; });
}

std::string ParamSet::range_string(const ParamSpec& spec) {
  switch (spec.type) {
    case ParamType::Real:
    case ParamType::Integer:
      return "[" + format_number(spec.min) + ", " + format_number(spec.max) + "]";
    case ParamType::Boolean:
      return "true|false";
    case ParamType::Text: {
      if (spec.choices.empty()) return "text";
      std::string out;
      for (const auto& c : spec.choices) out += (out.empty() ? "" : "|") + c;
      return out;
    }
  }
  return "";
}

void ParamSet::set(const std::string& key, const std::string& value, const std::string& origin) {
  const ParamSpec* spec = find(key);
  if (!spec) {
    std::vector<std::pair<std::size_t, std::string>> near;
    for (const auto& s : m_specs) near.emplace_back(distance(key, s.key), s.key);
    std::sort(near.begin(), near.end());
    std::string hint;
    for (std::size_t i = 0; i < near.size() && i < 3; ++i) hint += (i ? ", " : "") + near[i].second;
    throw InputError(
        origin, key,
        "unknown parameter '" + key + "' (closest known: " + hint + "; `ascendsim params` lists them all)");
  }
  auto bad = [&](const std::string& what) {
    return InputError(origin, key,
                      "parameter '" + key + "' " + what + ", got '" + value + "'" +
                          (spec->unit.empty() ? "" : " (unit: " + spec->unit + ")"));
  };
  switch (spec->type) {
    case ParamType::Real: {
      double v;
      if (!parse_real(value, v)) {
        double near = 0;
        char* end = nullptr;
        errno = 0;
        near = std::strtod(value.c_str(), &end);
        if (!value.empty() && end == value.c_str() + value.size() && errno == ERANGE)
          throw bad(std::string(near == 0 || std::fabs(near) < 1
                                    ? "is too close to zero to hold (below about 2.2e-308); use 0 or a larger magnitude"
                                    : "is too large to hold"));
        throw bad("expects a number");
      }
      if (v < spec->min || v > spec->max) throw bad("must lie in " + range_string(*spec));
      *std::get<double*>(spec->target) = v;
      break;
    }
    case ParamType::Integer: {
      std::int64_t v;
      if (!parse_integer(value, v)) throw bad("expects a whole number");
      if (static_cast<double>(v) < spec->min || static_cast<double>(v) > spec->max)
        throw bad("must lie in " + range_string(*spec));
      *std::get<std::int64_t*>(spec->target) = v;
      break;
    }
    case ParamType::Boolean: {
      if (value == "true")
        *std::get<bool*>(spec->target) = true;
      else if (value == "false")
        *std::get<bool*>(spec->target) = false;
      else
        throw bad("expects true or false");
      break;
    }
    case ParamType::Text: {
      if (!spec->choices.empty() && std::find(spec->choices.begin(), spec->choices.end(), value) == spec->choices.end())
        throw bad("must be one of " + range_string(*spec));
      if (value.empty()) throw bad("must not be empty");
      *std::get<std::string*>(spec->target) = value;
      break;
    }
  }
}

std::string ParamSet::value_string(const ParamSpec& spec) {
  switch (spec.type) {
    case ParamType::Real:
      return format_number(*std::get<double*>(spec.target));
    case ParamType::Integer:
      return std::to_string(*std::get<std::int64_t*>(spec.target));
    case ParamType::Boolean:
      return *std::get<bool*>(spec.target) ? "true" : "false";
    case ParamType::Text:
      return *std::get<std::string*>(spec.target);
  }
  return "";
}

nlohmann::ordered_json ParamSet::value_json(const ParamSpec& spec) {
  switch (spec.type) {
    case ParamType::Real:
      return *std::get<double*>(spec.target);
    case ParamType::Integer:
      return *std::get<std::int64_t*>(spec.target);
    case ParamType::Boolean:
      return *std::get<bool*>(spec.target);
    case ParamType::Text:
      return *std::get<std::string*>(spec.target);
  }
  return nullptr;
}

nlohmann::ordered_json ParamSet::to_json() const {
  nlohmann::ordered_json out = nlohmann::ordered_json::object();
  for (const auto& s : m_specs) {
    nlohmann::ordered_json* node = &out;
    std::size_t start = 0;
    for (std::size_t dot = s.key.find('.'); dot != std::string::npos; dot = s.key.find('.', start)) {
      node = &(*node)[s.key.substr(start, dot - start)];
      start = dot + 1;
    }
    (*node)[s.key.substr(start)] = value_json(s);
  }
  return out;
}

}  // namespace ascendsim::sim
