#include "hostif/task.h"

#include <algorithm>

namespace ascendsim::hostif {

const char* task_kind_name(TaskKind k) {
  switch (k) {
    case TaskKind::AiCore:
      return "aicore";
    case TaskKind::GetNext:
      return "getnext";
    case TaskKind::EventRecord:
      return "event_record";
    case TaskKind::EventWait:
      return "event_wait";
    case TaskKind::Comm:
      return "comm";
  }
  return "?";
}

const char* collective_name(Collective c) {
  switch (c) {
    case Collective::AllReduce:
      return "AllReduce";
    case Collective::Broadcast:
      return "Broadcast";
    case Collective::AllGather:
      return "AllGather";
    case Collective::ReduceScatter:
      return "ReduceScatter";
    case Collective::AllToAll:
      return "AllToAll";
    case Collective::SendRecv:
      return "SendRecv";
  }
  return "?";
}

std::vector<int> CommGroup::members(int rank, int ranks) const {
  std::vector<int> m;
  if (whole()) {
    for (int r = 0; r < ranks; ++r) m.push_back(r);
    return m;
  }
  if (peer != 0) return {std::min(rank, rank + peer), std::max(rank, rank + peer)};
  const int base = rank - ((rank / stride) % size) * stride;
  for (int i = 0; i < size; ++i) m.push_back(base + i * stride);
  return m;
}

std::vector<std::int32_t> streams_of(const TaskList& tasks) {
  std::vector<std::int32_t> s;
  for (const auto& t : tasks)
    if (std::find(s.begin(), s.end(), t.stream) == s.end()) s.push_back(t.stream);
  std::sort(s.begin(), s.end());
  return s;
}

}  // namespace ascendsim::hostif
