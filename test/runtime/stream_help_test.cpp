// hcrt_help_cluster: a kernel that one CFTP stream runs on its single
// thread, with another stream's thread running some of its pieces while it
// waits, must give the same bits as the kernel alone, on every ISA path: a
// GEMM (its row blocks) for fp32 and bf16, both layouts of each operand, a
// bias and a GELU epilogue, several column panels and k blocks, and a
// batch; flash attention forward and backward (its (batch, head) pairs);
// row and elementwise kernels (their pieces).
// Outside a running stream nothing is offered.
#include "kernel_test_util.h"
#include "hc/runtime/graph_ops.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <functional>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

using namespace hctest;

namespace {

struct Shared {
  std::function<void(hc_threads)> kernel;
  std::atomic<int> finished{0};
  std::atomic<int64_t> helped{0};
};

void gemm(const hc_sgemm_args *g, bool bf16, hc_threads t) {
  if (bf16)
    hc_gemm_bf16(g, t);
  else
    hc_sgemm(g, t);
}

// Cluster 1 runs the kernel on its one thread; cluster 0 waits for it the
// way the step executor does, helping.
void streams(void *ctx, int32_t k, hc_threads t) {
  Shared &s = *static_cast<Shared *>(ctx);
  if (k == 1) {
    s.kernel(t);
    s.finished.store(1, std::memory_order_release);
    return;
  }
  while (!s.finished.load(std::memory_order_acquire))
    s.helped += hcrt_help_cluster(1);
}

// The kernel run by cluster 1 with cluster 0 helping; the blocks helped.
int64_t helpedRun(std::function<void(hc_threads)> kernel) {
  Shared s;
  s.kernel = std::move(kernel);
  EXPECT_EQ(hcrt_run_clusters(2, streams, &s), 0);
  return s.helped.load();
}

struct Case {
  int64_t M, N, K, batch;
  int ta, tb;
  uint32_t flags;
  bool bf16;
};

// Several row blocks and k blocks for every ISA's blocking, and column
// panels past one where L2 is at most 1 MiB (every dev machine here); edge
// tiles in all.
const Case kCases[] = {
    {401, 1401, 901, 1, 0, 0, 0, false},
    {401, 1401, 901, 1, 1, 0, HC_EPI_BIAS, false},
    {397, 733, 1201, 1, 0, 1, HC_EPI_BIAS, false},
    {311, 1030, 517, 2, 1, 1, 0, false},
    {401, 700, 901, 1, 0, 0, HC_EPI_GELU_TANH | HC_EPI_BIAS, false},
    {401, 1401, 901, 1, 0, 0, HC_EPI_BIAS, true},
    {311, 1030, 517, 1, 1, 0, 0, true},
};

}  // namespace

TEST(StreamHelp, HelpedRowBlocksGiveTheSameBits) {
  const int savedThreads = hcrt_num_threads();
  const int32_t savedIsa = hcrt_isa();
  hcrt_set_num_threads(2);
  ASSERT_EQ(hcrt_num_threads(), 2);
  int64_t helped = 0;
  for (int32_t isa : availableIsas()) {
    hcrt_set_isa(isa);
    for (const Case &c : kCases) {
      const int64_t lda = (c.ta ? c.M : c.K) + 3, ldb = (c.tb ? c.K : c.N) + 5;
      const int64_t aRows = c.ta ? c.K : c.M, bRows = c.tb ? c.N : c.K;
      const std::vector<float> A = randomVec(static_cast<size_t>(c.batch * aRows * lda), 11);
      const std::vector<float> B = randomVec(static_cast<size_t>(c.batch * bRows * ldb), 12);
      const std::vector<float> bias = randomVec(static_cast<size_t>(c.N), 13);
      hc_epilogue epi{};
      epi.flags = c.flags;
      epi.bias = bias.data();
      hc_sgemm_args g{};
      g.M = c.M, g.N = c.N, g.K = c.K, g.batch = c.batch;
      g.trans_a = c.ta, g.trans_b = c.tb, g.alpha = 0.75f, g.beta = 0.0f;
      g.A = A.data(), g.lda = lda, g.stride_a = aRows * lda;
      g.B = B.data(), g.ldb = ldb, g.stride_b = bRows * ldb;
      g.ldc = c.N, g.stride_c = c.M * c.N;
      g.epi = c.flags ? &epi : nullptr;
      std::vector<float> alone = nanVec(static_cast<size_t>(c.batch * c.M * c.N));
      g.C = alone.data();
      gemm(&g, c.bf16, threads(1));
      std::vector<float> shared = nanVec(alone.size());
      g.C = shared.data();
      helped += helpedRun([&](hc_threads t) { gemm(&g, c.bf16, t); });
      EXPECT_EQ(std::memcmp(alone.data(), shared.data(), alone.size() * sizeof(float)), 0)
          << "isa " << isa << " " << c.M << "x" << c.N << "x" << c.K << " ta " << c.ta
          << " tb " << c.tb << " flags " << c.flags << " bf16 " << c.bf16;
    }
  }
  // Timing decides how many blocks the waiting thread gets; over these
  // GEMMs (tens of ms each, the helper spinning all along) some at least.
  EXPECT_GT(helped, 0);
  std::printf("blocks run by the waiting stream: %lld\n", static_cast<long long>(helped));
  hcrt_set_isa(savedIsa);
  hcrt_set_num_threads(savedThreads);
}

// Flash attention's (batch, head) pairs, S/2's layout (q, k, v slices of
// one [B, T, 3, H, Dh] buffer), partial tiles, fp32 and bf16 products.
TEST(StreamHelp, HelpedAttentionPairsGiveTheSameBits) {
  const int savedThreads = hcrt_num_threads();
  const int32_t savedIsa = hcrt_isa();
  hcrt_set_num_threads(2);
  ASSERT_EQ(hcrt_num_threads(), 2);
  const int64_t B = 3, H = 5, T = 77, Dh = 24, HD = H * Dh;
  const std::vector<float> qkv = randomVec(static_cast<size_t>(B * T * 3 * HD), 21);
  const std::vector<float> dout = randomVec(static_cast<size_t>(B * T * HD), 22);
  int64_t helped = 0;
  for (int32_t isa : availableIsas()) {
    hcrt_set_isa(isa);
    for (int bf16 : {0, 1}) {
      auto run = [&](bool help, std::vector<float> &out) {
        std::vector<float> o = nanVec(static_cast<size_t>(B * T * HD)), lse = nanVec(B * H * T),
                           dq = nanVec(o.size()), dk = nanVec(o.size()), dv = nanVec(o.size());
        hc_attention_args a{};
        a.batch = B, a.heads = H, a.Tq = T, a.Tk = T, a.Dh = Dh;
        a.scale = 1.0f / std::sqrt(static_cast<float>(Dh));
        a.q = qkv.data(), a.k = qkv.data() + HD, a.v = qkv.data() + 2 * HD;
        a.q_sb = a.k_sb = a.v_sb = T * 3 * HD;
        a.q_sh = a.k_sh = a.v_sh = Dh;
        a.q_st = a.k_st = a.v_st = 3 * HD;
        a.o = o.data(), a.o_sb = T * HD, a.o_sh = Dh, a.o_st = HD, a.lse = lse.data();
        a.dout = dout.data(), a.do_sb = T * HD, a.do_sh = Dh, a.do_st = HD;
        a.dq = dq.data(), a.dq_sb = T * HD, a.dq_sh = Dh, a.dq_st = HD;
        a.dk = dk.data(), a.dk_sb = T * HD, a.dk_sh = Dh, a.dk_st = HD;
        a.dv = dv.data(), a.dv_sb = T * HD, a.dv_sh = Dh, a.dv_st = HD;
        a.bf16 = bf16;
        auto both = [&](hc_threads t) {
          hc_flash_attention_fwd(&a, t);
          hc_flash_attention_bwd(&a, t);
        };
        if (help)
          helped += helpedRun(both);
        else
          both(threads(1));
        out = o;
        for (const auto *v : {&lse, &dq, &dk, &dv})
          out.insert(out.end(), v->begin(), v->end());
      };
      setenv("HC_ATTENTION_TILE", "32", 1);  // partial tiles: 77 = 32 + 32 + 13
      std::vector<float> alone, shared;
      run(false, alone);
      run(true, shared);
      unsetenv("HC_ATTENTION_TILE");
      ASSERT_EQ(alone.size(), shared.size());
      EXPECT_EQ(std::memcmp(alone.data(), shared.data(), alone.size() * sizeof(float)), 0)
          << "isa " << isa << " bf16 " << bf16;
    }
  }
  EXPECT_GT(helped, 0);
  hcrt_set_isa(savedIsa);
  hcrt_set_num_threads(savedThreads);
}

// The row and elementwise kernels' pieces: the GELU's backward
// (forPieces), the adaLN layer norm's backward with its per-sample
// dshift / dscale sums (parts by sample) and the gated residual's backward
// (a graph op's parFor, per-sample dgate sums); odd sizes.
TEST(StreamHelp, HelpedRowPiecesGiveTheSameBits) {
  const int savedThreads = hcrt_num_threads();
  hcrt_set_num_threads(2);
  ASSERT_EQ(hcrt_num_threads(), 2);
  const int64_t B = 7, N = 263, D = 389, n = B * N * D;
  const std::vector<float> x = randomVec(static_cast<size_t>(n), 31);
  const std::vector<float> dy = randomVec(static_cast<size_t>(n), 32);
  const std::vector<float> mod = randomVec(static_cast<size_t>(B * 2 * D), 33);
  int64_t helped = 0;
  auto run = [&](bool help, std::vector<float> &out) {
    std::vector<float> gx = nanVec(static_cast<size_t>(n)), lx = nanVec(gx.size()),
                       dmod = nanVec(static_cast<size_t>(B * 2 * D)),
                       dh = nanVec(gx.size()), dgate = nanVec(static_cast<size_t>(B * D));
    hc_layernorm_bwd_args l{};
    l.rows = B * N, l.D = D, l.x = x.data(), l.ldx = D, l.dy = dy.data(), l.lddy = D;
    l.dx = lx.data(), l.lddx = D;
    l.shift = mod.data(), l.scale = mod.data() + D, l.group_rows = N, l.ld_mod = 2 * D;
    // dshift and dscale side by side, as the modulation's gradient
    l.dshift = dmod.data(), l.dscale = dmod.data() + D, l.eps = 1e-6;
    auto tensor = [](const float *p, std::initializer_list<int64_t> shape) {
      hcrt_tensor t{};
      t.data = const_cast<float *>(p), t.dtype = HCRT_F32;
      t.rank = static_cast<int32_t>(shape.size());
      int64_t stride = 1, d = t.rank;
      for (auto it = shape.end(); it != shape.begin();) {
        --it, --d;
        t.shape[d] = *it, t.strides[d] = stride, stride *= *it;
      }
      return t;
    };
    const hcrt_tensor ins[3] = {tensor(dy.data(), {B, N, D}), tensor(mod.data(), {B, D}),
                                tensor(x.data(), {B, N, D})};
    hcrt_tensor outs[2] = {tensor(dgate.data(), {B, D}), tensor(dh.data(), {B, N, D})};
    hcrt_attrs none{};
    auto all = [&](hc_threads t) {
      hc_gelu_tanh_bwd(n, x.data(), dy.data(), gx.data(), t);
      hc_layernorm_bwd(&l, t);
      hcrt_op_gated_residual_grad(ins, 3, outs, 2, &none, t);
    };
    if (help)
      helped += helpedRun(all);
    else
      all(threads(1));
    out.clear();
    for (const auto *v : {&gx, &lx, &dmod, &dh, &dgate})
      out.insert(out.end(), v->begin(), v->end());
  };
  std::vector<float> alone, shared;
  run(false, alone);
  for (int r = 0; r < 3; ++r) {
    run(true, shared);
    ASSERT_EQ(alone.size(), shared.size());
    EXPECT_EQ(std::memcmp(alone.data(), shared.data(), alone.size() * sizeof(float)), 0);
  }
  EXPECT_GT(helped, 0);
  hcrt_set_num_threads(savedThreads);
}

TEST(StreamHelp, NothingOfferedOutsideAStream) {
  for (int32_t k : {-1, 0, 1, 5, 100000})
    EXPECT_EQ(hcrt_help_cluster(k), 0) << k;
}
