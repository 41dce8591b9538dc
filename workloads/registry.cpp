#include <stdexcept>

#include "workloads/lenet5.h"
#include "workloads/resnet.h"
#include "workloads/workload.h"

namespace ascendsim::workloads {

std::int64_t Workload::batch_bytes() const {
  std::int64_t n = 0;
  for (auto t : batch_inputs) n += graph.tensor(t).bytes();
  return n;
}

std::vector<std::string> workload_names() {
  std::vector<std::string> names = {"lenet5"};
  for (const auto& s : resnet_specs()) names.push_back(s.name);
  return names;
}

Workload make_workload(const std::string& name, std::int64_t batch_size) {
  if (batch_size <= 0) throw std::invalid_argument("batch size must be positive, got " + std::to_string(batch_size));
  if (name == "lenet5") return make_lenet5(batch_size);
  for (const auto& s : resnet_specs())
    if (s.name == name) return make_resnet(s, batch_size);
  std::string known;
  for (const auto& n : workload_names()) known += (known.empty() ? "" : ", ") + n;
  throw std::invalid_argument("unknown workload '" + name + "' (known: " + known + ")");
}

}  // namespace ascendsim::workloads
