#!/usr/bin/env -S /usr/bin/python3
"""Checkpoint, resume and EMA checks of hc-run (train mode) on the toy step
library (toy_step.cpp; helpers shared with run_check.py).

usage: ckpt_check.py CASE --hc-run BIN --toys DIR --work DIR

  resume  resume at step k then run to 2k equals an unbroken run to 2k bit
          for bit (parameters, optimizer state, EMA), at -np 1 and -np 2;
          the EMA against a float32 recomputation; metrics lines past the
          checkpoint dropped; --ckpt-keep; another rank count may resume.
  crash   HC_CKPT_CRASH_AFTER_BYTES kills hc-run in the middle of a
          checkpoint write: the previous checkpoint is intact, the partial
          file is ignored (and removed), the resumed run equals an unbroken one.
  refuse  bad flags and checkpoints that do not fit the run: exit 2, one line.
"""
import json
import os
import shutil
import struct
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import st  # noqa: E402
from run_check import case_main, check, expect_exit2, make_data  # noqa: E402

STEPS2K, K = 8, 4


def listing(d):
    """The folder's files but the run lock (.hc-run.lock, kept between runs)."""
    return sorted(f for f in os.listdir(d) if f != ".hc-run.lock")


def ckpt(d, step):
    return os.path.join(d, "ckpt-%08d.safetensors" % step)


def train_args(so, ckdir, steps, *extra):
    return [so, "--data", "data.npy", "--labels", "labels.npy", "--steps", str(steps), "--seed", "5",
            "--ckpt-dir", ckdir, "--log-every", "1"] + list(extra)


def same_checkpoint(env, a, b, what):
    """Every tensor of checkpoints a and b bit-identical; returns the tensors."""
    ta, ma = st.load(env.path(a), with_metadata=True)
    tb, mb = st.load(env.path(b), with_metadata=True)
    check(list(ta) == list(tb), "%s: tensor names differ: %s vs %s" % (what, list(ta), list(tb)))
    for k in ta:
        check(ta[k].tobytes() == tb[k].tobytes(), "%s: tensor %s differs between %s and %s" % (what, k, a, b))
    check(ma["hc.step"] == mb["hc.step"], "%s: steps %s vs %s" % (what, ma["hc.step"], mb["hc.step"]))
    return ta


def metrics_steps(env, name):
    return [json.loads(l)["step"] for l in open(env.path(name)).read().splitlines()]


def case_resume(env):
    make_data(env)
    ema = ["--ema", "0.9"]
    env.ok(train_args("toy_b4.so", "A", STEPS2K, "--ckpt-every", str(K), *ema))
    env.ok(train_args("toy_b4.so", "B", K, *ema))
    p = env.ok(train_args("toy_b4.so", "B", STEPS2K, "--resume", "--ckpt-every", str(K), *ema))
    check("resuming from B/ckpt-%08d" % K in p.stdout, "no resume line:\n" + p.stdout)
    t = same_checkpoint(env, "A/ckpt-%08d.safetensors" % STEPS2K, "B/ckpt-%08d.safetensors" % STEPS2K, "np1")
    # The comparison must be able to fail: training moved everything it checks.
    t0 = st.load(ckpt(env.path("A"), K))
    check(int(t["sgd.step"]) == STEPS2K and not np.array_equal(t["lin.weight"], t0["lin.weight"])
          and not np.array_equal(t["ema:lin.weight"], t0["ema:lin.weight"])
          and not np.array_equal(t["ema:lin.weight"], t["lin.weight"]),
          "checkpoints at steps %d and %d do not differ as training should make them" % (K, STEPS2K))
    names = sorted(t)
    check(names == sorted(["lin.weight", "emb.weight", "time.weight", "fixed.bias", "sgd.step"] +
                          ["ema:" + n for n in ("lin.weight", "emb.weight", "time.weight", "fixed.bias")]),
          "checkpoint tensors %s" % names)

    # EMA as DiT keeps it: initialized to the parameters, updated after every
    # step in float32 (ema*d + (1-d)*p), recomputed from per-step checkpoints.
    env.ok(train_args("toy_b4.so", "E", 4, "--ckpt-every", "1", "--ema", "0.9"))
    d, a = np.float32(0.9), np.float32(1.0 - 0.9)
    e = {k: v.copy() for k, v in env.init.items()}
    for s in range(1, 5):
        c = st.load(ckpt(env.path("E"), s))
        for k in e:
            e[k] = (e[k] * d + a * c[k]).astype(np.float32)
            check(e[k].tobytes() == c["ema:" + k].tobytes(),
                  "step %d: ema:%s differs from float32 ema*d+(1-d)*p by %g"
                  % (s, k, np.abs(e[k] - c["ema:" + k]).max()))

    # A crash after logging step 6 but before its checkpoint: the resumed
    # run drops metrics lines past step 4, so each step is logged once.
    env.ok(train_args("toy_b4.so", "C", 6, "--ckpt-every", str(K), "--metrics", "C.jsonl", *ema))
    os.remove(ckpt(env.path("C"), 6))
    env.ok(train_args("toy_b4.so", "C", STEPS2K, "--resume", "--ckpt-every", str(K), "--metrics", "C.jsonl",
                      *ema))
    got = metrics_steps(env, "C.jsonl")
    check(got == list(range(1, STEPS2K + 1)), "metrics steps after the resume: %s" % got)
    same_checkpoint(env, ckpt("A", STEPS2K), ckpt("C", STEPS2K), "metrics run")

    # --resume with an empty folder starts at step 0; --ckpt-keep prunes.
    p = env.ok(train_args("toy_b4.so", "N", K, "--resume", "--ckpt-keep", "2", "--ckpt-every", "1", *ema))
    check("no checkpoint in N" in p.stdout, p.stdout)
    check(listing(env.path("N")) == [os.path.basename(ckpt("", s)) for s in (K - 1, K)],
          "--ckpt-keep 2 left %s" % listing(env.path("N")))
    same_checkpoint(env, ckpt("A", K), ckpt("N", K), "fresh --resume")

    # An hc checkpoint as --init (fine-tuning from it): parameters and
    # optimizer state load, its EMA is skipped with a note.
    p = env.ok(["toy_b4.so", "--data", "data.npy", "--labels", "labels.npy", "--steps", "1",
                "--init", ckpt("A", K), "--save-state", "I.safetensors"])
    check("EMA tensors (ema:*) not loaded" in p.stderr, "no note on the skipped EMA:\n" + p.stderr)
    check(int(st.load(env.path("I.safetensors"))["sgd.step"]) == K + 1,
          "--init from a step-%d checkpoint did not load its optimizer state" % K)

    # -np 2: resumed equals unbroken bit for bit.
    env.ok(train_args("toy_b2.so", "A2", STEPS2K, *ema), np_=2)
    env.ok(train_args("toy_b2.so", "B2", K, *ema), np_=2)
    env.ok(train_args("toy_b2.so", "B2", STEPS2K, "--resume", *ema), np_=2)
    same_checkpoint(env, ckpt("A2", STEPS2K), ckpt("B2", STEPS2K), "np2")
    # Another rank count with the same global batch may resume (same data
    # order; sums in another order, so equal to float32 round-off).
    shutil.copytree(env.path("B"), env.path("X"))
    os.remove(ckpt(env.path("X"), STEPS2K))
    p = env.ok(train_args("toy_b2.so", "X", STEPS2K, "--resume", *ema), np_=2)
    check("resuming on 2 rank(s)" in p.stdout, "no note on the rank count:\n" + p.stdout)
    x, y = st.load(ckpt(env.path("X"), STEPS2K)), st.load(ckpt(env.path("A"), STEPS2K))
    worst = max(float(np.abs(x[k] - y[k]).max()) for k in x if k != "sgd.step")
    check(worst <= 1e-6, "np1 checkpoint resumed at np2 differs by %g" % worst)
    print("resume at %d -> %d equals unbroken bit for bit (params, sgd.step, EMA) at np1 and np2; EMA = float32 "
          "recomputation; metrics steps %s; np1->np2 resume within %.1e" % (K, STEPS2K, got, worst))


def case_crash(env):
    make_data(env)
    args = ["--ckpt-every", "2", "--ema"]
    env.ok(train_args("toy_b4.so", "U", 6, *args))
    size = os.path.getsize(ckpt(env.path("U"), 2))
    for tag, budget in (("mid-data", size + size // 2), ("mid-header", size + 5)):
        d = env.path(tag)
        p = env.run(train_args("toy_b4.so", tag, 6, *args), env={"HC_CKPT_CRASH_AFTER_BYTES": str(budget)})
        check(p.returncode == -9, "%s: expected death by SIGKILL, got exit %d\n%s" % (tag, p.returncode, p.stderr))
        files = listing(d)
        partial = [f for f in files if f.startswith(".ckpt-00000004.safetensors.tmp.")]
        check(len(files) == 2 and files[1] == "ckpt-00000002.safetensors" and len(partial) == 1,
              "%s: folder after the crash: %s" % (tag, files))
        want = budget - os.path.getsize(ckpt(d, 2))
        check(os.path.getsize(os.path.join(d, partial[0])) == want,
              "%s: partial file has %d bytes, the hook allowed %d" % (tag, os.path.getsize(os.path.join(d, partial[0])), want))
        same_checkpoint(env, ckpt("U", 2), ckpt(tag, 2), tag + " previous checkpoint")
        p = env.ok(train_args("toy_b4.so", tag, 6, "--resume", *args))
        check("removed 1 unfinished checkpoint" in p.stdout and "resuming from %s/ckpt-00000002" % tag in p.stdout,
              "%s: resume output:\n%s" % (tag, p.stdout))
        check(listing(d) == [os.path.basename(ckpt("", s)) for s in (2, 4, 6)],
              "%s: after the resume: %s" % (tag, listing(d)))
        same_checkpoint(env, ckpt("U", 6), ckpt(tag, 6), tag + " resumed")
    # A crash in the very first checkpoint: nothing to resume, start at 0.
    p = env.run(train_args("toy_b4.so", "first", 6, *args), env={"HC_CKPT_CRASH_AFTER_BYTES": str(size // 2)})
    check(p.returncode == -9 and not [f for f in os.listdir(env.path("first")) if f.startswith("ckpt-")],
          "first: exit %d, %s" % (p.returncode, os.listdir(env.path("first"))))
    p = env.ok(train_args("toy_b4.so", "first", 6, "--resume", *args))
    check("no checkpoint in first" in p.stdout, p.stdout)
    same_checkpoint(env, ckpt("U", 6), ckpt("first", 6), "first resumed")
    # Under mpirun, rank 0 killed while writing ends the whole job.
    p = env.run(train_args("toy_b2.so", "np2", 6, *args), np_=2,
                env={"HC_CKPT_CRASH_AFTER_BYTES": str(size + size // 2)}, timeout=60)
    check(p.returncode != 0 and p.elapsed < 30, "np2: exit %d after %.1f s" % (p.returncode, p.elapsed))
    check(os.path.exists(ckpt(env.path("np2"), 2)), "np2: previous checkpoint missing")
    print("crash during a checkpoint write (in the data, in the header, in the first one, under -np 2 in %.1f s): "
          "previous checkpoint intact, partial file ignored then removed, resumed run equal to the unbroken one"
          % p.elapsed)


M64 = (1 << 64) - 1


def content_hash(h, data):
    """base/src/files.cpp's contentHash."""
    n, i = len(data), 0
    while i + 8 <= n:
        h = ((h ^ int.from_bytes(data[i:i + 8], "little")) * 0x100000001b3) & M64
        h ^= h >> 29
        i += 8
    for b in data[i:]:
        h = ((h ^ b) * 0x100000001b3) & M64
    h = ((h ^ n ^ (h >> 33)) * 0x9e3779b97f4a7c15) & M64
    return h ^ (h >> 29)


def hash_string(h, s):
    b = s.encode()
    return content_hash(content_hash(h, struct.pack("<Q", len(b))), b)


def checkpoint_checksum(header, data):
    """hc.checksum of a checkpoint (runtime/src/formats/checkpoint.cpp): the metadata
    but the checksum in key order, then per tensor in file order its name,
    dtype, rank, shape and bytes."""
    h = 0xcbf29ce484222325
    for k in sorted(header["__metadata__"]):
        if k != "hc.checksum":
            h = hash_string(hash_string(h, k), header["__metadata__"][k])
    entries = sorted(((k, v) for k, v in header.items() if k != "__metadata__"),
                     key=lambda kv: kv[1]["data_offsets"][0])
    for name, e in entries:
        h = hash_string(hash_string(h, name), e["dtype"])
        h = content_hash(h, struct.pack("<Q", len(e["shape"])))
        h = content_hash(h, struct.pack("<%dq" % len(e["shape"]), *e["shape"]))
        a, b = e["data_offsets"]
        h = content_hash(h, data[a:b])
    return "%016x" % h


def rewrite_metadata(path, **changes):
    """Rewrites the safetensors header's metadata in place, data untouched,
    and seals it again with a matching checksum: what another hc-run version
    would have written, so the checks behind the checksum are reached."""
    blob = open(path, "rb").read()
    (n,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + n])
    check(checkpoint_checksum(header, blob[8 + n:]) == header["__metadata__"]["hc.checksum"],
          "%s: the test's checksum differs from the one hc-run wrote" % path)
    header["__metadata__"].update(changes)
    header["__metadata__"]["hc.checksum"] = checkpoint_checksum(header, blob[8 + n:])
    h = json.dumps(header).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    open(path, "wb").write(struct.pack("<Q", len(h)) + h + blob[8 + n:])


def case_refuse(env):
    images, labels = make_data(env)
    env.ok(train_args("toy_b4.so", "R", 4, "--ckpt-every", "2", "--ema", "0.9"))
    env.ok(train_args("toy_b4.so", "R_noema", 2))
    np.save(env.path("data12.npy"), np.concatenate([images, images[:2]]))
    np.save(env.path("labels12.npy"), np.concatenate([labels, labels[:2]]))
    open(env.path("afile"), "w").write("x")

    def variant(tag, damage):
        shutil.copytree(env.path("R"), env.path(tag))
        damage(ckpt(env.path(tag), 4))
        return tag

    def flip_last_byte(p):
        b = bytearray(open(p, "rb").read())
        b[-1] ^= 1
        open(p, "wb").write(bytes(b))

    def truncate(p):
        os.truncate(p, os.path.getsize(p) - 100)

    def other_model(p):
        m = st.load(p, with_metadata=True)[1]
        model = json.loads(m["hc.model"])
        model["dit_config"]["num_classes"] = 5
        rewrite_metadata(p, **{"hc.model": json.dumps(model)})

    def format1(p):
        t, m = st.load(p, with_metadata=True)
        m["hc.data_checksum"] = m.pop("hc.checksum")
        m["hc.checkpoint_version"] = "1"
        st.save(p, t, metadata=m)

    resume = lambda d, *x: train_args("toy_b4.so", d, 8, "--resume", *x)  # noqa: E731
    cases = [
        ("resume without dir", ["toy_b4.so", "--data", "data.npy", "--steps", "2", "--resume"], "--resume needs --ckpt-dir"),
        ("ckpt-every 0", train_args("toy_b4.so", "F", 2, "--ckpt-every", "0"), "--ckpt-every needs a step interval (an integer, at least 1)"),
        ("ema decay", train_args("toy_b4.so", "F", 2, "--ema", "1.5"), "--ema needs a decay in [0, 1)"),
        ("ema without dir", ["toy_b4.so", "--data", "data.npy", "--steps", "2", "--ema"], "--ema needs --ckpt-dir"),
        ("dir is a file", train_args("toy_b4.so", "afile", 2), "not a folder"),
        ("dir parent missing", train_args("toy_b4.so", "no/such/dir", 2), "cannot create"),
        ("test mode", ["toy_b4.so", "--inputs", "in", "--steps", "1", "--ckpt-dir", "R"], "train-mode flag"),
        ("fresh run into checkpoints", train_args("toy_b4.so", "R", 8), "add --resume"),
        ("corrupt", resume(variant("corrupt", flip_last_byte)), "corrupt or edited: the checksum"),
        ("truncated", resume(variant("truncated", truncate)), "outside the"),
        ("abi", resume(variant("abi", lambda p: rewrite_metadata(p, **{"hc.step_abi": "999"}))),
         "written for step ABI version 999"),
        ("other model", resume(variant("model", other_model)), "another model: dit_config.num_classes is 5"),
        ("not hc", resume(variant("plain", lambda p: st.save(p, st.load(p)))), "not an hc"),
        ("format 1", resume(variant("v1", format1)), "older hc-run (checkpoint format 1)"),
        ("global batch", train_args("toy_b2.so", "R", 8, "--resume"), "trained with global batch 4"),
        ("data size", train_args("toy_b4.so", "R", 8, "--resume") + ["--data", "data12.npy", "--labels", "labels12.npy"],
         "trained on 10 samples"),
        ("seed", resume("R", "--seed", "6"), "--seed 6 differs"),
        ("ema decay differs", resume("R", "--ema", "0.5"), "differs from the decay 0.9"),
        ("ema added", train_args("toy_b4.so", "R_noema", 8, "--resume", "--ema"), "trained without --ema"),
        ("steps", train_args("toy_b4.so", "R", 3, "--resume"), "past --steps 3"),
    ]
    before = {f: open(os.path.join(env.path("R"), f), "rb").read() for f in listing(env.path("R"))}
    seen = []
    for what, args, contains in cases:
        seen.append(expect_exit2(env, args, what, contains=contains))
    after = {f: open(os.path.join(env.path("R"), f), "rb").read() for f in listing(env.path("R"))}
    check(before == after, "a refused run changed the checkpoint folder R")
    expect_exit2(env, train_args("toy_b2.so", "corrupt", 8, "--resume"), "np2 corrupt", np_=2, contains="corrupt")
    # Step ABIs 4 to 9 differ from this one in the library's tables only:
    # their checkpoints resume.
    for old in ("4", "6", "9"):
        env.ok(resume(variant("abi" + old, lambda p: rewrite_metadata(p, **{"hc.step_abi": old}))))
    print("refused with exit 2 and one line (%d cases, np2 too), R untouched, e.g.\n  %s"
          % (len(cases), "\n  ".join(seen[8:13])))


CASES = {"resume": case_resume, "crash": case_crash, "refuse": case_refuse}


if __name__ == "__main__":
    sys.exit(case_main(CASES))
