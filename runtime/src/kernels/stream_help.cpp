// Lending a waiting CFTP stream's thread to the stream it waits for
// (hcrt_help_cluster). A kernel that a cluster's stream runs on its single
// thread offers its independent pieces on the cluster's board (runOffered)
// and claims them itself one at a time; a thread of another stream that
// reaches a wait for this cluster claims pieces too and runs them. A
// piece's result does not depend on the thread that runs it, so the bits
// are the owner's alone. Offered: each (column panel, k block) step of a
// GEMM, its row blocks against the one packed panel (a step opens when
// every block of the last is done, so C's k blocks stay in order), and
// flash attention's (batch, head) pairs. CFTP's streams wait for each other
// where one got ahead (on the shared 2-core Zen 3, 3.4-5.3% of an S/2 step
// summed over the streams): that time now goes into the lagging stream.
#include "gemm_driver.h"
#include "hc/base/settings.h"

#include <atomic>
#include <cstdint>

namespace hc::rt {
namespace {

thread_local int tCluster = -1;

// state: the offer's generation (24 bits), its pieces (20) and the next
// unclaimed one (20). Pieces 0: nothing offered.
constexpr int kFieldBits = 20;
constexpr uint64_t kField = (uint64_t{1} << kFieldBits) - 1;
constexpr uint64_t kGenMask = (uint64_t{1} << 24) - 1;
uint64_t packState(uint64_t gen, int64_t pieces) {
  return (gen & kGenMask) << (2 * kFieldBits) |
         static_cast<uint64_t>(pieces) << kFieldBits;
}
uint64_t genOf(uint64_t s) { return s >> (2 * kFieldBits); }
int64_t piecesOf(uint64_t s) { return static_cast<int64_t>((s >> kFieldBits) & kField); }
int64_t nextOf(uint64_t s) { return static_cast<int64_t>(s & kField); }

struct alignas(64) Board {
  std::atomic<uint64_t> state{0};
  alignas(64) std::atomic<int64_t> done{0};
  // The offer: written by the owner before it publishes the state, read
  // by a helper only while it holds a claim (the owner moves on only when
  // every claim is done).
  PieceFn fn = nullptr;
  const void *ctx = nullptr;
};
constexpr int kBoards = 256;
Board gBoards[kBoards];

} // namespace

void setHelpCluster(int k) { tCluster = k; }

bool offersPieces() {
  return tCluster >= 0 && tCluster < kBoards &&
         settingInt(hc::rt::Setting::CftpHelp, 1) != 0;
}

void runOffered(int64_t n, PieceFn fn, const void *ctx) {
  // Claims overshoot the count by at most one per thread: room for that.
  if (n < 2 || n >= static_cast<int64_t>(kField / 2) || !offersPieces()) {
    for (int64_t i = 0; i < n; ++i)
      fn(ctx, i);
    return;
  }
  Board &b = gBoards[tCluster];
  const uint64_t gen = genOf(b.state.load(std::memory_order_relaxed)) + 1;
  b.fn = fn, b.ctx = ctx;
  b.done.store(0, std::memory_order_relaxed);
  b.state.store(packState(gen, n), std::memory_order_release);
  for (;;) {
    const int64_t i = nextOf(b.state.fetch_add(1, std::memory_order_acq_rel));
    if (i >= n)
      break;
    fn(ctx, i);
    b.done.fetch_add(1, std::memory_order_release);
  }
  spinUntil(b.done, n);  // a helper's last piece, and its reads of the offer
  b.state.store(packState(gen + 1, 0), std::memory_order_release);
}

namespace gemm_driver {

namespace {
struct OfferedStep {
  const GemmKernel *k;
  const Blocking *bl;
  const Problem *p;
  const BlockPlan *plan;
  PanelStep step;
};
void runOfferedRowBlock(const void *ctx, int64_t i) {
  const OfferedStep &o = *static_cast<const OfferedStep *>(ctx);
  const int64_t ic = i * o.plan->mcBlk;
  float *Ap = scratch(2, o.plan->mcMax * o.plan->kcMax + 64);
  runRowBlock(*o.k, *o.bl, *o.p, *o.plan, o.step, ic,
              std::min<int64_t>(o.plan->mcBlk, o.p->M - ic), o.p->M, Ap, nullptr);
}
} // namespace

void runBlockOffered(const GemmKernel &k, const Blocking &bl, const Problem &p) {
  const BlockPlan plan = planBlock(k, bl, p, p.M, p.N);
  // A streamed B and converted slivers tie row blocks to the owner's buffers.
  if (p.K == 0 || plan.streamB || plan.convertB) {
    runBlock(k, bl, p, 0, p.M, 0, p.N);
    return;
  }
  const int NR = k.nr;
  const int64_t blocks = (p.M + plan.mcBlk - 1) / plan.mcBlk;
  float *Bp = scratch(3, plan.ncMax * plan.kcMax + 64);
  OfferedStep o{&k, &bl, &p, &plan, {}};
  for (int64_t jc = 0; jc < p.N; jc += plan.ncBlk) {
    const int64_t nc = std::min<int64_t>(plan.ncBlk, p.N - jc);
    const int64_t nFull = plan.directB ? nc / NR * NR : 0;  // slivers in place
    for (int64_t pc = 0; pc < p.K; pc += bl.kc) {
      const int64_t kc = std::min<int64_t>(bl.kc, p.K - pc);
      const float *panel = Bp;
      if (p.bConstant)
        panel = constantPanel(k, p.B, p.ldb, p.transB, pc, kc, jc, nc, Bp);
      else if (nFull < nc)
        packB(k, p, pc, kc, jc + nFull, nc - nFull, Bp);
      o.step = PanelStep{jc, nc, nFull, pc, kc, pc == 0, pc + kc >= p.K, panel};
      runOffered(blocks, runOfferedRowBlock, &o);
    }
  }
}

} // namespace gemm_driver
} // namespace hc::rt

extern "C" int32_t hcrt_help_cluster(int32_t k) {
  using namespace hc::rt;
  if (k < 0 || k >= kBoards || k == tCluster)
    return 0;
  Board &b = gBoards[k];
  const uint64_t seen = b.state.load(std::memory_order_relaxed);
  if (nextOf(seen) >= piecesOf(seen))
    return 0;
  const uint64_t s = b.state.fetch_add(1, std::memory_order_acq_rel);
  const int64_t i = nextOf(s);
  if (i >= piecesOf(s))
    return 0;
  b.fn(b.ctx, i);
  b.done.fetch_add(1, std::memory_order_release);
  return 1;
}
