// The collective hosts and steps use, without MPI in the interface: a job of
// `size()` ranks; one rank (SelfComm) does no communication at all; the MPI
// implementation (comm_mpi.cpp) wraps MPI_COMM_WORLD.
//
// Failure policy: a rank that cannot go on calls fail(), which prints its
// message and ends the WHOLE job with a non-zero code (MPI_Abort), so the
// other ranks never hang in a collective waiting for it. Errors every rank
// may or may not see (a file missing on one node) are settled with
// firstFailingRank() so exactly one rank reports and all exit alike.
#ifndef HC_RUNTIME_COMM_H
#define HC_RUNTIME_COMM_H

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace hc::rt {

class Comm {
public:
  virtual ~Comm() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // In-place sums / maxima over all ranks; false on a communication error.
  virtual bool allreduceSumF32(float *data, std::size_t n) = 0;
  virtual bool allreduceSumF64(double *data, std::size_t n) = 0;
  virtual bool allreduceMaxF64(double *data, std::size_t n) = 0;
  // Asynchronous in-place sum (a gradient bucket): starts it and returns a
  // request id >= 0 for wait(), or -1. Requests run in the order started,
  // which must be the same on every rank, on their own communicator, so they
  // never interleave with the blocking collectives above. `data` must not be
  // touched until wait() returns. This base version completes at once.
  virtual int64_t startAllreduceSumF32(float *data, std::size_t n);
  // Blocks until `request` is done; false if it (or one before it) failed.
  virtual bool wait(int64_t request);

  // How asynchronous requests advance. An MPI without asynchronous progress
  // (Debian's Open MPI: "OMPI progress: no") moves a nonblocking collective
  // only while some MPI call runs, so someone must call in:
  //   Inline: the caller starts each request at once; progress(), which the
  //           step calls between kernels, and wait() drive them. No thread,
  //           nothing sleeping or spinning on a compute core. The default.
  //   Thread: a comm thread issues and drives them. Pinned to `core` (>= 0,
  //           a core the budget reserved, hc-run --comm-cores) it polls
  //           without sleeping; unpinned (core < 0) it shares the compute
  //           cores and polls with short sleeps, as hc did before
  //           2026-11-25 (kept as a baseline: HC_COMM_PROGRESS=thread).
  enum class Progress { Inline, Thread };
  virtual void setProgress(Progress mode, int core) { (void)mode, (void)core; }
  // Advances outstanding requests without blocking (cheap: one MPI_Test).
  virtual void progress() {}
  // What the asynchronous requests cost since the last call: wall time with
  // at least one request in flight, time a caller was blocked in wait() or
  // a blocking collective, requests and bytes.
  struct Stats {
    double inflightSeconds = 0, blockedSeconds = 0;
    int64_t requests = 0;
    double bytes = 0;
  };
  virtual Stats takeStats() { return {}; }
  // The watchdog (hc-run --comm-timeout): a rank blocked in a collective or
  // a wait for longer than `seconds` prints which hosts' ranks did not
  // answer and exits 1 at once, without MPI (Open MPI 4.1 has no timeout
  // of its own; TCP retries for about 15 minutes). 0: off. Collective.
  virtual void setTimeout(double seconds) { (void)seconds; }
  // Copies `bytes` bytes from rank `root` into `data` on every rank.
  virtual bool broadcast(void *data, std::size_t bytes, int root) = 0;
  virtual bool barrier() = 0;
  // Prints "PREFIX: rank R: MESSAGE" (or "PREFIX: MESSAGE" with one rank) to
  // stderr, flushes stdout and stderr, and ends the whole job with `code`.
  [[noreturn]] virtual void fail(int code, const std::string &message) = 0;
  // Collective: the lowest rank with `failed` set, or -1 when none failed.
  int firstFailingRank(bool failed);
  // Ends the communication layer (MPI_Finalize); idempotent.
  virtual void finalize() {}

  std::string prefix = "hc";

private:
  int64_t syncRequests_ = 0;  // the base start/wait's completed requests
};

// One rank, no communication.
std::unique_ptr<Comm> makeSelfComm();

// True when this process was started by a launcher (mpirun/mpiexec: Open
// MPI's OMPI_COMM_WORLD_SIZE, PMIx's PMIX_RANK, or PMI_SIZE).
bool launchedByMpi();

// MPI_Init_thread(MPI_THREAD_MULTIPLE) (the level granted is checked) on
// MPI_COMM_WORLD, errors returned rather than fatal. nullptr + `error` when
// MPI cannot be started or does not grant MPI_THREAD_MULTIPLE.
std::unique_ptr<Comm> makeMpiComm(int *argc, char ***argv, std::string &error);

// MPI when launchedByMpi(), otherwise one rank.
std::unique_ptr<Comm> makeWorldComm(int *argc, char ***argv,
                                    std::string &error);

// C callback with the signature of hc_step_env::allreduce_sum_f32; `comm` is
// a Comm*. Returns 0 on success.
extern "C" int hc_comm_allreduce_sum_f32(void *comm, float *data,
                                         std::size_t n);
// Callbacks of hc_step_env::allreduce_start_f32 / allreduce_wait.
extern "C" int64_t hc_comm_allreduce_start_f32(void *comm, float *data,
                                               std::size_t n);
extern "C" int hc_comm_allreduce_wait(void *comm, int64_t request);
extern "C" void hc_comm_allreduce_progress(void *comm);

} // namespace hc::rt

#endif // HC_RUNTIME_COMM_H
