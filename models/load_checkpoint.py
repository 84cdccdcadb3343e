#!/usr/bin/env -S /usr/bin/python3
"""Loads an hc-run checkpoint (CKPT_DIR/ckpt-<step>.safetensors) into the
PyTorch DiT of dit.py with load_state_dict(strict=True) and runs a forward
pass.

usage: load_checkpoint.py CKPT|CKPT_DIR [--weights ema|model] [--inputs DIR]
                               [--batch N] [--seed S] [--save-pt OUT.pt]

A folder stands for its newest checkpoint (ckpt-<step> names sort by step).
The architecture comes from the checkpoint itself (the dit_config of its
hc.description metadata). --weights picks the parameters: "model" (the
trained ones) or "ema" (DiT samples with the EMA; the default when the
checkpoint has one). The forward pass runs on --inputs DIR (x_t.npy, t.npy,
y.npy, noise.npy, as torch_reference.py writes them: prints the DiT training
loss) or on a random batch (prints the output's shape and statistics).
--save-pt writes a checkpoint as DiT's train.py does, {"model", "ema",
"opt", "args"} (opt: a torch AdamW state_dict, when hc trained with AdamW),
for DiT's sample.py and for resuming in PyTorch.
Bad input is one line on stderr and exit 2.
"""
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cli import Parser, fail  # noqa: E402


def read_checkpoint(path):
    from safetensors_np import load
    try:
        tensors, meta = load(path, with_metadata=True)
    except (OSError, ValueError, KeyError, TypeError) as e:
        fail("%s: not a readable safetensors file: %s" % (path, e))
    if "hc.description" not in meta:
        fail("%s: not an hc-run checkpoint (no hc.description metadata)" % path)
    desc = json.loads(meta["hc.description"])
    cfg = desc.get("dit_config")
    if isinstance(cfg, str):
        cfg = json.loads(cfg)
    if not isinstance(cfg, dict):
        fail("%s: its model description has no dit_config" % path)
    return tensors, meta, desc, cfg


def state_dict(tensors, desc, prefix):
    """The parameters the model description lists, from tensors PREFIX+NAME;
    one missing from the file is left out (load_state_dict names it)."""
    import torch
    names = [p["name"] for p in desc.get("parameters", [])]
    return {n: torch.from_numpy(tensors[prefix + n]) for n in names if prefix + n in tensors}


def load_strict(dit, sd, path, what):
    try:
        dit.load_state_dict(sd, strict=True)
    except RuntimeError as e:
        fail("%s: %s do not fit the DiT of its dit_config: %s"
             % (path, what, " ".join(str(e).split())[:400]))


def adamw_state(dit, tensors, desc):
    """hc's AdamW state as a torch.optim.AdamW state_dict, checked by
    load_state_dict (parameters without a gradient, e.g. pos_embed, have no
    state, as in PyTorch)."""
    import torch
    o = desc.get("optimizer") or {}
    opt = torch.optim.AdamW([p for p in dit.parameters()], lr=o.get("lr", 1e-4),
                            betas=(o.get("beta1", 0.9), o.get("beta2", 0.999)),
                            eps=o.get("eps", 1e-8), weight_decay=o.get("weight_decay", 0.0))
    sd = opt.state_dict()
    step = float(tensors["adamw.step"])
    for i, (name, p) in enumerate(dit.named_parameters()):
        if "adamw.m:" + name in tensors:
            sd["state"][i] = {"step": torch.tensor(step),
                              "exp_avg": torch.from_numpy(tensors["adamw.m:" + name]),
                              "exp_avg_sq": torch.from_numpy(tensors["adamw.v:" + name])}
    opt.load_state_dict(sd)
    return opt.state_dict()


def forward(dit, cfg, a):
    import torch
    from dit import DiTLoss
    if a.inputs:
        try:
            x, t, y, noise = (torch.from_numpy(np.load(os.path.join(a.inputs, n + ".npy")))
                              for n in ("x_t", "t", "y", "noise"))
        except OSError as e:
            fail("--inputs %s: %s" % (a.inputs, e))
        with torch.no_grad():
            loss = DiTLoss(dit, cfg["in_channels"])(x.float(), t.long(), y.long(), noise.float())
        print("loss %.9g" % float(loss))
        return
    g = torch.Generator().manual_seed(a.seed)
    s = cfg["image_size"]
    x = torch.randn(a.batch, cfg["in_channels"], s, s, generator=g)
    t = torch.randint(0, 1000, (a.batch,), generator=g)
    y = torch.randint(0, cfg["num_classes"], (a.batch,), generator=g)
    with torch.no_grad():
        out = dit(x, t, y)
    if not torch.isfinite(out).all():
        fail("the forward pass gave non-finite values", code=1)
    print("output %s mean %.6g std %.6g" % (list(out.shape), float(out.mean()), float(out.std())))


def main():
    ap = Parser(description=__doc__.split("\n\n")[0])
    ap.add_argument("checkpoint")
    ap.add_argument("--weights", choices=["ema", "model"])
    ap.add_argument("--inputs", help="folder of x_t.npy t.npy y.npy noise.npy")
    ap.add_argument("--batch", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--save-pt", help="write a DiT-style torch checkpoint")
    a = ap.parse_args()
    if a.batch < 1:
        fail("--batch must be at least 1")
    if os.path.isdir(a.checkpoint):  # a --ckpt-dir: its newest checkpoint, by step
        found = sorted(f for f in os.listdir(a.checkpoint)
                       if f.startswith("ckpt-") and f.endswith(".safetensors"))
        if not found:
            fail("%s: a folder without checkpoints (ckpt-<step>.safetensors)" % a.checkpoint)
        a.checkpoint = os.path.join(a.checkpoint, found[-1])
    tensors, meta, desc, cfg = read_checkpoint(a.checkpoint)
    import torch
    from dit import dit_from_config
    torch.manual_seed(0)
    has_ema = any(n.startswith("ema:") for n in tensors)
    weights = a.weights or ("ema" if has_ema else "model")
    if weights == "ema" and not has_ema:
        fail("%s: --weights ema, but the run kept no EMA (train with --ema)" % a.checkpoint)
    try:
        dit = dit_from_config(cfg).eval()
    except (KeyError, TypeError, ValueError) as e:
        fail("%s: its dit_config %s does not describe a DiT of dit.py (%s: %s)"
             % (a.checkpoint, json.dumps(cfg), type(e).__name__, e))
    model_sd = state_dict(tensors, desc, "")
    load_strict(dit, model_sd, a.checkpoint, "its parameters")
    ema_sd = state_dict(tensors, desc, "ema:") if has_ema else None
    if ema_sd is not None:
        load_strict(dit, ema_sd, a.checkpoint, "its EMA parameters")
    if a.save_pt:
        out = {"model": model_sd, "ema": ema_sd if ema_sd is not None else model_sd,
               "args": dict(cfg, hc_step=int(meta.get("hc.step", 0)))}
        if "adamw.step" in tensors:
            load_strict(dit, model_sd, a.checkpoint, "its parameters")
            out["opt"] = adamw_state(dit, tensors, desc)
        torch.save(out, a.save_pt)
    load_strict(dit, ema_sd if weights == "ema" else model_sd, a.checkpoint, "its %s weights" % weights)
    print("loaded %s (step %s, %s weights, %d tensors) into DiT %s strictly"
          % (a.checkpoint, meta.get("hc.step", "?"), weights, len(model_sd), cfg.get("model", "")))
    forward(dit, cfg, a)


if __name__ == "__main__":
    main()
