"""python3 -m ascendsim sweep: a grid of configurations, locally or on a Dask cluster.
python3 -m ascendsim tune: the best configuration for a job, and why (docs/tune.md; also
`ascendsim tune`).

    python3 -m ascendsim sweep --workload resnet50 --grid sink_size=1,10,100 \\
        --grid link.h2d_bandwidth_gbps=8,16,32 --strategies loop-sink \\
        --scheduler tcp://host:8786 --json sweep.json

Each --grid KEY=V1,V2,... adds a dimension (a run setting such as sink_size, or a parameter such
as link.h2d_bandwidth_gbps); the points are their Cartesian product, the last varying fastest.
Without --scheduler the points run one after another in this process. The table printed has one
row per point and strategy; --json writes every point with its report or error (checked before
the first point, staged and put in place as the command line's outputs: python/ascendsim/_outputs.py).
The exit status is 0 if every point ran, 3 if some failed (they are listed), 2 for bad arguments
or an output that cannot be written, 128 + the signal for SIGINT, SIGTERM or SIGHUP (the run
under way stops within a second; nothing is written). Progress goes to stderr when it is a
terminal (--progress: also to a file or a pipe; -q: never).
"""
import signal

_early = []
if __name__ == "__main__":  # a signal while the package loads is kept for main() (no traceback)
    for _s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(_s, lambda signo, frame: _early.append(signo))

import argparse
import json
import os
import sys

import ascendsim
from ascendsim import _outputs


from ascendsim.tune import _parse_value as _value  # a number where the text is one


class _Parser(argparse.ArgumentParser):
    """argparse with the command line's one-line errors: ``error: ... (see `PROG --help`)``, exit 2."""

    def error(self, message):
        _error(f"{message} (see `{self.prog} --help`)")
        sys.exit(2)


class _Signalled(BaseException):
    """SIGTERM or SIGHUP, raised in the main thread as KeyboardInterrupt is for SIGINT."""

    def __init__(self, signo):
        super().__init__(signo)
        self.signo = signo


_STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
_stopping = []


def _on_signal(signo, frame):
    # The first signal stops the command; a second (`ascendsim tune` passes on a terminal's Ctrl-C
    # that reached its child too) does not interrupt the clean-up.
    if _stopping:
        return
    _stopping.append(signo)
    if signo == signal.SIGINT:
        raise KeyboardInterrupt
    raise _Signalled(signo)


def _check_stopped():
    """Raises the signal that came, if one did and something swallowed its exception: nothing is
    put in place after a stop."""
    if _stopping:
        if _stopping[0] == signal.SIGINT:
            raise KeyboardInterrupt
        raise _Signalled(_stopping[0])


def _error(message):
    try:
        print(f"error: {message}", file=sys.stderr, flush=True)
    except (OSError, ValueError, AttributeError):
        pass  # no standard error: the exit status says it


def main(argv=None):
    """Runs a command; its exit status (0, 2 bad input, 3 a failed simulated job, 128 + the signal
    that stopped it)."""
    for signo in _STOP_SIGNALS:  # as the command line's own (sim/core/stop.h), even where a shell ignored them
        signal.signal(signo, _on_signal)
    signo = None
    try:
        return _main(argv)
    except KeyboardInterrupt:
        signo = signal.SIGINT
    except _Signalled as s:
        signo = s.signo
    except Exception as e:
        # A signal that came while a module was being imported can surface as that import's
        # failure (numpy's ImportError): the signal is the reason.
        if _stopping:
            signo = _stopping[0]
        elif isinstance(e, ascendsim.InputError):
            _error(e)
            return 2
        elif isinstance(e, ascendsim.RunError):
            _error(e)
            return 3
        else:  # as the command line's: one line, exit 1
            try:
                print(f"internal error: {type(e).__name__}: {e}", file=sys.stderr, flush=True)
            except (OSError, ValueError, AttributeError):
                pass
            return 1
    for sig in _STOP_SIGNALS:  # nothing more to stop
        signal.signal(sig, signal.SIG_IGN)
    _error(f"stopped by {signal.Signals(signo).name}; no output written")
    return 128 + signo


def _main(argv):
    prog = os.environ.pop("ASCENDSIM_PROG", None) or "python3 -m ascendsim"
    parser = _Parser(prog=prog, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
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
    s.add_argument("--json", default=None, help="write every point's report or error to FILE (-: stdout, "
                   "instead of the table)")
    t = sub.add_parser("tune", help="search the job's knobs for the best configuration (Optuna TPE)")
    t.add_argument("--workload", default="lenet5")
    t.add_argument("--model", default=None, metavar="FILE",
                   help="an ONNX model to train instead of --workload (docs/onnx.md)")
    t.add_argument("--hf-config", default=None, metavar="FILE",
                   help="a Hugging Face config.json: the transformer to train or serve instead of --workload "
                   "(docs/model.md)")
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
                             ("--heads", int, "serving: heads"),
                             ("--kv-heads", int, "serving: key/value heads (grouped-query attention)"),
                             ("--ffn", int, "serving: MLP width"),
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
    t.add_argument("--data", default=None, metavar="FILE",
                   help="a data script: the pipeline as the training script builds it (its map() calls the knobs)")
    t.add_argument("--scheduler", default=None, help="a Dask scheduler's address, e.g. tcp://host:8786")
    t.add_argument("--parallel", type=int, default=None,
                   help="trials per batch (default: the cluster's workers, 1 without --scheduler)")
    t.add_argument("--json", default=None, help="write the search (every trial) to FILE")
    t.add_argument("--html", default=None, help="write the report with its trade-off chart to FILE")
    t.add_argument("--quiet", "-q", action="store_true")
    s.add_argument("--progress", action="store_true", help="progress on stderr even when it is not a terminal")
    s.add_argument("--quiet", "-q", action="store_true", help="no progress")
    t.add_argument("--progress", action="store_true", help="progress on stderr even when it is not a terminal")
    a = parser.parse_args(argv)
    if a.command == "tune":
        try:  # loaded before the signals are taken, so that one cannot break the import
            __import__("optuna")  # Debian python3-optuna
        except ImportError as e:
            raise ascendsim.InputError(f"tune needs Optuna: {e} (Debian: apt-get install python3-optuna)")
    # `ascendsim tune` starts this process with the signals blocked, so that one it passes on while
    # Python starts and the modules load waits for the handlers.
    signal.pthread_sigmask(signal.SIG_UNBLOCK, _STOP_SIGNALS)
    if _early:
        _on_signal(_early[0], None)
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
        if not eq or not key:
            parser.error(f"--set {kv}: expected KEY=VALUE")
        overrides[key] = value
    strategies = a.strategies.split(",") if a.strategies else None
    _positive(a, ("epochs", "steps_per_epoch", "batch_size", "devices"))
    with _outputs.Outputs() as outputs:
        _outputs.require_stdout()
        outputs.add(a.json, "--json")  # every destination checked before any point runs
        outputs.add("-", "standard output")
        client = None
        try:
            if a.scheduler:
                client = _connect(a.scheduler)
            result = ascendsim.sweep(a.workload, grid, strategies=strategies, client=client, epochs=a.epochs,
                                     steps_per_epoch=a.steps_per_epoch, batch_size=a.batch_size, devices=a.devices,
                                     chip=a.chip, overrides=overrides,
                                     progress=_progress(a, lambda d, f, t: f"sweep: {d}/{t} points done, {f} failed"))
        finally:
            if client is not None:
                client.close()
        keys = list(grid)
        lines = ["\t".join(keys + ["strategy", "step ms", "samples/s"])]
        for row in result.rows():
            if "error" in row:
                lines.append("\t".join([str(row[k]) for k in keys] + ["failed: " + row["error"]]))
            else:
                lines.append("\t".join([str(row[k]) for k in keys] + [row["strategy"], f"{row['step_ms_mean']:.4f}",
                                                                        f"{row['samples_per_s']:.0f}"]))
        if a.json:
            points = [{"point": p["point"], **({"report": json.loads(p["report"])} if "report" in p else
                                                {"error": p["error"], "kind": p["kind"]})} for p in result.points]
            if a.json == "-":
                lines = [json.dumps(points, indent=2)]
            else:
                outputs.stage(a.json, json.dumps(points, indent=2))
        outputs.stage("-", "\n".join(lines) + "\n")
        _check_stopped()
        outputs.commit()
    return 3 if result.failed else 0


def _positive(a, names):
    """The counts given on the command line, 1 or more: refused naming the flag, as the command line's."""
    for name in names:
        value = getattr(a, name, None)
        if value is not None and value < 1:
            raise ascendsim.InputError(f"--{name.replace('_', '-')}: must be a positive whole number, got {value}")


def _connect(address):
    try:
        from distributed import Client
    except ImportError as e:
        raise ascendsim.InputError(f"--scheduler {address}: needs dask.distributed ({e}; Debian: "
                                   "apt-get install python3-distributed)")
    try:
        return Client(address, timeout=30)
    except (OSError, TimeoutError) as e:
        raise ascendsim.InputError(f"--scheduler {address}: cannot connect ({e})")


def _progress(a, words):
    """A progress line on stderr, as the command line's: only when stderr is a terminal (a line
    rewritten in place), or with --progress (a line per step, for a file or a pipe); never with -q."""
    tty = sys.stderr is not None and sys.stderr.isatty()
    if a.quiet or not (tty or a.progress):
        return None

    def show(done, *rest):
        total = rest[-1]
        try:
            # One write with its end: a signal handled between print's two writes would leave the
            # line open and the error that follows would join it.
            sys.stderr.write(("\r" if tty else "") + words(done, *rest) + ("" if tty and done < total else "\n"))
            sys.stderr.flush()
        except (OSError, ValueError):
            pass  # progress is not worth failing the command for

    return show


def _pairs(parser, items, flag):
    out = {}
    for kv in items:
        key, eq, value = kv.partition("=")
        if not eq or not key:
            parser.error(f"{flag} {kv}: expected KEY=VALUE")
        out[key] = value
    return out


_DECODERS = ("gpt", "gpt2-small", "gpt2-medium", "llama-7b")


def _tune(parser, a):
    import ascendsim.tune as tune

    if a.max_devices is not None and a.max_devices < 1:
        raise ascendsim.InputError(f"--max-devices {a.max_devices}: at least 1")
    if a.max_devices is not None and a.devices > a.max_devices:
        raise ascendsim.InputError(f"--devices {a.devices} exceeds --max-devices {a.max_devices}")
    if not 0 <= a.seed <= tune.MAX_SEED:
        raise ascendsim.InputError(f"--seed {a.seed}: the sampler's seed, 0 to {tune.MAX_SEED}")
    if a.budget < 1:
        raise ascendsim.InputError(f"--budget {a.budget}: trials (simulations), 1 or more")
    _positive(a, ("epochs", "steps_per_epoch", "batch_size", "devices", "parallel", "requests", "prompt_tokens",
                  "output_tokens", "tensor_parallel", "layers", "hidden", "heads", "kv_heads", "ffn", "vocab"))
    serving = ("gpt_size", "tensor_parallel", "rate", "requests", "prompt_tokens", "output_tokens", "slo_ttft_ms",
               "slo_tpot_ms")
    job = {"devices": a.devices, "overrides": _pairs(parser, a.set, "--set")}
    if a.max_devices is not None:
        job["max_devices"] = a.max_devices
    shape = {k: getattr(a, k) for k in ("layers", "hidden", "heads", "kv_heads", "ffn", "vocab") if getattr(a, k) is not None}
    if a.objective == "serving_goodput":
        keys = serving + ("server", "chip", "hf_config")
        if shape:
            job["shape"] = shape
        training = [f for f, v in (("--search-batch-size", a.search_batch_size), ("--search-amp", a.search_amp),
                                   ("--epochs", a.epochs != 1), ("--steps-per-epoch", a.steps_per_epoch is not None),
                                   ("--batch-size", a.batch_size is not None), ("--strategy", a.strategy != "non-sink"),
                                   ("--model", a.model is not None), ("--data", a.data is not None))
                    if v]
        if training:
            raise ascendsim.InputError(
                f"{training[0]} is a training setting; a serving job (--objective serving_goodput) takes "
                "serving's settings (--workload gpt, --gpt-size, --tensor-parallel, --rate, --requests, "
                "--prompt-tokens, --output-tokens, --slo-ttft-ms, --slo-tpot-ms, --layers, ...)")
        if a.workload not in _DECODERS and a.hf_config is None:
            raise ascendsim.InputError(
                f"--workload {a.workload}: --objective serving_goodput serves a decoder; give --workload "
                + ", ".join(_DECODERS[:-1]) + f" or {_DECODERS[-1]}")
    else:
        job["epochs"] = a.epochs
        keys = ("steps_per_epoch", "batch_size", "server", "chip", "model", "data", "hf_config")
        given = [k for k in serving + tuple(shape) if getattr(a, k) is not None]
        if given:
            raise ascendsim.InputError(f"--{given[0].replace('_', '-')} is a serving setting: give --objective "
                                       "serving_goodput")
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
    progress = _progress(a, lambda d, t: f"tune: {d}/{t} trials")
    fix = _pairs(parser, a.fix, "--fix")
    with _outputs.Outputs() as outputs:
        _outputs.require_stdout()
        for flag, path in (("--json", a.json), ("--html", a.html)):  # before any trial runs
            outputs.add(path, flag)
        if a.json != "-":
            outputs.add("-", "standard output")
        client = None
        try:
            if a.scheduler:
                client = _connect(a.scheduler)
            result = tune.tune(a.workload, budget=a.budget, seed=a.seed, objective=a.objective, strategy=a.strategy,
                               fix=fix, client=client, parallel=a.parallel, progress=progress, **job)
        finally:
            if client is not None:
                client.close()
        outputs.stage("-", result.to_json() if a.json == "-" else result.text())
        if a.json != "-":
            outputs.stage(a.json, result.to_json())
        outputs.stage(a.html, result.html())
        _check_stopped()
        outputs.commit()
    return 0


if __name__ == "__main__":
    sys.exit(main())
