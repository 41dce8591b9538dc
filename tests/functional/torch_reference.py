"""What the PyTorch comparisons share: the seed's LeNet-5, ascendsim's weights files (--init-from,
--save-weights), the batches it dumps with --dump-batches, and MindSpore's Momentum (SGD with
momentum, no dampening) over them."""
import json
import os

import numpy as np
import torch


class LeNet5(torch.nn.Module):
    """The seed's LeNet-5: convolutions without bias, dense layers with bias."""

    def __init__(self):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(1, 6, 5, bias=False)
        self.conv2 = torch.nn.Conv2d(6, 16, 5, bias=False)
        self.fc1 = torch.nn.Linear(400, 120)
        self.fc2 = torch.nn.Linear(120, 84)
        self.fc3 = torch.nn.Linear(84, 10)

    def forward(self, x):
        x = torch.max_pool2d(torch.relu(self.conv1(x)), 2)
        x = torch.max_pool2d(torch.relu(self.conv2(x)), 2)
        x = x.view(x.size(0), -1)  # exported as Shape, Gather, Unsqueeze, Concat, Reshape
        return self.fc3(torch.relu(self.fc2(torch.relu(self.fc1(x)))))


def read_batches(directory, steps):
    """The first `steps` batches of a --dump-batches directory: images [steps, N, C, H, W] (or token ids
    [steps, N, S], as floats), labels."""
    meta = json.load(open(os.path.join(directory, "batches.json")))
    assert meta["batches"] == steps, meta
    images = np.fromfile(os.path.join(directory, "images.bin"), "<f4").reshape([steps, *meta["image_shape"]])
    label_shape = meta.get("label_shape", [meta["batch_size"]])  # [N], or [N, S] for a language model
    labels = np.fromfile(os.path.join(directory, "labels.bin"), "<i4").reshape([steps, *label_shape])
    return images, labels


def momentum_losses(net, images, labels, lr=0.01, momentum=0.9):
    """Trains `net` on the batches with cross entropy and Momentum; the loss of each step."""
    opt = torch.optim.SGD(net.parameters(), lr=lr, momentum=momentum)
    losses = []
    for x, y in zip(images, labels):
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(net(torch.from_numpy(x)), torch.from_numpy(y).long())
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


def write_weights(path, tensors):
    """`tensors` (name -> array) as the weights file PATH.json with its data PATH.bin."""
    offset, entries = 0, []
    with open(path + ".bin", "wb") as f:
        for name, a in tensors.items():
            f.write(a.astype("<f4").tobytes())
            entries.append({"name": name, "shape": list(a.shape), "dtype": "float32", "offset": offset})
            offset += a.size * 4
    with open(path + ".json", "w") as f:
        json.dump({"format": "ascendsim-weights", "version": 1, "data": os.path.basename(path) + ".bin",
                   "tensors": entries}, f)


def read_weights(index):
    """A weights file's tensors, name -> float32 array."""
    meta = json.load(open(index))
    raw = open(os.path.join(os.path.dirname(index), meta["data"]), "rb").read()
    return {t["name"]: np.frombuffer(raw, "<f4", int(np.prod(t["shape"])), t["offset"]).reshape(t["shape"])
            for t in meta["tensors"]}
