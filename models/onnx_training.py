"""ONNX's own training description (ModelProto.training_info) in its standard
form, as hc-compile consumes it:

  algorithm:  grad.P... = Gradient(P..., zs...; xs=[P...], zs=[...], y=loss)
              new.P..., training.V_new.P..., training.H_new.P...
                  = Adam(training.R, training.T, P..., grad.P...,
                         training.V.P..., training.H.P...)      (ai.onnx.preview.training)
              training.T_new = Add(training.T, training.one)
  update_binding:  P <- new.P, training.V.P <- training.V_new.P, ...,
                   training.T <- training.T_new
  initialization:  training.T_init = Constant(0); training.T <- training.T_init

R, T, the moments (zeros) and the constant one are algorithm initializers;
the inference graph is left as it is.
"""

import numpy as np

DOMAIN = "ai.onnx.preview.training"


def add_training_info(m, trainable, zs=(), lr=1e-4, beta1=0.9, beta2=0.999, eps=1e-6,
                      weight_decay=0.0, weight_decay_post=0.0, loss=None):
    """Adds the standard training_info to ModelProto `m` (in place): Adam over
    the float initializers named in `trainable` (in that order)."""
    import onnx
    from onnx import helper, numpy_helper, TensorProto

    inits = {t.name: t for t in m.graph.initializer}
    missing = [p for p in trainable if p not in inits]
    if missing:
        raise ValueError("trainable names that are not initializers: %s" % missing[:5])
    loss = loss or m.graph.output[0].name
    ti = m.training_info.add()
    alg = ti.algorithm
    alg.name = "hc_training_step"
    grads = ["grad." + p for p in trainable]
    alg.node.append(helper.make_node(
        "Gradient", list(trainable) + list(zs), grads, name="gradient", domain=DOMAIN,
        xs=list(trainable), zs=list(zs), y=loss))
    xs_new = ["new." + p for p in trainable]
    vs = ["training.V." + p for p in trainable]
    hs = ["training.H." + p for p in trainable]
    vs_new = ["training.V_new." + p for p in trainable]
    hs_new = ["training.H_new." + p for p in trainable]
    alg.node.append(helper.make_node(
        "Adam", ["training.R", "training.T"] + list(trainable) + grads + vs + hs,
        xs_new + vs_new + hs_new, name="adam", domain=DOMAIN,
        alpha=float(beta1), beta=float(beta2), epsilon=float(eps),
        norm_coefficient=float(weight_decay), norm_coefficient_post=float(weight_decay_post)))
    alg.node.append(helper.make_node("Add", ["training.T", "training.one"],
                                     ["training.T_new"], name="count_step"))
    alg.initializer.extend([
        numpy_helper.from_array(np.array(lr, dtype=np.float32), "training.R"),
        numpy_helper.from_array(np.array(0, dtype=np.int64), "training.T"),
        numpy_helper.from_array(np.array(1, dtype=np.int64), "training.one"),
    ])
    for p, v, h in zip(trainable, vs, hs):
        zeros = np.zeros(tuple(inits[p].dims), dtype=np.float32)
        alg.initializer.extend([numpy_helper.from_array(zeros, v),
                                numpy_helper.from_array(zeros, h)])
    for p, x_new, v, v_new, h, h_new in zip(trainable, xs_new, vs, vs_new, hs, hs_new):
        shape = list(inits[p].dims)
        for name in (x_new, v_new, h_new):
            alg.output.append(helper.make_tensor_value_info(name, TensorProto.FLOAT, shape))
        for key, value in ((p, x_new), (v, v_new), (h, h_new)):
            ti.update_binding.add(key=key, value=value)
    alg.output.append(helper.make_tensor_value_info("training.T_new", TensorProto.INT64, []))
    ti.update_binding.add(key="training.T", value="training.T_new")

    init = ti.initialization
    init.name = "hc_training_init"
    init.node.append(helper.make_node(
        "Constant", [], ["training.T_init"], name="reset_step",
        value=numpy_helper.from_array(np.array(0, dtype=np.int64))))
    init.output.append(helper.make_tensor_value_info("training.T_init", TensorProto.INT64, []))
    ti.initialization_binding.add(key="training.T", value="training.T_init")

    if not any(o.domain == DOMAIN for o in m.opset_import):
        m.opset_import.append(helper.make_opsetid(DOMAIN, 1))
    return m
