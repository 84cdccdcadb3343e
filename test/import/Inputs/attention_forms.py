"""Exports one self-attention written the way some DiT code writes q, k, v
(argv: FORM OUT.onnx [dynamic]), with torch 1.13's TorchScript exporter at
opset 13 in training mode; the loss is mean(attention(x)^2). B=2, N=5,
D=16, 2 heads of 8, scale on q (8^-0.5).
  chunk_last   q, k, v = qkv.chunk(3, dim=-1), each reshaped and transposed
  split_last   torch.split(qkv, D, dim=-1), each reshaped and permuted
  chunk0       the [3, B, H, N, Dh] permute chunked along dim 0, squeezed
               (with a dynamic batch the exporter guards the squeeze by an If)"""
import sys

import torch
import torch.nn as nn


class Attention(nn.Module):
    def __init__(self, form, dim=16, heads=2):
        super().__init__()
        self.form, self.h, self.dh = form, heads, dim // heads
        self.qkv = nn.Linear(dim, 3 * dim)

    def forward(self, x):
        B, N, C = x.shape
        qkv = self.qkv(x)
        if self.form == "chunk_last":
            q, k, v = [t.reshape(B, N, self.h, self.dh).transpose(1, 2)
                       for t in qkv.chunk(3, dim=-1)]
        elif self.form == "split_last":
            q, k, v = [t.reshape(B, N, self.h, self.dh).permute(0, 2, 1, 3)
                       for t in torch.split(qkv, C, dim=-1)]
        elif self.form == "chunk0":
            t = qkv.reshape(B, N, 3, self.h, self.dh).permute(2, 0, 3, 1, 4)
            q, k, v = [u.squeeze(0) for u in t.chunk(3, dim=0)]
        else:
            raise SystemExit("unknown form " + self.form)
        q = q * self.dh ** -0.5
        a = (q @ k.transpose(-2, -1)).softmax(dim=-1)
        return ((a @ v).transpose(1, 2).reshape(B, N, C) ** 2).mean()


form, out = sys.argv[1], sys.argv[2]
dynamic = len(sys.argv) > 3 and sys.argv[3] == "dynamic"
torch.manual_seed(0)
torch.onnx.export(Attention(form), (torch.randn(2, 5, 16),), out, opset_version=13,
                  input_names=["x"], output_names=["loss"], do_constant_folding=False,
                  training=torch.onnx.TrainingMode.TRAINING,
                  dynamic_axes={"x": {0: "batch"}} if dynamic else None)
