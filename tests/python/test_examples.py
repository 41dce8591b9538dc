"""Each example runs as it is and says what it promises."""
import os
import subprocess

import pytest

EXAMPLES = os.path.join(os.path.dirname(__file__), "..", "..", "examples")


def run(name, cwd):
    p = subprocess.run(["/usr/bin/python3", os.path.join(EXAMPLES, name)], capture_output=True, text=True, cwd=cwd,
                       timeout=600)
    assert p.returncode == 0, p.stderr
    return p.stdout


def test_data_sink_patterns(tmp_path):
    out = run("data_sink_patterns.py", tmp_path).splitlines()
    ms = [float(l.split("ms/step")[0].split()[-1]) for l in out if "ms/step" in l]
    assert len(ms) == 3 and ms[0] > ms[1] >= ms[2]  # fewer launches, shorter steps
    png = tmp_path / "data_sink_patterns.png"
    assert png.exists() and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_sink_size_sweep_dask(tmp_path):
    rows = [l.split() for l in run("sink_size_sweep_dask.py", tmp_path).splitlines()[1:]]
    assert [int(r[0]) for r in rows] == [1, 2, 5, 10, 25, 50, 125, 250, 625, 1250, 1875]
    ms = [float(r[1]) for r in rows]
    assert all(a >= b for a, b in zip(ms, ms[1:]))  # longer sinks, fewer host round trips


def test_fusion_split_study(tmp_path):
    rows = {l.split()[0]: [float(x) for x in l.split()[-3:]]
            for l in run("fusion_split_study.py", tmp_path).splitlines()[1:]}
    assert set(rows) == {"one", "85,160", "60,160", "119,160", "40,100,160"}
    assert rows["85,160"][0] < rows["one"][0]  # a split shortens the tail
