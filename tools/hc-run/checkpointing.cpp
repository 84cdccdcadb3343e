// Train-mode checkpoints and EMA (see checkpointing.h).
#include "checkpointing.h"
#include "data.h"

#include "hc/runtime/checkpoint.h"
#include "hc/base/files.h"
#include "hc/runtime/hcrt.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <iterator>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

namespace hcrun {
namespace {
using json = nlohmann::json;

// 2: the checksum covers the metadata too (runtime/src/formats/checkpoint.cpp).
constexpr const char *kCheckpointVersion = "2";

json specsJson(const std::vector<TensorSpec> &specs) {
  json out = json::array();
  for (const auto &s : specs)
    out.push_back({{"name", s.name}, {"dtype", s.dtype}, {"shape", s.shape},
                   {"trainable", s.trainable}});
  return out;
}

// The first difference between two modelIdentity() texts, in words.
std::string modelDifference(const std::string &ckptText,
                            const std::string &mineText,
                            const std::string &lib) {
  json ck, mine;
  try {
    ck = json::parse(ckptText);
    mine = json::parse(mineText);
  } catch (const json::exception &) {
    return "its hc.model metadata is malformed";
  }
  for (const char *key : {"parameters", "state"}) {
    const char *what = key[0] == 'p' ? "parameter" : "optimizer state";
    std::map<std::string, json> inCk;
    for (const auto &e : ck.value(key, json::array()))
      inCk[e.value("name", "")] = e;
    for (const auto &e : mine.value(key, json::array())) {
      std::string n = e.value("name", "");
      auto it = inCk.find(n);
      if (it == inCk.end())
        return std::string(what) + " '" + n + "' of " + lib +
               " is not in the checkpoint";
      if (it->second != e)
        return std::string(what) + " '" + n + "' is " + it->second.dump() +
               " in the checkpoint, " + e.dump() + " in " + lib;
      inCk.erase(it);
    }
    if (!inCk.empty())
      return "the checkpoint has " + std::string(what) + " '" +
             inCk.begin()->first + "', " + lib + " does not";
  }
  if (ck.value("optimizer", json()) != mine.value("optimizer", json()))
    return "optimizer " + ck.value("optimizer", json()).dump() +
           " in the checkpoint, " + mine.value("optimizer", json()).dump() +
           " in " + lib;
  json a = ck.value("dit_config", json::object()),
       b = mine.value("dit_config", json::object());
  for (auto it = b.begin(); it != b.end(); ++it)
    if (!a.contains(it.key()) || a[it.key()] != it.value())
      return "dit_config." + it.key() + " is " +
             (a.contains(it.key()) ? a[it.key()].dump() : "absent") +
             " in the checkpoint, " + it.value().dump() + " in " + lib;
  return "dit_config differs: " + a.dump() + " in the checkpoint, " + b.dump() +
         " in " + lib;
}

int64_t metaInt(const hc::rt::SafetensorsFile &f, const std::string &value,
                const char *key) {
  errno = 0;
  char *end = nullptr;
  long long x = std::strtoll(value.c_str(), &end, 10);
  if (value.empty() || *end != '\0' || errno != 0 || x < 0)
    usageError(f.path() + ": metadata " + key + " is not a non-negative "
               "integer: '" + value + "'");
  return x;
}

std::string decayText(double d) {
  if (d < 0)
    return "none";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.17g", d);
  return buf;
}
} // namespace

std::string objectiveText(const Description &d) {
  const std::string objective = d.ditConfig.is_object()
                                    ? d.ditConfig.value("objective", std::string())
                                    : std::string();
  if (d.input("target"))
    return "flow: " + FlowObjective::fromConfig(d.ditConfig, "the description").describe();
  return objective.empty() ? std::string("mse") : objective;
}

std::string timeSamplingText(const StepLibrary &lib, const Options &opt) {
  return lib.desc.input("target") ? opt.timeSampling.text()
                                  : std::string("ddpm: integer t uniform in [0, 1000)");
}

std::string modelIdentity(const Description &d) {
  json j;
  j["parameters"] = specsJson(d.parameters);
  j["state"] = specsJson(d.state);
  const json &opt = d.raw.value("optimizer", json::object());
  j["optimizer"] = opt.is_object() ? opt.value("name", json()) : json();
  json dit = d.ditConfig.is_object() ? d.ditConfig : json::object();
  for (const char *exportDetail : {"init", "seed", "opset"})
    dit.erase(exportDetail);
  j["dit_config"] = dit;
  return j.dump();
}

// ------------------------------------------------------------------- EMA
void Ema::allocate(const Description &d) {
  offsets_.clear();
  std::size_t n = 0, largest = 0;
  for (const auto &p : d.parameters) {
    if (p.dtype != "F32")
      usageError("--ema: parameter '" + p.name + "' is " + p.dtype +
                 ", the EMA is kept for F32 parameters only");
    offsets_.push_back(n);
    n += p.numElements();
    largest = std::max(largest, p.numElements());
  }
  values_.assign(n, 0.f);
  scratch_.assign(largest, 0.f);
}

void Ema::initFromParameters(const StepLibrary &lib, StepContext &ctx) {
  allocate(lib.desc);
  for (std::size_t i = 0; i < lib.desc.parameters.size(); ++i) {
    const TensorSpec &p = lib.desc.parameters[i];
    if (lib.api->get_tensor(ctx.handle(), p.name.c_str(), of(i), p.bytes()) != 0)
      throw Error(1, lib.path + ": cannot read parameter '" + p.name + "'");
  }
}

void Ema::update(const StepLibrary &lib, StepContext &ctx) {
  // As DiT's update_ema in float32: ema.mul_(decay).add_(param, alpha=1-decay).
  const float d = static_cast<float>(decay);
  const float a = static_cast<float>(1.0 - decay);
  for (std::size_t i = 0; i < lib.desc.parameters.size(); ++i) {
    const TensorSpec &p = lib.desc.parameters[i];
    if (lib.api->get_tensor(ctx.handle(), p.name.c_str(), scratch_.data(),
                            p.bytes()) != 0)
      throw Error(1, lib.path + ": cannot read parameter '" + p.name + "'");
    float *e = of(i);
    const float *x = scratch_.data();
    for (std::size_t k = 0, n = p.numElements(); k < n; ++k) {
      float kept = e[k] * d;
      float added = a * x[k];
      e[k] = kept + added;
    }
  }
}

// ---------------------------------------------------------- checkpoints
void Checkpointer::lockFolder(const std::string &dir) {
  const std::string path = dir + "/" + kLockFile;
  // Never through a link: a planted one would truncate its target.
  std::string err;
  int fd = hc::rt::openNoFollow(path, O_RDWR | O_CREAT, err);
  if (fd < 0)
    usageError("--ckpt-dir " + dir + ": the lock file " + err);
  if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
    const int e = errno;
    char holder[256] = {0};
    ssize_t n = pread(fd, holder, sizeof holder - 1, 0);
    std::string who = n > 0 ? std::string(holder, static_cast<std::size_t>(n)) : "";
    while (!who.empty() && (who.back() == '\n' || who.back() == ' '))
      who.pop_back();
    ::close(fd);
    if (e == EWOULDBLOCK)
      usageError("--ckpt-dir " + dir + " is in use by another hc-run (" +
                 (who.empty() ? std::string("holder unknown") : who) +
                 "): two runs would overwrite each other's checkpoints; wait "
                 "for it to end or give another folder");
    usageError("--ckpt-dir " + dir + ": cannot lock " + path + ": " +
               std::strerror(e) + (e == ENOLCK ? " (a network file system "
               "without a lock service: see tools/hc-run/README.md)" : ""));
  }
  char host[256] = "unknown";
  gethostname(host, sizeof host - 1);
  std::string me = "host " + std::string(host) + ", pid " +
                   std::to_string(getpid()) + "\n";
  if (ftruncate(fd, 0) != 0 ||
      pwrite(fd, me.data(), me.size(), 0) != static_cast<ssize_t>(me.size()))
    usageError("--ckpt-dir " + dir + ": cannot write the lock file " + path +
               ": " + std::strerror(errno));
  lockFd_ = fd; // held until the process ends, however it ends
}

void Checkpointer::prepare(const DataIdentity &data) {
  data_ = data;
  const std::string &dir = opt_.ckptDir;
  struct stat st;
  if (stat(dir.c_str(), &st) != 0) {
    if (mkdir(dir.c_str(), 0777) != 0)
      usageError("--ckpt-dir " + dir + ": cannot create: " + std::strerror(errno));
  } else if (!S_ISDIR(st.st_mode)) {
    usageError("--ckpt-dir " + dir + ": not a folder");
  }
  if (access(dir.c_str(), W_OK) != 0)
    usageError("--ckpt-dir " + dir + ": not writable");
  lockFolder(dir);
  if (int n = hc::rt::removeStaleCheckpointTemporaries(dir))
    std::printf("hc-run: removed %d unfinished checkpoint file(s) from %s "
                "(left by a crashed write)\n", n, dir.c_str());
  std::vector<hc::rt::CheckpointFile> all;
  std::string err;
  if (!hc::rt::listCheckpoints(dir, all, err))
    usageError(err);
  if (!opt_.resume) {
    if (!all.empty())
      usageError("--ckpt-dir " + dir + " holds checkpoints (newest: step " +
                 std::to_string(all.back().step) + "): add --resume to "
                 "continue from it, or give an empty folder");
    return;
  }
  if (all.empty()) {
    std::printf("hc-run: --resume: no checkpoint in %s, starting at step 0\n",
                dir.c_str());
    return;
  }
  // The stored step, not the file name, says which checkpoint is newest: a
  // copied or renamed file whose name disagrees is refused, not trusted.
  for (const auto &c : all) {
    hc::rt::SafetensorsFile f;
    if (!f.open(c.path, err))
      usageError(err + " (move it out of " + dir + " to resume)");
    auto it = f.metadata().find("hc.step");
    if (it == f.metadata().end())
      usageError(c.path + ": not an hc-run checkpoint (no metadata hc.step); "
                 "move it out of " + dir + " to resume");
    if (metaInt(f, it->second, "hc.step") != c.step)
      usageError(c.path + ": its name says step " + std::to_string(c.step) +
                 ", but it holds step " + it->second + " (a renamed or copied "
                 "file?); move it out of " + dir + " to resume");
  }
  const std::string &path = all.back().path;
  if (!hc::rt::openCheckpoint(path, file_, err))
    usageError(err + " (move it away to resume from an older checkpoint)");
  checkAgainstRun(file_);
  std::printf("hc-run: resuming from %s (step %lld)\n", path.c_str(),
              static_cast<long long>(picked_.step));
}

void Checkpointer::checkAgainstRun(const hc::rt::SafetensorsFile &f) {
  const auto &md = f.metadata();
  const std::string &path = f.path();
  auto get = [&](const char *key) -> const std::string & {
    auto it = md.find(key);
    if (it == md.end())
      usageError(path + ": not an hc-run checkpoint (no metadata " + key + ")");
    return it->second;
  };
  const std::string version = get("hc.checkpoint_version");
  if (version != kCheckpointVersion)
    usageError(path + ": checkpoint format version " + version +
               ", this hc-run reads version " + kCheckpointVersion);
  // Step ABI 5 only added hyperparameters, 6 changed a runtime op's
  // operand order, 7 the step program's table, 8 let activations be
  // bf16 (never parameters or moments), 9 made calls conditional and 10
  // described the arenas for messages: version 4's to 9's tensors and
  // metadata mean the same, so their checkpoints resume.
  const std::string abi = get("hc.step_abi");
  static const std::string kResumable[] = {"4", "5", "6", "7", "8", "9"};
  if (abi != std::to_string(HC_STEP_ABI_VERSION) &&
      std::find(std::begin(kResumable), std::end(kResumable), abi) == std::end(kResumable))
    usageError(path + ": written for step ABI version " + abi + ", " +
               lib_.path + " and this hc-run use version " +
               std::to_string(HC_STEP_ABI_VERSION));
  const std::string mine = modelIdentity(lib_.desc);
  if (get("hc.model") != mine)
    usageError(path + ": a checkpoint of another model: " +
               modelDifference(get("hc.model"), mine, lib_.path));
  const Description &d = lib_.desc;
  int64_t gb = metaInt(f, get("hc.global_batch"), "hc.global_batch");
  if (gb != data_.globalBatch)
    usageError(path + ": trained with global batch " + std::to_string(gb) +
               ", this run has " + std::to_string(data_.globalBatch) + " (" +
               std::to_string(comm_.size()) + " rank(s) x " +
               std::to_string(d.batchPerRank) + "); resuming would change "
               "the data order");
  // The data itself: a resume on other data (another file, an edited one,
  // other labels, or none) is refused unless the user says so, which the
  // checkpoints then record.
  const int64_t step0 = metaInt(f, get("hc.step"), "hc.step");
  std::string changed;
  int64_t n = metaInt(f, get("hc.dataset_samples"), "hc.dataset_samples");
  if (n != data_.samples)
    changed = "it was trained on " + std::to_string(n) + " samples, --data " +
              data_.data + " has " + std::to_string(data_.samples);
  auto stored = [&](const char *key) {
    auto it = md.find(key);
    return it == md.end() ? std::string() : it->second;
  };
  const std::string ckData = stored("hc.data_identity"),
                    ckLabels = stored("hc.labels_identity"),
                    ckLabelsPath = stored("hc.labels");
  if (changed.empty() && !ckData.empty() && ckData != data_.dataId)
    changed = "--data " + data_.data + " is not the data it was trained on (" +
              stored("hc.data") + ", content " + ckData + "; now " +
              data_.dataId + ")";
  if (changed.empty() && !ckLabelsPath.empty() && data_.labels.empty())
    changed = "it was trained with --labels " + ckLabelsPath + " (class-"
              "conditional), this run has none: every sample would train as "
              "the null class";
  if (changed.empty() && ckLabelsPath.empty() && !data_.labels.empty())
    changed = "it was trained without labels, this run has --labels " +
              data_.labels;
  if (changed.empty() && !ckLabels.empty() && ckLabels != "none" &&
      ckLabels != data_.labelsId)
    changed = "--labels " + data_.labels + " are not the labels it was trained "
              "on (" + ckLabelsPath + ", content " + ckLabels + "; now " +
              data_.labelsId + ")";
  // Conditionings: checkpoints from before --cond trained none.
  const std::string ckConds = md.count("hc.conds_identity") ? stored("hc.conds_identity")
                                                            : std::string("none");
  if (changed.empty() && ckConds != data_.condsId)
    changed = "--cond " + (data_.conds.empty() ? std::string("(none)") : data_.conds) +
              " is not the conditioning it was trained on (" +
              (stored("hc.conds").empty() ? std::string("none") : stored("hc.conds")) +
              ", content " + ckConds + "; now " + data_.condsId + ")";
  dataChangedAt_ = stored("hc.data_changed_at");
  // A schedule may change on resume (a longer run, a new peak): noted.
  if (md.count("hc.lr_schedule") && md.at("hc.lr_schedule") != scheduleText())
    std::printf("hc-run: note: the learning-rate schedule changes at step %lld: "
                "was %s, now %s\n", static_cast<long long>(step0),
                md.at("hc.lr_schedule").c_str(), scheduleText().c_str());
  if (!changed.empty()) {
    if (!opt_.allowDataChange)
      usageError(path + ": " + changed + "; pass --allow-data-change to "
                 "continue on this data (it is recorded in the checkpoints)");
    std::printf("hc-run: note: --allow-data-change: %s; recorded at step %lld\n",
                changed.c_str(), static_cast<long long>(step0));
    dataChangedAt_ += (dataChangedAt_.empty() ? "" : ",") + std::to_string(step0);
  }
  uint64_t seed = static_cast<uint64_t>(metaInt(f, get("hc.seed"), "hc.seed"));
  if (opt_.seedSeen && seed != opt_.seed)
    usageError("--seed " + std::to_string(opt_.seed) + " differs from the seed " +
               std::to_string(seed) + " of " + path +
               " (noise and data order would change; omit --seed)");
  // Checkpoints from before --hflip have no hc.augment: they trained
  // without it.
  const std::string augment = md.count("hc.augment")
                                  ? md.at("hc.augment")
                                  : std::string("none");
  if (augment != (opt_.hflip ? "hflip" : "none"))
    usageError(std::string(opt_.hflip ? "--hflip given, but " : "--hflip missing: ") +
               path + " was trained with augmentation '" + augment +
               "' (resume with the same augmentation)");
  // The time distribution is part of what is trained (checkpoints from
  // before flow objectives trained DDPM's integer timesteps).
  const std::string timeNow = timeSamplingText(lib_, opt_);
  const std::string timeThen =
      md.count("hc.time_sampling") ? md.at("hc.time_sampling") : timeSamplingText(lib_, Options());
  if (timeThen != timeNow)
    usageError(path + " was trained with time sampling '" + timeThen + "', this run draws '" +
               timeNow + "' (resume with the same --time-sampling, --logit-mean, --logit-std)");
  const std::string emaText = get("hc.ema_decay");
  double ema = emaText == "none" ? -1 : std::strtod(emaText.c_str(), nullptr);
  if (opt_.emaDecay >= 0 && ema < 0)
    usageError("--ema given, but " + path + " was trained without --ema");
  if (opt_.emaDecay >= 0 && opt_.emaDecay != ema)
    usageError("--ema " + decayText(opt_.emaDecay) + " differs from the decay " +
               emaText + " of " + path);
  int64_t step = metaInt(f, get("hc.step"), "hc.step");
  if (step > opt_.steps)
    usageError(path + ": at step " + std::to_string(step) + ", past --steps " +
               std::to_string(opt_.steps));
  auto need = [&](const std::string &name, const TensorSpec &spec) {
    const auto *e = f.find(name);
    if (!e || canonicalDtype(e->dtype) != spec.dtype || e->shape != spec.shape)
      usageError(path + ": tensor '" + name + "' is " +
                 (e ? e->dtype + " " + shapeString(e->shape) : "missing") +
                 ", expected " + spec.dtype + " " + shapeString(spec.shape));
  };
  for (const auto &p : d.parameters) {
    need(p.name, p);
    if (ema >= 0)
      need("ema:" + p.name, p);
  }
  for (const auto &s : d.state)
    need(s.name, s);
  std::string optNow = d.raw.value("optimizer", json()).dump();
  if (md.count("hc.optimizer") && md.at("hc.optimizer") != optNow)
    std::printf("hc-run: note: optimizer settings differ from the checkpoint's: "
                "%s now, %s then\n", optNow.c_str(), md.at("hc.optimizer").c_str());
  if (md.count("hc.ranks") && md.at("hc.ranks") != std::to_string(comm_.size()))
    std::printf("hc-run: note: resuming on %d rank(s); the checkpoint was "
                "written by %s (same global batch)\n", comm_.size(),
                md.at("hc.ranks").c_str());
  picked_ = {step, seed, ema};
}

int64_t Checkpointer::restore(StepContext &ctx, Ema &ema, uint64_t &seed) {
  struct {
    int64_t step;
    uint64_t seed;
    double emaDecay;
  } info{0, opt_.seed, opt_.emaDecay};
  if (comm_.rank() == 0 && picked_.step > 0)
    info = {picked_.step, picked_.seed, picked_.emaDecay};
  if (comm_.size() > 1 && !comm_.broadcast(&info, sizeof info, 0))
    comm_.fail(1, "collective failed while starting from a checkpoint");
  seed = info.seed;
  ema.decay = info.emaDecay;
  const Description &d = lib_.desc;
  if (info.step > 0) {
    // Rank 0 read the file; every rank sets the same bytes.
    std::vector<const TensorSpec *> specs;
    for (const auto &p : d.parameters)
      specs.push_back(&p);
    for (const auto &s : d.state)
      specs.push_back(&s);
    std::vector<char> buf;
    for (const TensorSpec *s : specs) {
      buf.resize(s->bytes());
      if (comm_.rank() == 0) {
        const hc::rt::SafetensorsEntry &e = *file_.find(s->name);
        std::memcpy(buf.data(), file_.data(e), buf.size());
        file_.release(e);  // one tensor of the checkpoint resident at a time
      }
      if (comm_.size() > 1 && !comm_.broadcast(buf.data(), buf.size(), 0))
        comm_.fail(1, "collective failed while broadcasting the checkpoint");
      if (lib_.api->set_tensor(ctx.handle(), s->name.c_str(), buf.data(),
                               buf.size()) != 0)
        comm_.fail(1, lib_.path + " refused tensor '" + s->name +
                          "' of the checkpoint");
    }
  }
  if (comm_.rank() != 0 || !ema.on())
    return info.step;
  if (info.step == 0) {
    ema.initFromParameters(lib_, ctx);
    return 0;
  }
  ema.allocate(d);
  for (std::size_t i = 0; i < d.parameters.size(); ++i) {
    const hc::rt::SafetensorsEntry &e = *file_.find("ema:" + d.parameters[i].name);
    std::memcpy(ema.of(i), file_.data(e), d.parameters[i].bytes());
    file_.release(e);
  }
  return info.step;
}

std::string Checkpointer::scheduleText() const {
  std::string text;
  if (schedule_.given()) {
    text = schedule_.describe();
  } else {
    auto it = lib_.desc.hyperparameters.find("lr");
    text = it == lib_.desc.hyperparameters.end()
               ? std::string("the graph's (ONNX Adam)")
               : "compiled lr=" + nlohmann::json(it->second).dump();
  }
  if (schedule_.weightDecay >= 0)
    text += " weight_decay=" + nlohmann::json(schedule_.weightDecay).dump();
  if (schedule_.clipGradNorm >= 0)
    text += " clip_grad_norm=" + nlohmann::json(schedule_.clipGradNorm).dump();
  return text;
}

bool Checkpointer::due(int64_t done) const {
  return on() && (done == opt_.steps ||
                  (opt_.ckptEvery > 0 && done % opt_.ckptEvery == 0));
}

std::map<std::string, std::string>
Checkpointer::metadata(const Ema &ema, int64_t step, uint64_t seed) const {
  const Description &d = lib_.desc;
  const int64_t perEpoch = data_.samples / data_.globalBatch;
  return {
      {"format", "pt"},
      {"producer", std::string("hc-run (runtime ") + hcrt_version_string() + ")"},
      {"hc.checkpoint_version", kCheckpointVersion},
      {"hc.step_abi", std::to_string(HC_STEP_ABI_VERSION)},
      {"hc.model", modelIdentity(d)},
      {"hc.description", d.raw.dump()},
      {"hc.optimizer", d.raw.value("optimizer", json()).dump()},
      {"hc.step", std::to_string(step)},
      {"hc.seed", std::to_string(seed)},
      {"hc.global_batch", std::to_string(data_.globalBatch)},
      {"hc.ranks", std::to_string(comm_.size())},
      {"hc.batch_per_rank", std::to_string(d.batchPerRank)},
      {"hc.dataset_samples", std::to_string(data_.samples)},
      {"hc.data", data_.data},
      {"hc.labels", data_.labels},
      {"hc.data_identity", data_.dataId},
      {"hc.labels_identity", data_.labels.empty() ? "none" : data_.labelsId},
      {"hc.conds", data_.conds},
      {"hc.conds_identity", data_.condsId},
      {"hc.data_changed_at", dataChangedAt_},
      {"hc.epoch", std::to_string(perEpoch > 0 ? step / perEpoch : 0)},
      {"hc.ema_decay", decayText(ema.on() ? ema.decay : -1)},
      {"hc.augment", opt_.hflip ? "hflip" : "none"},
      {"hc.objective", objectiveText(d)},
      {"hc.data_kind", dataKindOf(opt_.data)},
      {"hc.time_sampling", timeSamplingText(lib_, opt_)},
      {"hc.lr_schedule", scheduleText()},
      {"hc.rng", "philox4x32-10 keyed by (seed, step, global sample, draw "
                 "kind); no other random state"},
      {"hc.data_order", "per epoch a Philox(seed, epoch) permutation of the "
                        "samples, incomplete last batch dropped"},
  };
}

void Checkpointer::write(StepContext &ctx, const Ema &ema, int64_t step,
                         uint64_t seed) {
  const auto start = std::chrono::steady_clock::now();
  const Description &d = lib_.desc;
  std::vector<TensorSpec> specs = d.parameters;
  specs.insert(specs.end(), d.state.begin(), d.state.end());
  std::size_t total = 0;
  for (const auto &s : specs)
    total += s.bytes();
  std::vector<char> buf(total);
  std::vector<hc::rt::SafetensorsTensorRef> refs;
  std::size_t off = 0;
  for (std::size_t i = 0; i < specs.size(); ++i) {
    const TensorSpec &s = specs[i];
    if (lib_.api->get_tensor(ctx.handle(), s.name.c_str(), buf.data() + off,
                             s.bytes()) != 0)
      throw Error(1, lib_.path + ": cannot read tensor '" + s.name + "'");
    requireFinite(i < d.parameters.size() ? "parameter" : "optimizer state",
                  s.name, s.dtype, buf.data() + off, s.numElements(), step);
    refs.push_back({s.name, s.dtype, s.shape, buf.data() + off});
    off += s.bytes();
    // DiT's checkpoint order: model, ema, optimizer.
    if (ema.on() && i + 1 == d.parameters.size())
      for (std::size_t k = 0; k < d.parameters.size(); ++k) {
        requireFinite("EMA of parameter", d.parameters[k].name, "F32", ema.of(k),
                      d.parameters[k].numElements(), step);
        refs.push_back({"ema:" + d.parameters[k].name, "F32",
                        d.parameters[k].shape, ema.of(k)});
      }
  }
  std::string err;
  if (!hc::rt::writeCheckpoint(opt_.ckptDir, step, refs,
                               metadata(ema, step, seed),
                               static_cast<int>(opt_.ckptKeep), err))
    throw Error(1, "checkpoint: " + err);
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() -
                                              start).count();
  struct stat st;
  std::string path = hc::rt::checkpointPath(opt_.ckptDir, step);
  double mb = stat(path.c_str(), &st) == 0 ? st.st_size / 1e6 : 0;
  std::printf("hc-run: checkpoint %s (%.1f MB, %.2f s)\n", path.c_str(), mb,
              secs);
  std::fflush(stdout);
}

} // namespace hcrun
