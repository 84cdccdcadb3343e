// First touch of a step's arenas by the clusters that own them
// (hc/runtime/placement.h).
#include "hc/runtime/placement.h"
#include "hc/base/settings.h"

#include "internal.h"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <vector>

namespace {

std::atomic<hcrt_touch_observer> gObserver{nullptr};
std::atomic<void *> gObserverCtx{nullptr};

} // namespace

extern "C" {

char *hcrt_arena_alloc(size_t bytes) {
  constexpr size_t kHuge = size_t{2} << 20;
  const char *setting = hc::rt::setting(hc::rt::Setting::HugePages);
  const bool off = setting && std::strcmp(setting, "0") == 0;
  const bool huge = bytes >= kHuge && !off;
  const size_t align = huge ? kHuge : HCRT_PLACEMENT_PAGE;
  size_t rounded = (std::max<size_t>(bytes, 1) + align - 1) / align * align;
  char *p = static_cast<char *>(std::aligned_alloc(align, rounded));
  // Advice only: without THP support the arena is plain pages. Turned off,
  // opt out too, so THP mode "always" cannot bring them back.
  if (p && (huge || off))
    madvise(p, rounded, huge ? MADV_HUGEPAGE : MADV_NOHUGEPAGE);
  return p;
}

void hcrt_arena_free(char *arena) { std::free(arena); }

int64_t hcrt_huge_page_bytes(const void *p, size_t bytes) {
  std::FILE *f = std::fopen("/proc/self/smaps", "r");
  if (!f)
    return -1;
  const uintptr_t lo = reinterpret_cast<uintptr_t>(p), hi = lo + bytes;
  char line[512];
  bool inRange = false, seen = false;
  int64_t total = 0;
  unsigned long start = 0, end = 0;
  while (std::fgets(line, sizeof line, f)) {
    if (std::sscanf(line, "%lx-%lx ", &start, &end) == 2 &&
        std::strchr(line, '-') < std::strchr(line, ' ')) {
      inRange = start < hi && lo < end;
      continue;
    }
    long kb = 0;
    if (inRange && std::sscanf(line, "AnonHugePages: %ld kB", &kb) == 1) {
      total += int64_t{kb} * 1024;
      seen = true;
    }
  }
  std::fclose(f);
  return seen ? total : -1;
}

void hcrt_set_touch_observer(hcrt_touch_observer fn, void *ctx) {
  gObserverCtx.store(ctx);
  gObserver.store(fn);
}

void hcrt_first_touch(char *const *arenas, const hcrt_touch_slice *slices,
                      int32_t count) {
  using namespace hc::rt;
  Range all = resolve(hc_threads{0, 0});
  // The team's clusters in thread order, and each thread's rank among the
  // threads of its cluster.
  std::vector<int> clusters, rankInCluster(all.count), perCluster;
  for (int i = 0; i < all.count; ++i) {
    int c = teamThreadCluster(i);
    auto it = std::find(clusters.begin(), clusters.end(), c);
    if (it == clusters.end()) {
      clusters.push_back(c);
      perCluster.push_back(0);
      it = clusters.end() - 1;
    }
    rankInCluster[i] = perCluster[it - clusters.begin()]++;
  }
  parallel(all, [&](int thread, int) {
    int mine = teamThreadCluster(thread);
    hcrt_touch_observer observe = gObserver.load();
    for (int32_t s = 0; s < count; ++s) {
      const hcrt_touch_slice &sl = slices[s];
      std::size_t k = static_cast<std::size_t>(sl.owner < 0 ? 0 : sl.owner) %
                      clusters.size();
      if (clusters[k] != mine)
        continue;
      // This thread's page-aligned share of the slice.
      int64_t pages = (sl.bytes + HCRT_PLACEMENT_PAGE - 1) / HCRT_PLACEMENT_PAGE;
      int n = perCluster[k], r = rankInCluster[thread];
      int64_t first = pages * r / n * HCRT_PLACEMENT_PAGE,
              last = std::min<int64_t>(pages * (r + 1) / n * HCRT_PLACEMENT_PAGE,
                                       sl.bytes);
      if (last <= first)
        continue;
      char *begin = arenas[sl.arena] + sl.offset + first;
      std::memset(begin, 0, static_cast<std::size_t>(last - first));
      if (observe)
        observe(gObserverCtx.load(), thread, mine, sl.owner, sl.numa, begin,
                static_cast<std::size_t>(last - first));
    }
  });
}

int32_t hcrt_page_nodes(const void *p, size_t bytes, int32_t *nodes, int32_t max) {
#ifdef SYS_move_pages
  const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  uintptr_t first = reinterpret_cast<uintptr_t>(p) / page * page,
            end = reinterpret_cast<uintptr_t>(p) + bytes;
  int32_t n = static_cast<int32_t>((end - first + page - 1) / page);
  std::vector<void *> pages;
  for (int32_t i = 0; i < n && i < max; ++i)
    pages.push_back(reinterpret_cast<void *>(first + i * page));
  std::vector<int> status(pages.size(), -1);
  // nodes == NULL: report where each page is, move nothing.
  if (!pages.empty() &&
      syscall(SYS_move_pages, 0, pages.size(), pages.data(), nullptr,
              status.data(), 0) != 0)
    return -1;
  for (std::size_t i = 0; i < pages.size(); ++i)
    nodes[i] = status[i] < 0 ? -1 : status[i];
  return n;
#else
  (void)p, (void)bytes, (void)nodes, (void)max;
  return -1;
#endif
}

} // extern "C"
