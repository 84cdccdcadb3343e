#include "data.h"

#include "common.h"

#include "hc/runtime/random.h"

#include <cerrno>
#include <cmath>
#include <cstring>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace hcrun {

MappedNpy::~MappedNpy() {
  if (base_)
    munmap(const_cast<char *>(base_), size_);
}

void MappedNpy::open(const std::string &path) {
  path_ = path;
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    usageError(path + ": cannot open: " + std::strerror(errno));
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size == 0) {
    ::close(fd);
    usageError(path + ": not a regular, non-empty file");
  }
  size_ = static_cast<std::size_t>(st.st_size);
  void *m = mmap(nullptr, size_, PROT_READ, MAP_SHARED, fd, 0);
  ::close(fd);
  if (m == MAP_FAILED)
    usageError(path + ": cannot map: " + std::strerror(errno));
  base_ = static_cast<const char *>(m);
  madvise(m, size_, MADV_RANDOM); // shuffled rows
  std::string err;
  if (!hc::rt::parseNpyHeader(base_, size_, header_, err))
    usageError(path + ": " + err);
}

std::vector<int64_t> epochPermutation(uint64_t seed, int64_t epoch, int64_t n) {
  std::vector<int64_t> p(static_cast<std::size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    p[i] = i;
  for (int64_t i = n - 1; i > 0; --i) {
    auto b = hc::rt::philox4x32(
        static_cast<uint32_t>(i), static_cast<uint32_t>(uint64_t(i) >> 32),
        static_cast<uint32_t>(epoch),
        static_cast<uint32_t>(kDrawPermutation) ^
            (static_cast<uint32_t>(uint64_t(epoch) >> 32) << 16),
        static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32));
    uint64_t r = (uint64_t(b.v[0]) << 32) | b.v[1];
    int64_t j = static_cast<int64_t>(r % uint64_t(i + 1));
    std::swap(p[i], p[j]);
  }
  return p;
}

EpochSampler::EpochSampler(uint64_t seed, int64_t n, int64_t globalBatch)
    : seed_(seed), n_(n), g_(globalBatch) {}

int64_t EpochSampler::row(int64_t step, int64_t g) {
  int64_t perEpoch = stepsPerEpoch() * g_;
  int64_t pos = step * g_ + g;
  int64_t epoch = pos / perEpoch;
  if (epoch != epoch_) {
    perm_ = epochPermutation(seed_, epoch, n_);
    epoch_ = epoch;
  }
  return perm_[static_cast<std::size_t>(pos % perEpoch)];
}

DiffusionSchedule::DiffusionSchedule() {
  // numpy.linspace(1e-4, 0.02, 1000): start + i*step, the last exactly 0.02.
  const double start = 1e-4, stop = 0.02;
  const double step = (stop - start) / (kSteps - 1);
  double ab = 1.0;
  for (int i = 0; i < kSteps; ++i) {
    double beta = i == kSteps - 1 ? stop : i * step + start;
    ab *= 1.0 - beta;
    sqrtAb[i] = std::sqrt(ab);
    sqrtOneMinusAb[i] = std::sqrt(1.0 - ab);
  }
}

Sample makeSample(const DiffusionSchedule &sched, uint64_t seed, uint64_t step,
                  uint64_t g, const float *x0, std::size_t d, int64_t label,
                  double dropProb, int64_t nullClass, float *xt, float *eps) {
  using hc::rt::uniform01;
  Sample s;
  s.t = static_cast<int64_t>(uniform01(seed, step, g, kDrawTimestep, 0) *
                             DiffusionSchedule::kSteps);
  if (s.t >= DiffusionSchedule::kSteps)
    s.t = DiffusionSchedule::kSteps - 1;
  const double twoPi = 6.283185307179586476925;
  for (std::size_t k = 0; k < d; k += 2) {
    double u1 = uniform01(seed, step, g, kDrawNoise, k);
    double u2 = uniform01(seed, step, g, kDrawNoise, k + 1);
    double rad = std::sqrt(-2.0 * std::log(1.0 - u1)); // 1-u1 in (0, 1]
    eps[k] = static_cast<float>(rad * std::cos(twoPi * u2));
    if (k + 1 < d)
      eps[k + 1] = static_cast<float>(rad * std::sin(twoPi * u2));
  }
  const float a = static_cast<float>(sched.sqrtAb[s.t]);
  const float b = static_cast<float>(sched.sqrtOneMinusAb[s.t]);
  for (std::size_t i = 0; i < d; ++i) {
    float ax = a * x0[i];
    float be = b * eps[i];
    xt[i] = ax + be;
  }
  s.y = label;
  if (dropProb > 0 && uniform01(seed, step, g, kDrawLabelDrop, 0) < dropProb)
    s.y = nullClass;
  return s;
}

} // namespace hcrun
