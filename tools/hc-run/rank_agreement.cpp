// Ranks agree before step 1 (see rank_agreement.h).
#include "rank_agreement.h"

#include "hc/base/files.h"
#include "hc/runtime/hcrt.h"
#include "hc/runtime/kernels.h"

#include <cstdio>

namespace hcrun {
namespace {
using json = nlohmann::ordered_json;

std::string identityOf(const std::string &flag, const std::string &path) {
  std::string id, err;
  if (!hc::rt::sampledIdentity(path, id, err))
    usageError(flag + " " + err);
  return id;
}

std::string number(double x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.17g", x);
  return buf;
}

// Field name -> value, in the order a difference is reported: the specific
// fields first, so a bf16 library is called "precision", not "library".
json fieldsOf(const Options &opt, const StepLibrary &lib, const DataFiles &files) {
  const Description &d = lib.desc;
  uint64_t libHash = 0;
  std::string err;
  if (!hc::rt::hashFile(lib.path, libHash, err))
    usageError(err);
  std::string signals;
  for (int s : opt.preemption.signals)
    signals += (signals.empty() ? "" : ",") + signalName(s);
  json f;
  f["hc-run version"] = hcrt_version_string();
  f["--steps"] = std::to_string(opt.steps);
  f["--log-every"] = std::to_string(opt.logEvery);
  f["the library's batch per rank"] = std::to_string(d.batchPerRank);
  f["the library's precision"] = d.raw.value("precision", json()).dump();
  f["the library's optimizer"] = d.raw.value("optimizer", json()).dump();
  f["the library's initial parameters"] = d.initHash;
  f["--init (the initial parameters loaded)"] =
      identityOf("--init", lib.initPath(opt.init));
  f["--seed"] = std::to_string(opt.seed);  // 0 when not given
  f["--data (content)"] = files.data;
  f["--labels (content)"] = files.labels;
  f["--cond (content)"] = files.conds;
  f["--cond-dropout"] = number(opt.condDropout);
  f["--hflip"] = opt.hflip ? "on" : "off";
  f["--accumulate"] = std::to_string(opt.accumulate);
  // Where the library is bf16: the GEMM path this rank's CPU chose (each
  // rounds its sums differently; ranks must run the same arithmetic).
  if (d.raw.value("precision", std::string()) == "bf16")
    f["the bf16 GEMM path"] = hcrt_bf16_path_name(hcrt_bf16_path());
  f["--num-classes"] = std::to_string(opt.numClasses);
  f["--class-dropout"] = number(opt.classDropout);
  f["--val-data (content)"] = opt.valData.empty() ? "none" : identityOf("--val-data", opt.valData);
  f["--val-labels (content)"] =
      opt.valLabels.empty() ? "none" : identityOf("--val-labels", opt.valLabels);
  f["--val-cond (content)"] = joinCondFlags(
      opt.valConds,
      [](const CondFlag &c) { return identityOf("--val-cond " + c.name + "=", c.path); },
      "none");
  f["--val-every"] = std::to_string(opt.valEvery);
  // The step's hyperparameters: the schedule, decay and clipping.
  {
    LrSchedule sc = opt.schedule;
    f["the learning-rate flags"] = sc.describe() + " given=" + (sc.given() ? "yes" : "no") +
                                   " decay_steps=" + std::to_string(sc.decaySteps);
    f["--weight-decay"] = number(sc.weightDecay);
    f["--clip-grad-norm"] = number(sc.clipGradNorm);
  }
  f["--ema"] = opt.emaDecay < 0 ? "off" : number(opt.emaDecay);
  f["--ckpt-dir"] = opt.ckptDir.empty() ? "none" : "given";
  f["--ckpt-every"] = std::to_string(opt.ckptEvery);
  f["--ckpt-keep"] = std::to_string(opt.ckptKeep);
  f["--resume"] = opt.resume ? "on" : "off";
  f["--allow-data-change"] = opt.allowDataChange ? "on" : "off";
  f["--checkpoint-on"] = opt.ckptDir.empty() ? "off" : signals.empty() ? "none" : signals;
  f["--checkpoint-grace"] = number(opt.preemption.graceSeconds);
  f["--check-finite"] = opt.checkFinite ? "on" : "off";
  f["the step library (content)"] = hc::rt::hashHex(libHash);
  return f;
}

} // namespace

DataFiles dataFilesOf(const Options &opt) {
  DataFiles f;
  f.data = identityOf("--data", opt.data);
  if (!opt.labels.empty())
    f.labels = identityOf("--labels", opt.labels);
  f.conds = joinCondFlags(
      opt.conds, [](const CondFlag &c) { return identityOf("--cond " + c.name + "=", c.path); },
      "none");
  return f;
}

void agreeAcrossRanks(const Options &opt, const StepLibrary &lib,
                      const DataFiles &files, hc::rt::Comm &comm) {
  const int R = comm.size(), r = comm.rank();
  if (R == 1)
    return;
  json mine;
  Error failure(0, "");
  bool failed = false;
  try {
    mine = fieldsOf(opt, lib, files);
  } catch (const Error &e) {
    failure = e;
    failed = true;
  }
  agreeOrExit(comm, failed ? &failure : nullptr);

  // Rank 0's fields to everyone.
  std::string text = r == 0 ? mine.dump() : std::string();
  uint64_t size = text.size();
  if (!comm.broadcast(&size, sizeof size, 0))
    comm.fail(1, "collective failed while comparing ranks");
  text.resize(size);
  if (!comm.broadcast(text.data(), size, 0))
    comm.fail(1, "collective failed while comparing ranks");
  const json ref = json::parse(text, nullptr, false);

  // Per field, which ranks differ from rank 0 (a field rank 0 lacks: an
  // hc-run of another version, caught by its own field).
  std::vector<std::string> names;
  for (auto it = mine.begin(); it != mine.end(); ++it)
    names.push_back(it.key());
  const std::size_t F = names.size();
  std::vector<double> differs(F * R, 0.0);
  for (std::size_t k = 0; k < F; ++k)
    differs[k * R + r] = ref.is_object() && ref.contains(names[k]) &&
                                 ref[names[k]] == mine[names[k]]
                             ? 0.0
                             : 1.0;
  if (!comm.allreduceSumF64(differs.data(), differs.size()))
    comm.fail(1, "collective failed while comparing ranks");

  std::vector<std::string> fields;
  std::size_t first = F;
  for (std::size_t k = 0; k < F; ++k)
    for (int q = 0; q < R; ++q)
      if (differs[k * R + q] > 0) {
        if (first == F)
          first = k;
        fields.push_back(names[k]);
        break;
      }
  if (first == F)
    return;
  // The first field that differs, the ranks that differ in it, and this
  // rank's value beside rank 0's (the lowest differing rank prints).
  std::string ranks;
  int shown = 0;
  for (int q = 0; q < R; ++q)
    if (differs[first * R + q] > 0 && shown++ < 8)
      ranks += (ranks.empty() ? "" : ", ") + std::to_string(q);
  if (shown > 8)
    ranks += " and " + std::to_string(shown - 8) + " more";
  const std::string &name = names[first];
  std::string msg;
  if (differs[first * R + r] > 0) {
    std::string theirs = ref.is_object() && ref.contains(name)
                             ? ref[name].get<std::string>()
                             : "(absent)";
    msg = "ranks disagree before step 1: " + name + " is " +
          mine[name].get<std::string>() + " on rank " + std::to_string(r) +
          " but " + theirs + " on rank 0 (ranks differing: " + ranks + ")";
  } else {
    msg = "ranks disagree before step 1: " + name + " differs from rank 0's on "
          "rank(s) " + ranks;
  }
  if (fields.size() > 1) {
    msg += "; also differing:";
    for (std::size_t i = 1; i < fields.size(); ++i)
      msg += (i > 1 ? ", " : " ") + fields[i];
  }
  msg += ". Every rank must run the same training (same library, data, flags)";
  Error e(2, msg);
  // Only a rank that differs reports (the lowest one), so the value shown is
  // its own.
  agreeOrExit(comm, differs[first * R + r] > 0 ? &e : nullptr);
  // Not reached on a differing job: agreeOrExit exits every rank.
  comm.fail(2, msg);
}

} // namespace hcrun
