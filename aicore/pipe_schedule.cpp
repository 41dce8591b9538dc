#include "aicore/pipe_schedule.h"

#include <algorithm>
#include <cmath>

namespace ascendsim::aicore {

const char* pipe_name(Pipe p) {
  switch (p) {
    case Pipe::Scalar:
      return "scalar";
    case Pipe::Mte2:
      return "mte2";
    case Pipe::Mte1:
      return "mte1";
    case Pipe::Cube:
      return "cube";
    case Pipe::FixPipe:
      return "fixpipe";
    case Pipe::Vector:
      return "vector";
    case Pipe::Mte3:
      return "mte3";
    case Pipe::Count:
      break;
  }
  return "?";
}

void PipeSchedule::push(const PipeCycles& d) {
  std::array<double, kPipeCount> end{}, release{};
  auto& last_end = m_state[1];
  auto& freed_before = m_state[2];  // the half the pipe wrote two of its own tiles ago
  auto& freed_last = m_state[3];
  double ready = 0;  // the tile's data is available to the next pipe (flag seen)
  for (std::size_t s = 0; s < kPipeCount; ++s) {
    double start = std::max(last_end[s], ready);             // the pipe is free and the tile's input is there
    if (d[s] > 0) start = std::max(start, freed_before[s]);  // its ping-pong half is free
    end[s] = start + d[s];
    if (d[s] > 0) ready = end[s] + m_sync;
    m_busy[s] += d[s];
  }
  // A pipe's output half is free once the next pipe that works on the tile has finished it.
  release[kPipeCount - 1] = end[kPipeCount - 1];
  for (std::size_t s = 0; s + 1 < kPipeCount; ++s) {
    std::size_t next = s + 1;
    while (next < kPipeCount && d[next] == 0) ++next;
    release[s] = next < kPipeCount ? end[next] + m_sync : end[s];  // the freeing flag is seen sync later
  }
  m_state[0] = m_state[1];
  m_state[1] = end;
  for (std::size_t s = 0; s < kPipeCount; ++s)
    if (d[s] > 0) {
      freed_before[s] = freed_last[s];
      freed_last[s] = release[s];
    }
  m_makespan = std::max(m_makespan, end[kPipeCount - 1]);
  ++m_tiles;
}

bool PipeSchedule::uniform_shift(const State& before, const State& after, const PipeCycles& works, double& shift) {
  shift = after[0][0] - before[0][0];
  for (std::size_t r = 0; r < after.size(); ++r)
    for (std::size_t s = 0; s < kPipeCount; ++s)
      if ((r < 2 || works[s] > 0) && std::fabs(after[r][s] - before[r][s] - shift) >= 1e-6) return false;
  return true;
}

void PipeSchedule::run(const PipeCycles& tile, std::int64_t count) {
  State prev_delta{};
  int stable = 0;
  for (std::int64_t i = 0; i < count; ++i) {
    const State before = m_state;
    push(tile);
    State delta{};
    for (std::size_t r = 0; r < delta.size(); ++r)
      for (std::size_t s = 0; s < kPipeCount; ++s) delta[r][s] = m_state[r][s] - before[r][s];
    bool same = i > 0;
    for (std::size_t r = 0; same && r < delta.size(); ++r)
      for (std::size_t s = 0; same && s < kPipeCount; ++s) same = std::fabs(delta[r][s] - prev_delta[r][s]) < 1e-6;
    stable = same ? stable + 1 : 0;
    prev_delta = delta;
    // Every tracked time advances by the same period: the remaining tiles repeat it exactly.
    double shift = 0;
    if (stable >= 2 && i + 1 < count) {
      if (uniform_shift(before, m_state, tile, shift)) {
        PipeCycles zero{};
        advance(shift, zero, 0, count - i - 1);
        for (std::size_t s = 0; s < kPipeCount; ++s) m_busy[s] += tile[s] * static_cast<double>(count - i - 1);
        m_tiles += count - i - 1;
        return;
      }
    }
  }
}

void PipeSchedule::advance(double shift, const PipeCycles& busy, std::int64_t tiles, std::int64_t periods) {
  const double total = shift * static_cast<double>(periods);
  for (auto& row : m_state)
    for (auto& e : row) e += total;
  for (std::size_t s = 0; s < kPipeCount; ++s) m_busy[s] += busy[s] * static_cast<double>(periods);
  m_makespan = std::max(m_makespan + total, m_state[1][kPipeCount - 1]);
  m_tiles += tiles * periods;
}

}  // namespace ascendsim::aicore
