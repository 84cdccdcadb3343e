"""Minimal safetensors reader/writer in numpy (the PyPI package is not in
Debian 12), following the format exactly: u64 LE header length, JSON header,
raw little-endian C-order data. Used by load_checkpoint.py and the tests."""
import json
import os
import struct

import numpy as np

DTYPES = {"F32": np.float32, "F64": np.float64, "I64": np.int64, "I32": np.int32,
          "U8": np.uint8, "BOOL": np.bool_}
NAMES = {np.dtype(v): k for k, v in DTYPES.items()}


def save(path, tensors, metadata=None):
    header, blobs, off = {}, [], 0
    if metadata:
        header["__metadata__"] = dict(metadata)
    for name, a in tensors.items():
        a = np.asarray(a)
        if not a.flags.c_contiguous:
            a = a.copy(order="C")  # (ascontiguousarray would make 0-d arrays 1-d)
        b = a.tobytes()
        header[name] = {"dtype": NAMES[a.dtype], "shape": list(a.shape),
                        "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    h = json.dumps(header).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))
    os.replace(tmp, path)


def load(path, with_metadata=False):
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    base = 8 + n
    meta = header.pop("__metadata__", {})
    out = {}
    for name, e in header.items():
        b, end = e["data_offsets"]
        out[name] = np.frombuffer(data[base + b:base + end],
                                  dtype=DTYPES[e["dtype"]]).reshape(e["shape"]).copy()
    return (out, meta) if with_metadata else out
