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
         [+ mean(vlb_terms(...)) with --objective mse+vlb]

with betas = linspace(1e-4, 0.02, 1000) in float64 and
ab_t = alphas_cumprod[t] = prod_{s<=t} (1 - beta_s). With learn_sigma DiT
also trains the variance through the variational bound (improved DDPM's
hybrid objective): export_dit.py --objective mse+vlb adds vlb_terms below to
the exported loss, with the mean stopped (hc::StopGradient). The default
objective, and train_torch.py, keep the MSE term only.

The functions take numpy arrays or torch tensors. Random draws are made by
the caller's generator (numpy Generator or torch.Generator) so each trainer
keeps its own reproducible stream; hc-run uses a counter-based RNG keyed by
(seed, step, global sample index) instead, so its draws differ from these
but follow the same distributions.
"""

import math

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


def vlb_tables(betas=None):
    """float64 [T] tables the variational bound needs, as improved DDPM
    defines them: the clipped posterior log-variance (its t = 0 entry is
    t = 1's, the true one being 0), log(beta), sqrt(1/ab), sqrt(1/ab - 1) and
    the posterior mean's coefficients of x0 and x_t."""
    b = linear_betas() if betas is None else np.asarray(betas, dtype=np.float64)
    ab = np.cumprod(1.0 - b)
    ab_prev = np.append(1.0, ab[:-1])
    post_var = b * (1.0 - ab_prev) / (1.0 - ab)
    return {
        "post_log_var": np.log(np.append(post_var[1], post_var[1:])),
        "log_beta": np.log(b),
        "sqrt_recip_ab": np.sqrt(1.0 / ab),
        "sqrt_recipm1_ab": np.sqrt(1.0 / ab - 1.0),
        "mean_coef_x0": b * np.sqrt(ab_prev) / (1.0 - ab),
        "mean_coef_xt": (1.0 - ab_prev) * np.sqrt(1.0 - b) / (1.0 - ab),
    }


_VLB = None


def vlb_terms(eps, var_values, x0, x_t, t):
    """Per-sample variational-bound term in bits, [B] (torch, exportable).

    eps: the model's eps prediction, already stopped (no gradient reaches the
    mean through this term); var_values: the other C channels, v in [-1, 1]
    mixing log(beta_t) and the clipped posterior log-variance; x0 the clean
    sample in [-1, 1]; x_t = q_sample(x0, t, eps_true). For t > 0 the KL of
    the true posterior q(x_{t-1}|x_t, x0) from the model's p(x_{t-1}|x_t);
    at t = 0 the discretized-Gaussian decoder NLL of x0 (256 bins over
    [-1, 1]). The tables enter the graph as float constants gathered by t."""
    import torch
    global _VLB
    if _VLB is None:
        _VLB = vlb_tables()

    def at(name):
        return torch.tensor(_VLB[name], dtype=x_t.dtype)[t].reshape(-1, 1, 1, 1)

    min_log, max_log = at("post_log_var"), at("log_beta")
    frac = (var_values + 1.0) / 2.0
    log_var = frac * max_log + (1.0 - frac) * min_log
    x0_pred = at("sqrt_recip_ab") * x_t - at("sqrt_recipm1_ab") * eps
    c0, ct = at("mean_coef_x0"), at("mean_coef_xt")
    mean = c0 * x0_pred + ct * x_t
    true_mean = c0 * x0 + ct * x_t
    kl = 0.5 * (-1.0 + log_var - min_log + torch.exp(min_log - log_var)
                + (true_mean - mean) ** 2 * torch.exp(-log_var))
    # decoder NLL: bin [x0 - 1/255, x0 + 1/255] under N(mean, exp(log_var)),
    # the outermost bins open-ended; DiT's tanh approximation of the CDF
    inv_std = torch.exp(-0.5 * log_var)
    centered = x0 - mean

    def cdf(z):
        return 0.5 * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (z + 0.044715 * z ** 3)))

    cdf_plus = cdf(inv_std * (centered + 1.0 / 255.0))
    cdf_min = cdf(inv_std * (centered - 1.0 / 255.0))
    log_cdf_plus = torch.log(torch.clamp(cdf_plus, min=1e-12))
    log_one_minus_cdf_min = torch.log(torch.clamp(1.0 - cdf_min, min=1e-12))
    log_delta = torch.log(torch.clamp(cdf_plus - cdf_min, min=1e-12))
    log_probs = torch.where(x0 < -0.999, log_cdf_plus,
                            torch.where(x0 > 0.999, log_one_minus_cdf_min, log_delta))
    per_sample = lambda v: v.mean(dim=(1, 2, 3)) / math.log(2.0)  # noqa: E731
    return torch.where(t == 0, per_sample(-log_probs), per_sample(kl))


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
