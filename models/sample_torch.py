#!/usr/bin/env python3
"""PyTorch's guided DiT sampling loop, the speed anchor of `hc-run sample`
(bench/sampling_anchors.py): the same DiT and weights, the same respaced
DDPM or DDIM arithmetic (models/sampler_reference.py's formulas, here in
torch float32), DiT's forward_with_cfg batch (the n conditional rows, then
the n null-class rows).

usage: python models/sample_torch.py --model DiT-S/2 --image-size 32 --in-channels 4
           --num-classes 1000 --init-weights W.safetensors --classes 1,2,3,4
           --start X_T.npy [--noise NOISE.npy] --sampler ddpm|ddim --sampling-steps K
           [--cfg-scale 4] [--threads T] [--compile [--freeze]] [--autocast bf16]
           [--save-npy OUT.npy] [--json OUT.json]

--start is x at the first step ([n, C, H, W]), --noise the ancestral
sampler's noise per step ([K, n, C, H, W], the last unused): hc-run sample
--dump-steps writes both, so the images can be compared. As an anchor,
PyTorch is used as its documentation recommends for CPU inference:
torch.inference_mode, torch.set_num_threads(cores), torch.compile with
inductor's default mode (two warm-up model calls compile it before the
clock starts, for every row alike), torch.autocast("cpu", bfloat16).
--freeze sets inductor's `freezing`, which PyTorch recommends for CPU
inference: the weights become constants, so autocast's per-call bf16 copies
of them are folded away and oneDNN's linears read prepacked weights (on the
Zen 4 VM: compiled bf16 sampling 21.5-23.8 -> 16.6 s, the same images bit
for bit; fp32 unchanged). The time is the sampling loop alone, model calls
and updates.
"""
import argparse
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import numpy as np  # noqa: E402
import torch  # noqa: E402

import dit as ditlib  # noqa: E402
import sampler_reference as ref  # noqa: E402
from train_torch import load_weights  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--image-size", type=int, required=True)
    ap.add_argument("--in-channels", type=int, required=True)
    ap.add_argument("--num-classes", type=int, required=True)
    ap.add_argument("--init-weights", required=True)
    ap.add_argument("--classes", required=True)
    ap.add_argument("--start", required=True)
    ap.add_argument("--noise", default=None)
    ap.add_argument("--sampler", choices=["ddpm", "ddim"], required=True)
    ap.add_argument("--sampling-steps", required=True)
    ap.add_argument("--cfg-scale", type=float, default=4.0)
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--compile", action="store_true")
    ap.add_argument("--freeze", action="store_true")
    ap.add_argument("--autocast", choices=["bf16"], default=None)
    ap.add_argument("--save-npy", default=None)
    ap.add_argument("--json", default=None)
    a = ap.parse_args()
    if a.freeze and not a.compile:
        ap.error("--freeze is inductor's freezing: it needs --compile")
    if a.freeze:
        import torch._inductor.config as inductor_config
        inductor_config.freezing = True
    torch.set_num_threads(a.threads)
    model = ditlib.make_dit(a.model, image_size=a.image_size, in_channels=a.in_channels,
                            num_classes=a.num_classes, learn_sigma=True, init="default", seed=0)
    load_weights(a.init_weights, model)
    model.eval()
    labels = torch.tensor([int(c) for c in a.classes.split(",")], dtype=torch.int64)
    n, C = labels.numel(), a.in_channels
    x = torch.from_numpy(np.load(a.start).astype(np.float32))
    if tuple(x.shape) != (n, C, a.image_size, a.image_size):
        sys.exit("--start %s is %s, want %s" % (a.start, list(x.shape),
                                               [n, C, a.image_size, a.image_size]))
    s = ref.Schedule(ref.respacing(1000, a.sampling_steps))
    K = len(s.timestep_map)
    noise = None
    if a.sampler == "ddpm":
        if not a.noise:
            sys.exit("--sampler ddpm needs --noise")
        noise = torch.from_numpy(np.load(a.noise).astype(np.float32))
    guided = a.cfg_scale != 1.0
    y = torch.cat([labels, torch.full_like(labels, a.num_classes)]) if guided else labels
    net = torch.compile(model) if a.compile else model
    f32 = lambda v: torch.tensor(v, dtype=torch.float32)  # noqa: E731
    tab = {k: f32(getattr(s, k)) for k in ("sqrt_recip_ac", "sqrt_recipm1_ac", "alphas_cumprod_prev",
                                             "coef1", "coef2", "betas",
                                             "posterior_log_variance_clipped")}

    def model_out(xin, t):
        if a.autocast:
            with torch.autocast("cpu", dtype=torch.bfloat16):
                return net(xin, t, y).float()
        return net(xin, t, y)

    def update(i, x, out):
        cond = out[:n]
        eps = cond[:, :C]
        if guided:
            eps = out[n:2 * n, :C] + a.cfg_scale * (eps - out[n:2 * n, :C])
        x0 = (tab["sqrt_recip_ac"][i] * x - tab["sqrt_recipm1_ac"][i] * eps).clamp(-1, 1)
        if a.sampler == "ddim":
            eps2 = (tab["sqrt_recip_ac"][i] * x - x0) / tab["sqrt_recipm1_ac"][i]
            abp = tab["alphas_cumprod_prev"][i]
            return x0 * abp.sqrt() + (1 - abp).sqrt() * eps2
        mean = tab["coef1"][i] * x0 + tab["coef2"][i] * x
        frac = (cond[:, C:2 * C] + 1) / 2
        log_var = frac * tab["betas"][i].log() + (1 - frac) * tab["posterior_log_variance_clipped"][i]
        return mean if i == 0 else mean + (0.5 * log_var).exp() * noise[K - 1 - i]

    with torch.inference_mode():
        rows = 2 * n if guided else n
        warm = torch.zeros(rows, C, a.image_size, a.image_size)
        for _ in range(2):  # compiles a compiled model; the same for every row
            model_out(warm, torch.zeros(rows, dtype=torch.int64))
        t0 = time.perf_counter()
        for i in reversed(range(K)):
            t = torch.full((rows,), int(s.timestep_map[i]), dtype=torch.int64)
            xin = torch.cat([x, x]) if guided else x
            x = update(i, x, model_out(xin, t))
        seconds = time.perf_counter() - t0
    if not torch.isfinite(x).all():
        sys.exit("a sample holds a non-finite value")
    if a.save_npy:
        np.save(a.save_npy, x.numpy())
    result = {"model_calls": K, "seconds": seconds, "images": n, "images_per_s": n / seconds,
              "torch": torch.__version__, "threads": torch.get_num_threads()}
    print(json.dumps(result))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(result, f)


if __name__ == "__main__":
    main()
