// The thread team's placement: slot 0 is the caller, the other slots are
// pinned workers.
#include "internal.h"

#include <gtest/gtest.h>
#include <sched.h>

#include <atomic>

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

} // namespace
