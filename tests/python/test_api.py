"""The Python API (run by ctest with PYTHONPATH=build/python and ASCENDSIM_BIN=the CLI)."""
import csv
import itertools
import json
import os
import subprocess
import threading

import pytest

import ascendsim

BIN = os.environ.get("ASCENDSIM_BIN", "ascendsim")


def cli_stdout(*args):
    return subprocess.run([BIN, *map(str, args)], check=True, capture_output=True, text=True).stdout


def cli_error(*args):
    p = subprocess.run([BIN, *map(str, args)], capture_output=True, text=True)
    return p.returncode, [l[len("error: "):] for l in p.stderr.splitlines() if l.startswith("error: ")]


def test_reports_equal_the_command_lines_json_byte_for_byte():
    r = ascendsim.compare("lenet5", epochs=2, steps_per_epoch=40, sink_size=10)
    assert r.to_json() == cli_stdout("compare", "--workload", "lenet5", "--epochs", 2, "--steps-per-epoch", 40,
                                     "--sink-size", 10, "--json", "-", "-q")
    assert [run["strategy"] for run in r.runs] == list(ascendsim.STRATEGIES)
    t = ascendsim.train("resnet50", "graph-sink", batch_size=32, steps_per_epoch=20,
                        overrides={"link.h2d_bandwidth_gbps": 8})
    assert t.to_json() == cli_stdout("train", "--workload", "resnet50", "--strategy", "graph-sink", "--steps-per-epoch",
                                     20, "--set", "link.h2d_bandwidth_gbps=8", "--json", "-", "-q")
    assert r.to_dict() == json.loads(r.to_json())


def test_mindsporess_words_name_the_strategies():
    a = ascendsim.train("lenet5", dataset_sink_mode=False, steps_per_epoch=30)
    assert a.runs[0]["strategy"] == "non-sink"
    b = ascendsim.train("lenet5", dataset_sink_mode=True, sink_size=10, epochs=3, steps_per_epoch=30)
    assert b.runs[0]["strategy"] == "loop-sink" and b.runs[0]["sink_size"] == 10 and b.runs[0]["steps"] == 30
    assert b.to_json() == ascendsim.train("lenet5", "loop-sink", sink_size=10, epochs=3, steps_per_epoch=30).to_json()
    with pytest.raises(ascendsim.InputError):
        ascendsim.train("lenet5", "loop-sink", dataset_sink_mode=True)


def test_evaluation_during_training_and_its_cache():
    common = dict(workload="resnet50", batch_size=64, devices=4, steps_per_epoch=5, epochs=3, eval_every=1)
    plain = ascendsim.train(strategy="loop-sink", **common).runs[0]["evaluation"]
    cached = ascendsim.train(strategy="loop-sink", overrides={"pipeline.eval_cache": "map"},
                             **common).runs[0]["evaluation"]
    assert [p["after_epoch"] for p in plain["passes"]] == [1, 2, 3]
    assert cached["first_pass_s"] > plain["first_pass_s"]            # the cache is written
    assert cached["later_pass_mean_s"] < plain["later_pass_mean_s"]  # and read
    with pytest.raises(ascendsim.InputError, match="--eval-every"):
        ascendsim.train(strategy="loop-sink", eval_every=-2)



def test_checkpoints_and_failures_as_keywords():
    common = dict(workload="resnet50", devices=8, steps_per_epoch=5, epochs=4, checkpoint_every=10)
    run = ascendsim.train(strategy="loop-sink", device_mtbf_hours=5, fault_seeds=20, **common).runs[0]
    assert run.get("checkpoint", {}).get("saves") == 2
    parts = run["time_to_train_s"]
    assert parts["total"] == pytest.approx(parts["training"] + parts["evaluation"] + parts["initialisation"]
                                           + parts["exposed_communication"] + parts["checkpoint"], rel=1e-12)
    faults = run["faults"]
    assert faults["draws"]["seeds"] == 20
    assert parts["expected_with_failures"] == faults["expected_time_to_train_s"] > parts["total"]
    assert run == json.loads(cli_stdout("train", "--workload", "resnet50", "--strategy", "loop-sink", "--devices", 8,
                                        "--steps-per-epoch", 5, "--epochs", 4, "--checkpoint-every", 10,
                                        "--device-mtbf-hours", 5, "--fault-seeds", 20, "--json", "-", "-q"))["runs"][0]
    assert ascendsim.train(strategy="loop-sink", checkpoint_async=True, **common).runs[0]["checkpoint"]["async"]
    with pytest.raises(ascendsim.InputError, match="--checkpoint-every: must be a positive number of steps"):
        ascendsim.train(strategy="loop-sink", checkpoint_every=0)
    with pytest.raises(ascendsim.InputError, match="--device-mtbf-hours"):
        ascendsim.train(strategy="loop-sink", checkpoint_every=10, device_mtbf_hours=-1)


SOURCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")


def test_a_data_script_is_the_pipeline_of_the_run_as_on_the_command_line(tmp_path):
    script = os.path.join(SOURCE, "configs", "data", "resnet-cifar10.yaml")
    r = ascendsim.train("resnet18", "loop-sink", data=script, steps_per_epoch=20)
    assert r.to_json() == cli_stdout("train", "--workload", "resnet18", "--strategy", "loop-sink", "--data", script,
                                     "--steps-per-epoch", 20, "--json", "-", "-q")
    tree = [stage["stage"] for stage in r.runs[0]["data"]["tree"]]
    assert tree[0] == "Cifar10Dataset"
    assert "Map(RandomCrop,RandomHorizontalFlip,Resize,Rescale,Normalize,HWC2CHW)" in tree
    with pytest.raises(ascendsim.InputError, match="data: a string"):
        ascendsim.train("resnet18", "loop-sink", data=3)
    bad = tmp_path / "bad.yaml"
    bad.write_text("dataset: cifar10\nmaps:\n  - ops: [Sharpen]\n")
    with pytest.raises(ascendsim.InputError, match="unknown map op 'Sharpen'"):
        ascendsim.train("resnet18", "loop-sink", data=str(bad))
    code, errors = cli_error("train", "--workload", "resnet18", "--strategy", "loop-sink", "--data",
                             str(tmp_path / "none.yaml"))
    assert code == 2 and len(errors) == 1 and "none.yaml: no such file" in errors[0]


def test_a_run_to_a_target_accuracy_trains_the_curves_epochs(tmp_path):
    curve = tmp_path / "curve.csv"
    curve.write_text("epoch,top1\n1,0.4\n2,0.6\n3,0.7\n")
    report = ascendsim.train(strategy="loop-sink", steps_per_epoch=5, eval_every=1, accuracy_curve=str(curve),
                             target_accuracy=0.65)
    assert report["target"]["epochs"] == 3  # 0.6 at epoch 2 is short of 0.65
    run = report.runs[0]
    assert run["epochs"] == 3
    parts = run["time_to_train_s"]
    assert parts["total"] == pytest.approx(parts["training"] + parts["evaluation"] + parts["initialisation"]
                                           + parts["exposed_communication"], rel=1e-12)
    with pytest.raises(ascendsim.InputError, match="never reaches 0.9"):
        ascendsim.train(strategy="loop-sink", steps_per_epoch=5, eval_every=1, accuracy_curve=str(curve),
                        target_accuracy=0.9)



def test_lars_passes_through_and_adds_its_kernels():
    plain = ascendsim.train("resnet50", strategy="loop-sink", steps_per_epoch=4)
    lars = ascendsim.train("resnet50", strategy="loop-sink", steps_per_epoch=4, optimizer="lars")
    assert lars["recipe"]["optimizer"] == "lars" and plain["recipe"]["optimizer"] == "momentum"
    assert lars.runs[0]["step_trace_ms"]["tail"]["p50"] > plain.runs[0]["step_trace_ms"]["tail"]["p50"]
    with pytest.raises(ascendsim.InputError, match="LARS applies to the ResNet"):
        ascendsim.train("lenet5", strategy="loop-sink", steps_per_epoch=4, optimizer="lars")


FASHION = "/usr/share/datasets/fashion-mnist"


@pytest.mark.skipif(not os.path.exists(FASHION), reason="dataset-fashion-mnist is not installed")
def test_functional_runs_take_their_seed_and_initialisers():
    args = dict(steps_per_epoch=3, functional=True, dataset=FASHION, seed=4)
    script = ascendsim.train("lenet5", "non-sink", **args)
    he = ascendsim.train("lenet5", "non-sink", init="he-uniform", **args)
    assert he.to_json() == cli_stdout("train", "--workload", "lenet5", "--strategy", "non-sink", "--steps-per-epoch",
                                      3, "--functional", "--dataset", FASHION, "--seed", 4, "--init", "he-uniform",
                                      "--json", "-", "-q")
    fs, fh = script.runs[0]["functional"], he.runs[0]["functional"]
    assert (fs["seed"], fs["init"], fh["seed"], fh["init"]) == (4, "script", 4, "he-uniform")
    # The same batches from other weights: other losses, all near chance (ln 10) at the start.
    assert [l[2] for l in fs["losses"]] != [l[2] for l in fh["losses"]]
    assert all(abs(l[2] - 2.303) < 0.5 for l in fs["losses"] + fh["losses"])
    with pytest.raises(ascendsim.InputError, match="--init ones: give one of script, he-uniform"):
        ascendsim.train("lenet5", "non-sink", init="ones", **args)


def test_semi_auto_parallel_slices_the_image():
    r = ascendsim.train("mlp-slice", "non-sink", devices=8, steps_per_epoch=10, parallel_mode="semi-auto",
                        dataset_strategy="((1,1,1,4),(1,))")
    p = r.to_dict()["parallel"]
    assert p["parameters"]["per_device"] < p["parameters"]["whole"]
    assert [c["kind"] for c in p["collectives"]] == ["AllReduce"]
    assert p["collectives"][0]["group"] == {"size": 4, "stride": 1}


def test_errors_raise_with_the_command_lines_messages():
    with pytest.raises(ascendsim.InputError) as e:
        ascendsim.compare("lenet6")
    code, lines = cli_error("compare", "--workload", "lenet6")
    assert code == 2 and str(e.value) == "\n".join(lines)
    with pytest.raises(ascendsim.InputError) as e:
        ascendsim.train("lenet5", "loop-sink", overrides={"link.h2d_bandwidth_gbps": -1})
    assert "link.h2d_bandwidth_gbps" in str(e.value)
    # ResNet-50 fed by one pipeline worker with a 10 ms GetNext timeout: the job fails midway.
    starving = {"pipeline.num_parallel_workers": 1, "aicpu.op_timeout_s": 0.01, "host.graph_load_us": 2000000}
    with pytest.raises(ascendsim.RunError) as e:
        ascendsim.train("resnet50", "loop-sink", steps_per_epoch=100, overrides=starving)
    assert "GetNext timed out" in str(e.value)


def test_runs_in_threads_equal_runs_one_after_another():
    kw = dict(steps_per_epoch=60, epochs=2)
    alone = [ascendsim.train("lenet5", s, **kw).to_json() for s in ("non-sink", "loop-sink")]
    got = [None, None]

    def run(i, s):
        got[i] = ascendsim.train("lenet5", s, **kw).to_json()

    threads = [threading.Thread(target=run, args=(i, s)) for i, s in enumerate(("non-sink", "loop-sink"))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert got == alone


def test_info_op_params_and_chips():
    i = ascendsim.info("resnet50", batch_size=32)
    assert i["workload"] == "resnet50" and i["batch_size"] == 32
    o = ascendsim.op("matmul", m=1024, k=1024, n=1024)
    assert o == json.loads(cli_stdout("op", "--type", "matmul", "--m", 1024, "--k", 1024, "--n", 1024, "--json"))
    p = ascendsim.params("ascend910")
    assert p["link.h2d_bandwidth_gbps"]["value"] == 24 and p["link.h2d_bandwidth_gbps"]["unit"] == "GB/s"
    assert set(ascendsim.chips()) >= {"ascend910", "ascend310"}


def test_the_server_keyword_picks_the_preset_and_reports_it():
    servers = ascendsim.servers()
    assert servers["atlas800-9000"]["host_cpu_cores"] == 192 and servers["atlas800-9000"]["chip"] == "ascend910"
    assert servers["generic-x86"]["host_cpu_cores"] == 32
    assert ascendsim.info("lenet5", server="atlas800-9000")["server"] == "atlas800-9000"
    assert ascendsim.params(server="atlas800-9000")["host.cpu_cores"]["value"] == 192
    r = ascendsim.train("lenet5", "loop-sink", steps_per_epoch=20, server="atlas800-9000")
    assert r.to_json() == cli_stdout("train", "--workload", "lenet5", "--strategy", "loop-sink", "--steps-per-epoch",
                                     20, "--server", "atlas800-9000", "--json", "-", "-q")
    assert r.to_dict()["config"]["server"]["name"] == "atlas800-9000"
    with pytest.raises(ascendsim.InputError, match="unknown server 'atlas900'.*atlas800-9000, atlas800t-a2, cloudbrain2, generic-x86"):
        ascendsim.train("lenet5", "loop-sink", server="atlas900")


def test_a_report_becomes_a_dataframe():
    df = ascendsim.compare("lenet5", steps_per_epoch=20).to_dataframe()
    assert list(df["strategy"]) == list(ascendsim.STRATEGIES)
    assert (df["samples_per_s"] > 0).all() and "launch_s" in df.columns


GRID = {"sink_size": [1, 10, 100], "link.h2d_bandwidth_gbps": [8, 32], "epochs": [1, 2]}


def test_a_sweep_on_a_dask_cluster_equals_the_local_sweep_and_keeps_going_past_a_failure():
    from distributed import Client, LocalCluster

    local = ascendsim.sweep("lenet5", GRID, strategies=["loop-sink", "graph-sink"], steps_per_epoch=50)
    assert len(local.points) == 12 and not local.failed
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster, \
            Client(cluster) as client:
        seen = []
        remote = ascendsim.sweep("lenet5", GRID, strategies=["loop-sink", "graph-sink"], steps_per_epoch=50,
                                 client=client, progress=lambda d, f, t: seen.append((d, f, t)))
        assert remote.rows() == local.rows()
        assert [p["report"] for p in remote.points] == [p["report"] for p in local.points]
        assert seen[-1] == (12, 0, 12)
        # sink_size 0 is no sink size: that point fails with its error, the others run.
        bad = ascendsim.sweep("lenet5", {"sink_size": [1, 0, 10]}, strategies=["loop-sink"], steps_per_epoch=50,
                              client=client, progress=lambda *a: None)
    assert [p["point"]["sink_size"] for p in bad.failed] == [0]
    assert bad.failed[0]["kind"] == "InputError" and "--sink-size" in bad.failed[0]["error"]
    assert "report" in bad.points[0] and "report" in bad.points[2]
    assert len(local.to_dataframe()) == 24


def test_the_module_runs_a_sweep_from_the_shell(tmp_path):
    out = tmp_path / "sweep.json"
    env = dict(os.environ)
    p = subprocess.run(["/usr/bin/python3", "-m", "ascendsim", "sweep", "--grid", "sink_size=1,10", "--strategies",
                        "loop-sink", "--steps-per-epoch", "30", "--json", str(out)], capture_output=True, text=True,
                       env=env)
    assert p.returncode == 0, p.stderr
    rows = [l.split("\t") for l in p.stdout.strip().splitlines()]
    assert rows[0][:2] == ["sink_size", "strategy"] and len(rows) == 3
    points = json.load(open(out))
    assert [pt["point"]["sink_size"] for pt in points] == [1, 10]
    assert points[1]["report"]["runs"][0]["sink_size"] == 10


def test_a_step_has_one_number_in_every_output(tmp_path):
    """Steps are numbered from 1 everywhere: --per-step's rows, --step-trace's table and the steps
    --trace-steps keeps name the same steps. Loop sink in sinks of 4: step 5, a sink's first, is
    the one with the launch's gap before it."""
    csv_file, trace = tmp_path / "s.csv", tmp_path / "t.json"
    out = cli_stdout("train", "-s", "loop-sink", "--sink-size", 4, "--epochs", 3, "--steps-per-epoch", 4,
                     "--per-step", csv_file, "--step-trace", "4:7", "--trace", trace, "--trace-steps", "4:7", "-q")
    rows = list(csv.DictReader(open(csv_file)))
    assert [int(r["step"]) for r in rows] == list(range(1, 13))
    step_s = {int(r["step"]): float(r["step_s"]) for r in rows}
    gap = {int(r["step"]): float(r["iteration_interval_s"]) for r in rows}
    assert max(gap[n] for n in range(2, 13)) == gap[5] == gap[9] > 10 * gap[6]  # a new sink's launch
    # The table lists steps 4 to 6 with the CSV's values for the steps of those numbers.
    assert "step trace of loop-sink, steps 4 to 6 (ms)" in out
    table = {}
    for line in out.split("step trace of loop-sink, steps 4 to 6 (ms)")[1].splitlines()[2:5]:
        cells = line.split()
        table[int(cells[0])] = (float(cells[1]), float(cells[4]))
    assert sorted(table) == [4, 5, 6]
    for n, (interval_ms, ms) in table.items():
        assert ms == pytest.approx(1e3 * step_s[n], abs=6e-5)
        assert interval_ms == pytest.approx(1e3 * gap[n], abs=6e-5)
    # The trace keeps steps 4 to 6: one forward op in each (conv2: conv1 is UB-fused with its ReLU),
    # inside that step's time (the CSV's steps add up to the run's time from its start).
    ends = list(itertools.accumulate(step_s[n] for n in range(1, 13)))
    events = json.load(open(trace))
    events = events["traceEvents"] if isinstance(events, dict) else events
    starts = sorted(e["ts"] / 1e6 for e in events if e.get("name") == "conv2/Conv2D" and e.get("ph") == "X")
    assert len(starts) == 3
    for n, t in zip((4, 5, 6), starts):
        assert ends[n - 2] < t < ends[n - 1], (n, t)
    # Step 0 is no step.
    code, errors = cli_error("train", "-s", "non-sink", "--steps-per-epoch", 4, "--step-trace", "0:2")
    assert code == 2 and "--step-trace '0:2'" in errors[0] and "numbered from 1" in errors[0]


def test_a_sink_size_sweep_means_the_same_in_python_and_on_the_command_line(tmp_path):
    """sink_size in a sweep keeps the training (epochs x steps per epoch) and changes the sink, in
    Python's grid as on the command line: the same rows, figure for figure."""
    py = ascendsim.sweep("lenet5", {"sink_size": [1, 4, 7]}, epochs=2, steps_per_epoch=12)
    out = tmp_path / "sweep.json"
    cli_stdout("sweep", "--workload", "lenet5", "--param", "sink_size", "--values", "1,4,7", "--epochs", 2,
               "--steps-per-epoch", 12, "--json", out, "-q")
    rows = json.load(open(out))["rows"]
    assert not py.failed and len(py.rows()) == len(rows) == 3 * 4
    for p, c in zip(py.rows(), rows):
        assert (p["sink_size"], p["strategy"]) == (c["value"], c["strategy"])
        assert (p["steps"], p["sim_time_s"], p["step_ms_mean"], p["step_ms_p50"]) == (
            c["steps"], c["sim_time_s"], c["step_time_ms"]["mean"], c["step_time_ms"]["p50"])
    # One meaning: 24 steps of training; loop sink runs them in ceil(24 / S) sinks of S steps.
    for point, report in zip(py.points, py.reports()):
        sink = point["point"]["sink_size"]
        for run in report.runs:
            if run["strategy"] == "loop-sink":
                sinks = -(-24 // sink)
                assert (run["sink_size"], run["steps"], run["interactions"]["graph_launches"]) == (
                    sink, sinks * sink, sinks)
            else:
                assert run["steps"] == 24
    # train()'s sink_size with epochs stays Model.train's: epochs sinks of S steps.
    assert ascendsim.train("lenet5", "loop-sink", sink_size=7, epochs=2, steps_per_epoch=12).runs[0]["steps"] == 14


def test_ub_fusion_passes_through_and_off_is_the_graph_without_it():
    on = ascendsim.train("lenet5", "graph-sink", steps_per_epoch=10, ub_fusion=True)
    off = ascendsim.train("lenet5", "graph-sink", steps_per_epoch=10, ub_fusion=False)
    default = ascendsim.train("lenet5", "graph-sink", steps_per_epoch=10)
    assert default.to_json() == on.to_json()  # on by default, as MindSpore's graph mode
    assert on.to_dict()["recipe"]["ub_fusion"] is True
    assert off.to_dict()["recipe"]["ub_fusion"] is False
    assert off.to_json() == cli_stdout("train", "--workload", "lenet5", "--strategy", "graph-sink",
                                       "--steps-per-epoch", 10, "--ub-fusion", "false", "--json", "-", "-q")
    assert on.to_dict()["graph_passes"][-1]["pass"] == "ub_fusion"
    assert "ub_fusion" not in [p["pass"] for p in off.to_dict()["graph_passes"]]
    assert on.to_dict()["graph_passes"][-1]["ops"] < off.to_dict()["graph_passes"][-1]["ops"]


def test_booleans_set_parameters_and_info_takes_ub_fusion():
    # Python's True/False reach --set as true/false; HBM sharing off gives the eight devices'
    # backward pass its time alone, so the step is shorter and nothing is lost to contention.
    common = dict(batch_size=32, steps_per_epoch=10, devices=8, all_reduce_fusion=[85, 160])
    shared = ascendsim.train("resnet50", "loop-sink", **common).runs[0]
    alone = ascendsim.train("resnet50", "loop-sink", overrides={"memory.hbm_contention": False}, **common).runs[0]
    assert shared["contention"]["hbm_shared"] is True and alone["contention"]["hbm_shared"] is False
    assert shared["contention"]["hbm_lost_ms_per_step"]["compute_stream"] > 0
    assert alone["contention"]["hbm_lost_ms_per_step"]["compute_stream"] == 0
    assert alone["step_time_ms"]["mean"] < shared["step_time_ms"]["mean"]
    plain, fused = ascendsim.info("resnet50", batch_size=32, ub_fusion=False), ascendsim.info("resnet50", batch_size=32)
    assert fused["graph_passes"][-1]["pass"] == "ub_fusion"
    assert fused["graph_passes"][-1]["ops"] < plain["graph_passes"][-1]["ops"]
