// Pipe-level schedule of one block's tile sequence on a DaVinci core.
//
// Every tile passes through the pipes in order — Scalar (issue), MTE2 (GM -> L1/UB), MTE1
// (L1 -> L0A/L0B), Cube, FixPipe (L0C -> UB), Vector, MTE3 (UB -> GM) — spending a duration in
// each (zero where a pipe has nothing to do). A pipe works on one tile at a time, in order, and
// the buffer between two pipes is ping-pong: a pipe may start tile i only when it has finished
// tile i-1, the pipe before it that works on tile i has finished it and raised its flag (seen
// `sync_cycles` later), and the pipe that consumed its output two of its own tiles ago has finished
// with it and its freeing flag has been seen (`sync_cycles` later again: the half it will write is
// free). Pipes with nothing to do for a tile pass it straight
// on; a pipe that works on every k-th tile only (FixPipe and after, on an output tile's last
// k-step) still has both of its halves. So MTE2 loads
// tile i+1 while the Cube works on tile i, and the Vector post-processes while the next Cube tile
// runs.
//
// Runs of identical tiles settle into a periodic regime; once every pipe's finish times advance
// by the same amount for two tiles in a row, the rest of the run is extrapolated exactly.
#pragma once

#include <array>
#include <cstdint>

namespace ascendsim::aicore {

enum class Pipe { Scalar, Mte2, Mte1, Cube, FixPipe, Vector, Mte3, Count };
inline constexpr std::size_t kPipeCount = static_cast<std::size_t>(Pipe::Count);
const char* pipe_name(Pipe p);

using PipeCycles = std::array<double, kPipeCount>;

class PipeSchedule {
 public:
  explicit PipeSchedule(double sync_cycles = 0) : m_sync(sync_cycles) {}
  /// Appends `count` identical tiles.
  void run(const PipeCycles& tile, std::int64_t count);
  /// Cycles from the first tile's start to the last tile's end.
  double makespan() const { return m_makespan; }
  /// Busy cycles per pipe.
  const PipeCycles& busy() const { return m_busy; }
  std::int64_t tiles() const { return m_tiles; }

  /// Finish times of the last two tiles and, per pipe, when the halves it wrote for its last two
  /// tiles were freed: for detecting a periodic regime across groups of runs.
  using State = std::array<std::array<double, kPipeCount>, 4>;
  const State& state() const { return m_state; }
  /// Moves the schedule forward by `periods` repetitions of a group of runs that advanced every
  /// finish time by `shift` cycles, added `busy` cycles per pipe and `tiles` tiles each time.
  void advance(double shift, const PipeCycles& busy, std::int64_t tiles, std::int64_t periods);
  /// True if every time of `after` is that of `before` plus one `shift` (the per-pipe release
  /// times only for pipes with `works` > 0; the others never move).
  static bool uniform_shift(const State& before, const State& after, const PipeCycles& works, double& shift);

 private:
  void push(const PipeCycles& tile);

  double m_sync;
  // [0], [1]: finish times of tiles i-2 and i-1; [2], [3]: per pipe, when the halves it wrote for
  // its own last-but-one and last tile were freed.
  State m_state{};
  PipeCycles m_busy{};
  double m_makespan = 0;
  std::int64_t m_tiles = 0;
};

}  // namespace ascendsim::aicore
