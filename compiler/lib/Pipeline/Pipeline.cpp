#include "hc/Compiler/Pipeline.h"
#include "hc/Compiler/CompileOptions.h"
#include "hc/Compiler/OnnxImport.h"

#include "hc/Passes/Optimizers.h"
#include "hc/Passes/Passes.h"

#include "hc/base/settings.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Transforms/Passes.h"

#include <cmath>

namespace hc {

int64_t bucketBytesForLink(const LinkModel &link) {
  const double p = static_cast<double>(link.ranks);
  const double latency = 2 * std::log2(p) * link.alphaSeconds;
  const double perByte = 2 * (p - 1) / p / link.bytesPerSecond;
  int64_t bytes = 64 << 10;
  while (bytes < (int64_t{256} << 20) && latency > 0.1 * perByte * bytes)
    bytes *= 2;
  return bytes;
}

namespace {

// The optimizer the step runs: the model's training_info, else the flags.
// False + error when a flag contradicts the model's own algorithm.
bool effectiveOptimizer(mlir::ModuleOp module, const PipelineOptions &in,
                        PipelineOptions &out, std::string &error) {
  out = in;
  auto info = module->getAttrOfType<mlir::DictionaryAttr>(kTrainingInfoAttr);
  if (!info) {
    if (const OptimizerSpec *spec = findOptimizer(out.optimizer); spec && !out.epsGiven)
      out.eps = spec->defaultEps;
    return true;
  }
  if (!in.optimizerFlags.empty()) {
    error = in.optimizerFlags.front() + " conflicts with the model's training_info, which "
            "defines the optimizer and the trainable set (drop the flag, or "
            "export without --training-info)";
    return false;
  }
  auto num = [&](const char *name) {
    return info.getAs<mlir::FloatAttr>(name).getValueAsDouble();
  };
  out.optimizer = info.getAs<mlir::StringAttr>("optimizer").str();
  out.lr = num("lr");
  out.beta1 = num("beta1");
  out.beta2 = num("beta2");
  out.eps = num("eps");
  out.weightDecay = num("weight_decay");
  out.weightDecayPost = num("weight_decay_post");
  return true;
}

} // namespace

std::string optimizerJson(mlir::ModuleOp module, const PipelineOptions &in) {
  PipelineOptions o;
  std::string error;
  if (!effectiveOptimizer(module, in, o, error))
    o = in;
  std::string source = module->hasAttr(kTrainingInfoAttr) ? "training_info" : "flags";
  char buf[640];
  const OptimizerSpec *spec = findOptimizer(o.optimizer);
  if (spec && spec->kind == OptimizerKind::Adam)  // the operator's names, at the float32 it uses
    std::snprintf(buf, sizeof buf,
                  "{\"name\": \"adam\", \"domain\": \"ai.onnx.preview.training\", "
                  "\"R\": %.9g, \"alpha\": %.9g, \"beta\": %.9g, "
                  "\"epsilon\": %.9g, \"norm_coefficient\": %.9g, "
                  "\"norm_coefficient_post\": %.9g, \"T\": \"adam.T\", "
                  "\"V\": \"adam.V:NAME\", \"H\": \"adam.H:NAME\", "
                  "\"source\": \"%s\"}",
                  (double)(float)o.lr, (double)(float)o.beta1, (double)(float)o.beta2,
                  (double)(float)o.eps, (double)(float)o.weightDecay,
                  (double)(float)o.weightDecayPost, source.c_str());
  else
    std::snprintf(buf, sizeof buf,
                  "{\"name\": \"%s\", \"lr\": %.17g, \"beta1\": %.17g, "
                  "\"beta2\": %.17g, \"eps\": %.17g, \"weight_decay\": %.17g}",
                  o.optimizer.c_str(), o.lr, o.beta1, o.beta2, o.eps,
                  o.weightDecay);
  return buf;
}

bool nativeBf16Dot() {
  const char *isa = hc::rt::setting(hc::rt::Setting::Isa);
  if (isa && std::string(isa) != "avx512")
    return false;  // a ceiling below AVX-512
  return __builtin_cpu_supports("avx512bf16") && __builtin_cpu_supports("avx512f");
}

bool runGraphPipeline(mlir::ModuleOp module, const PipelineOptions &given,
                      std::string &error, bool *badInput) {
  PipelineOptions options;
  if (given.train && !given.sampler &&
      !effectiveOptimizer(module, given, options, error)) {
    if (badInput)
      *badInput = true;
    return false;
  }
  if (!given.train || given.sampler)
    options = given;
  // Planned for this machine without a bf16 dot product: its bf16 GEMMs run
  // at the fp32 rate (emulated), and hc-automem must price their
  // recomputation so (the built-in rates are vdpbf16ps's: on a Zen 3 they
  // had an S/2 step under --mem-budget recompute fc1 GEMMs, 7% slower).
  if (options.precision == "bf16" && options.topology == "native" && !nativeBf16Dot() &&
      !resolveMachineRates(options.rates, options.ratesResolved, error, true)) {
    if (badInput)
      *badInput = true;
    return false;
  }
  mlir::PassManager pm(module.getContext());
  if (options.fuse)
    addFusionPipeline(pm, options.fuseModulatedLayerNorm);
  if (options.sampler)
    pm.addPass(createExtractSampler());
  if (options.train && !options.sampler) {
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
    opt.weightDecayPost = options.weightDecayPost;
    pm.addPass(createOptimizer(opt));
    pm.addPass(mlir::createCanonicalizerPass());
    pm.addPass(mlir::createCSEPass());
  }
  if (options.fuse && options.fuseBiasGrads && options.train && !options.sampler)
    pm.nest<mlir::func::FuncOp>().addPass(createFuseBiasGrads());
  // Epilogue fusion sees the whole step: forward GELUs and their gradients.
  // Off by default: measured slower than the separate passes it removes
  // (bench/results-epilogue-zen5-2core.txt).
  if (options.fuse && options.fuseGemmEpilogues)
    pm.nest<mlir::func::FuncOp>().addPass(createFuseGemmEpilogues());
  // After the epilogue fusion, whose fused ops it marks too.
  if (options.precision == "bf16")
    pm.nest<mlir::func::FuncOp>().addPass(createBf16Gemms());
  if (options.schedule) {
    LowerToScheduleOptions lower;
    lower.bucketBytes = options.bucketBytes;
    pm.addPass(createLowerToSchedule(lower));
    // Before every pass that counts, moves or cuts bytes.
    if (options.precision == "bf16" && options.bf16Storage)
      pm.addPass(createBf16Storage());
    AutoMemOptions mem;
    mem.memBudget = options.memBudget;
    mem.fastMem = options.fastMem;
    mem.topology = options.topology;
    mem.ranksPerNode = options.ranksPerNode;
    mem.rates = options.ratesResolved;
    mem.offloadDir = options.offloadDir;
    mem.segments = options.memSegments;
    mem.recompute = options.memRecompute;
    mem.lookahead = options.memLookahead;
    pm.addPass(createAutoMem(mem));
    pm.addPass(createPlanBuffers());
    PlanPlacementOptions place;
    place.topology = options.topology;
    place.clusters = options.clusters;
    place.ranksPerNode = options.ranksPerNode;
    place.commCores = options.commCores;
    pm.addPass(createPlanPlacement(place));
    if (options.cftp) {
      CftpOptions cftp;
      cftp.rates = options.ratesResolved;
      // The refusal names --clusters: only when it was given. With the
      // topology's own clusters such a step stays unsplit (hcs.cftp says so).
      cftp.strictBatch = options.clusters > 0;
      cftp.partialGrads = options.cftpPartialGrads;
      pm.addPass(createCftp(cftp));
      pm.addPass(createPlanStreamBuffers());
    }
    // After every pass that may add a write (tier copies, CFTP's cuts).
    pm.addPass(createConstantWeights());
    pm.addPass(createVerifyPlan());
  }
  std::string diagnostics;
  mlir::ScopedDiagnosticHandler capture(module.getContext(),
                                        [&](mlir::Diagnostic &d) {
                                          if (!diagnostics.empty())
                                            diagnostics += "; ";
                                          std::string text = d.str();
                                          if (text.rfind("--sampler:", 0) == 0) {
                                            // Name the ONNX node (the op's location).
                                            std::string where;
                                            llvm::raw_string_ostream os(where);
                                            os << d.getLocation();
                                            text = os.str() + ": " + text;
                                          }
                                          diagnostics += text;
                                          return mlir::success();
                                        });
  if (mlir::failed(pm.run(module))) {
    // A pass's refusal of a flag's value (it names the flag, a row of the
    // options table) or of the model is the user's, not hc's.
    bool user = namesCompileFlag(diagnostics) ||
                diagnostics.find("no trainable parameter") != std::string::npos;
    if (badInput)
      *badInput = user;
    error = (user ? "" : "internal error in the graph pipeline: ") + diagnostics;
    return false;
  }
  return true;
}

} // namespace hc
