#!/usr/bin/env bash
# Installs, from Debian 12's apt only, every package the build, the tests and
# the demo need. Idempotent and quiet; does nothing (and touches no network)
# when everything is already installed.
set -euo pipefail

packages=(
  # build
  cmake ninja-build ccache g++ clang-19 lld-19
  pkg-config  # CMake's FindPkgConfig (hwloc); not pulled in without recommends
  libclang-rt-19-dev  # ASan/UBSan runtime for the sanitizer test build
  llvm-19-dev llvm-19-tools libmlir-19-dev mlir-19-tools
  libonnx-dev libprotobuf-dev protobuf-compiler
  libopenmpi-dev openmpi-bin libhwloc-dev hwloc
  libgtest-dev libgmock-dev libbenchmark-dev nlohmann-json3-dev
  zlib1g-dev libzstd-dev libxml2-dev libedit-dev libcurl4-openssl-dev
  # baselines for benchmarks
  libopenblas-dev libblis-dev libdnnl-dev
  # python tooling (always used as /usr/bin/python3)
  python3 python3-torch python3-onnx python3-numpy python3-matplotlib
  python3-venv  # tools/install-anchors.sh's environments (PyPI)
  # the multi-host test bed (test/cluster: ip netns, tc, sysctl; iptables
  # drops a share of packets; a local Slurm with munge)
  iproute2 procps iptables slurmd slurmctld slurm-client munge
  # data for the embedded demo
  dataset-fashion-mnist
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q '^install ok installed$'; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

echo "install-deps: installing ${#missing[@]} package(s): ${missing[*]}"
sudo_cmd=()
if [ "$(id -u)" -ne 0 ]; then sudo_cmd=(sudo); fi
export DEBIAN_FRONTEND=noninteractive
"${sudo_cmd[@]}" apt-get update -qq
"${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "install-deps: done"
