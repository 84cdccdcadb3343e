// Learning-rate schedules (hc-run --lr-schedule): the closed forms of
// Hugging Face transformers' get_{constant,linear,cosine}_schedule_with_warmup
// as torch.optim.lr_scheduler.LambdaLR applies them, plus a floor --min-lr.
// The step's "lr" hyperparameter (step ABI 5) is set from it before every
// optimizer step, so a resumed run continues the schedule exactly.
#ifndef HC_RUN_LR_SCHEDULE_H
#define HC_RUN_LR_SCHEDULE_H

#include <cstdint>
#include <string>

namespace hcrun {

struct LrSchedule {
  enum class Kind { None, Constant, Linear, Cosine };
  Kind kind = Kind::None;  // None: no schedule flag was given
  double lr = -1;          // --lr; < 0: the library's compiled value
  double minLr = 0;        // --min-lr: the floor the decay ends at
  int64_t warmupSteps = 0; // --warmup-steps
  int64_t decaySteps = -1; // --decay-steps; < 0: --steps
  double weightDecay = -1; // --weight-decay; < 0: the compiled value
  // --clip-grad-norm: the step's max_grad_norm hyperparameter (clipping by
  // global norm inside the compiled step); < 0: not given (compiled: off).
  double clipGradNorm = -1;

  bool given() const { return kind != Kind::None || lr >= 0; }
  // The learning rate of optimizer step `done` + 1 (`done` steps completed,
  // LambdaLR's last_epoch): lr * lambda(done), where after the warmup
  // lambda decays from 1 to min_lr / lr instead of to 0:
  //   warmup   done < W:  lr * done / max(1, W)
  //   constant            lr
  //   linear              min + (lr - min) * max(0, (D - done) / max(1, D - W))
  //   cosine              min + (lr - min) * max(0, (1 + cos(pi * p)) / 2),
  //                       p = min(1, (done - W) / max(1, D - W))
  // (transformers' own forms when min_lr = 0; cosine with a floor is its
  // get_cosine_with_min_lr_schedule_with_warmup). Needs lr >= 0 and a
  // resolved decaySteps.
  double at(int64_t done) const;
  // One line for logs, checkpoints ("hc.lr_schedule") and --help errors:
  // "cosine lr=0.0001 min_lr=0 warmup=500 decay=40000".
  std::string describe() const;
  static const char *kindName(Kind k);
};

// Parses --lr-schedule's value; throws Error(2) on an unknown name.
LrSchedule::Kind parseLrScheduleKind(const std::string &flag, const std::string &v);

} // namespace hcrun

#endif // HC_RUN_LR_SCHEDULE_H
