// Pipeline assembly: which passes run after import, shared by hc-compile and
// the test tools so they always see the same IR. The flags that configure
// it are rows of hc-compile's options table (CompileOptions.h).
#ifndef HC_COMPILER_PIPELINE_H
#define HC_COMPILER_PIPELINE_H

#include "mlir/IR/BuiltinOps.h"

#include <string>
#include <vector>

namespace hc {

// The all-reduce's cost model: alpha (per message, seconds), bandwidth
// (bytes/s) and ranks. A bucket pays ~2 log2(P) alpha of latency and moves
// 2 (P-1)/P of its bytes; the bucket size is the smallest power of two
// (64 KiB .. 256 MiB) whose latency is at most a tenth of its transfer
// time, so buckets stay small (more overlap with backward) until latency
// would dominate.
struct LinkModel {
  double alphaSeconds, bytesPerSecond;
  int64_t ranks;
};
inline constexpr LinkModel kDefaultLink = {7e-6, 6e9, 2};
int64_t bucketBytesForLink(const LinkModel &link);

struct PipelineOptions {
  bool fuse = true;   // the fusion passes (hc-fuse)
  // GELU and its gradient into GEMM epilogues after autodiff (opt-in: on
  // the machines measured the separate vectorized passes are faster)
  bool fuseGemmEpilogues = false;
  // A weight gradient and the bias gradient that sums its dY as one call
  // after autodiff (hc-fuse-bias-grads; same bits, one pass over dY fewer)
  bool fuseBiasGrads = true;
  // A layer norm and the modulate that is its only user as one op
  // (hc-fuse-modulated-layer-norm): one pass over x forward, one over dy
  // and x backward, x_hat never stored
  bool fuseModulatedLayerNorm = true;
  // "fp32" or "bf16" (hc-bf16-gemms: GEMM-class ops take bf16-rounded
  // inputs, fp32 accumulation; everything else stays fp32)
  std::string precision = "fp32";
  // With bf16: the activations only bf16 GEMMs read stored as bf16
  // (hc-bf16-storage; the same bits, half their bytes)
  bool bf16Storage = true;
  bool train = false; // autodiff + optimizer: the whole training step
  bool schedule = false;  // lower to the schedule level and plan buffers
  // Forward only (hc-extract-sampler): the model's full output, no loss,
  // no gradients, no optimizer. Excludes `train`.
  bool sampler = false;
  // Gradient all-reduce bucket bytes: from the link model (--link), or
  // --bucket-mb. The default link is this project's 2-rank shared-memory
  // measurement (bench/results-allreduce-2rank.txt), giving 1 MiB.
  int64_t bucketBytes = bucketBytesForLink(kDefaultLink);
  bool bucketGiven = false, linkGiven = false;
  std::vector<std::string> freeze;  // beyond the model's own frozen set
  bool allowSharedParams = false;   // --allow-shared-params (the importer's)
  std::string optimizer = "adamw";  // adamw | adam | sgd
  // Adam (ONNX): R, alpha, beta, epsilon, norm_coefficient(_post).
  double lr = 1e-4, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weightDecay = 0.0,
         weightDecayPost = 0.0;
  bool epsGiven = false;  // adam's default epsilon is the operator's, 1e-6
  std::vector<std::string> optimizerFlags;  // given on the command line
  // The machine planned for (hc-plan-placement): --topology, --clusters,
  // --ranks-per-node, --comm-cores.
  std::string topology = "native";
  int64_t clusters = 0, ranksPerNode = 1, commCores = 0;
  // AutoMem (hc-automem): --mem-budget and --fast-mem in bytes (0: none).
  int64_t memBudget = 0, fastMem = 0;
  // --rates: the machine's rates, which hc-automem's and hc-cftp's cost
  // models both price with (one syntax: hc/Passes/Passes.h); `rates` as
  // given (the description records it), `ratesResolved` read once from it,
  // every key as KEY=VALUE, what the passes get. Empty: the built-in ones.
  std::string rates, ratesResolved;
  std::string offloadDir;  // --offload-dir: the disk tier's folder
  std::string memSegments = "auto";  // --mem-segments auto|on|off
  std::string memRecompute = "auto";  // --mem-recompute auto|off
  std::string memLookahead = "auto";  // --mem-lookahead: calls a tier copy runs beside

  // CFTP (hc-cftp, --cftp on|off): one stream of calls per cluster; off
  // leaves every call on the whole team, split inside the kernels.
  bool cftp = true;
  // --cftp-partial-grads on|off (hc-cftp's partial-grads; on: S/2 0.9-2.4%
  // faster on a Zen 3 once the streams waited on data alone, B/2 even;
  // off: the feature cut, which keeps --cftp off's bits).
  bool cftpPartialGrads = true;
};

// The step description's "optimizer" object: name and hyper-parameters
// (the values the step uses), and where they came from.
std::string optimizerJson(mlir::ModuleOp module, const PipelineOptions &options);

// Whether this machine's GEMMs have a bf16 dot product (AVX512-BF16, with
// HC_ISA allowing AVX-512, as libhcrt's dispatch reads them). Without it
// bf16 GEMMs widen their operands to fp32 and run at the fp32 rate.
bool nativeBf16Dot();

// Runs the graph-level passes on an imported module (configured by its
// training_info when it has one). False + one-line `error`; `badInput`
// tells a user error (e.g. an unknown --freeze name) from an internal one.
bool runGraphPipeline(mlir::ModuleOp module, const PipelineOptions &options,
                      std::string &error, bool *badInput = nullptr);

} // namespace hc

#endif // HC_COMPILER_PIPELINE_H
