#!/usr/bin/env bash
# Fuzzes every input parser with libFuzzer (clang, AddressSanitizer, UndefinedBehaviorSanitizer):
# MNIST idx (in memory, and dataset directories with gzip), CIFAR-10, YAML configuration files and
# --set overrides, rank tables, JPEG headers, shard strategies, ONNX models and weights files
# (--init-from), serving arrivals files (each accepted one then served by the scheduler); and the
# AI core's event model under any tiling (its flags never deadlock). Then, against the regular
# build (build/), `tune`'s search space: seeded random --fix/--set values (wrong types, out of
# range, unknown knobs, huge numbers, NaN, empty), each a result or a clean InputError
# (tests/python/test_hostile.py's fuzz, longer).
# Usage: scripts/fuzz.sh [seconds per target, default 60] [target ..., default all: the fuzz_*
# names below, e.g. scripts/fuzz.sh 120 fuzz_onnx];
# scripts/fuzz.sh --tune [seeds, default 20] runs the tune fuzz alone.
# Seeds come from tests/fuzz/corpus (left unchanged); the growing corpus and any crash inputs go
# to build-fuzz/. Exits non-zero if a target crashed.
set -euo pipefail
cd "$(dirname "$0")/.."
tune_fuzz() {  # $1 seeds of 12 cases each
  if [ ! -d build/python/ascendsim ]; then
    echo "tune fuzz: no build/python (build first: scripts/run.sh or cmake --build build)" >&2
    return 1
  fi
  echo "== tune search space: $1 seeds x 12 cases" >&2
  PYTHONPATH="$PWD/build/python" ASCENDSIM_CONFIG_DIR="$PWD/configs" /usr/bin/python3 tests/python/test_hostile.py "$1" 12
}
if [ "${1:-}" = "--tune" ]; then
  tune_fuzz "${2:-20}"
  exit
fi
seconds="${1:-60}"
scripts/install-deps.sh --fuzz
CC=clang CXX=clang++ cmake -S . -B build-fuzz -DCMAKE_BUILD_TYPE=RelWithDebInfo -DASCENDSIM_FUZZ=ON \
  -DASCENDSIM_BUILD_TESTS=OFF -DASCENDSIM_BUILD_BENCH=OFF >/dev/null
targets=(fuzz_idx fuzz_cifar10 fuzz_dataset_dir fuzz_config fuzz_rank_table fuzz_jpeg_header fuzz_shard_strategy
  fuzz_onnx fuzz_weights fuzz_event_model fuzz_arrivals fuzz_data_script)
if [ $# -gt 1 ]; then
  for t in "${@:2}"; do
    [[ " ${targets[*]} " == *" $t "* ]] || { echo "fuzz.sh: unknown target $t (${targets[*]})" >&2; exit 2; }
  done
  targets=("${@:2}")
fi
cmake --build build-fuzz -j2 --target "${targets[@]}" >/dev/null
status=0
for t in "${targets[@]}"; do
  seeds="tests/fuzz/corpus/${t#fuzz_}"
  work="build-fuzz/corpus/${t#fuzz_}"
  artifacts="build-fuzz/artifacts/$t/"
  mkdir -p "$work" "$artifacts"
  echo "== $t: ${seconds} s" >&2
  if ! ASAN_OPTIONS=detect_leaks=0 "build-fuzz/bin/$t" "$work" "$seeds" -max_total_time="$seconds" \
      -timeout=10 -rss_limit_mb=2048 -artifact_prefix="$artifacts" -print_final_stats=1 2>"build-fuzz/$t.log"; then
    echo "$t: crashed; input in $artifacts (log build-fuzz/$t.log)" >&2
    status=1
  fi
  grep -E "stat::number_of_executed_units|stat::peak_rss_mb" "build-fuzz/$t.log" | sed "s/^/$t /" >&2 || true
done
if [ $# -le 1 ]; then tune_fuzz 20 || status=1; fi  # with every target
exit $status
