// DiT's sampling arithmetic (see sampling_schedule.h). Every formula is
// guided_diffusion's, evaluated in float64 like its numpy tables.
#include "sampling_schedule.h"

#include <algorithm>
#include <cmath>

namespace hcrun {

std::vector<int> spaceTimesteps(int numTimesteps, const std::vector<int> &sections,
                                std::string &error) {
  std::vector<int> steps;
  if (sections.empty()) {
    error = "no sections";
    return {};
  }
  const int n = static_cast<int>(sections.size());
  const int sizePer = numTimesteps / n, extra = numTimesteps % n;
  int start = 0;
  for (int i = 0; i < n; ++i) {
    const int size = sizePer + (i < extra ? 1 : 0);
    const int count = sections[i];
    if (count < 1 || count > size) {
      error = "section " + std::to_string(i) + " asks for " + std::to_string(count) +
              " steps of " + std::to_string(size);
      return {};
    }
    const double stride = count <= 1 ? 1.0 : double(size - 1) / double(count - 1);
    double cur = 0.0;  // accumulated like Python's `cur_idx += frac_stride`
    for (int k = 0; k < count; ++k) {
      // nearbyint in the default rounding mode rounds half to even, as
      // Python's round() does.
      steps.push_back(start + static_cast<int>(std::nearbyint(cur)));
      cur += stride;
    }
    start += size;
  }
  std::sort(steps.begin(), steps.end());
  steps.erase(std::unique(steps.begin(), steps.end()), steps.end());
  return steps;
}

std::vector<int> ddimTimesteps(int numTimesteps, int count, std::string &error) {
  for (int stride = 1; stride < numTimesteps; ++stride)
    if ((numTimesteps + stride - 1) / stride == count) {
      std::vector<int> steps;
      for (int t = 0; t < numTimesteps; t += stride)
        steps.push_back(t);
      return steps;
    }
  error = "no integer stride gives exactly " + std::to_string(count) + " of " +
          std::to_string(numTimesteps) + " steps";
  return {};
}

SamplingSchedule respacedSchedule(const std::vector<int> &visited) {
  // The training schedule: linear betas (float64 linspace), alphas_cumprod.
  const int T = 1000;
  std::vector<double> trainAc(T);
  double ac = 1.0;
  for (int t = 0; t < T; ++t) {
    // numpy's linspace: i * step + start, the last value exactly `stop`.
    const double beta = t == T - 1 ? 0.02 : t * ((0.02 - 1e-4) / (T - 1)) + 1e-4;
    ac *= 1.0 - beta;
    trainAc[t] = ac;
  }
  SamplingSchedule s;
  double last = 1.0;
  for (int t : visited) {
    s.betas.push_back(1.0 - trainAc[t] / last);
    last = trainAc[t];
    s.timestepMap.push_back(t);
  }
  const int n = s.size();
  double cum = 1.0;
  for (int i = 0; i < n; ++i) {
    s.alphasCumprodPrev.push_back(cum);
    cum *= 1.0 - s.betas[i];
    s.alphasCumprod.push_back(cum);
  }
  for (int i = 0; i < n; ++i) {
    const double a = s.alphasCumprod[i], ap = s.alphasCumprodPrev[i], b = s.betas[i];
    s.sqrtRecipAlphasCumprod.push_back(std::sqrt(1.0 / a));
    s.sqrtRecipm1AlphasCumprod.push_back(std::sqrt(1.0 / a - 1.0));
    s.posteriorVariance.push_back(b * (1.0 - ap) / (1.0 - a));
    s.posteriorMeanCoef1.push_back(b * std::sqrt(ap) / (1.0 - a));
    s.posteriorMeanCoef2.push_back((1.0 - ap) * std::sqrt(1.0 - b) / (1.0 - a));
  }
  // posterior_variance[0] is 0: the log takes [1]'s value there instead.
  for (int i = 0; i < n; ++i)
    s.posteriorLogVarianceClipped.push_back(
        std::log(s.posteriorVariance[i == 0 && n > 1 ? 1 : i]));
  return s;
}

double guidedEps(float cond, float uncond, double scale) {
  return double(uncond) + scale * (double(cond) - double(uncond));
}

namespace {

// p_mean_variance's x0 prediction from eps (clipped to the data range).
double predictX0(const SamplingSchedule &s, int i, double x, double eps, bool clip) {
  double x0 = s.sqrtRecipAlphasCumprod[i] * x - s.sqrtRecipm1AlphasCumprod[i] * eps;
  return clip ? std::clamp(x0, -1.0, 1.0) : x0;
}

double logVariance(const SamplingSchedule &s, int i, const StepElement &e) {
  if (e.hasVar) {  // LEARNED_RANGE
    const double minLog = s.posteriorLogVarianceClipped[i];
    const double maxLog = std::log(s.betas[i]);
    const double frac = (e.var + 1.0) / 2.0;
    return frac * maxLog + (1.0 - frac) * minLog;
  }
  // FIXED_LARGE: [posterior_variance[1], betas[1], betas[2], ...]
  return std::log(i == 0 ? s.posteriorVariance[1] : s.betas[i]);
}

} // namespace

double ddpmStep(const SamplingSchedule &s, int i, const StepElement &e, bool clip) {
  const double x0 = predictX0(s, i, e.x, e.eps, clip);
  const double mean = s.posteriorMeanCoef1[i] * x0 + s.posteriorMeanCoef2[i] * e.x;
  if (i == 0)  // the last step adds no noise
    return mean;
  return mean + std::exp(0.5 * logVariance(s, i, e)) * e.noise;
}

double ddimStep(const SamplingSchedule &s, int i, const StepElement &e, bool clip) {
  const double x0 = predictX0(s, i, e.x, e.eps, clip);
  // The eps consistent with the (clipped) x0, then x at the previous step.
  const double eps =
      (s.sqrtRecipAlphasCumprod[i] * e.x - x0) / s.sqrtRecipm1AlphasCumprod[i];
  const double abPrev = s.alphasCumprodPrev[i];
  return x0 * std::sqrt(abPrev) + std::sqrt(1.0 - abPrev) * eps;
}

} // namespace hcrun
