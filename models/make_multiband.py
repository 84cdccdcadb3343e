#!/usr/bin/env -S /usr/bin/python3
"""Synthetic multi-band (remote-sensing style) tiles for the tutorial.

usage: /usr/bin/python3 models/make_multiband.py -o DIR [--n 4096] [--size 32]
           [--seed 0]

Writes DIR/images.npy (float32 [N, 8, S, S]) and DIR/labels.npy (int64 [N]).
Real multispectral archives cannot be downloaded here, so this makes data
with their shape and their hard parts: 8 bands with the spectral signatures
of Sentinel-2's B2 B3 B4 B5 B6 B7 B8 B11 (blue, green, red, three red-edge,
near-infrared, short-wave infrared), four land-cover classes

  0 water      dark everywhere, brightest in blue, nothing past red
  1 forest     the red-edge rise to a high near-infrared plateau
  2 cropland   like forest but brighter, with more short-wave infrared
  3 urban      flat and bright across all bands

and spatial structure: each tile is its class over a smooth random region
(65-100% of the tile) with patches of another class, a smooth brightness
texture (+-15%, illumination and density), and per-pixel sensor noise.
Reflectance r in [0, 0.5] is stored as 4r - 1, i.e. [-1, 1] like DiT's
pixel data. The class of a tile is its dominant cover.
"""

import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cli import Parser, fail  # noqa: E402

BANDS = ["B2 blue", "B3 green", "B4 red", "B5 red-edge", "B6 red-edge", "B7 red-edge",
         "B8 NIR", "B11 SWIR"]
CLASSES = ["water", "forest", "cropland", "urban"]
# Mean surface reflectance per class and band (rounded textbook curves).
SIGNATURES = np.array([
    [0.080, 0.060, 0.040, 0.030, 0.020, 0.018, 0.015, 0.010],  # water
    [0.030, 0.050, 0.030, 0.090, 0.220, 0.280, 0.300, 0.140],  # forest
    [0.050, 0.080, 0.070, 0.140, 0.280, 0.330, 0.360, 0.240],  # cropland
    [0.130, 0.140, 0.150, 0.160, 0.170, 0.180, 0.190, 0.240],  # urban
])


def smooth_field(rng, n, size, passes=3):
    """n smooth random fields [n, size, size], zero mean, unit std: white
    noise blurred by repeated wrap-around 3x3 box filters."""
    f = rng.standard_normal((n, size, size))
    for _ in range(passes):
        f = sum(np.roll(np.roll(f, dy, 1), dx, 2) for dy in (-1, 0, 1) for dx in (-1, 0, 1)) / 9
    f -= f.mean(axis=(1, 2), keepdims=True)
    return f / (f.std(axis=(1, 2), keepdims=True) + 1e-12)


def make(n, size, seed):
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, len(CLASSES), n)
    other = (labels + rng.integers(1, len(CLASSES), n)) % len(CLASSES)
    # The dominant class covers the tile where a smooth field is above a
    # per-tile threshold (0..35% of the tile goes to the other class).
    field = smooth_field(rng, n, size)
    share = rng.uniform(0.0, 0.35, n)
    cut = np.array([np.quantile(field[i], share[i]) for i in range(n)])
    dominant = field >= cut[:, None, None]                           # [n, S, S]
    cover = np.where(dominant, labels[:, None, None], other[:, None, None])
    refl = SIGNATURES[cover].transpose(0, 3, 1, 2)                   # [n, 8, S, S]
    texture = 1.0 + 0.15 * np.clip(smooth_field(rng, n, size, passes=2), -2, 2) / 2
    refl = refl * texture[:, None] + rng.normal(0.0, 0.004, refl.shape)
    images = np.clip(4.0 * refl - 1.0, -1.0, 1.0).astype(np.float32)
    return images, labels.astype(np.int64)


def main(argv=None):
    ap = Parser(description="Synthetic 8-band land-cover tiles (images.npy, labels.npy).")
    ap.add_argument("-o", "--out", required=True, help="output folder (created if missing)")
    ap.add_argument("--n", type=int, default=4096, help="number of tiles (default 4096)")
    ap.add_argument("--size", type=int, default=32, help="tile side in pixels (default 32)")
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args(argv)
    if a.n <= 0 or a.size < 4:
        fail("--n must be positive and --size at least 4")
    images, labels = make(a.n, a.size, a.seed)
    os.makedirs(a.out, exist_ok=True)
    for name, arr in (("images.npy", images), ("labels.npy", labels)):
        path = os.path.join(a.out, name)
        tmp = path + ".tmp"
        with open(tmp, "wb") as f:
            np.save(f, arr)
        os.replace(tmp, path)
    counts = np.bincount(labels, minlength=len(CLASSES))
    print("wrote %s: %d tiles of %d bands x %dx%d; classes %s"
          % (a.out, a.n, images.shape[1], a.size, a.size,
             ", ".join("%s %d" % (c, k) for c, k in zip(CLASSES, counts))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
