"""Learning-rate schedules as hc-run --lr-schedule applies them, for the
PyTorch side of tests and baselines: the multiplier of the base rate for
torch.optim.lr_scheduler.LambdaLR (stepped after each optimizer step), the
closed forms of transformers' get_{constant,linear,cosine}_schedule_with_warmup,
with hc-run's floor --min-lr (the decay ends at min_lr / lr instead of 0) and
held at the floor past the decay's end. tools/hc-run/lr_schedule.h states
the same forms."""
import math


def multiplier(kind, warmup, decay, lr, min_lr=0.0):
    """f(done) with lr_at(done) = lr * f(done), done = optimizer steps taken."""
    if kind not in ("constant", "linear", "cosine"):
        raise ValueError("unknown schedule %r" % kind)
    floor = min_lr / lr if lr > 0 else 0.0

    def f(done):
        if done < warmup:
            return float(done) / float(max(1, warmup))
        if kind == "constant":
            return 1.0
        span = float(max(1, decay - warmup))
        if kind == "linear":
            factor = max(0.0, float(decay - done) / span)
        else:
            progress = min(1.0, float(done - warmup) / span)
            factor = max(0.0, 0.5 * (1.0 + math.cos(math.pi * progress)))
        return factor if min_lr == 0 else factor * (1.0 - floor) + floor
    return f


def add_arguments(group):
    group.add_argument("--lr-schedule", choices=("constant", "linear", "cosine"), default=None,
                       help="as hc-run --lr-schedule (LambdaLR)")
    group.add_argument("--warmup-steps", type=int, default=0)
    group.add_argument("--decay-steps", type=int, default=None,
                       help="default: the number of training steps")
    group.add_argument("--min-lr", type=float, default=0.0)


def scheduler(optimizer, a, lr, steps):
    """LambdaLR for the arguments add_arguments() made, or None."""
    import torch
    if a.lr_schedule is None:
        return None
    decay = a.decay_steps if a.decay_steps is not None else steps
    return torch.optim.lr_scheduler.LambdaLR(
        optimizer, multiplier(a.lr_schedule, a.warmup_steps, decay, lr, a.min_lr))
