#!/usr/bin/env bash
# README command 2: install what is missing (Debian's packages, then the
# PyPI anchors), build, run every test (lit, gtest, end-to-end) through ctest. Non-zero exit on any failure.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${HC_BUILD_DIR:-$root/build}"

"$root/tools/build.sh"
# The PyPI anchors (PyTorch 2.x, ONNX Runtime training): the live-export
# tests and bench/anchors.py use them. Cached; minutes the first time.
"$root/tools/install-anchors.sh" >/dev/null
cd "$build"
ctest --output-on-failure -j"${HC_JOBS:-$(nproc)}" "$@"
