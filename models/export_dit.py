#!/usr/bin/env -S /usr/bin/python3
"""Export a DiT training objective (loss = mse(DiT(x_t, t, y), noise)
[+ the variational bound]) to ONNX.

usage: /usr/bin/python3 models/export_dit.py --model DiT-S/2|tiny|...
           [--image-size 32] [--in-channels 4] [--num-classes 1000]
           [--learn-sigma|--no-learn-sigma] [--opset 13|17] [--batch 2]
           [--dynamic-batch] [--init default|random] [--seed 0]
           [--with-output] [--class-dropout-prob 0.1] [--external-data|--no-external-data]
           [--attention index|unbind|sdpa] [--objective mse|mse+vlb|flow]
           [--cond vector:NAME:D|concat:NAME:C|tokens:NAME:L:D ...] [--cond-dropout P]
           [--path linear|gvp|vp] [--prediction velocity|noise|score]
           [--loss-weight none|velocity|likelihood] [--train-eps E] [--sample-eps E]
           [--print-ops] [--quiet]
           [--training-info [--lr R] [--beta1 A] [--beta2 B] [--eps E]
            [--weight-decay C] [--weight-decay-post P]]
           -o OUT.onnx

Graph inputs: x_t [B,C,H,W] f32, t [B] i64, y [B] i64, noise [B,C,H,W] f32,
and with --objective mse+vlb x_start [B,C,H,W] f32 (the clean sample).
--objective flow (SiT's interpolants, models/transport.py): x_t, t [B] f32 in
[0, 1] (1 = data), y, target [B,C,H,W] f32 (u_t for velocity, else the noise).
Outputs: loss (scalar f32) [, prediction [B,out_channels,H,W] f32].
Parameters are initializers under their state_dict names; metadata_props hold
hc.frozen (requires_grad=False parameters) and hc.dit_config (JSON).
--training-info adds ONNX's own training step (onnx_training.py): Gradient,
ai.onnx.preview.training Adam with these hyper-parameters, T <- T + 1.
"""

import collections
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cli import Parser as _Parser, fail  # noqa: E402

import torch  # noqa: E402

import dit as ditlib  # noqa: E402

import conditioning  # noqa: E402
import transport  # noqa: E402
from export_training import (UsageError, export_training, input_names,  # noqa: E402,F401
                             register_layer_norm_opset17)


def parse_args(argv):
    ap = _Parser(description="Export a DiT training loss to ONNX.")
    ap.add_argument("--model", required=True,
                    help="one of: " + ", ".join(ditlib.MODEL_CONFIGS))
    ap.add_argument("--image-size", type=int, default=32)
    ap.add_argument("--in-channels", type=int, default=4)
    ap.add_argument("--num-classes", type=int, default=1000)
    ap.add_argument("--learn-sigma", dest="learn_sigma", action="store_true", default=None,
                    help="(default, except with --objective flow)")
    ap.add_argument("--no-learn-sigma", dest="learn_sigma", action="store_false")
    ap.add_argument("--opset", type=int, default=13)
    ap.add_argument("--batch", type=int, default=2)
    ap.add_argument("--dynamic-batch", action="store_true")
    ap.add_argument("--init", default="default")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--with-output", action="store_true")
    ap.add_argument("--class-dropout-prob", type=float, default=0.1)
    ap.add_argument("--attention", default="index", choices=ditlib.ATTENTION_FORMS,
                    help="how attention takes q, k, v: qkv[0..2] (index, upstream DiT), "
                         "qkv.unbind(0) (unbind, timm) or scaled_dot_product_attention "
                         "(sdpa, torch 2's op; torch 1.13 gets its exporter decomposition)")
    ap.add_argument("--objective", default="mse", choices=ditlib.OBJECTIVES,
                    help="mse: eps MSE only; mse+vlb: DiT's full learned-sigma objective "
                         "(MSE + variational bound with the mean stopped); flow: SiT's "
                         "flow matching (--path, --prediction, --loss-weight)")
    ap.add_argument("--cond", action="append", default=[], metavar="SPEC",
                    help="conditioning beyond the label (models/conditioning.py): "
                         "vector:NAME:D, concat:NAME:C or tokens:NAME:L:D; repeatable")
    ap.add_argument("--cond-dropout", type=float, default=0.1,
                    help="probability of the null form of each conditioning while training "
                         "(recorded for hc-run)")
    ap.add_argument("--path", default="linear", choices=transport.PATHS,
                    help="flow: the interpolant (linear = rectified flow)")
    ap.add_argument("--prediction", default="velocity", choices=transport.PREDICTIONS,
                    help="flow: what the model predicts")
    ap.add_argument("--loss-weight", default="none", choices=transport.LOSS_WEIGHTS,
                    help="flow: SiT's weight of the noise and score losses")
    ap.add_argument("--train-eps", type=float, default=None,
                    help="flow: SiT's train_eps (default: SiT's for the path and prediction)")
    ap.add_argument("--sample-eps", type=float, default=None,
                    help="flow: SiT's sample_eps (default: SiT's for the path and prediction)")
    ap.add_argument("-o", "--output", required=True)
    ap.add_argument("--external-data", dest="external_data", action="store_true", default=None,
                    help="weights in OUT.onnx.data (default: only past 1 GiB of parameters)")
    ap.add_argument("--no-external-data", dest="external_data", action="store_false")
    ap.add_argument("--training-info", action="store_true",
                    help="add ONNX's own training step (ModelProto.training_info): "
                         "Gradient of the loss w.r.t. the trainable parameters, "
                         "ai.onnx.preview.training Adam, T <- T + 1, all bound back")
    ap.add_argument("--lr", type=float, default=1e-4, help="Adam's R (--training-info)")
    ap.add_argument("--beta1", type=float, default=0.9, help="Adam's alpha")
    ap.add_argument("--beta2", type=float, default=0.999, help="Adam's beta")
    ap.add_argument("--eps", type=float, default=1e-6, help="Adam's epsilon")
    ap.add_argument("--weight-decay", type=float, default=0.0,
                    help="Adam's norm_coefficient (coupled L2)")
    ap.add_argument("--weight-decay-post", type=float, default=0.0,
                    help="Adam's norm_coefficient_post")
    ap.add_argument("--quiet", action="store_true")
    ap.add_argument("--print-ops", action="store_true",
                    help="print the op-type histogram of the exported graph")
    a = ap.parse_args(argv)
    if a.model not in ditlib.MODEL_CONFIGS:
        ap.error("unknown --model %r (expected one of: %s)"
                 % (a.model, ", ".join(ditlib.MODEL_CONFIGS)))
    if a.opset not in (13, 17):
        ap.error("--opset must be 13 or 17, got %d" % a.opset)
    if a.init not in ("default", "random"):
        ap.error("--init must be 'default' or 'random', got %r" % a.init)
    patch = ditlib.MODEL_CONFIGS[a.model][3]
    if a.image_size <= 0 or a.image_size % patch:
        ap.error("--image-size %d must be a positive multiple of the patch size %d"
                 % (a.image_size, patch))
    if a.in_channels <= 0:
        ap.error("--in-channels must be positive, got %d" % a.in_channels)
    if a.num_classes < 0:
        ap.error("--num-classes must be 0 (unconditional) or positive, got %d" % a.num_classes)
    if a.num_classes == 0:
        a.class_dropout_prob = 0.0  # no labels, nothing to drop
    if a.batch <= 0:
        ap.error("--batch must be positive, got %d" % a.batch)
    flow_flags = [f for f, v, d in (("--path", a.path, "linear"),
                                    ("--prediction", a.prediction, "velocity"),
                                    ("--loss-weight", a.loss_weight, "none"),
                                    ("--train-eps", a.train_eps, None),
                                    ("--sample-eps", a.sample_eps, None)) if v != d]
    a.flow = None
    if a.objective == "flow":
        try:
            a.flow = transport.Objective(a.path, a.prediction, a.loss_weight, a.train_eps,
                                         a.sample_eps)
        except ValueError as e:
            ap.error("--objective flow: %s" % e)
        if a.learn_sigma is None:
            a.learn_sigma = False  # a flow model has no variance to learn
    elif flow_flags:
        ap.error("%s applies to --objective flow only" % flow_flags[0])
    if a.learn_sigma is None:
        a.learn_sigma = True
    try:
        a.cond = [str(c) for c in conditioning.parse_all(a.cond)]
    except ValueError as e:
        ap.error(str(e))
    if not 0.0 <= a.cond_dropout < 1.0:
        ap.error("--cond-dropout must be in [0, 1), got %g" % a.cond_dropout)
    if a.objective == "mse+vlb" and not a.learn_sigma:
        ap.error("--objective %s trains the variance: it needs --learn-sigma" % a.objective)
    if not 0.0 <= a.class_dropout_prob < 1.0:
        ap.error("--class-dropout-prob must be in [0, 1), got %g" % a.class_dropout_prob)
    if not (a.lr >= 0 and 0 <= a.beta1 < 1 and 0 <= a.beta2 <= 1 and a.eps >= 0
            and a.weight_decay >= 0 and 0 <= a.weight_decay_post < 1):
        ap.error("Adam needs --lr >= 0, 0 <= --beta1 < 1, 0 <= --beta2 <= 1, --eps >= 0, "
                 "--weight-decay >= 0, 0 <= --weight-decay-post < 1")
    return a


def example_inputs(model_cfg, batch, seed, objective="mse"):
    g = torch.Generator()
    g.manual_seed(seed)
    c, s = model_cfg["in_channels"], model_cfg["image_size"]
    x_t = torch.randn(batch, c, s, s, generator=g)
    if objective == "flow":
        t = torch.rand(batch, generator=g) * 0.8 + 0.1
    else:
        t = torch.randint(0, 1000, (batch,), generator=g, dtype=torch.int64)
    y = torch.randint(0, max(1, model_cfg["num_classes"]), (batch,), generator=g,
                      dtype=torch.int64)
    noise = torch.randn(batch, c, s, s, generator=g)
    lead = (x_t, t, y) if model_cfg["num_classes"] > 0 else (x_t, t)
    for spec in conditioning.parse_all(model_cfg.get("conds", ())):
        lead += (torch.randn(spec.shape(batch, s), generator=g),)
        if spec.has_drop_input:
            lead += ((torch.arange(batch) % 2).float(),)
    if objective in ("mse", "flow"):  # flow: the target, shaped like the noise
        return lead + (noise,)
    return lead + (noise, torch.rand(batch, c, s, s, generator=g) * 2 - 1)


def export(model, image_size=32, in_channels=4, num_classes=1000, learn_sigma=True,
           opset=13, batch=2, dynamic_batch=False, init="default", seed=0,
           with_output=False, class_dropout_prob=0.1, output="out.onnx", external_data=None,
           training=None, attention="index", objective="mse", flow=None, conds=(),
           cond_dropout=0.1):
    """Export and check; returns (onnx.ModelProto, seconds). `training`: Adam
    hyper-parameters (onnx_training.add_training_info's keywords) to add the
    model's own training step, or None."""

    torch.manual_seed(seed)
    dit = ditlib.make_dit(model, image_size=image_size, in_channels=in_channels,
                          num_classes=num_classes, learn_sigma=learn_sigma, init=init,
                          seed=seed, class_dropout_prob=class_dropout_prob,
                          attention=attention, conds=conds)
    if conds:
        dit.config["cond_dropout_prob"] = float(cond_dropout)
    return export_module(dit, output, opset=opset, batch=batch, dynamic_batch=dynamic_batch,
                         init=init, seed=seed, with_output=with_output,
                         external_data=external_data, training=training, objective=objective,
                         flow=flow)


def export_module(dit, output, opset=13, batch=2, dynamic_batch=False, init="default", seed=0,
                  with_output=False, external_data=None, training=None, objective="mse",
                  flow=None):
    """Export a DiT instance (models/dit.py's class, e.g. with weights loaded
    from a PyTorch checkpoint) with its objective through export_training;
    returns (onnx.ModelProto, seconds). `init`, `seed` are only recorded in
    the metadata."""
    args = example_inputs(dit.config, batch, seed, objective)
    names = ("x_t", "t", "y") if dit.config["num_classes"] > 0 else ("x_t", "t")
    names += tuple(n for c in dit.conds for n in c.input_names())
    named = dict(zip(names, args))
    cfg = dict(dit.config)
    cfg["init"], cfg["seed"] = init, seed
    return export_training(dit, named, output, objective=objective, flow=flow, opset=opset,
                           dynamic_batch=dynamic_batch, with_output=with_output,
                           external_data=external_data, config=cfg, training=training)


def op_histogram(m):
    return collections.Counter(n.op_type if not n.domain or n.domain == "ai.onnx"
                               else "%s:%s" % (n.domain, n.op_type) for n in m.graph.node)


def main(argv=None):
    a = parse_args(sys.argv[1:] if argv is None else argv)
    try:
        m, secs = export(a.model, a.image_size, a.in_channels, a.num_classes, a.learn_sigma,
                         a.opset, a.batch, a.dynamic_batch, a.init, a.seed, a.with_output,
                         a.class_dropout_prob, a.output, a.external_data,
                         training=dict(lr=a.lr, beta1=a.beta1, beta2=a.beta2, eps=a.eps,
                                       weight_decay=a.weight_decay,
                                       weight_decay_post=a.weight_decay_post)
                         if a.training_info else None, attention=a.attention,
                         objective=a.objective, flow=a.flow, conds=a.cond,
                         cond_dropout=a.cond_dropout)
    except UsageError as e:
        sys.stderr.write("export_dit.py: error: %s\n" % e)
        return 2
    if not a.quiet:
        n_params = sum(int(__import__("numpy").prod(i.dims)) for i in m.graph.initializer)
        size = os.path.getsize(a.output)
        if os.path.exists(a.output + ".data"):
            size += os.path.getsize(a.output + ".data")
        print("wrote %s: %s opset %d, %d nodes, %d initializers (%d values), %.1f MB, %.1f s"
              % (a.output, a.model, a.opset, len(m.graph.node), len(m.graph.initializer),
                 n_params, size / 1e6, secs))
    if a.print_ops:
        for op, n in sorted(op_histogram(m).items()):
            print("  %-20s %d" % (op, n))
    return 0


if __name__ == "__main__":
    sys.exit(main())
