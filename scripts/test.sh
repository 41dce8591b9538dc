#!/usr/bin/env bash
# Installs what is missing, builds (Release), and runs the whole test suite.
# --sanitize: the same suite built with AddressSanitizer and UndefinedBehaviorSanitizer (Debug,
# in build-sanitize/; each test runs in its own process). A sanitized extension module cannot load
# into Debian's python3, so the Python package the C++ tests call (the zoo's ONNX exports, `tune`)
# is the Release build's, build/python, built first.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh --browser
if [ "${1:-}" = "--sanitize" ]; then
  cmake -S . -B build-sanitize -DCMAKE_BUILD_TYPE=Debug -DASCENDSIM_SANITIZE=ON -DASCENDSIM_BUILD_BENCH=OFF >/dev/null
  cmake --build build-sanitize -j2
  cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
  cmake --build build -j2 --target ascendsim_python
  # LeakSanitizer stops at SystemC's coroutine stacks (sigaltstack); leaks are checked with valgrind.
  PYTHONPATH="$PWD/build/python${PYTHONPATH:+:$PYTHONPATH}" ASAN_OPTIONS=detect_leaks=0 UBSAN_OPTIONS=print_stacktrace=1 \
    ctest --test-dir build-sanitize -j2 --output-on-failure
  exit
fi
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j2
ctest --test-dir build -j2 --output-on-failure
