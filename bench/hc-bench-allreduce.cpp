// hc-bench-allreduce: what one gradient bucket costs. Times the all-reduce
// hc-run uses (hc::rt::Comm::allreduceSumF32 over MPI) for message sizes from
// 4 KiB to 64 MiB and prints, per size, the median time, the bandwidth, and
// the time to all-reduce a whole model's gradients in buckets of that size.
// The bucket default (hc-compile --bucket-mb) is the smallest bucket whose
// whole-model time is within 10% of the best: smaller buckets start their
// all-reduce earlier (more overlap with backward), larger ones pay less per
// message overhead. Not a test; run it under mpirun with the job's ranks:
//   mpirun -np 2 hc-bench-allreduce [--model-mb 132]
#include "hc/runtime/comm.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace {

double medianSeconds(hc::rt::Comm &comm, std::vector<float> &buf, size_t n,
                     int reps) {
  std::vector<double> times;
  for (int r = 0; r < 5; ++r) {
    comm.barrier();
    auto t0 = std::chrono::steady_clock::now();
    for (int k = 0; k < reps; ++k)
      if (!comm.allreduceSumF32(buf.data(), n))
        comm.fail(1, "all-reduce failed");
    double t = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
                   .count() / reps;
    // Every rank reports the slowest rank's time: the step waits for it.
    double slowest = t;
    comm.allreduceMaxF64(&slowest, 1);
    times.push_back(slowest);
  }
  std::sort(times.begin(), times.end());
  return times[2];
}

} // namespace

int main(int argc, char **argv) {
  std::string error;
  auto comm = hc::rt::makeWorldComm(&argc, &argv, error);
  if (!comm) {
    std::fprintf(stderr, "hc-bench-allreduce: %s\n", error.c_str());
    return 2;
  }
  comm->prefix = "hc-bench-allreduce";
  double modelMb = 132.0;  // DiT-S/2's trainable parameters in float32
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--model-mb" && i + 1 < argc)
      modelMb = std::atof(argv[++i]);
    else
      comm->fail(2, "unknown argument '" + arg + "' (only --model-mb MB)");
  }
  if (!(modelMb > 0))
    comm->fail(2, "--model-mb needs a positive number");
  const double modelBytes = modelMb * (1 << 20);
  std::vector<size_t> sizes;
  for (size_t bytes = 4 << 10; bytes <= (64u << 20); bytes *= 2)
    sizes.push_back(bytes);
  std::vector<float> buf(sizes.back() / 4, 1.0f);
  std::vector<double> whole;
  if (comm->rank() == 0)
    std::printf("ranks %d; whole model %.0f MiB\n%10s %12s %10s %14s\n", comm->size(),
                modelMb, "bucket", "median_us", "GB/s", "model_ms");
  for (size_t bytes : sizes) {
    size_t n = bytes / 4;
    int reps = static_cast<int>(std::clamp<size_t>((64u << 20) / bytes, 2, 256));
    double t = medianSeconds(*comm, buf, n, reps);
    double buckets = std::max(1.0, modelBytes / static_cast<double>(bytes));
    whole.push_back(buckets * t);
    if (comm->rank() == 0)
      std::printf("%9zuK %12.1f %10.2f %14.1f\n", bytes >> 10, t * 1e6,
                  static_cast<double>(bytes) / t / 1e9, whole.back() * 1e3);
  }
  double best = *std::min_element(whole.begin(), whole.end());
  size_t pick = 0;
  while (whole[pick] > 1.10 * best)
    ++pick;
  if (comm->rank() == 0)
    std::printf("smallest bucket within 10%% of the best whole-model time: %zu KiB"
                " (%.1f ms vs best %.1f ms)\n",
                sizes[pick] >> 10, whole[pick] * 1e3, best * 1e3);
  comm->finalize();
  return 0;
}
