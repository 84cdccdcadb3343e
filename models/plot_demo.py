#!/usr/bin/env -S /usr/bin/python3
"""The demo's summary picture: the loss curve and the sample grid side by side.

usage: /usr/bin/python3 models/plot_demo.py --loss loss.png --samples samples.png
           --out demo.png [--title T]

Both inputs are PNGs (models/plot_loss.py's curve, hc-run sample's grid);
the output is written atomically with matplotlib's Agg backend. Bad input:
one line on stderr, exit 2.
"""
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cli import Parser as _Parser, fail  # noqa: E402


def main(argv=None):
    ap = _Parser(description="Loss curve and sample grid side by side.")
    ap.add_argument("--loss", required=True)
    ap.add_argument("--samples", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--title", default="hc demo: training loss and samples (one row per class)")
    a = ap.parse_args(argv)
    if os.path.abspath(a.out) in (os.path.abspath(a.loss), os.path.abspath(a.samples)):
        fail("--out %s is an input; choose another file name" % a.out)
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    try:
        loss, grid = plt.imread(a.loss), plt.imread(a.samples)
    except (OSError, ValueError, SyntaxError) as e:
        fail("cannot read the pictures: %s" % e)
    fig, (left, right) = plt.subplots(
        1, 2, figsize=(14, 5.5),
        gridspec_kw={"width_ratios": [loss.shape[1] / loss.shape[0], grid.shape[1] / grid.shape[0]]})
    left.imshow(loss)
    right.imshow(grid, cmap="gray", vmin=0, vmax=1, interpolation="nearest")
    for ax in (left, right):
        ax.axis("off")
    fig.suptitle(a.title)
    fig.tight_layout()
    folder = os.path.dirname(os.path.abspath(a.out))
    fd, tmp = tempfile.mkstemp(prefix=".demo-", suffix=".png", dir=folder)
    try:
        with os.fdopen(fd, "wb") as f:
            fig.savefig(f, format="png", dpi=100)
        os.replace(tmp, a.out)
    except OSError as e:
        os.unlink(tmp)
        fail("cannot write %s: %s" % (a.out, e))
    return 0


if __name__ == "__main__":
    sys.exit(main())
