#include "hc/Schedule/ScheduleOps.h"
#include "hc/Schedule/KernelRegistry.h"
#include "hc/abi/step_program.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "mlir/IR/OpImplementation.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace hc::schedule;

#include "hc/Schedule/ScheduleDialect.cpp.inc"

#define GET_TYPEDEF_CLASSES
#include "hc/Schedule/ScheduleTypes.cpp.inc"

#define GET_ATTRDEF_CLASSES
#include "hc/Schedule/ScheduleAttrs.cpp.inc"

void HCSDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "hc/Schedule/ScheduleOps.cpp.inc"
      >();
  addTypes<
#define GET_TYPEDEF_LIST
#include "hc/Schedule/ScheduleTypes.cpp.inc"
      >();
  addAttributes<
#define GET_ATTRDEF_LIST
#include "hc/Schedule/ScheduleAttrs.cpp.inc"
      >();
}

bool hc::schedule::stridesOf(MemRefType type, SmallVectorImpl<int64_t> &strides,
                             int64_t &offset) {
  return succeeded(getStridesAndOffset(type, strides, offset)) &&
         !ShapedType::isDynamic(offset) &&
         llvm::none_of(strides, ShapedType::isDynamic);
}

bool hc::schedule::isContiguous(MemRefType type) {
  SmallVector<int64_t> strides;
  int64_t offset;
  if (!stridesOf(type, strides, offset) || offset != 0)
    return false;
  int64_t expected = 1;
  for (int64_t d = type.getRank() - 1; d >= 0; --d) {
    if (type.getDimSize(d) != 1 && strides[d] != expected)
      return false;
    expected *= type.getDimSize(d);
  }
  return true;
}

int64_t hc::schedule::byteSize(MemRefType type) {
  int64_t bits = type.getElementType().getIntOrFloatBitWidth();
  return type.getNumElements() * std::max<int64_t>(1, bits / 8);
}

LogicalResult CallOp::verify() {
  // The runtime's own registry (a plain X-macro file, no MLIR in it), so the
  // compiler and libhcrt cannot disagree on which kernels exist and which
  // attributes they read.
  const KernelInfo *k = KernelRegistry::active().lookup(getKernel());
  if (!k)
    return emitOpError("unknown runtime kernel '")
           << getKernel() << "' (abi/include/hc/abi/kernels.def lists them)";
  if (auto only = getOnlyIf(); only && callConditionOf(*only) <= HCRT_RUNS_ALWAYS)
    return emitOpError("only_if '") << *only << "': a call runs only if \"reduced\" or \"local\"";
  // bf16 buffers only where the kernel reads or writes them.
  for (bool output : {false, true}) {
    ValueRange operands = output ? ValueRange(getOuts()) : ValueRange(getIns());
    for (auto [i, v] : llvm::enumerate(operands))
      if (cast<MemRefType>(v.getType()).getElementType().isBF16() &&
          !KernelRegistry::bf16Allowed(*k, getAttrs(), output, i))
        return emitOpError("kernel '")
               << getKernel() << "' " << (output ? "output " : "input ") << i
               << " cannot be bf16 (kernels.def's HCRT_BF16_SLOTS"
               << (output ? "" : ", with precision bf16") << ")";
  }
  return KernelRegistry::verifyAttrs(*k, getAttrs(),
                                     [&] { return emitOpError(); });
}

LogicalResult BufferOp::verify() {
  if (!llvm::is_contained(kArenaNames, getArena()))
    return emitOpError("unknown arena '") << getArena() << "'";
  if (!isContiguous(getType()))
    return emitOpError("a buffer is contiguous; use hcs.view for strides");
  if (getOffset() && *getOffset() < 0)
    return emitOpError("negative offset");
  return success();
}

LogicalResult ViewOp::verify() {
  if (!isContiguous(getSource().getType()))
    return emitOpError("the source of a view must be contiguous");
  auto src = getSource().getType(), dst = getType();
  if (src.getElementType() != dst.getElementType())
    return emitOpError("a view cannot change the element type");
  SmallVector<int64_t> strides;
  int64_t offset;
  if (!stridesOf(dst, strides, offset))
    return emitOpError("the view's layout must be static strides and offset");
  int64_t last = offset;  // furthest element the view touches
  for (int64_t d = 0; d < dst.getRank(); ++d) {
    if (strides[d] < 0)
      return emitOpError("negative strides are not supported");
    last += (dst.getDimSize(d) - 1) * strides[d];
  }
  if (offset < 0 || (dst.getNumElements() > 0 && last >= src.getNumElements()))
    return emitOpError("the view reaches past its source");
  return success();
}

// Source and target of a tier copy: whole buffers of one type, in the arenas
// the direction names, or (hc-cftp cuts a copy by the clusters whose rows it
// moves) hcs.view pieces of such buffers: the same contiguous piece of each,
// so that the copy moves one byte range to the same place in the other.
static LogicalResult verifyTierCopy(Operation *op, Value source, Value target,
                                    StringRef from, StringRef to) {
  auto baseOf = [](Value v) -> Value {
    if (auto view = v.getDefiningOp<ViewOp>())
      return view.getSource();
    return v;
  };
  auto arenaOf = [](Value v) -> std::optional<StringRef> {
    if (auto b = v.getDefiningOp<BufferOp>())
      return b.getArena();
    return std::nullopt;
  };
  Value sourceBase = baseOf(source), targetBase = baseOf(target);
  if (source.getType() != target.getType())
    return op->emitOpError("source and target must have one type");
  if (arenaOf(sourceBase) != std::optional<StringRef>(from) ||
      arenaOf(targetBase) != std::optional<StringRef>(to))
    return op->emitOpError("copies a whole '")
           << from << "' buffer to a whole '" << to << "' buffer";
  if (sourceBase != source || targetBase != target) {
    // A piece: the same contiguous elements of two buffers of one type.
    auto type = cast<MemRefType>(source.getType());
    SmallVector<int64_t> strides;
    int64_t offset = 0, expected = 1;
    if (sourceBase == source || targetBase == target ||
        sourceBase.getType() != targetBase.getType() || !stridesOf(type, strides, offset))
      return op->emitOpError("copies a piece of a buffer, but not to the same piece of "
                             "a buffer of its type");
    for (int64_t d = type.getRank() - 1; d >= 0; --d) {
      if (type.getDimSize(d) != 1 && strides[d] != expected)
        return op->emitOpError("copies a piece that is not contiguous");
      expected *= type.getDimSize(d);
    }
  }
  return success();
}

LogicalResult OffloadOp::verify() {
  return verifyTierCopy(*this, getSource(), getTarget(), "act", "offload");
}

LogicalResult PrefetchOp::verify() {
  return verifyTierCopy(*this, getSource(), getTarget(), "offload", "act");
}

LogicalResult ClusterWaitOp::verify() {
  if (getCluster() < 0 || getSource() < 0)
    return emitOpError("clusters are numbered from 0");
  if (getCluster() == getSource())
    return emitOpError("a cluster cannot wait for itself");
  if (getCount() < 1)
    return emitOpError("count must be at least 1");
  if (auto only = getOnlyFor(); only && waitScopeOf(*only) == HCRT_WAIT_ORDERS_ALL)
    return emitOpError("only_for '") << *only
           << "': a scoped wait orders an allreduce_start, a grad_accumulate call or "
              "a conditional call (call_if_reduced, call_if_local)";
  return success();
}

int32_t hc::schedule::waitScopeOf(StringRef onlyFor) {
  if (onlyFor == "allreduce_start")
    return HCRT_WAIT_ORDERS_ALLREDUCE;
  if (onlyFor == "grad_accumulate")
    return HCRT_WAIT_ORDERS_ACCUMULATE;
  if (onlyFor == "call_if_reduced")
    return HCRT_WAIT_ORDERS_IF_REDUCED;
  if (onlyFor == "call_if_local")
    return HCRT_WAIT_ORDERS_IF_LOCAL;
  return HCRT_WAIT_ORDERS_ALL;
}

int32_t hc::schedule::callConditionOf(StringRef onlyIf) {
  if (onlyIf.empty())
    return HCRT_RUNS_ALWAYS;
  if (onlyIf == "reduced")
    return HCRT_RUNS_IF_REDUCED;
  if (onlyIf == "local")
    return HCRT_RUNS_IF_LOCAL;
  return -1;
}

StringRef hc::schedule::waitScopeFor(Operation *op) {
  if (isa<AllReduceStartOp>(op))
    return "allreduce_start";
  if (auto call = dyn_cast<CallOp>(op)) {
    if (call.getKernel() == "grad_accumulate")
      return "grad_accumulate";
    if (auto only = call.getOnlyIf())
      return *only == "reduced" ? "call_if_reduced" : "call_if_local";
  }
  return {};
}

int64_t hc::schedule::clusterOf(Operation *op) {
  auto a = op->getAttrOfType<IntegerAttr>("cluster");
  return a ? a.getInt() : 0;
}

//===----------------------------------------------------------------------===//
// AccessOpInterface: what each op reads and writes (AccessInterface.td).
//===----------------------------------------------------------------------===//

#include "hc/Schedule/AccessInterface.cpp.inc"

namespace hc::schedule {

llvm::SmallVector<Access, 4> accessesOf(Operation *op) {
  llvm::SmallVector<Access, 4> out;
  if (auto a = dyn_cast<AccessOpInterface>(op))
    a.getAccesses(out);
  return out;
}

void CallOp::getAccesses(llvm::SmallVectorImpl<Access> &out) {
  for (Value v : getIns())
    out.push_back({v, /*write=*/false});
  for (Value v : getOuts())
    out.push_back({v, /*write=*/true});
}

// The bucket is read and summed in place until the wait.
void AllReduceStartOp::getAccesses(llvm::SmallVectorImpl<Access> &out) {
  out.push_back({getBucket(), /*write=*/false, /*pending=*/true});
  out.push_back({getBucket(), /*write=*/true, /*pending=*/true});
}

// The source is read and the target written until the wait.
void OffloadOp::getAccesses(llvm::SmallVectorImpl<Access> &out) {
  out.push_back({getSource(), /*write=*/false, /*pending=*/true});
  out.push_back({getTarget(), /*write=*/true, /*pending=*/true});
}

void PrefetchOp::getAccesses(llvm::SmallVectorImpl<Access> &out) {
  out.push_back({getSource(), /*write=*/false, /*pending=*/true});
  out.push_back({getTarget(), /*write=*/true, /*pending=*/true});
}

// The accesses of the request it waits for, complete here.
void WaitOp::getAccesses(llvm::SmallVectorImpl<Access> &out) {
  Operation *start = getToken().getDefiningOp();
  auto async = dyn_cast_or_null<AccessOpInterface>(start);
  if (!async)
    return;
  llvm::SmallVector<Access, 4> started;
  async.getAccesses(started);
  for (Access a : started)
    if (a.pending)
      out.push_back({a.value, a.write, /*pending=*/false, /*completes=*/true});
}

void LossOp::getAccesses(llvm::SmallVectorImpl<Access> &out) {
  out.push_back({getValue(), /*write=*/false});
}

} // namespace hc::schedule

#define GET_OP_CLASSES
#include "hc/Schedule/ScheduleOps.cpp.inc"
