#!/usr/bin/env bash
# Configures (once) and builds hc into ${HC_BUILD_DIR:-build}. Used by
# check.sh and demo.sh; safe to run by hand. Arguments are targets (e.g.
# hc-compile hc-run: what the demo runs, without the test and sanitizer
# builds); none builds everything.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${HC_BUILD_DIR:-$root/build}"

"$root/tools/install-deps.sh"

if [ ! -f "$build/build.ninja" ]; then
  # clang-19 needs ~40% less memory than g++-12 on MLIR's headers.
  cmake -S "$root" -B "$build" -G Ninja \
    -DCMAKE_BUILD_TYPE="${HC_BUILD_TYPE:-Release}" \
    -DCMAKE_C_COMPILER=clang-19 -DCMAKE_CXX_COMPILER=clang++-19 \
    ${HC_CMAKE_ARGS:-} >/dev/null
fi
targets=()
for t in "$@"; do
  targets+=(--target "$t")
done
cmake --build "$build" "${targets[@]}" -- -j"${HC_JOBS:-$(nproc)}"
