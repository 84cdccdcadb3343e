// Validation loss (hc-run --val-data/--val-labels/--val-every): the loss of
// the current weights on a held-out set, with every sample's timestep and
// noise drawn from fixed keys (kValidationSeed, kValidationStep, the
// sample's index in the set), no label dropout and no flip, so two
// evaluations of the same weights agree bit for bit. Each rank evaluates
// its rows of every full global batch with the step's forward pass
// (hc_step_api::evaluate); the losses are averaged over batches and ranks.
// With --ema the EMA weights are evaluated too (rank 0's EMA broadcast).
#ifndef HC_RUN_VALIDATION_H
#define HC_RUN_VALIDATION_H

#include "checkpointing.h"
#include "common.h"
#include "data.h"

namespace hcrun {

class Validation {
public:
  static constexpr uint64_t kValidationSeed = 0x76616c69646174ull;  // "validat"
  static constexpr uint64_t kValidationStep = ~0ull;
  // Opens the files against the training plan; throws Error(2) naming the
  // file. A no-op without --val-data.
  void open(const Options &opt, const StepLibrary &lib, const Plan &plan, int ranks,
            int rank);
  bool on() const { return !images_.path().empty(); }
  bool due(int64_t done, int64_t steps) const {
    return on() && (done % every_ == 0 || done == steps);
  }
  int64_t samples() const { return batches_ * globalBatch_; }
  struct Result {
    double raw = 0, ema = 0;  // ema: NaN without --ema
  };
  // Collective. Leaves the context's parameters as they were.
  Result run(const StepLibrary &lib, StepContext &ctx, Ema &ema, hc::rt::Comm &comm);

private:
  double evaluate(const StepLibrary &lib, StepContext &ctx, hc::rt::Comm &comm);
  const Options *opt_ = nullptr;
  Plan plan_;
  MappedNpy images_, labels_;
  CondData conds_;  // --val-cond
  int64_t every_ = 1, batches_ = 0, globalBatch_ = 0, batch_ = 0;
  DiffusionSchedule sched_;
};

} // namespace hcrun

#endif // HC_RUN_VALIDATION_H
