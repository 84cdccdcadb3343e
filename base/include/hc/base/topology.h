// Machine topology as hc plans work on it: clusters of cores that share a
// memory domain or a cache, the NUMA nodes (with their memory kinds) near
// each cluster, and the cache sizes blocking is derived from. Read by the
// runtime's thread team and by the compiler (hc-compile --topology), so the
// plan and the team see the same clusters. Nothing here pins threads or
// binds memory.
#ifndef HC_BASE_TOPOLOGY_H
#define HC_BASE_TOPOLOGY_H

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace hc::rt {

struct Cluster {
  std::vector<int> cores;  // OS indices of one PU per core, ascending
  int numaNode = -1;       // OS index of the NUMA node holding the cluster
  // OS indices of the NUMA nodes whose memory is local to the cluster,
  // preferred first: faster kinds (HBM) before DRAM, then the most local
  // (fewest cores) first. numaNode is among them.
  std::vector<int> nearNuma;
  // Cache sizes in bytes as seen by one core of the cluster (0: not reported).
  std::size_t l1dBytes = 0, l2Bytes = 0, l3Bytes = 0;
};

struct NumaNode {
  int os = -1;             // OS index
  std::string kind;        // hwloc subtype ("HBM", "DRAM", ...); "DRAM" if none
  uint64_t bytes = 0;      // local memory (0: not reported)
  int cores = 0;           // cores in its locality (0: memory only)
};

struct Topology {
  std::vector<Cluster> clusters;
  std::vector<NumaNode> numa;  // by ascending OS index
  int numNumaNodes = 0;
  int numCores() const;
  const NumaNode *numaByOs(int os) const;
  // "32 cores in 4 clusters of 8, NUMA 4xHBM+1xDRAM": one line for notes.
  std::string summary() const;
};

// Where the topology comes from: the running machine (default), an hwloc XML
// file, or an hwloc synthetic description such as
// "numa:2 l3:1 l2:4 core:1 pu:1" (used by tests to plan for other machines).
struct TopologySource {
  enum class Kind { Host, XmlFile, Synthetic } kind = Kind::Host;
  std::string text;  // path or synthetic description
};

// hc-compile's --topology SPEC: "native" (or empty) is the host; a SPEC
// ending in ".xml" or naming an existing file is an hwloc XML file;
// anything else an hwloc synthetic string.
TopologySource parseTopologySpec(const std::string &spec);

// A cluster is the cores of one NUMA node, or of one L3 (else L2) group when
// a NUMA node holds several such groups. Where NUMA nodes overlap (DDR
// behind on-package memory, HBM beside DDR), a core belongs to its most
// local node. Returns false and sets `error` when hwloc cannot load the
// source.
bool discoverTopology(const TopologySource &source, Topology &out,
                      std::string &error);

// --clusters K: the cores, in cluster order, cut into K contiguous clusters
// of near-equal size (for machines whose caches draw no lines). False +
// error when K is out of [1, cores] or a cluster would span NUMA nodes.
bool splitClusters(Topology &topo, int k, std::string &error);

// Preference of a memory kind (a NUMA node's hwloc subtype): 0 high-bandwidth
// (HBM, MCDRAM), 1 DRAM, 2 the rest (CXL-attached, NVM). Placement prefers
// lower ranks; hc-automem makes rank 0 its fast tier.
int memoryKindRank(const std::string &kind);

// What this process may use: the OS indices of the cores in its affinity
// mask (a launcher's --bind-to core|numa), and the cgroup v2 CPU limit
// (cpu.max quota / period, rounded up; 0 when unlimited or unknown).
// `cgroupRoot` is where the cgroup v2 hierarchy is mounted (tests pass a
// folder of their own); the process's own cgroup comes from
// /proc/self/cgroup, or `cgroupPath` when given.
std::vector<int> allowedCores();
int cgroupCpuLimit(const std::string &cgroupRoot = "/sys/fs/cgroup",
                   const std::string &cgroupPath = "");

} // namespace hc::rt

#endif // HC_BASE_TOPOLOGY_H
