"""python3 -m ascendsim sweep: a grid of configurations, locally or on a Dask cluster.
python3 -m ascendsim tune: the best configuration for a job, and why (docs/tune.md; also
`ascendsim tune`).

    python3 -m ascendsim sweep --workload resnet50 --grid sink_size=1,10,100 \\
        --grid link.h2d_bandwidth_gbps=8,16,32 --strategies loop-sink \\
        --scheduler tcp://host:8786 --json sweep.json

Each --grid KEY=V1,V2,... adds a dimension (a run setting such as sink_size, or a parameter such
as link.h2d_bandwidth_gbps); the points are their Cartesian product, the last varying fastest.
Without --scheduler the points run one after another in this process. The table printed has one
row per point and strategy; --json writes every point with its report or error. The exit status
is 0 if every point ran, 3 if some failed (they are listed), 2 for bad arguments.
"""
import argparse
import json
import os
import sys

import ascendsim


from ascendsim.tune import _parse_value as _value  # a number where the text is one


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python3 -m ascendsim", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    s = sub.add_parser("sweep", help="run a grid of configurations")
    s.add_argument("--workload", default="lenet5")
    s.add_argument("--grid", action="append", required=True, metavar="KEY=V1,V2,...")
    s.add_argument("--strategies", default=None, help="comma-separated (default: all four)")
    s.add_argument("--epochs", type=int, default=1)
    s.add_argument("--steps-per-epoch", type=int, default=None)
    s.add_argument("--batch-size", type=int, default=None)
    s.add_argument("--devices", type=int, default=1)
    s.add_argument("--chip", default="ascend910")
    s.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="a parameter for every point")
    s.add_argument("--scheduler", default=None, help="a Dask scheduler's address, e.g. tcp://host:8786")
    s.add_argument("--json", default=None, help="write every point's report or error to FILE")
    t = sub.add_parser("tune", help="search the job's knobs for the best configuration (Optuna TPE)")
    t.add_argument("--workload", default="lenet5")
    t.add_argument("--strategy", default="non-sink", help="the starting configuration's strategy")
    t.add_argument("--budget", type=int, default=50, help="trials (simulations), the start included")
    t.add_argument("--seed", type=int, default=0)
    t.add_argument("--objective", default="samples_per_s",
                   help="samples_per_s or time_to_train (training), serving_goodput (LLM serving)")
    for flag, kind, what in (("--gpt-size", str, "serving: workload gpt's shape"),
                             ("--tensor-parallel", int, "serving: ranks of a replica"),
                             ("--rate", float, "serving: requests per second"),
                             ("--requests", int, "serving: requests"),
                             ("--prompt-tokens", int, "serving: prompt length"),
                             ("--output-tokens", int, "serving: output length"),
                             ("--slo-ttft-ms", float, "serving: the goodput's time to first token"),
                             ("--slo-tpot-ms", float, "serving: the goodput's time per output token"),
                             ("--layers", int, "serving: the model's layers"), ("--hidden", int, "serving: width"),
                             ("--heads", int, "serving: heads"), ("--ffn", int, "serving: MLP width"),
                             ("--vocab", int, "serving: vocabulary")):
        t.add_argument(flag, type=kind, default=None, help=what)
    t.add_argument("--fix", action="append", default=[], metavar="KNOB=VALUE", help="hold a knob at a value")
    t.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="a parameter of the job (its starting value if it is a knob)")
    t.add_argument("--epochs", type=int, default=1)
    t.add_argument("--steps-per-epoch", type=int, default=None)
    t.add_argument("--batch-size", type=int, default=None)
    t.add_argument("--search-batch-size", action="store_true",
                   help="search the batch size too (it changes the training, not only how it runs)")
    t.add_argument("--search-amp", action="store_true",
                   help="search the AMP level too (it changes the training's numerics)")
    t.add_argument("--devices", type=int, default=1)
    t.add_argument("--max-devices", type=int, default=None,
                   help="search the devices too, in powers of two up to N")
    t.add_argument("--server", default=None)
    t.add_argument("--chip", default=None)
    t.add_argument("--scheduler", default=None, help="a Dask scheduler's address, e.g. tcp://host:8786")
    t.add_argument("--parallel", type=int, default=None,
                   help="trials per batch (default: the cluster's workers, 1 without --scheduler)")
    t.add_argument("--json", default=None, help="write the search (every trial) to FILE")
    t.add_argument("--html", default=None, help="write the report with its trade-off chart to FILE")
    t.add_argument("--quiet", "-q", action="store_true")
    a = parser.parse_args(argv)
    if a.command == "tune":
        return _tune(parser, a)

    grid = {}
    for g in a.grid:
        key, eq, values = g.partition("=")
        if not eq or not key or not values:
            parser.error(f"--grid {g}: expected KEY=V1,V2,...")
        grid[key] = [_value(v) for v in values.split(",")]
    overrides = {}
    for kv in a.set:
        key, eq, value = kv.partition("=")
        if not eq:
            parser.error(f"--set {kv}: expected KEY=VALUE")
        overrides[key] = value
    strategies = a.strategies.split(",") if a.strategies else None
    client = None
    if a.scheduler:
        from distributed import Client

        client = Client(a.scheduler)
    try:
        result = ascendsim.sweep(a.workload, grid, strategies=strategies, client=client, epochs=a.epochs,
                                 steps_per_epoch=a.steps_per_epoch, batch_size=a.batch_size, devices=a.devices,
                                 chip=a.chip, overrides=overrides,
                                 progress=lambda d, f, t: print(f"\rsweep: {d}/{t} points done, {f} failed",
                                                                end="" if d < t else "\n", file=sys.stderr,
                                                                flush=True))
    except ascendsim.InputError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    finally:
        if client is not None:
            client.close()
    keys = list(grid)
    print("\t".join(keys + ["strategy", "step ms", "samples/s"]))
    for row in result.rows():
        if "error" in row:
            print("\t".join([str(row[k]) for k in keys] + ["failed: " + row["error"]]))
        else:
            print("\t".join([str(row[k]) for k in keys] + [row["strategy"], f"{row['step_ms_mean']:.4f}",
                                                           f"{row['samples_per_s']:.0f}"]))
    if a.json:
        with open(a.json, "w") as f:
            json.dump([{"point": p["point"], **({"report": json.loads(p["report"])} if "report" in p else
                                                 {"error": p["error"], "kind": p["kind"]})}
                       for p in result.points], f, indent=2)
    return 3 if result.failed else 0


def _pairs(parser, items, flag):
    out = {}
    for kv in items:
        key, eq, value = kv.partition("=")
        if not eq or not key:
            parser.error(f"{flag} {kv}: expected KEY=VALUE")
        out[key] = value
    return out


def _tune(parser, a):
    import ascendsim.tune as tune

    if a.max_devices is not None and a.max_devices < 1:
        print(f"error: --max-devices {a.max_devices}: at least 1", file=sys.stderr)
        return 2
    if a.max_devices is not None and a.devices > a.max_devices:
        print(f"error: --devices {a.devices} exceeds --max-devices {a.max_devices}", file=sys.stderr)
        return 2
    serving = ("gpt_size", "tensor_parallel", "rate", "requests", "prompt_tokens", "output_tokens", "slo_ttft_ms",
               "slo_tpot_ms")
    job = {"devices": a.devices, "overrides": _pairs(parser, a.set, "--set")}
    if a.max_devices is not None:
        job["max_devices"] = a.max_devices
    shape = {k: getattr(a, k) for k in ("layers", "hidden", "heads", "ffn", "vocab") if getattr(a, k) is not None}
    if a.objective == "serving_goodput":
        keys = serving + ("server", "chip")
        if shape:
            job["shape"] = shape
        training = [f for f, v in (("--search-batch-size", a.search_batch_size), ("--search-amp", a.search_amp),
                                   ("--epochs", a.epochs != 1), ("--steps-per-epoch", a.steps_per_epoch is not None),
                                   ("--batch-size", a.batch_size is not None), ("--strategy", a.strategy != "non-sink"))
                    if v]
        if training:
            print(f"error: {training[0]} is a training setting; a serving job (--objective serving_goodput) takes "
                  "serving's settings (--gpt-size, --tensor-parallel, --rate, --requests, --prompt-tokens, "
                  "--output-tokens, --slo-ttft-ms, --slo-tpot-ms, --layers, ...)", file=sys.stderr)
            return 2
    else:
        job["epochs"] = a.epochs
        keys = ("steps_per_epoch", "batch_size", "server", "chip")
        given = [k for k in serving + tuple(shape) if getattr(a, k) is not None]
        if given:
            print(f"error: --{given[0].replace('_', '-')} is a serving setting: give --objective serving_goodput",
                  file=sys.stderr)
            return 2
    for key in keys:
        if getattr(a, key) is not None:
            job[key] = getattr(a, key)
    if a.search_batch_size:
        job["search_batch_size"] = True
    if a.search_amp:
        job["search_amp"] = True
    if a.quiet:
        import warnings

        warnings.simplefilter("ignore")
    tty = sys.stderr.isatty()
    progress = None if a.quiet else (lambda d, t: print(f"\rtune: {d}/{t} trials" if tty else f"tune: {d}/{t} trials",
                                                         end="" if tty and d < t else "\n", file=sys.stderr,
                                                         flush=True))
    for flag, path in (("--json", a.json), ("--html", a.html)):  # writable, before any trial runs
        if path and path != "-":
            folder = os.path.dirname(os.path.abspath(path))
            if not os.path.isdir(folder) or not os.access(folder, os.W_OK):
                print(f"error: {flag} {path}: {folder} is not a directory this process can write to",
                      file=sys.stderr)
                return 2
    client = None
    try:
        if a.scheduler:
            from distributed import Client

            try:
                client = Client(a.scheduler, timeout=30)
            except (OSError, TimeoutError) as e:
                raise ascendsim.InputError(f"--scheduler {a.scheduler}: cannot connect ({e})")
        result = tune.tune(a.workload, budget=a.budget, seed=a.seed, objective=a.objective, strategy=a.strategy,
                           fix=_pairs(parser, a.fix, "--fix"), client=client, parallel=a.parallel,
                           progress=progress, **job)
    except ascendsim.InputError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except ascendsim.RunError as e:
        print(f"error: {e}", file=sys.stderr)
        return 3
    except ImportError as e:
        print(f"error: tune needs Optuna: {e} (Debian: apt-get install python3-optuna)", file=sys.stderr)
        return 2
    finally:
        if client is not None:
            client.close()
    staged = []
    if a.json == "-":
        print(result.to_json(), end="")
    elif a.json:
        staged.append((a.json, result.to_json()))
    if a.html:
        staged.append((a.html, result.html()))
    for path, text in staged:
        with open(path + ".partial", "w") as f:
            f.write(text)
    for path, _ in staged:
        os.replace(path + ".partial", path)
    if a.json != "-":
        print(result.text(), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
