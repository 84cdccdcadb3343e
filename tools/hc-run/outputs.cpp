// hc-run's outputs checked before step 1: each in a writable folder, none a
// folder itself, none the same file as an input or another output. Inputs
// and outputs are compared by file identity (device, inode), so another
// spelling, a hard link or a symlink is caught too.
#include "common.h"

#include "hc/runtime/checkpoint.h"
#include "hc/base/files.h"

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <sys/stat.h>
#include <unistd.h>

namespace hcrun {
namespace {

std::string folderOf(const std::string &p) {
  std::size_t slash = p.find_last_of('/');
  return slash == std::string::npos ? "." : slash == 0 ? "/" : p.substr(0, slash);
}

// The path an output will have once written: its folder resolved, its name
// kept (the file itself may not exist yet).
std::string canonicalOutput(const std::string &p) {
  char resolved[PATH_MAX];
  std::string dir = folderOf(p);
  std::string name = p.substr(p.find_last_of('/') + 1);
  return realpath(dir.c_str(), resolved) ? std::string(resolved) + "/" + name : p;
}

using Named = NamedPath;

} // namespace

void checkOutputPath(const std::string &flag, const std::string &path) {
  if (path.empty())
    return;
  std::string p = pathForRank(path, 0);
  struct stat st;
  if (p.back() == '/' || (::stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode)))
    usageError(flag + " " + path + " is a folder, not a file name");
  std::string dir = folderOf(p);
  if (access(dir.c_str(), W_OK) != 0)
    usageError(flag + " " + path + ": folder " + dir + " " +
               (access(dir.c_str(), F_OK) != 0 ? "does not exist"
                                                 : "is not writable"));
}

void checkOutputs(const Options &opt, const StepLibrary &lib, int rank) {
  std::vector<Named> outputs;
  for (const Named &o : {Named{"--save-params", opt.saveParams},
                         Named{"--save-grads", opt.saveGrads},
                         Named{"--save-state", opt.saveState},
                         Named{"--metrics", opt.metrics},
                         Named{"--profile", opt.profile}}) {
    if (o.path.empty())
      continue;
    checkOutputPath(o.flag, o.path);
    outputs.push_back({o.flag, pathForRank(o.path, rank)});
  }
  if (outputs.empty())
    return;

  std::vector<Named> inputs = {{"the step library", lib.path},
                               {"the initial parameters", lib.initPath(opt.init)}};
  if (!opt.data.empty())
    inputs.push_back({"--data", opt.data});
  if (!opt.labels.empty())
    inputs.push_back({"--labels", opt.labels});
  for (const CondFlag &c : opt.conds)
    inputs.push_back({"--cond " + c.name, c.path});
  for (const CondFlag &c : opt.valConds)
    inputs.push_back({"--val-cond " + c.name, c.path});
  if (!opt.valData.empty())
    inputs.push_back({"--val-data", opt.valData});
  if (!opt.valLabels.empty())
    inputs.push_back({"--val-labels", opt.valLabels});
  if (!opt.inputs.empty())
    for (const TensorSpec &in : lib.desc.inputs)
      inputs.push_back({"--inputs", opt.inputs + "/" + in.name + ".npy"});

  checkOutputsAgainstInputs(outputs, inputs);
  if (!opt.ckptDir.empty())
    refuseCheckpointNames(outputs, opt.ckptDir, "--ckpt-dir");
}

void refuseCheckpointNames(const std::vector<NamedPath> &outputs,
                           const std::string &ckptDir, const std::string &dirFlag) {
  // A name that starts "ckpt-" in the checkpoint folder would replace a
  // checkpoint, be pruned as one, or (ckpt-99999999.safetensors) be taken
  // for the newest by every later --resume.
  std::string ck = canonicalOutput(ckptDir + "/x");
  ck.resize(ck.size() - 1);
  for (const Named &o : outputs) {
    std::string c = canonicalOutput(pathForRank(o.path, 0));
    if (c.compare(0, ck.size(), ck) == 0 && c.compare(ck.size(), 5, "ckpt-") == 0)
      usageError(o.flag + " " + o.path + " is a checkpoint name in " + dirFlag +
                 " " + ckptDir + ": choose another file name");
  }
}

void checkOutputsAgainstInputs(const std::vector<NamedPath> &outputs,
                               const std::vector<NamedPath> &inputs) {
  for (const NamedPath &o : outputs) {
    checkOutputPath(o.flag, o.path);
    // A checkpoint's name anywhere: another folder may become a --ckpt-dir.
    const std::string base = o.path.substr(o.path.find_last_of('/') + 1);
    if (hc::rt::isCheckpointName(base))
      usageError(o.flag + " " + o.path + " is named like a checkpoint "
                 "(ckpt-<step>.safetensors): choose another file name");
  }
  for (std::size_t i = 0; i < outputs.size(); ++i) {
    const Named &o = outputs[i];
    for (const Named &in : inputs)
      if (hc::rt::sameFile(o.path, in.path))
        usageError(o.flag + " " + o.path + " is " + in.flag + " " + in.path +
                   ": it would be overwritten; choose another file name");
    for (std::size_t k = 0; k < i; ++k)
      if (canonicalOutput(o.path) == canonicalOutput(outputs[k].path) ||
          hc::rt::sameFile(o.path, outputs[k].path))
        usageError(o.flag + " and " + outputs[k].flag + " both name " + o.path +
                   ": give each output its own file");
  }
  // After the comparisons, which name a link to an input more precisely.
  for (const NamedPath &o : outputs)
    if (hc::rt::isSymlink(pathForRank(o.path, 0)))
      usageError(o.flag + " " + o.path + " is a symbolic link, which hc-run does "
                 "not write through: remove it or choose another file name");
}

} // namespace hcrun
