// Train mode's data: the graph's inputs, the NPY files and the classes
// (train_data.h).
#include "train_data.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iterator>

namespace hcrun {
namespace {

int64_t jsonInt(const nlohmann::json &cfg, const char *key, int64_t dflt) {
  if (cfg.is_object() && cfg.contains(key) && cfg[key].is_number_integer())
    return cfg[key].get<int64_t>();
  return dflt;
}

double jsonNum(const nlohmann::json &cfg, const char *key, double dflt) {
  if (cfg.is_object() && cfg.contains(key) && cfg[key].is_number())
    return cfg[key].get<double>();
  return dflt;
}

// The inputs a DiT training graph has of its own (Plan's slots, in order),
// the keys of its own random draws last.
const char *const kOwnInputs[] = {"x_t",   "t",      "y",
                                  "noise", "x_start", "target",
                                  hc::rt::kRngSeedInput, hc::rt::kRngStepInput,
                                  hc::rt::kSampleOffsetInput};

bool isOwnInput(const std::string &nm) {
  return std::find(std::begin(kOwnInputs), std::end(kOwnInputs), nm) != std::end(kOwnInputs);
}

// The conditionings' dropout: the metadata's, --cond-dropout (checked
// against it), else DiT's 0.1 for a plain export.
double condDropoutOf(const Options &opt, const StepLibrary &lib, const Plan &p) {
  const nlohmann::json &cfg = lib.desc.ditConfig;
  const bool meta = cfg.is_object() && cfg.contains("cond_dropout_prob");
  if (p.conds.empty()) {
    if (opt.condDropout >= 0)
      usageError("--cond-dropout: " + lib.path + " has no conditioning beyond the label");
    return 0;
  }
  if (opt.condDropout >= 0 && meta && jsonNum(cfg, "cond_dropout_prob", -1) != opt.condDropout)
    usageError("--cond-dropout " + nlohmann::json(opt.condDropout).dump() + " contradicts " +
               lib.path + "'s dit_config.cond_dropout_prob " +
               cfg["cond_dropout_prob"].dump());
  return opt.condDropout >= 0 ? opt.condDropout : jsonNum(cfg, "cond_dropout_prob", 0.1);
}

} // namespace

Plan checkData(const Options &opt, const StepLibrary &lib, int R,
               MappedNpy &images, MappedNpy &labels, CondData &conds) {
  const Description &d = lib.desc;
  Plan p;
  int *const slots[] = {&p.xt,     &p.t,       &p.y,       &p.noise,       &p.xStart,
                        &p.target, &p.rngSeed, &p.rngStep, &p.sampleOffset};
  static_assert(std::size(slots) == std::size(kOwnInputs));
  for (std::size_t i = 0; i < d.inputs.size(); ++i)
    for (std::size_t k = 0; k < std::size(kOwnInputs); ++k)
      if (d.inputs[i].name == kOwnInputs[k])
        *slots[k] = static_cast<int>(i);
  // A 'target' input makes a flow objective (export_dit.py --objective flow).
  p.flow = p.target >= 0;
  if (p.flow && (p.noise >= 0 || p.xStart >= 0))
    usageError(lib.path + ": a flow graph (input 'target') takes no '" +
               (p.noise >= 0 ? "noise" : "x_start") + "' input");
  if (p.xt < 0 || p.t < 0 || (!p.flow && p.noise < 0))
    usageError(lib.path + ": train mode needs inputs x_t, t and noise (DDPM) or target "
               "(flow matching)");
  if (p.flow) {
    p.flowObjective = FlowObjective::fromConfig(d.ditConfig, lib.path);
    p.timeSampling = opt.timeSampling;
  } else if (opt.timeSamplingGiven) {
    usageError("--time-sampling/--logit-mean/--logit-std: " + lib.path + " trains DDPM's "
               "integer timesteps, not a flow objective's continuous time");
  }
  const TensorSpec &xs = d.inputs[p.xt];
  if (xs.dtype != "F32" || xs.shape.size() != 4)
    usageError(lib.path + ": input x_t is " + xs.dtype + " " +
               shapeString(xs.shape) + ", expected F32 [B,C,H,W]");
  for (int k : {p.noise, p.xStart, p.target})
    if (k >= 0 && (d.inputs[k].dtype != "F32" || d.inputs[k].shape != xs.shape))
      usageError(lib.path + ": input " + d.inputs[k].name + " must be F32 " +
                 shapeString(xs.shape));
  if (p.flow && (d.inputs[p.t].dtype != "F32" || d.inputs[p.t].shape.size() != 1))
    usageError(lib.path + ": input t is " + d.inputs[p.t].dtype + " " +
               shapeString(d.inputs[p.t].shape) + ", a flow model's time is F32 [B]");
  for (int k : {p.t, p.y}) {
    if (k < 0 || (p.flow && k == p.t))
      continue;
    const TensorSpec &s = d.inputs[k];
    if ((s.dtype != "I64" && s.dtype != "I32") || s.shape.size() != 1)
      usageError(lib.path + ": input " + s.name + " is " + s.dtype + " " +
                 shapeString(s.shape) + ", expected I64 [B]");
  }
  p.chw.assign(xs.shape.begin() + 1, xs.shape.end());
  p.sampleElems = xs.numElements() / xs.shape[0];
  p.conds = condInputsOf(d, lib.path, xs.shape, isOwnInput,
                         "x_t, t, y, noise, x_start, target and the random draws' keys "
                         "(train mode needs a DiT training graph; --inputs feeds others)");
  for (CondInput &c : p.conds)
    c.graphDrops = d.graphDrops(c.name);
  p.condDropProb = condDropoutOf(opt, lib, p);

  images.open(opt.data);
  const auto &h = images.header();
  if (h.dtype != "f4" || h.shape.size() != 4 ||
      !std::equal(p.chw.begin(), p.chw.end(), h.shape.begin() + 1))
    usageError(opt.data + ": " + h.dtype + " " + shapeString(h.shape) +
               ", the model trains on float32 [N," +
               shapeString(p.chw).substr(1));
  p.n = h.shape[0];
  {
    // Pixels in [0, 255] train, badly: DiT wants [-1, 1] (or latents).
    const float *v = reinterpret_cast<const float *>(images.data());
    const std::size_t look = std::min<std::size_t>(static_cast<std::size_t>(p.n), 64) *
                             static_cast<std::size_t>(p.sampleElems);
    for (std::size_t i = 0; i < look; ++i)
      if (std::isfinite(v[i]))
        p.dataMaxAbs = std::max(p.dataMaxAbs, static_cast<double>(std::fabs(v[i])));
  }
  const int64_t G = R * d.batchPerRank * opt.accumulate;
  if (p.n < G)
    usageError(opt.data + ": " + std::to_string(p.n) + " samples are fewer "
               "than one global batch of " + std::to_string(G) + " (" +
               std::to_string(R) + " ranks x " +
               std::to_string(d.batchPerRank) +
               (opt.accumulate > 1 ? " x " + std::to_string(opt.accumulate) + " micro-batches"
                                   : std::string()) + ")");

  // Classes: from the label table the graph gathers y from, DiT's
  // LabelEmbedder (`*embedding_table.weight`, [rows, hidden]); export_dit.py's
  // dit_config, when present, must agree with it. The table has a null row
  // (index num_classes, for unlabelled and dropped samples) only when the
  // model was built with class dropout, so rows = num_classes + (p > 0).
  const nlohmann::json &cfg = d.ditConfig;
  p.numClasses = jsonInt(cfg, "num_classes", -1);
  double cdp = jsonNum(cfg, "class_dropout_prob", 0.0);
  // --num-classes / --class-dropout say what a plain export's metadata
  // would; where the metadata exists it must agree.
  const bool metaCdp = cfg.is_object() && cfg.contains("class_dropout_prob");
  if (opt.classDropout >= 0 && d.graphDrops("y"))
    usageError("--class-dropout: " + lib.path + " drops its labels itself (a random draw in "
               "the graph, whose probability the graph fixes); hc-run drops none of them");
  if (opt.numClasses > 0 || opt.classDropout >= 0) {
    if (p.y < 0)
      usageError(std::string(opt.numClasses > 0 ? "--num-classes" : "--class-dropout") + ": " +
                 lib.path + " is unconditional (no label input y)");
    if (opt.numClasses > 0 && p.numClasses >= 1 && p.numClasses != opt.numClasses)
      usageError("--num-classes " + std::to_string(opt.numClasses) + " contradicts " +
                 lib.path + "'s dit_config.num_classes " + std::to_string(p.numClasses));
    if (opt.classDropout >= 0 && metaCdp && cdp != opt.classDropout)
      usageError("--class-dropout " + nlohmann::json(opt.classDropout).dump() +
                 " contradicts " + lib.path + "'s dit_config.class_dropout_prob " +
                 nlohmann::json(cdp).dump());
    const TensorSpec *t = d.labelTable();
    if (opt.numClasses > 0)
      p.numClasses = opt.numClasses;
    if (opt.classDropout >= 0)
      cdp = opt.classDropout;
    else if (!metaCdp && t)  // --num-classes alone: a null row says dropout was on
      cdp = t->shape[0] == p.numClasses + 1 ? 0.1 : 0.0;
    if (p.numClasses < 1 && t)
      p.numClasses = t->shape[0] - (cdp > 0 ? 1 : 0);
    if (opt.classDropout < 0 && !metaCdp && cdp > 0)
      std::printf("hc-run: note: %s's label table has a null row past --num-classes %lld: "
                  "training drops labels with DiT's 0.1 (--class-dropout P to choose)\n",
                  lib.path.c_str(), static_cast<long long>(p.numClasses));
  }
  const TensorSpec *table = d.labelTable();
  const std::string suffix = Description::kLabelTableSuffix;
  if (p.y >= 0 && p.numClasses >= 1 && table &&
      table->shape[0] != p.numClasses + (cdp > 0 ? 1 : 0))
    usageError(lib.path + ": " + std::to_string(p.numClasses) + " classes" +
               (cdp > 0 ? " and a null class (class dropout " + nlohmann::json(cdp).dump() + ")"
                        : std::string(" without a null class (class dropout 0)")) +
               " need a label table of " + std::to_string(p.numClasses + (cdp > 0 ? 1 : 0)) +
               " rows, but " + table->name + " has " + std::to_string(table->shape[0]) +
               " rows" +
               (opt.numClasses > 0 || opt.classDropout >= 0 ? " (check --num-classes and "
                                                              "--class-dropout)"
                                                            : " (dit_config)"));
  if (p.y >= 0 && p.numClasses < 1) {
    // A plain export (no hc metadata): everything from the table.
    if (!table)
      usageError(lib.path + ": no dit_config.num_classes and no single label "
                 "table (a [rows, hidden] parameter named *" + suffix +
                 ") to infer it from");
    const int64_t rows = table->shape[0];
    if (d.graphDrops("y")) {
      // The graph drops labels itself, to its own null row: the last.
      if (rows < 2)
        usageError(lib.path + ": the graph drops labels but its label table " +
                   table->name + " has " + std::to_string(rows) + " row");
      p.numClasses = rows - 1;
    } else {
      // Whether the last row is a null class or a real one cannot be told
      // without the metadata. hc-run drops no labels then (no probability
      // to use), so with --labels it never matters: every row is a class.
      if (opt.labels.empty())
        usageError(lib.path + ": no dit_config: cannot tell whether row " +
                   std::to_string(rows - 1) + " of " + table->name +
                   " is a null class; pass --labels");
      p.numClasses = rows;
    }
    cdp = 0;
    p.nullClass = rows - 1;
  } else {
    // Without class dropout DiT's table has no null row: unlabelled
    // training (and guidance later) is impossible.
    if (p.y >= 0 && cdp <= 0 && opt.labels.empty() && !d.graphDrops("y"))
      usageError(lib.path + ": the model has no null class (dit_config."
                 "class_dropout_prob 0, so no null row in its label table) "
                 "for unlabelled samples; pass --labels");
    p.nullClass = cdp > 0 ? p.numClasses : 0;
  }
  p.dropProb = (cdp > 0 && !d.graphDrops("y")) ? cdp : 0.0;
  if (!opt.labels.empty()) {
    if (p.y < 0)
      usageError("--labels given, but " + lib.path + " has no label input y");
    labels.open(opt.labels);
    const auto &lh = labels.header();
    if ((lh.dtype != "i8" && lh.dtype != "i4" && lh.dtype != "u1") ||
        lh.shape.size() != 1 || lh.shape[0] != p.n)
      usageError(opt.labels + ": " + lh.dtype + " " + shapeString(lh.shape) +
                 ", expected integer [" + std::to_string(p.n) + "]");
    for (int64_t i = 0; i < p.n; ++i) {
      int64_t v = labelAt(labels, i);
      if (v < 0 || v >= p.numClasses)
        usageError(opt.labels + ": label " + std::to_string(v) + " at row " +
                   std::to_string(i) + " is outside 0.." +
                   std::to_string(p.numClasses - 1) + " (num_classes " +
                   std::to_string(p.numClasses) + ")");
    }
  }
  conds.open(opt.conds, p.conds, p.n, "--cond", "--data " + opt.data, lib.path);
  return p;
}

} // namespace hcrun
