// The machine part of a schedule-level plan: three typed attributes
// (ScheduleAttrs.td) on the step function, written by hc-plan-placement
// (passes/lib/PlanPlacement.cpp) and checked by the hcs dialect's attribute
// verifier, each against the ones it depends on.
//
//   hcs.topology    the machine planned for: clusters (cores, home NUMA
//                   node, near NUMA nodes preferred first) and NUMA nodes
//                   (OS index, memory kind, bytes); where it came from.
//   hcs.core_budget per local rank of a node: its clusters (indices into the
//                   topology's), the cores that compute, the cores reserved
//                   for communication progress and copies; and how ranks
//                   divide the node (ranks_per_node, division).
//   hcs.placement   page-aligned slices of the arenas: owner (index among a
//                   rank's clusters; the owner first-touches the slice) and
//                   per local rank its home NUMA node.
//
// The structs are the same data in C++, for the emitter (description JSON,
// first-touch table) and for the later passes (CFTP, AutoMem).
#ifndef HC_SCHEDULE_PLACEMENT_H
#define HC_SCHEDULE_PLACEMENT_H

#include "hc/Schedule/ScheduleOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Operation.h"

#include <string>
#include <vector>

namespace hc::schedule {

inline constexpr const char *kTopologyAttr = "hcs.topology";
inline constexpr const char *kCoreBudgetAttr = "hcs.core_budget";
inline constexpr const char *kPlacementAttr = "hcs.placement";
// hc-automem's plan (#hcs.memory_plan, ScheduleAttrs.td).
inline constexpr const char *kMemoryAttr = "hcs.memory";
// hc-constant-weights' bound on the bytes the GEMMs keep packed for the
// function's constant weights (i64; counted in hcs.memory's budget).
inline constexpr const char *kKeptWeightsAttr = "hcs.kept_weights_bytes";

struct PlanCluster {
  std::vector<int32_t> cores;  // OS indices, ascending
  int64_t numa = -1;           // home NUMA node of the cores
  std::vector<int32_t> near;   // NUMA nodes local to it, preferred first
};
struct PlanNuma {
  int64_t os = -1;
  std::string kind;            // "HBM", "DRAM", ...
  int64_t bytes = 0;           // 0: not reported
};
struct PlanTopology {
  std::string source;          // "native", an XML path, a synthetic string
  std::string summary;         // one line, for notes
  int64_t split = 0;           // --clusters K (0: as discovered)
  std::vector<PlanCluster> clusters;
  std::vector<PlanNuma> numa;
  const PlanNuma *numaByOs(int64_t os) const;
};
struct PlanRank {
  std::vector<int32_t> clusters;  // topology cluster indices, ascending
  std::vector<int32_t> compute;   // cores running kernels
  std::vector<int32_t> comm;      // cores reserved (progress, copies)
};
struct PlanBudget {
  int64_t ranksPerNode = 1;
  std::string division;           // how ranks divide the node
  std::vector<PlanRank> ranks;    // local rank order
};
struct PlanSlice {
  std::string arena;
  int64_t offset = 0, bytes = 0;
  int64_t owner = 0;              // index among a rank's clusters
  std::vector<int32_t> numa;      // home NUMA node per local rank
};
struct PlanPlacement {
  int64_t pageBytes = 4096;
  std::vector<PlanSlice> slices;
};

TopologyAttr toAttr(mlir::Builder &b, const PlanTopology &t);
CoreBudgetAttr toAttr(mlir::Builder &b, const PlanBudget &t);
PlacementAttr toAttr(mlir::Builder &b, const PlanPlacement &t);

// Reads an attribute back; false + one line when it is not the typed
// attribute (ScheduleAttrs.td verifies each one's own shape).
bool readTopology(mlir::Attribute a, PlanTopology &out, std::string &error);
bool readBudget(mlir::Attribute a, PlanBudget &out, std::string &error);
bool readPlacement(mlir::Attribute a, PlanPlacement &out, std::string &error);

// The consistency of the three attributes on `op` (each against those it
// depends on: budget against topology; placement against budget, topology
// and hcs.arena_bytes). False + one line.
bool verifyMachinePlan(mlir::Operation *op, llvm::StringRef which,
                       std::string &error);

} // namespace hc::schedule

#endif // HC_SCHEDULE_PLACEMENT_H
