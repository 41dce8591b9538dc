"""The model zoo (python3 -m ascendsim.zoo): its entries export for training, deterministically and
atomically, into the cache a suite's `export: NAME` reads; bad names and failed exports are one
`error:` line and a non-zero exit, and leave no file."""
import glob
import json
import os
import signal
import subprocess
import sys
import time

import pytest

from ascendsim import zoo

BIN = os.environ.get("ASCENDSIM_BIN", "ascendsim")
PYTHON = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable
# Small entries: each exports in a fraction of a second.
SMALL = ["srcnn_33", "ncf", "textcnn_51"]


def zoo_cmd(*args):
    return [PYTHON, "-m", "ascendsim.zoo", *args]


def needs_torch():
    for m in ("torch", "torchvision", "onnx"):
        pytest.importorskip(m)


def test_the_list_names_every_entry_without_torch():
    p = subprocess.run(zoo_cmd("--list"), capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    listed = [line.split()[0] for line in p.stdout.splitlines()]
    assert listed == list(zoo.ENTRIES)
    assert "resnet18_224" not in listed  # built in: not the zoo's
    for e in zoo.ENTRIES.values():
        assert e.loss in ("softmax-cross-entropy", "none") and e.figures and e.source


def test_an_unknown_name_is_one_error_line_and_no_file(tmp_path):
    p = subprocess.run(zoo_cmd("--out", str(tmp_path), "ncf", "no_such_net"), capture_output=True, text=True)
    assert p.returncode == 2
    assert p.stdout == ""
    lines = p.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: unknown entry 'no_such_net'"), p.stderr
    assert os.listdir(tmp_path) == []  # checked before anything is exported


def test_the_cache_is_the_environments():
    env = {k: v for k, v in os.environ.items() if k not in ("ASCENDSIM_MODEL_CACHE", "XDG_CACHE_HOME")}
    run = lambda extra: subprocess.run([PYTHON, "-c", "from ascendsim import zoo; print(zoo.model_cache())"],
                                       capture_output=True, text=True, env={**env, **extra}, check=True).stdout.strip()
    assert run({"HOME": "/home/u"}) == "/home/u/.cache/ascendsim/onnx"
    assert run({"HOME": "/home/u", "XDG_CACHE_HOME": "/x"}) == "/x/ascendsim/onnx"
    assert run({"HOME": "/home/u", "XDG_CACHE_HOME": "/x", "ASCENDSIM_MODEL_CACHE": "/m"}) == "/m"


def test_exports_are_deterministic_and_kept(tmp_path):
    needs_torch()
    import onnx
    a, b = tmp_path / "a", tmp_path / "b"
    for out in (a, b):
        p = subprocess.run(zoo_cmd("--out", str(out), *SMALL), capture_output=True, text=True)
        assert p.returncode == 0, p.stderr
    for name in SMALL:
        fa, fb = a / (name + ".onnx"), b / (name + ".onnx")
        # The large weights are kept as shapes only (not stored): the graph is read without them.
        ga = onnx.load(str(fa), load_external_data=False).graph
        gb = onnx.load(str(fb), load_external_data=False).graph
        assert ga.SerializeToString() == gb.SerializeToString(), name  # the same graph and weights
        assert fa.read_bytes() == fb.read_bytes(), name  # and, with one torch, the same bytes
    assert sorted(os.listdir(a)) == sorted(n + ".onnx" for n in SMALL)  # no temporary file left
    # A second run keeps what is there (--force exports again).
    before = {n: os.stat(a / (n + ".onnx")).st_mtime_ns for n in SMALL}
    p = subprocess.run(zoo_cmd("--out", str(a), *SMALL), capture_output=True, text=True)
    assert p.returncode == 0 and p.stdout.count("already there") == len(SMALL), p.stdout
    assert before == {n: os.stat(a / (n + ".onnx")).st_mtime_ns for n in SMALL}


def test_a_failed_export_is_one_error_line_per_entry_and_no_file(tmp_path):
    # A machine without torch: torch's import fails.
    code = ("import sys; sys.modules['torch'] = None; from ascendsim import zoo; "
            f"sys.exit(zoo.main(['--out', {str(tmp_path)!r}, 'srcnn_33', 'ncf']))")
    p = subprocess.run([PYTHON, "-c", code], capture_output=True, text=True)
    assert p.returncode == 1
    lines = p.stderr.splitlines()
    assert len(lines) == 2, p.stderr
    assert lines[0].startswith("error: srcnn_33: cannot export: ") and "python3-torch" in lines[0]
    assert lines[1].startswith("error: ncf: cannot export: ")
    assert "Traceback" not in p.stderr
    assert os.listdir(tmp_path) == []


def test_sigterm_during_an_export_leaves_nothing(tmp_path):
    needs_torch()
    p = subprocess.Popen(zoo_cmd("--out", str(tmp_path), "alexnet_224"), stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while not glob.glob(str(tmp_path / ".alexnet_224.onnx.*.tmp")) and p.poll() is None:
        assert time.monotonic() < deadline
        time.sleep(0.01)
    p.send_signal(signal.SIGTERM)
    out, err = p.communicate(timeout=60)
    if p.returncode == 0:  # finished before the signal was handled: the file is whole
        assert os.listdir(tmp_path) == ["alexnet_224.onnx"]
        return
    assert p.returncode == 128 + signal.SIGTERM, err
    assert "Traceback" not in err
    assert os.listdir(tmp_path) == []


def test_the_entries_import_and_train_with_pytorchs_parameters(tmp_path):
    """The small entries through the CLI: their parameters are PyTorch's, and they train (SRCNN with
    its own loss, NCF and TextCNN from integer ids)."""
    needs_torch()
    import torch
    subprocess.run(zoo_cmd("--out", str(tmp_path), *SMALL, "mobilenet_v1_025_224"), check=True,
                   capture_output=True)
    for name in SMALL + ["mobilenet_v1_025_224"]:
        e = zoo.ENTRIES[name]
        loss = ["--loss", "none"] if e.loss == "none" else []
        info = subprocess.run([BIN, "info", "--model", str(tmp_path / (name + ".onnx")), "--batch-size", "4", "--json",
                               "-", *loss], capture_output=True, text=True)
        assert info.returncode == 0, info.stderr
        torch.manual_seed(0)
        assert json.loads(info.stdout)["parameters"] == sum(p.numel() for p in e.build().parameters()), name
        report = tmp_path / (name + ".json")
        train = subprocess.run([BIN, "train", "--model", str(tmp_path / (name + ".onnx")), "--batch-size", "4",
                                "--strategy", "loop-sink", "--steps-per-epoch", "3", "--json", str(report), "-q",
                                *loss], capture_output=True, text=True)
        assert train.returncode == 0, train.stderr
        assert json.loads(report.read_text())["runs"][0]["steps"] == 3


def test_a_suites_export_is_made_once_in_the_cache(tmp_path):
    needs_torch()
    cache = tmp_path / "cache"
    suite = tmp_path / "s.yaml"
    suite.write_text("name: zoo\nruns:\n  - {name: sr, export: srcnn_33, loss: none, batch_size: 16,"
                     " strategies: [loop-sink], steps_per_epoch: 3}\n")
    env = {**os.environ, "ASCENDSIM_MODEL_CACHE": str(cache)}
    for k, out in enumerate(("o1", "o2")):
        p = subprocess.run([BIN, "suite", "--suite", str(suite), "--out", str(tmp_path / out)], capture_output=True,
                           text=True, env=env)
        assert p.returncode == 0, p.stderr
        assert ("exporting srcnn_33" in p.stderr) == (k == 0), p.stderr  # made the first time only
        assert json.loads((tmp_path / out / "sr.json").read_text())["runs"][0]["steps"] == 3
    assert os.listdir(cache) == ["srcnn_33.onnx"]
