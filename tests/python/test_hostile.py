"""Hostile input to `ascendsim tune`, `python3 -m ascendsim tune` and `python3 -m ascendsim sweep`,
held to the command line's standard: one `error: ...` line naming what the user gave, exit 2
(3 for a simulated job that failed), never a traceback, no file created or replaced; a signal
stops the command within a second or two with 128 + the signal and leaves nothing behind. Also
the Python API's argument types, and a seeded fuzz of tune's --fix/--set values."""
import json
import os
import random
import signal
import stat
import subprocess
import sys
import time

import pytest

import ascendsim

BIN = os.environ.get("ASCENDSIM_BIN", "build/bin/ascendsim")
PY = "/usr/bin/python3"
SOURCE = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ONNX = os.path.join(SOURCE, "tests", "fuzz", "corpus", "onnx", "cnn.onnx")
# The children run in their own directories: the package's path made absolute.
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join(os.path.abspath(p) for p in
                                                   os.environ.get("PYTHONPATH", "").split(os.pathsep) if p)}

FRONT_ENDS = {
    "ascendsim tune": lambda: [os.path.abspath(BIN), "tune"],
    "python3 -m ascendsim tune": lambda: [PY, "-m", "ascendsim", "tune"],
}
SMALL = ["--budget", "2", "--steps-per-epoch", "5", "-q"]
SWEEP = [PY, "-m", "ascendsim", "sweep", "--workload", "lenet5", "--steps-per-epoch", "5", "--strategies", "loop-sink"]

# (name, arguments after the command, expected exit, a substring of the error line). In each row's
# directory: keep.json (a file that must stay as it is), dir/ (a directory), link.json -> keep.json.
TUNE_ROWS = [
    ("negative seed", ["--seed", "-1"], 2, "--seed -1"),
    ("seed past 2^32", ["--seed", str(2 ** 32)], 2, "--seed 4294967296"),
    ("zero budget", ["--budget", "0"], 2, "--budget 0"),
    ("budget not a number", ["--budget", "x"], 2, "--budget"),
    ("json is a directory", ["--json", "dir"], 2, "--json dir: is a directory"),
    ("html is a directory", ["--html", "dir"], 2, "--html dir: is a directory"),
    ("json in a missing directory", ["--json", "missing/out.json"], 2, "does not exist"),
    ("json and html the same file", ["--json", "out.json", "--html", "out.json"], 2, "also the destination"),
    ("json and html one file by a link", ["--json", "keep.json", "--html", "link.json"], 2, "also the destination"),
    ("json on a full device", ["--json", "FULL"], 2, "full: cannot write: No space left on device"),
    ("serving without a decoder", ["--objective", "serving_goodput"], 2, "--workload lenet5"),
    ("serving with a model", ["--objective", "serving_goodput", "--workload", "gpt", "--model", ONNX], 2, "--model"),
    ("unknown objective", ["--objective", "speed"], 2, "speed"),
    ("unknown knob fixed", ["--fix", "nope=1"], 2, "'nope' is not a knob"),
    ("fixed knob NaN", ["--fix", "pipeline.prefetch_size=nan"], 2, "pipeline.prefetch_size"),
    ("fixed knob out of range", ["--fix", "queue.capacity=100000"], 2, "queue.capacity"),
    ("fix without a value", ["--fix", "strategy"], 2, "--fix strategy"),
    ("unknown parameter set", ["--set", "no.such=1"], 2, "no.such"),
    ("unknown workload", ["--workload", "nosuch"], 2, "nosuch"),
    ("missing model", ["--model", "missing.onnx"], 2, "missing.onnx"),
    ("a serving flag for training", ["--rate", "3"], 2, "--rate"),
    ("max devices below devices", ["--devices", "4", "--max-devices", "2"], 2, "--max-devices 2"),
    ("zero epochs", ["--epochs", "0"], 2, "--epochs: must be a positive whole number"),
    ("data script is a directory", ["--data", "dir"], 2, "--data dir: a directory"),
    ("data script missing", ["--data", "missing.yaml"], 2, "--data missing.yaml: no such file"),
    ("data script a device", ["--data", "FULL"], 2, "not a regular file"),
    ("data script of other keys", ["--data", "keep.json", "--workload", "resnet18"], 2, "unknown key 'kept'"),
    ("data script for serving", ["--objective", "serving_goodput", "--workload", "gpt", "--data", "keep.json"], 2,
     "--data"),
    ("zero devices", ["--devices", "0"], 2, "--devices: must be a positive whole number"),
    ("negative batch", ["--batch-size", "-1"], 2, "--batch-size: must be a positive whole number"),
    ("zero parallel", ["--parallel", "0"], 2, "--parallel: must be a positive whole number"),
    ("serving zero requests", ["--objective", "serving_goodput", "--workload", "gpt", "--requests", "0"], 2,
     "--requests: must be a positive whole number"),
]
SWEEP_ROWS = [
    ("json is a directory", ["--grid", "epochs=1", "--json", "dir"], 2, "--json dir: is a directory"),
    ("json in a missing directory", ["--grid", "epochs=1", "--json", "missing/x.json"], 2, "does not exist"),
    ("json on a full device", ["--grid", "epochs=1", "--json", "FULL"], 2, "full: cannot write: No space left on device"),
    ("grid without values", ["--grid", "epochs"], 2, "--grid epochs"),
    ("grid of an unknown key", ["--grid", "nosuch=1,2"], 2, "'nosuch'"),
    ("epochs not a number", ["--grid", "epochs=1", "--epochs", "two"], 2, "--epochs"),
    ("set without a value", ["--grid", "epochs=1", "--set", "link.h2d_bandwidth_gbps"], 2, "--set"),
    ("zero steps per epoch", ["--grid", "epochs=1", "--steps-per-epoch", "0"], 2, "--steps-per-epoch: must be"),
]


def _full_device(tmp_path):
    """A device that refuses every write with ENOSPC. As root, a private node of /dev/full's device
    (a command that wrongly replaced its destination would replace this node, not /dev/full);
    otherwise /dev/full itself, which an unprivileged process cannot replace."""
    if not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full")
    if os.geteuid() != 0:
        return "/dev/full"
    node = tmp_path / "dev" / "full"
    node.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.mknod(node, 0o666 | stat.S_IFCHR, os.stat("/dev/full").st_rdev)
    except OSError as e:
        pytest.skip(f"cannot make a device node: {e}")
    return str(node)


def _listing(root):
    """Every path under root with its kind, size, inode and content digest."""
    out = {}
    for folder, dirs, files in os.walk(root):
        for name in dirs + files:
            path = os.path.join(folder, name)
            st = os.lstat(path)
            content = open(path, "rb").read() if stat.S_ISREG(st.st_mode) else os.readlink(path) \
                if stat.S_ISLNK(st.st_mode) else None
            out[os.path.relpath(path, root)] = (stat.S_IFMT(st.st_mode), st.st_ino, content)
    return out


def _workspace(tmp_path):
    work = tmp_path / "work"
    work.mkdir(parents=True)
    (work / "keep.json").write_text('{"kept": true}\n')
    (work / "dir").mkdir()
    os.symlink("keep.json", work / "link.json")
    return work


def _assert_one_error_line(p, code, words):
    assert "Traceback" not in p.stderr, p.stderr
    lines = [l for l in p.stderr.splitlines() if l.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), p.stderr
    assert words in lines[0], lines[0]
    assert p.returncode == code, (p.returncode, p.stderr)


def _run_hostile(argv, code, words, tmp_path, **kw):
    work = _workspace(tmp_path)
    before = _listing(work)
    if "FULL" in argv:
        argv = [_full_device(tmp_path) if w == "FULL" else w for w in argv]
    devices = [w for w in argv if w.endswith("full")]
    device = os.stat(devices[0]) if devices else None
    kw.setdefault("stdout", subprocess.PIPE)
    p = subprocess.run(argv, cwd=work, stderr=subprocess.PIPE, text=True, timeout=120, env=ENV, **kw)
    _assert_one_error_line(p, code, words)
    assert _listing(work) == before  # nothing created, nothing replaced
    if device is not None:  # still the device, and written before anything was printed
        assert stat.S_ISCHR(os.stat(devices[0]).st_mode) and os.stat(devices[0]).st_rdev == device.st_rdev
        assert p.stdout == "", p.stdout
    return p


@pytest.mark.parametrize("front", list(FRONT_ENDS))
@pytest.mark.parametrize("name,args,code,words", TUNE_ROWS, ids=[r[0] for r in TUNE_ROWS])
def test_tune_refuses_hostile_input_in_one_line_and_writes_nothing(front, name, args, code, words, tmp_path):
    small = SMALL if "serving_goodput" not in args else ["--budget", "2", "-q"]  # serving has no epochs
    _run_hostile(FRONT_ENDS[front]() + small + args, code, words, tmp_path)


@pytest.mark.parametrize("name,args,code,words", SWEEP_ROWS, ids=[r[0] for r in SWEEP_ROWS])
def test_sweep_refuses_hostile_input_in_one_line_and_writes_nothing(name, args, code, words, tmp_path):
    _run_hostile(SWEEP + args, code, words, tmp_path)


COMMANDS = {"ascendsim tune": lambda: FRONT_ENDS["ascendsim tune"]() + SMALL,
            "python3 -m ascendsim tune": lambda: FRONT_ENDS["python3 -m ascendsim tune"]() + SMALL,
            "python3 -m ascendsim sweep": lambda: SWEEP + ["--grid", "epochs=1", "-q"]}


@pytest.mark.parametrize("command", list(COMMANDS))
def test_standard_output_full_closed_or_broken_fails_the_command_and_writes_no_file(command, tmp_path):
    with_json = COMMANDS[command]() + ["--json", "out.json"]
    if os.path.exists("/dev/full"):
        with open("/dev/full", "w") as full:
            _run_hostile(with_json, 2, "standard output: the report could not be written (No space left on device)",
                         tmp_path / "full", stdout=full)
    (tmp_path / "closed").mkdir()
    p = _run_hostile(with_json, 2, "standard output is closed", tmp_path / "closed", stdout=subprocess.DEVNULL,
                     preexec_fn=lambda: os.close(1))
    assert p.returncode == 2
    read, write = os.pipe()
    os.close(read)  # the reader left, as `| head -1` does once it has its line
    try:
        (tmp_path / "pipe").mkdir()
        _run_hostile(with_json, 2, "standard output: the report could not be written (Broken pipe)",
                     tmp_path / "pipe", stdout=write)
    finally:
        os.close(write)


@pytest.mark.parametrize("front", list(FRONT_ENDS))
def test_a_symlinked_report_keeps_its_link_and_its_target_gets_the_report(front, tmp_path):
    work = _workspace(tmp_path)
    p = subprocess.run(FRONT_ENDS[front]() + SMALL + ["--json", "link.json", "--html", "new.html"], cwd=work,
                       capture_output=True, text=True, timeout=120, env=ENV)
    assert p.returncode == 0 and "Traceback" not in p.stderr, p.stderr
    assert os.path.islink(work / "link.json") and os.readlink(work / "link.json") == "keep.json"
    assert json.loads((work / "keep.json").read_text())["kind"] == "tune"
    assert (work / "new.html").read_text().startswith("<!DOCTYPE html>")
    # Nothing else: no staging file beside the targets.
    assert sorted(os.listdir(work)) == ["dir", "keep.json", "link.json", "new.html"]
    assert p.stdout.startswith("tune lenet5: 2 trials")


def test_the_sweeps_json_goes_through_a_link_or_to_stdout(tmp_path):
    work = _workspace(tmp_path)
    p = subprocess.run(SWEEP + ["--grid", "epochs=1,2", "--json", "link.json"], cwd=work, capture_output=True,
                       text=True, timeout=120, env=ENV)
    assert p.returncode == 0 and p.stderr == "", p.stderr
    assert os.path.islink(work / "link.json")
    points = json.loads((work / "keep.json").read_text())
    assert [x["point"] for x in points] == [{"epochs": 1}, {"epochs": 2}]
    assert p.stdout.splitlines()[0].split("\t") == ["epochs", "strategy", "step ms", "samples/s"]
    assert sorted(os.listdir(work)) == ["dir", "keep.json", "link.json"]
    p = subprocess.run(SWEEP + ["--grid", "epochs=1,2", "--json", "-"], cwd=work, capture_output=True, text=True,
                       timeout=120, env=ENV)
    assert p.returncode == 0 and json.loads(p.stdout) == points
    assert sorted(os.listdir(work)) == ["dir", "keep.json", "link.json"]


def test_usage_names_the_command_as_it_was_invoked():
    for front, usage in (("ascendsim tune", "usage: ascendsim tune"),
                         ("python3 -m ascendsim tune", "usage: python3 -m ascendsim tune")):
        p = subprocess.run(FRONT_ENDS[front]() + ["--help"], capture_output=True, text=True, timeout=60,
                           env=ENV)
        assert p.returncode == 0 and p.stdout.startswith(usage), p.stdout[:80]


def test_tune_takes_an_onnx_model(tmp_path):
    p = subprocess.run(FRONT_ENDS["ascendsim tune"]() + SMALL + ["--model", ONNX, "--batch-size", "8", "--json", "-"],
                       capture_output=True, text=True, timeout=120, env=ENV)
    assert p.returncode == 0, p.stderr
    data = json.loads(p.stdout)
    assert data["workload"] == ONNX and len(data["trials"]) == 2
    # The model, not the default workload, is what ran: its report names the file's network.
    report = json.loads(ascendsim.train(model=ONNX, batch_size=8, steps_per_epoch=5, strategy="non-sink").to_json())
    assert data["start"]["value"] == pytest.approx(report["runs"][0]["samples_per_s"])


# Signals ------------------------------------------------------------------------------------------

def _until(path, words, proc, seconds=60):
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if os.path.exists(path) and words in open(path).read():
            return
        assert proc.poll() is None, open(path).read()
        time.sleep(0.05)
    raise AssertionError(f"no '{words}' in {path}")


SIGNAL_COMMANDS = {
    "ascendsim tune": lambda: FRONT_ENDS["ascendsim tune"]() + ["--budget", "2000", "--progress"],
    "python3 -m ascendsim tune": lambda: FRONT_ENDS["python3 -m ascendsim tune"]() + ["--budget", "2000", "--progress"],
    "python3 -m ascendsim sweep": lambda: [PY, "-m", "ascendsim", "sweep", "--workload", "resnet50", "--steps-per-epoch",
                                           "40", "--grid", "epochs=" + ",".join(str(e) for e in range(1, 200)),
                                           "--progress"],
}


def _signal_and_wait(proc, signo):
    """Sends the signal and waits for the process: its (stdout, stderr) and the seconds it took."""
    sent = time.monotonic()
    proc.send_signal(signo)
    streams = proc.communicate(timeout=10)
    return streams, time.monotonic() - sent


@pytest.mark.parametrize("signo", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
@pytest.mark.parametrize("command", list(SIGNAL_COMMANDS))
def test_a_signal_stops_the_command_within_two_seconds_and_leaves_nothing(command, signo, tmp_path):
    work = _workspace(tmp_path)
    err = tmp_path / "stderr"
    outputs = ["--json", "out.json"] + (["--html", "out.html"] if "tune" in command else [])
    before = _listing(work)
    with open(err, "w") as e:
        proc = subprocess.Popen(SIGNAL_COMMANDS[command]() + outputs, cwd=work, stdout=subprocess.PIPE, stderr=e,
                                text=True, env=ENV)
    try:
        # One trial (point) done: the next is under way in the simulator.
        _until(err, ": 1/", proc)
        (out, _), took = _signal_and_wait(proc, signo)
    finally:
        if proc.poll() is None:
            proc.kill()
    text = err.read_text()
    assert proc.returncode == 128 + signo, (proc.returncode, text)
    assert took < 2.0, took
    assert "Traceback" not in text and text.splitlines()[-1] == \
        f"error: stopped by {signal.Signals(signo).name}; no output written", text
    assert out == ""
    assert _listing(work) == before  # no output, no staging file


@pytest.mark.parametrize("signo", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_signal_while_tune_starts_stops_it_cleanly(signo, tmp_path):
    # While Python starts and loads its modules the signal waits for the handlers: never a
    # traceback, nor an import's failure reported instead of the signal.
    for delay in (0.02, 0.05, 0.1, 0.2, 0.3, 0.5):
        work = _workspace(tmp_path / str(delay))
        before = _listing(work)
        proc = subprocess.Popen(FRONT_ENDS["ascendsim tune"]() + ["--budget", "500", "--json", "out.json"], cwd=work,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV)
        time.sleep(delay)
        proc.send_signal(signo)
        out, err = proc.communicate(timeout=30)
        # Before the binary's own handlers (its first milliseconds) the signal's default ends it.
        assert proc.returncode in (128 + signo, -signo), (delay, proc.returncode, err)
        assert "Traceback" not in err and len(err.splitlines()) <= 1, (delay, err)
        if err:
            assert err == f"error: stopped by {signal.Signals(signo).name}; no output written\n", (delay, err)
        assert out == "" and _listing(work) == before


API_STOP = """
import signal, sys, time, ascendsim
print("ready", flush=True)
t = time.monotonic()
try:
    ascendsim.train("resnet50", "non-sink", epochs=500, steps_per_epoch=200)
except KeyboardInterrupt:
    print(f"KeyboardInterrupt {time.monotonic() - t:.3f}", flush=True)
    sys.exit(7)
"""


@pytest.mark.parametrize("signo", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_signal_stops_an_api_run_and_reaches_pythons_own_handling(signo):
    # SIGINT: Python's KeyboardInterrupt, raised as soon as the run stops; SIGTERM: its default, the
    # process ends by the signal.
    proc = subprocess.Popen([PY, "-c", API_STOP], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=ENV)
    try:
        assert proc.stdout.readline() == "ready\n"
        time.sleep(0.5)  # in the simulator, the GIL released
        assert proc.poll() is None
        (out, err), took = _signal_and_wait(proc, signo)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert took < 2.0, took
    if signo == signal.SIGINT:
        assert proc.returncode == 7 and out.startswith("KeyboardInterrupt"), (proc.returncode, out, err)
    else:
        assert proc.returncode == -signal.SIGTERM, (proc.returncode, err)


def test_the_previous_handlers_are_back_after_a_run():
    seen = []
    previous = signal.signal(signal.SIGTERM, lambda s, f: seen.append(s))
    try:
        ascendsim.chips()
        assert signal.getsignal(signal.SIGTERM) is not previous and callable(signal.getsignal(signal.SIGTERM))
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(0.1)
        assert seen == [signal.SIGTERM]  # the Python handler, not the run's
    finally:
        signal.signal(signal.SIGTERM, previous)


# The API's argument types -------------------------------------------------------------------------

API_ROWS = [
    ("train epochs a string", lambda: ascendsim.train("lenet5", "non-sink", epochs="2"), "epochs"),
    ("train epochs a float", lambda: ascendsim.train("lenet5", "non-sink", epochs=2.0), "epochs"),
    ("train epochs a bool", lambda: ascendsim.train("lenet5", "non-sink", epochs=True), "epochs"),
    ("train batch a string", lambda: ascendsim.train("lenet5", "non-sink", batch_size="32"), "batch_size"),
    ("train steps a float", lambda: ascendsim.train("lenet5", "non-sink", steps_per_epoch=5.5), "steps_per_epoch"),
    ("train devices None", lambda: ascendsim.train("lenet5", "non-sink", devices=None), "devices"),
    ("train loss scale a string", lambda: ascendsim.train("lenet5", "non-sink", loss_scale="1024"), "loss_scale"),
    ("train loss scale NaN", lambda: ascendsim.train("lenet5", "non-sink", loss_scale=float("nan")), "loss_scale"),
    ("train functional a string", lambda: ascendsim.train("lenet5", "non-sink", functional="yes"), "functional"),
    ("train overrides a list", lambda: ascendsim.train("lenet5", "non-sink", overrides=["a=1"]), "overrides"),
    ("train strategy a number", lambda: ascendsim.train("lenet5", 3), "strategy"),
    ("train workload a number", lambda: ascendsim.train(5, "non-sink"), "workload"),
    ("train frozen a string", lambda: ascendsim.train("lenet5", "non-sink", frozen="w"), "frozen"),
    ("train fusion a string", lambda: ascendsim.train("lenet5", "non-sink", all_reduce_fusion="1,2"), "all_reduce_fusion"),
    ("train shape a string", lambda: ascendsim.train("gpt", "non-sink", shape={"layers": "2"}), "shape['layers']"),
    ("train checkpoint_every a float", lambda: ascendsim.train("lenet5", "non-sink", checkpoint_every=2.5),
     "checkpoint_every"),
    ("train checkpoint_every a string", lambda: ascendsim.train("lenet5", "non-sink", checkpoint_every="10"),
     "checkpoint_every"),
    ("train checkpoint_async a string", lambda: ascendsim.train("lenet5", "non-sink", checkpoint_async="yes"),
     "checkpoint_async"),
    ("train device_mtbf_hours NaN", lambda: ascendsim.train("lenet5", "non-sink", checkpoint_every=10,
                                                            device_mtbf_hours=float("nan")), "device_mtbf_hours"),
    ("train device_mtbf_hours a string", lambda: ascendsim.train("lenet5", "non-sink", checkpoint_every=10,
                                                                 device_mtbf_hours="100"), "device_mtbf_hours"),
    ("train fault_seeds a bool", lambda: ascendsim.train("lenet5", "non-sink", checkpoint_every=10,
                                                         device_mtbf_hours=100, fault_seeds=True), "fault_seeds"),
    ("train optimizer_shard_level a float", lambda: ascendsim.train("gpt", "non-sink", devices=2,
                                                                    optimizer_shard_level=2.0), "optimizer_shard_level"),
    ("train optimizer_shard_level NaN", lambda: ascendsim.train("gpt", "non-sink", devices=2,
                                                                optimizer_shard_level=float("nan")),
     "optimizer_shard_level"),
    ("train optimizer_shard_level 3", lambda: ascendsim.train("gpt", "non-sink", devices=2, optimizer_shard_level=3),
     "optimizer-shard-level"),
    ("compare sink size a string", lambda: ascendsim.compare("lenet5", sink_size="10"), "sink_size"),
    ("info batch a float", lambda: ascendsim.info("lenet5", batch_size=32.0), "batch_size"),
    ("info ub_fusion a string", lambda: ascendsim.info("lenet5", ub_fusion="false"), "ub_fusion"),
    ("op a dimension a bool", lambda: ascendsim.op("matmul", m=True, k=16, n=16), "m"),
    ("params chip a number", lambda: ascendsim.params(910), "chip"),
    ("serve requests a string", lambda: ascendsim.serve(requests="10"), "requests"),
    ("serve rate a string", lambda: ascendsim.serve(rate="2"), "rate"),
    ("serve rates a string", lambda: ascendsim.serve(rates="1,2"), "rates"),
    ("sweep grid a string", lambda: ascendsim.sweep("lenet5", "epochs=1"), "grid"),
    ("sweep grid values a string", lambda: ascendsim.sweep("lenet5", {"epochs": "12"}), "grid['epochs']"),
    ("sweep strategies a string", lambda: ascendsim.sweep("lenet5", {"epochs": [1]}, strategies="loop-sink"), "strategies"),
    ("sweep unknown key", lambda: ascendsim.sweep("lenet5", {"nosuch": [1]}), "nosuch"),
    ("sweep progress not callable", lambda: ascendsim.sweep("lenet5", {"epochs": [1]}, progress=1), "progress"),
]


@pytest.mark.parametrize("name,call,words", API_ROWS, ids=[r[0] for r in API_ROWS])
def test_the_api_checks_its_arguments_types(name, call, words):
    with pytest.raises(ascendsim.InputError) as e:
        call()
    assert words in str(e.value)


def test_tune_api_checks_its_arguments():
    import ascendsim.tune as tune
    pytest.importorskip("optuna")
    for kw, words in (({"epochs": "2"}, "epochs"), ({"budget": True}, "budget"), ({"budget": 2.0}, "budget"),
                      ({"seed": -1}, "seed"), ({"seed": 2 ** 32}, "seed"), ({"seed": "1"}, "seed"),
                      ({"parallel": "2"}, "parallel"), ({"explain": "no"}, "explain"), ({"fix": "strategy"}, "fix"),
                      ({"objective": "serving_goodput"}, "serving_goodput"), ({"steps_per_epoch": 0}, "steps_per_epoch"),
                      ({"objective": "serving_goodput", "model": ONNX}, "model")):
        with pytest.raises(ascendsim.InputError, match=words.replace("[", r"\[")):
            tune.tune("lenet5" if "model" not in kw else "gpt", **{"budget": 2, **kw})


# The search space, fuzzed -------------------------------------------------------------------------

KNOBS = ["strategy", "sink_size", "map_workers.1", "map_workers.4", "pipeline.prefetch_size", "queue.capacity",
         "pipeline.num_parallel_workers", "pipeline.cache", "amp_level", "nosuch", "", "batch_size"]
VALUES = ["", "nan", "inf", "-inf", "-1", "0", "1", "2", "3.5", "1e400", str(2 ** 64), "-" + str(2 ** 63), "true",
          "false", "loop-sink", "non-sink", "O2", "source", "16", "128", "256", "abc", "1,2", " 4", "0x10", "1e2"]


PLAUSIBLE = ["1", "2", "4", "8", "16", "32", "loop-sink", "non-sink", "graph-sink", "none", "O0"]


def fuzz_cases(seed, n):
    """``n`` (fix, set) pairs: each value hostile or, half the time, one a knob could take."""
    rng = random.Random(seed)
    value = lambda: rng.choice(PLAUSIBLE if rng.random() < 0.5 else VALUES)
    for _ in range(n):
        fix = {rng.choice(KNOBS): value() for _ in range(rng.randint(0, 2))}
        sets = {rng.choice(KNOBS[2:7] + ["link.h2d_bandwidth_gbps", "host.cpu_cores"]): value()
                for _ in range(rng.randint(0, 2))}
        yield fix, sets


def check_fuzz_case(fix, sets):
    """A result or a clean InputError; any other exception fails."""
    import ascendsim.tune as tune
    try:
        r = tune.tune("lenet5", budget=2, seed=0, steps_per_epoch=4, epochs=2, fix=fix, overrides=sets, explain=False)
    except ascendsim.InputError as e:
        assert str(e) and "Traceback" not in str(e)
        return "refused"
    except ascendsim.RunError as e:  # every trial infeasible: a failed job, reported as such
        assert str(e).startswith("no trial could run")
        return "failed"
    assert len(r.trials) == 2
    for key, value in r.data["fixed"].items():  # a fixed knob holds its value in every trial that uses it
        assert all(t["config"].get(key, value) == value for t in r.trials)
    return "ran"


@pytest.mark.parametrize("seed", range(3))
def test_fuzzed_fix_and_set_values_give_a_result_or_a_clean_input_error(seed):
    pytest.importorskip("optuna")
    outcomes = [check_fuzz_case(fix, sets) for fix, sets in fuzz_cases(seed, 12)]
    assert "refused" in outcomes  # the fuzz reaches the checks


if __name__ == "__main__":  # scripts/fuzz.sh: a longer run of the fuzz
    seeds, per_seed = int(sys.argv[1]), int(sys.argv[2])
    counts = {}
    for s in range(seeds):
        for fix, sets in fuzz_cases(1000 + s, per_seed):
            outcome = check_fuzz_case(fix, sets)
            counts[outcome] = counts.get(outcome, 0) + 1
    print("tune search space fuzz:", ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))
