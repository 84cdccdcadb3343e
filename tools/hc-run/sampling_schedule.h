// DiT's sampling arithmetic: the respaced diffusion schedule and one reverse
// step of DDPM or DDIM, per element, in float64 (rounded to float32 once, at
// the output). It is guided_diffusion's GaussianDiffusion/SpacedDiffusion
// (what DiT's sample.py runs), written anew; test/run/sample_check.py checks
// it step by step against models/sampler_reference.py in float64.
#ifndef HC_RUN_SAMPLING_SCHEDULE_H
#define HC_RUN_SAMPLING_SCHEDULE_H

#include <cstddef>
#include <string>
#include <vector>

namespace hcrun {

// space_timesteps(T, sections): which of the T training timesteps a respaced
// sampler visits. `sections` is DiT's --num-sampling-steps as a list ("250"
// or "10,15,20"): T is cut into len(sections) equal parts (the first T % n
// one longer) and section i takes sections[i] evenly strided steps of its
// part, rounded half to even. Sorted ascending. Empty + `error` when a
// section asks for more steps than its part has, or for none.
std::vector<int> spaceTimesteps(int numTimesteps, const std::vector<int> &sections,
                                std::string &error);

// DiT's "ddimN" respacing: range(0, T, stride) for the smallest integer
// stride that gives exactly N steps; empty + `error` when none does.
std::vector<int> ddimTimesteps(int numTimesteps, int count, std::string &error);

// The diffusion over the visited timesteps only: betas_i = 1 - ab[t_i] /
// ab[t_{i-1}] from the training schedule's alphas_cumprod (linear betas
// 1e-4..0.02, T = 1000), and every table GaussianDiffusion derives from them.
struct SamplingSchedule {
  std::vector<int> timestepMap;  // respaced step i -> the t fed to the model
  std::vector<double> betas, alphasCumprod, alphasCumprodPrev;
  std::vector<double> sqrtRecipAlphasCumprod, sqrtRecipm1AlphasCumprod;
  std::vector<double> posteriorVariance, posteriorLogVarianceClipped;
  std::vector<double> posteriorMeanCoef1, posteriorMeanCoef2;
  int size() const { return static_cast<int>(betas.size()); }
};
// `visited` from spaceTimesteps (at least 2 steps: the clipped posterior
// log-variance needs posterior_variance[1]).
SamplingSchedule respacedSchedule(const std::vector<int> &visited);

// Classifier-free guidance (DiT's forward_with_cfg) on every one of the n
// eps values: uncond + scale * (cond - uncond), in float64.
double guidedEps(float cond, float uncond, double scale);

// One reverse step from respaced step i (i = size()-1 first, 0 last) for
// one element: x_t, the (guided) eps prediction, the model's variance
// channel (learned sigma: v in [-1, 1] interpolates the log-variance between
// the clipped posterior's and beta's; null: fixed-large variance
// [posterior_variance[1], betas[1:]], DiT's choice without learned sigma),
// and N(0,1) noise (unused at i = 0 and by DDIM). `clip`: x0 predictions
// clipped to [-1, 1] (pixel-space data; DiT's latents are not clipped).
// DDIM is the deterministic form (eta = 0).
struct StepElement {
  double x, eps, var, noise;
  bool hasVar;
};
double ddpmStep(const SamplingSchedule &s, int i, const StepElement &e, bool clip);
double ddimStep(const SamplingSchedule &s, int i, const StepElement &e, bool clip);

} // namespace hcrun

#endif // HC_RUN_SAMPLING_SCHEDULE_H
