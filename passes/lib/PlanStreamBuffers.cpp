// hc-plan-stream-buffers: the liveness arenas ("act", "offload") packed
// again after hc-cftp has cut the step into one stream per cluster.
//
// hc-plan-buffers packs by program order: a buffer may take the bytes of
// one whose last op comes earlier in the body. Once the streams run side
// by side, that reuse is a wait: when the last reader of X (a weight
// gradient on cluster 1 reading every row) and the first writer of Y (a
// layer norm's gradient on cluster 0) are in different streams, cluster 0
// must wait for cluster 1 before it may overwrite X's bytes (S/2 fp32 on 2
// clusters: 140 of 357 waits, most of the time the streams spent waiting).
// hc-cftp therefore orders its streams against buffers laid out apart
// (layOutApart), by data alone, and this pass lays them out again, first
// fit in program order, where a buffer Y may take X's bytes only where
// each stream's part of X is ordered before each stream's part of Y that
// shares bytes with it, by the streams' program order and their
// hcs.cluster_waits (the relation hc-verify-plan's checkClusterStreams
// proves). A stream's part is the byte range its ops touch, so a buffer
// whose rows each stream writes and reads alone (rows-cut ops; the
// backward with partial weight gradients joins the streams nowhere) may
// take an unordered X's bytes where the halves line up: cluster 0's rows
// over cluster 0's. Without a memory budget
// that is all. Where a budget (or a tier's capacity) leaves too little
// room, Y may still take the bytes of an unordered X that is dead in
// program order, and the pass adds the hcs.cluster_wait that orders them;
// if even that overshoots, the plan is hc-plan-buffers' own, with a wait
// for every reuse that needs one.
#include "hc/Passes/Passes.h"

#include "BufferLiveness.h"
#include "CftpAccess.h"
#include "hc/Schedule/Placement.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/DenseMap.h"

#include <algorithm>
#include <limits>
#include <map>
#include <tuple>

using namespace mlir;
namespace hs = hc::schedule;

namespace hc {
#define GEN_PASS_DEF_PLANSTREAMBUFFERS
#include "hc/Passes/Passes.h.inc"

namespace {

constexpr int64_t kNoLimit = std::numeric_limits<int64_t>::max();

// The streams' order: each stream entry's cluster and index, and for each
// entry how many entries of every other stream it runs after (its stream's
// unscoped waits so far; a scoped wait orders one op that may not run).
struct StreamOrder {
  int K = 0;
  llvm::DenseMap<Operation *, std::pair<int, int64_t>> entry;  // op -> (k, idx)
  std::vector<std::vector<Operation *>> ops;                   // [k][idx]
  std::vector<std::vector<std::vector<int64_t>>> after;        // [k][idx][j]

  explicit StreamOrder(func::FuncOp f) {
    for (Operation &op : f.getBody().front())
      if (auto w = dyn_cast<hs::ClusterWaitOp>(op))
        K = std::max<int>(K, std::max(w.getCluster(), w.getSource()) + 1);
      else if (op.hasAttr("cluster"))
        K = std::max<int>(K, hs::clusterOf(&op) + 1);
    ops.resize(K);
    after.resize(K);
    std::vector<std::vector<int64_t>> seen(K, std::vector<int64_t>(K, 0));
    for (Operation &op : f.getBody().front()) {
      if (auto w = dyn_cast<hs::ClusterWaitOp>(op)) {
        if (!w.getOnlyFor()) {
          int64_t &s = seen[w.getCluster()][w.getSource()];
          s = std::max<int64_t>(s, w.getCount());
        }
        continue;
      }
      if (!isa<hs::AccessOpInterface>(op) || isa<hs::LossOp>(op))
        continue;
      const int k = static_cast<int>(hs::clusterOf(&op));
      if (k < 0 || k >= K)
        continue;  // hc-verify-plan names it
      entry[&op] = {k, static_cast<int64_t>(ops[k].size())};
      ops[k].push_back(&op);
      after[k].push_back(seen[k]);
    }
  }
};

// A buffer of one arena: its program-order interval and, per stream, the
// first and last entry touching it (-1: none) and the bytes [lo, hi) of it
// that the stream's entries touch.
struct Use {
  const LiveInterval *iv = nullptr;
  std::vector<int64_t> first, last, lo, hi;
  bool outside = false;  // touched by an op no stream runs (hcs.loss)
  int64_t offset = 0, size = 0, align = 0;
};

// A wait to add: before stream k's entry idx, for `count` entries of j.
struct Wait {
  int k;
  int64_t idx;
  int j;
  int64_t count;
};

class Packer {
public:
  Packer(const StreamOrder &order, std::vector<Use> &uses)
      : order(order), uses(uses), after(order.after) {}

  // First fit in program order below `limit` where it can; `reuseDead`:
  // reuse bytes dead in program order whatever the streams' order, adding
  // waits (hc-plan-buffers' plan). Returns the peak.
  int64_t pack(int64_t limit, bool reuseDead) {
    after = order.after;
    waits.clear();
    int64_t peak = 0;
    for (size_t y = 0; y < uses.size(); ++y) {
      Use &u = uses[y];
      SmallVector<size_t> dead;  // dead in program order, not ordered before
      // Offsets Y must not take: open intervals (lo, hi).
      std::vector<std::pair<int64_t, int64_t>> hard, all;
      for (size_t x = 0; x < y; ++x) {
        const Use &p = uses[x];
        if (p.outside || p.iv->last >= u.iv->first) {
          hard.push_back({p.offset - u.size, p.offset + p.size});
          all.push_back(hard.back());
          continue;
        }
        bool unordered = false;
        forUnorderedParts(p, u, [&](int j, int k) {
          unordered = true;
          all.push_back({p.offset + p.lo[j] - u.hi[k], p.offset + p.hi[j] - u.lo[k]});
        });
        if (unordered)
          dead.push_back(x);
      }
      u.offset = firstFree(all, u.align);
      if (reuseDead || u.offset + u.size > limit) {
        u.offset = firstFree(hard, u.align);
        for (size_t x : dead)
          orderOverlapping(uses[x], u);
      }
      peak = std::max(peak, u.offset + u.size);
    }
    return peak;
  }

  std::vector<Wait> waits;

private:
  const StreamOrder &order;
  std::vector<Use> &uses;
  std::vector<std::vector<std::vector<int64_t>>> after;

  // fn(j, k) for each stream j touching x and k touching y where j's last
  // entry touching x is not ordered before k's first touching y (x dead
  // in program order: within a stream it always is).
  template <typename Fn>
  void forUnorderedParts(const Use &x, const Use &y, Fn fn) const {
    for (int k = 0; k < order.K; ++k) {
      if (y.first[k] < 0)
        continue;
      const std::vector<int64_t> &done = after[k][y.first[k]];
      for (int j = 0; j < order.K; ++j)
        if (j != k && x.last[j] >= 0 && done[j] < x.last[j] + 1)
          fn(j, k);
    }
  }

  // Waits that order x's parts (x dead in program order) before the parts
  // of y placed over them.
  void orderOverlapping(const Use &x, const Use &y) {
    forUnorderedParts(x, y, [&](int j, int k) {
      if (x.offset + x.lo[j] >= y.offset + y.hi[k] || y.offset + y.lo[k] >= x.offset + x.hi[j])
        return;
      waits.push_back({k, y.first[k], j, x.last[j] + 1});
      for (size_t i = static_cast<size_t>(y.first[k]); i < after[k].size(); ++i)
        after[k][i][j] = std::max(after[k][i][j], x.last[j] + 1);
    });
  }

  // The lowest `align`-multiple offset inside none of the open intervals.
  static int64_t firstFree(std::vector<std::pair<int64_t, int64_t>> &forbidden,
                           int64_t align) {
    std::sort(forbidden.begin(), forbidden.end());
    int64_t at = 0;
    for (auto [lo, hi] : forbidden) {
      if (lo >= at)
        break;
      if (hi > at)
        at = (hi + align - 1) / align * align;
    }
    return at;
  }
};

// Bytes `arena` may grow by past hc-plan-buffers' plan (`planned`, every
// liveness arena at its program-order peak): what the budget and its
// tier's capacity leave. kNoLimit without either.
int64_t room(func::FuncOp f, StringRef arena,
             const std::map<std::string, int64_t> &planned) {
  auto memory = f->getAttrOfType<hs::MemoryPlanAttr>(hs::kMemoryAttr);
  if (!memory)
    return kNoLimit;
  auto sizes = f->getAttrOfType<DictionaryAttr>("hcs.arena_bytes");
  auto bytesOf = [&](StringRef a) -> int64_t {
    if (auto it = planned.find(a.str()); it != planned.end())
      return it->second;
    auto v = sizes ? sizes.getAs<IntegerAttr>(a) : IntegerAttr();
    return v ? v.getInt() : 0;
  };
  int64_t left = kNoLimit;
  hs::MemoryTierAttr tier = memory.tierOf(arena);
  if (tier && tier.getCapacity() > 0) {
    int64_t used = 0;
    for (Attribute a : tier.getArenas())
      used += bytesOf(cast<StringAttr>(a).getValue());
    left = std::min(left, tier.getCapacity() - used);
  }
  if (memory.getBudget() > 0 && !(tier && tier.isDisk())) {
    int64_t inMemory = memory.getReserve();
    if (sizes)
      for (NamedAttribute a : sizes) {
        StringRef name = a.getName().getValue();
        hs::MemoryTierAttr t = memory.tierOf(name);
        if (!hs::isOnDemandArena(name) && !(t && t.isDisk()))
          inMemory += bytesOf(name);
      }
    left = std::min(left, memory.getBudget() - inMemory);
  }
  return std::max<int64_t>(0, left);
}

struct PlanStreamBuffersPass
    : impl::PlanStreamBuffersBase<PlanStreamBuffersPass> {
  void runOnOperation() override {
    for (auto f : getOperation().getOps<func::FuncOp>()) {
      StreamOrder order(f);
      if (order.K < 2)
        continue;  // one stream: hc-plan-buffers' plan stands
      std::vector<LiveInterval> all = bufferLiveness(f);
      auto memory = f->getAttrOfType<hs::MemoryPlanAttr>(hs::kMemoryAttr);
      if (memory && !memory.getOffloadDir().empty())
        alignForDirectIO(f, all);
      llvm::DenseMap<Operation *, size_t> index;
      for (size_t i = 0; i < all.size(); ++i)
        index[all[i].buffer] = i;
      // Per buffer: its first and last entry in each stream.
      std::vector<Use> byBuffer(all.size());
      for (size_t i = 0; i < all.size(); ++i) {
        byBuffer[i].iv = &all[i];
        byBuffer[i].first.assign(order.K, -1);
        byBuffer[i].last.assign(order.K, -1);
        byBuffer[i].lo.assign(order.K, std::numeric_limits<int64_t>::max());
        byBuffer[i].hi.assign(order.K, 0);
      }
      // The access model's touches (forEachTouch's), each with the bytes of
      // its buffer it covers (a view's whole span; the buffer where the
      // place is unknown).
      const cftp::Places places;
      for (Operation &op : f.getBody().front())
        for (const hs::Access &a : hs::accessesOf(&op)) {
          hs::BufferOp buf = baseBuffer(a.value);
          auto ix = buf ? index.find(buf) : index.end();
          if (ix == index.end())
            continue;
          Use &u = byBuffer[ix->second];
          auto it = order.entry.find(&op);
          if (it == order.entry.end()) {
            u.outside = true;
            continue;
          }
          auto [k, idx] = it->second;
          if (u.first[k] < 0)
            u.first[k] = idx;
          u.last[k] = std::max(u.last[k], idx);
          cftp::Place place;
          int64_t lo = 0, hi = u.iv->bytes;
          if (places.placeOf(a.value, place) && cftp::rangeOf(place, lo, hi))
            lo -= place.base, hi -= place.base;
          else
            lo = 0, hi = u.iv->bytes;
          u.lo[k] = std::min(u.lo[k], lo);
          u.hi[k] = std::max(u.hi[k], hi);
        }
      // hc-plan-buffers' peaks, the baseline the room is counted from.
      std::map<std::string, int64_t> planned;
      std::map<std::string, std::vector<Use>> arenas;
      for (const char *arena : hs::kArenaNames) {
        if (!hs::isLivenessArena(arena))
          continue;
        std::vector<const LiveInterval *> ivs;
        std::vector<Use> &uses = arenas[arena];
        for (size_t i = 0; i < all.size(); ++i)
          if (all[i].buffer.getArena() == arena && all[i].touched()) {
            ivs.push_back(&all[i]);
            uses.push_back(byBuffer[i]);
          }
        std::vector<int64_t> offsets;
        const int64_t align = arenaAlignment(arena);
        planned[arena] = firstFit(ivs, offsets, align);
        // Program order (firstFit's), then each one's size and alignment.
        std::stable_sort(uses.begin(), uses.end(), [](const Use &a, const Use &b) {
          return a.iv->first < b.iv->first;
        });
        for (Use &u : uses) {
          u.size = (u.iv->bytes + align - 1) / align * align;
          u.align = std::max(align, u.iv->align);
        }
      }
      std::vector<Wait> waits;
      for (auto &[arena, uses] : arenas) {
        if (uses.empty())
          continue;
        const int64_t left = room(f, arena, planned);
        const int64_t limit =
            left == kNoLimit ? kNoLimit : planned[arena] + left;
        Packer packer(order, uses);
        int64_t peak = packer.pack(limit, false);
        if (peak > limit)
          peak = packer.pack(limit, true);
        for (Use &u : uses)
          hs::BufferOp(u.iv->buffer).setOffsetAttr(
              IntegerAttr::get(IntegerType::get(f.getContext(), 64), u.offset));
        planned[arena] = peak;
        setArenaBytes(f, arena, peak);
        waits.insert(waits.end(), packer.waits.begin(), packer.waits.end());
      }
      // One wait per stream entry and other stream: the largest count.
      std::sort(waits.begin(), waits.end(), [](const Wait &a, const Wait &b) {
        return std::tie(a.k, a.idx, a.j, b.count) < std::tie(b.k, b.idx, b.j, a.count);
      });
      waits.erase(std::unique(waits.begin(), waits.end(),
                              [](const Wait &a, const Wait &b) {
                                return a.k == b.k && a.idx == b.idx && a.j == b.j;
                              }),
                  waits.end());
      for (const Wait &w : waits) {
        OpBuilder b(order.ops[w.k][w.idx]);
        b.create<hs::ClusterWaitOp>(order.ops[w.k][w.idx]->getLoc(),
                                    b.getI64IntegerAttr(w.k), b.getI64IntegerAttr(w.j),
                                    b.getI64IntegerAttr(w.count), StringAttr());
      }
      if (auto cftp = f->getAttrOfType<DictionaryAttr>("hcs.cftp")) {
        NamedAttrList attrs(cftp);
        Builder b(f.getContext());
        if (auto n = cftp.getAs<IntegerAttr>("waits"))
          attrs.set("waits", b.getI64IntegerAttr(n.getInt() + static_cast<int64_t>(waits.size())));
        attrs.set("reuse_waits", b.getI64IntegerAttr(static_cast<int64_t>(waits.size())));
        f->setAttr("hcs.cftp", attrs.getDictionary(f.getContext()));
      }
    }
  }
};

} // namespace
} // namespace hc
