#!/usr/bin/env -S /usr/bin/python3
"""Super-resolution of multi-band tiles (docs/tutorial.md, section 9).

usage:
  superres.py degrade --images X.npy -o LOW.npy [--factor 4]
                      [--residual R.npy [--scale 4]]
      the condition of each tile: its mean over factor x factor blocks (what
      a coarser sensor records), up-sampled back to the tile's size by
      bicubic interpolation (Keys' cubic convolution, a = -0.5, half-pixel
      centres, edges clamped: PIL's BICUBIC), float32 [N, C, H, W].
      --residual: also what the interpolation misses, scale * (X - LOW), the
      data a model of the detail trains on (scaled to about unit spread)
  superres.py score --samples S.npy --per-cond K --truth X.npy --low LOW.npy
                    [--residual-scale S] [--linear-from TRAIN.npy] [--json F]
                    [--png P.png [--bands 2,1,0] [--rows 8]]
      each tile's estimate is the mean of its K samples (rows t*K .. t*K+K-1
      of S; with --residual-scale, samples of the residual: LOW + S / scale
      each); PSNR (peak-to-peak 2, the data's [-1, 1]) and the spectral angle
      (mean over pixels of the angle between the estimated and true spectra,
      in reflectance r = (x + 1) / 4, degrees) for the estimate and for the
      bicubic up-sampling LOW, and their difference. --linear-from: also the
      best linear interpolation, a ridge regression from each low-resolution
      pixel's 5x5 neighbourhood (all bands) to its factor x factor block,
      fitted to the tiles of TRAIN.npy: a baseline any learned estimator of
      the conditional mean should beat. --png: the first --rows
      tiles, one per row: the bicubic input, up to 4 samples, their mean and
      the truth, as --bands in red, green and blue (a 2-98% stretch of the
      truth's values, the same for every column)

Both read and write NPY only; nothing is fetched.
"""
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cli import Parser, fail  # noqa: E402


def cubic_weights(x, a=-0.5):
    x = np.abs(x)
    return np.where(x <= 1, (a + 2) * x ** 3 - (a + 3) * x ** 2 + 1,
                    np.where(x < 2, a * x ** 3 - 5 * a * x ** 2 + 8 * a * x - 4 * a, 0.0))


def upsample_matrix(small, factor):
    """U [small*factor, small]: bicubic interpolation along one axis."""
    big = small * factor
    u = np.zeros((big, small))
    for o in range(big):
        src = (o + 0.5) / factor - 0.5
        i0 = int(np.floor(src))
        for i in range(i0 - 1, i0 + 3):
            u[o, min(max(i, 0), small - 1)] += cubic_weights(src - i)
    return u


def degrade(images, factor):
    n, c, h, w = images.shape
    if h % factor or w % factor:
        fail("--factor %d does not divide the tiles' %dx%d" % (factor, h, w))
    low = np.float64(images).reshape(n, c, h // factor, factor, w // factor, factor).mean((3, 5))
    uh, uw = upsample_matrix(h // factor, factor), upsample_matrix(w // factor, factor)
    return np.einsum("ij,ncjk,lk->ncil", uh, low, uw).astype(np.float32)


def low_resolution(images, factor):
    n, c, h, w = images.shape
    return np.float64(images).reshape(n, c, h // factor, factor, w // factor, factor).mean((3, 5))


def neighbourhoods(low, r=2):
    """[n*h*w, c*(2r+1)^2 + 1]: each low-resolution pixel's neighbourhood
    (edges repeated) and a constant."""
    n, c, h, w = low.shape
    p = np.pad(low, ((0, 0), (0, 0), (r, r), (r, r)), mode="edge")
    f = np.stack([p[:, :, dy:dy + h, dx:dx + w] for dy in range(2 * r + 1)
                  for dx in range(2 * r + 1)], 2).reshape(n, -1, h, w)
    f = f.transpose(0, 2, 3, 1).reshape(n * h * w, -1)
    return np.concatenate([f, np.ones((len(f), 1))], 1)


def linear_interpolation(train, images, factor, ridge=1e-3):
    """The least-squares linear map from neighbourhoods to blocks, fitted
    on `train` and applied to `images` (both [N, C, H, W])."""
    def blocks(x):
        n, c, h, w = x.shape
        return np.float64(x).reshape(n, c, h // factor, factor, w // factor, factor).transpose(
            0, 2, 4, 1, 3, 5).reshape(n * (h // factor) * (w // factor), -1)
    f = neighbourhoods(low_resolution(train, factor))
    wts = np.linalg.solve(f.T @ f + ridge * np.eye(f.shape[1]), f.T @ blocks(train))
    n, c, h, w = images.shape
    out = neighbourhoods(low_resolution(images, factor)) @ wts
    return out.reshape(n, h // factor, w // factor, c, factor, factor).transpose(
        0, 3, 1, 4, 2, 5).reshape(n, c, h, w)


def psnr(est, truth):
    mse = np.mean((np.float64(est) - np.float64(truth)) ** 2)
    return float(10 * np.log10(4.0 / mse))


def spectral_angle(est, truth):
    """Mean angle in degrees between spectra (axis 1) in reflectance."""
    a, b = (np.float64(est) + 1) / 4, (np.float64(truth) + 1) / 4
    cos = (a * b).sum(1) / np.maximum(np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1),
                                      1e-12)
    return float(np.degrees(np.arccos(np.clip(cos, -1, 1))).mean())


def picture(path, low, samples, est, truth, bands, rows):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    k = min(samples.shape[1], 4)
    cols = [low] + [samples[:, j] for j in range(k)] + [est, truth]
    names = ["bicubic"] + ["sample %d" % (j + 1) for j in range(k)] + ["mean of %d" % samples.shape[1],
                                                                       "truth"]
    lo, hi = np.percentile(truth[:rows][:, bands], [2, 98])
    fig, axes = plt.subplots(rows, len(cols), figsize=(1.3 * len(cols), 1.3 * rows + 0.3),
                             squeeze=False)
    for r in range(rows):
        for c, img in enumerate(cols):
            rgb = np.clip((np.float64(img[r][bands]).transpose(1, 2, 0) - lo) / (hi - lo), 0, 1)
            ax = axes[r][c]
            ax.imshow(rgb, interpolation="nearest")
            ax.set_xticks([])
            ax.set_yticks([])
            if r == 0:
                ax.set_title(names[c], fontsize=7)
    fig.tight_layout()
    tmp = path + ".tmp.png"
    fig.savefig(tmp, dpi=100)
    os.replace(tmp, path)


def load(path, what):
    try:
        return np.load(path)
    except (OSError, ValueError) as e:
        fail("%s %s: %s" % (what, path, e))


def main():
    ap = Parser(description=__doc__)
    sub = ap.add_subparsers(dest="cmd", required=True)
    d = sub.add_parser("degrade")
    d.add_argument("--images", required=True)
    d.add_argument("-o", "--out", required=True)
    d.add_argument("--factor", type=int, default=4)
    d.add_argument("--residual")
    d.add_argument("--scale", type=float, default=4.0)
    s = sub.add_parser("score")
    s.add_argument("--samples", required=True)
    s.add_argument("--per-cond", type=int, required=True)
    s.add_argument("--truth", required=True)
    s.add_argument("--low", required=True)
    s.add_argument("--residual-scale", type=float)
    s.add_argument("--linear-from")
    s.add_argument("--factor", type=int, default=4)
    s.add_argument("--json")
    s.add_argument("--png")
    s.add_argument("--bands", default="2,1,0")
    s.add_argument("--rows", type=int, default=8)
    a = ap.parse_args()
    if a.cmd == "degrade":
        x = load(a.images, "--images")
        if x.ndim != 4 or x.dtype != np.float32:
            fail("--images %s: %s %s, expected float32 [N,C,H,W]" % (a.images, x.dtype, x.shape))
        if a.factor < 2:
            fail("--factor must be at least 2, got %d" % a.factor)
        if os.path.realpath(a.out) == os.path.realpath(a.images):
            fail("-o %s would replace --images" % a.out)
        if a.residual and os.path.realpath(a.residual) in (os.path.realpath(a.images),
                                                            os.path.realpath(a.out)):
            fail("--residual %s would replace an input or -o" % a.residual)
        if not a.scale > 0:
            fail("--scale must be positive, got %g" % a.scale)
        low = degrade(x, a.factor)
        outputs = [(a.out, low)]
        if a.residual:
            outputs.append((a.residual, (a.scale * (np.float64(x) - low)).astype(np.float32)))
        for path, arr in outputs:
            tmp = path + ".tmp.npy"
            np.save(tmp, arr)
            os.replace(tmp, path)
        print("%s: %d tiles down-sampled %dx and up-sampled back (bicubic), %s%s"
              % (a.out, len(low), a.factor, list(low.shape),
                 "; %s: %g x what it misses" % (a.residual, a.scale) if a.residual else ""))
        return
    samples, truth, low = (load(a.samples, "--samples"), load(a.truth, "--truth"),
                           load(a.low, "--low"))
    k = a.per_cond
    if k < 1 or len(samples) % k or truth.shape != low.shape or \
            samples.shape[1:] != truth.shape[1:]:
        fail("--samples %s [%s], --per-cond %d, --truth %s, --low %s do not fit together"
             % (a.samples, samples.shape, k, truth.shape, low.shape))
    tiles = len(samples) // k
    if tiles > len(truth):
        fail("--samples has %d tiles of %d samples, --truth only %d" % (tiles, k, len(truth)))
    t, lo = truth[:tiles], low[:tiles]
    grouped = np.float64(samples).reshape((tiles, k) + samples.shape[1:])
    if a.residual_scale:
        grouped = np.float64(lo)[:, None] + grouped / a.residual_scale
    est = grouped.mean(1)
    single = grouped[:, 0]
    r = {"tiles": tiles, "samples_per_tile": k,
         "psnr_db": psnr(est, t), "psnr_one_sample_db": psnr(single, t),
         "psnr_bicubic_db": psnr(lo, t),
         "spectral_angle_deg": spectral_angle(est, t),
         "spectral_angle_bicubic_deg": spectral_angle(lo, t)}
    r["psnr_gain_db"] = r["psnr_db"] - r["psnr_bicubic_db"]
    if a.linear_from:
        train = load(a.linear_from, "--linear-from")
        if train.ndim != 4 or train.shape[1:] != t.shape[1:]:
            fail("--linear-from %s: %s, the tiles are %s" % (a.linear_from, train.shape,
                                                           t.shape[1:]))
        r["psnr_linear_db"] = psnr(linear_interpolation(train, t, a.factor), t)
    print("%d tiles, mean of %d samples: PSNR %.2f dB (one sample %.2f), bicubic %.2f dB, "
          "gain %+.2f dB; spectral angle %.3f deg, bicubic %.3f deg"
          % (tiles, k, r["psnr_db"], r["psnr_one_sample_db"], r["psnr_bicubic_db"],
             r["psnr_gain_db"], r["spectral_angle_deg"], r["spectral_angle_bicubic_deg"]))
    if "psnr_linear_db" in r:
        print("best linear interpolation (fitted to %s): PSNR %.2f dB" % (a.linear_from,
                                                                           r["psnr_linear_db"]))
    if a.json:
        with open(a.json + ".tmp", "w") as f:
            json.dump(r, f, indent=1)
        os.replace(a.json + ".tmp", a.json)
    if a.png:
        try:
            bands = [int(b) for b in a.bands.split(",")]
        except ValueError:
            fail("--bands %r: three channel numbers, e.g. 2,1,0" % a.bands)
        if len(bands) != 3 or not all(0 <= b < truth.shape[1] for b in bands):
            fail("--bands %r: three channels of the %d" % (a.bands, truth.shape[1]))
        picture(a.png, lo, grouped, est, t, bands, max(1, min(a.rows, tiles)))
        print("picture: %s" % a.png)


if __name__ == "__main__":
    main()
