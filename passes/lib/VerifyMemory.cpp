#include "VerifyMemory.h"

#include "BufferLiveness.h"

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

// The bytes a buffer or view covers in its arena (the whole base buffer: a
// conservative bound for views).
std::optional<ByteRange> rangeOf(Value v) {
  hs::BufferOp b = baseBuffer(v);
  if (!b)
    return std::nullopt;
  int64_t at = b.getOffset() ? static_cast<int64_t>(*b.getOffset()) : 0;
  return ByteRange{b.getArena(), at, at + hs::byteSize(b.getType())};
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

LogicalResult verifyMemoryBudget(func::FuncOp f) {
  auto memory = f->getAttrOfType<DictionaryAttr>("hcs.memory");
  if (!memory)
    return success();
  auto sizes = f->getAttrOfType<DictionaryAttr>("hcs.arena_bytes");
  auto tiers = memory.getAs<ArrayAttr>("tiers");
  if (!sizes || !tiers)
    return f.emitError("hcs.memory needs hcs.arena_bytes and a tier list");
  auto bytesOf = [&](StringRef arena) -> int64_t {
    auto v = sizes.getAs<IntegerAttr>(arena);
    return v ? v.getInt() : 0;
  };
  // The budget is memory: arenas of a disk tier do not count.
  llvm::SmallVector<StringRef> onDisk;
  for (Attribute t : tiers)
    if (auto tier = dyn_cast<DictionaryAttr>(t))
      if (auto kind = tier.getAs<StringAttr>("kind"); kind && kind.getValue() == "disk")
        if (auto arenas = tier.getAs<ArrayAttr>("arenas"))
          for (Attribute a : arenas)
            onDisk.push_back(cast<StringAttr>(a).getValue());
  int64_t total = 0;
  for (NamedAttribute a : sizes)
    if (!llvm::is_contained(onDisk, a.getName().getValue()))
      total += cast<IntegerAttr>(a.getValue()).getInt();
  for (Attribute t : tiers) {
    auto tier = dyn_cast<DictionaryAttr>(t);
    auto name = tier ? tier.getAs<StringAttr>("name") : StringAttr();
    auto capacity = tier ? tier.getAs<IntegerAttr>("capacity") : IntegerAttr();
    auto arenas = tier ? tier.getAs<ArrayAttr>("arenas") : ArrayAttr();
    if (!name || !capacity || !arenas)
      return f.emitError("hcs.memory: a tier needs name, capacity and arenas");
    int64_t used = 0;
    for (Attribute a : arenas)
      used += bytesOf(cast<StringAttr>(a).getValue());
    if (capacity.getInt() > 0 && used > capacity.getInt())
      return f.emitError("memory tier '")
             << name.getValue() << "' needs " << used
             << " bytes, over its capacity of " << capacity.getInt();
  }
  auto budget = memory.getAs<IntegerAttr>("budget");
  auto reserve = memory.getAs<IntegerAttr>("reserve");
  int64_t need = total + (reserve ? reserve.getInt() : 0);
  if (budget && budget.getInt() > 0 && need > budget.getInt())
    return f.emitError("the plan needs ")
           << need << " bytes (arenas " << total << " + reserve "
           << (reserve ? reserve.getInt() : 0) << "), over the budget of "
           << budget.getInt();
  return success();
}

} // namespace hc
