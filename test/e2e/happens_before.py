#!/usr/bin/env python3
"""The emitted program's ordering, checked as libhcrt's executor runs it
(runtime/src/exec/step_executor.cpp), independently of hc-verify-plan's
proof on the schedule: reads the tables of `hc-compile --emit=cpp` and
finds every pair of accesses to the same bytes, one a write, that no
happens-before edge orders. The edges: each cluster's stream in table
order; a cluster wait (cluster k after cluster j's first n counted entries:
every entry but a cluster wait is counted); a tier copy's start before its
bytes move and its bytes before its wait; the copy engine's FIFO, between
copies whose starts are themselves ordered. A kernel reads its inputs and
writes its outputs (the descriptors' byte ranges); a copy reads its source
and writes its target, from its start to its wait.

Checked in each kind of step the executor tells apart: one rank and one
micro-batch; two ranks; a micro-batch before the last of two, and the
last. In each, a scoped wait (its `nin`, hcrt_wait_scope) holds only where
the executor keeps it, and a conditional call (kCallCondition,
hcrt_call_condition) touches bytes only where it runs (grad_accumulate
only with micro-batches).

usage: happens_before.py STEP.cpp [--drop-wait N]   (exit 1: a race)
--drop-wait N ignores the N-th cluster wait: the check's own check."""
import argparse
import re
import sys

import numpy as np

KINDS = {"HCRT_ENTRY_KERNEL": 0, "HCRT_ENTRY_ALLREDUCE_START": 1, "HCRT_ENTRY_ALLREDUCE_WAIT": 2,
         "HCRT_ENTRY_CLUSTER_WAIT": 3, "HCRT_ENTRY_COPY_START": 4, "HCRT_ENTRY_COPY_WAIT": 5}
KERNEL, CLUSTER_WAIT, COPY_START, COPY_WAIT = 0, 3, 4, 5
DTYPE_BYTES = {0: 4, 1: 8, 2: 8, 3: 4, 4: 1}  # hc/abi/tensor.h


def table(src, name):
    m = re.search(r"\b%s\[\] = \{(.*?)\};\n" % name, src, re.S)
    if not m:
        raise SystemExit("happens_before: no table %s in the emitted step" % name)
    return m.group(1)


def parse(src):
    """Descriptors as (root, lo, hi), operands, entries, where-strings."""
    input_arena = int(re.search(r"kInputArena = (\d+)", src).group(1))
    const_arena = int(re.search(r"kConstArena = (\d+)", src).group(1))
    descs = []
    for m in re.finditer(r"\{(-?\d+), (-?\d+), (-?\d+), (-?\d+), (-?\d+), \{([-\d,]*)\}, "
                         r"\{([-\d,]*)\}\}", table(src, "kDescs")):
        arena, base, dtype, rank, offset = map(int, m.groups()[:5])
        shape = [int(x) for x in m.group(6).split(",") if x][:rank]
        strides = [int(x) for x in m.group(7).split(",") if x][:rank]
        last = sum((n - 1) * st for n, st in zip(shape, strides))
        # Constants are read-only; each host input is a root of its own.
        root = None if arena == const_arena or 0 in shape else \
            ("input", base) if arena == input_arena else ("arena", arena)
        descs.append((root, offset, offset + (last + 1) * DTYPE_BYTES[dtype]))
    operands = [int(x) for x in table(src, "kOperands").split(",") if x.strip()]
    entries = []
    for m in re.finditer(r"\{(HCRT_ENTRY_\w+)((?:, -?\d+)+)\}", table(src, "kCalls")):
        entries.append((KINDS[m.group(1)],) + tuple(int(x) for x in m.group(2).split(",")[1:]))
    where = re.findall(r'"((?:[^"\\]|\\.)*)"', table(src, "kCallWhere"))
    conditions = [int(x) for x in table(src, "kCallCondition").split(",") if x.strip()]
    # grad_accumulate touches nothing with one micro-batch (its waits are
    # scoped to it): condition 3 here, the executor's micro-batch count.
    kernels = re.findall(r'"((?:[^"\\]|\\.)*)"', table(src, "kCallKernel"))
    conditions = [3 if k == "grad_accumulate" else c for c, k in zip(conditions, kernels)]
    return descs, operands, entries, where, conditions


# (world size, micro-batches, last micro-batch): the steps that differ.
MODES = ((1, 1, True), (2, 1, True), (1, 2, False), (1, 2, True))


def wait_holds(scope, world, micros, last):
    """hcrt_wait_scope as step_executor.cpp's scopedWaitSkipped reads it."""
    reduced = world > 1 or micros > 1
    return {0: True, 1: world > 1 and last, 2: micros > 1, 3: reduced, 4: not reduced}[scope]


def call_runs(condition, world, micros):
    """hcrt_call_condition (3: grad_accumulate, which works with micro-batches only)."""
    reduced = world > 1 or micros > 1
    return {0: True, 1: reduced, 2: not reduced, 3: micros > 1}[condition]


def races(descs, operands, entries, drop_wait=-1, conditions=None):
    """[(entry, earlier entry, root, lo, hi)] of unordered conflicting accesses
    in any of MODES."""
    found = []
    for mode in MODES:
        found += races_in(descs, operands, entries, drop_wait, conditions, *mode)[0]
    _, clusters, copies = races_in(descs, operands, entries, -1, conditions, *MODES[0])
    return found, clusters, copies


def races_in(descs, operands, entries, drop_wait, conditions, world, micros, last):
    clusters = 1 + max(max(e[6] for e in entries),
                       max([e[1] for e in entries if e[0] == CLUSTER_WAIT] + [0]))
    copies = 1 + max([e[5] for e in entries if e[0] == COPY_START] + [-1])
    actors = clusters + copies  # one clock component per stream and per copy
    clock = [np.zeros(actors, np.int64) for _ in range(clusters)]
    after = [[np.zeros(actors, np.int64)] for _ in range(clusters)]  # after[k][n]: n entries done
    copy_clock, started = {}, []
    shadow, found = {}, []

    def access(d, write, actor, vc, ei):
        root, lo, hi = descs[d]
        if root is None:
            return
        r = shadow.setdefault(root, {"lo": [], "hi": [], "w": [], "actor": [], "at": [], "ei": []})
        if r["lo"]:
            los, his = np.asarray(r["lo"]), np.asarray(r["hi"])
            act, at = np.asarray(r["actor"]), np.asarray(r["at"])
            # Unordered: the other access's own clock is past what this one has seen of it.
            hit = (los < hi) & (lo < his) & (np.asarray(r["w"]) | write) & (act != actor) & \
                (at > vc[act])
            for i in np.nonzero(hit)[0][:2]:
                found.append((ei, r["ei"][i], root, max(lo, r["lo"][i]), min(hi, r["hi"][i])))
        for key, v in (("lo", lo), ("hi", hi), ("w", write), ("actor", actor),
                       ("at", int(vc[actor])), ("ei", ei)):
            r[key].append(v)

    waits = 0
    for ei, (kind, kernel, first, nin, nout, attrs, k) in enumerate(entries):
        if kind == CLUSTER_WAIT:
            waits += 1
            if waits - 1 == drop_wait or not wait_holds(nin, world, micros, last):
                continue
            if first >= len(after[kernel]):
                found.append((ei, None, "a wait for an entry later in the table", kernel, first))
                continue
            clock[k] = np.maximum(clock[k], after[kernel][first])
            continue
        clock[k][k] += 1
        if kind == KERNEL and call_runs(conditions[ei] if conditions else 0, world, micros):
            for n in range(nin + nout):
                if operands[first + n] >= 0:
                    access(operands[first + n], n >= nin, k, clock[k], ei)
        elif kind == COPY_START:
            vc = clock[k].copy()
            for start, done in started:  # FIFO behind copies started before this one
                if np.all(start <= clock[k]):
                    vc = np.maximum(vc, done)
            actor = clusters + attrs
            vc[actor] = 1
            access(operands[first], False, actor, vc, ei)
            access(operands[first + 1], True, actor, vc, ei)
            copy_clock[attrs] = vc
            started.append((clock[k].copy(), vc))
        elif kind == COPY_WAIT:
            clock[k] = np.maximum(clock[k], copy_clock[attrs])
        after[k].append(clock[k].copy())
    return found, clusters, copies


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("cpp")
    ap.add_argument("--drop-wait", type=int, default=-1)
    a = ap.parse_args()
    descs, operands, entries, where, conditions = parse(open(a.cpp).read())
    found, clusters, copies = races(descs, operands, entries, a.drop_wait, conditions)
    print("happens_before: %d entries, %d streams, %d tier copies: %d unordered access pairs"
          % (len(entries), clusters, copies, len(found)))
    for ei, other, *rest in found[:10]:
        if other is None:
            print("  entry %d: %s (cluster %d, count %d)" % (ei, *rest))
        else:
            print("  entry %d (stream %d, %s) and entry %d (stream %d, %s): %s bytes [%d, %d)" % (
                ei, entries[ei][6], where[ei], other, entries[other][6], where[other], *rest))
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
