// Preemption: a signal (--checkpoint-on, default TERM,USR1,INT) makes every
// rank stop at a step boundary, agree on the step and write a normal
// checkpoint, then exit with kPreemptedExit. A step still running
// --checkpoint-grace seconds after the signal is abandoned before its
// update (step ABI 4's update gate) and the previous step's state is saved.
//
// A second signal from the sender of the first ends the process at once
// (128 + signal), removing any checkpoint temporary first: nothing
// half-written is left. The same signal from another sender is a forward
// (Open MPI's mpirun sends SIGTERM on to ranks that Slurm signalled
// already) and changes nothing.
#ifndef HC_RUN_PREEMPTION_H
#define HC_RUN_PREEMPTION_H

#include "hc/runtime/comm.h"
#include "hc/abi/step_abi.h"

#include <string>
#include <vector>

namespace hcrun {

// EX_TEMPFAIL: "try again later". A batch script requeues on it.
constexpr int kPreemptedExit = 75;

struct PreemptionOptions {
  std::vector<int> signals;   // empty: none (default dispositions)
  double graceSeconds = 0;    // a step in flight this long after the signal
                              // is abandoned before its update
};
// "TERM,USR1,INT" (names with or without SIG, any case) or "none". Throws
// Error(2) naming --checkpoint-on.
std::vector<int> parseSignalList(const std::string &text);
std::string signalName(int sig);

namespace preemption {
// Installs the handlers (train mode with --ckpt-dir).
void arm(const PreemptionOptions &opt);
bool armed();
// The 1-based step about to run (the test hook HC_PREEMPT_RAISE keys on it).
void beforeStep(int64_t step);
// The step callbacks (ABI 4), bound to `comm` for the update gate.
void attach(hc_step_env &env, hc::rt::Comm &comm);
// Collective at a step boundary: the signal some rank received (the lowest
// rank's), or 0 when none did. One blocking all-reduce of one double.
int agreeAtBoundary(hc::rt::Comm &comm);
// The signal this rank received first (0: none).
int localSignal();
// Seconds since this rank's first signal (0 when none).
double secondsSinceSignal();
// Under Open MPI, SIGTERM to mpirun reaches the ranks only after
// odls_base_sigkill_timeout seconds (preceded by SIGCONT) and SIGKILL after
// as long again. A note when that window is shorter than the grace.
void noteLauncherWindow(const PreemptionOptions &opt);
} // namespace preemption

} // namespace hcrun

#endif // HC_RUN_PREEMPTION_H
