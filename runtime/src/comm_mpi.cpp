// Comm over MPI_COMM_WORLD (Open MPI). MPI_Init_thread asks for
// MPI_THREAD_MULTIPLE and refuses less; errors are returned (not fatal) so a
// failed collective becomes a message; fail() prints and calls MPI_Abort,
// which makes mpirun end every rank.
//
// Gradient buckets go through a dedicated comm thread on a duplicate of
// MPI_COMM_WORLD: it issues MPI_Iallreduce per bucket in the order started
// and drives progress by polling (with a short sleep, so it does not take a
// core from compute), while the step computes the next gradients.
#include "hc/runtime/comm.h"

#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <mutex>
#include <thread>

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
    char *p = static_cast<char *>(data);
    for (std::size_t done = 0; done < bytes;) {
      int c = static_cast<int>(std::min(kChunk, bytes - done));
      if (MPI_Bcast(p + done, c, MPI_BYTE, root, MPI_COMM_WORLD) != MPI_SUCCESS)
        return false;
      done += static_cast<std::size_t>(c);
    }
    return true;
  }
  bool barrier() override { return MPI_Barrier(MPI_COMM_WORLD) == MPI_SUCCESS; }

  int64_t startAllreduceSumF32(float *data, std::size_t n) override {
    if (buckets_ == MPI_COMM_NULL)
      return -1;
    std::lock_guard<std::mutex> lk(mu_);
    if (!thread_.joinable())
      thread_ = std::thread([this] { serveBuckets(); });
    queue_.push_back(Bucket{next_, data, n});
    cv_.notify_all();
    return next_++;
  }

  bool wait(int64_t request) override {
    std::unique_lock<std::mutex> lk(mu_);
    if (request < 0 || request >= next_)
      return false;
    cv_.wait(lk, [&] { return done_ >= request; });
    return !failed_;
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
             progress(req);
        done += static_cast<std::size_t>(c);
      }
      std::lock_guard<std::mutex> lk(mu_);
      done_ = b.id;
      failed_ = failed_ || !ok;
      cv_.notify_all();
    }
  }

  // Polls `req` to completion: briefly hot (a bucket often completes within
  // microseconds), then with sleeps growing to 200 us.
  static bool progress(MPI_Request &req) {
    for (int polls = 0;; ++polls) {
      int flag = 0;
      if (MPI_Test(&req, &flag, MPI_STATUS_IGNORE) != MPI_SUCCESS)
        return false;
      if (flag)
        return true;
      if (polls >= 64)
        std::this_thread::sleep_for(std::chrono::microseconds(
            std::min(200, 1 << std::min(polls - 64, 8))));
    }
  }

  bool allreduce(void *data, std::size_t n, MPI_Datatype type, MPI_Op op,
                 std::size_t item) {
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
  int rank_, size_;
  MPI_Comm buckets_ = MPI_COMM_NULL;
  std::thread thread_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Bucket> queue_;
  int64_t next_ = 0, done_ = -1;
  bool failed_ = false, stop_ = false;
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
