#include "data.h"
#include "hc/base/settings.h"

#include "common.h"

#include "hc/abi/random.h"

#include <algorithm>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <cstring>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace hcrun {

namespace {
// Mapped data files, for mappedFileFault(); written before any step, read
// only by the signal handler.
struct MappedRegion {
  const char *base = nullptr;
  std::size_t size = 0;
  char line[512] = {0};
};
MappedRegion gRegions[64];  // data, labels, validation, conditionings (more: no line)

int64_t mtimeNs(const struct stat &st) {
  return static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
}
} // namespace

const char *mappedFileFault(const void *addr) {
  const char *a = static_cast<const char *>(addr);
  for (const MappedRegion &r : gRegions)
    if (r.base && a >= r.base && a < r.base + r.size)
      return r.line;
  return nullptr;
}

MappedNpy::~MappedNpy() {
  for (MappedRegion &r : gRegions)
    if (base_ && r.base == base_)
      r.base = nullptr;
  if (base_)
    munmap(const_cast<char *>(base_), size_);
  if (fd_ >= 0)
    ::close(fd_);
}

std::string MappedNpy::changed() const {
  struct stat st;
  if (fstat(fd_, &st) != 0)
    return std::string("cannot be checked: ") + std::strerror(errno);
  if (static_cast<std::size_t>(st.st_size) != size_)
    return "is " + std::to_string(st.st_size) + " bytes now, " +
           std::to_string(size_) + " when the run started (truncated or "
           "rewritten during the run)";
  if (mtimeNs(st) != mtimeNs_)
    return "was modified during the run (same size, new modification time)";
  return "";
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
  mtimeNs_ = mtimeNs(st);
  void *m = mmap(nullptr, size_, PROT_READ, MAP_SHARED, fd, 0);
  if (m == MAP_FAILED) {
    ::close(fd);
    usageError(path + ": cannot map: " + std::strerror(errno));
  }
  fd_ = fd; // kept for changed()
  base_ = static_cast<const char *>(m);
  for (MappedRegion &r : gRegions)
    if (!r.base) {
      std::snprintf(r.line, sizeof r.line,
                    "hc-run: %s: truncated during the run (was %zu bytes; a "
                    "read past its new end faulted); stopping\n",
                    path.c_str(), size_);
      r.size = size_;
      r.base = base_;
      break;
    }
  madvise(m, size_, MADV_RANDOM); // shuffled rows
  std::string err;
  if (!hc::rt::parseNpyHeader(base_, size_, header_, err))
    usageError(path + ": " + err);
}

void dataFaultForTest(const MappedNpy &f, int64_t step, bool afterCheck) {
#if !HC_TEST_SEAMS
  (void)f, (void)step, (void)afterCheck;
#else
  static const char *kind = hc::rt::setting(hc::rt::Setting::DataFault);
  static const char *at = hc::rt::setting(hc::rt::Setting::DataFaultAtStep);
  if (!kind || !at || std::atoll(at) != step)
    return;
  if (!afterCheck && !std::strcmp(kind, "rewrite")) {
    int fd = ::open(f.path().c_str(), O_WRONLY | O_CLOEXEC);
    char c = static_cast<char>(f.data()[0] ^ 1);
    struct timespec times[2] = {{0, UTIME_OMIT}, {0, 0}};
    clock_gettime(CLOCK_REALTIME, &times[1]);
    times[1].tv_sec += 1;
    if (fd < 0 || pwrite(fd, &c, 1, f.header().dataOffset) != 1 ||
        futimens(fd, times) != 0)
      std::fprintf(stderr, "hc-run: test hook: cannot rewrite %s\n", f.path().c_str());
    if (fd >= 0)
      ::close(fd);
  } else if (afterCheck && !std::strcmp(kind, "truncate")) {
    if (truncate(f.path().c_str(), static_cast<off_t>(f.header().dataOffset)) != 0)
      std::fprintf(stderr, "hc-run: test hook: cannot truncate %s\n", f.path().c_str());
  }
#endif
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

namespace {
// Standard normal noise of sample g (Box-Muller over uniform pairs).
void drawNoise(uint64_t seed, uint64_t step, uint64_t g, std::size_t d, float *eps) {
  using hc::rt::uniform01;
  const double twoPi = 6.283185307179586476925;
  for (std::size_t k = 0; k < d; k += 2) {
    double u1 = uniform01(seed, step, g, kDrawNoise, k);
    double u2 = uniform01(seed, step, g, kDrawNoise, k + 1);
    double rad = std::sqrt(-2.0 * std::log(1.0 - u1)); // 1-u1 in (0, 1]
    eps[k] = static_cast<float>(rad * std::cos(twoPi * u2));
    if (k + 1 < d)
      eps[k + 1] = static_cast<float>(rad * std::sin(twoPi * u2));
  }
}

int64_t drawLabel(uint64_t seed, uint64_t step, uint64_t g, int64_t label, double dropProb,
                  int64_t nullClass) {
  if (dropProb > 0 && hc::rt::uniform01(seed, step, g, kDrawLabelDrop, 0) < dropProb)
    return nullClass;
  return label;
}
} // namespace

Sample makeSample(const DiffusionSchedule &sched, uint64_t seed, uint64_t step,
                  uint64_t g, const float *x0, std::size_t d, int64_t label,
                  double dropProb, int64_t nullClass, float *xt, float *eps,
                  std::size_t flipWidth, float *x0Out) {
  using hc::rt::uniform01;
  Sample s;
  s.flipped = flipWidth > 0 && uniform01(seed, step, g, kDrawFlip, 0) < 0.5;
  s.t = static_cast<int64_t>(uniform01(seed, step, g, kDrawTimestep, 0) *
                             DiffusionSchedule::kSteps);
  if (s.t >= DiffusionSchedule::kSteps)
    s.t = DiffusionSchedule::kSteps - 1;
  drawNoise(seed, step, g, d, eps);
  const float a = static_cast<float>(sched.sqrtAb[s.t]);
  const float b = static_cast<float>(sched.sqrtOneMinusAb[s.t]);
  for (std::size_t i = 0; i < d; ++i) {
    const std::size_t src = mirroredIndex(i, s.flipped, flipWidth);
    float ax = a * x0[src];
    float be = b * eps[i];
    xt[i] = ax + be;
    if (x0Out)
      x0Out[i] = x0[src];
  }
  s.y = drawLabel(seed, step, g, label, dropProb, nullClass);
  return s;
}

Sample makeFlowSample(const FlowObjective &flow, const TimeSampling &time, uint64_t seed,
                      uint64_t step, uint64_t g, const float *x1, std::size_t d, int64_t label,
                      double dropProb, int64_t nullClass, float *xt, float *target,
                      float *noise, std::size_t flipWidth) {
  using hc::rt::uniform01;
  Sample s;
  s.flipped = flipWidth > 0 && uniform01(seed, step, g, kDrawFlip, 0) < 0.5;
  const auto [t0, t1] = flow.trainInterval();
  s.flowT = static_cast<float>(time.draw(uniform01(seed, step, g, kDrawTimestep, 0),
                                         uniform01(seed, step, g, kDrawTimestep, 1), t0, t1));
  s.t = 0;
  drawNoise(seed, step, g, d, noise);
  const FlowObjective::Coefficients c = flow.at(static_cast<double>(s.flowT));
  const float a = static_cast<float>(c.alpha), b = static_cast<float>(c.sigma);
  const float da = static_cast<float>(c.dAlpha), db = static_cast<float>(c.dSigma);
  const bool velocity = flow.prediction == FlowPrediction::Velocity;
  for (std::size_t i = 0; i < d; ++i) {
    const float x = x1[mirroredIndex(i, s.flipped, flipWidth)];
    float ax = a * x, be = b * noise[i];
    xt[i] = ax + be;
    if (velocity) {
      float dax = da * x, dbe = db * noise[i];
      target[i] = dax + dbe;
    } else {
      target[i] = noise[i];
    }
  }
  s.y = drawLabel(seed, step, g, label, dropProb, nullClass);
  return s;
}

std::string dataKindOf(const std::string &dataPath) {
  const std::size_t slash = dataPath.find_last_of('/');
  const std::string info =
      (slash == std::string::npos ? std::string() : dataPath.substr(0, slash + 1)) +
      "classes.json";
  std::FILE *f = std::fopen(info.c_str(), "r");
  if (!f)
    return "unknown";
  std::string text;
  char buf[4096];
  for (std::size_t n; (n = std::fread(buf, 1, sizeof buf, f)) > 0;)
    text.append(buf, n);
  std::fclose(f);
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  const std::string mode =
      j.is_object() && j.contains("mode") && j["mode"].is_string() ? j["mode"].get<std::string>()
                                                                     : "";
  return mode == "pixels" || mode == "latents" ? mode : "unknown";
}

int64_t labelAt(const MappedNpy &l, int64_t i) {
  const std::string &dt = l.header().dtype;
  if (dt == "i8")
    return reinterpret_cast<const int64_t *>(l.data())[i];
  if (dt == "i4")
    return reinterpret_cast<const int32_t *>(l.data())[i];
  return reinterpret_cast<const uint8_t *>(l.data())[i];
}

BatchBuffers::BatchBuffers(const Description &d, const Plan &plan, int64_t batch)
    : plan_(plan), d_(plan.sampleElems), xt_(batch * d_), noise_(batch * d_),
      xStart_(plan.xStart >= 0 ? batch * d_ : 0), target_(plan.flow ? batch * d_ : 0),
      tf_(batch), t64_(batch), y64_(batch), t32_(batch), y32_(batch),
      ptrs_(d.inputs.size()) {
  ptrs_[plan.xt] = xt_.data();
  if (plan.noise >= 0)
    ptrs_[plan.noise] = noise_.data();
  if (plan.xStart >= 0)
    ptrs_[plan.xStart] = xStart_.data();
  if (plan.flow)
    ptrs_[plan.target] = target_.data();
  ptrs_[plan.t] = plan.flow                          ? static_cast<const void *>(tf_.data())
                  : d.inputs[plan.t].dtype == "I32" ? static_cast<const void *>(t32_.data())
                                                    : t64_.data();
  if (plan.y >= 0)
    ptrs_[plan.y] = d.inputs[plan.y].dtype == "I32" ? static_cast<const void *>(y32_.data())
                                                   : y64_.data();
  for (const CondInput &c : plan.conds) {
    cond_.emplace_back(static_cast<std::size_t>(batch) * c.elems);
    condDrop_.emplace_back(static_cast<std::size_t>(batch));
    ptrs_[c.input] = cond_.back().data();
    if (c.dropInput >= 0)
      ptrs_[c.dropInput] = condDrop_.back().data();
  }
  for (auto [input, key] : {std::pair{plan.rngSeed, &rngSeed_}, std::pair{plan.rngStep, &rngStep_},
                            std::pair{plan.sampleOffset, &sampleOffset_}})
    if (input >= 0)
      ptrs_[input] = key;
}

void BatchBuffers::fill(int64_t b, const DiffusionSchedule &sched, uint64_t seed, uint64_t step,
                        uint64_t g, const float *x0, int64_t label, double dropProb,
                        std::size_t flipWidth, const std::vector<const float *> &conds,
                        double condDropProb) {
  Sample smp = plan_.flow
                   ? makeFlowSample(plan_.flowObjective, plan_.timeSampling, seed, step, g, x0,
                                    d_, label, dropProb, plan_.nullClass, &xt_[b * d_],
                                    &target_[b * d_], &noise_[b * d_], flipWidth)
                   : makeSample(sched, seed, step, g, x0, d_, label, dropProb, plan_.nullClass,
                                &xt_[b * d_], &noise_[b * d_], flipWidth,
                                plan_.xStart >= 0 ? &xStart_[b * d_] : nullptr);
  // The graph's draws for sample b are keyed by g = offset + b, as hc-run's.
  if (b == 0) {
    rngSeed_ = static_cast<int64_t>(seed);
    rngStep_ = static_cast<int64_t>(step);
    sampleOffset_ = static_cast<int64_t>(g);
  } else if (plan_.sampleOffset >= 0 && g != static_cast<uint64_t>(sampleOffset_ + b)) {
    throw Error(1, "internal error: sample " + std::to_string(b) + " of a batch is global "
                   "sample " + std::to_string(g) + ", not " + std::to_string(sampleOffset_ + b));
  }
  tf_[b] = smp.flowT;
  t64_[b] = smp.t;
  t32_[b] = static_cast<int32_t>(smp.t);
  y64_[b] = smp.y;
  y32_[b] = static_cast<int32_t>(smp.y);
  for (std::size_t k = 0; k < plan_.conds.size(); ++k) {
    const CondInput &c = plan_.conds[k];
    const bool drop = condDropProb > 0 && !c.graphDrops &&
                      hc::rt::uniform01(seed, step, g, kDrawCondDrop, k) < condDropProb;
    // A field is mirrored with its sample (the same decision), so the pair
    // stays aligned; vectors and tokens have no left and right.
    c.write(conds[k], drop, c.kind == CondKind::Field && smp.flipped,
            &cond_[k][static_cast<std::size_t>(b) * c.elems],
            &condDrop_[k][static_cast<std::size_t>(b)]);
  }
}

} // namespace hcrun
