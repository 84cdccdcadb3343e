// hc_sgemm's partition over the thread range (gemm.cpp's driver runs each
// thread's block): the cost model of a block, the 2-D grid it chooses, the
// K split for small outputs with a long K, and the B panel the threads of
// one L2 share.
#include "gemm_driver.h"
#include "hc/base/settings.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace hc::rt::gemm_driver {

// Estimated time of one thread's rows x cols block of q, as runBlock
// would walk it (planBlock), in units of one float moved: compute, plus
// the passes over each operand, weighted by `packWeight` (packing reads
// sources the other threads read too). An operand read in place is no
// separate pass, but its source still comes from memory through the
// kernel: counted a quarter of a pass for A (rows the kernel prefetches)
// and half for B (strided rows, a sliver re-read per row block). Measured
// here, 2 threads, interleaved: dW 1152 x 384 x 2048 split by columns (A
// in place for both) 476-483 GFLOP/s against 419-480 by rows (B packed by
// both); 384 x 1536 x 8192 by columns 454 against 422 by rows (B streamed
// by both). The bf16 kernel computes twice as fast (flopsPerCycle) and
// converts an A it reads in place (a whole pass), so its estimates weigh
// passes more: dW 1152 x 384 x 8192 at 2 threads then splits K instead of
// each thread converting all of dY (866-878 -> 922-938 GFLOP/s, builds
// alternated; XL/2's dW within noise; 384 x 384 x 8192, also split,
// 805-921 against 903-922).
double blockCost(const GemmKernel &k, const Blocking &bl, const Problem &q,
                 double rows, double cols, double packWeight) {
  const double fpc = k.flopsPerCycle > 0 ? k.flopsPerCycle
                     : k.nr >= 48          ? 64.0
                     : k.nr >= 16 && k.mr == 6 ? 32.0
                                               : 8.0;
  const double Mt = std::ceil(rows / k.mr) * k.mr;
  const double Nt = std::ceil(cols / k.nr) * k.nr;
  const double K = static_cast<double>(q.K);
  // Planned as if B were packed each call: kept panels must not change
  // the grid or the K split (a K split sums in another order), so that a
  // b_constant call gives the same bits.
  Problem plain = q;
  plain.bConstant = false;
  const BlockPlan b = planBlock(k, bl, plain, static_cast<int64_t>(Mt),
                                static_cast<int64_t>(Nt));
  // A kernel that converts A as it reads it does a whole pass's loads and
  // conversions, only overlapped with its products.
  const double inPlaceA = bl.copiesA ? 1.0 : crowdsSets(q.lda) ? 0.5 : 0.25;
  const double passesA =
      Mt * K * std::ceil(Nt / b.ncBlk) * (b.directA ? inPlaceA : 1.0);
  const double passesB = K * Nt * (b.directB ? 0.5 : 1.0);
  return 2.0 * Mt * Nt * K / fpc + packWeight * (passesA + passesB);
}

// Grid pm x pn over `P` threads minimizing estimated compute + packing time.
void chooseGrid(const GemmKernel &k, const Blocking &bl, const Problem &p,
                int P, int &pm, int &pn) {
  double best = 1e300;
  pm = P;
  pn = 1;
  for (int a = 1; a <= P; ++a) {
    if (P % a)
      continue;
    const int b = P / a;
    const double cost = blockCost(k, bl, p, static_cast<double>(p.M) / a,
                                  static_cast<double>(p.N) / b, 0.7);
    if (cost < best * 0.999) {
      best = cost;
      pm = a;
      pn = b;
    }
  }
}

// Whether splitting K across the P threads (each thread the whole C of its
// K range, partial products summed afterwards in slot order) beats the
// best 2-D grid: for small outputs with a long K (the weight gradients,
// K = tokens), where every grid shape makes each thread pack a whole
// operand that the other threads pack too. Estimated like chooseGrid
// (passes counted double: every thread reads shared sources at once),
// plus the reduction (P + 1 passes over C per thread's rows). Only without
// an epilogue, into a float32 C (the partial sums are added into C).
// HC_GEMM_KSPLIT=0/1 forces it off/on (tuning, tests).
bool chooseKSplit(const GemmKernel &k, const Blocking &bl, const Problem &p,
                  int P, int pm, int pn) {
  if (P <= 1 || p.epi.kind != EpiKind::None || p.epi.cBf16 || p.K < 2 * P * 8)
    return false;
  if (const char *e = hc::rt::setting(hc::rt::Setting::GemmKsplit))
    return std::atoi(e) != 0;
  const double M = static_cast<double>(p.M), N = static_cast<double>(p.N);
  const double grid = blockCost(k, bl, p, M / pm, N / pn, 1.4);
  Problem part = p;
  part.K = (p.K + P - 1) / P;
  const double ks = blockCost(k, bl, part, M, N, 1.4) + 1.5 * M * N * (P + 1) / P;
  return ks < 0.97 * grid;
}

void gemmKSplit(const GemmKernel &k, const Blocking &bl, const Problem &p,
                Range r) {
  const int P = r.count;
  std::vector<float *> part(P, nullptr);
  parallel(r, [&](int i, int) {
    int64_t k0, k1;
    split(p.K, i, P, 8, k0, k1);
    Problem q = p;
    q.K = k1 - k0;
    q.A = advance(p.A, p.aBf16, p.transA ? k0 * p.lda : k0);
    q.B = advance(p.B, p.bBf16, p.transB ? k0 : k0 * p.ldb);
    if (i > 0) {  // own partial product, dense, not read before written
      part[i] = scratch(0, static_cast<std::size_t>(p.M * p.N) + 16);
      q.C = part[i];
      q.ldc = p.N;
      q.epi = EpiCtx();
    }
    q.aSums = nullptr;  // k ranges cut chunks: summed apart below
    if (q.K > 0)
      runBlock(k, bl, q, 0, p.M, 0, p.N);
    else if (i > 0)
      std::memset(part[i], 0, sizeof(float) * p.M * p.N);
    else  // slot 0 owns C: C = beta C (K range empty)
      runBlock(k, bl, q, 0, p.M, 0, p.N);
  });
  parallel(r, [&](int i, int cnt) {
    int64_t m0, m1;
    split(p.M, i, cnt, 1, m0, m1);
    for (int64_t m = m0; m < m1; ++m) {
      float *c = p.C + m * p.ldc;
      for (int t = 1; t < P; ++t) {
        const float *s = part[t] + m * p.N;
        for (int64_t n = 0; n < p.N; ++n)
          c[n] += s[n];
      }
    }
    if (p.aSums && m1 > m0)
      addRowSums(p, m0, m1, 0, p.K);
  });
}

// Whether the threads share each packed B panel (the paper's scheme,
// gemmSharedPanel): where they share an L2 (one cluster), B is packed (not
// read in place or streamed) and C has enough row blocks to balance over
// them. Threads with private L2s each pack their own copy instead: a panel
// shared across cores is read from the other core's cache, and on the Zen 4
// VM (one L2 per core) the shared panel was slower at 2 threads on every
// shape tried (interleaved, GFLOP/s, best of 9: 2048 x 384 x 384 dX 222 /
// 229 static, medians often 175-195 against 220-225; XL/2 M = 2048 bench
// median 0.98x -> 0.99x, S/2 M = 2048 0.93x -> 1.00x of the best library).
// On the Zen 3 VM it had been 0-4% ahead under neighbours' load.
// HC_GEMM_SHARED_B=0 never, 2 wherever B is packed (tuning, tests).
bool useSharedPanel(const BlockPlan &plan, const Problem &p, Range r) {
  const int mode = static_cast<int>(hc::rt::settingInt(hc::rt::Setting::GemmSharedB, 1));
  const int threads = r.count;
  if (mode == 0 || threads <= 1 || plan.streamB || plan.directB || p.bConstant)
    return false;
  const bool sharedL2 =
      hcrt_thread_cluster(r.first) == hcrt_thread_cluster(r.first + r.count - 1);
  const int64_t blocks = (p.M + plan.mcBlk - 1) / plan.mcBlk;
  return mode == 2 || (sharedL2 && blocks >= 4 * threads);
}

// The paper's partition inside one cluster: for each (jc, pc) step the
// team packs B's panel once, together, into one shared buffer (chunks of
// 8 slivers handed out from a counter), then takes C's MC-row blocks from
// another counter, each thread packing its block of A and running it
// against the whole panel. Against one piece per thread (or a few), each
// packing its own copy of B: B packed once, not once per piece, and
// balance at the grain of one row block when a core is slowed by other
// work. Two panel buffers: a thread done with its blocks packs the next
// step's panel while the others finish theirs; a block waits only for its
// own previous step (k blocks of a C tile stay in order, so results do
// not depend on which thread ran what).
void gemmSharedPanel(const GemmKernel &k, const Blocking &bl, const Problem &p,
                     const BlockPlan &plan, Range r) {
  const int NR = k.nr;
  const int64_t panels = (p.N + plan.ncBlk - 1) / plan.ncBlk;
  const int64_t kSteps = (p.K + bl.kc - 1) / bl.kc;
  const int64_t steps = panels * kSteps;
  const int64_t blocks = (p.M + plan.mcBlk - 1) / plan.mcBlk;
  const int64_t chunkCols = 8 * NR;
  const int64_t bufFloats = (plan.ncMax * plan.kcMax + 64 + 15) / 16 * 16;
  float *buf = scratch(3, 2 * bufFloats);
  struct StepSync {
    std::atomic<int64_t> packNext{0}, packDone{0}, blockNext{0}, blockDone{0};
  };
  struct Progress {
    std::atomic<int64_t> stepsDone{0};
  };
  std::vector<StepSync> sync(static_cast<std::size_t>(steps));
  std::vector<Progress> progress(static_cast<std::size_t>(blocks));
  parallel(r, [&](int, int) {
    float *Ap = scratch(2, plan.mcMax * plan.kcMax + 64);
    for (int64_t s = 0; s < steps; ++s) {
      const int64_t jc = s / kSteps * plan.ncBlk, pc = s % kSteps * bl.kc;
      const int64_t nc = std::min<int64_t>(plan.ncBlk, p.N - jc);
      const int64_t kc = std::min<int64_t>(bl.kc, p.K - pc);
      float *Bp = buf + (s % 2) * bufFloats;
      StepSync &st = sync[static_cast<std::size_t>(s)];
      if (s >= 2)  // the buffer's last readers are done
        spinUntil(sync[static_cast<std::size_t>(s - 2)].blockDone, blocks);
      const int64_t chunks = (nc + chunkCols - 1) / chunkCols;
      for (int64_t c; (c = st.packNext.fetch_add(1, std::memory_order_relaxed)) < chunks;) {
        const int64_t j0 = c * chunkCols;
        packB(k, p, pc, kc, jc + j0, std::min<int64_t>(chunkCols, nc - j0),
              Bp + j0 * kc);
        st.packDone.fetch_add(1, std::memory_order_release);
      }
      spinUntil(st.packDone, chunks);
      const PanelStep ps{jc, nc, 0, pc, kc, pc == 0, pc + kc >= p.K, Bp};
      for (int64_t i; (i = st.blockNext.fetch_add(1, std::memory_order_relaxed)) < blocks;) {
        Progress &pr = progress[static_cast<std::size_t>(i)];
        spinUntil(pr.stepsDone, s);
        const int64_t ic = i * plan.mcBlk;
        runRowBlock(k, bl, p, plan, ps, ic, std::min<int64_t>(plan.mcBlk, p.M - ic),
                    p.M, Ap, nullptr);
        pr.stepsDone.store(s + 1, std::memory_order_release);
        st.blockDone.fetch_add(1, std::memory_order_release);
      }
    }
  });
}

void gemm2d(const GemmKernel &k, const Blocking &bl, const Problem &p,
            Range r) {
  if (r.count == 1 && offersPieces()) {  // a CFTP stream of one thread
    runBlockOffered(k, bl, p);
    return;
  }
  int pm = 1, pn = 1;
  if (r.count > 1) {
    chooseGrid(k, bl, p, r.count, pm, pn);
    if (chooseKSplit(k, bl, p, r.count, pm, pn)) {
      gemmKSplit(k, bl, p, r);
      return;
    }
  }
  if (r.count > 1 && p.K > 0 && oneNumaNode(r)) {
    const BlockPlan plan = planBlock(k, bl, p, p.M, p.N);
    if (useSharedPanel(plan, p, r)) {
      gemmSharedPanel(k, bl, p, plan, r);
      return;
    }
  }
  const bool oneCluster =
      hcrt_thread_cluster(r.first) == hcrt_thread_cluster(r.first + r.count - 1);
  if (!oneCluster) {
    parallel(r, [&](int i, int) {
      // Consecutive slots (one cluster) share a column block.
      int in = i / pm, im = i % pm;
      int64_t m0, m1, n0, n1;
      split(p.M, im, pm, k.mr, m0, m1);
      split(p.N, in, pn, k.nr, n0, n1);
      runBlock(k, bl, p, m0, m1, n0, n1);
    });
    return;
  }
  // Inside one cluster: the grid's split dimension cut into up to 4 pieces
  // per thread (none under kMinPiece rows/columns, each piece packs its own
  // copy of the other operand), taken dynamically so a thread slowed by
  // other work on its core does less (fixed pieces: same results). A single
  // thread has no one to balance with: one piece (the extra packing passes
  // of B cost it 1-3% on XL/2's shapes).
  constexpr int64_t kMinPiece = 512;
  int64_t fm = 1, fn = 1;
  if (r.count > 1 && pm >= pn)
    fm = std::max<int64_t>(1, std::min<int64_t>(4, p.M / (pm * kMinPiece)));
  else if (r.count > 1)
    fn = std::max<int64_t>(1, std::min<int64_t>(4, p.N / (pn * kMinPiece)));
  const int64_t gm = pm * fm, gn = pn * fn;
  parallelPieces(r, gm * gn, [&](int64_t piece) {
    int64_t im = piece % gm, in = piece / gm;
    int64_t m0, m1, n0, n1;
    split(p.M, static_cast<int>(im), static_cast<int>(gm), k.mr, m0, m1);
    split(p.N, static_cast<int>(in), static_cast<int>(gn), k.nr, n0, n1);
    runBlock(k, bl, p, m0, m1, n0, n1);
  });
}

} // namespace hc::rt::gemm_driver
