// Segment recomputation (torch.utils.checkpoint's idea, with the segments
// found by the compiler). hc-automem's greedy (AutoMem.cpp) frees one
// activation at a time and may only recompute from inputs still live, so it
// cannot drop a whole block and rebuild it from the block's input; on
// DiT-XL/2 it kept ~300 MB per sample in RAM and on disk against PyTorch's
// 47 MB with per-block checkpointing (bench/results-xl-capacity-*). This
// pass does what checkpointing does, on any graph:
//   - a cut is a forward call's output X such that everything else the
//     forward still reads after it (X aside) is under 1/kCutShare of X: the
//     step flows through X. In a DiT: each block's input and the output of
//     its attention half, with the conditioning vectors riding along.
//   - a segment is the calls between two cuts. It keeps what crosses its
//     end (the cut and the riders); every other activation it saved for
//     the backward is recomputed: its producing calls, and theirs within
//     the segment, are cloned in order just before the backward first reads
//     any of them, and the backward reads the clones. The clones run the
//     same kernels on the same bytes, so the step's numbers do not change.
//   - the segment ending at the loss is not recomputed: its backward comes
//     right after it.
// The greedy then plans on top (moving the cuts to disk, say); hc-automem
// keeps the cheapest plan that fits among none, all and the fewest
// segments (AutoMem.cpp, planBest).
#include "AutoMemSegments.h"

#include "AutoMemRewrite.h"
#include "BufferLiveness.h"

#include "mlir/IR/IRMapping.h"

#include <set>

using namespace mlir;
namespace hs = hc::schedule;

namespace hc::automem {

namespace {

// An activation the forward writes once, by a call.
struct Activation {
  hs::CallOp producer;
  unsigned produced = 0;     // the producer's position
  unsigned lastForward = 0;  // its last use up to the loss
  unsigned firstBackward = 0;  // its first use after the loss (0: none)
  bool writtenOnce = true;
  int64_t bytes = 0;
};

struct Segment {
  std::vector<unsigned> calls;        // positions of the calls to clone
  std::vector<hs::BufferOp> saved;    // what the backward reads from the clones
  Operation *before = nullptr;        // the backward's first read of `saved`
};

} // namespace

SegmentResult recomputeSegments(func::FuncOp f, const MachineRates &machine,
                                int64_t limit) {
  SegmentResult result;
  hs::LossOp loss;
  f.walk([&](hs::LossOp l) { loss = l; });
  if (!loss)
    return result;
  Uses u = usesOf(f);
  auto lossUses = u.of.find(baseBuffer(loss.getValue()));
  if (lossUses == u.of.end())
    return result;
  const unsigned lossAt = lossUses->second.front();

  llvm::DenseMap<Operation *, Activation> acts;
  for (hs::BufferOp b : u.buffers) {
    auto found = u.of.find(b);
    if (found == u.of.end() || b.getArena() != "act" || b.getName())
      continue;
    const std::vector<unsigned> &at = found->second;
    Activation a;
    a.produced = at.front();
    a.producer = dyn_cast<hs::CallOp>(u.ops[a.produced - 1]);
    if (a.produced > lossAt || !a.producer || !writes(a.producer, b))
      continue;
    a.bytes = hs::byteSize(b.getType());
    for (unsigned p : ArrayRef<unsigned>(at).drop_front())
      a.writtenOnce &= !writes(u.ops[p - 1], b);
    for (unsigned p : at) {
      if (p <= lossAt)
        a.lastForward = p;
      else if (!a.firstBackward)
        a.firstBackward = p;
    }
    acts[b] = a;
  }

  // Bytes the forward still reads after each position, produced at or
  // before it.
  std::vector<int64_t> crossing(lossAt + 2, 0);
  for (auto &[b, a] : acts)
    if (a.lastForward > a.produced) {
      crossing[a.produced] += a.bytes;
      crossing[a.lastForward] -= a.bytes;
    }
  for (unsigned p = 1; p <= lossAt; ++p)
    crossing[p] += crossing[p - 1];
  std::vector<unsigned> cuts;
  for (unsigned p = 1; p < lossAt; ++p) {
    auto call = dyn_cast<hs::CallOp>(u.ops[p - 1]);
    if (!call)
      continue;
    for (Value out : call.getOuts()) {
      auto it = acts.find(baseBuffer(out));
      if (it == acts.end() || it->second.produced != p || it->second.lastForward <= p)
        continue;
      int64_t carried = it->second.bytes;
      if ((crossing[p] - carried) * kCutShare <= carried) {
        cuts.push_back(p);
        break;
      }
    }
  }

  std::vector<Segment> segments;
  unsigned from = 0;  // a segment is the calls in (from, to]
  for (unsigned to : cuts) {
    auto inside = [&](const Activation &a) {
      return a.produced > from && a.produced <= to && a.lastForward <= to;
    };
    Segment s;
    unsigned before = ~0u;
    for (hs::BufferOp b : u.buffers) {  // op order: the rewrite is deterministic
      auto it = acts.find(b);
      if (it != acts.end() && inside(it->second) && it->second.firstBackward) {
        s.saved.push_back(b);
        before = std::min(before, it->second.firstBackward);
      }
    }
    if (s.saved.empty()) {
      from = to;
      continue;
    }
    // The calls to clone: the saved buffers' producers and, within the
    // segment, theirs. Inputs from outside must not change before the clone
    // reads them.
    std::set<unsigned> calls;
    std::vector<Operation *> work(s.saved.begin(), s.saved.end());
    bool ok = true;
    while (ok && !work.empty()) {
      Activation a = acts[work.back()];
      work.pop_back();
      if (!a.writtenOnce || !isPureProducer(a.producer)) {
        ok = false;
        break;
      }
      if (!calls.insert(a.produced).second)
        continue;
      for (Value in : a.producer.getIns()) {
        hs::BufferOp source = baseBuffer(in);
        if (!source)
          continue;  // a host input or a constant
        auto it = acts.find(source);
        if (it != acts.end() && inside(it->second)) {
          work.push_back(source);
          continue;
        }
        for (unsigned p : u.of[source])
          if (p > a.produced && p < before && writes(u.ops[p - 1], source))
            ok = false;
      }
    }
    from = to;
    if (!ok)
      continue;
    s.calls.assign(calls.begin(), calls.end());
    s.before = u.ops[before - 1];
    segments.push_back(std::move(s));
    if (static_cast<int64_t>(segments.size()) >= limit)
      break;
  }

  for (Segment &s : segments) {
    OpBuilder b(s.before);
    IRMapping map;
    for (unsigned p : s.calls) {
      auto call = cast<hs::CallOp>(u.ops[p - 1]);
      // Views of a cloned buffer are rebuilt on the clone.
      for (Value in : call.getIns()) {
        hs::BufferOp source = baseBuffer(in);
        if (!source || map.contains(in) || !map.contains(source.getResult()))
          continue;
        SmallVector<hs::ViewOp> chain;
        for (Value w = in; w.getDefiningOp<hs::ViewOp>(); w = w.getDefiningOp<hs::ViewOp>().getSource())
          chain.push_back(w.getDefiningOp<hs::ViewOp>());
        for (auto it = chain.rbegin(); it != chain.rend(); ++it)
          if (!map.contains(it->getResult()))
            b.clone(**it, map);
      }
      for (Value out : call.getOuts())
        map.map(out, freshBuffer(b, out.getLoc(), cast<MemRefType>(out.getType()), "act")
                         .getResult());
      Operation *clone = b.clone(*call, map);
      clone->setAttr("hcs.recompute", b.getUnitAttr());
      clone->setAttr("hcs.segment", b.getI64IntegerAttr(result.segments));
      result.seconds += callSeconds(call, machine);
      ++result.calls;
    }
    for (hs::BufferOp saved : s.saved)
      redirect(saved, map.lookup(saved.getResult()), s.before);
    ++result.segments;
  }
  return result;
}

} // namespace hc::automem
