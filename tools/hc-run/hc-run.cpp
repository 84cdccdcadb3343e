// hc-run: loads a compiled training step (dit_step.so, see
// hc/runtime/step_abi.h) and runs it, data-parallel under mpirun:
//   test mode  (--inputs DIR): fixed global inputs, prints each step's loss,
//                              saves parameters / gradients / state;
//   train mode (--data X.npy): DiT training with diffusion sampling, logs
//                              and metrics.
// MPI is used when a launcher started the process (mpirun sets
// OMPI_COMM_WORLD_SIZE); plain `hc-run ...` is one rank without MPI.
#include "common.h"
#include "data.h"

#include "hc/runtime/settings.h"

#include "hc/runtime/hcrt.h"

#include <csignal>
#include <cstdio>
#include <cstring>
#include <exception>
#include <unistd.h>

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
  std::set_terminate([] {
    std::string what = "an unknown exception";
    if (auto e = std::current_exception()) {
      try {
        std::rethrow_exception(e);
      } catch (const std::exception &x) {
        what = x.what();
      } catch (...) {
      }
    }
    std::signal(SIGABRT, SIG_DFL);
    theComm->fail(1, "internal error: uncaught exception: " + what);
  });
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

  Options opt;
  StepLibrary lib;
  Error failure(0, "");
  bool failed = false;
  try {
    opt = parseOptions(argc, argv);
    std::string bad;
    if (!opt.help && !hc::rt::checkSettings(bad))
      usageError(bad);
    if (!opt.help)
      lib.load(opt.step);
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
  int rc = opt.trainMode() ? runTrainMode(opt, lib, *comm)
                           : runTestMode(opt, lib, *comm);
  std::fflush(stdout);
  comm->finalize();
  return rc;
}
