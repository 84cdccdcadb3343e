#!/usr/bin/env -S /usr/bin/python3
"""Writes a corpus of broken training_info files into OUT_DIR, each a small
model (test/import/Inputs/training_model.py) with one defect, and
manifest.json: file, the exit code hc-compile must give (2: bad input, 3:
valid but not supported), strings its one stderr line must contain, and
extra flags."""
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "import", "Inputs"))
from training_model import model  # noqa: E402


def node(m, name):
    return next(n for n in m.training_info[0].algorithm.node if n.name == name)


def binding(m, key, field="update_binding"):
    return next(b for b in getattr(m.training_info[0], field) if b.key == key)


def attr(n, name):
    return next(a for a in n.attribute if a.name == name)


def cases():
    import numpy as np
    from onnx import helper, numpy_helper
    DOMAIN = "ai.onnx.preview.training"

    def drop_opset(m):
        keep = [o for o in m.opset_import if o.domain != DOMAIN]
        del m.opset_import[:]
        m.opset_import.extend(keep)

    def opset_v2(m):
        next(o for o in m.opset_import if o.domain == DOMAIN).version = 2

    def remove_attr(n, name):
        keep = [a for a in n.attribute if a.name != name]
        del n.attribute[:]
        n.attribute.extend(keep)

    def set_input(n, i, name):
        n.input[i] = name

    def drop_input(n, i):
        del n.input[i]

    def algo_init(m, name):
        return next(t for t in m.training_info[0].algorithm.initializer if t.name == name)

    def replace_init(m, name, array):
        t = algo_init(m, name)
        t.CopyFrom(numpy_helper.from_array(array, name))

    def add_alg_output(m, name):
        m.training_info[0].algorithm.output.append(
            helper.make_tensor_value_info(name, 1, [1]))

    def init_float_t(m):
        c = m.training_info[0].initialization.node[0]
        attr(c, "value").t.CopyFrom(numpy_helper.from_array(np.array(0.0, np.float32)))

    def init_random(m):
        g = m.training_info[0].initialization
        g.node.append(helper.make_node("RandomNormal", [], ["w0"], shape=[4, 3]))
        g.output.append(helper.make_tensor_value_info("w0", 1, [4, 3]))
        m.training_info[0].initialization_binding.add(key="W", value="w0")

    def t_plus_two(m):
        replace_init(m, "training.one", np.array(2, np.int64))

    def extra_op(m):
        alg = m.training_info[0].algorithm
        alg.node.append(helper.make_node("Neg", ["training.R"], ["neg_r"], name="neg"))

    def momentum(m):
        m.training_info[0].algorithm.node.append(helper.make_node(
            "Momentum", ["training.R", "training.T", "W", "grad.W", "training.V.W"],
            ["mom.W", "mom.V"], name="momentum", domain=DOMAIN, alpha=0.9, beta=1.0,
            mode="standard", norm_coefficient=0.0))

    def two_infos(m):
        m.training_info.add().CopyFrom(m.training_info[0])

    def unbind(m, key):
        keep = [b for b in m.training_info[0].update_binding if b.key != key]
        del m.training_info[0].update_binding[:]
        m.training_info[0].update_binding.extend(keep)

    def clash(m):
        m.training_info[0].algorithm.initializer.append(
            numpy_helper.from_array(np.zeros(4, np.float32), "b"))

    def duplicate_output(m):
        node(m, "count_step").output[0] = "grad.W"

    def lr_mutable(m):
        alg = m.training_info[0].algorithm
        alg.node.append(helper.make_node(
            "Constant", [], ["r_next"], value=numpy_helper.from_array(np.array(2e-3, np.float32))))
        alg.output.append(helper.make_tensor_value_info("r_next", 1, []))
        m.training_info[0].update_binding.add(key="training.R", value="r_next")

    E, U = 2, 3
    return [
        # bad input (exit 2)
        ("no_training_opset", E, ["no opset import for ai.onnx.preview.training"], drop_opset),
        ("training_opset_v2", E, ["opset 2 of ai.onnx.preview.training is unknown"], opset_v2),
        ("update_key_unknown", E, ["update_binding key 'nope' is not an initializer"],
         lambda m: setattr(binding(m, "W"), "key", "nope")),
        ("update_value_unknown", E, ["update_binding value 'nowhere'", "not an output"],
         lambda m: setattr(binding(m, "W"), "value", "nowhere")),
        ("update_key_twice", E, ["update_binding key 'b' is bound twice"],
         lambda m: setattr(binding(m, "W"), "key", "b")),
        ("init_key_unknown", E, ["initialization_binding key 'nope'"],
         lambda m: setattr(binding(m, "training.T", "initialization_binding"), "key", "nope")),
        ("init_value_unknown", E, ["initialization_binding value 'nowhere'"],
         lambda m: setattr(binding(m, "training.T", "initialization_binding"), "value", "nowhere")),
        ("undefined_input", E, ["algorithm node 'adam' (Adam)", "input 'ghost' is undefined"],
         lambda m: set_input(node(m, "adam"), 6, "ghost")),
        ("undefined_gradient_x", E, ["node 'gradient' (Gradient)", "input 'ghost' is undefined"],
         lambda m: set_input(node(m, "gradient"), 0, "ghost")),
        ("unknown_training_op", E, ["unknown training op 'Gradiant'"],
         lambda m: setattr(node(m, "gradient"), "op_type", "Gradiant")),
        ("unknown_domain", E, ["unknown op domain 'com.example'"],
         lambda m: setattr(node(m, "adam"), "domain", "com.example")),
        ("adam_inputs_arity", E, ["Adam takes R, T and then N each of X, G, V, H", "got 9"],
         lambda m: drop_input(node(m, "adam"), 9)),
        ("adam_outputs_arity", E, ["Adam over 2 tensors has 6 outputs", "got 5"],
         lambda m: node(m, "adam").output.__delitem__(5)),
        ("adam_bad_attribute", E, ["unknown attribute 'gamma'"],
         lambda m: node(m, "adam").attribute.append(helper.make_attribute("gamma", 0.5))),
        ("adam_alpha_one", E, ["needs 0 <= alpha < 1"],
         lambda m: setattr(attr(node(m, "adam"), "alpha"), "f", 1.0)),
        ("gradient_no_y", E, ["Gradient needs the attributes xs and y"],
         lambda m: remove_attr(node(m, "gradient"), "y")),
        ("gradient_outputs", E, ["Gradient has 3 outputs for 2 xs"],
         lambda m: node(m, "gradient").output.append("grad.extra")),
        ("gradient_inputs_order", E, ["Gradient's inputs must be xs followed by zs"],
         lambda m: set_input(node(m, "gradient"), 0, "b")),
        ("t_not_int64", E, ["Adam's T 'training.T' must be a scalar int64"],
         lambda m: replace_init(m, "training.T", np.array(0.0, np.float32))),
        ("r_not_scalar", E, ["Adam's R 'training.R' must be a scalar float"],
         lambda m: replace_init(m, "training.R", np.array([1e-3], np.float32))),
        ("moment_shape", E, ["moment 'training.V.W' must be a float tensor shaped as 'W'"],
         lambda m: replace_init(m, "training.V.W", np.zeros((3, 4), np.float32))),
        ("algorithm_output_undefined", E, ["algorithm output 'ghost_out' is never produced"],
         lambda m: add_alg_output(m, "ghost_out")),
        ("init_value_type", E, ["initialization_binding gives 'training.T' a value of another type"],
         init_float_t),
        ("init_name_clash", E, ["algorithm initializer 'b' redefines a name of the inference graph"],
         clash),
        ("output_redefined", E, ["output 'grad.W' is already defined"], duplicate_output),
        ("flag_conflict", E, ["--optimizer conflicts with the model's training_info"], None,
         ["--optimizer", "adamw"]),
        # valid, not supported (exit 3)
        ("momentum", U, ["algorithm node 'momentum' (Momentum) is not supported"], momentum),
        ("two_training_infos", U, ["2 TrainingInfoProtos is not supported"], two_infos),
        ("gradient_not_of_loss", U, ["Gradient of 'sq' rather than the loss 'loss'"],
         lambda m: setattr(attr(node(m, "gradient"), "y"), "s", b"sq")),
        ("t_plus_two", U, ["updating T 'training.T' other than by T + 1 is not supported"],
         t_plus_two),
        ("x_not_bound", U, ["the X_new of 'W' not bound back", "is not supported"],
         lambda m: unbind(m, "W")),
        ("extra_op", U, ["algorithm node 'neg' (Neg) is not supported"], extra_op),
        ("random_initialization", U, ["(RandomNormal)", "Constant nodes only"], init_random),
        ("mutable_lr", U, ["learning rate R ('training.R') that is not a constant"], lr_mutable),
    ]


def main(argv):
    import onnx
    out = argv[1]
    os.makedirs(out, exist_ok=True)
    manifest = []
    for case in cases():
        name, code, must, mutate = case[:4]
        extra = case[4] if len(case) > 4 else []
        m = model(lr=1e-3)
        if mutate:
            mutate(m)
        onnx.save(m, os.path.join(out, name + ".onnx"))
        manifest.append({"file": name + ".onnx", "code": code, "must_contain": must,
                         "flags": extra})
    json.dump(manifest, open(os.path.join(out, "manifest.json"), "w"), indent=1)


if __name__ == "__main__":
    main(sys.argv)
