"""Export any DiT-like PyTorch module with a training objective to ONNX, the
way hc-compile wants it.

    from export_training import export_training
    export_training(model, {"x_t": x, "t": t, "y": y}, "my_dit.onnx",
                    objective="mse", num_classes=1000, class_dropout_prob=0.1)

`model` is your own nn.Module whose forward takes (x, t) or (x, t, y) and
returns the prediction [B, C or 2C, H, W] (2C: a learned sigma). The
example inputs give the batch and shapes: x float32 [B, C, H, W]; t int64
timesteps for DDPM objectives, float32 in [0, 1] for flow ones; y int64
labels (leave it out for an unconditional model). The objective's own inputs
(noise, target, x_start) are added here:

  mse       mean((out[:, :C] - noise)^2)                     DiT's DDPM loss
  mse+vlb   mse + the variational bound on the learned variance (2C outputs)
  flow      models/transport.py's flow-matching loss (`flow`: an Objective)

What it takes care of, so that a user need not know it:
  * the export that keeps every parameter: training mode, no constant
    folding (an eval-mode export with folding merges equal initializers,
    e.g. zero-initialised adaLN layers, and the model trains tied);
  * parameters as initializers under the module's own state_dict names;
  * frozen parameters (requires_grad=False, or `frozen`) recorded as
    hc.frozen; the metadata hc.dit_config (shapes, classes, objective) and
    hc.loss that hc-run reads;
  * opset 17's LayerNormalization without an affine scale (torch 1.13);
  * the dynamo exporter (torch >= 2.5, exporter="dynamo"), with the VLB's
    stop-gradient as hc's custom op.

Returns (onnx.ModelProto, seconds). Bad arguments raise UsageError with one
line naming what is wrong.
"""
import json
import os
import shutil
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch  # noqa: E402

import dit as ditlib  # noqa: E402
import transport  # noqa: E402

# Parameters past this many bytes go to an external data file (protobuf's
# hard limit is 2 GB; DiT-XL/2 is ~2.7 GB).
EXTERNAL_DATA_THRESHOLD = 1 << 30
MODEL_INPUTS = ("x_t", "t", "y")
LOSS_TEXT = {
    "mse": "mean((prediction[:, :in_channels] - noise)^2)",
    "mse+vlb": "mean((prediction[:, :in_channels] - noise)^2) + mean(vlb_bits("
               "stop_gradient(prediction[:, :in_channels]), prediction[:, in_channels:], "
               "x_start, x_t, t)) (models/diffusion.py vlb_terms)",
    "flow": "models/transport.py Objective.loss(prediction[:, :in_channels], t, target) "
            "(dit_config.flow: path, prediction, loss weight)",
}


class UsageError(Exception):
    pass


def input_names(objective, conditional=True, cond_names=()):
    """The exported graph's inputs, in order: the model's (x_t, t, y, then
    the conditioning inputs of conditioning.py), then the objective's."""
    names = ["x_t", "t"] + (["y"] if conditional else []) + list(cond_names)
    if objective == "flow":
        return names + ["target"]
    return names + ["noise"] + (["x_start"] if objective == "mse+vlb" else [])


def export_training(module, example_inputs, output, objective="mse", flow=None, frozen=(),
                    opset=17, exporter="torchscript", dynamic_batch=False,
                    with_output=False, external_data=None, num_classes=None,
                    class_dropout_prob=None, config=None, training=None):
    """See the module docstring. `config`: more hc.dit_config entries (e.g.
    models/dit.py's sizes); `training`: ONNX Adam hyper-parameters for the
    model's own training_info (onnx_training.add_training_info), or None."""
    t0 = time.time()
    if not isinstance(module, torch.nn.Module):
        raise UsageError("module must be a torch.nn.Module, got %s" % type(module).__name__)
    if objective not in LOSS_TEXT:
        raise UsageError("unknown objective %r (expected %s)"
                         % (objective, ", ".join(LOSS_TEXT)))
    if exporter not in ("torchscript", "dynamo"):
        raise UsageError("exporter must be 'torchscript' or 'dynamo', got %r" % exporter)
    out_dir = os.path.dirname(os.path.abspath(output))
    if not os.path.isdir(out_dir):
        raise UsageError("output folder %s does not exist" % out_dir)
    cond_specs = list(getattr(module, "conds", ()))
    cond_names = [n for c in cond_specs for n in c.input_names()]
    named = _model_inputs(example_inputs, objective, cond_names)
    conditional = "y" in named
    x = named["x_t"]
    in_channels, height, width = x.shape[1], x.shape[2], x.shape[3]
    out_channels = _probe(module, named, cond_names)
    if out_channels not in (in_channels, 2 * in_channels):
        raise UsageError("the module returns %d channels for %d input channels; hc expects "
                         "C or 2C (a learned sigma)" % (out_channels, in_channels))
    learn_sigma = out_channels == 2 * in_channels
    if objective == "mse+vlb" and not learn_sigma:
        raise UsageError("objective mse+vlb trains the variance: the module must return 2C "
                         "channels (learned sigma)")
    if objective == "flow" and flow is None:
        flow = transport.Objective()
    params = dict(module.named_parameters())
    unknown = [n for n in frozen if n not in params]
    if unknown:
        raise UsageError("frozen names unknown parameters: %s" % ", ".join(unknown[:5]))

    stop = None
    if exporter == "dynamo" and objective == "mse+vlb":
        import export_torch2
        export_torch2.stop_gradient_op()  # registered before any tracing
        stop = export_torch2.stop_gradient_fn
    wrapper = ditlib.loss_wrapper(module, objective, flow, in_channels, conditional,
                                  with_output=with_output, stop_gradient=stop)
    names = input_names(objective, conditional, cond_names)
    args = tuple(named[n] for n in MODEL_INPUTS if n in named) + tuple(
        named[n] for n in cond_names) + _objective_inputs(x, objective)
    output_names = ["loss"] + (["prediction"] if with_output else [])
    dynamic_axes = None
    if dynamic_batch:
        dynamic_axes = {n: {0: "batch"} for n in names}
        if with_output:
            dynamic_axes["prediction"] = {0: "batch"}

    restore = {n: params[n].requires_grad for n in frozen}
    for n in frozen:
        params[n].requires_grad_(False)
    tmpdir = tempfile.mkdtemp(prefix=".export-", dir=out_dir)
    try:
        # torch writes >2 GB models as one external file per tensor next to
        # its output: export into a private folder, then write our own layout.
        path = os.path.join(tmpdir, "model.onnx")
        if exporter == "dynamo":
            _dynamo_export(wrapper, args, path, opset, names, output_names, dynamic_batch)
        else:
            _torchscript_export(wrapper, args, path, opset, names, output_names, dynamic_axes,
                                objective)
        import onnx
        m = onnx.load(path, load_external_data=True)
    finally:
        shutil.rmtree(tmpdir, ignore_errors=True)
    try:
        cfg = {"in_channels": in_channels, "image_size": height, "learn_sigma": learn_sigma,
               "num_classes": 0 if not conditional else num_classes}
        if width != height:
            cfg["image_width"] = width
        if class_dropout_prob is not None:
            cfg["class_dropout_prob"] = float(class_dropout_prob)
        cfg.update(config or {})
        if cond_specs:
            cfg["conds"] = [str(c) for c in cond_specs]
        if cfg["num_classes"] is None:
            del cfg["num_classes"]  # hc-run reads it off the label table
        cfg["opset"], cfg["objective"] = opset, objective
        if flow is not None:
            cfg["flow"] = flow.config()
        param_bytes = sum(p.numel() * p.element_size() for p in wrapper.parameters())
        if external_data is None:
            external_data = param_bytes > EXTERNAL_DATA_THRESHOLD
        frozen_names = [n for n, p in module.named_parameters() if not p.requires_grad]
        trainable = [n for n, p in module.named_parameters() if p.requires_grad]
        _finish(m, wrapper, output, cfg, frozen_names, trainable, names, objective,
                in_channels, (height, width), named["x_t"].shape[0], dynamic_batch,
                with_output, out_channels, external_data, training, exporter,
                {n: list(named[n].shape[1:]) for n in cond_names})
    finally:
        for n, g in restore.items():
            params[n].requires_grad_(g)
    return m, time.time() - t0


def _model_inputs(example_inputs, objective, cond_names=()):
    if isinstance(example_inputs, (tuple, list)):
        if len(example_inputs) not in (2, 3):
            raise UsageError("example_inputs: (x, t) or (x, t, y), got %d tensors"
                             % len(example_inputs))
        example_inputs = dict(zip(MODEL_INPUTS, example_inputs))
    if not isinstance(example_inputs, dict) or "x_t" not in example_inputs or \
            "t" not in example_inputs:
        raise UsageError("example_inputs: a dict with x_t and t (and y for a "
                         "class-conditional model)")
    extra = sorted(set(example_inputs) - set(MODEL_INPUTS) - set(cond_names))
    if extra:
        raise UsageError("example_inputs: unknown input %s (the model takes x_t, t, y%s; the "
                         "objective's inputs are made here)"
                         % (extra[0], "".join(", " + n for n in cond_names)))
    missing = [n for n in cond_names if n not in example_inputs]
    if missing:
        raise UsageError("example_inputs: the module's conditioning input %s is missing"
                         % missing[0])
    for n in cond_names:
        v = example_inputs[n]
        if not torch.is_tensor(v) or v.dtype != torch.float32 or v.shape[0] != \
                example_inputs["x_t"].shape[0]:
            raise UsageError("example_inputs: %s must be a float32 tensor with the batch "
                             "first" % n)
    x, t = example_inputs["x_t"], example_inputs["t"]
    if not torch.is_tensor(x) or x.dim() != 4 or x.dtype != torch.float32:
        raise UsageError("example_inputs: x_t must be a float32 tensor [B, C, H, W]")
    want_t = torch.float32 if objective == "flow" else torch.int64
    if not torch.is_tensor(t) or t.dtype != want_t or tuple(t.shape) != (x.shape[0],):
        raise UsageError("example_inputs: t must be %s [B] for objective %s"
                         % ("float32" if objective == "flow" else "int64", objective))
    y = example_inputs.get("y")
    if y is not None and (not torch.is_tensor(y) or y.dtype != torch.int64 or
                          tuple(y.shape) != (x.shape[0],)):
        raise UsageError("example_inputs: y must be int64 [B]")
    return {k: v for k, v in example_inputs.items() if v is not None}


def _probe(module, named, cond_names=()):
    """The module's output channels on the example inputs."""
    args = [named[n] for n in MODEL_INPUTS if n in named]
    if cond_names:
        args = [named["x_t"], named["t"], named.get("y"), {n: named[n] for n in cond_names}]
    with torch.no_grad():
        try:
            out = module(*args)
        except Exception as e:  # noqa: BLE001 - the user's forward, reported in one line
            raise UsageError("the module's forward(%s) fails on the example inputs: %s: %s"
                             % (", ".join(n for n in MODEL_INPUTS if n in named),
                                type(e).__name__, str(e).splitlines()[0] if str(e) else ""))
    x = named["x_t"]
    if not torch.is_tensor(out) or out.dim() != 4 or out.shape[0] != x.shape[0] or \
            tuple(out.shape[2:]) != tuple(x.shape[2:]):
        raise UsageError("the module must return one tensor [B, C', H, W] like x_t %s, got %s"
                         % (list(x.shape), list(out.shape) if torch.is_tensor(out)
                            else type(out).__name__))
    return int(out.shape[1])


def _objective_inputs(x, objective):
    g = torch.Generator().manual_seed(0)
    shaped = torch.randn(x.shape, generator=g)
    if objective == "mse+vlb":
        return shaped, torch.rand(x.shape, generator=g) * 2 - 1
    return (shaped,)


_LN17_REGISTERED = False


def register_layer_norm_opset17():
    """opset 17: LayerNormalization needs a Scale input. torch 1.13 passes the
    (absent) weight of an elementwise_affine=False LayerNorm straight
    through, which gives an invalid node. Pass a constant ones scale instead
    (and leave the optional bias out when there is none)."""
    global _LN17_REGISTERED
    if _LN17_REGISTERED:
        return
    from torch.onnx import symbolic_helper

    @symbolic_helper.parse_args("v", "is", "v", "v", "f", "none")
    def layer_norm17(g, inp, normalized_shape, weight, bias, eps, cudnn_enable):
        dtype = torch.float32
        st = inp.type().scalarType() if hasattr(inp.type(), "scalarType") else None
        if st == "Double":
            dtype = torch.float64
        elif st == "Half":
            dtype = torch.float16
        if weight is None or symbolic_helper._is_none(weight):
            weight = g.op("Constant", value_t=torch.ones(list(normalized_shape), dtype=dtype))
        inputs = [inp, weight]
        if not (bias is None or symbolic_helper._is_none(bias)):
            inputs.append(bias)
        return g.op("LayerNormalization", *inputs, epsilon_f=eps,
                    axis_i=-len(normalized_shape))

    torch.onnx.register_custom_op_symbolic("aten::layer_norm", layer_norm17, 17)
    _LN17_REGISTERED = True


def _torchscript_export(module, args, path, opset, names, output_names, dynamic_axes,
                        objective):
    if opset == 17:
        register_layer_norm_opset17()
    kwargs = {"dynamo": False} if "dynamo" in torch.onnx.export.__code__.co_varnames else {}
    if objective == "mse+vlb":
        kwargs["custom_opsets"] = {"hc": 1}  # dit.StopGradient's domain
    torch.onnx.export(
        module, args, path,
        export_params=True,
        training=torch.onnx.TrainingMode.TRAINING,
        do_constant_folding=False,
        keep_initializers_as_inputs=False,
        opset_version=opset,
        input_names=names,
        output_names=output_names,
        dynamic_axes=dynamic_axes,
        **kwargs)


def _dynamo_export(module, args, path, opset, names, output_names, dynamic_batch):
    if not hasattr(torch.onnx, "export") or "dynamo" not in torch.onnx.export.__code__.co_varnames:
        raise UsageError("exporter='dynamo' needs PyTorch >= 2.5 (this is %s); use "
                         "exporter='torchscript'" % torch.__version__)
    if opset < 18:
        raise UsageError("the dynamo exporter writes opset 18 or later, not %d" % opset)
    import export_torch2
    kwargs = {}
    if dynamic_batch:
        batch = torch.export.Dim("batch")
        kwargs["dynamic_shapes"] = tuple({0: batch} for _ in args)
    program = torch.onnx.export(
        module, args, dynamo=True, optimize=False, opset_version=opset,
        input_names=names, output_names=output_names,
        custom_translation_table=export_torch2.stop_gradient_translation(), **kwargs)
    program.save(path)


def _finish(m, wrapper, output, cfg, frozen, trainable, names, objective, in_channels, hw,
            batch, dynamic_batch, with_output, out_channels, external_data, training,
            exporter, cond_shapes):
    import onnx
    # Parameters must appear as initializers under their state_dict names
    # (torch names them after the wrapper's attribute "dit.": stripped) --
    # and nothing else may be a float initializer, since hc treats those as
    # trainable.
    inits = {i.name for i in m.graph.initializer}
    rename = {}
    for name, _ in wrapper.named_parameters():
        short = name[len("dit."):]
        if name in inits:
            rename[name] = short
        elif short in inits:
            rename[short] = short
        else:
            raise UsageError("parameter %s is missing from the initializers of %s (constant "
                             "folding or deduplication merged it into another?)"
                             % (short, output))
    extra = sorted(inits - set(rename))
    if extra and exporter == "torchscript":
        raise UsageError("unexpected initializers that are not parameters of the module: %s"
                         % ", ".join(extra[:10]))
    _rename_values(m.graph, rename)
    del m.metadata_props[:]
    for k, v in (("hc.frozen", ",".join(frozen)),
                 ("hc.dit_config", json.dumps(cfg, sort_keys=True)),
                 ("hc.loss", LOSS_TEXT[objective])):
        p = m.metadata_props.add()
        p.key, p.value = k, v
    m.producer_name = "hc models/export_training.py (torch %s, %s)" % (torch.__version__,
                                                                       exporter)
    m.doc_string = "DiT training loss; inputs %s; output loss" % ", ".join(names)
    _check_io(m, names, objective, in_channels, hw, batch, dynamic_batch, with_output,
              out_channels, cond_shapes)
    if training is not None:
        # Trainable: requires_grad parameters in state_dict order; data
        # inputs are Gradient's zs.
        from onnx_training import add_training_info
        add_training_info(m, trainable, zs=names, loss="loss", **training)
    data_name = os.path.basename(output) + ".data"
    data_path = os.path.join(os.path.dirname(os.path.abspath(output)), data_name)
    if os.path.exists(data_path):
        os.remove(data_path)  # onnx.save appends to an existing data file
    if external_data:
        onnx.save(m, output, save_as_external_data=True, all_tensors_to_one_file=True,
                  location=data_name, size_threshold=1024)
    else:
        # In memory too: the checker's full_check also runs strict shape inference.
        onnx.checker.check_model(m, full_check=True)
        onnx.save(m, output)
    onnx.checker.check_model(output, full_check=True)


def _rename_values(graph, rename):
    if all(k == v for k, v in rename.items()):
        return
    for init in graph.initializer:
        init.name = rename.get(init.name, init.name)
    for node in graph.node:
        for i, n in enumerate(node.input):
            if n in rename:
                node.input[i] = rename[n]


def _check_io(m, names, objective, c, hw, batch, dynamic, with_output, out_c, cond_shapes):
    def dims(vi):
        return [d.dim_param if d.dim_param else d.dim_value
                for d in vi.type.tensor_type.shape.dim]

    got = [(i.name, i.type.tensor_type.elem_type, dims(i)) for i in m.graph.input]
    if [g[0] for g in got] != names:
        raise RuntimeError("graph inputs are %s, expected %s" % ([g[0] for g in got], names))
    image = [c, hw[0], hw[1]]
    want = {"x_t": (1, image), "t": (1 if objective == "flow" else 7, []), "y": (7, []),
            "noise": (1, image), "target": (1, image), "x_start": (1, image)}
    want.update({n: (1, shape) for n, shape in cond_shapes.items()})
    for name, et, d in got:
        if et != want[name][0] or d[1:] != want[name][1] or (not dynamic and d[0] != batch):
            raise RuntimeError("input %s is (%d, %s), expected (%d, [B] + %s)"
                               % (name, et, d, want[name][0], want[name][1]))
    outs = [(o.name, o.type.tensor_type.elem_type) for o in m.graph.output]
    want_out = [("loss", 1)] + ([("prediction", 1)] if with_output else [])
    if outs != want_out:
        raise RuntimeError("graph outputs are %s, expected %s" % (outs, want_out))
