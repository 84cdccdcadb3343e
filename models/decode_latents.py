#!/usr/bin/env python3
"""Latent samples back to pictures, with the VAE models/prepare_data.py used.

usage: PY models/decode_latents.py --samples S.npy --data-info classes.json
           --out DIR [--batch 16]

S.npy: hc-run sample --save-npy's float32 [N, 4, h, w] latents (and
S.labels.npy beside it). The VAE and its scaling factor come from the
classes.json prepare_data.py wrote with the training data: the latents are
divided by the factor and decoded (diffusers' AutoencoderKL; run this with
the anchors environment's python). Writes DIR/sample-<i>-class-<k>.png, one
RGB picture per sample, and DIR/grid.png (the samples in rows of 8).
Bad input: one line on stderr, exit 2.
"""
import argparse
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cli import fail  # noqa: E402
from prepare_data import load_vae  # noqa: E402


def main(argv=None):
    ap = argparse.ArgumentParser(description="Latent samples back to pictures.")
    ap.add_argument("--samples", required=True)
    ap.add_argument("--data-info", required=True, help="classes.json of prepare_data.py")
    ap.add_argument("--out", required=True)
    ap.add_argument("--batch", type=int, default=16)
    a = ap.parse_args(argv)
    try:
        info = json.load(open(a.data_info))
    except (OSError, ValueError) as e:
        fail("--data-info %s: %s" % (a.data_info, e))
    if info.get("mode") != "latents" or "vae" not in info:
        fail("--data-info %s: the data are %s, not VAE latents; pixel samples need no "
             "decoding" % (a.data_info, info.get("mode")))
    try:
        z = np.load(a.samples, allow_pickle=False)
    except Exception as e:  # noqa: BLE001
        fail("--samples %s: %s" % (a.samples, e))
    if z.ndim != 4 or z.shape[1:] != tuple(info["shape"]) or not np.all(np.isfinite(z)):
        fail("--samples %s: %s %s, the latents of %s are finite float [N, %s]"
             % (a.samples, z.dtype, list(z.shape), a.data_info,
                ", ".join(map(str, info["shape"]))))
    labels_path = a.samples[:-4] + ".labels.npy" if a.samples.endswith(".npy") else None
    labels = np.load(labels_path) if labels_path and os.path.exists(labels_path) else \
        np.full(len(z), -1)
    os.makedirs(a.out, exist_ok=True)
    spec = info["vae"]["vae"]
    vae, desc = load_vae(spec)
    if abs(desc["scaling_factor"] - info["vae"]["scaling_factor"]) > 1e-12:
        fail("--data-info %s: scaling factor %g, the VAE's is %g"
             % (a.data_info, info["vae"]["scaling_factor"], desc["scaling_factor"]))
    import torch
    from PIL import Image
    pictures = []
    for i in range(0, len(z), a.batch):
        with torch.no_grad():
            x = vae.decode(torch.from_numpy(z[i:i + a.batch].astype(np.float32)) /
                           desc["scaling_factor"]).sample
        pictures.append(((x.clamp(-1, 1) + 1) * 127.5).round().byte().permute(0, 2, 3, 1).numpy())
    pictures = np.concatenate(pictures)
    for i, (p, k) in enumerate(zip(pictures, labels)):
        Image.fromarray(p).save(os.path.join(a.out, "sample-%04d-class-%d.png" % (i, int(k))))
    h, w = pictures.shape[1:3]
    cols = min(8, len(pictures))
    rows = (len(pictures) + cols - 1) // cols
    grid = np.full((rows * (h + 2) + 2, cols * (w + 2) + 2, 3), 255, np.uint8)
    for i, p in enumerate(pictures):
        r, c = divmod(i, cols)
        grid[2 + r * (h + 2):2 + r * (h + 2) + h, 2 + c * (w + 2):2 + c * (w + 2) + w] = p
    Image.fromarray(grid).save(os.path.join(a.out, "grid.png"))
    print("decode_latents: %d pictures %dx%d -> %s (and grid.png)" % (len(pictures), w, h, a.out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
