// Layer norm kernel tests (hc_layernorm_fwd / hc_layernorm_bwd, with and
// without affine and adaLN modulation) against float64 references, on every
// ISA path this CPU has. As ops_test.cpp: outputs NaN-poisoned first, the
// error bound stated above each test (u = 2^-24).
#include "hc/runtime/graph_ops.h"
#include "kernel_test_util.h"

#include <algorithm>
#include <cstring>
#include <tuple>
#include <utility>

using namespace hctest;

namespace {

struct LnCase {
  int64_t rows, D, groupRows;
  bool affine, modulate;
};

// LayerNorm (+ adaLN modulate) forward and backward.
// Forward: |y - y64| <= 8 (D + 16) u (1 + |y64|)  (mean/var in float).
// Backward dx: 16 (D + 16) u (1 + |dx64|) * max(1, rstd) scaled by the row's
// sum |dy|/D; parameter gradients (sums over rows R):
// 8 (R + D + 16) u (sum |terms| + 1). recompute: the backward without the
// forward's mean and rstd (recomputed a chunk of rows at a time; dgamma and
// dbeta then sum the chunks' partial sums), the same bounds.
void runLayerNorm(const LnCase &lc, int th, uint32_t seed, bool recompute) {
  const int64_t R = lc.rows, D = lc.D, ld = D + 5;
  const int64_t gr = lc.groupRows > 0 ? lc.groupRows : R;
  const int64_t G = (R + gr - 1) / gr, ldm = D + 2;
  std::vector<float> x = randomVec(R * ld, seed, -2, 3);
  std::vector<float> gamma = randomVec(D, seed + 1, 0.5, 1.5), beta = randomVec(D, seed + 2);
  std::vector<float> shift = randomVec(G * ldm, seed + 3), scale = randomVec(G * ldm, seed + 4);
  std::vector<float> y = nanVec(R * ld), mean = nanVec(R), rstd = nanVec(R);
  hc_layernorm_args a{};
  a.rows = R, a.D = D, a.x = x.data(), a.ldx = ld, a.y = y.data(), a.ldy = ld;
  a.gamma = lc.affine ? gamma.data() : nullptr;
  a.beta = lc.affine ? beta.data() : nullptr;
  a.shift = lc.modulate ? shift.data() : nullptr;
  a.scale = lc.modulate ? scale.data() : nullptr;
  a.group_rows = lc.groupRows, a.ld_mod = ldm, a.eps = 1e-6f;
  a.mean = mean.data(), a.rstd = rstd.data();
  hc_layernorm_fwd(&a, threads(th));

  std::vector<float> dy = randomVec(R * ld, seed + 5), dx = nanVec(R * ld);
  std::vector<float> dgamma = nanVec(D), dbeta = nanVec(D), dshift = nanVec(G * ldm),
                     dscale = nanVec(G * ldm);
  hc_layernorm_bwd_args b{};
  b.rows = R, b.D = D, b.x = x.data(), b.ldx = ld, b.dy = dy.data(), b.lddy = ld;
  b.dx = dx.data(), b.lddx = ld;
  b.gamma = a.gamma, b.beta = a.beta, b.shift = a.shift, b.scale = a.scale;
  b.group_rows = lc.groupRows, b.ld_mod = ldm, b.mean = mean.data(), b.rstd = rstd.data();
  if (recompute)
    b.mean = b.rstd = nullptr, b.eps = 1e-6;
  b.dgamma = lc.affine ? dgamma.data() : nullptr;
  b.dbeta = lc.affine ? dbeta.data() : nullptr;
  b.dshift = lc.modulate ? dshift.data() : nullptr;
  b.dscale = lc.modulate ? dscale.data() : nullptr;
  hc_layernorm_bwd(&b, threads(th));

  char name[160];
  snprintf(name, sizeof name, "layernorm R=%lld D=%lld gr=%lld affine=%d mod=%d th=%d recompute=%d isa=%s",
           (long long)R, (long long)D, (long long)lc.groupRows, lc.affine, lc.modulate, th, recompute,
           hcrt_isa_name(hcrt_isa()));
  Checker c{name};
  std::vector<double> dg(D, 0), db(D, 0), dgA(D, 0), dbA(D, 0);
  std::vector<double> dsh(G * D, 0), dsc(G * D, 0), dshA(G * D, 0), dscA(G * D, 0);
  for (int64_t r = 0; r < R; ++r) {
    double mu = 0, var = 0;
    for (int64_t j = 0; j < D; ++j)
      mu += x[r * ld + j];
    mu /= D;
    for (int64_t j = 0; j < D; ++j)
      var += (x[r * ld + j] - mu) * (x[r * ld + j] - mu);
    var /= D;
    double rs = 1.0 / std::sqrt(var + 1e-6);
    c.close(mean[r], mu, 4 * (D + 4) * kU * 3, 0, r);
    c.close(rstd[r], rs, 0, 8 * (D + 16) * kU, r);
    const int64_t g = r / gr;
    std::vector<double> xh(D), dxh(D);
    double s1 = 0, s2 = 0, sAbs = 0;
    for (int64_t j = 0; j < D; ++j) {
      xh[j] = (x[r * ld + j] - mu) * rs;
      double y0 = lc.affine ? xh[j] * gamma[j] + beta[j] : xh[j];
      double sc = lc.modulate ? scale[g * ldm + j] : 0.0;
      double yy = lc.modulate ? y0 * (1 + sc) + shift[g * ldm + j] : y0;
      c.close(y[r * ld + j], yy, 8 * (D + 16) * kU, 8 * (D + 16) * kU, r * ld + j);
      double d = dy[r * ld + j];
      if (lc.modulate) {
        dsh[g * D + j] += d;
        dshA[g * D + j] += std::fabs(d);
        dsc[g * D + j] += d * y0;
        dscA[g * D + j] += std::fabs(d * y0);
      }
      double d0 = d * (1 + sc);
      if (lc.affine) {
        dg[j] += d0 * xh[j];
        dgA[j] += std::fabs(d0 * xh[j]);
        db[j] += d0;
        dbA[j] += std::fabs(d0);
      }
      dxh[j] = lc.affine ? d0 * gamma[j] : d0;
      s1 += dxh[j];
      s2 += dxh[j] * xh[j];
      sAbs += std::fabs(dxh[j]) * (1 + std::fabs(xh[j]));
    }
    for (int64_t j = 0; j < D; ++j) {
      double want = rs * (dxh[j] - s1 / D - xh[j] * s2 / D);
      double tol = 16 * (D + 16) * kU * std::max(1.0, rs) * (1 + std::fabs(want) + sAbs / D);
      c.check(dx[r * ld + j], want, tol, -(r * ld + j) - 1);
    }
  }
  for (int64_t j = 0; j < D && lc.affine; ++j) {
    c.check(dgamma[j], dg[j], 8 * (R + D + 16) * kU * (dgA[j] + 1), 1000000 + j);
    c.check(dbeta[j], db[j], 8 * (R + D + 16) * kU * (dbA[j] + 1), 2000000 + j);
  }
  for (int64_t g = 0; g < G && lc.modulate; ++g)
    for (int64_t j = 0; j < D; ++j) {
      c.check(dshift[g * ldm + j], dsh[g * D + j], 8 * (R + D + 16) * kU * (dshA[g * D + j] + 1),
              3000000 + g * D + j);
      c.check(dscale[g * ldm + j], dsc[g * D + j], 8 * (R + D + 16) * kU * (dscA[g * D + j] + 1),
              4000000 + g * D + j);
    }
}

} // namespace

TEST(Ops, LayerNorm) {
  const LnCase cases[] = {
      {1, 1, 0, false, false},   {1, 1, 0, true, true},     {5, 7, 0, true, false},
      {33, 64, 0, false, false}, {33, 64, 11, false, true}, {17, 384, 4, true, true},
      {3, 1153, 1, false, true}, {64, 97, 16, true, false}, {1000, 48, 250, false, true},
      {700, 40, 0, true, false},  // recomputed: two chunks of rows, each with dgamma partials
  };
  uint32_t seed = 1;
  for (int32_t isa : availableIsas()) {
    IsaScope s(isa);
    for (const LnCase &lc : cases)
      for (int th : {1, 2})
        for (bool recompute : {false, true})
          runLayerNorm(lc, th, seed++, recompute);
  }
}

TEST(Ops, LayerNormStreamedEqualsPlain) {
  // Outputs bigger than the last-level cache are written with non-temporal
  // stores from the first 64-byte boundary of each row (HC_STREAM_STORES=1
  // forces it): the same values as plain stores, every element written,
  // nothing between rows (ld > D) touched. Rows start at every alignment.
  for (int32_t isa : availableIsas()) {
    IsaScope s(isa);
    for (int64_t D : {1, 5, 16, 17, 40, 100, 1153})
      for (int form = 0; form < 3; ++form) {  // adaLN, affine + adaLN, plain
        const int64_t R = 19, ld = D + 3, G = 4, gr = 5;
        std::vector<float> x = randomVec(R * ld, 11, -2, 3), dy = randomVec(R * ld, 12);
        std::vector<float> gamma = randomVec(D, 13, 0.5, 1.5), beta = randomVec(D, 14);
        std::vector<float> shift = randomVec(G * D, 15), scale = randomVec(G * D, 16);
        std::vector<float> y[2], dx[2], mean(R), rstd(R), dsc[2], dsh[2];
        for (int stream = 0; stream < 2; ++stream) {
          setenv("HC_STREAM_STORES", stream ? "1" : "0", 1);
          y[stream] = nanVec(R * ld + 1), dx[stream] = nanVec(R * ld + 1);
          dsc[stream] = nanVec(G * D), dsh[stream] = nanVec(G * D);
          hc_layernorm_args a{};
          a.rows = R, a.D = D, a.x = x.data(), a.ldx = ld, a.y = y[stream].data() + 1, a.ldy = ld;
          a.gamma = form == 1 ? gamma.data() : nullptr, a.beta = form == 1 ? beta.data() : nullptr;
          a.shift = form < 2 ? shift.data() : nullptr, a.scale = form < 2 ? scale.data() : nullptr;
          a.group_rows = gr, a.ld_mod = D, a.eps = 1e-6f, a.mean = mean.data(), a.rstd = rstd.data();
          hc_layernorm_fwd(&a, threads(2));
          hc_layernorm_bwd_args b{};
          b.rows = R, b.D = D, b.x = x.data(), b.ldx = ld, b.dy = dy.data(), b.lddy = ld;
          b.dx = dx[stream].data() + 1, b.lddx = ld, b.gamma = a.gamma, b.beta = a.beta;
          b.shift = a.shift, b.scale = a.scale, b.group_rows = gr, b.ld_mod = D;
          b.mean = mean.data(), b.rstd = rstd.data();
          b.dshift = form < 2 ? dsh[stream].data() : nullptr;
          b.dscale = form < 2 ? dsc[stream].data() : nullptr;
          hc_layernorm_bwd(&b, threads(2));
        }
        unsetenv("HC_STREAM_STORES");
        const std::string what = std::string("isa=") + hcrt_isa_name(isa) +
                                 " D=" + std::to_string(D) + " form=" + std::to_string(form);
        EXPECT_EQ(0, std::memcmp(y[0].data(), y[1].data(), sizeof(float) * y[0].size())) << what;
        EXPECT_EQ(0, std::memcmp(dx[0].data(), dx[1].data(), sizeof(float) * dx[0].size())) << what;
        for (int64_t r = 0; r < R; ++r)
          for (int64_t j = 0; j < ld; ++j) {
            const bool inRow = j < D;
            ASSERT_EQ(inRow, !std::isnan(y[1][1 + r * ld + j])) << what << " y r=" << r << " j=" << j;
            ASSERT_EQ(inRow, !std::isnan(dx[1][1 + r * ld + j])) << what << " dx r=" << r << " j=" << j;
          }
      }
  }
}

TEST(Ops, LayerNormAccumulatesParamGrads) {
  const int64_t R = 6, D = 9;
  std::vector<float> x = randomVec(R * D, 1), dy = randomVec(R * D, 2), mean(R), rstd(R),
                     y(R * D), dx(R * D);
  std::vector<float> gamma(D, 1.0f), beta(D, 0.0f), dg1(D), db1(D), dg2(D, 1.0f), db2(D, 2.0f);
  hc_layernorm_args a{R, D, x.data(), D, y.data(), D, gamma.data(), beta.data(),
                      nullptr, nullptr, 0, 0, 1e-5f, mean.data(), rstd.data()};
  hc_layernorm_fwd(&a, threads(1));
  hc_layernorm_bwd_args b{};
  b.rows = R, b.D = D, b.x = x.data(), b.ldx = D, b.dy = dy.data(), b.lddy = D;
  b.dx = dx.data(), b.lddx = D, b.gamma = gamma.data(), b.beta = beta.data();
  b.mean = mean.data(), b.rstd = rstd.data(), b.dgamma = dg1.data(), b.dbeta = db1.data();
  hc_layernorm_bwd(&b, threads(1));
  b.dgamma = dg2.data(), b.dbeta = db2.data(), b.accumulate = 1;
  hc_layernorm_bwd(&b, threads(1));
  for (int64_t j = 0; j < D; ++j) {
    EXPECT_FLOAT_EQ(dg2[j], dg1[j] + 1.0f);
    EXPECT_FLOAT_EQ(db2[j], db1[j] + 2.0f);
  }
}

// mean and rstd NULL: the backward recomputes the forward's float statistics
// a chunk of rows at a time, so dx equals the backward given the forward's
// mean and rstd bit for bit; dshift/dscale (each group's float sum over its
// rows in order) are the same bits at 1, 2 and 3 threads. Groups of 1, 5 and
// 300 rows: more and fewer groups than threads, groups across chunks.
TEST(Ops, LayerNormRecomputedStatsEqualTheForwards) {
  for (int32_t isa : availableIsas()) {
    IsaScope s(isa);
    for (int64_t D : {1, 17, 384, 1153})
      for (int64_t gr : {1, 5, 300}) {
        const int64_t R = gr == 300 ? 600 : 37, G = (R + gr - 1) / gr, ld = D + 3;
        std::vector<float> x = randomVec(R * ld, 21, -2, 3), dy = randomVec(R * ld, 22);
        std::vector<float> shift = randomVec(G * D, 23), scale = randomVec(G * D, 24);
        std::vector<float> y(R * ld), mean = nanVec(R), rstd = nanVec(R);
        hc_layernorm_args a{};
        a.rows = R, a.D = D, a.x = x.data(), a.ldx = ld, a.y = y.data(), a.ldy = ld;
        a.shift = shift.data(), a.scale = scale.data(), a.group_rows = gr, a.ld_mod = D;
        a.eps = 1e-6f, a.mean = mean.data(), a.rstd = rstd.data();
        hc_layernorm_fwd(&a, threads(2));
        std::vector<float> dx[4], dsh[4], dsc[4];
        for (int run = 0; run < 4; ++run) {  // given stats at 2 threads; recomputed at 1, 2, 3
          dx[run] = nanVec(R * ld), dsh[run] = nanVec(G * D), dsc[run] = nanVec(G * D);
          hc_layernorm_bwd_args b{};
          b.rows = R, b.D = D, b.x = x.data(), b.ldx = ld, b.dy = dy.data(), b.lddy = ld;
          b.dx = dx[run].data(), b.lddx = ld, b.shift = a.shift, b.scale = a.scale;
          b.group_rows = gr, b.ld_mod = D, b.dshift = dsh[run].data(), b.dscale = dsc[run].data();
          b.eps = 1e-6;
          if (run == 0)
            b.mean = mean.data(), b.rstd = rstd.data();
          hc_layernorm_bwd(&b, threads(run == 0 ? 2 : run));
        }
        const std::string what = std::string("isa=") + hcrt_isa_name(isa) + " D=" + std::to_string(D) +
                                 " group_rows=" + std::to_string(gr);
        for (int run = 1; run < 4; ++run) {
          for (int64_t r = 0; r < R; ++r)
            ASSERT_EQ(0, std::memcmp(dx[0].data() + r * ld, dx[run].data() + r * ld, D * sizeof(float)))
                << what << " dx row " << r << ", threads " << run;
          EXPECT_EQ(0, std::memcmp(dsh[0].data(), dsh[run].data(), G * D * sizeof(float)))
              << what << " dshift, threads " << run;
          EXPECT_EQ(0, std::memcmp(dsc[0].data(), dsc[run].data(), G * D * sizeof(float)))
              << what << " dscale, threads " << run;
        }
      }
  }
}

namespace {
uint16_t bf16Of(float f) {  // round to nearest even, the kernels' rule
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u)
    return static_cast<uint16_t>((u | 0x00400000u) >> 16);
  return static_cast<uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}
} // namespace

TEST(Ops, Bf16StoredOutputsAreTheRoundedFloat32Results) {
  // hc-bf16-storage's producers: modulated layer norm and tanh GELU with a
  // bf16 y give exactly the float32 kernels' results rounded to nearest
  // even, at any row count, width, group size (pieces restart inside and
  // across modulation groups) and thread count; nothing past y is written.
  for (int32_t isa : availableIsas()) {
    IsaScope s(isa);
    for (auto [R, D, gr] : {std::tuple<int64_t, int64_t, int64_t>{1, 1, 1},
                           {19, 37, 5}, {40, 1153, 7}, {300, 384, 256}, {70, 17, 70}})
      for (int th : {1, 2}) {
        const int64_t ld = D + 3, G = (R + gr - 1) / gr;
        std::vector<float> x = randomVec(R * ld, 21, -2, 3);
        std::vector<float> shift = randomVec(G * D, 22), scale = randomVec(G * D, 23);
        std::vector<float> y = nanVec(R * D);
        std::vector<uint16_t> h(R * D + 8, 0xabcd);
        hc_layernorm_args a{};
        a.rows = R, a.D = D, a.x = x.data(), a.ldx = ld, a.y = y.data(), a.ldy = D;
        a.shift = shift.data(), a.scale = scale.data(), a.group_rows = gr, a.ld_mod = D;
        a.eps = 1e-6f;
        hc_layernorm_fwd(&a, threads(th));
        hc_layernorm_fwd_bf16(&a, h.data(), threads(th));
        int64_t bad = 0;
        for (int64_t i = 0; i < R * D; ++i)
          bad += h[i] != bf16Of(y[i]);
        EXPECT_EQ(0, bad) << "layer norm isa=" << hcrt_isa_name(isa) << " R=" << R
                          << " D=" << D << " gr=" << gr << " threads=" << th;
        EXPECT_EQ(0xabcd, h[R * D]) << "wrote past y";
        const int64_t n = R * ld;
        // GELU's special inputs too, at vector lanes and tails alike.
        const float special[] = {std::nanf(""), -std::nanf(""), INFINITY, -INFINITY,
                                 1e30f, -1e30f, -9.0f, 0.0f, -0.0f, 1e-40f};
        for (int64_t i = 0; i < n; i += 7)
          x[i] = special[(i / 7) % 10];
        std::vector<float> g(n);
        std::vector<uint16_t> gh(n + 8, 0xabcd);
        hc_gelu_tanh_fwd(n, x.data(), g.data(), threads(th));
        hc_gelu_tanh_fwd_bf16(n, x.data(), gh.data(), threads(th));
        bad = 0;
        for (int64_t i = 0; i < n; ++i)
          bad += gh[i] != bf16Of(g[i]);
        EXPECT_EQ(0, bad) << "gelu isa=" << hcrt_isa_name(isa) << " n=" << n;
        EXPECT_EQ(0xabcd, gh[n]) << "wrote past y";
      }
  }
}

TEST(Ops, Bf16CastSpecialValues) {
  // The float32 -> bf16 cast (storeBf16, each ISA's loop): ties to even
  // both ways, the largest floats rounding to infinity, denormals rounded
  // as any other value, NaNs kept NaN (quiet, sign and top payload bits
  // kept) at every position of a vector and its tail.
  const uint32_t special[] = {
      0x00000000u, 0x80000000u, 0x7f800000u, 0xff800000u,  // zeros, infinities
      0x3f808000u, 0x3f818000u, 0xbf808000u, 0x3f808001u,  // ties, just past one
      0x3f807fffu, 0x7f7fffffu, 0xff7fffffu, 0x7f7f8000u,  // largest: -> inf
      0x00000001u, 0x00008000u, 0x00018000u, 0x807fffffu,  // denormals
      0x7fc00000u, 0xffc00001u, 0x7f800001u, 0x7fbfffffu,  // NaNs (signalling too)
      0x3eaaaaabu, 0x4049fdb0u, 0xc2c80000u, 0x00800000u};
  const int64_t nSpecial = sizeof special / sizeof *special;
  // bf16Of's rule itself, on literals: ties to even, overflow to infinity,
  // a denormal rounded (not flushed), a signalling NaN quieted.
  const std::pair<uint32_t, uint16_t> literal[] = {
      {0x3f808000u, 0x3f80}, {0x3f818000u, 0x3f82}, {0x3f808001u, 0x3f81},
      {0x7f7fffffu, 0x7f80}, {0xff7fffffu, 0xff80}, {0x00018000u, 0x0002},
      {0x7f800001u, 0x7fc0}, {0xffc00001u, 0xffc0}, {0x80000000u, 0x8000}};
  for (auto [u, h] : literal) {
    float f;
    std::memcpy(&f, &u, 4);
    EXPECT_EQ(h, bf16Of(f)) << std::hex << u;
  }
  for (int32_t isa : availableIsas()) {
    IsaScope scope(isa);
    for (int64_t n : {int64_t{1}, int64_t{7}, int64_t{17}, nSpecial, int64_t{4099}})
      for (int th : {1, 2}) {
        std::vector<float> x(n);
        for (int64_t i = 0; i < n; ++i) {
          const uint32_t u = special[(i * 7 + n) % nSpecial] ^ static_cast<uint32_t>(i % 3 == 2);
          std::memcpy(&x[i], &u, 4);
        }
        std::vector<uint16_t> y(n + 8, 0xabcd);
        hcrt_tensor in{}, out{};
        in.data = x.data(), in.dtype = HCRT_F32, in.rank = 1, in.shape[0] = n, in.strides[0] = 1;
        out.data = y.data(), out.dtype = HCRT_BF16, out.rank = 1, out.shape[0] = n, out.strides[0] = 1;
        hcrt_attrs attrs{};
        hcrt_op_cast(&in, 1, &out, 1, &attrs, threads(th));
        int64_t bad = 0, first = -1;
        for (int64_t i = 0; i < n; ++i)
          if (y[i] != bf16Of(x[i])) {
            bad += 1;
            first = first < 0 ? i : first;
          }
        EXPECT_EQ(0, bad) << "isa=" << hcrt_isa_name(isa) << " n=" << n << " threads=" << th
                          << " first at " << first;
        EXPECT_EQ(0xabcd, y[n]) << "wrote past y";
      }
  }
}
