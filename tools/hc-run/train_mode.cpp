// Train mode: DiT training from an NPY dataset, data-parallel over the ranks.
#include "checkpointing.h"
#include "train_data.h"
#include "tensorboard.h"
#include "validation.h"
#include "common.h"
#include "data.h"
#include "machine_check.h"
#include "preemption.h"
#include "progress.h"
#include "profile.h"
#include "rank_agreement.h"

#include "hc/runtime/checkpoint.h"
#include "hc/runtime/copy_engine.h"
#include "hc/base/files.h"
#include "hc/runtime/kernels.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <cmath>
#include <cstdio>
#include <fcntl.h>
#include <sched.h>
#include <sys/resource.h>
#include <unistd.h>

namespace hcrun {
namespace {

using Clock = std::chrono::steady_clock;

double peakRssMb() {
  struct rusage u;
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_maxrss) / 1024.0; // KiB on Linux
}

// The kernel's resident-set high-water mark (VmHWM), in MB; -1 if unknown.
double vmHwmMb() {
  std::FILE *f = std::fopen("/proc/self/status", "r");
  if (!f)
    return -1;
  char line[256];
  double kb = -1;
  while (std::fgets(line, sizeof line, f))
    if (std::sscanf(line, "VmHWM: %lf kB", &kb) == 1)
      break;
  std::fclose(f);
  return kb < 0 ? -1 : kb / 1024.0;
}

// Restarts VmHWM from the current resident set (Linux 4.0+: "5" to
// /proc/self/clear_refs), so the steps' own peak can be told from the
// setup's (loading parameters or a checkpoint).
bool resetVmHwm() {
  std::FILE *f = std::fopen("/proc/self/clear_refs", "w");
  if (!f)
    return false;
  bool ok = std::fputs("5", f) >= 0;
  return std::fclose(f) == 0 && ok;
}

// Opens --metrics for writing; on a resume from step k keeps the lines of
// steps <= k (a crashed run may have logged past its last checkpoint).
std::FILE *openMetrics(const std::string &path, int64_t resumedStep) {
  std::vector<std::string> kept;
  if (resumedStep > 0)
    if (std::FILE *old = std::fopen(path.c_str(), "r")) {
      char line[4096];
      while (std::fgets(line, sizeof line, old)) {
        nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
        if (!j.is_discarded() && j.is_object() && j.contains("step") &&
            j["step"].is_number_integer() && j["step"].get<int64_t>() <= resumedStep)
          kept.push_back(line);
      }
      std::fclose(old);
    }
  std::string err;
  int fd = hc::rt::openNoFollow(path, O_WRONLY | O_CREAT | O_TRUNC, err);
  std::FILE *f = fd >= 0 ? fdopen(fd, "w") : nullptr;
  if (!f)
    usageError("--metrics " + (fd < 0 ? err : path + ": cannot write"));
  for (const auto &l : kept)
    std::fputs(l.c_str(), f);
  return f;
}

// A metrics line as TensorBoard scalars: the loss and learning rate under
// train/, everything else numeric under its group (step and wall time are
// the event's own fields).
std::vector<std::pair<std::string, double>> tensorboardScalars(const nlohmann::ordered_json &m) {
  std::vector<std::pair<std::string, double>> out;
  for (const auto &[k, v] : m.items()) {
    if (!v.is_number() || k == "step" || k == "wall_s")
      continue;
    if (k == "val_samples")
      continue;
    if (k.rfind("val_", 0) == 0) {
      out.push_back({"val/" + k.substr(4), v.get<double>()});
      continue;
    }
    const bool train = k == "loss" || k == "lr" || k == "grad_norm";
    const bool memory = k.find("rss") != std::string::npos || k.rfind("copy", 0) == 0;
    out.push_back({(train ? "train/" : memory ? "memory/" : "perf/") + k, v.get<double>()});
  }
  return out;
}

// The plan against MemAvailable, the cgroup and ulimit -v before anything
// large is allocated: a warning, or exit 2 under --strict-memory.
void checkMemory(const Options &opt, const StepLibrary &lib, int r) {
  // hc::rt::hashFile's 8 MiB chunk checks the init file while the arenas
  // are held.
  int64_t extra = 8 << 20, params = 0, state = 0;
  for (const TensorSpec &in : lib.desc.inputs)
    extra += static_cast<int64_t>(in.bytes());
  for (const TensorSpec &p : lib.desc.parameters)
    params += static_cast<int64_t>(p.bytes());
  for (const TensorSpec &s : lib.desc.state)
    state += static_cast<int64_t>(s.bytes());
  if (r == 0 && opt.emaDecay >= 0)
    extra += params;
  if (r == 0 && !opt.ckptDir.empty())
    extra += params + state;  // the checkpoint's write buffer
  if (opt.accumulate > 1)  // the gradient accumulator, allocated on demand
    extra += lib.desc.raw.value("accumulator_bytes", int64_t{0});
  if (!opt.valData.empty())  // validation's inputs and the raw weights kept aside
    extra += 2 * params;
  const std::string line =
      memoryShortfall(lib.desc.raw, extra, currentMachine().localRanks);
  if (line.empty())
    return;
  if (opt.strictMemory)
    usageError(line + " (--strict-memory; hc-compile --mem-budget plans smaller)");
  if (r == 0)
    std::printf("hc-run: warning: %s: the run may be killed for memory "
                "(--strict-memory refuses; hc-compile --mem-budget plans "
                "smaller)\n", line.c_str());
}

// Open MPI hands ranks a pseudo-terminal for stdout, so isatty(1) says
// nothing under mpirun, and the launcher's own stdout cannot be seen
// reliably: under a launcher the bar is opt-in (--progress).
bool stdoutIsTerminal() {
  return isatty(STDOUT_FILENO) && !hc::rt::launchedByMpi();
}

// Every rank agreed to stop after step `done` (a preemption signal): rank 0
// writes that step's checkpoint unless it is on disk already, every rank
// waits for it, and all exit kPreemptedExit. `abandoned`: step done + 1 was
// stopped at its update gate.
int stopForPreemption(const Options &opt, hc::rt::Comm &comm, Checkpointer &ckpt,
                      StepContext &ctx, const Ema &ema, uint64_t seed,
                      std::FILE *metrics, int sig, int64_t done,
                      int64_t lastCheckpoint, bool abandoned) {
  const int r = comm.rank();
  std::string saved;
  Error failure(0, "");
  bool failed = false;
  if (r == 0) {
    try {
      if (done > lastCheckpoint) {
        ckpt.write(ctx, ema, done, seed);
        saved = "checkpoint " + hc::rt::checkpointPath(opt.ckptDir, done);
      } else {
        saved = done > 0 ? "its checkpoint " +
                               hc::rt::checkpointPath(opt.ckptDir, done) +
                               " was written already"
                         : "nothing trained yet, nothing to save";
      }
    } catch (const Error &e) {
      failure = e;
      failed = true;
    }
    if (metrics)
      std::fclose(metrics);
  }
  // No rank leaves before rank 0's checkpoint is complete: under mpirun the
  // first rank to exit non-zero ends the others.
  agreeOrExit(comm, failed ? &failure : nullptr);
  if (r == 0) {
    std::fflush(stdout);
    std::fprintf(stderr,
                 "hc-run: %s: stopped after step %lld of %lld%s; %s; continue "
                 "with --resume (exit %d)\n",
                 signalName(sig).c_str(), static_cast<long long>(done),
                 static_cast<long long>(opt.steps),
                 abandoned ? (", step " + std::to_string(done + 1) +
                              " abandoned before its update (--checkpoint-grace " +
                              nlohmann::json(opt.preemption.graceSeconds).dump() +
                              " s passed)").c_str()
                           : "",
                 saved.c_str(), kPreemptedExit);
    std::fflush(stderr);
  }
  comm.finalize();
  return kPreemptedExit;
}

} // namespace

int runTrainMode(const Options &opt, const StepLibrary &lib, hc::rt::Comm &comm) {
  const Description &d = lib.desc;
  const int R = comm.size(), r = comm.rank();
  const int64_t K = opt.accumulate;
  const int64_t B = d.batchPerRank, G = R * B * K;
  MappedNpy images, labels;
  CondData conds;
  Plan plan;
  std::unique_ptr<StepContext> ctx;
  std::FILE *metrics = nullptr;
  TensorBoardWriter tensorboard;
  Validation validation;
  Checkpointer ckpt(opt, lib, comm);
  Error failure(0, "");
  bool failed = false;
  DataFiles files;
  LrSchedule schedule;
  try {
    checkOutputs(opt, lib, r);
    schedule = resolveSchedule(opt, lib);
    ckpt.setSchedule(schedule);
    if (K > 1 && !lib.desc.hyperparameters.count("micro_batches"))
      usageError("--accumulate: " + lib.path + " has no 'micro_batches' hyperparameter "
                 "(compiled before accumulation was part of the step: recompile it)");
    plan = checkData(opt, lib, R, images, labels, conds);
    validation.open(opt, lib, plan, R, r);
    files = dataFilesOf(opt);
  } catch (const Error &e) {
    failure = e;
    failed = true;
  }
  agreeOrExit(comm, failed ? &failure : nullptr);
  // Before anything large is allocated: every rank runs the same training.
  agreeAcrossRanks(opt, lib, files, comm);
  try {
    checkMemory(opt, lib, r);
    ctx = std::make_unique<StepContext>(lib, comm, opt.checkFinite, !opt.profile.empty());
    if (K > 1)
      ctx->setHyperparameter("micro_batches", static_cast<double>(K));
    ctx->loadInit(opt.init);
    if (r == 0 && ckpt.on())
      ckpt.prepare({G, plan.n, opt.data, opt.labels, files.data, files.labels,
                    joinCondFlags(opt.conds, [](const CondFlag &c) { return c.path; }, ""),
                    files.conds});
    if (r == 0 && !opt.metrics.empty())
      metrics = openMetrics(opt.metrics, ckpt.pickedStep());
    if (r == 0 && !opt.tensorboard.empty())
      tensorboard.open(opt.tensorboard);
  } catch (const Error &e) {
    failure = e;
    failed = true;
  }
  agreeOrExit(comm, failed ? &failure : nullptr);
  if (r == 0 && ckpt.on() && preemption::armed())
    preemption::noteLauncherWindow(opt.preemption);

  uint64_t seed = opt.seed;
  Ema ema;
  int64_t first = 0; // steps already done (a resumed checkpoint's step)
  try {
    if (ckpt.on())
      first = ckpt.restore(*ctx, ema, seed);
  } catch (const Error &e) {
    comm.fail(e.code, e.what());
  }
  // Memory: the setup's peak (arenas, parameters or checkpoint loaded),
  // then the steps' own from here on.
  double setupPeak = vmHwmMb();
  const bool hwmReset = resetVmHwm();
  if (R > 1 && !comm.allreduceMaxF64(&setupPeak, 1))
    comm.fail(1, "collective failed while gathering memory use");

  // Per-rank input buffers, in the description's order.
  const std::size_t D = plan.sampleElems;
  BatchBuffers batch(d, plan, B);
  std::vector<const float *> condRows(conds.size());

  EpochSampler sampler(seed, plan.n, G);
  DiffusionSchedule sched;
  const bool bar = r == 0 && (opt.progress == 1 ||
                              (opt.progress == -1 && stdoutIsTerminal()));
  if (r == 0) {
    cpu_set_t set;
    if (R > 1 && sched_getaffinity(0, sizeof set, &set) == 0 &&
        CPU_COUNT(&set) == 1 && sysconf(_SC_NPROCESSORS_ONLN) > R)
      std::printf("hc-run: note: rank 0 is bound to one core; launch with "
                  "mpirun --bind-to none so the step's threads can spread\n");
    if (K > 1)
      std::printf("hc-run: %lld micro-batches of %lld per optimizer step and rank "
                  "(--accumulate)\n", (long long)K, (long long)B);
    const std::string perRank =
        K > 1 ? std::to_string(K) + " micro-batches x batch " + std::to_string(B)
              : "batch " + std::to_string(B);
    std::printf("hc-run: %s, %lld rank(s) x %s = global batch %lld; "
                "data %s: %lld samples %s (%lld steps/epoch)%s; steps %lld..%lld, "
                "seed %llu, label dropout %g\n",
                lib.path.c_str(), (long long)R, perRank.c_str(), (long long)G,
                opt.data.c_str(), (long long)plan.n,
                shapeString(plan.chw).c_str(),
                (long long)sampler.stepsPerEpoch(),
                opt.labels.empty() ? ", no labels (null class)" : "",
                (long long)first + 1, (long long)opt.steps,
                (unsigned long long)seed,
                plan.dropProb);
    if (plan.flow)
      std::printf("hc-run: flow matching: %s; t drawn %s on [%g, %g] (1 = data)\n",
                  plan.flowObjective.describe().c_str(), plan.timeSampling.text().c_str(),
                  plan.flowObjective.trainInterval().first,
                  plan.flowObjective.trainInterval().second);
    if (!plan.conds.empty()) {
      std::string list;
      for (std::size_t k = 0; k < plan.conds.size(); ++k)
        list += (k ? ", " : "") + plan.conds[k].name + " (" + plan.conds[k].describe() +
                ", " + conds.file(k).path() + ")";
      std::printf("hc-run: conditioned on %s; each takes its null form with probability "
                  "%g%s\n", list.c_str(), plan.condDropProb,
                  opt.hflip ? "; fields mirror with their sample" : "");
    }
    if (schedule.given())
      std::printf("hc-run: learning rate: %s\n", schedule.describe().c_str());
    if (d.raw.value("precision", std::string()) == "bf16")
      std::printf("hc-run: bf16 GEMMs: %s\n",
                  hcrt_bf16_path() == HC_BF16_AMX ? "AMX-BF16 tiles"
                  : hcrt_bf16_path() == HC_BF16_AMX_EMULATED
                      ? "the AMX kernel on emulated tiles (HC_AMX=2: a test mode, slow)"
                  : hcrt_bf16_native()
                      ? "AVX512-BF16 vdpbf16ps (faster than the fp32 FMAs here)"
                      : hcrt_bf16_over_fma() > 0
                            ? "bf16-rounded operands on the fp32 FMAs (this CPU's vdpbf16ps "
                              "is slower than its FMAs)"
                            : "bf16-rounded operands on the fp32 FMAs (no AVX512-BF16)");
    if (plan.dataMaxAbs > 10)
      std::printf("hc-run: warning: %s holds values up to %g in its first samples: DiT "
                  "trains on pixels scaled to [-1, 1] (x / 127.5 - 1) or on VAE latents, "
                  "so data in [0, 255] trains badly\n",
                  opt.data.c_str(), plan.dataMaxAbs);
    if (first == opt.steps)
      std::printf("hc-run: the checkpoint is at --steps %lld already; nothing "
                  "to train\n", (long long)opt.steps);
    // A long run that keeps nothing is almost always a forgotten flag.
    if (opt.steps - first > 100 && opt.ckptDir.empty() && opt.saveParams.empty() &&
        opt.saveState.empty())
      std::printf("hc-run: warning: %lld steps and nothing will be saved (no "
                  "--ckpt-dir, --save-params or --save-state): the trained "
                  "weights end with the run\n", (long long)(opt.steps - first));
    std::fflush(stdout);
  }

  Profiler profiler(opt, lib);
  if (r == 0)
    profiler.measureMachine();
  comm.takeStats();
  const auto start = Clock::now();
  auto windowStart = start;
  double windowLoss = 0;
  int64_t window = 0;
  int64_t lastCheckpoint = first;  // the newest checkpoint's step on disk
  Progress progress(r == 0 && opt.progress != 0, bar, opt.progressEvery, first, opt.steps);
  // Rank 0: one metrics line, and its numbers as TensorBoard scalars.
  auto record = [&](int64_t done, const nlohmann::ordered_json &m) {
    const std::string line = m.dump() + "\n";
    if (metrics && (std::fputs(line.c_str(), metrics) < 0 || std::fflush(metrics) != 0))
      comm.fail(1, "--metrics " + opt.metrics + ": write failed");
    try {
      tensorboard.scalars(done, tensorboardScalars(m));
    } catch (const Error &e) {
      comm.fail(e.code, e.what());
    }
  };
  auto stopFor = [&](int sig, int64_t done, bool abandoned) {
    if (bar)
      std::printf("\n");
    return stopForPreemption(opt, comm, ckpt, *ctx, ema, seed, metrics, sig,
                             done, lastCheckpoint, abandoned);
  };
  for (int64_t s = first; s < opt.steps; ++s) {
    // A preemption signal on any rank: every rank stops here, at a step
    // boundary they agree on.
    if (preemption::armed())
      if (int sig = preemption::agreeAtBoundary(comm))
        return stopFor(sig, s, false);
    // The data must stay what the run started with: a file rewritten or cut
    // under the job is named and stops it (exit 1), never read half-changed.
    std::vector<const MappedNpy *> watched = {&images, &labels};
    for (std::size_t k = 0; k < conds.size(); ++k)
      watched.push_back(&conds.file(k));
    for (const MappedNpy *f : watched) {
      if (f->path().empty())
        continue;
      if (r == 0 && f == &images)
        dataFaultForTest(*f, s + 1, false);
      std::string what = f->changed();
      if (!what.empty())
        comm.fail(1, f->path() + " " + what + "; stopping before step " +
                         std::to_string(s + 1));
      if (r == 0 && f == &images)
        dataFaultForTest(*f, s + 1, true);
    }
    double loss = 0, lr = 0, gradNorm = 0;
    bool stopped = false;
    const auto stepStart = Clock::now();
    for (int64_t m = 0; m < K && !stopped; ++m) {
      for (int64_t b = 0; b < B; ++b) {
        // Rank r's K micro-batches are its rows of a K-times larger batch.
        const int64_t g = (r * K + m) * B + b;
        const int64_t row = sampler.row(s, g);
        const float *x0 = reinterpret_cast<const float *>(images.data()) +
                          static_cast<std::size_t>(row) * D;
        // Bad pixels are named where they are, not as a NaN loss later: one
        // pass over a sample about to be read anyway.
        for (std::size_t i = 0; i < D; ++i)
          if (!std::isfinite(x0[i]))
            comm.fail(2, opt.data + ": sample " + std::to_string(row) + " holds " +
                             (std::isnan(x0[i]) ? "NaN" : "an infinity") +
                             " at element " + std::to_string(i) + " (found building "
                             "the batch of step " + std::to_string(s + 1) + ")");
        const std::string bad = conds.nonFinite(row);
        if (!bad.empty())
          comm.fail(2, bad + " (found building the batch of step " + std::to_string(s + 1) +
                           ")");
        for (std::size_t k = 0; k < conds.size(); ++k)
          condRows[k] = conds.row(k, row);
        int64_t label = opt.labels.empty() ? plan.nullClass : labelAt(labels, row);
        batch.fill(b, sched, seed, static_cast<uint64_t>(s), static_cast<uint64_t>(g), x0,
                   label, opt.labels.empty() ? 0.0 : plan.dropProb,
                   opt.hflip ? static_cast<std::size_t>(plan.chw.back()) : 0, condRows,
                   plan.condDropProb);
      }
      try {
        if (m == 0) {
          preemption::beforeStep(s + 1);
          lr = applySchedule(schedule, lib, *ctx, s);
        }
        if (K > 1)
          ctx->setHyperparameter("micro_batch", static_cast<double>(m));
        loss = ctx->step(batch.ptrs(), s + 1, &stopped);
        if (!stopped && m == K - 1)
          gradNorm = ctx->gradNorm();
      } catch (const Error &e) {
        comm.fail(e.code, e.what());
      }
    }
    if (stopped)  // abandoned at the update gate: the state is step s's
      return stopFor(preemption::agreeAtBoundary(comm), s, true);
    profiler.afterStep(*ctx, s + 1,
                       std::chrono::duration<double>(Clock::now() - stepStart).count());
    if (!std::isfinite(loss)) {
      // The loss is averaged over ranks: every rank sees it and stops alike.
      if (r == 0) {
        if (bar)
          std::printf("\n");
        std::fflush(stdout);
        std::fprintf(stderr, "hc-run: non-finite loss (%g) at step %lld; "
                     "stopping\n", loss, static_cast<long long>(s + 1));
      }
      if (metrics)
        std::fclose(metrics);
      comm.finalize();
      return 1;
    }
    windowLoss += loss;
    ++window;
    const int64_t done = s + 1;
    if (r == 0 && (ema.on() || ckpt.due(done))) {
      try {
        if (ema.on())
          ema.update(lib, *ctx);
        if (ckpt.due(done)) {
          if (bar)
            std::printf("\r\033[K");
          const auto before = Clock::now();
          ckpt.write(*ctx, ema, done, seed);
          lastCheckpoint = done;
          windowStart += Clock::now() - before; // steps/s measures training
        }
      } catch (const Error &e) {
        comm.fail(e.code, e.what());
      }
    }
    if (validation.due(done, opt.steps)) {
      const auto before = Clock::now();
      const Validation::Result v = validation.run(lib, *ctx, ema, comm);
      windowStart += Clock::now() - before;  // steps/s measures training
      if (r == 0) {
        if (bar)
          std::printf("\r\033[K");
        char emaText[64] = "";
        if (std::isfinite(v.ema))
          std::snprintf(emaText, sizeof emaText, ", EMA Val Loss: %.4f", v.ema);
        std::printf("(step=%07lld) Val Loss: %.4f%s (%lld samples)\n",
                    static_cast<long long>(done), v.raw, emaText,
                    static_cast<long long>(validation.samples()));
        std::fflush(stdout);
        nlohmann::ordered_json m = {{"step", done}, {"val_loss", v.raw}};
        if (std::isfinite(v.ema))
          m["val_loss_ema"] = v.ema;
        m["val_samples"] = validation.samples();
        record(done, m);
      }
    }
    const bool log = done % opt.logEvery == 0 || done == opt.steps;
    if (!log) {
      double el = std::chrono::duration<double>(Clock::now() - windowStart).count();
      progress.step(done, loss, el > 0 ? window / el : 0);
    }
    if (!log)
      continue;
    const auto now = Clock::now();
    double el = std::chrono::duration<double>(now - windowStart).count();
    const hc::rt::Comm::Stats commStats = comm.takeStats();
    double sps = el > 0 ? window / el : 0;
    double rss[2] = {peakRssMb(), hwmReset ? vmHwmMb() : -1.0};
    if (R > 1 && !comm.allreduceMaxF64(rss, 2))
      comm.fail(1, "collective failed while gathering memory use");
    if (r == 0) {
      double avg = windowLoss / window;
      double gflops = d.flopsPerStep * R * K * sps / 1e9;
      double wall = std::chrono::duration<double>(now - start).count();
      if (bar)
        std::printf("\r\033[K");
      std::printf("(step=%07lld) Train Loss: %.4f, Train Steps/Sec: %.2f, "
                  "Img/Sec: %.1f, GFLOP/s: %.1f, Peak RSS: %.0f MB\n",
                  static_cast<long long>(done), avg, sps, sps * G, gflops, rss[0]);
      progress.logged(done, loss, sps);
      std::fflush(stdout);
      if (metrics || tensorboard.isOpen()) {
        nlohmann::ordered_json m = {{"step", done},        {"loss", avg},
                            {"lr", lr},
                            {"steps_per_sec", sps}, {"img_per_sec", sps * G},
                            {"gflops", gflops},     {"peak_rss_mb", rss[0]},
                            {"setup_peak_rss_mb", setupPeak},
                            {"step_peak_rss_mb", rss[1]},
                            {"wall_s", wall}};
        // The last step's gradient norm before clipping (compiled steps).
        if (std::isfinite(gradNorm))
          m["grad_norm"] = gradNorm;
        // Tier copies (hc-automem), per step, rank 0's view: megabytes moved
        // (to and from DRAM, to and from disk), the copy threads' busy time,
        // the time the step waited for copies (stall) and the share of the
        // copying hidden under compute.
        hcrt_copy_stats cs;
        hcrt_copy_stats_take(&cs);
        if (cs.copies > 0) {
          const double per = 1.0 / window;
          m["copy_mb"] = (cs.bytes[HCRT_COPY_TO_SLOW] + cs.bytes[HCRT_COPY_FROM_SLOW]) * per / 1e6;
          m["copy_mb_disk"] = (cs.bytes[HCRT_COPY_TO_DISK] + cs.bytes[HCRT_COPY_FROM_DISK]) * per / 1e6;
          m["copy_busy_s"] = cs.busy_s * per;
          m["copy_stall_s"] = cs.stall_s * per;
          m["copy_hidden"] = cs.busy_s > 0 ? std::max(0.0, 1.0 - cs.stall_s / cs.busy_s) : 1.0;
        }
        if (R > 1) {
          // Per step, rank 0's view: the all-reduce in flight (comm_s), the
          // part the step waited for (exposed) and the part under compute.
          const double per = 1.0 / window;
          const double inflight = commStats.inflightSeconds * per,
                       exposed = commStats.blockedSeconds * per;
          m["step_s"] = el * per;
          m["compute_s"] = el * per - exposed;
          m["comm_s"] = inflight;
          m["comm_exposed_s"] = exposed;
          m["comm_hidden_s"] = std::max(0.0, inflight - exposed);
          m["comm_mb"] = commStats.bytes * per / 1e6;
        }
        // --profile: where the window's compute went, and its MFU.
        const nlohmann::ordered_json split = profiler.window(*ctx);
        for (auto &[key, value] : split.items())
          m[key] = value;
        record(done, m);
      }
    }
    windowLoss = 0;
    window = 0;
    windowStart = Clock::now();
    comm.takeStats(); // the window's own collectives (memory, metrics) are not the step's
  }
  if (metrics && std::fclose(metrics) != 0)
    comm.fail(1, "--metrics " + opt.metrics + ": write failed");
  finishRun(opt, *ctx, comm, opt.steps);
  try {
    if (r == 0)
      profiler.finish(*ctx);
  } catch (const Error &e) {
    comm.fail(e.code, e.what());
  }
  if (r == 0) {
    double wall = std::chrono::duration<double>(Clock::now() - start).count();
    std::printf("hc-run: done: %lld steps in %.1f s%s%s\n",
                static_cast<long long>(opt.steps - first), wall,
                opt.metrics.empty() ? "" : ", metrics in ",
                opt.metrics.c_str());
  }
  return 0;
}

} // namespace hcrun
