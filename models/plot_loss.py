#!/usr/bin/env -S /usr/bin/python3
"""Plot training-loss curves from metrics JSON lines (hc-run, train_torch.py).

usage: /usr/bin/python3 models/plot_loss.py METRICS.jsonl [MORE.jsonl ...]
           --out loss.png [--labels a,b,...] [--smooth auto|W] [--title T] [--log-y]

Each file holds one JSON object per line with at least "step" and "loss"
(other keys are ignored, as are lines without a finite loss). Each file
becomes one curve: the logged points faintly, and an exponential moving
average boldly. --smooth W gives the EMA weight per logged point (0 = none);
the default `auto` uses a span of 1/20 of the curve's points
(W = 1 - 2/(span+1)), so short curves (each point already a mean over
--log-every steps) are not dragged behind by the smoothing. The
legend shows each curve's first logged and smoothed final loss. The PNG is
written atomically (temporary file + rename) with matplotlib's Agg backend,
so no display is needed. Prints one summary line per curve:

  LABEL: N points, steps A..B, first 0.9782, smoothed final 0.0821 (-91.6%)

Exit 0 on success, 2 on bad command-line input or unreadable metrics.
"""

import argparse
import json
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cli import Parser as _Parser, fail  # noqa: E402
import tempfile







def read_metrics(path):
    """-> (steps, losses) from a JSON-lines file, in file order."""
    steps, losses = [], []
    try:
        with open(path) as f:
            for lineno, line in enumerate(f, 1):
                line = line.strip()
                if not line:
                    continue
                try:
                    rec = json.loads(line)
                except ValueError:
                    fail("%s:%d: not a JSON object" % (path, lineno))
                if not isinstance(rec, dict) or "step" not in rec or "loss" not in rec:
                    continue
                try:
                    step, loss = float(rec["step"]), float(rec["loss"])
                except (TypeError, ValueError):
                    continue
                if math.isfinite(loss):
                    steps.append(step)
                    losses.append(loss)
    except OSError as e:
        fail("cannot read %s: %s" % (path, e.strerror or e))
    if not steps:
        fail("%s holds no {\"step\", \"loss\"} records" % path)
    return steps, losses


def smooth(values, weight):
    """Bias-corrected exponential moving average (TensorBoard's smoothing)."""
    out, last, norm = [], 0.0, 0.0
    for v in values:
        last = weight * last + (1 - weight) * v
        norm = weight * norm + (1 - weight)
        out.append(last / norm if norm > 0 else v)
    return out


def smooth_weight(smooth_arg, n):
    """EMA weight: the given number, or for 'auto' a span of n/20 points."""
    if smooth_arg != "auto":
        return smooth_arg
    span = max(1, int(round(n / 20.0)))
    return 1.0 - 2.0 / (span + 1)


def summary(steps, losses, weight):
    sm = smooth(losses, weight)
    first, final = losses[0], sm[-1]
    change = 100.0 * (final - first) / first if first else float("nan")
    return first, final, change, sm


def main(argv=None):
    ap = _Parser(description="Plot loss curves from metrics JSON lines.")
    ap.add_argument("metrics", nargs="+", help="JSON-lines files")
    ap.add_argument("--out", required=True, help="PNG to write")
    ap.add_argument("--labels", default=None, help="comma-separated curve names")
    ap.add_argument("--smooth", default="auto",
                    help="EMA weight per logged point in [0, 1), or auto (default)")
    ap.add_argument("--title", default="DiT training loss")
    ap.add_argument("--log-y", action="store_true", help="logarithmic loss axis")
    a = ap.parse_args(argv)
    if a.smooth != "auto":
        try:
            a.smooth = float(a.smooth)
        except ValueError:
            a.smooth = -1.0
        if not 0.0 <= a.smooth < 1.0:
            ap.error("--smooth must be 'auto' or a number in [0, 1)")
    if a.labels is not None:
        labels = a.labels.split(",")
        if len(labels) != len(a.metrics):
            ap.error("--labels names %d curves but %d files are given"
                     % (len(labels), len(a.metrics)))
    else:
        labels = [os.path.splitext(os.path.basename(p))[0] for p in a.metrics]
    out_dir = os.path.dirname(os.path.abspath(a.out))
    if not os.path.isdir(out_dir):
        ap.error("--out folder %s does not exist" % out_dir)

    curves = [read_metrics(p) for p in a.metrics]

    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 5), dpi=100)
    for i, (label, (steps, losses)) in enumerate(zip(labels, curves)):
        first, final, change, sm = summary(steps, losses, smooth_weight(a.smooth, len(losses)))
        color = "C%d" % (i % 10)
        ax.plot(steps, losses, color=color, alpha=0.3, linewidth=1)
        ax.plot(steps, sm, color=color, linewidth=2,
                label="%s (first %.4f, final %.4f)" % (label, first, final))
        print("%s: %d points, steps %d..%d, first %.4f, smoothed final %.4f (%+.1f%%)"
              % (label, len(steps), steps[0], steps[-1], first, final, change))
    ax.set_xlabel("step")
    ax.set_ylabel("train loss (MSE on eps)")
    if a.log_y:
        ax.set_yscale("log")
    ax.set_title(a.title)
    ax.grid(True, alpha=0.3)
    ax.legend()
    fig.tight_layout()

    fd, tmp = tempfile.mkstemp(prefix=".plot_loss.", suffix=".png", dir=out_dir)
    try:
        with os.fdopen(fd, "wb") as f:
            fig.savefig(f, format="png")
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)
        os.replace(tmp, a.out)
    except BaseException as e:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        if isinstance(e, OSError):
            fail("cannot write %s: %s" % (a.out, e), code=1)
        raise
    finally:
        plt.close(fig)
    print("wrote %s" % a.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
