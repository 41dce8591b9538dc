#!/usr/bin/env bash
# The slow ONNX check: exports every classification model of torchvision.models for training
# (torch.onnx.export, TrainingMode.TRAINING, opset 13, a symbolic batch) and runs each through
# ascendsim: `info` and three loop-sink training steps at batch 2. Then runs the commands of
# docs/onnx.md's example block as written. Usage: scripts/onnx-zoo.sh [MODEL...] (default: all,
# smallest first; ONNX_ZOO_BUDGET=SECONDS starts no model after that long and lists the rest).
# Needs a build (build/bin/ascendsim) and Debian's python3-torch, python3-torchvision, python3-onnx.
# Results: build/onnx-zoo/summary.json and one line per model; docs/onnx.md keeps the last run's.
# Exits non-zero if a model other than the transformers awaiting their operators is refused.
set -euo pipefail
cd "$(dirname "$0")/.."
bin="$PWD/build/bin/ascendsim"
out="$PWD/build/onnx-zoo"
[ -x "$bin" ] || { echo "onnx-zoo: $bin is missing; build first (scripts/test.sh or cmake --build build)" >&2; exit 2; }
mkdir -p "$out"
status=0
if [ $# -eq 0 ]; then set -- --all; fi
budget=()
if [ -n "${ONNX_ZOO_BUDGET:-}" ]; then budget=(--budget "$ONNX_ZOO_BUDGET"); fi
/usr/bin/python3 tests/python/onnx_zoo.py "$bin" "$out" "${budget[@]}" "$@" || status=1

# docs/onnx.md's example, command by command, with ascendsim for `ascendsim`.
if [ "$1" = --all ]; then
  echo "== docs/onnx.md's example" >&2
  docs="$out/docs-example"
  mkdir -p "$docs"
  awk '/^```sh$/{on=1; next} /^```$/{on=0} on' docs/onnx.md | sed "s#^ascendsim #$bin #" > "$docs/example.sh"
  if ! (cd "$docs" && PATH="/usr/bin:$PATH" bash -euo pipefail example.sh > example.log 2>&1); then
    echo "onnx-zoo: docs/onnx.md's example failed; see $docs/example.log" >&2
    status=1
  fi
fi
exit $status
