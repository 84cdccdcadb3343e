#!/usr/bin/env -S /usr/bin/python3
"""A small numpy interpreter for the ONNX ops the DiT export uses.

It checks the *graph* (not the PyTorch module) computes what the oracle
says: onnx 1.12 has no reference evaluator and onnxruntime is not installed.
Float tensors are evaluated in float64 (or float32 with --float32).

usage: /usr/bin/python3 models/onnx_numpy_eval.py MODEL.onnx --ref DIR
           [--float32] [--rtol 1e-9]

DIR holds the inputs and outputs written by models/torch_reference.py; the
graph is run on DIR's inputs and every graph output NAME is compared with
DIR/NAME_f64.npy (or DIR/NAME.npy with --float32). Exit 0 when they agree
within rtol (relative to the largest magnitude), 1 otherwise, 2 on bad input.
"""

import argparse
import os
import sys

import numpy as np

PROG = "onnx_numpy_eval.py"


def _attrs(node):
    from onnx import helper
    return {a.name: helper.get_attribute_value(a) for a in node.attribute}


def _int_div(a, b):
    q = np.abs(a) // np.abs(b)
    return (q * np.sign(a) * np.sign(b)).astype(a.dtype)


def _conv(x, w, b, a):
    if a.get("group", 1) != 1:
        raise NotImplementedError("Conv group != 1")
    kh, kw = w.shape[2], w.shape[3]
    sh, sw = a.get("strides", [1, 1])
    dh, dw = a.get("dilations", [1, 1])
    pads = a.get("pads", [0, 0, 0, 0])
    if a.get("auto_pad", b"NOTSET") not in (b"NOTSET", "NOTSET"):
        raise NotImplementedError("Conv auto_pad")
    x = np.pad(x, ((0, 0), (0, 0), (pads[0], pads[2]), (pads[1], pads[3])))
    n, c, h, wd = x.shape
    oh = (h - dh * (kh - 1) - 1) // sh + 1
    ow = (wd - dw * (kw - 1) - 1) // sw + 1
    out = np.zeros((n, w.shape[0], oh, ow), dtype=np.result_type(x, w))
    for i in range(kh):
        for j in range(kw):
            patch = x[:, :, i * dh: i * dh + sh * (oh - 1) + 1: sh,
                      j * dw: j * dw + sw * (ow - 1) + 1: sw]
            out += np.einsum("nchw,oc->nohw", patch, w[:, :, i, j])
    if b is not None:
        out += b.reshape(1, -1, 1, 1)
    return out


def _slice(x, starts, ends, axes=None, steps=None):
    axes = list(range(len(starts))) if axes is None else [int(v) for v in axes]
    steps = [1] * len(starts) if steps is None else [int(v) for v in steps]
    sl = [slice(None)] * x.ndim
    for s, e, ax, st in zip(starts, ends, axes, steps):
        sl[ax if ax >= 0 else ax + x.ndim] = slice(int(s), int(e), st)
    return x[tuple(sl)]


def _reshape(x, shape):
    shape = [int(v) for v in shape]
    shape = [x.shape[i] if v == 0 else v for i, v in enumerate(shape)]
    return x.reshape(shape)


def _layer_norm(x, scale, bias, a):
    axis = a.get("axis", -1)
    axis = axis if axis >= 0 else axis + x.ndim
    axes = tuple(range(axis, x.ndim))
    mean = x.mean(axis=axes, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=axes, keepdims=True)
    y = (x - mean) / np.sqrt(var + np.asarray(a.get("epsilon", 1e-5), dtype=x.dtype))
    y = y * scale
    if bias is not None:
        y = y + bias
    return y


def _softmax(x, axis):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def evaluate(model, feeds, float_dtype=np.float64):
    from onnx import numpy_helper, TensorProto
    fd = np.dtype(float_dtype)

    def conv_in(v):
        v = np.asarray(v)
        return v.astype(fd) if v.dtype.kind == "f" else v

    env = {}
    for init in model.graph.initializer:
        env[init.name] = conv_in(numpy_helper.to_array(init))
    for k, v in feeds.items():
        env[k] = conv_in(v)
    to_np = {TensorProto.FLOAT: fd, TensorProto.DOUBLE: fd, TensorProto.FLOAT16: fd,
             TensorProto.INT64: np.int64, TensorProto.INT32: np.int32,
             TensorProto.BOOL: np.bool_}
    for node in model.graph.node:
        a = _attrs(node)
        x = [env[n] if n else None for n in node.input]
        op = node.op_type
        if op == "Constant":
            r = conv_in(numpy_helper.to_array(a["value"]))
        elif op in ("Add", "Sub", "Mul", "Pow"):
            f = {"Add": np.add, "Sub": np.subtract, "Mul": np.multiply, "Pow": np.power}[op]
            r = f(x[0], x[1]).astype(x[0].dtype)
        elif op == "Div":
            r = _int_div(x[0], x[1]) if x[0].dtype.kind == "i" else (x[0] / x[1]).astype(x[0].dtype)
        elif op in ("Sqrt", "Cos", "Sin", "Tanh", "Exp", "Log", "Neg", "Reciprocal"):
            r = {"Sqrt": np.sqrt, "Cos": np.cos, "Sin": np.sin, "Tanh": np.tanh, "Exp": np.exp,
                 "Log": np.log, "Neg": np.negative, "Reciprocal": np.reciprocal}[op](x[0])
        elif op in ("Equal", "Less", "Greater"):
            r = {"Equal": np.equal, "Less": np.less, "Greater": np.greater}[op](x[0], x[1])
        elif op == "Where":
            r = np.where(x[0], x[1], x[2]).astype(x[1].dtype)
        elif op == "Clip":  # opset >= 11: optional min and max inputs
            lo = x[1] if len(x) > 1 and node.input[1] else None
            hi = x[2] if len(x) > 2 and node.input[2] else None
            r = np.clip(x[0], lo, hi).astype(x[0].dtype)
        elif op == "StopGradient" and node.domain == "hc":  # forward identity
            r = x[0]
        elif op == "Sigmoid":
            r = 1.0 / (1.0 + np.exp(-x[0]))
        elif op == "Cast":
            r = x[0].astype(to_np[a["to"]])
        elif op == "Concat":
            r = np.concatenate(x, axis=a["axis"])
        elif op == "Conv":
            r = _conv(x[0], x[1], x[2] if len(x) > 2 else None, a)
        elif op == "Einsum":
            r = np.einsum(a["equation"].decode() if isinstance(a["equation"], bytes)
                          else a["equation"], *x)
        elif op == "Gather":
            idx = x[1]
            ax = a.get("axis", 0)
            dim = x[0].shape[ax]
            r = np.take(x[0], np.where(idx < 0, idx + dim, idx), axis=ax)
        elif op == "Gemm":
            A = x[0].T if a.get("transA", 0) else x[0]
            B = x[1].T if a.get("transB", 0) else x[1]
            r = a.get("alpha", 1.0) * (A @ B)
            if len(x) > 2 and x[2] is not None:
                r = r + a.get("beta", 1.0) * x[2]
            r = r.astype(x[0].dtype)
        elif op == "MatMul":
            r = np.matmul(x[0], x[1])
        elif op == "ReduceMean":
            axes = a.get("axes")
            r = x[0].mean(axis=None if axes is None else tuple(axes),
                          keepdims=bool(a.get("keepdims", 1)))
        elif op == "Reshape":
            r = _reshape(x[0], x[1])
        elif op == "Shape":
            r = np.array(x[0].shape, dtype=np.int64)
        elif op == "Slice":
            r = _slice(x[0], x[1], x[2], x[3] if len(x) > 3 else None,
                       x[4] if len(x) > 4 else None)
        elif op == "Softmax":
            r = _softmax(x[0], a.get("axis", -1))
        elif op == "Transpose":
            r = np.transpose(x[0], a.get("perm"))
        elif op == "Unsqueeze":
            r = x[0]
            axes = sorted(int(v) if v >= 0 else int(v) + x[0].ndim + len(x[1]) for v in x[1])
            for ax in axes:
                r = np.expand_dims(r, ax)
        elif op == "Squeeze":
            r = np.squeeze(x[0], axis=tuple(int(v) for v in x[1]) if len(x) > 1 else None)
        elif op == "Split":
            ax = a.get("axis", 0)
            sizes = x[1] if len(x) > 1 and x[1] is not None else a.get("split")
            if sizes is None:
                n = len(node.output)
                sizes = [x[0].shape[ax] // n] * n
            r = tuple(np.split(x[0], np.cumsum(sizes)[:-1], axis=ax))
        elif op == "LayerNormalization":
            r = _layer_norm(x[0], x[1], x[2] if len(x) > 2 else None, a)
        elif op == "Identity":
            r = x[0]
        elif op == "Expand":
            r = x[0] * np.ones([int(v) for v in x[1]], dtype=x[0].dtype)
        else:
            raise NotImplementedError("op %s (node %s) is not implemented" % (op, node.name))
        outs = r if isinstance(r, tuple) else (r,)
        for name, val in zip(node.output, outs):
            if name:
                env[name] = np.asarray(val)
    return {o.name: env[o.name] for o in model.graph.output}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.error = lambda m: (sys.stderr.write("%s: error: %s\n" % (PROG, m)), sys.exit(2))
    ap.add_argument("model")
    ap.add_argument("--ref", required=True)
    ap.add_argument("--float32", action="store_true")
    ap.add_argument("--rtol", type=float, default=None)
    a = ap.parse_args(argv)
    import onnx
    if not os.path.isfile(a.model):
        ap.error("%s: no such file" % a.model)
    m = onnx.load(a.model)
    feeds = {}
    for i in m.graph.input:
        p = os.path.join(a.ref, i.name + ".npy")
        if not os.path.isfile(p):
            ap.error("%s: missing reference input %s" % (a.ref, p))
        feeds[i.name] = np.load(p)
    dtype = np.float32 if a.float32 else np.float64
    rtol = a.rtol if a.rtol is not None else (1e-4 if a.float32 else 1e-9)
    outs = evaluate(m, feeds, dtype)
    ok = True
    for name, got in outs.items():
        p = os.path.join(a.ref, name + (".npy" if a.float32 else "_f64.npy"))
        if not os.path.isfile(p):
            print("%s: no reference %s, skipped" % (name, p))
            continue
        want = np.load(p).astype(np.float64)
        got = got.astype(np.float64)
        if got.shape != want.shape:
            print("%s: shape %s != reference %s" % (name, got.shape, want.shape))
            ok = False
            continue
        err = float(np.max(np.abs(got - want))) if got.size else 0.0
        scale = max(float(np.max(np.abs(want))) if want.size else 0.0, 1e-30)
        good = err <= rtol * scale
        ok &= good
        print("%s: max |graph - torch| = %.3e (%.3e relative) %s"
              % (name, err, err / scale, "ok" if good else "MISMATCH"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
