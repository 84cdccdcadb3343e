#include "flow_sampling.h"

#include "common.h"

#include <algorithm>
#include <cmath>
#include <string>

namespace hcrun {

bool parseFlowMethod(const std::string &s, FlowMethod &out) {
  static const std::pair<const char *, FlowMethod> kMethods[] = {
      {"euler", FlowMethod::Euler},         {"heun", FlowMethod::Heun},
      {"dopri5", FlowMethod::Dopri5},       {"sde-euler", FlowMethod::SdeEuler},
      {"sde-heun", FlowMethod::SdeHeun}};
  return lookupName(kMethods, s, out);
}

bool parseLastStep(const std::string &s, LastStep &out) {
  static const std::pair<const char *, LastStep> kSteps[] = {
      {"none", LastStep::None}, {"Mean", LastStep::Mean},
      {"Tweedie", LastStep::Tweedie}, {"Euler", LastStep::Euler}};
  return lookupName(kSteps, s, out);
}

bool isSde(FlowMethod m) { return m == FlowMethod::SdeEuler || m == FlowMethod::SdeHeun; }

namespace {

std::vector<float> toFloat(const std::vector<double> &v) {
  return std::vector<float>(v.begin(), v.end());
}

// The drift of the ODE (g = 0) or of the reverse SDE with diffusion g:
// drift + g * score, as an affine map of (x, model output).
Affine sdeDrift(const FlowObjective &obj, double t, double g) {
  const Affine d = obj.drift(t);
  if (g == 0)  // the ODE: no score (a velocity model's is singular at t = 1)
    return d;
  const Affine s = obj.score(t);
  return {d.x + g * s.x, d.out + g * s.out};
}

struct Evaluator {
  const FlowObjective &obj;
  const FlowModelFn &model;
  FlowSampleStats &stats;
  std::vector<double> out;
  // v = f(x, t) for the drift with diffusion g (0: the ODE's).
  void operator()(const std::vector<float> &x, double t, double g, std::vector<double> &v) {
    model(x, t, out);
    ++stats.evaluations;
    const Affine a = sdeDrift(obj, t, g);
    v.resize(x.size());
    for (std::size_t i = 0; i < x.size(); ++i)
      v[i] = a.x * x[i] + a.out * out[i];
  }
};

double rmsNorm(const std::vector<double> &v) {
  double s = 0;
  for (double e : v)
    s += e * e;
  return std::sqrt(s / static_cast<double>(std::max<std::size_t>(v.size(), 1)));
}

// Dormand-Prince 5(4) with FSAL and the step control torchdiffeq's dopri5
// uses (RMS norm of err / (atol + rtol max(|y0|, |y1|)), safety 0.9, growth
// at most 10x, shrink at most 5x after a rejection, its initial step
// selection); the last step is cut to end at t1 exactly, where torchdiffeq
// steps past and interpolates.
void dopri5(const FlowSamplerOptions &o, double t0, double t1, std::vector<float> &x,
            Evaluator &f, FlowSampleStats &stats, const FlowStepFn &onStep) {
  static const double c[7] = {0, 1.0 / 5, 3.0 / 10, 4.0 / 5, 8.0 / 9, 1, 1};
  static const double a[7][6] = {
      {0, 0, 0, 0, 0, 0},
      {1.0 / 5, 0, 0, 0, 0, 0},
      {3.0 / 40, 9.0 / 40, 0, 0, 0, 0},
      {44.0 / 45, -56.0 / 15, 32.0 / 9, 0, 0, 0},
      {19372.0 / 6561, -25360.0 / 2187, 64448.0 / 6561, -212.0 / 729, 0, 0},
      {9017.0 / 3168, -355.0 / 33, 46732.0 / 5247, 49.0 / 176, -5103.0 / 18656, 0},
      {35.0 / 384, 0, 500.0 / 1113, 125.0 / 192, -2187.0 / 6784, 11.0 / 84}};
  // The 5th-order weights (the last row of a, and 0 for the FSAL stage) and
  // the embedded 4th-order ones.
  static const double b5[7] = {35.0 / 384, 0, 500.0 / 1113, 125.0 / 192, -2187.0 / 6784,
                               11.0 / 84, 0};
  static const double b4[7] = {5179.0 / 57600, 0, 7571.0 / 16695, 393.0 / 640,
                               -92097.0 / 339200, 187.0 / 2100, 1.0 / 40};
  const std::size_t n = x.size();
  std::vector<double> y(x.begin(), x.end()), yn(n), err(n), tmp(n);
  std::vector<std::vector<double>> k(7, std::vector<double>(n));
  f(x, t0, 0.0, k[0]);
  // Initial step (Hairer, Norsett & Wanner II.4, as torchdiffeq).
  for (std::size_t i = 0; i < n; ++i)
    tmp[i] = y[i] / (o.atol + std::fabs(y[i]) * o.rtol);
  const double d0 = rmsNorm(tmp);
  for (std::size_t i = 0; i < n; ++i)
    tmp[i] = k[0][i] / (o.atol + std::fabs(y[i]) * o.rtol);
  const double d1 = rmsNorm(tmp);
  const double h0 = d0 < 1e-5 || d1 < 1e-5 ? 1e-6 : 0.01 * d0 / d1;
  for (std::size_t i = 0; i < n; ++i)
    yn[i] = y[i] + h0 * k[0][i];
  f(toFloat(yn), t0 + h0, 0.0, k[1]);
  for (std::size_t i = 0; i < n; ++i)
    tmp[i] = (k[1][i] - k[0][i]) / (o.atol + std::fabs(y[i]) * o.rtol);
  const double d2 = rmsNorm(tmp) / h0;
  const double h1 = std::max(d1, d2) <= 1e-15 ? std::max(1e-6, h0 * 1e-3)
                                              : std::pow(0.01 / std::max(d1, d2), 1.0 / 5);
  double h = std::min(100 * h0, h1), t = t0;
  while (t < t1) {
    const bool last = t + h >= t1;
    const double step = last ? t1 - t : h;
    for (int s = 1; s < 7; ++s) {
      for (std::size_t i = 0; i < n; ++i) {
        double acc = y[i];
        for (int j = 0; j < s; ++j)
          acc += step * a[s][j] * k[j][i];
        (s == 6 ? yn : tmp)[i] = acc;
      }
      f(toFloat(s == 6 ? yn : tmp), t + c[s] * step, 0.0, k[s]);
    }
    for (std::size_t i = 0; i < n; ++i) {
      double e = 0;
      for (int j = 0; j < 7; ++j)
        e += (b5[j] - b4[j]) * k[j][i];
      const double tol = o.atol + o.rtol * std::max(std::fabs(y[i]), std::fabs(yn[i]));
      err[i] = step * e / tol;
    }
    const double ratio = rmsNorm(err);
    if (!std::isfinite(ratio))
      throw Error(1, "dopri5: the error estimate at t = " + std::to_string(t) +
                         " is not finite (the model output holds NaN or infinity)");
    if (step < 1e-12 * (t1 - t0))
      throw Error(1, "dopri5: the step size fell below 1e-12 of the interval at t = " +
                         std::to_string(t) + " (tolerances --atol/--rtol too tight?)");
    if (ratio <= 1) {
      ++stats.accepted;
      t = last ? t1 : t + step;
      y.swap(yn);
      k[0].swap(k[6]);  // first same as last
      if (onStep)
        onStep(t, toFloat(y));
    } else {
      ++stats.rejected;
    }
    const double shrink = ratio < 1 ? 1.0 : 0.2;
    const double factor =
        ratio == 0 ? 10.0 : std::min(10.0, std::max(0.9 / std::pow(ratio, 1.0 / 5), shrink));
    h = step * factor;
  }
  x = toFloat(y);
}

} // namespace

FlowSampleStats sampleFlow(const FlowObjective &obj, const FlowSamplerOptions &o,
                           std::vector<float> &x, const FlowModelFn &model,
                           const FlowNoiseFn &noise, const FlowStepFn &onStep) {
  FlowSampleStats stats;
  Evaluator f{obj, model, stats, {}};
  const std::size_t n = x.size();
  std::vector<double> k1(n), k2(n), w(n);
  std::vector<float> xp(n);
  if (o.method == FlowMethod::Dopri5) {
    const auto [t0, t1] = obj.odeInterval();
    dopri5(o, t0, t1, x, f, stats, onStep);
    return stats;
  }
  const bool sde = isSde(o.method);
  const auto [t0, t1] =
      sde ? obj.sdeInterval(o.form, o.lastStep == LastStep::None ? 0.0 : o.lastStepSize)
          : obj.odeInterval();
  const double dt = (t1 - t0) / o.steps;
  for (int s = 0; s < o.steps; ++s) {
    const double t = t0 + s * dt, tn = s + 1 == o.steps ? t1 : t0 + (s + 1) * dt;
    if (!sde) {
      f(x, t, 0.0, k1);
      if (o.method == FlowMethod::Euler) {
        for (std::size_t i = 0; i < n; ++i)
          x[i] = static_cast<float>(x[i] + dt * k1[i]);
      } else {  // Heun (torchdiffeq's heun2): the trapezoid of two slopes
        for (std::size_t i = 0; i < n; ++i)
          xp[i] = static_cast<float>(x[i] + dt * k1[i]);
        f(xp, tn, 0.0, k2);
        for (std::size_t i = 0; i < n; ++i)
          x[i] = static_cast<float>(x[i] + 0.5 * dt * (k1[i] + k2[i]));
      }
    } else {
      noise(s, w);
      const double g = obj.diffusion(t, o.form, o.norm);
      const double spread = std::sqrt(2 * g) * std::sqrt(dt);
      if (o.method == FlowMethod::SdeEuler) {  // Euler-Maruyama
        f(x, t, g, k1);
        for (std::size_t i = 0; i < n; ++i)
          x[i] = static_cast<float>(x[i] + k1[i] * dt + spread * w[i]);
      } else {  // SiT's stochastic Heun: noise first, then a Heun step of the drift
        std::vector<float> xhat(n);
        for (std::size_t i = 0; i < n; ++i)
          xhat[i] = static_cast<float>(x[i] + spread * w[i]);
        f(xhat, t, g, k1);
        for (std::size_t i = 0; i < n; ++i)
          xp[i] = static_cast<float>(xhat[i] + dt * k1[i]);
        f(xp, tn, obj.diffusion(tn, o.form, o.norm), k2);
        for (std::size_t i = 0; i < n; ++i)
          x[i] = static_cast<float>(xhat[i] + 0.5 * dt * (k1[i] + k2[i]));
      }
    }
    if (onStep)
      onStep(tn, x);
  }
  if (sde && o.lastStep != LastStep::None) {
    // SiT's last step at t1, of size last_step_size.
    std::vector<double> out;
    model(x, t1, out);
    ++stats.evaluations;
    const double g = obj.diffusion(t1, o.form, o.norm);
    Affine a;
    if (o.lastStep == LastStep::Mean) {
      const Affine d = sdeDrift(obj, t1, g);
      a = {1 + o.lastStepSize * d.x, o.lastStepSize * d.out};
    } else if (o.lastStep == LastStep::Euler) {
      const Affine d = obj.drift(t1);
      a = {1 + o.lastStepSize * d.x, o.lastStepSize * d.out};
    } else {  // Tweedie: x / alpha + sigma^2 / alpha * score
      const FlowObjective::Coefficients c = obj.at(t1);
      const Affine s = obj.score(t1);
      const double r = c.sigma * c.sigma / c.alpha;
      a = {1 / c.alpha + r * s.x, r * s.out};
    }
    for (std::size_t i = 0; i < n; ++i)
      x[i] = static_cast<float>(a.x * x[i] + a.out * out[i]);
    if (onStep)
      onStep(t1, x);
  }
  return stats;
}

} // namespace hcrun
