"""ONNX models (--model): torchvision's networks and a LeNet-5 exported with torch.onnx.export at
test time (Debian python3-torch, python3-torchvision), against the built-in workloads."""
import json
import math
import os
import subprocess
import sys
import warnings

import pytest

import ascendsim

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "functional"))

torch = pytest.importorskip("torch")
torchvision = pytest.importorskip("torchvision")

from torch_reference import LeNet5, momentum_losses, read_batches  # noqa: E402 (after the skips)

BIN = os.environ.get("ASCENDSIM_BIN", "ascendsim")


class EveryOp(torch.nn.Module):
    """One network through every operator the importer documents, on MNIST-shaped input."""

    def __init__(self, dropout=0.2):
        super().__init__()
        self.conv = torch.nn.Conv2d(1, 8, 3, padding=1)
        self.bn = torch.nn.BatchNorm2d(8)
        self.dw = torch.nn.Conv2d(8, 8, 3, padding=1, groups=8, bias=False)
        self.up = torch.nn.ConvTranspose2d(8, 4, 2, stride=2)
        self.se = torch.nn.Linear(4, 4)
        self.w = torch.nn.Parameter(torch.randn(16, 10) * 0.1)
        self.fc = torch.nn.Linear(8 * 8 * 8, 16)
        self.drop = torch.nn.Dropout(dropout)

    def forward(self, x):                                                         # [N, 1, 32, 32]
        x = torch.nn.functional.relu6(self.bn(self.conv(x)))                      # Conv, BN, Clip(0, 6)
        x = torch.nn.functional.hardswish(self.dw(x))                             # depthwise Conv, HardSwish
        x = torch.max_pool2d(x, 2)                                                # MaxPool: 16x16
        x = self.up(x)                                                            # ConvTranspose: 32x32
        s = torch.nn.functional.adaptive_avg_pool2d(x, 1).flatten(1)              # GlobalAveragePool, Flatten
        s = torch.sigmoid(self.se(s)).unsqueeze(2).unsqueeze(3)                   # Gemm, Sigmoid, Unsqueeze
        x = x * s                                                                 # Mul (broadcast)
        y = torch.nn.functional.hardsigmoid(x) - x.mean(dim=(2, 3), keepdim=True)  # HardSigmoid, ReduceMean, Sub
        x = torch.cat([x, y.transpose(2, 3)], dim=1) / 2.0                        # Transpose, Concat, Div
        x = torch.nn.functional.avg_pool2d(torch.clamp(x, -1.0, 1.0), 4)          # Clip, AveragePool: 8x8
        x = x.reshape(x.size(0), -1)                                              # Reshape
        x = self.drop(torch.relu(self.fc(x)))                                     # Gemm, Relu, Dropout
        x = torch.matmul(x, self.w).unsqueeze(1).squeeze(1)                       # MatMul, Squeeze
        return torch.softmax(x, dim=-1) + x                                       # Softmax, Add


def export(model, shape, path, opset=13, example=None):
    """`model` exported for training with a symbolic batch, from an example input: `example`, or a
    random one of `shape`."""
    model.train()
    with warnings.catch_warnings():  # the exporter's notes on BatchNorm's step counter, not ours
        warnings.simplefilter("ignore")
        torch.onnx.export(model, (torch.randn(*shape) if example is None else example,), str(path),
                          training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False, opset_version=opset,
                          input_names=["image"], output_names=["logits"],
                          dynamic_axes={"image": {0: "batch"}, "logits": {0: "batch"}})
    return str(path)


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    d = tmp_path_factory.mktemp("onnx")
    torch.manual_seed(0)
    nets = {
        "lenet5": (LeNet5(), (1, 1, 32, 32)),
        "resnet18": (torchvision.models.resnet18(), (1, 3, 224, 224)),
        "resnet50": (torchvision.models.resnet50(), (1, 3, 224, 224)),
        "mobilenetv2": (torchvision.models.mobilenet_v2(), (1, 3, 224, 224)),
    }
    out = {name: export(net, shape, d / f"{name}.onnx") for name, (net, shape) in nets.items()}
    out["torch_parameters"] = {name: sum(p.numel() for p in net.parameters()) for name, (net, _) in nets.items()}
    out["lenet5_net"] = nets["lenet5"][0]
    out["every_op"] = export(EveryOp(), (1, 1, 32, 32), d / "every_op.onnx", opset=14)
    out["dir"] = d
    return out


def test_imported_networks_count_the_builtins_parameters_and_macs(models):
    for name in ("lenet5", "resnet18", "resnet50", "mobilenetv2"):
        imported = ascendsim.info(model=models[name], batch_size=32)
        builtin = ascendsim.info(name, batch_size=32, amp_level="O0")
        assert imported["parameters"] == builtin["parameters"] == models["torch_parameters"][name], name
        assert imported["forward_macs_per_sample"] == builtin["forward_macs_per_sample"], name
        assert imported["batch_size"] == 32
        # The same network in the same precision: the same device work, up to the loss head and
        # optimizer (the built-ins' label smoothing and learning-rate schedule).
        assert imported["device_compute_per_step_s"] == pytest.approx(builtin["device_compute_per_step_s"], rel=0.01)
        assert f"{models['torch_parameters'][name]} parameters" in imported["description"]


def test_an_imported_resnet50_step_costs_what_the_builtin_step_costs(models):
    builtin = ascendsim.train("resnet50", "loop-sink", batch_size=32, steps_per_epoch=20)
    imported = ascendsim.train(strategy="loop-sink", model=models["resnet50"], batch_size=32, steps_per_epoch=20,
                               amp_level="O2", keep_batchnorm_fp32=False, loss_scale=1024)
    assert imported["recipe"] == builtin["recipe"]
    b, i = builtin.runs[0]["step_time_ms"]["mean"], imported.runs[0]["step_time_ms"]["mean"]
    assert abs(i - b) / b < 0.02, (i, b)
    # The executed graphs hold the same ops but for the loss head (sparse cross entropy against the
    # built-in's label-smoothed one-hot) and the built-in's learning-rate schedule.
    ib = ascendsim.info("resnet50", batch_size=32)
    ii = json.loads(subprocess.run([BIN, "info", "--model", models["resnet50"], "--batch-size", "32", "--amp-level",
                                    "O2", "--keep-batchnorm-fp32", "false", "--loss-scale", "1024", "--json", "-"],
                                   check=True, capture_output=True, text=True).stdout)
    assert abs(ib["ops_per_step"] - ii["ops_per_step"]) <= 8
    assert ii["device_compute_per_step_s"] == pytest.approx(ib["device_compute_per_step_s"], rel=0.005)


def test_compare_sweep_and_suite_take_a_model(models, tmp_path):
    r = ascendsim.compare(model=models["resnet50"], batch_size=32, steps_per_epoch=10)
    assert [run["strategy"] for run in r.runs] == list(ascendsim.STRATEGIES)
    assert r["workload"] == "resnet50.onnx" and r["batch_size"] == 32
    out = subprocess.run([BIN, "sweep", "--model", models["lenet5"], "--param", "batch_size", "--values", "16,64",
                          "--steps-per-epoch", "10", "--json", "-", "-q"], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    rows = json.loads(out.stdout)["rows"]
    assert sorted({row["value"] for row in rows}) == [16, 64] and len(rows) == 8
    # LeNet-5's steps are bound by the host, not the batch: four times the batch, more samples/s.
    rate = {(row["value"], row["strategy"]): row["samples_per_s"] for row in rows}
    assert all(rate[(64, s)] > 2 * rate[(16, s)] for s in ascendsim.STRATEGIES)
    suite = tmp_path / "suite.yaml"
    suite.write_text(f"runs:\n  - name: infer\n    model: {models['mobilenetv2']}\n    mode: infer\n"
                     "    batch_size: 16\n    strategies: [loop-sink]\n    steps_per_epoch: 5\n")
    subprocess.run([BIN, "suite", str(suite), "--out", str(tmp_path / "out"), "-q"], check=True, capture_output=True)
    report = json.loads((tmp_path / "out" / "infer.json").read_text())
    assert report["workload"] == "mobilenetv2.onnx" and report["batch_size"] == 16
    assert report["runs"][0]["steps"] == 5


def test_an_inference_run_has_no_backward_ops(models):
    train = ascendsim.info(model=models["mobilenetv2"], batch_size=32)
    infer = ascendsim.info(model=models["mobilenetv2"], batch_size=32, mode="infer")
    assert infer["mode"] == "infer" and train["mode"] == "train"
    assert {op["pass"] for op in train["ops"]} == {"forward", "backward", "optimizer"}
    assert {op["pass"] for op in infer["ops"]} == {"forward"}
    assert not [op for op in infer["ops"] if "Grad" in op["name"] or "Momentum" in op["name"]]
    assert infer["optimizer"] == "none (inference)"
    assert infer["parameters"] == train["parameters"]
    r = ascendsim.train(strategy="loop-sink", model=models["mobilenetv2"], mode="infer", batch_size=32,
                        steps_per_epoch=20)
    run = r.runs[0]
    assert r["mode"] == "infer"
    assert run["steps"] == 20 and run["interactions"]["graph_launches"] == 1
    # The forward pass alone: shorter than a training step of the same network.
    t = ascendsim.train(strategy="loop-sink", model=models["mobilenetv2"], batch_size=32, steps_per_epoch=20)
    assert t["mode"] == "train"
    assert run["step_trace_ms"]["fp_bp"]["mean"] < 0.5 * t.runs[0]["step_trace_ms"]["fp_bp"]["mean"]
    assert run["step_trace_ms"]["fp_bp"]["mean"] > 0


def reference_macs(net, shape):
    """A network's multiply-accumulates per sample from PyTorch's own modules: each convolution's
    output elements times its kernel's inputs per group, and each linear layer's weight."""
    macs = []

    def hook(m, _, y):
        if isinstance(m, torch.nn.Conv2d):
            macs.append(y[0].numel() * m.in_channels // m.groups * m.kernel_size[0] * m.kernel_size[1])
        else:
            macs.append(m.in_features * m.out_features)

    hooks = [m.register_forward_hook(hook) for m in net.modules() if isinstance(m, (torch.nn.Conv2d, torch.nn.Linear))]
    with torch.no_grad():
        net(torch.randn(1, *shape[1:]))
    for h in hooks:
        h.remove()
    return sum(macs), len(hooks)


def test_an_eval_mode_export_imports_and_infers(tmp_path):
    """PyTorch's default export of an eval-mode network: each BatchNorm folded into its
    convolution's bias, and initializers of equal values (a fresh network's zero biases) written
    once and read through Identity nodes. Every convolution keeps its bias; the MACs are the
    network's."""
    onnx = pytest.importorskip("onnx")
    torch.manual_seed(0)
    net = torchvision.models.mobilenet_v2().eval()
    shape = (8, 3, 224, 224)
    path = tmp_path / "mobilenet_v2_eval.onnx"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(net, torch.randn(*shape), str(path), opset_version=13)
    graph = onnx.load(str(path)).graph
    convs = [n for n in graph.node if n.op_type == "Conv"]
    identities = {n.output[0] for n in graph.node if n.op_type == "Identity"}
    assert not [n for n in graph.node if n.op_type == "BatchNormalization"]
    assert all(len(n.input) == 3 for n in convs)
    assert any(n.input[2] in identities for n in convs)  # the case this covers: a bias behind an Identity
    macs, layers = reference_macs(net, shape)
    assert layers == len(convs) + 1  # the convolutions and the classifier

    info = ascendsim.info(model=str(path), mode="infer", ub_fusion=False)
    assert info["batch_size"] == shape[0]  # the export's fixed batch
    # Within 0.1% of PyTorch's modules' count (the import counts the same products: equal today).
    assert info["forward_macs_per_sample"] == pytest.approx(macs, rel=1e-3)
    names = [op["name"] for op in info["ops"]]
    assert len([n for n in names if n.endswith("/Conv2D") or n.endswith("/DepthwiseConv2dNative")]) == len(convs)
    assert len([n for n in names if n.endswith("/BiasAdd")]) == len(convs) + 1  # and the classifier's
    # The parameters are the file's initializers, a shared one once.
    assert info["parameters"] == sum(math.prod(t.dims) for t in graph.initializer)

    r = ascendsim.train(strategy="loop-sink", model=str(path), mode="infer", steps_per_epoch=2)
    assert r["mode"] == "infer"
    assert r.runs[0]["steps"] == 2 and r.runs[0]["step_trace_ms"]["fp_bp"]["mean"] > 0
    # PyTorch's training export of the same network: the same MACs (BatchNorm is not a product).
    trained = export(torchvision.models.mobilenet_v2(), (1, 3, 224, 224), tmp_path / "mobilenet_v2_train.onnx")
    assert ascendsim.info(model=trained, batch_size=8)["forward_macs_per_sample"] == info["forward_macs_per_sample"]


def test_every_documented_operator_imports_trains_and_infers(models):
    onnx = pytest.importorskip("onnx")
    exported = {n.op_type for n in onnx.load(models["every_op"]).graph.node}
    for op in ("Conv", "ConvTranspose", "Gemm", "MatMul", "Relu", "Clip", "Sigmoid", "HardSigmoid", "HardSwish",
               "MaxPool", "AveragePool", "GlobalAveragePool", "BatchNormalization", "Add", "Mul", "Sub", "Div",
               "Concat", "Flatten", "Reshape", "Transpose", "Squeeze", "Unsqueeze", "Dropout", "Softmax",
               "ReduceMean"):
        assert op in exported, op
    train = ascendsim.info(model=models["every_op"], batch_size=8)
    types = {op["name"].rsplit("/", 1)[-1] for op in train["ops"]}
    for t in ("Conv2D", "DepthwiseConv2dNative", "Conv2DTranspose", "HSwish", "HSwishGrad", "HSigmoid",
              "Sigmoid", "SigmoidGrad", "ReLU6", "ClipByValue", "AvgPool", "AvgPoolGrad", "Concat", "Transpose",
              "Softmax", "SoftmaxGrad", "RealDiv", "Sub", "Dropout", "DropoutGrad", "ReduceSum"):
        assert t in types, t
    infer = ascendsim.info(model=models["every_op"], batch_size=8, mode="infer")
    names = {op["name"].rsplit("/", 1)[-1] for op in infer["ops"]}
    assert "Dropout" not in names and "HSwish" in names  # Dropout is the identity in inference
    r = ascendsim.train(strategy="data-sink", model=models["every_op"], batch_size=8, steps_per_epoch=5)
    assert r.runs[0]["steps"] == 5


def test_an_unsupported_operator_is_refused_and_nothing_is_written(models, tmp_path):
    onnx = pytest.importorskip("onnx")
    h = onnx.helper
    graph = h.make_graph(
        [h.make_node("Relu", ["boxes"], ["r"], name="relu"),
         h.make_node("NonMaxSuppression", ["r", "scores"], ["keep"], name="nms"),
         h.make_node("Relu", ["keep"], ["out"], name="after")],
        "detector",
        [h.make_tensor_value_info("boxes", onnx.TensorProto.FLOAT, [1, 3, 8, 8]),
         h.make_tensor_value_info("scores", onnx.TensorProto.FLOAT, [1, 1, 3, 8])],
        [h.make_tensor_value_info("out", onnx.TensorProto.INT64, [None, 3])])
    path = tmp_path / "detector.onnx"
    onnx.save(h.make_model(graph), str(path))
    report = tmp_path / "report.json"
    p = subprocess.run([BIN, "compare", "--model", str(path), "--json", str(report)], capture_output=True, text=True)
    assert p.returncode != 0
    assert "detector.onnx: 1 operator type not supported, nothing simulated" in p.stderr
    assert "NonMaxSuppression (first at node 'nms')" in p.stderr
    assert not report.exists()
    with pytest.raises(ascendsim.InputError, match="NonMaxSuppression"):
        ascendsim.info(model=str(path))
    # Not ONNX at all, and a model that is not there.
    bad = tmp_path / "not.onnx"
    bad.write_text("this is not a protobuf")
    p = subprocess.run([BIN, "info", "--model", str(bad)], capture_output=True, text=True)
    assert p.returncode != 0 and "not an ONNX model" in p.stderr
    p = subprocess.run([BIN, "info", "--model", str(tmp_path / "missing.onnx")], capture_output=True, text=True)
    assert p.returncode != 0 and "cannot open the model file" in p.stderr


@pytest.mark.parametrize("case", ["batch 0", "batch -2", "height 0", "string", "bool", "overflow"])
def test_an_input_the_model_cannot_simulate_is_refused_and_nothing_is_written(case, tmp_path):
    """A fixed dimension of 0 or less, an element type no input holds, a shape whose element (and
    byte) count overflows: refused on one line naming the file, the input and the value, exit 2."""
    onnx = pytest.importorskip("onnx")
    h = onnx.helper
    big = 2 ** 31
    elem, dims, value = {
        "batch 0": (onnx.TensorProto.FLOAT, [0, 3, 8, 8], "has a fixed dimension of 0 at axis 0 (the batch)"),
        "batch -2": (onnx.TensorProto.FLOAT, [-2, 3, 8, 8], "has a fixed dimension of -2 at axis 0 (the batch)"),
        "height 0": (onnx.TensorProto.FLOAT, [2, 3, 0, 8], "has a fixed dimension of 0 at axis 2"),
        "string": (onnx.TensorProto.STRING, [2, 3, 8, 8], "holds STRING elements"),
        "bool": (onnx.TensorProto.BOOL, [2, 3, 8, 8], "holds BOOL elements"),
        "overflow": (onnx.TensorProto.FLOAT, [big, big, big, big], f"is [{big},{big},{big},{big}], more than 2^40"),
    }[case]
    weight = h.make_tensor("w", onnx.TensorProto.FLOAT, [4, 3, 3, 3], [0.0] * 108)
    graph = h.make_graph(
        [h.make_node("Conv", ["pixels", "w"], ["c"], name="conv"),
         h.make_node("GlobalAveragePool", ["c"], ["p"], name="pool"),
         h.make_node("Flatten", ["p"], ["logits"], name="flatten")],
        "net", [h.make_tensor_value_info("pixels", elem, dims)],
        [h.make_tensor_value_info("logits", onnx.TensorProto.FLOAT, None)], [weight])
    path = tmp_path / "odd.onnx"
    onnx.save(h.make_model(graph), str(path))
    report = tmp_path / "report.json"
    for args in (["train", "--strategy", "loop-sink", "--steps-per-epoch", "2"], ["info"],
                 ["train", "--strategy", "loop-sink", "--batch-size", "4"]):
        p = subprocess.run([BIN, *args, "--model", str(path), "--json", str(report)], capture_output=True, text=True)
        assert p.returncode == 2, (args, p.stderr)
        lines = p.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: "), p.stderr
        assert f"odd.onnx: input 'pixels' {value}" in lines[0], lines[0]
        assert "export the model" in lines[0]  # what to do
        assert not report.exists() and p.stdout == ""


def functional_losses_against_torch(net, model, tmp_path, steps):
    """ascendsim's functional losses for `model` (exported from `net`) on Fashion-MNIST, and
    PyTorch's for `net` from the same weights on the same batches (ascendsim's, dumped)."""
    import copy

    dataset = "/usr/share/datasets/fashion-mnist"
    if not os.path.isdir(dataset):
        pytest.skip("dataset-fashion-mnist is not installed")
    report = tmp_path / "report.json"
    subprocess.run([BIN, "train", "--model", model, "--batch-size", "32", "--functional", "--strategy",
                    "non-sink", "--dataset", dataset, "--steps-per-epoch", str(steps), "--dump-batches",
                    str(tmp_path / "batches"), "--dump-steps", str(steps), "--json", str(report), "-q"],
                   check=True, stdout=subprocess.DEVNULL)
    losses = [l[2] for l in json.loads(report.read_text())["runs"][0]["functional"]["losses"]]
    net = copy.deepcopy(net)
    net.train()
    images, labels = read_batches(tmp_path / "batches", steps)
    return losses, momentum_losses(net, images, labels)


def test_functional_mode_trains_an_imported_network_from_its_own_weights(models, tmp_path):
    """The file's initializers are the initial weights: ascendsim's losses on its own batches equal
    PyTorch's for the same network from the same weights."""
    steps = 20
    losses, reference = functional_losses_against_torch(models["lenet5_net"], models["lenet5"], tmp_path, steps)
    assert len(losses) == steps
    for s, (ours, theirs) in enumerate(zip(losses, reference)):
        assert abs(ours - theirs) <= 1e-4 * abs(theirs), (s, ours, theirs)
    assert reference[-1] < reference[0]


def test_functional_mode_agrees_with_pytorch_through_every_new_kernel(tmp_path):
    torch.manual_seed(3)
    net = EveryOp(dropout=0.0)  # no Dropout: its draws are not PyTorch's
    model = export(net, (1, 1, 32, 32), tmp_path / "every_kernel.onnx", opset=14)
    steps = 8
    losses, reference = functional_losses_against_torch(net, model, tmp_path, steps)
    for s, (ours, theirs) in enumerate(zip(losses, reference)):
        assert abs(ours - theirs) <= 1e-4 * abs(theirs), (s, ours, theirs)


class GroupsAndChunks(torch.nn.Module):
    """The operators torchvision's RegNet, ShuffleNet, GoogLeNet and Inception added: a grouped
    convolution, chunk (Split or Slice of an activation), channel shuffle, a ceil_mode max pool, an
    average pool whose padding counts (a Pad before it), Inception's 1x7 and 7x1 convolutions that
    pad one axis only (dense and depthwise)."""

    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(1, 8, 3, padding=1)
        self.grouped = torch.nn.Conv2d(8, 12, 3, padding=1, groups=4)
        self.row = torch.nn.Conv2d(12, 12, (1, 7), padding=(0, 3), bias=False)
        self.column = torch.nn.Conv2d(12, 12, (5, 1), padding=(2, 0), groups=12, bias=False)
        self.fc = torch.nn.Linear(10 * 16 * 16, 10)

    def forward(self, x):                                                    # [N, 1, 32, 32]
        x = torch.relu(self.grouped(torch.relu(self.conv(x))))               # Conv group 4: [N, 12, 32, 32]
        x = torch.relu(self.column(self.row(x)))                             # pads [0,3,0,3], [2,0,2,0]
        a, b = x.chunk(2, dim=1)                                             # two halves of 6 channels
        x = torch.cat([torch.sigmoid(b), a[:, 1:5]], dim=1)                  # a slice of 4 of them
        x = torch.nn.functional.max_pool2d(x, 3, 2, ceil_mode=True)          # 32 -> 16 (floor: 15)
        x = torch.nn.functional.avg_pool2d(x, 3, 1, padding=1)               # Pad, AveragePool (Inception)
        return self.fc(x.flatten(1))


def test_functional_mode_agrees_with_pytorch_through_groups_and_slices(tmp_path):
    """The grouped convolution's, the slices' and the ceil_mode pool's kernels and gradients:
    8 steps' losses equal PyTorch's from the same weights on the same batches."""
    torch.manual_seed(4)
    net = GroupsAndChunks()
    model = export(net, (1, 1, 32, 32), tmp_path / "groups.onnx", opset=13)
    onnx = pytest.importorskip("onnx")
    g = onnx.load(model).graph
    assert any(n.op_type == "Conv" and any(a.name == "group" and a.i == 4 for a in n.attribute) for n in g.node)
    assert {"Split", "Slice"} & {n.op_type for n in g.node} and "Pad" in {n.op_type for n in g.node}
    pads = [list(a.ints) for n in g.node if n.op_type == "Conv" for a in n.attribute if a.name == "pads"]
    assert [0, 3, 0, 3] in pads and [2, 0, 2, 0] in pads
    steps = 8
    losses, reference = functional_losses_against_torch(net, model, tmp_path, steps)
    assert len(losses) == steps
    for s, (ours, theirs) in enumerate(zip(losses, reference)):
        assert abs(ours - theirs) <= 1e-4 * abs(theirs), (s, ours, theirs)


class GPT2Block(torch.nn.Module):
    """Token and position embeddings, one GPT-2 block (causal attention by a masked_fill of a tril
    buffer, GeLU), the final LayerNorm and the head tied to the token table."""

    def __init__(self, vocab=128, seq=16, hidden=64, heads=4, gelu="tanh"):
        super().__init__()
        self.wte, self.wpe = torch.nn.Embedding(vocab, hidden), torch.nn.Embedding(seq, hidden)
        self.ln1, self.ln2, self.lnf = (torch.nn.LayerNorm(hidden) for _ in range(3))
        self.qkv, self.proj = torch.nn.Linear(hidden, 3 * hidden), torch.nn.Linear(hidden, hidden)
        self.fc, self.fc2 = torch.nn.Linear(hidden, 4 * hidden), torch.nn.Linear(4 * hidden, hidden)
        self.heads, self.gelu = heads, gelu
        self.register_buffer("mask", torch.tril(torch.ones(seq, seq)).view(1, 1, seq, seq))

    def forward(self, ids):
        n, s = ids.shape
        x = self.wte(ids) + self.wpe(torch.arange(s))                           # Gather x2
        q, k, v = self.qkv(self.ln1(x)).split(x.size(-1), dim=2)                # LayerNorm, MatMul [N,S,H]x[H,3H], Split
        d = x.size(-1) // self.heads
        q, k, v = (t.view(n, s, self.heads, d).transpose(1, 2) for t in (q, k, v))
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(d))                  # batched MatMul
        att = att.masked_fill(self.mask[:, :, :s, :s] == 0, float("-inf"))      # Slice, Equal, Where
        y = (torch.softmax(att, dim=-1) @ v).transpose(1, 2).contiguous().view(n, s, -1)
        x = x + self.proj(y)
        x = x + self.fc2(torch.nn.functional.gelu(self.fc(self.ln2(x)), approximate=self.gelu))  # Tanh or Erf
        return self.lnf(x) @ self.wte.weight.t()                                # Transpose of a weight


class RMSNorm(torch.nn.Module):
    def __init__(self, hidden, eps=1e-6):
        super().__init__()
        self.weight, self.eps = torch.nn.Parameter(torch.ones(hidden)), eps

    def forward(self, x):
        return self.weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps))  # Pow, ReduceMean, Sqrt


class LlamaBlock(torch.nn.Module):
    """A LLaMA block: RMSNorm, rotary embeddings from cos and sin buffers, a causal mask buffer
    added to the scores, SwiGLU; an untied head."""

    def __init__(self, vocab=128, seq=16, hidden=64, heads=4, ffn=176, tables="buffers"):
        super().__init__()
        self.tables = tables  # "buffers", or "forward": computed in the forward pass (Range, Sin, Cos)
        self.emb = torch.nn.Embedding(vocab, hidden)
        self.n1, self.n2, self.nf = RMSNorm(hidden), RMSNorm(hidden), RMSNorm(hidden)
        self.q, self.k, self.v, self.o = (torch.nn.Linear(hidden, hidden, bias=False) for _ in range(4))
        self.w1, self.w3 = torch.nn.Linear(hidden, ffn, bias=False), torch.nn.Linear(hidden, ffn, bias=False)
        self.w2, self.out = torch.nn.Linear(ffn, hidden, bias=False), torch.nn.Linear(hidden, vocab, bias=False)
        self.heads = heads
        d = hidden // heads
        t = torch.outer(torch.arange(seq).float(), 1.0 / (10000 ** (torch.arange(0, d, 2).float() / d)))
        self.register_buffer("cos", torch.cat([t, t], dim=-1).cos())
        self.register_buffer("sin", torch.cat([t, t], dim=-1).sin())
        self.register_buffer("mask", torch.full((seq, seq), float("-inf")).triu(1))

    def forward(self, ids):
        n, s = ids.shape
        cos, sin = self.cos, self.sin
        if self.tables == "forward":
            d = self.cos.size(-1)
            t = torch.arange(s).float()[:, None] / (10000 ** (torch.arange(0, d, 2).float() / d))[None, :]
            cos, sin = torch.cat([t, t], dim=-1).cos(), torch.cat([t, t], dim=-1).sin()
        x = self.emb(ids)
        h = self.n1(x)
        d = h.size(-1) // self.heads
        q, k, v = (m(h).view(n, s, self.heads, d).transpose(1, 2) for m in (self.q, self.k, self.v))

        def rotary(t):
            a, b = t.chunk(2, dim=-1)
            return t * cos + torch.cat([-b, a], dim=-1) * sin                         # Neg, Concat, Mul by buffers
        att = torch.softmax(rotary(q) @ rotary(k).transpose(-2, -1) / math.sqrt(d) + self.mask, dim=-1)
        x = x + self.o((att @ v).transpose(1, 2).reshape(n, s, -1))
        h = self.n2(x)
        x = x + self.w2(torch.nn.functional.silu(self.w1(h)) * self.w3(h))          # Sigmoid, Mul
        return self.out(self.nf(x))


class Encoder(torch.nn.Module):
    """torch's own nn.TransformerEncoder (two layers) over a sequence of features, mean-pooled
    into a classifier."""

    def __init__(self):
        super().__init__()
        layer = torch.nn.TransformerEncoderLayer(64, 4, 128, dropout=0.0, batch_first=True)
        self.enc = torch.nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
        self.head = torch.nn.Linear(64, 10)

    def forward(self, x):
        return self.head(self.enc(x).mean(dim=1))                                  # ReduceMean over the sequence


@pytest.fixture(scope="module")
def blocks(tmp_path_factory):
    d = tmp_path_factory.mktemp("blocks")
    torch.manual_seed(0)
    ids = torch.randint(0, 128, (2, 16))
    nets = {"gpt2": (GPT2Block(), ids), "gpt2_erf": (GPT2Block(gelu="none"), ids), "llama": (LlamaBlock(), ids),
            "llama_tables": (LlamaBlock(tables="forward"), ids),
            "gpt2_long": (GPT2Block(seq=300), ids),  # a mask buffer of 300^2 (nanoGPT's of its block size)
            "encoder": (Encoder(), torch.randn(2, 16, 64))}
    out = {}
    for name, (net, example) in nets.items():
        for opset in (14, 17):  # LayerNorm written out (ReduceMean, Sub, Pow, Sqrt, Div) and as one operator
            out[(name, opset)] = export(net, None, d / f"{name}{opset}.onnx", opset, example)
        out[name] = sum(p.numel() for p in net.parameters())
    return out


def test_transformer_blocks_import_train_and_infer(blocks):
    onnx = pytest.importorskip("onnx")
    for name in ("gpt2", "gpt2_erf", "gpt2_long", "llama", "llama_tables", "encoder"):
        for opset in (14, 17):
            model = blocks[(name, opset)]
            exported = {n.op_type for n in onnx.load(model).graph.node}
            frozen = ["cos", "sin"] if name == "llama" else None  # its rotary tables: buffers, not trained
            info = ascendsim.info(model=model, batch_size=4, frozen=frozen)
            # The trained weights are the network's parameters; the buffers (masks, rotary tables) are constants.
            assert info["parameters"] == blocks[name], (name, opset)
            types = {op["name"].rsplit("/", 1)[-1] for op in info["ops"]}
            if name != "encoder":
                assert {"EmbeddingLookup", "BatchMatMul", "Softmax", "UnsortedSegmentSum"} <= types, (name, types)
            if not name.startswith("llama"):
                assert ("LayerNorm" in types) == (opset >= 17 and "LayerNormalization" in exported), (name, opset)
            if opset == 14 or name.startswith("llama"):
                assert "Pow" in exported and "ReduceMeanD" in types and "Sqrt" in types, (name, opset)
            r = ascendsim.train(strategy="loop-sink", model=model, batch_size=4, steps_per_epoch=3, frozen=frozen)
            run = r.runs[0]
            assert run["steps"] == 3
            if name != "encoder":  # a language model: every position's next token, 16 a sequence
                assert run["model_flops"]["tokens_per_s"] == pytest.approx(16 * run["steady_state"]["samples_per_s"])
            infer = ascendsim.info(model=model, batch_size=4, mode="infer", frozen=frozen)
            assert not any("Gradients/" in op["name"] for op in infer["ops"])
    # Unfrozen, the rotary tables train as weights; a name that is no initializer is refused.
    assert ascendsim.info(model=blocks[("llama", 17)], batch_size=4)["parameters"] == blocks["llama"] + 2 * 16 * 16
    with pytest.raises(ascendsim.InputError, match="frozen initializer 'nope'"):
        ascendsim.info(model=blocks[("llama", 17)], batch_size=4, frozen=["nope"])
    assert "Erf" in {n.op_type for n in onnx.load(blocks[("gpt2_erf", 14)]).graph.node}
    # Tables computed in the forward pass (Range, Sin, Cos of constants) fold: no --frozen needed.
    assert {"Sin", "Cos"} <= {n.op_type for n in onnx.load(blocks[("llama_tables", 17)]).graph.node}
    assert "Tanh" in {n.op_type for n in onnx.load(blocks[("gpt2", 14)]).graph.node}


def test_a_gpt2_block_costs_its_multiply_accumulates(blocks):
    """The block's MACs per sequence: the dense layers' per token and attention's QK^T and PV."""
    info = ascendsim.info(model=blocks[("gpt2", 17)], batch_size=4)
    s, h, v = 16, 64, 128
    dense = h * 3 * h + h * h + h * 4 * h + 4 * h * h + h * v
    assert info["forward_macs_per_sample"] == s * dense + 2 * s * s * h


def test_a_small_gpt_trains_with_pytorchs_losses(tmp_path):
    """A GPT-2 block exported from PyTorch trains in functional mode on a token stream — the bytes of
    the GPL's text, windows of 16 and each one's next byte — with PyTorch's losses (Momentum, from
    the same weights on the same batches) within 1e-4 over 20 steps; opset 14 writes LayerNorm out,
    opset 17 has it as one operator."""
    np = pytest.importorskip("numpy")
    text = open("/usr/share/common-licenses/GPL-3", "rb").read()
    tokens = np.frombuffer(text, np.uint8).astype("<i4")
    assert tokens.max() < 128  # ASCII: the block's vocabulary
    data = tmp_path / "gpl"
    data.mkdir()
    tokens.tofile(data / "train-tokens.bin")
    steps = 20
    for opset, gelu in ((14, "tanh"), (17, "none")):
        torch.manual_seed(7)
        net = GPT2Block(gelu=gelu)
        model = export(net, None, tmp_path / f"gpt{opset}.onnx", opset, torch.randint(0, 128, (2, 16)))
        report, batches = tmp_path / f"report{opset}.json", tmp_path / f"batches{opset}"
        subprocess.run([BIN, "train", "--model", model, "--batch-size", "4", "--functional", "--strategy", "non-sink",
                        "--dataset", str(data), "--steps-per-epoch", str(steps), "--dump-batches", str(batches),
                        "--dump-steps", str(steps), "--json", str(report), "-q"], check=True, stdout=subprocess.DEVNULL)
        losses = [l[2] for l in json.loads(report.read_text())["runs"][0]["functional"]["losses"]]
        ids, labels = read_batches(batches, steps)
        assert ids.shape == (steps, 4, 16) and labels.shape == (steps, 4, 16)
        assert (ids[:, :, 1:] == labels[:, :, :-1]).all()  # each position's label is the next token
        net.train()
        opt = torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9)
        reference = []
        for x, y in zip(ids, labels):
            opt.zero_grad()
            logits = net(torch.from_numpy(x).long())
            loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.size(-1)), torch.from_numpy(y).long().reshape(-1))
            loss.backward()
            opt.step()
            reference.append(loss.item())
        assert len(losses) == steps
        for s, (ours, theirs) in enumerate(zip(losses, reference)):
            assert abs(ours - theirs) <= 1e-4 * abs(theirs), (opset, s, ours, theirs)
        assert reference[-1] < reference[0]
