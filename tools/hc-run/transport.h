// Flow-matching objectives (SiT's interpolants) on hc-run's side: the path's
// coefficients at a time t, the training and sampling intervals, and the
// model output's drift and score as per-sample affine maps. SiT's
// conventions: noise x0 at t = 0, data x1 at t = 1,
//   x_t = alpha_t x1 + sigma_t x0,   u_t = alpha'_t x1 + sigma'_t x0.
// models/transport.py is the float64 reference of the same arithmetic
// (test/run/flow_check.py compares them); the exported graph computes its
// loss weights from t itself.
#ifndef HC_RUN_TRANSPORT_H
#define HC_RUN_TRANSPORT_H

#include <nlohmann/json.hpp>

#include <cstddef>
#include <string>
#include <utility>

namespace hcrun {

enum class FlowPath { Linear, Gvp, Vp };
enum class FlowPrediction { Velocity, Noise, Score };
enum class DiffusionForm { Constant, Sbdm, Sigma, Linear, Decreasing, IncreasingDecreasing };

// a x + b y, per sample: how the drift or the score follows from x and the
// model's output.
struct Affine {
  double x = 0, out = 0;
};

struct FlowObjective {
  FlowPath path = FlowPath::Linear;
  FlowPrediction prediction = FlowPrediction::Velocity;
  std::string lossWeight = "none";
  double trainEps = 0, sampleEps = 0;

  // dit_config.flow as export_dit.py writes it; usageError naming `where`
  // when it is malformed.
  static FlowObjective fromConfig(const nlohmann::json &ditConfig, const std::string &where);
  std::string describe() const;  // "linear path, velocity prediction, ..."

  struct Coefficients {
    double alpha, dAlpha, sigma, dSigma;
  };
  Coefficients at(double t) const;
  // (k, D): the probability-flow drift is k x + D score.
  std::pair<double, double> driftCoefficients(double t) const;
  double diffusion(double t, DiffusionForm form, double norm) const;

  std::pair<double, double> trainInterval() const;
  std::pair<double, double> odeInterval() const;
  std::pair<double, double> sdeInterval(DiffusionForm form, double lastStepSize) const;

  // The ODE's velocity and the score at (x, t) from the model's output.
  Affine drift(double t) const;
  Affine score(double t) const;
};

// How train mode draws t: uniform on the training interval (SiT), or
// logit-normal as SD3 (t_SD3 = sigmoid(mean + std n) is the noise level,
// so t = 1 - t_SD3), mapped into the interval.
struct TimeSampling {
  bool logitNormal = false;
  double mean = 0, std = 1;
  std::string text() const;  // "uniform" or "logit-normal(mean M, std S)"
  // u1, u2 uniform in [0, 1): t on [t0, t1].
  double draw(double u1, double u2, double t0, double t1) const;
};

bool parseDiffusionForm(const std::string &s, DiffusionForm &out);

// out = the value named s in a {name, value} table; false when none is.
template <typename T, std::size_t N>
bool lookupName(const std::pair<const char *, T> (&table)[N], const std::string &s, T &out) {
  for (const auto &[name, value] : table)
    if (s == name) {
      out = value;
      return true;
    }
  return false;
}

} // namespace hcrun

#endif // HC_RUN_TRANSPORT_H
