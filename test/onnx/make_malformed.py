#!/usr/bin/env -S /usr/bin/python3
"""Write a corpus of malformed / hostile ONNX files for hc-compile's importer.

usage: /usr/bin/python3 test/onnx/make_malformed.py OUTDIR [--check]

Every case starts from one tiny valid loss graph

    x [2,4] f32, n [2,4] f32 (inputs), w [4] f32 (initializer)
    loss = ReduceMean(Pow(Sub(Mul(x, w), n), 2))       (scalar f32)

(written as OUTDIR/base_valid.onnx, the control that must import cleanly) and
breaks exactly one thing. The ir10_* cases break its IR-10 / opset-18..21
form (OUTDIR/base_valid_ir10.onnx, the dynamo exporter's; the second
control), which hc validates with its own schemas. OUTDIR/manifest.json lists the broken files:

    [{"file": NAME, "case": description, "level": "file"|"graph"|"node",
      "must_contain": [substrings]}, ...]

The consumer runs `hc-compile OUTDIR/NAME --batch 2 --emit=hc` and expects
exit code 2 and exactly one line on stderr containing every must_contain
substring: always the file name, plus the node name and op type for
node-level problems (and the offending value name / path where there is one).

Files are serialized with SerializeToString (or written as raw bytes), never
through onnx.checker. --check additionally reports, per case, whether onnx's
own parser/checker (full_check) rejects it: informational only.
"""

import json
import os
import struct
import sys

PROG = "make_malformed.py"


def fail(msg):
    sys.stderr.write("%s: error: %s\n" % (PROG, msg))
    sys.exit(2)


def _onnx():
    import onnx
    import onnx.numpy_helper  # noqa: F401  (not imported by `import onnx`)
    from onnx import TensorProto, helper
    return onnx, TensorProto, helper


# --------------------------------------------------------------------------
# The valid base graph and helpers
# --------------------------------------------------------------------------

def f32(name, dims):
    _, TP, helper = _onnx()
    return helper.make_tensor_value_info(name, TP.FLOAT, dims)


def base_parts():
    """Nodes, inputs, outputs, initializers of the valid loss graph."""
    import numpy as np
    onnx, TP, helper = _onnx()
    nodes = [
        helper.make_node("Mul", ["x", "w"], ["xw"], name="mul0"),
        helper.make_node("Sub", ["xw", "n"], ["d"], name="sub0"),
        helper.make_node("Constant", [], ["two"], name="two0",
                         value=helper.make_tensor("two_t", TP.FLOAT, [], [2.0])),
        helper.make_node("Pow", ["d", "two"], ["sq"], name="sq0"),
        helper.make_node("ReduceMean", ["sq"], ["loss"], name="mean0", keepdims=0),
    ]
    inputs = [f32("x", [2, 4]), f32("n", [2, 4])]
    outputs = [f32("loss", [])]
    w = onnx.numpy_helper.from_array(np.array([0.5, -1.0, 2.0, 0.25], np.float32), "w")
    return nodes, inputs, outputs, [w]


def make(nodes, inputs, outputs, inits, opset=13, extra_opsets=(), name="hc_malformed",
         ir=8):
    onnx, TP, helper = _onnx()
    g = helper.make_graph(nodes, name, inputs, outputs, initializer=inits)
    ops = [helper.make_opsetid("", opset)] + [helper.make_opsetid(d, v) for d, v in extra_opsets]
    m = helper.make_model(g, opset_imports=ops, producer_name="hc test/onnx/make_malformed.py")
    m.ir_version = ir
    return m


def base_model():
    return make(*base_parts())


def replace_node(nodes, name, new):
    return [new if n.name == name else n for n in nodes]


def external_tensor(name, dims, location, offset=None, length=None):
    onnx, TP, helper = _onnx()
    t = onnx.TensorProto()
    t.name = name
    t.data_type = TP.FLOAT
    t.dims.extend(dims)
    t.data_location = onnx.TensorProto.EXTERNAL
    for k, v in (("location", location), ("offset", offset), ("length", length)):
        if v is not None:
            e = t.external_data.add()
            e.key, e.value = k, str(v)
    return t


def _varint(n):
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _ld(field, payload):
    """A length-delimited protobuf field."""
    return _varint((field << 3) | 2) + _varint(len(payload)) + payload


def deep_nesting_bytes(depth=400):
    """ModelProto.graph -> node -> attribute(g) -> graph -> ... `depth` times:
    well-formed wire format that any sane parser refuses for its depth."""
    graph = _ld(2, b"leaf")                          # GraphProto.name
    for i in range(depth):
        attr = _ld(1, b"then_branch") + _varint((20 << 3) | 0) + _varint(5) + _ld(6, graph)
        node = _ld(4, b"If") + _ld(3, ("if%d" % i).encode()) + _ld(5, attr)
        graph = _ld(1, node)                         # GraphProto.node
    opset = _ld(8, _varint((2 << 3) | 0) + _varint(13))  # opset_import{version:13}
    return _varint((1 << 3) | 0) + _varint(8) + _ld(7, graph) + opset


# --------------------------------------------------------------------------
# The cases
# --------------------------------------------------------------------------

def build_cases(outdir):
    """Yields (file, case, level, must_contain, writer) with writer(path)."""
    import numpy as np
    onnx, TP, helper = _onnx()
    cases = []

    def add(fname, case, level, must, payload, extra_files=None):
        cases.append((fname, case, level, [fname] + list(must), payload, extra_files or {}))

    valid_bytes = base_model().SerializeToString()

    # ---- file level: not parseable as ModelProto ----
    add("empty.onnx", "empty file (0 bytes)", "file", [], b"")
    add("truncated.onnx", "truncated protobuf: first half of a valid model", "file", [],
        valid_bytes[:len(valid_bytes) // 2])
    # ONNX *text* format by mistake: not the binary protobuf hc-compile reads.
    add("text.onnx", "a text file (ONNX textproto, not binary protobuf)", "file", [],
        b'ir_version: 8\nopset_import { domain: "" version: 13 }\n'
        b'graph { name: "not_binary" }\n')
    rnd = np.random.default_rng(20240601).integers(0, 256, 4096, dtype=np.uint8).tobytes()
    add("random.onnx", "4 KiB of random bytes", "file", [], rnd)
    add("deep_nesting.onnx", "400 nested If subgraphs (parser recursion bomb)", "file", [],
        deep_nesting_bytes(400))

    # ---- model / graph level ----
    nodes, ins, outs, inits = base_parts()
    add("future_opset.onnx", "default domain imported at opset 99", "file", ["99"],
        make(nodes, ins, outs, inits, opset=99))

    nodes, ins, outs, inits = base_parts()
    add("no_output.onnx", "graph declares no outputs", "graph", ["output"],
        make(nodes, ins, [], inits))

    nodes, ins, outs, inits = base_parts()
    nodes.append(helper.make_node("Cast", ["loss"], ["loss_i"], name="cast0", to=TP.INT64))
    add("int_loss.onnx", "the single output is int64, not a float scalar", "graph", ["loss_i"],
        make(nodes, ins, [helper.make_tensor_value_info("loss_i", TP.INT64, [])], inits))

    nodes, ins, outs, inits = base_parts()
    nodes = nodes[:-2] + [helper.make_node("Pow", ["d", "two"], ["loss_vec"], name="sq0")]
    add("nonscalar_loss.onnx", "the single output loss_vec has shape [2,4], not a scalar",
        "graph", ["loss_vec"], make(nodes, ins, [f32("loss_vec", [2, 4])], inits))

    # x_bad [2, D] -> ReduceMean over axis 1 (keepdims) -> [2, 1] * w -> [2, 4]:
    # shapes stay consistent, only the declared input dim is absurd.
    def reduced_input(xname, dim):
        nodes, ins, outs, inits = base_parts()
        rm = helper.make_node("ReduceMean", [xname], ["xm"], name="rm0", axes=[1], keepdims=1)
        mul = helper.make_node("Mul", ["xm", "w"], ["xw"], name="mul0")
        return make([rm, mul] + nodes[1:], [f32(xname, [2, dim]), f32("n", [2, 4])], outs, inits)

    add("huge_input_dim.onnx", "graph input x_huge with a dim of 10^12 (8 TB)", "graph",
        ["x_huge"], reduced_input("x_huge", 10 ** 12))
    add("negative_input_dim.onnx", "graph input x_neg with dim_value -3", "graph", ["x_neg"],
        reduced_input("x_neg", -3))

    nodes, ins, outs, inits = base_parts()
    add("string_input.onnx", "graph input of element type string feeding Mul", "graph",
        ["string"],
        make([helper.make_node("Mul", ["text_in", "w"], ["xw"], name="mul0")] + nodes[1:],
             [helper.make_tensor_value_info("text_in", TP.STRING, [2, 4]), f32("n", [2, 4])],
             outs, inits))

    # ---- node level ----
    nodes, ins, outs, inits = base_parts()
    nodes = replace_node(nodes, "mul0", helper.make_node("FooBar", ["x", "w"], ["xw"],
                                                         name="foo0"))
    add("unknown_op.onnx", "unknown op type FooBar in the default domain", "node",
        ["foo0", "FooBar"], make(nodes, ins, outs, inits))

    nodes, ins, outs, inits = base_parts()
    nodes = replace_node(nodes, "mul0", helper.make_node(
        "Scale", ["x", "w"], ["xw"], name="scale0", domain="com.example.nope"))
    add("unknown_domain.onnx", "op from an unknown domain (com.example.nope)", "node",
        ["scale0", "Scale", "com.example.nope"],
        make(nodes, ins, outs, inits, extra_opsets=[("com.example.nope", 1)]))

    nodes, ins, outs, inits = base_parts()
    nodes = replace_node(nodes, "sub0", helper.make_node("Sub", ["xw", "nowhere"], ["d"],
                                                         name="sub0"))
    add("undefined_input.onnx", "node input names a value nothing defines", "node",
        ["sub0", "Sub", "nowhere"], make(nodes, ins, outs, inits))

    nodes, ins, outs, inits = base_parts()
    loop = [
        helper.make_node("Add", ["x", "loop_b_out"], ["loop_a_out"], name="loop_a"),
        helper.make_node("Add", ["loop_a_out", "w"], ["loop_b_out"], name="loop_b"),
        helper.make_node("Sub", ["loop_b_out", "n"], ["d"], name="sub0"),
    ]
    add("cycle.onnx", "two Add nodes feed each other (cycle)", "node", ["loop_", "Add"],
        make(loop + nodes[2:], ins, outs, inits))

    nodes, ins, outs, inits = base_parts()
    table = onnx.numpy_helper.from_array(np.arange(40, dtype=np.float32).reshape(10, 4), "table")
    g_nodes = [helper.make_node("Gather", ["table", "idx"], ["xw"], name="gather0", axis=0)]
    # idx is float: xw = table[idx] would be [2,4]
    add("float_indices.onnx", "Gather with float32 indices", "node", ["gather0", "Gather"],
        make(g_nodes + nodes[1:], [f32("idx", [2]), f32("n", [2, 4])], outs, [table]))

    nodes, ins, outs, inits = base_parts()
    shape_c = helper.make_node("Constant", [], ["shape_c"], name="shape_c0",
                               value=helper.make_tensor("shape_t", TP.INT64, [2], [2, -5]))
    rs = helper.make_node("Reshape", ["x", "shape_c"], ["xr"], name="reshape0")
    nodes = [shape_c, rs, helper.make_node("Mul", ["xr", "w"], ["xw"], name="mul0")] + nodes[1:]
    add("reshape_negative.onnx", "Reshape to a constant shape [2,-5]", "node",
        ["reshape0", "Reshape"], make(nodes, ins, outs, inits))

    nodes, ins, outs, inits = base_parts()
    nodes = replace_node(nodes, "mean0", helper.make_node(
        "Softmax", ["sq"], ["sm"], name="softmax0", axis=7))
    nodes.append(helper.make_node("ReduceMean", ["sm"], ["loss"], name="mean0", keepdims=0))
    add("bad_axis.onnx", "Softmax axis 7 on a rank-2 tensor", "node",
        ["softmax0", "Softmax"], make(nodes, ins, outs, inits))

    nodes, ins, outs, inits = base_parts()
    dup = [helper.make_node("Mul", ["x", "w"], ["dup_val"], name="mul0"),
           helper.make_node("Mul", ["n", "w"], ["dup_val"], name="mul_dup"),
           helper.make_node("Sub", ["dup_val", "n"], ["d"], name="sub0")]
    add("duplicate_output.onnx", "two nodes define the same value dup_val", "node",
        ["mul_dup", "Mul", "dup_val"], make(dup + nodes[2:], ins, outs, inits))

    # ---- initializers / external data ----
    nodes, ins, outs, inits = base_parts()
    bad = onnx.TensorProto()
    bad.name, bad.data_type = "w_bad", TP.FLOAT
    bad.dims.extend([4])
    bad.raw_data = struct.pack("<3f", 1.0, 2.0, 3.0)  # 12 bytes for 4 floats
    nodes = replace_node(nodes, "mul0", helper.make_node("Mul", ["x", "w_bad"], ["xw"],
                                                         name="mul0"))
    add("init_size_mismatch.onnx", "initializer w_bad: dims [4] but 12 bytes of raw_data",
        "graph", ["w_bad"], make(nodes, ins, outs, [bad]))

    nodes, ins, outs, inits = base_parts()
    big = onnx.TensorProto()
    big.name, big.data_type = "w_overflow", TP.FLOAT
    big.dims.extend([1 << 62, 4])  # element count overflows int64
    big.raw_data = b"\0" * 16
    nodes = replace_node(nodes, "mul0", helper.make_node("Mul", ["x", "w_overflow"], ["xw"],
                                                         name="mul0"))
    add("init_dims_overflow.onnx", "initializer dims [2^62, 4]: element count overflows int64",
        "graph", ["w_overflow"], make(nodes, ins, outs, [big]))

    nodes, ins, outs, inits = base_parts()
    add("ext_missing.onnx", "external data file does not exist", "graph",
        ["w_missing.bin"],
        make(nodes, ins, outs, [external_tensor("w", [4], "w_missing.bin", 0, 16)]))

    add("ext_escape_relative.onnx", "external data location ../../etc/passwd", "graph",
        ["../../etc/passwd"],
        make(nodes, ins, outs, [external_tensor("w", [4], "../../etc/passwd", 0, 16)]))

    add("ext_escape_absolute.onnx", "external data location /etc/passwd (absolute)", "graph",
        ["/etc/passwd"],
        make(nodes, ins, outs, [external_tensor("w", [4], "/etc/passwd", 0, 16)]))

    w16 = struct.pack("<4f", 0.5, -1.0, 2.0, 0.25)
    add("ext_out_of_range.onnx", "external data offset 4096 + length 16 past a 16-byte file",
        "graph", ["w_range.bin"],
        make(nodes, ins, outs, [external_tensor("w", [4], "w_range.bin", 4096, 16)]),
        extra_files={"w_range.bin": w16})

    add("ext_length_mismatch.onnx", "external data length 8 for a [4] float tensor (16 bytes)",
        "graph", ["w_len.bin"],
        make(nodes, ins, outs, [external_tensor("w", [4], "w_len.bin", 0, 8)]),
        extra_files={"w_len.bin": w16})

    add("ext_short_file.onnx", "external data without length, file holds 8 of 16 bytes",
        "graph", ["w_short.bin"],
        make(nodes, ins, outs, [external_tensor("w", [4], "w_short.bin")]),
        extra_files={"w_short.bin": w16[:8]})

    cases += build_ir10_cases(add_to=[])
    return cases


def base_ir10(opset=18):
    """The base graph as PyTorch 2.x's dynamo exporter files are: IR 10 and
    an ai.onnx opset of 18..21 (hc's own schemas: Debian's libonnx 1.12 has
    none for them), with ReduceMean-18's optional axes input left out."""
    return make(*base_parts(), opset=opset, ir=10)


def build_ir10_cases(add_to):
    """IR 10 / opsets 18..21 (issue 27): what hc's own schemas must refuse."""
    onnx, TP, helper = _onnx()
    cases = add_to

    def add(fname, case, level, must, payload):
        cases.append((fname, case, level, [fname] + list(must), payload, {}))

    def with_node(old, new, opset=18, extra=()):
        nodes, ins, outs, inits = base_parts()
        nodes = replace_node(nodes, old, new)
        for n in extra:
            nodes.insert(0, n)
        return make(nodes, ins, outs, inits, opset=opset, ir=10)

    valid = base_ir10().SerializeToString()
    add("ir10_truncated.onnx", "IR 10 model cut in half", "file", [], valid[:len(valid) // 2])
    m = base_ir10()
    m.ir_version = 11
    add("ir11.onnx", "IR version 11, newer than hc reads", "file", ["IR version 11"], m)
    add("ir10_opset22.onnx", "ai.onnx opset 22, newer than hc's schemas", "file", ["22"],
        base_ir10(opset=22))
    # Gelu exists from opset 20; approximate is a string, "none" or "tanh".
    add("ir10_gelu_bad_approximate.onnx", "Gelu approximate='fast' (not none|tanh)", "node",
        ["gelu0", "Gelu", "approximate", "fast"],
        with_node("mul0", helper.make_node("Gelu", ["x"], ["xw"], name="gelu0",
                                           approximate="fast"), opset=20))
    add("ir10_gelu_int_approximate.onnx", "Gelu approximate given as an INT", "node",
        ["gelu0", "Gelu", "approximate", "STRING"],
        with_node("mul0", helper.make_node("Gelu", ["x"], ["xw"], name="gelu0",
                                           approximate=1), opset=20))
    add("ir10_gelu_at_18.onnx", "Gelu in an opset-18 model (Gelu is opset 20)", "node",
        ["gelu0", "Gelu", "opset 20"],
        with_node("mul0", helper.make_node("Gelu", ["x"], ["xw"], name="gelu0"), opset=18))
    add("ir10_gelu_two_inputs.onnx", "Gelu with two inputs", "node", ["gelu0", "Gelu", "inputs"],
        with_node("mul0", helper.make_node("Gelu", ["x", "w"], ["xw"], name="gelu0"),
                  opset=20))
    add("ir10_unknown_op20.onnx", "unknown op type FooBar in an opset-20 model", "node",
        ["foo0", "FooBar"],
        with_node("mul0", helper.make_node("FooBar", ["x", "w"], ["xw"], name="foo0"),
                  opset=20))
    add("ir10_unsupported_op20.onnx", "AffineGrid (a real opset-20 op DiT does not use)",
        "node", ["grid0", "AffineGrid"],
        with_node("mul0", helper.make_node("AffineGrid", ["x", "w"], ["xw"], name="grid0"),
                  opset=20))
    # Wrong types: operands, attributes, initializer element types.
    add("ir10_mixed_types.onnx", "Mul of an int64 and a float tensor at opset 18", "node",
        ["mul0", "Mul"],
        with_node("mul0", helper.make_node("Mul", ["xi", "w"], ["xw"], name="mul0"),
                  extra=[helper.make_node("Cast", ["x"], ["xi"], name="cast0", to=TP.INT64)]))
    add("ir10_reducemean_axes_attr.onnx",
        "ReduceMean-18 with the opset-17 'axes' attribute", "node",
        ["mean0", "ReduceMean", "axes"],
        with_node("mean0", helper.make_node("ReduceMean", ["sq"], ["loss"], name="mean0",
                                            axes=[0, 1], keepdims=0)))
    add("ir10_keepdims_float.onnx", "ReduceMean keepdims given as a FLOAT", "node",
        ["mean0", "ReduceMean", "keepdims", "INT"],
        with_node("mean0", helper.make_node("ReduceMean", ["sq"], ["loss"], name="mean0",
                                            keepdims=0.0)))
    split_sizes = helper.make_node("Constant", [], ["sizes"], name="sizes0",
                                   value=helper.make_tensor("s", TP.INT64, [2], [2, 2]))
    add("ir10_split_both.onnx", "Split-18 with both a split input and num_outputs", "node",
        ["split0", "Split", "num_outputs"],
        with_node("mul0", helper.make_node("Split", ["x", "sizes"], ["xw", "rest"],
                                           name="split0", axis=1, num_outputs=2),
                  extra=[split_sizes]))
    add("ir10_split_num_outputs.onnx", "Split-18 num_outputs 3 with 2 outputs", "node",
        ["split0", "Split", "num_outputs"],
        with_node("mul0", helper.make_node("Split", ["x"], ["xw", "xb"], name="split0",
                                           axis=1, num_outputs=3)))
    pos = helper.make_node("Constant", [], ["pos"], name="pos0",
                           value=helper.make_tensor("p", TP.INT64, [], [5]))
    add("ir10_sequence_at_range.onnx", "SequenceAt position 5 of a 4-piece sequence", "node",
        ["at0", "SequenceAt", "5"],
        with_node("mul0", helper.make_node("SequenceAt", ["seq", "pos"], ["xw"], name="at0"),
                  extra=[pos, helper.make_node("SplitToSequence", ["x"], ["seq"],
                                               name="seq0", axis=1, keepdims=1)]))
    nodes, ins, outs, inits = base_parts()
    add("ir10_sequence_too_long.onnx", "SplitToSequence of a 10^6-long axis in pieces of 1",
        "node", ["seq0", "SplitToSequence", "1000000"],
        make([helper.make_node("SplitToSequence", ["xl"], ["seq"], name="seq0", axis=1),
              helper.make_node("Constant", [], ["pos"], name="pos0",
                               value=helper.make_tensor("p", TP.INT64, [], [0])),
              helper.make_node("SequenceAt", ["seq", "pos"], ["xs"], name="at0"),
              helper.make_node("ReduceMean", ["xs"], ["loss"], name="mean0", keepdims=0)],
             [f32("xl", [2, 10 ** 6])], outs, [], opset=18, ir=10))
    # If's branches are judged by the same schemas: a bad Gelu inside one.
    branch = helper.make_graph(
        [helper.make_node("Gelu", ["x"], ["gx"], name="gelu_in_branch", approximate="fast")],
        "then", [], [f32("gx", [2, 4])])
    other = helper.make_graph([helper.make_node("Identity", ["x"], ["ix"], name="id0")],
                              "else", [], [f32("ix", [2, 4])])
    cond = helper.make_node("Constant", [], ["cond"], name="cond0",
                            value=helper.make_tensor("c", TP.BOOL, [], [1]))
    add("ir10_if_branch_bad_gelu.onnx", "Gelu approximate='fast' inside an If branch",
        "node", ["if0", "If", "then_branch", "gelu_in_branch", "fast"],
        with_node("mul0", helper.make_node("Mul", ["xb", "w"], ["xw"], name="mul0"), opset=20,
                  extra=[helper.make_node("If", ["cond"], ["xb"], name="if0",
                                          then_branch=branch, else_branch=other), cond]))
    nodes, ins, outs, inits = base_parts()
    shapeless = helper.make_tensor_value_info("x", TP.FLOAT, None)
    add("ir10_shapeless_input.onnx", "graph input x with an element type but no shape",
        "graph", ["'x'", "shape"], make(nodes, [shapeless, ins[1]], outs, inits, opset=18, ir=10))
    # IR 10 at opset <= 17: libonnx's checker judges it as IR 8 (IR 9/10
    # only add types and function overloads hc refuses where used).
    nodes, ins, outs, inits = base_parts()
    add("ir10_opset17_unknown_op.onnx", "unknown op FooBar in an IR-10, opset-17 model", "node",
        ["foo0", "FooBar"],
        make(replace_node(nodes, "mul0", helper.make_node("FooBar", ["x", "w"], ["xw"],
                                                          name="foo0")),
             ins, outs, inits, opset=17, ir=10))
    nodes, ins, outs, inits = base_parts()
    nodes[0].attribute.extend([helper.make_attribute("bogus", 1)])
    add("ir10_opset17_bad_attr.onnx", "Mul with an attribute 'bogus', IR 10 at opset 17",
        "node", ["mul0", "Mul", "bogus"], make(nodes, ins, outs, inits, opset=17, ir=10))
    nodes, ins, outs, inits = base_parts()
    f8 = onnx.TensorProto()
    f8.name, f8.data_type = "w", 17  # FLOAT8E4M3FN (IR 9), unknown to onnx 1.12
    f8.dims.extend([4])
    f8.raw_data = b"\x38\x38\x38\x38"
    add("ir10_float8_initializer.onnx", "initializer w of element type 17 (FLOAT8E4M3FN)",
        "graph", ["w", "element type 17"], make(nodes, ins, outs, [f8], opset=18, ir=10))
    return cases


def onnx_verdict(path):
    """What onnx itself says (informational)."""
    import onnx
    try:
        with open(path, "rb") as f:
            data = f.read()
        m = onnx.ModelProto()
        m.ParseFromString(data)
    except Exception as e:  # noqa: BLE001
        return "parse error: %s" % (str(e).splitlines()[0] if str(e) else type(e).__name__)
    if not data:
        return "parses as an empty ModelProto"
    try:
        onnx.checker.check_model(m, full_check=True)
    except Exception as e:  # noqa: BLE001
        s = str(e).strip().splitlines()
        return "checker: %s" % (s[0][:150] if s else type(e).__name__)
    return "accepted by onnx.checker"


def main(argv):
    check = False
    args = []
    for a in argv:
        if a == "--check":
            check = True
        elif a.startswith("-"):
            fail("unknown option %s (usage: %s OUTDIR [--check])" % (a, PROG))
        else:
            args.append(a)
    if len(args) != 1:
        fail("expected exactly one OUTDIR argument (usage: %s OUTDIR [--check])" % PROG)
    outdir = args[0]
    if os.path.exists(outdir) and not os.path.isdir(outdir):
        fail("%s exists and is not a folder" % outdir)
    os.makedirs(outdir, exist_ok=True)

    with open(os.path.join(outdir, "base_valid.onnx"), "wb") as f:
        f.write(base_model().SerializeToString())
    with open(os.path.join(outdir, "base_valid_ir10.onnx"), "wb") as f:
        f.write(base_ir10().SerializeToString())

    manifest = []
    for fname, case, level, must, payload, extra in build_cases(outdir):
        data = payload if isinstance(payload, bytes) else payload.SerializeToString()
        with open(os.path.join(outdir, fname), "wb") as f:
            f.write(data)
        for xname, xdata in extra.items():
            with open(os.path.join(outdir, xname), "wb") as f:
                f.write(xdata)
        manifest.append({"file": fname, "case": case, "level": level, "must_contain": must})
    with open(os.path.join(outdir, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1)
        f.write("\n")
    print("wrote %d malformed files + base_valid.onnx + manifest.json to %s"
          % (len(manifest), outdir))
    if check:
        print("%-28s %s" % ("base_valid.onnx", onnx_verdict(os.path.join(outdir, "base_valid.onnx"))))
        for e in manifest:
            print("%-28s %s" % (e["file"], onnx_verdict(os.path.join(outdir, e["file"]))))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
