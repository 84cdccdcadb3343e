// Train-mode data: memory-mapped NPY files, the epoch permutation and DiT's
// diffusion sampling, all from counter-based draws keyed by the seed, so
// every rank computes the same global batch without talking to the others.
#ifndef HC_RUN_DATA_H
#define HC_RUN_DATA_H

#include "cond_data.h"
#include "transport.h"

#include "hc/abi/random.h"
#include "hc/base/npy.h"

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace hcrun {

// A read-only mapping of an NPY file (only the pages a rank touches are read).
// The file must not change while the run reads it: changed() compares its
// size and modification time with those at open (the train loop asks every
// step), and a truncation between two checks faults with SIGBUS inside the
// mapping, which hc-run's handler reports through mappedFileFault().
class MappedNpy {
public:
  MappedNpy() = default;
  ~MappedNpy();
  MappedNpy(const MappedNpy &) = delete;
  MappedNpy &operator=(const MappedNpy &) = delete;
  void open(const std::string &path); // throws Error(2)
  const hc::rt::NpyHeader &header() const { return header_; }
  const char *data() const { return base_ + header_.dataOffset; }
  const std::string &path() const { return path_; }
  // "" when the file is as it was at open; else what changed, in words.
  std::string changed() const;

private:
  std::string path_;
  hc::rt::NpyHeader header_;
  const char *base_ = nullptr;
  std::size_t size_ = 0;
  int fd_ = -1;
  int64_t mtimeNs_ = 0;
};

// Test hook (HC_DATA_FAULT=rewrite|truncate, HC_DATA_FAULT_AT_STEP=k, rank 0
// only, the --data file): before step k, "rewrite" changes one byte of `f` in place and moves
// its modification time (caught by changed()); "truncate" cuts it to its
// header right after the check (caught by the SIGBUS path). Deterministic
// stand-ins for a user rewriting the data under a running job.
void dataFaultForTest(const MappedNpy &f, int64_t step, bool afterCheck);

// What --data holds, from models/prepare_data.py's classes.json beside it:
// "pixels", "latents", or "unknown" (no such file, or another mode).
std::string dataKindOf(const std::string &dataPath);

// Label i of an integer NPY vector (i8, i4 or u1, checked at open).
int64_t labelAt(const MappedNpy &l, int64_t i);

// What train mode reads from the library and the data: the inputs'
// positions in the description, the sample shape and the classes.
struct Plan {
  int xt = -1, t = -1, y = -1, noise = -1; // input positions
  int xStart = -1;  // the clean sample, for objectives that need it (VLB)
  int target = -1;  // a flow objective's target (u_t, or the noise)
  bool flow = false;  // a flow objective (float t, x_t from its path)
  FlowObjective flowObjective;
  TimeSampling timeSampling;
  std::vector<int64_t> chw;
  std::size_t sampleElems = 0;
  int64_t numClasses = 0;
  int64_t nullClass = 0;
  double dropProb = 0;
  int64_t n = 0;
  double dataMaxAbs = 0;  // over the first samples: pixels in [0, 255]?
  std::vector<CondInput> conds;  // conditionings beyond y (cond_data.h)
  double condDropProb = 0;       // each conditioning's null form, per sample
  // The inputs of the graph's own random draws (hc/abi/random.h), -1 where
  // it draws none: the run's seed, the step and the micro-batch's first
  // global sample, keying its draws as hc-run's own are keyed.
  int rngSeed = -1, rngStep = -1, sampleOffset = -1;
};

// For a SIGBUS handler (async-signal-safe): the line to print when `addr`
// lies in a mapped data file, else nullptr.
const char *mappedFileFault(const void *addr);

// Draw kinds (the op id of random.h); distinct per kind.
enum DrawKind : uint64_t {
  kDrawPermutation = 0x70,
  kDrawTimestep = 0x71,
  kDrawNoise = 0x72,
  kDrawLabelDrop = 0x73,
  kDrawFlip = 0x74,
  kDrawCondDrop = 0x75,  // element k: conditioning k (the graph's order)
};
static_assert(kDrawCondDrop < hc::rt::kGraphDrawFirst,
              "hc-run's draws keep below a graph's op ids (hc/abi/random.h)");

// Which data row the global sample g (0 <= g < globalBatch) of step s reads:
// position p = s*G + g within a stream of epochs of floor(N/G)*G samples (an
// incomplete last batch is dropped, as DiT's DataLoader(drop_last=True));
// epoch e = p / (stepsPerEpoch*G) is a Fisher-Yates permutation of [0, N)
// from Philox keyed by (seed, e).
class EpochSampler {
public:
  EpochSampler(uint64_t seed, int64_t n, int64_t globalBatch);
  int64_t row(int64_t step, int64_t g);
  int64_t stepsPerEpoch() const { return n_ / g_; }

private:
  uint64_t seed_;
  int64_t n_, g_, epoch_ = -1;
  std::vector<int64_t> perm_;
};

// Fisher-Yates permutation of [0, n) for (seed, epoch); identical everywhere.
std::vector<int64_t> epochPermutation(uint64_t seed, int64_t epoch, int64_t n);

// DiT's training diffusion (1000 steps, linear betas 1e-4..0.02 in float64,
// as models/diffusion.py): sqrt(ab_t) and sqrt(1-ab_t).
struct DiffusionSchedule {
  static constexpr int kSteps = 1000;
  double sqrtAb[kSteps], sqrtOneMinusAb[kSteps];
  DiffusionSchedule();
};

// One training sample from clean x0 [D]: t ~ U{0..999}, eps ~ N(0,1) (Box-
// Muller over uniform pairs), x_t = sqrt(ab_t) x0 + sqrt(1-ab_t) eps with the
// coefficients rounded to float first; y = label, or `nullClass` with
// probability dropProb. Keyed by (seed, step, global sample g). With
// flipWidth > 0, x0 (rows of flipWidth values, the image's last axis) is
// first mirrored left-right when a draw is below 1/2 (DiT's
// RandomHorizontalFlip); the result says whether it was. x0Out, when given,
// receives that (maybe mirrored) x0: the graph input x_start of objectives
// with a variational bound.
struct Sample {
  int64_t t, y;
  bool flipped = false;
  float flowT = 0;  // makeFlowSample's t
};
Sample makeSample(const DiffusionSchedule &sched, uint64_t seed, uint64_t step,
                  uint64_t g, const float *x0, std::size_t d, int64_t label,
                  double dropProb, int64_t nullClass, float *xt, float *eps,
                  std::size_t flipWidth = 0, float *x0Out = nullptr);

// One flow-matching sample from clean data x1 [D]: t from `time` on the
// objective's training interval (draws kDrawTimestep 0 and 1), rounded to
// float32, the path's coefficients at that float t in float64 rounded to
// float32; x0 ~ N(0, 1) as makeSample's eps; x_t = alpha x1 + sigma x0 and
// target = alpha' x1 + sigma' x0 (velocity) or x0 (noise, score). Labels
// and --hflip as makeSample.
Sample makeFlowSample(const FlowObjective &flow, const TimeSampling &time, uint64_t seed,
                      uint64_t step, uint64_t g, const float *x1, std::size_t d, int64_t label,
                      double dropProb, int64_t nullClass, float *xt, float *target,
                      float *noise, std::size_t flipWidth = 0);

// One rank's inputs of a training graph for B samples, in the description's
// order (`ptrs`): x_t, noise, x_start (where the graph has it), t and y as
// the graph's int64 or int32, each conditioning with its drop input, and
// the keys of the graph's own draws. fill(b, ...) draws sample b into them;
// samples 0..B-1 must be the global samples g0..g0+B-1 (g0: the keys'
// sample offset, set with sample 0).
struct Description;
class BatchBuffers {
public:
  BatchBuffers(const Description &d, const Plan &plan, int64_t batch);
  // makeSample() for slot b; the label as given (dropout applies). `conds`:
  // the sample's row of each conditioning (plan.conds' order). Each takes
  // its null form when the sample's draw (kDrawCondDrop, element k) is below
  // condDropProb: NAME_drop = 1 for vectors and tokens, a zero field for
  // fields. A field is mirrored with its sample under flipWidth.
  void fill(int64_t b, const DiffusionSchedule &sched, uint64_t seed, uint64_t step,
            uint64_t g, const float *x0, int64_t label, double dropProb, std::size_t flipWidth,
            const std::vector<const float *> &conds, double condDropProb);
  const void *const *ptrs() const { return ptrs_.data(); }

private:
  const Plan &plan_;
  std::size_t d_;
  std::vector<float> xt_, noise_, xStart_, target_, tf_;
  std::vector<int64_t> t64_, y64_;
  std::vector<int32_t> t32_, y32_;
  std::vector<std::vector<float>> cond_, condDrop_;  // per conditioning
  int64_t rngSeed_ = 0, rngStep_ = 0, sampleOffset_ = 0;  // the graph's draws' keys
  std::vector<const void *> ptrs_;
};

} // namespace hcrun

#endif // HC_RUN_DATA_H
