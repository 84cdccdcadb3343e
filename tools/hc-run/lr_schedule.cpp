// Learning-rate schedules: see lr_schedule.h.
#include "lr_schedule.h"

#include "common.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace hcrun {

double LrSchedule::at(int64_t done) const {
  const double d = static_cast<double>(done);
  if (done < warmupSteps)
    return lr * (d / static_cast<double>(std::max<int64_t>(1, warmupSteps)));
  const double span = static_cast<double>(std::max<int64_t>(1, decaySteps - warmupSteps));
  double factor = 1;
  switch (kind) {
  case Kind::None:
  case Kind::Constant:
    return lr;
  case Kind::Linear:
    factor = std::max(0.0, static_cast<double>(decaySteps - done) / span);
    break;
  case Kind::Cosine: {
    // Held at the floor past D (transformers' cosine would rise again).
    const double progress =
        std::min(1.0, static_cast<double>(done - warmupSteps) / span);
    factor = std::max(0.0, 0.5 * (1.0 + std::cos(M_PI * progress)));
    break;
  }
  }
  // transformers' form (min_lr = 0: lr * factor exactly).
  if (minLr == 0)
    return lr * factor;
  return lr * (factor * (1.0 - minLr / lr) + minLr / lr);
}

const char *LrSchedule::kindName(Kind k) {
  switch (k) {
  case Kind::None:
  case Kind::Constant:
    return "constant";
  case Kind::Linear:
    return "linear";
  case Kind::Cosine:
    return "cosine";
  }
  return "?";
}

std::string LrSchedule::describe() const {
  // Numbers in their shortest exact form (a checkpoint compares the text).
  auto num = [](double x) { return nlohmann::json(x).dump(); };
  if (kind == Kind::None || kind == Kind::Constant)
    return "constant lr=" + num(lr) + " warmup=" + std::to_string(warmupSteps);
  return std::string(kindName(kind)) + " lr=" + num(lr) + " min_lr=" + num(minLr) +
         " warmup=" + std::to_string(warmupSteps) + " decay=" + std::to_string(decaySteps);
}

LrSchedule::Kind parseLrScheduleKind(const std::string &flag, const std::string &v) {
  if (v == "constant")
    return LrSchedule::Kind::Constant;
  if (v == "linear")
    return LrSchedule::Kind::Linear;
  if (v == "cosine")
    return LrSchedule::Kind::Cosine;
  usageError(flag + " needs constant, linear or cosine, got '" + v + "'");
}

LrSchedule resolveSchedule(const Options &opt, const StepLibrary &lib) {
  LrSchedule s = opt.schedule;
  const auto &h = lib.desc.hyperparameters;
  const bool wantsLr = s.given(), wantsWd = s.weightDecay >= 0;
  if (s.clipGradNorm >= 0 && !h.count("max_grad_norm"))
    usageError("--clip-grad-norm: " + lib.path + " has no 'max_grad_norm' hyperparameter "
               "(compiled before clipping was part of the step: recompile it)");
  if ((wantsLr || wantsWd) && lib.desc.optimizer == "adam")
    usageError(std::string(wantsLr ? (s.kind != LrSchedule::Kind::None ? "--lr-schedule"
                                                                       : "--lr")
                                   : "--weight-decay") +
               ": " + lib.path + " trains with ONNX Adam, whose learning rate and "
               "decay come from the graph (training_info); compile with hc-compile "
               "--optimizer adamw or sgd to set them here");
  for (const char *name : {"lr", "weight_decay"}) {
    const bool wanted = std::string(name) == "lr" ? wantsLr : wantsWd;
    if (wanted && !h.count(name))
      usageError(std::string(std::string(name) == "lr" ? "--lr-schedule/--lr"
                                                       : "--weight-decay") +
                 ": " + lib.path + " has no '" + name + "' hyperparameter (a library "
                 "of step ABI 5 with an AdamW or SGD update has one)");
  }
  if (!wantsLr)
    return s;
  if (s.lr < 0)
    s.lr = h.at("lr");
  if (s.minLr > s.lr)
    usageError("--min-lr " + std::to_string(s.minLr) + " is above the learning rate " +
               std::to_string(s.lr) + " (" + lib.path + "'s compiled --lr)");
  if (s.kind == LrSchedule::Kind::None)
    s.kind = LrSchedule::Kind::Constant;
  if (s.decaySteps < 0)
    s.decaySteps = opt.steps;
  return s;
}

double applySchedule(const LrSchedule &s, const StepLibrary &lib, StepContext &ctx,
                     int64_t done) {
  if (s.weightDecay >= 0)
    ctx.setHyperparameter("weight_decay", s.weightDecay);
  if (s.clipGradNorm >= 0)
    ctx.setHyperparameter("max_grad_norm", s.clipGradNorm);
  if (!s.given()) {
    auto it = lib.desc.hyperparameters.find("lr");
    return it == lib.desc.hyperparameters.end() ? std::nan("") : it->second;
  }
  const double lr = s.at(done);
  ctx.setHyperparameter("lr", lr);
  return lr;
}

} // namespace hcrun
