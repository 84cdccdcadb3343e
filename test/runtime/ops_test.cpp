// Fused-kernel tests against float64 references, on every ISA path this CPU
// has and at 1 and 2 threads. Outputs are NaN-poisoned first; checks fail on
// NaN. The error bound of each kernel is stated above its test (u = 2^-24).
#include "kernel_test_util.h"

#include <algorithm>
#include <cstring>

using namespace hctest;

namespace {

double siluD(double x) { return x / (1.0 + std::exp(-x)); }
double siluGradD(double x) {
  double s = 1.0 / (1.0 + std::exp(-x));
  return s * (1 + x * (1 - s));
}

const int64_t kSizes[] = {0, 1, 7, 15, 16, 17, 31, 1023, 100003};

// Inputs over [-10, 10] plus the exact points where approximations switch.
std::vector<float> activationInput(int64_t n, uint32_t seed) {
  std::vector<float> x = randomVec(n, seed, -10.0f, 10.0f);
  const float special[] = {0.0f, -0.0f, 1e-7f, -1e-7f, 3.0f, -3.0f, 9.0f, 30.0f, -30.0f, 88.0f, -90.0f,
                           1e30f};
  for (size_t i = 0; i < sizeof special / sizeof *special && (int64_t)i < n; ++i)
    x[i] = special[i];
  return x;
}

template <class Fwd, class Ref>
void elementwise(const char *name, Fwd fwd, Ref ref, double atol, double rtol) {
  for (int32_t isa : availableIsas()) {
    IsaScope s(isa);
    for (int th : {1, 2})
      for (int64_t n : kSizes) {
        std::vector<float> x = activationInput(n, n + 7);
        std::vector<float> y = nanVec(n + 1);
        y[n] = 777.0f;
        fwd(n, x, y, th);
        Checker c{std::string(name) + " isa=" + hcrt_isa_name(isa) + " n=" + std::to_string(n)};
        for (int64_t i = 0; i < n; ++i)
          c.close(y[i], ref(x[i], i), atol, rtol, i);
        EXPECT_EQ(y[n], 777.0f) << name << ": wrote past the end";
      }
  }
}

} // namespace

// GELU-tanh forward: |y - gelu(x)| <= 5e-7 + 4u |gelu(x)|  (fast tanh).
TEST(Ops, GeluForward) {
  elementwise("gelu_fwd",
              [](int64_t n, std::vector<float> &x, std::vector<float> &y, int th) {
                hc_gelu_tanh_fwd(n, x.data(), y.data(), threads(th));
              },
              [](double x, int64_t) { return geluD(x); }, 5e-7, 4 * kU);
}

// GELU-tanh backward: |dx - dy gelu'(x)| <= 1e-6 |dy| + 8u |dx|.
TEST(Ops, GeluBackward) {
  std::vector<float> dy = randomVec(100003, 99);
  elementwise("gelu_bwd",
              [&](int64_t n, std::vector<float> &x, std::vector<float> &y, int th) {
                hc_gelu_tanh_bwd(n, x.data(), dy.data(), y.data(), threads(th));
              },
              [&](double x, int64_t i) { return dy[i] * geluGradD(x); }, 1e-6, 8 * kU);
}

// The fast tanh's worst case, measured over a dense sweep of [-12, 12].
// Measured here: max |gelu_fast - gelu_exact| and stated bound 5e-7 absolute
// (plus 4u relative) for the forward.
TEST(Ops, GeluInfinity) {
  // gelu(+inf) = +inf like torch (the x - x (1 - s) form must not give NaN).
  for (int32_t isa : availableIsas()) {
    IsaScope s(isa);
    std::vector<float> x(33, std::numeric_limits<float>::infinity()), y = nanVec(33);
    hc_gelu_tanh_fwd(33, x.data(), y.data(), threads(1));
    for (float v : y)
      EXPECT_EQ(v, std::numeric_limits<float>::infinity()) << hcrt_isa_name(isa);
  }
}

// Far below zero both directions are 0 (torch: gelu(-1e38) = -0, its grad
// NaN from x^3 overflowing; gelu(-inf) NaN like torch), and no intermediate
// is denormal (a microcode assist per vector on Intel: 11x slower).
TEST(Ops, GeluFarNegative) {
  const float xs[] = {-10.5f, -20.0f, -100.0f, -1e10f, -1e30f, -3e38f};
  const int64_t n = sizeof xs / sizeof *xs;
  for (int32_t isa : availableIsas()) {
    IsaScope s(isa);
    std::vector<float> x(xs, xs + n), y = nanVec(n), dx = nanVec(n), dy(n, 1.0f);
    hc_gelu_tanh_fwd(n, x.data(), y.data(), threads(1));
    hc_gelu_tanh_bwd(n, x.data(), dy.data(), dx.data(), threads(1));
    for (int64_t i = 0; i < n; ++i) {
      EXPECT_EQ(y[i], 0.0f) << hcrt_isa_name(isa) << " gelu(" << x[i] << ")";
      EXPECT_TRUE(std::signbit(y[i])) << hcrt_isa_name(isa) << " gelu(" << x[i] << ")";
      EXPECT_EQ(dx[i], 0.0f) << hcrt_isa_name(isa) << " gelu'(" << x[i] << ")";
    }
    float ninf = -std::numeric_limits<float>::infinity(), r = 0;
    hc_gelu_tanh_fwd(1, &ninf, &r, threads(1));
    EXPECT_TRUE(std::isnan(r)) << hcrt_isa_name(isa);
    // Around the switch the values stay tiny and normal (or 0).
    for (float v : {-9.99f, -9.95f, -9.9f}) {
      hc_gelu_tanh_fwd(1, &v, &r, threads(1));
      EXPECT_LE(std::fabs(r), 1e-35f) << v;
      EXPECT_TRUE(r == 0.0f || std::fpclassify(r) == FP_NORMAL) << v << " -> " << r;
    }
  }
}

// SiLU likewise: 0 below -86 (torch: silu(-1e38) = -0), s never denormal.
TEST(Ops, SiluFarNegative) {
  const float xs[] = {-86.5f, -100.0f, -1e10f, -3e38f};
  const int64_t n = sizeof xs / sizeof *xs;
  for (int32_t isa : availableIsas()) {
    IsaScope s(isa);
    std::vector<float> x(xs, xs + n), y = nanVec(n), dx = nanVec(n), dy(n, 1.0f);
    hc_silu_fwd(n, x.data(), y.data(), threads(1));
    hc_silu_bwd(n, x.data(), dy.data(), dx.data(), threads(1));
    for (int64_t i = 0; i < n; ++i) {
      EXPECT_EQ(y[i], 0.0f) << hcrt_isa_name(isa) << " silu(" << x[i] << ")";
      EXPECT_TRUE(std::signbit(y[i])) << hcrt_isa_name(isa) << " silu(" << x[i] << ")";
      EXPECT_EQ(dx[i], 0.0f) << hcrt_isa_name(isa) << " silu'(" << x[i] << ")";
    }
    float ninf = -std::numeric_limits<float>::infinity(), r = 0;
    hc_silu_fwd(1, &ninf, &r, threads(1));
    EXPECT_TRUE(std::isnan(r)) << hcrt_isa_name(isa);
    for (float v : {-85.9f, -80.0f}) {
      hc_silu_fwd(1, &v, &r, threads(1));
      EXPECT_NEAR(r, v * std::exp(static_cast<double>(v)), 1e-40) << v;
      EXPECT_TRUE(std::fpclassify(r) == FP_NORMAL) << v << " -> " << r;
    }
  }
}

// In place (y = x, dx = dy, as the API allows): the same bits as out of
// place, on every path and at 1 and 2 threads.
TEST(Ops, ActivationsInPlace) {
  const int64_t n = 100003;
  const std::vector<float> x = activationInput(n, 5), dy = randomVec(n, 6);
  using Fwd = void (*)(int64_t, const float *, float *, hc_threads);
  using Bwd = void (*)(int64_t, const float *, const float *, float *, hc_threads);
  const std::pair<const char *, Fwd> fwds[] = {{"gelu_fwd", hc_gelu_tanh_fwd},
                                              {"silu_fwd", hc_silu_fwd}};
  const std::pair<const char *, Bwd> bwds[] = {{"gelu_bwd", hc_gelu_tanh_bwd},
                                              {"silu_bwd", hc_silu_bwd}};
  for (int32_t isa : availableIsas()) {
    IsaScope s(isa);
    for (int th : {1, 2}) {
      for (const auto &[name, f] : fwds) {
        std::vector<float> out = nanVec(n), inPlace = x;
        f(n, x.data(), out.data(), threads(th));
        f(n, inPlace.data(), inPlace.data(), threads(th));
        EXPECT_EQ(0, std::memcmp(out.data(), inPlace.data(), n * sizeof(float)))
            << name << " " << hcrt_isa_name(isa) << " threads=" << th;
      }
      for (const auto &[name, f] : bwds) {
        std::vector<float> out = nanVec(n), inPlace = dy;
        f(n, x.data(), dy.data(), out.data(), threads(th));
        f(n, x.data(), inPlace.data(), inPlace.data(), threads(th));
        EXPECT_EQ(0, std::memcmp(out.data(), inPlace.data(), n * sizeof(float)))
            << name << " " << hcrt_isa_name(isa) << " threads=" << th;
      }
    }
  }
}

TEST(Ops, GeluApproximationMaxError) {
  const int64_t n = 2400001;
  std::vector<float> x(n), y = nanVec(n);
  for (int64_t i = 0; i < n; ++i)
    x[i] = -12.0f + 24.0f * (float)i / (float)(n - 1);
  for (int32_t isa : availableIsas()) {
    IsaScope s(isa);
    hc_gelu_tanh_fwd(n, x.data(), y.data(), threads(2));
    double worstAbs = 0, worstRel = 0;
    for (int64_t i = 0; i < n; ++i) {
      double want = geluD(x[i]), err = std::fabs(y[i] - want);
      ASSERT_FALSE(std::isnan(y[i]));
      worstAbs = std::max(worstAbs, err);
      if (std::fabs(want) > 1e-3)
        worstRel = std::max(worstRel, err / std::fabs(want));
    }
    RecordProperty(std::string("gelu_max_abs_err_") + hcrt_isa_name(isa), std::to_string(worstAbs));
    printf("gelu-tanh fast approximation (%s): max abs error %.3g, max rel error (|y|>1e-3) %.3g\n",
           hcrt_isa_name(isa), worstAbs, worstRel);
    EXPECT_LE(worstAbs, 5e-7);
  }
}

// SiLU forward: |y - silu(x)| <= 1e-7 + 4u |silu(x)|... (exp is ~2 ulp).
TEST(Ops, SiluForward) {
  elementwise("silu_fwd",
              [](int64_t n, std::vector<float> &x, std::vector<float> &y, int th) {
                hc_silu_fwd(n, x.data(), y.data(), threads(th));
              },
              [](double x, int64_t) { return siluD(x); }, 1e-7, 8 * kU);
}

// SiLU backward: |dx - dy silu'(x)| <= 1e-7 |dy| + 16u |dx|.
TEST(Ops, SiluBackward) {
  std::vector<float> dy = randomVec(100003, 98);
  elementwise("silu_bwd",
              [&](int64_t n, std::vector<float> &x, std::vector<float> &y, int th) {
                hc_silu_bwd(n, x.data(), dy.data(), y.data(), threads(th));
              },
              [&](double x, int64_t i) { return dy[i] * siluGradD(x); }, 1e-7, 16 * kU);
}

TEST(Ops, ActivationNaNPropagates) {
  float x[3] = {1.0f, std::numeric_limits<float>::quiet_NaN(), -2.0f}, y[3];
  for (int32_t isa : availableIsas()) {
    IsaScope s(isa);
    hc_gelu_tanh_fwd(3, x, y, threads(1));
    EXPECT_TRUE(std::isnan(y[1]));
    hc_silu_fwd(3, x, y, threads(1));
    EXPECT_TRUE(std::isnan(y[1]));
  }
}

// Softmax forward: |y - y64| <= (cols + 8) u y64 + u.
// Softmax backward: |dx - dx64| <= (cols + 8) u (|y| sum|y dy| + |y dy|) + 4u |dx64|.
TEST(Ops, Softmax) {
  for (int32_t isa : availableIsas()) {
    IsaScope s(isa);
    for (int th : {1, 2})
      for (int64_t rows : {1, 3, 17, 300})
        for (int64_t cols : {1, 2, 15, 16, 17, 100, 1031}) {
          const int64_t ld = cols + 3;
          std::vector<float> x = randomVec(rows * ld, rows * 31 + cols, -6, 6);
          std::vector<float> y = nanVec(rows * ld), dy = randomVec(rows * ld, cols, -1, 1);
          std::vector<float> dx = nanVec(rows * ld);
          hc_softmax_fwd(rows, cols, x.data(), ld, y.data(), ld, threads(th));
          hc_softmax_bwd(rows, cols, y.data(), ld, dy.data(), ld, dx.data(), ld, threads(th));
          Checker c{"softmax rows=" + std::to_string(rows) + " cols=" + std::to_string(cols) +
                    " isa=" + hcrt_isa_name(isa)};
          for (int64_t r = 0; r < rows; ++r) {
            double m = -1e300, sum = 0;
            for (int64_t j = 0; j < cols; ++j)
              m = std::max(m, (double)x[r * ld + j]);
            std::vector<double> p(cols);
            for (int64_t j = 0; j < cols; ++j)
              sum += p[j] = std::exp((double)x[r * ld + j] - m);
            double dot = 0, adot = 0;
            for (int64_t j = 0; j < cols; ++j) {
              p[j] /= sum;
              c.check(y[r * ld + j], p[j], (cols + 8) * kU * p[j] + kU, r * ld + j);
              // backward reference uses the kernel's own y (its input)
              dot += (double)y[r * ld + j] * dy[r * ld + j];
              adot += std::fabs((double)y[r * ld + j] * dy[r * ld + j]);
            }
            for (int64_t j = 0; j < cols; ++j) {
              double yy = y[r * ld + j], want = yy * (dy[r * ld + j] - dot);
              double tol = (cols + 8) * kU * (std::fabs(yy) * adot + std::fabs(yy * dy[r * ld + j])) +
                           4 * kU * std::fabs(want);
              c.check(dx[r * ld + j], want, tol, -(r * ld + j));
            }
          }
        }
  }
}

// The first 64-byte aligned element of v (v has 15 floats to spare).
static float *aligned64(std::vector<float> &v) {
  uintptr_t p = reinterpret_cast<uintptr_t>(v.data());
  return v.data() + ((64 - p % 64) % 64) / sizeof(float);
}

TEST(Ops, SoftmaxStreamedEqualsPlain) {
  // Streamed (HC_STREAM_STORES=1), rows of y 64-byte aligned and up to 2048
  // columns stage their exponentials and write y once, non-temporally; the
  // rest fall back to plain stores. The same values either way, in place
  // too, every element written, the padding between rows untouched.
  for (int32_t isa : availableIsas()) {
    IsaScope s(isa);
    for (int64_t cols : {16, 48, 64, 256, 272, 2048, 2064, 17})
      for (int64_t rows : {1, 2, 3, 37})
        for (int inPlace = 0; inPlace < 2; ++inPlace) {
          const int64_t ld = cols + 16;
          std::vector<float> x = randomVec(rows * ld + 16, cols * 7 + rows, -8, 8);
          const float *px = aligned64(x);
          std::vector<float> y[2];
          float *py[2];
          for (int stream = 0; stream < 2; ++stream) {
            setenv("HC_STREAM_STORES", stream ? "1" : "0", 1);
            y[stream] = nanVec(rows * ld + 16);
            py[stream] = aligned64(y[stream]);
            if (inPlace)
              std::copy(px, px + rows * ld, py[stream]);
            hc_softmax_fwd(rows, cols, inPlace ? py[stream] : px, ld, py[stream], ld, threads(2));
          }
          unsetenv("HC_STREAM_STORES");
          const std::string what = std::string("isa=") + hcrt_isa_name(isa) + " cols=" +
                                   std::to_string(cols) + " rows=" + std::to_string(rows) +
                                   " inPlace=" + std::to_string(inPlace);
          EXPECT_EQ(0, std::memcmp(py[0], py[1], sizeof(float) * rows * ld)) << what;
          for (int64_t r = 0; r < rows; ++r) {
            double sum = 0;
            for (int64_t j = 0; j < cols; ++j)
              sum += py[1][r * ld + j];
            ASSERT_NEAR(sum, 1.0, 1e-4) << what << " r=" << r;
            if (!inPlace)
              for (int64_t j = cols; j < ld && r + 1 < rows; ++j)
                ASSERT_TRUE(std::isnan(py[1][r * ld + j])) << what << " padding r=" << r;
          }
        }
  }
}

TEST(Ops, SoftmaxSpecialRows) {
  // Like torch: a NaN or +inf in a row makes the row NaN; an all -inf row
  // is NaN (0 / 0); -inf elements give 0. Rows around them are unaffected
  // (each row's max is found while the row before is exponentiated).
  const float inf = std::numeric_limits<float>::infinity(), nan = std::nanf("");
  const int64_t rows = 9, cols = 80;
  for (int32_t isa : availableIsas()) {
    IsaScope s(isa);
    for (int stream = 0; stream < 2; ++stream)
      for (int th : {1, 2}) {
        setenv("HC_STREAM_STORES", stream ? "1" : "0", 1);
        std::vector<float> xv = randomVec(rows * cols + 16, 5, -3, 3), yv = nanVec(rows * cols + 16);
        float *x = aligned64(xv), *y = aligned64(yv);
        x[1 * cols + 70] = nan;                       // row 1: NaN
        x[3 * cols + 5] = inf;                        // row 3: +inf
        for (int64_t j = 0; j < cols; ++j)            // row 5: all -inf
          x[5 * cols + j] = -inf;
        x[7 * cols + 0] = -inf, x[7 * cols + 79] = -inf;  // row 7: some -inf
        hc_softmax_fwd(rows, cols, x, cols, y, cols, threads(th));
        unsetenv("HC_STREAM_STORES");
        for (int64_t r = 0; r < rows; ++r) {
          const bool nanRow = r == 1 || r == 3 || r == 5;
          double m = -1e300, sum = 0;
          for (int64_t j = 0; j < cols; ++j)
            m = std::max(m, (double)x[r * cols + j]);
          for (int64_t j = 0; j < cols; ++j)
            sum += std::exp((double)x[r * cols + j] - m);
          for (int64_t j = 0; j < cols; ++j) {
            const float v = y[r * cols + j];
            if (nanRow) {
              ASSERT_TRUE(std::isnan(v)) << "r=" << r << " j=" << j;
            } else {
              const double want = std::exp((double)x[r * cols + j] - m) / sum;
              ASSERT_NEAR(v, want, (cols + 8) * kU * want + kU) << "r=" << r << " j=" << j;
            }
          }
        }
      }
  }
}

namespace {

struct AttCase {
  int64_t B, H, Tq, Tk, Dh;
  bool fusedQkv;  // q/k/v as slices of one [B, T, 3, H, Dh] buffer
};

// Flash attention. Forward: |o - o64| <= 8 (Tk + Dh + 16) u (1 + |o64|),
// lse: 8 (Tk + Dh) u (1 + |lse|). Backward (recomputed P): |g - g64| <=
// 16 (Tq + Tk + Dh + 16) u (1 + sum of |terms| of g64).
void runAttention(const AttCase &ac, int th, uint32_t seed) {
  const int64_t B = ac.B, H = ac.H, Tq = ac.Tq, Tk = ac.Tk, Dh = ac.Dh;
  const float scale = 1.0f / std::sqrt((float)Dh);
  hc_attention_args a{};
  a.batch = B, a.heads = H, a.Tq = Tq, a.Tk = Tk, a.Dh = Dh, a.scale = scale;
  std::vector<float> qkv, q, k, v;
  if (ac.fusedQkv) {
    // [B, T, 3, H, Dh] with Tq == Tk
    qkv = randomVec(B * Tq * 3 * H * Dh, seed, -2, 2);
    a.q = qkv.data(), a.k = qkv.data() + H * Dh, a.v = qkv.data() + 2 * H * Dh;
    a.q_sb = a.k_sb = a.v_sb = Tq * 3 * H * Dh;
    a.q_sh = a.k_sh = a.v_sh = Dh;
    a.q_st = a.k_st = a.v_st = 3 * H * Dh;
  } else {
    // [B, H, T, Dh] with a padded row stride
    q = randomVec(B * H * Tq * (Dh + 1), seed, -2, 2);
    k = randomVec(B * H * Tk * (Dh + 1), seed + 1, -2, 2);
    v = randomVec(B * H * Tk * (Dh + 1), seed + 2, -2, 2);
    a.q = q.data(), a.k = k.data(), a.v = v.data();
    a.q_st = Dh + 1, a.q_sh = Tq * (Dh + 1), a.q_sb = H * Tq * (Dh + 1);
    a.k_st = a.v_st = Dh + 1, a.k_sh = a.v_sh = Tk * (Dh + 1), a.k_sb = a.v_sb = H * Tk * (Dh + 1);
  }
  // o, dout in [B, Tq, H, Dh]; grads [B, H, T, Dh]
  std::vector<float> o = nanVec(B * Tq * H * Dh), lse = nanVec(B * H * Tq);
  a.o = o.data(), a.o_sb = Tq * H * Dh, a.o_sh = Dh, a.o_st = H * Dh;
  a.lse = lse.data();
  hc_flash_attention_fwd(&a, threads(th));
  std::vector<float> dout = randomVec(o.size(), seed + 3);
  std::vector<float> dq = nanVec(B * H * Tq * Dh), dk = nanVec(B * H * Tk * Dh), dv = nanVec(B * H * Tk * Dh);
  a.dout = dout.data(), a.do_sb = a.o_sb, a.do_sh = a.o_sh, a.do_st = a.o_st;
  a.dq = dq.data(), a.dq_sb = H * Tq * Dh, a.dq_sh = Tq * Dh, a.dq_st = Dh;
  a.dk = dk.data(), a.dk_sb = H * Tk * Dh, a.dk_sh = Tk * Dh, a.dk_st = Dh;
  a.dv = dv.data(), a.dv_sb = H * Tk * Dh, a.dv_sh = Tk * Dh, a.dv_st = Dh;
  hc_flash_attention_bwd(&a, threads(th));

  char name[160];
  const char *packed = getenv("HC_ATTENTION_PACKED");
  snprintf(name, sizeof name, "attention B=%lld H=%lld Tq=%lld Tk=%lld Dh=%lld fused=%d th=%d isa=%s packed=%s",
           (long long)B, (long long)H, (long long)Tq, (long long)Tk, (long long)Dh, ac.fusedQkv, th,
           hcrt_isa_name(hcrt_isa()), packed ? packed : "default");
  Checker c{name};
  auto at = [](const float *base, int64_t sb, int64_t sh, int64_t st, int64_t b, int64_t h,
               int64_t t, int64_t d) { return (double)base[b * sb + h * sh + t * st + d]; };
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h) {
      std::vector<double> P(Tq * Tk), dP(Tq * Tk), dS(Tq * Tk);
      std::vector<double> gq(Tq * Dh, 0), gk(Tk * Dh, 0), gv(Tk * Dh, 0);
      std::vector<double> aq(Tq * Dh, 0), ak(Tk * Dh, 0), av(Tk * Dh, 0);
      for (int64_t i = 0; i < Tq; ++i) {
        double m = -1e300, sum = 0;
        for (int64_t j = 0; j < Tk; ++j) {
          double s = 0;
          for (int64_t d = 0; d < Dh; ++d)
            s += at(a.q, a.q_sb, a.q_sh, a.q_st, b, h, i, d) * at(a.k, a.k_sb, a.k_sh, a.k_st, b, h, j, d);
          P[i * Tk + j] = s * scale;
          m = std::max(m, s * scale);
        }
        for (int64_t j = 0; j < Tk; ++j)
          sum += P[i * Tk + j] = std::exp(P[i * Tk + j] - m);
        c.close(lse[(b * H + h) * Tq + i], m + std::log(sum), 8 * (Tk + Dh) * kU, 8 * (Tk + Dh) * kU, i);
        for (int64_t j = 0; j < Tk; ++j)
          P[i * Tk + j] /= sum;
        double di = 0;
        for (int64_t d = 0; d < Dh; ++d) {
          double od = 0;
          for (int64_t j = 0; j < Tk; ++j)
            od += P[i * Tk + j] * at(a.v, a.v_sb, a.v_sh, a.v_st, b, h, j, d);
          c.close(o[b * a.o_sb + h * a.o_sh + i * a.o_st + d], od, 8 * (Tk + Dh + 16) * kU,
                  8 * (Tk + Dh + 16) * kU, 1000000 + i * Dh + d);
          di += od * dout[b * a.o_sb + h * a.o_sh + i * a.o_st + d];
        }
        for (int64_t j = 0; j < Tk; ++j) {
          double dp = 0;
          for (int64_t d = 0; d < Dh; ++d)
            dp += dout[b * a.o_sb + h * a.o_sh + i * a.o_st + d] * at(a.v, a.v_sb, a.v_sh, a.v_st, b, h, j, d);
          dS[i * Tk + j] = P[i * Tk + j] * (dp - di);
        }
      }
      for (int64_t i = 0; i < Tq; ++i)
        for (int64_t j = 0; j < Tk; ++j) {
          double p = P[i * Tk + j], ds = dS[i * Tk + j] * scale;
          for (int64_t d = 0; d < Dh; ++d) {
            double gdo = dout[b * a.o_sb + h * a.o_sh + i * a.o_st + d];
            double qd = at(a.q, a.q_sb, a.q_sh, a.q_st, b, h, i, d);
            double kd = at(a.k, a.k_sb, a.k_sh, a.k_st, b, h, j, d);
            gv[j * Dh + d] += p * gdo;
            av[j * Dh + d] += std::fabs(p * gdo);
            gk[j * Dh + d] += ds * qd;
            ak[j * Dh + d] += std::fabs(ds * qd) + std::fabs(p) * 4;
            gq[i * Dh + d] += ds * kd;
            aq[i * Dh + d] += std::fabs(ds * kd) + std::fabs(p) * 4;
          }
        }
      const double f = 16 * (Tq + Tk + Dh + 16) * kU;
      for (int64_t i = 0; i < Tq; ++i)
        for (int64_t d = 0; d < Dh; ++d)
          c.check(dq[b * a.dq_sb + h * a.dq_sh + i * Dh + d], gq[i * Dh + d], f * (1 + aq[i * Dh + d]), 2000000 + i);
      for (int64_t j = 0; j < Tk; ++j)
        for (int64_t d = 0; d < Dh; ++d) {
          c.check(dk[b * a.dk_sb + h * a.dk_sh + j * Dh + d], gk[j * Dh + d], f * (1 + ak[j * Dh + d]), 3000000 + j);
          c.check(dv[b * a.dv_sb + h * a.dv_sh + j * Dh + d], gv[j * Dh + d], f * (1 + av[j * Dh + d]), 4000000 + j);
        }
    }
}

} // namespace

// Every case on every ISA at 1 and 2 threads, with fp32's forward on its
// own packed tiles (HC_ATTENTION_PACKED=1, the default) and through the
// in-cache GEMM driver (0); `tile`: HC_ATTENTION_TILE
// for the run, or "" for the default.
static void runAttentionCases(const std::vector<AttCase> &cases, const char *tile, uint32_t &seed) {
  for (const char *packed : {"1", "0"}) {
    setenv("HC_ATTENTION_PACKED", packed, 1);
    if (*tile)
      setenv("HC_ATTENTION_TILE", tile, 1);
    for (int32_t isa : availableIsas()) {
      IsaScope s(isa);
      for (const AttCase &ac : cases)
        for (int th : {1, 2})
          runAttention(ac, th, seed++);
    }
  }
  unsetenv("HC_ATTENTION_PACKED");
  unsetenv("HC_ATTENTION_TILE");
}

TEST(Ops, FlashAttention) {
  uint32_t seed = 1;
  runAttentionCases({{1, 1, 1, 1, 1, false}, {2, 3, 17, 17, 8, true}, {1, 2, 65, 130, 64, false},
                     {1, 1, 129, 63, 72, false}, {2, 1, 5, 200, 3, false}, {1, 2, 67, 67, 13, true}},
                    "", seed);
}

// No keys: the forward writes NaN (0 / 0, like torch), the backward dq = 0.
TEST(Ops, FlashAttentionNoKeys) {
  const int64_t Tq = 5, Dh = 3;
  std::vector<float> q = randomVec(Tq * Dh, 1), o = nanVec(Tq * Dh), lse = nanVec(Tq);
  std::vector<float> dout = randomVec(Tq * Dh, 2), dq = nanVec(Tq * Dh);
  float kv = 0;
  hc_attention_args a{};
  a.batch = 1, a.heads = 1, a.Tq = Tq, a.Tk = 0, a.Dh = Dh, a.scale = 0.5f;
  a.q = q.data(), a.q_st = Dh, a.k = &kv, a.k_st = Dh, a.v = &kv, a.v_st = Dh;
  a.o = o.data(), a.o_st = Dh, a.lse = lse.data();
  std::fill(o.begin(), o.end(), 1.0f);
  hc_flash_attention_fwd(&a, threads(1));
  for (float x : o)
    EXPECT_TRUE(std::isnan(x));
  a.dout = dout.data(), a.do_st = Dh, a.dq = dq.data(), a.dq_st = Dh;
  a.dk = &kv, a.dk_st = Dh, a.dv = &kv, a.dv_st = Dh;
  std::fill(o.begin(), o.end(), 0.0f);
  hc_flash_attention_bwd(&a, threads(1));
  for (float x : dq)
    EXPECT_EQ(x, 0.0f);
}

// A NaN in one query of one head, +inf in another (scores of +inf: inf -
// inf, NaN like torch): those queries' outputs and gradients are NaN (the
// cheaper exp for exponents <= 0 must not turn them into numbers), their
// head's dK and dV too (sums over queries), the other head is untouched.
// At the default tile and at 16 (later tiles too).
TEST(Ops, FlashAttentionNaNPropagates) {
  const int64_t H = 2, T = 40, Dh = 16, ld = H * Dh;
  for (const char *tile : {"", "16"}) {
    if (*tile)
      setenv("HC_ATTENTION_TILE", tile, 1);
    for (int32_t isa : availableIsas()) {
      IsaScope s(isa);
      std::vector<float> q = randomVec(T * ld, 3), k = randomVec(T * ld, 4), v = randomVec(T * ld, 5);
      std::vector<float> dout = randomVec(T * ld, 6), o = nanVec(T * ld), lse = nanVec(H * T);
      std::vector<float> dq = nanVec(T * ld), dk = nanVec(T * ld), dv = nanVec(T * ld);
      q[21 * ld + 0 * Dh + 5] = std::nanf("");  // head 0, query 21
      q[7 * ld + 0 * Dh + 2] = std::numeric_limits<float>::infinity();  // query 7
      hc_attention_args a{};
      a.batch = 1, a.heads = H, a.Tq = T, a.Tk = T, a.Dh = Dh, a.scale = 0.25f;
      a.q = q.data(), a.k = k.data(), a.v = v.data();
      a.q_sh = a.k_sh = a.v_sh = a.o_sh = a.do_sh = a.dq_sh = a.dk_sh = a.dv_sh = Dh;
      a.q_st = a.k_st = a.v_st = a.o_st = a.do_st = a.dq_st = a.dk_st = a.dv_st = ld;
      a.o = o.data(), a.lse = lse.data(), a.dout = dout.data();
      a.dq = dq.data(), a.dk = dk.data(), a.dv = dv.data();
      hc_flash_attention_fwd(&a, threads(2));
      hc_flash_attention_bwd(&a, threads(2));
      const std::string what = std::string("isa=") + hcrt_isa_name(isa) + " tile=" + tile;
      for (int64_t t = 0; t < T; ++t)
        for (int64_t d = 0; d < Dh; ++d) {
          const int64_t h0 = t * ld + d, h1 = t * ld + Dh + d;
          ASSERT_EQ(t == 21 || t == 7, std::isnan(o[h0])) << what << " o t=" << t;
          ASSERT_EQ(t == 21 || t == 7, std::isnan(dq[h0])) << what << " dq t=" << t;
          ASSERT_TRUE(std::isnan(dk[h0]) && std::isnan(dv[h0])) << what << " dk/dv t=" << t;
          ASSERT_FALSE(std::isnan(o[h1]) || std::isnan(dq[h1]) || std::isnan(dk[h1]) ||
                       std::isnan(dv[h1]))
              << what << " head 1 t=" << t;
        }
    }
  }
  unsetenv("HC_ATTENTION_TILE");
}

// Many tiles, partial ones on both axes (the online-softmax rescaling, the
// accumulating GEMMs, partial transposes): a tile of 16 or 48 rows forced
// through HC_ATTENTION_TILE (the default comes from the L2 size).
TEST(Ops, FlashAttentionSmallTiles) {
  uint32_t seed = 100;
  for (const char *tile : {"16", "48"})
    runAttentionCases({{1, 2, 70, 100, 24, false}, {2, 1, 33, 33, 16, true}, {1, 1, 1, 50, 5, false},
                       {1, 1, 50, 1, 7, false}},
                      tile, seed);
}

// AdamW over `steps` steps vs the torch formula in double:
// |p - p64| <= 16 u (|p64| + steps * lr * 1.5), |m - m64| <= 8 u steps |g|max,
// |v - v64| <= 8 u steps v64 + tiny.
TEST(Ops, AdamW) {
  for (int32_t isa : availableIsas()) {
    IsaScope s(isa);
    for (int th : {1, 2})
      for (int64_t n : kSizes) {
        const float lr = 1e-3f, b1 = 0.9f, b2 = 0.999f, eps = 1e-8f, wd = 0.01f;
        std::vector<float> p = randomVec(n, n + 1), m(n, 0.0f), v(n, 0.0f);
        std::vector<double> pd(p.begin(), p.end()), md(n, 0), vd(n, 0);
        const int steps = 3;
        std::vector<float> g;
        for (int st = 1; st <= steps; ++st) {
          g = randomVec(n, n + 10 * st, -0.1f, 0.1f);
          hc_adamw(n, p.data(), g.data(), m.data(), v.data(), lr, b1, b2, eps, wd, st, threads(th));
          double bc1 = 1 - std::pow((double)b1, st), bc2 = 1 - std::pow((double)b2, st);
          for (int64_t i = 0; i < n; ++i) {
            pd[i] *= 1 - (double)lr * wd;
            md[i] = (double)b1 * md[i] + (1 - (double)b1) * g[i];
            vd[i] = (double)b2 * vd[i] + (1 - (double)b2) * (double)g[i] * g[i];
            pd[i] -= (double)lr / bc1 * md[i] / (std::sqrt(vd[i]) / std::sqrt(bc2) + eps);
          }
        }
        Checker c{"adamw n=" + std::to_string(n) + " isa=" + hcrt_isa_name(isa)};
        for (int64_t i = 0; i < n; ++i) {
          c.check(p[i], pd[i], 16 * kU * (std::fabs(pd[i]) + steps * lr * 1.5), i);
          c.check(m[i], md[i], 8 * kU * steps * 0.1, -i - 1);
          c.check(v[i], vd[i], 8 * kU * steps * vd[i] + 1e-12, 10000000 + i);
        }
      }
  }
}

// SGD (momentum, dampening, nesterov, weight decay) over 3 steps:
// |p - p64| <= 16 u (|p64| + 3 lr (|g| + wd |p|) / (1 - momentum)).
TEST(Ops, Sgd) {
  struct Cfg { float mom, damp, wd; int nesterov; };
  const Cfg cfgs[] = {{0, 0, 0, 0}, {0.9f, 0, 0, 0}, {0.9f, 0.1f, 1e-4f, 0}, {0.9f, 0, 0.01f, 1}};
  for (int32_t isa : availableIsas()) {
    IsaScope s(isa);
    for (const Cfg &cf : cfgs)
      for (int64_t n : {(int64_t)1, (int64_t)17, (int64_t)100003}) {
        const float lr = 0.05f;
        std::vector<float> p = randomVec(n, 5), buf = nanVec(n);
        std::vector<double> pd(p.begin(), p.end()), bd(n, 0);
        for (int st = 0; st < 3; ++st) {
          std::vector<float> g = randomVec(n, 50 + st);
          hc_sgd(n, p.data(), g.data(), cf.mom != 0 ? buf.data() : nullptr, lr, cf.mom, cf.damp,
                 cf.wd, cf.nesterov, st == 0, threads(2));
          for (int64_t i = 0; i < n; ++i) {
            double d = g[i] + (double)cf.wd * pd[i];
            if (cf.mom != 0) {
              bd[i] = st == 0 ? d : (double)cf.mom * bd[i] + (1 - (double)cf.damp) * d;
              d = cf.nesterov ? d + (double)cf.mom * bd[i] : bd[i];
            }
            pd[i] -= (double)lr * d;
          }
        }
        Checker c{"sgd n=" + std::to_string(n)};
        for (int64_t i = 0; i < n; ++i)
          c.check(p[i], pd[i], 16 * kU * (std::fabs(pd[i]) + 3 * lr * 2.5 / (1 - cf.mom)), i);
      }
  }
}

// MSE: loss accumulated in double: |loss - loss64| <= 2u loss64;
// gradient: |dpred - 2 dloss (p - t) / n| <= 4u |that|.
TEST(Ops, MseLoss) {
  for (int32_t isa : availableIsas()) {
    IsaScope s(isa);
    for (int th : {1, 2})
      for (int64_t n : kSizes) {
        if (n == 0)
          continue;
        std::vector<float> p = randomVec(n, n), t = randomVec(n, n + 3);
        double sum = 0;
        for (int64_t i = 0; i < n; ++i)
          sum += ((double)p[i] - t[i]) * ((double)p[i] - t[i]);
        double want = sum / n;
        float loss = hc_mse_loss_fwd(n, p.data(), t.data(), threads(th));
        Checker c{"mse n=" + std::to_string(n)};
        c.check(loss, want, 2 * kU * want + 1e-30, 0);
        std::vector<float> dp = nanVec(n);
        hc_mse_loss_bwd(n, p.data(), t.data(), 0.5f, dp.data(), threads(th));
        for (int64_t i = 0; i < n; ++i) {
          double w = 2.0 * 0.5 * ((double)p[i] - t[i]) / n;
          c.check(dp[i], w, 4 * kU * std::fabs(w), i + 1);
        }
      }
  }
}

// Embedding gather is exact; scatter-add sums in index order:
// |d - d64| <= (count + 1) u sum |terms|.
TEST(Ops, Embedding) {
  for (int th : {1, 2})
    for (int64_t D : {(int64_t)1, (int64_t)5, (int64_t)384, (int64_t)1153})
      for (int64_t nIdx : {(int64_t)1, (int64_t)3, (int64_t)64, (int64_t)257}) {
        const int64_t rows = 11, ldt = D + 2, ldo = D + 1;
        std::vector<float> table = randomVec(rows * ldt, D);
        std::vector<int64_t> idx(nIdx);
        for (int64_t i = 0; i < nIdx; ++i)
          idx[i] = (i * 7 + D) % (rows + 2) - 1;  // includes -1 and rows (invalid)
        std::vector<float> out = nanVec(nIdx * ldo);
        hc_embedding_fwd(nIdx, idx.data(), rows, D, table.data(), ldt, out.data(), ldo, threads(th));
        Checker c{"embedding D=" + std::to_string(D) + " n=" + std::to_string(nIdx)};
        for (int64_t i = 0; i < nIdx; ++i)
          for (int64_t j = 0; j < D; ++j) {
            bool ok = idx[i] >= 0 && idx[i] < rows;
            c.check(out[i * ldo + j], ok ? table[idx[i] * ldt + j] : 0.0, 0, i * ldo + j);
          }
        std::vector<float> dout = randomVec(nIdx * ldo, nIdx);
        for (int acc = 0; acc < 2; ++acc) {
          std::vector<float> dt = acc ? randomVec(rows * ldt, 3) : nanVec(rows * ldt);
          std::vector<float> dt0 = dt;
          hc_embedding_bwd(nIdx, idx.data(), rows, D, dout.data(), ldo, dt.data(), ldt, acc, threads(th));
          for (int64_t r = 0; r < rows; ++r)
            for (int64_t j = 0; j < D; ++j) {
              double w = acc ? dt0[r * ldt + j] : 0.0, a = std::fabs(w);
              int64_t cnt = 0;
              for (int64_t i = 0; i < nIdx; ++i)
                if (idx[i] == r) {
                  w += dout[i * ldo + j];
                  a += std::fabs(dout[i * ldo + j]);
                  ++cnt;
                }
              c.check(dt[r * ldt + j], w, (cnt + 1) * kU * a, -(r * ldt + j) - 1);
            }
        }
      }
}
