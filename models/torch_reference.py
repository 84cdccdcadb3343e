#!/usr/bin/env -S /usr/bin/python3
"""PyTorch oracle for an exported DiT loss graph.

usage: /usr/bin/python3 models/torch_reference.py MODEL.onnx --batch N
           [--seed S] --out DIR

Rebuilds the DiT from the model's `hc.dit_config` metadata, loads every
parameter from the ONNX initializers by name (load_state_dict(strict=True);
external data is followed relative to the model's folder), draws inputs with
numpy's default_rng(seed) in this order:

    x_t   = rng.standard_normal((N, C, H, W), float32)
    t     = rng.integers(0, 1000, N)            int64
    y     = rng.integers(0, num_classes, N)     int64
    noise = rng.standard_normal((N, C, H, W), float32)

(a model exported with --objective mse+vlb, whose loss needs consistent
inputs, draws instead x_start = rng.integers(0, 256, (N,C,H,W)) / 127.5 - 1
with its first row of pixels black (-1) and its last white (+1), t as above
but t[0] = 0 (the decoder term), y, noise, and x_t = q_sample(x_start, t,
noise) in float32; its loss is computed by training_losses_oracle below,
written after improved DDPM's GaussianDiffusion.training_losses and
independent of the exported form)

and runs the forward pass in float32 and in float64 (module.double(), inputs
upcast). It writes into DIR:

    x_t.npy t.npy y.npy noise.npy      the inputs (float32 / int64)
    [x_start.npy]                      (--objective mse+vlb models)
    loss.npy prediction.npy            float32 run (loss has shape [])
    loss_f64.npy prediction_f64.npy    float64 run
    loss_autocast_bf16.npy             with --autocast-bf16: the float32
                                       module under torch.autocast("cpu",
                                       dtype=torch.bfloat16) (shape [])

Training-step mode (the oracle for a compiled training step):

usage: /usr/bin/python3 models/torch_reference.py MODEL.onnx --batch N
           [--seed S] --out DIR --train-steps K --optimizer adamw|sgd
           [--lr 1e-4] [--beta1 0.9] [--beta2 0.999] [--eps 1e-8]
           [--weight-decay 0] [--freeze NAME,NAME] [--dtype float32|float64]

writes everything above (same seed -> same inputs), then runs K optimizer
steps of DiTLoss on those same inputs every step, in --dtype (default
float64: module.double(), inputs cast), with torch.optim.AdamW(lr, (beta1,
beta2), eps, weight_decay) or torch.optim.SGD(lr, momentum=0, weight_decay)
over every parameter except the frozen ones (hc.frozen metadata, i.e.
pos_embed, plus --freeze; requires_grad=False on all of them), and writes:

    train_loss.npy               float64 [K], each step's loss before its update
    grads/<name>.npy             float64, first step's gradient, trainable only
    params_before/<name>.npy     float64, every parameter before step 1
    params_after/<name>.npy      float64, every parameter after step K
    train_meta.json              optimizer, lr, betas, eps, weight_decay, steps,
                                 trainable, frozen (+ dtype, batch, seed)

<name> is the state_dict name (e.g. blocks.0.attn.qkv.weight.npy).
"""

import argparse
import json
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cli import PROG, Parser as _Parser, fail  # noqa: E402
import lr_schedules  # noqa: E402
import transport  # noqa: E402







def load_model(path):
    """-> (onnx.ModelProto with external data loaded, config dict)."""
    import onnx
    try:
        m = onnx.load(path, load_external_data=True)
    except Exception as e:  # noqa: BLE001 - any load failure is a usage error here
        fail("%s: cannot load ONNX model: %s" % (path, str(e).splitlines()[0] if str(e) else type(e).__name__))
    meta = {p.key: p.value for p in m.metadata_props}
    if "hc.dit_config" not in meta:
        fail("%s: no hc.dit_config metadata (not written by models/export_dit.py?)" % path)
    try:
        cfg = json.loads(meta["hc.dit_config"])
    except ValueError as e:
        fail("%s: hc.dit_config is not JSON: %s" % (path, e))
    return m, cfg


def build_module(m, cfg):
    import numpy as np
    import torch
    from onnx import numpy_helper
    import dit as ditlib

    dit = ditlib.dit_from_config(cfg)
    state = {}
    for init in m.graph.initializer:
        state[init.name] = torch.from_numpy(np.array(numpy_helper.to_array(init), copy=True))
    expected = set(dit.state_dict().keys())
    missing = sorted(expected - set(state))
    if missing:
        fail("initializers missing for parameters: %s" % ", ".join(missing[:8]))
    extra = sorted(set(state) - expected)
    if extra:
        sys.stderr.write("%s: warning: ignoring initializers that are not DiT parameters: %s\n"
                         % (PROG, ", ".join(extra[:8])))
        for k in extra:
            del state[k]
    dit.load_state_dict(state, strict=True)
    objective = cfg.get("objective", "mse")
    flow = transport.Objective.from_config(cfg) if objective == "flow" else None
    module = ditlib.loss_wrapper(dit, objective, flow, cfg["in_channels"],
                                 cfg["num_classes"] > 0, with_output=True)
    module.objective = objective
    return module


def draw_inputs(cfg, batch, seed):
    inputs = _draw_model_inputs(cfg, batch, seed)
    # Conditioning (models/conditioning.py), from a stream of its own so the
    # other inputs stay what they were: values ~ N(0, 1), every other
    # sample's vector or tokens dropped to the null form.
    import numpy as np
    import conditioning
    rng = np.random.default_rng(seed + 7919)
    for spec in conditioning.parse_all(cfg.get("conds", ())):
        inputs[spec.name] = rng.standard_normal(
            spec.shape(batch, cfg["image_size"])).astype(np.float32)
        if spec.has_drop_input:
            inputs[spec.name + "_drop"] = (np.arange(batch) % 2).astype(np.float32)
    return inputs


def _draw_model_inputs(cfg, batch, seed):
    import numpy as np
    rng = np.random.default_rng(seed)
    c, s = cfg["in_channels"], cfg["image_size"]
    if cfg.get("objective", "mse") == "flow":
        # Consistent inputs: data x1 in [-1, 1], noise x0, t on the training
        # interval, x_t and the target from the path in float64.
        flow = transport.Objective.from_config(cfg)
        x1 = rng.uniform(-1, 1, (batch, c, s, s))
        x0 = rng.standard_normal((batch, c, s, s))
        t = transport.sample_time(batch, rng, flow)
        x_t, _ = flow.plan(np.float64(t), x0, x1)
        out = {"x_t": x_t.astype(np.float32), "t": t,
               "y": rng.integers(0, max(1, cfg["num_classes"]), batch).astype(np.int64),
               "target": flow.target(np.float64(t), x0, x1).astype(np.float32)}
        if cfg["num_classes"] == 0:
            del out["y"]
        return out
    if cfg.get("objective", "mse") == "mse+vlb":
        import diffusion
        pixels = rng.integers(0, 256, (batch, c, s, s))
        pixels[:, :, 0, :], pixels[:, :, -1, :] = 0, 255
        x_start = (pixels / 127.5 - 1.0).astype(np.float32)
        t = rng.integers(0, 1000, batch).astype(np.int64)
        t[0] = 0
        y = rng.integers(0, cfg["num_classes"], batch).astype(np.int64)
        noise = rng.standard_normal((batch, c, s, s), dtype=np.float32)
        x_t = diffusion.q_sample(x_start, t, noise).astype(np.float32)
        return {"x_t": x_t, "t": t, "y": y, "noise": noise, "x_start": x_start}
    x_t = rng.standard_normal((batch, c, s, s), dtype=np.float32)
    t = rng.integers(0, 1000, batch).astype(np.int64)
    y = rng.integers(0, max(1, cfg["num_classes"]), batch).astype(np.int64)
    noise = rng.standard_normal((batch, c, s, s), dtype=np.float32)
    if cfg["num_classes"] == 0:  # unconditional: no label input
        return {"x_t": x_t, "t": t, "noise": noise}
    return {"x_t": x_t, "t": t, "y": y, "noise": noise}


def training_losses_oracle(dit, x_start, t, y, noise, x_t):
    """DiT's learned-sigma objective as improved DDPM's
    GaussianDiffusion.training_losses computes it (LEARNED_RANGE variance,
    EPSILON mean, LossType.MSE, linear betas, 1000 steps), with its own
    float64 tables: mse + vb, where vb is _vb_terms_bpd on the output with
    its mean .detach()ed; KL in bits for t > 0, the discretized decoder NLL
    at t = 0. x_t is given (q_sample's float32 result) so both sides see the
    same bits. -> (loss, full model output)."""
    import numpy as np
    import torch
    T = 1000
    betas = np.linspace(1e-4, 0.02, T, dtype=np.float64)
    alphas = 1.0 - betas
    acp = np.cumprod(alphas)
    acp_prev = np.append(1.0, acp[:-1])
    post_var = betas * (1.0 - acp_prev) / (1.0 - acp)
    post_log_var_clipped = np.log(np.append(post_var[1], post_var[1:]))
    coef1 = betas * np.sqrt(acp_prev) / (1.0 - acp)
    coef2 = (1.0 - acp_prev) * np.sqrt(alphas) / (1.0 - acp)

    def extract(arr):  # index the float64 table, then cast (as upstream does)
        return torch.from_numpy(arr)[t].to(x_t.dtype).reshape(-1, 1, 1, 1)

    def mean_flat(v):
        return v.mean(dim=list(range(1, v.dim())))

    def approx_cdf(v):
        return 0.5 * (1.0 + torch.tanh(np.sqrt(2.0 / np.pi) * (v + 0.044715 * torch.pow(v, 3))))

    out = dit(x_t, t, y)
    C = x_t.shape[1]
    eps, var_values = torch.split(out, C, dim=1)
    frozen = torch.cat([eps.detach(), var_values], dim=1)
    model_output, model_var_values = torch.split(frozen, C, dim=1)
    min_log = extract(post_log_var_clipped)
    max_log = extract(np.log(betas))
    frac = (model_var_values + 1) / 2
    model_log_variance = frac * max_log + (1 - frac) * min_log
    pred_xstart = extract(np.sqrt(1.0 / acp)) * x_t - extract(np.sqrt(1.0 / acp - 1)) * model_output
    model_mean = extract(coef1) * pred_xstart + extract(coef2) * x_t
    true_mean = extract(coef1) * x_start + extract(coef2) * x_t
    true_log_variance = extract(post_log_var_clipped)
    kl = 0.5 * (-1.0 + model_log_variance - true_log_variance
                + torch.exp(true_log_variance - model_log_variance)
                + ((true_mean - model_mean) ** 2) * torch.exp(-model_log_variance))
    kl = mean_flat(kl) / np.log(2.0)
    centered = x_start - model_mean
    inv_stdv = torch.exp(-0.5 * model_log_variance)
    cdf_plus = approx_cdf(inv_stdv * (centered + 1.0 / 255.0))
    cdf_min = approx_cdf(inv_stdv * (centered - 1.0 / 255.0))
    log_cdf_plus = torch.log(cdf_plus.clamp(min=1e-12))
    log_one_minus_cdf_min = torch.log((1.0 - cdf_min).clamp(min=1e-12))
    log_probs = torch.where(
        x_start < -0.999, log_cdf_plus,
        torch.where(x_start > 0.999, log_one_minus_cdf_min,
                    torch.log((cdf_plus - cdf_min).clamp(min=1e-12))))
    decoder_nll = mean_flat(-log_probs) / np.log(2.0)
    vb = torch.where(t == 0, decoder_nll, kl)
    mse = mean_flat((noise - eps) ** 2)
    return (mse + vb).mean(), out


def forward(module, inputs, dtype):
    """(loss, prediction) of the exported objective on numpy inputs: the
    module itself for "mse", the independent oracle for "mse+vlb"."""
    import torch
    x_t = torch.from_numpy(inputs["x_t"]).to(dtype)
    t = torch.from_numpy(inputs["t"])
    y = torch.from_numpy(inputs["y"]) if "y" in inputs else None
    conds = [torch.from_numpy(inputs[n]).to(dtype) for n in module.cond_names]
    lead = [x_t, t] + ([] if y is None else [y]) + conds
    if module.objective == "flow":
        lead[1] = t.to(dtype)
        return module(*lead, torch.from_numpy(inputs["target"]).to(dtype))
    noise = torch.from_numpy(inputs["noise"]).to(dtype)
    if module.objective == "mse+vlb":
        if conds:
            raise ValueError("the VLB oracle takes no conditioning inputs")
        return training_losses_oracle(module.dit, torch.from_numpy(inputs["x_start"]).to(dtype),
                                      t, y, noise, x_t)
    return module(*lead, noise)


def run_autocast_bf16(module, inputs):
    """The float32 module's loss under PyTorch's CPU bf16 autocast (matrix
    products in bf16 with fp32 accumulation, the rest as autocast decides)."""
    import torch
    module = module.to(torch.float32)
    module.eval()
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
        loss, _ = forward(module, inputs, torch.float32)
    return loss.float().numpy()


def run(module, inputs, dtype):
    import torch
    module = module.to(dtype)
    module.eval()  # no Dropout/BatchNorm in DiT; label dropout is never on here
    with torch.no_grad():
        loss, pred = forward(module, inputs, dtype)
    return loss.numpy(), pred.numpy()


TRAIN_OPTIONS = ("optimizer", "lr", "beta1", "beta2", "eps", "weight_decay", "freeze", "dtype")


def parse_args(argv):
    ap = _Parser(description="PyTorch reference outputs for an exported DiT loss graph "
                             "(and, with --train-steps, reference optimizer steps).")
    ap.add_argument("model", help="MODEL.onnx written by models/export_dit.py")
    ap.add_argument("--batch", type=int, required=True)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", required=True, help="output folder (created if missing)")
    ap.add_argument("--autocast-bf16", action="store_true",
                    help="also the loss of the float32 module under CPU bf16 autocast")
    tr = ap.add_argument_group("training-step mode")
    tr.add_argument("--train-steps", type=int, default=None, metavar="K",
                    help="run K optimizer steps on the same inputs")
    tr.add_argument("--optimizer", choices=("adamw", "sgd"), default=None)
    tr.add_argument("--lr", type=float, default=None, help="default 1e-4")
    tr.add_argument("--beta1", type=float, default=None, help="adamw, default 0.9")
    tr.add_argument("--beta2", type=float, default=None, help="adamw, default 0.999")
    tr.add_argument("--eps", type=float, default=None, help="adamw, default 1e-8")
    tr.add_argument("--weight-decay", type=float, default=None, help="default 0")
    tr.add_argument("--freeze", default=None, metavar="NAME,NAME",
                    help="parameters to freeze besides hc.frozen (state_dict names)")
    tr.add_argument("--dtype", choices=("float32", "float64"), default=None,
                    help="precision of the training run, default float64")
    lr_schedules.add_arguments(tr)
    tr.add_argument("--clip-grad-norm", type=float, default=None, metavar="X",
                    help="torch.nn.utils.clip_grad_norm_(params, X) before each update; "
                         "grads/ then hold the clipped first-step gradients and "
                         "grad_norm.npy each step's norm before clipping")
    a = ap.parse_args(argv)
    if a.batch <= 0:
        fail("--batch must be positive, got %d" % a.batch)
    if a.seed < 0:
        fail("--seed must be non-negative, got %d" % a.seed)
    if a.train_steps is None:
        given = ["--" + o.replace("_", "-") for o in TRAIN_OPTIONS if getattr(a, o) is not None]
        if given:
            fail("%s only apply with --train-steps" % ", ".join(given))
        return a
    if a.train_steps <= 0:
        fail("--train-steps must be positive, got %d" % a.train_steps)
    if a.optimizer is None:
        fail("--train-steps needs --optimizer adamw|sgd")
    if a.optimizer == "sgd":
        given = ["--" + o for o in ("beta1", "beta2", "eps") if getattr(a, o) is not None]
        if given:
            fail("%s only apply to --optimizer adamw" % ", ".join(given))
    defaults = dict(lr=1e-4, beta1=0.9, beta2=0.999, eps=1e-8, weight_decay=0.0,
                    dtype="float64")
    for k, v in defaults.items():
        if getattr(a, k) is None:
            setattr(a, k, v)
    for k in ("lr", "beta1", "beta2", "eps", "weight_decay"):
        if not math.isfinite(getattr(a, k)):
            fail("--%s must be finite, got %r" % (k.replace("_", "-"), getattr(a, k)))
    if a.lr < 0:
        fail("--lr must be non-negative, got %g" % a.lr)
    if a.weight_decay < 0:
        fail("--weight-decay must be non-negative, got %g" % a.weight_decay)
    if a.optimizer == "adamw":
        for k in ("beta1", "beta2"):
            if not 0.0 <= getattr(a, k) < 1.0:
                fail("--%s must be in [0, 1), got %g" % (k, getattr(a, k)))
        if a.eps < 0:
            fail("--eps must be non-negative, got %g" % a.eps)
    a.freeze = [n for n in (a.freeze or "").split(",") if n.strip()]
    a.freeze = [n.strip() for n in a.freeze]
    return a


def frozen_from_metadata(m):
    meta = {p.key: p.value for p in m.metadata_props}
    return [n for n in meta.get("hc.frozen", "").split(",") if n]


def train(module, inputs, a, meta_frozen):
    """K optimizer steps of DiTLoss on the same inputs. Returns a dict of
    float64 numpy results plus the trainable/frozen name lists."""
    import numpy as np
    import torch

    dtype = torch.float64 if a.dtype == "float64" else torch.float32
    module = module.to(dtype)
    module.train()  # no Dropout/BatchNorm in DiT and label dropout is never on:
    #                 identical to eval(), stated for the reader
    params = dict(module.dit.named_parameters())
    bad = [n for n in a.freeze if n not in params]
    if bad:
        fail("--freeze: unknown parameter%s %s (state_dict names, e.g. %s)"
             % ("s" if len(bad) > 1 else "", ", ".join(bad), "blocks.0.attn.qkv.weight"))
    bad = [n for n in meta_frozen if n not in params]
    if bad:
        fail("hc.frozen metadata names unknown parameters: %s" % ", ".join(bad))
    frozen_set = set(meta_frozen) | set(a.freeze)
    for name, p in params.items():
        p.requires_grad_(name not in frozen_set)
    trainable = [n for n in params if n not in frozen_set]
    frozen = [n for n in params if n in frozen_set]
    if not trainable:
        fail("every parameter is frozen: nothing to train")
    tparams = [params[n] for n in trainable]
    if a.optimizer == "adamw":
        opt = torch.optim.AdamW(tparams, lr=a.lr, betas=(a.beta1, a.beta2), eps=a.eps,
                                weight_decay=a.weight_decay)
    else:
        opt = torch.optim.SGD(tparams, lr=a.lr, momentum=0, dampening=0,
                              weight_decay=a.weight_decay, nesterov=False)

    sched = lr_schedules.scheduler(opt, a, a.lr, a.train_steps)

    def snapshot():
        return {n: p.detach().to(torch.float64).numpy().copy() for n, p in params.items()}

    before = snapshot()
    losses, grads, norms = [], None, []
    for step in range(a.train_steps):
        opt.zero_grad(set_to_none=True)
        loss, _ = forward(module, inputs, dtype)
        loss.backward()
        losses.append(float(loss.detach().to(torch.float64)))
        if a.clip_grad_norm is not None:
            norms.append(float(torch.nn.utils.clip_grad_norm_(tparams, a.clip_grad_norm)))
        if step == 0:
            grads = {}
            for n in trainable:
                g = params[n].grad
                grads[n] = (np.zeros(params[n].shape) if g is None
                            else g.detach().to(torch.float64).numpy().copy())
        opt.step()
        if sched is not None:
            sched.step()
    after = snapshot()
    return dict(losses=np.asarray(losses, dtype=np.float64), grads=grads, before=before,
                grad_norms=np.asarray(norms, dtype=np.float64),
                after=after, trainable=trainable, frozen=frozen, objective=module.objective)


def _fresh_dir(path):
    """Create path; drop stale .npy files from an earlier run (another
    --freeze set would otherwise leave grads of now-frozen parameters)."""
    os.makedirs(path, exist_ok=True)
    for f in os.listdir(path):
        if f.endswith(".npy"):
            os.remove(os.path.join(path, f))


def write_train(out, res, a):
    import numpy as np
    np.save(os.path.join(out, "train_loss.npy"), res["losses"])
    if len(res["grad_norms"]):
        np.save(os.path.join(out, "grad_norm.npy"), res["grad_norms"])
    for sub, key in (("grads", "grads"), ("params_before", "before"),
                     ("params_after", "after")):
        d = os.path.join(out, sub)
        _fresh_dir(d)
        for n, v in res[key].items():
            np.save(os.path.join(d, n + ".npy"), np.asarray(v, dtype=np.float64))
    adam = a.optimizer == "adamw"
    meta = {
        "optimizer": a.optimizer,
        "lr": a.lr,
        "betas": [a.beta1, a.beta2] if adam else None,
        "eps": a.eps if adam else None,
        "weight_decay": a.weight_decay,
        "momentum": None if adam else 0.0,
        "steps": a.train_steps,
        "trainable": res["trainable"],
        "frozen": res["frozen"],
        "dtype": a.dtype,
        "batch": a.batch,
        "seed": a.seed,
        "loss": {"mse+vlb": "mse + vb (training_losses_oracle)",
                 "flow": "transport.Objective.loss (dit_config.flow)"}.get(
                     res["objective"], "mean((prediction[:, :in_channels] - noise)^2)")
                + ", same inputs every step",
    }
    with open(os.path.join(out, "train_meta.json"), "w") as f:
        json.dump(meta, f, indent=1)
        f.write("\n")


def main(argv=None):
    a = parse_args(sys.argv[1:] if argv is None else argv)
    if not os.path.isfile(a.model):
        fail("%s: no such file" % a.model)

    import numpy as np
    import torch
    torch.set_num_threads(max(1, torch.get_num_threads()))

    m, cfg = load_model(a.model)
    x_in = [i for i in m.graph.input if i.name == "x_t"]
    if x_in:
        d0 = x_in[0].type.tensor_type.shape.dim[0]
        if d0.HasField("dim_value") and d0.dim_value != a.batch:
            sys.stderr.write("%s: warning: %s has a static batch of %d, reference runs batch %d\n"
                             % (PROG, a.model, d0.dim_value, a.batch))
    module = build_module(m, cfg)
    inputs = draw_inputs(cfg, a.batch, a.seed)
    loss32, pred32 = run(module, inputs, torch.float32)
    loss64, pred64 = run(module, inputs, torch.float64)

    os.makedirs(a.out, exist_ok=True)
    for k, v in inputs.items():
        np.save(os.path.join(a.out, k + ".npy"), v)
    np.save(os.path.join(a.out, "loss.npy"), np.asarray(loss32, dtype=np.float32).reshape(()))
    np.save(os.path.join(a.out, "prediction.npy"), pred32.astype(np.float32))
    np.save(os.path.join(a.out, "loss_f64.npy"), np.asarray(loss64, dtype=np.float64).reshape(()))
    np.save(os.path.join(a.out, "prediction_f64.npy"), pred64.astype(np.float64))
    if a.autocast_bf16:
        lbf = run_autocast_bf16(build_module(m, cfg), inputs)
        np.save(os.path.join(a.out, "loss_autocast_bf16.npy"),
                np.asarray(lbf, dtype=np.float32).reshape(()))
        print("%s: loss under CPU bf16 autocast %.9g" % (os.path.basename(a.model), float(lbf)))
    l32, l64 = float(loss32), float(loss64)
    rel = abs(l32 - l64) / max(abs(l64), 1e-30)
    pdiff = float(np.max(np.abs(pred32.astype(np.float64) - pred64)))
    print("%s: batch %d seed %d: loss f32 %.9g, f64 %.17g (rel diff %.2e), "
          "prediction max |f32-f64| %.2e -> %s"
          % (os.path.basename(a.model), a.batch, a.seed, l32, l64, rel, pdiff, a.out))
    if a.train_steps is None:
        return 0

    # A fresh module: the runs above converted the first one in place.
    res = train(build_module(m, cfg), inputs, a, frozen_from_metadata(m))
    write_train(a.out, res, a)
    gnorm = math.sqrt(sum(float(np.sum(g * g)) for g in res["grads"].values()))
    print("%s: %d %s step%s (%s, lr %g, wd %g), %d trainable / %d frozen; "
          "loss %.17g -> %.17g, first-step grad norm %.6g"
          % (os.path.basename(a.model), a.train_steps, a.optimizer,
             "" if a.train_steps == 1 else "s", a.dtype, a.lr, a.weight_decay,
             len(res["trainable"]), len(res["frozen"]), res["losses"][0], res["losses"][-1],
             gnorm))
    return 0


if __name__ == "__main__":
    sys.exit(main())
