#include "sim/core/stats.h"

#include <map>
#include <stdexcept>

namespace ascendsim::sim {

namespace {
std::map<const sc_core::sc_object*, const StatsGroup*>& registry() {
  static std::map<const sc_core::sc_object*, const StatsGroup*> r;
  return r;
}
}  // namespace

StatsGroup::StatsGroup(const sc_core::sc_object& owner) : m_owner(&owner) {
  if (!registry().emplace(&owner, this).second)
    throw std::logic_error(std::string("a second stats group for ") + owner.name());
}

StatsGroup::~StatsGroup() { registry().erase(m_owner); }

const StatsGroup* StatsGroup::of(const sc_core::sc_object& owner) {
  const auto it = registry().find(&owner);
  return it == registry().end() ? nullptr : it->second;
}

void StatsGroup::add(Entry e) {
  for (const auto& x : m_entries)
    if (x.name == e.name)
      throw std::logic_error(std::string("stat registered twice: ") + m_owner->name() + "." + e.name);
  m_entries.push_back(std::move(e));
}

Scalar& StatsGroup::scalar(const std::string& name, const std::string& unit, const std::string& description) {
  m_scalars.emplace_back();
  add({name, unit, description, &m_scalars.back(), {}});
  return m_scalars.back();
}

ExactSum& StatsGroup::sum(const std::string& name, const std::string& unit, const std::string& description) {
  const ExactSum* s = &m_sums.emplace_back();
  formula(name, unit, description, [s] { return s->value(); });
  return m_sums.back();
}

TimeSum& StatsGroup::time_sum(const std::string& name, const std::string& unit, const std::string& description) {
  const TimeSum* s = &m_time_sums.emplace_back();
  formula(name, unit, description, [s] { return s->seconds(); });
  return m_time_sums.back();
}

void StatsGroup::formula(const std::string& name, const std::string& unit, const std::string& description,
                         std::function<double()> fn) {
  add({name, unit, description, nullptr, std::move(fn)});
}

nlohmann::ordered_json StatsGroup::to_json() const {
  nlohmann::ordered_json out = nlohmann::ordered_json::object();
  for (const auto& e : m_entries) out[e.name] = e.scalar ? e.scalar->value() : e.fn();
  return out;
}

void StatsGroup::describe(const std::string& prefix, std::vector<StatInfo>& out) const {
  for (const auto& e : m_entries) out.push_back({prefix + e.name, e.unit, e.description});
}

nlohmann::ordered_json stats_tree(const sc_core::sc_object& root) {
  nlohmann::ordered_json out = nlohmann::ordered_json::object();
  for (const sc_core::sc_object* child : root.get_child_objects()) {
    nlohmann::ordered_json node = nlohmann::ordered_json::object();
    if (const StatsGroup* g = StatsGroup::of(*child)) node = g->to_json();
    const nlohmann::ordered_json below = stats_tree(*child);
    for (const auto& [k, v] : below.items()) node[k] = v;
    if (!node.empty()) out[child->basename()] = node;
  }
  return out;
}

namespace {
void describe_below(const sc_core::sc_object& root, const std::string& prefix, std::vector<StatInfo>& out) {
  for (const sc_core::sc_object* child : root.get_child_objects()) {
    const std::string path = prefix + child->basename() + ".";
    if (const StatsGroup* g = StatsGroup::of(*child)) g->describe(path, out);
    describe_below(*child, path, out);
  }
}
}  // namespace

std::vector<StatInfo> describe_stats(const sc_core::sc_object& root) {
  std::vector<StatInfo> out;
  describe_below(root, "", out);
  return out;
}

}  // namespace ascendsim::sim
