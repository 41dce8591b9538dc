#!/usr/bin/env bash
# Installs the Debian packages ascendsim needs to build and test, if any are missing.
# --browser also installs Chromium, which the tests use to render the HTML reports; --fuzz installs
# clang and libFuzzer for scripts/fuzz.sh.
set -euo pipefail
browser=0
fuzz=0
for arg in "$@"; do
  case "$arg" in
    --browser) browser=1 ;;
    --fuzz) fuzz=1 ;;
    *) echo "install-deps.sh: unknown option $arg" >&2; exit 2 ;;
  esac
done

packages=(
  g++ make cmake pkg-config
  libsystemc-dev
  libboost-dev libboost-program-options-dev
  libyaml-cpp-dev nlohmann-json3-dev libfmt-dev zlib1g-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  libdnnl-dev libturbojpeg0-dev libonnx-dev libprotobuf-dev
  dataset-fashion-mnist
  python3-numpy python3-torch python3-torchvision python3-onnx
  pybind11-dev python3-dev python3-pytest python3-pandas python3-matplotlib python3-dask python3-distributed
  python3-optuna
)
[ $fuzz -eq 1 ] && packages+=(clang libfuzzer-14-dev)

installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"; }
missing=()
for p in "${packages[@]}"; do installed "$p" || missing+=("$p"); done
want_browser=0
[ $browser -eq 1 ] && ! installed chromium && want_browser=1
[ ${#missing[@]} -eq 0 ] && [ $want_browser -eq 0 ] && exit 0

sudo=""
[ "$(id -u)" -ne 0 ] && sudo="sudo"
$sudo apt-get update -qq
if [ ${#missing[@]} -gt 0 ]; then
  echo "installing: ${missing[*]}" >&2
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
fi
if [ $want_browser -eq 1 ]; then
  echo "installing: chromium (renders the HTML reports in the tests)" >&2
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends chromium >&2 ||
    echo "chromium could not be installed: the HTML rendering tests will report a skip" >&2
fi
