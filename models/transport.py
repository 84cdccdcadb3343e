#!/usr/bin/env -S /usr/bin/python3
"""Flow-matching objectives (SiT's interpolants), the part outside the network.

The facts follow SiT's `transport` package (Ma et al. 2024,
github.com/willisma/SiT, transport/path.py and transport.py); the code is
this project's own. Conventions, as SiT has them:

  x0 ~ N(0, I) is the noise, x1 the data; t = 0 is noise, t = 1 is data;
  x_t = alpha_t x1 + sigma_t x0,  u_t = alpha'_t x1 + sigma'_t x0.

Paths (alpha_t, sigma_t):
  linear  t, 1 - t                                   (rectified flow)
  gvp     sin(pi t / 2), cos(pi t / 2)               (trigonometric)
  vp      exp(m(t)), sqrt(1 - exp(2 m(t))),  m(t) = -(1-t)^2 (smax-smin)/4
          - (1-t) smin/2, smin 0.1, smax 20         (score-based VP SDE)

Predictions and their training losses (mean over every element):
  velocity  (out - u_t)^2                            (no weight: SiT ignores one)
  noise     w(t) (out - x0)^2
  score     w(t) (out sigma_t + x0)^2
with w = 1 (none), (D/sigma_t)^2 (velocity) or D/sigma_t^2 (likelihood),
D = the path's drift variance (drift() below).

Time: uniform on [t0, t1] (SiT), t0 = train_eps unless the path is vp or
the prediction is velocity, t1 = 1 - train_eps unless a linear/gvp velocity
model (train_eps 0 there); or logit-normal (SD3): t = 1 - sigmoid(m + s n),
n ~ N(0, 1), mapped into [t0, t1]. m and s keep SD3's meaning (SD3's t is
the noise level, 1 - ours), so SD3's settings carry over unchanged.

Every function takes numpy float64 arrays (the oracle) or torch tensors (the
exported loss, computed in the graph from its t input).
"""
import math

import numpy as np

PATHS = ("linear", "gvp", "vp")
PREDICTIONS = ("velocity", "noise", "score")
LOSS_WEIGHTS = ("none", "velocity", "likelihood")
TIME_SAMPLINGS = ("uniform", "logit-normal")
DIFFUSION_FORMS = ("constant", "SBDM", "sigma", "linear", "decreasing",
                   "increasing-decreasing")
VP_SIGMA_MIN, VP_SIGMA_MAX = 0.1, 20.0


def _xp(t):
    if type(t).__module__.startswith("torch"):
        import torch
        return torch
    return np


def eps_defaults(path, prediction):
    """(train_eps, sample_eps) SiT's create_transport picks when none is given."""
    if path == "vp":
        return 1e-5, 1e-3
    if prediction != "velocity":
        return 1e-3, 1e-3
    return 0.0, 0.0  # velocity on linear/gvp is stable everywhere


class Objective:
    """One flow objective: path, prediction, loss weight and the two epsilons."""

    def __init__(self, path="linear", prediction="velocity", loss_weight="none",
                 train_eps=None, sample_eps=None):
        if path not in PATHS:
            raise ValueError("unknown path %r (expected %s)" % (path, ", ".join(PATHS)))
        if prediction not in PREDICTIONS:
            raise ValueError("unknown prediction %r (expected %s)"
                             % (prediction, ", ".join(PREDICTIONS)))
        if loss_weight not in LOSS_WEIGHTS:
            raise ValueError("unknown loss weight %r (expected %s)"
                             % (loss_weight, ", ".join(LOSS_WEIGHTS)))
        if prediction == "velocity" and loss_weight != "none":
            raise ValueError("a velocity prediction takes no loss weight (SiT weights only "
                             "the noise and score losses), got %r" % loss_weight)
        te, se = eps_defaults(path, prediction)
        self.path, self.prediction, self.loss_weight = path, prediction, loss_weight
        self.train_eps = te if train_eps is None else float(train_eps)
        self.sample_eps = se if sample_eps is None else float(sample_eps)
        for name, v in (("train_eps", self.train_eps), ("sample_eps", self.sample_eps)):
            if not 0.0 <= v < 0.5:
                raise ValueError("%s must be in [0, 0.5), got %g" % (name, v))

    def config(self):
        """What export_dit.py records under dit_config.flow."""
        return {"path": self.path, "prediction": self.prediction,
                "loss_weight": self.loss_weight, "train_eps": self.train_eps,
                "sample_eps": self.sample_eps}

    @staticmethod
    def from_config(cfg):
        f = cfg["flow"]
        return Objective(f["path"], f["prediction"], f["loss_weight"], f["train_eps"],
                         f["sample_eps"])

    # ---- the path --------------------------------------------------------
    def alpha(self, t):
        """(alpha_t, d alpha_t / dt)."""
        xp = _xp(t)
        if self.path == "linear":
            return t, xp.ones_like(t)
        if self.path == "gvp":
            return xp.sin(t * (math.pi / 2)), (math.pi / 2) * xp.cos(t * (math.pi / 2))
        a = xp.exp(_vp_log_mean(t))
        return a, a * _vp_d_log_mean(t)

    def sigma(self, t):
        """(sigma_t, d sigma_t / dt)."""
        xp = _xp(t)
        if self.path == "linear":
            return 1 - t, -xp.ones_like(t)
        if self.path == "gvp":
            return xp.cos(t * (math.pi / 2)), -(math.pi / 2) * xp.sin(t * (math.pi / 2))
        e = xp.exp(2 * _vp_log_mean(t))
        s = xp.sqrt(1 - e)
        return s, e * (2 * _vp_d_log_mean(t)) / (-2 * s)

    def alpha_ratio(self, t):
        """alpha'_t / alpha_t, in the form that stays finite where it can."""
        xp = _xp(t)
        if self.path == "linear":
            return 1 / t
        if self.path == "gvp":
            return (math.pi / 2) * xp.cos(t * (math.pi / 2)) / xp.sin(t * (math.pi / 2))
        return _vp_d_log_mean(t)

    def drift_coefficients(self, t):
        """(k, D) with the probability-flow drift k x + D score (SiT's
        compute_drift returns (-k x, D)); D is also the loss weights' drift
        variance."""
        if self.path == "vp":
            beta = VP_SIGMA_MIN + (1 - t) * (VP_SIGMA_MAX - VP_SIGMA_MIN)
            return 0.5 * beta, beta / 2
        r = self.alpha_ratio(t)
        s, ds = self.sigma(t)
        return r, r * s * s - s * ds

    def diffusion(self, t, form="sigma", norm=1.0):
        """The SDE's diffusion coefficient (SiT's compute_diffusion)."""
        xp = _xp(t)
        if form == "constant":
            return norm + 0 * t
        if form == "SBDM":
            return norm * self.drift_coefficients(t)[1]
        if form == "sigma":
            return norm * self.sigma(t)[0]
        if form == "linear":
            return norm * (1 - t)
        if form == "decreasing":
            return 0.25 * (norm * xp.cos(math.pi * t) + 1) ** 2
        if form == "increasing-decreasing":
            return norm * xp.sin(math.pi * t) ** 2
        raise ValueError("unknown diffusion form %r (expected %s)"
                         % (form, ", ".join(DIFFUSION_FORMS)))

    # ---- training ----------------------------------------------------------
    def train_interval(self):
        t0, t1 = 0.0, 1.0
        if self.path == "vp":
            t1 = 1 - self.train_eps
        elif self.prediction != "velocity":
            t0, t1 = self.train_eps, 1 - self.train_eps
        return t0, t1

    def plan(self, t, x0, x1):
        """(x_t, u_t) for per-sample t [B] and noise/data [B, ...]."""
        tb = _expand(t, x1)
        a, da = self.alpha(tb)
        s, ds = self.sigma(tb)
        return a * x1 + s * x0, da * x1 + ds * x0

    def target(self, t, x0, x1):
        """The graph's `target` input: u_t for velocity, else the noise x0."""
        return self.plan(t, x0, x1)[1] if self.prediction == "velocity" else x0

    def loss_weight_of(self, t):
        """w(t) of the noise and score losses, [B] (ones for none)."""
        xp = _xp(t)
        if self.loss_weight == "none":
            return xp.ones_like(t)
        s = self.sigma(t)[0]
        d = self.drift_coefficients(t)[1]
        if self.loss_weight == "velocity":
            return (d / s) ** 2
        return d / (s * s)

    def loss(self, out, t, target):
        """The scalar training loss of model output `out` (the data's channels)."""
        if self.prediction == "velocity":
            r = out - target
            return (r * r).mean()
        w = _expand(self.loss_weight_of(t), out)
        r = out - target if self.prediction == "noise" else out * _expand(self.sigma(t)[0], out) + target
        return (w * r * r).mean()

    # ---- sampling ------------------------------------------------------------
    def ode_interval(self):
        """[t0, t1] of the probability-flow ODE (SiT's check_interval, eval)."""
        t0, t1 = 0.0, 1.0
        if self.path == "vp":
            t1 = 1 - self.sample_eps
        elif self.prediction != "velocity":
            t0, t1 = self.sample_eps, 1 - self.sample_eps
        return t0, t1

    def sde_interval(self, form="sigma", last_step_size=0.04):
        t0, t1 = 0.0, 1.0
        last = 1 - last_step_size if last_step_size else 1 - self.sample_eps
        if self.path == "vp":
            t1 = last
        else:
            if form == "SBDM" or self.prediction != "velocity":
                t0 = self.sample_eps
            t1 = last
        return t0, t1

    def drift(self, x, t, out):
        """The probability-flow ODE's velocity at (x, t) from the model's output."""
        if self.prediction == "velocity":
            return out
        k, d = (_expand(v, x) for v in self.drift_coefficients(t))
        score = out if self.prediction == "score" else out / -_expand(self.sigma(t)[0], x)
        return k * x + d * score

    def score(self, x, t, out):
        """grad log p_t(x) from the model's output."""
        if self.prediction == "score":
            return out
        if self.prediction == "noise":
            return out / -_expand(self.sigma(t)[0], x)
        tb = _expand(t, x)
        a, da = self.alpha(tb)
        s, ds = self.sigma(tb)
        rar = a / da
        var = s * s - rar * ds * s
        return (rar * out - x) / var


# ---- the samplers' arithmetic (the float64 reference of hc-run sample) ------
def guided(cond, uncond, scale):
    """Classifier-free guidance on every channel: uncond + s (cond - uncond)."""
    return uncond + scale * (cond - uncond)


def sde_drift(objective, x, t, out, form="sigma", norm=1.0):
    """drift + diffusion * score (the reverse SDE's drift; the ODE's when the
    diffusion is 0)."""
    g = objective.diffusion(np.asarray(t, np.float64), form, norm)
    d = objective.drift(x, t, out)
    if np.all(g == 0):
        return d
    return d + _expand(g, x) * objective.score(x, t, out)


def grid(t0, t1, steps):
    """The fixed-step methods' times: steps + 1 points from t0 to t1."""
    return [t0 + k * (t1 - t0) / steps for k in range(steps)] + [t1]


def euler_step(objective, x, t, dt, out):
    return x + dt * objective.drift(x, _per_sample(t, x), out)


def heun_stage(objective, x, t, dt, out):
    """Heun's first slope and the point of its second evaluation."""
    k1 = objective.drift(x, _per_sample(t, x), out)
    return k1, x + dt * k1


def heun_step(objective, x, t, dt, k1, x_mid, out_mid):
    k2 = objective.drift(x_mid, _per_sample(t + dt, x), out_mid)
    return x + 0.5 * dt * (k1 + k2)


def sde_euler_step(objective, x, t, dt, out, noise, form="sigma", norm=1.0):
    """Euler-Maruyama: x + f dt + sqrt(2 g) sqrt(dt) w."""
    ts = _per_sample(t, x)
    g = float(objective.diffusion(np.float64(t), form, norm))
    return x + sde_drift(objective, x, ts, out, form, norm) * dt + \
        math.sqrt(2 * g) * math.sqrt(dt) * noise


def sde_heun_noise(objective, x, t, dt, noise, form="sigma", norm=1.0):
    """SiT's stochastic Heun: the noised point where both slopes start."""
    g = float(objective.diffusion(np.float64(t), form, norm))
    return x + math.sqrt(2 * g) * math.sqrt(dt) * noise


def sde_heun_stage(objective, xhat, t, dt, out, form="sigma", norm=1.0):
    k1 = sde_drift(objective, xhat, _per_sample(t, xhat), out, form, norm)
    return k1, xhat + dt * k1


def sde_heun_step(objective, xhat, t, dt, k1, x_mid, out_mid, form="sigma", norm=1.0):
    k2 = sde_drift(objective, x_mid, _per_sample(t + dt, x_mid), out_mid, form, norm)
    return xhat + 0.5 * dt * (k1 + k2)


def last_step(objective, x, t1, out, kind="Mean", size=0.04, form="sigma", norm=1.0):
    """SiT's last SDE step at t1."""
    ts = _per_sample(t1, x)
    if kind == "Mean":
        return x + sde_drift(objective, x, ts, out, form, norm) * size
    if kind == "Euler":
        return x + objective.drift(x, ts, out) * size
    if kind == "Tweedie":
        a = objective.alpha(np.float64(t1))[0]
        s = objective.sigma(np.float64(t1))[0]
        return x / a + s * s / a * objective.score(x, ts, out)
    return x


def _per_sample(t, x):
    return np.full(x.shape[0], t, np.float64)


def _vp_log_mean(t):
    return -0.25 * (1 - t) ** 2 * (VP_SIGMA_MAX - VP_SIGMA_MIN) - 0.5 * (1 - t) * VP_SIGMA_MIN


def _vp_d_log_mean(t):
    return 0.5 * (1 - t) * (VP_SIGMA_MAX - VP_SIGMA_MIN) + 0.5 * VP_SIGMA_MIN


def _expand(v, like):
    """[B] -> [B, 1, ..., 1] to broadcast against `like`."""
    return v.reshape((-1,) + (1,) * (like.ndim - 1))


def sample_time(batch, generator, objective, sampling="uniform", mean=0.0, std=1.0):
    """[batch] float times on the objective's training interval (numpy Generator)."""
    if sampling not in TIME_SAMPLINGS:
        raise ValueError("unknown time sampling %r (expected %s)"
                         % (sampling, " or ".join(TIME_SAMPLINGS)))
    t0, t1 = objective.train_interval()
    if sampling == "uniform":
        u = generator.random(batch)
    else:
        u = 1.0 - 1.0 / (1.0 + np.exp(-(mean + std * generator.standard_normal(batch))))
    return (t0 + (t1 - t0) * u).astype(np.float32)


if __name__ == "__main__":
    for p in PATHS:
        for pr in PREDICTIONS:
            o = Objective(p, pr)
            t = np.array([0.25, 0.5, 0.75])
            print("%-6s %-8s train %s ode %s alpha %s sigma %s" % (
                p, pr, o.train_interval(), o.ode_interval(), o.alpha(t)[0], o.sigma(t)[0]))
