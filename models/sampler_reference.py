#!/usr/bin/env -S /usr/bin/python3
"""Float64 reference of DiT's sampling arithmetic (the oracle of hc-run sample).

guided_diffusion's GaussianDiffusion + SpacedDiffusion as DiT's sample.py
uses them, restated in numpy float64 from the papers' formulas:

  space_timesteps(T, sections)   which training timesteps a respaced sampler visits
  Schedule(visited)              betas_i = 1 - ab[t_i]/ab[t_{i-1}] and the tables
                                 derived from them (posterior mean coefficients,
                                 clipped posterior log-variance, ...)
  guided_eps(cond, uncond, s)    uncond + s * (cond - uncond) on every channel
  step(sched, i, x, model_out, noise, ...)
                                 one DDPM (ancestral; learned-range or fixed-large
                                 variance) or DDIM (eta = 0) step from respaced
                                 step i to i - 1

hc-run's version is tools/hc-run/sampling_schedule.cpp; test/run/sample_check.py
feeds both the same model outputs at every step.
"""
import numpy as np

import diffusion


def space_timesteps(num_timesteps, sections):
    """Sorted list of the visited timesteps (guided_diffusion's respace.py):
    T cut into len(sections) parts, part i strided into sections[i] steps."""
    size_per, extra = divmod(num_timesteps, len(sections))
    start, steps = 0, []
    for i, count in enumerate(sections):
        size = size_per + (1 if i < extra else 0)
        if not 1 <= count <= size:
            raise ValueError("section %d asks for %d steps of %d" % (i, count, size))
        stride = 1 if count <= 1 else (size - 1) / (count - 1)
        cur = 0.0
        for _ in range(count):
            steps.append(start + round(cur))
            cur += stride
        start += size
    return sorted(set(steps))


def ddim_timesteps(num_timesteps, count):
    """guided_diffusion's "ddimN": range(0, T, stride) with exactly N steps."""
    for stride in range(1, num_timesteps):
        if len(range(0, num_timesteps, stride)) == count:
            return list(range(0, num_timesteps, stride))
    raise ValueError("cannot create exactly %d steps with an integer stride" % count)


def respacing(num_timesteps, spec):
    """The visited timesteps of a --sampling-steps value: "K", "K1,K2,..." or "ddimN"."""
    if spec.startswith("ddim"):
        return ddim_timesteps(num_timesteps, int(spec[4:]))
    return space_timesteps(num_timesteps, [int(s) for s in spec.split(",")])


class Schedule:
    def __init__(self, visited):
        ac_train = diffusion.alphas_cumprod()
        last, betas = 1.0, []
        for t in visited:
            betas.append(1.0 - ac_train[t] / last)
            last = ac_train[t]
        self.timestep_map = np.array(visited, dtype=np.int64)
        b = self.betas = np.array(betas, dtype=np.float64)
        ac = self.alphas_cumprod = np.cumprod(1.0 - b)
        acp = self.alphas_cumprod_prev = np.append(1.0, ac[:-1])
        self.sqrt_recip_ac = np.sqrt(1.0 / ac)
        self.sqrt_recipm1_ac = np.sqrt(1.0 / ac - 1.0)
        pv = self.posterior_variance = b * (1.0 - acp) / (1.0 - ac)
        self.posterior_log_variance_clipped = np.log(np.append(pv[1], pv[1:]))
        self.coef1 = b * np.sqrt(acp) / (1.0 - ac)
        self.coef2 = (1.0 - acp) * np.sqrt(1.0 - b) / (1.0 - ac)
        self.fixed_large_log_variance = np.log(np.append(pv[1], b[1:]))


def guided_eps(cond, uncond, scale):
    cond, uncond = np.float64(cond), np.float64(uncond)
    return uncond + scale * (cond - uncond)


def step(s, i, x, model_out, noise, channels, cfg_scale, learn_sigma, sampler,
         clip=True, guide_channels=None):
    """x [n,C,H,W]; model_out [B,C',H,W] the raw model output of the batch
    (with guidance: n conditional rows first, then n null-class rows, B >= 2n);
    noise [n,C,H,W]. Returns x at step i-1 (float64). guide_channels: guide
    only the first k channels (upstream DiT's latent-space quirk; for tests
    that show it differs)."""
    x = np.float64(x)
    n = x.shape[0]
    out = np.float64(model_out)
    half = out.shape[0] // 2 if cfg_scale != 1.0 else None
    cond = out[:n]
    eps = cond[:, :channels].copy()
    if cfg_scale != 1.0:
        uncond = out[half:half + n, :channels]
        k = channels if guide_channels is None else guide_channels
        eps[:, :k] = guided_eps(cond[:, :k], uncond[:, :k], cfg_scale)
    x0 = s.sqrt_recip_ac[i] * x - s.sqrt_recipm1_ac[i] * eps
    if clip:
        x0 = np.clip(x0, -1.0, 1.0)
    if sampler == "ddim":
        eps2 = (s.sqrt_recip_ac[i] * x - x0) / s.sqrt_recipm1_ac[i]
        abp = s.alphas_cumprod_prev[i]
        return x0 * np.sqrt(abp) + np.sqrt(1.0 - abp) * eps2
    mean = s.coef1[i] * x0 + s.coef2[i] * x
    if learn_sigma:
        v = cond[:, channels:2 * channels]
        frac = (v + 1.0) / 2.0
        log_var = frac * np.log(s.betas[i]) + (1.0 - frac) * s.posterior_log_variance_clipped[i]
    else:
        log_var = s.fixed_large_log_variance[i]
    if i == 0:
        return mean
    return mean + np.exp(0.5 * log_var) * np.float64(noise)
