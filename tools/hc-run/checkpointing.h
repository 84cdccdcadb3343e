// Train-mode checkpoints (--ckpt-dir, --resume) and the EMA of the parameters
// (--ema), on top of hc/runtime/checkpoint.h.
//
// A checkpoint holds every parameter under its PyTorch state_dict name, the
// EMA as "ema:NAME", the optimizer state under the step's names
// ("adamw.m:NAME", "adamw.step", ...), and metadata: the step, the seed and
// the data order (global batch, sample count; every random draw is a pure
// function of (seed, step, global sample), so that is the whole RNG and
// data-order state), the step ABI, the model's identity and its full
// description. Rank 0 writes; on resume rank 0 reads and broadcasts, so the
// folder need not be shared between nodes.
#ifndef HC_RUN_CHECKPOINTING_H
#define HC_RUN_CHECKPOINTING_H

#include "common.h"

#include "hc/base/safetensors.h"

namespace hcrun {

// DiT's EMA: ema = decay * ema + (1 - decay) * param after every step,
// initialized to the parameters. Kept on rank 0 only (only it writes).
class Ema {
public:
  double decay = -1; // < 0: off
  bool on() const { return decay >= 0; }
  void initFromParameters(const StepLibrary &lib, StepContext &ctx);
  void update(const StepLibrary &lib, StepContext &ctx);
  // Parameter i's EMA values (description order).
  float *of(std::size_t i) { return values_.data() + offsets_[i]; }
  const float *of(std::size_t i) const { return values_.data() + offsets_[i]; }
  void allocate(const Description &d);

private:
  std::vector<float> values_, scratch_;
  std::vector<std::size_t> offsets_;
};

// What fixes the order and content of the training data.
struct DataIdentity {
  int64_t globalBatch = 0, samples = 0;
  std::string data, labels;      // paths, as given
  std::string dataId, labelsId;  // contents (rank_agreement.h's DataFiles)
  std::string conds = "", condsId = "none";  // --cond NAME=PATH,... and contents
};

class Checkpointer {
public:
  Checkpointer(const Options &opt, const StepLibrary &lib, hc::rt::Comm &comm)
      : opt_(opt), lib_(lib), comm_(comm) {}
  bool on() const { return !opt_.ckptDir.empty(); }
  // Rank 0, during setup: creates the folder, takes its lock (kLockFile,
  // flock: a second run on the folder is refused naming the holder's host
  // and pid; a killed run's lock goes with its process), removes a crashed
  // writer's temporary files and, with --resume, picks the newest checkpoint
  // by its stored step and checks it against this run. Throws Error(2)
  // naming the file.
  void prepare(const DataIdentity &data);
  // Step of the checkpoint prepare() picked (0: none); rank 0 only.
  int64_t pickedStep() const { return picked_.step; }
  // Collective, after setup settled: loads the picked checkpoint on every
  // rank (rank 0 broadcasts the tensors), the EMA on rank 0. Sets `seed` and
  // `ema.decay` from the checkpoint. Returns the step to continue from.
  int64_t restore(StepContext &ctx, Ema &ema, uint64_t &seed);
  // Whether step `done` (1-based) ends with a checkpoint.
  bool due(int64_t done) const;
  // Rank 0: writes checkpoint `step`; prints one line. Throws Error(1),
  // writing nothing, when a parameter, optimizer state or EMA value is not
  // finite: a diverged run never replaces or prunes a finite checkpoint.
  void write(StepContext &ctx, const Ema &ema, int64_t step, uint64_t seed);

  // The run's resolved learning-rate schedule, recorded as
  // "hc.lr_schedule" (a resume on another schedule is noted, not refused).
  void setSchedule(const LrSchedule &s) { schedule_ = s; }

  static constexpr const char *kLockFile = ".hc-run.lock";

private:
  void lockFolder(const std::string &dir);
  std::map<std::string, std::string> metadata(const Ema &ema, int64_t step,
                                              uint64_t seed) const;
  void checkAgainstRun(const hc::rt::SafetensorsFile &f);
  const Options &opt_;
  const StepLibrary &lib_;
  hc::rt::Comm &comm_;
  DataIdentity data_;
  struct Picked {
    int64_t step = 0;
    uint64_t seed = 0;
    double emaDecay = -1;
  } picked_;
  // Steps at which a resume changed the data (--allow-data-change), as
  // stored in hc.data_changed_at: "" or "1200,5000".
  std::string dataChangedAt_;
  hc::rt::SafetensorsFile file_;
  int lockFd_ = -1;
  LrSchedule schedule_;
  std::string scheduleText() const;
};

// The model's identity as stored in a checkpoint ("hc.model"): parameters
// and optimizer state (names, dtypes, shapes, trainable), the optimizer's
// name and the DiT architecture. Two libraries compiled from the same model
// with other hyper-parameters or batch share it.
std::string modelIdentity(const Description &d);
// What a checkpoint records of the objective ("mse", "mse+vlb" or "flow: ...
// path, prediction, weight, epsilons") and of how train mode draws t.
std::string objectiveText(const Description &d);
std::string timeSamplingText(const StepLibrary &lib, const Options &opt);

} // namespace hcrun

#endif // HC_RUN_CHECKPOINTING_H
