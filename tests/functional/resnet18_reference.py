"""Two ResNet-18 CIFAR-10 training steps of ascendsim's functional mode against PyTorch.

The test makes a small CIFAR-10 binary dataset, writes PyTorch's initial weights in ascendsim's
weights format, runs two steps at batch 2 (images resized to 224, as the workload's recipe) and
checks both losses — the first is the forward pass, the second shows the backward pass and the
update — in fp32 (amp O0) within 1e-3 relative. With the workload's own recipe (amp O2: fp16
network, fp32 master weights, loss scale 1024) the fp16 rounding shows as a small difference,
which is printed and bounded.
Then the evaluation network (`--mode infer`): from weights whose BatchNorm moving statistics are
not the batch's, one forward pass on the test split must give PyTorch's `eval()` loss, which
normalises by the moving statistics (and differs from the batch-statistics loss).
Usage: resnet18_reference.py ASCENDSIM WORK_DIR
"""
import json
import os
import subprocess
import sys

import numpy as np
import torch

from torch_reference import write_weights

ascendsim, work = sys.argv[1:3]
data = os.path.join(work, "cifar")
os.makedirs(data, exist_ok=True)
rng = np.random.default_rng(11)
for name, n in (("data_batch_1.bin", 64), ("test_batch.bin", 16)):
    rec = np.zeros((n, 3073), np.uint8)
    rec[:, 0] = rng.integers(0, 10, n)
    rec[:, 1:] = rng.integers(0, 256, (n, 3072))
    rec.tofile(os.path.join(data, name))
torch.manual_seed(0)
torch.set_num_threads(2)


class Block(torch.nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = torch.nn.BatchNorm2d(cout)
        self.conv2 = torch.nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = torch.nn.BatchNorm2d(cout)
        self.downsample = None
        if stride != 1 or cin != cout:
            self.downsample = torch.nn.Sequential(torch.nn.Conv2d(cin, cout, 1, stride, bias=False),
                                                  torch.nn.BatchNorm2d(cout))

    def forward(self, x):
        y = torch.relu(self.bn1(self.conv1(x)))
        y = self.bn2(self.conv2(y))
        return torch.relu(y + (x if self.downsample is None else self.downsample(x)))


class ResNet18(torch.nn.Module):
    def __init__(self, classes=10):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(3, 64, 7, 2, 3, bias=False)
        self.bn1 = torch.nn.BatchNorm2d(64)
        layers, cin = [], 64
        for i, c in enumerate((64, 128, 256, 512)):
            stage = torch.nn.Sequential(Block(cin, c, 1 if i == 0 else 2), Block(c, c, 1))
            setattr(self, f"layer{i + 1}", stage)
            cin = c
        self.fc = torch.nn.Linear(512, classes)

    def forward(self, x):
        x = torch.max_pool2d(torch.relu(self.bn1(self.conv1(x))), 3, 2, 1)
        for i in range(4):
            x = getattr(self, f"layer{i + 1}")(x)
        return self.fc(x.mean((2, 3)))


def ours(name):  # PyTorch parameter name -> ascendsim tensor name
    for a, b in (("running_mean", "moving_mean"), ("running_var", "moving_variance")):
        if name.endswith(a):
            return name[: -len(a)] + b
    parts = name.rsplit(".", 1)
    owner = parts[0].split(".")[-1]
    if owner.startswith("bn") or (owner == "1" and "downsample" in parts[0]):
        return parts[0] + (".gamma" if parts[1] == "weight" else ".beta")
    return name


def write_net(net, stem):  # its weights and BatchNorm statistics under ascendsim's names
    write_weights(os.path.join(work, stem), {ours(k): v.detach().numpy() for k, v in net.state_dict().items()
                                             if not k.endswith("num_batches_tracked")})


net = ResNet18()
write_net(net, "init")


def run(amp):
    out = os.path.join(work, f"report_{amp}.json")
    subprocess.run([ascendsim, "train", "--workload", "resnet18-cifar10", "--functional", "--strategy", "non-sink",
                    "--dataset", data, "--batch-size", "2", "--steps-per-epoch", "2", "--amp-level", amp,
                    "--init-from", os.path.join(work, "init.json"), "--dump-batches", os.path.join(work, amp),
                    "--dump-steps", "2", "--json", out, "-q"], check=True, stdout=subprocess.DEVNULL)
    return [l[2] for l in json.load(open(out))["runs"][0]["functional"]["losses"]]


fp32 = run("O0")
fp16 = run("O2")
meta = json.load(open(os.path.join(work, "O0", "batches.json")))
images = np.fromfile(os.path.join(work, "O0", "images.bin"), "<f4").reshape([2, *meta["image_shape"]])
labels = np.fromfile(os.path.join(work, "O0", "labels.bin"), "<i4").reshape(2, meta["batch_size"])

decayed = [p for n, p in net.named_parameters() if n.endswith("weight") and p.dim() > 1]
others = [p for n, p in net.named_parameters() if not (n.endswith("weight") and p.dim() > 1)]
opt = torch.optim.SGD([{"params": decayed, "weight_decay": 1e-4}, {"params": others, "weight_decay": 0}],
                      lr=0.1, momentum=0.9)
net.train()
reference = []
for s in range(2):
    opt.zero_grad()
    loss = torch.nn.functional.cross_entropy(net(torch.from_numpy(images[s])), torch.from_numpy(labels[s]).long(),
                                             label_smoothing=0.1)
    loss.backward()
    opt.step()
    reference.append(loss.item())
for s in range(2):
    rel = abs(fp32[s] - reference[s]) / abs(reference[s])
    assert rel <= 1e-3, f"step {s + 1}: fp32 loss {fp32[s]} vs PyTorch {reference[s]} (relative {rel:.2e})"
rel16 = [abs(a - b) / abs(b) for a, b in zip(fp16, reference)]
assert rel16[0] <= 1e-2, f"O2 first loss {fp16[0]} vs fp32 PyTorch {reference[0]}"
print(f"PyTorch {reference}, ascendsim fp32 {fp32} (relative {[abs(a - b) / b for a, b in zip(fp32, reference)]}), "
      f"O2 {fp16} (relative {rel16})")

# The evaluation network: BatchNorm by its moving statistics (random here, far from the batch's).
evaluated = ResNet18()
with torch.no_grad():
    for m in evaluated.modules():
        if isinstance(m, torch.nn.BatchNorm2d):
            m.running_mean.copy_(torch.randn(m.num_features) * 0.2)
            m.running_var.copy_(torch.rand(m.num_features) * 1.5 + 0.5)
write_net(evaluated, "eval")
out = os.path.join(work, "report_infer.json")
subprocess.run([ascendsim, "train", "--workload", "resnet18-cifar10", "--mode", "infer", "--functional", "--strategy",
                "non-sink", "--dataset", data, "--batch-size", "2", "--steps-per-epoch", "1", "--amp-level", "O0",
                "--init-from", os.path.join(work, "eval.json"), "--dump-batches", os.path.join(work, "infer"),
                "--dump-steps", "1", "--json", out, "-q"], check=True, stdout=subprocess.DEVNULL)
ours_loss = json.load(open(out))["runs"][0]["functional"]["losses"][0][2]
x = torch.from_numpy(np.fromfile(os.path.join(work, "infer", "images.bin"), "<f4").reshape(meta["image_shape"]))
y = torch.from_numpy(np.fromfile(os.path.join(work, "infer", "labels.bin"), "<i4")).long()
with torch.no_grad():
    evaluated.eval()
    eval_loss = torch.nn.functional.cross_entropy(evaluated(x), y, label_smoothing=0.1).item()
    evaluated.train()
    batch_loss = torch.nn.functional.cross_entropy(evaluated(x), y, label_smoothing=0.1).item()
rel = abs(ours_loss - eval_loss) / abs(eval_loss)
assert abs(batch_loss - eval_loss) / abs(eval_loss) > 1e-2, (batch_loss, eval_loss)  # the check can tell them apart
assert rel <= 1e-3, f"inference loss {ours_loss} vs PyTorch eval() {eval_loss} (batch statistics: {batch_loss})"
print(f"inference: ascendsim {ours_loss}, PyTorch eval() {eval_loss} (relative {rel:.2e}), batch statistics {batch_loss}")
