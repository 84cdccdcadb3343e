"""Writes a model whose initializer dims multiply past int64 (each dim under
the importer's per-dim limit of 2^31): the importer must refuse it in one
line, with no signed overflow on the way (found by fuzz.import)."""
import sys

import onnx
from onnx import TensorProto, helper

w = TensorProto()
w.name = "w"
w.data_type = TensorProto.FLOAT
w.dims.extend([38320128000 // 2**20, 2**31 - 1, 2**31 - 1, 717092597])
w.float_data.append(1.0)
g = helper.make_graph([helper.make_node("ReduceSum", ["w"], ["loss"], keepdims=0)], "g", [],
                      [helper.make_tensor_value_info("loss", TensorProto.FLOAT, [])], [w])
m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)
with open(sys.argv[1], "wb") as f:
    f.write(m.SerializeToString())
