// hc-bench-kernels: hc's fused (non-GEMM) kernels against the unfused
// sequence of passes a framework runs without fusion, and hc's flash
// attention (forward + backward) against the unfused matmul-softmax-matmul
// sequence (OpenBLAS / BLIS / oneDNN / hc GEMMs + a softmax pass), at 1 and
// 2 threads, interleaved, median of N. Not a test: prints tables, never
// fails on timing.
//
// Part 1 prints GB/s against a STREAM-like triad (a = b + s c over 3 x 64
// MiB) run in the same rounds as each kernel, its best round as STREAM does:
// bytes are the least a kernel must move (every input read once, every
// output written once; no write-allocate, the STREAM convention).
// Part 2 prints GFLOP/s (useful flops: 4 T^2 Dh per head forward, 8 T^2 Dh
// backward with P recomputed counted once, i.e. 12 T^2 Dh together) and the
// time ratio.
//
//   hc-bench-kernels [--reps N] [--threads 1,2] [--only fused|attention]
#include "bench_common.h"
#include "hc/runtime/kernels.h"

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

using namespace bench;

namespace {

// Runs f(begin, end) over [0, n) split into `threads` contiguous chunks
// (a multiple of 64 elements each), one std::thread per chunk but the first.
template <class F> void par(int threads, int64_t n, F &&f) {
  if (threads <= 1) {
    f(int64_t{0}, n);
    return;
  }
  std::vector<std::thread> ts;
  auto chunk = [&](int i, int64_t &b, int64_t &e) {
    int64_t units = (n + 63) / 64;
    b = std::min(n, units * i / threads * 64);
    e = std::min(n, units * (i + 1) / threads * 64);
  };
  for (int i = 1; i < threads; ++i)
    ts.emplace_back([&, i] {
      int64_t b, e;
      chunk(i, b, e);
      f(b, e);
    });
  int64_t b, e;
  chunk(0, b, e);
  f(b, e);
  for (auto &t : ts)
    t.join();
}

// Row-granular variant: f(row_begin, row_end).
template <class F> void parRows(int threads, int64_t rows, F &&f) {
  if (threads <= 1) {
    f(int64_t{0}, rows);
    return;
  }
  std::vector<std::thread> ts;
  for (int i = 1; i < threads; ++i)
    ts.emplace_back([&, i] { f(rows * i / threads, rows * (i + 1) / threads); });
  f(int64_t{0}, rows / threads);
  for (auto &t : ts)
    t.join();
}

// out[r] = sum of row r of a rows x cols matrix (one unfused pass).
void rowSums(int threads, const float *x, int64_t rows, int64_t cols, float *out) {
  parRows(threads, rows, [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) {
      float s = 0;
      for (int64_t c = 0; c < cols; ++c)
        s += x[r * cols + c];
      out[r] = s;
    }
  });
}

Buf filled(int64_t n, float lo, float hi, uint32_t seed) {
  Buf v(n);
  uint32_t s = seed * 2654435761u + 1;
  for (auto &x : v) {
    s = s * 1664525u + 1013904223u;
    x = lo + (hi - lo) * static_cast<float>(s >> 8) / 16777216.0f;
  }
  return v;
}

// ---- STREAM-like triad a = b + s c, bytes 12 n ----
struct Triad {
  static constexpr int64_t n = 16 << 20;  // 64 MiB per array: well past L3
  int threads;
  Buf a = Buf(n), b = Buf(n, 1.0f), c = Buf(n, 2.0f);
  explicit Triad(int threads) : threads(threads) {}
  double bytes() const { return 12.0 * n; }
  void run() {
    const float s = 3.0f;
    par(threads, n, [&](int64_t lo, int64_t hi) {
      float *__restrict pa = a.data();
      const float *__restrict pb = b.data(), *__restrict pc = c.data();
      for (int64_t i = lo; i < hi; ++i)
        pa[i] = pb[i] + s * pc[i];
    });
  }
  // best of the repetitions, as STREAM reports (the conservative reference)
  double bestGBs(int reps) {
    run();
    double t = 1e30;
    for (int r = 0; r < std::max(reps, 5); ++r) {
      auto t0 = Clock::now();
      run();
      t = std::min(t, seconds(t0, Clock::now()));
    }
    return bytes() / t / 1e9;
  }
};

constexpr float kK = 0.7978845608028654f, kC = 0.044715f;

// tanh through exp so the pass vectorizes (libmvec), like a framework's
// vectorized tanh; libm's tanhf would be scalar.
inline float vtanh(float a) { return 1.0f - 2.0f / (std::exp(2.0f * a) + 1.0f); }

struct FusedCase {
  std::string name;
  double bytes;
  std::function<void()> hc, unfused;
};

void benchFused(int threads, int reps) {
  Triad triad(threads);
  printf("\nmeasured triad bandwidth, %d thread(s): %.1f GB/s\n", threads,
         triad.bestGBs(reps));
  hc_threads th{0, threads};
  // Shapes of DiT-XL/2 at 8192 tokens (D = 1152), its MLP hidden (4608) at
  // 2048 tokens, S/2 attention probabilities (24 x 6 heads x 256 x 256).
  const int64_t T = 256, rows = 8192, D = 1152, n = rows * D;
  const int64_t srows = 24 * 6 * 256, scols = 256, sn = srows * scols;
  Buf x = filled(n, -4, 4, 1), dy = filled(n, -1, 1, 2);
  Buf y(n), dx(n), t1(n), t2(n), t3(n);
  Buf sx = filled(sn, -6, 6, 3), sy(sn), sdy = filled(sn, -1, 1, 4), sdx(sn), st(sn);
  const int64_t groups = rows / T;
  Buf shift = filled(groups * D, -1, 1, 5), scale = filled(groups * D, -1, 1, 6);
  Buf mean(rows), rstd(rows), dshift(groups * D), dscale(groups * D);
  Buf p = filled(n, -1, 1, 7), g = filled(n, -1, 1, 8), m1 = filled(n, -0.1f, 0.1f, 9),
                     v1 = filled(n, 0, 0.01f, 10);
  Buf pred = filled(n, -1, 1, 11), target = filled(n, -1, 1, 12);
  float *X = x.data(), *Y = y.data(), *DY = dy.data(), *DX = dx.data(), *A1 = t1.data(),
        *A2 = t2.data(), *A3 = t3.data();
  std::vector<FusedCase> cs;

  // GELU-tanh: PyTorch's decomposition, one op per pass.
  cs.push_back({"gelu_tanh fwd", 8.0 * n, [&] { hc_gelu_tanh_fwd(n, X, Y, th); }, [&] {
                  par(threads, n, [&](int64_t b, int64_t e) {
                    for (int64_t i = b; i < e; ++i) A1[i] = X[i] * X[i] * X[i];
                  });
                  par(threads, n, [&](int64_t b, int64_t e) {
                    for (int64_t i = b; i < e; ++i) A1[i] = kK * (X[i] + kC * A1[i]);
                  });
                  par(threads, n, [&](int64_t b, int64_t e) {
                    for (int64_t i = b; i < e; ++i) A1[i] = vtanh(A1[i]);
                  });
                  par(threads, n, [&](int64_t b, int64_t e) {
                    for (int64_t i = b; i < e; ++i) Y[i] = 0.5f * X[i] * (1.0f + A1[i]);
                  });
                }});
  cs.push_back({"gelu_tanh bwd", 12.0 * n, [&] { hc_gelu_tanh_bwd(n, X, DY, DX, th); }, [&] {
                  par(threads, n, [&](int64_t b, int64_t e) {
                    for (int64_t i = b; i < e; ++i) A1[i] = kK * (X[i] + kC * X[i] * X[i] * X[i]);
                  });
                  par(threads, n, [&](int64_t b, int64_t e) {
                    for (int64_t i = b; i < e; ++i) A1[i] = vtanh(A1[i]);
                  });
                  par(threads, n, [&](int64_t b, int64_t e) {
                    for (int64_t i = b; i < e; ++i) {
                      float t = A1[i], xi = X[i];
                      DX[i] = DY[i] * (0.5f * (1 + t) +
                                       0.5f * xi * (1 - t * t) * kK * (1 + 3 * kC * xi * xi));
                    }
                  });
                }});
  cs.push_back({"silu fwd", 8.0 * n, [&] { hc_silu_fwd(n, X, Y, th); }, [&] {
                  par(threads, n, [&](int64_t b, int64_t e) {
                    for (int64_t i = b; i < e; ++i) A1[i] = 1.0f / (1.0f + std::exp(-X[i]));
                  });
                  par(threads, n, [&](int64_t b, int64_t e) {
                    for (int64_t i = b; i < e; ++i) Y[i] = X[i] * A1[i];
                  });
                }});
  cs.push_back({"silu bwd", 12.0 * n, [&] { hc_silu_bwd(n, X, DY, DX, th); }, [&] {
                  par(threads, n, [&](int64_t b, int64_t e) {
                    for (int64_t i = b; i < e; ++i) A1[i] = 1.0f / (1.0f + std::exp(-X[i]));
                  });
                  par(threads, n, [&](int64_t b, int64_t e) {
                    for (int64_t i = b; i < e; ++i)
                      DX[i] = DY[i] * A1[i] * (1.0f + X[i] * (1.0f - A1[i]));
                  });
                }});
  // Row softmax: max, exp(x - max), sum, divide.
  float *SX = sx.data(), *SY = sy.data(), *SDY = sdy.data(), *SDX = sdx.data(), *ST = st.data();
  Buf rmax(srows), rsum(srows);
  cs.push_back({"softmax fwd 256", 8.0 * sn,
                [&] { hc_softmax_fwd(srows, scols, SX, scols, SY, scols, th); }, [&] {
                  parRows(threads, srows, [&](int64_t b, int64_t e) {
                    for (int64_t r = b; r < e; ++r) {
                      float m = -INFINITY;
                      for (int64_t c = 0; c < scols; ++c) m = std::max(m, SX[r * scols + c]);
                      rmax[r] = m;
                    }
                  });
                  parRows(threads, srows, [&](int64_t b, int64_t e) {
                    for (int64_t r = b; r < e; ++r)
                      for (int64_t c = 0; c < scols; ++c)
                        SY[r * scols + c] = std::exp(SX[r * scols + c] - rmax[r]);
                  });
                  rowSums(threads, SY, srows, scols, rsum.data());
                  parRows(threads, srows, [&](int64_t b, int64_t e) {
                    for (int64_t r = b; r < e; ++r)
                      for (int64_t c = 0; c < scols; ++c) SY[r * scols + c] /= rsum[r];
                  });
                }});
  cs.push_back({"softmax bwd 256", 12.0 * sn,
                [&] { hc_softmax_bwd(srows, scols, SY, scols, SDY, scols, SDX, scols, th); }, [&] {
                  parRows(threads, srows, [&](int64_t b, int64_t e) {
                    for (int64_t r = b; r < e; ++r)
                      for (int64_t c = 0; c < scols; ++c)
                        ST[r * scols + c] = SY[r * scols + c] * SDY[r * scols + c];
                  });
                  rowSums(threads, ST, srows, scols, rsum.data());
                  parRows(threads, srows, [&](int64_t b, int64_t e) {
                    for (int64_t r = b; r < e; ++r)
                      for (int64_t c = 0; c < scols; ++c)
                        SDX[r * scols + c] = SY[r * scols + c] * (SDY[r * scols + c] - rsum[r]);
                  });
                }});
  // adaLN: y = LN(x) (1 + scale) + shift, LN without affine (DiT's norm1/2).
  hc_layernorm_args ln{};
  ln.rows = rows, ln.D = D, ln.x = X, ln.ldx = D, ln.y = Y, ln.ldy = D;
  ln.shift = shift.data(), ln.scale = scale.data(), ln.group_rows = T, ln.ld_mod = D;
  ln.eps = 1e-6f, ln.mean = mean.data(), ln.rstd = rstd.data();
  const float *SH = shift.data(), *SC = scale.data();
  float *MEAN = mean.data(), *RSTD = rstd.data();
  cs.push_back({"layernorm+modulate fwd", 8.0 * n, [&] { hc_layernorm_fwd(&ln, th); }, [&] {
                  parRows(threads, rows, [&](int64_t b, int64_t e) {  // mean
                    for (int64_t r = b; r < e; ++r) {
                      float s = 0;
                      for (int64_t c = 0; c < D; ++c) s += X[r * D + c];
                      MEAN[r] = s / D;
                    }
                  });
                  parRows(threads, rows, [&](int64_t b, int64_t e) {  // var
                    for (int64_t r = b; r < e; ++r) {
                      float s = 0;
                      for (int64_t c = 0; c < D; ++c) {
                        float d = X[r * D + c] - MEAN[r];
                        s += d * d;
                      }
                      RSTD[r] = 1.0f / std::sqrt(s / D + 1e-6f);
                    }
                  });
                  parRows(threads, rows, [&](int64_t b, int64_t e) {  // normalize
                    for (int64_t r = b; r < e; ++r)
                      for (int64_t c = 0; c < D; ++c)
                        A1[r * D + c] = (X[r * D + c] - MEAN[r]) * RSTD[r];
                  });
                  parRows(threads, rows, [&](int64_t b, int64_t e) {  // modulate
                    for (int64_t r = b; r < e; ++r) {
                      const float *sh = SH + (r / T) * D, *sc = SC + (r / T) * D;
                      for (int64_t c = 0; c < D; ++c)
                        Y[r * D + c] = A1[r * D + c] * (1.0f + sc[c]) + sh[c];
                    }
                  });
                }});
  hc_layernorm_bwd_args lb{};
  lb.rows = rows, lb.D = D, lb.x = X, lb.ldx = D, lb.dy = DY, lb.lddy = D, lb.dx = DX, lb.lddx = D;
  lb.shift = shift.data(), lb.scale = scale.data(), lb.group_rows = T, lb.ld_mod = D;
  lb.mean = MEAN, lb.rstd = RSTD, lb.dshift = dshift.data(), lb.dscale = dscale.data();
  float *DSH = dshift.data(), *DSC = dscale.data();
  Buf r1(rows), r2(rows);
  cs.push_back({"layernorm+modulate bwd", 12.0 * n, [&] { hc_layernorm_bwd(&lb, th); }, [&] {
                  parRows(threads, rows, [&](int64_t b, int64_t e) {  // xhat
                    for (int64_t r = b; r < e; ++r)
                      for (int64_t c = 0; c < D; ++c)
                        A1[r * D + c] = (X[r * D + c] - MEAN[r]) * RSTD[r];
                  });
                  parRows(threads, rows, [&](int64_t b, int64_t e) {  // dxhat
                    for (int64_t r = b; r < e; ++r) {
                      const float *sc = SC + (r / T) * D;
                      for (int64_t c = 0; c < D; ++c)
                        A2[r * D + c] = DY[r * D + c] * (1.0f + sc[c]);
                    }
                  });
                  // dshift / dscale: column sums per sample (split by column)
                  par(threads, D, [&](int64_t c0, int64_t c1) {
                    for (int64_t gi = 0; gi < groups; ++gi) {
                      float *ds = DSH + gi * D, *dc = DSC + gi * D;
                      for (int64_t c = c0; c < c1; ++c) ds[c] = dc[c] = 0;
                      for (int64_t r = gi * T; r < (gi + 1) * T; ++r)
                        for (int64_t c = c0; c < c1; ++c) {
                          ds[c] += DY[r * D + c];
                          dc[c] += DY[r * D + c] * A1[r * D + c];
                        }
                    }
                  });
                  parRows(threads, rows, [&](int64_t b, int64_t e) {  // row means
                    for (int64_t r = b; r < e; ++r) {
                      float s1 = 0, s2 = 0;
                      for (int64_t c = 0; c < D; ++c) {
                        s1 += A2[r * D + c];
                        s2 += A2[r * D + c] * A1[r * D + c];
                      }
                      r1[r] = s1 / D, r2[r] = s2 / D;
                    }
                  });
                  parRows(threads, rows, [&](int64_t b, int64_t e) {
                    for (int64_t r = b; r < e; ++r)
                      for (int64_t c = 0; c < D; ++c)
                        DX[r * D + c] = RSTD[r] * (A2[r * D + c] - r1[r] - A1[r * D + c] * r2[r]);
                  });
                }});
  // AdamW: torch's unfused (foreach=False, fused=False) update.
  float *P = p.data(), *G = g.data(), *M1 = m1.data(), *V1 = v1.data();
  const float lr = 1e-4f, b1 = 0.9f, b2 = 0.999f, eps = 1e-8f, wd = 0.01f;
  const float bc1 = 1 - std::pow(b1, 10.0f), bc2s = std::sqrt(1 - std::pow(b2, 10.0f));
  cs.push_back({"adamw", 28.0 * n,
                [&] { hc_adamw(n, P, G, M1, V1, lr, b1, b2, eps, wd, 10, th); }, [&] {
                  par(threads, n, [&](int64_t b, int64_t e) {
                    for (int64_t i = b; i < e; ++i) P[i] *= 1 - lr * wd;
                  });
                  par(threads, n, [&](int64_t b, int64_t e) {  // lerp_
                    for (int64_t i = b; i < e; ++i) M1[i] += (1 - b1) * (G[i] - M1[i]);
                  });
                  par(threads, n, [&](int64_t b, int64_t e) {  // mul_
                    for (int64_t i = b; i < e; ++i) V1[i] *= b2;
                  });
                  par(threads, n, [&](int64_t b, int64_t e) {  // addcmul_
                    for (int64_t i = b; i < e; ++i) V1[i] += (1 - b2) * G[i] * G[i];
                  });
                  par(threads, n, [&](int64_t b, int64_t e) {  // sqrt / bc2 + eps
                    for (int64_t i = b; i < e; ++i) A1[i] = std::sqrt(V1[i]) / bc2s + eps;
                  });
                  par(threads, n, [&](int64_t b, int64_t e) {  // addcdiv_
                    for (int64_t i = b; i < e; ++i) P[i] += -(lr / bc1) * M1[i] / A1[i];
                  });
                }});
  float *PR = pred.data(), *TG = target.data();
  volatile float sink = 0;
  cs.push_back({"mse fwd", 8.0 * n, [&] { sink = hc_mse_loss_fwd(n, PR, TG, th); }, [&] {
                  par(threads, n, [&](int64_t b, int64_t e) {
                    for (int64_t i = b; i < e; ++i) A3[i] = PR[i] - TG[i];
                  });
                  par(threads, n, [&](int64_t b, int64_t e) {
                    for (int64_t i = b; i < e; ++i) A3[i] *= A3[i];
                  });
                  std::mutex mu;
                  double s = 0;
                  par(threads, n, [&](int64_t b, int64_t e) {
                    double ls = 0;
                    for (int64_t i = b; i < e; ++i) ls += A3[i];
                    std::lock_guard<std::mutex> lock(mu);
                    s += ls;
                  });
                  sink = static_cast<float>(s / n);
                }});
  cs.push_back({"mse bwd", 12.0 * n, [&] { hc_mse_loss_bwd(n, PR, TG, 1.0f, DX, th); }, [&] {
                  par(threads, n, [&](int64_t b, int64_t e) {
                    for (int64_t i = b; i < e; ++i) DX[i] = PR[i] - TG[i];
                  });
                  par(threads, n, [&](int64_t b, int64_t e) {
                    for (int64_t i = b; i < e; ++i) DX[i] *= 2.0f / n;
                  });
                }});
  (void)sink;

  // Each kernel's rounds also run the triad: the machine is shared, and its
  // bandwidth moves between minutes (a 22.6 against 42.1 GB/s triad seen
  // between two runs); a kernel is held against the best triad of its own
  // rounds.
  printf("\n== %d thread(s): fused kernels, GB/s median of %d (%% of the best triad in the "
         "same rounds) ==\n",
         threads, reps);
  printf("%-24s %9s | %16s | %10s %10s | %10s | %s\n", "kernel", "MB moved", "hc GB/s (%triad)",
         "hc ms", "unfused ms", "triad GB/s", "unfused/hc");
  std::vector<double> pct;
  for (const FusedCase &c : cs) {
    // AdamW mutates its state; rerunning it is fine (values stay finite).
    std::vector<std::vector<double>> runs =
        timeInterleavedRuns({c.hc, c.unfused, [&] { triad.run(); }}, reps);
    const double tHc = median(runs[0]), tUnfused = median(runs[1]);
    const double tri = triad.bytes() / *std::min_element(runs[2].begin(), runs[2].end()) / 1e9;
    double gbs = c.bytes / tHc / 1e9;
    pct.push_back(100 * gbs / tri);
    printf("%-24s %9.1f | %7.1f (%4.0f%%) | %10.2f %10.2f | %10.1f | %6.2fx\n", c.name.c_str(),
           c.bytes / 1e6, gbs, 100 * gbs / tri, tHc * 1e3, tUnfused * 1e3, tri, tUnfused / tHc);
    fflush(stdout);
  }
  printf("summary %d thread(s): hc %% of triad: min %.0f%%, median %.0f%%\n", threads,
         *std::min_element(pct.begin(), pct.end()), median(pct));
}

// ---- attention ----
struct AttShape {
  const char *model;
  int64_t B, H, T, Dh;
};

void benchAttention(const std::vector<Lib> &libs, int threads, int reps) {
  const AttShape shapes[] = {
      {"S/2", 8, 6, 256, 64}, {"S/2", 2, 6, 1024, 64}, {"XL/2", 8, 16, 256, 72}, {"XL/2", 2, 16, 1024, 72}};
  hc_threads th{0, threads};
  for (const Lib &l : libs)
    l.setThreads(threads);
  printf("\n== %d thread(s): attention forward+backward, ms median of %d (GFLOP/s: 12 T^2 Dh "
         "per head) ==\n", threads, reps);
  printf("q/k/v slices of one [B, T, 3, H, Dh] buffer, O and dO [B, T, H, Dh]; unfused = per head "
         "S = scale Q K^T, P = softmax(S) (hc's row kernel), O = P V; backward dV = P^T dO, "
         "dP = dO V^T, dS = softmax_bwd, dQ = scale dS K, dK = scale dS^T Q\n");
  printf("%-5s %2s %3s %5s %3s | %18s | %18s | %s | %s\n", "model", "B", "H", "T", "Dh",
         "hc flash (GFLOP/s)", "flash bf16 (GF/s)", "unfused: fwd+bwd ms per GEMM library", "best unfused/flash");
  for (const AttShape &s : shapes) {
    const int64_t B = s.B, H = s.H, T = s.T, Dh = s.Dh, HD = H * Dh, BH = B * H;
    const float scale = 1.0f / std::sqrt(static_cast<float>(Dh));
    Buf qkv = filled(B * T * 3 * HD, -1, 1, 21), o(B * T * HD),
                       dout = filled(B * T * HD, -1, 1, 22), lse(BH * T);
    Buf dq(B * T * HD), dk(B * T * HD), dv(B * T * HD);
    hc_attention_args a{};
    a.batch = B, a.heads = H, a.Tq = T, a.Tk = T, a.Dh = Dh, a.scale = scale;
    a.q = qkv.data(), a.k = qkv.data() + HD, a.v = qkv.data() + 2 * HD;
    a.q_sb = a.k_sb = a.v_sb = T * 3 * HD;
    a.q_sh = a.k_sh = a.v_sh = Dh;
    a.q_st = a.k_st = a.v_st = 3 * HD;
    a.o = o.data(), a.o_sb = T * HD, a.o_sh = Dh, a.o_st = HD, a.lse = lse.data();
    a.dout = dout.data(), a.do_sb = T * HD, a.do_sh = Dh, a.do_st = HD;
    a.dq = dq.data(), a.dq_sb = T * HD, a.dq_sh = Dh, a.dq_st = HD;
    a.dk = dk.data(), a.dk_sb = T * HD, a.dk_sh = Dh, a.dk_st = HD;
    a.dv = dv.data(), a.dv_sb = T * HD, a.dv_sh = Dh, a.dv_st = HD;
    auto flash = [&] {
      a.bf16 = 0;
      hc_flash_attention_fwd(&a, th);
      hc_flash_attention_bwd(&a, th);
    };
    auto flashBf16 = [&] {
      a.bf16 = 1;
      hc_flash_attention_fwd(&a, th);
      hc_flash_attention_bwd(&a, th);
    };
    // Unfused: P and dS stored, [B, H, T, T].
    Buf S(BH * T * T), dP(BH * T * T);
    auto unfused = [&](const GemmFn &gemm) {
      const int64_t ld = 3 * HD;
      for (int64_t bh = 0; bh < BH; ++bh) {
        int64_t b = bh / H, h = bh % H;
        const float *q = a.q + b * a.q_sb + h * Dh, *k = a.k + b * a.k_sb + h * Dh;
        gemm(0, 1, T, T, Dh, scale, q, ld, k, ld, 0.0f, S.data() + bh * T * T, T);
      }
      hc_softmax_fwd(BH * T, T, S.data(), T, S.data(), T, th);
      for (int64_t bh = 0; bh < BH; ++bh) {
        int64_t b = bh / H, h = bh % H;
        const float *v = a.v + b * a.v_sb + h * Dh;
        gemm(0, 0, T, Dh, T, 1.0f, S.data() + bh * T * T, T, v, ld, 0.0f,
             o.data() + b * a.o_sb + h * Dh, HD);
      }
      for (int64_t bh = 0; bh < BH; ++bh) {
        int64_t b = bh / H, h = bh % H;
        const float *v = a.v + b * a.v_sb + h * Dh, *g = dout.data() + b * a.do_sb + h * Dh;
        const float *pp = S.data() + bh * T * T;
        gemm(1, 0, T, Dh, T, 1.0f, pp, T, g, HD, 0.0f, dv.data() + b * a.dv_sb + h * Dh, HD);
        gemm(0, 1, T, T, Dh, 1.0f, g, HD, v, ld, 0.0f, dP.data() + bh * T * T, T);
      }
      hc_softmax_bwd(BH * T, T, S.data(), T, dP.data(), T, dP.data(), T, th);
      for (int64_t bh = 0; bh < BH; ++bh) {
        int64_t b = bh / H, h = bh % H;
        const float *q = a.q + b * a.q_sb + h * Dh, *k = a.k + b * a.k_sb + h * Dh;
        const float *ds = dP.data() + bh * T * T;
        gemm(0, 0, T, Dh, T, scale, ds, T, k, ld, 0.0f, dq.data() + b * a.dq_sb + h * Dh, HD);
        gemm(1, 0, T, Dh, T, scale, ds, T, q, ld, 0.0f, dk.data() + b * a.dk_sb + h * Dh, HD);
      }
    };
    GemmFn hcGemm = [&](int ta, int tb, int64_t M, int64_t N, int64_t K, float alpha,
                        const float *A, int64_t lda, const float *Bm, int64_t ldb, float beta,
                        float *C, int64_t ldc) {
      hc_sgemm_simple(ta, tb, M, N, K, alpha, A, lda, Bm, ldb, beta, C, ldc, th);
    };
    std::vector<std::function<void()>> fns = {flash, flashBf16};
    std::vector<std::string> names;
    for (const Lib &l : libs) {
      fns.push_back([&] { unfused(l.gemm); });
      names.push_back(l.name);
    }
    fns.push_back([&] { unfused(hcGemm); });
    names.push_back("hc-gemm");
    std::vector<double> t = timeInterleaved(fns, reps);
    const double flop = 12.0 * BH * T * T * Dh;
    printf("%-5s %2lld %3lld %5lld %3lld | %8.2f (%6.1f) | %8.2f (%6.1f) |", s.model,
           (long long)B, (long long)H, (long long)T, (long long)Dh, t[0] * 1e3,
           flop / t[0] / 1e9, t[1] * 1e3, flop / t[1] / 1e9);
    double best = 1e30;
    for (size_t i = 0; i < names.size(); ++i) {
      best = std::min(best, t[i + 2]);
      printf(" %s %.2f", names[i].c_str(), t[i + 2] * 1e3);
    }
    printf(" | %.2fx\n", best / t[0]);
    fflush(stdout);
  }
}

} // namespace

int main(int argc, char **argv) {
  int reps = 5;
  std::vector<int64_t> threadList = {1, 2};
  std::string only;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--reps" && i + 1 < argc)
      reps = std::atoi(argv[++i]);
    else if (a == "--threads" && i + 1 < argc)
      threadList = parseList(argv[++i]);
    else if (a == "--only" && i + 1 < argc)
      only = argv[++i];
    else {
      fprintf(stderr, "usage: %s [--reps N] [--threads 1,2] [--only fused|attention]\n", argv[0]);
      return 2;
    }
  }
  quietLibraryThreads();
  std::vector<Lib> libs = loadBaselines();
  printf("hc-bench-kernels: hc isa=%s, team of %d threads; baselines:", hcrt_isa_name(hcrt_isa()),
         hcrt_num_threads());
  for (const Lib &l : libs)
    printf(" %s", l.name.c_str());
  printf("\n");
  for (int64_t t64 : threadList) {
    int th = static_cast<int>(t64);
    if (only.empty() || only == "fused") {
      benchFused(th, reps);
    }
    if (only.empty() || only == "attention")
      benchAttention(libs, th, reps);
  }
  return 0;
}
