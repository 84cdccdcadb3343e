#!/usr/bin/env bash
# README command 2: install what is missing, build, run every test (lit,
# gtest, end-to-end) through ctest. Non-zero exit on any failure.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${HC_BUILD_DIR:-$root/build}"

"$root/tools/build.sh"
cd "$build"
ctest --output-on-failure -j"${HC_JOBS:-$(nproc)}" "$@"
