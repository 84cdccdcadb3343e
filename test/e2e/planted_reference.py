#!/usr/bin/env -S /usr/bin/python3
"""models/torch_reference.py with a planted error in the flow objective, so
that a parity test can show it fails when PyTorch's loss differs:
  t-flip   the loss reads t as 1 - t
  weight   the loss weight 1% too large
usage: planted_reference.py PLANT torch_reference.py's arguments..."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))), "models"))
import torch_reference  # noqa: E402
import transport  # noqa: E402

plant = sys.argv[1]
if plant == "t-flip":
    _loss = transport.Objective.loss
    transport.Objective.loss = lambda self, out, t, target: _loss(self, out, 1 - t, target)
elif plant == "weight":
    _weight = transport.Objective.loss_weight_of
    transport.Objective.loss_weight_of = lambda self, t: _weight(self, t) * 1.01
else:
    sys.exit("planted_reference.py: unknown plant %r (t-flip or weight)" % plant)
sys.exit(torch_reference.main(sys.argv[2:]))
