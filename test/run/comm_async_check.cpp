// The comm layer's asynchronous bucket all-reduce under mpirun: many buckets
// in flight at once, blocking collectives on the main thread in between (as
// a step's loss and hc-run's metrics do), waits in order and out of order;
// every bucket must hold the exact sum over ranks. Exit 0 on success, 1 with
// one line per wrong bucket otherwise. Run by e2e.run.comm-async.
#include "hc/runtime/comm.h"

#include <cstdio>
#include <string>
#include <vector>

int main(int argc, char **argv) {
  std::string error;
  auto comm = hc::rt::makeWorldComm(&argc, &argv, error);
  if (!comm) {
    std::fprintf(stderr, "comm-async-check: %s\n", error.c_str());
    return 2;
  }
  const int R = comm->size(), me = comm->rank();
  // Odd sizes, one of them empty and one past a single chunk's worth of
  // cache lines.
  const std::vector<size_t> sizes = {1, 7, 0, 4099, 1 << 18, 33, 100003};
  int bad = 0;
  for (int step = 0; step < 3; ++step) {
    std::vector<std::vector<float>> buckets;
    for (size_t n : sizes) {
      std::vector<float> b(n);
      for (size_t i = 0; i < n; ++i)
        b[i] = static_cast<float>((me + 1) * (i % 97) + step);
      buckets.push_back(std::move(b));
    }
    std::vector<int64_t> requests;
    for (auto &b : buckets) {
      requests.push_back(comm->startAllreduceSumF32(b.data(), b.size()));
      double x = me;
      if (!comm->allreduceMaxF64(&x, 1) || x != R - 1)
        ++bad;
    }
    // Wait for the last first: earlier ones are then complete too.
    for (size_t k = requests.size(); k-- > 0;)
      if (!comm->wait(requests[k])) {
        std::fprintf(stderr, "comm-async-check: rank %d: wait failed\n", me);
        ++bad;
      }
    const float rankSum = static_cast<float>(R * (R + 1) / 2);
    for (size_t k = 0; k < buckets.size(); ++k)
      for (size_t i = 0; i < buckets[k].size(); ++i) {
        float want = rankSum * static_cast<float>(i % 97) + static_cast<float>(R * step);
        if (buckets[k][i] != want) {
          std::fprintf(stderr, "comm-async-check: rank %d step %d bucket %zu[%zu] = %g, want %g\n",
                       me, step, k, i, buckets[k][i], want);
          ++bad;
          break;
        }
      }
  }
  if (me == 0 && bad == 0)
    std::printf("comm-async-check: %d ranks, 3 x %zu buckets: exact sums\n", R, sizes.size());
  comm->finalize();
  return bad ? 1 : 0;
}
