#include "hc/Compiler/Pipeline.h"

#include "hc/Passes/Optimizers.h"
#include "hc/Passes/Passes.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Transforms/Passes.h"

#include "hc/base/topology.h"

#include <cmath>
#include <unistd.h>
#include <cstdlib>

namespace hc {

const char *pipelineFlagsHelp() {
  return R"(  --no-fuse        skip the fusion passes (the IR stays as the exporter
                   decomposed it)
  --allow-shared-params  train a parameter that two modules share (tied on
                   purpose); without it such an initializer, where the other
                   module's own parameter is missing from the file, is
                   refused: an eval-mode export with constant folding merged
                   parameters that merely held equal values
  --fuse-gemm-epilogues  after autodiff, run GELU and its gradient in the
                   GEMMs' epilogues (linear_gelu, linear_grad_input_gelu).
                   Off by default: measured slower than the GEMM plus the
                   separate vectorized pass on AVX-512 (bench/results-epilogue-*)
  --precision P    fp32 (default) or bf16: mixed precision, an extension
                   beyond the paper. The GEMMs (linear, its gradients,
                   matmul) round their two inputs to bf16 and accumulate
                   in fp32 (AVX512-BF16 where the CPU has it); norms,
                   softmax, attention, the loss, the optimizer, parameters
                   and optimizer state stay fp32
  --freeze A,B     parameters that get no gradient and no update, beyond
                   the model's own frozen set (ONNX metadata "hc.frozen",
                   e.g. DiT's fixed pos_embed)
  --optimizer O    adamw (default, as torch.optim.AdamW), adam (ONNX's
                   ai.onnx.preview.training Adam, T = completed steps) or
                   sgd (no momentum). A model with training_info brings its
                   own optimizer; these flags are refused then
  --lr X           learning rate (default 1e-4; Adam's R)
  --beta1 X        AdamW beta1 / Adam alpha (default 0.9)
  --beta2 X        AdamW beta2 / Adam beta (default 0.999)
  --eps X          AdamW epsilon (default 1e-8) / Adam epsilon, added outside
                   the square root (default 1e-6, the operator's)
  --weight-decay X decoupled weight decay for AdamW, L2 for SGD and Adam
                   (Adam's norm_coefficient; default 0)
  --weight-decay-post X  Adam's norm_coefficient_post: X <- (1 - it) X after
                   the update (default 0)
  --link A,B,P     the all-reduce's link: A microseconds per message, B GB/s,
                   P ranks (default 7,6,2: two ranks over shared memory,
                   measured by bench/hc-bench-allreduce); the bucket size is
                   the smallest power of two (64 KiB..256 MiB) whose latency,
                   ~2 log2(P) A, is at most a tenth of its transfer time,
                   2 (P-1)/P bytes / B (default link: 1 MiB)
  --bucket-mb X    gradient all-reduce bucket size in MiB, overriding --link
  --topology SPEC  the machine to plan for: native (default, this machine,
                   read with hwloc), an hwloc XML file (lstopo FILE.xml; the
                   only form that carries memory kinds such as HBM) or an
                   hwloc synthetic string ("pack:2 numa:1 l3:1 core:8 pu:1")
  --clusters K     cut the topology's cores into K clusters (for machines
                   whose caches draw no lines; a cluster may not span NUMA
                   nodes)
  --ranks-per-node N  ranks sharing one node; each takes a contiguous share
                   of its cores in cluster order (default 1)
  --comm-cores C   cores per rank reserved for communication progress and
                   copies, the last of its share (default 0)
  --mem-budget B   bytes the step's resident set may use (suffix K, M, G:
                   powers of 1024): arenas plus the host's inputs plus 64 MiB.
                   hc-automem recomputes the activations cheapest to
                   recompute (by its cost model) until the plan fits, or
                   fails naming what the smallest plan needs
  --fast-mem B     plan B bytes of DRAM as a fast memory tier holding the
                   activations (without it: the HBM of an hwloc XML
                   --topology, if any); activations that do not fit are
                   offloaded to DRAM and prefetched back, or recomputed,
                   whichever the cost model finds cheaper
  --mem-rates R    the cost model's rates, gemm=GFLOPS,gemm_bf16=GFLOPS,
                   attention=GFLOPS, memory=GBPS (per thread of the rank's
                   cores), copy=GBPS,
                   disk=GBPS (defaults: measured on a 2-core Zen 5,
                   passes/lib/CostModel.h)
  --offload-dir D  a disk tier in folder D (an NVMe file system on a
                   cluster): activations hc-automem moves go to a file
                   there, which frees memory for --mem-budget; the cost
                   model still recomputes where the disk is slower.
                   hc-run --offload-dir overrides D where the step runs
  --mem-segments M auto (default), on or off: with a budget, also plan with
                   the forward cut into segments where one activation
                   carries the step (a DiT's block inputs); each segment
                   keeps its cut and recomputes the rest before its
                   backward. auto keeps the plan predicted cheaper; on
                   always segments, off never
  --cftp on|off    communication-free tensor parallelism (default on): with
                   more than one cluster per rank, each cluster runs its own
                   stream of calls, calls cut across clusters where the cost
                   model says so, waits only where data crosses (hc-cftp);
                   off: every call on the whole team
  --cftp-rates FILE  measured kernel rates for CFTP's cost model (key value
                   lines, bench/cftp_rates.py; default built in)
)";
}

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

// --topology SPEC, loaded once here so a bad one is refused before any work.
int parseTopologyFlag(const std::string &value, PipelineOptions &o,
                      std::string &error) {
  rt::TopologySource source = rt::parseTopologySpec(value);
  if (source.kind == rt::TopologySource::Kind::XmlFile &&
      access(value.c_str(), R_OK) != 0) {
    error = "--topology " + value + ": cannot read the file";
    return -1;
  }
  rt::Topology topo;
  std::string why;
  if (!rt::discoverTopology(source, topo, why)) {
    error = "--topology " + value + ": " + why +
            " (give native, an hwloc XML file or an hwloc synthetic string)";
    return -1;
  }
  o.topology = value.empty() ? "native" : value;
  return 1;
}

// "2500000000", "2.3G", "512M": bytes (K, M, G, T are powers of 1024).
bool parseBytes(const std::string &text, int64_t &bytes) {
  char *end = nullptr;
  double x = std::strtod(text.c_str(), &end);
  if (text.empty() || end == text.c_str())
    return false;
  double scale = 1;
  std::string suffix = end;
  if (suffix == "K" || suffix == "k")
    scale = 1024.0;
  else if (suffix == "M")
    scale = 1024.0 * 1024;
  else if (suffix == "G")
    scale = 1024.0 * 1024 * 1024;
  else if (suffix == "T")
    scale = 1024.0 * 1024 * 1024 * 1024;
  else if (!suffix.empty())
    return false;
  double v = x * scale;
  if (!std::isfinite(v) || v < 1 || v > 9e18)
    return false;
  bytes = static_cast<int64_t>(v);
  return true;
}

} // namespace

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
  if (arg == "--fuse-gemm-epilogues" && !inlineValue) {
    o.fuseGemmEpilogues = true;
    return 1;
  }
  if (arg == "--allow-shared-params" && !inlineValue) {
    o.allowSharedParams = true;
    return 1;
  }
  // Every flag that takes a value; `machine` ones do not change the
  // optimizer's arithmetic (the others conflict with a training_info).
  struct ValuedFlag {
    const char *name;
    bool machine;
  };
  static const ValuedFlag valued[] = {
      {"--freeze", false},       {"--optimizer", false},     {"--lr", false},
      {"--beta1", false},        {"--beta2", false},         {"--eps", false},
      {"--weight-decay", false}, {"--weight-decay-post", false},
      {"--bucket-mb", true},     {"--link", true},           {"--precision", true},
      {"--topology", true},      {"--clusters", true},       {"--ranks-per-node", true},
      {"--comm-cores", true},    {"--cftp", true},           {"--cftp-rates", true},
      {"--mem-budget", true},    {"--fast-mem", true},       {"--mem-rates", true},
      {"--offload-dir", true},   {"--mem-segments", true}};
  const ValuedFlag *flag = std::find_if(std::begin(valued), std::end(valued),
                                        [&](const ValuedFlag &f) { return arg == f.name; });
  if (flag == std::end(valued))
    return 0;
  if (!flag->machine)
    o.optimizerFlags.push_back(arg);
  if (!inlineValue) {
    if (i + 1 >= argc) {
      error = arg + " needs a value";
      return -1;
    }
    value = argv[++i];
  }
  if (arg == "--topology")
    return parseTopologyFlag(value, o, error);
  if (arg == "--mem-budget" || arg == "--fast-mem") {
    int64_t bytes = 0;
    if (!parseBytes(value, bytes)) {
      error = arg + " needs a positive byte count such as 2500000000 or 2.3G, got '" +
              value + "'";
      return -1;
    }
    (arg == "--mem-budget" ? o.memBudget : o.fastMem) = bytes;
    return 1;
  }
  if (arg == "--mem-rates") {
    o.memRates = value;
    return 1;
  }
  if (arg == "--mem-segments") {
    if (value != "auto" && value != "on" && value != "off") {
      error = "--mem-segments wants auto, on or off, got '" + value + "'";
      return -1;
    }
    o.memSegments = value;
    return 1;
  }
  if (arg == "--offload-dir") {
    if (value.empty()) {
      error = "--offload-dir needs a folder";
      return -1;
    }
    o.offloadDir = value;
    return 1;
  }
  if (arg == "--cftp") {
    if (value != "on" && value != "off") {
      error = "--cftp must be on or off, got '" + value + "'";
      return -1;
    }
    o.cftp = value == "on";
    return 1;
  }
  if (arg == "--cftp-rates") {
    if (value.empty() || access(value.c_str(), R_OK) != 0) {
      error = "--cftp-rates " + value + ": cannot read the file";
      return -1;
    }
    o.cftpRates = value;
    return 1;
  }
  if (arg == "--clusters" || arg == "--ranks-per-node" || arg == "--comm-cores") {
    char *end = nullptr;
    long long v = std::strtoll(value.c_str(), &end, 10);
    long long lo = arg == "--comm-cores" ? 0 : 1;
    if (value.empty() || *end || v < lo || v > 65536) {
      error = arg + " needs an integer from " + std::to_string(lo) +
              " to 65536, got '" + value + "'";
      return -1;
    }
    (arg == "--clusters" ? o.clusters
     : arg == "--ranks-per-node" ? o.ranksPerNode : o.commCores) = v;
    return 1;
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
  if (arg == "--precision") {
    if (value != "fp32" && value != "bf16") {
      error = "--precision must be fp32 or bf16, got '" + value + "'";
      return -1;
    }
    o.precision = value;
    return 1;
  }
  if (arg == "--optimizer") {
    if (!findOptimizer(value)) {
      error = "--optimizer must be " + optimizerNames() + ", got '" + value + "'";
      return -1;
    }
    o.optimizer = value;
    return 1;
  }
  if (arg == "--link") {
    LinkModel link{};
    char *e1 = nullptr, *e2 = nullptr, *e3 = nullptr;
    double a = std::strtod(value.c_str(), &e1);
    double b = *e1 == ',' ? std::strtod(e1 + 1, &e2) : 0;
    long long p = e2 && *e2 == ',' ? std::strtoll(e2 + 1, &e3, 10) : 0;
    if (!e3 || *e3 || !(a > 0 && a < 1e6) || !(b > 0 && b < 1e6) || p < 2 ||
        p > (1 << 24)) {
      error = "--link needs MICROSECONDS,GBPS,RANKS (e.g. 7,6,2; latency and "
              "bandwidth positive, at least 2 ranks), got '" + value + "'";
      return -1;
    }
    link = {a * 1e-6, b * 1e9, p};
    o.linkGiven = true;
    if (o.bucketGiven) {
      error = "--link and --bucket-mb both set the bucket size; give one";
      return -1;
    }
    o.bucketBytes = bucketBytesForLink(link);
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
    if (o.linkGiven) {
      error = "--link and --bucket-mb both set the bucket size; give one";
      return -1;
    }
    o.bucketBytes = static_cast<int64_t>(x * (1 << 20)) / 64 * 64;
    o.bucketGiven = true;
    return 1;
  }
  if ((arg == "--beta1" || arg == "--beta2") && x >= 1) {
    error = arg + " must be in [0, 1), got '" + value + "'";
    return -1;
  }
  if (arg == "--weight-decay-post" && x >= 1) {
    error = arg + " must be in [0, 1), got '" + value + "'";
    return -1;
  }
  o.epsGiven |= arg == "--eps";
  (arg == "--lr"             ? o.lr
   : arg == "--beta1"        ? o.beta1
   : arg == "--beta2"        ? o.beta2
   : arg == "--eps"          ? o.eps
   : arg == "--weight-decay" ? o.weightDecay
                             : o.weightDecayPost) = x;
  return 1;
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
  mlir::PassManager pm(module.getContext());
  if (options.fuse)
    addFusionPipeline(pm);
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
    AutoMemOptions mem;
    mem.memBudget = options.memBudget;
    mem.fastMem = options.fastMem;
    mem.topology = options.topology;
    mem.ranksPerNode = options.ranksPerNode;
    mem.rates = options.memRates;
    mem.offloadDir = options.offloadDir;
    mem.segments = options.memSegments;
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
      cftp.rates = options.cftpRates;
      // The refusal names --clusters: only when it was given. With the
      // topology's own clusters such a step stays unsplit (hcs.cftp says so).
      cftp.strictBatch = options.clusters > 0;
      pm.addPass(createCftp(cftp));
    }
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
    // The autodiff pass's command-line and model errors, not hc's.
    bool user = diagnostics.find("--freeze ") != std::string::npos ||
                diagnostics.find("--sampler: ") != std::string::npos ||
                diagnostics.find("no trainable parameter") != std::string::npos ||
                diagnostics.find("--clusters ") != std::string::npos ||
                diagnostics.find("--cftp-rates ") != std::string::npos ||
                diagnostics.find("--ranks-per-node ") != std::string::npos ||
                diagnostics.find("--comm-cores ") != std::string::npos ||
                diagnostics.find("--mem-budget ") != std::string::npos ||
                diagnostics.find("--fast-mem ") != std::string::npos ||
                diagnostics.find("--mem-rates: ") != std::string::npos ||
                diagnostics.find("--offload-dir ") != std::string::npos;
    if (badInput)
      *badInput = user;
    error = (user ? "" : "internal error in the graph pipeline: ") + diagnostics;
    return false;
  }
  return true;
}

} // namespace hc
