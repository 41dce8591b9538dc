"""One torchvision classifier per family, exported for training and run by the CLI: `info` and
three loop-sink steps (tests/python/onnx_zoo.py; every model: scripts/onnx-zoo.sh)."""
import json
import os
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")
torchvision = pytest.importorskip("torchvision")
onnx = pytest.importorskip("onnx")

sys.path.insert(0, os.path.dirname(__file__))
import onnx_zoo  # noqa: E402 (after the skips)

BIN = os.environ.get("ASCENDSIM_BIN", "ascendsim")


@pytest.fixture(scope="module")
def outdir(tmp_path_factory):
    return str(tmp_path_factory.mktemp("zoo"))


_checked = {}


def checked(name, outdir):
    """onnx_zoo.check's result, once per model."""
    if name not in _checked:
        _checked[name] = onnx_zoo.check(BIN, name, outdir)
    return _checked[name]


@pytest.mark.parametrize("name", onnx_zoo.FAMILY_REPRESENTATIVES)
def test_a_torchvision_family_imports_and_trains(name, outdir):
    r = checked(name, outdir)
    assert r["status"] == "ok", r.get("message")
    info, run = r["info"], r["run"]
    model = torchvision.models.get_model(name, num_classes=10, **(
        {"aux_logits": False, "init_weights": False} if name in ("googlenet", "inception_v3") else {}))
    # The parameters are the network's own: PyTorch's count, BatchNorm's statistics apart.
    assert info["parameters"] == sum(p.numel() for p in model.parameters())
    assert info["batch_size"] == 2 and info["mode"] == "train"
    # Every convolution is on the Cube; a grouped one as its G GEMMs: its MACs are 1/G of the
    # dense convolution's of the same channels.
    assert info["forward_macs_per_sample"] > 0
    assert run["steps"] == 3 and run["step_time_ms"]["mean"] > 0


def test_grouped_convolutions_cost_their_groups_macs(outdir):
    """regnet_x_400mf's grouped convolutions (group width 16) count the MACs of their groups:
    the imported forward MACs equal those counted from the ONNX graph's own shapes."""
    r = checked("regnet_x_400mf", outdir)
    assert r["status"] == "ok", r.get("message")
    model = onnx.load(onnx_zoo.model_path(outdir, "regnet_x_400mf"))
    grouped = [n for n in model.graph.node if n.op_type == "Conv" and
               any(a.name == "group" and a.i > 1 for a in n.attribute)]
    assert len(grouped) >= 16
    ops = {op["name"]: op for op in r["info"]["ops"]}
    # Every forward convolution kernel, a UB-fused one (Conv2D with the consumers of its result) included.
    conv_macs = sum(op["macs"] for op in ops.values() if op["op"].startswith("conv2d/") and op["pass"] == "forward")
    # MACs by hand: every Conv of the graph, from the inferred shapes (batch 2).
    inferred = onnx.shape_inference.infer_shapes(model)
    shapes = {v.name: [d.dim_value for d in v.type.tensor_type.shape.dim] for v in inferred.graph.value_info}
    weights = {t.name: list(t.dims) for t in model.graph.initializer}
    expected = 0
    for n in model.graph.node:
        if n.op_type != "Conv":
            continue
        y, w = shapes[n.output[0]], weights[n.input[1]]
        expected += 2 * y[2] * y[3] * w[0] * w[1] * w[2] * w[3]
    assert conv_macs == expected


def test_a_vision_transformer_imports_and_trains(tmp_path):
    """torchvision's ViT (vit_b_16's layers, made small; scripts/onnx-zoo.sh exports vit_b_16 itself):
    its LayerNorm, GeLU (Erf), attention and class token import; its parameters are PyTorch's, and
    it trains."""
    torch.manual_seed(0)
    vit = torchvision.models.VisionTransformer(image_size=32, patch_size=16, num_layers=1, num_heads=2,
                                               hidden_dim=32, mlp_dim=64, num_classes=10)
    path = str(tmp_path / "vit.onnx")
    vit.train()
    torch.onnx.export(vit, torch.randn(2, 3, 32, 32), path, training=torch.onnx.TrainingMode.TRAINING,
                      do_constant_folding=False, opset_version=13, input_names=["image"],
                      dynamic_axes={"image": {0: "batch"}})
    report = tmp_path / "report.json"
    p = subprocess.run([BIN, "train", "--model", path, "--batch-size", "2", "--sink-size", "3", "--json",
                        str(report)], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    info = json.loads(subprocess.run([BIN, "info", "--model", path, "--batch-size", "2", "--json", "-"],
                                     capture_output=True, text=True, check=True).stdout)
    assert info["parameters"] == sum(q.numel() for q in vit.parameters())
    types = {op["name"].rsplit("/", 1)[-1] for op in info["ops"]}
    assert {"Erf", "BatchMatMul", "Softmax"} <= types
    assert json.loads(report.read_text())["runs"][0]["steps"] == 3
