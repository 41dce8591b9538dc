#!/usr/bin/env bash
# Installs what is missing, builds (Release) with cmake's progress on stderr, says where the
# binary is and how to put it on PATH, and runs the LeNet-5 strategy comparison.
# Extra arguments go to `ascendsim compare`, e.g. scripts/run.sh --epochs 2 --json r.json;
# stdout is the comparison's alone.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
echo "run.sh: configuring build/ (Release)" >&2
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
echo "run.sh: building (the first build takes a few minutes)" >&2
cmake --build build --parallel "$(nproc)" >&2
bin="$PWD/build/bin"
cat >&2 <<MSG
run.sh: built $bin/ascendsim
run.sh: to type \`ascendsim\` as the docs do, either for this shell:
          export PATH=$bin:\$PATH
        or install it (binary, presets and Python package) under ~/.local:
          cmake --install build --prefix ~/.local    # then ~/.local/bin must be on PATH
run.sh: running: ascendsim compare --workload lenet5 $*
MSG
exec "$bin/ascendsim" compare --workload lenet5 "$@"
