// The copy engine (hc/runtime/copy_engine.h): lanes of a FIFO of copies and
// a copy thread each, and the disk tier's files.
#include "hc/runtime/copy_engine.h"

#include "internal.h"

#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <fcntl.h>
#include <mutex>
#include <pthread.h>
#include <sched.h>
#include <string>
#include <sys/stat.h>
#include <thread>
#include <unistd.h>
#include <vector>

namespace {

constexpr int64_t kChunk = int64_t{4} << 20;
constexpr int64_t kBlock = 4096;

using Clock = std::chrono::steady_clock;

struct Disk {
  int fd = -1;
  bool direct = false;
  int64_t bytes = 0;
  std::string dir;
};

struct Copy {
  int64_t seq;  // the lane's sequence number (1, 2, ...)
  int32_t kind;
  char *dst;
  const char *src;
  int64_t bytes;
  int32_t disk;
  int64_t offset;
};

// One FIFO of copies and its thread. A lane's copies run one at a time in
// the order queued; lanes run side by side.
struct Lane {
  std::condition_variable work;
  std::deque<Copy> queue;
  std::thread thread;
  bool started = false;
  int64_t issued = 0;
  std::atomic<int64_t> finished{0};
  char *staging = nullptr;  // kChunk bytes, kBlock-aligned (direct I/O)
};

struct Engine {
  std::mutex mu;
  std::condition_variable done;
  Lane lanes[HCRT_COPY_LANES];
  bool stop = false;
  std::string failure;  // the first failed copy's message; sticky
  std::vector<Disk> disks;
  std::string overrideDir;
  hcrt_copy_stats stats{};

  ~Engine() {
    {
      std::lock_guard<std::mutex> lk(mu);
      stop = true;
    }
    for (Lane &l : lanes) {
      l.work.notify_all();
      if (l.thread.joinable())
        l.thread.join();
      std::free(l.staging);
    }
    for (Disk &d : disks)
      if (d.fd >= 0)
        close(d.fd);
  }
};

Engine &engine() {
  static Engine e;
  return e;
}

// A ticket names its lane and its place in the lane's FIFO.
int64_t ticketOf(int32_t lane, int64_t seq) { return seq * HCRT_COPY_LANES + lane; }

std::string errnoText(int err) { return std::strerror(err); }

// Whole-range I/O: loops over short transfers; false + errno on failure.
bool writeAll(int fd, const char *p, int64_t n, int64_t at) {
  while (n > 0) {
    ssize_t w = pwrite(fd, p, static_cast<size_t>(n), at);
    if (w < 0 && errno == EINTR)
      continue;
    if (w <= 0) {
      if (w == 0)
        errno = ENOSPC;
      return false;
    }
    p += w, n -= w, at += w;
  }
  return true;
}

bool readAll(int fd, char *p, int64_t n, int64_t at) {
  while (n > 0) {
    ssize_t r = pread(fd, p, static_cast<size_t>(n), at);
    if (r < 0 && errno == EINTR)
      continue;
    if (r <= 0) {
      if (r == 0)
        errno = EIO;  // the file is shorter than it was made: changed under us
      return false;
    }
    p += r, n -= r, at += r;
  }
  return true;
}

// One chunk of a copy; false + a message on failure.
bool copyChunk(Engine &e, const Copy &c, char *staging, int64_t at, int64_t n,
               std::string &error) {
  if (c.kind == HCRT_COPY_TO_SLOW || c.kind == HCRT_COPY_FROM_SLOW) {
    std::memcpy(c.dst + at, c.src + at, static_cast<size_t>(n));
    return true;
  }
  const Disk &d = e.disks[static_cast<size_t>(c.disk)];
  const int64_t fileAt = c.offset + at;
  // Direct I/O reads and writes whole blocks at block-aligned addresses:
  // a block-aligned buffer's whole blocks move in place, the rest (a
  // misaligned buffer, a last partial block) through the staging buffer.
  // Staged, 1 GiB took 0.54-0.89 s and 0.22-0.34 s of CPU to write, 0.88-1.18
  // and 0.10-0.15 to read; in place 0.27 and 0.04, 0.48 and 0.04 (virtio
  // disk, Zen 4): the copy threads share the kernels' cores.
  const bool toDisk = c.kind == HCRT_COPY_TO_DISK;
  const uintptr_t memAt = reinterpret_cast<uintptr_t>(toDisk ? c.src + at : c.dst + at);
  const int64_t inPlace = d.direct && memAt % kBlock == 0 ? n / kBlock * kBlock : 0;
  const int64_t rest = n - inPlace;
  const int64_t padded = (rest + kBlock - 1) / kBlock * kBlock;
  bool ok;
  if (toDisk) {
    if (d.direct) {
      ok = writeAll(d.fd, c.src + at, inPlace, fileAt);
      if (ok && rest > 0) {
        std::memcpy(staging, c.src + at + inPlace, static_cast<size_t>(rest));
        ok = writeAll(d.fd, staging, padded, fileAt + inPlace);
      }
    } else {
      ok = writeAll(d.fd, c.src + at, n, fileAt);
      // Written back and dropped: offloaded data must leave RAM.
      if (ok)
        ok = sync_file_range(d.fd, fileAt, n,
                             SYNC_FILE_RANGE_WAIT_BEFORE | SYNC_FILE_RANGE_WRITE |
                                 SYNC_FILE_RANGE_WAIT_AFTER) == 0;
      if (ok)
        posix_fadvise(d.fd, fileAt, n, POSIX_FADV_DONTNEED);
    }
  } else {
    if (d.direct) {
      ok = readAll(d.fd, c.dst + at, inPlace, fileAt);
      if (ok && rest > 0) {
        ok = readAll(d.fd, staging, padded, fileAt + inPlace);
        if (ok)
          std::memcpy(c.dst + at + inPlace, staging, static_cast<size_t>(rest));
      }
    } else {
      ok = readAll(d.fd, c.dst + at, n, fileAt);
      if (ok)
        posix_fadvise(d.fd, fileAt, n, POSIX_FADV_DONTNEED);
    }
  }
  if (!ok)
    error = "offload file in " + d.dir + ": " +
            (toDisk ? "write" : "read") + " of " +
            std::to_string(n) + " bytes at " + std::to_string(fileAt) +
            " failed: " + errnoText(errno);
  return ok;
}

void copyLoop(Engine *e, Lane *lane, bool pinned) {
  for (;;) {
    Copy c;
    bool ok;
    {
      std::unique_lock<std::mutex> lk(e->mu);
      lane->work.wait(lk, [&] { return e->stop || !lane->queue.empty(); });
      if (e->stop)
        return;
      c = lane->queue.front();
      ok = e->failure.empty();  // after a failure, nothing more is copied
    }
    const auto t0 = Clock::now();
    std::string error;
    for (int64_t at = 0; ok && at < c.bytes; at += kChunk) {
      ok = copyChunk(*e, c, lane->staging, at, std::min(kChunk, c.bytes - at), error);
      if (!pinned)
        sched_yield();  // sharing a compute core: let the step's thread run
    }
    const double busy = std::chrono::duration<double>(Clock::now() - t0).count();
    {
      std::lock_guard<std::mutex> lk(e->mu);
      lane->queue.pop_front();
      if (!ok && e->failure.empty())
        e->failure = error.empty() ? "a copy before it failed" : error;
      e->stats.bytes[c.kind] += ok ? c.bytes : 0;
      e->stats.copies += ok;
      e->stats.busy_s += busy;
      lane->finished.store(c.seq, std::memory_order_release);
    }
    e->done.notify_all();
  }
}

// Lane `k`'s thread, on first use: on a core the budget reserved (lanes
// share them round robin), else unpinned.
void startLane(Engine &e, int32_t k) {
  Lane &l = e.lanes[k];
  if (l.started)
    return;
  l.started = true;
  if (!l.staging)
    l.staging = static_cast<char *>(std::aligned_alloc(kBlock, kChunk));
  std::vector<int> reserved = hc::rt::reservedCores();
  const bool pin = !reserved.empty();
  l.thread = std::thread(copyLoop, &e, &l, pin);
  if (pin) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(reserved[reserved.size() - 1 - static_cast<size_t>(k) % reserved.size()], &set);
    pthread_setaffinity_np(l.thread.native_handle(), sizeof set, &set);
  }
}

bool queuesEmpty(const Engine &e) {
  for (const Lane &l : e.lanes)
    if (!l.queue.empty())
      return false;
  return true;
}

} // namespace

extern "C" {

void hcrt_set_offload_dir(const char *dir) {
  Engine &e = engine();
  std::lock_guard<std::mutex> lk(e.mu);
  e.overrideDir = dir ? dir : "";
}

int32_t hcrt_disk_open(const char *dirArg, int64_t bytes, char *error, size_t size) {
  Engine &e = engine();
  std::lock_guard<std::mutex> lk(e.mu);
  std::string dir = !e.overrideDir.empty() ? e.overrideDir : (dirArg ? dirArg : "");
  auto fail = [&](const std::string &why) {
    std::snprintf(error, size, "%s", why.c_str());
    return -1;
  };
  if (dir.empty())
    return fail("the step offloads to disk but no offload folder was given "
                "(hc-compile --offload-dir DIR, or hc-run --offload-dir DIR)");
  struct stat st;
  if (stat(dir.c_str(), &st) != 0)
    return fail("offload folder " + dir + ": " + errnoText(errno));
  if (!S_ISDIR(st.st_mode))
    return fail("offload folder " + dir + ": not a folder");
  Disk d;
  d.dir = dir;
  d.bytes = (bytes + kBlock - 1) / kBlock * kBlock;
  // Unnamed and direct where the file system allows; each fallback says
  // what it gives up only through hcrt_disk_direct.
  const int base = O_RDWR | O_CLOEXEC;
  d.fd = open(dir.c_str(), base | O_TMPFILE | O_DIRECT, 0600);
  d.direct = d.fd >= 0;
  if (d.fd < 0)
    d.fd = open(dir.c_str(), base | O_TMPFILE, 0600);
  if (d.fd < 0 && (errno == EOPNOTSUPP || errno == EISDIR || errno == EINVAL)) {
    std::string path = dir + "/.hc-offload-XXXXXX";
    std::vector<char> name(path.begin(), path.end());
    name.push_back('\0');
    d.fd = mkostemp(name.data(), O_CLOEXEC);
    if (d.fd >= 0) {
      unlink(name.data());
      int flags = fcntl(d.fd, F_GETFL);
      d.direct = fcntl(d.fd, F_SETFL, flags | O_DIRECT) == 0;
    }
  }
  if (d.fd < 0)
    return fail("offload folder " + dir + ": cannot make a file there: " +
                errnoText(errno));
  if (int err = posix_fallocate(d.fd, 0, d.bytes); err != 0) {
    close(d.fd);
    return fail("offload folder " + dir + ": cannot reserve " + std::to_string(d.bytes) +
                " bytes for the disk tier: " + errnoText(err));
  }
  e.disks.push_back(d);
  return static_cast<int32_t>(e.disks.size()) - 1;
}

void hcrt_disk_close(int32_t disk) {
  Engine &e = engine();
  std::unique_lock<std::mutex> lk(e.mu);
  // Copies still queued may use the file: let them finish first.
  e.done.wait(lk, [&] { return queuesEmpty(e); });
  if (disk >= 0 && static_cast<size_t>(disk) < e.disks.size() && e.disks[disk].fd >= 0) {
    close(e.disks[disk].fd);
    e.disks[disk].fd = -1;
  }
}

int32_t hcrt_disk_direct(int32_t disk) {
  Engine &e = engine();
  std::lock_guard<std::mutex> lk(e.mu);
  if (disk < 0 || static_cast<size_t>(disk) >= e.disks.size() || e.disks[disk].fd < 0)
    return -1;
  return e.disks[disk].direct ? 1 : 0;
}

int64_t hcrt_copy_start(int32_t lane, int32_t kind, void *dst, const void *src,
                        int64_t bytes, int32_t disk, int64_t offset) {
  Engine &e = engine();
  // More streams than lanes share them (each lane keeps its FIFO order).
  lane = lane < 0 ? 0 : lane % HCRT_COPY_LANES;
  Lane &l = e.lanes[lane];
  int64_t seq;
  {
    std::lock_guard<std::mutex> lk(e.mu);
    startLane(e, lane);
    seq = ++l.issued;
    l.queue.push_back(Copy{seq, kind, static_cast<char *>(dst),
                           static_cast<const char *>(src), bytes, disk, offset});
  }
  l.work.notify_one();
  return ticketOf(lane, seq);
}

int32_t hcrt_copy_wait(int64_t ticket, char *error, size_t size) {
  Engine &e = engine();
  if (ticket <= 0)  // no copy was started under it: nothing to wait for
    ticket = 0;
  Lane &l = e.lanes[ticket % HCRT_COPY_LANES];
  const int64_t seq = ticket / HCRT_COPY_LANES;
  if (l.finished.load(std::memory_order_acquire) < seq) {
    const auto t0 = Clock::now();
    std::unique_lock<std::mutex> lk(e.mu);
    e.done.wait(lk, [&] { return l.finished.load(std::memory_order_acquire) >= seq; });
    e.stats.stall_s += std::chrono::duration<double>(Clock::now() - t0).count();
  }
  std::lock_guard<std::mutex> lk(e.mu);
  if (!e.failure.empty()) {
    std::snprintf(error, size, "%s", e.failure.c_str());
    return -1;
  }
  return 0;
}

void hcrt_copy_stats_take(hcrt_copy_stats *out) {
  Engine &e = engine();
  std::lock_guard<std::mutex> lk(e.mu);
  *out = e.stats;
  e.stats = hcrt_copy_stats{};
}

} // extern "C"
