#!/usr/bin/env -S /usr/bin/python3
"""DiT's training-time diffusion, as hc-run does it (the part outside the network).

DiT (Peebles & Xie) trains with the improved-DDPM Gaussian diffusion at
1000 steps and a linear beta schedule. One training sample is made from an
image x0 as follows:

  t    ~ uniform integer in [0, NUM_TIMESTEPS)
  eps  ~ N(0, I), the shape of x0
  x_t  = sqrt(ab_t) * x0 + sqrt(1 - ab_t) * eps        (q_sample)
  y    -> NUM_CLASSES (the null class) with probability 0.1 (label dropout,
          for classifier-free guidance)
  loss = mean((DiT(x_t, t, y)[:, :C] - eps)^2)          (the target is eps)

with betas = linspace(1e-4, 0.02, 1000) in float64 and
ab_t = alphas_cumprod[t] = prod_{s<=t} (1 - beta_s). With learn_sigma DiT
also trains the variance through a VLB term; hc (and train_torch.py) keep
the MSE term only, which is what the exported graph computes.

The functions take numpy arrays or torch tensors. Random draws are made by
the caller's generator (numpy Generator or torch.Generator) so each trainer
keeps its own reproducible stream; hc-run uses a counter-based RNG keyed by
(seed, step, global sample index) instead, so its draws differ from these
but follow the same distributions.
"""

import numpy as np

NUM_TIMESTEPS = 1000
BETA_START = 1e-4
BETA_END = 0.02
LABEL_DROPOUT_PROB = 0.1


def linear_betas(num_timesteps=NUM_TIMESTEPS, beta_start=BETA_START, beta_end=BETA_END):
    """float64 [T]: DiT's linear schedule (the scale is 1000/T, 1 at T=1000),
    exactly guided_diffusion's get_named_beta_schedule("linear", T)."""
    scale = 1000.0 / num_timesteps
    return np.linspace(scale * beta_start, scale * beta_end, num_timesteps, dtype=np.float64)


def alphas_cumprod(betas=None):
    """float64 [T]: ab_t = prod_{s<=t} (1 - beta_s)."""
    if betas is None:
        betas = linear_betas()
    return np.cumprod(1.0 - np.asarray(betas, dtype=np.float64))


def q_coefficients(ab=None):
    """(sqrt(ab), sqrt(1 - ab)) as float64 [T] tables."""
    if ab is None:
        ab = alphas_cumprod()
    return np.sqrt(ab), np.sqrt(1.0 - ab)


def _is_torch(x):
    return type(x).__module__.startswith("torch")


def _extract(table, t, ndim, like):
    """table[t] for integer timesteps t [B], reshaped to [B,1,...,1] (ndim
    dims) and cast to like's dtype (float64 table values rounded once)."""
    if _is_torch(like):
        import torch
        idx = t.detach().cpu().numpy() if _is_torch(t) else np.asarray(t)
        v = torch.from_numpy(np.ascontiguousarray(table[idx.astype(np.int64)]))
        v = v.to(dtype=like.dtype, device=like.device)
        return v.reshape((-1,) + (1,) * (ndim - 1))
    v = table[np.asarray(t, dtype=np.int64)].astype(like.dtype)
    return v.reshape((-1,) + (1,) * (ndim - 1))


_SQRT_AB, _SQRT_1MAB = q_coefficients()


def q_sample(x0, t, eps, sqrt_ab=None, sqrt_one_minus_ab=None):
    """x_t = sqrt(ab_t) * x0 + sqrt(1 - ab_t) * eps.

    x0, eps: [B, ...] float (numpy or torch, same kind); t: [B] integers in
    [0, T). The coefficients come from the float64 tables and are rounded to
    x0's dtype before the multiply (as guided_diffusion's _extract does)."""
    sa = _SQRT_AB if sqrt_ab is None else sqrt_ab
    s1 = _SQRT_1MAB if sqrt_one_minus_ab is None else sqrt_one_minus_ab
    a = _extract(sa, t, x0.ndim, x0)
    b = _extract(s1, t, x0.ndim, x0)
    return a * x0 + b * eps


def sample_timesteps(batch, generator, num_timesteps=NUM_TIMESTEPS):
    """[batch] int64 timesteps uniform in [0, num_timesteps). generator is a
    torch.Generator (-> torch tensor) or a numpy Generator (-> ndarray)."""
    if isinstance(generator, np.random.Generator):
        return generator.integers(0, num_timesteps, size=batch, dtype=np.int64)
    import torch
    return torch.randint(0, num_timesteps, (batch,), generator=generator, dtype=torch.int64)


def sample_noise(shape, generator, dtype=None):
    """Standard normal noise (float32 unless dtype is given)."""
    if isinstance(generator, np.random.Generator):
        return generator.standard_normal(shape, dtype=dtype or np.float32)
    import torch
    return torch.randn(shape, generator=generator, dtype=dtype or torch.float32)


def drop_labels(labels, num_classes, generator, p=LABEL_DROPOUT_PROB):
    """Replace each label by the null class (= num_classes) with probability p,
    as DiT's LabelEmbedder.token_drop does (uniform draw < p)."""
    if isinstance(generator, np.random.Generator):
        drop = generator.random(labels.shape[0]) < p
        return np.where(drop, np.int64(num_classes), labels).astype(np.int64)
    import torch
    drop = torch.rand(labels.shape[0], generator=generator) < p
    return torch.where(drop, torch.full_like(labels, num_classes), labels)


def training_batch(x0, labels, num_classes, generator, p_drop=LABEL_DROPOUT_PROB):
    """One DiT training sample batch from clean images x0 [B,C,H,W] and labels [B]:
    returns (x_t, t, y, eps) in the order DiTLoss / the exported graph take."""
    b = x0.shape[0]
    t = sample_timesteps(b, generator)
    eps = sample_noise(tuple(x0.shape), generator)
    x_t = q_sample(x0, t, eps)
    y = drop_labels(labels, num_classes, generator, p_drop) if p_drop > 0 else labels
    return x_t, t, y, eps


if __name__ == "__main__":
    ab = alphas_cumprod()
    print("T=%d betas %.1e..%.1e  ab[0]=%.6f ab[499]=%.6f ab[999]=%.3e"
          % (NUM_TIMESTEPS, linear_betas()[0], linear_betas()[-1], ab[0], ab[499], ab[999]))
