// hc-plan-placement: the machine in the plan (topology, core budget, arena
// placement; hc/Schedule/Placement.h). The topology is read by the
// runtime's own hwloc code, so a plan for "native" names the clusters the
// runtime's thread team will use.
#include "hc/Passes/Passes.h"
#include "hc/Schedule/Placement.h"

#include "hc/base/topology.h"

#include <map>

using namespace mlir;
namespace hs = hc::schedule;

namespace hc {
#define GEN_PASS_DEF_PLANPLACEMENT
#include "hc/Passes/Passes.h.inc"

namespace {

constexpr int64_t kPage = 4096;  // HCRT_PLACEMENT_PAGE

hs::PlanTopology fromRuntime(const rt::Topology &t, const std::string &source,
                             int64_t split) {
  hs::PlanTopology out;
  out.source = source;
  out.summary = t.summary();
  out.split = split;
  for (const rt::Cluster &c : t.clusters) {
    hs::PlanCluster pc;
    pc.cores.assign(c.cores.begin(), c.cores.end());
    pc.numa = c.numaNode;
    pc.near.assign(c.nearNuma.begin(), c.nearNuma.end());
    if (pc.near.empty())
      pc.near.push_back(c.numaNode);
    out.clusters.push_back(std::move(pc));
  }
  for (const rt::NumaNode &n : t.numa)
    out.numa.push_back({n.os, n.kind, static_cast<int64_t>(n.bytes)});
  return out;
}

// Ranks take contiguous shares of the node's cores in cluster order (as
// the runtime team does for unbound ranks); the last `comm` cores of a
// share are reserved.
bool budget(const hs::PlanTopology &t, int64_t ranks, int64_t comm,
            hs::PlanBudget &out, std::string &error) {
  std::vector<std::pair<int32_t, int32_t>> cores;  // core, cluster
  for (std::size_t c = 0; c < t.clusters.size(); ++c)
    for (int32_t core : t.clusters[c].cores)
      cores.push_back({core, static_cast<int32_t>(c)});
  int64_t total = static_cast<int64_t>(cores.size());
  if (ranks > total) {
    error = "--ranks-per-node " + std::to_string(ranks) + " exceeds the " +
            std::to_string(total) + " cores of the topology";
    return false;
  }
  out.ranksPerNode = ranks;
  out.division = "contiguous shares of the node's cores in cluster order; "
                 "comm cores are the last of a share";
  for (int64_t r = 0; r < ranks; ++r) {
    int64_t first = total * r / ranks, last = total * (r + 1) / ranks;
    if (comm >= last - first) {
      error = "--comm-cores " + std::to_string(comm) + " leaves rank " +
              std::to_string(r) + " no compute core: its share is " +
              std::to_string(last - first) + " of the topology's " +
              std::to_string(total) + " cores";
      return false;
    }
    hs::PlanRank k;
    for (int64_t i = first; i < last - comm; ++i) {
      k.compute.push_back(cores[i].first);
      if (k.clusters.empty() || k.clusters.back() != cores[i].second)
        k.clusters.push_back(cores[i].second);
    }
    for (int64_t i = last - comm; i < last; ++i)
      k.comm.push_back(cores[i].first);
    out.ranks.push_back(std::move(k));
  }
  return true;
}

// Each arena in page-aligned slices, one per cluster of a rank; per rank
// the owner's nearest NUMA node with room, fastest kind first.
hs::PlanPlacement place(const hs::PlanTopology &t, const hs::PlanBudget &b,
                        DictionaryAttr arenaBytes) {
  hs::PlanPlacement out;
  out.pageBytes = kPage;
  std::size_t owners = b.ranks.front().clusters.size();
  for (const hs::PlanRank &k : b.ranks)
    owners = std::min(owners, k.clusters.size());
  std::map<int64_t, int64_t> used;  // NUMA node -> bytes placed
  for (NamedAttribute a : arenaBytes) {
    int64_t bytes = cast<IntegerAttr>(a.getValue()).getInt();
    int64_t pages = (bytes + kPage - 1) / kPage;
    const int64_t n = static_cast<int64_t>(owners);
    for (int64_t k = 0; k < n; ++k) {
      // Rounded up, so an arena of fewer pages than owners starts at owner 0.
      int64_t first = (pages * k + n - 1) / n * kPage,
              last = std::min<int64_t>((pages * (k + 1) + n - 1) / n * kPage, bytes);
      if (last <= first)
        continue;
      hs::PlanSlice s;
      s.arena = a.getName().str();
      s.offset = first;
      s.bytes = last - first;
      s.owner = k;
      for (const hs::PlanRank &r : b.ranks) {
        const hs::PlanCluster &c = t.clusters[r.clusters[k]];
        int32_t home = c.near.back();
        for (int32_t n : c.near) {
          const hs::PlanNuma *node = t.numaByOs(n);
          if (!node || node->bytes == 0 || used[n] + s.bytes <= node->bytes) {
            home = n;
            break;
          }
        }
        used[home] += s.bytes;
        s.numa.push_back(home);
      }
      out.slices.push_back(std::move(s));
    }
  }
  return out;
}

struct PlanPlacementPass : impl::PlanPlacementBase<PlanPlacementPass> {
  using PlanPlacementBase::PlanPlacementBase;

  void runOnOperation() override {
    rt::Topology topo;
    std::string error;
    if (!rt::discoverTopology(rt::parseTopologySpec(topology), topo, error)) {
      getOperation().emitError("--topology " + topology + ": " + error);
      return signalPassFailure();
    }
    if (clusters > 0 && !rt::splitClusters(topo, static_cast<int>(clusters), error)) {
      getOperation().emitError(error);
      return signalPassFailure();
    }
    if (ranksPerNode < 1 || commCores < 0) {
      getOperation().emitError("--ranks-per-node must be at least 1 and "
                               "--comm-cores at least 0");
      return signalPassFailure();
    }
    hs::PlanTopology t = fromRuntime(topo, topology, clusters);
    hs::PlanBudget b;
    if (!budget(t, ranksPerNode, commCores, b, error)) {
      getOperation().emitError(error);
      return signalPassFailure();
    }
    for (auto f : getOperation().getOps<func::FuncOp>()) {
      auto sizes = f->getAttrOfType<DictionaryAttr>("hcs.arena_bytes");
      if (!sizes)
        continue;
      Builder builder(f.getContext());
      f->setAttr(hs::kTopologyAttr, hs::toAttr(builder, t));
      f->setAttr(hs::kCoreBudgetAttr, hs::toAttr(builder, b));
      f->setAttr(hs::kPlacementAttr, hs::toAttr(builder, place(t, b, sizes)));
      if (!hs::verifyMachinePlan(f, hs::kPlacementAttr, error)) {
        f.emitError("internal: ") << error;
        return signalPassFailure();
      }
    }
  }
};

} // namespace
} // namespace hc
