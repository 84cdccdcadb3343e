// Comm pieces that need no MPI: one-rank communication, the launcher test
// and the C callback for hc_step_env.
#include "hc/runtime/comm.h"
#include "hc/base/settings.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace hc::rt {

int Comm::firstFailingRank(bool failed) {
  // max over ranks of (size - rank) for failed ranks: the lowest failing rank.
  double v = failed ? static_cast<double>(size() - rank()) : 0.0;
  if (!allreduceMaxF64(&v, 1))
    fail(1, "collective failed while agreeing on an error");
  return v == 0.0 ? -1 : size() - static_cast<int>(v);
}

int64_t Comm::startAllreduceSumF32(float *data, std::size_t n) {
  if (!allreduceSumF32(data, n))
    return -1;
  return syncRequests_++;
}

bool Comm::wait(int64_t request) { return request >= 0 && request < syncRequests_; }

namespace {
class SelfComm final : public Comm {
public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  bool allreduceSumF32(float *, std::size_t) override { return true; }
  bool allreduceSumF64(double *, std::size_t) override { return true; }
  bool allreduceMaxF64(double *, std::size_t) override { return true; }
  bool broadcast(void *, std::size_t, int root) override { return root == 0; }
  bool barrier() override { return true; }
  [[noreturn]] void fail(int code, const std::string &message) override {
    std::fflush(stdout);
    std::fprintf(stderr, "%s: %s\n", prefix.c_str(), message.c_str());
    std::fflush(stderr);
    std::_Exit(code);
  }
};
} // namespace

std::unique_ptr<Comm> makeSelfComm() { return std::make_unique<SelfComm>(); }

bool launchedByMpi() {
  using hc::rt::Setting;
  for (Setting v : {Setting::OmpiWorldSize, Setting::PmixRank, Setting::PmiSize}) {
    const char *s = hc::rt::setting(v);
    if (s && *s)
      return true;
  }
  return false;
}

std::unique_ptr<Comm> makeWorldComm(int *argc, char ***argv,
                                    std::string &error) {
  if (launchedByMpi())
    return makeMpiComm(argc, argv, error);
  return makeSelfComm();
}

extern "C" int hc_comm_allreduce_sum_f32(void *comm, float *data,
                                         std::size_t n) {
  if (!comm)
    return -1;
  return static_cast<Comm *>(comm)->allreduceSumF32(data, n) ? 0 : -1;
}

extern "C" int64_t hc_comm_allreduce_start_f32(void *comm, float *data,
                                               std::size_t n) {
  return comm ? static_cast<Comm *>(comm)->startAllreduceSumF32(data, n) : -1;
}

extern "C" int hc_comm_allreduce_wait(void *comm, int64_t request) {
  return comm && static_cast<Comm *>(comm)->wait(request) ? 0 : -1;
}

extern "C" void hc_comm_allreduce_progress(void *comm) {
  if (comm)
    static_cast<Comm *>(comm)->progress();
}

} // namespace hc::rt
