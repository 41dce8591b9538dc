"""LeNet-5 trained by ascendsim's functional mode against the same network in PyTorch.

Both start from the same weights (written here, loaded by ascendsim with --init-from) and see the
same batches (ascendsim's own, written with --dump-batches); the loss after each step and the
weights after the last must agree. Usage: lenet_reference.py ASCENDSIM DATASET_DIR WORK_DIR [STEPS]
"""
import json
import os
import subprocess
import sys

import numpy as np
import torch

from torch_reference import LeNet5, momentum_losses, read_batches, read_weights, write_weights

ascendsim, dataset, work = sys.argv[1:4]
steps = int(sys.argv[4]) if len(sys.argv) > 4 else 50
os.makedirs(work, exist_ok=True)
torch.manual_seed(0)
torch.set_num_threads(1)

# The seed's LeNet-5: convolutions without bias, dense layers with bias.
shapes = {
    "conv1.weight": (6, 1, 5, 5),
    "conv2.weight": (16, 6, 5, 5),
    "fc1.weight": (120, 400), "fc1.bias": (120,),
    "fc2.weight": (84, 120), "fc2.bias": (84,),
    "fc3.weight": (10, 84), "fc3.bias": (10,),
}
rng = np.random.default_rng(7)
init = {k: (rng.standard_normal(s) * 0.05).astype(np.float32) for k, s in shapes.items()}


write_weights(os.path.join(work, "init"), init)
report = os.path.join(work, "report.json")
subprocess.run([ascendsim, "train", "--workload", "lenet5", "--functional", "--strategy", "non-sink",
                "--dataset", dataset, "--steps-per-epoch", str(steps), "--init-from",
                os.path.join(work, "init.json"), "--dump-batches", os.path.join(work, "batches"),
                "--dump-steps", str(steps), "--save-weights", os.path.join(work, "final.json"),
                "--json", report, "-q"], check=True, stdout=subprocess.DEVNULL)
losses = [l[2] for l in json.load(open(report))["runs"][0]["functional"]["losses"]]
images, labels = read_batches(os.path.join(work, "batches"), steps)
net = LeNet5()
with torch.no_grad():
    for name, p in net.named_parameters():
        p.copy_(torch.from_numpy(init[name]))
reference = momentum_losses(net, images, labels)

worst = 0.0
for s, (ours, theirs) in enumerate(zip(losses, reference)):
    rel = abs(ours - theirs) / abs(theirs)
    worst = max(worst, rel)
    assert rel <= 1e-4, f"step {s + 1}: loss {ours} vs PyTorch {theirs} (relative {rel:.2e})"
assert len(losses) == steps, (len(losses), steps)
final = read_weights(os.path.join(work, "final.json"))
worst_w = 0.0
for name, p in net.named_parameters():
    diff = float(np.max(np.abs(final[name] - p.detach().numpy())))
    worst_w = max(worst_w, diff)
    assert diff <= 1e-4, f"{name}: weights differ by {diff:.2e} after {steps} steps"
moved = max(float(np.max(np.abs(final[n] - init[n]))) for n in shapes)
assert moved > 1e-3, f"the weights hardly moved ({moved:.2e}): nothing was trained"
print(f"{steps} steps: losses {reference[0]:.4f} -> {reference[-1]:.4f}, worst relative loss difference {worst:.2e}, "
      f"worst weight difference {worst_w:.2e} (weights moved up to {moved:.3f})")
