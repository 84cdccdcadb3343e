// The plan facts the schedule passes leave on @step, as typed attributes:
// the memory plan (hc-automem), the machine (hc-plan-placement: topology,
// core budget, placement). Each attribute verifies its own shape here; what
// ties them together (a budget against its topology, a placement against
// the arenas) is verified on the op (Placement.cpp, VerifyMemory.cpp).
#ifndef HC_SCHEDULE_ATTRS
#define HC_SCHEDULE_ATTRS

include "mlir/IR/AttrTypeBase.td"
include "hc/Schedule/ScheduleOps.td"

class HCS_Attr<string name, string attrMnemonic> : AttrDef<HCS_Dialect, name> {
  let mnemonic = attrMnemonic;
  let assemblyFormat = "`<` struct(params) `>`";
}

// ---- the machine: hcs.topology, hcs.core_budget, hcs.placement ----------

def HCS_ClusterAttr : HCS_Attr<"Cluster", "cluster"> {
  let summary = "cores planned as one cluster";
  let parameters = (ins
    "::mlir::DenseI32ArrayAttr":$cores,  // OS indices, ascending
    "int64_t":$numa,                      // home NUMA node of the cores
    "::mlir::DenseI32ArrayAttr":$near     // NUMA nodes local to it, preferred first
  );
}

def HCS_NumaNodeAttr : HCS_Attr<"NumaNode", "numa_node"> {
  let summary = "a NUMA node: OS index, memory kind, bytes (0: not reported)";
  let parameters = (ins "int64_t":$os, StringRefParameter<"HBM, DRAM, ...">:$kind,
                        "int64_t":$bytes);
}

def HCS_TopologyAttr : HCS_Attr<"Topology", "topology"> {
  let summary = "the machine a step was planned for";
  let parameters = (ins
    StringRefParameter<"native, an XML path, a synthetic string">:$source,
    StringRefParameter<"one line, for notes">:$summary,
    "int64_t":$split,                     // --clusters K (0: as discovered)
    "::mlir::ArrayAttr":$clusters,        // #hcs.cluster
    "::mlir::ArrayAttr":$numa             // #hcs.numa_node
  );
  let genVerifyDecl = 1;
}

def HCS_RankCoresAttr : HCS_Attr<"RankCores", "rank_cores"> {
  let summary = "one local rank's share of a node";
  let parameters = (ins
    "::mlir::DenseI32ArrayAttr":$clusters,  // topology cluster indices, ascending
    "::mlir::DenseI32ArrayAttr":$compute,   // cores running kernels
    "::mlir::DenseI32ArrayAttr":$comm       // cores reserved (progress, copies)
  );
}

def HCS_CoreBudgetAttr : HCS_Attr<"CoreBudget", "core_budget"> {
  let summary = "how the ranks of a node divide its cores";
  let parameters = (ins "int64_t":$ranks_per_node, StringRefParameter<>:$division,
                        "::mlir::ArrayAttr":$ranks);  // #hcs.rank_cores, local rank order
  let genVerifyDecl = 1;
}

def HCS_SliceAttr : HCS_Attr<"Slice", "slice"> {
  let summary = "a page-aligned slice of an arena, its owner and home nodes";
  let parameters = (ins
    StringRefParameter<>:$arena,
    "int64_t":$offset,
    "int64_t":$bytes,
    "int64_t":$owner,                   // index among a rank's clusters
    "::mlir::DenseI32ArrayAttr":$numa   // home NUMA node per local rank
  );
}

def HCS_PlacementAttr : HCS_Attr<"Placement", "placement"> {
  let summary = "where the arenas' pages live";
  let parameters = (ins "int64_t":$page_bytes, "::mlir::ArrayAttr":$slices);  // #hcs.slice
  let genVerifyDecl = 1;
}

// ---- the memory plan: hcs.memory ---------------------------------------

def HCS_MemoryTierAttr : HCS_Attr<"MemoryTier", "tier"> {
  let summary = "a memory tier and the arenas it holds";
  let parameters = (ins
    StringRefParameter<>:$name,
    StringRefParameter<"HBM, DRAM, disk, ...">:$kind,
    "int64_t":$capacity,          // bytes; 0: as much as the machine has
    "::mlir::ArrayAttr":$arenas   // arena names (strings)
  );
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    bool holds(::llvm::StringRef arena) const;
    bool isDisk() const { return getKind() == "disk"; }
  }];
}

def HCS_MemoryPlanAttr : HCS_Attr<"MemoryPlan", "memory_plan"> {
  let summary = "hc-automem's plan: the tiers, and what it decided";
  let parameters = (ins
    "int64_t":$budget,                 // --mem-budget bytes (0: none)
    "int64_t":$reserve,                // bytes kept for what the plan does not see
    "::mlir::ArrayAttr":$tiers,        // #hcs.tier, fastest first
    StringRefParameter<"the disk tier's folder (empty: none)", "\"\"">:$offload_dir,
    "int64_t":$recomputed_calls,
    "::mlir::FloatAttr":$recompute_seconds,    // predicted
    "int64_t":$segments,                        // segments recomputed
    "::mlir::FloatAttr":$copy_seconds,          // predicted
    "int64_t":$offload_bytes,                   // per step
    "int64_t":$prefetch_bytes,                  // per step
    "int64_t":$recomputed_over_move,            // recomputed where a copy was dearer
    StringRefParameter<"what the other plans cost", "\"\"">:$other_plan
  );
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    // The tier holding `arena`, or null.
    MemoryTierAttr tierOf(::llvm::StringRef arena) const;
    // Whether the "offload" arena is a file (a disk tier).
    bool offloadOnDisk() const;
  }];
}

#endif // HC_SCHEDULE_ATTRS
