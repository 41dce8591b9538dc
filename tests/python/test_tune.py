"""ascendsim tune (python/ascendsim/tune.py): the seeded search's answers on the seed LeNet-5 job
and a data-bound ResNet-50, its determinism, budget and constraints, a synthetic objective with
a known optimum, infeasible trials, and a Dask cluster's run against one process's."""
import json
import subprocess
import os

import pytest

optuna = pytest.importorskip("optuna")  # Debian python3-optuna


def test_lenet_finds_loop_sink_past_the_break_even():
    import ascendsim
    import ascendsim.tune as tune
    r = tune.tune("lenet5", budget=40, seed=1)
    best = r.best["config"]
    assert best["strategy"] == "loop-sink"
    sweep = json.loads(ascendsim.cli("sweep", "--workload", "lenet5", "--param", "sink_size",
                                     "--values", "1,2,5,10,20,50,100,200,500,1875", "--json", "-", "-q"))
    assert sweep["break_even_sink_size"] <= best["sink_size"] <= 1875
    # Every trial ran the job's 1875 steps, whatever its sink size.
    for t in r.trials:
        assert t["steps"] == 1875
    assert r.best["value"] > 3 * r.start["value"]
    text = r.text()
    assert "strategy: non-sink -> loop-sink" in text and "removed: op and graph launches" in text
    assert text.splitlines()[2].startswith("change: strategy=loop-sink")


def test_a_data_bound_resnet_gets_map_workers_until_the_device_bounds_it():
    import ascendsim.tune as tune
    r = tune.tune("resnet50", budget=40, seed=1, strategy="loop-sink", steps_per_epoch=20,
                  overrides={"pipeline.num_parallel_workers": 1})
    # The decoding map() call's workers (map_workers.1), the label's TypeCast apart.
    assert r.start["config"]["map_workers.1"] == 1 and r.start["config"]["map_workers.2"] == 1
    assert r.best["config"]["map_workers.1"] >= 8
    why = r.data["explanation"]
    assert why["removed"][0]["phase"] == "wait_data" and why["removed"][0]["to_ms"] == 0
    assert why["bound_by"]["phase"] == "device_compute"
    assert "removed: the device waiting in GetNext for data (wait_data)" in r.text()
    workers = next(c for c in why["changes"] if c["knob"] == "map_workers.1")
    assert workers["worth"] > 1.5 and why["changes"][0] is workers
    assert "map_workers.1" in list(r.data["importance"])[:2]


def test_a_data_scripts_map_calls_are_the_knobs_and_its_workers_the_start(tmp_path):
    import ascendsim.tune as tune
    script = tmp_path / "pipe.yaml"
    script.write_text("dataset: cifar10\nmaps:\n"
                      "  - {workers: 1, ops: [{RandomCrop: {size: 32, padding: 4}}, RandomHorizontalFlip]}\n"
                      "  - {workers: 2, ops: [{Resize: {size: [224, 224]}}, Rescale, Normalize, HWC2CHW]}\n"
                      "  - {column: label, workers: 3, ops: [TypeCast]}\n")
    r = tune.tune("resnet18", budget=6, seed=2, strategy="loop-sink", steps_per_epoch=20, data=str(script))
    start = r.start["config"]
    assert (start["map_workers.1"], start["map_workers.2"], start["map_workers.3"]) == (1, 2, 3)
    assert "map_workers.4" not in start
    # The start is the script's run, as train runs it.
    import ascendsim
    plain = ascendsim.train("resnet18", "loop-sink", steps_per_epoch=20, sink_size=20, data=str(script))
    assert r.start["value"] == pytest.approx(plain.runs[0]["samples_per_s"], rel=1e-9)


def test_the_same_seed_gives_the_same_answer_and_a_budget_runs_that_many_simulations(monkeypatch):
    import ascendsim.tune as tune
    calls = []
    real = tune.train
    monkeypatch.setattr(tune, "train", lambda *a, **k: calls.append(1) or real(*a, **k))
    a = tune.tune("lenet5", budget=13, seed=7, steps_per_epoch=50)
    # The budget's simulations, then one per knob the best changed (what each change is worth).
    assert len(a.trials) == 13 and len(calls) == 13 + a.data["ablation_simulations"]
    ablated = [c for c in a.data["explanation"]["changes"] if "without" in c]
    assert ablated and a.data["ablation_simulations"] >= len(ablated)
    calls.clear()
    tune.tune("lenet5", budget=13, seed=7, steps_per_epoch=50, explain=False)
    assert len(calls) == 13
    b = tune.tune("lenet5", budget=13, seed=7, steps_per_epoch=50)
    assert a.to_json() == b.to_json()
    c = tune.tune("lenet5", budget=13, seed=8, steps_per_epoch=50)
    assert [t["config"] for t in c.trials] != [t["config"] for t in a.trials]


def test_a_fixed_knob_never_changes():
    import ascendsim.tune as tune
    r = tune.tune("lenet5", budget=16, seed=2, steps_per_epoch=50,
                  fix={"map_workers.1": 4, "strategy": "loop-sink"})
    for t in r.trials:
        assert t["config"]["map_workers.1"] == 4 and t["config"]["strategy"] == "loop-sink"
        # What reached the simulator, read back from the run's report.
        assert t["applied"]["map_workers.1"] == 4 and t["applied"]["strategy"] == "loop-sink"
    with pytest.raises(tune.InputError, match="not a knob"):
        tune.tune("lenet5", budget=2, fix={"pipeline.nope": 1})
    with pytest.raises(tune.InputError, match="outside the knob's range"):
        tune.tune("lenet5", budget=2, fix={"map_workers.1": 0})


def test_a_synthetic_objective_finds_its_known_optimum_within_the_budget():
    import ascendsim.tune as tune
    # 96 configurations, 48 trials; every seed tried finds the one best.
    knobs = [tune.Knob("x", "int", 10, 41), tune.Knob("y", "cat", choices=["a", "b", "c"])]
    f = lambda c: -(c["x"] - 21) ** 2 + (50 if c["y"] == "b" else 0)
    for seed in range(5):
        trials = tune.search(knobs, lambda configs: [{"v": f(c)} for c in configs], lambda r: r["v"], budget=48,
                             seed=seed, maximise=True, fix={})
        best = max(trials, key=lambda t: t["value"])
        assert best["config"] == {"x": 21, "y": "b"}, seed


def test_infeasible_trials_are_recorded_never_best():
    import ascendsim.tune as tune
    r = tune.tune("resnet50", budget=16, seed=0, strategy="loop-sink", steps_per_epoch=10, batch_size=64,
                  search_batch_size=True, overrides={"memory.hbm_gib": 6})
    bad = [t for t in r.trials if "infeasible" in t]
    assert bad and all(t["kind"] == "out of device memory" and t["value"] is None for t in bad)
    assert r.best["number"] not in {t["number"] for t in bad}
    assert "infeasible: out of device memory" in r.text()


def test_a_dask_cluster_gives_the_answer_of_one_process():
    import ascendsim.tune as tune
    from distributed import Client, LocalCluster
    local = tune.tune("lenet5", budget=12, seed=4, steps_per_epoch=40, parallel=2)
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster, \
            Client(cluster) as client:
        remote = tune.tune("lenet5", budget=12, seed=4, steps_per_epoch=40, client=client)
    assert remote.data["parallel"] == 2
    assert remote.to_json() == local.to_json()


def test_the_command_line_writes_text_json_and_html(tmp_path):
    bin = os.environ["ASCENDSIM_BIN"]
    out = subprocess.run([bin, "tune", "--workload", "lenet5", "--budget", "6", "--steps-per-epoch", "30",
                          "--json", str(tmp_path / "t.json"), "--html", str(tmp_path / "t.html"), "-q"],
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("tune lenet5: 6 trials")
    data = json.loads((tmp_path / "t.json").read_text())
    assert data["kind"] == "tune" and len(data["trials"]) == 6
    assert "<svg" in (tmp_path / "t.html").read_text()
    bad = subprocess.run([bin, "tune", "--workload", "lenet5", "--objective", "fastest", "-q"],
                         capture_output=True, text=True)
    assert bad.returncode == 2 and "objective" in bad.stderr


def test_serving_goodput_finds_a_launch_mode_that_meets_the_service_level():
    # A tight time per output token that op-by-op launches cannot meet: the search leaves eager,
    # and without that change nothing is served within it.
    import ascendsim.tune as tune
    shape = {"layers": 2, "hidden": 256, "heads": 4, "ffn": 1024, "vocab": 2000}
    r = tune.tune("gpt", objective="serving_goodput", budget=16, seed=0, shape=shape, rate=200, requests=300,
                  slo_tpot_ms=0.5)
    assert r.start["config"]["launch"] == "eager" and r.start["value"] == 0
    assert r.best["config"]["launch"] != "eager" and r.best["value"] > 100
    launch = next(c for c in r.data["explanation"]["changes"] if c["knob"] == "launch")
    assert launch["without"] == 0
    assert r.data["explanation"]["removed"][0]["phase"] in ("launch", "scheduler")
    # On four devices the replica's tensor-parallel group is a knob too.
    four = tune.tune("gpt", objective="serving_goodput", budget=6, seed=0, shape=shape, rate=200, requests=100,
                     devices=4, explain=False)
    assert next(k for k in four.data["knobs"] if k["key"] == "tensor_parallel")["choices"] == [1, 2, 4]


def test_a_transformer_searches_its_layout_within_the_device_limit():
    import ascendsim.tune as tune
    shape = {"layers": 4, "hidden": 256, "heads": 4, "seq_length": 128}
    r = tune.tune("gpt", budget=12, seed=3, batch_size=8, steps_per_epoch=4, strategy="graph-sink", shape=shape,
                  max_devices=4, explain=False)
    keys = [k["key"] for k in r.data["knobs"]]
    assert "layout" in keys and "devices" in keys and r.data["pareto_cost"] == "devices"
    for key in ("sequence_parallel", "gradient_accumulation", "optimizer_shard_level"):
        assert key in keys
    for t in r.trials:  # the conditional knobs only where they apply
        c = t["config"]
        assert "optimizer_shard_level" not in c or c["optimizer_shard"]
        assert "sequence_parallel" not in c or not c["layout"].startswith("tp1-")
    layouts = next(k["choices"] for k in r.data["knobs"] if k["key"] == "layout")
    assert all(int(l.split("-")[0][2:]) * int(l.split("-")[1][2:]) <= 4 for l in layouts)
    for t in r.trials:
        assert t["config"]["devices"] <= 4
    front = r.data["pareto"]
    assert [p["cost"] for p in front] == sorted(p["cost"] for p in front)
    assert all(a["value"] < b["value"] for a, b in zip(front, front[1:]))


def test_an_infeasible_start_still_finds_and_explains_a_best(tmp_path):
    # One map worker cannot feed the device before GetNext's (shortened) timeout: the start fails,
    # the search goes on, and the change that makes the job run is named.
    import ascendsim.tune as tune
    r = tune.tune("resnet50", budget=12, seed=0, strategy="loop-sink", steps_per_epoch=20,
                  overrides={"pipeline.num_parallel_workers": 1, "aicpu.op_timeout_s": 0.02})
    assert r.start["value"] is None and r.start["kind"] == "GetNext timeout"
    assert r.best["value"] > 0 and r.data["gain"] is None
    workers = next(c for c in r.data["explanation"]["changes"] if c["knob"] == "map_workers.1")
    assert workers["without"] is None
    assert "start: cannot run (GetNext timeout)" in r.text()
    quiet = tune.tune("lenet5", budget=6, seed=0, steps_per_epoch=30, explain=False)
    assert "; worth" not in quiet.text() and "cannot run" not in quiet.text()


def test_a_data_parallel_job_searches_its_allreduce_groups():
    import ascendsim.tune as tune
    r = tune.tune("resnet50", budget=6, seed=0, devices=8, strategy="loop-sink", steps_per_epoch=10,
                  fix={"all_reduce_fusion": "50%"}, explain=False)
    assert any(k["key"] == "all_reduce_fusion" for k in r.data["knobs"])
    assert all(t["value"] and t["config"]["all_reduce_fusion"] == "50%" for t in r.trials)
    kw = tune._run_kwargs({"strategy": "loop-sink", "all_reduce_fusion": "33%+67%"},
                          {"gradients": 161, "dataset_steps": 10})[1]
    assert kw["all_reduce_fusion"] == [53, 107]
