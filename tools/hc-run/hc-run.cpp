// hc-run: loads a compiled training step (dit_step.so, see
// hc/abi/step_abi.h) and runs it, data-parallel under mpirun:
//   test mode  (--inputs DIR): fixed global inputs, prints each step's loss,
//                              saves parameters / gradients / state;
//   train mode (--data X.npy): DiT training with diffusion sampling, logs
//                              and metrics;
//   hc-run sample SAMPLER.so:  images from a trained model (sample_mode.cpp).
// MPI is used when a launcher started the process (mpirun sets
// OMPI_COMM_WORLD_SIZE); plain `hc-run ...` is one rank without MPI.
#include "common.h"
#include "machine_check.h"
#include "data.h"

#include "hc/base/settings.h"

#include "hc/runtime/copy_engine.h"
#include "hc/runtime/hcrt.h"
#include "hc/runtime/kernels.h"

#include <algorithm>
#include <cerrno>
#include <sys/statvfs.h>
#include <sys/stat.h>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <new>
#include <unistd.h>
#include <string>
#include <vector>

namespace {
// A rank that dies must say so before mpirun tears the job down: the signal
// handler prints one line (async-signal-safe calls only) and dies by the same
// signal, so mpirun sees an abnormal end and kills the other ranks rather
// than letting them wait in a collective. SIGKILL cannot be caught; mpirun
// reports it.
char deathLine[128];
std::size_t deathPrefix = 0;

void onFatalSignal(int sig, siginfo_t *info, void *) {
  // A data file cut short under the run: its mapping faults. That is the
  // file's fault, not hc's: say which file, exit 1.
  if (sig == SIGBUS && info)
    if (const char *line = hcrun::mappedFileFault(info->si_addr)) {
      ssize_t ignored = write(STDERR_FILENO, line, std::strlen(line));
      (void)ignored;
      _exit(1);
    }
  const char *name = sig == SIGSEGV ? "SIGSEGV" : sig == SIGBUS ? "SIGBUS"
                   : sig == SIGFPE  ? "SIGFPE"  : sig == SIGILL ? "SIGILL"
                                                                : "SIGABRT";
  std::size_t n = deathPrefix;
  for (const char *p = name; *p && n + 2 < sizeof deathLine; ++p)
    deathLine[n++] = *p;
  deathLine[n++] = '\n';
  ssize_t ignored = write(STDERR_FILENO, deathLine, n);
  (void)ignored;
  std::signal(sig, SIG_DFL);
  std::raise(sig);
}

hc::rt::Comm *theComm = nullptr;
int64_t gPlanBytes = 0;  // the loaded library's arenas, for out-of-memory

void installFailureHandlers(hc::rt::Comm &comm) {
  theComm = &comm;
  std::string prefix = comm.size() > 1
                           ? "hc-run: rank " + std::to_string(comm.rank()) + ": "
                           : "hc-run: ";
  prefix += "internal error: killed by signal ";
  deathPrefix = std::min(prefix.size(), sizeof deathLine - 16);
  std::memcpy(deathLine, prefix.data(), deathPrefix);
  struct sigaction sa;
  std::memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = onFatalSignal;
  sa.sa_flags = SA_SIGINFO;
  sigemptyset(&sa.sa_mask);
  for (int sig : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT})
    sigaction(sig, &sa, nullptr);
  // A file-size limit (ulimit -f) then fails the write that meets it with
  // EFBIG, which the writer reports (checkpoints, the disk tier), instead
  // of killing the process.
  std::signal(SIGXFSZ, SIG_IGN);
  std::set_terminate([] {
    std::string what = "an unknown exception";
    if (auto e = std::current_exception()) {
      try {
        std::rethrow_exception(e);
      } catch (const std::bad_alloc &) {
        // Out of memory is the machine's limit, not an hc bug: say how much
        // the plan wanted and what was there.
        std::signal(SIGABRT, SIG_DFL);
        theComm->fail(1, "out of memory: an allocation failed (std::bad_alloc); "
                         "the step's plan takes " +
                             std::to_string(gPlanBytes) + " bytes of arenas per "
                             "rank; " + hcrun::memoryOffer().text() +
                             " (hc-compile --mem-budget plans smaller)");
      } catch (const std::exception &x) {
        what = x.what();
      } catch (...) {
      }
    }
    std::signal(SIGABRT, SIG_DFL);
    theComm->fail(1, "internal error: uncaught exception: " + what);
  });
}
// Who advances the gradient all-reduce (comm.h): a comm thread on cores
// reserved with --comm-cores, else the step itself between kernels; the
// old unpinned, sleeping comm thread only when HC_COMM_PROGRESS=thread.
void setUpProgress(const hcrun::Options &opt, hc::rt::Comm &comm) {
  const char *mode = hc::rt::setting(hc::rt::Setting::CommProgress); // checkSettings: inline|thread
  if (opt.commCores > 0) {
    // Reserved cores also carry the copy engine's thread (tier copies).
    const int32_t want = static_cast<int32_t>(std::min<int64_t>(opt.commCores, 1 << 20));
    std::vector<int32_t> cores(static_cast<std::size_t>(want));
    if (hcrt_reserve_cores(want, cores.data()) == want) {
      if (comm.size() > 1)
        comm.setProgress(hc::rt::Comm::Progress::Thread, cores[0]);
      return;
    }
    if (comm.size() < 2)
      return;
    if (comm.rank() == 0)
      std::printf("hc-run: note: --comm-cores %d: this rank's share of cores "
                  "cannot spare %d; the step drives communication itself\n",
                  static_cast<int>(want), static_cast<int>(want));
  }
  comm.setProgress(mode && !std::strcmp(mode, "thread")
                       ? hc::rt::Comm::Progress::Thread
                       : hc::rt::Comm::Progress::Inline,
                   -1);
}
// A library planned with a disk tier (hc-compile --offload-dir): its folder
// (--offload-dir, else the compiled one) must exist, be a folder on a
// writable file system and have room for the tier, or the run stops here
// (exit 2) rather than at the first step. The runtime makes the file and
// reserves it in full when the step context is created.
void checkOffloadDir(const nlohmann::json &desc, const std::string &given,
                     const std::string &step) {
  const nlohmann::json *plan = desc.contains("memory_plan") ? &desc["memory_plan"] : nullptr;
  if (!plan || !plan->contains("tiers"))
    return;
  int64_t bytes = 0;
  for (const auto &t : (*plan)["tiers"])
    if (t.value("kind", "") == "disk" && t.contains("arena_bytes"))
      bytes += t["arena_bytes"].value("offload", int64_t{0});
  if (bytes <= 0)
    return;
  const std::string dir = !given.empty() ? given : plan->value("offload_dir", "");
  const std::string what = given.empty() ? step + " offloads to disk in " + dir
                                          : "--offload-dir " + dir;
  if (dir.empty())
    hcrun::usageError(step + " offloads to disk and names no folder: give --offload-dir DIR");
  struct stat st;
  if (stat(dir.c_str(), &st) != 0)
    hcrun::usageError(what + ": " + std::strerror(errno));
  if (!S_ISDIR(st.st_mode))
    hcrun::usageError(what + ": not a folder");
  struct statvfs fs;
  if (statvfs(dir.c_str(), &fs) != 0)
    hcrun::usageError(what + ": " + std::strerror(errno));
  if (fs.f_flag & ST_RDONLY)
    hcrun::usageError(what + ": a read-only file system");
  if (access(dir.c_str(), W_OK | X_OK) != 0)
    hcrun::usageError(what + ": not writable (" + std::strerror(errno) + ")");
  const double free = static_cast<double>(fs.f_bavail) * static_cast<double>(fs.f_frsize);
  if (free < static_cast<double>(bytes))
    hcrun::usageError(what + ": the disk tier needs " + std::to_string(bytes) + " bytes, " +
               std::to_string(static_cast<int64_t>(free)) + " are free");
}
} // namespace

int main(int argc, char **argv) {
  using namespace hcrun;
  std::string err;
  std::unique_ptr<hc::rt::Comm> comm = hc::rt::makeWorldComm(&argc, &argv, err);
  if (!comm) {
    std::fprintf(stderr, "hc-run: cannot start MPI: %s\n", err.c_str());
    return 2;
  }
  comm->prefix = "hc-run";
  installFailureHandlers(*comm);

  if (argc > 1 && std::strcmp(argv[1], "sample") == 0) {
    int rc = 2;
    try {
      rc = runSampleMode(argc - 1, argv + 1, *comm);
    } catch (const Error &e) {
      std::fprintf(stderr, "hc-run: %s\n", e.what());
      rc = e.code;
    }
    std::fflush(stdout);
    comm->finalize();
    return rc;
  }
  Options opt;
  StepLibrary lib;
  MachineCheck machine;
  Error failure(0, "");
  bool failed = false;
  try {
    opt = parseOptions(argc, argv);
    std::string bad;
    if (!opt.help && !hc::rt::checkSettings(bad))
      usageError(bad);
    if (!opt.help) {
      lib.load(opt.step);
      gPlanBytes = plannedArenaBytes(lib.desc.raw);
    }
    if (!opt.help && lib.desc.raw.value("library", "") == "sampler")
      usageError(opt.step + " is a sampling library (hc-compile --sampler): "
                 "run it with `hc-run sample " + opt.step + " --ckpt CKPT`");
    if (!opt.help) {
      machine = checkMachine(lib.desc.raw, currentMachine(), opt.strictTopology);
      if (machine.action == MachineCheck::Action::Refuse)
        usageError(opt.step + ": " + machine.line);
    }
    if (!opt.help)
      checkOffloadDir(lib.desc.raw, opt.offloadDir, opt.step);
  } catch (const Error &e) {
    failure = e;
    failed = true;
  }
  agreeOrExit(*comm, failed ? &failure : nullptr);
  if (opt.help) {
    if (comm->rank() == 0)
      std::printf("%s(runtime %s, step ABI %d)\n", usageText(),
                  hcrt_version_string(), HC_STEP_ABI_VERSION);
    comm->finalize();
    return 0;
  }
  if (machine.action == MachineCheck::Action::Remap && comm->rank() == 0)
    std::printf("hc-run: note: %s: %s\n", opt.step.c_str(), machine.line.c_str());
  // The plan's core budget: its comm cores unless --comm-cores says; the
  // cgroup's CPU limit caps the team unless HC_NUM_THREADS says.
  if (!opt.commCoresGiven && machine.planComm > 0)
    opt.commCores = machine.planComm;
  // Through the setting, so every later rebuild of the team (a core
  // reservation) keeps the cap.
  if (machine.threadLimit > 0 && hc::rt::threadsSetting() == 0)
    setenv("HC_NUM_THREADS", std::to_string(machine.threadLimit).c_str(), 1);
  setUpProgress(opt, *comm);
  comm->setTimeout(opt.commTimeout);  // collective: every rank calls it
  if (!opt.offloadDir.empty())
    hcrt_set_offload_dir(opt.offloadDir.c_str());
  if (opt.trainMode() && !opt.ckptDir.empty())
    preemption::arm(opt.preemption);  // from here a signal means "checkpoint"
  int rc = opt.trainMode() ? runTrainMode(opt, lib, *comm)
                           : runTestMode(opt, lib, *comm);
  std::fflush(stdout);
  comm->finalize();
  return rc;
}
