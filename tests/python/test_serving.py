"""LLM serving from Python (ascendsim.serve): the launch modes' order in serving units, a rate
sweep's report and chart, and suites and diff with serving reports."""
import json
import os
import subprocess

import pytest

SMALL = {"layers": 2, "hidden": 256, "heads": 4, "ffn": 1024, "vocab": 2000}


def test_serve_reports_each_launch_mode_in_serving_units(tmp_path):
    import ascendsim
    r = ascendsim.serve("gpt", gpt_size="llama-7b", server="atlas800t-a2", devices=4, tensor_parallel=4,
                        rate=2, requests=60, launch="all", decode_batches=[1, 128])
    assert [run["launch"] for run in r.runs] == list(ascendsim.LAUNCH_MODES)
    eager, graph, multi = r.runs
    # Eager is the slowest per decode step, graph closes most of the gap, multi-step a little more.
    assert eager["decode_step_ms"]["mean"] > 1.5 * graph["decode_step_ms"]["mean"]
    assert multi["decode_step_ms"]["mean"] < graph["decode_step_ms"]["mean"]
    assert eager["tpot_ms"]["p50"] > graph["tpot_ms"]["p50"]
    # The launches explain the difference.
    gap = eager["decode_step_ms"]["mean"] - graph["decode_step_ms"]["mean"]
    launches = eager["decode_step_ms"]["phases"]["launch"] - graph["decode_step_ms"]["phases"]["launch"]
    assert launches > 0.7 * gap
    # Batch 1 against batch 128: the gap shrinks.
    b1, b128 = r["decode_step_by_batch"]
    ratio = lambda p: p["modes"]["eager"]["step_ms"] / p["modes"]["graph"]["step_ms"]
    # (at batch 1 the device's own decode, HBM-bound at the sustained bandwidth, hides part of the
    # eager launches: about 1.9x)
    assert ratio(b1) > 1.7 and ratio(b128) < 1.2
    for run in r.runs:
        assert run["requests"] == 60 and run["kv_cache"]["blocks_in_use_at_end"] == 0
        assert run["ttft_ms"]["p50"] <= run["ttft_ms"]["p99"]
    frame = r.to_dataframe()
    assert list(frame["launch"]) == ["eager", "graph", "multi-step"]


def test_a_framework_preset_makes_the_eager_step_host_bound_and_an_unknown_one_is_refused():
    import ascendsim
    kw = dict(gpt_size="llama-7b", server="atlas800t-a2", rate=2, requests=20, launch="all", decode_batches=[1])
    plain = ascendsim.serve("gpt", **kw)
    python = ascendsim.serve("gpt", framework="vllm-ascend-eager", **kw)
    step = lambda r, i: r.runs[i]["decode_step_ms"]
    # Each eager launch from Python costs framework.op_us on the Kunpeng core: the launches, not the
    # device, set the eager step; the captured graph launches once and is the same either way.
    assert step(python, 0)["mean"] > 2 * step(plain, 0)["mean"]
    assert step(python, 0)["phases"]["launch"] > step(python, 0)["phases"]["device_compute"]
    one = lambda r, mode: r["decode_step_by_batch"][0]["modes"][mode]["step_ms"]  # batch 1's step
    assert one(python, "graph") == pytest.approx(one(plain, "graph"), rel=1e-6)
    assert one(python, "eager") > 2 * one(plain, "eager")
    with pytest.raises(ascendsim.InputError, match="--framework.*vllm-ascend-eager"):
        ascendsim.serve("gpt", framework="pytorch-nightly", **kw)
    with pytest.raises(ascendsim.InputError, match="--framework"):
        ascendsim.train("lenet5", "non-sink", framework="pytorch-nightly", steps_per_epoch=2)
    r = ascendsim.train("lenet5", "non-sink", framework="vllm-ascend-eager", steps_per_epoch=4)
    assert r.runs[0]["interactions"]["op_launches"] > 0


def test_a_rate_sweep_charts_latency_against_throughput(tmp_path):
    import ascendsim
    html = tmp_path / "serve.html"
    r = ascendsim.serve("gpt", shape=SMALL, rate=20, requests=80, launch=["eager", "graph"], rates=[10, 40, 160],
                        max_seqs=32, decode_batches=[1, 32], html=str(html))
    assert len(r.sweep) == 6
    for mode in ("eager", "graph"):
        points = [p for p in r.sweep if p["launch"] == mode]
        assert [p["rate"] for p in points] == [10, 40, 160]
        # More load, more throughput and (queueing) more latency.
        assert points[0]["output_tokens_per_s"] < points[-1]["output_tokens_per_s"]
        assert points[0]["e2e_ms"]["p50"] <= points[-1]["e2e_ms"]["p50"]
    page = html.read_text()
    assert "Latency against throughput" in page and page.count("<svg") >= 4


def test_suites_and_diff_take_serving_reports(tmp_path):
    import ascendsim
    suite = tmp_path / "suite.yaml"
    suite.write_text("name: serving\nruns:\n"
                     "  - name: small\n    serve: true\n    workload: gpt\n    layers: 2\n    hidden: 256\n"
                     "    heads: 4\n    ffn: 1024\n    vocab: 2000\n    requests: 40\n    rate: 20\n"
                     "    launch: [eager, graph]\n    max_seqs: 16\n    decode_batches: [1, 16]\n")
    ascendsim.cli("suite", str(suite), "--out", str(tmp_path / "a"), "-q")
    index = json.loads((tmp_path / "a" / "index.json").read_text())
    assert index["entries"][0]["launches"] == ["eager", "graph"]
    ascendsim.cli("suite", str(suite), "--out", str(tmp_path / "b"), "-q")
    bin = os.environ["ASCENDSIM_BIN"]
    same = subprocess.run([bin, "diff", str(tmp_path / "a"), str(tmp_path / "b")], capture_output=True, text=True)
    assert same.returncode == 0, same.stdout + same.stderr
    # A slower host moves the eager run's figures past the tolerance: diff exits 1.
    slower = suite.read_text() + "    set: {host.op_launch_us: 20}\n"
    suite.write_text(slower)
    ascendsim.cli("suite", str(suite), "--out", str(tmp_path / "c"), "-q")
    out = subprocess.run([bin, "diff", str(tmp_path / "a"), str(tmp_path / "c")], capture_output=True, text=True)
    assert out.returncode == 1
    assert "small/eager" in out.stdout and "decode_step_ms.phases.launch" in out.stdout
    with pytest.raises(ascendsim.InputError, match="unknown key 'rat'"):
        suite.write_text(slower.replace("rate:", "rat:"))
        ascendsim.cli("suite", str(suite), "--out", str(tmp_path / "d"), "-q")
