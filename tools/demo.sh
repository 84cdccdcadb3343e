#!/usr/bin/env bash
# README command 1: install what is missing, build, and run hc's main job on
# the embedded default: a small DiT trained on Fashion-MNIST (Debian's
# dataset-fashion-mnist), exported from PyTorch, compiled by hc-compile and
# trained data-parallel under mpirun -np 2 by hc-run, then sampled by a
# forward-only library (hc-compile --sampler, hc-run sample). Prints where
# the metrics, the loss curve and the sample grid went. The model trains as
# rectified flow (docs/objectives.md), which makes legible garments within
# the default 1000 steps (about a minute on 2 cores); HC_DEMO_STEPS=N
# trains longer. HC_DEMO_QUALITY=1 also samples 1000 images and measures
# them (models/sample_quality.py, which trains its classifier once, a few
# minutes, cached in the work dir).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${HC_BUILD_DIR:-$root/build}"
work="${HC_DEMO_DIR:-$root/out/demo}"
steps="${HC_DEMO_STEPS:-1000}"
py=/usr/bin/python3

# Only what the demo runs (tools/check.sh builds the tests and sanitizer copies).
"$root/tools/build.sh" hc-compile hc-run
mkdir -p "$work"
cd "$work"

echo "== data: Fashion-MNIST -> NPY (32x32, [-1,1], 10 classes)"
if [ ! -f data/images.npy ]; then
  "$py" "$root/models/fashion_mnist.py" --out data --split train --limit 20000
fi

echo "== export: DiT 'demo' (depth 4, hidden 128, 4 heads, patch 4), 1 channel, 32x32,"
echo "   rectified flow (linear path, velocity prediction)"
"$py" "$root/models/export_dit.py" --model demo --image-size 32 --in-channels 1 \
  --num-classes 10 --dynamic-batch --opset 13 --objective flow --quiet -o dit_train.onnx

echo "== compile: per-rank batch 16 (global 32 on 2 ranks), AdamW lr 1e-3"
"$build/bin/hc-compile" dit_train.onnx --batch 16 --lr 1e-3 -o dit_step.so

echo "== train: mpirun -np 2 hc-run, $steps steps"
rm -f metrics.jsonl
mpirun --allow-run-as-root --oversubscribe --bind-to none -np 2 \
  "$build/bin/hc-run" dit_step.so --data data/images.npy --labels data/labels.npy \
  --steps "$steps" --seed 0 --log-every 20 --metrics metrics.jsonl \
  --save-params params.safetensors

"$py" "$root/models/plot_loss.py" metrics.jsonl --out loss.png --labels hc >/dev/null
"$py" - metrics.jsonl <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
first, last = rows[0]["loss"], sum(r["loss"] for r in rows[-3:]) / len(rows[-3:])
print("loss: first logged %.4f, last (mean of 3 logs) %.4f: %.0f%% lower"
      % (first, last, 100 * (1 - last / first)))
PY

echo "== sample: forward-only library, 10 classes x 8, Heun 25 steps, guidance 4"
"$build/bin/hc-compile" dit_train.onnx --sampler --batch 40 -o dit_sample.so
"$build/bin/hc-run" sample dit_sample.so --ckpt params.safetensors --per-class 8 \
  --sampler heun --sampling-steps 25 --cfg-scale 4 --seed 0 \
  --out samples.png --save-npy samples.npy
if [ "${HC_DEMO_QUALITY:-0}" = 1 ]; then
  echo "== quality: 1000 samples (100 per class), class accuracy and classifier-feature FID"
  "$build/bin/hc-run" sample dit_sample.so --ckpt params.safetensors --per-class 100 \
    --sampler heun --sampling-steps 25 --cfg-scale 4 --seed 0 --save-npy quality.npy \
    --no-progress
  "$py" "$root/models/sample_quality.py" --samples quality.npy --cache-dir classifier
fi
"$py" "$root/models/plot_demo.py" --loss loss.png --samples samples.png --out demo.png
echo "metrics: $work/metrics.jsonl"
echo "loss curve: $work/loss.png"
echo "sample grid: $work/samples.png (one row per class, 0-9)"
echo "both side by side: $work/demo.png"
