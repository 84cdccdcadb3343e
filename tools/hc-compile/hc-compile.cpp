// hc-compile: ONNX training graph -> hc IR -> (later stages) dit_step.so.
// Exit codes: 0 ok, 2 bad input or flags (one line), 3 a stage that is not
// implemented yet (said so; nothing is pretended or half-written).
#include "hc/Compiler/EmitStep.h"
#include "hc/Compiler/OnnxImport.h"
#include "hc/Compiler/Pipeline.h"

#include "hc/runtime/safetensors.h"

#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OperationSupport.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <unistd.h>

namespace {

const char *kUsage = R"(usage: hc-compile MODEL.onnx -o dit_step.so --batch N [options]

Compiles the training graph of a DiT exported to ONNX (loss = mse(DiT(x_t, t,
y), noise)) into a shared library running one training step.

options:
  -o FILE          output file: the step library, with its initial
                   parameters written beside it as FILE.init.safetensors;
                   for --emit=STAGE the text (default stdout)
  --batch N        per-rank batch; fixes a dynamic batch axis (required then)
  --emit=STAGE     hc: the verified hc graph IR after import and fusion
                   train: the whole training step as one function (inputs,
                   parameters and optimizer state in; loss, gradients
                   grad:NAME, updated parameters param:NAME and state out)
                   schedule: buffers, views and kernel calls, planned
                   cpp: the generated C++ of the step library
  --target ARCH    -march for the generated code (default: native)
  -h, --help       this text
)";

[[noreturn]] void usageError(const std::string &message) {
  std::fprintf(stderr, "hc-compile: %s (see --help)\n", message.c_str());
  std::exit(2);
}

int64_t parsePositive(const std::string &flag, const std::string &value) {
  char *end = nullptr;
  long long v = std::strtoll(value.c_str(), &end, 10);
  if (value.empty() || *end != '\0' || v <= 0 || v > (1LL << 20))
    usageError(flag + " needs a positive integer, got '" + value + "'");
  return v;
}

// Writes `text` to `path` atomically, or to stdout when path is empty.
bool writeOutput(const std::string &path, const std::string &text) {
  if (path.empty() || path == "-") {
    std::fwrite(text.data(), 1, text.size(), stdout);
    return true;
  }
  std::string tmp = path + ".tmp." + std::to_string(getpid());
  std::FILE *f = std::fopen(tmp.c_str(), "wb");
  if (!f)
    return false;
  bool ok = std::fwrite(text.data(), 1, text.size(), f) == text.size();
  ok = std::fclose(f) == 0 && ok;
  if (!ok || std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    return false;
  }
  return true;
}

} // namespace

int main(int argc, char **argv) {
  std::string input, output, emit, error, target = "native";
  hc::ImportOptions options;
  hc::PipelineOptions pipeline;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    auto value = [&](const std::string &flag) -> std::string {
      if (i + 1 >= argc)
        usageError(flag + " needs a value");
      return argv[++i];
    };
    if (arg == "-h" || arg == "--help") {
      std::fputs(kUsage, stdout);
      std::fputs(hc::pipelineFlagsHelp(), stdout);
      return 0;
    } else if (arg == "-o") {
      output = value(arg);
    } else if (arg == "--batch") {
      options.batch = parsePositive(arg, value(arg));
    } else if (arg.rfind("--batch=", 0) == 0) {
      options.batch = parsePositive("--batch", arg.substr(8));
    } else if (int r = hc::parsePipelineFlag(argc, argv, i, pipeline, error)) {
      if (r < 0)
        usageError(error);
    } else if (arg == "--target") {
      target = value(arg);
      if (target.empty() || target.find_first_of(" '\"$;&|`") != std::string::npos)
        usageError("--target needs an -march name, got '" + target + "'");
    } else if (arg == "--emit") {
      emit = value(arg);
    } else if (arg.rfind("--emit=", 0) == 0) {
      emit = arg.substr(7);
    } else if (!arg.empty() && arg[0] == '-') {
      usageError("unknown flag '" + arg + "'");
    } else if (input.empty()) {
      input = arg;
    } else {
      usageError("more than one model given ('" + input + "', '" + arg + "')");
    }
  }
  if (input.empty())
    usageError("no model given");
  if (!emit.empty() && emit != "hc" && emit != "train" && emit != "schedule" &&
      emit != "cpp")
    usageError("--emit must be hc, train, schedule or cpp, got '" + emit + "'");

  mlir::MLIRContext context;
  hc::ImportedModel model;
  options.path = input;
  bool unsupported = false;
  if (!hc::importOnnx(context, options, model, error, &unsupported)) {
    std::fprintf(stderr, "hc-compile: %s\n", error.c_str());
    return unsupported ? 3 : 2;
  }
  for (const auto &w : model.warnings)
    std::fprintf(stderr, "hc-compile: warning: %s\n", w.c_str());

  if (emit.empty() && output.empty())
    usageError("the step library needs -o FILE");
  pipeline.train = emit != "hc";
  pipeline.schedule = emit != "hc" && emit != "train";
  std::string optimizerJson = hc::optimizerJson(*model.module, pipeline);
  bool badInput = false;
  if (!hc::runGraphPipeline(*model.module, pipeline, error, &badInput)) {
    std::fprintf(stderr, "hc-compile: %s: %s\n", input.c_str(), error.c_str());
    return badInput ? 2 : 1;
  }

  std::string text;
  if (emit.empty() || emit == "cpp") {
    hc::EmitInfo info;
    info.model = input;
    info.batchPerRank = options.batch;  // 0: the emitter reads it off x_t
    auto it = model.metadata.find("hc.dit_config");
    info.ditConfigJson = it == model.metadata.end() ? "{}" : it->second;
    info.optimizerJson = optimizerJson;
    std::string base = output.substr(output.rfind('/') + 1);
    info.initFile = base + ".init.safetensors";
    std::string description;
    if (!hc::emitStepCpp(*model.module, info, text, description, error)) {
      std::fprintf(stderr, "hc-compile: %s: internal error: %s\n", input.c_str(),
                   error.c_str());
      return 1;
    }
  }
  if (emit.empty()) {
    // Initial parameters beside the library, then the library itself.
    std::vector<hc::rt::SafetensorsTensorRef> tensors;
    for (const auto &[name, p] : model.params)
      tensors.push_back({name, "F32", p.shape, p.data});
    // training_info's initial optimizer state where it is not the default
    // (step 0, zero moments).
    const hc::TrainingInfo &ti = model.training;
    if (ti.initialT != 0)
      tensors.push_back({"adam.T", "I64", {}, &ti.initialT});
    for (const auto &[key, values] : ti.initialMoments)
      tensors.push_back({key, "F32", model.params.at(key.substr(key.find(':') + 1)).shape,
                         values.data()});
    if (!hc::rt::writeSafetensors(output + ".init.safetensors", tensors,
                                  {{"format", "pt"}, {"source", input}}, error)) {
      std::fprintf(stderr, "hc-compile: %s\n", error.c_str());
      return 2;
    }
    std::string cppPath = output + ".cpp";
    if (!writeOutput(cppPath, text) ||
        !hc::compileStepLibrary(cppPath, output, target, error)) {
      std::fprintf(stderr, "hc-compile: %s\n",
                   error.empty() ? (cppPath + ": cannot write").c_str()
                                 : error.c_str());
      return 1;
    }
    std::remove(cppPath.c_str());
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
