#include "VerifyMemory.h"

#include "BufferLiveness.h"
#include "hc/Schedule/Placement.h"

#include "llvm/ADT/DenseSet.h"

using namespace mlir;
namespace hs = hc::schedule;

namespace hc {
namespace {

struct ByteRange {
  llvm::StringRef arena;
  int64_t lo = 0, hi = 0;
  bool overlaps(const ByteRange &o) const {
    return arena == o.arena && lo < o.hi && o.lo < hi;
  }
};

// The bytes a buffer or view covers in its arena: a view's from its first
// to its last element (hc-cftp's pieces of one tier copy do not overlap).
std::optional<ByteRange> rangeOf(Value v) {
  hs::BufferOp b = baseBuffer(v);
  if (!b)
    return std::nullopt;
  int64_t at = b.getOffset() ? static_cast<int64_t>(*b.getOffset()) : 0;
  ByteRange whole{b.getArena(), at, at + hs::byteSize(b.getType())};
  auto type = dyn_cast<MemRefType>(v.getType());
  SmallVector<int64_t> strides;
  int64_t offset = 0;
  if (v == b.getResult() || !type || !hs::stridesOf(type, strides, offset))
    return whole;
  const int64_t elem = hs::byteSize(type) / std::max<int64_t>(1, type.getNumElements());
  int64_t last = offset;
  for (int64_t d = 0; d < type.getRank(); ++d) {
    if (type.getDimSize(d) == 0)
      return whole;
    last += (type.getDimSize(d) - 1) * strides[d];
  }
  return ByteRange{b.getArena(), at + offset * elem, at + (last + 1) * elem};
}

} // namespace

LogicalResult verifyRequestsInFlight(func::FuncOp f) {
  // Requests in flight (the access model's pending accesses): nothing may
  // touch the bytes one writes, nor write the bytes one reads, before its
  // hcs.wait.
  struct InFlight {
    Operation *start;
    Value token;
    SmallVector<ByteRange, 2> reads, writes;
  };
  std::vector<InFlight> inFlight;
  for (Operation &op : f.getBody().front()) {
    if (auto wait = dyn_cast<hs::WaitOp>(op)) {
      llvm::erase_if(inFlight, [&](InFlight &c) { return c.token == wait.getToken(); });
      continue;
    }
    llvm::SmallVector<hs::Access, 4> accesses = hs::accessesOf(&op);
    for (const hs::Access &a : accesses) {
      std::optional<ByteRange> r = rangeOf(a.value);
      if (!r)
        continue;
      for (InFlight &c : inFlight) {
        const ByteRange *touched = nullptr, *overwritten = nullptr;
        for (const ByteRange &w : c.writes)
          if (!touched && r->overlaps(w))
            touched = &w;
        for (const ByteRange &rd : c.reads)
          if (!overwritten && a.write && r->overlaps(rd))
            overwritten = &rd;
        if (!touched && !overwritten)
          continue;
        if (auto start = dyn_cast<hs::AllReduceStartOp>(c.start)) {
          // The bucket is read and written in place: any touch conflicts.
          InFlightDiagnostic d = op.emitError("touches gradient bytes [")
                                 << r->lo << ", " << r->hi << ") of bucket "
                                 << start.getBucketId()
                                 << " while its all-reduce is in flight";
          d.attachNote(start.getLoc()) << "the all-reduce starts here";
          return failure();
        }
        const ByteRange &hit = touched ? *touched : *overwritten;
        InFlightDiagnostic d = op.emitError()
                               << (touched ? "touches the target" : "writes the source")
                               << " ('" << hit.arena << "' bytes [" << hit.lo << ", "
                               << hit.hi << ")) of a tier copy in flight";
        d.attachNote(c.start->getLoc()) << "the copy starts here";
        return failure();
      }
    }
    InFlight started{&op, op.getNumResults() ? op.getResult(0) : Value(), {}, {}};
    for (const hs::Access &a : accesses)
      if (a.pending)
        if (std::optional<ByteRange> r = rangeOf(a.value))
          (a.write ? started.writes : started.reads).push_back(*r);
    if (!started.reads.empty() || !started.writes.empty())
      inFlight.push_back(started);
  }
  if (!inFlight.empty())
    return inFlight.front().start->emitError()
           << (isa<hs::AllReduceStartOp>(inFlight.front().start) ? "all-reduce"
                                                                 : "tier copy")
           << " is never waited for";
  return success();
}

LogicalResult verifyWrittenBeforeRead(func::FuncOp f) {
  llvm::DenseSet<Operation *> written;
  for (Operation &op : f.getBody().front()) {
    llvm::SmallVector<hs::Access, 4> accesses = hs::accessesOf(&op);
    // Writes first: an in-place output may be read by its own call.
    for (const hs::Access &a : accesses)
      if (a.write && !a.completes)
        if (hs::BufferOp b = baseBuffer(a.value))
          written.insert(b);
    for (const hs::Access &a : accesses) {
      hs::BufferOp b = baseBuffer(a.value);
      if (a.completes || !b || !hs::isLivenessArena(b.getArena()) || written.count(b))
        continue;
      InFlightDiagnostic d =
          op.emitError("reads an '")
          << b.getArena()
          << "' buffer before anything writes it (a recomputation or "
             "prefetch must come first)";
      d.attachNote(b.getLoc()) << "the buffer";
      return failure();
    }
  }
  return success();
}

int64_t arenaBytesInMemory(func::FuncOp f) {
  auto memory = f->getAttrOfType<hs::MemoryPlanAttr>(hs::kMemoryAttr);
  auto sizes = f->getAttrOfType<DictionaryAttr>("hcs.arena_bytes");
  if (!memory || !sizes)
    return -1;
  // The budget is memory: arenas of a disk tier do not count, nor those the
  // step allocates only on demand (the gradient accumulator).
  int64_t total = 0;
  for (NamedAttribute a : sizes) {
    if (hs::isOnDemandArena(a.getName().getValue()))
      continue;
    hs::MemoryTierAttr tier = memory.tierOf(a.getName().getValue());
    if (!tier || !tier.isDisk())
      total += cast<IntegerAttr>(a.getValue()).getInt();
  }
  return total;
}

LogicalResult verifyMemoryBudget(func::FuncOp f) {
  auto memory = f->getAttrOfType<hs::MemoryPlanAttr>(hs::kMemoryAttr);
  if (!memory)
    return success();
  auto sizes = f->getAttrOfType<DictionaryAttr>("hcs.arena_bytes");
  if (!sizes)
    return f.emitError("hcs.memory needs hcs.arena_bytes");
  auto bytesOf = [&](StringRef arena) -> int64_t {
    auto v = sizes.getAs<IntegerAttr>(arena);
    return v ? v.getInt() : 0;
  };
  const int64_t total = arenaBytesInMemory(f);
  auto keptAttr = f->getAttrOfType<IntegerAttr>(hs::kKeptWeightsAttr);
  const int64_t kept = keptAttr ? keptAttr.getInt() : 0;
  for (Attribute t : memory.getTiers()) {
    auto tier = cast<hs::MemoryTierAttr>(t);
    int64_t used = 0;
    for (Attribute a : tier.getArenas())
      used += bytesOf(cast<StringAttr>(a).getValue());
    if (tier.getCapacity() > 0 && used > tier.getCapacity())
      return f.emitError("memory tier '")
             << tier.getName() << "' needs " << used << " bytes, over its capacity of "
             << tier.getCapacity();
  }
  int64_t need = total + memory.getReserve() + kept;
  if (memory.getBudget() > 0 && need > memory.getBudget()) {
    InFlightDiagnostic d = f.emitError("the plan needs ")
                           << need << " bytes (arenas " << total << " + reserve "
                           << memory.getReserve();
    if (kept)
      d << " + kept weight panels " << kept;
    return d << "), over the budget of " << memory.getBudget();
  }
  return success();
}

} // namespace hc
