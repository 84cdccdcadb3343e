// Preemption signals, the step's update gate and the boundary agreement
// (see preemption.h).
#include "preemption.h"
#include "hc/base/settings.h"

#include "common.h"

#include "hc/base/files.h"

#include <algorithm>
#include <atomic>
#include <cctype>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <unistd.h>

namespace hcrun {
namespace {

struct SignalName {
  const char *name;
  int sig;
};
constexpr SignalName kSignals[] = {{"TERM", SIGTERM}, {"INT", SIGINT},
                                   {"HUP", SIGHUP},   {"USR1", SIGUSR1},
                                   {"USR2", SIGUSR2}, {"XCPU", SIGXCPU}};

// Written by the handler, read by the training loop and the step's callbacks.
volatile sig_atomic_t gSignal = 0;       // the first signal (0: none)
std::atomic<pid_t> gSender{0};           // who sent it (0: the kernel, a tty)
std::atomic<int64_t> gAtNs{0};           // when (CLOCK_MONOTONIC)
std::atomic<int64_t> gGraceNs{0};
bool gArmed = false;
// Test hook HC_PREEMPT_RAISE=STEP:SIG[:RANK]: the step's first poll during
// step STEP raises SIG (on RANK only, when given), so a test reaches the
// update gate's stop on a step too fast to signal from outside.
int64_t gStep = 0, gRaiseStep = -1;
int gRaiseSig = 0, gRaiseRank = -1, gRank = 0;
hc::rt::Comm *gComm = nullptr;           // the update gate's collective

int64_t nowNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);  // async-signal-safe
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

void writeStderr(const char *s) {
  ssize_t ignored = ::write(STDERR_FILENO, s, std::strlen(s));
  (void)ignored;
}

void onSignal(int sig, siginfo_t *info, void *) {
  const pid_t from = info && info->si_code <= 0 ? info->si_pid : 0;
  if (gSignal == 0) {
    gSender.store(from);
    gAtNs.store(nowNs());
    gSignal = sig;
    return;
  }
  if (from != gSender.load())
    return;  // the same request forwarded by a launcher
  // A second request from the same sender: end now, leaving no temporary.
  hc::rt::removeTemporariesFromSignal();
  writeStderr("hc-run: a second signal: ending at once, without a checkpoint "
              "(the last finished checkpoint stays)\n");
  _exit(128 + sig);
}

int32_t abandonRequested(void *) {
  if (gStep == gRaiseStep && (gRaiseRank < 0 || gRaiseRank == gRank)) {
    gRaiseStep = -1;
    ::raise(gRaiseSig);
  }
  if (gSignal == 0)
    return 0;
  return nowNs() - gAtNs.load() >= gGraceNs.load() ? 1 : 0;
}

int32_t updateGate(void *, int32_t abandoned) {
  double v = abandoned || abandonRequested(nullptr) ? 1.0 : 0.0;
  if (gComm && gComm->size() > 1 && !gComm->allreduceMaxF64(&v, 1))
    return -1;
  return v > 0 ? 1 : 0;
}

} // namespace

std::string signalName(int sig) {
  for (const SignalName &s : kSignals)
    if (s.sig == sig)
      return std::string("SIG") + s.name;
  return "signal " + std::to_string(sig);
}

std::vector<int> parseSignalList(const std::string &text) {
  std::vector<int> out;
  if (text == "none")
    return out;
  std::size_t at = 0;
  while (at <= text.size()) {
    std::size_t comma = text.find(',', at);
    std::string name = text.substr(at, comma == std::string::npos ? std::string::npos
                                                                  : comma - at);
    for (char &c : name)
      c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    if (name.rfind("SIG", 0) == 0)
      name = name.substr(3);
    int sig = 0;
    for (const SignalName &s : kSignals)
      if (name == s.name)
        sig = s.sig;
    if (!sig)
      usageError("--checkpoint-on: '" + name + "' is not one of TERM, INT, HUP, "
                 "USR1, USR2, XCPU (or 'none')");
    if (std::find(out.begin(), out.end(), sig) == out.end())
      out.push_back(sig);
    if (comma == std::string::npos)
      break;
    at = comma + 1;
  }
  return out;
}

namespace preemption {

void arm(const PreemptionOptions &opt) {
  gGraceNs.store(static_cast<int64_t>(opt.graceSeconds * 1e9));
  for (int sig : opt.signals) {
    struct sigaction sa;
    std::memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = onSignal;
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sigfillset(&sa.sa_mask);  // one handler at a time
    sigaction(sig, &sa, nullptr);
  }
  gArmed = !opt.signals.empty();
#if HC_TEST_SEAMS
  if (const char *hook = hc::rt::setting(hc::rt::Setting::PreemptRaise)) {
    long long step = -1;
    int sig = 0, rank = -1;
    if (std::sscanf(hook, "%lld:%d:%d", &step, &sig, &rank) >= 2) {
      gRaiseStep = step;
      gRaiseSig = sig;
      gRaiseRank = rank;
    }
  }
#endif
}

void beforeStep(int64_t step) { gStep = step; }

bool armed() { return gArmed; }

void attach(hc_step_env &env, hc::rt::Comm &comm) {
  if (!gArmed)
    return;
  gComm = &comm;
  gRank = comm.rank();
  env.host = &comm;
  env.abandon_requested = abandonRequested;
  env.update_gate = updateGate;
}

int agreeAtBoundary(hc::rt::Comm &comm) {
  double v = gSignal;
  if (comm.size() > 1 && !comm.allreduceMaxF64(&v, 1))
    comm.fail(1, "collective failed while checking for a preemption signal");
  return static_cast<int>(v);
}

int localSignal() { return gSignal; }

double secondsSinceSignal() {
  return gSignal ? (nowNs() - gAtNs.load()) / 1e9 : 0.0;
}

void noteLauncherWindow(const PreemptionOptions &opt) {
  if (!hc::rt::setting(hc::rt::Setting::OmpiWorldSize) ||
      std::find(opt.signals.begin(), opt.signals.end(), SIGTERM) == opt.signals.end())
    return;
  const char *v = hc::rt::setting(hc::rt::Setting::OmpiSigkillTimeout);
  const double window = v && *v ? std::atof(v) : 1.0;  // Open MPI 4.1's default
  if (window >= opt.graceSeconds + 10)
    return;
  std::printf("hc-run: note: SIGTERM to mpirun alone reaches the ranks after "
              "odls_base_sigkill_timeout (%g s) and SIGKILL follows %g s later: "
              "too short for --checkpoint-grace %g s and a checkpoint's write; "
              "give mpirun --mca odls_base_sigkill_timeout N (docs/multi-node.md)\n",
              window, window, opt.graceSeconds);
}

} // namespace preemption
} // namespace hcrun
