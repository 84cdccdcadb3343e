#!/usr/bin/env -S /usr/bin/python3
"""How close multi-band samples are to the tiles they learned from.

usage: /usr/bin/python3 models/multiband_check.py --samples S.npy
           --data images.npy --labels labels.npy [--json OUT.json]

S.npy is `hc-run sample --save-npy`'s output (float32 [N, C, H, W], its
classes in S.labels.npy). For data like models/make_multiband.py's it prints,
for the samples and (as the yardstick) for real tiles:

  * cover accuracy: each pixel is given the land-cover class whose spectral
    signature (make_multiband.SIGNATURES) is nearest; a tile's cover is the
    majority of its pixels; the share of tiles whose cover is the class
    they were sampled (or labelled) as;
  * spectral residual: the mean distance of a pixel's spectrum from its
    nearest signature, in reflectance units (how physically plausible the
    generated spectra are; sensor noise and texture make it > 0 for real
    tiles too);
  * per class, the mean spectrum's relative error against the real tiles'
    and the spectral angle between them, in degrees.
"""

import argparse
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cli import Parser, fail  # noqa: E402
import make_multiband as mb  # noqa: E402


def load(path, what):
    try:
        return np.load(path)
    except (OSError, ValueError) as e:
        fail("%s (%s): cannot read: %s" % (path, what, e))


def reflectance(x):
    """Stored [-1, 1] values back to reflectance ([N, C, H, W] -> [N, H, W, C])."""
    return ((x.astype(np.float64) + 1.0) / 4.0).transpose(0, 2, 3, 1)


def cover(x):
    """(per-pixel nearest class [N, H, W], distance to it [N, H, W])."""
    r = reflectance(x)
    d = np.linalg.norm(r[..., None, :] - mb.SIGNATURES, axis=-1)   # [N, H, W, K]
    return d.argmin(-1), d.min(-1)


def summarize(x, labels):
    nearest, dist = cover(x)
    k = len(mb.CLASSES)
    votes = np.stack([(nearest == c).sum(axis=(1, 2)) for c in range(k)], 1)
    return {
        "cover_accuracy": float((votes.argmax(1) == labels).mean()),
        "spectral_residual": float(dist.mean()),
        "mean_spectrum": {int(c): reflectance(x[labels == c]).mean(axis=(0, 1, 2))
                          for c in range(k) if (labels == c).any()},
    }


def main(argv=None):
    ap = Parser(description="Compare multi-band samples with the real tiles.")
    ap.add_argument("--samples", required=True)
    ap.add_argument("--data", required=True)
    ap.add_argument("--labels", required=True)
    ap.add_argument("--json", help="also write the numbers here")
    a = ap.parse_args(argv)
    s = load(a.samples, "samples")
    s_labels_path = a.samples[:-4] + ".labels.npy" if a.samples.endswith(".npy") else None
    if not s_labels_path or not os.path.exists(s_labels_path):
        fail("%s: no %s beside it (hc-run sample --save-npy writes both)"
             % (a.samples, s_labels_path))
    sl = load(s_labels_path, "sample labels")
    x, xl = load(a.data, "data"), load(a.labels, "labels")
    c = len(mb.SIGNATURES[0])
    for name, arr in (("samples", s), ("data", x)):
        if arr.ndim != 4 or arr.shape[1] != c:
            fail("%s: shape %s, expected [N, %d, H, W] (make_multiband.py's bands)"
                 % (name, arr.shape, c))
    if len(sl) != len(s) or len(xl) != len(x):
        fail("labels do not match their images (%d vs %d, %d vs %d)"
             % (len(sl), len(s), len(xl), len(x)))
    gen, real = summarize(s, sl), summarize(x, xl)
    print("%-10s %14s %18s" % ("", "cover accuracy", "spectral residual"))
    for name, r, n in (("samples", gen, len(s)), ("real", real, len(x))):
        print("%-10s %13.1f%% %18.4f   (%d tiles)"
              % (name, 100 * r["cover_accuracy"], r["spectral_residual"], n))
    print("per class: mean spectrum of the samples against the real tiles'")
    out = {"samples": {k: v for k, v in gen.items() if k != "mean_spectrum"},
           "real": {k: v for k, v in real.items() if k != "mean_spectrum"}, "classes": {}}
    for cls, m in sorted(gen["mean_spectrum"].items()):
        ref = real["mean_spectrum"][cls]
        rel = float(np.linalg.norm(m - ref) / np.linalg.norm(ref))
        cosang = float(np.dot(m, ref) / (np.linalg.norm(m) * np.linalg.norm(ref)))
        angle = float(np.degrees(np.arccos(np.clip(cosang, -1.0, 1.0))))
        out["classes"][mb.CLASSES[cls]] = {"relative_error": rel, "spectral_angle_deg": angle}
        print("  %-9s relative error %6.3f   spectral angle %5.2f deg"
              % (mb.CLASSES[cls], rel, angle))
    if a.json:
        tmp = a.json + ".tmp"
        with open(tmp, "w") as f:
            json.dump(out, f, indent=1)
            f.write("\n")
        os.replace(tmp, a.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
