// hc-run sample's pieces shared by the DDPM/DDIM loop (sample_mode.cpp) and
// the flow samplers' (sample_flow.cpp).
#ifndef HC_RUN_SAMPLE_MODE_H
#define HC_RUN_SAMPLE_MODE_H

#include "common.h"
#include "profile.h"
#include "flow_sampling.h"
#include "hc/abi/random.h"

#include <cstdint>
#include <string>
#include <vector>

namespace hcrun {

// hc-run sample's flags (sample_mode.cpp parses them).
struct SampleOptions {
  std::string library, ckpt, out, saveNpy, dumpSteps, classes = "all", pngBands;
  int64_t perClass = 8;
  int64_t images = 0;      // --images N (unconditional models); 0: 16
  std::vector<CondFlag> conds;  // --cond NAME=FILE.npy
  int64_t perCond = 0;          // --per-cond N; 0: 1
  std::string cfgDrop = "all";  // --cfg-drop
  bool cfgDropGiven = false;
  double cfgScale = 4.0;
  bool cfgGiven = false, classesGiven = false, perClassGiven = false;
  std::string weights = "auto";  // --weights ema|raw; auto: EMA when present
  int64_t numClasses = -1;       // --num-classes N (else the metadata/table)
  double classDropout = -1;      // --class-dropout P (P > 0: a null class)
  std::string sampler;  // empty: the model's default (ddpm, or heun for flow)
  FlowSamplerOptions flow;
  bool stepsGiven = false, flowFlagGiven = false, tolGiven = false, sdeGiven = false;
  std::string steps = "250";
  std::vector<int> sections = {250};
  int ddimCount = 0;  // --sampling-steps ddimN
  uint64_t seed = 0;
  bool clip = true, help = false;
  bool noClipGiven = false;
  int progress = -1;
  std::string profile;  // --profile FILE
};

// What the sampler needs to know about the model, read off the description.
struct ModelFacts {
  int64_t batch = 0, channels = 0, height = 0, width = 0, outChannels = 0;
  int64_t numClasses = 0, labelRows = 0;
  bool learnSigma = false, hasNullClass = false;
  bool conditional = true;  // a label input y
  std::vector<CondInput> conds;  // conditionings beyond y (cond_data.h)
  bool flow = false;        // a flow objective (dit_config.objective "flow")
  FlowObjective flowObjective;
};

// The images to make, in order: the grid's rows (their labels: a class, or
// -1) of perRow images each, every image's label (empty without y) and, for
// conditioned models, the row of the --cond files it takes.
struct ImagePlan {
  std::vector<int64_t> rowLabels, labels, condRow;
  int64_t perRow = 0, images = 0;
};
ImagePlan planImages(const SampleOptions &o, const ModelFacts &m, const StepLibrary &lib,
                     const CondData &condData);

// Classifier-free guidance: its scale and what the unconditional half drops.
struct Guidance {
  double scale = 1.0;
  bool nullLabel = false;
  std::vector<bool> nullConds;
  bool on() const { return scale != 1.0; }
};
Guidance planGuidance(const SampleOptions &o, const ModelFacts &m, const StepLibrary &lib);

// Shared flag readers; exit 2 naming the flag.
int64_t parseInteger(const std::string &flag, const std::string &v, int64_t lo, int64_t hi);
std::vector<int64_t> parseList(const std::string &flag, const std::string &v, int64_t lo,
                               int64_t hi);
std::string number(double v);

// Draw kinds of the sampler (the op id of random.h), apart from training's.
enum : uint64_t { kDrawInitialNoise = 0x80, kDrawStepNoise = 0x81 };
static_assert(kDrawStepNoise < hc::rt::kGraphDrawFirst,
              "hc-run's draws keep below a graph's op ids (hc/abi/random.h)");

// N(0, 1) by Box-Muller over a pair of uniforms: element k is the cosine
// (even k) or sine (odd k) of pair k/2.
float normalDraw(uint64_t seed, uint64_t step, uint64_t image, uint64_t kind, uint64_t k);
void writeNpyOrFail(const std::string &path, const std::string &dtype,
                    const std::vector<int64_t> &shape, const void *data);
void progressLine(int64_t done, int64_t total, double seconds);

// The model call's inputs, in the description's order: x_t, t, y and each
// conditioning with its drop input. Rows [0, perCall) are the images of the
// chunk; with guidance rows [perCall, 2 perCall) are the same images with the
// null form of every input the guidance drops (--cfg-drop): the null class,
// NAME_drop = 1, a zero field. Rows past a short chunk run on zeros.
class SamplerInputs {
public:
  // Image i has label labels[i] (none without y) and row condRow[i] of each
  // conditioning file in `data`. `nullLabel`/`nullConds`: what the guided
  // half drops (conds' order).
  SamplerInputs(const Description &d, const std::vector<CondInput> &conds, bool flowTime,
                int64_t perCall, bool guided, int64_t nullClass, bool nullLabel,
                const std::vector<bool> &nullConds, const std::vector<int64_t> &labels,
                const CondData &data, const std::vector<int64_t> &condRow);
  // The chunk of images [first, first + n); x_t zeroed.
  void setChunk(int64_t first, int64_t n);
  // Image j's x (D floats) into its conditional row and its guided twin.
  void setImage(int64_t j, const float *x);
  void setTime(double t);
  const void *const *ptrs() const { return ptrs_.data(); }
  // --dump-steps: y.npy and, per conditioning, cond_NAME.npy (and
  // cond_NAME_drop.npy) as the last chunk fed them.
  void dump(const std::string &dir) const;

private:
  const std::vector<CondInput> &conds_;
  const std::vector<int64_t> &labels_, &condRow_;
  const CondData &data_;
  bool flowTime_, guided_, nullLabel_;
  int64_t perCall_, batch_, d_, nullClass_;
  std::vector<bool> nullConds_;
  std::vector<float> xt_, tf_;
  std::vector<int64_t> t_, y_;
  std::vector<std::vector<float>> cond_, drop_;
  std::vector<const void *> ptrs_;
};

// One sampling run over N images in chunks of perCall (the library's batch,
// halved with guidance: the second half runs the null forms).
struct SampleRun {
  const StepLibrary &lib;
  StepContext &ctx;
  SamplerInputs &inputs;
  int64_t batch, channels, height, width, plane, outChannels;
  bool guided, learnSigma;
  double cfgScale;
  int64_t perCall, images;
  uint64_t seed;
  std::vector<float> &samples;  // [N, C, H, W], written
  bool bar;
  std::string dumpSteps;  // --dump-steps DIR (one chunk only)
  Profiler *profiler = nullptr;  // --profile: told each call's time
};

// One model call (the library's step) at sampling step `index`, timed for
// --profile.
void modelCall(const SampleRun &r, int64_t index);

struct SamplingSchedule;
// DDPM's ancestral sampler, or DDIM (eta 0), over every chunk; returns the
// model calls made. `clip`: x0 predictions clipped to [-1, 1].
int64_t sampleDdpmChunks(const SampleRun &r, const SamplingSchedule &sched, bool ddim,
                         bool clip);

// The flow samplers over every chunk; returns the model calls made and
// prints dopri5's evaluations.
int64_t sampleFlowChunks(const SampleRun &r, const FlowObjective &obj,
                         const FlowSamplerOptions &fo);

} // namespace hcrun

#endif // HC_RUN_SAMPLE_MODE_H
