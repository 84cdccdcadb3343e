#!/usr/bin/env -S /usr/bin/python3
"""An image folder to samples, both ways (issue 51): 64 generated PNGs of 4
classes (sizes 40x48 to 56x48, so the centre crop and resize matter)
through models/prepare_data.py

  pixels   Debian's python: [64, 3, 32, 32] in [-1, 1]; a solid-coloured
           corner of each picture keeps its colour / 127.5 - 1 after the
           crop and the bicubic resize; labels are the sorted class folders;
  latents  the anchors environment's diffusers: AutoencoderKL with Stable
           Diffusion's configuration and random weights (no weights can be
           fetched here) -> [64, 4, 4, 4], equal to the VAE's mean encoding
           times 0.18215 computed independently, and the same (1e-5) at another
           batch size;

then for each: export a DiT of that shape, compile, train 20 steps with
checkpoints (which record hc.data_kind), sample (the latents' DDPM sampler
turns clipping off by itself, with a note) and, for latents,
models/decode_latents.py makes 32x32 RGB PNGs. Bad input is refused in one
line with exit 2: no class folders, a mixed folder, latents without
diffusers, decoding pixel data."""
import json
import os
import shutil
import subprocess
import sys

import numpy as np

from common import PY, ROOT, anchors_python, bin_and_work, run

COLOURS = [(200, 30, 30), (30, 200, 30), (30, 30, 200), (220, 220, 40)]
CLASSES = ["apple", "leaf", "sea", "sun"]


def make_images(folder):
    from PIL import Image
    rng = np.random.default_rng(0)
    for k, name in enumerate(CLASSES):
        os.makedirs(os.path.join(folder, name))
        for i in range(16):
            w = 40 + 8 * (i % 3)
            a = np.zeros((48, w, 3), np.int64) + np.array(COLOURS[k])
            a[20:44, 16:w - 16] += rng.integers(-60, 60, (24, w - 32, 3))  # texture in the middle
            Image.fromarray(np.clip(a, 0, 255).astype(np.uint8)).save(
                os.path.join(folder, name, "%02d.png" % i))


def refused(cmd, want, cwd=None):
    p = subprocess.run(cmd, capture_output=True, text=True, cwd=cwd)
    lines = [l for l in p.stderr.splitlines() if l.strip()]
    if p.returncode != 2 or len(lines) != 1 or want not in lines[0]:
        sys.exit("FAILED: %s: expected exit 2 and one line with %r, got %d:\n%s"
                 % (" ".join(cmd), want, p.returncode, p.stderr))
    print("refused: %s" % lines[0])


def train_and_sample(a, w, data, name, channels, size, extra_export):
    hc_run, hc_compile = os.path.join(a.bin, "hc-run"), os.path.join(a.bin, "hc-compile")
    run([PY, os.path.join(ROOT, "models", "export_dit.py"), "--model", "tiny", "--image-size",
         str(size), "--in-channels", str(channels), "--num-classes", "4", "--dynamic-batch",
         "--quiet", "-o", w(name + ".onnx")] + extra_export)
    run([hc_compile, w(name + ".onnx"), "--batch", "8", "--lr", "1e-3", "-o", w(name + ".so")])
    run([hc_compile, w(name + ".onnx"), "--sampler", "--batch", "8", "-o", w(name + "_s.so")])
    run([hc_run, w(name + ".so"), "--data", os.path.join(data, "images.npy"), "--labels",
         os.path.join(data, "labels.npy"), "--steps", "20", "--ckpt-dir", w("ck_" + name),
         "--no-progress"])
    ck = w("ck_" + name, "ckpt-00000020.safetensors")
    with open(ck, "rb") as f:
        n = int.from_bytes(f.read(8), "little")
        meta = json.loads(f.read(n))["__metadata__"]
    out = run([hc_run, "sample", w(name + "_s.so"), "--ckpt", ck, "--per-class", "2",
               "--sampling-steps", "10", "--save-npy", w(name + "_samples.npy")])
    return meta.get("hc.data_kind"), out


def main():
    a, w = bin_and_work()
    prep = os.path.join(ROOT, "models", "prepare_data.py")
    make_images(w("imgs"))
    errors = []

    # pixels
    os.makedirs(w("px"))
    run([PY, prep, "--images", w("imgs"), "--out", w("px"), "--no-progress"])
    x, y = np.load(w("px", "images.npy")), np.load(w("px", "labels.npy"))
    info = json.load(open(w("px", "classes.json")))
    corner = x[:, :, :3, :3].mean(axis=(2, 3))
    want = (np.array(COLOURS)[y] / 127.5 - 1)
    e = np.abs(corner - want).max()
    print("pixels: %s in [%.3f, %.3f], labels %s per class, corner colour within %.2e"
          % (list(x.shape), x.min(), x.max(), np.bincount(y).tolist(), e))
    if x.shape != (64, 3, 32, 32) or x.min() < -1 or x.max() > 1 or \
            np.bincount(y).tolist() != [16] * 4 or info["classes"] != CLASSES or e > 1e-2:
        errors.append("pixel data wrong")

    # latents
    py = anchors_python()
    os.makedirs(w("lat"))
    run([py, prep, "--images", w("imgs"), "--out", w("lat"), "--mode", "latents",
         "--no-progress"])
    z = np.load(w("lat", "images.npy"))
    os.makedirs(w("lat2"))
    run([py, prep, "--images", w("imgs"), "--out", w("lat2"), "--mode", "latents",
         "--no-progress", "--batch", "5"])
    check = run([py, "-c", (
        "import sys, numpy as np, torch\n"
        "sys.path.insert(0, %r)\n"
        "from prepare_data import SD_VAE_CONFIG\n"
        "from diffusers import AutoencoderKL\n"
        "torch.manual_seed(0); vae = AutoencoderKL(**SD_VAE_CONFIG).eval()\n"
        "x = torch.from_numpy(np.load(%r)[:4])\n"
        "with torch.no_grad(): m = vae.encode(x).latent_dist.mean * 0.18215\n"
        "z = np.load(%r)[:4]\n"
        "print(float(np.abs(m.numpy() - z).max()))\n")
        % (os.path.join(ROOT, "models"), w("px", "images.npy"), w("lat", "images.npy"))])
    e = float(check.strip().splitlines()[-1])
    same = float(np.abs(z - np.load(w("lat2", "images.npy"))).max())
    print("latents: %s, std %.3f; against an independent encode of the pixel data %.2e; "
          "batch 5 vs 16: max difference %.2e" % (list(z.shape), z.std(), e, same))
    if z.shape != (64, 4, 4, 4) or e > 1e-5 or not np.all(np.isfinite(z)):
        errors.append("latents wrong (%.3g)" % e)
    if same > 1e-5:
        errors.append("latents depend on the batch")

    # train, sample, decode
    kind, out = train_and_sample(a, w, w("px"), "pix", 3, 32, [])
    print("pixels: checkpoint hc.data_kind=%s" % kind)
    if kind != "pixels" or "not clipped" in out:
        errors.append("pixel checkpoint: data kind %s" % kind)
    kind, out = train_and_sample(a, w, w("lat"), "lat", 4, 4, ["--no-learn-sigma"])
    print("latents: checkpoint hc.data_kind=%s; sampler: %s" % (
        kind, [l for l in out.splitlines() if "not clipped" in l]))
    if kind != "latents" or "not clipped" not in out:
        errors.append("latent checkpoint: data kind %s, clipping not turned off" % kind)
    print(run([py, os.path.join(ROOT, "models", "decode_latents.py"), "--samples",
               w("lat_samples.npy"), "--data-info", w("lat", "classes.json"), "--out",
               w("decoded")]).strip())
    from PIL import Image
    pngs = sorted(f for f in os.listdir(w("decoded")) if f.startswith("sample-"))
    sizes = {Image.open(w("decoded", f)).size + (Image.open(w("decoded", f)).mode,) for f in pngs}
    if len(pngs) != 8 or sizes != {(32, 32, "RGB")}:
        errors.append("decoded pictures: %d, %s" % (len(pngs), sizes))

    # bad input
    os.makedirs(w("empty"))
    refused([PY, prep, "--images", w("empty"), "--out", w("px")], "no class sub-folders")
    os.makedirs(w("mixed", "a"))
    shutil.copy(w("imgs", "sun", "00.png"), w("mixed", "a", "p.png"))
    np.save(w("mixed", "a", "t.npy"), np.zeros((3, 8, 8), np.float32))
    refused([PY, prep, "--images", w("mixed"), "--out", w("px")], "mixes NPY tiles")
    refused([PY, prep, "--images", w("imgs"), "--out", w("px"), "--mode", "latents"],
            "needs diffusers")
    refused([py, os.path.join(ROOT, "models", "decode_latents.py"), "--samples",
             w("pix_samples.npy"), "--data-info", w("px", "classes.json"), "--out", w("d2")],
            "not VAE latents")
    if errors:
        sys.exit("FAILED: " + "; ".join(errors))
    print("PASSED")


if __name__ == "__main__":
    main()
