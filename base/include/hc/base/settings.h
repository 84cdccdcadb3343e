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
// Every variable, with the developer knobs, test seams and the launcher's,
// is one row of settings.def; setting() is the only reader of the
// environment.
#ifndef HC_BASE_SETTINGS_H
#define HC_BASE_SETTINGS_H

#include <string>

namespace hc::rt {

enum class Setting {
#define HC_SETTING(id, name, cls, doc) id,
#include "hc/base/settings.def"
#undef HC_SETTING
};

// The variable's value, nullptr when unset.
const char *setting(Setting s);
// Its name ("HC_NUM_THREADS").
const char *settingName(Setting s);
// Its value as a decimal integer, `dflt` when unset or empty.
long long settingInt(Setting s, long long dflt);

// More threads than this is a typo or a unit mix-up, not a machine.
constexpr int kMaxThreads = 4096;

// False + one line naming the variable, its value and what it takes.
bool checkSettings(std::string &error);

// HC_NUM_THREADS when set and valid, else 0 (the team's own default).
int threadsSetting();

} // namespace hc::rt

#endif // HC_BASE_SETTINGS_H
