#!/usr/bin/env python3
"""An image folder to hc-run's training data: pixels in [-1, 1] or VAE latents.

usage: PY models/prepare_data.py --images DIR --out DIR [--size 32]
           [--mode pixels|latents] [--channels 3|1] [--vae sd-random|FOLDER]
           [--batch 16] [--no-progress]

DIR is torchvision's ImageFolder layout: one sub-folder per class (their
sorted names are the classes 0, 1, ...), holding PNG or JPEG images, or
multi-band tiles as NPY arrays [C, H, W] (already scaled; GeoTIFF-like
data converted to NPY). Every image is centre-cropped to a square and
resized to --size as DiT's center_crop_arr does (box down-sampling while
the image is at least twice the size, then bicubic); NPY tiles are
centre-cropped and area-resized per band.

  --mode pixels   images.npy: float32 [N, C, H, W] in [-1, 1] (x / 127.5 - 1)
  --mode latents  images.npy: float32 [N, 4, H/8, W/8], the mean of
                  diffusers' AutoencoderKL encoding times its scaling factor
                  (Stable Diffusion's 0.18215), as DiT trains on; needs
                  diffusers: run it with the anchors environment's python
                  (tools/install-anchors.sh prints it)
  --vae           the autoencoder: a folder of AutoencoderKL.from_pretrained
                  (e.g. a downloaded stabilityai/sd-vae-ft-ema; this machine
                  cannot fetch one), or sd-random: Stable Diffusion's VAE
                  configuration with random weights (seed 0), for tests

Out come, each written atomically: images.npy, labels.npy (int64 [N]) and
classes.json (the class names in label order, the mode, the VAE and its
scaling factor, the size). hc-run trains on images.npy and labels.npy; with
latents, sample with hc-run sample --no-clip (DDPM) and turn the samples
back into pictures with models/decode_latents.py.

Bad input: one line on stderr, exit 2.
"""
import argparse
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cli import fail  # noqa: E402

IMAGE_EXTS = (".png", ".jpg", ".jpeg")
# Stable Diffusion's AutoencoderKL (the configuration of sd-vae-ft-ema).
SD_VAE_CONFIG = dict(
    in_channels=3, out_channels=3, latent_channels=4, layers_per_block=2,
    block_out_channels=(128, 256, 512, 512), norm_num_groups=32, sample_size=256,
    down_block_types=("DownEncoderBlock2D",) * 4, up_block_types=("UpDecoderBlock2D",) * 4,
    scaling_factor=0.18215)


def load_vae(spec):
    """(AutoencoderKL in eval mode, a JSON description of it)."""
    try:
        import torch
        from diffusers import AutoencoderKL
    except ImportError:
        fail("--mode latents needs diffusers: run this with the anchors environment's python "
             "(tools/install-anchors.sh prints its path)")
    if spec == "sd-random":
        torch.manual_seed(0)
        vae = AutoencoderKL(**SD_VAE_CONFIG)
        desc = {"vae": "sd-random", "seed": 0}
    else:
        if not os.path.isdir(spec):
            fail("--vae %s: not a folder of AutoencoderKL.from_pretrained, nor sd-random" % spec)
        try:
            vae = AutoencoderKL.from_pretrained(spec)
        except Exception as e:  # noqa: BLE001 - any load failure is a usage error here
            fail("--vae %s: cannot load an AutoencoderKL: %s" % (spec, str(e).splitlines()[0]))
        desc = {"vae": os.path.abspath(spec)}
    desc["scaling_factor"] = float(vae.config.scaling_factor)
    return vae.eval(), desc


def center_crop_arr(img, size):
    """DiT's (ADM's) centre crop: box-halve while at least 2x, bicubic to the
    short side, crop the centre."""
    from PIL import Image
    while min(*img.size) >= 2 * size:
        img = img.resize(tuple(x // 2 for x in img.size), resample=Image.BOX)
    scale = size / min(*img.size)
    img = img.resize(tuple(round(x * scale) for x in img.size), resample=Image.BICUBIC)
    arr = np.array(img)
    y, x = (arr.shape[0] - size) // 2, (arr.shape[1] - size) // 2
    return arr[y:y + size, x:x + size]


def load_tile(path, size):
    """A multi-band NPY tile [C, H, W]: centre square, area-resized per band."""
    try:
        a = np.load(path, allow_pickle=False)
    except Exception as e:  # noqa: BLE001
        fail("%s: not a readable NPY: %s" % (path, e))
    if a.ndim != 3 or not np.issubdtype(a.dtype, np.floating) or not np.all(np.isfinite(a)):
        fail("%s: a tile must be a finite float array [C, H, W], got %s %s"
             % (path, a.dtype, list(a.shape)))
    s = min(a.shape[1:])
    y, x = (a.shape[1] - s) // 2, (a.shape[2] - s) // 2
    a = a[:, y:y + s, x:x + s].astype(np.float32)
    if s != size:
        import torch
        a = torch.nn.functional.interpolate(torch.from_numpy(a)[None], size=(size, size),
                                            mode="area")[0].numpy()
    return a


def load_image(path, size, channels):
    from PIL import Image
    try:
        with Image.open(path) as im:
            im = im.convert("RGB" if channels == 3 else "L")
            arr = center_crop_arr(im, size)
    except Exception as e:  # noqa: BLE001
        fail("%s: not a readable image: %s" % (path, str(e).splitlines()[0]))
    arr = arr.astype(np.float32) / 127.5 - 1.0
    return arr.transpose(2, 0, 1) if arr.ndim == 3 else arr[None]


def scan(folder):
    if not os.path.isdir(folder):
        fail("--images %s: not a folder" % folder)
    classes = sorted(d for d in os.listdir(folder) if os.path.isdir(os.path.join(folder, d)))
    if not classes:
        fail("--images %s: no class sub-folders (ImageFolder layout: DIR/<class>/<image>)"
             % folder)
    files = []
    for k, c in enumerate(classes):
        names = sorted(n for n in os.listdir(os.path.join(folder, c))
                       if n.lower().endswith(IMAGE_EXTS + (".npy",)))
        if not names:
            fail("--images %s: class folder '%s' holds no PNG, JPEG or NPY" % (folder, c))
        files += [(os.path.join(folder, c, n), k) for n in names]
    kinds = {f.lower().endswith(".npy") for f, _ in files}
    if len(kinds) > 1:
        fail("--images %s: mixes NPY tiles and pictures; use one kind" % folder)
    return classes, files, kinds.pop()


def save_atomic(path, write):
    tmp = path + ".tmp-%d" % os.getpid()
    try:
        with open(tmp, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


def main(argv=None):
    ap = argparse.ArgumentParser(description="An image folder to hc-run's training data.")
    ap.add_argument("--images", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--size", type=int, default=32)
    ap.add_argument("--mode", default="pixels", choices=("pixels", "latents"))
    ap.add_argument("--channels", type=int, default=3, choices=(1, 3))
    ap.add_argument("--vae", default="sd-random")
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--no-progress", action="store_true")
    a = ap.parse_args(argv)
    if a.size < 8 or (a.mode == "latents" and a.size % 8):
        ap.error("--size must be at least 8%s, got %d"
                 % (" and a multiple of 8 (the VAE's factor)" if a.mode == "latents" else "",
                    a.size))
    if a.batch < 1:
        ap.error("--batch must be positive")
    if not os.path.isdir(a.out):
        fail("--out %s: not a folder" % a.out)
    classes, files, tiles = scan(a.images)
    if tiles and a.mode == "latents":
        fail("--mode latents encodes pictures (3 channels); NPY tiles train as pixels")
    if a.mode == "latents" and a.channels != 3:
        fail("--mode latents: Stable Diffusion's VAE takes 3 channels, not --channels %d"
             % a.channels)
    vae, vae_desc = load_vae(a.vae) if a.mode == "latents" else (None, None)
    out, labels = [], []
    for i in range(0, len(files), a.batch):
        chunk = files[i:i + a.batch]
        x = np.stack([load_tile(f, a.size) if tiles else load_image(f, a.size, a.channels)
                      for f, _ in chunk])
        if tiles and out and x.shape[1:] != out[0].shape[1:]:
            fail("%s: %d bands, the first tile has %d" % (chunk[0][0], x.shape[1],
                                                           out[0].shape[1]))
        if vae is not None:
            import torch
            with torch.no_grad():
                x = (vae.encode(torch.from_numpy(x)).latent_dist.mean *
                     vae_desc["scaling_factor"]).numpy().astype(np.float32)
        out.append(x)
        labels += [k for _, k in chunk]
        if not a.no_progress:
            sys.stderr.write("\rprepare_data: %d/%d images" % (i + len(chunk), len(files)))
            sys.stderr.flush()
    if not a.no_progress:
        sys.stderr.write("\n")
    images = np.concatenate(out).astype(np.float32)
    save_atomic(os.path.join(a.out, "images.npy"), lambda f: np.save(f, images))
    save_atomic(os.path.join(a.out, "labels.npy"),
                lambda f: np.save(f, np.array(labels, np.int64)))
    meta = {"classes": classes, "mode": a.mode, "size": a.size, "shape": list(images.shape[1:]),
            "source": os.path.abspath(a.images)}
    if vae_desc:
        meta["vae"] = vae_desc
    save_atomic(os.path.join(a.out, "classes.json"),
                lambda f: f.write((json.dumps(meta, indent=1) + "\n").encode()))
    print("prepare_data: %d images of %d classes -> %s/images.npy %s (%s), labels.npy, "
          "classes.json" % (len(images), len(classes), a.out, list(images.shape), a.mode))
    return 0


if __name__ == "__main__":
    sys.exit(main())
