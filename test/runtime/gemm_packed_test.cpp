// b_constant GEMM calls (hc_sgemm_args): B's packed panels kept between
// calls must give the same bits as packing them every call, on every ISA
// path, for fp32 and bf16, both layouts of each operand, edge slivers and
// partial k blocks, batches, epilogues and thread counts; and
// hcrt_gemm_forget_packed must drop exactly the panels of the bytes named;
// hcrt_gemm_limit_packed must bound what a range keeps.
#include "kernel_test_util.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <vector>

using namespace hctest;

namespace {

struct Call {
  int64_t M, N, K;
  int ta, tb;
  int64_t batch;
  bool bias, bf16;
  int threads;
};

// C (batch x M x N) for `c` on A, B with b_constant `constant`.
std::vector<float> run(const Call &c, const std::vector<float> &A, const std::vector<float> &B,
                       const std::vector<float> &bias, bool constant) {
  const int64_t lda = (c.ta ? c.M : c.K) + 3, ldb = (c.tb ? c.K : c.N) + 5;
  std::vector<float> C = nanVec(static_cast<size_t>(c.batch * c.M * c.N));
  hc_epilogue epi{};
  epi.flags = HC_EPI_BIAS;
  epi.bias = bias.data();
  hc_sgemm_args g{};
  g.M = c.M, g.N = c.N, g.K = c.K, g.batch = c.batch;
  g.trans_a = c.ta, g.trans_b = c.tb, g.alpha = 0.5f;
  g.A = A.data(), g.lda = lda, g.stride_a = (c.ta ? c.K : c.M) * lda;
  g.B = B.data(), g.ldb = ldb, g.stride_b = (c.tb ? c.N : c.K) * ldb;
  g.C = C.data(), g.ldc = c.N, g.stride_c = c.M * c.N;
  g.epi = c.bias ? &epi : nullptr;
  g.b_constant = constant ? 1 : 0;
  if (c.bf16)
    hc_gemm_bf16(&g, threads(c.threads));
  else
    hc_sgemm(&g, threads(c.threads));
  return C;
}

std::vector<float> operand(const Call &c, bool isA, uint32_t seed) {
  const int64_t rows = isA ? (c.ta ? c.K : c.M) : (c.tb ? c.N : c.K);
  const int64_t ld = isA ? (c.ta ? c.M : c.K) + 3 : (c.tb ? c.K : c.N) + 5;
  return randomVec(static_cast<size_t>(c.batch * rows * ld), seed);
}

size_t bytesOf(const std::vector<float> &v) { return v.size() * sizeof(float); }

}  // namespace

TEST(GemmPacked, KeptPanelsGiveTheSameBits) {
  setenv("HC_GEMM_KC", "40", 1);  // several k blocks, a partial last one
  for (int32_t isa : availableIsas()) {
    IsaScope s(isa);
    // fp32 (-1), then bf16 on each path this CPU has (HC_BF16_*)
    for (int bf16Kernel : {-1, 0, 1, 2, 3}) {
      const bool bf16 = bf16Kernel >= 0;
      if (bf16 && !useBf16Path(bf16Kernel))
        continue;
      for (int ta = 0; ta < 2; ++ta)
        for (int tb = 0; tb < 2; ++tb)
          for (int64_t M : {1, 9, 61, 200})
            for (int64_t N : {5, 48, 145}) {
              const Call c{M, N, 97, ta, tb, M == 9 ? 2 : 1, N == 145, bf16, M >= 61 ? 2 : 1};
              std::vector<float> A = operand(c, true, 11), B = operand(c, false, 12);
              std::vector<float> bias = randomVec(static_cast<size_t>(N), 13);
              const std::vector<float> packed = run(c, A, B, bias, false);
              const std::vector<float> first = run(c, A, B, bias, true);  // packs, keeps
              EXPECT_GT(hcrt_gemm_packed_bytes(), 0u);
              const std::vector<float> kept = run(c, A, B, bias, true);   // reads the copy
              const std::string where = std::string(hcrt_isa_name(isa)) +
                                        (bf16 ? std::string(" bf16 ") + hcrt_bf16_path_name(bf16Kernel) : std::string(" fp32")) +
                                        " M=" + std::to_string(M) + " N=" + std::to_string(N) +
                                        " ta=" + std::to_string(ta) + " tb=" + std::to_string(tb);
              ASSERT_EQ(0, std::memcmp(packed.data(), first.data(), bytesOf(packed))) << where;
              ASSERT_EQ(0, std::memcmp(packed.data(), kept.data(), bytesOf(packed))) << where;
              for (float v : kept)
                ASSERT_FALSE(std::isnan(v)) << where;
              // The copy is what is read: B changed without a forget (a
              // broken contract) still gives the kept panels' result.
              for (float &v : B)
                v = -v;
              const std::vector<float> stale = run(c, A, B, bias, true);
              ASSERT_EQ(0, std::memcmp(kept.data(), stale.data(), bytesOf(kept))) << where;
              // B changes: its owner forgets it first, then the next call
              // packs the new values.
              hcrt_gemm_forget_packed(B.data(), bytesOf(B));
              EXPECT_EQ(0u, hcrt_gemm_packed_bytes()) << where;
              const std::vector<float> fresh = run(c, A, B, bias, false);
              const std::vector<float> again = run(c, A, B, bias, true);
              ASSERT_EQ(0, std::memcmp(fresh.data(), again.data(), bytesOf(fresh))) << where;
              hcrt_gemm_forget_packed(B.data(), bytesOf(B));
            }
    }
    hcrt_set_bf16_native(-1);
    hcrt_set_bf16_amx(-1);
  }
  unsetenv("HC_GEMM_KC");
}

TEST(GemmPacked, SameThreadPartitionAsPackingEachCall) {
  // A small output with a long K and a row-major B (the shape where the
  // cost model may split K, and a K split sums in another order): kept
  // panels must not change the partition, so the bits stay the same.
  for (bool bf16 : {false, true})
    for (int64_t M : {16, 64, 200})
      for (int64_t N : {48, 200, 384, 1500})
        for (int64_t K : {1024, 4096}) {
          const Call c{M, N, K, 0, 0, 1, false, bf16, 2};
          std::vector<float> A = operand(c, true, 41), B = operand(c, false, 42), bias(N, 0.0f);
          const std::vector<float> packed = run(c, A, B, bias, false);
          const std::vector<float> kept = run(c, A, B, bias, true);
          EXPECT_EQ(0, std::memcmp(packed.data(), kept.data(), bytesOf(packed)))
              << (bf16 ? "bf16" : "fp32") << " M=" << M << " N=" << N << " K=" << K;
          hcrt_gemm_forget_packed(B.data(), bytesOf(B));
        }
}

TEST(GemmPacked, ForgetDropsOnlyTheBytesNamed) {
  const Call c{64, 100, 200, 0, 1, 1, false, true, 1};
  std::vector<float> A = operand(c, true, 21), B1 = operand(c, false, 22),
                     B2 = operand(c, false, 23), bias(100, 0.0f);
  run(c, A, B1, bias, true);
  const size_t one = hcrt_gemm_packed_bytes();
  ASSERT_GT(one, 0u);
  run(c, A, B2, bias, true);
  EXPECT_EQ(2 * one, hcrt_gemm_packed_bytes());
  // A range inside B1 (its last row): B1's panels that read it go, B2's stay.
  hcrt_gemm_forget_packed(B1.data() + B1.size() - 10, 4);
  EXPECT_LT(hcrt_gemm_packed_bytes(), 2 * one);
  EXPECT_GE(hcrt_gemm_packed_bytes(), one);
  hcrt_gemm_forget_packed(B1.data(), bytesOf(B1));
  EXPECT_EQ(one, hcrt_gemm_packed_bytes());
  hcrt_gemm_forget_packed(B2.data(), bytesOf(B2));
  EXPECT_EQ(0u, hcrt_gemm_packed_bytes());
}

TEST(GemmPacked, NoRoomPacksEveryCall) {
  // HC_GEMM_PACKED_MB=0: nothing kept, the same bits.
  setenv("HC_GEMM_PACKED_MB", "0", 1);
  const Call c{33, 70, 150, 1, 0, 1, true, true, 2};
  std::vector<float> A = operand(c, true, 31), B = operand(c, false, 32),
                     bias = randomVec(70, 33);
  const std::vector<float> packed = run(c, A, B, bias, false);
  const std::vector<float> constant = run(c, A, B, bias, true);
  EXPECT_EQ(0u, hcrt_gemm_packed_bytes());
  EXPECT_EQ(0, std::memcmp(packed.data(), constant.data(), bytesOf(packed)));
  unsetenv("HC_GEMM_PACKED_MB");
}

TEST(GemmPacked, ALimitedRangeKeepsNoMoreThanItsLimit) {
  // Two weights in one range (a step's parameter arena): room for the
  // first's panels only. The second packs every call, with the same bits;
  // a weight outside the range is not limited; forgetting panels (a host
  // setting a parameter) keeps the limit, unlimit drops it.
  const Call c{48, 96, 160, 0, 1, 1, true, true, 1};
  const int64_t each = static_cast<int64_t>(operand(c, false, 0).size());
  std::vector<float> A = operand(c, true, 41), arena(static_cast<size_t>(2 * each)),
                     outside = operand(c, false, 44), bias = randomVec(96, 45);
  const std::vector<float> w1 = operand(c, false, 42), w2 = operand(c, false, 43);
  std::copy(w1.begin(), w1.end(), arena.begin());
  std::copy(w2.begin(), w2.end(), arena.begin() + each);
  // run() reads B from a vector of its own: these read B in the arena.
  auto runAt = [&](const float *B, bool constant) {
    const int64_t lda = c.K + 3, ldb = c.K + 5;
    std::vector<float> C = nanVec(static_cast<size_t>(c.M * c.N));
    hc_epilogue epi{};
    epi.flags = HC_EPI_BIAS;
    epi.bias = bias.data();
    hc_sgemm_args g{};
    g.M = c.M, g.N = c.N, g.K = c.K, g.batch = 1, g.trans_b = 1, g.alpha = 1.0f;
    g.A = A.data(), g.lda = lda, g.B = B, g.ldb = ldb, g.C = C.data(), g.ldc = c.N;
    g.epi = &epi;
    g.b_constant = constant ? 1 : 0;
    hc_gemm_bf16(&g, threads(1));
    return C;
  };
  runAt(arena.data(), true);
  const size_t one = hcrt_gemm_packed_bytes();  // the same for both weights
  ASSERT_GT(one, 0u);
  hcrt_gemm_forget_packed(arena.data(), bytesOf(arena));
  ASSERT_EQ(0u, hcrt_gemm_packed_bytes());
  hcrt_gemm_limit_packed(arena.data(), bytesOf(arena), one);
  const std::vector<float> first = runAt(arena.data(), true);
  EXPECT_EQ(one, hcrt_gemm_packed_bytes());
  const std::vector<float> second = runAt(arena.data() + each, true);
  EXPECT_EQ(one, hcrt_gemm_packed_bytes()) << "the second weight's panels were kept past the limit";
  EXPECT_EQ(0, std::memcmp(second.data(), runAt(arena.data() + each, false).data(),
                           bytesOf(second)));
  EXPECT_EQ(0, std::memcmp(first.data(), runAt(arena.data(), false).data(), bytesOf(first)));
  runAt(outside.data(), true);
  EXPECT_EQ(2 * one, hcrt_gemm_packed_bytes()) << "a weight outside the range was limited";
  // Forgetting the first weight makes room for the second.
  hcrt_gemm_forget_packed(arena.data(), bytesOf(w1));
  runAt(arena.data() + each, true);
  EXPECT_EQ(2 * one, hcrt_gemm_packed_bytes());
  // Forgetting the whole range keeps its limit.
  hcrt_gemm_forget_packed(arena.data(), bytesOf(arena));
  runAt(arena.data(), true);
  runAt(arena.data() + each, true);
  EXPECT_EQ(2 * one, hcrt_gemm_packed_bytes()) << "forget dropped the range's limit";
  // Unlimited: both kept.
  hcrt_gemm_unlimit_packed(arena.data(), bytesOf(arena));
  runAt(arena.data() + each, true);
  EXPECT_EQ(3 * one, hcrt_gemm_packed_bytes());
  hcrt_gemm_forget_packed(arena.data(), bytesOf(arena));
  hcrt_gemm_forget_packed(outside.data(), bytesOf(outside));
  EXPECT_EQ(0u, hcrt_gemm_packed_bytes());
  // A range overlapping an earlier one replaces its limit.
  hcrt_gemm_limit_packed(arena.data(), bytesOf(arena), 0);
  runAt(arena.data(), true);
  EXPECT_EQ(0u, hcrt_gemm_packed_bytes());
  hcrt_gemm_limit_packed(arena.data() + each, bytesOf(w2), one);
  runAt(arena.data(), true);
  EXPECT_EQ(one, hcrt_gemm_packed_bytes()) << "the first weight is outside every limit now";
  runAt(arena.data() + each, true);
  EXPECT_EQ(2 * one, hcrt_gemm_packed_bytes());
  hcrt_gemm_forget_packed(arena.data(), bytesOf(arena));
  hcrt_gemm_unlimit_packed(arena.data(), bytesOf(arena));
  EXPECT_EQ(0u, hcrt_gemm_packed_bytes());
}
