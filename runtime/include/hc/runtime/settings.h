// The runtime's user-facing environment settings, validated in one place so
// a host (hc-run) can refuse a bad value before anything starts, instead of
// the runtime ignoring it or failing deep inside a kernel:
//   HC_NUM_THREADS     threads of the kernel team, 1..kMaxThreads
//   HC_PIN             0 (no pinning) or 1 (pin workers to cores, default)
//   HC_ISA             generic | avx2 | avx512 (at most what CPUID offers)
//   HC_SYNC_ALLREDUCE  0 or 1 (the blocking all-reduce, to measure overlap)
//   HC_COMM_PROGRESS   inline (default) or thread (see comm.h)
//   HC_TOPOLOGY        test hook: an hwloc XML file or synthetic string the
//                      thread team is planned on instead of this machine
//                      (no affinity mask applies; pinning to cores the
//                      machine lacks fails quietly)
// Developer tuning knobs (HC_GEMM_*, HC_ATTENTION_TILE, ...) are not here.
#ifndef HC_RUNTIME_SETTINGS_H
#define HC_RUNTIME_SETTINGS_H

#include <string>

namespace hc::rt {

// More threads than this is a typo or a unit mix-up, not a machine.
constexpr int kMaxThreads = 4096;

// False + one line naming the variable, its value and what it takes.
bool checkSettings(std::string &error);

// HC_NUM_THREADS when set and valid, else 0 (the team's own default).
int threadsSetting();

} // namespace hc::rt

#endif // HC_RUNTIME_SETTINGS_H
