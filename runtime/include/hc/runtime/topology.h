// Machine topology as hc plans work on it: clusters of cores that share a
// memory domain or a cache, with the cache sizes blocking is derived from.
// Planning only: nothing here pins threads or binds memory.
#ifndef HC_RUNTIME_TOPOLOGY_H
#define HC_RUNTIME_TOPOLOGY_H

#include <cstddef>
#include <string>
#include <vector>

namespace hc::rt {

struct Cluster {
  std::vector<int> cores;  // OS indices of one PU per core, ascending
  int numaNode = -1;       // OS index of the NUMA node holding the cluster
  // Cache sizes in bytes as seen by one core of the cluster (0: not reported).
  std::size_t l1dBytes = 0, l2Bytes = 0, l3Bytes = 0;
};

struct Topology {
  std::vector<Cluster> clusters;
  int numNumaNodes = 0;
  int numCores() const;
};

// Where the topology comes from: the running machine (default), an hwloc XML
// file, or an hwloc synthetic description such as
// "numa:2 l3:1 l2:4 core:1 pu:1" (used by tests to plan for other machines).
struct TopologySource {
  enum class Kind { Host, XmlFile, Synthetic } kind = Kind::Host;
  std::string text;  // path or synthetic description
};

// A cluster is the cores of one NUMA node, or of one L3 (else L2) group when a
// NUMA node holds several such groups. Returns false and sets `error` when
// hwloc cannot load the source.
bool discoverTopology(const TopologySource &source, Topology &out,
                      std::string &error);

} // namespace hc::rt

#endif // HC_RUNTIME_TOPOLOGY_H
