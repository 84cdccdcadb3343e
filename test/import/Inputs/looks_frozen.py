"""Writes a small model whose float initializers are: `pos_embed`, DiT's
fixed 2-D sin-cos table [1, 16, 8] (models/dit.py builds it); `pos_1d`, a
1-D sin-cos table [6, 4]; `near`, pos_embed with one entry off by 1e-3;
`frozen_pe`, the sin-cos table again but named in hc.frozen; `unused`,
which does not reach the loss; `w`, an ordinary weight. argv: OUT.onnx"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "..", "..", "models"))
from dit import sincos_2d_pos_embed  # noqa: E402

pe = sincos_2d_pos_embed(8, 4).astype(np.float32)[None]      # [1, 16, 8]
pos = np.arange(6, dtype=np.float64)[:, None]
omega = 1.0 / 10000 ** (np.arange(2) / 2.0)
pe1 = np.concatenate([np.sin(pos * omega), np.cos(pos * omega)], 1).astype(np.float32)
near = pe.copy()
near[0, 5, 3] += 1e-3
rng = np.random.default_rng(0)
inits = {"pos_embed": pe, "pos_1d": pe1, "near": near, "frozen_pe": pe.copy(),
         "unused": rng.standard_normal((3, 3)).astype(np.float32),
         "w": rng.standard_normal((16, 8)).astype(np.float32)}
nodes = [
    helper.make_node("Add", ["x", "pos_embed"], ["a"]),
    helper.make_node("Add", ["a", "near"], ["b"]),
    helper.make_node("Add", ["b", "frozen_pe"], ["c"]),
    helper.make_node("Mul", ["c", "w"], ["d"]),
    helper.make_node("ReduceMean", ["d"], ["l1"], keepdims=0),
    helper.make_node("ReduceMean", ["pos_1d"], ["l2"], keepdims=0),
    helper.make_node("Add", ["l1", "l2"], ["loss"]),
]
graph = helper.make_graph(
    nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 16, 8])],
    [helper.make_tensor_value_info("loss", TensorProto.FLOAT, [])],
    [numpy_helper.from_array(v, k) for k, v in inits.items()])
m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
m.ir_version = 8
m.metadata_props.add(key="hc.frozen", value="frozen_pe")
onnx.checker.check_model(m, full_check=True)
onnx.save(m, sys.argv[1])
