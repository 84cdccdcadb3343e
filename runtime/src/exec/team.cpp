// The persistent thread team and ISA dispatch state of libhcrt.
#include "internal.h"

#include "hc/base/topology.h"

#include "hc/base/settings.h"

#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <memory>
#include <mutex>
#include <pthread.h>
#include <sched.h>
#include <string>
#include <system_error>
#include <thread>
#include <vector>
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace hc::rt {
namespace {

inline void cpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#else
  std::this_thread::yield();
#endif
}

struct Job {
  TaskFn fn = nullptr;
  void *ctx = nullptr;
  int count = 0;
  std::atomic<int> remaining{0};
};

struct Worker {
  std::thread thread;
  std::mutex mu;
  std::condition_variable cv;
  std::atomic<uint64_t> seq{0};
  Job *job = nullptr;
  int slot = 0;
  bool stop = false;
};

struct Team {
  std::vector<std::unique_ptr<Worker>> workers;  // index = team thread
  std::vector<int> cores;                        // core (PU) per team thread
  std::vector<int> cluster;                      // cluster per team thread
  std::vector<int> numa;                         // NUMA node per team thread
  int size = 1;
  bool pinned = false;                           // workers pinned to cores
};

std::mutex gTeamMu;
Team *gTeam = nullptr;
Topology *gTopo = nullptr;
bool gSimulated = false;  // HC_TOPOLOGY: not this machine's cores
CacheInfo gCache;

void loadTopology() {
  if (gTopo)
    return;
  gTopo = new Topology();
  std::string err;
  // HC_TOPOLOGY (a test hook, checked by checkSettings): plan the team on
  // another machine's topology, e.g. test/topologies/lx2.xml.
  const char *sim = hc::rt::setting(hc::rt::Setting::Topology);
  gSimulated = sim && *sim;
  if (!discoverTopology(parseTopologySpec(gSimulated ? sim : ""), *gTopo, err)) {
    gTopo->clusters.clear();
    Cluster c;
    unsigned n = std::thread::hardware_concurrency();
    for (unsigned i = 0; i < (n ? n : 1); ++i)
      c.cores.push_back(static_cast<int>(i));
    gTopo->clusters.push_back(c);
  }
  const Cluster &c0 = gTopo->clusters.front();
  if (c0.l2Bytes)
    gCache.l2 = c0.l2Bytes;
  if (c0.l3Bytes)
    gCache.l3 = c0.l3Bytes;
}

// How long a worker spins before it sleeps, and its caller before it
// yields, in pauses.
constexpr int kSpin = 20000;

void workerLoop(Worker *w) {
  uint64_t seen = 0;
  for (;;) {
    uint64_t s = w->seq.load(std::memory_order_acquire);
    // Spin a while (back-to-back kernels), then sleep.
    for (int spin = 0; s == seen && spin < kSpin; ++spin) {
      cpuRelax();
      s = w->seq.load(std::memory_order_acquire);
    }
    if (s == seen) {
      std::unique_lock<std::mutex> lk(w->mu);
      w->cv.wait(lk, [&] {
        return w->seq.load(std::memory_order_acquire) != seen;
      });
      s = w->seq.load(std::memory_order_acquire);
    }
    seen = s;
    Job *job;
    bool stop;
    {
      std::lock_guard<std::mutex> lk(w->mu);
      job = w->job;
      stop = w->stop;
    }
    if (stop)
      return;
    job->fn(job->ctx, w->slot, job->count);
    job->remaining.fetch_sub(1, std::memory_order_release);
  }
}

bool pinHandle(pthread_t thread, int core) {
  const char *pin = hc::rt::setting(hc::rt::Setting::Pin);  // checkSettings: "0" or "1"
  if ((pin && std::strcmp(pin, "0") == 0) || core < 0 || core >= CPU_SETSIZE)
    return false;
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(core, &set);
  return pthread_setaffinity_np(thread, sizeof(set), &set) == 0;
}

bool pinTo(std::thread &t, int core) {
  return pinHandle(t.native_handle(), core);
}

void destroyTeam(Team *t) {
  if (!t)
    return;
  for (auto &w : t->workers) {
    if (!w)
      continue;
    {
      std::lock_guard<std::mutex> lk(w->mu);
      w->stop = true;
      w->seq.fetch_add(1, std::memory_order_release);
    }
    w->cv.notify_one();
    w->thread.join();
  }
  delete t;
}



// The cores this process may run on: the topology's, less those outside its
// affinity mask (a launcher that binds ranks), and, when several ranks of a
// launcher job share the node unbound, this rank's contiguous share, so
// ranks do not pile their teams onto the same cores. `partitioned` says the
// latter happened (the calling thread is then pinned too).
int gReservedCores = 0;
std::vector<int> reservedList;

void usableCores(std::vector<int> &cores, std::vector<int> &cluster,
                 bool &partitioned) {
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  // A simulated topology's cores are not this machine's: no mask applies.
  bool masked = !gSimulated && sched_getaffinity(0, sizeof(allowed), &allowed) == 0;
  std::vector<int> all, allCluster;
  for (size_t c = 0; c < gTopo->clusters.size(); ++c)
    for (int core : gTopo->clusters[c].cores)
      if (!masked || core < 0 || core >= CPU_SETSIZE || CPU_ISSET(core, &allowed)) {
        all.push_back(core);
        allCluster.push_back(static_cast<int>(c));
      }
  if (all.empty()) {  // the mask names none of the topology's cores
    all.push_back(-1);
    allCluster.push_back(0);
  }
  int localSize = static_cast<int>(hc::rt::settingInt(hc::rt::Setting::OmpiLocalSize, 0)),
      localRank = static_cast<int>(hc::rt::settingInt(hc::rt::Setting::OmpiLocalRank, 0));
  int total = static_cast<int>(all.size());
  partitioned = localSize > 1 && localRank < localSize && total >= localSize;
  size_t first = 0, last = all.size();
  if (partitioned) {
    first = static_cast<size_t>(total) * localRank / localSize;
    last = static_cast<size_t>(total) * (localRank + 1) / localSize;
  }
  cores.assign(all.begin() + first, all.begin() + last);
  cluster.assign(allCluster.begin() + first, allCluster.begin() + last);
  // Cores the host reserved for non-compute threads (hcrt_reserve_cores):
  // the last of this rank's share, so compute keeps its cluster-contiguous
  // front; always at least one core left to compute.
  std::size_t keep = cores.size() > static_cast<std::size_t>(gReservedCores)
                         ? cores.size() - gReservedCores
                         : cores.size();
  reservedList.assign(cores.begin() + keep, cores.end());
  cores.resize(keep);
  cluster.resize(keep);
}

Team *makeTeam(int n) {
  loadTopology();
  Team *t = new Team();
  std::vector<int> cores, cluster;
  bool partitioned = false;
  usableCores(cores, cluster, partitioned);
  if (n <= 0) {
    n = static_cast<int>(cores.size());
    if (int given = threadsSetting())
      n = given;
  }
  if (n <= 0)
    n = 1;
  t->size = n;
  t->workers.resize(n);
  for (int i = 0; i < n; ++i) {
    t->cores.push_back(cores.empty() ? -1 : cores[i % cores.size()]);
    t->cluster.push_back(cluster.empty() ? 0 : cluster[i % cluster.size()]);
    t->numa.push_back(gTopo->clusters[static_cast<std::size_t>(t->cluster.back())]
                          .numaNode);
  }
  // Thread 0 is whoever calls; workers serve the other slots.
  if (partitioned) {
    pinHandle(pthread_self(), t->cores[0]);
  }
  for (int i = 1; i < n; ++i) {
    auto w = std::make_unique<Worker>();
    w->slot = i;
    try {
      w->thread = std::thread(workerLoop, w.get());
    } catch (const std::system_error &e) {
      // The system refused another thread (ulimit -u, memory): run with the
      // team started so far rather than die inside a kernel, and say so.
      std::fprintf(stderr, "hc: warning: could start only %d of %d kernel "
                   "threads (%s); running with %d\n", i, n, e.what(), i);
      t->size = i;
      t->workers.resize(i);
      t->cores.resize(i);
      t->cluster.resize(i);
      t->numa.resize(i);
      break;
    }
    t->pinned |= pinTo(w->thread, t->cores[i]);
    t->workers[i] = std::move(w);
  }
  return t;
}

Team *team() {
  std::lock_guard<std::mutex> lk(gTeamMu);
  if (!gTeam)
    gTeam = makeTeam(0);
  return gTeam;
}

struct TeamGuard {
  ~TeamGuard() {
    destroyTeam(gTeam);
    gTeam = nullptr;
  }
} gTeamGuard;

} // namespace

const CacheInfo &cacheInfo() {
  static const CacheInfo &c = [] () -> const CacheInfo & {
    std::lock_guard<std::mutex> lk(gTeamMu);
    loadTopology();
    return gCache;
  }();
  return c;
}

Range resolve(hc_threads t) {
  int size = team()->size;
  Range r;
  r.first = t.first < 0 ? 0 : (t.first >= size ? size - 1 : t.first);
  int avail = size - r.first;
  r.count = t.count <= 0 || t.count > avail ? avail : t.count;
  return r;
}

// The workers are pinned but the calling thread is not (it is the user's):
// the scheduler may leave it on the core of a worker of the range, where
// the two then share that core while another idles until the periodic
// load balancing moves one (measured here: the worker started 2-4.5 ms
// late, a whole S/2 GEMM at 2 threads ran at one thread's speed in ~15%
// of calls). For such a call the caller's affinity leaves out the range's
// workers' cores and is put back afterwards (two system calls, only then).
class CallerOffWorkerCores {
public:
  CallerOffWorkerCores(const Team &t, Range r) {
    if (!t.pinned || r.count < 2)
      return;
    const int cpu = sched_getcpu();
    bool onWorker = false;
    for (int i = 1; i < r.count; ++i)
      onWorker |= t.cores[r.first + i] == cpu;
    if (!onWorker || sched_getaffinity(0, sizeof saved_, &saved_) != 0)
      return;
    cpu_set_t away = saved_;
    for (int i = 1; i < r.count; ++i)
      if (t.cores[r.first + i] >= 0 && t.cores[r.first + i] < CPU_SETSIZE)
        CPU_CLR(t.cores[r.first + i], &away);
    moved_ = CPU_COUNT(&away) > 0 &&
             sched_setaffinity(0, sizeof away, &away) == 0;
  }
  ~CallerOffWorkerCores() {
    if (moved_)
      sched_setaffinity(0, sizeof saved_, &saved_);
  }

private:
  cpu_set_t saved_;
  bool moved_ = false;
};

// One job per call; slot i of the range runs on team thread first + i (the
// caller runs slot 0 whatever its own identity).
void runTeam(Range r, TaskFn fn, void *ctx) {
  Team *t = team();
  struct Remap {
    TaskFn fn;
    void *ctx;
    int first;
  } remap{fn, ctx, r.first};
  Job inner;
  inner.fn = [](void *c, int thread, int count) {
    Remap *m = static_cast<Remap *>(c);
    m->fn(m->ctx, thread - m->first, count);
  };
  inner.ctx = &remap;
  inner.count = r.count;
  inner.remaining.store(r.count - 1, std::memory_order_relaxed);
  CallerOffWorkerCores stepAside(*t, r);
  for (int i = 1; i < r.count; ++i) {
    Worker *w = t->workers[r.first + i].get();
    {
      std::lock_guard<std::mutex> lk(w->mu);
      w->job = &inner;
      w->seq.fetch_add(1, std::memory_order_release);
    }
    w->cv.notify_one();
  }
  fn(ctx, 0, r.count);
  // Spin about as long as a worker does before it sleeps, then yield: on a
  // shared or oversubscribed node the worker we wait for may need our core.
  for (int spin = 0; inner.remaining.load(std::memory_order_acquire) != 0;
       ++spin) {
    if (spin < kSpin)
      cpuRelax();
    else
      std::this_thread::yield();
  }
}

bool oneNumaNode(Range r) {
  Team *t = team();
  for (int i = r.first + 1; i < r.first + r.count && i < t->size; ++i)
    if (t->numa[i] != t->numa[r.first])
      return false;
  return true;
}

void spinUntil(const std::atomic<int64_t> &v, int64_t target) {
  for (int spin = 0; v.load(std::memory_order_acquire) < target; ++spin) {
    if (spin < kSpin)
      cpuRelax();
    else
      std::this_thread::yield();
  }
}

std::vector<int> reservedCores() {
  std::lock_guard<std::mutex> lk(gTeamMu);
  return reservedList;
}

int teamThreadCluster(int thread) {
  Team *t = team();
  return thread >= 0 && thread < t->size ? t->cluster[thread] : -1;
}

void contractViolation(const char *what) {
  std::fprintf(stderr, "hcrt: %s\n", what);
  std::abort();
}

float *scratch(int slot, std::size_t floats) {
  struct Buf {
    float *p = nullptr;
    std::size_t n = 0;
    ~Buf() { std::free(p); }
  };
  thread_local Buf bufs[8];
  Buf &b = bufs[slot & 7];
  if (b.n < floats) {
    std::free(b.p);
    std::size_t bytes = (floats * sizeof(float) + 63) / 64 * 64;
    b.p = static_cast<float *>(std::aligned_alloc(64, bytes));
    b.n = floats;
  }
  return b.p;
}

} // namespace hc::rt

using namespace hc::rt;

extern "C" {

int32_t hcrt_num_threads(void) { return team()->size; }

void hcrt_set_num_threads(int32_t n) {
  std::lock_guard<std::mutex> lk(gTeamMu);
  destroyTeam(gTeam);
  gTeam = makeTeam(n);
}

int32_t hcrt_reserve_cores(int32_t n, int32_t *out) {
  std::lock_guard<std::mutex> lk(gTeamMu);
  destroyTeam(gTeam);
  gReservedCores = n > 0 ? n : 0;
  gTeam = makeTeam(0);
  if (reservedList.size() < static_cast<std::size_t>(gReservedCores)) {
    // The share cannot spare them: compute keeps every core.
    gReservedCores = 0;
    reservedList.clear();
    destroyTeam(gTeam);
    gTeam = makeTeam(0);
    return 0;
  }
  for (std::size_t i = 0; i < reservedList.size(); ++i)
    out[i] = reservedList[i];
  return static_cast<int32_t>(reservedList.size());
}

int32_t hcrt_run_clusters(int32_t nclusters, hcrt_cluster_fn fn, void *ctx) {
  Team *t = team();
  if (nclusters < 1 || t->size < nclusters || !fn)
    return -1;
  struct Clusters {
    hcrt_cluster_fn fn;
    void *ctx;
    int n, size;
    // Range k = team threads [size k / n, size (k + 1) / n).
    int first(int k) const { return static_cast<int>(int64_t{size} * k / n); }
  } c{fn, ctx, nclusters, t->size};
  Job job;
  job.fn = [](void *p, int thread, int) {
    const Clusters &cl = *static_cast<const Clusters *>(p);
    int k = 0;  // the cluster whose leader `thread` is
    while (k + 1 < cl.n && cl.first(k + 1) <= thread)
      ++k;
    setHelpCluster(k);
    cl.fn(cl.ctx, k, hc_threads{cl.first(k), cl.first(k + 1) - cl.first(k)});
    setHelpCluster(-1);
  };
  job.ctx = &c;
  job.count = nclusters;
  job.remaining.store(nclusters - 1, std::memory_order_relaxed);
  // The caller leads cluster 0 on team thread 0's core; keep it off the
  // cores of the other threads (as runTeam does for its workers).
  CallerOffWorkerCores stepAside(*t, Range{0, t->size});
  for (int k = 1; k < nclusters; ++k) {
    Worker *w = t->workers[c.first(k)].get();
    {
      std::lock_guard<std::mutex> lk(w->mu);
      w->job = &job;
      w->seq.fetch_add(1, std::memory_order_release);
    }
    w->cv.notify_one();
  }
  job.fn(&c, 0, nclusters);
  for (int spin = 0; job.remaining.load(std::memory_order_acquire) != 0; ++spin) {
    if (spin < kSpin)
      cpuRelax();
    else
      std::this_thread::yield();
  }
  return 0;
}

int32_t hcrt_thread_cluster(int32_t t) {
  Team *tm = team();
  if (t < 0 || t >= tm->size)
    return -1;
  return tm->cluster[t];
}

} // extern "C"
