#include "hc/runtime/topology.h"

#include <gtest/gtest.h>

#include <set>
#include <thread>

using hc::rt::Topology;
using hc::rt::TopologySource;

namespace {
Topology load(TopologySource::Kind kind, const std::string &text) {
  Topology t;
  std::string error;
  EXPECT_TRUE(hc::rt::discoverTopology({kind, text}, t, error)) << error;
  return t;
}

void expectEachCoreOnce(const Topology &t) {
  std::set<int> seen;
  for (const auto &c : t.clusters)
    for (int core : c.cores)
      EXPECT_TRUE(seen.insert(core).second) << "core " << core << " twice";
}
} // namespace

TEST(Topology, HostCoversEveryCoreOnce) {
  Topology t = load(TopologySource::Kind::Host, "");
  ASSERT_FALSE(t.clusters.empty());
  EXPECT_GE(t.numNumaNodes, 1);
  expectEachCoreOnce(t);
  EXPECT_LE(t.numCores(), static_cast<int>(std::thread::hardware_concurrency()));
}

// An LX2-like die: 2 NUMA nodes, each with 4 clusters of 4 cores sharing L2.
TEST(Topology, NumaNodeWithSeveralL2GroupsSplitsIntoClusters) {
  Topology t = load(TopologySource::Kind::Synthetic,
                    "pack:1 numa:2 l2:4(size=2097152) core:4 pu:1");
  EXPECT_EQ(t.numNumaNodes, 2);
  ASSERT_EQ(t.clusters.size(), 8u);
  for (const auto &c : t.clusters) {
    EXPECT_EQ(c.cores.size(), 4u);
    EXPECT_EQ(c.l2Bytes, 2u << 20);
  }
  EXPECT_EQ(t.clusters[0].numaNode, 0);
  EXPECT_EQ(t.clusters[7].numaNode, 1);
  expectEachCoreOnce(t);
}

// One shared L3 per NUMA node and one L2 group: the NUMA node is the cluster.
TEST(Topology, SingleCacheGroupPerNumaNodeIsOneCluster) {
  Topology t = load(TopologySource::Kind::Synthetic,
                    "pack:2 numa:1 l3:1(size=33554432) core:6 pu:2");
  ASSERT_EQ(t.clusters.size(), 2u);
  for (const auto &c : t.clusters) {
    EXPECT_EQ(c.cores.size(), 6u);  // one PU per core, SMT siblings folded
    EXPECT_EQ(c.l3Bytes, 32u << 20);
  }
  expectEachCoreOnce(t);
}

TEST(Topology, BadSourceIsAnErrorNotACrash) {
  Topology t;
  std::string error;
  EXPECT_FALSE(hc::rt::discoverTopology(
      {TopologySource::Kind::XmlFile, "/nonexistent/topo.xml"}, t, error));
  EXPECT_NE(error.find("/nonexistent/topo.xml"), std::string::npos);
}
