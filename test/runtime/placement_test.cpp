// First touch of planned arena slices (hc/runtime/placement.h).
//
// Native*: on this machine; every page's NUMA node is asked of the kernel
// with move_pages and must be the node of the team cluster that touched it.
// Simulated*: run with HC_TOPOLOGY=<lx2.xml> (ctest sets it): the team is
// planned on a 4-cluster die with a NUMA node per cluster; the observer
// hook records which thread of which cluster touched which bytes, and each
// slice must be touched, whole and once, by its owner's cluster, whose
// nearest node is the slice's home.
#include "hc/runtime/kernels.h"
#include "hc/runtime/placement.h"
#include "hc/base/topology.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <mutex>
#include <vector>

namespace {

constexpr int64_t kPage = HCRT_PLACEMENT_PAGE;

struct Touch {
  int thread, cluster, owner, numa;
  const char *begin;
  size_t bytes;
};

std::mutex gMu;
std::vector<Touch> gTouches;

void record(void *, int32_t thread, int32_t cluster, int32_t owner, int32_t numa,
            const void *begin, size_t bytes) {
  std::lock_guard<std::mutex> lk(gMu);
  gTouches.push_back({thread, cluster, owner, numa,
                      static_cast<const char *>(begin), bytes});
}

struct Arena {
  char *p;
  explicit Arena(int64_t bytes)
      : p(static_cast<char *>(std::aligned_alloc(kPage, bytes))) {
    std::memset(p, 0x5a, 64);  // not zero yet (only the first page mapped)
  }
  ~Arena() { std::free(p); }
};

// Owners 0..n-1 over `pages` pages of one arena, as hc-plan-placement cuts it.
std::vector<hcrt_touch_slice> slices(int n, int64_t pages) {
  std::vector<hcrt_touch_slice> out;
  for (int k = 0; k < n; ++k)
    out.push_back({0, k, k, pages * k / n * kPage,
                   (pages * (k + 1) / n - pages * k / n) * kPage});
  return out;
}

hc::rt::Topology topologyOfTeam() {
  hc::rt::Topology t;
  std::string error;
  const char *sim = std::getenv("HC_TOPOLOGY");
  EXPECT_TRUE(hc::rt::discoverTopology(hc::rt::parseTopologySpec(sim ? sim : ""),
                                       t, error)) << error;
  return t;
}

} // namespace

TEST(SimulatedPlacement, EachSliceTouchedOnceByItsOwnersCluster) {
  ASSERT_NE(std::getenv("HC_TOPOLOGY"), nullptr) << "run through ctest";
  hc::rt::Topology topo = topologyOfTeam();
  ASSERT_EQ(topo.clusters.size(), 4u);
  ASSERT_EQ(hcrt_num_threads(), 32);
  const int64_t pages = 64;
  Arena arena(pages * kPage);
  std::vector<hcrt_touch_slice> s = slices(4, pages);
  for (hcrt_touch_slice &x : s)
    x.numa = topo.clusters[x.owner].nearNuma.front();  // the plan's home
  gTouches.clear();
  hcrt_set_touch_observer(record, nullptr);
  char *arenas[1] = {arena.p};
  hcrt_first_touch(arenas, s.data(), static_cast<int32_t>(s.size()));
  hcrt_set_touch_observer(nullptr, nullptr);

  std::vector<int> touchedBy(pages, -1);
  for (const Touch &t : gTouches) {
    EXPECT_EQ(hcrt_thread_cluster(t.thread), t.cluster);
    EXPECT_EQ(t.cluster, t.owner) << "slice of owner " << t.owner
                                  << " touched by cluster " << t.cluster;
    // The touching cluster's own node is the slice's home.
    EXPECT_EQ(topo.clusters[t.cluster].numaNode, t.numa);
    int64_t off = t.begin - arena.p;
    EXPECT_EQ(off % kPage, 0);
    for (int64_t p = off / kPage; p < (off + static_cast<int64_t>(t.bytes)) / kPage; ++p) {
      EXPECT_EQ(touchedBy[p], -1) << "page " << p << " touched twice";
      touchedBy[p] = t.owner;
    }
  }
  for (int64_t p = 0; p < pages; ++p)
    EXPECT_EQ(touchedBy[p], static_cast<int>(p * 4 / pages)) << "page " << p;
  for (int64_t i = 0; i < pages * kPage; ++i)
    ASSERT_EQ(arena.p[i], 0) << "byte " << i;
  // 8 threads per cluster share its slice.
  EXPECT_EQ(gTouches.size(), 32u);
}

// A plan for more clusters than the team has: owner k runs on team cluster
// k mod n, nothing is left untouched.
TEST(NativePlacement, MoreOwnersThanClustersStillTouchEverything) {
  const int64_t pages = 40;
  Arena arena(pages * kPage);
  std::vector<hcrt_touch_slice> s = slices(8, pages);
  char *arenas[1] = {arena.p};
  hcrt_first_touch(arenas, s.data(), static_cast<int32_t>(s.size()));
  for (int64_t i = 0; i < pages * kPage; ++i)
    ASSERT_EQ(arena.p[i], 0) << "byte " << i;
}

// move_pages: every touched page is resident on the node of the cluster
// whose thread touched it (on a one-node machine: node 0 throughout).
TEST(NativePlacement, MovePagesReportsTheTouchingClustersNode) {
  hc::rt::Topology topo = topologyOfTeam();
  const int64_t pages = 32;
  Arena arena(pages * kPage);
  std::vector<hcrt_touch_slice> s = slices(static_cast<int>(topo.clusters.size()), pages);
  gTouches.clear();
  hcrt_set_touch_observer(record, nullptr);
  char *arenas[1] = {arena.p};
  hcrt_first_touch(arenas, s.data(), static_cast<int32_t>(s.size()));
  hcrt_set_touch_observer(nullptr, nullptr);
  std::vector<int32_t> nodes(pages + 1);
  int32_t n = hcrt_page_nodes(arena.p, pages * kPage, nodes.data(), pages + 1);
  if (n < 0)
    GTEST_SKIP() << "move_pages is not available here";
  ASSERT_EQ(n, pages);
  ASSERT_FALSE(gTouches.empty());
  for (const Touch &t : gTouches) {
    int64_t first = (t.begin - arena.p) / kPage,
            last = first + static_cast<int64_t>(t.bytes) / kPage;
    for (int64_t p = first; p < last; ++p)
      EXPECT_EQ(nodes[p], topo.clusters[t.cluster].numaNode)
          << "page " << p << " touched by cluster " << t.cluster;
  }
}

// Step arenas (hcrt_arena_alloc): 2 MiB-aligned with huge pages asked for
// when they span one, page-aligned below that or under HC_HUGE_PAGES=0;
// every byte writable. Whether the kernel grants huge pages depends on the
// machine (THP mode, fragmentation), so that is reported, not required.
TEST(NativePlacement, ArenasAreHugePageAlignedWhenLarge) {
  const size_t big = 8u << 20, small = 12288;
  unsetenv("HC_HUGE_PAGES");
  char *a = hcrt_arena_alloc(big);
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(a) % (2u << 20), 0u);
  std::memset(a, 1, big);
  EXPECT_EQ(a[big - 1], 1);
  int64_t huge = hcrt_huge_page_bytes(a, big);
  std::printf("transparent huge pages backing an 8 MiB arena: %lld bytes\n",
              static_cast<long long>(huge));
  EXPECT_LE(huge, static_cast<int64_t>(big));
  char *b = hcrt_arena_alloc(small);
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(b) % HCRT_PLACEMENT_PAGE, 0u);
  std::memset(b, 2, small);
  hcrt_arena_free(a);
  hcrt_arena_free(b);
  setenv("HC_HUGE_PAGES", "0", 1);
  char *c = hcrt_arena_alloc(big);
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(c) % HCRT_PLACEMENT_PAGE, 0u);
  std::memset(c, 3, big);
  EXPECT_EQ(hcrt_huge_page_bytes(c, big) > 0, false)
      << "HC_HUGE_PAGES=0 still got huge pages (THP mode 'always'?)";
  hcrt_arena_free(c);
  unsetenv("HC_HUGE_PAGES");
}
