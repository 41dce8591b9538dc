#!/usr/bin/env bash
# Installs what is missing, builds (Release), and runs the LeNet-5 strategy comparison.
# Extra arguments go to `ascendsim compare`, e.g. scripts/run.sh --epochs 2 --json r.json
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j2 >/dev/null
exec build/bin/ascendsim compare --workload lenet5 "$@"
