// hcs.topology, hcs.core_budget, hcs.placement: building, reading and
// verifying (hc/Schedule/Placement.h).
#include "hc/Schedule/Placement.h"
#include "hc/Schedule/ScheduleOps.h"

#include "llvm/ADT/STLExtras.h"

#include <map>
#include <set>

using namespace mlir;

namespace hc::schedule {

const PlanNuma *PlanTopology::numaByOs(int64_t os) const {
  for (const PlanNuma &n : numa)
    if (n.os == os)
      return &n;
  return nullptr;
}

namespace {

DenseI32ArrayAttr ints(Builder &b, const std::vector<int32_t> &v) {
  return b.getDenseI32ArrayAttr(v);
}

std::vector<int32_t> vec(DenseI32ArrayAttr a) {
  return std::vector<int32_t>(a.asArrayRef().begin(), a.asArrayRef().end());
}

std::string str(const std::vector<int32_t> &v) {
  std::string s;
  for (int32_t x : v)
    s += (s.empty() ? "" : ",") + std::to_string(x);
  return s;
}

// The attribute as AttrT, else false + one line naming what it must be.
template <typename AttrT>
AttrT typed(Attribute a, const char *name, const char *want, std::string &error) {
  auto t = dyn_cast_or_null<AttrT>(a);
  if (!t)
    error = std::string(name) + " must be " + want;
  return t;
}

} // namespace

TopologyAttr toAttr(Builder &b, const PlanTopology &t) {
  SmallVector<Attribute> clusters, numa;
  for (const PlanCluster &c : t.clusters)
    clusters.push_back(
        ClusterAttr::get(b.getContext(), ints(b, c.cores), c.numa, ints(b, c.near)));
  for (const PlanNuma &n : t.numa)
    numa.push_back(NumaNodeAttr::get(b.getContext(), n.os, n.kind, n.bytes));
  return TopologyAttr::get(b.getContext(), t.source, t.summary, t.split,
                           b.getArrayAttr(clusters), b.getArrayAttr(numa));
}

CoreBudgetAttr toAttr(Builder &b, const PlanBudget &t) {
  SmallVector<Attribute> ranks;
  for (const PlanRank &r : t.ranks)
    ranks.push_back(RankCoresAttr::get(b.getContext(), ints(b, r.clusters),
                                       ints(b, r.compute), ints(b, r.comm)));
  return CoreBudgetAttr::get(b.getContext(), t.ranksPerNode, t.division,
                             b.getArrayAttr(ranks));
}

PlacementAttr toAttr(Builder &b, const PlanPlacement &t) {
  SmallVector<Attribute> slices;
  for (const PlanSlice &s : t.slices)
    slices.push_back(SliceAttr::get(b.getContext(), s.arena, s.offset, s.bytes, s.owner,
                                    ints(b, s.numa)));
  return PlacementAttr::get(b.getContext(), t.pageBytes, b.getArrayAttr(slices));
}

bool readTopology(Attribute a, PlanTopology &out, std::string &error) {
  auto t = typed<TopologyAttr>(a, kTopologyAttr, "#hcs.topology", error);
  if (!t)
    return false;
  out = PlanTopology();
  out.source = t.getSource().str();
  out.summary = t.getSummary().str();
  out.split = t.getSplit();
  for (Attribute x : t.getClusters()) {
    auto c = cast<ClusterAttr>(x);
    out.clusters.push_back({vec(c.getCores()), c.getNuma(), vec(c.getNear())});
  }
  for (Attribute x : t.getNuma()) {
    auto n = cast<NumaNodeAttr>(x);
    out.numa.push_back({n.getOs(), n.getKind().str(), n.getBytes()});
  }
  return true;
}

bool readBudget(Attribute a, PlanBudget &out, std::string &error) {
  auto t = typed<CoreBudgetAttr>(a, kCoreBudgetAttr, "#hcs.core_budget", error);
  if (!t)
    return false;
  out = PlanBudget();
  out.ranksPerNode = t.getRanksPerNode();
  out.division = t.getDivision().str();
  for (Attribute x : t.getRanks()) {
    auto r = cast<RankCoresAttr>(x);
    out.ranks.push_back({vec(r.getClusters()), vec(r.getCompute()), vec(r.getComm())});
  }
  return true;
}

bool readPlacement(Attribute a, PlanPlacement &out, std::string &error) {
  auto t = typed<PlacementAttr>(a, kPlacementAttr, "#hcs.placement", error);
  if (!t)
    return false;
  out = PlanPlacement();
  out.pageBytes = t.getPageBytes();
  for (Attribute x : t.getSlices()) {
    auto s = cast<SliceAttr>(x);
    out.slices.push_back({s.getArena().str(), s.getOffset(), s.getBytes(), s.getOwner(),
                          vec(s.getNuma())});
  }
  return true;
}

namespace {

bool verifyTopology(const PlanTopology &t, std::string &error) {
  auto fail = [&](const std::string &m) {
    error = std::string(kTopologyAttr) + ": " + m;
    return false;
  };
  if (t.clusters.empty())
    return fail("has no cluster");
  std::set<int32_t> seen;
  for (std::size_t c = 0; c < t.clusters.size(); ++c) {
    const PlanCluster &cl = t.clusters[c];
    if (cl.cores.empty())
      return fail("cluster " + std::to_string(c) + " has no core");
    for (int32_t core : cl.cores)
      if (core < 0 || !seen.insert(core).second)
        return fail("core " + std::to_string(core) + " is negative or in two clusters");
    if (!t.numaByOs(cl.numa))
      return fail("cluster " + std::to_string(c) + " names NUMA node " +
                  std::to_string(cl.numa) + ", which is not in 'numa'");
    if (!llvm::is_contained(cl.near, cl.numa))
      return fail("cluster " + std::to_string(c) + "'s home NUMA node " +
                  std::to_string(cl.numa) + " is not among its near nodes");
    for (int32_t n : cl.near)
      if (!t.numaByOs(n))
        return fail("cluster " + std::to_string(c) + " names NUMA node " +
                    std::to_string(n) + ", which is not in 'numa'");
  }
  return true;
}

bool verifyBudget(const PlanTopology &t, const PlanBudget &b, std::string &error) {
  auto fail = [&](const std::string &m) {
    error = std::string(kCoreBudgetAttr) + ": " + m;
    return false;
  };
  if (b.ranksPerNode < 1 || static_cast<int64_t>(b.ranks.size()) != b.ranksPerNode)
    return fail("ranks_per_node " + std::to_string(b.ranksPerNode) + " but " +
                std::to_string(b.ranks.size()) + " ranks listed");
  std::map<int32_t, int32_t> clusterOf;
  for (std::size_t c = 0; c < t.clusters.size(); ++c)
    for (int32_t core : t.clusters[c].cores)
      clusterOf[core] = static_cast<int32_t>(c);
  std::set<int32_t> used;
  for (std::size_t r = 0; r < b.ranks.size(); ++r) {
    const PlanRank &k = b.ranks[r];
    std::string rank = "rank " + std::to_string(r);
    if (k.compute.empty())
      return fail(rank + " has no compute core");
    std::set<int32_t> clusters;
    for (const auto *list : {&k.compute, &k.comm})
      for (int32_t core : *list) {
        if (!clusterOf.count(core))
          return fail(rank + " names core " + std::to_string(core) +
                      ", which the topology does not have");
        if (!used.insert(core).second)
          return fail(rank + " uses core " + std::to_string(core) +
                      ", which is already budgeted");
        if (list == &k.compute)
          clusters.insert(clusterOf[core]);
      }
    if (std::vector<int32_t>(clusters.begin(), clusters.end()) != k.clusters)
      return fail(rank + " lists clusters [" + str(k.clusters) +
                  "] but computes in [" +
                  str(std::vector<int32_t>(clusters.begin(), clusters.end())) + "]");
  }
  return true;
}

bool verifyPlacement(Operation *op, const PlanTopology &t, const PlanBudget &b,
                     const PlanPlacement &p, std::string &error) {
  auto fail = [&](const std::string &m) {
    error = std::string(kPlacementAttr) + ": " + m;
    return false;
  };
  if (p.pageBytes <= 0 || (p.pageBytes & (p.pageBytes - 1)))
    return fail("page_bytes " + std::to_string(p.pageBytes) + " is not a power of two");
  auto sizes = op->getAttrOfType<DictionaryAttr>("hcs.arena_bytes");
  if (!sizes)
    return fail("needs hcs.arena_bytes (run hc-plan-buffers first)");
  std::map<std::string, int64_t> next;  // each arena covered in order
  for (const PlanSlice &s : p.slices) {
    std::string where = "slice of '" + s.arena + "' at " + std::to_string(s.offset);
    auto size = sizes.getAs<IntegerAttr>(s.arena);
    if (!size)
      return fail(where + ": no such arena");
    if (s.offset % p.pageBytes)
      return fail(where + ": offset not page-aligned");
    if (s.offset != next[s.arena])
      return fail(where + ": expected offset " + std::to_string(next[s.arena]) +
                  " (slices cover an arena in order, no gap or overlap)");
    if (s.bytes <= 0 || s.offset + s.bytes > size.getInt())
      return fail(where + ": " + std::to_string(s.bytes) +
                  " bytes do not fit the arena's " + std::to_string(size.getInt()));
    next[s.arena] = s.offset + s.bytes;
    if (s.offset + s.bytes < size.getInt() && s.bytes % p.pageBytes)
      return fail(where + ": a slice other than the last is not whole pages");
    if (s.numa.size() != b.ranks.size())
      return fail(where + ": " + std::to_string(s.numa.size()) +
                  " home nodes for " + std::to_string(b.ranks.size()) + " ranks");
    for (std::size_t r = 0; r < b.ranks.size(); ++r) {
      const PlanRank &k = b.ranks[r];
      if (s.owner < 0 || s.owner >= static_cast<int64_t>(k.clusters.size()))
        return fail(where + ": owner " + std::to_string(s.owner) + " but rank " +
                    std::to_string(r) + " has " + std::to_string(k.clusters.size()) +
                    " clusters");
      const PlanCluster &c = t.clusters[k.clusters[s.owner]];
      if (!llvm::is_contained(c.near, s.numa[r]))
        return fail(where + ": rank " + std::to_string(r) + "'s home NUMA node " +
                    std::to_string(s.numa[r]) + " is not near its owner, cluster " +
                    std::to_string(k.clusters[s.owner]));
    }
  }
  for (NamedAttribute a : sizes) {
    int64_t bytes = cast<IntegerAttr>(a.getValue()).getInt();
    if (bytes > 0 && next[a.getName().str()] != bytes)
      return fail("arena '" + a.getName().str() + "' is covered up to " +
                  std::to_string(next[a.getName().str()]) + " of its " +
                  std::to_string(bytes) + " bytes");
  }
  return true;
}

} // namespace

bool verifyMachinePlan(Operation *op, StringRef which, std::string &error) {
  PlanTopology t;
  PlanBudget b;
  PlanPlacement p;
  auto need = [&](const char *name) {
    if (op->getAttr(name))
      return true;
    error = which.str() + " needs " + name + " on the same op";
    return false;
  };
  if (!need(kTopologyAttr) || !readTopology(op->getAttr(kTopologyAttr), t, error) ||
      !verifyTopology(t, error))
    return false;
  if (which == kTopologyAttr)
    return true;
  if (!need(kCoreBudgetAttr) || !readBudget(op->getAttr(kCoreBudgetAttr), b, error) ||
      !verifyBudget(t, b, error))
    return false;
  if (which == kCoreBudgetAttr)
    return true;
  return readPlacement(op->getAttr(kPlacementAttr), p, error) &&
         verifyPlacement(op, t, b, p, error);
}

} // namespace hc::schedule

LogicalResult hc::schedule::HCSDialect::verifyOperationAttribute(
    Operation *op, NamedAttribute attr) {
  StringRef name = attr.getName().getValue();
  if (name == kMemoryAttr) {
    if (!isa<MemoryPlanAttr>(attr.getValue()))
      return op->emitOpError(kMemoryAttr) << " must be #hcs.memory_plan";
    return success();
  }
  if (name == kKeptWeightsAttr) {
    auto bytes = dyn_cast<IntegerAttr>(attr.getValue());
    if (!bytes || !bytes.getType().isInteger(64) || bytes.getInt() < 0)
      return op->emitOpError(kKeptWeightsAttr) << " must be a non-negative i64";
    return success();
  }
  if (name != kTopologyAttr && name != kCoreBudgetAttr && name != kPlacementAttr)
    return success();
  std::string error;
  if (!verifyMachinePlan(op, name, error))
    return op->emitOpError(error);
  return success();
}
