"""Writes models with ONNX If nodes (argv: KIND OUT.onnx):
  shape    x float[N, 1, 3]; If(Shape(x)[1] == 1) squeezes dim 1 (then
           branch: Squeeze, else: Identity), If(Shape(x)[2] == 1) likewise
           (the else branch is taken); loss = mean(first) + mean(second)
           -- torch's guarded squeeze under a dynamic batch;
  runtime  the condition is a graph input: not known at import."""
import sys

import onnx
from onnx import TensorProto, helper

kind, out = sys.argv[1], sys.argv[2]


def guarded_squeeze(tag, src, axis, out_shape_then, out_shape_else):
    then_g = helper.make_graph(
        [helper.make_node("Constant", [], [tag + "_ax"],
                          value=helper.make_tensor("v", TensorProto.INT64, [1], [axis])),
         helper.make_node("Squeeze", [src, tag + "_ax"], [tag + "_sq"])],
        tag + "_then", [],
        [helper.make_tensor_value_info(tag + "_sq", TensorProto.FLOAT, out_shape_then)])
    else_g = helper.make_graph(
        [helper.make_node("Identity", [src], [tag + "_id"])], tag + "_else", [],
        [helper.make_tensor_value_info(tag + "_id", TensorProto.FLOAT, out_shape_else)])
    return then_g, else_g


nodes, inputs = [], [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 1, 3])]
if kind == "shape":
    for tag, axis, then_shape in (("a", 1, ["N", 3]), ("b", 2, ["N", 1])):
        then_g, else_g = guarded_squeeze(tag, "x", axis, then_shape, ["N", 1, 3])
        nodes += [
            helper.make_node("Shape", ["x"], [tag + "_s"]),
            helper.make_node("Constant", [], [tag + "_i"],
                             value=helper.make_tensor("v", TensorProto.INT64, [], [axis])),
            helper.make_node("Gather", [tag + "_s", tag + "_i"], [tag + "_d"], axis=0),
            helper.make_node("Constant", [], [tag + "_one"],
                             value=helper.make_tensor("v", TensorProto.INT64, [], [1])),
            helper.make_node("Equal", [tag + "_d", tag + "_one"], [tag + "_c"]),
            helper.make_node("If", [tag + "_c"], [tag + "_y"],
                             then_branch=then_g, else_branch=else_g),
            helper.make_node("ReduceMean", [tag + "_y"], [tag + "_m"], keepdims=0),
        ]
    nodes.append(helper.make_node("Add", ["a_m", "b_m"], ["loss"]))
else:
    inputs.append(helper.make_tensor_value_info("c", TensorProto.BOOL, []))
    then_g, else_g = guarded_squeeze("a", "x", 1, ["N", 3], ["N", 1, 3])
    nodes += [helper.make_node("If", ["c"], ["y"], then_branch=then_g, else_branch=else_g),
              helper.make_node("ReduceMean", ["y"], ["loss"], keepdims=0)]
graph = helper.make_graph(nodes, "g", inputs,
                          [helper.make_tensor_value_info("loss", TensorProto.FLOAT, [])])
m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
m.ir_version = 8
onnx.checker.check_model(m, full_check=True)
onnx.save(m, out)
