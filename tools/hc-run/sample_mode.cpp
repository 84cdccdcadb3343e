// hc-run sample: images from a trained DiT, as DiT's sample.py makes them.
//
// The library is hc-compile --sampler's forward pass (inputs x_t, t, y and
// any conditionings; output "prediction" = every channel of the DiT). This
// file reads the flags, the model and the weights and plans the images;
// sample_ddpm.cpp and sample_flow.cpp run the chunks of images through the
// model (with guidance: the conditional rows and their null twins in one
// batch, as forward_with_cfg). Random draws are Philox keyed by (seed,
// step, image index), so an image does not depend on the batch it ran in.
#include "png.h"
#include "sample_mode.h"
#include "sampling_schedule.h"

#include "hc/runtime/checkpoint.h"
#include "hc/base/files.h"
#include "hc/base/npy.h"
#include "hc/abi/random.h"
#include "hc/base/safetensors.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sys/stat.h>
#include <unistd.h>

namespace hcrun {
namespace {

const char *kSampleUsage = R"(usage: hc-run sample SAMPLER.so --ckpt CKPT.safetensors|CKPT_DIR
           [--out GRID.png [--png-bands B|R,G,B]] [--save-npy SAMPLES.npy] [--classes LIST|all]
           [--per-class N | --images N] [--cfg-scale S] [--sampler NAME]
           [--cond NAME=C.npy ... [--per-cond N]] [--cfg-drop all|LIST]
           [--weights ema|raw] [--num-classes N] [--class-dropout P]
           [--sampling-steps K] [--seed S] [--no-clip] [--progress|--no-progress]
           [--profile FILE]
           flow models: [--atol A] [--rtol R] [--diffusion-form F]
           [--diffusion-norm X] [--last-step Mean|Tweedie|Euler|none]
           [--last-step-size H]

SAMPLER.so comes from `hc-compile dit_train.onnx --sampler --batch B`. Makes
--per-class images of each class and writes them (at least one of):
  --out GRID.png      a grid, one row per class in --classes order, labelled
                      with the class id (grey for 1 channel, colour for 3,
                      else the first channel, or --png-bands)
  --save-npy F.npy    float32 [N, C, H, W] in the same order, and the class
                      of each image in F.labels.npy (int64 [N])
options:
  --ckpt F|DIR        weights: an hc-run checkpoint (its checksum checked) or
                      any safetensors with the parameters under their
                      PyTorch names (EMA or raw: --weights). A --ckpt-dir
                      folder: its newest checkpoint
  --png-bands LIST    which channels the PNG shows: one (grey) or three
                      (R,G,B), e.g. 3,2,1 for a true-colour composite of
                      multi-band data (default 0,1,2 for 3 channels, else 0)
  --classes LIST|all  class ids, e.g. 0,3,7 (default: all)
  --per-class N       images per class (default 8)
  --images N          an unconditional model's (no label input): N images
                      (default 16), the grid in rows of 8, labels -1
  --weights ema|raw   the checkpoint's EMA (ema:NAME) or its trained weights
                      (default: the EMA when the file has one, with a note
                      when it is young: still mostly the initial weights)
  --num-classes N     classes of a plain export without hc metadata (else the
                      label table's rows); checked against the metadata
  --class-dropout P   P > 0: the label table's last row is the null class
                      (guidance needs it); checked against the table
  --cfg-scale S       classifier-free guidance scale (default 4.0, DiT's, for
                      class-conditional models; 1 for the others); 1 turns
                      guidance off; guidance needs the null form of what it
                      drops and an even --batch
  --cond NAME=C.npy   a model exported with --cond (models/conditioning.py):
                      the conditioning NAME of each grid row, float32 [M, ...]
                      as in training (every conditioning of the model, the
                      same M rows each); --per-cond images of each row, the
                      grid one row per condition (--save-npy in that order).
                      --classes gives one class for every row or one per row
  --per-cond N        images per condition row (default 1)
  --cfg-drop all|LIST what the guidance's unconditional half drops to its
                      null form: all (default: the null class and every
                      conditioning's null, DiT's forward_with_cfg), or a list
                      of y and conditioning names, e.g. txt or y,low: the
                      others stay in both halves
  --sampler NAME      DDPM models: ddpm (ancestral, default) or ddim
                      (deterministic, eta 0). Flow models (export_dit.py
                      --objective flow), SiT's samplers from noise at t = 0
                      to data at 1: euler or heun (fixed-step ODE; heun is
                      the default), dopri5 (adaptive Dormand-Prince 5(4),
                      --atol/--rtol, its evaluations reported), sde-euler
                      (Euler-Maruyama) or sde-heun, with SiT's last step.
                      Each kind refuses the other's samplers
  --sampling-steps K  DDPM: DiT's timestep respacing of the 1000 training
                      steps: K, sections "K1,K2,...", or "ddimN" (every
                      stride-th step, N of them; default 250). Flow: K
                      integration steps of euler, heun (2 evaluations each),
                      sde-euler, sde-heun (default 25 for the ODE, 250 for
                      the SDE; SiT counts grid points, K + 1 of them)
  --atol A, --rtol R  dopri5's tolerances (SiT's defaults 1e-6, 1e-3)
  --diffusion-form F  SDE: constant, SBDM, sigma (default), linear,
                      decreasing or increasing-decreasing (SiT's forms)
  --diffusion-norm X  SDE: the diffusion's scale (default 1)
  --last-step S       SDE: SiT's last step to t = 1: Mean (default), Tweedie,
                      Euler or none
  --last-step-size H  its size (default 0.04)
  --seed S            seed of every draw (default 0)
  --no-clip           do not clip x0 predictions to [-1, 1] (DiT does not
                      clip its latents; pixel data is clipped by default)
  --progress, --no-progress   a progress bar on stderr (default: when stderr
                      is a terminal)
  --profile FILE      time every kernel call of the model calls: FILE (JSON)
                      and a table on stdout, as train mode's --profile, a
                      "step" being one model call (the first left out when
                      more come: its pages are touched first); MFU is the
                      forward's products over the FMA peak and the call time
)";

// A --ckpt-dir folder stands for its newest checkpoint, judged as --resume
// judges it: by the step stored inside, which must agree with the name.
std::string resolveCheckpoint(const std::string &path) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
    return path;
  std::vector<hc::rt::CheckpointFile> all;
  std::string err;
  if (!hc::rt::listCheckpoints(path, all, err))
    usageError(err);
  if (all.empty())
    usageError("--ckpt " + path + ": a folder without checkpoints (ckpt-<step>.safetensors)");
  const hc::rt::CheckpointFile &newest = all.back();
  hc::rt::SafetensorsFile f;
  if (!f.open(newest.path, err))
    usageError(err);
  auto it = f.metadata().find("hc.step");
  if (it == f.metadata().end() || it->second != std::to_string(newest.step))
    usageError(newest.path + ": its name says step " + std::to_string(newest.step) +
               ", but it holds " + (it == f.metadata().end() ? "no hc.step" : "step " + it->second) +
               "; give --ckpt the file to use");
  std::printf("--ckpt %s: the newest checkpoint, %s\n", path.c_str(), newest.path.c_str());
  return newest.path;
}

SampleOptions parseSampleOptions(int argc, char **argv) {
  SampleOptions o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc)
        usageError(a + " needs a value");
      return argv[++i];
    };
    if (a == "-h" || a == "--help") {
      o.help = true;
    } else if (a == "--ckpt") {
      o.ckpt = value();
    } else if (a == "--out") {
      o.out = value();
    } else if (a == "--png-bands") {
      o.pngBands = value();
    } else if (a == "--save-npy") {
      o.saveNpy = value();
    } else if (a == "--dump-steps") {  // for test/run/sample_check.py
      o.dumpSteps = value();
    } else if (a == "--classes") {
      o.classes = value();
      o.classesGiven = true;
    } else if (a == "--per-class") {
      o.perClass = parseInteger(a, value(), 1, 1 << 20);
      o.perClassGiven = true;
    } else if (a == "--cond") {
      o.conds.push_back(parseCondFlag(a, value(), o.conds));
    } else if (a == "--per-cond") {
      o.perCond = parseInteger(a, value(), 1, 1 << 20);
    } else if (a == "--cfg-drop") {
      o.cfgDrop = value();
      o.cfgDropGiven = true;
    } else if (a == "--images") {
      o.images = parseInteger(a, value(), 1, 1 << 20);
    } else if (a == "--weights") {
      o.weights = value();
      if (o.weights != "ema" && o.weights != "raw")
        usageError("--weights must be ema or raw, got '" + o.weights + "'");
    } else if (a == "--num-classes") {
      o.numClasses = parseInteger(a, value(), 1, 1 << 24);
    } else if (a == "--class-dropout") {
      const std::string v = value();
      char *end = nullptr;
      o.classDropout = std::strtod(v.c_str(), &end);
      if (v.empty() || *end || !(o.classDropout >= 0 && o.classDropout < 1))
        usageError("--class-dropout needs a probability in [0, 1), got '" + v + "'");
    } else if (a == "--cfg-scale") {
      std::string v = value();
      char *end = nullptr;
      o.cfgScale = std::strtod(v.c_str(), &end);
      o.cfgGiven = true;
      if (v.empty() || *end || !std::isfinite(o.cfgScale) || o.cfgScale < 0 ||
          o.cfgScale > 1000)
        usageError("--cfg-scale needs a number in [0, 1000], got '" + v + "'");
    } else if (a == "--sampler") {
      o.sampler = value();
      FlowMethod fm;
      if (o.sampler != "ddpm" && o.sampler != "ddim" && !parseFlowMethod(o.sampler, fm))
        usageError("--sampler must be ddpm or ddim (DDPM models), or euler, heun, dopri5, "
                   "sde-euler or sde-heun (flow models), got '" + o.sampler + "'");
    } else if (a == "--atol" || a == "--rtol" || a == "--diffusion-norm" ||
               a == "--last-step-size") {
      const std::string v = value();
      char *end = nullptr;
      const double x = std::strtod(v.c_str(), &end);
      const bool size = a == "--last-step-size";
      if (v.empty() || *end || !std::isfinite(x) || x < 0 || (!size && x == 0) ||
          (size && x >= 0.5))
        usageError(a + (size ? " needs a number in [0, 0.5)" : " needs a positive number") +
                   ", got '" + v + "'");
      (a == "--atol" ? o.flow.atol : a == "--rtol" ? o.flow.rtol
       : size ? o.flow.lastStepSize : o.flow.norm) = x;
      o.flowFlagGiven = true;
      (a == "--atol" || a == "--rtol" ? o.tolGiven : o.sdeGiven) = true;
    } else if (a == "--diffusion-form") {
      if (!parseDiffusionForm(value(), o.flow.form))
        usageError("--diffusion-form must be constant, SBDM, sigma, linear, decreasing or "
                   "increasing-decreasing, got '" + std::string(argv[i]) + "'");
      o.flowFlagGiven = o.sdeGiven = true;
    } else if (a == "--last-step") {
      if (!parseLastStep(value(), o.flow.lastStep))
        usageError("--last-step must be Mean, Tweedie, Euler or none, got '" +
                   std::string(argv[i]) + "'");
      o.flowFlagGiven = o.sdeGiven = true;
    } else if (a == "--sampling-steps") {
      o.steps = value();
      o.stepsGiven = true;
      o.sections.clear();
      o.ddimCount = 0;
      if (o.steps.rfind("ddim", 0) == 0)
        o.ddimCount = static_cast<int>(parseInteger(a + " ddimN:", o.steps.substr(4), 2, 1000));
      else
        for (int64_t k : parseList(a, o.steps, 1, 1000))
          o.sections.push_back(static_cast<int>(k));
    } else if (a == "--seed") {
      o.seed = static_cast<uint64_t>(parseInteger(a, value(), 0, INT64_MAX));
    } else if (a == "--no-clip") {
      o.clip = false;
      o.noClipGiven = true;
    } else if (a == "--progress" || a == "--no-progress") {
      o.progress = a == "--progress";
    } else if (a == "--profile") {
      o.profile = value();
    } else if (!a.empty() && a[0] == '-') {
      usageError("sample: unknown flag '" + a + "'");
    } else if (o.library.empty()) {
      o.library = a;
    } else {
      usageError("sample: more than one library given ('" + o.library + "', '" + a + "')");
    }
  }
  if (o.help)
    return o;
  if (o.library.empty())
    usageError("sample: no sampler library given");
  if (o.ckpt.empty())
    usageError("sample: --ckpt is required (the trained weights)");
  if (o.out.empty() && o.saveNpy.empty() && o.dumpSteps.empty())
    usageError("sample: nothing to write: give --out GRID.png and/or --save-npy F.npy");
  return o;
}

std::string labelsPathFor(const std::string &npy) {
  const std::string ext = ".npy";
  if (npy.size() > ext.size() && npy.compare(npy.size() - ext.size(), ext.size(), ext) == 0)
    return npy.substr(0, npy.size() - ext.size()) + ".labels.npy";
  return npy + ".labels.npy";
}


ModelFacts modelFacts(const StepLibrary &lib, const SampleOptions &o) {
  const Description &d = lib.desc;
  const std::string &p = lib.path;
  if (!d.raw.contains("library") || d.raw["library"] != "sampler")
    usageError(p + " is a training step library; make a sampler with "
               "`hc-compile MODEL.onnx --sampler -o dit_sample.so`");
  ModelFacts m;
  m.flow = d.ditConfig.is_object() && d.ditConfig.value("objective", std::string()) == "flow";
  if (m.flow)
    m.flowObjective = FlowObjective::fromConfig(d.ditConfig, p);
  const TensorSpec *xt = d.input("x_t"), *t = d.input("t"), *y = d.input("y");
  const char *tType = m.flow ? "F32" : "I64";
  if (!xt || !t || xt->shape.size() != 4 || xt->dtype != "F32" || t->dtype != tType ||
      (y && y->dtype != "I64"))
    usageError(p + ": a sampler must take x_t (float32 [B,C,H,W]), t (" +
               (m.flow ? "float32 [B], a flow model's time" : "int64 [B]") +
               ") and, when class-conditional, y (int64 [B])");
  m.conds = condInputsOf(d, p, xt->shape, [](const std::string &n) {
    return n == "x_t" || n == "t" || n == "y";
  }, "a sampler's x_t, t, y");
  m.conditional = y != nullptr;
  m.batch = xt->shape[0];
  m.channels = xt->shape[1];
  m.height = xt->shape[2];
  m.width = xt->shape[3];
  const auto &outs = d.raw.value("outputs", nlohmann::json::array());
  if (outs.size() != 1 || outs[0].value("name", "") != "prediction" ||
      outs[0]["shape"].size() != 4)
    usageError(p + ": the description has no 'prediction' output [B,C',H,W]");
  std::vector<int64_t> shape = outs[0]["shape"].get<std::vector<int64_t>>();
  m.outChannels = shape[1];
  if (shape[0] != m.batch || shape[2] != m.height || shape[3] != m.width ||
      (m.outChannels != m.channels && m.outChannels != 2 * m.channels))
    usageError(p + ": prediction " + shapeString(shape) + " is neither C nor 2C channels of x_t " +
               shapeString(xt->shape));
  m.learnSigma = m.outChannels == 2 * m.channels;
  if (!m.conditional) {
    if (o.numClasses > 0 || o.classDropout > 0)
      usageError(std::string(o.numClasses > 0 ? "--num-classes" : "--class-dropout") + ": " +
                 p + " is unconditional (no label input y)");
    return m;
  }
  const TensorSpec *table = d.labelTable();
  if (!table)
    usageError(p + ": the model has no label table (" + Description::kLabelTableSuffix +
               "): it is not class-conditional");
  m.labelRows = table->shape[0];
  m.numClasses = m.labelRows;
  int64_t meta = -1;
  if (d.ditConfig.is_object() && d.ditConfig.contains("num_classes") &&
      d.ditConfig["num_classes"].is_number_integer())
    meta = m.numClasses = d.ditConfig["num_classes"].get<int64_t>();
  // --num-classes / --class-dropout state what a plain export's metadata
  // would; where both exist they must agree.
  if (o.numClasses > 0) {
    if (meta > 0 && meta != o.numClasses)
      usageError("--num-classes " + std::to_string(o.numClasses) + " contradicts " + p +
                 "'s dit_config.num_classes " + std::to_string(meta));
    m.numClasses = o.numClasses;
  } else if (o.classDropout >= 0 && meta < 0) {
    m.numClasses = m.labelRows - (o.classDropout > 0 ? 1 : 0);
  }
  if (m.labelRows != m.numClasses && m.labelRows != m.numClasses + 1)
    usageError(p + ": the label table " + table->name + " has " +
               std::to_string(m.labelRows) + " rows, neither " +
               std::to_string(m.numClasses) + " classes nor them and a null class");
  m.hasNullClass = m.labelRows == m.numClasses + 1;
  if (o.classDropout >= 0 && (o.classDropout > 0) != m.hasNullClass)
    usageError("--class-dropout " + number(o.classDropout) + (m.hasNullClass ? " says no" : " says a") +
               " null class, but " + p + "'s label table has " + std::to_string(m.labelRows) +
               " rows for " + std::to_string(m.numClasses) + " classes");
  return m;
}

// The sampler of a flow model: its defaults, and the other kind's refused.
void chooseFlowSampler(SampleOptions &o, const StepLibrary &lib, const ModelFacts &m) {
  if (o.sampler.empty())
    o.sampler = "heun";
  if (o.sampler == "ddpm" || o.sampler == "ddim")
    usageError("--sampler " + o.sampler + ": " + lib.path + " is a flow model (" +
               m.flowObjective.describe() + "); its samplers are euler, heun, dopri5, "
               "sde-euler and sde-heun");
  parseFlowMethod(o.sampler, o.flow.method);
  const bool sde = isSde(o.flow.method), adaptive = o.flow.method == FlowMethod::Dopri5;
  if (o.tolGiven && !adaptive)
    usageError("--atol/--rtol set dopri5's tolerances; --sampler " + o.sampler +
               " takes fixed steps (--sampling-steps)");
  if (o.sdeGiven && !sde)
    usageError("--diffusion-form/--diffusion-norm/--last-step/--last-step-size shape the "
               "SDE; --sampler " + o.sampler + " integrates the ODE");
  if (o.noClipGiven)
    usageError("--no-clip: the flow samplers never clip (DDPM's x0 clipping)");
  if (adaptive && o.stepsGiven)
    usageError("--sampling-steps: dopri5 chooses its own steps (--atol, --rtol)");
  o.flow.steps = sde ? 250 : 25;
  if (o.stepsGiven)
    o.flow.steps = static_cast<int>(parseInteger("--sampling-steps", o.steps, 1, 100000));
}

void chooseDdpmSampler(SampleOptions &o, const StepLibrary &lib) {
  if (o.sampler.empty())
    o.sampler = "ddpm";
  if (o.sampler != "ddpm" && o.sampler != "ddim")
    usageError("--sampler " + o.sampler + ": " + lib.path + " is a DDPM model (its t is an "
               "integer timestep); its samplers are ddpm and ddim");
  if (o.flowFlagGiven)
    usageError("--atol/--rtol/--diffusion-form/--diffusion-norm/--last-step/--last-step-size "
               "are for flow models; " + lib.path + " is a DDPM model");
}

// hc.data_kind of a checkpoint ("pixels", "latents"), or "" when it has none.
std::string checkpointDataKind(const std::string &path) {
  hc::rt::SafetensorsFile f;
  std::string err;
  if (!f.open(path, err))
    return "";
  auto it = f.metadata().find("hc.data_kind");
  return it == f.metadata().end() ? "" : it->second;
}

// Parameters from --ckpt into the context: --weights ema (ema:NAME, which
// must be there), raw (NAME), or by default ema:NAME where the file has an
// EMA, else NAME. Returns whether the EMA was used.
bool loadWeights(const StepLibrary &lib, StepContext &ctx, const std::string &path,
                 const std::string &weights, const FlowObjective *flow) {
  hc::rt::SafetensorsFile plain, verified;
  std::string err;
  if (!plain.open(path, err))
    usageError("--ckpt " + err);
  const hc::rt::SafetensorsFile *f = &plain;
  if (plain.metadata().count("hc.checksum")) {  // an hc-run checkpoint: verify it
    if (!hc::rt::openCheckpoint(path, verified, err))
      usageError("--ckpt " + err);
    f = &verified;
  }
  // A checkpoint says what it was trained for: a flow model's outputs mean
  // nothing to DDPM's sampler, and the reverse.
  if (f->metadata().count("hc.objective")) {
    const std::string trained = f->metadata().at("hc.objective");
    const bool trainedFlow = trained.rfind("flow: ", 0) == 0;
    const std::string mine = flow ? "flow: " + flow->describe() : "DDPM";
    if (trainedFlow != (flow != nullptr) || (flow && trained != mine))
      usageError("--ckpt " + path + " was trained with objective '" + trained + "', but " +
                 lib.path + " samples " + (flow ? "'" + mine + "'" : std::string("a DDPM model")) +
                 " (compile the sampler from the export the checkpoint was trained with)");
  }
  bool ema = false;
  for (const auto &e : f->entries())
    ema |= e.name.rfind("ema:", 0) == 0;
  if (weights == "ema" && !ema)
    usageError("--weights ema: --ckpt " + path + " holds no EMA (ema:NAME tensors; train "
               "with hc-run --ema)");
  if (weights == "raw")
    ema = false;
  // A young EMA is still mostly the initial weights (DiT's decay 0.9999
  // averages over ~10000 steps): say so, the raw weights may sample better.
  const auto &md = f->metadata();
  if (ema && weights == "auto" && md.count("hc.ema_decay") && md.count("hc.step")) {
    const double decay = std::atof(md.at("hc.ema_decay").c_str());
    const double step = std::atof(md.at("hc.step").c_str());
    if (decay > 0 && decay < 1 && step < 1.0 / (1.0 - decay))
      std::printf("hc-run sample: note: the EMA (decay %g) of this step-%.0f checkpoint still "
                  "weighs its initial parameters by %.0f%%; --weights raw samples the trained "
                  "ones\n", decay, step, 100.0 * std::pow(decay, step));
  }
  for (const TensorSpec &p : lib.desc.parameters) {
    const std::string key = (ema ? "ema:" : "") + p.name;
    const hc::rt::SafetensorsEntry *e = f->find(key);
    if (!e)
      usageError("--ckpt " + path + " has no tensor '" + key + "' (parameter of " +
                 lib.path + ")");
    if (e->dtype != "F32" || e->shape != p.shape)
      usageError("--ckpt " + path + ": '" + key + "' is " + e->dtype + " " +
                 shapeString(e->shape) + ", the model needs F32 " + shapeString(p.shape));
    if (lib.api->set_tensor(ctx.handle(), p.name.c_str(), f->data(*e), e->bytes) != 0)
      throw Error(1, lib.path + ": set_tensor('" + p.name + "') failed");
    f->release(*e);
  }
  return ema;
}

} // namespace

int64_t parseInteger(const std::string &flag, const std::string &v, int64_t lo, int64_t hi) {
  char *end = nullptr;
  errno = 0;
  long long x = std::strtoll(v.c_str(), &end, 10);
  if (v.empty() || *end || errno || x < lo || x > hi)
    usageError(flag + " needs an integer in [" + std::to_string(lo) + ", " +
               std::to_string(hi) + "], got '" + v + "'");
  return x;
}

std::vector<int64_t> parseList(const std::string &flag, const std::string &v, int64_t lo,
                               int64_t hi) {
  std::vector<int64_t> out;
  std::size_t start = 0;
  while (start <= v.size()) {
    std::size_t comma = v.find(',', start);
    if (comma == std::string::npos)
      comma = v.size();
    out.push_back(parseInteger(flag, v.substr(start, comma - start), lo, hi));
    start = comma + 1;
  }
  return out;
}

std::string number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

// N(0, 1) by Box-Muller over a pair of uniforms (sample_mode.h).
float normalDraw(uint64_t seed, uint64_t step, uint64_t image, uint64_t kind, uint64_t k) {
  const double u1 = hc::rt::uniform01(seed, step, image, kind, k & ~uint64_t{1});
  const double u2 = hc::rt::uniform01(seed, step, image, kind, k | 1);
  const double radius = std::sqrt(-2.0 * std::log(1.0 - u1));  // 1-u1 in (0, 1]
  const double angle = 6.283185307179586 * u2;
  return static_cast<float>(radius * (k & 1 ? std::sin(angle) : std::cos(angle)));
}

void progressLine(int64_t done, int64_t total, double seconds) {
  const int width = 30;
  int filled = static_cast<int>(width * done / total);
  std::fprintf(stderr, "\rsampling %6lld/%lld model calls [", static_cast<long long>(done),
               static_cast<long long>(total));
  for (int i = 0; i < width; ++i)
    std::fputc(i < filled ? '=' : (i == filled ? '>' : ' '), stderr);
  std::fprintf(stderr, "] %.1f s\033[K", seconds);
  std::fflush(stderr);
}

void modelCall(const SampleRun &r, int64_t index) {
  const auto t0 = std::chrono::steady_clock::now();
  r.ctx.step(r.inputs.ptrs(), index);
  if (r.profiler)
    r.profiler->afterCall(
        r.ctx, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
}

void writeNpyOrFail(const std::string &path, const std::string &dtype,
                    const std::vector<int64_t> &shape, const void *data) {
  std::string err;
  if (!hc::rt::writeNpy(path, dtype, shape, data, err))
    throw Error(1, err);
}


int runSampleMode(int argc, char **argv, hc::rt::Comm &comm) {
  SampleOptions o = parseSampleOptions(argc, argv);
  if (o.help) {
    std::fputs(kSampleUsage, stdout);
    return 0;
  }
  if (comm.size() != 1)
    usageError("sample runs on one process; start it without mpirun");
  StepLibrary lib;
  lib.load(o.library);
  const ModelFacts m = modelFacts(lib, o);

  CondData condData;
  condData.open(o.conds, m.conds, -1, "--cond", "", lib.path);
  const ImagePlan plan = planImages(o, m, lib, condData);
  const Guidance guidance = planGuidance(o, m, lib);
  std::vector<int> bands;
  if (o.pngBands.empty()) {
    bands = m.channels == 3 ? std::vector<int>{0, 1, 2} : std::vector<int>{0};
  } else {
    if (o.out.empty())
      usageError("--png-bands chooses what --out shows; give --out GRID.png");
    for (int64_t b : parseList("--png-bands", o.pngBands, 0, m.channels - 1))
      bands.push_back(static_cast<int>(b));
    if (bands.size() != 1 && bands.size() != 3)
      usageError("--png-bands needs one channel (grey) or three (R,G,B), got " +
                 std::to_string(bands.size()));
  }
  o.ckpt = resolveCheckpoint(o.ckpt);
  // Latents (models/prepare_data.py --mode latents, recorded by train mode)
  // are not images in [-1, 1]: DDPM's x0 clipping would damage them.
  if (!m.flow && o.clip && checkpointDataKind(o.ckpt) == "latents") {
    o.clip = false;
    std::printf("hc-run sample: note: %s was trained on VAE latents: x0 predictions are not "
                "clipped (as --no-clip)\n", o.ckpt.c_str());
  }
  const bool guided = guidance.on();
  std::string err;
  SamplingSchedule sched;
  int K = 0;
  if (m.flow) {
    chooseFlowSampler(o, lib, m);
  } else {
    chooseDdpmSampler(o, lib);
    std::vector<int> visited = o.ddimCount ? ddimTimesteps(1000, o.ddimCount, err)
                                           : spaceTimesteps(1000, o.sections, err);
    if (visited.empty())
      usageError("--sampling-steps " + o.steps + ": " + err);
    if (visited.size() < 2)
      usageError("--sampling-steps " + o.steps + " visits one timestep; at least 2 are needed");
    sched = respacedSchedule(visited);
    K = sched.size();
  }

  // Outputs never replace an input (or each other).
  std::vector<NamedPath> outputs, inputs = {{"the sampler library", lib.path},
                                            {"--ckpt", o.ckpt},
                                            {"the initial parameters", lib.initPath("")}};
  for (const CondFlag &c : o.conds)
    inputs.push_back({"--cond " + c.name, c.path});
  if (!o.out.empty())
    outputs.push_back({"--out", o.out});
  if (!o.saveNpy.empty()) {
    outputs.push_back({"--save-npy", o.saveNpy});
    outputs.push_back({"--save-npy's labels", labelsPathFor(o.saveNpy)});
  }
  if (!o.profile.empty())
    outputs.push_back({"--profile", o.profile});
  checkOutputsAgainstInputs(outputs, inputs);
  // As train mode: no output takes a checkpoint's name in the folder the
  // weights come from.
  refuseCheckpointNames(outputs, o.ckpt.substr(0, o.ckpt.find_last_of('/') + 1) + ".",
                        "the folder of --ckpt");

  const int64_t perCall = guided ? m.batch / 2 : m.batch;
  const int64_t N = plan.images;
  const int64_t D = m.channels * m.height * m.width, plane = m.height * m.width;
  if (!o.dumpSteps.empty() && N > perCall)
    usageError("--dump-steps needs every image in one model call (" + std::to_string(N) +
               " images, " + std::to_string(perCall) + " per call)");

  StepContext ctx(lib, comm, false, !o.profile.empty());
  Profiler profiler(o.profile, lib);
  profiler.measureMachine();
  const bool ema = loadWeights(lib, ctx, o.ckpt, o.weights, m.flow ? &m.flowObjective : nullptr);
  const std::string rows = std::to_string(plan.rowLabels.size());
  const std::string what =
      !m.conds.empty() ? rows + " conditions x " + std::to_string(plan.perRow)
      : m.conditional  ? rows + " classes x " + std::to_string(plan.perRow)
                       : std::string("unconditional");
  const std::string how =
      !m.flow ? o.sampler + ", " + std::to_string(K) + " steps of 1000"
      : o.flow.method == FlowMethod::Dopri5
          ? "dopri5 (atol " + number(o.flow.atol) + ", rtol " + number(o.flow.rtol) + ")"
          : o.sampler + ", " + std::to_string(o.flow.steps) + " steps (flow: " +
                m.flowObjective.describe() + ")";
  std::printf("hc-run sample: %lld images (%s) from %s (%s weights), "
              "%s, cfg scale %g, seed %llu, %lld images per call\n",
              static_cast<long long>(N), what.c_str(),
              o.ckpt.c_str(), ema ? "EMA" : "raw", how.c_str(), guidance.scale,
              static_cast<unsigned long long>(o.seed), static_cast<long long>(perCall));
  std::fflush(stdout);

  if (guided && !m.conds.empty()) {
    std::string dropped = guidance.nullLabel ? "y" : "";
    for (std::size_t k = 0; k < m.conds.size(); ++k)
      if (guidance.nullConds[k])
        dropped += (dropped.empty() ? "" : ", ") + m.conds[k].name;
    std::printf("hc-run sample: guidance against the null form of %s\n", dropped.c_str());
  }
  std::vector<float> samples(static_cast<std::size_t>(N * D));
  const bool bar = o.progress == 1 || (o.progress == -1 && isatty(STDERR_FILENO));
  const auto t0 = std::chrono::steady_clock::now();
  auto seconds = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  };
  SamplerInputs feed(lib.desc, m.conds, m.flow, perCall, guided, m.numClasses,
                       guidance.nullLabel, guidance.nullConds, plan.labels, condData,
                       plan.condRow);
  const SampleRun run{lib,      ctx,       feed,           m.batch,      m.channels,
                      m.height, m.width,   plane,          m.outChannels, guided,
                      m.learnSigma, guidance.scale, perCall, N,          o.seed,
                      samples,  bar,       o.dumpSteps,    &profiler};
  const int64_t calls = m.flow ? sampleFlowChunks(run, m.flowObjective, o.flow)
                               : sampleDdpmChunks(run, sched, o.sampler == "ddim", o.clip);
  for (float v : samples)
    if (!std::isfinite(v))
      throw Error(1, "a sample holds a non-finite value; nothing written");

  if (!o.saveNpy.empty()) {
    std::vector<int64_t> shape = {N, m.channels, m.height, m.width};
    writeNpyOrFail(o.saveNpy, "f4", shape, samples.data());
    std::vector<int64_t> labels = plan.labels;
    labels.resize(static_cast<std::size_t>(N), -1);  // -1: no label input
    writeNpyOrFail(labelsPathFor(o.saveNpy), "i8", {N}, labels.data());
    std::printf("samples: %s (labels %s)\n", o.saveNpy.c_str(), labelsPathFor(o.saveNpy).c_str());
  }
  if (!o.out.empty()) {
    // An unconditional grid's last row is filled out with white.
    samples.resize(plan.rowLabels.size() * plan.perRow * D, 1.0f);
    Image grid = labelledGrid(samples.data(), plan.rowLabels, static_cast<int>(plan.perRow),
                              static_cast<int>(m.channels), static_cast<int>(m.height),
                              static_cast<int>(m.width), bands);
    if (!writePng(o.out, grid, err))
      throw Error(1, err);
    std::printf("grid: %s (%d x %d, %s)\n", o.out.c_str(), grid.width, grid.height,
                !m.conds.empty() ? "one row per condition"
                : m.conditional  ? "one row per class"
                                 : "rows of 8");
  }
  profiler.finish(ctx);
  std::printf("done: %lld model calls in %.3f s\n", static_cast<long long>(calls), seconds());
  return 0;
}

} // namespace hcrun
