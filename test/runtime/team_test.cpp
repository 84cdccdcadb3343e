// The thread team's placement: slot 0 is the caller, the other slots are
// pinned workers.
#include "internal.h"

#include <gtest/gtest.h>
#include <sched.h>

#include <atomic>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

namespace {

struct SlotCpus {
  std::atomic<int> cpu[2];
};

void recordCpu(void *ctx, int slot, int) {
  static_cast<SlotCpus *>(ctx)->cpu[slot].store(sched_getcpu());
}

// The scheduler may leave the (unpinned) caller on the core of the worker
// that serves slot 1; for the region the caller must step off it (else the
// two share one core while the other idles), and get its affinity back.
TEST(Team, CallerStepsOffAWorkersCore) {
  cpu_set_t all;
  ASSERT_EQ(sched_getaffinity(0, sizeof all, &all), 0);
  if (CPU_COUNT(&all) < 2 || hcrt_num_threads() < 2)
    GTEST_SKIP() << "needs 2 cores and a team of 2";
  SlotCpus s;
  hc::rt::runTeam(hc::rt::Range{0, 2}, recordCpu, &s);
  const int workerCpu = s.cpu[1].load();
  ASSERT_GE(workerCpu, 0);
  // Onto the worker's core, then every core allowed again: it stays there.
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(workerCpu, &one);
  ASSERT_EQ(sched_setaffinity(0, sizeof one, &one), 0);
  ASSERT_EQ(sched_getcpu(), workerCpu);
  ASSERT_EQ(sched_setaffinity(0, sizeof all, &all), 0);
  hc::rt::runTeam(hc::rt::Range{0, 2}, recordCpu, &s);
  EXPECT_EQ(s.cpu[1].load(), workerCpu);
  EXPECT_NE(s.cpu[0].load(), workerCpu);
  cpu_set_t after;
  ASSERT_EQ(sched_getaffinity(0, sizeof after, &after), 0);
  EXPECT_TRUE(CPU_EQUAL(&after, &all));
}


// ---- hcrt_run_clusters: one stream of calls per cluster (CFTP) ----

struct Seen {
  std::mutex mu;
  std::vector<int> calls, first, count;
  std::vector<std::thread::id> who;
};

void recordCluster(void *ctx, int32_t k, hc_threads t) {
  Seen &s = *static_cast<Seen *>(ctx);
  std::lock_guard<std::mutex> lk(s.mu);
  ++s.calls[k];
  s.first[k] = t.first;
  s.count[k] = t.count;
  s.who[k] = std::this_thread::get_id();
}

// Every cluster's function runs once, on its own thread (the caller leads
// cluster 0), with contiguous ranges that tile the team in order.
TEST(RunClusters, RangesTileTheTeamOneCallEach) {
  const int saved = hcrt_num_threads();
  for (int size : {1, 2, 3, 5}) {
    hcrt_set_num_threads(size);
    ASSERT_EQ(hcrt_num_threads(), size);
    for (int n = 1; n <= size; ++n) {
      Seen s;
      s.calls.assign(n, 0);
      s.first.assign(n, -1);
      s.count.assign(n, -1);
      s.who.assign(n, std::thread::id());
      ASSERT_EQ(hcrt_run_clusters(n, recordCluster, &s), 0);
      int next = 0;
      for (int k = 0; k < n; ++k) {
        EXPECT_EQ(s.calls[k], 1) << "size " << size << " cluster " << k;
        EXPECT_EQ(s.first[k], next);
        EXPECT_GE(s.count[k], size / n);
        EXPECT_LE(s.count[k], size / n + 1);
        next += s.count[k];
        if (k > 0)
          EXPECT_NE(s.who[k], s.who[0]);
      }
      EXPECT_EQ(next, size);
      EXPECT_EQ(s.who[0], std::this_thread::get_id());
    }
  }
  hcrt_set_num_threads(saved);
}

TEST(RunClusters, RefusesMoreClustersThanThreads) {
  const int saved = hcrt_num_threads();
  hcrt_set_num_threads(2);
  Seen s;
  s.calls.assign(3, 0);
  s.first.assign(3, -1);
  s.count.assign(3, -1);
  s.who.assign(3, std::thread::id());
  EXPECT_EQ(hcrt_run_clusters(3, recordCluster, &s), -1);
  EXPECT_EQ(hcrt_run_clusters(0, recordCluster, &s), -1);
  EXPECT_EQ(s.calls, std::vector<int>(3, 0));
  hcrt_set_num_threads(saved);
}

// Cross-cluster waits are progress counters: each cluster publishes how
// many of its steps are done and waits for the other's. A lost wakeup or a
// stale read hangs (ctest's timeout) or trips the checks; thousands of
// dispatches and 2000 hand-offs each.
struct PingPong {
  std::atomic<int64_t> done[2];
  std::atomic<int> bad{0};
  int64_t base = 0;
};

void pingPong(void *ctx, int32_t k, hc_threads) {
  PingPong &p = *static_cast<PingPong *>(ctx);
  const int other = 1 - k;
  for (int64_t i = 1; i <= 2000; ++i) {
    // Cluster 1 waits for cluster 0's step i; cluster 0 for 1's step i - 1.
    hc::rt::spinUntil(p.done[other], p.base + (k == 1 ? i : i - 1));
    if (p.done[k].load() != p.base + i - 1)
      p.bad.fetch_add(1);
    p.done[k].store(p.base + i, std::memory_order_release);
  }
}

TEST(RunClusters, ProgressWaitsHandOffWithoutLostWakeups) {
  const int saved = hcrt_num_threads();
  hcrt_set_num_threads(2);
  PingPong p;
  p.done[0] = p.done[1] = 0;
  for (int run = 0; run < 200; ++run) {
    p.base = run * 2000;
    ASSERT_EQ(hcrt_run_clusters(2, pingPong, &p), 0);
    ASSERT_EQ(p.done[0].load(), p.base + 2000);
    ASSERT_EQ(p.done[1].load(), p.base + 2000);
  }
  EXPECT_EQ(p.bad.load(), 0);
  hcrt_set_num_threads(saved);
}

// Kernels called inside a cluster with its range run on that range (the
// uneven split of 3 threads: 1 + 2, the second led by a worker that hands
// work to its own cluster's worker) and give the bits the same call on a
// range of that size gives outside: concurrent clusters share no state.
struct Gemms {
  int64_t M = 96, N = 80, K = 72;
  std::vector<float> a, b, c[2];
};

void gemmIn(Gemms &g, int k, hc_threads t) {
  hc_sgemm_args args;
  std::memset(&args, 0, sizeof args);
  args.M = g.M;
  args.N = g.N;
  args.K = g.K;
  args.alpha = 1.0f;
  args.A = g.a.data() + k * g.M * g.K;
  args.lda = g.K;
  args.B = g.b.data();
  args.ldb = g.N;
  args.C = g.c[k].data();
  args.ldc = g.N;
  args.batch = 1;
  hc_sgemm(&args, t);
}

TEST(RunClusters, KernelsOnClusterRangesAreDeterministic) {
  const int saved = hcrt_num_threads();
  hcrt_set_num_threads(3);
  Gemms g;
  g.a.resize(2 * g.M * g.K);
  g.b.resize(g.K * g.N);
  for (size_t i = 0; i < g.a.size(); ++i)
    g.a[i] = static_cast<float>((i * 7919) % 1000) / 997.0f - 0.5f;
  for (size_t i = 0; i < g.b.size(); ++i)
    g.b[i] = static_cast<float>((i * 104729) % 1000) / 991.0f - 0.5f;
  std::vector<float> want[2];
  for (int k = 0; k < 2; ++k) {
    g.c[k].assign(g.M * g.N, 0.0f);
    gemmIn(g, k, k == 0 ? hc_threads{0, 1} : hc_threads{1, 2});
    want[k] = g.c[k];
  }
  for (int run = 0; run < 50; ++run) {
    g.c[0].assign(g.M * g.N, -1.0f);
    g.c[1].assign(g.M * g.N, -1.0f);
    ASSERT_EQ(hcrt_run_clusters(
                  2,
                  [](void *ctx, int32_t k, hc_threads t) {
                    gemmIn(*static_cast<Gemms *>(ctx), k, t);
                  },
                  &g),
              0);
    for (int k = 0; k < 2; ++k)
      ASSERT_EQ(std::memcmp(g.c[k].data(), want[k].data(),
                            want[k].size() * sizeof(float)),
                0)
          << "cluster " << k << " run " << run;
  }
  hcrt_set_num_threads(saved);
}

} // namespace
