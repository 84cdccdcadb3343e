#include "transport.h"

#include "common.h"

#include <cmath>
#include <cstdio>

namespace hcrun {
namespace {

constexpr double kPi = 3.141592653589793238462643383279502884;
constexpr double kVpSigmaMin = 0.1, kVpSigmaMax = 20.0;

double vpLogMean(double t) {
  return -0.25 * (1 - t) * (1 - t) * (kVpSigmaMax - kVpSigmaMin) - 0.5 * (1 - t) * kVpSigmaMin;
}
double vpDLogMean(double t) {
  return 0.5 * (1 - t) * (kVpSigmaMax - kVpSigmaMin) + 0.5 * kVpSigmaMin;
}

const char *pathName(FlowPath p) {
  return p == FlowPath::Linear ? "linear" : p == FlowPath::Gvp ? "gvp" : "vp";
}
const char *predictionName(FlowPrediction p) {
  return p == FlowPrediction::Velocity ? "velocity"
         : p == FlowPrediction::Noise  ? "noise"
                                       : "score";
}

} // namespace

FlowObjective FlowObjective::fromConfig(const nlohmann::json &cfg, const std::string &where) {
  const auto bad = [&](const std::string &what) {
    usageError(where + ": dit_config.flow " + what + " (export with models/export_dit.py "
               "--objective flow)");
  };
  if (!cfg.is_object() || !cfg.contains("flow") || !cfg["flow"].is_object())
    bad("is missing: a graph with a 'target' input trains a flow objective, whose path "
        "and prediction hc-run must know");
  const nlohmann::json &f = cfg["flow"];
  FlowObjective o;
  const std::string path = f.value("path", ""), pred = f.value("prediction", "");
  if (path == "linear")
    o.path = FlowPath::Linear;
  else if (path == "gvp")
    o.path = FlowPath::Gvp;
  else if (path == "vp")
    o.path = FlowPath::Vp;
  else
    bad("path '" + path + "' is not linear, gvp or vp");
  if (pred == "velocity")
    o.prediction = FlowPrediction::Velocity;
  else if (pred == "noise")
    o.prediction = FlowPrediction::Noise;
  else if (pred == "score")
    o.prediction = FlowPrediction::Score;
  else
    bad("prediction '" + pred + "' is not velocity, noise or score");
  o.lossWeight = f.value("loss_weight", "");
  if (o.lossWeight != "none" && o.lossWeight != "velocity" && o.lossWeight != "likelihood")
    bad("loss_weight '" + o.lossWeight + "' is not none, velocity or likelihood");
  for (auto [key, dst] : {std::pair<const char *, double *>{"train_eps", &o.trainEps},
                          {"sample_eps", &o.sampleEps}}) {
    if (!f.contains(key) || !f[key].is_number())
      bad(std::string(key) + " is missing");
    *dst = f[key].get<double>();
    if (!(*dst >= 0 && *dst < 0.5))
      bad(std::string(key) + " " + std::to_string(*dst) + " is outside [0, 0.5)");
  }
  return o;
}

std::string FlowObjective::describe() const {
  char buf[160];
  std::snprintf(buf, sizeof buf, "%s path, %s prediction, loss weight %s, train_eps %g, "
                "sample_eps %g", pathName(path), predictionName(prediction),
                lossWeight.c_str(), trainEps, sampleEps);
  return buf;
}

FlowObjective::Coefficients FlowObjective::at(double t) const {
  switch (path) {
  case FlowPath::Linear:
    return {t, 1.0, 1.0 - t, -1.0};
  case FlowPath::Gvp:
    return {std::sin(t * kPi / 2), kPi / 2 * std::cos(t * kPi / 2), std::cos(t * kPi / 2),
            -kPi / 2 * std::sin(t * kPi / 2)};
  case FlowPath::Vp:
    break;
  }
  const double a = std::exp(vpLogMean(t)), e = std::exp(2 * vpLogMean(t));
  const double s = std::sqrt(1 - e);
  return {a, a * vpDLogMean(t), s, e * (2 * vpDLogMean(t)) / (-2 * s)};
}

std::pair<double, double> FlowObjective::driftCoefficients(double t) const {
  if (path == FlowPath::Vp) {
    const double beta = kVpSigmaMin + (1 - t) * (kVpSigmaMax - kVpSigmaMin);
    return {0.5 * beta, beta / 2};
  }
  // alpha'/alpha in the form that stays finite where it can (SiT's
  // compute_d_alpha_alpha_ratio_t).
  const double ratio = path == FlowPath::Linear
                           ? 1 / t
                           : kPi / 2 * std::cos(t * kPi / 2) / std::sin(t * kPi / 2);
  const Coefficients c = at(t);
  return {ratio, ratio * c.sigma * c.sigma - c.sigma * c.dSigma};
}

double FlowObjective::diffusion(double t, DiffusionForm form, double norm) const {
  switch (form) {
  case DiffusionForm::Constant:
    return norm;
  case DiffusionForm::Sbdm:
    return norm * driftCoefficients(t).second;
  case DiffusionForm::Sigma:
    return norm * at(t).sigma;
  case DiffusionForm::Linear:
    return norm * (1 - t);
  case DiffusionForm::Decreasing: {
    const double c = norm * std::cos(kPi * t) + 1;
    return 0.25 * c * c;
  }
  case DiffusionForm::IncreasingDecreasing: {
    const double s = std::sin(kPi * t);
    return norm * s * s;
  }
  }
  return 0;
}

std::pair<double, double> FlowObjective::trainInterval() const {
  if (path == FlowPath::Vp)
    return {0.0, 1 - trainEps};
  if (prediction != FlowPrediction::Velocity)
    return {trainEps, 1 - trainEps};
  return {0.0, 1.0};
}

std::pair<double, double> FlowObjective::odeInterval() const {
  if (path == FlowPath::Vp)
    return {0.0, 1 - sampleEps};
  if (prediction != FlowPrediction::Velocity)
    return {sampleEps, 1 - sampleEps};
  return {0.0, 1.0};
}

std::pair<double, double> FlowObjective::sdeInterval(DiffusionForm form,
                                                     double lastStepSize) const {
  const double t1 = lastStepSize != 0 ? 1 - lastStepSize : 1 - sampleEps;
  if (path == FlowPath::Vp)
    return {0.0, t1};
  const bool fromEps = form == DiffusionForm::Sbdm || prediction != FlowPrediction::Velocity;
  return {fromEps ? sampleEps : 0.0, t1};
}

Affine FlowObjective::score(double t) const {
  const Coefficients c = at(t);
  switch (prediction) {
  case FlowPrediction::Score:
    return {0.0, 1.0};
  case FlowPrediction::Noise:
    return {0.0, -1.0 / c.sigma};
  case FlowPrediction::Velocity:
    break;
  }
  // SiT's get_score_from_velocity: (r v - x) / var, r = alpha / alpha'.
  const double r = c.alpha / c.dAlpha;
  const double var = c.sigma * c.sigma - r * c.dSigma * c.sigma;
  return {-1.0 / var, r / var};
}

Affine FlowObjective::drift(double t) const {
  if (prediction == FlowPrediction::Velocity)
    return {0.0, 1.0};
  const auto [k, d] = driftCoefficients(t);
  const Affine s = score(t);
  return {k + d * s.x, d * s.out};
}

std::string TimeSampling::text() const {
  if (!logitNormal)
    return "uniform";
  char buf[96];
  std::snprintf(buf, sizeof buf, "logit-normal(mean %.17g, std %.17g)", mean, std);
  return buf;
}

double TimeSampling::draw(double u1, double u2, double t0, double t1) const {
  double u = u1;
  if (logitNormal) {
    // Box-Muller; 1 - u1 in (0, 1].
    const double n = std::sqrt(-2.0 * std::log(1.0 - u1)) * std::cos(2 * kPi * u2);
    u = 1.0 - 1.0 / (1.0 + std::exp(-(mean + std * n)));
  }
  return t0 + (t1 - t0) * u;
}

bool parseDiffusionForm(const std::string &s, DiffusionForm &out) {
  static const std::pair<const char *, DiffusionForm> kForms[] = {
      {"constant", DiffusionForm::Constant}, {"SBDM", DiffusionForm::Sbdm},
      {"sigma", DiffusionForm::Sigma},       {"linear", DiffusionForm::Linear},
      {"decreasing", DiffusionForm::Decreasing},
      {"increasing-decreasing", DiffusionForm::IncreasingDecreasing}};
  return lookupName(kForms, s, out);
}

} // namespace hcrun
