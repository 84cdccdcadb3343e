// Validation loss: see validation.h.
#include "validation.h"

#include <cmath>
#include <cstring>

namespace hcrun {

void Validation::open(const Options &opt, const StepLibrary &lib, const Plan &plan,
                      int ranks, int rank) {
  opt_ = &opt;
  if (opt.valData.empty())
    return;
  plan_ = plan;
  batch_ = lib.desc.batchPerRank;
  globalBatch_ = ranks * batch_;
  every_ = opt.valEvery > 0 ? opt.valEvery : opt.logEvery;
  images_.open(opt.valData);
  const auto &h = images_.header();
  if (h.dtype != "f4" || h.shape.size() != 4 ||
      !std::equal(plan.chw.begin(), plan.chw.end(), h.shape.begin() + 1))
    usageError("--val-data " + opt.valData + ": " + h.dtype + " " + shapeString(h.shape) +
               ", the model trains on float32 [N," + shapeString(plan.chw).substr(1));
  batches_ = h.shape[0] / globalBatch_;
  if (batches_ < 1)
    usageError("--val-data " + opt.valData + ": " + std::to_string(h.shape[0]) +
               " samples are fewer than one global batch of " +
               std::to_string(globalBatch_) + " (" + std::to_string(ranks) + " rank(s) x " +
               std::to_string(batch_) + ")");
  if (!opt.valLabels.empty()) {
    if (plan.y < 0)
      usageError("--val-labels given, but " + lib.path + " has no label input y");
    labels_.open(opt.valLabels);
    const auto &lh = labels_.header();
    if ((lh.dtype != "i8" && lh.dtype != "i4" && lh.dtype != "u1") ||
        lh.shape.size() != 1 || lh.shape[0] != h.shape[0])
      usageError("--val-labels " + opt.valLabels + ": " + lh.dtype + " " +
                 shapeString(lh.shape) + ", expected integer [" +
                 std::to_string(h.shape[0]) + "]");
    for (int64_t i = 0; i < lh.shape[0]; ++i) {
      const int64_t v = labelAt(labels_, i);
      if (v < 0 || v >= plan.numClasses)
        usageError("--val-labels " + opt.valLabels + ": label " + std::to_string(v) +
                   " at row " + std::to_string(i) + " is outside 0.." +
                   std::to_string(plan.numClasses - 1));
    }
  }
  conds_.open(opt.valConds, plan.conds, h.shape[0], "--val-cond", "--val-data " + opt.valData,
              lib.path);
  if (opt.valLabels.empty() && !opt.labels.empty())
    usageError("--val-data without --val-labels, but training has --labels: the "
               "validation set would be scored as unlabelled");
  const int64_t left = h.shape[0] - samples();
  if (left > 0 && rank == 0)
    std::printf("hc-run: note: validation uses %lld of the %lld samples of %s (whole "
                "global batches of %lld)\n", (long long)samples(), (long long)h.shape[0],
                opt.valData.c_str(), (long long)globalBatch_);
}

double Validation::evaluate(const StepLibrary &lib, StepContext &ctx, hc::rt::Comm &comm) {
  const std::size_t D = plan_.sampleElems;
  BatchBuffers batch(lib.desc, plan_, batch_);
  std::vector<const float *> condRows(conds_.size());
  double sum = 0;
  for (int64_t k = 0; k < batches_; ++k) {
    for (int64_t b = 0; b < batch_; ++b) {
      const int64_t j = k * globalBatch_ + comm.rank() * batch_ + b;
      const float *x0 = reinterpret_cast<const float *>(images_.data()) +
                        static_cast<std::size_t>(j) * D;
      const int64_t label = labels_.path().empty() ? plan_.nullClass : labelAt(labels_, j);
      for (std::size_t c = 0; c < conds_.size(); ++c)
        condRows[c] = conds_.row(c, j);
      batch.fill(b, sched_, kValidationSeed, kValidationStep, static_cast<uint64_t>(j), x0,
                 label, 0.0, 0, condRows, 0.0);
    }
    sum += ctx.evaluate(batch.ptrs());
  }
  double total[1] = {sum};
  if (comm.size() > 1 && !comm.allreduceSumF64(total, 1))
    comm.fail(1, "collective failed during validation");
  return total[0] / static_cast<double>(batches_ * comm.size());
}

Validation::Result Validation::run(const StepLibrary &lib, StepContext &ctx, Ema &ema,
                                   hc::rt::Comm &comm) {
  Result r;
  r.ema = std::nan("");
  try {
    r.raw = evaluate(lib, ctx, comm);
  } catch (const Error &e) {
    comm.fail(e.code, e.what());
  }
  // Only a collective decision: --ema is the same on every rank (checked
  // before step 1), the EMA values live on rank 0.
  if (opt_->emaDecay < 0)
    return r;
  const Description &d = lib.desc;
  std::vector<std::vector<float>> raw(d.parameters.size());
  try {
    for (std::size_t i = 0; i < d.parameters.size(); ++i) {
      const TensorSpec &p = d.parameters[i];
      raw[i].resize(p.numElements());
      ctx.getTensor(p.name, raw[i].data(), p.bytes());
      std::vector<float> e(p.numElements());
      if (comm.rank() == 0)
        std::memcpy(e.data(), ema.of(i), p.bytes());
      if (comm.size() > 1 && !comm.broadcast(e.data(), p.bytes(), 0))
        comm.fail(1, "collective failed broadcasting the EMA for validation");
      ctx.setTensor(p.name, e.data(), p.bytes());
    }
    r.ema = evaluate(lib, ctx, comm);
    for (std::size_t i = 0; i < d.parameters.size(); ++i)
      ctx.setTensor(d.parameters[i].name, raw[i].data(), d.parameters[i].bytes());
  } catch (const Error &e) {
    comm.fail(e.code, e.what());
  }
  return r;
}

} // namespace hcrun
