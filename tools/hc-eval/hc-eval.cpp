// hc-eval: imports an ONNX training graph, runs hc's graph pipeline, and
// evaluates the result with the float64 reference evaluator on inputs from
// NPY files: the oracle tool tests use to compare hc's IR with PyTorch.
// Exit codes as hc-compile's.
#include "hc/Compiler/Evaluator.h"
#include "hc/Compiler/OnnxImport.h"
#include "hc/Compiler/CompileOptions.h"
#include "hc/Compiler/Pipeline.h"
#include "hc/Compiler/ScheduleEvaluator.h"
#include "hc/Schedule/ScheduleOps.h"
#include "hc/Graph/GraphOps.h"
#include "hc/base/npy.h"

#include "mlir/IR/MLIRContext.h"

#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <sys/stat.h>

namespace {

const char *kUsage = R"(usage: hc-eval MODEL.onnx --inputs DIR [options]

Imports MODEL.onnx, runs hc-compile's pipeline and evaluates it in float64 on
DIR/<input>.npy (one file per graph input) and the model's initializers.
Prints `loss <value>` per step and, with --out, writes every output as
OUT/<output>.npy (float64).

options:
  --batch N        per-rank batch (fixes a dynamic batch axis)
  --out DIR        where outputs go
  --train          evaluate the whole training step (autodiff + optimizer);
                   also writes OUT/train_loss.npy (one loss per step),
                   OUT/grads/<param>.npy (the first step's gradients) and
                   OUT/params/<param>.npy (every parameter after the last step)
  --steps K        training steps on the same inputs (default 1)
  --schedule       with --train: lower the step to the schedule level, plan
                   its buffers and evaluate that (arenas, views, kernel order)
                   in float64; same outputs as without it
)";

[[noreturn]] void die(int code, const std::string &message) {
  std::fprintf(stderr, "hc-eval: %s\n", message.c_str());
  std::exit(code);
}

hc::EvalTensor readInput(const std::string &path, mlir::RankedTensorType type,
                         const std::string &name) {
  hc::rt::NpyArray a;
  std::string error;
  if (!hc::rt::readNpy(path, a, error))
    die(2, error);
  hc::EvalTensor t;
  t.shape.assign(type.getShape().begin(), type.getShape().end());
  if (a.header.shape != t.shape)
    die(2, path + ": shape does not match input '" + name + "'");
  const std::string &dt = a.header.dtype;
  bool isFloat = mlir::isa<mlir::FloatType>(type.getElementType());
  if (isFloat != (dt == "f4" || dt == "f8"))
    die(2, path + ": dtype " + dt + " does not match input '" + name + "'");
  for (std::size_t k = 0; k < a.header.numElements(); ++k)
    t.data.push_back(dt == "f4"   ? a.as<float>()[k]
                     : dt == "f8" ? a.as<double>()[k]
                     : dt == "i8" ? static_cast<double>(a.as<int64_t>()[k])
                     : dt == "i4" ? a.as<int32_t>()[k]
                                  : static_cast<double>(a.data[k]));
  return t;
}

void write(const std::string &path, const hc::EvalTensor &t) {
  std::string error;
  if (!hc::rt::writeNpy(path, "f8", t.shape, t.data.data(), error))
    die(2, error);
}


// What a run produced, written the same way by both evaluators so tests can
// compare them file by file.
struct Outcome {
  std::vector<double> losses;
  std::map<std::string, hc::EvalTensor> outputs;  // named graph outputs
  std::map<std::string, hc::EvalTensor> grads;    // first step's gradients
  std::map<std::string, hc::EvalTensor> params;   // after the last step
};

std::string inputPath(const std::string &dir, const std::string &name) {
  return dir + "/" + name + ".npy";
}

// The graph-level step (or forward graph), one evaluate() per step.
Outcome runGraph(mlir::func::FuncOp fn, const hc::ImportedModel &imported,
                 const std::string &inputs, long steps, const std::string &model) {
  // Bind arguments: data from DIR, parameters from the model, state zeroed.
  std::vector<hc::EvalTensor> args;
  std::map<std::string, unsigned> paramArg, stateArg;
  for (auto arg : fn.getArguments()) {
    auto type = mlir::cast<mlir::RankedTensorType>(arg.getType());
    unsigned n = arg.getArgNumber();
    hc::EvalTensor t;
    t.shape.assign(type.getShape().begin(), type.getShape().end());
    if (auto p = fn.getArgAttrOfType<mlir::StringAttr>(n, hc::graph::kParamAttr)) {
      const hc::ParamData &d = imported.params.at(p.str());
      t.data.assign(d.data, d.data + d.numElements());
      paramArg[p.str()] = n;
    } else if (auto s = fn.getArgAttrOfType<mlir::StringAttr>(n, "hc.state")) {
      t.data.assign(t.numElements(), 0.0);
      stateArg[s.str()] = n;
    } else {
      auto name = fn.getArgAttrOfType<mlir::StringAttr>(n, hc::graph::kInputAttr);
      t = readInput(inputPath(inputs, name.str()), type, name.str());
    }
    args.push_back(std::move(t));
  }
  std::vector<std::string> names;
  for (mlir::Attribute a :
       fn->getAttrOfType<mlir::ArrayAttr>(hc::graph::kResultNamesAttr))
    names.push_back(mlir::cast<mlir::StringAttr>(a).str());

  Outcome outcome;
  std::vector<hc::EvalTensor> results;
  std::string error;
  for (long step = 0; step < steps; ++step) {
    if (!hc::evaluate(fn, args, results, error))
      die(2, model + ": evaluation failed: " + error);
    outcome.losses.push_back(results.at(0).data.at(0));
    std::printf("loss %.17g\n", outcome.losses.back());
    for (std::size_t i = 0; i < names.size(); ++i) {  // carry state forward
      const std::string &n = names[i];
      if (n.rfind("param:", 0) == 0)
        args[paramArg.at(n.substr(6))] = results[i];
      else if (n.rfind("state:", 0) == 0)
        args[stateArg.at(n.substr(6))] = results[i];
      else if (n.rfind("grad:", 0) == 0 && step == 0)
        outcome.grads[n.substr(5)] = results[i];
      else if (n.find(':') == std::string::npos)
        outcome.outputs[n] = results[i];
    }
  }
  for (const auto &[name, index] : paramArg)
    outcome.params[name] = args[index];
  return outcome;
}

// The schedule-level step (after hc-lower-to-schedule and hc-plan-buffers),
// in float64 through its arenas and views.
Outcome runSchedule(mlir::ModuleOp module, const hc::ImportedModel &imported,
                    const std::string &inputs, long steps,
                    const std::string &model) {
  mlir::func::FuncOp step;
  module.walk([&](mlir::func::FuncOp f) {
    if (f.getName() == "step")
      step = f;
  });
  hc::ScheduleEvaluator evaluator;
  std::string error;
  if (!step || !evaluator.init(step, error))
    die(1, model + ": internal error: schedule evaluation: " +
               (step ? error : "no step function"));
  std::map<std::string, mlir::MemRefType> inputTypes;
  std::vector<hc::EvalTensor> data;
  step.walk([&](hc::schedule::InputOp in) {
    auto m = in.getType();
    auto type = mlir::RankedTensorType::get(m.getShape(), m.getElementType());
    std::size_t k = in.getIndex();
    if (data.size() <= k)
      data.resize(k + 1);
    data[k] = readInput(inputPath(inputs, in.getName().str()), type,
                        in.getName().str());
  });
  for (const std::string &name : evaluator.tensorNames()) {
    auto p = imported.params.find(name);
    if (p == imported.params.end())
      continue;
    hc::EvalTensor t{p->second.shape, {}};
    t.data.assign(p->second.data, p->second.data + p->second.numElements());
    if (!evaluator.setTensor(name, t, error))
      die(1, model + ": internal error: " + error);
  }
  Outcome outcome;
  for (long k = 0; k < steps; ++k) {
    double loss = 0;
    if (!evaluator.run(data, loss, error))
      die(1, model + ": internal error: schedule evaluation failed: " + error);
    outcome.losses.push_back(loss);
    std::printf("loss %.17g\n", loss);
    for (const std::string &name : evaluator.tensorNames()) {
      hc::EvalTensor t;
      if (k == 0 && name.rfind("grad:", 0) == 0 &&
          evaluator.getTensor(name, t, error))
        outcome.grads[name.substr(5)] = t;
    }
  }
  for (const auto &entry : imported.params) {
    hc::EvalTensor t;
    if (!evaluator.getTensor(entry.first, t, error))
      die(1, model + ": internal error: " + error);
    outcome.params[entry.first] = t;
  }
  return outcome;
}

} // namespace

int main(int argc, char **argv) {
  std::string model, inputs, outDir, error;
  hc::ImportOptions options;
  hc::CompileOptions flags;
  hc::PipelineOptions &pipeline = flags.pipeline;
  long steps = 1;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc)
        die(2, arg + " needs a value");
      return argv[++i];
    };
    auto positive = [&](const std::string &v) {
      char *end = nullptr;
      long n = std::strtol(v.c_str(), &end, 10);
      if (v.empty() || *end || n <= 0)
        die(2, arg + " needs a positive integer, got '" + v + "'");
      return n;
    };
    if (arg == "-h" || arg == "--help") {
      std::fputs(kUsage, stdout);
      std::fputs(hc::compileFlagsHelp(hc::FlagScope::Pipeline).c_str(), stdout);
      return 0;
    } else if (int r = hc::parseCompileFlag(argc, argv, i, flags, error,
                                            hc::FlagScope::Pipeline)) {
      if (r < 0)
        die(2, error);
    } else if (arg == "--inputs") {
      inputs = value();
    } else if (arg == "--out") {
      outDir = value();
    } else if (arg == "--train") {
      pipeline.train = true;
    } else if (arg == "--schedule") {
      pipeline.schedule = true;
    } else if (arg == "--steps") {
      steps = positive(value());
    } else if (arg == "--batch") {
      options.batch = positive(value());
    } else if (arg[0] == '-') {
      die(2, "unknown flag '" + arg + "'");
    } else {
      model = arg;
    }
  }
  if (model.empty() || inputs.empty())
    die(2, "need MODEL.onnx and --inputs DIR (see --help)");
  if (pipeline.schedule && !pipeline.train)
    die(2, "--schedule needs --train (only the training step is lowered)");

  mlir::MLIRContext context;
  hc::ImportedModel imported;
  options.path = model;
  bool unsupported = false;
  if (!hc::importOnnx(context, options, imported, error, &unsupported))
    die(unsupported ? 3 : 2, error);
  bool badInput = false;
  if (!hc::runGraphPipeline(*imported.module, pipeline, error, &badInput))
    die(badInput ? 2 : 1, model + ": " + error);
  mlir::ModuleOp module = *imported.module;
  Outcome outcome =
      pipeline.schedule
          ? runSchedule(module, imported, inputs, steps, model)
          : runGraph(*module.getOps<mlir::func::FuncOp>().begin(), imported,
                     inputs, steps, model);
  if (outDir.empty())
    return 0;
  mkdir(outDir.c_str(), 0755);  // an existing folder is fine
  for (const auto &[name, t] : outcome.outputs)
    write(outDir + "/" + name + ".npy", t);
  if (!pipeline.train)
    return 0;
  write(outDir + "/train_loss.npy",
        hc::EvalTensor{{static_cast<int64_t>(outcome.losses.size())},
                       outcome.losses});
  mkdir((outDir + "/grads").c_str(), 0755);
  for (const auto &[name, t] : outcome.grads)
    write(outDir + "/grads/" + name + ".npy", t);
  mkdir((outDir + "/params").c_str(), 0755);
  for (const auto &[name, t] : outcome.params)
    write(outDir + "/params/" + name + ".npy", t);
  return 0;
}
