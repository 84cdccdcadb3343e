// Lending a waiting CFTP stream's thread to the stream it waits for
// (hcrt_help_cluster). A GEMM that a cluster's stream runs on its single
// thread offers the row blocks of each (column panel, k block) step on the
// cluster's board, and claims them itself one at a time; a thread of
// another stream that reaches a wait for this cluster claims blocks too and
// runs them against the same packed panel with its own packed A. A block's
// products do not depend on the thread (the same panel, the same A, the
// same kernel), and a step opens only when every block of the previous one
// is done, so C's k blocks stay in order: the same bits as the owner alone.
// CFTP's streams wait for each other where one got ahead (on the shared
// 2-core Zen 3, 3.4-5.3% of an S/2 step summed over the streams): that
// time now goes into the lagging stream's GEMM.
#include "gemm_driver.h"

#include <atomic>
#include <cstdint>

namespace hc::rt {
namespace {

thread_local int tCluster = -1;

// state: the step's generation (24 bits), its row blocks (20) and the next
// unclaimed block (20). Blocks 0: nothing offered.
constexpr int kFieldBits = 20;
constexpr uint64_t kField = (uint64_t{1} << kFieldBits) - 1;
constexpr uint64_t kGenMask = (uint64_t{1} << 24) - 1;
uint64_t packState(uint64_t gen, int64_t blocks) {
  return (gen & kGenMask) << (2 * kFieldBits) |
         static_cast<uint64_t>(blocks) << kFieldBits;
}
int64_t blocksOf(uint64_t s) { return static_cast<int64_t>((s >> kFieldBits) & kField); }
int64_t nextOf(uint64_t s) { return static_cast<int64_t>(s & kField); }

struct alignas(64) Board {
  std::atomic<uint64_t> state{0};
  alignas(64) std::atomic<int64_t> done{0};
  // The offered GEMM and step: written by the owner before it publishes a
  // step's state, read by a helper only while it holds a claim of that
  // step (the owner rewrites them only when every claim is done).
  const GemmKernel *k = nullptr;
  const gemm_driver::Blocking *bl = nullptr;
  const gemm_driver::Problem *p = nullptr;
  const gemm_driver::BlockPlan *plan = nullptr;
  gemm_driver::PanelStep step{};
};
constexpr int kBoards = 256;
Board gBoards[kBoards];

void runClaimed(const Board &b, int64_t i, float *Ap) {
  const gemm_driver::Problem &p = *b.p;
  const gemm_driver::BlockPlan &plan = *b.plan;
  const int64_t ic = i * plan.mcBlk;
  gemm_driver::runRowBlock(*b.k, *b.bl, p, plan, b.step, ic,
                           std::min<int64_t>(plan.mcBlk, p.M - ic), p.M, Ap, nullptr);
}

} // namespace

void setHelpCluster(int k) { tCluster = k; }
int helpCluster() { return tCluster; }

namespace gemm_driver {

void runBlockOffered(const GemmKernel &k, const Blocking &bl, const Problem &p,
                     int cluster) {
  const BlockPlan plan = planBlock(k, bl, p, p.M, p.N);
  const int64_t blocks = (p.M + plan.mcBlk - 1) / plan.mcBlk;
  // A streamed B and converted slivers tie blocks to the owner's buffers.
  if (cluster < 0 || cluster >= kBoards || p.K == 0 || plan.streamB ||
      plan.convertB || blocks < 2 || blocks >= static_cast<int64_t>(kField / 2)) {
    runBlock(k, bl, p, 0, p.M, 0, p.N);
    return;
  }
  Board &b = gBoards[cluster];
  const int NR = k.nr;
  float *Ap = scratch(2, plan.mcMax * plan.kcMax + 64);
  float *Bp = scratch(3, plan.ncMax * plan.kcMax + 64);
  uint64_t gen = b.state.load(std::memory_order_relaxed) >> (2 * kFieldBits);
  b.k = &k, b.bl = &bl, b.p = &p, b.plan = &plan;
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
      b.step = PanelStep{jc, nc, nFull, pc, kc, pc == 0, pc + kc >= p.K, panel};
      b.done.store(0, std::memory_order_relaxed);
      b.state.store(packState(++gen, blocks), std::memory_order_release);
      for (;;) {
        const int64_t i = nextOf(b.state.fetch_add(1, std::memory_order_acq_rel));
        if (i >= blocks)
          break;
        runClaimed(b, i, Ap);
        b.done.fetch_add(1, std::memory_order_release);
      }
      // a helper's last block, and with it its reads of the step
      spinUntil(b.done, blocks);
    }
  }
  b.state.store(packState(++gen, 0), std::memory_order_release);
}

} // namespace gemm_driver
} // namespace hc::rt

extern "C" int32_t hcrt_help_cluster(int32_t k) {
  using namespace hc::rt;
  if (k < 0 || k >= kBoards || k == tCluster)
    return 0;
  Board &b = gBoards[k];
  const uint64_t seen = b.state.load(std::memory_order_relaxed);
  if (nextOf(seen) >= blocksOf(seen))
    return 0;
  const uint64_t s = b.state.fetch_add(1, std::memory_order_acq_rel);
  const int64_t i = nextOf(s);
  if (i >= blocksOf(s))
    return 0;
  runClaimed(b, i, scratch(2, b.plan->mcMax * b.plan->kcMax + 64));
  b.done.fetch_add(1, std::memory_order_release);
  return 1;
}
