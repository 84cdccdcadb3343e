#!/usr/bin/env python3
"""torchdiffeq's dopri5 in float64 on the tiny flow DiT (run by the anchors
environment's python for test/run/flow_sample_check.py's dopri5 case): the
probability-flow ODE of models/transport.py from the noise --x0 ([2, D]) at
t0 to t1, images of classes 0 and 2, guidance --cfg on every channel with
the null class 3. Writes the final samples [2, D] to --out and prints the
solver's function evaluations."""
import argparse
import os
import sys

import numpy as np
import torch
from torchdiffeq import odeint

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "models"))
import dit as ditlib  # noqa: E402
import safetensors_np  # noqa: E402
import transport  # noqa: E402

ap = argparse.ArgumentParser()
for flag in ("--weights", "--path", "--prediction", "--x0", "--out"):
    ap.add_argument(flag, required=True)
ap.add_argument("--cfg", type=float, required=True)
ap.add_argument("--tol", type=float, default=1e-10)
a = ap.parse_args()
m = ditlib.make_dit("tiny", image_size=8, in_channels=4, num_classes=3, learn_sigma=False,
                    init="random")
m.load_state_dict({k: torch.from_numpy(v) for k, v in safetensors_np.load(a.weights).items()},
                  strict=True)
m = m.double().eval()
obj = transport.Objective(a.path, a.prediction)
t0, t1 = obj.ode_interval()
x0 = torch.from_numpy(np.load(a.x0).astype(np.float64).reshape(2, 4, 8, 8))
y, null = torch.tensor([0, 2]), torch.tensor([3, 3])
calls = [0]


def f(t, x):
    calls[0] += 1
    tt = torch.full((2,), float(t), dtype=torch.float64)
    with torch.no_grad():
        cond, uncond = m(x, tt, y), m(x, tt, null)
    out = uncond + a.cfg * (cond - uncond)
    return torch.from_numpy(obj.drift(x.numpy(), tt.numpy(), out.numpy()))


sol = odeint(f, x0, torch.tensor([t0, t1], dtype=torch.float64), method="dopri5",
             atol=a.tol, rtol=a.tol)
np.save(a.out, sol[-1].numpy().reshape(2, -1))
print("%d evaluations at atol = rtol = %g" % (calls[0], a.tol))
