#!/usr/bin/env -S /usr/bin/python3
"""A small linear-regression model with ONNX's standard training_info
(models/onnx_training.py): pred = x·Wᵀ + b, loss = mean((pred - target)²);
W and b trainable, `frozen` a float initializer outside Gradient's xs.

usage: training_model.py OUT.onnx [--no-training-info] [--lr R] ...
Importable: model(**hyper) returns the ModelProto."""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "..", "..", "models"))
from onnx_training import add_training_info  # noqa: E402


def model(training=True, **hyper):
    import onnx
    from onnx import helper, numpy_helper, TensorProto
    rng = np.random.default_rng(0)
    f32 = lambda a, n: numpy_helper.from_array(np.asarray(a, np.float32), n)
    nodes = [
        helper.make_node("Transpose", ["W"], ["Wt"], perm=[1, 0]),
        helper.make_node("MatMul", ["x", "Wt"], ["xw"]),
        helper.make_node("Add", ["xw", "b"], ["pred0"]),
        helper.make_node("Mul", ["pred0", "frozen"], ["pred"]),
        helper.make_node("Sub", ["pred", "target"], ["diff"]),
        helper.make_node("Mul", ["diff", "diff"], ["sq"]),
        helper.make_node("ReduceMean", ["sq"], ["loss"], keepdims=0),
    ]
    g = helper.make_graph(
        nodes, "linear_regression",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3]),
         helper.make_tensor_value_info("target", TensorProto.FLOAT, [2, 4])],
        [helper.make_tensor_value_info("loss", TensorProto.FLOAT, [])],
        [f32(rng.standard_normal((4, 3)), "W"), f32(rng.standard_normal(4), "b"),
         f32(np.full(4, 0.5), "frozen")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)],
                          producer_name="hc test")
    m.ir_version = 8
    if training:
        add_training_info(m, ["W", "b"], zs=["x", "target"], **hyper)
    return m


if __name__ == "__main__":
    import argparse
    import onnx
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--no-training-info", action="store_true")
    for k, d in (("lr", 1e-3), ("beta1", 0.9), ("beta2", 0.999), ("eps", 1e-6),
                 ("weight-decay", 0.0), ("weight-decay-post", 0.0)):
        ap.add_argument("--" + k, type=float, default=d)
    a = ap.parse_args()
    hyper = dict(lr=a.lr, beta1=a.beta1, beta2=a.beta2, eps=a.eps,
                 weight_decay=a.weight_decay, weight_decay_post=a.weight_decay_post)
    onnx.save(model(not a.no_training_info, **hyper), a.out)
