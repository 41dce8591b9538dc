"""The best configuration for a training job, and why: ``ascendsim tune`` (docs/tune.md).

A search over the knobs the job exposes — the strategy and loop sink's sink size, the map
workers, the prefetch and data-queue sizes, the data cache, the AMP level and the batch size —
with Optuna's TPE sampler (seeded). Each trial is one simulation through the library entry point
(``ascendsim.train``), in this process or as a task on a Dask cluster. Trials are asked for and
told in batches of ``parallel`` (1 in one process, the cluster's workers on Dask): the same seed
and batch give the same answer in one process or on a cluster. A batch's trials are chosen
without each other's results, so larger batches search less sharply.
A trial the job cannot run (out of device memory, GetNext timing out) is recorded as infeasible,
never best.

    >>> import ascendsim.tune as tune
    >>> r = tune.tune("lenet5", budget=40, seed=1)
    >>> r.best["config"], r.best["value"] / r.start["value"]
"""
from __future__ import annotations

import json
import math
import os
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

from . import LAUNCH_MODES, InputError, RunError, STRATEGIES, _whole, info, params, serve, train

#: The largest seed Optuna's TPE sampler takes (numpy's legacy seeding: 0 to 2**32 - 1).
MAX_SEED = 2 ** 32 - 1

#: What a trial's report is judged by: (the report field, maximise?), over the whole run — every
#: trial runs the job's steps (loop sink as many sinks as they fill), so its set-up, warm-up and
#: per-sink costs count as they would for the job.
OBJECTIVES: Dict[str, Tuple[str, bool]] = {
    "samples_per_s": ("samples_per_s", True),
    "time_to_train": ("sim_time_s", False),
    # LLM serving (``ascendsim serve``): requests per second served within the service levels
    # (slo_ttft_ms, slo_tpot_ms).
    "serving_goodput": ("goodput.requests_per_s", True),
}


_PHASES = ("host_data", "h2d", "launch", "device_compute", "d2h", "host_loop", "wait_data", "sync", "comm",
           "setup", "eval")
_PHASE_WORDS = {
    "host_data": "the host waiting for the data pipeline",
    "h2d": "host-to-device copies",
    "launch": "op and graph launches",
    "device_compute": "device compute",
    "d2h": "copies back to the host",
    "host_loop": "the framework's per-step work",
    "wait_data": "the device waiting in GetNext for data",
    "sync": "synchronisations",
    "comm": "exposed communication",
    "setup": "one-time set-up",
    "eval": "evaluation",
    "scheduler": "the serving scheduler's host work",
    "sampling": "sampling on the host",
    "device": "device compute",
}


class Knob:
    """One dimension of the search: a run setting (strategy, sink_size, batch_size, amp_level) or
    a configuration parameter (``pipeline.num_parallel_workers``)."""

    def __init__(self, key: str, kind: str, low: Any = None, high: Any = None, choices: Sequence[Any] = (),
                 when: Optional[Callable[[Dict[str, Any]], bool]] = None, why: str = "") -> None:
        self.key, self.kind, self.low, self.high, self.choices, self.when, self.why = (
            key, kind, low, high, list(choices), when, why)

    def suggest(self, trial: Any) -> Any:
        if self.kind == "int":
            return trial.suggest_int(self.key, self.low, self.high, log=self.high / max(1, self.low) >= 16)
        return trial.suggest_categorical(self.key, self.choices)


def _parse_value(text: str) -> Any:
    for cast in (int, float):
        try:
            return cast(text)
        except ValueError:
            pass
    return text


def _job_facts(workload: str, job: Mapping[str, Any]) -> Dict[str, Any]:
    """What the search space depends on: steps per epoch, host cores, AMP support."""
    if job.get("config"):
        raise InputError("config: tune starts from the presets and --set; give the file's values with --set "
                         "(overrides), so the start and the knobs' ranges are the job's")
    about = info(workload, batch_size=job.get("batch_size"), server=job.get("server"), chip=job.get("chip"),
                 overrides=job.get("overrides"), shape=job.get("shape"), amp_level=job.get("amp_level"),
                 model=job.get("model"), mode=job.get("mode"), loss=job.get("loss"), data=job.get("data"),
                 hf_config=job.get("hf_config"))
    values = {k: v["value"] for k, v in params(job.get("chip"), server=job.get("server")).items()}
    for key, value in (job.get("overrides") or {}).items():
        values[key] = _parse_value(str(value))
    maps = [s["stage"] for s in about.get("pipeline_tree", []) if s.get("kind") == "map"]
    workers = [s["workers"] for s in about.get("pipeline_tree", []) if s.get("kind") == "map"]
    return {"steps_per_epoch": about["steps_per_epoch"], "batch_size": about["batch_size"], "map_calls": maps,
            "map_workers": workers,
            "gradients": about.get("gradients", 0),
            "amp_level": about.get("recipe", {}).get("amp_level", "O0"), "host_cpu_cores": values["host.cpu_cores"],
            "params": values}


def knobs_for(workload: str, job: Mapping[str, Any], facts: Mapping[str, Any]) -> List[Knob]:
    """The knobs a training job exposes, with their ranges."""
    steps = int(job.get("steps_per_epoch") or facts.get("steps_per_epoch") or 1)
    cores = int(facts.get("host_cpu_cores") or 32)
    batch = int(job.get("batch_size") or facts.get("batch_size") or 32)
    knobs = [
        Knob("strategy", "cat", choices=list(STRATEGIES), why="how the host drives the device"),
        # Sizes that divide the job's steps, so every sink size runs the same steps.
        Knob("sink_size", "cat", choices=_divisors(int(job.get("epochs", 1)) * steps),
             when=lambda c: c.get("strategy") == "loop-sink" and not job.get("search_batch_size"),
             why="steps per graph launch under loop sink"),
        *([Knob(f"map_workers.{i + 1}", "int", 1, max(1, min(cores, 64)), why=f"workers of {name}")
           for i, name in enumerate(facts.get("map_calls") or [])]
          or [Knob("pipeline.num_parallel_workers", "int", 1, max(1, min(cores, 64)),
                   why="workers of each map() call")]),
        Knob("pipeline.prefetch_size", "int", 1, 256, why="connector capacity between the dataset ops"),
        Knob("queue.capacity", "int", 2, 128,
             when=lambda c: c.get("strategy") != "non-sink", why="the device data queue (sink modes)"),
    ]
    if job.get("search_batch_size"):
        # Opt-in: a batch size changes the training itself (its convergence), not only how it runs.
        knobs.append(Knob("batch_size", "cat",
                          choices=sorted({max(1, batch // 4), max(1, batch // 2), batch, batch * 2, batch * 4}),
                          why="samples per step, within device memory"))
    if int(job.get("epochs", 1)) > 1:
        knobs.append(Knob("pipeline.cache", "cat", choices=["none", "source", "map"],
                          why="a data cache after the source or the last deterministic map"))
        knobs.append(Knob("pipeline.cache_gib", "int", 1, 1024, when=lambda c: c.get("pipeline.cache") not in (None, "none"),
                          why="the data cache's size (a server's ranks share it)"))
    # A Hugging Face config's network (workload None) is a transformer.
    transformer = workload in TRANSFORMERS or job.get("hf_config") is not None
    if job.get("search_amp") and not ((workload or "").startswith(("resnet", "mobilenet")) or transformer):
        raise InputError(f"search_amp: {workload} trains in fp32 only; the AMP level applies to the ResNet, "
                         "MobileNetV2 and transformer workloads")
    if job.get("search_amp"):
        # Opt-in as the batch size: a precision changes the training's numerics.
        knobs.append(Knob("amp_level", "cat", choices=["O0", "O2", "O3"], why="mixed precision"))
    max_devices = job.get("max_devices")
    if max_devices:
        # The cluster's size: powers of two up to the limit (the Pareto chart's cost).
        knobs.append(Knob("devices", "cat", choices=[d for d in (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)
                                                       if d <= max_devices], why="devices of the run"))
    devices = max_devices or int(job.get("devices", 1))
    if not transformer and devices > 1 and int(facts.get("gradients") or 0) > 1:
        # AllReduce fusion groups (all_reduce_fusion): one group, or a split at a share of the
        # gradients (in the order the backward pass produces them).
        knobs.append(Knob("all_reduce_fusion", "cat", choices=["one group", "25%", "50%", "75%", "33%+67%"],
                          why="the gradients' AllReduce groups"))
    if transformer and devices > 1:
        # The parallel layout: tensor parallelism within a server, pipeline stages, the rest data
        # parallel; a layout the model or the cluster cannot take is an infeasible trial.
        layouts = [f"tp{t}-pp{p}" for t in (1, 2, 4, 8) for p in (1, 2, 4, 8) if t <= 8 and t * p <= devices]
        knobs += [
            Knob("layout", "cat", choices=layouts,
                 why="tensor-parallel group (Megatron) and pipeline stages (1F1B); the rest data parallel"),
            Knob("micro_batches", "cat", choices=[1, 2, 4, 8, 16], when=lambda c: not str(c.get("layout", "")).endswith("pp1"),
                 why="micro-batches of a pipeline step"),
            Knob("sequence_parallel", "cat", choices=[False, True],
                 when=lambda c: not str(c.get("layout", "tp1")).startswith("tp1-"),
                 why="Megatron's sequence parallelism over the tensor-parallel group"),
            Knob("gradient_accumulation", "cat", choices=[1, 2, 4, 8],
                 why="micro-batches accumulated into one optimizer step (the step's batch divided)"),
            Knob("optimizer_shard", "cat", choices=[False, True], why="the optimizer state sharded (ZeRO-1)"),
            Knob("optimizer_shard_level", "cat", choices=[1, 2], when=lambda c: bool(c.get("optimizer_shard")),
                 why="the gradients sharded too (ZeRO-2: each micro-batch's reduce-scattered)"),
            Knob("recompute", "cat", choices=[False, True], why="activations recomputed in the backward pass"),
        ]
    return knobs


#: The built-in transformers (their parallel layout is a knob on more than one device).
TRANSFORMERS = ("gpt", "gpt2-small", "gpt2-medium", "llama-7b", "bert-base", "bert-large")


def _divisors(n: int) -> List[int]:
    return [d for d in range(1, n + 1) if n % d == 0] if n <= 1_000_000 else [1, n]


def _start_config(knobs: Sequence[Knob], job: Mapping[str, Any], facts: Mapping[str, Any],
                  strategy: str) -> Dict[str, Any]:
    """The user's configuration in the knobs' terms (the presets' values where the job sets none)."""
    overrides = dict(job.get("overrides") or {})
    params = facts.get("params", {})
    start: Dict[str, Any] = {}
    for k in knobs:
        if k.key == "strategy":
            start[k.key] = strategy
        elif k.key == "sink_size":
            start[k.key] = job.get("sink_size") if job.get("sink_size", -1) not in (None, -1) else k.choices[-1]
        elif k.key == "batch_size":
            start[k.key] = int(job.get("batch_size") or facts.get("batch_size") or 32)
        elif k.key == "amp_level":
            start[k.key] = job.get("amp_level") or facts.get("amp_level", "O0")
        elif k.key in ("devices", "micro_batches"):
            start[k.key] = int(job.get(k.key) or 1)
        elif k.key == "layout":
            start[k.key] = f"tp{int(job.get('tensor_parallel') or 1)}-pp{int(job.get('pipeline_stages') or 1)}"
        elif k.key in ("optimizer_shard", "recompute", "sequence_parallel"):
            start[k.key] = bool(job.get(k.key, False))
        elif k.key in ("gradient_accumulation", "optimizer_shard_level"):
            start[k.key] = int(job.get(k.key) or 1)
        elif k.key == "all_reduce_fusion":
            start[k.key] = "one group"
            if job.get("all_reduce_fusion"):
                raise InputError("all_reduce_fusion: tune searches the groups from one group; leave the job's "
                                 "split out (or fix all_reduce_fusion)")
        elif k.key.startswith("map_workers."):
            listed = str(overrides.get("pipeline.map_workers", params.get("pipeline.map_workers") or "")).split(",")
            i = int(k.key.split(".")[1]) - 1
            given = facts.get("map_workers") or []
            if job.get("data") and i < len(given):  # the data script's own workers for its calls
                start[k.key] = int(given[i])
                continue
            default = _parse_value(str(overrides.get("pipeline.num_parallel_workers",
                                                     params.get("pipeline.num_parallel_workers", 8))))
            start[k.key] = _parse_value(listed[i]) if i < len(listed) and listed[i].strip() else default
        elif k.key in overrides:
            start[k.key] = _parse_value(str(overrides[k.key]))
        else:
            start[k.key] = params.get(k.key)
    return start


def _run_kwargs(config: Mapping[str, Any], job: Mapping[str, Any]) -> Tuple[str, Dict[str, Any]]:
    """A configuration as ``ascendsim.train``'s strategy and keyword arguments."""
    kw = {k: v for k, v in job.items()
          if k not in ("overrides", "search_batch_size", "search_amp", "dataset_steps", "dataset_batch", "max_devices",
                       "gradients")}
    overrides = dict(job.get("overrides") or {})
    strategy = config.get("strategy", "non-sink")
    calls = sorted((int(k.split(".")[1]), v) for k, v in config.items() if k.startswith("map_workers."))
    if calls:  # each map() call's workers, in the script's order
        overrides["pipeline.map_workers"] = ",".join(str(v) for _, v in calls)
    for key, value in config.items():
        if key == "strategy" or key.startswith("map_workers."):
            continue
        if key in ("sink_size", "batch_size", "amp_level", "devices", "micro_batches", "optimizer_shard", "recompute",
                   "sequence_parallel", "gradient_accumulation"):
            kw[key] = value
        elif key == "optimizer_shard_level":
            if config.get("optimizer_shard"):
                kw[key] = value
        elif key == "all_reduce_fusion":
            g = int(job.get("gradients") or 1)
            kw[key] = ([] if value == "one group" else
                       [round(float(f.strip("%")) / 100 * (g - 1)) for f in value.split("+")])
        elif key == "layout":
            tp, pp = value.split("-")
            kw["tensor_parallel"], kw["pipeline_stages"] = int(tp[2:]), int(pp[2:])
        else:
            overrides[key] = value
    steps = int(job.get("dataset_steps") or 1)
    if "batch_size" in config:
        # The job's samples at this batch size: its steps scaled (at least one).
        steps = max(1, steps * int(job.get("batch_size") or job.get("dataset_batch") or 1) // int(config["batch_size"]))
        kw["steps_per_epoch"] = steps
    if strategy != "loop-sink":
        kw.pop("sink_size", None)
    else:
        # The job's steps in sinks of this size (it divides them): as many sinks as its epochs
        # hold, MindSpore's sink_size making each "epoch" one sink; one epoch a sink without a size.
        total = int(job.get("epochs", 1)) * steps
        sink = int(kw.get("sink_size") or steps)
        kw["sink_size"] = sink
        kw["epochs"] = total // sink
        kw["steps_per_epoch"] = steps
    kw["overrides"] = overrides
    return strategy, kw


#: Serving's knobs and the defaults of ``ascendsim.serve`` they start from.
_SERVE_START = {"launch": "eager", "multi_step": 8, "max_seqs": 256, "max_batched_tokens": 8192,
                "chunked_prefill": False, "tensor_parallel": 1}


def serving_knobs(job: Mapping[str, Any]) -> List[Knob]:
    """The knobs of an LLM serving job."""
    return [
        Knob("launch", "cat", choices=list(LAUNCH_MODES), why="how each step is launched"),
        Knob("multi_step", "int", 2, 32, when=lambda c: c.get("launch") == "multi-step",
             why="decode steps per launch"),
        Knob("max_seqs", "int", 8, 512, why="sequences per step"),
        Knob("chunked_prefill", "cat", choices=[False, True], why="prompts in chunks beside the decode tokens"),
        Knob("max_batched_tokens", "int", 1024, 16384, why="tokens per step"),
    ] + ([Knob("tensor_parallel", "cat", choices=[t for t in (1, 2, 4, 8) if int(job.get("devices", 1)) % t == 0],
               why="ranks of a replica (the rest of the devices replicas)")] if int(job.get("devices", 1)) > 1 else [])


def run_trial(workload: str, config: Mapping[str, Any], job: Mapping[str, Any]) -> Dict[str, Any]:
    """One trial (a Dask task): {"config", "report"} or {"config", "infeasible", "kind"}."""
    try:
        if job.get("serving"):
            kw = {k: v for k, v in job.items() if k != "serving"}
            report = serve(workload, **{**kw, **config}, decode_batches=[1])
            return {"config": dict(config), "report": report.to_json()}
        strategy, kw = _run_kwargs(config, job)
        report = train(workload, strategy, **kw)
        return {"config": dict(config), "report": report.to_json()}
    except (InputError, RunError) as e:
        text = str(e)
        kind = ("out of device memory" if "device memory" in text
                else "GetNext timeout" if "GetNext" in text or "timed out" in text
                else "refused by the simulator")
        return {"config": dict(config), "infeasible": text, "kind": kind}


def _value(trial: Mapping[str, Any], objective: str) -> Optional[float]:
    if "report" not in trial:
        return None
    value: Any = json.loads(trial["report"])["runs"][0]
    for part in OBJECTIVES[objective][0].split("."):
        value = value[part]
    return float(value)


def _applied(trial: Mapping[str, Any]) -> Dict[str, Any]:
    """What the simulator ran, read back from a trial's report: its strategy and sink size, and the
    value of each configuration parameter the trial set ({"applied": {...}}; none if infeasible)."""
    if "report" not in trial:
        return {}
    report = json.loads(trial["report"])
    run = report["runs"][0]
    out: Dict[str, Any] = {}
    listed = str(report.get("config", {}).get("pipeline", {}).get("map_workers") or "").split(",")
    for key in trial["config"]:
        if key in ("strategy", "sink_size") and key in run:
            out[key] = run[key]
        elif key.startswith("map_workers."):
            i = int(key.split(".")[1]) - 1
            if i < len(listed) and listed[i].strip():
                out[key] = int(listed[i])
        elif "." in key:
            section, name = key.split(".", 1)
            value = report.get("config", {}).get(section, {}).get(name)
            if value is not None:
                out[key] = value
    return {"applied": out, **({"steps": run["steps"]} if isinstance(run.get("steps"), int) else {})}


def _phases_per_step(trial: Mapping[str, Any]) -> Dict[str, float]:
    run = json.loads(trial["report"])["runs"][0]
    if "decode_step_ms" in run:  # serving: a decode step's phases
        return {p: float(v) for p, v in run["decode_step_ms"]["phases"].items()}
    steps = max(1, int(run["steps"]))
    return {p: 1e3 * float(run["breakdown_s"].get(p, 0.0)) / steps for p in _PHASES}


def importance(trials: Sequence[Mapping[str, Any]], knobs: Sequence[Knob]) -> Dict[str, float]:
    """Each knob's main effect: the share of the feasible trials' variance (of the objective's
    logarithm, a zero counted as a thousandth of the best) that the knob's value explains alone —
    omega squared over the groups of trials with one value (integers in up to eight quantile
    bins): the between-group variance less what as many groups of noise would show, over the
    total. A knob that applies only sometimes (sink_size under loop sink) is judged among the
    trials it applies to. Shares are of the total, so they need not add up to 1."""
    feasible = [t for t in trials if t.get("value") is not None and t["value"] >= 0]
    if len(feasible) < 3:
        return {}
    floor = 1e-3 * max(t["value"] for t in feasible) or 1.0  # a zero (no goodput) as a thousandth of the best
    ys = [math.log(t["value"] + floor) for t in feasible]
    mean = sum(ys) / len(ys)
    total = sum((y - mean) ** 2 for y in ys)
    out: Dict[str, float] = {}
    for k in knobs:
        values = [t["config"].get(k.key) for t in feasible]
        mine = [y for v, y in zip(values, ys) if v is not None]
        if len(mine) < 2:
            continue
        local = sum(mine) / len(mine)
        if k.kind == "int":
            present = sorted(v for v in values if v is not None)
            if not present:
                continue
            edges = sorted({present[min(len(present) - 1, (i * len(present)) // 8)] for i in range(1, 8)})
            label = lambda v: None if v is None else sum(v >= e for e in edges)
        else:
            label = lambda v: v
        groups: Dict[Any, List[float]] = {}
        for v, y in zip(values, ys):
            if v is not None:
                groups.setdefault(repr(label(v)), []).append(y)
        between = sum(len(g) * (sum(g) / len(g) - local) ** 2 for g in groups.values())
        within = sum((y - sum(g) / len(g)) ** 2 for g in groups.values() for y in g)
        # Omega squared: the between-group variance beyond what as many groups of noise would show.
        dof = len(mine) - len(groups)
        if dof < 1:
            continue  # a group per trial: no estimate of the noise
        noise = within / dof
        effect = between - (len(groups) - 1) * noise
        out[k.key] = max(0.0, effect / (total + noise)) if total > 0 else 0.0
    return dict(sorted(out.items(), key=lambda kv: (-kv[1], kv[0])))


def _reverted(best: Mapping[str, Any], key: str, start: Mapping[str, Any], knobs: Sequence[Knob]) -> Dict[str, Any]:
    """The best configuration with one knob back at its starting value (the preset's where the start
    had none), the knobs that no longer apply dropped."""
    config: Dict[str, Any] = {}
    for k in knobs:
        if k.when is not None and not k.when(config):
            continue
        if k.key in best or k.key == key:
            config[k.key] = start[k.key] if k.key == key else best[k.key]
        elif k.key in start:
            config[k.key] = start[k.key]
    return config


def _explain(start: Mapping[str, Any], best: Mapping[str, Any], knobs: Sequence[Knob],
             ablations: Mapping[str, Optional[float]], maximise: bool, ablated: bool = True,
             baseline: Optional[Mapping[str, Any]] = None) -> Dict[str, Any]:
    """What changed — each change with what the best loses without it (its knob back at the start,
    simulated) —, which phases of a step the changes removed, and what bounds the best."""
    b = _phases_per_step(best)
    a = _phases_per_step(start) if "report" in start else {p: 0.0 for p in b}  # an infeasible start: none
    removed = sorted(((p, a[p] - b[p]) for p in a if p != "setup"), key=lambda x: -x[1]) if "report" in start else []
    bound = max((p for p in b if p != "setup"), key=lambda p: b[p])
    changes = []
    for k in knobs:
        if start["config"].get(k.key) == best["config"].get(k.key):
            continue
        base = (baseline or {}).get(k.key)
        if k.key not in start["config"] and base == best["config"].get(k.key):
            continue  # a knob the start did not use, at the value it would have had
        entry = {"knob": k.key, "from": start["config"].get(k.key), "to": best["config"].get(k.key), "why": k.why}
        if k.key not in start["config"] and base is not None:
            entry["preset"] = base
        if ablated and k.key in ablations:
            without = ablations[k.key]
            worth = None
            if without is not None and without > 0:
                worth = best["value"] / without if maximise else without / best["value"]
            entry.update({"worth": worth, "without": without})
        changes.append(entry)
    changes.sort(key=lambda c: -(c["worth"] if c.get("worth") is not None else
                                 float("inf") if "without" in c else 0.0))
    return {
        "changes": changes,
        "removed": [{"phase": p, "from_ms": a[p], "to_ms": b[p], "words": _PHASE_WORDS.get(p, p)}
                    for p, d in removed if d > 1e-6][:3],
        "bound_by": {"phase": bound, "ms": b[bound], "words": _PHASE_WORDS.get(bound, bound)},
    }


def _cost(config: Mapping[str, Any], cost_key: str) -> Any:
    """A configuration's cost: a knob's value, or (map_workers) the map calls' threads in all."""
    if cost_key == "map_workers":
        return sum(v for k, v in config.items() if k.startswith("map_workers."))
    return config.get(cost_key, 0)


def _pareto(trials: Sequence[Mapping[str, Any]], cost_key: str, maximise: bool) -> List[Dict[str, Any]]:
    """The trials no other beats on both the objective and the cost."""
    feasible = [t for t in trials if t.get("value") is not None]
    front = []
    for t in sorted(feasible, key=lambda t: (_cost(t["config"], cost_key), -t["value"] if maximise else t["value"])):
        better = (lambda x, y: x > y) if maximise else (lambda x, y: x < y)
        if not front or better(t["value"], front[-1]["value"]):
            front.append({"cost": _cost(t["config"], cost_key), "value": t["value"], "trial": t["number"]})
    return front


class TuneResult:
    """A search's trials (in order), the start, the best, the knobs that mattered and why."""

    def __init__(self, data: Dict[str, Any]) -> None:
        self.data = data

    @property
    def best(self) -> Dict[str, Any]:
        return self.data["best"]

    @property
    def start(self) -> Dict[str, Any]:
        return self.data["start"]

    @property
    def trials(self) -> List[Dict[str, Any]]:
        return self.data["trials"]

    def to_json(self) -> str:
        return json.dumps(self.data, indent=2) + "\n"

    def text(self) -> str:
        d = self.data
        obj, (_, maximise) = d["objective"], OBJECTIVES[d["objective"]]
        unit = {"samples_per_s": "samples/s", "time_to_train": "s of simulated time",
                "serving_goodput": "requests/s within the service levels"}[obj]
        lines = [f"tune {d['workload']}: {d['budget']} trials (TPE, seed {d['seed']}), objective {obj} "
                 f"({'higher' if maximise else 'lower'} is better)",
                 ("start" + (" (with " + ", ".join(f"{k}={v}" for k, v in d["fixed"].items()) + " fixed)"
                             if d["fixed"] else "")
                  + (f": {d['start']['value']:.6g} {unit}" if d["start"]["value"] is not None
                     else f": cannot run ({d['start']['kind']})"))
                 + f"   best: {d['best']['value']:.6g} {unit} "
                 + (f"({d['gain']:.2f}x), " if d["gain"] is not None else "(from none), ")
                 + (f"trial {d['best']['number']}" if d["best"]["number"] is not None
                    else f"found by {d['best']['found_by']}")]
        if d["fixed"]:
            lines.append("fixed: " + ", ".join(f"{k}={v}" for k, v in d["fixed"].items()))
        worth = [c for c in d["explanation"]["changes"] if "without" in c and c.get("worth") is None
                 or (c.get("worth") or 0) >= 1.01]
        if worth:
            lines.append("change: " + ", ".join(f"{c['knob']}={c['to']}" for c in worth)
                         + " (the rest of the best configuration's changes have no effect on their own)")
        lines.append("")
        lines.append("what changed:")
        shown = lambda v: "-" if v is None else v
        for c in d["explanation"]["changes"]:
            w = c.get("worth")
            worth = ("" if "without" not in c
                     else f"; without it {c['without']:.4g}" if w is None and c["without"] is not None
                     else "; without it the best cannot run" if w is None
                     else f"; worth {w:.2f}x" if w >= 1.01
                     else f"; costs {100 * (1 - w):.0f}% on its own" if w < 0.99 else "; no effect on its own")
            was = str(shown(c["from"])) + (f" (preset {c['preset']})" if "preset" in c else "")
            lines.append(f"  {c['knob']}: {was} -> {shown(c['to'])}  ({c['why']}{worth})")
        if not d["explanation"]["changes"]:
            lines.append("  nothing: the start is the best found")
        for r in d["explanation"]["removed"]:
            lines.append(f"  removed: {r['words']} ({r['phase']}), {r['from_ms']:.4g} -> {r['to_ms']:.4g} ms per step")
        b = d["explanation"]["bound_by"]
        lines.append(f"  the best is bound by {b['words']} ({b['phase']}, {b['ms']:.4g} ms per step)")
        if d["objective"] == "serving_goodput":
            lines.append("  (serving: the phases of a decode step)")
        lines.append("")
        lines.append("across the trials, the share of the objective's variance each knob explains alone, knob by "
                     "knob (the shares do not add up; the trials crowd where the search found good values: read "
                     "them beside each change's worth):")
        if not d["importance"]:
            lines.append("  too few feasible trials to tell")
        for k, v in list(d["importance"].items())[:5]:
            lines.append(f"  {k:<32} {100 * v:5.1f}%")
        infeasible = [t for t in d["trials"] if "infeasible" in t]
        lines.append("")
        lines.append(f"{len(d['trials'])} trials, {len(infeasible)} infeasible"
                     + (": " + ", ".join(sorted({t['kind'] for t in infeasible})) if infeasible else ""))
        return "\n".join(lines) + "\n"

    def html(self) -> str:
        d = self.data
        front = d["pareto"]
        esc = lambda s: str(s).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
        pts = [(_cost(t["config"], d["pareto_cost"]), t["value"], t["number"]) for t in d["trials"]
               if t.get("value") is not None]
        # An explanation's best too.
        pts.append((_cost(d["best"]["config"], d["pareto_cost"]), d["best"]["value"], d["best"]["number"]))

        def axis(lo: float, hi: float) -> Tuple[List[float], int]:
            """Ticks at 1, 2 or 5 times a power of ten, about five, covering [lo, hi], and the
            decimals their labels need. From 0 only where 0 is near: when the data's lowest value
            lies within half its spread of 0; else fitted to the data, so a small difference
            between large values (1725 against 1818) is not flattened at the top of the axis."""
            if hi == lo:
                pad = abs(lo) * 0.05
                lo, hi = (lo - pad, hi + pad) if pad else (0.0, 1.0)
            if 0 <= lo <= (hi - lo) / 2:
                lo = 0.0
            raw = (hi - lo) / 5
            mag = 10.0 ** math.floor(math.log10(raw))
            step = next(m * mag for m in (1, 2, 5, 10) if m * mag >= raw * (1 - 1e-9))
            first, last = math.floor(lo / step + 1e-9), math.ceil(hi / step - 1e-9)
            decimals = max(0, -math.floor(math.log10(step) + 1e-9))
            return [round(k * step, decimals) for k in range(first, last + 1)], decimals

        def label(v: float, decimals: int) -> str:
            return f"{v:.{decimals}f}"

        svg, ranges = "", ""
        if pts:
            xt, xd = axis(min(p[0] for p in pts), max(p[0] for p in pts))
            yt, yd = axis(min(p[1] for p in pts), max(p[1] for p in pts))
            x_labels, y_labels = [label(t, xd) for t in xt], [label(t, yd) for t in yt]
            char = 7.0  # px per character of an 11 px label, at most (digits, '.', '-')
            l = 38 + char * max(len(t) for t in y_labels)  # the rotated axis name, the labels, a gap
            r = max(24.0, char * len(x_labels[-1]) / 2 + 6)
            top, pw, ph = 40, 560, 250
            w, h = l + pw + r, top + ph + 50
            X = lambda x: l + (x - xt[0]) / (xt[-1] - xt[0]) * pw
            Y = lambda y: top + ph - (y - yt[0]) / (yt[-1] - yt[0]) * ph
            obj, cost = esc(d["objective"]), esc(d["pareto_cost"])
            svg = (f"<svg id='chart-tradeoff' xmlns='http://www.w3.org/2000/svg' width='{w:.0f}' height='{h:.0f}' "
                   f"role='img' aria-label='{obj} against {cost}'>")
            # The legend, in a band above the plot.
            svg += (f"<g class='legend'><circle cx='{l + 6}' cy='12' r='3' fill='#56b4e9'/>"
                    f"<text x='{l + 14}' y='16' font-size='12'>trial</text>"
                    f"<line x1='{l + 70}' x2='{l + 94}' y1='12' y2='12' stroke='#d55e00' stroke-width='2'/>"
                    f"<text x='{l + 100}' y='16' font-size='12'>Pareto front</text></g>")
            for t, s_ in zip(yt, y_labels):
                svg += (f"<line x1='{l}' x2='{l + pw}' y1='{Y(t):.1f}' y2='{Y(t):.1f}' stroke='#e4e4e4'/>"
                        f"<text class='tick y-tick' x='{l - 8}' y='{Y(t) + 4:.1f}' font-size='11' "
                        f"text-anchor='end'>{s_}</text>")
            for t, s_ in zip(xt, x_labels):
                svg += (f"<line x1='{X(t):.1f}' x2='{X(t):.1f}' y1='{top}' y2='{top + ph}' stroke='#e4e4e4'/>"
                        f"<text class='tick x-tick' x='{X(t):.1f}' y='{top + ph + 18}' font-size='11' "
                        f"text-anchor='middle'>{s_}</text>")
            svg += f"<line x1='{l}' y1='{top + ph}' x2='{l + pw}' y2='{top + ph}' stroke='#444'/>"
            svg += f"<line x1='{l}' y1='{top}' x2='{l}' y2='{top + ph}' stroke='#444'/>"
            for x, y, n in pts:
                svg += (f"<circle class='point' cx='{X(x):.1f}' cy='{Y(y):.1f}' r='3' fill='#56b4e9'>"
                        f"<title>{'trial ' + str(n) if n is not None else 'the best'}: {x} → {y:.6g}</title></circle>")
            line = " ".join(f"{X(p['cost']):.1f},{Y(p['value']):.1f}" for p in front)
            svg += f"<polyline class='series' fill='none' stroke='#d55e00' stroke-width='2' points='{line}'/>"
            svg += (f"<text class='axis-label' x='{l + pw / 2}' y='{h - 10}' font-size='12' "
                    f"text-anchor='middle'>{cost}</text>")
            svg += (f"<text class='axis-label' x='14' y='{top + ph / 2}' font-size='12' text-anchor='middle' "
                    f"transform='rotate(-90 14 {top + ph / 2})'>{obj}</text>")
            svg += "</svg>"
            ranges = (f"<p class='ranges'>The vertical axis runs from {y_labels[0]} to {y_labels[-1]} ({obj}"
                      + (", fitted to the trials: it does not start at 0" if yt[0] != 0 else "")
                      + f"); the horizontal from {x_labels[0]} to {x_labels[-1]} ({cost}"
                      + (", fitted to the trials" if xt[0] != 0 else "") + ").</p>")
        return ("<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>ascendsim tune</title>"
                "<style>body{font-family:system-ui,sans-serif;margin:2em;max-width:70em}"
                "svg text{font-family:system-ui,sans-serif}pre{overflow-x:auto}</style></head><body>"
                f"<h1>tune {esc(d['workload'])}</h1><h2>Trade-off</h2><p>Every feasible trial; the line is the "
                f"Pareto front of {esc(d['objective'])} against {esc(d['pareto_cost'])}.</p>{svg}{ranges}"
                f"<h2>Report</h2><pre>{esc(self.text())}</pre></body></html>\n")

def search(knobs: Sequence[Knob], evaluate: Callable[[List[Dict[str, Any]]], List[Dict[str, Any]]],
           value: Callable[[Dict[str, Any]], Optional[float]], *, budget: int, seed: int, maximise: bool,
           fix: Mapping[str, Any], start: Optional[Mapping[str, Any]] = None, parallel: int = 1,
           progress: Optional[Callable[[int, int], None]] = None) -> List[Dict[str, Any]]:
    """Optuna's TPE (seeded) over ``knobs``: ``budget`` configurations, asked for and told in
    batches of ``parallel``, each batch given to ``evaluate`` (configurations -> results, in order),
    ``value`` a result's objective (None: infeasible, told to Optuna as failed). ``start``, if
    given, is the first configuration; ``fix`` holds knobs at a value. Returns every trial: its
    number, configuration, result and value."""
    import optuna  # Debian python3-optuna

    free = [k for k in knobs if k.key not in fix]
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(direction="maximize" if maximise else "minimize",
                                sampler=optuna.samplers.TPESampler(seed=seed))
    if start is not None:
        study.enqueue_trial({k.key: start[k.key] for k in free
                             if start.get(k.key) is not None and (k.when is None or k.when(start))})
    trials: List[Dict[str, Any]] = []
    while len(trials) < budget:
        batch = []
        for _ in range(min(parallel, budget - len(trials))):
            t = study.ask()
            # In the knobs' order, so a condition (sink_size under loop sink) sees what it depends on.
            config: Dict[str, Any] = {}
            for k in knobs:
                if k.when is not None and not k.when(config):
                    continue
                config[k.key] = fix[k.key] if k.key in fix else k.suggest(t)
            batch.append((t, config))
        results = evaluate([c for _, c in batch])
        for (t, config), r in zip(batch, results):
            v = value(r)
            if v is None:
                study.tell(t, state=optuna.trial.TrialState.FAIL)
            else:
                study.tell(t, v)
            trials.append({"number": len(trials), **r, "config": config, "value": v})
        if progress:
            progress(len(trials), budget)
    return trials


def tune(workload: str = "lenet5", *, budget: int = 50, seed: int = 0, objective: str = "samples_per_s",
         strategy: str = "non-sink", fix: Optional[Mapping[str, Any]] = None, client: Any = None,
         parallel: Optional[int] = None, explain: bool = True,
         progress: Optional[Callable[[int, int], None]] = None, **job: Any) -> TuneResult:
    """Searches the job's knobs for the best ``objective`` in ``budget`` simulations, the first of
    them the user's configuration (``strategy`` and the job's settings: epochs, steps_per_epoch,
    batch_size, devices, server, chip, overrides, ...). ``fix``: knobs held at a value.
    ``client``: a ``dask.distributed`` client to run each batch of trials on; ``parallel``: the
    trials of a batch (default: the cluster's workers, 1 without one).
    ``search_batch_size=True`` adds the batch size to the knobs. ``explain``: after the search,
    one simulation per knob the best changed, with that knob back at its start, to say what each
    change is worth (counted apart from the budget)."""
    if not isinstance(objective, str) or objective not in OBJECTIVES:
        raise InputError(f"objective: {objective!r}: one of {', '.join(OBJECTIVES)}")
    _whole("budget", budget, 1)
    _whole("seed", seed, 0, MAX_SEED)
    if not isinstance(strategy, str) or strategy not in STRATEGIES:
        raise InputError(f"strategy: {strategy!r}: one of {', '.join(STRATEGIES)}")
    for key in ("epochs", "steps_per_epoch", "batch_size", "devices", "max_devices"):
        if job.get(key) is not None:
            _whole(key, job[key], 1)
    if parallel is not None:
        _whole("parallel", parallel, 1)
    if not isinstance(explain, bool):
        raise InputError(f"explain: True or False, got {explain!r}")
    if fix is not None and not isinstance(fix, Mapping):
        raise InputError(f"fix: a mapping of knob to value, got {fix!r}")
    if objective == "serving_goodput" and job.get("model") is not None:
        raise InputError("model: the serving objective serves a built-in decoder (workload='gpt', ...), "
                         "not an ONNX model")
    if job.get("hf_config") is not None and not isinstance(job["hf_config"], (str, os.PathLike)):
        raise InputError(f"hf_config: a Hugging Face config.json's path, got {job['hf_config']!r}")
    if job.get("hf_config") is not None and workload == "lenet5":
        workload = None  # the config's transformer is the network (train and serve take it instead)
    if objective == "serving_goodput" and workload not in (None, "gpt", "gpt2-small", "gpt2-medium", "llama-7b"):
        raise InputError(f"workload: objective 'serving_goodput' serves a decoder: give workload='gpt', "
                         f"'gpt2-small', 'gpt2-medium' or 'llama-7b', not {workload!r}")
    def fixed_value(v: Any) -> Any:
        if not isinstance(v, str):
            return v
        return v.lower() == "true" if v.lower() in ("true", "false") else _parse_value(v)

    fix = {k: fixed_value(v) for k, v in (fix or {}).items()}
    serving = objective == "serving_goodput"
    if serving:
        knobs = serving_knobs(job)
        start = {k.key: job.get(k.key, _SERVE_START[k.key]) for k in knobs}
        job = {**{k: v for k, v in job.items() if k not in _SERVE_START}, "serving": True}
    else:
        facts = _job_facts(workload, job)
        knobs = knobs_for(workload, job, facts)
        job = {**job, "gradients": facts.get("gradients", 0),
           "dataset_steps": int(job.get("steps_per_epoch") or facts["steps_per_epoch"]),
           "dataset_batch": int(job.get("batch_size") or facts["batch_size"])}
        start = _start_config(knobs, job, facts, strategy)
    keys = {k.key for k in knobs}
    for k in fix:
        if k not in keys:
            raise InputError(f"fix: '{k}' is not a knob of this job ({', '.join(sorted(keys))})")
    for k in knobs:  # a fixed value, and the start's, within the knob's range
        for what, v in (("fix", fix.get(k.key)), ("start", start.get(k.key))):
            if v is None or (what == "start" and k.key in fix):
                continue
            if isinstance(v, float) and v.is_integer() and (k.kind == "int" or any(
                    type(c) is int for c in k.choices)):
                v = int(v)
                (fix if what == "fix" else start)[k.key] = v
            # A value of the knob's own type: True is not the sink size 1, nor 1 the choice True.
            ok = (type(v) is int and k.low <= v <= k.high) if k.kind == "int" \
                else any(type(v) is type(c) and v == c for c in k.choices)
            if not ok and what == "fix":
                raise InputError(f"fix: {k.key}={v!r} is outside the knob's "
                                 + (f"range {k.low} to {k.high}" if k.kind == "int" else f"choices {k.choices}"))
            if not ok:
                raise InputError(f"{k.key}: the job's {v!r} is outside what tune searches ("
                                 + (f"{k.low} to {k.high}" if k.kind == "int" else f"{k.choices}")
                                 + "); start from a value within it (--set), or hold the knob with --fix at one")
    start.update(fix)
    free = [k for k in knobs if k.key not in fix]
    maximise = OBJECTIVES[objective][1]
    if parallel is None:
        parallel = max(1, len(client.scheduler_info()["workers"])) if client is not None else 1
    if not isinstance(parallel, int) or parallel < 1:
        raise InputError(f"parallel: trials per batch, 1 or more, got {parallel!r}")
    def evaluate(configs: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
        if client is None:
            return [run_trial(workload, c, job) for c in configs]
        futures = client.map(run_trial, [workload] * len(configs), configs, [job] * len(configs), pure=False)
        try:
            return client.gather(futures)
        except BaseException:  # an interrupt: the batch's trials are not left running on the cluster
            client.cancel(futures)
            raise
    trials = search(knobs, evaluate, lambda r: _value(r, objective), budget=budget, seed=seed, maximise=maximise,
                    fix=fix, start=start, parallel=parallel, progress=progress)
    feasible = [t for t in trials if t["value"] is not None]
    if not feasible:
        raise RunError("no trial could run: " + "; ".join(sorted({t["infeasible"] for t in trials}))[:2000])
    first = trials[0]
    # The best value; of the trials within a millionth of it (equal but for rounding), the one that
    # changes the fewest knobs from the start, then the earliest.
    top = (max if maximise else min)(t["value"] for t in feasible)
    near = [t for t in feasible if abs(t["value"] - top) <= 1e-6 * abs(top)]
    changed = lambda t: sum(t["config"].get(k.key) != first["config"].get(k.key) for k in knobs)
    best = min(near, key=lambda t: (changed(t), t["number"]))

    cost = ("max_seqs" if serving else "devices" if "devices" in keys
            else "map_workers" if any(k.startswith("map_workers.") for k in keys) else "pipeline.num_parallel_workers")
    # What each change is worth: the best without it.
    ablations: Dict[str, Optional[float]] = {}
    ablation_runs = 0
    if explain:
        # One simulation per change that applies to the best (a knob its strategy does not use is
        # no change of its own); an ablation better than the best becomes the best.
        full_start = {**start, **first["config"]}
        for round_ in range(5):  # until no run beats the best; the last round judges the final best
            changed = [k.key for k in knobs if k.key in best["config"]
                       and first["config"].get(k.key) != best["config"].get(k.key)]
            configs = [_reverted(best["config"], key, full_start, knobs) for key in changed]
            results = evaluate(configs) if configs else []
            ablation_runs += len(configs)
            ablations = {key: _value(r, objective) for key, r in zip(changed, results)}
            better = [(key, c, r) for key, c, r in zip(changed, configs, results)
                      if ablations[key] is not None and abs(ablations[key] - best["value"]) > 1e-6 * abs(best["value"])
                      and (ablations[key] > best["value"] if maximise else ablations[key] < best["value"])]
            if not better or round_ == 4:
                break
            key, config, r = max(better, key=lambda x: ablations[x[0]] if maximise else -ablations[x[0]])
            best = {**r, "number": None, "found_by": f"the explanation, with {key} back at its start",
                    "config": config, "value": ablations[key]}
    data = {
        "kind": "tune",
        "workload": (str(job["model"]) if job.get("model") is not None
                     else os.fspath(job["hf_config"]) if workload is None else workload),
        "objective": objective,
        "budget": budget,
        "seed": seed,
        "parallel": parallel,
        "fixed": fix,
        "knobs": [{"key": k.key, "kind": k.kind, "low": k.low, "high": k.high, "choices": k.choices, "why": k.why}
                  for k in knobs],
        "start": {"config": first["config"], "value": first["value"], "number": 0,
                  **({"infeasible": first["infeasible"], "kind": first["kind"]} if first["value"] is None else {})},
        "best": {"config": best["config"], "value": best["value"], "number": best["number"],
                 **({"found_by": best["found_by"]} if "found_by" in best else {})},
        "gain": (None if first["value"] is None else (best["value"] / first["value"] if first["value"] else None)
                 if maximise else first["value"] / best["value"]),
        "explanation": _explain(first, best, knobs, ablations, maximise, explain, {**start, **first["config"]}),
        "ablation_simulations": ablation_runs,
        "importance": importance(trials, free),
        "pareto_cost": cost,
        "pareto": _pareto(trials, cost, maximise),
        "trials": [{**{k: v for k, v in t.items() if k != "report"}, **_applied(t)} for t in trials],
    }
    return TuneResult(data)
