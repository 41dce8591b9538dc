"""python3 -m ascendsim sweep: a grid of configurations, locally or on a Dask cluster.

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
import sys

import ascendsim


def _value(text):
    for cast in (int, float):
        try:
            return cast(text)
        except ValueError:
            pass
    return text


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
    a = parser.parse_args(argv)

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


if __name__ == "__main__":
    sys.exit(main())
