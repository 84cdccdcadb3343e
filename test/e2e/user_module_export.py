#!/usr/bin/env python3
"""A user's own DiT-like module exported by models/export_training.py, with
PyTorch's own step beside it, in export_torch2.py's layout (NAME.onnx,
NAME.inputs/, NAME.ref.npz) for test/e2e/torch2_exports.py to check.
Runs under Debian's torch 1.13 and under the anchors environment's 2.x.

usage: PY user_module_export.py --out DIR --name NAME --module timm|uncond|mlp2sdpa
           --exporter torchscript|dynamo [--opset N]

  timm      written here, not models/dit.py: its own parameter names, a
            learned position embedding, timm-style attention (qkv.unbind(0)),
            a label table that is not named like DiT's
  uncond    models/dit.py's DiT without classes (no y input)
  mlp2sdpa  models/dit.py's DiT with MLP ratio 2 and scaled_dot_product_attention
"""
import argparse
import math
import os
import sys

import numpy as np
import torch
from torch import nn

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "models"))
import dit as ditlib  # noqa: E402
import export_torch2  # noqa: E402
from export_training import export_training  # noqa: E402

SIZE, PATCH, CH, DIM, DEPTH, HEADS, CLASSES, BATCH = 8, 2, 4, 64, 2, 2, 10, 2


class TimmBlock(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.heads = heads
        self.norm1 = nn.LayerNorm(dim, elementwise_affine=False, eps=1e-6)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.norm2 = nn.LayerNorm(dim, elementwise_affine=False, eps=1e-6)
        self.fc1 = nn.Linear(dim, 4 * dim)
        self.fc2 = nn.Linear(4 * dim, dim)
        self.ada = nn.Sequential(nn.SiLU(), nn.Linear(dim, 6 * dim))

    def attention(self, x):
        b, n, d = x.shape
        qkv = self.qkv(x).reshape(b, n, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        q, k, v = qkv.unbind(0)
        a = (q @ k.transpose(-2, -1)) * (d // self.heads) ** -0.5
        return self.proj((a.softmax(dim=-1) @ v).transpose(1, 2).reshape(b, n, d))

    def forward(self, x, c):
        s1, g1, a1, s2, g2, a2 = self.ada(c).unsqueeze(1).chunk(6, dim=2)
        x = x + a1 * self.attention(self.norm1(x) * (1 + g1) + s1)
        h = self.norm2(x) * (1 + g2) + s2
        return x + a2 * self.fc2(nn.functional.gelu(self.fc1(h), approximate="tanh"))


class TimmStyleDiT(nn.Module):
    """A DiT written by a user: forward(x, t, y) -> [B, 2C, H, W]."""

    def __init__(self):
        super().__init__()
        grid = SIZE // PATCH
        self.stem = nn.Conv2d(CH, DIM, PATCH, PATCH)
        self.pos = nn.Parameter(torch.zeros(1, grid * grid, DIM))
        self.time_mlp = nn.Sequential(nn.Linear(32, DIM), nn.SiLU(), nn.Linear(DIM, DIM))
        self.label_emb = nn.Embedding(CLASSES + 1, DIM)
        self.blocks = nn.ModuleList([TimmBlock(DIM, HEADS) for _ in range(DEPTH)])
        self.norm_out = nn.LayerNorm(DIM, elementwise_affine=False, eps=1e-6)
        self.mod_out = nn.Sequential(nn.SiLU(), nn.Linear(DIM, 2 * DIM))
        self.head = nn.Linear(DIM, PATCH * PATCH * 2 * CH)
        freqs = torch.exp(-math.log(10000.0) * torch.arange(16, dtype=torch.float32) / 16)
        self.register_buffer("freqs", freqs, persistent=False)

    def forward(self, x, t, y):
        b = x.shape[0]
        h = self.stem(x).flatten(2).transpose(1, 2) + self.pos
        arg = t.float()[:, None] * self.freqs[None]
        c = self.time_mlp(torch.cat([torch.cos(arg), torch.sin(arg)], dim=1)) + self.label_emb(y)
        for blk in self.blocks:
            h = blk(h, c)
        shift, scale = self.mod_out(c).unsqueeze(1).chunk(2, dim=2)
        h = self.head(self.norm_out(h) * (1 + scale) + shift)
        g = SIZE // PATCH
        h = h.reshape(b, g, g, PATCH, PATCH, 2 * CH).permute(0, 5, 1, 3, 2, 4)
        return h.reshape(b, 2 * CH, SIZE, SIZE)


def make(name, seed):
    torch.manual_seed(seed)
    if name == "timm":
        m = TimmStyleDiT()
    else:
        m = ditlib.DiT(image_size=SIZE, patch_size=PATCH, in_channels=CH, hidden_size=DIM,
                       depth=DEPTH, num_heads=HEADS, learn_sigma=True,
                       num_classes=0 if name == "uncond" else CLASSES,
                       mlp_ratio=2.0 if name == "mlp2sdpa" else 4.0,
                       attention="sdpa" if name == "mlp2sdpa" else "index")
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in m.parameters():
            if p.requires_grad:
                p.copy_(torch.randn(p.shape, generator=gen) * (0.05 if p.dim() >= 2 else 0.02))
    return m


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--name", required=True)
    ap.add_argument("--module", required=True, choices=("timm", "uncond", "mlp2sdpa"))
    ap.add_argument("--exporter", required=True, choices=("torchscript", "dynamo"))
    ap.add_argument("--opset", type=int, default=None)
    a = ap.parse_args()
    opset = a.opset or (18 if a.exporter == "dynamo" else 17)
    model = make(a.module, 0)
    g = torch.Generator().manual_seed(1)
    named = {"x_t": torch.randn(BATCH, CH, SIZE, SIZE, generator=g),
             "t": torch.tensor([3, 617], dtype=torch.int64)}
    if a.module != "uncond":
        named["y"] = torch.randint(0, CLASSES, (BATCH,), generator=g)
    base = os.path.join(a.out, a.name)
    export_training(model, named, base + ".onnx", opset=opset, exporter=a.exporter,
                    num_classes=CLASSES if a.module != "uncond" else None,
                    class_dropout_prob=0.1 if a.module != "uncond" else None)
    # PyTorch's own step on the exported objective (mse), names as exported.
    named["noise"] = torch.randn(BATCH, CH, SIZE, SIZE, generator=g)
    wrapper = ditlib.loss_wrapper(model, "mse", None, CH, a.module != "uncond")
    ref = export_torch2.references(wrapper, named)
    ref = {k.replace("/dit.", "/"): v for k, v in ref.items()}
    os.makedirs(base + ".inputs", exist_ok=True)
    for k, v in named.items():
        np.save(os.path.join(base + ".inputs", k + ".npy"), v.numpy())
    np.savez(base + ".ref.npz", **ref)
    print("%s: %s module, torch %s, %s exporter, opset %d"
          % (a.name, a.module, torch.__version__, a.exporter, opset))


if __name__ == "__main__":
    main()
