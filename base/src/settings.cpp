#include "hc/base/settings.h"
#include "hc/base/topology.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <unistd.h>

namespace hc::rt {
namespace {

// A decimal integer in [lo, hi], nothing else (no sign games, no suffix).
bool parseInt(const char *s, long lo, long hi, long &out) {
  if (!s || !*s || std::strspn(s, "0123456789") != std::strlen(s))
    return false;
  errno = 0;
  long v = std::strtol(s, nullptr, 10);
  if (errno != 0 || v < lo || v > hi)
    return false;
  out = v;
  return true;
}

bool oneOf(const char *s, std::initializer_list<const char *> values) {
  for (const char *v : values)
    if (!std::strcmp(s, v))
      return true;
  return false;
}

const char *const kNames[] = {
#define HC_SETTING(id, name, cls, doc) name,
#include "hc/base/settings.def"
#undef HC_SETTING
};

} // namespace

const char *settingName(Setting s) { return kNames[static_cast<int>(s)]; }

const char *setting(Setting s) { return std::getenv(settingName(s)); }

long long settingInt(Setting s, long long dflt) {
  const char *e = setting(s);
  return e && *e ? std::atoll(e) : dflt;
}

bool checkSettings(std::string &error) {
  long n = 0;
  if (const char *e = setting(Setting::NumThreads); e && !parseInt(e, 1, kMaxThreads, n)) {
    error = "HC_NUM_THREADS=" + std::string(e) + ": needs a thread count from 1 to " +
            std::to_string(kMaxThreads) + " (this machine has " +
            std::to_string(sysconf(_SC_NPROCESSORS_ONLN)) + " logical CPUs); "
            "unset it for one thread per usable core";
    return false;
  }
  if (const char *e = setting(Setting::Pin); e && !oneOf(e, {"0", "1"})) {
    error = "HC_PIN=" + std::string(e) + ": needs 0 (no pinning) or 1 (pin the "
            "kernel threads to cores, the default)";
    return false;
  }
  if (const char *e = setting(Setting::Isa); e && !oneOf(e, {"generic", "avx2", "avx512"})) {
    error = "HC_ISA=" + std::string(e) + ": needs generic, avx2 or avx512 (a "
            "ceiling: the best the CPU has is used when it is lower)";
    return false;
  }
  if (const char *e = setting(Setting::HugePages); e && !oneOf(e, {"0", "1"})) {
    error = "HC_HUGE_PAGES=" + std::string(e) + ": needs 0 (plain pages for the "
            "step's arenas) or 1 (transparent huge pages, the default)";
    return false;
  }
  if (const char *e = setting(Setting::SyncAllreduce); e && !oneOf(e, {"0", "1"})) {
    error = "HC_SYNC_ALLREDUCE=" + std::string(e) + ": needs 0 (overlapped "
            "all-reduce, the default) or 1 (blocking)";
    return false;
  }
  if (const char *e = setting(Setting::Topology); e && *e) {
    Topology t;
    std::string why;
    if (!discoverTopology(parseTopologySpec(e), t, why)) {
      error = "HC_TOPOLOGY=" + std::string(e) + ": " + why +
              " (a test hook: an hwloc XML file or synthetic string the "
              "thread team is planned on instead of this machine)";
      return false;
    }
  }
  if (const char *e = setting(Setting::CommProgress); e && !oneOf(e, {"inline", "thread"})) {
    error = "HC_COMM_PROGRESS=" + std::string(e) + ": needs inline (the step "
            "drives the all-reduce, the default) or thread (an unpinned comm "
            "thread, the old baseline)";
    return false;
  }
  return true;
}

int threadsSetting() {
  long n = 0;
  return parseInt(setting(Setting::NumThreads), 1, kMaxThreads, n) ? static_cast<int>(n) : 0;
}

} // namespace hc::rt
