#!/usr/bin/env -S /usr/bin/python3
"""Gives an optimized dynamo export its parameters back (issue 27).

torch.onnx.export(..., dynamo=True) optimizes by default: it folds weights
into unnamed initializers (`val_26` holds `qkv.weight` transposed) and stores
constants (the attention scale, LayerNorm ones, GELU coefficients, the
timestep frequency table) as float initializers too, so nothing in the file
says which tensors train, and hc-compile refuses it. This tool takes the
module's state_dict and the .onnx and writes an .onnx whose initializers are
exactly the state_dict's parameters, under their names and in their layout:

  * an initializer named like a parameter must hold its value;
  * a parameter not found by name is the one initializer equal to it, or to
    its transpose (2-D), which becomes a Transpose (or Identity) of it;
  * every other float initializer is a constant: it becomes a Constant node,
    which hc folds like any exporter constant.

Anything it cannot decide is refused (one line, exit 2), never guessed: a
parameter found nowhere, an initializer equal to several parameters, or a
tensor whose elements are all equal (DiT's zero-initialized adaLN, LayerNorm
ones: a constant and a parameter cannot be told apart) matched by value.
Export with optimize=False instead in those cases (docs/torch-exports.md).

usage: map_params.py MODEL.onnx --state-dict SD -o OUT.onnx
                     [--key-prefix P] [--name-prefix P] [--frozen NAME ...]

SD: a .npz (e.g. an exports-torch2 ref.npz with --key-prefix init/) or a
PyTorch .pt/.pth state_dict (or a checkpoint holding one under "model").
--name-prefix is prepended to the state_dict names (the export's module
wrapped the model as an attribute: --name-prefix model.). --frozen names
parameters that do not train (requires_grad=False, e.g. model.pos_embed):
recorded in the file's hc.frozen metadata, which hc-compile honours.
The file's hc.param_map metadata records what each initializer became.
"""
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cli import Parser, fail  # noqa: E402


def load_state_dict(path, key_prefix, name_prefix):
    if not os.path.isfile(path):
        fail("%s: no such file" % path)
    if path.endswith(".npz"):
        try:
            z = np.load(path)
            items = {k: z[k] for k in z.files}
        except Exception as e:  # noqa: BLE001 - any unreadable archive
            fail("%s: not a readable .npz (%s)" % (path, str(e).splitlines()[0]))
    else:
        try:
            import torch
            sd = torch.load(path, map_location="cpu")
        except Exception as e:  # noqa: BLE001
            fail("%s: not a readable PyTorch file (%s)" % (path, str(e).splitlines()[0]))
        if isinstance(sd, dict) and "model" in sd and isinstance(sd["model"], dict):
            sd = sd["model"]
        if not isinstance(sd, dict):
            fail("%s: holds no state_dict" % path)
        items = {k: v.detach().cpu().numpy() for k, v in sd.items() if hasattr(v, "detach")}
    out = {}
    for k, v in items.items():
        if not k.startswith(key_prefix):
            continue
        v = np.asarray(v)
        if v.dtype.kind != "f":
            continue  # integer buffers (e.g. BatchNorm's counters) never train
        out[name_prefix + k[len(key_prefix):]] = v.astype(np.float32)
    if not out:
        fail("%s: no float tensors under key prefix '%s'" % (path, key_prefix))
    return out


def is_fill(a):
    return a.size > 0 and np.all(a == a.flat[0])


def main():
    ap = Parser(description=__doc__.split("\n\n")[0])
    ap.add_argument("model")
    ap.add_argument("--state-dict", required=True)
    ap.add_argument("-o", "--output", required=True)
    ap.add_argument("--key-prefix", default="")
    ap.add_argument("--name-prefix", default="")
    ap.add_argument("--frozen", nargs="*", default=[])
    a = ap.parse_args()
    import onnx
    from onnx import helper, numpy_helper

    if os.path.abspath(a.output) == os.path.abspath(a.model):
        fail("-o must not name the input model")
    try:
        m = onnx.load(a.model)
    except Exception as e:  # noqa: BLE001
        fail("%s: not an ONNX model (%s)" % (a.model, str(e).splitlines()[0]))
    params = load_state_dict(a.state_dict, a.key_prefix, a.name_prefix)
    for f in a.frozen:
        if f not in params:
            fail("--frozen %s: no such parameter in the state_dict" % f)
    g = m.graph
    floats = [t for t in g.initializer if t.data_type == onnx.TensorProto.FLOAT]
    values = {t.name: numpy_helper.to_array(t) for t in floats}
    source = {}   # initializer name -> (parameter, "exact" | "transposed")
    for name, v in values.items():
        if name in params:
            if params[name].shape != v.shape or not np.array_equal(params[name], v):
                fail("initializer '%s' is named like the parameter but holds other "
                     "values (another state_dict?)" % name)
            source[name] = (name, "exact")

    def matches(v, p):
        if p.shape == v.shape and np.array_equal(p, v):
            return "exact"
        if p.ndim == 2 and p.T.shape == v.shape and np.array_equal(p.T, v):
            return "transposed"
        return None

    for name, v in values.items():
        if name in source:
            continue
        hits = [(p, how) for p, pv in params.items() for how in [matches(v, pv)] if how]
        if not hits:
            continue  # a constant
        if is_fill(v):
            fail("initializer '%s' (shape %s, every element %r) equals parameter '%s': "
                 "a constant and a parameter cannot be told apart by value; export "
                 "with optimize=False" % (name, list(v.shape), float(v.flat[0]), hits[0][0]))
        if len(hits) > 1:
            fail("initializer '%s' equals several parameters (%s); export with "
                 "optimize=False" % (name, ", ".join(sorted(p for p, _ in hits))))
        source[name] = hits[0]
    used = {p for p, _ in source.values()}
    missing = sorted(set(params) - used)
    if missing:
        fail("parameter '%s' is in no initializer of %s (exactly or transposed)%s"
             % (missing[0], a.model, " nor %d others" % (len(missing) - 1) if len(missing) > 1 else ""))

    # Rebuild: the parameters as initializers, derived initializers and
    # constants as nodes in front of the graph.
    keep = [t for t in g.initializer if t.data_type != onnx.TensorProto.FLOAT]
    new_inits = [numpy_helper.from_array(params[p], p) for p in sorted(used)]
    front, mapping = [], {}
    for t in floats:
        if t.name in source:
            p, how = source[t.name]
            mapping[t.name] = p if how == "exact" else p + "^T"
            if t.name != p:
                front.append(helper.make_node(
                    "Transpose" if how == "transposed" else "Identity", [p], [t.name],
                    name="hc_map/" + t.name, **({"perm": [1, 0]} if how == "transposed" else {})))
        else:
            mapping[t.name] = "constant"
            front.append(helper.make_node("Constant", [], [t.name], name="hc_const/" + t.name,
                                          value=numpy_helper.from_array(values[t.name], t.name)))
    nodes = front + list(g.node)
    del g.initializer[:]
    g.initializer.extend(keep + new_inits)
    del g.node[:]
    g.node.extend(nodes)
    derived = {t.name for t in floats} - used
    inputs = [i for i in g.input if i.name not in derived]
    del g.input[:]
    g.input.extend(inputs)
    meta = {p.key: p.value for p in m.metadata_props}
    meta["hc.param_map"] = json.dumps(mapping, sort_keys=True)
    if a.frozen:
        meta["hc.frozen"] = ",".join(a.frozen)
    del m.metadata_props[:]
    for k, v in sorted(meta.items()):
        m.metadata_props.add(key=k, value=v)
    onnx.save(m, a.output)
    print("%s: %d parameters (%d by name, %d by value), %d constants"
          % (a.output, len(used), sum(1 for n, (p, _) in source.items() if n == p),
             sum(1 for n, (p, _) in source.items() if n != p),
             sum(1 for v in mapping.values() if v == "constant")))


if __name__ == "__main__":
    main()
