// Functional mode under semi-automatic parallelism: every rank's values, computed in lock step.
// The network as written for one device supplies the batches and the initial weights (so the
// sliced run starts where the one-device run starts); each rank holds its pieces
// (workloads::piece_indices) and runs its own graph op by op, the collectives exchanging real
// values among their group's ranks — AllReduce sums, AllGather concatenates along its axis,
// ReduceScatter sums and keeps the rank's piece, Slice keeps the rank's piece. The timing
// simulation drives it through rank 0's hooks (a step of the cluster per step of rank 0: the
// ranks step together); the loss read back is rank 0's.
#pragma once

#include <memory>
#include <vector>

#include "hostif/values_if.h"
#include "runtime/functional.h"
#include "workloads/parallel.h"
#include "workloads/workload.h"

namespace ascendsim::runtime {

class ClusterValues : public hostif::ValuesIf {
 public:
  /// `local`: one rank's graph (semi_auto's), its `whole` the one-device network; InputError if
  /// its values cannot be computed (a cut batch: the gradients' averaging is not computed).
  ClusterValues(const workloads::Workload& local, std::int64_t ranks, const FunctionalOptions& opt,
                const std::string& dataset_dir, std::int64_t steps_per_epoch);

  void copy_batch_to_device() override;
  void send_batch_to_queue() override;
  void get_next() override;
  void step() override;
  double read_loss() override;

  /// Rank `rank`'s value of its tensor `t`.
  const std::vector<float>& value(std::int64_t rank, workloads::TensorId t) const {
    return m_values.at(static_cast<std::size_t>(rank)).at(static_cast<std::size_t>(t));
  }

 private:
  void scatter_inputs();
  void collective(const workloads::Op& op);

  workloads::Workload m_local;
  std::int64_t m_ranks;
  FunctionalModel m_whole;                                  ///< batches and initial weights
  std::vector<std::vector<std::vector<float>>> m_values;    ///< [rank][tensor]
  std::vector<std::vector<std::shared_ptr<void>>> m_state;  ///< [rank][op]: kernels' kept state
  /// [batch tensor][rank]: the whole batch's indices of the rank's piece (piece_indices)
  std::vector<std::vector<std::vector<std::int64_t>>> m_input_pieces;
};

/// Functional mode under data parallelism: every rank's values in lock step. Each rank holds the
/// whole network, starts from the same weights (the same seed) and reads its shard of every pass
/// (FunctionalOptions::num_shards); after each step's backward pass the ranks' gradients are
/// averaged — the AllReduce with gradients_mean, summed in rank order — and every rank applies the
/// same update. Driven through rank 0's hooks like ClusterValues; the loss read back is rank 0's,
/// as MindSpore's LossMonitor prints on rank 0; rank 0's network is the one evaluated (--eval) and
/// saved.
class DataParallelValues : public hostif::ValuesIf {
 public:
  DataParallelValues(const workloads::Workload& w, std::int64_t ranks, const FunctionalOptions& opt,
                     const std::string& dataset_dir, std::int64_t steps_per_epoch);

  void copy_batch_to_device() override;
  void send_batch_to_queue() override;
  void get_next() override;
  void step() override;
  double read_loss() override;
  /// Evaluation passes pause every rank's training values; their accuracy is not computed here.
  double evaluating(bool on) override;

  const FunctionalModel& rank(std::int64_t r) const { return *m_ranks.at(static_cast<std::size_t>(r)); }
  /// Rank 0's network (what --save-weights writes, --dump-batches its batches).
  std::shared_ptr<FunctionalModel> rank0() const { return m_ranks.front(); }

 private:
  std::vector<std::shared_ptr<FunctionalModel>> m_ranks;
  std::vector<workloads::TensorId> m_gradients;
  std::vector<bool> m_fp16;  ///< per gradient: stored in fp16
  bool m_evaluating = false;
  std::vector<double> m_sum;  ///< a gradient's sum over the ranks (kept: every step reuses it)
};

}  // namespace ascendsim::runtime
