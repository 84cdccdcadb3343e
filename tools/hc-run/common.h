// hc-run's shared pieces: errors with exit codes, options, the loaded step
// library and its parsed description.
#ifndef HC_RUN_COMMON_H
#define HC_RUN_COMMON_H

#include "cond_data.h"
#include "lr_schedule.h"
#include "preemption.h"
#include "transport.h"

#include "hc/runtime/comm.h"
#include "hc/abi/step_abi.h"

#include <nlohmann/json.hpp>

#include <csignal>
#include <cstdint>
#include <map>
#include <set>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace hcrun {

// Exit codes: 2 = bad command line, library, description or data (nothing was
// trained or written); 1 = failure while running (a step failed, a
// non-finite loss, an output could not be written).
struct Error : std::runtime_error {
  int code;
  Error(int code, const std::string &message)
      : std::runtime_error(message), code(code) {}
};
[[noreturn]] inline void usageError(const std::string &m) { throw Error(2, m); }

struct Options {
  std::string step;           // STEP.so
  std::string inputs;         // test mode: folder of NAME.npy
  std::string data, labels;   // train mode
  int64_t steps = -1;
  std::string init, saveParams, saveGrads, saveState;
  uint64_t seed = 0;
  int64_t logEvery = 100;
  std::string metrics;
  std::string tensorboard;    // --tensorboard DIR (tensorboard.h)
  int progress = -1;          // -1: when stdout is a terminal
  double progressEvery = 30;  // --progress-every S: lines off a terminal
  // Checkpoints (train mode, see checkpointing.h).
  std::string ckptDir;
  int64_t ckptEvery = 0;      // 0: only the final checkpoint
  int64_t ckptKeep = 0;       // 0: keep all
  bool resume = false;
  double emaDecay = -1;       // < 0: no EMA
  bool checkFinite = false;   // --check-finite: every kernel output, every step
  int64_t commCores = 0;      // --comm-cores: cores per rank for comm progress
  bool commCoresGiven = false;  // else the plan's core budget decides
  double commTimeout = 0;     // --comm-timeout: the collectives' watchdog (0: off)
  std::string offloadDir;      // --offload-dir: the disk tier's folder
  bool strictTopology = false;  // --strict-topology (machine_check.h)
  std::string profile;        // --profile FILE (profile.h)
  bool seedSeen = false;      // --seed given (a resume checks it)
  bool hflip = false;         // --hflip: DiT's random horizontal flip
  TimeSampling timeSampling;  // --time-sampling, --logit-mean/std (flow models)
  bool timeSamplingGiven = false, logitGiven = false;
  // --checkpoint-on / --checkpoint-grace (preemption.h); on with --ckpt-dir.
  PreemptionOptions preemption{{SIGTERM, SIGUSR1, SIGINT}, 0.0};
  bool checkpointOnGiven = false;
  bool allowDataChange = false;  // --allow-data-change (a resume on new data)
  bool strictMemory = false;     // --strict-memory: refuse a plan that cannot fit
  LrSchedule schedule;           // --lr-schedule, --lr, ... (lr_schedule.h)
  int64_t accumulate = 1;        // --accumulate K: micro-batches per step
  int64_t numClasses = -1;       // --num-classes N (plain exports)
  double classDropout = -1;      // --class-dropout P (plain exports)
  std::vector<CondFlag> conds;     // --cond NAME=FILE.npy (cond_data.h)
  double condDropout = -1;         // --cond-dropout P (plain exports)
  std::vector<CondFlag> valConds;  // --val-cond NAME=FILE.npy
  std::string valData, valLabels;  // --val-data/--val-labels (validation.h)
  int64_t valEvery = 0;            // --val-every N; 0: --log-every
  bool help = false;
  bool trainMode() const { return !data.empty(); }
};
// Throws Error(2) on bad flags.
Options parseOptions(int argc, char **argv);
const char *usageText();

// Canonical dtype names are safetensors': "F32", "I64", "F64", "I32", "U8",
// "BOOL". Accepts "float32"/"f32"/"F32", "int64"/"i64"/"I64", ... and NPY
// codes ("f4", "i8", ...). Empty when unknown.
std::string canonicalDtype(const std::string &name);
std::size_t dtypeSize(const std::string &canonical);

struct TensorSpec {
  std::string name;
  std::string dtype;            // canonical
  std::vector<int64_t> shape;
  bool trainable = true;
  std::size_t numElements() const;
  std::size_t bytes() const { return numElements() * dtypeSize(dtype); }
};
std::string shapeString(const std::vector<int64_t> &shape);

struct Description {
  nlohmann::json raw;
  int64_t batchPerRank = 0;
  std::vector<TensorSpec> inputs, parameters, state;
  std::vector<std::string> gradients;
  double flopsPerStep = 0;
  std::string initFile;         // as written; resolved against the .so folder
  std::string initHash;         // hashHex of the init file's bytes ("": unchecked)
  nlohmann::json ditConfig;     // object or null
  // The step inputs the graph's own random draws choose between (its
  // description's random_ops[].selects): "y" where the graph drops labels
  // itself, so hc-run must not drop them again.
  std::set<std::string> graphSelects;
  bool graphDrops(const std::string &input) const { return graphSelects.count(input) > 0; }
  std::string optimizer;         // "adamw", "sgd", "adam" ("" for a sampler)
  // The step's hyperparameters (step ABI 5) and their compiled values.
  std::map<std::string, double> hyperparameters;
  const TensorSpec *input(const std::string &name) const;
  const TensorSpec *parameter(const std::string &name) const;
  // DiT's label table (LabelEmbedder, a [rows, hidden] parameter named
  // *embedding_table.weight) when there is exactly one, else nullptr. Its
  // rows are the valid class ids, the null class included where it has one.
  static constexpr const char *kLabelTableSuffix = "embedding_table.weight";
  const TensorSpec *labelTable() const;
};

// dlopen + hc_step_get_api + ABI check + description. Throws Error(2).
struct StepLibrary {
  std::string path, folder;
  const hc_step_api *api = nullptr;
  Description desc;
  void load(const std::string &path);
  // --init P when given, else the description's init_file beside the library.
  std::string initPath(const std::string &given) const;
};

// One context of the step, bound to the job's communicator.
class StepContext {
public:
  // Throws Error(1). `checkFinite`: the step checks every kernel output.
  StepContext(const StepLibrary &lib, hc::rt::Comm &comm, bool checkFinite = false,
              bool profile = false);
  ~StepContext();
  StepContext(const StepContext &) = delete;
  StepContext &operator=(const StepContext &) = delete;
  hc_step *handle() { return step_; }
  // Sets every parameter (and any optimizer state present) from a
  // safetensors file; checks names, dtypes and shapes. Throws Error(2).
  void loadTensors(const std::string &path);
  // loadTensors(--init P, or the description's init_file next to the
  // library when P is empty). Throws Error(2).
  void loadInit(const std::string &given);
  // Writes parameters / last gradients (as NAME) / optimizer state to a
  // safetensors file atomically. Throws Error(1).
  enum class What { Params, Grads, State };
  void save(What what, const std::string &path,
            const std::map<std::string, std::string> &metadata) const;
  // Reads every tensor `what` would save and throws Error(1) at the first
  // non-finite value (requireFinite), before anything is written.
  void checkFinite(What what, int64_t step) const;
  // The last step's global gradient norm before clipping (the step's
  // "grad_norm" tensor); NaN for a library without one.
  double gradNorm() const;
  // The forward pass and loss alone (hc_step_api::evaluate): this rank's
  // loss. Throws Error(1).
  double evaluate(const void *const *inputs);
  // One parameter or state tensor by name; throws Error(1).
  void getTensor(const std::string &name, void *data, std::size_t bytes) const;
  void setTensor(const std::string &name, const void *data, std::size_t bytes);
  // set_hyperparameter; throws Error(1) when the library refuses it.
  void setHyperparameter(const std::string &name, double value);
  // FNV-1a of every parameter's bytes (ranks compare it).
  uint64_t parameterHash() const;
  // One step; throws Error(1) when the library reports failure. A step
  // stopped at its update gate (preemption, -4) sets *stopped instead.
  double step(const void *const *inputs, int64_t stepIndex,
              bool *stopped = nullptr);

private:
  const StepLibrary &lib_;
  hc_step_env env_{};
  hc_step *step_ = nullptr;
};

// Throws Error(1) naming `kind` (e.g. "parameter"), the tensor, the first
// non-finite element and `step` when an F32 tensor holds NaN or infinity:
// hc-run never writes non-finite training state.
void requireFinite(const char *kind, const std::string &name,
                   const std::string &dtype, const void *data,
                   std::size_t elements, int64_t step);

// "{rank}" in a save path: every rank writes its own file; otherwise rank 0.
bool pathIsPerRank(const std::string &path);
std::string pathForRank(const std::string &path, int rank);
// Throws Error(2) when the folder of `path` does not exist or is not
// writable, or `path` is a folder.
void checkOutputPath(const std::string &flag, const std::string &path);
// Every output flag of this run (--save-*, --metrics) checked with
// checkOutputPath, against every input of the run (library, init file,
// data, labels, test inputs) by file identity, and against each other:
// no output may overwrite an input or another output. Throws Error(2).
void checkOutputs(const Options &opt, const StepLibrary &lib, int rank);

// The general form: every output checked with checkOutputPath, none the
// same file as an input or another output. Throws Error(2) naming both.
struct NamedPath {
  std::string flag, path;
};
void checkOutputsAgainstInputs(const std::vector<NamedPath> &outputs,
                               const std::vector<NamedPath> &inputs);
// Refuses (Error 2) an output whose name starts "ckpt-" in the checkpoint
// folder `ckptDir` (given as `dirFlag`).
void refuseCheckpointNames(const std::vector<NamedPath> &outputs,
                           const std::string &ckptDir, const std::string &dirFlag);

// The run's schedule against the library: the compiled lr and weight decay
// filled in, decaySteps resolved to --steps; throws Error(2) when flags are
// given that the library cannot take (ONNX Adam's graph-held rate, a
// library without the hyperparameter).
LrSchedule resolveSchedule(const Options &opt, const StepLibrary &lib);
// Sets the step's "lr" (and --weight-decay's "weight_decay") for optimizer
// step `done` + 1; a no-op without schedule flags. Returns the lr used
// (the compiled one when nothing is set; NaN for a library without "lr").
double applySchedule(const LrSchedule &s, const StepLibrary &lib, StepContext &ctx,
                     int64_t done);

// Saves what --save-params/--save-grads/--save-state ask for, then compares
// parameters across ranks (they must be bit-identical).
void finishRun(const Options &opt, StepContext &ctx, hc::rt::Comm &comm,
               int64_t stepsDone);

// The two modes. They return the process exit code.
int runTestMode(const Options &opt, const StepLibrary &lib, hc::rt::Comm &comm);
int runTrainMode(const Options &opt, const StepLibrary &lib, hc::rt::Comm &comm);
// `hc-run sample ...` (argv[0] is "sample"): images from a sampler library.
int runSampleMode(int argc, char **argv, hc::rt::Comm &comm);

// Settles a setup phase collectively: when some rank caught an error, the
// lowest such rank prints it, and every rank finalizes and exits with its
// code. Returns normally only when no rank failed.
void agreeOrExit(hc::rt::Comm &comm, const Error *local);

} // namespace hcrun

#endif // HC_RUN_COMMON_H
