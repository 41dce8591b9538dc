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
  double ready = 0;  // the tile's data is available to the next pipe (flag seen)
  for (std::size_t s = 0; s < kPipeCount; ++s) {
    double start = std::max(m_end[1][s], ready);             // the pipe is free and the tile's input is there
    if (d[s] > 0) start = std::max(start, m_release[0][s]);  // ping-pong half freed by tile i-2
    end[s] = start + d[s];
    if (d[s] > 0) ready = end[s] + m_sync;
    m_busy[s] += d[s];
  }
  // A pipe's output half is free once the next pipe that works on the tile has finished it.
  release[kPipeCount - 1] = end[kPipeCount - 1];
  for (std::size_t s = 0; s + 1 < kPipeCount; ++s) {
    std::size_t next = s + 1;
    while (next < kPipeCount && d[next] == 0) ++next;
    release[s] = next < kPipeCount ? end[next] : end[s];
  }
  m_end[0] = m_end[1];
  m_end[1] = end;
  m_release[0] = m_release[1];
  m_release[1] = release;
  m_makespan = std::max(m_makespan, end[kPipeCount - 1]);
  ++m_tiles;
}

void PipeSchedule::run(const PipeCycles& tile, std::int64_t count) {
  std::array<double, 2 * kPipeCount> prev_delta{};
  int stable = 0;
  for (std::int64_t i = 0; i < count; ++i) {
    const State before = m_end;
    push(tile);
    std::array<double, 2 * kPipeCount> delta{};
    for (std::size_t s = 0; s < kPipeCount; ++s) {
      delta[s] = m_end[0][s] - before[0][s];
      delta[kPipeCount + s] = m_end[1][s] - before[1][s];
    }
    bool same = i > 0;
    for (std::size_t s = 0; same && s < delta.size(); ++s) same = std::fabs(delta[s] - prev_delta[s]) < 1e-6;
    stable = same ? stable + 1 : 0;
    prev_delta = delta;
    // Every finish time advances by the same period: the remaining tiles repeat it exactly.
    if (stable >= 2 && i + 1 < count) {
      bool uniform = true;
      for (std::size_t s = 1; uniform && s < delta.size(); ++s) uniform = std::fabs(delta[s] - delta[0]) < 1e-6;
      if (uniform) {
        PipeCycles zero{};
        advance(delta[0], zero, 0, count - i - 1);
        for (std::size_t s = 0; s < kPipeCount; ++s) m_busy[s] += tile[s] * static_cast<double>(count - i - 1);
        m_tiles += count - i - 1;
        return;
      }
    }
  }
}

void PipeSchedule::advance(double shift, const PipeCycles& busy, std::int64_t tiles, std::int64_t periods) {
  const double total = shift * static_cast<double>(periods);
  for (auto& row : m_end)
    for (auto& e : row) e += total;
  for (auto& row : m_release)
    for (auto& e : row) e += total;
  for (std::size_t s = 0; s < kPipeCount; ++s) m_busy[s] += busy[s] * static_cast<double>(periods);
  m_makespan = std::max(m_makespan + total, m_end[1][kPipeCount - 1]);
  m_tiles += tiles * periods;
}

}  // namespace ascendsim::aicore
