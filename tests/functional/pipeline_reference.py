"""The batches functional mode feeds LeNet-5 against the seed's pipeline recomputed here.

The seed's LeNet-5 script reads MNIST-format files and maps each image through Resize((32, 32),
bilinear) on its bytes (OpenCV's resize, which rounds to bytes), Rescale(1/255), Rescale(1/0.3081,
-0.1307/0.3081) and HWC2CHW, and the label through TypeCast(int32); the dataset is shuffled. This
recomputes every training image with PyTorch's bilinear interpolation (half-pixel centres, as
OpenCV's) straight from the idx files, finds each of ascendsim's dumped samples among them, and
checks the values, the labels and the shuffle.
Usage: pipeline_reference.py ASCENDSIM DATASET_DIR WORK_DIR [STEPS]
"""
import gzip
import os
import subprocess
import sys

import numpy as np
import torch

from torch_reference import read_batches

ascendsim, dataset, work = sys.argv[1:4]
steps = int(sys.argv[4]) if len(sys.argv) > 4 else 50
os.makedirs(work, exist_ok=True)


def idx(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        raw = f.read()
    dims = raw[3]
    shape = [int.from_bytes(raw[4 + 4 * i:8 + 4 * i], "big") for i in range(dims)]
    return np.frombuffer(raw, np.uint8, offset=4 + 4 * dims).reshape(shape)


def find(stem):
    for name in (stem, stem + ".gz"):
        if os.path.exists(os.path.join(dataset, name)):
            return os.path.join(dataset, name)
    raise SystemExit(f"{dataset}: no {stem}")


raw_images = idx(find("train-images-idx3-ubyte"))
raw_labels = idx(find("train-labels-idx1-ubyte"))
n = len(raw_images)

# Resize on bytes: bilinear with half-pixel centres, rounded to the nearest byte.
x = torch.from_numpy(raw_images.astype(np.float64))[:, None]
resized = torch.nn.functional.interpolate(x, size=(32, 32), mode="bilinear", align_corners=False)
resized = torch.clamp(torch.floor(resized + 0.5), 0, 255).to(torch.uint8).numpy()[:, 0]
# The two Rescales in float32, as MindSpore applies them.
reference = resized.astype(np.float32) * np.float32(1 / 255)
reference = reference * np.float32(1 / 0.3081) + np.float32(-0.1307 / 0.3081)

# One epoch under loop sink, its first `steps` steps (sink_size steps of the shuffled 60,000).
batches = os.path.join(work, "batches")
subprocess.run([ascendsim, "train", "--workload", "lenet5", "--functional", "--strategy", "loop-sink",
                "--sink-size", str(steps), "--epochs", "1", "--dataset", dataset, "--dump-batches", batches,
                "--dump-steps", str(steps), "-q"], check=True, stdout=subprocess.DEVNULL)
images, labels = read_batches(batches, steps)
assert images.shape[2:] == (1, 32, 32), images.shape  # CHW after HWC2CHW
images = images.reshape(-1, 32, 32)
labels = labels.reshape(-1)

# Each dumped image back to its bytes, then to the training sample with those bytes.
back = np.floor((images.astype(np.float64) * 0.3081 + 0.1307) * 255 + 0.5).astype(np.int64)
assert back.min() >= 0 and back.max() <= 255, (back.min(), back.max())
by_bytes = {}
for i in range(n):
    by_bytes.setdefault(resized[i].tobytes(), []).append(i)
found, worst = [], 0.0
for k in range(len(images)):
    candidates = by_bytes.get(back[k].astype(np.uint8).tobytes())
    assert candidates, f"sample {k} of the dump is no training image through the seed's pipeline"
    same_label = [i for i in candidates if raw_labels[i] == labels[k]]
    assert same_label, f"sample {k}: label {labels[k]}, the image's is {raw_labels[candidates[0]]}"
    i = same_label[0]
    found.append(i)
    worst = max(worst, float(np.abs(images[k] - reference[i]).max()))

assert worst <= 1e-5, f"values differ from the seed's pipeline by {worst}"
# A shuffle without repeats, drawn from the whole training split.
assert len(set(found)) == len(found), "a sample repeats within the epoch"
assert max(found) > n // 2 and min(found) < n // 2, (min(found), max(found))
order = np.argsort(found)
rank_corr = np.corrcoef(np.arange(len(found)), np.argsort(order))[0, 1]
assert abs(rank_corr) < 0.2, f"the samples come nearly in file order (rank correlation {rank_corr:.2f})"
print(f"{len(found)} samples found in the training split; values within {worst:.2e} of the seed's pipeline; "
      f"rank correlation with file order {rank_corr:+.3f}")
