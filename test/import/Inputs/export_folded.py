"""Exports a Linear on 3-D input with torch's default constant folding, which
turns the weight into a transposed initializer named 'onnx::MatMul_N'."""
import sys

import torch


class M(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(4, 3)

    def forward(self, x):
        return (self.proj(x) ** 2).mean()


torch.onnx.export(M(), (torch.randn(2, 5, 4),), sys.argv[1], opset_version=13,
                  input_names=["x"], output_names=["loss"],
                  do_constant_folding=True)
