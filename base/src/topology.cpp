#include "hc/base/topology.h"

#include <hwloc.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sched.h>
#include <sstream>
#include <sys/stat.h>

namespace hc::rt {

int Topology::numCores() const {
  int n = 0;
  for (const Cluster &c : clusters)
    n += static_cast<int>(c.cores.size());
  return n;
}

const NumaNode *Topology::numaByOs(int os) const {
  for (const NumaNode &n : numa)
    if (n.os == os)
      return &n;
  return nullptr;
}

std::string Topology::summary() const {
  std::string s = std::to_string(numCores()) + " cores in " +
                  std::to_string(clusters.size()) + " cluster" +
                  (clusters.size() == 1 ? "" : "s") + " of ";
  bool same = true;
  for (const Cluster &c : clusters)
    same &= c.cores.size() == clusters.front().cores.size();
  for (std::size_t i = 0; i < clusters.size(); ++i) {
    s += (i ? "," : "") + std::to_string(clusters[i].cores.size());
    if (same)
      break;
  }
  s += ", NUMA ";
  std::vector<std::pair<std::string, int>> kinds;
  for (const NumaNode &n : numa) {
    auto it = std::find_if(kinds.begin(), kinds.end(),
                           [&](const auto &k) { return k.first == n.kind; });
    if (it == kinds.end())
      kinds.push_back({n.kind, 1});
    else
      ++it->second;
  }
  for (std::size_t i = 0; i < kinds.size(); ++i)
    s += (i ? "+" : "") + std::to_string(kinds[i].second) + "x" + kinds[i].first;
  return s;
}

TopologySource parseTopologySpec(const std::string &spec) {
  TopologySource s;
  if (spec.empty() || spec == "native")
    return s;
  struct stat st;
  bool xml = spec.size() > 4 && spec.compare(spec.size() - 4, 4, ".xml") == 0;
  s.kind = xml || ::stat(spec.c_str(), &st) == 0 ? TopologySource::Kind::XmlFile
                                                 : TopologySource::Kind::Synthetic;
  s.text = spec;
  return s;
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

int memoryKindRank(const std::string &kind) {
  if (kind == "HBM" || kind == "MCDRAM")
    return 0;
  if (kind == "DRAM")
    return 1;
  return 2;
}

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
  std::vector<hwloc_obj_t> nodes;
  for (int i = 0; i < nNuma; ++i) {
    hwloc_obj_t numa = hwloc_get_obj_by_type(topo, HWLOC_OBJ_NUMANODE, i);
    nodes.push_back(numa);
    NumaNode n;
    n.os = static_cast<int>(numa->os_index);
    n.kind = numa->subtype && *numa->subtype ? numa->subtype : "DRAM";
    n.bytes = numa->attr ? numa->attr->numanode.local_memory : 0;
    n.cores = numa->cpuset ? hwloc_get_nbobjs_inside_cpuset_by_type(
                                 topo, numa->cpuset, HWLOC_OBJ_CORE)
                           : 0;
    out.numa.push_back(n);
  }
  std::sort(out.numa.begin(), out.numa.end(),
            [](const NumaNode &a, const NumaNode &b) { return a.os < b.os; });
  auto kindOf = [&](hwloc_obj_t numa) {
    return numa->subtype && *numa->subtype ? std::string(numa->subtype)
                                           : std::string("DRAM");
  };

  // Each core's home: the NUMA node with the fewest cores whose locality
  // holds it (on-package memory before the DDR behind it); between nodes of
  // one locality (HBM beside DDR), the DRAM one. Cores with one home form a
  // group, in the order of their first core.
  int nCoresAll = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_CORE);
  std::map<int, hwloc_bitmap_t> groups;  // home index -> cores' PUs
  std::vector<int> groupOrder;
  for (int k = 0; k < nCoresAll; ++k) {
    hwloc_obj_t core = hwloc_get_obj_by_type(topo, HWLOC_OBJ_CORE, k);
    int best = -1;
    for (int i = 0; i < nNuma; ++i) {
      hwloc_obj_t n = nodes[i];
      if (!n->cpuset || !hwloc_bitmap_isincluded(core->cpuset, n->cpuset))
        continue;
      if (best < 0) {
        best = i;
        continue;
      }
      int w = hwloc_bitmap_weight(n->cpuset),
          wb = hwloc_bitmap_weight(nodes[best]->cpuset);
      if (w < wb || (w == wb && memoryKindRank(kindOf(nodes[best])) == 0 &&
                     memoryKindRank(kindOf(n)) != 0))
        best = i;
    }
    if (best < 0)
      continue;
    if (!groups.count(best)) {
      groups[best] = hwloc_bitmap_alloc();
      groupOrder.push_back(best);
    }
    hwloc_bitmap_or(groups[best], groups[best], core->cpuset);
  }
  for (int home : groupOrder) {
    hwloc_bitmap_t set = groups[home];
    int os = static_cast<int>(nodes[home]->os_index);
    std::size_t before = out.clusters.size();
    for (hwloc_obj_type_t level : {HWLOC_OBJ_L3CACHE, HWLOC_OBJ_L2CACHE}) {
      int n = hwloc_get_nbobjs_inside_cpuset_by_type(topo, set, level);
      if (n < 2)
        continue;
      for (int k = 0; k < n; ++k) {
        hwloc_obj_t cache = hwloc_get_obj_inside_cpuset_by_type(topo, set, level, k);
        out.clusters.push_back(makeCluster(topo, cache->cpuset, os));
      }
      break;
    }
    if (out.clusters.size() == before)
      out.clusters.push_back(makeCluster(topo, set, os));
    // The nodes local to these clusters, preferred first.
    std::vector<hwloc_obj_t> near;
    for (hwloc_obj_t n : nodes)
      if (n->cpuset && hwloc_bitmap_isincluded(set, n->cpuset))
        near.push_back(n);
    std::stable_sort(near.begin(), near.end(), [&](hwloc_obj_t a, hwloc_obj_t b) {
      int ka = memoryKindRank(kindOf(a)), kb = memoryKindRank(kindOf(b));
      if (ka != kb)
        return ka < kb;
      return hwloc_bitmap_weight(a->cpuset) < hwloc_bitmap_weight(b->cpuset);
    });
    for (std::size_t c = before; c < out.clusters.size(); ++c)
      for (hwloc_obj_t n : near)
        out.clusters[c].nearNuma.push_back(static_cast<int>(n->os_index));
    hwloc_bitmap_free(set);
  }
  hwloc_topology_destroy(topo);
  if (out.clusters.empty()) {
    error = "topology '" + source.text + "' has no cores";
    return false;
  }
  return true;
}

bool splitClusters(Topology &topo, int k, std::string &error) {
  int n = topo.numCores();
  if (k < 1 || k > n) {
    error = "--clusters " + std::to_string(k) + " must be between 1 and the " +
            std::to_string(n) + " cores of the topology";
    return false;
  }
  std::vector<std::pair<int, std::size_t>> cores;  // core, its old cluster
  for (std::size_t c = 0; c < topo.clusters.size(); ++c)
    for (int core : topo.clusters[c].cores)
      cores.push_back({core, c});
  std::vector<Cluster> out;
  for (int i = 0; i < k; ++i) {
    std::size_t first = static_cast<std::size_t>(n) * i / k,
                last = static_cast<std::size_t>(n) * (i + 1) / k;
    Cluster c = topo.clusters[cores[first].second];
    c.cores.clear();
    for (std::size_t j = first; j < last; ++j) {
      const Cluster &from = topo.clusters[cores[j].second];
      if (from.numaNode != c.numaNode) {
        error = "--clusters " + std::to_string(k) + " would put cluster " +
                std::to_string(i) + " across NUMA nodes " +
                std::to_string(c.numaNode) + " and " + std::to_string(from.numaNode);
        return false;
      }
      c.cores.push_back(cores[j].first);
    }
    out.push_back(std::move(c));
  }
  topo.clusters = std::move(out);
  return true;
}

std::vector<int> allowedCores() {
  std::vector<int> cores;
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) != 0)
    return cores;
  for (int i = 0; i < CPU_SETSIZE; ++i)
    if (CPU_ISSET(i, &set))
      cores.push_back(i);
  return cores;
}

int cgroupCpuLimit(const std::string &cgroupRoot, const std::string &cgroupPath) {
  std::string path = cgroupPath;
  if (path.empty()) {
    std::ifstream in("/proc/self/cgroup");
    std::string line;
    while (std::getline(in, line))
      if (line.rfind("0::", 0) == 0)
        path = line.substr(3);
  }
  if (path.empty())
    return 0;
  // The tightest limit on the way from the process's cgroup to the root.
  int limit = 0;
  for (;;) {
    std::ifstream f(cgroupRoot + (path == "/" ? "" : path) + "/cpu.max");
    std::string quota;
    long long period = 0;
    if (f >> quota >> period && quota != "max" && period > 0) {
      long long q = std::atoll(quota.c_str());
      if (q > 0) {
        int cores = static_cast<int>((q + period - 1) / period);
        limit = limit == 0 ? cores : std::min(limit, cores);
      }
    }
    if (path == "/" || path.empty())
      break;
    std::size_t slash = path.find_last_of('/');
    path = slash == 0 || slash == std::string::npos ? "/" : path.substr(0, slash);
  }
  return limit;
}

} // namespace hc::rt
