#!/usr/bin/env -S /usr/bin/python3
"""Quality of class-conditional Fashion-MNIST samples, measured here.

usage: /usr/bin/python3 models/sample_quality.py --samples S.npy [--labels L.npy]
           [--cache-dir DIR] [--source DIR] [--threads T] [--json OUT.json]

S.npy: float32 [N, 1, 32, 32] in [-1, 1] (hc-run sample --save-npy; its
labels default to S.labels.npy beside it). Reports:

  * class-conditional accuracy: the share of samples that a Fashion-MNIST
    classifier assigns to the class they were generated for;
  * classifier-feature FID: the Frechet distance between Gaussians fitted to
    the classifier's penultimate features (128-d) of the samples and of the
    10,000 held-out test images (never trained on: the demo trains on the
    first 20,000 training images). It is *not* the Inception FID of the
    papers (those weights cannot be fetched here); numbers compare runs of
    this measure only, at the same N (FID is biased upward at small N);
  * the same two numbers for N real training images, the floor to read the
    samples' numbers against.

The classifier (3 conv + 2 linear layers) is trained once with PyTorch on
the 60,000 training images (3 epochs, Adam, seed 0) and cached as
DIR/fmnist_classifier.pt with its test accuracy (default DIR:
./classifier). Data: Debian's dataset-fashion-mnist (models/fashion_mnist.py).
Bad input: one line on stderr, exit 2.
"""
import argparse
import json
import os
import sys
import time

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cli import Parser as _Parser, fail  # noqa: E402

import numpy as np  # noqa: E402
import torch  # noqa: E402
from torch import nn  # noqa: E402

import fashion_mnist  # noqa: E402

EPOCHS, BATCH, LR, SEED, FEATURES = 3, 128, 1e-3, 0, 128


class Classifier(nn.Module):
    def __init__(self):
        super().__init__()
        def block(i, o):
            return [nn.Conv2d(i, o, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2)]
        self.conv = nn.Sequential(*block(1, 32), *block(32, 64), *block(64, 128))  # 32 -> 4
        self.features = nn.Sequential(nn.Flatten(), nn.Linear(128 * 4 * 4, FEATURES), nn.ReLU())
        self.head = nn.Linear(FEATURES, 10)

    def embed(self, x):
        return self.features(self.conv(x))

    def forward(self, x):
        return self.head(self.embed(x))


def batched(model_fn, x, batch=500):
    with torch.no_grad():
        return torch.cat([model_fn(torch.from_numpy(x[i:i + batch]))
                          for i in range(0, len(x), batch)]).numpy()


def load_or_train(cache_dir, source):
    path = os.path.join(cache_dir, "fmnist_classifier.pt")
    model = Classifier()
    if os.path.isfile(path):
        state = torch.load(path)
        model.load_state_dict(state["model"])
        return model.eval(), state["info"], path
    x, y = fashion_mnist.load_split(source, "train")
    xt, yt = fashion_mnist.load_split(source, "test")
    g = torch.Generator().manual_seed(SEED)
    torch.manual_seed(SEED)
    model = Classifier()
    opt = torch.optim.Adam(model.parameters(), lr=LR)
    xs, ys = torch.from_numpy(x), torch.from_numpy(y)
    t0 = time.time()
    model.train()
    for epoch in range(EPOCHS):
        perm = torch.randperm(len(xs), generator=g)
        for i in range(0, len(xs) - BATCH + 1, BATCH):
            idx = perm[i:i + BATCH]
            loss = nn.functional.cross_entropy(model(xs[idx]), ys[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
        sys.stderr.write("classifier: epoch %d/%d, loss %.4f\n" % (epoch + 1, EPOCHS, loss.item()))
    model.eval()
    acc = float((batched(model, xt).argmax(1) == yt).mean())
    info = {"test_accuracy": acc, "epochs": EPOCHS, "train_seconds": time.time() - t0,
            "train_images": len(xs)}
    os.makedirs(cache_dir, exist_ok=True)
    tmp = path + ".tmp.%d" % os.getpid()
    torch.save({"model": model.state_dict(), "info": info}, tmp)
    os.replace(tmp, path)
    return model, info, path


def frechet_distance(a, b):
    """||mu_a - mu_b||^2 + tr(Sa + Sb - 2 (Sa^1/2 Sb Sa^1/2)^1/2), float64,
    with symmetric eigendecompositions (no scipy needed)."""
    a, b = np.float64(a), np.float64(b)
    mu_a, mu_b = a.mean(0), b.mean(0)
    sa, sb = np.cov(a, rowvar=False), np.cov(b, rowvar=False)
    w, v = np.linalg.eigh(sa)
    root_a = (v * np.sqrt(np.clip(w, 0, None))) @ v.T
    inner = np.linalg.eigvalsh(root_a @ sb @ root_a)
    trace_root = np.sqrt(np.clip(inner, 0, None)).sum()
    return float(((mu_a - mu_b) ** 2).sum() + np.trace(sa) + np.trace(sb) - 2 * trace_root)


def measure(model, images, labels, ref_features):
    logits = batched(model, images)
    feats = batched(model.embed, images)
    pred = logits.argmax(1)
    per_class = {int(c): float((pred[labels == c] == c).mean()) for c in np.unique(labels)}
    return {"n": int(len(images)), "accuracy": float((pred == labels).mean()),
            "per_class_accuracy": per_class,
            "feature_fid": frechet_distance(feats, ref_features)}


def main(argv=None):
    ap = _Parser(description="Class-conditional accuracy and classifier-feature FID "
                             "of Fashion-MNIST samples.")
    ap.add_argument("--samples", required=True)
    ap.add_argument("--labels", default=None)
    ap.add_argument("--cache-dir", default="classifier")
    ap.add_argument("--source", default=fashion_mnist.DEFAULT_SOURCE)
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--json", default=None)
    a = ap.parse_args(argv)
    if a.threads is not None:
        if a.threads <= 0:
            fail("--threads must be positive, got %d" % a.threads)
        torch.set_num_threads(a.threads)
    labels_path = a.labels or (a.samples[:-4] if a.samples.endswith(".npy")
                               else a.samples) + ".labels.npy"
    try:
        images = np.load(a.samples)
        labels = np.load(labels_path)
    except (OSError, ValueError) as e:
        fail("cannot read samples: %s" % e)
    if images.dtype != np.float32 or images.ndim != 4 or images.shape[1:] != (1, 32, 32):
        fail("--samples %s is %s %s, expected float32 [N,1,32,32]"
             % (a.samples, images.dtype, list(images.shape)))
    if labels.shape != (images.shape[0],) or not np.issubdtype(labels.dtype, np.integer) \
            or labels.min() < 0 or labels.max() > 9:
        fail("labels %s do not match %d samples of classes 0..9" % (labels_path, len(images)))
    if len(images) < 2:
        fail("need at least 2 samples for a covariance")
    if a.json and not os.path.isdir(os.path.dirname(os.path.abspath(a.json))):
        fail("--json %s: its folder does not exist" % a.json)
    try:
        model, info, path = load_or_train(a.cache_dir, a.source)
        xt, _ = fashion_mnist.load_split(a.source, "test")
        xr, yr = fashion_mnist.load_split(a.source, "train")
    except fashion_mnist.DatasetError as e:
        fail(str(e))
    ref = batched(model.embed, xt)
    samples = measure(model, images, labels.astype(np.int64), ref)
    # Real images drawn as the samples are (same classes, same count).
    rng = np.random.default_rng(SEED)
    pick = np.concatenate([rng.choice(np.flatnonzero(yr == c), (labels == c).sum(), replace=False)
                           for c in np.unique(labels)])
    real = measure(model, xr[pick], yr[pick], ref)
    print("classifier: %s (test accuracy %.1f%%)" % (path, 100 * info["test_accuracy"]))
    print("samples: %d, class-conditional accuracy %.1f%%, classifier-feature FID %.2f "
          "(vs %d held-out test images)" % (samples["n"], 100 * samples["accuracy"],
                                            samples["feature_fid"], len(xt)))
    print("  per class: " + " ".join("%d:%.0f%%" % (c, 100 * v)
                                      for c, v in samples["per_class_accuracy"].items()))
    print("real training images, same classes and count: accuracy %.1f%%, "
          "classifier-feature FID %.2f" % (100 * real["accuracy"], real["feature_fid"]))
    if a.json:
        tmp = a.json + ".tmp"
        with open(tmp, "w") as f:
            json.dump({"classifier": dict(info, path=path), "samples": samples,
                       "real": real, "measure": "classifier-feature FID (not Inception)"},
                      f, indent=1)
        os.replace(tmp, a.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
