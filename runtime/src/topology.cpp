#include "hc/runtime/topology.h"

#include <hwloc.h>

namespace hc::rt {

int Topology::numCores() const {
  int n = 0;
  for (const Cluster &c : clusters)
    n += static_cast<int>(c.cores.size());
  return n;
}

namespace {

// Size of the nearest cache of `type` above `obj` (0 when hwloc reports none).
std::size_t cacheAbove(hwloc_obj_t obj, hwloc_obj_type_t type) {
  for (hwloc_obj_t p = obj; p; p = p->parent)
    if (p->type == type && p->attr)
      return static_cast<std::size_t>(p->attr->cache.size);
  return 0;
}

Cluster makeCluster(hwloc_topology_t topo, hwloc_const_cpuset_t set,
                    int numaNode) {
  Cluster cluster;
  cluster.numaNode = numaNode;
  int nCores = hwloc_get_nbobjs_inside_cpuset_by_type(topo, set, HWLOC_OBJ_CORE);
  for (int k = 0; k < nCores; ++k) {
    hwloc_obj_t core =
        hwloc_get_obj_inside_cpuset_by_type(topo, set, HWLOC_OBJ_CORE, k);
    int pu = hwloc_bitmap_first(core->cpuset);
    if (pu >= 0)
      cluster.cores.push_back(pu);
  }
  if (nCores > 0) {
    hwloc_obj_t first =
        hwloc_get_obj_inside_cpuset_by_type(topo, set, HWLOC_OBJ_PU, 0);
    cluster.l1dBytes = cacheAbove(first, HWLOC_OBJ_L1CACHE);
    cluster.l2Bytes = cacheAbove(first, HWLOC_OBJ_L2CACHE);
    cluster.l3Bytes = cacheAbove(first, HWLOC_OBJ_L3CACHE);
  }
  return cluster;
}

} // namespace

bool discoverTopology(const TopologySource &source, Topology &out,
                      std::string &error) {
  hwloc_topology_t topo;
  if (hwloc_topology_init(&topo) != 0) {
    error = "hwloc_topology_init failed";
    return false;
  }
  int rc = 0;
  if (source.kind == TopologySource::Kind::XmlFile)
    rc = hwloc_topology_set_xml(topo, source.text.c_str());
  else if (source.kind == TopologySource::Kind::Synthetic)
    rc = hwloc_topology_set_synthetic(topo, source.text.c_str());
  if (rc != 0 || hwloc_topology_load(topo) != 0) {
    error = "hwloc cannot load topology '" + source.text + "'";
    hwloc_topology_destroy(topo);
    return false;
  }

  out = Topology();
  int nNuma = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_NUMANODE);
  out.numNumaNodes = nNuma;
  for (int i = 0; i < nNuma; ++i) {
    hwloc_obj_t numa = hwloc_get_obj_by_type(topo, HWLOC_OBJ_NUMANODE, i);
    // Memory-only nodes (HBM in flat mode) have no cores of their own.
    if (!numa->cpuset || hwloc_bitmap_iszero(numa->cpuset))
      continue;
    bool split = false;
    for (hwloc_obj_type_t level : {HWLOC_OBJ_L3CACHE, HWLOC_OBJ_L2CACHE}) {
      int n = hwloc_get_nbobjs_inside_cpuset_by_type(topo, numa->cpuset, level);
      if (n < 2)
        continue;
      for (int k = 0; k < n; ++k) {
        hwloc_obj_t cache =
            hwloc_get_obj_inside_cpuset_by_type(topo, numa->cpuset, level, k);
        out.clusters.push_back(makeCluster(topo, cache->cpuset, numa->os_index));
      }
      split = true;
      break;
    }
    if (!split)
      out.clusters.push_back(makeCluster(topo, numa->cpuset, numa->os_index));
  }
  hwloc_topology_destroy(topo);
  if (out.clusters.empty()) {
    error = "topology '" + source.text + "' has no cores";
    return false;
  }
  return true;
}

} // namespace hc::rt
