"""python3 -m ascendsim.zoo: networks that are not built in, exported to ONNX for training.

    python3 -m ascendsim.zoo --list
    python3 -m ascendsim.zoo [--out DIR] [--force] NAME... | --all

Each entry of ENTRIES is a PyTorch definition (torchvision's, or one written here after the
published architecture) at a fixed input size, exported for training: torch.onnx.export with
TrainingMode.TRAINING, opset 13 and a symbolic batch axis, from weights initialised with seed 0
(no weights are downloaded: the simulator needs the graph and the shapes, not trained values).
The file is DIR/NAME.onnx, DIR being --out or the cache (model_cache(): ASCENDSIM_MODEL_CACHE, else
${XDG_CACHE_HOME:-~/.cache}/ascendsim/onnx); a file already there is kept unless --force. A run of
a suite or figures file that says `export: NAME` imports that file and makes it with this command
when it is missing (docs/onnx.md, "The model zoo").

Needs Debian's python3-torch, python3-torchvision and python3-onnx (/usr/bin/python3). An export
is written to a temporary file beside its destination and renamed into place: an interrupted or
failed run leaves no partial file. Exit status: 0 when every entry was exported or found; 1 when
one could not be (`error: NAME: why`, one line each, the rest still made); 2 for bad arguments
(an unknown entry); 128 + the signal for SIGINT, SIGTERM or SIGHUP (nothing left behind).
"""
import argparse
import os
import signal
import sys
import time

# ---- the entries ------------------------------------------------------------------------------
#
# Each: the source it follows, how to build it (a torchvision constructor with its arguments, or a
# class below), the input of one sample (without the batch) and its element type, the loss the
# importer applies (`softmax-cross-entropy` of output 0 against integer labels, or `none`: the
# network ends in its own loss), and the published figures it stands for (docs/validation.md).


class Entry:
    def __init__(self, name, source, build, input_shape, figures, dtype="float", loss="softmax-cross-entropy",
                 input_name="image", note=""):
        self.name = name
        self.source = source
        self.build = build  # () -> torch.nn.Module, called with torch's seed set
        self.input_shape = tuple(input_shape)
        self.dtype = dtype  # "float", or "int" (ids in [0, high) given by `high`)
        self.figures = figures
        self.loss = loss
        self.input_name = input_name
        self.note = note
        self.high = None  # integer inputs: one past the largest id of the example batch


def _torchvision(fn, **kwargs):
    def build():
        import torchvision
        return getattr(torchvision.models, fn)(**kwargs)
    return build


def _local(cls, **kwargs):
    def build():
        return _classes()[cls](**kwargs)
    return build


def _entries():
    tv = "torchvision.models."
    e = [
        Entry("alexnet_227", tv + "alexnet(num_classes=10)", _torchvision("alexnet", num_classes=10), (3, 227, 227),
              "F2 (CIFAR-10 resized to 227)"),
        Entry("alexnet_224", tv + "alexnet()", _torchvision("alexnet"), (3, 224, 224), "F3 (ImageNet)"),
        Entry("squeezenet1_0_227", tv + "squeezenet1_0()", _torchvision("squeezenet1_0"), (3, 227, 227),
              "F5 (ImageNet 227)"),
        Entry("squeezenet1_0_227_cifar10", tv + "squeezenet1_0(num_classes=10)",
              _torchvision("squeezenet1_0", num_classes=10), (3, 227, 227), "F4 (CIFAR-10 resized to 227)"),
        Entry("squeezenet1_0_224", tv + "squeezenet1_0()", _torchvision("squeezenet1_0"), (3, 224, 224),
              "F15 (MindCV squeezenet1_0)"),
        Entry("squeezenet1_1_227", tv + "squeezenet1_1()", _torchvision("squeezenet1_1"), (3, 227, 227),
              "F5 (SqueezeNet 1.1, ImageNet 227)"),
        Entry("googlenet_224", tv + "googlenet(aux_logits=False, init_weights=False)",
              _torchvision("googlenet", aux_logits=False, init_weights=False), (3, 224, 224), "F16 (MindCV googlenet)"),
        Entry("mobilenet_v2_075_224", tv + "mobilenet_v2(width_mult=0.75)",
              _torchvision("mobilenet_v2", width_mult=0.75), (3, 224, 224), "F12 (MindCV mobilenet_v2_075)"),
        Entry("shufflenet_v2_x0_5_224", tv + "shufflenet_v2_x0_5()", _torchvision("shufflenet_v2_x0_5"),
              (3, 224, 224), "F14 (MindCV shufflenet_v2_x0_5)"),
        Entry("mnasnet0_75_224", tv + "mnasnet0_75()", _torchvision("mnasnet0_75"), (3, 224, 224),
              "F18 (MindCV mnasnet_075)"),
        Entry("regnet_x_800mf_224", tv + "regnet_x_800mf()", _torchvision("regnet_x_800mf"), (3, 224, 224),
              "F19 (MindCV regnet_x_800mf)"),
        Entry("vgg13_224", tv + "vgg13()", _torchvision("vgg13"), (3, 224, 224), "F22 (MindCV vgg13)"),
        Entry("vgg19_224", tv + "vgg19()", _torchvision("vgg19"), (3, 224, 224), "F22 (MindCV vgg19)"),
        Entry("mobilenet_v1_025_224", "MobileNetV1, width 0.25 (Howard et al. 2017; MindCV mobilenet_v1.py)",
              _local("MobileNetV1", alpha=0.25), (3, 224, 224), "F11 (MindCV mobilenet_v1_025)"),
        Entry("seresnet18_224", "SE-ResNet-18, reduction 16 (Hu et al. 2018; MindCV senet.py)",
              _local("SEResNet18"), (3, 224, 224), "F20 (MindCV seresnet18)"),
        Entry("srcnn_33", "SRCNN 9-1-5, 64/32 filters (Dong et al. 2014; models research/cv/srcnn)",
              _local("SRCNNWithMSE"), (2, 33, 33), "F9", loss="none", input_name="patches",
              note="input: the low- and high-resolution 1x33x33 patches as two channels; output: the MSE loss"),
        Entry("ncf", "NeuMF, MovieLens-1m (He et al. 2017; models research/recommend/ncf)",
              _local("NeuMF"), (2,), "F8", dtype="int", input_name="ids",
              note="input: (user, item) ids; sigmoid BCE as softmax cross entropy of the logits (-z/2, z/2)"),
        Entry("textcnn_51", "TextCNN, MR (Kim 2014; models research/nlp/textcnn)", _local("TextCNN"), (51,),
              "F10 (MR)", dtype="int", input_name="tokens", note="input: 51 token ids"),
    ]
    for x in e:
        if x.name == "ncf":
            x.high = 3706  # ids below both the user and the item counts
        elif x.name == "textcnn_51":
            x.high = 21000
    return {x.name: x for x in e}


ENTRIES = _entries()


def _classes():
    """The networks defined here (torch is imported only when one is built)."""
    import torch
    from torch import nn

    class MobileNetV1(nn.Module):
        """MobileNetV1 (Howard et al. 2017, arXiv:1704.04861), as MindCV's mobilenet_v1.py builds it:
        a 3x3 stride-2 convolution of 32·alpha channels, 13 depthwise-separable blocks (3x3 depthwise,
        1x1 pointwise, each with BatchNorm and ReLU), global average pooling and a dense layer."""

        SETTING = [(64, 1), (128, 2), (128, 1), (256, 2), (256, 1), (512, 2)] + [(512, 1)] * 5 + [(1024, 2), (1024, 1)]

        def __init__(self, alpha=1.0, num_classes=1000):
            super().__init__()

            def conv_bn_relu(cin, cout, k, s, groups=1):
                return [nn.Conv2d(cin, cout, k, s, k // 2, groups=groups, bias=False), nn.BatchNorm2d(cout),
                        nn.ReLU(inplace=True)]

            c = int(32 * alpha)
            layers = conv_bn_relu(3, c, 3, 2)
            for out, s in self.SETTING:
                out = int(out * alpha)
                layers += conv_bn_relu(c, c, 3, s, groups=c) + conv_bn_relu(c, out, 1, 1)
                c = out
            self.features = nn.Sequential(*layers)
            self.pool = nn.AdaptiveAvgPool2d(1)
            self.classifier = nn.Linear(c, num_classes)

        def forward(self, x):
            return self.classifier(torch.flatten(self.pool(self.features(x)), 1))

    class SqueezeExcite(nn.Module):
        """Squeeze-and-excitation (Hu et al. 2018, arXiv:1709.01507): global average pooling, a 1x1
        convolution to channels/reduction, ReLU, a 1x1 convolution back, sigmoid, the scale."""

        def __init__(self, c, reduction=16):
            super().__init__()
            self.pool = nn.AdaptiveAvgPool2d(1)
            self.reduce = nn.Conv2d(c, c // reduction, 1)
            self.expand = nn.Conv2d(c // reduction, c, 1)

        def forward(self, x):
            s = torch.sigmoid(self.expand(torch.relu(self.reduce(self.pool(x)))))
            return x * s

    class SEBasicBlock(nn.Module):
        def __init__(self, cin, cout, stride):
            super().__init__()
            self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
            self.bn1 = nn.BatchNorm2d(cout)
            self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
            self.bn2 = nn.BatchNorm2d(cout)
            self.se = SqueezeExcite(cout)
            self.down = None
            if stride != 1 or cin != cout:
                self.down = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

        def forward(self, x):
            y = torch.relu(self.bn1(self.conv1(x)))
            y = self.se(self.bn2(self.conv2(y)))
            return torch.relu(y + (x if self.down is None else self.down(x)))

    class SEResNet18(nn.Module):
        """SE-ResNet-18 (Hu et al. 2018), as MindCV's senet.py `seresnet18`: ResNet-18's stem and four
        stages of two basic blocks (64, 128, 256, 512 channels), each block's residual branch scaled
        by squeeze-and-excitation with reduction 16 before the shortcut is added."""

        def __init__(self, num_classes=1000):
            super().__init__()
            self.stem = nn.Sequential(nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64), nn.ReLU(inplace=True),
                                      nn.MaxPool2d(3, 2, 1))
            blocks, c = [], 64
            for out, stride in ((64, 1), (128, 2), (256, 2), (512, 2)):
                blocks += [SEBasicBlock(c, out, stride), SEBasicBlock(out, out, 1)]
                c = out
            self.blocks = nn.Sequential(*blocks)
            self.pool = nn.AdaptiveAvgPool2d(1)
            self.fc = nn.Linear(512, num_classes)

        def forward(self, x):
            return self.fc(torch.flatten(self.pool(self.blocks(self.stem(x))), 1))

    class SRCNNWithMSE(nn.Module):
        """SRCNN (Dong et al. 2014, arXiv:1501.00092), the 9-1-5 network of 64 and 32 filters, padded
        to keep the 33x33 patch, and its loss: the mean squared error against the high-resolution
        patch. The importer takes one data input, so a sample is the two patches as two channels
        (channel 0 the bicubic-upscaled input, channel 1 the target), as the dataset holds them."""

        def __init__(self):
            super().__init__()
            self.conv1 = nn.Conv2d(1, 64, 9, padding=4)
            self.conv2 = nn.Conv2d(64, 32, 1)
            self.conv3 = nn.Conv2d(32, 1, 5, padding=2)

        def forward(self, patches):
            x, target = patches[:, 0:1], patches[:, 1:2]
            y = self.conv3(torch.relu(self.conv2(torch.relu(self.conv1(x)))))
            return torch.mean((y - target) * (y - target))

    class NeuMF(nn.Module):
        """NeuMF (He et al. 2017, arXiv:1708.05031), as the model zoo's research/recommend/ncf builds it
        for MovieLens-1m: one embedding per user and per item of mf_dim + layers[0]/2 columns (64 for
        GMF, 32 for the MLP), GMF's element-wise product, the MLP's dense layers 64 -> 32 -> 16 with
        ReLU, and one logit from the concatenation of both (80 -> 1). The loss is sigmoid binary cross
        entropy; the importer's loss is softmax cross entropy, and that of the two logits (-z/2, z/2)
        is exactly sigmoid BCE of z, so the network ends in those. The ids come as one [N, 2] integer
        input (user, item): the importer takes one data input."""

        def __init__(self, users=6040, items=3706, mf_dim=64, layers=(64, 32, 16)):
            super().__init__()
            self.mf_dim = mf_dim
            self.user = nn.Embedding(users, mf_dim + layers[0] // 2)
            self.item = nn.Embedding(items, mf_dim + layers[0] // 2)
            mlp = []
            for a, b in zip(layers[:-1], layers[1:]):
                mlp += [nn.Linear(a, b), nn.ReLU(inplace=True)]
            self.mlp = nn.Sequential(*mlp)
            self.logit = nn.Linear(mf_dim + layers[-1], 1)

        def forward(self, ids):
            u, i = self.user(ids[:, 0]), self.item(ids[:, 1])
            gmf = u[:, :self.mf_dim] * i[:, :self.mf_dim]
            mlp = self.mlp(torch.cat((u[:, self.mf_dim:], i[:, self.mf_dim:]), 1))
            z = self.logit(torch.cat((gmf, mlp), 1))
            return torch.cat((z * -0.5, z * 0.5), 1)

    class TextCNN(nn.Module):
        """TextCNN (Kim 2014, arXiv:1408.5882), as the model zoo's research/nlp/textcnn builds it for MR:
        an embedding of 128, three convolutions over the sentence of 3, 4 and 5 words x 128 with 96
        filters each and ReLU, each max-pooled over the sentence, dropout 0.5 and a dense layer of
        288 -> 2. MR's vocabulary is about 21,000 words."""

        def __init__(self, vocab=21000, embed=128, length=51, filters=96, kernels=(3, 4, 5), classes=2):
            super().__init__()
            self.embedding = nn.Embedding(vocab, embed)
            self.convs = nn.ModuleList(nn.Conv2d(1, filters, (k, embed)) for k in kernels)
            self.pools = nn.ModuleList(nn.MaxPool2d((length - k + 1, 1)) for k in kernels)
            self.drop = nn.Dropout(0.5)
            self.fc = nn.Linear(filters * len(kernels), classes)

        def forward(self, tokens):
            x = self.embedding(tokens).unsqueeze(1)
            x = torch.cat([torch.flatten(p(torch.relu(c(x))), 1) for c, p in zip(self.convs, self.pools)], 1)
            return self.fc(self.drop(x))

    return {c.__name__: c for c in (MobileNetV1, SEResNet18, SRCNNWithMSE, NeuMF, TextCNN)}


# ---- the cache --------------------------------------------------------------------------------

def model_cache():
    """Where exports are kept: $ASCENDSIM_MODEL_CACHE, else ${XDG_CACHE_HOME:-~/.cache}/ascendsim/onnx."""
    if os.environ.get("ASCENDSIM_MODEL_CACHE"):
        return os.environ["ASCENDSIM_MODEL_CACHE"]
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "ascendsim", "onnx")


# ---- exporting --------------------------------------------------------------------------------

_staged = []  # the temporary file being written, removed on a signal


def export_for_training(model, example, path, input_names, output_names, dynamic_axes, shapes_only=False):
    """torch.onnx.export of `model` in training mode (TrainingMode.TRAINING: BatchNorm's batch
    statistics, Dropout kept), opset 13, no constant folding, to `path` — written to a temporary
    file beside it and renamed into place, so `path` is whole or absent. tests/python/onnx_zoo.py
    exports torchvision's families the same way. `shapes_only`: the large weights keep their
    shapes only (_strip_weights)."""
    import warnings
    import torch
    tmp = os.path.join(os.path.dirname(path) or ".", "." + os.path.basename(path) + f".{os.getpid()}.tmp")
    _staged.append(tmp)
    try:
        model.train()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            torch.onnx.export(model, example, tmp, training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False,
                              opset_version=13, input_names=input_names, output_names=output_names,
                              dynamic_axes=dynamic_axes)
        if shapes_only:
            _strip_weights(tmp)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
        _staged.remove(tmp)


#: Initializers of at least this many elements keep their shape only (see _strip_weights).
STRIP_ELEMENTS = 4096


def _strip_weights(path):
    """Rewrites the ONNX file at `path` with every float initializer of STRIP_ELEMENTS elements or
    more reduced to its shape: its values dropped and marked as external data that is not kept
    (location "not-stored"), which ascendsim's importer reads as "the shape suffices" for timing and
    which functional mode refuses by name. Small initializers (biases, BatchNorm's, shapes) keep
    their values. VGG-19's export shrinks from 575 MB to a few kB; the simulation is the same."""
    import onnx
    model = onnx.load(path)
    for t in model.graph.initializer:
        n = 1
        for d in t.dims:
            n *= d
        if t.data_type in (onnx.TensorProto.FLOAT, onnx.TensorProto.DOUBLE) and n >= STRIP_ELEMENTS:
            t.ClearField("raw_data")
            t.ClearField("float_data")
            t.ClearField("double_data")
            t.data_location = onnx.TensorProto.EXTERNAL
            del t.external_data[:]
            entry = t.external_data.add()
            entry.key, entry.value = "location", "not-stored"
    onnx.save(model, path)


def example_input(entry, batch=2):
    """A batch of `batch` samples of the entry's input (seeded: the same every time)."""
    import torch
    g = torch.Generator().manual_seed(0)
    shape = (batch,) + entry.input_shape
    if entry.dtype == "int":
        return torch.randint(0, entry.high, shape, generator=g, dtype=torch.int64)
    return torch.randn(shape, generator=g)


def export(name, out_dir):
    """Exports entry `name` to out_dir/NAME.onnx (replacing it); returns the path."""
    import torch
    entry = ENTRIES[name]
    torch.manual_seed(0)  # the same weights, so the same file, every time
    model = entry.build()
    path = os.path.join(out_dir, name + ".onnx")
    output = "loss" if entry.loss == "none" else "logits"
    axes = {entry.input_name: {0: "batch"}}
    if entry.loss != "none":
        axes[output] = {0: "batch"}
    export_for_training(model, example_input(entry), path, [entry.input_name], [output], axes, shapes_only=True)
    return path


# ---- the command ------------------------------------------------------------------------------

def _error(message):
    print(f"error: {message}", file=sys.stderr, flush=True)


class _Parser(argparse.ArgumentParser):
    def error(self, message):
        _error(f"{message} (see `{self.prog} --help`)")
        sys.exit(2)


def _on_signal(signo, frame):
    for tmp in list(_staged):
        try:
            os.unlink(tmp)
        except OSError:
            pass
    os._exit(128 + signo)


def _one_line(e):
    text = str(e).strip() or type(e).__name__
    return text.splitlines()[0][:300]


def main(argv=None):
    for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(s, _on_signal)
    p = _Parser(prog="python3 -m ascendsim.zoo",
                description="Export networks that are not built in to ONNX for training (docs/onnx.md).")
    p.add_argument("names", nargs="*", metavar="NAME", help="entries to export (--list names them)")
    p.add_argument("--out", metavar="DIR", help="where NAME.onnx goes (default: the model cache, " + model_cache() + ")")
    p.add_argument("--all", action="store_true", help="every entry")
    p.add_argument("--force", action="store_true", help="export again an entry whose file exists")
    p.add_argument("--list", action="store_true", help="print the entries: name, input, loss, source, figures")
    a = p.parse_args(argv)
    if a.list:
        if a.names or a.all:
            p.error("--list takes no entries")
        for e in ENTRIES.values():
            shape = "x".join(str(d) for d in e.input_shape)
            print(f"{e.name:26} {e.dtype:5} {shape:10} loss {e.loss:21} {e.figures:36} {e.source}")
        return 0
    unknown = [n for n in a.names if n not in ENTRIES]
    if unknown:
        _error(f"unknown entr{'ies' if len(unknown) > 1 else 'y'} {', '.join(repr(n) for n in unknown)}; "
               "`python3 -m ascendsim.zoo --list` names them")
        return 2
    names = list(ENTRIES) if a.all else list(dict.fromkeys(a.names))
    if not names:
        p.error("name the entries to export, or give --all or --list")
    out = a.out or model_cache()
    try:
        os.makedirs(out, exist_ok=True)
    except OSError as e:
        _error(f"cannot create the output folder {out}: {e.strerror or e}")
        return 1
    todo = [n for n in names if a.force or not os.path.isfile(os.path.join(out, n + ".onnx"))]
    for n in names:
        if n not in todo:
            print(f"{n}: {os.path.join(out, n + '.onnx')} (already there)")
    if not todo:
        return 0
    try:
        import torch  # noqa: F401
        import torchvision  # noqa: F401
        import onnx  # noqa: F401  (torch.onnx.export needs it)
    except Exception as e:
        for n in todo:
            _error(f"{n}: cannot export: {_one_line(e)} (Debian's python3-torch, python3-torchvision and "
                   "python3-onnx are needed)")
        return 1
    status = 0
    for n in todo:
        t = time.monotonic()
        try:
            path = export(n, out)
        except Exception as e:  # torch refused the network, or the file could not be written
            _error(f"{n}: the export failed: {_one_line(e)}")
            status = 1
            continue
        print(f"{n}: {path} (exported in {time.monotonic() - t:.1f} s)", flush=True)
    return status


if __name__ == "__main__":
    sys.exit(main())
