"""torchvision's classification models exported for training and imported by ascendsim.

Each model is exported with torch.onnx.export (TrainingMode.TRAINING, opset 13, a symbolic
batch) at the smallest input its architecture takes, then run by the CLI: `info` and three
loop-sink training steps. Used by tests/python/test_onnx_zoo.py (one model per family, in CI)
and by scripts/onnx-zoo.sh (every model, a slow check).

    python3 tests/python/onnx_zoo.py BIN OUTDIR [--budget SECONDS] [--all | MODEL...]

With --budget, no model is started once that many seconds have passed; the rest are listed as
not run.
"""
import collections
import json
import os
import shutil
import subprocess
import sys
import time
import warnings

import torch
import torchvision

# The input side each architecture takes: 64 where the network pools adaptively; 224 where a layer
# is sized for it (ViT's position embedding, VGG's and AlexNet's 7x7 and 6x6 adaptive pools, which
# torch exports only for a factor of the input), the windowed transformers' 224.
SIZE = {
    "alexnet": 224, "vgg": 224, "vit": 224, "swin": 224, "maxvit": 224, "inception": 299,
}
# One model per family: the CI check (tests/python/test_onnx_zoo.py). ViT's is a small ViT of
# vit_b_16's layers in test_onnx_zoo.py (vit_b_16 itself takes two minutes).
FAMILY_REPRESENTATIVES = [
    "resnet18", "resnext50_32x4d", "regnet_x_400mf", "regnet_y_400mf", "shufflenet_v2_x0_5", "mobilenet_v2",
    "mobilenet_v3_small", "mnasnet0_5", "efficientnet_b0", "densenet121", "squeezenet1_1", "googlenet",
    "inception_v3", "convnext_tiny",
]
# Refused, every blocker named: Swin's window masks (Mod, Not, ScatterND) and MaxViT's Einsum; Swin V2
# is not exported by torch. ConvNeXt and ViT import since the transformers' operators (LayerNorm,
# GELU's Erf, attention's batched MatMul).
EXPECTED_REFUSED = {"swin_t", "swin_s", "swin_b", "swin_v2_t", "swin_v2_s", "swin_v2_b", "maxvit_t"}


def family(name):
    for prefix in ("resnext", "wide_resnet", "resnet", "regnet_x", "regnet_y", "shufflenet", "mobilenet_v2",
                   "mobilenet_v3", "mnasnet", "efficientnet_v2", "efficientnet", "densenet", "squeezenet",
                   "googlenet", "inception", "convnext", "alexnet", "vgg", "vit", "swin", "maxvit"):
        if name.startswith(prefix):
            return prefix
    return name


def input_size(name):
    return SIZE.get(family(name).split("_")[0], 64)


def parameters(name):
    """The model's parameter count at 1000 classes, from torchvision's weights metadata (nothing
    downloaded)."""
    return torchvision.models.get_model_weights(name).DEFAULT.meta["num_params"]


def all_models():
    """Every classification model of torchvision.models, smallest first."""
    return sorted(torchvision.models.list_models(module=torchvision.models), key=lambda n: (parameters(n), n))


def build(name, **kwargs):
    torch.manual_seed(0)
    if name in ("googlenet", "inception_v3"):  # no auxiliary heads: one output, the logits
        kwargs.update(aux_logits=False, init_weights=False)
    return torchvision.models.get_model(name, num_classes=10, **kwargs)


def export(name, path):
    """Exports `name` for training to `path`; returns what had to change for torch to export it
    (None: nothing), or raises what torch refused."""
    size = input_size(name)

    def run(model):
        model.train()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            torch.onnx.export(model, torch.randn(2, 3, size, size), path, training=torch.onnx.TrainingMode.TRAINING,
                              do_constant_folding=False, opset_version=13, input_names=["image"],
                              output_names=["logits"], dynamic_axes={"image": {0: "batch"}, "logits": {0: "batch"}})

    try:
        run(build(name))
        return None
    except Exception as e:  # torch's exporter refuses StochasticDepth's Bernoulli in training mode
        if "Bernoulli" not in str(e) and "bernoulli" not in str(e):
            raise
        model = build(name)
        for m in model.modules():  # the identity: every block kept
            if isinstance(m, torchvision.ops.StochasticDepth):
                m.p = 0.0
        run(model)
        return "stochastic depth off: torch does not export its Bernoulli in training mode"


def check(binary, name, outdir, steps=3):
    """Exports and runs one model; returns a dict: name, family, size, status ('ok', 'refused' by
    ascendsim, 'export' refused by torch), the exporter's change, ascendsim's message, figures."""
    os.makedirs(os.path.join(outdir, name), exist_ok=True)
    path = model_path(outdir, name)
    r = {"model": name, "family": family(name), "size": input_size(name), "note": None}
    t = time.time()
    try:
        r["note"] = export(name, path)
    except Exception as e:
        r.update(status="export", message=str(e).splitlines()[0][:300], seconds=round(time.time() - t, 1))
        return r
    import onnx  # noqa: E402 (only once something exported)
    nodes = onnx.load(path, load_external_data=False).graph.node
    r["onnx_ops"] = dict(collections.Counter(n.op_type for n in nodes))
    info = subprocess.run([binary, "info", "--model", path, "--batch-size", "2", "--json", "-"], capture_output=True,
                          text=True)
    if info.returncode != 0:
        r.update(status="refused", exit=info.returncode, message=info.stderr.strip(), seconds=round(time.time() - t, 1))
        return r
    report = os.path.join(outdir, name + ".json")  # kept when the model's folder is removed
    train = subprocess.run([binary, "train", "--model", path, "--batch-size", "2", "--strategy", "loop-sink",
                            "--sink-size", str(steps), "--epochs", "1", "--steps-per-epoch", str(steps), "--json",
                            report, "-q"], capture_output=True, text=True)
    if train.returncode != 0:
        r.update(status="train failed", exit=train.returncode, message=train.stderr.strip(),
                 seconds=round(time.time() - t, 1))
        return r
    r.update(status="ok", info=json.loads(info.stdout), run=json.load(open(report))["runs"][0],
             seconds=round(time.time() - t, 1))
    return r


def model_path(outdir, name):
    """Where check() exports `name` (a folder of its own: torch writes a model over 2 GB as
    external data beside it)."""
    return os.path.join(outdir, name, name + ".onnx")


def main(argv):
    binary, outdir, names = argv[0], argv[1], argv[2:]
    budget = None
    if names[:1] == ["--budget"]:
        budget, names = float(names[1]), names[2:]
    whole = names == ["--all"]
    if whole:
        names = all_models()
    os.makedirs(outdir, exist_ok=True)
    results = []
    start = time.time()
    for name in names:
        if budget is not None and time.time() - start > budget:
            r = {"model": name, "family": family(name), "size": input_size(name), "status": "not run", "seconds": 0,
                 "message": f"the {budget:.0f} s budget was spent"}
        else:
            r = check(binary, name, outdir)
        results.append(r)
        if whole:  # the files are large: only the reports are kept
            shutil.rmtree(os.path.join(outdir, name), ignore_errors=True)
        line = f"{name:22} {r['family']:16} {r['size']:4}px {r['status']:8} {r['seconds']:6.1f}s"
        if r["status"] == "ok":
            line += f"  {r['info']['ops_per_step']} ops, {r['info']['parameters']} parameters"
        if r.get("note"):
            line += f"  ({r['note']})"
        print(line, flush=True)
        if r["status"] != "ok":
            print("    " + r["message"].replace("\n", "\n    "), flush=True)
        with open(os.path.join(outdir, "summary.json"), "w") as f:
            json.dump([{k: v for k, v in x.items() if k not in ("info", "run")} for x in results], f, indent=1)
    counts = collections.Counter(r["status"] for r in results)
    print(", ".join(f"{v} {k}" for k, v in sorted(counts.items())))
    unexpected = [r["model"] for r in results if r["status"] not in ("ok", "not run") and
                  not (r["status"] == "refused" and r["model"] in EXPECTED_REFUSED)]
    return 1 if unexpected else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
