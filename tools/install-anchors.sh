#!/usr/bin/env bash
# Installs the speed and correctness anchors from PyPI into two virtual
# environments outside the source tree (Debian's python3-venv):
#   torch/         PyTorch 2.x, onnx, onnxscript, onnxruntime, diffusers, timm,
#                  torchdiffeq, tensorboard  (tools/anchors/requirements-torch.txt)
#   ort-training/  onnxruntime-training-cpu 1.19.2, which installs the same
#                  `onnxruntime` module and so cannot share the first one
#                  (tools/anchors/requirements-ort-training.txt)
# Every file is pinned by version and hash (pip --require-hashes). Idempotent:
# an environment whose stamp matches its requirements file is left alone and
# nothing touches the network. The environments are the cache: they persist
# between runs. pip may also keep downloads in DIR/pip-cache, but only those
# the registry marks cacheable; on these machines nothing was kept.
#
# usage: tools/install-anchors.sh [--dir DIR] [--where]
#   DIR defaults to $HC_ANCHORS_DIR, else ~/.cache/hc-anchors.
#   --where: print the two lines below and nothing else; install nothing,
#   check nothing (how tests find the environments).
# Output: progress on stderr; on stdout, `ort-training: PATH` and, as the last
# line, the torch environment's python (scripts read it with `tail -n1`).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
dir="${HC_ANCHORS_DIR:-$HOME/.cache/hc-anchors}"
where=0
while [ $# -gt 0 ]; do
  case "$1" in
    --dir) dir="$2"; shift 2 ;;
    --where) where=1; shift ;;
    -h|--help) sed -n '2,20p' "$0"; exit 0 ;;
    *) echo "install-anchors: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
case "$dir" in
  "$root"|"$root"/*)
    echo "install-anchors: --dir $dir is inside the source tree; choose a folder outside it" >&2
    exit 2 ;;
esac
report() {
  echo "ort-training: $dir/ort-training/bin/python"
  echo "$dir/torch/bin/python"
}
if [ "$where" -eq 1 ]; then
  report
  exit 0
fi
mkdir -p "$dir"
dir="$(cd "$dir" && pwd)"
export PIP_CACHE_DIR="$dir/pip-cache" PIP_DISABLE_PIP_VERSION_CHECK=1

# install_env NAME REQUIREMENTS IMPORT-CHECK
install_env() {
  local name="$1" req="$2" check="$3"
  local env="$dir/$name" stamp want
  stamp="$env/.hc-requirements.sha256"
  want="$(sha256sum "$req" | cut -d' ' -f1)"
  if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] &&
     "$env/bin/python" -c "$check" >/dev/null 2>&1; then
    return 0
  fi
  echo "install-anchors: installing $name into $env (first time: minutes, GBs)" >&2
  local t0; t0=$(date +%s)
  # The stamp is written last, so an environment left half-built by a stopped
  # run has none and is rebuilt from scratch here.
  rm -rf --one-file-system "$env"
  /usr/bin/python3 -m venv "$env"
  "$env/bin/python" -m pip install --quiet --require-hashes \
    --only-binary=:all: -r "$req" >&2
  "$env/bin/python" -c "$check" >&2 || {
    echo "install-anchors: $name installed but its import check failed: $check" >&2
    exit 1
  }
  printf '%s\n' "$want" >"$stamp"
  echo "install-anchors: $name ready in $(( $(date +%s) - t0 )) s, $(du -sh "$env" | cut -f1)" >&2
}

install_env ort-training "$root/tools/anchors/requirements-ort-training.txt" \
  'import onnxruntime.training.api, onnxruntime.training.artifacts, onnx'
install_env torch "$root/tools/anchors/requirements-torch.txt" \
  'import torch, onnx, onnxscript, onnxruntime, diffusers, timm, torchdiffeq, tensorboard; torch.zeros(2).sum()'

report
