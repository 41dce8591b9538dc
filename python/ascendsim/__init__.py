"""ascendsim from Python: simulate MindSpore training on an Ascend-style accelerator.

    >>> import ascendsim
    >>> r = ascendsim.compare("lenet5", epochs=1)
    >>> [run["samples_per_s"] for run in r.runs]

Every function runs the simulator in this process (the run releases the GIL) and returns what
the command line's JSON holds: ``train``/``compare`` a :class:`Report`, ``info``/``op``/
``params``/``chips`` dictionaries. Bad input raises :class:`InputError`, a simulated job that fails
(e.g. GetNext timing out) :class:`RunError`, with the command line's messages. ``sweep`` runs a
grid of configurations, locally or as tasks on a ``dask.distributed`` cluster.

MindSpore's words map to the strategies as the seeds use them: ``dataset_sink_mode=False`` is
``non-sink``; ``dataset_sink_mode=True`` is ``loop-sink`` (``Model.train(...,
dataset_sink_mode=True, sink_size=N)`` and ``data_sink(fn, dataset, sink_size=N,
jit_config=JitConfig())`` both run N steps per launch on the device; ``sink_size=-1``, one
epoch). ``data-sink`` and ``graph-sink`` are named explicitly with ``strategy=``.
"""
from __future__ import annotations

import copy
import builtins
import itertools
import json
import math
import numbers
import os
import sys
from typing import Any, Callable, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple, Union

from . import _ascendsim

__all__ = [
    "InputError", "RunError", "Stopped", "Report", "SweepResult", "STRATEGIES",
    "train", "compare", "info", "op", "params", "chips", "servers", "sweep", "cli", "serve", "ServeReport",
    "LAUNCH_MODES",
]

STRATEGIES: Tuple[str, ...] = ("non-sink", "data-sink", "graph-sink", "loop-sink")
#: LLM serving's launch modes (``serve``): op by op as non-sink, a captured graph as graph sink,
#: several decode steps per launch as loop sink.
LAUNCH_MODES: Tuple[str, ...] = ("eager", "graph", "multi-step")


class InputError(ValueError):
    """Bad input: an unknown workload or key, a malformed file, a value out of range."""


class RunError(RuntimeError):
    """The simulated job failed (e.g. GetNext timed out waiting for data)."""


class Stopped(RuntimeError):
    """A run stopped by a signal (``signal``) whose Python handler did not raise: the call did not
    finish. SIGINT under Python's default handler raises KeyboardInterrupt instead."""

    def __init__(self, message: str, signal: int) -> None:
        super().__init__(message)
        self.signal = signal


def cli(*args: Any) -> str:
    """Runs ``ascendsim ARGS...`` in this process and returns its standard output; raises
    InputError (exit 2) or RunError (exit 3) with its error lines."""
    code, out, err = _ascendsim.cli([str(a) for a in args])
    if code == 0:
        return out
    lines = [l[len("error: "):] if l.startswith("error: ") else l for l in err.splitlines() if l.strip()]
    message = "\n".join(lines) if lines else f"ascendsim exited with {code}"
    if code == 2:
        raise InputError(message)
    if code == 3:
        raise RunError(message)
    if code > 128:
        # A signal stopped the run and this process's handler for it raised nothing (KeyboardInterrupt
        # for SIGINT has been raised by now, in the main thread): the call did not finish.
        raise Stopped(message, code - 128)
    raise RuntimeError(message)


class Report:
    """A run's report: exactly the command line's JSON (``--json``).

    ``to_dict()`` gives its content, ``to_json()`` its text as the command line writes it,
    ``runs`` the list of runs (one per strategy), ``to_dataframe()`` one row per run with the
    headline figures (needs pandas)."""

    def __init__(self, text: str) -> None:
        self._text = text
        self._data: Dict[str, Any] = json.loads(text)

    @property
    def runs(self) -> List[Dict[str, Any]]:
        return self._data["runs"]

    def __getitem__(self, key: str) -> Any:
        return self._data[key]

    def to_dict(self) -> Dict[str, Any]:
        return copy.deepcopy(self._data)

    def to_json(self) -> str:
        return self._text

    def to_dataframe(self) -> "Any":
        import pandas  # Debian python3-pandas

        return pandas.DataFrame([_row(run) for run in self.runs])

    def __repr__(self) -> str:
        return (f"<ascendsim.Report {self._data.get('workload')} on {self._data.get('chip')}: "
                + ", ".join(f"{r['strategy']} {r['step_time_ms']['mean']:.4f} ms/step" for r in self.runs) + ">")


def _row(run: Mapping[str, Any]) -> Dict[str, Any]:
    row: Dict[str, Any] = {
        "strategy": run["strategy"], "steps": run["steps"], "sim_time_s": run["sim_time_s"],
        "samples_per_s": run["samples_per_s"], "step_ms_mean": run["step_time_ms"]["mean"],
        "step_ms_p50": run["step_time_ms"]["p50"], "step_ms_p99": run["step_time_ms"]["p99"],
        "device_busy_fraction": run["device_busy_fraction"],
    }
    for phase, seconds in run["breakdown_s"].items():
        row[f"{phase}_s"] = seconds
    return row


def _strategy(strategy: Optional[str], dataset_sink_mode: Optional[bool]) -> Optional[str]:
    _text("strategy", strategy)
    _switch("dataset_sink_mode", dataset_sink_mode)
    if strategy is not None:
        if dataset_sink_mode is not None:
            raise InputError("give strategy or dataset_sink_mode, not both")
        return strategy
    if dataset_sink_mode is None:
        return None
    return "loop-sink" if dataset_sink_mode else "non-sink"


def _preset_args(server: Optional[str], chip: Optional[str]) -> List[Any]:
    """The server preset (default generic-x86) and the chip (default: the server's)."""
    a: List[Any] = []
    if server is not None:
        a += ["--server", server]
    if chip is not None:
        a += ["--chip", chip]
    return a



def _whole(name: str, value: Any, low: Optional[int] = None, high: Optional[int] = None) -> int:
    """``value`` as a whole number (an int, not a bool, a string or a float) within [low, high]; else
    InputError naming the argument."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise InputError(f"{name}: a whole number, got {value!r} ({type(value).__name__})")
    if (low is not None and value < low) or (high is not None and value > high):
        bounds = (f"{low} to {high}" if low is not None and high is not None else
                  f"{low} or more" if low is not None else f"at most {high}")
        raise InputError(f"{name}: a whole number, {bounds}, got {value!r}")
    return int(value)


def _real(name: str, value: Any) -> float:
    """``value`` as a finite real number (an int or a float, not a bool or a string)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value):
        raise InputError(f"{name}: a finite number, got {value!r} ({type(value).__name__})")
    return value


def _switch(name: str, value: Any) -> Any:
    """``value`` as True or False (None: the default)."""
    if value is not None and not isinstance(value, bool):
        raise InputError(f"{name}: True or False, got {value!r} ({type(value).__name__})")
    return value


def _text(name: str, value: Any) -> Any:
    """``value`` as a string (None: not given)."""
    if value is not None and not isinstance(value, str):
        raise InputError(f"{name}: a string, got {value!r} ({type(value).__name__})")
    return value


def _names(name: str, value: Any) -> Any:
    """``value`` as a list of strings (None: not given); one string is not a list of its letters."""
    if value is None:
        return value
    if isinstance(value, str) or not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
        raise InputError(f"{name}: a list of strings, got {value!r}")
    return value


def _mapping(name: str, value: Any) -> Any:
    """``value`` as a mapping with string keys (None: not given)."""
    if value is not None and (not isinstance(value, Mapping) or not all(isinstance(k, str) for k in value)):
        raise InputError(f"{name}: a dict of name to value, got {value!r}")
    return value


def _setting(value: Any) -> str:
    """A parameter value as --set takes it: Python's booleans as true/false."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)

def _hf_config_args(hf_config: Any, workload: Optional[str], default: str) -> List[Any]:
    """A Hugging Face config.json (``hf_config``, docs/model.md) as the network: ``--hf-config``, and
    ``--workload`` only when one other than the default was given too (the command line refuses the
    two together)."""
    if hf_config is None:
        return ["--workload", workload]
    if not isinstance(hf_config, (str, os.PathLike)):
        raise InputError(f"hf_config: a Hugging Face config.json's path, got {hf_config!r} ({type(hf_config).__name__})")
    return ["--hf-config", os.fspath(hf_config)] + (["--workload", workload] if workload not in (None, default) else [])


def _network_args(workload: Optional[str], model: Optional[str], mode: Optional[str], loss: Optional[str],
                  hf_config: Optional[str] = None) -> List[Any]:
    """The network: a built-in workload, or an ONNX file (``model``, docs/onnx.md) or a Hugging Face
    config (``hf_config``) instead."""
    for name, value in (("workload", workload), ("mode", mode), ("loss", loss)):
        _text(name, value)
    if model is not None and not isinstance(model, (str, os.PathLike)):
        raise InputError(f"model: an ONNX file's path, got {model!r} ({type(model).__name__})")
    if model is not None:
        model = os.fspath(model)
    a: List[Any] = _hf_config_args(hf_config, workload, "lenet5") if model is None else ["--model", model]
    if model is not None and hf_config is not None:
        a += _hf_config_args(hf_config, None, "lenet5")  # the command line refuses the two together
    if mode is not None:
        a += ["--mode", mode]
    if loss is not None:
        a += ["--loss", loss]
    return a


_SHAPE_KEYS = ("layers", "hidden", "heads", "kv_heads", "ffn", "seq_length", "vocab")


def _shape_args(shape: Optional[Mapping[str, int]], keys: Sequence[str]) -> List[Any]:
    """A transformer's size over its preset's: ``--layers N`` ... (each a whole number, 1 or more)."""
    _mapping("shape", shape)
    a: List[Any] = []
    for key, value in (shape or {}).items():
        if key not in keys:
            raise InputError(f"shape: unknown key '{key}' (known: {', '.join(keys)})")
        a += ["--" + key.replace("_", "-"), _whole(f"shape['{key}']", value)]
    return a


def _run_args(workload: str, *, sink_size: int = -1, epochs: int = 1, batch_size: Optional[int] = None,
              steps_per_epoch: Optional[int] = None, devices: int = 1, server: Optional[str] = None,
              chip: Optional[str] = None,
              overrides: Optional[Mapping[str, Any]] = None, dataset: Optional[str] = None,
              config: Optional[str] = None, all_reduce_fusion: Optional[Sequence[int]] = None,
              rank_table: Optional[str] = None, amp_level: Optional[str] = None,
              loss_scale: Optional[float] = None, functional: bool = False, eval: bool = False,
              seed: Optional[int] = None, init: Optional[str] = None, eval_every: int = 0, parallel_mode: Optional[str] = None,
              dataset_strategy: Optional[str] = None, shard_strategy: Optional[str] = None,
              model: Optional[str] = None, mode: Optional[str] = None, loss: Optional[str] = None,
              keep_batchnorm_fp32: Optional[bool] = None, ub_fusion: Optional[bool] = None,
              accuracy_curve: Optional[str] = None, target_accuracy: Optional[float] = None,
              optimizer: Optional[str] = None, shape: Optional[Mapping[str, int]] = None,
              tensor_parallel: Optional[int] = None, sequence_parallel: bool = False, optimizer_shard: bool = False,
              recompute: bool = False, flash_attention: Optional[bool] = None,
              pipeline_stages: Optional[int] = None, micro_batches: Optional[int] = None,
              gradient_accumulation: Optional[int] = None, optimizer_shard_level: Optional[int] = None,
              frozen: Optional[Sequence[str]] = None, data: Optional[str] = None,
              hf_config: Optional[str] = None, framework: Optional[str] = None,
              checkpoint_every: Optional[int] = None, checkpoint_async: bool = False,
              device_mtbf_hours: Optional[float] = None, fault_seeds: Optional[int] = None) -> List[str]:
    # Types here (a string or a bool is not a number); ranges are the command line's to judge.
    for name, value in (("epochs", epochs), ("sink_size", sink_size), ("devices", devices), ("eval_every", eval_every),
                        ("batch_size", batch_size), ("steps_per_epoch", steps_per_epoch),
                        ("tensor_parallel", tensor_parallel), ("pipeline_stages", pipeline_stages),
                        ("micro_batches", micro_batches), ("gradient_accumulation", gradient_accumulation),
                        ("optimizer_shard_level", optimizer_shard_level), ("seed", seed),
                        ("checkpoint_every", checkpoint_every), ("fault_seeds", fault_seeds)):
        if value is not None:
            _whole(name, value)
    for name, value in (("loss_scale", loss_scale), ("target_accuracy", target_accuracy),
                        ("device_mtbf_hours", device_mtbf_hours)):
        if value is not None:
            _real(name, value)
    for name, value in (("functional", functional), ("eval", eval), ("optimizer_shard", optimizer_shard),
                        ("sequence_parallel", sequence_parallel), ("recompute", recompute),
                        ("keep_batchnorm_fp32", keep_batchnorm_fp32), ("ub_fusion", ub_fusion),
                        ("flash_attention", flash_attention), ("checkpoint_async", checkpoint_async)):
        _switch(name, value)
    for name, value in (("server", server), ("chip", chip), ("dataset", dataset), ("data", data), ("config", config),
                        ("rank_table", rank_table), ("amp_level", amp_level), ("init", init),
                        ("parallel_mode", parallel_mode), ("dataset_strategy", dataset_strategy),
                        ("shard_strategy", shard_strategy), ("accuracy_curve", accuracy_curve),
                        ("optimizer", optimizer)):
        _text(name, value)
    _mapping("overrides", overrides)
    _names("frozen", frozen)
    if all_reduce_fusion is not None and (isinstance(all_reduce_fusion, (str, bytes)) or not all(
            isinstance(i, numbers.Integral) and not isinstance(i, bool) for i in all_reduce_fusion)):
        raise InputError(f"all_reduce_fusion: a list of gradient indices (whole numbers), got {all_reduce_fusion!r}")
    a = _network_args(workload, model, mode, loss, hf_config)
    a += _shape_args(shape, _SHAPE_KEYS)
    a += ["--epochs", epochs, "--sink-size", sink_size, "--devices", devices, *_preset_args(server, chip)]
    if framework is not None:
        _text("framework", framework)
        a += ["--framework", framework]
    for flag, value in (("--keep-batchnorm-fp32", keep_batchnorm_fp32), ("--ub-fusion", ub_fusion),
                        ("--flash-attention", flash_attention)):
        if value is not None:
            a += [flag, "true" if value else "false"]
    # Options given only when set (None, or a false switch or a zero eval_every, leaves the default).
    for flag, value in (("--optimizer", optimizer), ("--accuracy-curve", accuracy_curve),
                        ("--target-accuracy", target_accuracy), ("--batch-size", batch_size),
                        ("--steps-per-epoch", steps_per_epoch), ("--dataset", dataset), ("--data", data),
                        ("--config", config),
                        ("--rank-table", rank_table), ("--amp-level", amp_level), ("--loss-scale", loss_scale),
                        ("--seed", seed), ("--init", init), ("--eval-every", eval_every or None),
                        ("--parallel-mode", parallel_mode), ("--dataset-strategy", dataset_strategy),
                        ("--shard-strategy", shard_strategy), ("--tensor-parallel", tensor_parallel),
                        ("--pipeline-stages", pipeline_stages), ("--micro-batches", micro_batches),
                        ("--gradient-accumulation", gradient_accumulation),
                        ("--optimizer-shard-level", optimizer_shard_level),
                        ("--checkpoint-every", checkpoint_every), ("--device-mtbf-hours", device_mtbf_hours),
                        ("--fault-seeds", fault_seeds)):
        if value is not None:
            a += [flag, value]
    if all_reduce_fusion:
        a += ["--all-reduce-fusion", ",".join(str(int(i)) for i in all_reduce_fusion)]
    if frozen:
        a += ["--frozen", ",".join(frozen)]
    a += ["--functional"] * bool(functional) + ["--eval"] * bool(eval) + ["--optimizer-shard"] * bool(optimizer_shard)
    a += ["--recompute"] * bool(recompute) + ["--sequence-parallel"] * bool(sequence_parallel)
    a += ["--checkpoint-async"] * bool(checkpoint_async)
    for key, value in (overrides or {}).items():
        a += ["--set", f"{key}={_setting(value)}"]
    return [str(x) for x in a]


def train(workload: str = "lenet5", strategy: Optional[str] = None, *, dataset_sink_mode: Optional[bool] = None,
          sink_size: int = -1, epochs: int = 1, batch_size: Optional[int] = None,
          steps_per_epoch: Optional[int] = None, devices: int = 1, server: Optional[str] = None,
          chip: Optional[str] = None,
          overrides: Optional[Mapping[str, Any]] = None, dataset: Optional[str] = None, config: Optional[str] = None,
          all_reduce_fusion: Optional[Sequence[int]] = None, rank_table: Optional[str] = None,
          amp_level: Optional[str] = None, loss_scale: Optional[float] = None, functional: bool = False,
          eval: bool = False, seed: Optional[int] = None, init: Optional[str] = None, eval_every: int = 0, parallel_mode: Optional[str] = None,
          dataset_strategy: Optional[str] = None, shard_strategy: Optional[str] = None,
          model: Optional[str] = None, mode: Optional[str] = None, loss: Optional[str] = None,
          keep_batchnorm_fp32: Optional[bool] = None, ub_fusion: Optional[bool] = None,
          accuracy_curve: Optional[str] = None, target_accuracy: Optional[float] = None,
          optimizer: Optional[str] = None, shape: Optional[Mapping[str, int]] = None,
          tensor_parallel: Optional[int] = None, sequence_parallel: bool = False, optimizer_shard: bool = False,
          recompute: bool = False, flash_attention: Optional[bool] = None, pipeline_stages: Optional[int] = None,
          micro_batches: Optional[int] = None, gradient_accumulation: Optional[int] = None,
          optimizer_shard_level: Optional[int] = None,
          frozen: Optional[Sequence[str]] = None, data: Optional[str] = None,
          hf_config: Optional[str] = None, framework: Optional[str] = None,
          checkpoint_every: Optional[int] = None, checkpoint_async: bool = False,
          device_mtbf_hours: Optional[float] = None, fault_seeds: Optional[int] = None) -> Report:
    """One training run under one strategy: ``strategy`` ("non-sink", "data-sink", "graph-sink",
    "loop-sink") or MindSpore's ``dataset_sink_mode`` (see the module's documentation).
    ``overrides`` sets configuration parameters (``{"link.h2d_bandwidth_gbps": 16}``; see
    :func:`params`); ``sink_size`` is loop sink's steps per launch (-1: one epoch);
    ``eval_every`` evaluates after every that many epochs (the report's ``evaluation``).
    ``model`` runs an ONNX file instead of ``workload`` (its batch size its own unless symbolic);
    ``mode="infer"`` runs the forward pass only; ``loss="none"`` trains a model ending in its loss.
    ``functional=True`` also computes the values (``seed``, ``init``: "script" or "he-uniform").
    ``ub_fusion=False`` turns off the backend's UB fusion (on by default, as MindSpore's graph mode);
    ``overrides={"memory.hbm_contention": False}`` gives every consumer of the HBM all of it.
    ``accuracy_curve`` (a CSV of epoch,accuracy) with ``target_accuracy`` (a fraction) trains to the
    first evaluation (every ``eval_every`` epochs) at which the curve reaches it, instead of
    ``epochs``; the report's ``time_to_train_s`` splits the run. ``optimizer="lars"`` trains with LARS
    over the Momentum (ResNet, MobileNetV2). ``shape`` sets a transformer's size over its preset's
    (``{"layers": 4, "hidden": 512, "heads": 8, "seq_length": 256}``; keys ``layers``, ``hidden``,
    ``heads``, ``kv_heads``, ``ffn``, ``seq_length``, ``vocab``). ``tensor_parallel=N`` splits a transformer's
    attention and MLP over groups of N adjacent devices (Megatron's layout; ``batch_size`` is then each
    group's); ``sequence_parallel=True`` adds Megatron's sequence parallelism to it (the norms, dropouts and
    residual adds on 1/N of the tokens); ``optimizer_shard=True`` shards the optimizer state across the ranks
    that hold the same weights (MindSpore's optimizer_shard, ZeRO-1), ``optimizer_shard_level=2`` the gradients too
    (ZeRO-2: each micro-batch's gradient reduce-scattered; fp16 weights updated in an fp32 master copy of the rank's
    piece); ``recompute=True`` runs every layer's forward again
    in the backward pass, keeping only each layer's input; ``flash_attention`` turns the fused attention
    kernel on or off (default: where the chip's backend has it, the Ascend 910B); ``pipeline_stages=P``
    divides a transformer's layers among P stages of consecutive devices, each step's batch in
    ``micro_batches`` micro-batches in the 1F1B order (``batch_size`` is then each pipeline's; the
    report's ``pipeline`` gives each stage's bubble); ``gradient_accumulation=N`` runs each step's
    batch in N micro-batches whose gradients are added up before one optimizer step and one set of
    gradient collectives (``batch_size`` is the step's; with pipeline stages, N rounds of
    ``micro_batches``); ``frozen`` names an ONNX model's initializers
    that are not trained (PyTorch's buffers read as data, such as rotary tables). ``data`` names a data
    script (YAML: the pipeline as a training script builds it, docs/model.md "The data script").
    ``framework`` names the framework launching ops one by one in non-sink mode (configs/frameworks,
    e.g. "vllm-ascend-eager": PyTorch's launches from Python). ``hf_config`` names a Hugging Face config.json (or a shipped one, ``"llama-2-7b"``): the transformer
    it describes instead of ``workload``, ``shape`` overriding its fields (docs/model.md).
    ``checkpoint_every=N`` saves a checkpoint at least every N steps and at the end, as MindSpore's
    ModelCheckpoint (``checkpoint_async=True``: its async_save); the report's ``checkpoint`` times each
    save's copy, serialisation and write, and ``time_to_train_s`` gains ``checkpoint``.
    ``device_mtbf_hours`` (with ``checkpoint_every``) lays device failures over the run: the report's
    ``faults`` gives the expected time to train with restarts from the last checkpoint, its spread over
    ``fault_seeds`` draws (100) and the best checkpoint interval beside Young/Daly's (docs/model.md)."""
    s = _strategy(strategy, dataset_sink_mode)
    if s is None:
        raise InputError("train needs strategy= or dataset_sink_mode=")
    return Report(cli("train", "--strategy", s, *_run_args(
        workload, sink_size=sink_size, epochs=epochs, batch_size=batch_size, steps_per_epoch=steps_per_epoch,
        devices=devices, server=server, chip=chip, overrides=overrides, dataset=dataset, config=config,
        all_reduce_fusion=all_reduce_fusion, rank_table=rank_table, amp_level=amp_level, loss_scale=loss_scale,
        functional=functional, eval=eval, seed=seed, init=init, eval_every=eval_every, parallel_mode=parallel_mode,
        dataset_strategy=dataset_strategy, shard_strategy=shard_strategy, model=model, mode=mode, loss=loss,
        keep_batchnorm_fp32=keep_batchnorm_fp32, ub_fusion=ub_fusion, accuracy_curve=accuracy_curve,
        target_accuracy=target_accuracy, optimizer=optimizer, shape=shape, tensor_parallel=tensor_parallel,
        sequence_parallel=sequence_parallel, optimizer_shard=optimizer_shard, recompute=recompute,
        flash_attention=flash_attention, pipeline_stages=pipeline_stages, micro_batches=micro_batches,
        gradient_accumulation=gradient_accumulation, optimizer_shard_level=optimizer_shard_level, frozen=frozen,
        data=data, hf_config=hf_config, framework=framework, checkpoint_every=checkpoint_every,
        checkpoint_async=checkpoint_async, device_mtbf_hours=device_mtbf_hours, fault_seeds=fault_seeds),
        "--json", "-", "-q"))


def compare(workload: str = "lenet5", *, sink_size: int = -1, epochs: int = 1, batch_size: Optional[int] = None,
            steps_per_epoch: Optional[int] = None, devices: int = 1, server: Optional[str] = None,
          chip: Optional[str] = None,
            overrides: Optional[Mapping[str, Any]] = None, dataset: Optional[str] = None,
            config: Optional[str] = None, all_reduce_fusion: Optional[Sequence[int]] = None,
            rank_table: Optional[str] = None, amp_level: Optional[str] = None,
            loss_scale: Optional[float] = None, functional: bool = False, eval: bool = False,
            seed: Optional[int] = None, init: Optional[str] = None, eval_every: int = 0, parallel_mode: Optional[str] = None,
            dataset_strategy: Optional[str] = None, shard_strategy: Optional[str] = None,
            model: Optional[str] = None, mode: Optional[str] = None, loss: Optional[str] = None,
            keep_batchnorm_fp32: Optional[bool] = None, ub_fusion: Optional[bool] = None,
            shape: Optional[Mapping[str, int]] = None, tensor_parallel: Optional[int] = None,
            sequence_parallel: bool = False, optimizer_shard: bool = False, recompute: bool = False,
            flash_attention: Optional[bool] = None,
            pipeline_stages: Optional[int] = None, micro_batches: Optional[int] = None,
            gradient_accumulation: Optional[int] = None, optimizer_shard_level: Optional[int] = None,
            frozen: Optional[Sequence[str]] = None, data: Optional[str] = None,
            hf_config: Optional[str] = None, framework: Optional[str] = None,
            checkpoint_every: Optional[int] = None, checkpoint_async: bool = False,
            device_mtbf_hours: Optional[float] = None, fault_seeds: Optional[int] = None) -> Report:
    """The same job under all four strategies (runs in the order of STRATEGIES); ``data`` and
    ``hf_config`` as :func:`train`."""
    return Report(cli("compare", *_run_args(
        workload, sink_size=sink_size, epochs=epochs, batch_size=batch_size, steps_per_epoch=steps_per_epoch,
        devices=devices, server=server, chip=chip, overrides=overrides, dataset=dataset, config=config,
        all_reduce_fusion=all_reduce_fusion, rank_table=rank_table, amp_level=amp_level, loss_scale=loss_scale,
        functional=functional, eval=eval, seed=seed, init=init, eval_every=eval_every, parallel_mode=parallel_mode,
        dataset_strategy=dataset_strategy, shard_strategy=shard_strategy, model=model, mode=mode, loss=loss,
        keep_batchnorm_fp32=keep_batchnorm_fp32, ub_fusion=ub_fusion, shape=shape, tensor_parallel=tensor_parallel,
        sequence_parallel=sequence_parallel, optimizer_shard=optimizer_shard, recompute=recompute,
        flash_attention=flash_attention, pipeline_stages=pipeline_stages, micro_batches=micro_batches,
        gradient_accumulation=gradient_accumulation, optimizer_shard_level=optimizer_shard_level, frozen=frozen,
        data=data, hf_config=hf_config, framework=framework, checkpoint_every=checkpoint_every,
        checkpoint_async=checkpoint_async, device_mtbf_hours=device_mtbf_hours, fault_seeds=fault_seeds),
        "--json", "-", "-q"))


class ServeReport(Report):
    """A serving report (``ascendsim serve --json``): ``runs`` one per launch mode, with TTFT, TPOT
    and end-to-end latency percentiles, throughput, the KV cache over time and where a decode step's
    time goes; ``decode_step_by_batch`` one decode step per launch mode at each batch size;
    ``sweep`` the runs at each rate of a sweep. ``to_dataframe()``: one row per run (and sweep point)."""

    @property
    def sweep(self) -> List[Dict[str, Any]]:
        return self._data.get("sweep", [])

    def to_dataframe(self) -> "Any":
        import pandas  # Debian python3-pandas

        rows = []
        for run in self.runs + self.sweep:
            row = {"launch": run["launch"], "rate": run["rate"], "requests_per_s": run["requests_per_s"],
                   "output_tokens_per_s": run["output_tokens_per_s"],
                   "decode_step_ms": run["decode_step_ms"]["mean"]}
            for metric in ("ttft_ms", "tpot_ms", "e2e_ms"):
                for q in ("p50", "p90", "p99"):
                    row[f"{metric[:-3]}_{q}_ms"] = run[metric][q]
            rows.append(row)
        return pandas.DataFrame(rows)

    def __repr__(self) -> str:
        return (f"<ascendsim.ServeReport {self._data.get('workload')} on {self._data.get('devices')} x "
                f"{self._data.get('chip')}: "
                + ", ".join(f"{r['launch']} TPOT p50 {r['tpot_ms']['p50']:.2f} ms" for r in self.runs) + ">")


def serve(workload: str = "gpt", *, gpt_size: Optional[str] = None, launch: Union[str, Sequence[str]] = "eager",
          rate: float = 1.0, requests: int = 100, prompt_tokens: int = 512, output_tokens: int = 128,
          length_spread: float = 0.0, arrivals: Optional[str] = None, seed: int = 1, devices: int = 1,
          tensor_parallel: int = 1, server: Optional[str] = None, chip: Optional[str] = None,
          overrides: Optional[Mapping[str, Any]] = None, config: Optional[str] = None,
          shape: Optional[Mapping[str, int]] = None, max_seqs: int = 256, max_batched_tokens: int = 8192,
          chunked_prefill: bool = False, block_size: int = 128, kv_blocks: int = 0,
          memory_utilization: float = 0.9, multi_step: int = 8, sampling: str = "device",
          capture: str = "startup", graph_buckets: Optional[Sequence[int]] = None,
          rates: Optional[Sequence[float]] = None, decode_batches: Optional[Sequence[int]] = None,
          slo_ttft_ms: float = 2000, slo_tpot_ms: float = 100, html: Optional[str] = None,
          hf_config: Optional[str] = None, framework: Optional[str] = None) -> ServeReport:
    """LLM serving (``ascendsim serve``, docs/serving.md): ``requests`` arriving at ``rate`` per second
    (or from the JSONL file ``arrivals``) served with continuous batching over a paged KV cache, under
    each launch mode of ``launch`` ("eager", "graph", "multi-step", a list of them, or "all").
    ``shape``: layers, hidden, heads, ffn, vocab over the preset's; ``rates``: a sweep (each launch mode
    at each rate; ``html`` then charts latency against throughput). ``hf_config``: a Hugging Face
    config.json's decoder instead of ``workload`` (``shape`` overriding its fields); ``framework`` the
    framework launching an eager step's ops ("vllm-ascend-eager": PyTorch's launches from Python on the
    server's CPU)."""
    _switch("chunked_prefill", chunked_prefill)
    for name, value in (("requests", requests), ("prompt_tokens", prompt_tokens), ("output_tokens", output_tokens),
                        ("seed", seed), ("devices", devices), ("tensor_parallel", tensor_parallel),
                        ("max_seqs", max_seqs), ("max_batched_tokens", max_batched_tokens),
                        ("block_size", block_size), ("kv_blocks", kv_blocks), ("multi_step", multi_step)):
        _whole(name, value)  # the range is the command line's to judge
    for name, value in (("rate", rate), ("length_spread", length_spread), ("memory_utilization", memory_utilization),
                        ("slo_ttft_ms", slo_ttft_ms), ("slo_tpot_ms", slo_tpot_ms)):
        _real(name, value)
    for name, value in (("workload", workload), ("gpt_size", gpt_size), ("arrivals", arrivals), ("server", server),
                        ("chip", chip), ("config", config), ("sampling", sampling), ("capture", capture),
                        ("html", html), ("framework", framework)):
        _text(name, value)
    _mapping("overrides", overrides)
    for name, values, check in (("graph_buckets", graph_buckets, _whole), ("rates", rates, _real),
                                ("decode_batches", decode_batches, _whole)):
        if values is not None:
            if isinstance(values, (str, bytes)) or not isinstance(values, Iterable):
                raise InputError(f"{name}: a list, got {values!r}")
            for v in values:
                check(name, v)
    if not isinstance(launch, str) and (not isinstance(launch, Iterable) or
                                        not all(isinstance(m, str) for m in launch)):
        raise InputError(f"launch: a launch mode ({', '.join(LAUNCH_MODES)}), a list of them or 'all', got {launch!r}")
    a: List[Any] = ["serve", *_hf_config_args(hf_config, workload, "gpt"), *_preset_args(server, chip)]
    if framework is not None:
        a += ["--framework", framework]
    if gpt_size is not None:
        a += ["--gpt-size", gpt_size]
    modes = launch if isinstance(launch, str) else ",".join(launch)
    if arrivals is None:
        a += ["--rate", rate, "--requests", requests]
    a += ["--launch", modes, "--prompt-tokens", prompt_tokens,
          "--output-tokens", output_tokens, "--length-spread", length_spread, "--seed", seed,
          "--devices", devices, "--tensor-parallel", tensor_parallel, "--max-seqs", max_seqs,
          "--max-batched-tokens", max_batched_tokens, "--chunked-prefill", "true" if chunked_prefill else "false",
          "--block-size", block_size, "--kv-blocks", kv_blocks, "--memory-utilization", memory_utilization,
          "--multi-step", multi_step, "--sampling", sampling, "--capture", capture,
          "--slo-ttft-ms", slo_ttft_ms, "--slo-tpot-ms", slo_tpot_ms]
    if arrivals is not None:
        a += ["--arrivals", arrivals]
    a += _shape_args(shape, ("layers", "hidden", "heads", "kv_heads", "ffn", "vocab"))
    for key, value in (overrides or {}).items():
        a += ["--set", f"{key}={_setting(value)}"]
    if config is not None:
        a += ["--config", config]
    if graph_buckets:
        a += ["--graph-buckets", ",".join(str(b) for b in graph_buckets)]
    if rates:
        a += ["--rates", ",".join(str(r) for r in rates)]
    if decode_batches:
        a += ["--decode-batches", ",".join(str(b) for b in decode_batches)]
    if html is not None:
        a += ["--html", html]
    return ServeReport(cli(*a, "--json", "-", "-q"))


def info(workload: str = "lenet5", *, batch_size: Optional[int] = None, server: Optional[str] = None,
         chip: Optional[str] = None,
         overrides: Optional[Mapping[str, Any]] = None, amp_level: Optional[str] = None,
         model: Optional[str] = None, mode: Optional[str] = None, loss: Optional[str] = None,
         ub_fusion: Optional[bool] = None, frozen: Optional[Sequence[str]] = None,
         shape: Optional[Mapping[str, int]] = None, data: Optional[str] = None,
         hf_config: Optional[str] = None) -> Dict[str, Any]:
    """Parameters, MACs, ops and device memory of a workload or an ONNX ``model``
    (``ascendsim info --json``); ``graph_passes`` ends with the backend's UB fusion, its ops and
    bytes (``ub_fusion=False``: without it); ``shape`` a transformer's size over its preset's;
    ``data`` a data script (its pipeline in ``pipeline_tree``); ``hf_config`` a Hugging Face
    config.json's transformer instead of ``workload``."""
    for name, value in (("server", server), ("chip", chip), ("amp_level", amp_level), ("data", data)):
        _text(name, value)
    _switch("ub_fusion", ub_fusion)
    _mapping("overrides", overrides)
    _names("frozen", frozen)
    if batch_size is not None:
        _whole("batch_size", batch_size)
    a = ["info", *_network_args(workload, model, mode, loss, hf_config), *_preset_args(server, chip)]
    if data is not None:
        a += ["--data", data]
    a += _shape_args(shape, _SHAPE_KEYS)
    if frozen:
        a += ["--frozen", ",".join(frozen)]
    if ub_fusion is not None:
        a += ["--ub-fusion", "true" if ub_fusion else "false"]
    if batch_size is not None:
        a += ["--batch-size", batch_size]
    if amp_level is not None:
        a += ["--amp-level", amp_level]
    for key, value in (overrides or {}).items():
        a += ["--set", f"{key}={_setting(value)}"]
    return json.loads(cli(*a, "--json", "-"))


def op(type: str, *, server: Optional[str] = None, chip: Optional[str] = None,
       overrides: Optional[Mapping[str, Any]] = None, **dims: Any) -> Dict[str, Any]:
    """One op on the AI cores (``ascendsim op --type TYPE --json``); ``dims`` are its options
    with ``_`` for ``-`` (e.g. ``op("MatMul", m=1024, k=1024, n=1024)``)."""
    for name, value in (("type", type), ("server", server), ("chip", chip)):
        _text(name, value)
    _mapping("overrides", overrides)
    a: List[Any] = ["op", "--type", type, *_preset_args(server, chip)]
    for key, value in dims.items():
        if isinstance(value, bool) or not isinstance(value, (numbers.Real, str)):
            raise InputError(f"{key}: a number or a name, got {value!r} ({builtins.type(value).__name__})")
        a += [f"--{key.replace('_', '-')}", value]
    for key, value in (overrides or {}).items():
        a += ["--set", f"{key}={_setting(value)}"]
    return json.loads(cli(*a, "--json", "-"))


def params(chip: Optional[str] = None, *, server: Optional[str] = None) -> Dict[str, Dict[str, Any]]:
    """Every configuration parameter of a chip preset on a server preset (default: generic-x86 and
    its chip): value, unit, range, description."""
    _text("chip", chip)
    _text("server", server)
    return json.loads(cli("params", *_preset_args(server, chip), "--json", "-"))


def chips() -> Dict[str, str]:
    """The chip presets and their descriptions."""
    return json.loads(cli("chips", "--json", "-"))


def servers() -> Dict[str, Dict[str, Any]]:
    """The server presets: description, chip, devices per server and host cores of each."""
    return json.loads(cli("servers", "--json", "-"))


# Sweeps ------------------------------------------------------------------------------------------

#: Grid keys that are arguments of train()/compare(); any other key with a dot is a parameter.
RUN_KEYS = ("sink_size", "epochs", "batch_size", "steps_per_epoch", "devices", "server", "chip", "dataset",
            "all_reduce_fusion", "amp_level", "loss_scale", "workload", "eval_every", "model", "mode")


def _point_kwargs(workload: str, point: Mapping[str, Any], common: Mapping[str, Any]) -> Dict[str, Any]:
    kw = dict(common)
    overrides = dict(kw.pop("overrides", None) or {})
    kw["workload"] = workload
    for key, value in point.items():
        if key in RUN_KEYS:
            kw[key] = value
        elif "." in key:
            overrides[key] = value
        else:
            raise InputError(f"sweep grid key '{key}': neither a run setting ({', '.join(RUN_KEYS)}) "
                             "nor a parameter (`ascendsim params`)")
    kw["overrides"] = overrides
    return kw


def _sink_size_point(workload: str, kw: Dict[str, Any], strategies: Optional[Sequence[str]]) -> Report:
    """A grid point with ``sink_size`` S, run as ``ascendsim sweep --param sink_size --values S``:
    the training stays ``epochs`` x ``steps_per_epoch`` steps, loop sink runs it in ceil(total / S)
    sinks of S steps, the other strategies as they are. Its report holds the sweep's rows as runs
    (without the per-module ``stats``)."""
    kw = dict(kw)
    sink = kw.pop("sink_size")
    args = ["sweep", "--param", "sink_size", "--values", str(sink)]
    if strategies is not None:
        args += ["--strategies", ",".join(strategies)]
    data = json.loads(cli(*args, *_run_args(workload, **kw), "--json", "-", "-q"))
    runs = [{k: v for k, v in row.items() if k not in ("param", "value")} for row in data["rows"]]
    report = {"workload": data["workload"], "chip": data["chip"], "batch_size": data["batch_size"], "runs": runs,
              "config": data["config"]}
    return Report(json.dumps(report, indent=2))


def run_point(workload: str, point: Mapping[str, Any], strategies: Optional[Sequence[str]],
              common: Mapping[str, Any]) -> Dict[str, Any]:
    """One grid point (a Dask task): {"point", "report"} or {"point", "error", "kind"}."""
    try:
        kw = _point_kwargs(workload, point, common)
        wl = kw.pop("workload")
        if "sink_size" in point:
            report = _sink_size_point(wl, kw, strategies)
        elif strategies is not None and len(strategies) == 1:
            report = train(wl, strategies[0], **kw)
        else:
            report = compare(wl, **kw)
            if strategies is not None:
                data = report.to_dict()
                data["runs"] = [r for r in data["runs"] if r["strategy"] in strategies]
                report = Report(json.dumps(data))
        return {"point": dict(point), "report": report.to_json()}
    except (InputError, RunError) as e:
        return {"point": dict(point), "error": str(e), "kind": type(e).__name__}


class SweepResult:
    """A sweep's points in grid order: each with its report or its error."""

    def __init__(self, points: List[Dict[str, Any]]) -> None:
        self.points = points

    @property
    def failed(self) -> List[Dict[str, Any]]:
        return [p for p in self.points if "error" in p]

    def reports(self) -> List[Optional[Report]]:
        return [Report(p["report"]) if "report" in p else None for p in self.points]

    def rows(self) -> List[Dict[str, Any]]:
        """One row per point and strategy: the point's values and the run's headline figures."""
        out = []
        for p in self.points:
            if "report" not in p:
                out.append({**p["point"], "error": p["error"]})
                continue
            for run in Report(p["report"]).runs:
                out.append({**p["point"], **_row(run)})
        return out

    def to_dataframe(self) -> "Any":
        import pandas

        return pandas.DataFrame(self.rows())


def grid_points(grid: Union[Mapping[str, Iterable[Any]], Sequence[Mapping[str, Any]]]) -> List[Dict[str, Any]]:
    """The Cartesian product of the grid, the last key varying fastest; a list of points (dicts)
    is taken as it is (for values that go together, e.g. a batch size with its steps per epoch)."""
    if not isinstance(grid, Mapping):
        return [dict(p) for p in grid]
    keys = list(grid)
    return [dict(zip(keys, values)) for values in itertools.product(*(list(grid[k]) for k in keys))]


def sweep(workload: str, grid: Union[Mapping[str, Iterable[Any]], Sequence[Mapping[str, Any]]], *, strategies: Optional[Sequence[str]] = None,
          client: Optional[Any] = None, progress: Optional[Callable[[int, int, int], None]] = None,
          **common: Any) -> SweepResult:
    """Runs ``workload`` at every point of ``grid`` (run settings such as ``sink_size`` or
    parameters such as ``"link.h2d_bandwidth_gbps"``), under ``strategies`` (default all four).

    A ``sink_size`` in the grid means what ``ascendsim sweep --param sink_size`` means: the same
    training, ``epochs`` x ``steps_per_epoch`` steps, which loop sink runs in ceil(total / S) sinks
    of S steps (``train``'s and ``compare``'s ``sink_size`` with ``epochs`` is Model.train's:
    ``epochs`` sinks of S steps).

    With a ``dask.distributed.Client`` each point is a task on the cluster's workers; the points
    come back in grid order and equal a local run's. A point that fails is reported with its error
    (``SweepResult.failed``); the others complete. ``progress(done, failed, total)`` is called as
    points finish (default: a line on stderr with a client, nothing without). ``common`` holds
    further arguments of train()/compare() for every point."""
    _text("workload", workload)
    if not isinstance(grid, Mapping) and (isinstance(grid, (str, bytes)) or not isinstance(grid, Iterable)):
        raise InputError(f"grid: a dict of key to values, or a list of points (dicts), got {grid!r}")
    if isinstance(grid, Mapping):
        for key, values in grid.items():
            if not isinstance(key, str):
                raise InputError(f"grid: a key is a run setting or a parameter's name, got {key!r}")
            if isinstance(values, (str, bytes)) or not isinstance(values, Iterable):
                raise InputError(f"grid['{key}']: a list of values, got {values!r}")
    points = grid_points(grid)
    if not all(isinstance(p, Mapping) for p in points):
        raise InputError("grid: a list of points, each a dict of key to value")
    for p in points:  # a key no point can take is the sweep's error, before any point runs
        for key in p:
            if not isinstance(key, str) or (key not in RUN_KEYS and "." not in key):
                raise InputError(f"sweep grid key {key!r}: neither a run setting ({', '.join(RUN_KEYS)}) "
                                 "nor a parameter (`ascendsim params`)")
    total = len(points)
    _names("strategies", strategies)
    if progress is not None and not callable(progress):
        raise InputError(f"progress: a function of (done, failed, total), got {progress!r}")
    strategies = list(strategies) if strategies is not None else None
    if progress is None and client is not None and sys.stderr is not None and sys.stderr.isatty():
        def progress(done: int, failed: int, total: int) -> None:  # a line rewritten in place, on a terminal
            print(f"\rsweep: {done}/{total} points done, {failed} failed", end="" if done < total else "\n",
                  file=sys.stderr, flush=True)
    results: List[Optional[Dict[str, Any]]] = [None] * total
    done = failed = 0
    if client is None:
        for i, p in enumerate(points):
            results[i] = run_point(workload, p, strategies, common)
            done += 1
            failed += "error" in results[i]
            if progress:
                progress(done, failed, total)
    else:
        from distributed import as_completed  # Debian python3-distributed

        futures = client.map(run_point, [workload] * total, points, [strategies] * total, [common] * total,
                             pure=False)
        index = {f.key: i for i, f in enumerate(futures)}
        try:
            for future in as_completed(futures):
                i = index[future.key]
                try:
                    results[i] = future.result()
                except Exception as e:  # a worker lost, an error outside the simulator
                    results[i] = {"point": points[i], "error": f"{type(e).__name__}: {e}", "kind": "TaskError"}
                done += 1
                failed += "error" in results[i]
                if progress:
                    progress(done, failed, total)
        except BaseException:  # an interrupt: the points not yet run are not left on the cluster
            client.cancel(futures)
            raise
    return SweepResult([r for r in results if r is not None])
