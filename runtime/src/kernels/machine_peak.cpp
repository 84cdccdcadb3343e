// The machine's own ceilings, measured where they are used (hc-run
// --profile's roofline, the benchmarks' "% of peak"): the FMA, vdpbf16ps
// and AMX tile peaks of a number of threads and a STREAM-like triad
// bandwidth.
#include "hc/runtime/kernels.h"
#include "internal.h"

#include <immintrin.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

namespace {
using Clock = std::chrono::steady_clock;

double since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// 12 independent FMA chains: enough to cover the FMA latency on every x86
// core hc targets (4 cycles x 2 ports, or 3 x ... ).
__attribute__((target("avx512f"))) double fmaLoop512(long iters) {
  __m512 a[12], b = _mm512_set1_ps(0.999f), c = _mm512_set1_ps(1e-3f);
  for (int j = 0; j < 12; ++j)
    a[j] = _mm512_set1_ps(1.0f + j);
  for (long i = 0; i < iters; ++i) {
#pragma unroll
    for (int j = 0; j < 12; ++j)
      a[j] = _mm512_fmadd_ps(a[j], b, c);
    __asm__ volatile("" : "+v"(b));
  }
  __m512 s = a[0];
  for (int j = 1; j < 12; ++j)
    s = _mm512_add_ps(s, a[j]);
  return _mm512_reduce_add_ps(s);
}

__attribute__((target("avx2,fma"))) double fmaLoop256(long iters) {
  __m256 a[12], b = _mm256_set1_ps(0.999f), c = _mm256_set1_ps(1e-3f);
  for (int j = 0; j < 12; ++j)
    a[j] = _mm256_set1_ps(1.0f + j);
  for (long i = 0; i < iters; ++i) {
#pragma unroll
    for (int j = 0; j < 12; ++j)
      a[j] = _mm256_fmadd_ps(a[j], b, c);
    __asm__ volatile("" : "+x"(b));
  }
  float out[8];
  __m256 s = a[0];
  for (int j = 1; j < 12; ++j)
    s = _mm256_add_ps(s, a[j]);
  _mm256_storeu_ps(out, s);
  return out[0];
}

// The same with vdpbf16ps, each instruction 16 lanes x 2 bf16 products
// accumulated (64 FLOPs). 30 independent chains (all the zmm registers
// but the two operands): its latency is longer than the FMA's; measured
// on Zen 5, 1 thread: 12 chains 248 GFLOP/s, 24: 341, 30: 443 (the 8x48
// kernel reaches ~470 with its 24 accumulators plus loads).
__attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16"))) double
dpbf16Loop512(long iters) {
  __m512 a[30];
  __m512bh b = reinterpret_cast<__m512bh>(_mm512_set1_epi32(0x3f7f3f7f));
  __m512bh c = reinterpret_cast<__m512bh>(_mm512_set1_epi32(0x3a833a83));
  for (int j = 0; j < 30; ++j)
    a[j] = _mm512_set1_ps(1.0f + j);
  for (long i = 0; i < iters; ++i) {
#pragma unroll
    for (int j = 0; j < 30; ++j)
      a[j] = _mm512_dpbf16_ps(a[j], b, c);
    __asm__ volatile("" : "+v"(b));
  }
  __m512 s = a[0];
  for (int j = 1; j < 30; ++j)
    s = _mm512_add_ps(s, a[j]);
  return _mm512_reduce_add_ps(s);
}

// Runs fn(t) on `threads` threads at once; returns the wall seconds. On
// the runtime's team where it has that many threads (each pinned to its
// own core): threads started here inherit the caller's affinity, and a
// caller pinned to one core (hc-run's, after its first step context: the
// team narrows a caller's affinity during a call) put them all on it:
// hc-run --profile read 124.6 GFLOP/s on a 2-core Zen 3 whose two cores
// give 166-182, and reported MFU 98.8% for a step at 69%.
template <typename Fn> double onThreads(int threads, Fn fn) {
  if (threads > 1) {
    const hc::rt::Range r = hc::rt::resolve(hc_threads{0, threads});
    if (r.count == threads) {
      auto t0 = Clock::now();
      hc::rt::parallel(r, [&](int i, int) { fn(i); });
      return since(t0);
    }
  }
  auto t0 = Clock::now();
  std::vector<std::thread> ts;
  for (int t = 1; t < threads; ++t)
    ts.emplace_back([&, t] { fn(t); });
  fn(0);
  for (auto &t : ts)
    t.join();
  return since(t0);
}
} // namespace

extern "C" double hcrt_fma_peak_gflops(int32_t threads, int32_t isa) {
  threads = std::max(threads, 1);
  if (isa == HC_ISA_AVX512 && !__builtin_cpu_supports("avx512f"))
    return 0;
  if (isa != HC_ISA_AVX512 && !(__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")))
    return 0;
  const long iters = 20000000;
  const double lanes = isa == HC_ISA_AVX512 ? 16 : 8;
  std::vector<double> runs;
  for (int rep = 0; rep < 3; ++rep) {
    std::atomic<double> sink{0};
    double s = onThreads(threads, [&](int) {
      sink.store(isa == HC_ISA_AVX512 ? fmaLoop512(iters) : fmaLoop256(iters));
    });
    runs.push_back(threads * iters * 12.0 * lanes * 2 / s / 1e9);
  }
  std::sort(runs.begin(), runs.end());
  return runs[1];
}

extern "C" double hcrt_bf16_peak_gflops(int32_t threads) {
  threads = std::max(threads, 1);
  if (!(__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512vl") &&
        __builtin_cpu_supports("avx512bf16")))
    return 0;
  const long iters = 8000000;
  std::vector<double> runs;
  for (int rep = 0; rep < 3; ++rep) {
    std::atomic<double> sink{0};
    double s = onThreads(threads, [&](int) { sink.store(dpbf16Loop512(iters)); });
    runs.push_back(threads * iters * 30.0 * 64.0 / s / 1e9);
  }
  std::sort(runs.begin(), runs.end());
  return runs[1];
}

extern "C" double hcrt_bf16_over_fma(void) {
  if (!(__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512bf16")))
    return 0;
  // One thread, a few milliseconds; each loop's best of 3, interleaved so
  // that a busy machine slows both alike.
  const long fmaIters = 400000, dpIters = 160000;
  double fma = 0, dp = 0;
  std::atomic<double> sink{0};
  for (int rep = 0; rep < 3; ++rep) {
    auto t0 = Clock::now();
    sink.store(fmaLoop512(fmaIters));
    fma = std::max(fma, fmaIters * 12.0 * 16 * 2 / since(t0));
    t0 = Clock::now();
    sink.store(dpbf16Loop512(dpIters));
    dp = std::max(dp, dpIters * 30.0 * 64.0 / since(t0));
  }
  return fma > 0 ? dp / fma : 0;
}

extern "C" double hcrt_triad_gbs(int32_t threads) {
  threads = std::max(threads, 1);
  const int64_t n = 16 << 20; // 64 MiB per array: well past any L3 here
  std::vector<float> a(n), b(n, 1.0f), c(n, 2.0f);
  auto run = [&] {
    return onThreads(threads, [&](int t) {
      const int64_t lo = n * t / threads, hi = n * (t + 1) / threads;
      float *__restrict pa = a.data();
      const float *__restrict pb = b.data(), *__restrict pc = c.data();
      for (int64_t i = lo; i < hi; ++i)
        pa[i] = pb[i] + 3.0f * pc[i];
    });
  };
  run();
  double best = 1e30;
  for (int r = 0; r < 5; ++r)
    best = std::min(best, run());
  return 12.0 * n / best / 1e9; // STREAM's best-of, the conservative reference
}

extern "C" double hcrt_amx_bf16_peak_gflops(int32_t threads) {
  threads = std::max(threads, 1);
  // Not asked of the OS unless the GEMMs use it (the permission is the
  // whole process's, and a process with it needs larger signal stacks).
  if (hcrt_bf16_path() != HC_BF16_AMX)
    return 0;
  const long iters = 400000;
  std::vector<double> runs;
  for (int rep = 0; rep < 3; ++rep) {
    std::atomic<double> sink{0};
    double s = onThreads(threads, [&](int) { sink.store(hc::rt::amxBf16Loop(iters)); });
    runs.push_back(threads * iters * 4.0 * 16 * 16 * 32 * 2 / s / 1e9);
  }
  std::sort(runs.begin(), runs.end());
  return runs[1];
}
