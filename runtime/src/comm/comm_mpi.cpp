// Comm over MPI_COMM_WORLD (Open MPI). MPI_Init_thread asks for
// MPI_THREAD_MULTIPLE and refuses less; errors are returned (not fatal) so a
// failed collective becomes a message; fail() prints and calls MPI_Abort,
// which makes mpirun end every rank.
//
// Gradient buckets are MPI_Iallreduce on a duplicate of MPI_COMM_WORLD, in
// the order started. Debian's Open MPI has no asynchronous progress, so a
// request moves only inside MPI calls; who makes them is the progress mode
// (comm.h): Inline, the step's own thread (started at once, MPI_Test
// between kernels, MPI_Wait at the wait), or Thread, a comm thread (pinned
// to a reserved core and polling, or unpinned with sleeps as a baseline).
#include "hc/runtime/comm.h"

#include <mpi.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <climits>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <mutex>
#include <string>
#include <pthread.h>
#include <sched.h>
#include <thread>
#include <vector>

namespace hc::rt {
namespace {

constexpr std::size_t kChunk = static_cast<std::size_t>(INT_MAX) / 8;

class MpiComm final : public Comm {
public:
  MpiComm(int rank, int size) : rank_(rank), size_(size) {
    if (MPI_Comm_dup(MPI_COMM_WORLD, &buckets_) != MPI_SUCCESS)
      buckets_ = MPI_COMM_NULL;
    else
      MPI_Comm_set_errhandler(buckets_, MPI_ERRORS_RETURN);
  }
  ~MpiComm() override { finalize(); }

  int rank() const override { return rank_; }
  int size() const override { return size_; }

  void setTimeout(double seconds) override {
    // Every rank's host name, to say whose ranks stopped answering.
    char mine[MPI_MAX_PROCESSOR_NAME] = {};
    int len = 0;
    MPI_Get_processor_name(mine, &len);
    std::vector<char> all(static_cast<std::size_t>(size_) * MPI_MAX_PROCESSOR_NAME);
    if (MPI_Allgather(mine, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, all.data(), MPI_MAX_PROCESSOR_NAME,
                      MPI_CHAR, MPI_COMM_WORLD) == MPI_SUCCESS)
      for (int r = 0; r < size_; ++r)
        hosts_.emplace_back(&all[static_cast<std::size_t>(r) * MPI_MAX_PROCESSOR_NAME]);
    timeout_ = seconds;
    if (seconds > 0 && !watchdog_.joinable())
      watchdog_ = std::thread([this] { watch(); });
  }

  bool allreduceSumF32(float *data, std::size_t n) override {
    return allreduce(data, n, MPI_FLOAT, MPI_SUM, sizeof(float));
  }
  bool allreduceSumF64(double *data, std::size_t n) override {
    return allreduce(data, n, MPI_DOUBLE, MPI_SUM, sizeof(double));
  }
  bool allreduceMaxF64(double *data, std::size_t n) override {
    return allreduce(data, n, MPI_DOUBLE, MPI_MAX, sizeof(double));
  }
  bool broadcast(void *data, std::size_t bytes, int root) override {
    Blocked b(this, "a broadcast");
    char *p = static_cast<char *>(data);
    for (std::size_t done = 0; done < bytes;) {
      int c = static_cast<int>(std::min(kChunk, bytes - done));
      if (MPI_Bcast(p + done, c, MPI_BYTE, root, MPI_COMM_WORLD) != MPI_SUCCESS)
        return false;
      done += static_cast<std::size_t>(c);
    }
    return true;
  }
  bool barrier() override {
    Blocked b(this, "a barrier");
    return MPI_Barrier(MPI_COMM_WORLD) == MPI_SUCCESS;
  }

  void setProgress(Progress mode, int core) override {
    std::lock_guard<std::mutex> lk(mu_);
    mode_ = mode;
    core_ = core;
  }

  int64_t startAllreduceSumF32(float *data, std::size_t n) override {
    if (buckets_ == MPI_COMM_NULL)
      return -1;
    std::lock_guard<std::mutex> lk(mu_);
    noteStart(n);
    if (mode_ == Progress::Inline) {
      Inflight f{next_, {}};
      for (std::size_t done = 0; done < n;) {
        int c = static_cast<int>(std::min(kChunk, n - done));
        MPI_Request req;
        if (MPI_Iallreduce(MPI_IN_PLACE, data + done, c, MPI_FLOAT, MPI_SUM,
                           buckets_, &req) != MPI_SUCCESS) {
          failed_ = true;
          break;
        }
        f.requests.push_back(req);
        done += static_cast<std::size_t>(c);
      }
      inflight_.push_back(std::move(f));
      return next_++;
    }
    if (!thread_.joinable())
      thread_ = std::thread([this] { serveBuckets(); });
    queue_.push_back(Bucket{next_, data, n});
    cv_.notify_all();
    return next_++;
  }

  void progress() override {
    if (mode_ != Progress::Inline || inflight_.empty())
      return;
    std::lock_guard<std::mutex> lk(mu_);
    // One MPI_Test drives the whole progress engine; completed buckets at
    // the front are retired so the in-flight time is measured.
    while (!inflight_.empty()) {
      Inflight &f = inflight_.front();
      int flag = 0;
      if (MPI_Testall(static_cast<int>(f.requests.size()), f.requests.data(), &flag,
                      MPI_STATUSES_IGNORE) != MPI_SUCCESS) {
        failed_ = true;
        flag = 1;
      }
      if (!flag)
        return;
      retire(f.id);
      inflight_.pop_front();
    }
  }

  bool wait(int64_t request) override {
    Blocked b(this, "the gradient all-reduce");
    const auto start = Clock::now();
    std::unique_lock<std::mutex> lk(mu_);
    if (request < 0 || request >= next_)
      return false;
    if (mode_ == Progress::Inline) {
      while (!inflight_.empty() && inflight_.front().id <= request) {
        Inflight &f = inflight_.front();
        if (MPI_Waitall(static_cast<int>(f.requests.size()), f.requests.data(),
                        MPI_STATUSES_IGNORE) != MPI_SUCCESS)
          failed_ = true;
        retire(f.id);
        inflight_.pop_front();
      }
    } else {
      cv_.wait(lk, [&] { return done_ >= request; });
    }
    stats_.blockedSeconds += seconds(start);
    return !failed_;
  }

  Stats takeStats() override {
    std::lock_guard<std::mutex> lk(mu_);
    Stats out = stats_;
    if (open_ > 0) { // still in flight: count up to now, go on from now
      out.inflightSeconds += seconds(inflightSince_);
      inflightSince_ = Clock::now();
    }
    stats_ = {};
    return out;
  }

  [[noreturn]] void fail(int code, const std::string &message) override {
    std::fflush(stdout);
    std::fprintf(stderr, "%s: rank %d: %s\n", prefix.c_str(), rank_,
                 message.c_str());
    std::fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, code == 0 ? 1 : code);
    std::_Exit(code == 0 ? 1 : code); // MPI_Abort does not return
  }

  void finalize() override {
    {
      std::lock_guard<std::mutex> lk(mu_);
      stop_ = true;
      cv_.notify_all();
    }
    if (thread_.joinable())
      thread_.join();
    watchdogStop_ = true;
    if (watchdog_.joinable())
      watchdog_.join();
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized)
      MPI_Finalize();  // also frees buckets_
  }

private:
  struct Bucket {
    int64_t id;
    float *data;
    std::size_t n;
  };

  // The comm thread: one bucket at a time, in order (every rank starts the
  // same sequence, so the collectives match).
  void serveBuckets() {
    const bool pinned = core_ >= 0 && pinSelf(core_);
    for (;;) {
      Bucket b;
      {
        std::unique_lock<std::mutex> lk(mu_);
        cv_.wait(lk, [&] { return stop_ || !queue_.empty(); });
        if (queue_.empty())
          return;  // stopping with nothing left
        b = queue_.front();
        queue_.pop_front();
      }
      bool ok = true;
      for (std::size_t done = 0; ok && done < b.n;) {
        int c = static_cast<int>(std::min(kChunk, b.n - done));
        MPI_Request req;
        ok = MPI_Iallreduce(MPI_IN_PLACE, b.data + done, c, MPI_FLOAT, MPI_SUM,
                            buckets_, &req) == MPI_SUCCESS &&
             drive(req, pinned);
        done += static_cast<std::size_t>(c);
      }
      std::lock_guard<std::mutex> lk(mu_);
      done_ = b.id;
      retire(b.id);
      failed_ = failed_ || !ok;
      cv_.notify_all();
    }
  }

  // Polls `req` to completion. On a core of its own, hot; sharing the
  // compute cores, briefly hot (a bucket often completes within
  // microseconds), then with sleeps growing to 200 us.
  static bool drive(MPI_Request &req, bool ownCore) {
    for (int polls = 0;; ++polls) {
      int flag = 0;
      if (MPI_Test(&req, &flag, MPI_STATUS_IGNORE) != MPI_SUCCESS)
        return false;
      if (flag)
        return true;
      if (!ownCore && polls >= 64)
        std::this_thread::sleep_for(std::chrono::microseconds(
            std::min(200, 1 << std::min(polls - 64, 8))));
    }
  }

  // Marks the calling thread blocked in a collective for the watchdog.
  struct Blocked {
    MpiComm *self;
    Blocked(MpiComm *c, const char *what) : self(c) {
      self->blockedWhat_.store(what);
      self->blockedSince_.store(Clock::now().time_since_epoch().count());
    }
    ~Blocked() { self->blockedSince_.store(0); }
  };

  // The watchdog thread: ends this rank when a collective blocks longer
  // than the timeout. It does not call MPI (the peer may be gone, and
  // MPI_Abort would wait on it): it prints and exits 1.
  void watch() {
    while (!watchdogStop_) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      const int64_t since = blockedSince_.load();
      if (since == 0)
        continue;
      const double waited =
          std::chrono::duration<double>(Clock::now().time_since_epoch() -
                                        Clock::duration(since)).count();
      if (waited < timeout_)
        continue;
      std::string others, mine = rank_ < int(hosts_.size()) ? hosts_[rank_] : "?";
      for (int r = 0; r < int(hosts_.size()); ++r)
        if (hosts_[r] != mine && others.find(hosts_[r]) == std::string::npos)
          others += (others.empty() ? "" : ", ") + hosts_[r];
      std::fflush(stdout);
      std::fprintf(stderr,
                   "%s: rank %d (host %s): %s has waited %.1f s (--comm-timeout %g) for "
                   "the ranks on %s: their host or its link is unreachable; ending this rank\n",
                   prefix.c_str(), rank_, mine.c_str(), blockedWhat_.load(), waited, timeout_,
                   others.empty() ? "this host (another rank stopped)" : others.c_str());
      std::fflush(stderr);
      std::_Exit(1);
    }
  }

  bool allreduce(void *data, std::size_t n, MPI_Datatype type, MPI_Op op,
                 std::size_t item) {
    Blocked b(this, "a collective");
    const auto start = Clock::now();
    struct Count {
      MpiComm *self;
      Clock::time_point start;
      ~Count() {
        std::lock_guard<std::mutex> lk(self->mu_);
        self->stats_.blockedSeconds += seconds(start);
      }
    } count{this, start};
    char *p = static_cast<char *>(data);
    for (std::size_t done = 0; done < n;) {
      int c = static_cast<int>(std::min(kChunk, n - done));
      if (MPI_Allreduce(MPI_IN_PLACE, p + done * item, c, type, op,
                        MPI_COMM_WORLD) != MPI_SUCCESS)
        return false;
      done += static_cast<std::size_t>(c);
    }
    return true;
  }
  using Clock = std::chrono::steady_clock;
  static double seconds(Clock::time_point since) {
    return std::chrono::duration<double>(Clock::now() - since).count();
  }
  static bool pinSelf(int core) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(core, &set);
    return pthread_setaffinity_np(pthread_self(), sizeof set, &set) == 0;
  }
  // Under mu_: a request starts / completes (in order), for the stats.
  void noteStart(std::size_t n) {
    if (open_++ == 0)
      inflightSince_ = Clock::now();
    ++stats_.requests;
    stats_.bytes += static_cast<double>(n) * sizeof(float);
  }
  void retire(int64_t) {
    if (open_ > 0 && --open_ == 0)
      stats_.inflightSeconds += seconds(inflightSince_);
  }

  struct Inflight {
    int64_t id;
    std::vector<MPI_Request> requests; // one per chunk of the bucket
  };
  int rank_, size_;
  Progress mode_ = Progress::Inline;
  int core_ = -1;
  std::deque<Inflight> inflight_;
  Stats stats_;
  int64_t open_ = 0;
  Clock::time_point inflightSince_;
  MPI_Comm buckets_ = MPI_COMM_NULL;
  std::thread thread_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Bucket> queue_;
  int64_t next_ = 0, done_ = -1;
  bool failed_ = false, stop_ = false;
  // The watchdog (setTimeout): what blocks since when (steady clock ticks;
  // 0: nothing blocks), every rank's host.
  double timeout_ = 0;
  std::vector<std::string> hosts_;
  std::atomic<int64_t> blockedSince_{0};
  std::atomic<const char *> blockedWhat_{""};
  std::atomic<bool> watchdogStop_{false};
  std::thread watchdog_;
};

} // namespace

std::unique_ptr<Comm> makeMpiComm(int *argc, char ***argv, std::string &error) {
  int provided = 0;
  if (MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &provided) !=
      MPI_SUCCESS) {
    error = "MPI_Init_thread failed";
    return nullptr;
  }
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  auto comm = std::make_unique<MpiComm>(rank, size);
  if (provided < MPI_THREAD_MULTIPLE) {
    const char *names[] = {"MPI_THREAD_SINGLE", "MPI_THREAD_FUNNELED",
                           "MPI_THREAD_SERIALIZED", "MPI_THREAD_MULTIPLE"};
    error = std::string("MPI grants only ") +
            (provided >= 0 && provided <= 3 ? names[provided] : "an unknown level") +
            ", hc needs MPI_THREAD_MULTIPLE";
    comm->fail(2, error); // a half-started job cannot go on: end all ranks
  }
  return comm;
}

} // namespace hc::rt
