#!/usr/bin/env bash
# What bench/device_anchors.py carries to a lent machine, made here in
# build/devrun (ignored by git): DiT-S/2's training graph (batch 32, 4x32x32
# latents, 1000 classes), its fp32 and bf16 step libraries compiled for the
# lent machine's topology, the init file's safetensors header (weights are
# drawn there, never carried) and Debian 12's Open MPI packages hc-run links.
# Then, in one device call:
#   carry build/bin/hc-run build/bin/hc-bench-gemm build/lib/libhcrt.so
#         build/devrun build/test/runtime/hcrt-kernel-tests
#   python3 bench/device_anchors.py --out $OUT --work /tmp/w --threads 16 ...
# usage: bench/device_prepare.sh [TOPOLOGY]  (default: 16 cores sharing an L3,
# the lent Xeon's; hc-run re-maps a library planned for another layout)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
topology="${1:-pack:1 numa:1 l3:1 core:16 pu:1}"
out="$root/build/devrun"
py=/usr/bin/python3
onnx="$root/build/devrun-onnx/s2.onnx"  # beside, not in, what travels
mkdir -p "$out/debs" "$(dirname "$onnx")"
if [ ! -f "$onnx" ]; then
  "$py" "$root/models/export_dit.py" --model DiT-S/2 --image-size 32 --in-channels 4 \
    --num-classes 1000 --dynamic-batch --quiet -o "$onnx"
fi
for precision in fp32 bf16; do
  "$root/build/bin/hc-compile" "$onnx" --batch 32 --precision "$precision" \
    --topology "$topology" -o "$out/s2_$precision.so"
done
"$py" - "$out" <<'EOF'
import json, os, struct, sys
out = sys.argv[1]
init = os.path.join(out, "s2_fp32.so.init.safetensors")
with open(init, "rb") as f:
    header = json.loads(f.read(struct.unpack("<Q", f.read(8))[0]))
with open(os.path.join(out, "s2.init.header.json"), "w") as f:
    json.dump(header, f)
for name in os.listdir(out):  # the weights stay here: only the header travels
    if name.endswith(".init.safetensors"):
        os.remove(os.path.join(out, name))
EOF
cd "$out/debs"
apt-get download openmpi-bin libopenmpi3 openmpi-common libpmix2 libhwloc15 \
  libevent-core-2.1-7 libevent-pthreads-2.1-7 libevent-2.1-7
du -sh "$out"
