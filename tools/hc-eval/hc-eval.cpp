// hc-eval: imports an ONNX training graph and runs it through the reference
// evaluator (float64) on inputs from NPY files: the oracle tool tests use to
// compare hc's IR with PyTorch. Exit codes as hc-compile's.
#include "hc/Compiler/Evaluator.h"
#include "hc/Compiler/OnnxImport.h"
#include "hc/Compiler/Pipeline.h"
#include "hc/Graph/GraphOps.h"
#include "hc/runtime/npy.h"

#include "mlir/IR/MLIRContext.h"

#include <cstdio>
#include <sys/stat.h>
#include <cstdlib>
#include <string>

namespace {

const char *kUsage = R"(usage: hc-eval MODEL.onnx --inputs DIR [--batch N] [--out DIR] [--no-fuse]

Imports MODEL.onnx, evaluates it in float64 on DIR/<input>.npy (one file per
graph input, named after it) and the model's initializers, prints
`loss <value>` and writes every output as OUT/<output>.npy (float64).
The IR evaluated is hc-compile's (fused unless --no-fuse).
)";

[[noreturn]] void die(int code, const std::string &message) {
  std::fprintf(stderr, "hc-eval: %s\n", message.c_str());
  std::exit(code);
}

} // namespace

int main(int argc, char **argv) {
  std::string model, inputs, outDir;
  hc::ImportOptions options;
  hc::PipelineOptions pipeline;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc)
        die(2, arg + " needs a value");
      return argv[++i];
    };
    if (arg == "-h" || arg == "--help") {
      std::fputs(kUsage, stdout);
      return 0;
    } else if (arg == "--inputs") {
      inputs = value();
    } else if (arg == "--out") {
      outDir = value();
    } else if (arg == "--no-fuse") {
      pipeline.fuse = false;
    } else if (arg == "--batch") {
      std::string v = value();
      char *end = nullptr;
      options.batch = std::strtoll(v.c_str(), &end, 10);
      if (*end || options.batch <= 0)
        die(2, "--batch needs a positive integer, got '" + v + "'");
    } else if (arg[0] == '-') {
      die(2, "unknown flag '" + arg + "'");
    } else {
      model = arg;
    }
  }
  if (model.empty() || inputs.empty())
    die(2, "need MODEL.onnx and --inputs DIR (see --help)");

  mlir::MLIRContext context;
  hc::ImportedModel imported;
  options.path = model;
  std::string error;
  if (!hc::importOnnx(context, options, imported, error))
    die(2, error);
  if (!hc::runGraphPipeline(*imported.module, pipeline, error))
    die(1, model + ": " + error);
  auto fn = *imported.module->getOps<mlir::func::FuncOp>().begin();

  std::vector<hc::EvalTensor> args;
  for (auto arg : fn.getArguments()) {
    auto type = mlir::cast<mlir::RankedTensorType>(arg.getType());
    hc::EvalTensor t;
    t.shape.assign(type.getShape().begin(), type.getShape().end());
    unsigned n = arg.getArgNumber();
    if (auto name = fn.getArgAttrOfType<mlir::StringAttr>(n, hc::graph::kParamAttr)) {
      const hc::ParamData &p = imported.params.at(name.str());
      t.data.assign(p.data, p.data + p.numElements());
    } else {
      auto input = fn.getArgAttrOfType<mlir::StringAttr>(n, hc::graph::kInputAttr);
      std::string path = inputs + "/" + input.str() + ".npy";
      hc::rt::NpyArray a;
      if (!hc::rt::readNpy(path, a, error))
        die(2, error);
      if (a.header.shape != t.shape)
        die(2, path + ": shape does not match input '" + input.str() + "'");
      const std::string &dt = a.header.dtype;
      bool isFloat = type.getElementType().isF32() || type.getElementType().isF64();
      if (isFloat != (dt == "f4" || dt == "f8"))
        die(2, path + ": dtype " + dt + " does not match input '" +
                   input.str() + "'");
      for (std::size_t k = 0; k < a.header.numElements(); ++k)
        t.data.push_back(dt == "f4"   ? a.as<float>()[k]
                         : dt == "f8" ? a.as<double>()[k]
                         : dt == "i8" ? static_cast<double>(a.as<int64_t>()[k])
                         : dt == "i4" ? a.as<int32_t>()[k]
                                      : static_cast<double>(a.data[k]));
    }
    args.push_back(std::move(t));
  }
  std::vector<hc::EvalTensor> results;
  if (!hc::evaluate(fn, args, results, error))
    die(2, model + ": evaluation failed: " + error);
  std::printf("loss %.17g\n", results.at(0).data.at(0));
  if (!outDir.empty()) {
    mkdir(outDir.c_str(), 0755);  // an existing folder is fine
    auto names = fn->getAttrOfType<mlir::ArrayAttr>(hc::graph::kResultNamesAttr);
    for (std::size_t i = 0; i < results.size(); ++i) {
      std::string name = mlir::cast<mlir::StringAttr>(names[i]).str();
      if (!hc::rt::writeNpy(outDir + "/" + name + ".npy", "f8", results[i].shape,
                            results[i].data.data(), error))
        die(2, error);
    }
  }
  return 0;
}
