// Run-time instruction-set choice for the kernels (CPUID + OS state).
#include "internal.h"
#include "hc/base/settings.h"

#include <atomic>
#include <cstdlib>
#include <cstring>

#if defined(__x86_64__) && defined(__linux__)
#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

namespace {

int32_t detectBest() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  // __builtin_cpu_supports checks XGETBV too: the feature counts only when
  // the OS saves the wide registers.
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx2") &&
      __builtin_cpu_supports("fma"))
    return HC_ISA_AVX512;
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
    return HC_ISA_AVX2;
#endif
  return HC_ISA_GENERIC;
}

int32_t best() {
  static const int32_t b = detectBest();
  return b;
}

int32_t fromEnv() {
  const char *e = hc::rt::setting(hc::rt::Setting::Isa);
  int32_t b = best();
  if (!e)
    return b;
  int32_t want = b;
  if (!std::strcmp(e, "generic"))
    want = HC_ISA_GENERIC;
  else if (!std::strcmp(e, "avx2"))
    want = HC_ISA_AVX2;
  else if (!std::strcmp(e, "avx512"))
    want = HC_ISA_AVX512;
  return want < b ? want : b;
}

std::atomic<int32_t> gIsa{-1};

} // namespace

namespace hc::rt {
bool cpuIsIntel() {
#if defined(__x86_64__) || defined(__i386__)
  static const bool intel = [] {
    __builtin_cpu_init();
    return __builtin_cpu_is("intel") != 0;
  }();
  return intel;
#else
  return false;
#endif
}

bool cpuHasAvx512Bf16() {
#if defined(__x86_64__) || defined(__i386__)
  static const bool has = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") &&
           __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512vl") &&
           __builtin_cpu_supports("avx512bf16");
  }();
  return has;
#else
  return false;
#endif
}
bool cpuHasAmxBf16() {
#if defined(__x86_64__) && defined(__linux__)
  static const bool has = [] {
    unsigned a, b, c, d;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d))
      return false;
    const bool amxBf16 = (d >> 22) & 1, amxTile = (d >> 24) & 1;
    if (!amxBf16 || !amxTile || !cpuHasAvx512Bf16())
      return false;
    // The tile data is an XSAVE feature Linux hands out on request
    // (ARCH_REQ_XCOMP_PERM = 0x1023, XFEATURE_XTILEDATA = 18), for the
    // whole process; without it the first tile instruction raises SIGILL.
    return syscall(SYS_arch_prctl, 0x1023, 18) == 0;
  }();
  return has;
#else
  return false;
#endif
}
} // namespace hc::rt

extern "C" {

int32_t hcrt_isa(void) {
  int32_t v = gIsa.load(std::memory_order_relaxed);
  if (v < 0) {
    v = fromEnv();
    gIsa.store(v, std::memory_order_relaxed);
  }
  return v;
}

int32_t hcrt_set_isa(int32_t isa) {
  int32_t b = best();
  int32_t v = isa < 0 ? b : (isa < b ? isa : b);
  gIsa.store(v, std::memory_order_relaxed);
  return v;
}

const char *hcrt_isa_name(int32_t isa) {
  switch (isa) {
  case HC_ISA_AVX512:
    return "avx512";
  case HC_ISA_AVX2:
    return "avx2";
  default:
    return "generic";
  }
}

} // extern "C"
