// hc-run's command line.
#include "common.h"
#include "preemption.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>

namespace hcrun {

const char *usageText() {
  return R"(usage:
  test mode:  [mpirun -np R] hc-run STEP.so --inputs DIR --steps N
                  [--init P.safetensors] [--save-params OUT.safetensors]
                  [--save-grads G.safetensors] [--save-state S.safetensors]
  train mode: [mpirun --bind-to none -np R] hc-run STEP.so --data X.npy
                  [--labels Y.npy] [--cond NAME=C.npy ...] --steps K [--seed S]
                  [--log-every N] [--accumulate K] [--num-classes N]
                  [--class-dropout P] [--cond-dropout P]
                  [--val-data V.npy [--val-labels VY.npy] [--val-cond NAME=VC.npy ...]
                  [--val-every N]]
                  [--metrics FILE.jsonl] [--tensorboard DIR]
                  [--progress|--no-progress]
                  [--init P] [--save-params F] [--save-grads G] [--save-state S]
                  [--ckpt-dir D [--ckpt-every N] [--ckpt-keep K] [--resume]]
                  [--ema [DECAY]] [--hflip] [--checkpoint-on SIGS]
                  [--time-sampling uniform|logit-normal [--logit-mean M]
                   [--logit-std S]]
                  [--checkpoint-grace S] [--allow-data-change] [--strict-memory]
  both modes:     [--lr-schedule constant|linear|cosine] [--lr L]
                  [--warmup-steps W] [--decay-steps D] [--min-lr M]
                  [--weight-decay WD] [--clip-grad-norm X]
                  [--profile FILE] [--check-finite] [--comm-cores N]
                  [--comm-timeout S] [--offload-dir D] [--strict-topology]
  sampling:   hc-run sample SAMPLER.so --ckpt CKPT [--out GRID.png]
                  [--save-npy F.npy] ... (hc-run sample --help)

STEP.so is a step library made by hc-compile (its description names the
inputs, the per-rank batch B and the initial parameters, OUT.init.safetensors
next to it). R ranks train data-parallel on a global batch of R*B.

  --inputs DIR      one NPY per graph input, named after it (x_t.npy t.npy
                    y.npy noise.npy), holding the GLOBAL batch R*B; rank r
                    uses rows [r*B, (r+1)*B). The same inputs every step;
                    each step prints "loss <value>" (averaged over ranks).
  --data X.npy      float32 [N,C,H,W] images (memory-mapped); each epoch is
                    a fresh global permutation from --seed; per sample hc-run
                    draws t in [0,1000), eps ~ N(0,1) and label dropout from a
                    counter-based RNG keyed by (seed, step, global sample), so
                    a global batch trains identically at any rank count.
  --labels Y.npy    integer [N] class ids in [0, num_classes) (default: every
                    sample unlabelled, i.e. the null class)
  --num-classes N   the classes of a plain export (no hc metadata: any
                    torch.onnx export of a DiT); the label table must have N
                    rows, or N + 1 with a null class. Checked against the
                    metadata where there is some
  --class-dropout P the probability of training a sample as the null class
                    (DiT's 0.1; needs the null row; default: the metadata's,
                    else 0.1 when the table has a null row)
  --cond NAME=C.npy the conditioning NAME of a model exported with
                    export_dit.py --cond (models/conditioning.py), one row
                    per sample of --data in its order, float32 [N, ...]: a
                    vector [N,D], a field [N,C,H,W] (concatenated to x_t;
                    mirrored with its sample under --hflip) or tokens
                    [N,L,D]. Every conditioning of the graph must be given.
                    Each sample takes each conditioning's null form (the
                    learned null embedding; a zero field) with probability
                    --cond-dropout, drawn per conditioning independently of
                    the others and of the label's
  --cond-dropout P  that probability (default: the metadata's
                    cond_dropout_prob, else 0.1); checked against the
                    metadata where there is one
  --steps N         steps to run (required): optimizer steps
  --val-data V.npy  a held-out set (float32 [N,C,H,W], like --data) whose loss
                    is measured every --val-every steps (default: each log
                    line) and at the end, on whole global batches: every
                    sample's timestep and noise come from fixed keys, no
                    label dropout or flip, so the same weights score the same
                    bits. Averaged over ranks; logged as "(step=N) Val Loss",
                    metrics val_loss (and val_loss_ema with --ema: the EMA
                    weights too), TensorBoard val/*
  --val-labels VY.npy  its class ids (needed when training has --labels)
  --val-cond NAME=VC.npy  its conditionings, as --cond (needed for each one;
                    scored without dropout)
  --accumulate K    K micro-batches of the library's batch per optimizer
                    step (gradient accumulation; default 1): the gradients
                    of the K add up in float32 inside the step, the all-
                    reduce runs once, overlapped with the last micro-batch's
                    backward, and the update sees their mean. The global
                    batch is ranks x batch x K and its samples are those of
                    a K-times larger batch (the same data order, noise and
                    labels), so --accumulate 2 at batch B trains as batch 2B
                    to rounding. Memory: the plan plus one float32 copy of
                    the trainable parameters (the accumulator)
  --seed S          train-mode seed (default 0)
  --hflip           DiT's random horizontal flip: each sample's image is
                    mirrored left-right with probability 1/2, drawn like t
                    and eps (keyed by seed, step, global sample), so it is
                    the same at any rank count. Off by default: on data
                    where a mirror changes the meaning (text, maps, some
                    remote-sensing bands) it teaches the wrong thing.
  --time-sampling uniform|logit-normal  flow models (export_dit.py
                    --objective flow): how t is drawn on the objective's
                    training interval. uniform (SiT's, the default), or
                    logit-normal as SD3 trains rectified flow: SD3's noise
                    level sigmoid(M + S n), n ~ N(0, 1), is 1 - t here
                    (t = 1 is data), so SD3's --logit-mean/--logit-std mean
                    the same. Recorded in checkpoints; a resume keeps it
  --logit-mean M, --logit-std S  logit-normal's parameters (default 0, 1)
  --log-every N     log line every N steps (default 100)
  --metrics FILE    JSON lines {step, loss, steps_per_sec, img_per_sec,
                    gflops, peak_rss_mb, setup_peak_rss_mb,
                    step_peak_rss_mb, wall_s} at each log line (peak RSS:
                    of the run, of the setup up to the first step, of the
                    steps alone; max over ranks)
  --tensorboard DIR rank 0 writes a TensorBoard event file in DIR (created
                    when missing) with the metrics line's numbers at each log
                    line: train/loss, train/lr, perf/*, memory/* (float32, as
                    TensorBoard keeps scalars); a resumed run adds a new file
  --progress, --no-progress
                    progress bar with ETA (default: when stdout is a terminal
                    and not under mpirun); elsewhere rank 0 prints a progress
                    line with the ETA after each log line and at least every
                    --progress-every seconds (default 30); --no-progress: none
  --progress-every S  seconds between progress lines off a terminal
  --init P          initial parameters (default: the description's
                    init_file); optimizer state in P is loaded too; an hc
                    checkpoint works (its ema:* tensors are skipped, with a note)
  --save-params F   parameters after the last step, under their names
  --save-grads F    the last step's averaged gradients, under parameter names
  --save-state F    optimizer state (e.g. adamw.m:NAME, adamw.step)
                    Written by rank 0, atomically; a "{rank}" in F makes every
                    rank write its own file.
  --ckpt-dir D      train mode: rank 0 writes D/ckpt-<step>.safetensors
                    atomically (parameters under their PyTorch names, EMA as
                    ema:NAME, optimizer state, step, seed and data order, the
                    model description); always one at the last step. D is
                    created when missing (its parent must exist).
  --ckpt-every N    also a checkpoint every N steps
  --ckpt-keep K     keep only the newest K checkpoints (default: all)
  --resume          continue from the newest checkpoint in D (none: start at
                    step 0); --steps is the total to reach. The checkpoint
                    must come from the same model, ABI, global batch, data
                    size, seed and EMA decay, else exit 2. Any rank count
                    with the same global batch may resume.
  --checkpoint-on SIGS  with --ckpt-dir: these signals (default TERM,USR1,INT;
                    'none': die as usual) make every rank stop at a step
                    boundary, agree on the step, write a checkpoint and exit
                    75 (EX_TEMPFAIL: requeue and --resume). A second signal
                    from the same sender ends the run at once (no half-written
                    file). See docs/multi-node.md for Slurm and mpirun.
  --checkpoint-grace S  a step still running S seconds (default 0) after the
                    signal is abandoned before it updates anything, and the
                    previous step's state is saved
  --allow-data-change  --resume on other --data/--labels than the checkpoint
                    was trained on (else exit 2); recorded in checkpoints
  --strict-memory   refuse (exit 2) a plan that MemAvailable or the cgroup's
                    memory limit cannot hold (default: a warning)
  --ema [DECAY]     keep an EMA of the parameters as DiT does (initialized
                    to them, updated after every step; DECAY default 0.9999)
  --lr-schedule constant|linear|cosine  (both modes) the learning rate of
                    each optimizer step, the closed forms of transformers'
                    get_*_schedule_with_warmup: a linear warmup from 0 over
                    W steps, then constant, or a linear or cosine decay to
                    --min-lr at step D, held there after D. Set in the
                    compiled step before every step (it is a hyperparameter
                    of the step, not a constant); recorded in checkpoints,
                    and a resume continues it exactly (a changed schedule is
                    noted and taken from the resumed step on).
  --lr L            the peak learning rate (default: hc-compile --lr)
  --warmup-steps W  warmup steps (default 0)
  --decay-steps D   where linear/cosine reach --min-lr (default --steps)
  --min-lr M        the floor of linear/cosine (default 0)
  --weight-decay WD AdamW/SGD weight decay (default: hc-compile's)
                    ONNX Adam (hc-compile --optimizer adam) takes its rate from
                    the graph: these flags are refused for it.
  --clip-grad-norm X  (both modes) clip the gradients by their global L2 norm
                    as torch.nn.utils.clip_grad_norm_(params, X) does, inside
                    the compiled step after the all-reduce (the same norm on
                    every rank). The pre-clip norm of every step is logged
                    (metrics "grad_norm", TensorBoard train/grad_norm; test
                    mode prints "grad_norm <value>" lines)
  --comm-cores N     reserve N of each rank's cores for a thread that drives
                    the gradient all-reduce (default 0: the step drives it
                    between kernels; HC_COMM_PROGRESS=thread restores the
                    old unpinned comm thread, a baseline). Default: the
                    plan's comm cores (hc-compile --comm-cores)
  --comm-timeout S   a watchdog on every collective: a rank blocked in one
                    (the gradient all-reduce, a barrier, a broadcast) for
                    more than S seconds names the hosts whose ranks did not
                    answer and exits 1 (Open MPI 4.1 itself waits about 15
                    minutes on a dead TCP link). Default 0: off. Set S above
                    the longest legitimate wait, such as rank 0 writing a
                    checkpoint while the others wait
  --offload-dir DIR (both modes) where a library planned with a disk tier
                    (hc-compile --offload-dir) keeps its file, instead of
                    the folder it was compiled with. The file is unnamed and
                    reserved in full before the first step: a missing,
                    read-only or full folder stops the run there (exit 2)
  --strict-topology (both modes) refuse (exit 2) a machine unlike the one the
                    library was planned for (hc-compile --topology) instead
                    of re-mapping with a note
  --profile FILE    (both modes) time every call of the step; rank 0 writes
                    FILE (JSON: per kernel kind s/step, share, GFLOP/s, GB/s,
                    roofline against the FMA peak (a bf16 library's products:
                    the peak of its path, AMX tiles or vdpbf16ps) and triad
                    bandwidth measured at the start, the step's MFU) and
                    prints a table (hc-run sample --profile: the same per
                    model call)
  --check-finite    (both modes) check every float tensor every kernel writes
                    (activations, gradients, updated parameters) each step;
                    the first NaN or infinity stops the run (exit 1) naming
                    the kernel, its ONNX node, forward/backward/optimizer,
                    the element, the step and the rank. Slower: a debugging aid.

Exit codes: 0 done; 1 a step failed, a non-finite loss or an output could
not be written; 2 bad flags, library, description or data, or ranks that
disagree (nothing written); 75 stopped by a --checkpoint-on signal after
writing a checkpoint (resume with --resume).
)";
}

namespace {
// `what` says what the number counts, e.g. "a step count".
int64_t parseInt(const std::string &flag, const std::string &v, int64_t lo,
                 const char *what) {
  errno = 0;
  char *end = nullptr;
  long long x = std::strtoll(v.c_str(), &end, 10);
  const std::string range = lo == 0 ? "0 or more" : "at least " + std::to_string(lo);
  if (v.empty() || *end != '\0' || errno == ERANGE || x < lo)
    usageError(flag + " needs " + what + " (an integer, " + range + "), got '" +
               v + "'");
  return x;
}
// A number in [lo, hi] (hiOpen: [lo, hi)); `what` names it in the error,
// e.g. "a decay in [0, 1)". NaN and infinities are refused by the range.
double parseNumber(const std::string &flag, const std::string &v, double lo, double hi,
                   bool hiOpen, const char *what) {
  char *end = nullptr;
  double x = std::strtod(v.c_str(), &end);
  if (v.empty() || *end != '\0' || !(x >= lo && (hiOpen ? x < hi : x <= hi)))
    usageError(flag + " needs " + what + ", got '" + v + "'");
  return x;
}
double parseDecay(const std::string &flag, const std::string &v) {
  return parseNumber(flag, v, 0, 1, true, "a decay in [0, 1)");
}
} // namespace

Options parseOptions(int argc, char **argv) {
  Options o;
  bool stepsSeen = false, minLrSeen = false;
  std::vector<std::string> trainOnly;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i], value;
    bool hasInline = false;
    if (a.rfind("--", 0) == 0) {
      std::size_t eq = a.find('=');
      if (eq != std::string::npos) {
        value = a.substr(eq + 1);
        a = a.substr(0, eq);
        hasInline = true;
      }
    }
    auto next = [&]() -> std::string {
      if (hasInline)
        return value;
      if (i + 1 >= argc)
        usageError(a + " needs a value");
      return argv[++i];
    };
    auto noValue = [&]() {
      if (hasInline)
        usageError(a + " takes no value");
    };
    if (a == "-h" || a == "--help") {
      o.help = true;
    } else if (a == "--inputs") {
      o.inputs = next();
    } else if (a == "--data") {
      o.data = next();
    } else if (a == "--labels") {
      o.labels = next();
      trainOnly.push_back(a);
    } else if (a == "--steps") {
      o.steps = parseInt(a, next(), 0, "a step count");
      stepsSeen = true;
    } else if (a == "--init") {
      o.init = next();
    } else if (a == "--save-params") {
      o.saveParams = next();
    } else if (a == "--save-grads") {
      o.saveGrads = next();
    } else if (a == "--save-state") {
      o.saveState = next();
    } else if (a == "--seed") {
      o.seed = static_cast<uint64_t>(parseInt(a, next(), 0, "a seed"));
      o.seedSeen = true;
      trainOnly.push_back(a);
    } else if (a == "--hflip") {
      o.hflip = true;
      trainOnly.push_back(a);
    } else if (a == "--time-sampling") {
      const std::string v = next();
      if (v != "uniform" && v != "logit-normal")
        usageError("--time-sampling must be uniform or logit-normal, got '" + v + "'");
      o.timeSampling.logitNormal = v == "logit-normal";
      o.timeSamplingGiven = true;
      trainOnly.push_back(a);
    } else if (a == "--logit-mean" || a == "--logit-std") {
      const bool mean = a == "--logit-mean";
      (mean ? o.timeSampling.mean : o.timeSampling.std) =
          mean ? parseNumber(a, next(), -10, 10, false, "a mean in [-10, 10]")
               : parseNumber(a, next(), 1e-3, 10, false, "a deviation in [0.001, 10]");
      o.logitGiven = true;
      o.timeSamplingGiven = true;
      trainOnly.push_back(a);
    } else if (a == "--log-every") {
      o.logEvery = parseInt(a, next(), 1, "a step interval");
      trainOnly.push_back(a);
    } else if (a == "--metrics") {
      o.metrics = next();
      trainOnly.push_back(a);
    } else if (a == "--val-data") {
      o.valData = next();
      trainOnly.push_back(a);
    } else if (a == "--cond" || a == "--val-cond") {
      auto &list = a == "--cond" ? o.conds : o.valConds;
      list.push_back(parseCondFlag(a, next(), list));
      trainOnly.push_back(a);
    } else if (a == "--cond-dropout") {
      o.condDropout = parseNumber(a, next(), 0, 1, true, "a probability in [0, 1)");
      trainOnly.push_back(a);
    } else if (a == "--val-labels") {
      o.valLabels = next();
      trainOnly.push_back(a);
    } else if (a == "--val-every") {
      o.valEvery = parseInt(a, next(), 1, "a step interval");
      trainOnly.push_back(a);
    } else if (a == "--num-classes") {
      o.numClasses = parseInt(a, next(), 1, "a number of classes");
      trainOnly.push_back(a);
    } else if (a == "--class-dropout") {
      o.classDropout = parseNumber(a, next(), 0, 1, true, "a probability in [0, 1)");
      trainOnly.push_back(a);
    } else if (a == "--accumulate") {
      o.accumulate = parseInt(a, next(), 1, "a number of micro-batches");
      trainOnly.push_back(a);
    } else if (a == "--tensorboard") {
      o.tensorboard = next();
      trainOnly.push_back(a);
    } else if (a == "--ckpt-dir") {
      o.ckptDir = next();
      trainOnly.push_back(a);
    } else if (a == "--ckpt-every") {
      o.ckptEvery = parseInt(a, next(), 1, "a step interval");
      trainOnly.push_back(a);
    } else if (a == "--ckpt-keep") {
      o.ckptKeep = parseInt(a, next(), 1, "a number of checkpoints");
      trainOnly.push_back(a);
    } else if (a == "--resume") {
      noValue();
      o.resume = true;
      trainOnly.push_back(a);
    } else if (a == "--ema") {
      // The decay is optional: "--ema", "--ema=0.999" or "--ema 0.999". A
      // next word that reads as a number (nan and inf too, to be refused
      // by name) is the decay; anything else is the next argument.
      bool valueFollows = hasInline;
      if (!valueFollows && i + 1 < argc && argv[i + 1][0] != '-') {
        char *end = nullptr;
        std::strtod(argv[i + 1], &end);
        valueFollows = end != argv[i + 1] && *end == '\0';
      }
      o.emaDecay = valueFollows ? parseDecay(a, next()) : 0.9999;
      trainOnly.push_back(a);
    } else if (a == "--checkpoint-on") {
      o.preemption.signals = parseSignalList(next());
      o.checkpointOnGiven = true;
      trainOnly.push_back(a);
    } else if (a == "--checkpoint-grace") {
      o.preemption.graceSeconds =
          parseNumber(a, next(), 0, 86400 * 7, false, "seconds (0 to 604800)");
      o.checkpointOnGiven = true;
      trainOnly.push_back(a);
    } else if (a == "--allow-data-change") {
      noValue();
      o.allowDataChange = true;
      trainOnly.push_back(a);
    } else if (a == "--lr-schedule") {
      o.schedule.kind = parseLrScheduleKind(a, next());
    } else if (a == "--clip-grad-norm") {
      o.schedule.clipGradNorm = parseNumber(a, next(), 1e-30, 1e30, true, "a norm > 0");
    } else if (a == "--lr" || a == "--min-lr" || a == "--weight-decay") {
      const double x = parseNumber(a, next(), 0, 1e6, true, "a number >= 0");
      (a == "--lr" ? o.schedule.lr : a == "--min-lr" ? o.schedule.minLr
                                                     : o.schedule.weightDecay) = x;
      if (a == "--min-lr")
        minLrSeen = true;
    } else if (a == "--warmup-steps") {
      o.schedule.warmupSteps = parseInt(a, next(), 0, "a step count");
    } else if (a == "--decay-steps") {
      o.schedule.decaySteps = parseInt(a, next(), 1, "a step count");
    } else if (a == "--strict-memory") {
      noValue();
      o.strictMemory = true;
    } else if (a == "--comm-cores") {
      o.commCores = parseInt(a, next(), 0, "a number of cores");
      o.commCoresGiven = true;
    } else if (a == "--comm-timeout") {
      o.commTimeout = parseNumber(a, next(), 0, 86400, false, "seconds (0: off, up to 86400)");
    } else if (a == "--offload-dir") {
      o.offloadDir = next();
      if (o.offloadDir.empty())
        usageError("--offload-dir needs a folder");
    } else if (a == "--strict-topology") {
      noValue();
      o.strictTopology = true;
    } else if (a == "--profile") {
      o.profile = next();
    } else if (a == "--check-finite") {
      noValue();
      o.checkFinite = true;
    } else if (a == "--progress-every") {
      o.progressEvery = parseNumber(a, next(), 1, 86400, false, "seconds (1 to 86400)");
      trainOnly.push_back(a);
    } else if (a == "--progress" || a == "--no-progress") {
      noValue();
      o.progress = a == "--progress";
      trainOnly.push_back(a);
    } else if (a.size() > 1 && a[0] == '-') {
      usageError("unknown flag " + a + " (see hc-run --help)");
    } else if (o.step.empty()) {
      o.step = a;
    } else {
      usageError("unexpected argument '" + a + "' (one STEP.so only)");
    }
  }
  if (o.help)
    return o;
  // By name: identities and checkpoints do not depend on the flags' order.
  for (auto *list : {&o.conds, &o.valConds})
    std::sort(list->begin(), list->end(),
              [](const CondFlag &a, const CondFlag &b) { return a.name < b.name; });
  if (o.step.empty())
    usageError("no STEP.so given (see hc-run --help)");
  if (!o.inputs.empty() && !o.data.empty())
    usageError("--inputs (test mode) and --data (train mode) exclude each other");
  if (o.inputs.empty() && o.data.empty())
    usageError("give --inputs DIR (test mode) or --data X.npy (train mode)");
  if (!stepsSeen)
    usageError("--steps is required");
  if (o.trainMode() && o.steps < 1)
    usageError("--steps must be at least 1 in train mode");
  if ((o.resume || o.ckptEvery > 0 || o.ckptKeep > 0) && o.ckptDir.empty())
    usageError(std::string(o.resume ? "--resume" : o.ckptEvery > 0
                                                       ? "--ckpt-every"
                                                       : "--ckpt-keep") +
               " needs --ckpt-dir D");
  if (o.checkpointOnGiven && o.ckptDir.empty())
    usageError("--checkpoint-on/--checkpoint-grace need --ckpt-dir D (the "
               "checkpoint a signal writes)");
  if (o.allowDataChange && !o.resume)
    usageError("--allow-data-change is for --resume");
  if (o.emaDecay >= 0 && o.ckptDir.empty())
    usageError("--ema needs --ckpt-dir D (the EMA is saved in checkpoints)");
  const LrSchedule &sc = o.schedule;
  const bool decays = sc.kind == LrSchedule::Kind::Linear || sc.kind == LrSchedule::Kind::Cosine;
  if (!decays && (minLrSeen || sc.decaySteps >= 0))
    usageError(std::string(minLrSeen ? "--min-lr" : "--decay-steps") +
               " is for --lr-schedule linear or cosine");
  if (sc.warmupSteps > 0 && sc.kind == LrSchedule::Kind::None)
    usageError("--warmup-steps needs --lr-schedule constant, linear or cosine");
  if (sc.lr >= 0 && sc.minLr > sc.lr)
    usageError("--min-lr " + std::to_string(sc.minLr) + " is above --lr " +
               std::to_string(sc.lr));
  if (decays && sc.warmupSteps > (sc.decaySteps >= 0 ? sc.decaySteps : o.steps))
    usageError("--warmup-steps " + std::to_string(sc.warmupSteps) + " is past the end of "
               "the decay (" + (sc.decaySteps >= 0 ? "--decay-steps " : "--steps ") +
               std::to_string(sc.decaySteps >= 0 ? sc.decaySteps : o.steps) + ")");
  if ((!o.valLabels.empty() || o.valEvery > 0 || !o.valConds.empty()) && o.valData.empty())
    usageError(std::string(o.valEvery > 0 ? "--val-every" : !o.valConds.empty() ? "--val-cond"
                                                                                : "--val-labels") +
               " needs --val-data");
  if (o.logitGiven && !o.timeSampling.logitNormal)
    usageError("--logit-mean/--logit-std need --time-sampling logit-normal");
  if (!o.trainMode() && !trainOnly.empty())
    usageError(trainOnly.front() + " is a train-mode flag (with --data), "
               "not for --inputs");
  return o;
}

} // namespace hcrun
