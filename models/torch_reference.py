#!/usr/bin/env -S /usr/bin/python3
"""PyTorch oracle for an exported DiT loss graph.

usage: /usr/bin/python3 models/torch_reference.py MODEL.onnx --batch N
           [--seed S] --out DIR

Rebuilds the DiT from the model's `hc.dit_config` metadata, loads every
parameter from the ONNX initializers by name (load_state_dict(strict=True);
external data is followed relative to the model's folder), draws inputs with
numpy's default_rng(seed) in this order:

    x_t   = rng.standard_normal((N, C, H, W), float32)
    t     = rng.integers(0, 1000, N)            int64
    y     = rng.integers(0, num_classes, N)     int64
    noise = rng.standard_normal((N, C, H, W), float32)

and runs the forward pass in float32 and in float64 (module.double(), inputs
upcast). It writes into DIR:

    x_t.npy t.npy y.npy noise.npy      the inputs (float32 / int64)
    loss.npy prediction.npy            float32 run (loss has shape [])
    loss_f64.npy prediction_f64.npy    float64 run
"""

import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

PROG = "torch_reference.py"


class _Parser(argparse.ArgumentParser):
    def error(self, message):
        sys.stderr.write("%s: error: %s\n" % (PROG, message))
        sys.exit(2)


def fail(msg, code=2):
    sys.stderr.write("%s: error: %s\n" % (PROG, msg))
    sys.exit(code)


def load_model(path):
    """-> (onnx.ModelProto with external data loaded, config dict)."""
    import onnx
    try:
        m = onnx.load(path, load_external_data=True)
    except Exception as e:  # noqa: BLE001 - any load failure is a usage error here
        fail("%s: cannot load ONNX model: %s" % (path, str(e).splitlines()[0] if str(e) else type(e).__name__))
    meta = {p.key: p.value for p in m.metadata_props}
    if "hc.dit_config" not in meta:
        fail("%s: no hc.dit_config metadata (not written by models/export_dit.py?)" % path)
    try:
        cfg = json.loads(meta["hc.dit_config"])
    except ValueError as e:
        fail("%s: hc.dit_config is not JSON: %s" % (path, e))
    return m, cfg


def build_module(m, cfg):
    import numpy as np
    import torch
    from onnx import numpy_helper
    import dit as ditlib

    dit = ditlib.dit_from_config(cfg)
    state = {}
    for init in m.graph.initializer:
        state[init.name] = torch.from_numpy(np.array(numpy_helper.to_array(init), copy=True))
    expected = set(dit.state_dict().keys())
    missing = sorted(expected - set(state))
    if missing:
        fail("initializers missing for parameters: %s" % ", ".join(missing[:8]))
    extra = sorted(set(state) - expected)
    if extra:
        sys.stderr.write("%s: warning: ignoring initializers that are not DiT parameters: %s\n"
                         % (PROG, ", ".join(extra[:8])))
        for k in extra:
            del state[k]
    dit.load_state_dict(state, strict=True)
    return ditlib.DiTLoss(dit, cfg["in_channels"], with_output=True)


def draw_inputs(cfg, batch, seed):
    import numpy as np
    rng = np.random.default_rng(seed)
    c, s = cfg["in_channels"], cfg["image_size"]
    x_t = rng.standard_normal((batch, c, s, s), dtype=np.float32)
    t = rng.integers(0, 1000, batch).astype(np.int64)
    y = rng.integers(0, cfg["num_classes"], batch).astype(np.int64)
    noise = rng.standard_normal((batch, c, s, s), dtype=np.float32)
    return {"x_t": x_t, "t": t, "y": y, "noise": noise}


def run(module, inputs, dtype):
    import torch
    module = module.to(dtype)
    module.eval()  # no Dropout/BatchNorm in DiT; label dropout is never on here
    with torch.no_grad():
        loss, pred = module(torch.from_numpy(inputs["x_t"]).to(dtype),
                            torch.from_numpy(inputs["t"]),
                            torch.from_numpy(inputs["y"]),
                            torch.from_numpy(inputs["noise"]).to(dtype))
    return loss.numpy(), pred.numpy()


def main(argv=None):
    ap = _Parser(description="PyTorch reference outputs for an exported DiT loss graph.")
    ap.add_argument("model", help="MODEL.onnx written by models/export_dit.py")
    ap.add_argument("--batch", type=int, required=True)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", required=True, help="output folder (created if missing)")
    a = ap.parse_args(sys.argv[1:] if argv is None else argv)
    if a.batch <= 0:
        fail("--batch must be positive, got %d" % a.batch)
    if a.seed < 0:
        fail("--seed must be non-negative, got %d" % a.seed)
    if not os.path.isfile(a.model):
        fail("%s: no such file" % a.model)

    import numpy as np
    import torch
    torch.set_num_threads(max(1, torch.get_num_threads()))

    m, cfg = load_model(a.model)
    x_in = [i for i in m.graph.input if i.name == "x_t"]
    if x_in:
        d0 = x_in[0].type.tensor_type.shape.dim[0]
        if d0.HasField("dim_value") and d0.dim_value != a.batch:
            sys.stderr.write("%s: warning: %s has a static batch of %d, reference runs batch %d\n"
                             % (PROG, a.model, d0.dim_value, a.batch))
    module = build_module(m, cfg)
    inputs = draw_inputs(cfg, a.batch, a.seed)
    loss32, pred32 = run(module, inputs, torch.float32)
    loss64, pred64 = run(module, inputs, torch.float64)

    os.makedirs(a.out, exist_ok=True)
    for k, v in inputs.items():
        np.save(os.path.join(a.out, k + ".npy"), v)
    np.save(os.path.join(a.out, "loss.npy"), np.asarray(loss32, dtype=np.float32).reshape(()))
    np.save(os.path.join(a.out, "prediction.npy"), pred32.astype(np.float32))
    np.save(os.path.join(a.out, "loss_f64.npy"), np.asarray(loss64, dtype=np.float64).reshape(()))
    np.save(os.path.join(a.out, "prediction_f64.npy"), pred64.astype(np.float64))
    l32, l64 = float(loss32), float(loss64)
    rel = abs(l32 - l64) / max(abs(l64), 1e-30)
    pdiff = float(np.max(np.abs(pred32.astype(np.float64) - pred64)))
    print("%s: batch %d seed %d: loss f32 %.9g, f64 %.17g (rel diff %.2e), "
          "prediction max |f32-f64| %.2e -> %s"
          % (os.path.basename(a.model), a.batch, a.seed, l32, l64, rel, pdiff, a.out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
