// hc-bench-gemm: hc's SGEMM against OpenBLAS, BLIS and oneDNN on DiT's
// linear-layer shapes, interleaved in one run, at 1 and 2 threads, plus a
// measured FMA peak. Not a test: it prints a table and never fails on timing.
//
// Baselines: bench_common.h. Each library is timed in its steady state: in
// every round it is called twice and the second call is timed
// (timeInterleaved), so no library pays for threads another left spinning.
//
//   hc-bench-gemm [--quick] [--reps N] [--threads 1,2] [--m 2048,8192]
//                 [--model S|XL|all|demo] [--no-fused] [--precision fp32|bf16]
//                 [--a-bf16] [--pass fwd,dX,dW] [--peak-only]
//
// --peak-only: one line per thread count with the FMA, vdpbf16ps and AMX peaks
// measured now, nothing else (bench/anchors.py's MFU denominator).
//
// --precision bf16: hc_gemm_bf16 (fp32 operands rounded to bf16 while they
// are packed, fp32 accumulation) against oneDNN's dnnl_gemm_bf16bf16f32
// (operands converted to bf16 before the timing: oneDNN reads half the
// bytes), as % of the vdpbf16ps peak measured in the same run. --a-bf16:
// hc reads A stored as bf16 too (hc_sgemm_args::a_bf16, as hc-bf16-storage
// stores the activations the forward products read).
#include "bench_common.h"
#include "hc/runtime/kernels.h"

#include <dlfcn.h>
#include <immintrin.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

namespace {

using bench::Clock;
using bench::seconds;

// GFLOP/s of `threads` threads running fp32 FMAs (the runtime's measure,
// shared with hc-run --profile).
double peak(int threads, bool avx512) {
  return hcrt_fma_peak_gflops(threads, avx512 ? HC_ISA_AVX512 : HC_ISA_AVX2);
}

using namespace bench;

struct Case {
  std::string model, pass;
  int64_t M, N, K;
  int ta, tb;
};

// Forward Y = X W^T, input gradient dX = dY W, weight gradient dW = dY^T X
// for W [out, in] and M tokens.
void addLinear(std::vector<Case> &cs, const std::string &model, int64_t tok,
               int64_t in, int64_t out) {
  char tag[64];
  snprintf(tag, sizeof tag, "%s M=%lld %lldx%lld", model.c_str(), (long long)tok,
           (long long)in, (long long)out);
  cs.push_back({tag, "fwd", tok, out, in, 0, 1});
  cs.push_back({tag, "dX", tok, in, out, 0, 0});
  cs.push_back({tag, "dW", out, in, tok, 1, 0});
}

// Rounds for one case: at least `reps`, more for short calls so that each
// function runs >= 0.25 s in all (up to 41 rounds). On this shared VM a
// 2-3 ms call is bimodal per round (every library's, hc's too: 185-190 or
// 225-230 GFLOP/s at 2 threads for 2048 x 384 x 384), and a median of 5 of
// such rounds picks either mode by chance. Same rounds for every library.
int repsFor(const std::function<void()> &f, int reps) {
  f();
  auto t0 = Clock::now();
  f();
  const double t = std::max(seconds(t0, Clock::now()), 1e-6);
  return std::max(reps, std::min(41, static_cast<int>(0.25 / t) | 1));
}

bool gBf16 = false;   // --precision bf16
bool gABf16 = false;  // --a-bf16

void benchGemm(const std::vector<Case> &cases, const std::vector<Lib> &libs,
           int threads, int reps, double peakGf, std::vector<double> &ratios,
           std::vector<double> &hcPct8192) {
  printf("\n== %d thread(s); GFLOP/s median of %d rounds, more for short calls (>= 0.25 s "
         "per function, <= 41) (%% of measured peak %.1f) ==\n",
         threads, reps, peakGf);
  printf("%-26s %-4s %6s %6s %6s | %14s", "case", "pass", "M", "N", "K", "hc");
  for (const Lib &l : libs)
    printf(" %14s", l.name.c_str());
  printf(" | %7s\n", "hc/best");
  for (const Case &c : cases) {
    const int64_t lda = c.ta ? c.M : c.K, ldb = c.tb ? c.K : c.N;
    Buf A(c.M * c.K), B(c.K * c.N), C(c.M * c.N);
    for (size_t i = 0; i < A.size(); ++i)
      A[i] = static_cast<float>((i * 7 % 13) - 6) * 0.01f;
    std::vector<uint16_t> Ah(gABf16 ? A.size() : 0);  // A's bf16 bits
    for (size_t i = 0; i < Ah.size(); ++i)
      Ah[i] = toBf16(A[i]);
    for (size_t i = 0; i < B.size(); ++i)
      B[i] = static_cast<float>((i * 5 % 11) - 5) * 0.01f;
    const double flop = 2.0 * c.M * c.N * c.K;
    std::vector<std::function<void()>> fns;
    fns.push_back([&] {
      if (gBf16) {
        hc_sgemm_args g{};
        g.M = c.M, g.N = c.N, g.K = c.K, g.batch = 1, g.trans_a = c.ta,
        g.trans_b = c.tb, g.alpha = 1.0f, g.A = A.data(), g.lda = lda,
        g.B = B.data(), g.ldb = ldb, g.C = C.data(), g.ldc = c.N;
        if (gABf16)
          g.a_bf16 = 1, g.A = reinterpret_cast<const float *>(Ah.data());
        hc_gemm_bf16(&g, hc_threads{0, threads});
        return;
      }
      hc_sgemm_simple(c.ta, c.tb, c.M, c.N, c.K, 1.0f, A.data(), lda, B.data(),
                      ldb, 0.0f, C.data(), c.N, hc_threads{0, threads});
    });
    for (const Lib &l : libs)
      fns.push_back([&] {
        l.gemm(c.ta, c.tb, c.M, c.N, c.K, 1.0f, A.data(), lda, B.data(), ldb,
               0.0f, C.data(), c.N);
      });
    const std::vector<double> t = timeInterleaved(fns, repsFor(fns[0], reps));
    double hcG = flop / t[0] / 1e9, best = 0;
    printf("%-26s %-4s %6lld %6lld %6lld | %7.1f (%3.0f%%)", c.model.c_str(),
           c.pass.c_str(), (long long)c.M, (long long)c.N, (long long)c.K, hcG,
           100 * hcG / peakGf);
    for (size_t li = 0; li < libs.size(); ++li) {
      double g = flop / t[li + 1] / 1e9;
      best = std::max(best, g);
      printf(" %7.1f (%3.0f%%)", g, 100 * g / peakGf);
    }
    double ratio = best > 0 ? hcG / best : 0;
    ratios.push_back(ratio);
    if (c.model.find("M=8192") != std::string::npos)
      hcPct8192.push_back(100 * hcG / peakGf);
    printf(" | %6.3fx\n", ratio);
    fflush(stdout);
  }
}

// GEMM + bias + GELU: hc's fused epilogue vs the best library's GEMM followed
// by a separate bias+GELU pass (hc's vectorized GELU kernel).
void benchFused(const std::vector<Lib> &libs, int threads, int reps,
                const std::vector<int64_t> &ms) {
  printf("\n== %d thread(s): fc1 forward Y = gelu(X W^T + b), ms median of %d ==\n",
         threads, reps);
  printf("%-22s | %10s | %s\n", "case", "hc fused", "library GEMM + separate bias/GELU pass ... | fused/best");
  struct F { const char *model; int64_t in, out; };
  const F fs[] = {{"S/2", 384, 1536}, {"XL/2", 1152, 4608}};
  for (int64_t M : ms)
    for (const F &f : fs) {
      const int64_t N = f.out, K = f.in;
      Buf X(M * K, 0.01f), W(N * K, 0.02f), bias(N, 0.1f), Y(M * N);
      hc_epilogue e{};
      e.flags = HC_EPI_BIAS | HC_EPI_GELU_TANH;
      e.bias = bias.data();
      hc_sgemm_args g{};
      g.M = M, g.N = N, g.K = K, g.batch = 1, g.trans_b = 1, g.alpha = 1;
      g.A = X.data(), g.lda = K, g.B = W.data(), g.ldb = K, g.C = Y.data(), g.ldc = N;
      g.epi = &e;
      hc_threads th{0, threads};
      auto unfused = [&](const Lib &l) {
        l.gemm(0, 1, M, N, K, 1.0f, X.data(), K, W.data(), K, 0.0f, Y.data(), N);
        // separate epilogue pass: bias then GELU (hc's vectorized kernel)
        for (int64_t m = 0; m < M; ++m) {
          float *y = Y.data() + m * N;
          for (int64_t n = 0; n < N; ++n)
            y[n] += bias[n];
        }
        hc_gelu_tanh_fwd(M * N, Y.data(), Y.data(), th);
      };
      std::vector<std::function<void()>> fns;
      fns.push_back([&] { hc_sgemm(&g, th); });
      for (const Lib &l : libs)
        fns.push_back([&] { unfused(l); });
      const std::vector<double> t = timeInterleaved(fns, reps);
      double hcT = t[0], best = 1e30;
      printf("%-5s M=%-5lld %4lldx%-5lld | %8.2f   |", f.model, (long long)M,
             (long long)K, (long long)N, hcT * 1e3);
      for (size_t li = 0; li < libs.size(); ++li) {
        double tt = t[li + 1];
        best = std::min(best, tt);
        printf(" %s %.2f", libs[li].name.c_str(), tt * 1e3);
      }
      printf(" | %.3fx\n", best / hcT);
      fflush(stdout);
    }
}

} // namespace

int main(int argc, char **argv) {
  bool quick = false, fused = true, plain = true, peakOnly = false;
  int reps = 5;
  std::vector<int64_t> threadList = {1, 2}, ms = {2048, 8192};
  std::string model = "all", passes = "fwd,dX,dW";
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--quick")
      quick = true;
    else if (a == "--peak-only")  // the peaks alone, for other benchmarks' MFU
      peakOnly = true;
    else if (a == "--no-fused")
      fused = false;
    else if (a == "--fused-only")
      plain = false;
    else if (a == "--reps" && i + 1 < argc)
      reps = std::atoi(argv[++i]);
    else if (a == "--threads" && i + 1 < argc)
      threadList = parseList(argv[++i]);
    else if (a == "--m" && i + 1 < argc)
      ms = parseList(argv[++i]);
    else if (a == "--model" && i + 1 < argc)
      model = argv[++i];
    else if (a == "--pass" && i + 1 < argc)  // a subset of the cases (tuning)
      passes = argv[++i];
    else if (a == "--precision" && i + 1 < argc) {
      const std::string p = argv[++i];
      if (p != "fp32" && p != "bf16") {
        fprintf(stderr, "hc-bench-gemm: --precision must be fp32 or bf16, not '%s'\n",
                p.c_str());
        return 2;
      }
      gBf16 = p == "bf16";
    } else if (a == "--a-bf16")
      gABf16 = true;
    else {
      fprintf(stderr, "usage: %s [--quick] [--reps N] [--threads 1,2] [--m 2048,8192] "
                      "[--model S|XL|all|demo] [--no-fused | --fused-only] [--precision fp32|bf16] [--a-bf16] "
                      "[--pass fwd,dX,dW] [--peak-only]\n", argv[0]);
      return 2;
    }
  }
  if (gABf16 && !gBf16) {
    fprintf(stderr, "hc-bench-gemm: --a-bf16 needs --precision bf16\n");
    return 2;
  }
  quietLibraryThreads();
  if (peakOnly) {
    // One line per thread count: the FMA peak of the widest vector unit, and
    // the vdpbf16ps and AMX tile peaks where the CPU has them (0 where not).
    const bool wide = __builtin_cpu_supports("avx512f");
    for (int64_t th : threadList)
      printf("peak threads=%lld isa=%s fma_gflops=%.1f bf16_gflops=%.1f amx_gflops=%.1f\n",
             static_cast<long long>(th), wide ? "avx512" : "avx2", peak(static_cast<int>(th), wide),
             hcrt_bf16_peak_gflops(static_cast<int32_t>(th)),
             hcrt_amx_bf16_peak_gflops(static_cast<int32_t>(th)));
    return 0;
  }
  if (quick) {
    reps = std::min(reps, 3);
    ms = {2048};
  }
  std::vector<Case> cases;
  // demo: models/dit.py's "demo" (hidden 128, MLP 512), the sampler's shapes
  const int64_t demo[][2] = {{128, 384}, {128, 128}, {128, 512}, {512, 128}};
  const int64_t S[][2] = {{384, 1152}, {384, 384}, {384, 1536}, {1536, 384}};
  const int64_t XL[][2] = {{1152, 3456}, {1152, 1152}, {1152, 4608}, {4608, 1152}, {1152, 6912}};
  for (int64_t M : ms) {
    if (model == "demo")
      for (auto &s : demo)
        addLinear(cases, "demo", M, s[0], s[1]);
    if (model == "all" || model == "S")
      for (auto &s : S) {
        addLinear(cases, "S/2", M, s[0], s[1]);
        if (quick)
          break;
      }
    if (model == "all" || model == "XL")
      for (auto &s : XL) {
        addLinear(cases, "XL/2", M, s[0], s[1]);
        if (quick)
          break;
      }
  }
  const std::string passList = "," + passes + ",";
  cases.erase(std::remove_if(cases.begin(), cases.end(),
                             [&](const Case &c) {
                               return passList.find("," + c.pass + ",") == std::string::npos;
                             }),
              cases.end());
  std::vector<Lib> libs = gBf16 ? loadBf16Baselines() : loadBaselines();
  if (gBf16)
    fused = false;
  printf("hc-bench-gemm: hc isa=%s, team of %d threads; baselines:", hcrt_isa_name(hcrt_isa()),
         hcrt_num_threads());
  for (const Lib &l : libs)
    printf(" %s", l.name.c_str());
  printf("\n");
  bool has512 = __builtin_cpu_supports("avx512f");
  for (int64_t th : threadList) {
    double p256 = peak(th, false), p512 = has512 ? peak(th, true) : 0;
    printf("\nmeasured FMA peak, %lld thread(s): AVX2 %.1f GFLOP/s, AVX-512 %.1f GFLOP/s\n",
           (long long)th, p256, p512);
    double pk = std::max(p256, p512);
    if (gBf16) {
      const bool amx = hcrt_bf16_path() == HC_BF16_AMX;
      pk = amx ? hcrt_amx_bf16_peak_gflops(static_cast<int32_t>(th))
               : hcrt_bf16_peak_gflops(static_cast<int32_t>(th));
      printf("measured bf16 (%s) peak, %lld thread(s): %.1f GFLOP/s; hc bf16 kernel: %s\n",
             amx ? "AMX tiles" : "vdpbf16ps", (long long)th, pk,
             hcrt_bf16_path_name(hcrt_bf16_path()));
      if (pk <= 0)
        pk = std::max(p256, p512);
    }
    for (const Lib &l : libs)  // both sections run the libraries at th
      l.setThreads(static_cast<int>(th));
    std::vector<double> ratios, pct;
    if (plain)
      benchGemm(cases, libs, th, reps, pk, ratios, pct);
    if (!ratios.empty())
      printf("summary %lld thread(s): hc/best median %.3fx, min %.3fx; hc %% of peak on M=8192 "
             "cases: median %.0f%%\n",
             (long long)th, median(ratios), *std::min_element(ratios.begin(), ratios.end()),
             pct.empty() ? 0.0 : median(pct));
    if (fused)
      benchFused(libs, th, reps, quick ? std::vector<int64_t>{2048} : ms);
  }
  return 0;
}
