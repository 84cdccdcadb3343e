#!/usr/bin/env python3
"""A live PyTorch 2.x export of DiT's training loss, with PyTorch's own
results beside it, in the layout of ../shared/exports-torch2 (its README):
NAME.onnx, NAME.inputs/{x_t,t,y,noise[,x_start][,conditionings]}.npy and
NAME.ref.npz
(loss, init/, grad/, adamw3/, sgd3/ of the trainable parameters).

Run it with the anchors environment's python (tools/install-anchors.sh);
test/e2e/torch2_exports.py then compiles and checks the files as it does the
frozen ones.

usage: PY models/export_torch2.py --out DIR --name NAME
           --exporter dynamo|torchscript [--opset 18] [--optimize]
           [--attention unbind|sdpa] [--objective mse|mse+vlb] [--seed 0]
           [--cond vector:NAME:D|concat:NAME:C|tokens:NAME:L:D ...]

The module is the frozen exports' one: models/dit.py's DiT, input 4x8x8,
patch 2, hidden 64, depth 2, 2 heads, 10 classes, learned sigma, pos_embed
frozen, weights ~ N(0, 0.05) for matrices and N(0, 0.02) for vectors,
wrapped so that parameters are named model.<state_dict name>. The references
are PyTorch's own float32 steps of the same module: the first step's loss
and gradients, and the parameters after 3 steps on the same batch with
AdamW(lr=1e-4, betas=(0.9, 0.999), eps=1e-8, weight_decay=0) and with
SGD(lr=0.1).

--objective mse+vlb exports the learned-sigma objective. Its stop-gradient
goes through the dynamo exporter as the custom op hc::stop_gradient with an
onnxscript translation to hc's node hc::StopGradient (domain "hc", version
1); the TorchScript exporter takes dit.StopGradient's symbolic instead.
"""
import argparse
import copy
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import conditioning  # noqa: E402
import dit as ditlib  # noqa: E402

BATCH = 2
CONFIG = dict(image_size=8, patch_size=2, in_channels=4, hidden_size=64, depth=2,
              num_heads=2, num_classes=10, learn_sigma=True, class_dropout_prob=0.0)
HC_DOMAIN = ("hc", 1)


_STOP_GRADIENT = None


def stop_gradient_op():
    """hc::stop_gradient, `.detach()` as an op the dynamo exporter keeps (it
    drops detach). Registered on first use: torch.library.custom_op needs
    torch >= 2.4, and this module's references() serve torch 1.13 too."""
    global _STOP_GRADIENT
    if _STOP_GRADIENT is None:
        @torch.library.custom_op("hc::stop_gradient", mutates_args=())
        def stop_gradient(x: torch.Tensor) -> torch.Tensor:
            return x.clone()

        @stop_gradient.register_fake
        def _(x):
            return torch.empty_like(x)

        stop_gradient.register_autograd(lambda ctx, grad: None)
        _STOP_GRADIENT = stop_gradient
    return _STOP_GRADIENT


def stop_gradient_fn(x):
    # A plain function (the op's handle is not deep-copyable with the module).
    stop_gradient_op()
    return torch.ops.hc.stop_gradient(x)


def stop_gradient_translation():
    """The dynamo exporter's translation of hc::stop_gradient: one node of
    hc's own domain, which hc-compile imports as hc.stop_gradient."""
    import onnx
    import onnxscript
    # onnxscript builds nodes from onnx's schema registry: register hc's
    # (docs/input-format.md: one input, one output of the same type).
    S = onnx.defs.OpSchema
    if not onnx.defs.has("StopGradient", HC_DOMAIN[0]):
        onnx.defs.register_schema(S(
            "StopGradient", HC_DOMAIN[0], HC_DOMAIN[1],
            inputs=[S.FormalParameter("input", "T")],
            outputs=[S.FormalParameter("output", "T")],
            type_constraints=[("T", ["tensor(float)", "tensor(double)"], "")]))
    hc = onnxscript.values.Opset(*HC_DOMAIN)
    stop_gradient_op()

    def translate(x):
        return hc.StopGradient(x)
    return {torch.ops.hc.stop_gradient.default: translate}


class Wrapped(torch.nn.Module):
    """The frozen exports' naming: the DiT is the attribute `model`."""

    def __init__(self, dit, objective, stop):
        super().__init__()
        self.model = dit
        self.objective, self.stop = objective, stop
        self.cond_names = [n for c in dit.conds for n in c.input_names()]

    def forward(self, x_t, t, y, noise, *rest):
        # After noise: x_start (mse+vlb), then the conditionings in order.
        x_start = rest[0] if self.objective == "mse+vlb" else None
        conds = dict(zip(self.cond_names, rest[1 if x_start is not None else 0:]))
        return ditlib.objective_loss(self.model(x_t, t, y, conds=conds), self.model.in_channels,
                                     self.objective, self.stop, x_t, t, noise, x_start)


def make_module(attention, objective, seed, dynamo, conds=()):
    torch.manual_seed(seed)
    dit = ditlib.DiT(attention=attention, seed=seed, conds=conds, **CONFIG)
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in dit.parameters():
            if p.requires_grad:
                p.copy_(torch.randn(p.shape, generator=gen) * (0.05 if p.dim() >= 2 else 0.02))
    if dynamo:
        stop_gradient_op()  # registered before any tracing
    stop = stop_gradient_fn if dynamo else ditlib.StopGradient.apply
    return Wrapped(dit, objective, stop)


def inputs(objective, seed, conds=()):
    g = torch.Generator().manual_seed(seed + 1)
    c, s = CONFIG["in_channels"], CONFIG["image_size"]
    named = {
        "x_t": torch.randn(BATCH, c, s, s, generator=g),
        # t = 0 for one sample: the bound's decoder term is exercised too.
        "t": torch.tensor([0, 617], dtype=torch.int64),
        "y": torch.randint(0, CONFIG["num_classes"], (BATCH,), generator=g),
        "noise": torch.randn(BATCH, c, s, s, generator=g),
    }
    if objective == "mse+vlb":
        named["x_start"] = torch.rand(BATCH, c, s, s, generator=g) * 2 - 1
    for spec in conditioning.parse_all(conds):
        named[spec.name] = torch.randn(spec.shape(BATCH, s), generator=g)
        if spec.has_drop_input:  # one sample conditioned, one null
            named[spec.name + "_drop"] = torch.tensor([0.0, 1.0])
    return named


def export(module, named, path, a):
    args = tuple(named.values())
    names = list(named)
    if a.exporter == "dynamo":
        program = torch.onnx.export(
            module, args, dynamo=True, optimize=a.optimize, opset_version=a.opset,
            input_names=names, output_names=["loss"],
            custom_translation_table=stop_gradient_translation())
        program.save(path)
    else:
        if a.opset == 17:
            import export_dit
            export_dit.register_layer_norm_opset17()
        torch.onnx.export(
            module, args, path, dynamo=False, opset_version=a.opset,
            training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False,
            input_names=names, output_names=["loss"], custom_opsets={HC_DOMAIN[0]: HC_DOMAIN[1]})


def references(module, named):
    """PyTorch's own float32 step, as the frozen exports hold it: loss,
    gradients and 3-step parameters of the trainable set."""
    ref = {}
    base = copy.deepcopy(module)
    args = list(named.values())
    trainable = [(n, p) for n, p in base.named_parameters() if p.requires_grad]
    for n, p in trainable:
        ref["init/" + n] = p.detach().float().numpy()
    loss = base(*args)
    loss.backward()
    ref["loss"] = np.float64(loss.item())
    for n, p in trainable:
        ref["grad/" + n] = p.grad.float().numpy()
    for key, make in (("adamw3", lambda ps: torch.optim.AdamW(
            ps, lr=1e-4, betas=(0.9, 0.999), eps=1e-8, weight_decay=0)),
            ("sgd3", lambda ps: torch.optim.SGD(ps, lr=0.1))):
        m = copy.deepcopy(module)
        params = [p for n, p in m.named_parameters() if p.requires_grad]
        opt = make(params)
        for _ in range(3):
            opt.zero_grad()
            m(*args).backward()
            opt.step()
        for n, p in m.named_parameters():
            if p.requires_grad:
                ref[key + "/" + n] = p.detach().float().numpy()
    return ref


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--name", required=True)
    ap.add_argument("--exporter", required=True, choices=("dynamo", "torchscript"))
    ap.add_argument("--opset", type=int, default=18)
    ap.add_argument("--optimize", action="store_true",
                    help="the dynamo exporter's default optimize=True")
    ap.add_argument("--attention", default="sdpa", choices=("unbind", "sdpa"))
    ap.add_argument("--objective", default="mse", choices=("mse", "mse+vlb"))
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--cond", action="append", default=[], metavar="SPEC",
                    help="a conditioning (models/conditioning.py), e.g. tokens:txt:7:12")
    a = ap.parse_args()
    if a.optimize and a.exporter != "dynamo":
        ap.error("--optimize is the dynamo exporter's option")
    if not os.path.isdir(a.out):
        ap.error("--out %s is not a folder" % a.out)
    try:
        conditioning.parse_all(a.cond)
    except ValueError as e:
        ap.error(str(e))
    module = make_module(a.attention, a.objective, a.seed, a.exporter == "dynamo", a.cond)
    named = inputs(a.objective, a.seed, a.cond)
    base = os.path.join(a.out, a.name)
    export(module, named, base + ".onnx", a)
    os.makedirs(base + ".inputs", exist_ok=True)
    for k, v in named.items():
        np.save(os.path.join(base + ".inputs", k + ".npy"), v.numpy())
    np.savez(base + ".ref.npz", **references(module, named))
    print("%s: torch %s, %s exporter, opset %d%s, %s attention, %s%s"
          % (a.name, torch.__version__, a.exporter, a.opset,
             ", optimize=True" if a.optimize else "", a.attention, a.objective,
             "".join(", --cond " + c for c in a.cond)))


if __name__ == "__main__":
    main()
