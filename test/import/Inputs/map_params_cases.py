"""Writes a tiny model in the form of the dynamo exporter's optimize=True
output (IR 10, opset 18, producer pytorch) and state_dicts for
models/map_params.py (test/import/map-params.test):

  y = MatMul(x [N,3], val_3) + lin.bias;  loss = ReduceMean(y * y * val_7)

val_3 is lin.weight [4,3] transposed, folded by the exporter; val_7 a float
constant (2.0). PREFIX.npz is the matching state_dict; the others break it:
  PREFIX.missing.npz   a parameter the graph does not hold
  PREFIX.twice.npz     two parameters equal to val_3's transpose
  PREFIX.other.npz     lin.bias holding other values than the file's
  PREFIX.fill.onnx/.npz  a zero-initialized weight (all elements equal)

usage: map_params_cases.py PREFIX"""
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

prefix = sys.argv[1]
rng = np.random.default_rng(0)
weight = rng.standard_normal((4, 3)).astype(np.float32)
bias = rng.standard_normal(4).astype(np.float32)


def model(w_folded):
    nodes = [
        helper.make_node("MatMul", ["x", "val_3"], ["xw"], name="node_matmul"),
        helper.make_node("Add", ["xw", "lin.bias"], ["y"], name="node_add"),
        helper.make_node("Mul", ["y", "y"], ["sq"], name="node_sq"),
        helper.make_node("Mul", ["sq", "val_7"], ["sq2"], name="node_scale"),
        helper.make_node("ReduceMean", ["sq2"], ["loss"], name="node_mean", keepdims=0),
    ]
    inits = [numpy_helper.from_array(bias, "lin.bias"),
             numpy_helper.from_array(w_folded, "val_3"),
             numpy_helper.from_array(np.array(2.0, np.float32), "val_7")]
    g = helper.make_graph(nodes, "main_graph",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3])],
                          [helper.make_tensor_value_info("loss", TensorProto.FLOAT, [])],
                          initializer=inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)],
                          producer_name="pytorch", producer_version="2.11.0")
    m.ir_version = 10
    return m


onnx.save(model(weight.T.copy()), prefix + ".onnx")
np.savez(prefix + ".npz", **{"lin.weight": weight, "lin.bias": bias})
np.savez(prefix + ".missing.npz", **{"lin.weight": weight, "lin.bias": bias,
                                     "head.weight": np.ones((2, 2), np.float32) * 3})
np.savez(prefix + ".twice.npz", **{"lin.weight": weight, "lin.bias": bias,
                                   "copy.weight": weight.copy()})
np.savez(prefix + ".other.npz", **{"lin.weight": weight, "lin.bias": bias + 1})
zeros = np.zeros((4, 3), np.float32)
onnx.save(model(zeros.T.copy()), prefix + ".fill.onnx")
np.savez(prefix + ".fill.npz", **{"lin.weight": zeros, "lin.bias": bias})
