// SGEMM tests: hc_sgemm (every ISA path this CPU has) and hc_sgemm_ref
// against a float64 reference.
//
// Error bound (per element): with S = |alpha| sum_k |a_k b_k| and
// T = the exact pre-activation value,
//   |C - C64| <= 2 (K + 4) u (S + |bias|) max(1, |gate|)
//              + 8 u (|C64| + |residual| + |beta C_old|)
//              + (gelu ? 2e-6 (1 + |T|) : 0),   u = 2^-24,
// i.e. the classic gamma_K dot-product bound (valid for any summation order,
// blocked or FMA) plus one rounding per epilogue step, plus the fast tanh's
// stated error for the GELU epilogue.
#include "kernel_test_util.h"

#include <cstring>

using namespace hctest;

namespace {

struct GemmCase {
  int64_t M, N, K;
  int ta = 0, tb = 0;
  int64_t batch = 1;
  uint32_t flags = 0;
  bool preact = false;
  bool residualIsC = false;
  float alpha = 1.0f, beta = 0.0f;
  int64_t gateRows = 0;
  int threads = 1;
  bool ref = false;  // test hc_sgemm_ref instead of hc_sgemm
};

std::string describe(const GemmCase &c) {
  char buf[256];
  snprintf(buf, sizeof buf,
           "M=%lld N=%lld K=%lld ta=%d tb=%d batch=%lld flags=%u preact=%d "
           "resC=%d alpha=%g beta=%g gateRows=%lld threads=%d ref=%d isa=%s",
           (long long)c.M, (long long)c.N, (long long)c.K, c.ta, c.tb,
           (long long)c.batch, c.flags, c.preact, c.residualIsC, c.alpha,
           c.beta, (long long)c.gateRows, c.threads, c.ref,
           hcrt_isa_name(hcrt_isa()));
  return buf;
}

// Returns the number of bad elements (failures are reported via gtest).
int64_t runGemm(const GemmCase &c, uint32_t seed) {
  const int64_t M = c.M, N = c.N, K = c.K, B = c.batch;
  // Leading dimensions with padding, operands stored as the layout says.
  const int64_t aRows = c.ta ? K : M, aCols = c.ta ? M : K;
  const int64_t bRows = c.tb ? N : K, bCols = c.tb ? K : N;
  const int64_t lda = aCols + 3, ldb = bCols + 5, ldc = N + 2;
  const int64_t sa = aRows * lda + 7, sb = bRows * ldb + 1, sc = M * ldc + 9;
  std::vector<float> A = randomVec(std::max<int64_t>(1, B * sa), seed);
  std::vector<float> Bm = randomVec(std::max<int64_t>(1, B * sb), seed + 1);
  const float sentinel = 12345.0f;
  std::vector<float> C(std::max<int64_t>(1, B * sc), sentinel);
  std::vector<float> Cold = randomVec(C.size(), seed + 2);
  const int64_t gr = c.gateRows > 0 ? c.gateRows : M;
  const int64_t groups = M > 0 ? (M + gr - 1) / gr : 0;
  std::vector<float> bias = randomVec(std::max<int64_t>(1, B * (N + 1)), seed + 3);
  std::vector<float> gate = randomVec(std::max<int64_t>(1, B * groups * (N + 4)), seed + 4, -2, 2);
  std::vector<float> res = randomVec(std::max<int64_t>(1, B * M * (N + 1)), seed + 5);
  std::vector<float> pre(std::max<int64_t>(1, B * M * (N + 3)), sentinel);
  // The GELU-gradient epilogue's GELU inputs, ld N + 2, over GELU's range.
  std::vector<float> gx = randomVec(std::max<int64_t>(1, B * M * (N + 2)), seed + 6, -6, 6);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t m = 0; m < M; ++m)
      for (int64_t n = 0; n < N; ++n) {
        float &x = C[b * sc + m * ldc + n];
        x = c.beta != 0.0f || c.residualIsC ? Cold[b * sc + m * ldc + n]
                                            : std::numeric_limits<float>::quiet_NaN();
        pre[b * M * (N + 3) + m * (N + 3) + n] = std::numeric_limits<float>::quiet_NaN();
      }
  std::vector<float> Cin = C;

  hc_epilogue e{};
  e.flags = c.flags;
  e.bias = bias.data();
  e.stride_bias = N + 1;
  e.preact = c.preact ? pre.data() : nullptr;
  e.ld_preact = N + 3;
  e.stride_preact = M * (N + 3);
  e.gate = gate.data();
  e.ld_gate = N + 4;
  e.gate_rows = c.gateRows;
  e.stride_gate = groups * (N + 4);
  if (c.residualIsC) {
    e.residual = C.data();
    e.ld_residual = ldc;
    e.stride_residual = sc;
  } else {
    e.residual = res.data();
    e.ld_residual = N + 1;
    e.stride_residual = M * (N + 1);
  }
  e.gelu_x = gx.data();
  e.ld_gelu_x = N + 2;
  e.stride_gelu_x = M * (N + 2);
  hc_sgemm_args g{};
  g.M = M, g.N = N, g.K = K, g.batch = B, g.trans_a = c.ta, g.trans_b = c.tb;
  g.alpha = c.alpha, g.beta = c.beta;
  g.A = A.data(), g.lda = lda, g.stride_a = sa;
  g.B = Bm.data(), g.ldb = ldb, g.stride_b = sb;
  g.C = C.data(), g.ldc = ldc, g.stride_c = sc;
  g.epi = c.flags || c.preact ? &e : nullptr;
  if (c.ref)
    hc_sgemm_ref(&g);
  else
    hc_sgemm(&g, threads(c.threads));

  Checker chk{describe(c)};
  for (int64_t b = 0; b < B; ++b)
    for (int64_t m = 0; m < M; ++m)
      for (int64_t n = 0; n < N; ++n) {
        double acc = 0, S = 0;
        for (int64_t k = 0; k < K; ++k) {
          double a = c.ta ? A[b * sa + k * lda + m] : A[b * sa + m * lda + k];
          double bb = c.tb ? Bm[b * sb + n * ldb + k] : Bm[b * sb + k * ldb + n];
          acc += a * bb;
          S += std::fabs(a * bb);
        }
        double t = c.alpha * acc;
        S *= std::fabs(c.alpha);
        double bi = 0, gt = 1, rs = 0;
        if (c.flags & HC_EPI_BIAS)
          bi = bias[b * (N + 1) + n];
        t += bi;
        double preT = t;
        if (c.flags & HC_EPI_GELU_TANH)
          t = geluD(t);
        double dg = 1, beforeGrad = t;
        if (c.flags & HC_EPI_GELU_TANH_GRAD)
          dg = geluGradD(gx[b * M * (N + 2) + m * (N + 2) + n]);
        t *= dg;
        if (c.flags & HC_EPI_GATE)
          gt = gate[b * groups * (N + 4) + (m / gr) * (N + 4) + n];
        t *= gt;
        const int64_t ci = b * sc + m * ldc + n;
        if (c.flags & HC_EPI_RESIDUAL)
          rs = c.residualIsC ? Cin[ci] : res[b * M * (N + 1) + m * (N + 1) + n];
        t += rs;
        double bc = c.beta != 0.0f ? c.beta * (double)Cin[ci] : 0.0;
        t += bc;
        double tol = 2.0 * (K + 4) * kU * (S + std::fabs(bi)) * std::max(1.0, std::fabs(gt)) +
                     8 * kU * (std::fabs(t) + std::fabs(rs) + std::fabs(bc));
        if (c.flags & HC_EPI_GELU_TANH)
          tol += 2e-6 * (1 + std::fabs(preT)) * std::max(1.0, std::fabs(gt)) +
                 1.2 * 2.0 * (K + 4) * kU * (S + std::fabs(bi)) * std::max(1.0, std::fabs(gt));
        // gelu' <= 1.13 scales what came before; the fast derivative's
        // stated error (Ops.GeluBackward) is 1e-6 of its factor.
        if (c.flags & HC_EPI_GELU_TANH_GRAD)
          tol = 1.13 * tol + (1e-6 + 8 * kU) * std::fabs(beforeGrad * gt) +
                1.13 * 2e-6 * (1 + std::fabs(preT));
        chk.check(C[ci], t, tol, ci);
        if (c.preact) {
          double ptol = 2.0 * (K + 4) * kU * (S + std::fabs(bi)) + 4 * kU * std::fabs(preT);
          chk.check(pre[b * M * (N + 3) + m * (N + 3) + n], preT, ptol, -ci);
        }
      }
  // Padding and the gaps between batch entries stay untouched.
  for (size_t i = 0; i < C.size(); ++i) {
    int64_t b = i / sc, r = i % sc, m = r / ldc, n = r % ldc;
    bool inside = b < B && m < M && n < N;
    if (!inside && !(C[i] == Cin[i])) {
      ADD_FAILURE() << describe(c) << ": wrote outside C at " << i;
      ++chk.bad;
      break;
    }
  }
  return chk.bad;
}

void shapeGrid(bool ref, int32_t isa) {
  IsaScope scope(isa);
  uint32_t seed = 1;
  int64_t bad = 0;
  forEachGemmShape({1, 2, 5, 13, 29, 64, 97}, {1, 3, 16, 17, 33, 64, 101},
                   {1, 4, 7, 31, 64, 131},
                   [&](int ta, int tb, int64_t M, int64_t N, int64_t K) {
                     GemmCase c{M, N, K, ta, tb};
                     c.ref = ref;
                     c.threads = (M + N + K) % 2 ? 2 : 1;
                     bad += runGemm(c, seed++);
                     return bad <= 20;
                   });
}

void epilogueGrid(int32_t isa, int64_t K) {
  IsaScope scope(isa);
  uint32_t seed = 100;
  for (uint32_t flags = 0; flags < 32; ++flags)
    for (float beta : {0.0f, 1.0f, -0.5f})
      for (int variant = 0; variant < 3; ++variant) {
        GemmCase c{37, 41, K, (int)(flags & 1), (int)((flags >> 1) & 1)};
        c.flags = flags;
        c.beta = beta;
        c.alpha = variant == 2 ? 0.75f : 1.0f;
        c.preact = variant == 1;
        c.residualIsC = variant == 2 && (flags & HC_EPI_RESIDUAL);
        c.gateRows = variant == 0 ? 0 : 10;
        c.batch = variant == 2 ? 3 : 1;
        c.threads = 1 + variant % 2;
        if (runGemm(c, seed++) > 0)
          return;
      }
}

void largeShapes(int32_t isa) {
  IsaScope scope(isa);
  struct S { int64_t M, N, K; int ta, tb; uint32_t flags; };
  const S shapes[] = {
      {293, 517, 1031, 0, 1, HC_EPI_BIAS | HC_EPI_GELU_TANH},
      {1000, 67, 389, 0, 0, HC_EPI_RESIDUAL | HC_EPI_GATE},
      {37, 2053, 300, 1, 0, 0},
      {211, 199, 1500, 1, 1, HC_EPI_BIAS},
  };
  uint32_t seed = 1000;
  for (const S &s : shapes)
    for (int th : {1, 2}) {
      GemmCase c{s.M, s.N, s.K, s.ta, s.tb};
      c.flags = s.flags;
      c.threads = th;
      c.beta = th == 2 ? 1.0f : 0.0f;
      c.gateRows = 100;
      c.preact = (s.flags & HC_EPI_GELU_TANH) != 0;
      runGemm(c, seed++);
    }
}

void skipUnless(int32_t isa) {
  int32_t saved = hcrt_isa();
  bool ok = hcrt_set_isa(isa) == isa;
  hcrt_set_isa(saved);
  if (!ok)
    GTEST_SKIP() << hcrt_isa_name(isa) << " not available on this CPU";
}

} // namespace

TEST(Gemm, ReferenceShapes) { shapeGrid(true, hcrt_isa()); }
TEST(Gemm, ReferenceEpilogues) {
  for (uint32_t flags = 0; flags < 32; ++flags) {
    GemmCase c{19, 23, 45, 1, 0};
    c.flags = flags;
    c.ref = true;
    c.beta = flags % 3 ? 0.5f : 0.0f;
    c.gateRows = 4;
    c.batch = 2;
    c.preact = flags & 1;
    runGemm(c, flags);
  }
}

#define ISA_TESTS(Name, ISA)                                                 \
  TEST(Gemm, Shapes##Name) {                                                 \
    skipUnless(ISA);                                                         \
    shapeGrid(false, ISA);                                                   \
  }                                                                          \
  TEST(Gemm, Epilogues##Name) {                                              \
    skipUnless(ISA);                                                         \
    epilogueGrid(ISA, 53);                                                   \
  }                                                                          \
  TEST(Gemm, EpiloguesLongK##Name) {                                         \
    skipUnless(ISA);                                                         \
    epilogueGrid(ISA, 777);                                                  \
  }                                                                          \
  TEST(Gemm, Large##Name) {                                                  \
    skipUnless(ISA);                                                         \
    largeShapes(ISA);                                                        \
  }

ISA_TESTS(Generic, HC_ISA_GENERIC)
ISA_TESTS(Avx2, HC_ISA_AVX2)
ISA_TESTS(Avx512, HC_ISA_AVX512)

TEST(Gemm, Degenerate) {
  // K == 0: C = E(0) + beta C; M or N == 0: nothing is touched.
  GemmCase c{7, 9, 0, 0, 0};
  c.beta = 0.5f;
  c.flags = HC_EPI_BIAS | HC_EPI_GELU_TANH;
  runGemm(c, 5);
  c.beta = 0.0f;
  c.threads = 2;
  runGemm(c, 6);
  GemmCase z{0, 9, 5, 0, 0};
  runGemm(z, 7);
  GemmCase z2{4, 0, 5, 1, 1};
  runGemm(z2, 8);
}

TEST(Gemm, DeterministicRunToRun) {
  const int64_t M = 157, N = 301, K = 611;
  std::vector<float> A = randomVec(M * K, 1), B = randomVec(K * N, 2);
  std::vector<float> C1 = nanVec(M * N), C2 = nanVec(M * N);
  hc_sgemm_simple(0, 0, M, N, K, 1.0f, A.data(), K, B.data(), N, 0.0f,
                  C1.data(), N, threads(2));
  hc_sgemm_simple(0, 0, M, N, K, 1.0f, A.data(), K, B.data(), N, 0.0f,
                  C2.data(), N, threads(2));
  EXPECT_EQ(0, std::memcmp(C1.data(), C2.data(), sizeof(float) * M * N));
}

TEST(Gemm, NaNInputsPropagate) {
  // A NaN in A must reach C (no silent masking by packing or blocking).
  const int64_t M = 20, N = 40, K = 30;
  std::vector<float> A = randomVec(M * K, 3), B = randomVec(K * N, 4);
  A[5 * K + 7] = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> C = nanVec(M * N);
  hc_sgemm_simple(0, 0, M, N, K, 1.0f, A.data(), K, B.data(), N, 0.0f,
                  C.data(), N, threads(1));
  for (int64_t n = 0; n < N; ++n)
    EXPECT_TRUE(std::isnan(C[5 * N + n]));
  EXPECT_FALSE(std::isnan(C[4 * N]));
}

TEST(Gemm, SmallBlockingCrossesEveryBlockEdge) {
  // Force tiny MC/KC/NC so every loop of the blocked path runs many times,
  // with edges inside blocks.
  setenv("HC_GEMM_MC", "24", 1);
  setenv("HC_GEMM_KC", "40", 1);
  setenv("HC_GEMM_NC", "96", 1);
  for (int32_t isa : availableIsas()) {
    IsaScope s(isa);
    for (int ta = 0; ta < 2; ++ta)
      for (int tb = 0; tb < 2; ++tb) {
        GemmCase c{101, 203, 97, ta, tb};
        c.flags = (ta + 2 * tb) % 2 ? (HC_EPI_BIAS | HC_EPI_GELU_TANH) : (HC_EPI_GATE | HC_EPI_RESIDUAL);
        c.preact = ta == 1;
        c.beta = tb ? 0.5f : 0.0f;
        c.gateRows = 30;
        c.threads = 2;
        runGemm(c, 77 + ta + 2 * tb);
      }
  }
  unsetenv("HC_GEMM_MC");
  unsetenv("HC_GEMM_KC");
  unsetenv("HC_GEMM_NC");
}

namespace {
// Two runs at 2 threads (A transposed or not) give bit-identical C.
void expectRunToRunIdentical(int ta, int64_t M, int64_t N, int64_t K) {
  std::vector<float> A = randomVec(M * K, 1), B = randomVec(K * N, 2);
  std::vector<float> C1 = nanVec(M * N), C2 = nanVec(M * N);
  for (float *C : {C1.data(), C2.data()})
    hc_sgemm_simple(ta, 0, M, N, K, 1.0f, A.data(), ta ? M : K, B.data(), N, 0.0f, C, N,
                    threads(2));
  EXPECT_EQ(0, std::memcmp(C1.data(), C2.data(), sizeof(float) * M * N));
}
} // namespace

TEST(Gemm, KSplitAcrossThreads) {
  // K split over the threads (partial products summed in slot order): forced
  // on for odd shapes, every layout, alpha/beta, batches; then chosen by the
  // cost model for a weight-gradient-like shape (small output, long K).
  setenv("HC_GEMM_KSPLIT", "1", 1);
  struct S { int64_t M, N, K; };
  const S shapes[] = {{37, 41, 1031}, {5, 3, 20011}, {64, 101, 4099}, {1, 300, 1500}};
  uint32_t seed = 5000;
  for (int32_t isa : availableIsas()) {
    IsaScope s(isa);
    for (const S &sh : shapes)
      for (int ta = 0; ta < 2; ++ta)
        for (int tb = 0; tb < 2; ++tb) {
          GemmCase c{sh.M, sh.N, sh.K, ta, tb};
          c.threads = 2;
          c.beta = (ta + tb) % 2 ? -0.5f : 0.0f;
          c.alpha = tb ? 0.75f : 1.0f;
          c.batch = sh.M == 37 && ta == 1 ? 2 : 1;
          runGemm(c, seed++);
        }
  }
  expectRunToRunIdentical(1, 57, 61, 7001);
  unsetenv("HC_GEMM_KSPLIT");
  GemmCase c{48, 48, 20000, 1, 0};
  c.threads = 2;
  runGemm(c, seed++);
}

TEST(Gemm, DynamicPiecesAcrossThreads) {
  // Tall and wide outputs are cut into more pieces than threads (taken from
  // a shared counter): every piece edge, epilogues, beta; bit-identical
  // run to run whichever thread takes which piece.
  setenv("HC_GEMM_KSPLIT", "0", 1);
  uint32_t seed = 7000;
  for (int32_t isa : availableIsas()) {
    IsaScope s(isa);
    const GemmCase cases[] = {{4133, 37, 45, 0, 1}, {29, 4129, 41, 1, 0}};
    for (GemmCase c : cases) {
      c.threads = 2;
      c.flags = HC_EPI_BIAS | HC_EPI_GELU_TANH;
      c.preact = true;
      runGemm(c, seed++);
      c.flags = HC_EPI_RESIDUAL;
      c.beta = 0.5f;
      runGemm(c, seed++);
    }
  }
  unsetenv("HC_GEMM_KSPLIT");
  expectRunToRunIdentical(0, 4100, 33, 70);
}

TEST(Gemm, SharedPanelAcrossThreads) {
  // The cluster's threads share each packed B panel and take row blocks
  // from a counter (HC_GEMM_SHARED_B=2 forces it wherever B is packed):
  // tiny blocks so there are many panels, k steps and row blocks, both
  // panel buffers reused, edges inside each; nonlinear epilogues need the
  // k blocks of every tile in order.
  setenv("HC_GEMM_SHARED_B", "2", 1);
  setenv("HC_GEMM_KSPLIT", "0", 1);
  setenv("HC_GEMM_MC", "24", 1);
  setenv("HC_GEMM_KC", "40", 1);
  setenv("HC_GEMM_NC", "288", 1);  // panels of several 8-sliver pack chunks
  uint32_t seed = 9000;
  for (int32_t isa : availableIsas()) {
    IsaScope s(isa);
    for (int ta = 0; ta < 2; ++ta)
      for (int tb = 0; tb < 2; ++tb) {
        GemmCase c{211, 701, 163, ta, tb};
        c.threads = 2;
        c.flags = HC_EPI_BIAS | HC_EPI_GELU_TANH;
        c.preact = (ta + tb) % 2 == 1;
        runGemm(c, seed++);
        c.flags = HC_EPI_GATE | HC_EPI_RESIDUAL;
        c.preact = false;
        c.gateRows = 50;
        c.beta = 0.5f;
        runGemm(c, seed++);
      }
  }
  expectRunToRunIdentical(1, 300, 200, 170);
  unsetenv("HC_GEMM_MC");
  unsetenv("HC_GEMM_KC");
  unsetenv("HC_GEMM_NC");
  unsetenv("HC_GEMM_KSPLIT");
  unsetenv("HC_GEMM_SHARED_B");
}

TEST(Gemm, InPlaceOperandsEqualPacked) {
  // The AVX-512 kernel reads A, B (row-major) or both in place
  // (HC_GEMM_DIRECT_A/B=2 force it; by default only where the rules in
  // runBlock say): same products in the same k order as the packed path,
  // so C must be bit-identical, including partial panels (M % 8), edge
  // tiles (N % 48), both layouts of A, lda > K, ldb > N, epilogues and k
  // blocks.
  skipUnless(HC_ISA_AVX512);
  IsaScope s(HC_ISA_AVX512);
  setenv("HC_GEMM_KC", "40", 1);
  for (int ta = 0; ta < 2; ++ta)
    for (int64_t M : {1, 7, 8, 9, 61, 200})
      for (int64_t N : {5, 20, 48, 100, 145}) {
        const int64_t K = 97, lda = (ta ? M : K) + 3, ldb = N + 1;
        std::vector<float> A = randomVec((ta ? K : M) * lda, 5);
        std::vector<float> B = randomVec(K * ldb, 6), bias = randomVec(N, 7);
        std::vector<float> C[4] = {nanVec(M * N), nanVec(M * N), nanVec(M * N), nanVec(M * N)};
        for (int direct = 0; direct < 4; ++direct) {  // bit 0: A in place, bit 1: B
          setenv("HC_GEMM_DIRECT_A", direct & 1 ? "2" : "0", 1);
          setenv("HC_GEMM_DIRECT_B", direct & 2 ? "2" : "0", 1);
          hc_epilogue epi{};
          epi.flags = HC_EPI_BIAS | HC_EPI_GELU_TANH;
          epi.bias = bias.data();
          hc_sgemm_args g{};
          g.M = M, g.N = N, g.K = K, g.batch = 1, g.trans_a = ta;
          g.alpha = 0.75f, g.A = A.data(), g.lda = lda, g.B = B.data();
          g.ldb = ldb, g.C = C[direct].data(), g.ldc = N;
          g.epi = N == 100 ? &epi : nullptr;
          hc_sgemm(&g, threads(M >= 61 ? 2 : 1));
        }
        for (int direct = 1; direct < 4; ++direct) {
          EXPECT_EQ(0, std::memcmp(C[0].data(), C[direct].data(), sizeof(float) * M * N))
              << "M=" << M << " N=" << N << " ta=" << ta << " direct=" << direct;
          for (float v : C[direct])
            ASSERT_FALSE(std::isnan(v)) << "M=" << M << " N=" << N << " ta=" << ta;
        }
      }
  unsetenv("HC_GEMM_DIRECT_A");
  unsetenv("HC_GEMM_DIRECT_B");
  unsetenv("HC_GEMM_KC");
}

TEST(Gemm, FewRowsLongKStreamB) {
  // Few rows and K spanning several k blocks (dW of narrow layers):
  // A's block stays in L2 and B is read in place, the panel the whole
  // column range (runBlock's streamB). Against float64 with epilogues and
  // beta over several k blocks, then bit-identical to the packed path
  // (HC_GEMM_DIRECT_B=0 turns streaming off; same k order).
  uint32_t seed = 9000;
  for (int32_t isa : availableIsas()) {
    IsaScope s(isa);
    for (int ta = 0; ta < 2; ++ta)
      for (int64_t M : {1, 9, 37, 130})
        for (int64_t N : {7, 48, 101, 1500, 1536}) {
          GemmCase c{M, N, 1031, ta, 0};
          c.threads = (M + N) % 2 ? 2 : 1;
          c.flags = N == 101 ? HC_EPI_BIAS | HC_EPI_GELU_TANH
                             : (N == 48 ? HC_EPI_RESIDUAL : 0);
          c.preact = N == 101;
          c.beta = N == 7 ? -0.5f : 0.0f;
          runGemm(c, seed++);
        }
  }
  // N = 1536: rows 6 KiB apart crowd a few cache sets, so each sliver is
  // packed just before its calls (BlockPlan::packSliver).
  for (int ta = 0; ta < 2; ++ta)
    for (int64_t N : {1500, 1536}) {
      const int64_t M = 37, K = 2000;
      std::vector<float> A = randomVec(M * K, 11), B = randomVec(K * N, 12);
      std::vector<float> C[2] = {nanVec(M * N), nanVec(M * N)};
      for (int packed = 0; packed < 2; ++packed) {
        if (packed)
          setenv("HC_GEMM_DIRECT_B", "0", 1);
        hc_sgemm_simple(ta, 0, M, N, K, 1.0f, A.data(), ta ? M : K, B.data(), N,
                        0.0f, C[packed].data(), N, threads(1));
        unsetenv("HC_GEMM_DIRECT_B");
      }
      EXPECT_EQ(0, std::memcmp(C[0].data(), C[1].data(), sizeof(float) * M * N))
          << "ta=" << ta << " N=" << N;
    }
}

namespace {
// hc_sgemm_row_sums: op(A)'s row sums per HC_SUM_CHUNK ks, each chunk's
// ks summed in order in double: compared bit for bit with that sum done
// here, and C bit for bit with the same call without the sums.
void expectRowSums(int64_t M, int64_t N, int64_t K, int ta, int64_t batch,
                   bool bf16, int nthreads, uint32_t seed) {
  const int64_t lda = (ta ? M : K) + 3, sa = (ta ? K : M) * lda + 5;
  std::vector<float> A = randomVec(batch * sa, seed), B = randomVec(batch * K * N, seed + 1);
  const int64_t chunks = (K + HC_SUM_CHUNK - 1) / HC_SUM_CHUNK;
  std::vector<double> sums(static_cast<size_t>(batch * chunks * M), 0.0), want(sums.size(), 0.0);
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t m = 0; m < M; ++m)
      for (int64_t c = 0; c < chunks; ++c) {
        double s = 0;
        for (int64_t k = c * HC_SUM_CHUNK; k < std::min(K, (c + 1) * HC_SUM_CHUNK); ++k)
          s += static_cast<double>(A[b * sa + (ta ? k * lda + m : m * lda + k)]);
        want[(b * chunks + c) * M + m] = s;
      }
  std::vector<float> C1 = nanVec(batch * M * N), C2 = nanVec(batch * M * N);
  for (int with = 0; with < 2; ++with) {
    hc_sgemm_args g{};
    g.M = M, g.N = N, g.K = K, g.batch = batch, g.trans_a = ta, g.alpha = 1.0f;
    g.A = A.data(), g.lda = lda, g.stride_a = sa;
    g.B = B.data(), g.ldb = N, g.stride_b = K * N;
    g.C = with ? C2.data() : C1.data(), g.ldc = N, g.stride_c = M * N;
    if (bf16 && with)
      hc_gemm_bf16_row_sums(&g, sums.data(), threads(nthreads));
    else if (bf16)
      hc_gemm_bf16(&g, threads(nthreads));
    else if (with)
      hc_sgemm_row_sums(&g, sums.data(), threads(nthreads));
    else
      hc_sgemm(&g, threads(nthreads));
  }
  const std::string at = "M=" + std::to_string(M) + " N=" + std::to_string(N) +
                         " K=" + std::to_string(K) + " ta=" + std::to_string(ta) +
                         " batch=" + std::to_string(batch) + (bf16 ? " bf16" : " fp32") +
                         " threads=" + std::to_string(nthreads) + " isa=" +
                         hcrt_isa_name(hcrt_isa());
  EXPECT_TRUE(C1.empty() || std::memcmp(C1.data(), C2.data(), sizeof(float) * C1.size()) == 0)
      << at;
  int64_t bad = 0;
  for (size_t i = 0; i < sums.size(); ++i)
    bad += std::memcmp(&sums[i], &want[i], sizeof(double)) != 0;
  EXPECT_EQ(bad, 0) << at << ": row sums differ from the in-order chunk sums";
}
} // namespace

TEST(Gemm, RowSumsOfA) {
  // Every way the driver walks a product: one thread (row blocks of 168
  // rows: a 40-row tail past the 64-column blocks of the sum), 2-D pieces,
  // the K split (sums apart after it), the shared panel with tiny blocks
  // (k blocks cutting chunks), batches; fp32 and bf16 kernels.
  struct S { int64_t M, N, K; };
  const S shapes[] = {{37, 41, 1031}, {168, 50, 700}, {5, 3, 2001}, {211, 97, 163}, {1, 30, 1}, {1, 300, 1001}, {7, 0, 600}};
  uint32_t seed = 11000;
  auto grid = [&](int nthreads) {
    for (int32_t isa : availableIsas()) {
      IsaScope s(isa);
      for (const S &sh : shapes)
        for (int ta = 0; ta < 2; ++ta)
          for (int bf16 = 0; bf16 < 2; ++bf16)
            expectRowSums(sh.M, sh.N, sh.K, ta, sh.M == 37 ? 2 : 1, bf16 != 0, nthreads,
                          seed++);
    }
  };
  grid(1);
  grid(2);
  setenv("HC_GEMM_KSPLIT", "1", 1);
  grid(2);
  setenv("HC_GEMM_KSPLIT", "0", 1);
  setenv("HC_GEMM_SHARED_B", "2", 1);
  setenv("HC_GEMM_MC", "24", 1);
  setenv("HC_GEMM_KC", "40", 1);
  setenv("HC_GEMM_NC", "96", 1);
  grid(2);
  grid(1);
  unsetenv("HC_GEMM_MC");
  unsetenv("HC_GEMM_KC");
  unsetenv("HC_GEMM_NC");
  unsetenv("HC_GEMM_SHARED_B");
  unsetenv("HC_GEMM_KSPLIT");
}

// A bias epilogue gives each row the same bits whether the row lands in a
// whole tile (the AVX2 and AVX-512 kernels add the bias as they store) or
// an edge tile (the tile buffer and the combine pass add it): CFTP's row
// cuts move tile edges and must not move the numbers. Rows [0, r) and
// [r, M) as two calls against the whole call, every ISA this CPU has,
// bias alone and bias + GELU, one k block and several.
TEST(Gemm, BiasSameBitsInWholeAndEdgeTiles) {
  const int32_t saved = hcrt_isa();
  for (int32_t isa : {HC_ISA_GENERIC, HC_ISA_AVX2, HC_ISA_AVX512}) {
    if (hcrt_set_isa(isa) != isa)
      continue;
    for (int64_t K : {53, 777})
      for (uint32_t flags : {uint32_t(HC_EPI_BIAS), uint32_t(HC_EPI_BIAS | HC_EPI_GELU_TANH)})
        for (int64_t r : {1, 7, 29}) {
          const int64_t M = 61, N = 37;
          std::vector<float> A = randomVec(M * K, 11), W = randomVec(N * K, 12),
                             bias = randomVec(N, 13);
          std::vector<float> whole = nanVec(M * N), parts = nanVec(M * N);
          auto call = [&](int64_t m0, int64_t m1, float *C) {
            hc_epilogue e{};
            e.flags = flags, e.bias = bias.data();
            hc_sgemm_args g{};
            g.M = m1 - m0, g.N = N, g.K = K, g.batch = 1, g.alpha = 1.0f, g.beta = 0.0f;
            g.A = A.data() + m0 * K, g.lda = K, g.B = W.data(), g.ldb = K, g.trans_b = 1;
            g.C = C + m0 * N, g.ldc = N, g.epi = &e;
            hc_sgemm(&g, threads(1));
          };
          call(0, M, whole.data());
          call(0, r, parts.data());
          call(r, M, parts.data());
          EXPECT_EQ(0, std::memcmp(whole.data(), parts.data(), sizeof(float) * M * N))
              << hcrt_isa_name(isa) << " K=" << K << " flags=" << flags << " rows cut at " << r;
        }
  }
  hcrt_set_isa(saved);
}
