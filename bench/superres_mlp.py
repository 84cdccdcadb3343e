#!/usr/bin/env -S /usr/bin/python3
"""How much of what 4x down-sampling loses is predictable at all, for the
tutorial's super-resolution (docs/tutorial.md, section 9): an MLP trained
for the mean square error (the conditional mean, the best any estimator of
the tile can do in PSNR) from each low-resolution pixel's 5x5 neighbourhood
to its 4x4 block, beside bicubic and the best linear map
(models/superres.py's linear_interpolation). Debian's PyTorch 1.13, CPU.

usage: /usr/bin/python3 bench/superres_mlp.py --train X.npy --test T.npy
           [--seconds 150] [--factor 4]
"""
import argparse
import os
import sys
import time

import numpy as np
import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                "models"))
import superres  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--train", required=True)
    ap.add_argument("--test", required=True)
    ap.add_argument("--seconds", type=float, default=150)
    ap.add_argument("--factor", type=int, default=4)
    a = ap.parse_args()
    torch.manual_seed(0)
    x, xt = np.load(a.train), np.load(a.test)
    f = a.factor

    def blocks(v):
        n, c, h, w = v.shape
        return np.float32(v).reshape(n, c, h // f, f, w // f, f).transpose(
            0, 2, 4, 1, 3, 5).reshape(n * (h // f) * (w // f), -1)

    feats = torch.from_numpy(np.float32(superres.neighbourhoods(superres.low_resolution(x, f))))
    target = torch.from_numpy(blocks(x))
    test = torch.from_numpy(np.float32(superres.neighbourhoods(superres.low_resolution(xt, f))))
    m = torch.nn.Sequential(torch.nn.Linear(feats.shape[1], 512), torch.nn.GELU(),
                            torch.nn.Linear(512, 512), torch.nn.GELU(),
                            torch.nn.Linear(512, target.shape[1]))
    opt = torch.optim.AdamW(m.parameters(), 1e-3)
    start, steps = time.time(), 0
    while time.time() - start < a.seconds:
        idx = torch.randint(0, len(feats), (1024,))
        loss = ((m(feats[idx]) - target[idx]) ** 2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        steps += 1
    n, c, h, w = xt.shape
    with torch.no_grad():
        mlp = m(test).numpy().reshape(n, h // f, w // f, c, f, f).transpose(
            0, 3, 1, 4, 2, 5).reshape(n, c, h, w)
    bicubic = superres.degrade(xt, f)
    linear = superres.linear_interpolation(x, xt, f)
    print("%d test tiles, %dx: bicubic %.2f dB, best linear %.2f dB, MLP for the mean "
          "(%d steps, %.0f s) %.2f dB" % (n, f, superres.psnr(bicubic, xt),
                                          superres.psnr(linear, xt), steps, a.seconds,
                                          superres.psnr(mlp, xt)))


if __name__ == "__main__":
    main()
