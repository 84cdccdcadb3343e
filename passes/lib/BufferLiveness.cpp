#include "BufferLiveness.h"

#include "hc/Schedule/Placement.h"

#include <algorithm>
#include <map>
#include <string>

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

void setArenaBytes(func::FuncOp f, StringRef arena, int64_t bytes) {
  MLIRContext *ctx = f.getContext();
  NamedAttrList sizes;
  if (auto old = f->getAttrOfType<DictionaryAttr>("hcs.arena_bytes"))
    sizes.append(old.getValue());
  sizes.set(arena, IntegerAttr::get(IntegerType::get(ctx, 64), bytes));
  f->setAttr("hcs.arena_bytes", sizes.getDictionary(ctx));
  auto placement = f->getAttrOfType<hs::PlacementAttr>(hs::kPlacementAttr);
  if (!placement)
    return;
  SmallVector<hs::SliceAttr> mine;
  for (Attribute a : placement.getSlices())
    if (auto s = cast<hs::SliceAttr>(a); s.getArena() == arena)
      mine.push_back(s);
  if (mine.empty())
    return;
  const int64_t page = placement.getPageBytes();
  const int64_t pages = (bytes + page - 1) / page, n = static_cast<int64_t>(mine.size());
  SmallVector<Attribute> slices;
  bool done = false;
  for (Attribute a : placement.getSlices()) {
    if (cast<hs::SliceAttr>(a).getArena() != arena) {
      slices.push_back(a);
      continue;
    }
    if (done)
      continue;
    done = true;
    for (int64_t k = 0; k < n; ++k) {
      const int64_t first = (pages * k + n - 1) / n * page,
                    last = std::min<int64_t>((pages * (k + 1) + n - 1) / n * page, bytes);
      if (last > first)
        slices.push_back(hs::SliceAttr::get(ctx, arena, first, last - first,
                                            mine[k].getOwner(), mine[k].getNuma()));
    }
  }
  f->setAttr(hs::kPlacementAttr,
             hs::PlacementAttr::get(ctx, page, ArrayAttr::get(ctx, slices)));
}

void layOutApart(func::FuncOp f) {
  constexpr int64_t kPage = 4096;
  std::map<std::string, int64_t> end;
  for (LiveInterval &iv : bufferLiveness(f)) {
    if (!hs::isLivenessArena(iv.buffer.getArena()) || !iv.touched())
      continue;
    int64_t &at = end[iv.buffer.getArena().str()];
    iv.buffer.setOffsetAttr(
        IntegerAttr::get(IntegerType::get(f.getContext(), 64), at));
    at += (iv.bytes + kPage - 1) / kPage * kPage;
  }
  for (auto &[arena, bytes] : end)
    setArenaBytes(f, arena, bytes);
}

} // namespace hc
