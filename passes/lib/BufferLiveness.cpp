#include "BufferLiveness.h"

#include <algorithm>
#include <map>

using namespace mlir;
namespace hs = hc::schedule;

namespace hc {

hs::BufferOp baseBuffer(Value v) {
  while (auto view = v.getDefiningOp<hs::ViewOp>())
    v = view.getSource();
  return v.getDefiningOp<hs::BufferOp>();
}

void forEachTouch(func::FuncOp f,
                  llvm::function_ref<void(unsigned, Operation *, hs::BufferOp)> fn) {
  unsigned pos = 0;
  for (Operation &op : f.getBody().front()) {
    ++pos;
    // The access model: an asynchronous op touches its buffers where it
    // starts and again at its wait, so they stay live in between.
    for (const hs::Access &a : hs::accessesOf(&op))
      if (hs::BufferOp buf = baseBuffer(a.value))
        fn(pos, &op, buf);
  }
}

std::vector<LiveInterval> bufferLiveness(func::FuncOp f) {
  llvm::DenseMap<Operation *, size_t> index;  // buffer op -> interval
  std::vector<LiveInterval> out;
  for (auto buf : f.getBody().front().getOps<hs::BufferOp>()) {
    index[buf] = out.size();
    out.push_back(LiveInterval{buf, ~0u, 0, hs::byteSize(buf.getType())});
  }
  forEachTouch(f, [&](unsigned pos, Operation *, hs::BufferOp buf) {
    auto it = index.find(buf);
    if (it == index.end())
      return;
    LiveInterval &iv = out[it->second];
    iv.first = std::min(iv.first, pos);
    iv.last = std::max(iv.last, pos);
  });
  return out;
}

void alignForDirectIO(func::FuncOp f, std::vector<LiveInterval> &intervals) {
  constexpr int64_t kBlock = 4096, kSmallest = 64 * 1024;
  llvm::DenseMap<Operation *, size_t> index;
  for (size_t i = 0; i < intervals.size(); ++i)
    index[intervals[i].buffer] = i;
  forEachTouch(f, [&](unsigned, Operation *op, hs::BufferOp buf) {
    if (!isa<hs::OffloadOp, hs::PrefetchOp>(op) || buf.getArena() != "act")
      return;
    auto it = index.find(buf);
    if (it != index.end() && intervals[it->second].bytes >= kSmallest)
      intervals[it->second].align = kBlock;
  });
}

int64_t firstFit(const std::vector<const LiveInterval *> &intervals,
                 std::vector<int64_t> &offsets, int64_t kAlign) {
  std::vector<size_t> order(intervals.size());
  for (size_t i = 0; i < order.size(); ++i)
    order[i] = i;
  // Sweep in program order: free what died, then first-fit the new ones.
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return intervals[a]->first != intervals[b]->first
               ? intervals[a]->first < intervals[b]->first
               : a < b;
  });
  offsets.assign(intervals.size(), 0);
  std::map<int64_t, int64_t> live;  // offset -> end, of live buffers
  std::multimap<unsigned, std::pair<int64_t, int64_t>> dying;
  int64_t peak = 0;
  for (size_t i : order) {
    const LiveInterval *iv = intervals[i];
    for (auto it = dying.begin(); it != dying.end() && it->first < iv->first;) {
      live.erase(it->second.first);
      it = dying.erase(it);
    }
    const int64_t align = std::max(kAlign, iv->align);
    int64_t size = (iv->bytes + kAlign - 1) / kAlign * kAlign, at = 0;
    for (auto &[start, end] : live) {
      if (start - at >= size)
        break;
      at = (std::max(at, end) + align - 1) / align * align;
    }
    live[at] = at + size;
    dying.emplace(iv->last, std::make_pair(at, at + size));
    peak = std::max(peak, at + size);
    offsets[i] = at;
  }
  return peak;
}

} // namespace hc
