#!/usr/bin/env -S /usr/bin/python3
"""PyTorch reference trainer: the same DiT, data and diffusion as hc-run.

usage: /usr/bin/python3 models/train_torch.py --data DIR --model tiny|demo|DiT-S/2|...
           [--image-size 32] [--in-channels 1] [--num-classes 10]
           [--batch 32] [--steps K] [--lr 1e-4] [--seed S] [--log-every N]
           [--metrics FILE.jsonl] [--threads T] [--learn-sigma|--no-learn-sigma]
           [--ema DECAY] [--save-weights FILE.safetensors] [--checkpoint-blocks]
           [--init-weights FILE.safetensors] [--compile] [--autocast bf16]
           [--fused-adamw]

DIR holds images.npy (float32 [N,C,H,W]) and labels.npy (integer [N]), as
models/fashion_mnist.py writes them (a path to images.npy works too; its
labels.npy is then taken from the same folder).

Training follows DiT's train.py on one process:
  * models/dit.py's DiT with its default init (adaLN-Zero), weights drawn
    from --seed (the same weights `export_dit.py --seed S` exports);
  * AdamW(lr, betas (0.9, 0.999), eps 1e-8, weight_decay 0);
  * each epoch a fresh permutation of the samples, batches of --batch taken
    in order, an incomplete last batch dropped;
  * per batch: t uniform in [0,1000), eps ~ N(0,I), x_t = q_sample(x0,t,eps),
    labels dropped to the null class with p = 0.1 (models/diffusion.py);
    loss = mean((DiT(x_t,t,y)[:, :C] - eps)^2) (DiTLoss);
  * all draws come from one torch.Generator seeded with --seed (independent
    of hc-run's counter-based RNG: curves agree in distribution, not bitwise).

Every --log-every steps it prints DiT's line
  (step=0000100) Train Loss: 0.1234, Train Steps/Sec: 1.23
where the loss is the mean over the steps since the last log line, and
appends {"step","loss","steps_per_sec","img_per_sec","wall_s"} to --metrics
(one JSON object per line; wall_s counts from the first training step).
A last partial window is logged too. --ema keeps DiT's EMA of every
parameter (ema = ema*decay + (1-decay)*param after each step, in float32).
--save-weights writes the parameters under their state_dict names (and the
EMA under `ema:NAME`) as safetensors after the last step: the layout of an
hc-run checkpoint's tensors, so `hc-run sample --ckpt` can read it.

As a speed anchor (bench/anchors.py), with PyTorch 2.x as its documentation
recommends for CPU training: --compile wraps the loss module in
torch.compile (inductor, default mode; the first steps compile), --autocast
bf16 runs forward and loss under torch.autocast("cpu", torch.bfloat16) with
float32 parameters and optimizer, --fused-adamw uses AdamW(fused=True).
--init-weights starts from given parameters (e.g. the NAME.so.init.safetensors
hc-compile writes), so every system starts from the same weights. Each
metrics line also holds peak_rss_mb (the process's peak resident memory). OMP_WAIT_POLICY defaults to PASSIVE
(set it to ACTIVE to get OpenMP's spinning back on an otherwise idle machine). A non-finite loss stops training with
exit 1, naming the step; bad command-line input or data exits 2.
"""

import argparse
import json
import math
import os
import sys
import time

# OpenMP threads that spin at barriers are ruinous when the cores are shared
# (measured here: demo config, 2 threads, one other busy process: 3.8 s/step
# spinning vs 0.18 s/step passive). Sleep instead, unless the user chose.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cli import PROG, Parser as _Parser, fail  # noqa: E402

import numpy as np  # noqa: E402
import torch  # noqa: E402

import diffusion  # noqa: E402
import dit as ditlib  # noqa: E402







def parse_args(argv):
    ap = _Parser(description="Train a DiT in PyTorch (hc's reference trainer).")
    ap.add_argument("--data", required=True, help="folder with images.npy and labels.npy")
    ap.add_argument("--model", required=True, help="one of: " + ", ".join(ditlib.MODEL_CONFIGS))
    ap.add_argument("--image-size", type=int, default=32)
    ap.add_argument("--in-channels", type=int, default=1)
    ap.add_argument("--num-classes", type=int, default=10)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--steps", type=int, default=1000)
    ap.add_argument("--lr", type=float, default=1e-4)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--log-every", type=int, default=100)
    ap.add_argument("--metrics", default=None, help="JSON-lines file (overwritten)")
    ap.add_argument("--threads", type=int, default=None,
                    help="torch intra-op threads (default: torch's own choice)")
    ap.add_argument("--learn-sigma", dest="learn_sigma", action="store_true", default=True)
    ap.add_argument("--no-learn-sigma", dest="learn_sigma", action="store_false")
    ap.add_argument("--quiet", action="store_true", help="no config line on stdout")
    ap.add_argument("--ema", type=float, default=None, metavar="DECAY",
                    help="keep an EMA of the parameters (DiT: 0.9999)")
    ap.add_argument("--save-weights", default=None, metavar="FILE.safetensors",
                    help="write the parameters (and ema:NAME) after the last step")
    ap.add_argument("--checkpoint-blocks", action="store_true",
                    help="torch.utils.checkpoint on every DiT block: activations "
                         "only at block inputs, each block's forward run again "
                         "in backward")
    ap.add_argument("--init-weights", default=None, metavar="FILE.safetensors",
                    help="start from these parameters (state_dict names)")
    ap.add_argument("--compile", action="store_true",
                    help="torch.compile the loss module (PyTorch >= 2.0)")
    ap.add_argument("--autocast", choices=("bf16",), default=None,
                    help="forward and loss under torch.autocast('cpu', bfloat16)")
    ap.add_argument("--fused-adamw", action="store_true",
                    help="AdamW(fused=True) (PyTorch >= 2.4 on CPU)")
    a = ap.parse_args(argv)
    if a.compile and not hasattr(torch, "compile"):
        ap.error("--compile needs PyTorch >= 2.0 (this is %s)" % torch.__version__)
    if a.model not in ditlib.MODEL_CONFIGS:
        ap.error("unknown --model %r (expected one of: %s)"
                 % (a.model, ", ".join(ditlib.MODEL_CONFIGS)))
    patch = ditlib.MODEL_CONFIGS[a.model][3]
    if a.image_size <= 0 or a.image_size % patch:
        ap.error("--image-size %d must be a positive multiple of the patch size %d"
                 % (a.image_size, patch))
    for name in ("in_channels", "num_classes", "batch", "steps", "log_every"):
        if getattr(a, name) <= 0:
            ap.error("--%s must be positive, got %d" % (name.replace("_", "-"), getattr(a, name)))
    if a.threads is not None and a.threads <= 0:
        ap.error("--threads must be positive, got %d" % a.threads)
    if not (a.lr > 0 and math.isfinite(a.lr)):
        ap.error("--lr must be a positive number, got %g" % a.lr)
    if a.ema is not None and not 0.0 < a.ema < 1.0:
        ap.error("--ema must be in (0, 1), got %g" % a.ema)
    if a.save_weights and not os.path.isdir(os.path.dirname(os.path.abspath(a.save_weights))):
        ap.error("--save-weights %s: its folder does not exist" % a.save_weights)
    return a


def save_weights(path, model, ema):
    import safetensors_np
    tensors = {n: p.detach().numpy() for n, p in model.named_parameters()}
    if ema is not None:
        tensors.update({"ema:" + n: e.numpy() for n, e in ema.items()})
    safetensors_np.save(path, tensors, {"hc.written_by": "models/train_torch.py",
                                        "hc.dit_config": json.dumps(model.config,
                                                                    sort_keys=True)})


def load_weights(path, model):
    """Parameters from a safetensors file; every trainable one must be there."""
    import safetensors_np
    try:
        tensors = safetensors_np.load(path)
    except (OSError, ValueError) as e:
        fail("cannot read --init-weights %s: %s" % (path, e))
    with torch.no_grad():
        for n, p in model.named_parameters():
            if n not in tensors:
                if p.requires_grad:
                    fail("--init-weights %s has no tensor %s" % (path, n))
                continue
            if tuple(tensors[n].shape) != tuple(p.shape):
                fail("--init-weights %s: %s is %s, the model's is %s"
                     % (path, n, list(tensors[n].shape), list(p.shape)))
            p.copy_(torch.from_numpy(np.array(tensors[n], dtype=np.float32)))


def peak_rss_mb():
    import resource
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def load_data(a):
    d = a.data
    if os.path.isfile(d) and d.endswith(".npy"):
        img_path = d
        d = os.path.dirname(os.path.abspath(d))
    else:
        img_path = os.path.join(d, "images.npy")
    lab_path = os.path.join(d, "labels.npy")
    for p in (img_path, lab_path):
        if not os.path.isfile(p):
            fail("%s not found (make it with models/fashion_mnist.py --out %s)" % (p, d))
    try:
        # Header check first (memory-mapped), then the whole set in memory
        # (Fashion-MNIST train is 245 MB at 32x32 float32).
        images = np.load(img_path, mmap_mode="r")
        labels = np.load(lab_path, mmap_mode="r")
    except (ValueError, OSError) as e:
        fail("cannot read %s: %s" % (d, e))
    want = (a.in_channels, a.image_size, a.image_size)
    if images.dtype != np.float32 or images.ndim != 4 or tuple(images.shape[1:]) != want:
        fail("%s is %s %s, expected float32 [N,%d,%d,%d]"
             % (img_path, images.dtype, list(images.shape), *want))
    if labels.ndim != 1 or labels.shape[0] != images.shape[0] \
            or not np.issubdtype(labels.dtype, np.integer):
        fail("%s is %s %s, expected integer [%d]"
             % (lab_path, labels.dtype, list(labels.shape), images.shape[0]))
    n = images.shape[0]
    if n < a.batch:
        fail("%d samples are fewer than one batch of %d" % (n, a.batch))
    labels = np.array(labels, dtype=np.int64)
    if labels.min() < 0 or labels.max() >= a.num_classes:
        fail("labels span %d..%d, outside 0..%d (--num-classes %d)"
             % (labels.min(), labels.max(), a.num_classes - 1, a.num_classes))
    images = np.array(images, dtype=np.float32)
    if not np.isfinite(images).all():
        fail("%s holds non-finite values" % img_path)
    return torch.from_numpy(images), torch.from_numpy(labels)


def batches(n, batch, gen):
    """Endless stream of index batches: per epoch one permutation, full batches only."""
    while True:
        perm = torch.randperm(n, generator=gen)
        for i in range(0, n - batch + 1, batch):
            yield perm[i:i + batch]


def main(argv=None):
    a = parse_args(argv)
    if a.threads is not None:
        torch.set_num_threads(a.threads)
    images, labels = load_data(a)
    model = ditlib.make_dit(a.model, image_size=a.image_size, in_channels=a.in_channels,
                            num_classes=a.num_classes, learn_sigma=a.learn_sigma,
                            init="default", seed=a.seed)
    model.checkpoint_blocks = a.checkpoint_blocks
    if a.init_weights:
        load_weights(a.init_weights, model)
    loss_fn = ditlib.DiTLoss(model)
    loss_fn.train()
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=a.lr, weight_decay=0.0,
                            **({"fused": True} if a.fused_adamw else {}))
    step_loss = torch.compile(loss_fn) if a.compile else loss_fn
    if a.autocast:
        compute = step_loss

        def step_loss(*args):
            with torch.autocast("cpu", dtype=torch.bfloat16):
                return compute(*args)
    ema = None
    if a.ema is not None:
        ema = {n: p.detach().clone() for n, p in model.named_parameters()}
    gen = torch.Generator()
    gen.manual_seed(a.seed)

    metrics = None
    if a.metrics:
        try:
            metrics = open(a.metrics, "w")
        except OSError as e:
            fail("cannot write --metrics %s: %s" % (a.metrics, e))
    if not a.quiet:
        cfg = model.config
        print("DiT %s: depth %d hidden %d heads %d patch %d, %d params; %d images %s, "
              "batch %d, lr %g, seed %d, %d threads; torch %s%s%s"
              % (a.model, cfg["depth"], cfg["hidden_size"], cfg["num_heads"], cfg["patch_size"],
                 sum(p.numel() for p in params), images.shape[0], list(images.shape[1:]),
                 a.batch, a.lr, a.seed, torch.get_num_threads(), torch.__version__,
                 ", compiled" if a.compile else "",
                 ", bf16 autocast" if a.autocast else ""), flush=True)

    stream = batches(images.shape[0], a.batch, gen)
    t_start = time.perf_counter()
    t_window = t_start
    running, window = 0.0, 0
    step = 0
    try:
        while step < a.steps:
            idx = next(stream)
            x0, y0 = images[idx], labels[idx]
            x_t, t, y, eps = diffusion.training_batch(x0, y0, a.num_classes, gen)
            loss = step_loss(x_t, t, y, eps)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            if ema is not None:
                with torch.no_grad():
                    for n, p in model.named_parameters():
                        ema[n].mul_(a.ema).add_(p.detach(), alpha=1.0 - a.ema)
            step += 1
            lv = float(loss.item())
            if not math.isfinite(lv):
                fail("non-finite loss (%r) at step %d; stopping" % (lv, step), code=1)
            running += lv
            window += 1
            if step % a.log_every == 0 or step == a.steps:
                now = time.perf_counter()
                sps = window / max(now - t_window, 1e-9)
                avg = running / window
                print("(step=%07d) Train Loss: %.4f, Train Steps/Sec: %.2f"
                      % (step, avg, sps), flush=True)
                if metrics:
                    metrics.write(json.dumps({
                        "step": step, "loss": avg, "steps_per_sec": sps,
                        "img_per_sec": sps * a.batch, "wall_s": now - t_start,
                        "peak_rss_mb": peak_rss_mb()}) + "\n")
                    metrics.flush()
                running, window = 0.0, 0
                t_window = time.perf_counter()
    except KeyboardInterrupt:
        sys.stderr.write("%s: interrupted at step %d\n" % (PROG, step))
        return 130
    finally:
        if metrics:
            metrics.close()
    if a.save_weights:
        save_weights(a.save_weights, model, ema)
    if not a.quiet:
        print("done: %d steps in %.1f s" % (step, time.perf_counter() - t_start), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
