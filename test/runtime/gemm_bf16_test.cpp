// bf16 GEMM tests: hc_gemm_bf16 on every path this CPU has (vdpbf16ps where
// AVX512-BF16 exists, and the AMX kernel on emulated tiles there, on real
// ones where AMX-BF16 exists; the emulation through each fp32 kernel
// everywhere) and hc_gemm_bf16_ref, against a
// float64 sum of the bf16-rounded operands (round to nearest even).
//
// The products of two bf16 values are exact in float32, so the only error
// left is float32 accumulation: the same gamma_K bound as the fp32 tests,
//   |C - C64| <= 2 (K + 4) u (S + |bias|) max(1, |gate|) + 8 u (|C64| + ...)
// with S = sum |bf16(a) bf16(b)|, u = 2^-24. An operand left unrounded
// would miss by ~2^-9 relative: far outside it.
#include "kernel_test_util.h"

#include <cstdlib>
#include <cstring>
#include <tuple>

using namespace hctest;

namespace {

double bf16(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  u += 0x7fffu + ((u >> 16) & 1u);
  u &= 0xffff0000u;
  float r;
  std::memcpy(&r, &u, 4);
  return r;
}

struct Case {
  int64_t M, N, K;
  int ta = 0, tb = 0;
  int64_t batch = 1;
  uint32_t flags = 0;  // HC_EPI_BIAS | HC_EPI_GELU_TANH | HC_EPI_GATE | HC_EPI_RESIDUAL
  float alpha = 1.0f, beta = 0.0f;
  int threads = 1;
  bool ref = false;
};

// One product on the current path; returns the bad elements.
int64_t run(const Case &c, uint32_t seed) {
  const int64_t M = c.M, N = c.N, K = c.K, B = c.batch;
  const int64_t aRows = c.ta ? K : M, aCols = c.ta ? M : K;
  const int64_t bRows = c.tb ? N : K, bCols = c.tb ? K : N;
  const int64_t lda = aCols + 3, ldb = bCols + 1, ldc = N + 2;
  const int64_t sa = aRows * lda + 5, sb = bRows * ldb + 3, sc = M * ldc + 7;
  std::vector<float> A = randomVec(std::max<int64_t>(1, B * sa), seed, -2, 2);
  std::vector<float> Bm = randomVec(std::max<int64_t>(1, B * sb), seed + 1);
  // Every element outside op(A) and op(B) (row padding, the gaps between
  // batch entries) is NaN: a kernel that reads past a row's end, even
  // into a product with a zero, turns its output NaN.
  auto padNaN = [&](std::vector<float> &v, int64_t rows, int64_t cols, int64_t ld, int64_t stride) {
    for (int64_t i = 0; i < static_cast<int64_t>(v.size()); ++i) {
      const int64_t r = i % stride;
      if (r >= rows * ld || r % ld >= cols)
        v[i] = std::numeric_limits<float>::quiet_NaN();
    }
  };
  padNaN(A, aRows, aCols, lda, sa);
  padNaN(Bm, bRows, bCols, ldb, sb);
  std::vector<float> Cold = randomVec(std::max<int64_t>(1, B * sc), seed + 2);
  std::vector<float> bias = randomVec(N + 1, seed + 3);
  std::vector<float> gate = randomVec(N + 1, seed + 4, -2, 2);
  std::vector<float> res = randomVec(M * N + 1, seed + 5);
  std::vector<float> pre = nanVec(std::max<int64_t>(1, B * M * N));
  std::vector<float> C = Cold;
  if (c.beta == 0.0f)
    for (int64_t i = 0; i < B * sc; ++i)
      C[i] = std::numeric_limits<float>::quiet_NaN();
  const std::vector<float> Cin = C;
  hc_epilogue e{};
  e.flags = c.flags;
  e.bias = bias.data();
  e.gate = gate.data();
  e.gate_rows = M;
  e.residual = res.data();
  e.ld_residual = N;
  e.preact = (c.flags & HC_EPI_GELU_TANH) ? pre.data() : nullptr;
  e.ld_preact = N;
  e.stride_preact = M * N;
  hc_sgemm_args g{};
  g.M = M, g.N = N, g.K = K, g.batch = B, g.trans_a = c.ta, g.trans_b = c.tb;
  g.alpha = c.alpha, g.beta = c.beta;
  g.A = A.data(), g.lda = lda, g.stride_a = sa;
  g.B = Bm.data(), g.ldb = ldb, g.stride_b = sb;
  g.C = C.data(), g.ldc = ldc, g.stride_c = sc;
  g.epi = c.flags ? &e : nullptr;
  if (c.ref)
    hc_gemm_bf16_ref(&g);
  else
    hc_gemm_bf16(&g, threads(c.threads));
  char what[200];
  snprintf(what, sizeof what,
           "M=%lld N=%lld K=%lld ta=%d tb=%d batch=%lld flags=%u beta=%g "
           "threads=%d ref=%d isa=%s path=%s",
           (long long)M, (long long)N, (long long)K, c.ta, c.tb, (long long)B,
           c.flags, c.beta, c.threads, c.ref, hcrt_isa_name(hcrt_isa()),
           hcrt_bf16_path_name(hcrt_bf16_path()));
  Checker chk{what};
  for (int64_t b = 0; b < B; ++b)
    for (int64_t m = 0; m < M; ++m)
      for (int64_t n = 0; n < N; ++n) {
        double acc = 0, S = 0;
        for (int64_t k = 0; k < K; ++k) {
          double a = bf16(c.ta ? A[b * sa + k * lda + m] : A[b * sa + m * lda + k]);
          double bb = bf16(c.tb ? Bm[b * sb + n * ldb + k] : Bm[b * sb + k * ldb + n]);
          acc += a * bb;
          S += std::fabs(a * bb);
        }
        double t = c.alpha * acc, bi = 0, gt = 1, rs = 0;
        S *= std::fabs(c.alpha);
        if (c.flags & HC_EPI_BIAS)
          bi = bias[n];
        t += bi;
        const double preT = t;
        if (c.flags & HC_EPI_GELU_TANH)
          t = geluD(t);
        if (c.flags & HC_EPI_GATE)
          gt = gate[n];
        t *= gt;
        if (c.flags & HC_EPI_RESIDUAL)
          rs = res[m * N + n];
        t += rs;
        const int64_t ci = b * sc + m * ldc + n;
        const double bc = c.beta != 0.0f ? c.beta * (double)Cin[ci] : 0.0;
        t += bc;
        double tol = 2.0 * (K + 4) * kU * (S + std::fabs(bi)) * std::max(1.0, std::fabs(gt)) +
                     8 * kU * (std::fabs(t) + std::fabs(rs) + std::fabs(bc));
        if (c.flags & HC_EPI_GELU_TANH)
          tol = 1.2 * tol + 2e-6 * (1 + std::fabs(preT)) * std::max(1.0, std::fabs(gt));
        chk.check(C[ci], t, tol, ci);
        if (e.preact)
          chk.check(pre[b * M * N + m * N + n], preT,
                    2.0 * (K + 4) * kU * (S + std::fabs(bi)) + 4 * kU * std::fabs(preT), -ci);
      }
  for (size_t i = 0; i < C.size(); ++i) {
    const int64_t b = i / sc, r = i % sc, m = r / ldc, n = r % ldc;
    if (!(b < B && m < M && n < N) && std::memcmp(&C[i], &Cin[i], 4)) {
      ADD_FAILURE() << what << ": wrote outside C at " << i;
      return chk.bad + 1;
    }
  }
  return chk.bad;
}

// Each path of hc_gemm_bf16 this CPU has: {isa, HC_BF16_* path}.
struct Path {
  int32_t isa;
  int32_t path;
};
std::vector<Path> paths() {
  std::vector<Path> v;
  for (int32_t isa : availableIsas()) {
    IsaScope s(isa);
    for (int32_t p : bf16PathsHere())
      v.push_back({isa, p});
  }
  return v;
}

struct PathScope {
  IsaScope isa;
  explicit PathScope(const Path &p) : isa(p.isa) { useBf16Path(p.path); }
  ~PathScope() {
    hcrt_set_bf16_amx(-1);
    hcrt_set_bf16_native(1);
  }
};

void shapes(const Path &p) {
  PathScope scope(p);
  uint32_t seed = 1;
  int64_t bad = 0;
  forEachGemmShape({1, 5, 8, 13, 29, 97}, {1, 3, 16, 17, 47, 49, 101},
                   {1, 2, 7, 16, 31, 33, 131},
                   [&](int ta, int tb, int64_t M, int64_t N, int64_t K) {
                     Case c{M, N, K, ta, tb};
                     c.threads = (M + N + K) % 2 ? 2 : 1;
                     return (bad += run(c, seed++)) <= 20;
                   });
}

} // namespace

TEST(GemmBf16, NativePathWhereCpuHasIt) {
  // Says which paths this machine runs; vdpbf16ps only with AVX512-BF16,
  // AMX's kernel on emulated tiles there too, on hardware tiles with AMX.
  std::string names;
  for (const Path &p : paths())
    names += std::string(hcrt_isa_name(p.isa)) + "+" + hcrt_bf16_path_name(p.path) + " ";
  std::printf("bf16 GEMM paths on this CPU: %s\n", names.c_str());
  bool amx = false, dp = false;
  for (const Path &p : paths()) {
    amx |= p.path == HC_BF16_AMX;
    dp |= p.path == HC_BF16_VDPBF16PS;
  }
  if (!dp)
    std::printf("no AVX512-BF16 (or not the AVX-512 path): vdpbf16ps and the AMX "
                "kernel untested here, only the emulation\n");
  if (!amx)
    std::printf("no AMX-BF16: the AMX kernel tested on emulated tiles only\n");
  SUCCEED();
}

TEST(GemmBf16, NativeOnlyWhereFasterThanTheFmas) {
  // Undecided, without HC_BF16_NATIVE: vdpbf16ps only where one thread's
  // bf16 dot products outrun its fp32 FMAs (2x on Zen 4/5, 0.5x on the
  // Xeon of bench/results-device-anchors-spr16.txt).
  const char *env = std::getenv("HC_BF16_NATIVE");
  const std::string saved = env ? env : "";
  unsetenv("HC_BF16_NATIVE");
  IsaScope s(HC_ISA_AVX512);
  hcrt_set_bf16_amx(0);  // the choice below is made off AMX
  const double ratio = hcrt_bf16_over_fma();
  const int32_t chosen = hcrt_set_bf16_native(-1);
  std::printf("bf16 dot / FMA rate on one thread: %.2f; vdpbf16ps chosen: %d\n", ratio, chosen);
  if (hcrt_isa() != HC_ISA_AVX512 || ratio == 0)
    EXPECT_EQ(chosen, 0);
  else if (ratio > 1.2 || ratio < 0.8)  // clearly one side (a noisy ratio near 1 may go either way)
    EXPECT_EQ(chosen, ratio > 1.0 ? 1 : 0);
  EXPECT_EQ(hcrt_set_bf16_native(0), 0);
  if (env)
    setenv("HC_BF16_NATIVE", saved.c_str(), 1);
  hcrt_set_bf16_native(1);
  hcrt_set_bf16_amx(-1);
}

TEST(GemmBf16, AmxTilesAgainstTheirEmulation) {
  // Where the CPU has AMX: the same products on hardware and emulated
  // tiles (same packing and loop order) give the same bits. Magnitudes
  // spread over 2^-20..2^20 so that the order of sums shows, and some
  // values whose bf16 is denormal or whose products underflow (the
  // hardware flushes both); C's old values (beta 1) and the bias tiles.
  IsaScope s(HC_ISA_AVX512);
  if (!useBf16Path(HC_BF16_AMX) || !useBf16Path(HC_BF16_AMX_EMULATED)) {
    hcrt_set_bf16_amx(-1);
    std::printf("no AMX-BF16 here: nothing to compare\n");
    return;
  }
  const int64_t M = 97, N = 101, K = 131;
  auto spread = [](std::vector<float> v, uint32_t seed) {
    std::mt19937 g(seed);
    std::uniform_int_distribution<int> e(-20, 20), pick(0, 49);
    for (float &x : v) {
      const int p = pick(g);
      x = p == 0 ? 3e-39f * x : p == 1 ? 1e-22f * x : std::ldexp(x, e(g));
    }
    return v;
  };
  const std::vector<float> A = spread(randomVec(M * K, 5, -2, 2), 1);
  const std::vector<float> B = spread(randomVec(K * N, 6, -2, 2), 2);
  const std::vector<float> C0 = spread(randomVec(M * N, 7, -2, 2), 3);
  const std::vector<float> bias = spread(randomVec(N, 8, -2, 2), 4);
  for (int variant = 0; variant < 3; ++variant) {  // beta 0; beta 1; bias epilogue
    std::vector<float> hw = C0, emu = C0;
    hc_epilogue epi{};
    epi.flags = HC_EPI_BIAS;
    epi.bias = bias.data();
    for (int32_t path : {HC_BF16_AMX, HC_BF16_AMX_EMULATED}) {
      useBf16Path(path);
      hc_sgemm_args g{};
      g.M = M, g.N = N, g.K = K, g.batch = 1, g.alpha = 1, g.beta = variant == 1 ? 1.0f : 0.0f;
      g.A = A.data(), g.lda = K, g.B = B.data(), g.ldb = N;
      g.C = (path == HC_BF16_AMX ? hw : emu).data(), g.ldc = N;
      g.epi = variant == 2 ? &epi : nullptr;
      hc_gemm_bf16(&g, threads(1));
    }
    int64_t differ = 0;
    for (int64_t i = 0; i < M * N; ++i)
      differ += std::memcmp(&hw[i], &emu[i], 4) != 0;
    std::printf("AMX tiles against their emulation, %s: %lld of %lld results differ in bits\n",
                variant == 0 ? "beta 0" : variant == 1 ? "beta 1" : "bias",
                (long long)differ, (long long)(M * N));
    EXPECT_EQ(differ, 0) << "variant " << variant;
  }
  hcrt_set_bf16_amx(-1);
}

TEST(GemmBf16, AmxEmulationKeepsTheMeasuredArithmetic) {
  // The emulated tiles hold TDPBF16PS's arithmetic as measured on the lent
  // Xeon (bench/results-device-amx-spr16.txt, 2026-11-30): low and high
  // pair halves summed apart, then added, then added to C; denormal inputs
  // read as zero, denormal products and results flushed. Each case is
  // element (0, 0) of a whole 32 x 32 tile (beta 1: C's old value in the
  // accumulator), K = 4 (two pairs), everything else zero.
  IsaScope s(HC_ISA_AVX512);
  if (!useBf16Path(HC_BF16_AMX_EMULATED)) {
    hcrt_set_bf16_amx(-1);
    std::printf("no AVX512-BF16 here: the AMX emulation does not run\n");
    return;
  }
  struct Case {
    const char *what;
    float a[4], b[4], c, want;
  };
  const float big = std::ldexp(1.0f, 12), tiny = std::ldexp(1.0f, -70);
  const Case cases[] = {
      // lo = 2^24 + 1 -> 2^24, hi = 1 - 2^24 exact: 1 (the SDM's order
      // gives 0, the exact sum 2)
      {"order", {big, 1, 1, -big}, {big, 1, 1, big}, 0.0f, 1.0f},
      {"denormal input", {std::ldexp(1.0f, -127), 0, 0, 0}, {std::ldexp(1.0f, 100), 0, 0, 0},
       0.0f, 0.0f},
      {"denormal product", {tiny, 0, 0, 0}, {tiny, 0, 0, 0}, 0.0f, 0.0f},
      {"normal C plus a flushed product", {tiny, 0, 0, 0}, {tiny, 0, 0, 0},
       std::ldexp(1.0f, -126), std::ldexp(1.0f, -126)},
      {"denormal C", {0, 0, 0, 0}, {0, 0, 0, 0}, std::ldexp(1.0f, -140), 0.0f},
      {"-0 plus nothing", {0, 0, 0, 0}, {0, 0, 0, 0}, -0.0f, 0.0f},
  };
  const int64_t M = 32, N = 32, K = 4;
  for (const Case &c : cases) {
    std::vector<float> A(M * K, 0.0f), B(K * N, 0.0f), C(M * N, 0.0f);
    for (int k = 0; k < K; ++k)
      A[k] = c.a[k], B[k * N] = c.b[k];
    C[0] = c.c;
    hc_sgemm_args g{};
    g.M = M, g.N = N, g.K = K, g.batch = 1, g.alpha = 1, g.beta = 1;
    g.A = A.data(), g.lda = K, g.B = B.data(), g.ldb = N, g.C = C.data(), g.ldc = N;
    hc_gemm_bf16(&g, threads(1));
    uint32_t got, want;
    std::memcpy(&got, &C[0], 4);
    std::memcpy(&want, &c.want, 4);
    EXPECT_EQ(got, want) << c.what << ": " << C[0] << ", hardware " << c.want;
  }
  hcrt_set_bf16_amx(-1);
}

TEST(GemmBf16, ReferenceShapes) {
  Case c{29, 33, 47, 1, 0};
  c.ref = true;
  c.batch = 2;
  c.flags = HC_EPI_BIAS | HC_EPI_GATE;
  run(c, 3);
  Case d{5, 101, 131, 0, 1};
  d.ref = true;
  d.beta = 0.5f;
  run(d, 4);
}

TEST(GemmBf16, ShapesEveryPath) {
  for (const Path &p : paths())
    shapes(p);
}

TEST(GemmBf16, EpiloguesEveryPath) {
  for (const Path &p : paths()) {
    PathScope scope(p);
    uint32_t seed = 50;
    for (uint32_t flags : {0u, 1u, 3u, 5u, 9u, 13u, 15u})
      for (float beta : {0.0f, -0.5f})
        for (int64_t K : {45, 777}) {  // 777: several k blocks
          Case c{37, 53, K, (int)(flags & 1), (int)((flags >> 2) & 1)};
          c.flags = flags;
          c.beta = beta;
          c.batch = flags % 2 ? 2 : 1;
          c.threads = 1 + (seed % 2);
          c.alpha = flags == 5 ? 0.75f : 1.0f;
          run(c, seed++);
        }
  }
}

TEST(GemmBf16, LargeAndSmallBlocking) {
  // DiT-like shapes with their forms (fwd NT, dX NN, dW TN), 2 threads,
  // and blocking small enough to cross every MC/KC/NC edge.
  for (const Path &p : paths()) {
    PathScope scope(p);
    Case f{300, 200, 389, 0, 1};
    f.threads = 2;
    f.flags = HC_EPI_BIAS;
    run(f, 7);
    Case x{300, 197, 200, 0, 0};
    x.threads = 2;
    run(x, 8);
    Case w{96, 100, 1100, 1, 0};
    w.threads = 2;
    run(w, 9);
    setenv("HC_GEMM_KC", "24", 1);
    setenv("HC_GEMM_MC", "16", 1);
    setenv("HC_GEMM_NC", "96", 1);
    Case s{61, 150, 77, 0, 1};
    s.flags = HC_EPI_BIAS | HC_EPI_GELU_TANH;
    run(s, 10);
    Case t{61, 150, 77, 1, 0};
    t.beta = 1.0f;
    t.threads = 2;
    run(t, 11);
    unsetenv("HC_GEMM_KC");
    unsetenv("HC_GEMM_MC");
    unsetenv("HC_GEMM_NC");
  }
}

TEST(GemmBf16, OperandsConvertedInPlace) {
  // The native kernel converts A inside the kernel (row-major and
  // transposed), each panel once into the packed buffer for the other
  // slivers, and a row-major B's whole slivers (tb = 0) the same way:
  // forced on (HC_GEMM_DIRECT_A=2) over odd sizes (rows past the last
  // whole panel, edge slivers, odd k blocks with a last chunk under 16,
  // the kernel's bias and beta), then by the default rule on an A bigger
  // than L2. Other paths pack as before.
  for (const Path &p : paths()) {
    PathScope scope(p);
    uint32_t seed = 70;
    setenv("HC_GEMM_DIRECT_A", "2", 1);
    for (int ta : {0, 1})
      for (int64_t M : {8, 37, 61})
        for (int64_t N : {17, 48, 101})
          for (int64_t K : {1, 45, 777}) {
            Case c{M, N, K, ta, (int)(seed % 2)};
            c.flags = seed % 3 == 0 ? HC_EPI_BIAS : 0;
            c.beta = seed % 4 == 1 ? -0.5f : 0.0f;
            c.threads = 1 + (seed % 2);
            run(c, seed++);
          }
    setenv("HC_GEMM_KC", "26", 1);  // k blocks of 13 pairs: a chunk and a tail
    setenv("HC_GEMM_MC", "24", 1);
    for (int ta : {0, 1}) {
      Case c{53, 150, 101, ta, 0};
      c.beta = 1.0f;
      run(c, seed++);
    }
    unsetenv("HC_GEMM_KC");
    unsetenv("HC_GEMM_MC");
    unsetenv("HC_GEMM_DIRECT_A");
    for (int ta : {0, 1}) {
      Case c{523, 99, 611, ta, 0};
      c.threads = 2;
      run(c, seed++);
    }
  }
}

TEST(GemmBf16, DiffersFromFp32ByRounding) {
  // The rounding is really applied: a value with low mantissa bits set
  // (1 + 2^-12) times 1 gives exactly 1 in bf16, not 1 + 2^-12.
  for (const Path &p : paths()) {
    PathScope scope(p);
    const float a = 1.0f + 1.0f / 4096, b = 1.0f;
    float c = 0;
    hc_sgemm_args g{};
    g.M = g.N = g.K = 1, g.batch = 1, g.alpha = 1, g.beta = 0;
    g.A = &a, g.lda = 1, g.B = &b, g.ldb = 1, g.C = &c, g.ldc = 1;
    hc_gemm_bf16(&g, threads(1));
    EXPECT_EQ(c, 1.0f) << hcrt_isa_name(p.isa) << " " << hcrt_bf16_path_name(p.path);
  }
}

// bf16 storage (hc_sgemm_args::a_bf16 / b_bf16): an operand held as bf16
// gives the same bits as the float32 operand holding the same values (the
// kernels round to bf16 as they pack; a bf16 value rounds to itself), on
// every path, both forms of each operand, odd sizes, batches, the K split
// and the bias epilogue (AMX starts its tiles from it); the padding and
// gaps around the bf16 elements are NaN (0x7fc0): a read past a row's end
// shows. And hc_gemm_bf16_ref reads them too.
namespace {

struct Stored {
  std::vector<float> f;      // bf16 values as float32 (NaN outside)
  std::vector<uint16_t> h;  // the same as bf16
};

Stored stored(int64_t rows, int64_t cols, int64_t ld, int64_t stride, int64_t batch,
              uint32_t seed) {
  Stored s;
  s.f = randomVec(std::max<int64_t>(1, batch * stride), seed, -2, 2);
  s.h.resize(s.f.size());
  for (size_t i = 0; i < s.f.size(); ++i) {
    const int64_t r = static_cast<int64_t>(i) % stride;
    if (r >= rows * ld || r % ld >= cols)
      s.f[i] = std::numeric_limits<float>::quiet_NaN();
    else
      s.f[i] = static_cast<float>(bf16(s.f[i]));
    uint32_t u;
    std::memcpy(&u, &s.f[i], 4);
    s.h[i] = static_cast<uint16_t>(u >> 16);
  }
  return s;
}

// Returns false (after a failure) where the bits differ.
bool sameBitsStored(int64_t M, int64_t N, int64_t K, int ta, int tb, int64_t batch,
                    bool aBf16, bool bBf16, bool bias, int nthreads, uint32_t seed,
                    bool ref = false) {
  const int64_t aRows = ta ? K : M, aCols = ta ? M : K;
  const int64_t bRows = tb ? N : K, bCols = tb ? K : N;
  const int64_t lda = aCols + 3, ldb = bCols + 1, ldc = N + 2;
  const int64_t sa = aRows * lda + 5, sb = bRows * ldb + 3, sc = M * ldc + 7;
  const Stored A = stored(aRows, aCols, lda, sa, batch, seed);
  const Stored B = stored(bRows, bCols, ldb, sb, batch, seed + 1);
  std::vector<float> b = randomVec(N + 1, seed + 2);
  hc_epilogue e{};
  e.flags = HC_EPI_BIAS;
  e.bias = b.data();
  hc_sgemm_args g{};
  g.M = M, g.N = N, g.K = K, g.batch = batch, g.trans_a = ta, g.trans_b = tb;
  g.alpha = 1.0f, g.beta = 0.0f;
  g.lda = lda, g.stride_a = sa, g.ldb = ldb, g.stride_b = sb, g.ldc = ldc, g.stride_c = sc;
  g.epi = bias ? &e : nullptr;
  std::vector<float> want(std::max<int64_t>(1, batch * sc), 0.0f), got = want;
  g.A = A.f.data(), g.B = B.f.data(), g.C = want.data();
  ref ? hc_gemm_bf16_ref(&g) : hc_gemm_bf16(&g, threads(nthreads));
  g.a_bf16 = aBf16, g.b_bf16 = bBf16;
  g.A = aBf16 ? reinterpret_cast<const float *>(A.h.data()) : A.f.data();
  g.B = bBf16 ? reinterpret_cast<const float *>(B.h.data()) : B.f.data();
  g.C = got.data();
  ref ? hc_gemm_bf16_ref(&g) : hc_gemm_bf16(&g, threads(nthreads));
  if (std::memcmp(want.data(), got.data(), want.size() * 4) == 0)
    return true;
  ADD_FAILURE() << "M=" << M << " N=" << N << " K=" << K << " ta=" << ta << " tb=" << tb
                << " batch=" << batch << " a_bf16=" << aBf16 << " b_bf16=" << bBf16
                << " bias=" << bias << " threads=" << nthreads << " ref=" << ref
                << " path=" << hcrt_bf16_path_name(hcrt_bf16_path())
                << ": bits differ from the float32 operands";
  return false;
}

} // namespace

TEST(GemmBf16, StoredOperandsSameBitsEveryPath) {
  for (const Path &p : paths()) {
    PathScope scope(p);
    uint32_t seed = 200;
    int bad = 0;
    for (int ab : {1, 2, 3})
      for (int ta : {0, 1})
        for (int tb : {0, 1})
          for (auto [M, N, K] : {std::tuple<int64_t, int64_t, int64_t>{1, 1, 1},
                                 {5, 17, 7}, {13, 49, 33}, {97, 101, 131}, {37, 150, 777}}) {
            const bool aB = ab & 1, bB = ab & 2;
            bad += !sameBitsStored(M, N, K, ta, tb, 1 + (seed % 2), aB, bB, seed % 3 == 0,
                                   1 + (seed % 2), seed);
            ++seed;
            if (bad > 5)
              return;
          }
    // DiT's forms at sizes that take the 2-thread grid, the K split (few
    // rows and columns, a long K: the weight gradients) and many k blocks.
    sameBitsStored(300, 200, 389, 0, 1, 1, true, false, true, 2, 300);  // fwd: x bf16
    sameBitsStored(96, 100, 1100, 1, 0, 1, false, true, false, 2, 301);  // dW: x bf16
    sameBitsStored(48, 64, 4096, 1, 0, 1, false, true, false, 2, 302);
    sameBitsStored(523, 99, 611, 0, 1, 1, true, false, false, 2, 303);
  }
}

// A row-major bf16 A read in place (the AVX512-BF16 kernel converts its
// panels while the first sliver's products run, GemmKernel::
// directRowsABf16): forced on (HC_GEMM_DIRECT_A=2) over odd sizes (rows
// past the last whole panel, edge slivers, a last chunk of under 16 k, k
// blocks of 13 pairs), with bias, batches and 2 threads, the same bits as
// the float32 A holding the same values (read in place the same way), and
// so as the packed path; a transposed bf16 A stays packed.
TEST(GemmBf16, StoredARowsReadInPlace) {
  for (const Path &p : paths()) {
    PathScope scope(p);
    uint32_t seed = 500;
    int bad = 0;
    setenv("HC_GEMM_DIRECT_A", "2", 1);
    for (int ta : {0, 1})
      for (auto [M, N, K] : {std::tuple<int64_t, int64_t, int64_t>{1, 1, 1}, {8, 48, 16},
                             {13, 49, 33}, {37, 150, 777}, {61, 101, 45}})
        for (bool bB : {false, true}) {
          bad += !sameBitsStored(M, N, K, ta, 1, 1 + (seed % 2), true, bB, seed % 3 == 0,
                                 1 + (seed % 2), seed);
          ++seed;
        }
    setenv("HC_GEMM_KC", "26", 1);
    setenv("HC_GEMM_MC", "24", 1);
    bad += !sameBitsStored(53, 150, 101, 0, 1, 1, true, false, true, 1, seed++);
    bad += !sameBitsStored(53, 150, 101, 0, 0, 1, true, false, false, 2, seed++);
    unsetenv("HC_GEMM_KC");
    unsetenv("HC_GEMM_MC");
    unsetenv("HC_GEMM_DIRECT_A");
    // the default rule: an A bigger than L2 here
    bad += !sameBitsStored(1024, 200, 1100, 0, 1, 1, true, false, true, 2, seed++);
    EXPECT_EQ(bad, 0) << hcrt_isa_name(p.isa) << " " << hcrt_bf16_path_name(p.path);
  }
}

TEST(GemmBf16, StoredOperandsReference) {
  sameBitsStored(29, 33, 47, 1, 0, 2, true, true, true, 1, 400, true);
  sameBitsStored(5, 101, 131, 0, 1, 1, true, false, false, 1, 401, true);
}

// A bf16 C (hc_sgemm_args::c_bf16: hc-bf16-storage's qkv, which only
// attention reads): every element is the float32 C of the same call
// rounded to nearest even, bit for bit, on every path and through both
// entry points (hc_gemm_bf16, hc_sgemm) and their references: one k block
// (stored by the AVX512-BF16 kernel as it rounds, elsewhere by the
// combine; a K past the default k block runs as one), several (HC_GEMM_KC
// set: a float32 temporary, rounded after), every epilogue, both forms of
// each operand, odd sizes, batches and 2 threads; nothing written outside
// C.
namespace {

uint16_t roundedBits(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

bool sameBitsBf16C(int64_t M, int64_t N, int64_t K, int ta, int tb, int64_t batch,
                   uint32_t flags, int nthreads, uint32_t seed, bool fp32Gemm, bool ref,
                   int64_t gateRows = 0) {
  const int64_t aRows = ta ? K : M, aCols = ta ? M : K;
  const int64_t bRows = tb ? N : K, bCols = tb ? K : N;
  const int64_t lda = aCols + 3, ldb = bCols + 1, ldc = N + 2;
  const int64_t sa = aRows * lda + 5, sb = bRows * ldb + 3, sc = M * ldc + 7;
  const std::vector<float> A = randomVec(std::max<int64_t>(1, batch * sa), seed, -2, 2);
  const std::vector<float> B = randomVec(std::max<int64_t>(1, batch * sb), seed + 1);
  std::vector<float> bias = randomVec(N + 1, seed + 2), gate = randomVec(N + 1, seed + 3, -2, 2);
  std::vector<float> res = randomVec(M * N + 1, seed + 4);
  std::vector<float> pre(std::max<int64_t>(1, batch * M * N));
  hc_epilogue e{};
  e.flags = flags;
  e.bias = bias.data();
  std::vector<float> gates = randomVec((N + 1) * (M + 1), seed + 3, -2, 2);
  e.gate = gateRows ? gates.data() : gate.data(), e.gate_rows = gateRows ? gateRows : M;
  e.ld_gate = N;
  e.residual = res.data(), e.ld_residual = N;
  e.preact = (flags & HC_EPI_GELU_TANH) ? pre.data() : nullptr;
  e.ld_preact = N, e.stride_preact = M * N;
  hc_sgemm_args g{};
  g.M = M, g.N = N, g.K = K, g.batch = batch, g.trans_a = ta, g.trans_b = tb;
  g.alpha = 1.0f, g.beta = 0.0f;
  g.A = A.data(), g.lda = lda, g.stride_a = sa;
  g.B = B.data(), g.ldb = ldb, g.stride_b = sb;
  g.ldc = ldc, g.stride_c = sc;
  g.epi = flags ? &e : nullptr;
  auto call = [&] {
    if (ref)
      fp32Gemm ? hc_sgemm_ref(&g) : hc_gemm_bf16_ref(&g);
    else
      fp32Gemm ? hc_sgemm(&g, threads(nthreads)) : hc_gemm_bf16(&g, threads(nthreads));
  };
  std::vector<float> want(std::max<int64_t>(1, batch * sc), 0.0f);
  g.C = want.data();
  call();
  const uint16_t kUntouched = 0x7fc1;
  std::vector<uint16_t> got(want.size(), kUntouched);
  g.C = reinterpret_cast<float *>(got.data());
  g.c_bf16 = 1;
  call();
  for (size_t i = 0; i < got.size(); ++i) {
    const int64_t b = i / sc, r = i % sc, m = r / ldc, n = r % ldc;
    const bool inC = b < batch && m < M && n < N;
    const uint16_t expect = inC ? roundedBits(want[i]) : kUntouched;
    if (got[i] != expect) {
      ADD_FAILURE() << "M=" << M << " N=" << N << " K=" << K << " ta=" << ta << " tb=" << tb
                    << " batch=" << batch << " flags=" << flags << " threads=" << nthreads
                    << " fp32 GEMM=" << fp32Gemm << " ref=" << ref
                    << " path=" << hcrt_bf16_path_name(hcrt_bf16_path()) << ": element " << i
                    << (inC ? " is not the float32 C rounded" : " outside C was written")
                    << " (" << got[i] << " against " << expect << ")";
      return false;
    }
  }
  return true;
}

} // namespace

TEST(GemmBf16, StoredCSameBitsEveryPath) {
  for (const Path &p : paths()) {
    PathScope scope(p);
    uint32_t seed = 700;
    int bad = 0;
    for (uint32_t flags : {0u, 1u, 3u, 5u, 12u})
      for (int64_t K : {45, 777})
        for (auto [M, N] : {std::pair<int64_t, int64_t>{1, 1}, {13, 49}, {37, 150}}) {
          const int ta = seed % 2, tb = (seed / 2) % 2;
          bad += !sameBitsBf16C(M, N, K, ta, tb, 1 + (seed % 3 == 0), flags, 1 + (seed % 2), seed,
                                false, false);
          ++seed;
        }
    // qkv's form at a size that takes the 2-thread grid
    bad += !sameBitsBf16C(300, 1152, 384, 0, 1, 1, 1u, 2, seed++, false, false);
    // k blocks of 64: through the temporary
    setenv("HC_GEMM_KC", "64", 1);
    for (uint32_t flags : {0u, 1u, 3u, 12u})
      bad += !sameBitsBf16C(37, 150, 301, seed % 2, 1, 1 + (seed % 2), flags, 1 + (seed % 2), seed,
                            false, false), ++seed;
    // more rows than one chunk of the temporary (8 MiB): the second chunk's
    // pre-activation, residual and gate rows; on every path, since the
    // chunks' edge tiles must be the call's (AMX's whole tiles start their
    // sums from C: chunks of 1906 rows put an edge on row 1904, 1 ulp off)
    bad += !sameBitsBf16C(2100, 1100, 301, 0, 1, 1, 3u, 2, seed++, false, false);
    bad += !sameBitsBf16C(2100, 1100, 301, 0, 1, 1, 12u, 2, seed++, false, false, 100);
    unsetenv("HC_GEMM_KC");
    EXPECT_EQ(bad, 0) << hcrt_isa_name(p.isa) << " " << hcrt_bf16_path_name(p.path);
  }
}

TEST(GemmBf16, StoredCFp32GemmAndReferences) {
  for (int32_t isa : availableIsas()) {
    IsaScope s(isa);
    uint32_t seed = 800;
    for (uint32_t flags : {0u, 1u, 3u, 12u})
      for (int64_t K : {45, 777})
        EXPECT_TRUE(sameBitsBf16C(37, 101, K, 0, 1, 2, flags, 2, seed++, true, false))
            << hcrt_isa_name(isa);
    setenv("HC_GEMM_KC", "64", 1);
    EXPECT_TRUE(sameBitsBf16C(37, 101, 301, 0, 1, 2, 3u, 2, seed++, true, false))
        << hcrt_isa_name(isa);
    unsetenv("HC_GEMM_KC");
  }
  EXPECT_TRUE(sameBitsBf16C(29, 33, 47, 1, 0, 2, 1u, 1, 900, true, true));
  EXPECT_TRUE(sameBitsBf16C(29, 33, 47, 0, 1, 2, 3u, 1, 901, false, true));
}
