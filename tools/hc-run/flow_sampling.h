// Samplers of flow models (SiT's transport.Sampler, written anew): the
// probability-flow ODE by fixed-step Euler or Heun or adaptive Dormand-Prince
// 5(4), and the reverse SDE by Euler-Maruyama or stochastic Heun, from noise
// at t0 to data at t1. The model enters through a callback that returns the
// (guided) model output for the chunk's images at one time; the drift and
// score follow from it by the objective's per-sample affine maps
// (transport.h), in float64. models/transport.py holds the float64 reference
// of the same arithmetic (test/run/flow_sample_check.py compares them step
// by step).
#ifndef HC_RUN_FLOW_SAMPLING_H
#define HC_RUN_FLOW_SAMPLING_H

#include "transport.h"

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace hcrun {

enum class FlowMethod { Euler, Heun, Dopri5, SdeEuler, SdeHeun };
enum class LastStep { None, Mean, Tweedie, Euler };

struct FlowSamplerOptions {
  FlowMethod method = FlowMethod::Heun;
  int steps = 25;                    // fixed-step methods: integration steps
  double atol = 1e-6, rtol = 1e-3;   // dopri5 (SiT's defaults)
  DiffusionForm form = DiffusionForm::Sigma;  // SDE (SiT's sample.py defaults)
  double norm = 1.0;
  LastStep lastStep = LastStep::Mean;
  double lastStepSize = 0.04;
};

bool parseFlowMethod(const std::string &s, FlowMethod &out);
bool parseLastStep(const std::string &s, LastStep &out);
bool isSde(FlowMethod m);

// out[n*D] = the model output (first D values per image) at x[n*D], time t.
using FlowModelFn = std::function<void(const std::vector<float> &x, double t,
                                       std::vector<double> &out)>;
// noise(step, out): N(0, 1) for every element of the chunk at SDE step `step`.
using FlowNoiseFn = std::function<void(int step, std::vector<double> &out)>;
// Called after every accepted step with the state (for --dump-steps).
using FlowStepFn = std::function<void(double t, const std::vector<float> &x)>;

struct FlowSampleStats {
  int64_t evaluations = 0;  // model calls
  int64_t accepted = 0, rejected = 0;  // dopri5's steps
};

// Integrates x (n images of D values, initially the noise) in place.
FlowSampleStats sampleFlow(const FlowObjective &obj, const FlowSamplerOptions &o,
                           std::vector<float> &x, const FlowModelFn &model,
                           const FlowNoiseFn &noise, const FlowStepFn &onStep);

} // namespace hcrun

#endif // HC_RUN_FLOW_SAMPLING_H
