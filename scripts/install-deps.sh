#!/usr/bin/env bash
# Installs the Debian packages ascendsim needs to build and test, if any are missing.
set -euo pipefail

packages=(
  g++ make cmake pkg-config
  libsystemc-dev
  libboost-dev libboost-program-options-dev
  libyaml-cpp-dev nlohmann-json3-dev libfmt-dev zlib1g-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  dataset-fashion-mnist
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

sudo=""
[ "$(id -u)" -ne 0 ] && sudo="sudo"
echo "installing: ${missing[*]}" >&2
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
