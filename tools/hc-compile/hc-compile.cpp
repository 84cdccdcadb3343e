// hc-compile's driver: ONNX training graph -> hc IR -> (later stages)
// dit_step.so. main.cpp runs it; a tool that registers a compiler extension
// first (test/extension/) runs the same driver.
// Exit codes: 0 ok, 2 bad input or flags (one line), 3 a stage that is not
// implemented yet (said so; nothing is pretended or half-written).
#include "hc/Compiler/CompileMain.h"
#include "hc/Compiler/CompileOptions.h"
#include "hc/Compiler/EmitStep.h"
#include "hc/Compiler/Extension.h"
#include "hc/Compiler/OnnxImport.h"
#include "hc/Compiler/Pipeline.h"
#include "hc/Passes/RandomDraws.h"

#include "hc/base/files.h"
#include "hc/base/safetensors.h"

#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OperationSupport.h"
#include "llvm/Support/raw_ostream.h"

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <sys/stat.h>
#include <unistd.h>

namespace {

const char *kUsage = R"(usage: hc-compile MODEL.onnx -o dit_step.so --batch N [options]

Compiles the training graph of a DiT exported to ONNX into a shared library
running one training step. The loss is whatever the graph computes: DiT's
noise MSE, or with learned sigma its full objective (MSE plus the
variational bound through hc::StopGradient, docs/input-format.md), or a
flow-matching loss of SiT's (a float t and a target input,
docs/objectives.md), with or without a label input y (unconditional
models).

options:
)";

[[noreturn]] void usageError(const std::string &message) {
  std::fprintf(stderr, "hc-compile: %s (see --help)\n", message.c_str());
  std::exit(2);
}

// Writes `text` to `path` atomically, or to stdout when path is empty.
bool writeOutput(const std::string &path, const std::string &text) {
  if (path.empty() || path == "-") {
    std::fwrite(text.data(), 1, text.size(), stdout);
    return true;
  }
  std::string error;
  return hc::rt::writeFileAtomic(path, text.data(), text.size(), error);
}

// The initial parameters (and training_info's non-default optimizer state).
// `hash`: hashFile's value of what was written, computed while writing.
bool writeInit(const hc::ImportedModel &model, const std::string &input,
               const std::string &path, uint64_t &hash, std::string &error) {
  std::vector<hc::rt::SafetensorsTensorRef> tensors;
  for (const auto &[name, p] : model.params)
    tensors.push_back({name, "F32", p.shape, p.data});
  const hc::TrainingInfo &ti = model.training;
  if (ti.initialT != 0)
    tensors.push_back({"adam.T", "I64", {}, &ti.initialT});
  for (const auto &[key, values] : ti.initialMoments)
    tensors.push_back({key, "F32", model.params.at(key.substr(key.find(':') + 1)).shape,
                       values.data()});
  return hc::rt::writeSafetensors(path, tensors, {{"format", "pt"}, {"source", input}},
                                  error, -1, &hash);
}

// Refuses (exit 2, before any work) an output that is a folder, whose folder
// is missing or read-only, or that is the input model itself (compared by
// file identity, so another spelling or a link is caught too).
void checkOutput(const std::string &input, const std::string &path) {
  struct stat st;
  if (::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode))
    usageError("-o " + path + " is a folder, not a file name");
  if (hc::rt::sameFile(path, input))
    usageError("-o " + path + " is the input model " + input +
               ": it would be overwritten; choose another output name");
  if (hc::rt::isSymlink(path))
    usageError("-o " + path + " is a symbolic link, which hc-compile does not "
               "write through: remove it or choose another output name");
  std::size_t slash = path.find_last_of('/');
  std::string dir = slash == std::string::npos ? "."
                    : slash == 0                ? "/"
                                                : path.substr(0, slash);
  if (slash != std::string::npos && slash + 1 == path.size())
    usageError("-o " + path + " is a folder, not a file name");
  if (access(dir.c_str(), W_OK) != 0)
    usageError("-o " + path + ": folder " + dir + " " +
               (access(dir.c_str(), F_OK) != 0 ? "does not exist" : "is not writable"));
}

// Temporary files in a private folder (mkdtemp, mode 0700) beside the
// outputs, so no name another user could have planted a link at is ever
// written; removed again unless renamed into place.
struct Temporaries {
  std::string dir;
  std::vector<std::string> paths;
  std::string add(const std::string &path) {
    if (dir.empty()) {
      std::size_t slash = path.find_last_of('/');
      std::string templ = (slash == std::string::npos ? std::string(".")
                                                      : path.substr(0, slash)) +
                          "/.hc-compile.tmp.XXXXXX";
      std::vector<char> buf(templ.begin(), templ.end());
      buf.push_back('\0');
      if (!mkdtemp(buf.data()))
        usageError(path + ": cannot create a temporary folder beside it: " +
                   std::strerror(errno));
      dir = buf.data();
    }
    paths.push_back(dir + "/" + path.substr(path.find_last_of('/') + 1));
    return paths.back();
  }
  bool keep = false;  // an internal error points the user at the source
  ~Temporaries() {
    for (const auto &p : paths)
      if (!keep || p.size() < 4 || p.compare(p.size() - 4, 4, ".cpp") != 0)
        std::remove(p.c_str());
    if (keep)
      return;
    if (!dir.empty())
      ::rmdir(dir.c_str());
  }
};

} // namespace

int hc::compileMain(int argc, char **argv) {
  std::string input, error;
  hc::CompileOptions flags;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (int r = hc::parseCompileFlag(argc, argv, i, flags, error)) {
      if (r < 0)
        usageError(error);
      if (flags.help) {
        std::fputs(kUsage, stdout);
        std::fputs(hc::compileFlagsHelp().c_str(), stdout);
        return 0;
      }
    } else if (!arg.empty() && arg[0] == '-') {
      usageError("unknown flag '" + arg + "'");
    } else if (input.empty()) {
      input = arg;
    } else {
      usageError("more than one model given ('" + input + "', '" + arg + "')");
    }
  }
  const std::string &output = flags.output, &emit = flags.emit, &target = flags.target;
  hc::PipelineOptions &pipeline = flags.pipeline;
  hc::ImportOptions options;
  options.batch = flags.batch;
  if (input.empty())
    usageError("no model given");
  // A file size limit makes writes fail with EFBIG (reported) instead of
  // killing hc-compile (or the compiler it starts) mid-write.
  std::signal(SIGXFSZ, SIG_IGN);
  if (emit.empty() && target != "native" && !hc::checkTarget(target, error))
    usageError(error);
  if (!output.empty() && output != "-") {
    checkOutput(input, output);
    if (emit.empty())
      checkOutput(input, output + ".init.safetensors");
  }
  if (pipeline.sampler && !pipeline.optimizerFlags.empty())
    usageError(pipeline.optimizerFlags.front() +
               " is a training setting; a --sampler library has no optimizer");
  if (pipeline.sampler && emit == "train")
    usageError("--emit=train and --sampler: a sampler has no training step");

  mlir::DialectRegistry extensionDialects;
  hc::appendExtensionDialects(extensionDialects);
  mlir::MLIRContext context(extensionDialects);
  context.loadAllAvailableDialects();
  hc::ImportedModel model;
  options.path = input;
  options.userFrozen = pipeline.freeze;
  options.allowSharedParams = pipeline.allowSharedParams;
  bool unsupported = false;
  if (!hc::importOnnx(context, options, model, error, &unsupported)) {
    std::fprintf(stderr, "hc-compile: %s\n", error.c_str());
    return unsupported ? 3 : 2;
  }
  for (const auto &w : model.warnings)
    std::fprintf(stderr, "hc-compile: warning: %s\n", w.c_str());
  // bf16 planned for this machine, whose GEMMs have no bf16 dot product:
  // they widen bf16 operands to fp32, which costs more than the halved
  // bytes save (S/2 on a Zen 3: 9% slower than fp32,
  // bench/results-anchors-zen3-2core.txt).
  if (pipeline.precision == "bf16" && pipeline.topology == "native" && !hc::nativeBf16Dot())
    std::fprintf(stderr,
                 "hc-compile: warning: --precision bf16: this machine has no bf16 dot product "
                 "(AVX512-BF16), so its bf16 GEMMs widen to fp32 and the step runs slower than "
                 "--precision fp32\n");

  if (emit.empty() && output.empty())
    usageError("the step library needs -o FILE");
  pipeline.train = emit != "hc" && !pipeline.sampler;
  pipeline.schedule = emit != "hc" && emit != "train";
  std::string optimizerJson = hc::optimizerJson(*model.module, pipeline);
  // What the graph's own random draws choose, before passes rewrite it.
  std::string randomDraws = "[]";
  if (auto forward = model.module->lookupSymbol<mlir::func::FuncOp>("forward"))
    randomDraws = hc::randomDrawsJson(forward);
  bool badInput = false;
  if (!hc::runGraphPipeline(*model.module, pipeline, error, &badInput)) {
    std::fprintf(stderr, "hc-compile: %s: %s\n", input.c_str(), error.c_str());
    return badInput ? 2 : 1;
  }

  std::string text, initTmp;
  Temporaries temps;
  if (emit.empty() || emit == "cpp") {
    hc::EmitInfo info;
    info.model = input;
    info.batchPerRank = options.batch;  // 0: the emitter reads it off x_t
    auto it = model.metadata.find("hc.dit_config");
    info.ditConfigJson = it == model.metadata.end() ? "{}" : it->second;
    info.randomDrawsJson = randomDraws;
    info.optimizerJson = optimizerJson;
    info.precision = pipeline.precision;
    info.optionsJson = hc::compileOptionsJson(flags);
    std::string base = output.substr(output.rfind('/') + 1);
    info.initFile = base + ".init.safetensors";
    if (emit.empty()) {
      // The initial parameters first, under a temporary name: the library's
      // description carries the hash of exactly these bytes.
      initTmp = temps.add(output + ".init.safetensors");
      uint64_t hash = 0;
      if (!writeInit(model, input, initTmp, hash, error)) {
        std::fprintf(stderr, "hc-compile: %s\n", error.c_str());
        return 1;
      }
      info.initHash = hc::rt::hashHex(hash);
    }
    std::string description;
    if (!hc::emitStepCpp(*model.module, info, text, description, error)) {
      std::fprintf(stderr, "hc-compile: %s: internal error: %s\n", input.c_str(),
                   error.c_str());
      return 1;
    }
  }
  if (emit.empty()) {
    // The library under a temporary name, then both renamed into place, the
    // library last: a failure before that leaves the old pair untouched, and
    // a crash between the renames leaves a pair whose hashes disagree, which
    // hc-run refuses.
    std::string cppPath = temps.add(output + ".cpp");
    std::string soTmp = temps.add(output);
    if (!writeOutput(cppPath, text)) {
      std::fprintf(stderr, "hc-compile: %s: cannot write\n", cppPath.c_str());
      return 1;
    }
    if (!hc::compileStepLibrary(cppPath, soTmp, target, error)) {
      temps.keep = error.find("source kept") != std::string::npos;
      std::fprintf(stderr, "hc-compile: %s\n", error.c_str());
      return 1;
    }
    std::remove(cppPath.c_str());
    const std::string initPath = output + ".init.safetensors";
    if (std::rename(initTmp.c_str(), initPath.c_str()) != 0 ||
        std::rename(soTmp.c_str(), output.c_str()) != 0) {
      std::fprintf(stderr, "hc-compile: %s: cannot write: %s\n", output.c_str(),
                   std::strerror(errno));
      return 1;
    }
    return 0;
  }
  if (emit != "cpp") {
    llvm::raw_string_ostream os(text);
    model.module->print(os);
    os.flush();
  }

  if (!writeOutput(output, text)) {
    std::fprintf(stderr, "hc-compile: %s: cannot write output\n",
                 output.c_str());
    return 2;
  }
  return 0;
}
