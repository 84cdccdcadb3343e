// Static buffer plan for the liveness-planned arenas ("act", "offload":
// liveness + first fit, BufferLiveness.h) and its verifier, which
// re-derives liveness and proves the plan sound: in-flight gradient buckets
// and tier copies, reads before writes, and the memory budget
// (VerifyMemory.cpp) included.
#include "hc/Passes/Passes.h"

#include "BufferLiveness.h"
#include "VerifyMemory.h"
#include "CftpAccess.h"
#include "hc/Schedule/Placement.h"

#include "llvm/ADT/DenseMap.h"

#include <map>

using namespace mlir;
namespace hs = hc::schedule;

namespace hc {
#define GEN_PASS_DEF_PLANBUFFERS
#define GEN_PASS_DEF_VERIFYPLAN
#include "hc/Passes/Passes.h.inc"

namespace {

struct PlanBuffersPass : impl::PlanBuffersBase<PlanBuffersPass> {
  void runOnOperation() override {
    for (auto f : getOperation().getOps<func::FuncOp>()) {
      std::vector<LiveInterval> all = bufferLiveness(f);
      auto memory = f->getAttrOfType<hs::MemoryPlanAttr>(hs::kMemoryAttr);
      if (memory && !memory.getOffloadDir().empty())
        alignForDirectIO(f, all);
      Builder b(f.getContext());
      std::map<std::string, int64_t> size;
      // Arenas planned by liveness ("act", and "offload" where hc-automem
      // moved activations to the slower tier): one first fit each.
      for (const char *arena : hs::kArenaNames) {
        if (!hs::isLivenessArena(arena))
          continue;
        std::vector<const LiveInterval *> planned;
        for (LiveInterval &iv : all)
          if (iv.buffer.getArena() == arena && iv.touched())
            planned.push_back(&iv);
        std::vector<int64_t> offsets;
        int64_t peak = firstFit(planned, offsets, arenaAlignment(arena));
        for (size_t i = 0; i < planned.size(); ++i) {
          hs::BufferOp buf = planned[i]->buffer;
          buf.setOffsetAttr(b.getI64IntegerAttr(offsets[i]));
        }
        if (arena == llvm::StringRef("act") || peak > 0)
          size[arena] = peak;
      }
      // Untouched buffers (dead values) still get a valid place.
      for (LiveInterval &iv : all)
        if (hs::isLivenessArena(iv.buffer.getArena()) && !iv.buffer.getOffset())
          iv.buffer.setOffsetAttr(b.getI64IntegerAttr(0));
      // Persistent arenas: from their buffers.
      for (LiveInterval &iv : all)
        if (!hs::isLivenessArena(iv.buffer.getArena()))
          size[iv.buffer.getArena().str()] =
              std::max(size[iv.buffer.getArena().str()],
                       static_cast<int64_t>(*iv.buffer.getOffset()) + iv.bytes);
      SmallVector<NamedAttribute> attrs;
      for (auto &[name, bytes] : size)
        attrs.push_back(b.getNamedAttr(name, b.getI64IntegerAttr(bytes)));
      f->setAttr("hcs.arena_bytes", b.getDictionaryAttr(attrs));
    }
  }
};

// A CFTP plan (hc-cftp): every byte a stream reads or writes after another
// stream wrote it, or writes after another read it, is ordered by an
// hcs.cluster_wait in its stream naming that op or a later one of the other
// stream; and no wait names an op after it in program order (the streams
// could deadlock). Fails naming both ops.
LogicalResult checkClusterStreams(func::FuncOp f) {
  int K = 0;
  for (Operation &op : f.getBody().front()) {
    if (auto w = dyn_cast<hs::ClusterWaitOp>(op))
      K = std::max<int>(K, std::max(w.getCluster(), w.getSource()) + 1);
    else if (op.hasAttr("cluster"))
      K = std::max<int>(K, hs::clusterOf(&op) + 1);
  }
  if (K == 0)
    return success();
  struct Done {
    int64_t idx;
    Operation *op;
    SmallVector<cftp::Access> acc;
  };
  cftp::Places places;
  std::vector<int64_t> count(K, 0);
  std::vector<std::vector<int64_t>> seen(K, std::vector<int64_t>(K, 0));
  // Scoped waits (only_for) order the next entry of their stream alone.
  std::vector<std::vector<int64_t>> scoped(K, std::vector<int64_t>(K, 0));
  std::vector<hs::ClusterWaitOp> scopedWait(K);
  std::vector<std::vector<Done>> log(K);
  for (Operation &op : f.getBody().front()) {
    if (auto w = dyn_cast<hs::ClusterWaitOp>(op)) {
      int k = static_cast<int>(w.getCluster()), j = static_cast<int>(w.getSource());
      if (w.getCount() > count[j])
        return w.emitError("waits for op ")
               << w.getCount() << " of cluster " << j << ", which has only "
               << count[j] << " before this point: the streams could deadlock";
      if (w.getOnlyFor()) {
        scoped[k][j] = std::max<int64_t>(scoped[k][j], w.getCount());
        scopedWait[k] = w;
      } else {
        seen[k][j] = std::max<int64_t>(seen[k][j], w.getCount());
      }
      continue;
    }
    // Stream entries: every op with accesses but hcs.loss (the generated
    // step counts the same entries per cluster).
    if (!isa<hs::AccessOpInterface>(op) || isa<hs::LossOp>(op))
      continue;
    int k = static_cast<int>(hs::clusterOf(&op));
    if (k < 0 || k >= K)
      return op.emitError("cluster ") << k << " outside the plan's " << K;
    if (hs::ClusterWaitOp w = scopedWait[k]) {
      if (*w.getOnlyFor() != hs::waitScopeFor(&op))
        return w.emitError("a wait only for ")
               << *w.getOnlyFor() << " before an op of its stream that is none";
      scopedWait[k] = {};
    }
    SmallVector<cftp::Access> acc;
    places.accessesOf(&op, acc);
    for (int j = 0; j < K; ++j) {
      if (j == k)
        continue;
      const int64_t ordered = std::max(seen[k][j], scoped[k][j]);
      scoped[k][j] = 0;
      for (auto it = log[j].rbegin(); it != log[j].rend(); ++it) {
        if (it->idx + 1 <= ordered)
          break;
        for (const cftp::Access &a : acc)
          for (const cftp::Access &b : it->acc) {
            if (!cftp::conflicts(a, b))
              continue;
            std::string where = cftp::Places::rootName(a.root);
            InFlightDiagnostic d =
                op.emitError("cluster ")
                << k << " " << (a.write ? "writes" : "reads") << " bytes ["
                << std::max(a.lo, b.lo) << ", " << std::min(a.hi, b.hi) << ") of "
                << where << " that cluster " << j << " "
                << (b.write ? "wrote" : "read") << " in its op " << it->idx
                << ", with no hcs.cluster_wait ordering them";
            d.attachNote(it->op->getLoc()) << "the other cluster's op";
            return failure();
          }
      }
    }
    log[k].push_back({count[k]++, &op, std::move(acc)});
  }
  for (hs::ClusterWaitOp w : scopedWait)
    if (w)
      return w.emitError("a wait only for ") << *w.getOnlyFor() << " with no op after it in its stream";
  return success();
}

struct VerifyPlanPass : impl::VerifyPlanBase<VerifyPlanPass> {
  void runOnOperation() override {
    for (auto f : getOperation().getOps<func::FuncOp>()) {
      if (failed(verifyRequestsInFlight(f)) || failed(checkClusterStreams(f)) ||
          failed(verifyWrittenBeforeRead(f)) ||
          failed(verifyMemoryBudget(f)))
        return signalPassFailure();
      auto sizes = f->getAttrOfType<DictionaryAttr>("hcs.arena_bytes");
      std::vector<LiveInterval> all = bufferLiveness(f);
      for (LiveInterval &iv : all) {
        std::optional<int64_t> offset;
        if (auto o = iv.buffer.getOffset())
          offset = static_cast<int64_t>(*o);
        if (!offset) {
          iv.buffer.emitError("buffer has no offset: run hc-plan-buffers");
          return signalPassFailure();
        }
        auto arenaSize = sizes ? sizes.getAs<IntegerAttr>(iv.buffer.getArena())
                               : IntegerAttr();
        if (!arenaSize || *offset + iv.bytes > arenaSize.getInt()) {
          iv.buffer.emitError("buffer [")
              << *offset << ", " << *offset + iv.bytes << ") lies outside arena '"
              << iv.buffer.getArena() << "'";
          return signalPassFailure();
        }
      }
      for (size_t i = 0; i < all.size(); ++i)
        for (size_t j = i + 1; j < all.size(); ++j) {
          LiveInterval &x = all[i], &y = all[j];
          if (!hs::isLivenessArena(x.buffer.getArena()) ||
              x.buffer.getArena() != y.buffer.getArena() || !x.touched() ||
              !y.touched() || x.last < y.first || y.last < x.first)
            continue;
          int64_t xs = static_cast<int64_t>(*x.buffer.getOffset()),
                  ys = static_cast<int64_t>(*y.buffer.getOffset());
          if (xs < ys + y.bytes && ys < xs + x.bytes) {
            InFlightDiagnostic d = x.buffer.emitError(
                "overlaps a buffer that is live at the same time: [")
                << xs << ", " << xs + x.bytes << ") and [" << ys << ", "
                << ys + y.bytes << ")";
            d.attachNote(y.buffer.getLoc()) << "the other buffer";
            return signalPassFailure();
          }
        }
    }
  }
};

} // namespace
} // namespace hc
