// Comm over MPI_COMM_WORLD (Open MPI). MPI_Init_thread asks for
// MPI_THREAD_MULTIPLE and refuses less; errors are returned (not fatal) so a
// failed collective becomes a message; fail() prints and calls MPI_Abort,
// which makes mpirun end every rank.
#include "hc/runtime/comm.h"

#include <mpi.h>

#include <algorithm>
#include <climits>
#include <cstdio>
#include <cstdlib>

namespace hc::rt {
namespace {

constexpr std::size_t kChunk = static_cast<std::size_t>(INT_MAX) / 8;

class MpiComm final : public Comm {
public:
  MpiComm(int rank, int size) : rank_(rank), size_(size) {}
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

  [[noreturn]] void fail(int code, const std::string &message) override {
    std::fflush(stdout);
    std::fprintf(stderr, "%s: rank %d: %s\n", prefix.c_str(), rank_,
                 message.c_str());
    std::fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, code == 0 ? 1 : code);
    std::_Exit(code == 0 ? 1 : code); // MPI_Abort does not return
  }

  void finalize() override {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized)
      MPI_Finalize();
  }

private:
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
