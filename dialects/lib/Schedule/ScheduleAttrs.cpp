// The typed plan attributes (ScheduleAttrs.td): each one's own shape. What
// ties them to each other and to the op is verified in Placement.cpp.
#include "hc/Schedule/ScheduleOps.h"

#include "llvm/ADT/StringSet.h"

using namespace mlir;

namespace hc::schedule {
namespace {

// Every element of `list` is an AttrT; else one error naming `what`.
template <typename AttrT>
LogicalResult allOf(function_ref<InFlightDiagnostic()> emitError, ArrayAttr list,
                    StringRef what, StringRef want) {
  for (Attribute a : list)
    if (!isa<AttrT>(a))
      return emitError() << what << " must hold " << want << ", not " << a;
  return success();
}

} // namespace

LogicalResult TopologyAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                   StringRef, StringRef, int64_t split,
                                   ArrayAttr clusters, ArrayAttr numa) {
  if (split < 0)
    return emitError() << "hcs.topology: split " << split << " is negative";
  return failure(failed(allOf<ClusterAttr>(emitError, clusters, "hcs.topology clusters",
                                           "#hcs.cluster")) ||
                 failed(allOf<NumaNodeAttr>(emitError, numa, "hcs.topology numa",
                                            "#hcs.numa_node")));
}

LogicalResult CoreBudgetAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                     int64_t, StringRef, ArrayAttr ranks) {
  return allOf<RankCoresAttr>(emitError, ranks, "hcs.core_budget ranks", "#hcs.rank_cores");
}

LogicalResult PlacementAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                    int64_t, ArrayAttr slices) {
  return allOf<SliceAttr>(emitError, slices, "hcs.placement slices", "#hcs.slice");
}

LogicalResult MemoryTierAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                     StringRef name, StringRef, int64_t capacity,
                                     ArrayAttr arenas) {
  if (capacity < 0)
    return emitError() << "memory tier '" << name << "': capacity " << capacity
                       << " is negative";
  return allOf<StringAttr>(emitError, arenas, "memory tier arenas", "arena names");
}

bool MemoryTierAttr::holds(StringRef arena) const {
  return llvm::any_of(getArenas(), [&](Attribute a) {
    return llvm::cast<StringAttr>(a).getValue() == arena;
  });
}

LogicalResult MemoryPlanAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                     int64_t budget, int64_t reserve, ArrayAttr tiers,
                                     StringRef, int64_t, FloatAttr, int64_t, FloatAttr,
                                     int64_t, int64_t, int64_t, StringRef) {
  if (budget < 0 || reserve < 0)
    return emitError() << "hcs.memory: budget and reserve must not be negative";
  if (tiers.empty())
    return emitError() << "hcs.memory: no tier";
  if (failed(allOf<MemoryTierAttr>(emitError, tiers, "hcs.memory tiers", "#hcs.tier")))
    return failure();
  llvm::StringSet<> seen;
  for (Attribute t : tiers)
    for (Attribute a : llvm::cast<MemoryTierAttr>(t).getArenas())
      if (!seen.insert(llvm::cast<StringAttr>(a).getValue()).second)
        return emitError() << "hcs.memory: arena '" << llvm::cast<StringAttr>(a).getValue()
                           << "' is in two tiers";
  return success();
}

MemoryTierAttr MemoryPlanAttr::tierOf(StringRef arena) const {
  for (Attribute t : getTiers())
    if (auto tier = llvm::cast<MemoryTierAttr>(t); tier.holds(arena))
      return tier;
  return {};
}

bool MemoryPlanAttr::offloadOnDisk() const {
  MemoryTierAttr t = tierOf("offload");
  return t && t.isDisk();
}

} // namespace hc::schedule
