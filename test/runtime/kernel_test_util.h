// Shared helpers of the kernel tests: float64 references are computed by the
// tests themselves; outputs are poisoned with NaN first, and every check
// fails on NaN (|got - want| <= tol is false for NaN).
#ifndef HC_TEST_RUNTIME_KERNEL_TEST_UTIL_H
#define HC_TEST_RUNTIME_KERNEL_TEST_UTIL_H

#include "hc/runtime/kernels.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

namespace hctest {

inline std::vector<float> randomVec(size_t n, uint32_t seed, float lo = -1.0f,
                                    float hi = 1.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(n);
  for (float &x : v)
    x = d(rng);
  return v;
}

inline std::vector<float> nanVec(size_t n) {
  return std::vector<float>(n, std::numeric_limits<float>::quiet_NaN());
}

// Counts elements outside |got - want| <= atol + rtol |want| (NaN counts);
// reports the first few through gtest.
struct Checker {
  std::string what;
  int64_t bad = 0;
  double worst = 0;
  void check(double got, double want, double tol, int64_t i) {
    double err = std::fabs(got - want);
    if (!(err <= tol)) {
      if (bad < 5)
        ADD_FAILURE() << what << " [" << i << "]: got " << got << " want "
                      << want << " err " << err << " tol " << tol;
      ++bad;
    } else if (err > worst) {
      worst = err;
    }
  }
  void close(double got, double want, double atol, double rtol, int64_t i) {
    check(got, want, atol + rtol * std::fabs(want), i);
  }
};

// ISAs this CPU can run (tests run every kernel on each).
inline std::vector<int32_t> availableIsas() {
  std::vector<int32_t> v;
  int32_t saved = hcrt_isa();
  for (int32_t isa : {HC_ISA_GENERIC, HC_ISA_AVX2, HC_ISA_AVX512})
    if (hcrt_set_isa(isa) == isa)
      v.push_back(isa);
  hcrt_set_isa(saved);
  return v;
}

// Every GEMM shape of a grid: f(ta, tb, M, N, K) for both transposes of
// each operand and every M x N x K; stops when f returns false.
template <class F>
void forEachGemmShape(const std::vector<int64_t> &Ms, const std::vector<int64_t> &Ns,
                      const std::vector<int64_t> &Ks, F &&f) {
  for (int ta = 0; ta < 2; ++ta)
    for (int tb = 0; tb < 2; ++tb)
      for (int64_t M : Ms)
        for (int64_t N : Ns)
          for (int64_t K : Ks)
            if (!f(ta, tb, M, N, K))
              return;
}

struct IsaScope {
  int32_t saved;
  explicit IsaScope(int32_t isa) : saved(hcrt_isa()) { hcrt_set_isa(isa); }
  ~IsaScope() { hcrt_set_isa(saved); }
};

inline hc_threads threads(int n) { return hc_threads{0, n}; }

// Puts hc_gemm_bf16 on `path` (HC_BF16_*) under the current ISA: AMX
// (hardware or emulated tiles) or, with AMX off, vdpbf16ps or the
// emulation. Returns whether that path is in effect (the CPU has it).
inline bool useBf16Path(int32_t path) {
  switch (path) {
  case HC_BF16_AMX:
    return hcrt_set_bf16_amx(1) == path;
  case HC_BF16_AMX_EMULATED:
    return hcrt_set_bf16_amx(2) == path;
  default:
    hcrt_set_bf16_amx(0);
    hcrt_set_bf16_native(path == HC_BF16_VDPBF16PS);
    return hcrt_bf16_path() == path;
  }
}

// Each bf16 GEMM path under the current ISA, back to the defaults after.
inline std::vector<int32_t> bf16PathsHere() {
  std::vector<int32_t> v;
  for (int32_t p : {HC_BF16_EMULATED, HC_BF16_VDPBF16PS, HC_BF16_AMX_EMULATED, HC_BF16_AMX})
    if (useBf16Path(p))
      v.push_back(p);
  hcrt_set_bf16_amx(-1);
  hcrt_set_bf16_native(1);
  return v;
}

// GELU (tanh form) and its derivative in double.
inline double geluD(double x) {
  return 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
}
inline double geluGradD(double x) {
  double k = std::sqrt(2.0 / M_PI), u = k * (x + 0.044715 * x * x * x);
  double t = std::tanh(u);
  return 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * k * (1 + 3 * 0.044715 * x * x);
}

// float32 unit roundoff
constexpr double kU = 1.0 / (1 << 24);

} // namespace hctest

#endif
