"""Oracles from the anchors environment (tools/install-anchors.sh), run with
its python by trainer_check.py; prints JSON on stdout.

  lr KIND WARMUP TOTAL LR STEPS   the learning rate of optimizer steps
      1..STEPS under diffusers.optimization's get_KIND_schedule_with_warmup
      (transformers' closed forms) driving torch.optim.lr_scheduler.LambdaLR
  tensorboard DIR   every record of every event file in DIR through
      TensorBoard's own record reader (its CRC-32C checks raise on a bad
      record), then the scalars through its EventAccumulator:
      {"records": N, "files": F, "scalars": {tag: [[step, value], ...]}}
"""
import glob
import json
import os
import sys


def lr_oracle(kind, warmup, total, lr, steps):
    import torch
    from diffusers import optimization as o
    p = torch.nn.Parameter(torch.zeros(1))
    opt = torch.optim.SGD([p], lr=lr)
    if kind == "constant":
        sched = o.get_constant_schedule_with_warmup(opt, num_warmup_steps=warmup)
    elif kind == "linear":
        sched = o.get_linear_schedule_with_warmup(opt, num_warmup_steps=warmup,
                                                  num_training_steps=total)
    else:
        sched = o.get_cosine_schedule_with_warmup(opt, num_warmup_steps=warmup,
                                                  num_training_steps=total)
    out = []
    for _ in range(steps):
        out.append(opt.param_groups[0]["lr"])
        opt.step()
        sched.step()
    return out


def tensorboard_read(folder):
    from tensorboard.compat.tensorflow_stub import pywrap_tensorflow
    from tensorboard.backend.event_processing import event_accumulator
    files = sorted(glob.glob(os.path.join(folder, "events.out.tfevents.*")))
    records = 0
    for f in files:
        reader = pywrap_tensorflow.PyRecordReader_New(f.encode(), 0, None, None)
        while True:
            try:
                reader.GetNext()
            except Exception as e:  # OutOfRange at the end; DataLoss on a bad CRC
                if type(e).__name__ == "OutOfRangeError":
                    break
                raise
            records += 1
    acc = event_accumulator.EventAccumulator(folder, size_guidance={"scalars": 0})
    acc.Reload()
    scalars = {tag: [[e.step, e.value] for e in acc.Scalars(tag)]
               for tag in acc.Tags()["scalars"]}
    return {"records": records, "files": len(files), "scalars": scalars}


def main():
    what = sys.argv[1]
    if what == "lr":
        kind, warmup, total, lr, steps = sys.argv[2:7]
        print(json.dumps(lr_oracle(kind, int(warmup), int(total), float(lr), int(steps))))
    elif what == "tensorboard":
        print(json.dumps(tensorboard_read(sys.argv[2])))
    else:
        sys.exit("unknown oracle %r" % what)


if __name__ == "__main__":
    main()
