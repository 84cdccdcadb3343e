#!/usr/bin/env -S /usr/bin/python3
"""Convert Debian's Fashion-MNIST (IDX files) to the NPY layout hc-run reads.

usage: /usr/bin/python3 models/fashion_mnist.py --out DIR
           [--split train|test] [--limit N] [--source DIR]

Reads SRC/{train,t10k}-{images-idx3,labels-idx1}-ubyte[.gz] from the
`dataset-fashion-mnist` package (default SRC /usr/share/datasets/fashion-mnist)
and writes:

  DIR/images.npy  float32 [N, 1, 32, 32]: the 28x28 images zero-padded by 2
                  pixels on each side, scaled x/127.5 - 1 to [-1, 1] (the
                  padding is -1, i.e. black, like the images' background)
  DIR/labels.npy  int64   [N] class ids 0..9

--limit N keeps the first N samples of the split. Files are written
atomically (temporary file in DIR, fsync, then rename). Exit 0 on success,
1 when the output cannot be written, 2 on bad command-line input or a missing
or malformed dataset (one line on stderr).
"""

import argparse
import gzip
import os
import struct
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cli import Parser as _Parser, fail  # noqa: E402
import tempfile

import numpy as np

DEFAULT_SOURCE = "/usr/share/datasets/fashion-mnist"
PACKAGE = "dataset-fashion-mnist"
SPLIT_PREFIX = {"train": "train", "test": "t10k"}
IMAGE_SIZE = 32
PAD = 2
NUM_CLASSES = 10

# IDX type codes -> numpy dtypes (big-endian where multi-byte).
_IDX_DTYPES = {0x08: np.dtype(np.uint8), 0x09: np.dtype(np.int8),
               0x0B: np.dtype(">i2"), 0x0C: np.dtype(">i4"),
               0x0D: np.dtype(">f4"), 0x0E: np.dtype(">f8")}


class DatasetError(Exception):
    pass




def find_idx(source, stem):
    """Path of SOURCE/STEM or SOURCE/STEM.gz, whichever exists."""
    for name in (stem, stem + ".gz"):
        p = os.path.join(source, name)
        if os.path.isfile(p):
            return p
    raise DatasetError(
        "Fashion-MNIST file %s[.gz] not found in %s; install it with "
        "`apt-get install %s`" % (stem, source, PACKAGE))


def read_idx(path):
    """Parse one IDX file (optionally gzip-compressed) into a numpy array."""
    opener = gzip.open if path.endswith(".gz") else open
    try:
        with opener(path, "rb") as f:
            data = f.read()
    except (OSError, EOFError) as e:
        raise DatasetError("cannot read %s: %s" % (path, e))
    if len(data) < 4:
        raise DatasetError("%s: too short for an IDX header" % path)
    zero, code, ndim = struct.unpack(">HBB", data[:4])
    if zero != 0 or code not in _IDX_DTYPES or ndim == 0:
        raise DatasetError("%s: not an IDX file (bad magic)" % path)
    hdr = 4 + 4 * ndim
    if len(data) < hdr:
        raise DatasetError("%s: truncated IDX header" % path)
    shape = struct.unpack(">%dI" % ndim, data[4:hdr])
    dtype = _IDX_DTYPES[code]
    count = int(np.prod(shape, dtype=np.int64))
    if len(data) - hdr != count * dtype.itemsize:
        raise DatasetError("%s: payload is %d bytes, header says %s of %s"
                           % (path, len(data) - hdr, shape, dtype))
    return np.frombuffer(data, dtype=dtype, offset=hdr).reshape(shape)


def load_split(source, split, limit=None):
    """-> (images float32 [N,1,32,32] in [-1,1], labels int64 [N])."""
    prefix = SPLIT_PREFIX[split]
    images = read_idx(find_idx(source, "%s-images-idx3-ubyte" % prefix))
    labels = read_idx(find_idx(source, "%s-labels-idx1-ubyte" % prefix))
    if images.ndim != 3 or images.dtype != np.uint8:
        raise DatasetError("images: expected uint8 [N,H,W], got %s %s"
                           % (images.dtype, images.shape))
    if labels.ndim != 1 or labels.shape[0] != images.shape[0]:
        raise DatasetError("labels: expected [%d], got %s"
                           % (images.shape[0], labels.shape))
    h, w = images.shape[1:]
    if h + 2 * PAD != IMAGE_SIZE or w + 2 * PAD != IMAGE_SIZE:
        raise DatasetError("images are %dx%d, expected 28x28" % (h, w))
    if limit is not None:
        images, labels = images[:limit], labels[:limit]
    n = images.shape[0]
    out = np.full((n, 1, IMAGE_SIZE, IMAGE_SIZE), -1.0, dtype=np.float32)
    out[:, 0, PAD:PAD + h, PAD:PAD + w] = images.astype(np.float32) / np.float32(127.5) - 1
    lab = labels.astype(np.int64)
    if n and (lab.min() < 0 or lab.max() >= NUM_CLASSES):
        raise DatasetError("labels outside 0..%d" % (NUM_CLASSES - 1))
    return out, lab


def save_npy_atomic(path, array):
    """Write an .npy next to its final name, fsync, then rename over it."""
    d = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".%s." % os.path.basename(path), suffix=".tmp", dir=d)
    try:
        with os.fdopen(fd, "wb") as f:
            np.save(f, array)
            f.flush()
            os.fsync(f.fileno())
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp makes 0600; give the usual mode
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def main(argv=None):
    ap = _Parser(description="Fashion-MNIST IDX -> NPY ([N,1,32,32] float32 in [-1,1], [N] int64).")
    ap.add_argument("--out", required=True, help="output folder (created if missing)")
    ap.add_argument("--split", default="train", choices=sorted(SPLIT_PREFIX))
    ap.add_argument("--limit", type=int, default=None, help="keep the first N samples")
    ap.add_argument("--source", default=DEFAULT_SOURCE,
                    help="folder with the IDX files (default %s)" % DEFAULT_SOURCE)
    a = ap.parse_args(argv)
    if a.limit is not None and a.limit <= 0:
        ap.error("--limit must be positive, got %d" % a.limit)
    if os.path.exists(a.out) and not os.path.isdir(a.out):
        ap.error("--out %s exists and is not a folder" % a.out)
    if not os.path.isdir(a.source):
        sys.stderr.write("fashion_mnist.py: error: %s not found; install the dataset with "
                         "`apt-get install %s`\n" % (a.source, PACKAGE))
        return 2
    try:
        images, labels = load_split(a.source, a.split, a.limit)
    except DatasetError as e:
        sys.stderr.write("fashion_mnist.py: error: %s\n" % e)
        return 2
    try:
        os.makedirs(a.out, exist_ok=True)
        save_npy_atomic(os.path.join(a.out, "images.npy"), images)
        save_npy_atomic(os.path.join(a.out, "labels.npy"), labels)
    except OSError as e:
        sys.stderr.write("fashion_mnist.py: error: cannot write to %s: %s\n" % (a.out, e))
        return 1
    print("wrote %s/images.npy %s float32 and %s/labels.npy %s int64 (%s split)"
          % (a.out, list(images.shape), a.out, list(labels.shape), a.split))
    return 0


if __name__ == "__main__":
    sys.exit(main())
