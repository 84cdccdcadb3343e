#include "hc/Compiler/Pipeline.h"

#include "hc/Passes/Passes.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Transforms/Passes.h"

#include <cmath>
#include <cstdlib>

namespace hc {

const char *pipelineFlagsHelp() {
  return R"(  --no-fuse        skip the fusion passes (the IR stays as the exporter
                   decomposed it)
  --freeze A,B     parameters that get no gradient and no update, beyond
                   the model's own frozen set (ONNX metadata "hc.frozen",
                   e.g. DiT's fixed pos_embed)
  --optimizer O    adamw (default, as torch.optim.AdamW) or sgd (no momentum)
  --lr X           learning rate (default 1e-4)
  --beta1 X        AdamW beta1 (default 0.9)
  --beta2 X        AdamW beta2 (default 0.999)
  --eps X          AdamW epsilon (default 1e-8)
  --weight-decay X decoupled weight decay for AdamW, L2 for SGD (default 0)
  --bucket-mb X    gradient all-reduce bucket size in MiB (default 4; not yet
                   tuned by measurement)
)";
}

int parsePipelineFlag(int argc, char **argv, int &i, PipelineOptions &o,
                      std::string &error) {
  std::string arg = argv[i], value;
  auto eq = arg.find('=');
  bool inlineValue = arg.rfind("--", 0) == 0 && eq != std::string::npos;
  if (inlineValue) {
    value = arg.substr(eq + 1);
    arg = arg.substr(0, eq);
  }
  if (arg == "--no-fuse" && !inlineValue) {
    o.fuse = false;
    return 1;
  }
  static const char *valued[] = {"--freeze", "--optimizer", "--lr", "--beta1",
                                 "--beta2", "--eps", "--weight-decay",
                                 "--bucket-mb"};
  if (std::find(std::begin(valued), std::end(valued), arg) == std::end(valued))
    return 0;
  if (!inlineValue) {
    if (i + 1 >= argc) {
      error = arg + " needs a value";
      return -1;
    }
    value = argv[++i];
  }
  if (arg == "--freeze") {
    std::string item;
    for (size_t k = 0; k <= value.size(); ++k) {
      if (k == value.size() || value[k] == ',') {
        if (item.empty()) {
          error = "--freeze has an empty name in '" + value + "'";
          return -1;
        }
        o.freeze.push_back(item);
        item.clear();
      } else {
        item += value[k];
      }
    }
    return 1;
  }
  if (arg == "--optimizer") {
    if (value != "adamw" && value != "sgd") {
      error = "--optimizer must be adamw or sgd, got '" + value + "'";
      return -1;
    }
    o.optimizer = value;
    return 1;
  }
  char *end = nullptr;
  double x = std::strtod(value.c_str(), &end);
  if (value.empty() || *end || !std::isfinite(x) || x < 0) {
    error = arg + " needs a non-negative number, got '" + value + "'";
    return -1;
  }
  if (arg == "--bucket-mb") {
    if (x <= 0 || x > 4096) {
      error = "--bucket-mb must be in (0, 4096], got '" + value + "'";
      return -1;
    }
    o.bucketBytes = static_cast<int64_t>(x * (1 << 20)) / 64 * 64;
    return 1;
  }
  if ((arg == "--beta1" || arg == "--beta2") && x >= 1) {
    error = arg + " must be in [0, 1), got '" + value + "'";
    return -1;
  }
  (arg == "--lr"      ? o.lr
   : arg == "--beta1" ? o.beta1
   : arg == "--beta2" ? o.beta2
   : arg == "--eps"   ? o.eps
                      : o.weightDecay) = x;
  return 1;
}

bool runGraphPipeline(mlir::ModuleOp module, const PipelineOptions &options,
                      std::string &error, bool *badInput) {
  mlir::PassManager pm(module.getContext());
  if (options.fuse)
    addFusionPipeline(pm);
  if (options.train) {
    AutodiffOptions ad;
    ad.freeze = options.freeze;
    pm.addPass(createAutodiff(ad));
    OptimizerOptions opt;
    opt.optimizer = options.optimizer;
    opt.lr = options.lr;
    opt.beta1 = options.beta1;
    opt.beta2 = options.beta2;
    opt.eps = options.eps;
    opt.weightDecay = options.weightDecay;
    pm.addPass(createOptimizer(opt));
    pm.addPass(mlir::createCanonicalizerPass());
    pm.addPass(mlir::createCSEPass());
  }
  if (options.schedule) {
    LowerToScheduleOptions lower;
    lower.bucketBytes = options.bucketBytes;
    pm.addPass(createLowerToSchedule(lower));
    pm.addPass(createPlanBuffers());
    pm.addPass(createVerifyPlan());
  }
  std::string diagnostics;
  mlir::ScopedDiagnosticHandler capture(module.getContext(),
                                        [&](mlir::Diagnostic &d) {
                                          if (!diagnostics.empty())
                                            diagnostics += "; ";
                                          diagnostics += d.str();
                                          return mlir::success();
                                        });
  if (mlir::failed(pm.run(module))) {
    bool user = diagnostics.find("--freeze names") != std::string::npos;
    if (badInput)
      *badInput = user;
    error = (user ? "" : "internal error in the graph pipeline: ") + diagnostics;
    return false;
  }
  return true;
}

} // namespace hc
