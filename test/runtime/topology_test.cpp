#include "hc/base/topology.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <sched.h>
#include <set>
#include <unistd.h>
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

// ---- the committed test topologies (test/topologies/*.xml) ----
namespace {
Topology loadXml(const char *name) {
  return load(TopologySource::Kind::XmlFile, std::string(HC_TOPOLOGY_DIR) + "/" + name);
}
} // namespace

// 4 clusters of 8 cores, each sharing an L2 and its own HBM node; DDR (node
// 4, all cores) behind: each cluster prefers its HBM node, then the DDR.
TEST(Topology, Lx2ClustersPreferTheirOnPackageMemory) {
  Topology t = loadXml("lx2.xml");
  ASSERT_EQ(t.clusters.size(), 4u);
  for (int c = 0; c < 4; ++c) {
    EXPECT_EQ(t.clusters[c].cores.size(), 8u);
    EXPECT_EQ(t.clusters[c].cores.front(), 8 * c);
    EXPECT_EQ(t.clusters[c].numaNode, c);
    EXPECT_EQ(t.clusters[c].nearNuma, (std::vector<int>{c, 4}));
    EXPECT_EQ(t.clusters[c].l2Bytes, 4u << 20);
  }
  ASSERT_EQ(t.numa.size(), 5u);
  EXPECT_EQ(t.numa[0].kind, "HBM");
  EXPECT_EQ(t.numa[4].kind, "DRAM");
  EXPECT_EQ(t.numa[4].bytes, 256ull << 30);
  EXPECT_EQ(t.summary(), "32 cores in 4 clusters of 8, NUMA 4xHBM+1xDRAM");
  expectEachCoreOnce(t);
}

// Flat-mode HBM beside DDR with the same cores: the cores' home is the DRAM
// node, the HBM node is preferred for data.
TEST(Topology, XeonMaxHbmBesideDdr) {
  Topology t = loadXml("xeon-max.xml");
  ASSERT_EQ(t.clusters.size(), 4u);
  for (int c = 0; c < 4; ++c) {
    EXPECT_EQ(t.clusters[c].cores.size(), 4u);  // SMT siblings folded
    EXPECT_EQ(t.clusters[c].numaNode, 2 * c);
    EXPECT_EQ(t.clusters[c].nearNuma, (std::vector<int>{2 * c + 1, 2 * c}));
  }
  EXPECT_EQ(t.summary(), "16 cores in 4 clusters of 4, NUMA 4xDRAM+4xHBM");
}

TEST(Topology, TwoSocketsSplitByL3) {
  Topology t = loadXml("two-socket.xml");
  ASSERT_EQ(t.clusters.size(), 4u);
  EXPECT_EQ(t.clusters[1].numaNode, 0);
  EXPECT_EQ(t.clusters[2].numaNode, 1);
  EXPECT_EQ(t.clusters[3].nearNuma, (std::vector<int>{1}));
  EXPECT_EQ(t.summary(), "32 cores in 4 clusters of 8, NUMA 2xDRAM");
}

TEST(Topology, FlatMachinesAreOneClusterAndSplit) {
  EXPECT_EQ(loadXml("flat2.xml").summary(), "2 cores in 1 cluster of 2, NUMA 1xDRAM");
  Topology t = loadXml("flat16.xml");
  ASSERT_EQ(t.clusters.size(), 1u);
  std::string error;
  ASSERT_TRUE(hc::rt::splitClusters(t, 3, error)) << error;
  EXPECT_EQ(t.summary(), "16 cores in 3 clusters of 5,5,6, NUMA 1xDRAM");
  EXPECT_EQ(t.clusters[2].cores.front(), 10);
  EXPECT_FALSE(hc::rt::splitClusters(t, 17, error));
  EXPECT_NE(error.find("--clusters 17"), std::string::npos);
}

TEST(Topology, SplitRefusesAClusterAcrossNumaNodes) {
  Topology t = loadXml("two-socket.xml");
  std::string error;
  EXPECT_FALSE(hc::rt::splitClusters(t, 3, error));
  EXPECT_NE(error.find("across NUMA nodes 0 and 1"), std::string::npos) << error;
  EXPECT_TRUE(hc::rt::splitClusters(t, 8, error)) << error;
}

TEST(Topology, SpecForms) {
  using K = TopologySource::Kind;
  EXPECT_EQ(hc::rt::parseTopologySpec("native").kind, K::Host);
  EXPECT_EQ(hc::rt::parseTopologySpec("").kind, K::Host);
  EXPECT_EQ(hc::rt::parseTopologySpec("missing/x.xml").kind, K::XmlFile);
  EXPECT_EQ(hc::rt::parseTopologySpec("numa:2 core:2 pu:1").kind, K::Synthetic);
}

// cgroup v2 cpu.max: quota/period rounded up, the tightest on the path up.
TEST(Topology, CgroupCpuLimitFromCpuMax) {
  std::string root = ::testing::TempDir() + "/hc-cgroup-" + std::to_string(getpid());
  std::string leaf = root + "/job/step";
  std::error_code ec;
  std::filesystem::create_directories(leaf, ec);
  ASSERT_FALSE(ec) << leaf << ": " << ec.message();
  auto write = [](const std::string &path, const char *text) {
    std::FILE *f = std::fopen(path.c_str(), "w");
    ASSERT_TRUE(f);
    std::fputs(text, f);
    std::fclose(f);
  };
  write(root + "/cpu.max", "max 100000\n");
  write(root + "/job/cpu.max", "250000 100000\n");
  write(leaf + "/cpu.max", "max 100000\n");
  EXPECT_EQ(hc::rt::cgroupCpuLimit(root, "/job/step"), 3);
  write(leaf + "/cpu.max", "100000 100000\n");
  EXPECT_EQ(hc::rt::cgroupCpuLimit(root, "/job/step"), 1);
  EXPECT_EQ(hc::rt::cgroupCpuLimit(root, "/"), 0);
  EXPECT_EQ(hc::rt::cgroupCpuLimit(root + "/none", "/job"), 0);
  std::filesystem::remove_all(root, ec);
}

TEST(Topology, AllowedCoresFollowTheAffinityMask) {
  std::vector<int> all = hc::rt::allowedCores();
  ASSERT_FALSE(all.empty());
  cpu_set_t saved, one;
  ASSERT_EQ(sched_getaffinity(0, sizeof saved, &saved), 0);
  CPU_ZERO(&one);
  CPU_SET(all.back(), &one);
  ASSERT_EQ(sched_setaffinity(0, sizeof one, &one), 0);
  EXPECT_EQ(hc::rt::allowedCores(), std::vector<int>{all.back()});
  sched_setaffinity(0, sizeof saved, &saved);
}
