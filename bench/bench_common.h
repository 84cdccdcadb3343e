// Shared by the benchmarks in bench/: timing helpers and the baseline BLAS
// libraries (OpenBLAS, BLIS, oneDNN), dlopen'ed from their own .so files
// (RTLD_LOCAL) so the cblas symbols of OpenBLAS and BLIS cannot clash.
#ifndef HC_BENCH_COMMON_H
#define HC_BENCH_COMMON_H

#include <dlfcn.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cstdint>
#include <functional>
#include <memory>
#include <new>
#include <string>
#include <vector>

namespace bench {

using Clock = std::chrono::steady_clock;

inline double seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Buffers 64-byte aligned, as hc's step arena (and PyTorch's CPU allocator)
// hands out tensors: a std::vector's 16-byte alignment makes every 64-byte
// vector access straddle two cache lines, which measured 15-30% slower on
// the row kernels here, a cost no real caller pays.
template <class T> struct Aligned64 {
  using value_type = T;
  Aligned64() = default;
  template <class U> Aligned64(const Aligned64<U> &) {}
  T *allocate(std::size_t n) {
    void *p = std::aligned_alloc(64, (n * sizeof(T) + 63) / 64 * 64);
    if (!p)
      throw std::bad_alloc();
    return static_cast<T *>(p);
  }
  void deallocate(T *p, std::size_t) { std::free(p); }
  template <class U> bool operator==(const Aligned64<U> &) const { return true; }
  template <class U> bool operator!=(const Aligned64<U> &) const { return false; }
};
using Buf = std::vector<float, Aligned64<float>>;

inline std::vector<int64_t> parseList(const char *s) {
  std::vector<int64_t> v;
  for (const char *p = s; *p;) {
    v.push_back(std::atoll(p));
    const char *c = std::strchr(p, ',');
    if (!c)
      break;
    p = c + 1;
  }
  return v;
}

// Times `fns` interleaved: `reps` rounds, each calling every function
// twice in turn and timing the second call; returns each one's median.
// The untimed call absorbs what the previous function left running (an
// OpenMP team still spinning on the other core, a thread team asleep):
// measured here at 2 threads, a call timed right after oneDNN's ran 9-15%
// slower than the same call timed after itself. So every library is timed
// in its steady state, as in a training loop that calls it back to back.
// Each round runs every function twice and times the second call; all
// rounds' times per function.
inline std::vector<std::vector<double>>
timeInterleavedRuns(const std::vector<std::function<void()>> &fns, int reps) {
  std::vector<std::vector<double>> t(fns.size());
  for (int r = 0; r < reps; ++r)
    for (size_t i = 0; i < fns.size(); ++i) {
      fns[i]();
      auto t0 = Clock::now();
      fns[i]();
      t[i].push_back(seconds(t0, Clock::now()));
    }
  return t;
}

// The median per function of timeInterleavedRuns.
inline std::vector<double> timeInterleaved(const std::vector<std::function<void()>> &fns,
                                           int reps) {
  std::vector<double> med;
  for (auto &v : timeInterleavedRuns(fns, reps))
    med.push_back(median(v));
  return med;
}

enum { CblasRowMajor = 101, CblasNoTrans = 111, CblasTrans = 112 };
using CblasSgemm = void (*)(int, int, int, int, int, int, float, const float *,
                            int, const float *, int, float, float *, int);
using DnnlSgemm = int (*)(char, char, int64_t, int64_t, int64_t, float,
                          const float *, int64_t, const float *, int64_t, float,
                          float *, int64_t);

using GemmFn = std::function<void(int ta, int tb, int64_t M, int64_t N,
                                  int64_t K, float alpha, const float *A,
                                  int64_t lda, const float *B, int64_t ldb,
                                  float beta, float *C, int64_t ldc)>;

struct Lib {
  std::string name;
  std::function<void(int)> setThreads;
  GemmFn gemm;  // row-major C = alpha opA(A) opB(B) + beta C
};

inline void *openLib(const char *path) {
  void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!h)
    fprintf(stderr, "bench: cannot load %s (%s); skipping it\n", path, dlerror());
  return h;
}

inline GemmFn cblasGemm(CblasSgemm sg) {
  return [sg](int ta, int tb, int64_t M, int64_t N, int64_t K, float alpha,
              const float *A, int64_t lda, const float *B, int64_t ldb,
              float beta, float *C, int64_t ldc) {
    sg(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
       M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
  };
}

inline std::vector<Lib> loadBaselines() {
  std::vector<Lib> libs;
  if (void *h = openLib("/usr/lib/x86_64-linux-gnu/openblas-pthread/libopenblas.so.0")) {
    auto sg = reinterpret_cast<CblasSgemm>(dlsym(h, "cblas_sgemm"));
    auto st = reinterpret_cast<void (*)(int)>(dlsym(h, "openblas_set_num_threads"));
    if (sg && st)
      libs.push_back({"openblas", [st](int t) { st(t); }, cblasGemm(sg)});
  }
  if (void *h = openLib("/usr/lib/x86_64-linux-gnu/blis-openmp/libblis.so.4")) {
    auto sg = reinterpret_cast<CblasSgemm>(dlsym(h, "cblas_sgemm"));
    auto st = reinterpret_cast<void (*)(long)>(dlsym(h, "bli_thread_set_num_threads"));
    if (sg && st)
      libs.push_back({"blis", [st](int t) { st(t); }, cblasGemm(sg)});
  }
  if (void *h = openLib("/usr/lib/x86_64-linux-gnu/libdnnl.so.2")) {
    auto sg = reinterpret_cast<DnnlSgemm>(dlsym(h, "dnnl_sgemm"));
    auto st = reinterpret_cast<void (*)(int)>(dlsym(RTLD_DEFAULT, "omp_set_num_threads"));
    if (!st)
      if (void *g = dlopen("libgomp.so.1", RTLD_NOW | RTLD_NOLOAD))
        st = reinterpret_cast<void (*)(int)>(dlsym(g, "omp_set_num_threads"));
    if (sg && st)
      libs.push_back({"onednn", [st](int t) { st(t); },
                      [sg](int ta, int tb, int64_t M, int64_t N, int64_t K,
                           float alpha, const float *A, int64_t lda,
                           const float *B, int64_t ldb, float beta, float *C,
                           int64_t ldc) {
                        sg(ta ? 'T' : 'N', tb ? 'T' : 'N', M, N, K, alpha, A,
                           lda, B, ldb, beta, C, ldc);
                      }});
  }
  return libs;
}

// oneDNN's bf16 GEMM (dnnl_gemm_bf16bf16f32: bf16 operands, fp32 C), row
// major like dnnl_sgemm. The fp32 operands it is handed are converted to
// bf16 (round to nearest even) once per operand pointer, outside the timing.
using DnnlGemmBf16 = int (*)(char, char, int64_t, int64_t, int64_t, float,
                             const uint16_t *, int64_t, const uint16_t *,
                             int64_t, float, float *, int64_t);

inline uint16_t toBf16(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

inline std::vector<Lib> loadBf16Baselines() {
  std::vector<Lib> libs;
  void *h = openLib("/usr/lib/x86_64-linux-gnu/libdnnl.so.2");
  if (!h)
    return libs;
  auto gb = reinterpret_cast<DnnlGemmBf16>(dlsym(h, "dnnl_gemm_bf16bf16f32"));
  auto st = reinterpret_cast<void (*)(int)>(dlsym(RTLD_DEFAULT, "omp_set_num_threads"));
  if (!st)
    if (void *g = dlopen("libgomp.so.1", RTLD_NOW | RTLD_NOLOAD))
      st = reinterpret_cast<void (*)(int)>(dlsym(g, "omp_set_num_threads"));
  if (!gb || !st)
    return libs;
  struct Cache {
    const float *src = nullptr;
    size_t n = 0;
    std::vector<uint16_t> v;
    const uint16_t *get(const float *p, size_t count) {
      if (p != src || count != n) {
        v.resize(count);
        for (size_t i = 0; i < count; ++i)
          v[i] = toBf16(p[i]);
        src = p, n = count;
      }
      return v.data();
    }
  };
  auto ca = std::make_shared<Cache>(), cb = std::make_shared<Cache>();
  libs.push_back({"onednn-bf16", [st](int t) { st(t); },
                  [gb, ca, cb](int ta, int tb, int64_t M, int64_t N, int64_t K,
                               float alpha, const float *A, int64_t lda,
                               const float *B, int64_t ldb, float beta, float *C,
                               int64_t ldc) {
                    const uint16_t *a = ca->get(A, static_cast<size_t>((ta ? K : M) * lda));
                    const uint16_t *b = cb->get(B, static_cast<size_t>((tb ? N : K) * ldb));
                    gb(ta ? 'T' : 'N', tb ? 'T' : 'N', M, N, K, alpha, a, lda, b,
                       ldb, beta, C, ldc);
                  }});
  return libs;
}

// Keep idle library threads from spinning into the next library's timing.
inline void quietLibraryThreads() {
  setenv("OPENBLAS_THREAD_TIMEOUT", "4", 0);
  setenv("GOMP_SPINCOUNT", "20000", 0);
}

} // namespace bench

#endif
