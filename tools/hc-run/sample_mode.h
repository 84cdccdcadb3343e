// hc-run sample's pieces shared by the DDPM/DDIM loop (sample_mode.cpp) and
// the flow samplers' (sample_flow.cpp).
#ifndef HC_RUN_SAMPLE_MODE_H
#define HC_RUN_SAMPLE_MODE_H

#include "common.h"
#include "flow_sampling.h"

#include <cstdint>
#include <string>
#include <vector>

namespace hcrun {

// Draw kinds of the sampler (the op id of random.h), apart from training's.
enum : uint64_t { kDrawInitialNoise = 0x80, kDrawStepNoise = 0x81 };

// N(0, 1) by Box-Muller over a pair of uniforms: element k is the cosine
// (even k) or sine (odd k) of pair k/2.
float normalDraw(uint64_t seed, uint64_t step, uint64_t image, uint64_t kind, uint64_t k);
void writeNpyOrFail(const std::string &path, const std::string &dtype,
                    const std::vector<int64_t> &shape, const void *data);
void progressLine(int64_t done, int64_t total, double seconds);

// One sampling run over N images in chunks of perCall (the library's batch,
// halved with guidance: the second half runs the null class).
struct SampleRun {
  const StepLibrary &lib;
  StepContext &ctx;
  int64_t batch, channels, plane, outChannels, nullClass;
  bool guided;
  double cfgScale;
  int64_t perCall, images;
  uint64_t seed;
  const std::vector<int64_t> &labels;
  std::vector<float> &samples;  // [N, C, H, W], written
  bool bar;
  std::string dumpSteps;  // --dump-steps DIR (one chunk only)
};

// The flow samplers over every chunk; returns the model calls made and
// prints dopri5's evaluations.
int64_t sampleFlowChunks(const SampleRun &r, const FlowObjective &obj,
                         const FlowSamplerOptions &fo);

} // namespace hcrun

#endif // HC_RUN_SAMPLE_MODE_H
