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

// Values an op writes: a call's outputs, a tier copy's target.
SmallVector<Value> writesOf(Operation &op) {
  if (auto call = dyn_cast<hs::CallOp>(op))
    return SmallVector<Value>(call.getOuts());
  if (auto c = dyn_cast<hs::OffloadOp>(op))
    return {c.getTarget()};
  if (auto c = dyn_cast<hs::PrefetchOp>(op))
    return {c.getTarget()};
  return {};
}

} // namespace

LogicalResult verifyTierCopies(func::FuncOp f) {
  struct InFlight {
    Operation *copy;
    Value token;
    ByteRange source, target;
  };
  std::vector<InFlight> inFlight;
  for (Operation &op : f.getBody().front()) {
    if (auto wait = dyn_cast<hs::WaitOp>(op)) {
      llvm::erase_if(inFlight, [&](InFlight &c) { return c.token == wait.getToken(); });
      continue;
    }
    if (isa<hs::BufferOp, hs::ViewOp, hs::InputOp, hs::ConstantOp>(op))
      continue;
    SmallVector<Value> writes = writesOf(op);
    for (Value v : op.getOperands()) {
      std::optional<ByteRange> r = rangeOf(v);
      if (!r)
        continue;
      bool written = llvm::is_contained(writes, v);
      for (InFlight &c : inFlight) {
        const char *what = r->overlaps(c.target) ? "touches the target"
                           : written && r->overlaps(c.source) ? "writes the source"
                                                              : nullptr;
        if (!what)
          continue;
        InFlightDiagnostic d = op.emitError() << what << " ('" << c.target.arena
                                              << "' bytes [" << c.target.lo << ", "
                                              << c.target.hi
                                              << ")) of a tier copy in flight";
        d.attachNote(c.copy->getLoc()) << "the copy starts here";
        return failure();
      }
    }
    if (auto c = dyn_cast<hs::OffloadOp>(op))
      inFlight.push_back({c, c.getToken(), *rangeOf(c.getSource()),
                          *rangeOf(c.getTarget())});
    if (auto c = dyn_cast<hs::PrefetchOp>(op))
      inFlight.push_back({c, c.getToken(), *rangeOf(c.getSource()),
                          *rangeOf(c.getTarget())});
  }
  if (!inFlight.empty())
    return inFlight.front().copy->emitError("tier copy is never waited for");
  return success();
}

LogicalResult verifyWrittenBeforeRead(func::FuncOp f) {
  llvm::DenseSet<Operation *> written;
  for (Operation &op : f.getBody().front()) {
    if (isa<hs::BufferOp, hs::ViewOp, hs::WaitOp>(op))
      continue;
    SmallVector<Value> writes = writesOf(op);
    for (Value v : writes)
      if (hs::BufferOp b = baseBuffer(v))
        written.insert(b);
    for (Value v : op.getOperands()) {
      hs::BufferOp b = baseBuffer(v);
      if (!b || !hs::isLivenessArena(b.getArena()) || written.count(b))
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
