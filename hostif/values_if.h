// Functional mode: the values behind the timing. The host and the device call these where a real
// system moves or computes them — the host's H2D copy of a batch or its send into the device data
// queue, GetNext, the end of a training step on the device, the host's read of the loss — so each
// strategy moves its batches by its own path. The calls take no simulated time.
#pragma once

namespace ascendsim::hostif {

class ValuesIf {
 public:
  virtual ~ValuesIf() = default;
  /// Non-sink: the host copies its next batch into the device's input tensors.
  virtual void copy_batch_to_device() = 0;
  /// Dataset sink: the host's channel thread sends its next batch into the device data queue.
  virtual void send_batch_to_queue() = 0;
  /// GetNext: the oldest batch in the device data queue becomes the input tensors.
  virtual void get_next() = 0;
  /// The device ran one training step's ops.
  virtual void step() = 0;
  /// The host reads the loss back (the D2H copy after a step or a sink).
  virtual double read_loss() = 0;
  /// An evaluation pass begins (true) or ends (false): its GetNext and step ends move no training
  /// values. Ending a pass returns the evaluation dataset's accuracy then (-1: not computed).
  virtual double evaluating(bool on) {
    (void)on;
    return -1;
  }
};

}  // namespace ascendsim::hostif
