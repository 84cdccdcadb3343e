#!/usr/bin/env -S /usr/bin/python3
"""An unconditional tiny DiT (no label input) end to end: it trains under
mpirun -np 2 with checkpoints, -np 2 at batch 2 equals -np 1 at batch 4 to
rounding, and `hc-run sample` makes a grid of it (no guidance; --cfg-scale
and --classes are refused in one line)."""
import os
import shutil
import struct
import subprocess
import sys
import zlib

import numpy as np

from common import PY, ROOT, bin_and_work, read_safetensors, run

MPIRUN = ["mpirun", "--allow-run-as-root", "--oversubscribe", "--bind-to", "none"]


def png_size(path):
    with open(path, "rb") as f:
        data = f.read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError("not a PNG")
    # IHDR: length, type, width, height, ...; its CRC covers type + data.
    n = struct.unpack(">I", data[8:12])[0]
    if zlib.crc32(data[12:16 + n]) != struct.unpack(">I", data[16 + n:20 + n])[0]:
        raise ValueError("bad IHDR CRC")
    return struct.unpack(">II", data[16:24])


def main():
    a, w = bin_and_work()
    hc_run, hc_compile = os.path.join(a.bin, "hc-run"), os.path.join(a.bin, "hc-compile")
    run([PY, os.path.join(ROOT, "models/export_dit.py"), "--model", "tiny", "--image-size", "16",
         "--num-classes", "0", "--opset", "13", "--dynamic-batch", "-o", w("u.onnx")])
    for b in (2, 4):
        run([hc_compile, w("u.onnx"), "--batch", str(b), "--lr", "1e-3", "-o", w("u%d.so" % b)])
    run([hc_compile, w("u.onnx"), "--sampler", "--batch", "4", "-o", w("s.so")])
    np.save(w("x.npy"), np.random.default_rng(0).uniform(-1, 1, (24, 4, 16, 16)).astype(np.float32))
    train = ["--data", w("x.npy"), "--steps", "6", "--seed", "1", "--log-every", "3", "--no-progress"]
    errors = []
    out = run(MPIRUN + ["-np", "2", hc_run, w("u2.so")] + train +
              ["--ckpt-dir", w("ck"), "--save-params", w("p2.safetensors")])
    print([l for l in out.splitlines() if l.startswith("(step=")])
    run([hc_run, w("u4.so")] + train + ["--save-params", w("p1.safetensors")])
    p1, p2, p0 = (read_safetensors(w(f)) for f in ("p1.safetensors", "p2.safetensors",
                                                    "u4.so.init.safetensors"))
    worst = max(np.linalg.norm(p2[k] - p1[k]) / max(np.linalg.norm(p1[k]), 1e-30) for k in p1)
    moved = sum(not np.array_equal(p1[k], p0[k]) for k in p1)
    print("-np 2 x batch 2 vs -np 1 x batch 4 after 6 steps: worst tensor rel err %.2e; "
          "%d of %d tensors trained" % (worst, moved, len(p1)))
    if worst > 1e-5 or moved == 0:
        errors.append("np2 vs np1 %.2e, %d tensors moved" % (worst, moved))
    out = run([hc_run, "sample", w("s.so"), "--ckpt", w("ck"), "--images", "12", "--sampling-steps",
               "8", "--out", w("grid.png"), "--save-npy", w("s.npy")])
    print(out.strip().splitlines()[-2])
    size = png_size(w("grid.png"))
    samples = np.load(w("s.npy"))
    if samples.shape != (12, 4, 16, 16) or not np.isfinite(samples).all():
        errors.append("samples %s" % (samples.shape,))
    if size != (184, 2 * 18 + 2):  # 8 per row + label column; 2 rows of 16 + padding
        errors.append("grid size %s" % (size,))
    if not (np.load(w("s.labels.npy")) == -1).all():
        errors.append("unconditional labels are not -1")
    for extra, want in ((["--cfg-scale", "4"], "is unconditional"),
                        (["--classes", "1"], "use --images N")):
        p = subprocess.run([hc_run, "sample", w("s.so"), "--ckpt", w("ck"), "--out",
                            w("g2.png")] + extra, capture_output=True, text=True)
        print("sample %s: exit %d: %s" % (" ".join(extra), p.returncode, p.stderr.strip()))
        if p.returncode != 2 or want not in p.stderr or len(p.stderr.strip().splitlines()) != 1:
            errors.append("sample %s: exit %d %s" % (extra, p.returncode, p.stderr))
    shutil.rmtree(a.work, ignore_errors=True)
    if errors:
        sys.exit("FAILED: " + "; ".join(errors))


if __name__ == "__main__":
    main()
