// hc-compile's options as one table: each row is a flag with its value's
// name, its group, how it is parsed and checked, how its value is recorded
// in the step description, and its help. Parsing, --help and the record
// are generated from the rows; nothing else lists the flags.
#include "hc/Compiler/CompileOptions.h"

#include "hc/Passes/Optimizers.h"
#include "hc/Passes/Passes.h"

#include "hc/base/topology.h"

#include "llvm/Support/JSON.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <unistd.h>

namespace hc {
namespace {

enum class Group {
  Output,     // what hc-compile makes and how (hc-compile's own)
  Driver,     // the graph pipeline's shape
  Machine,    // the machine planned for: changes no result
  Optimizer,  // the optimizer's arithmetic: refused beside a training_info
};

using Setter = int (*)(const std::string &value, CompileOptions &o, std::string &error);
using Getter = std::string (*)(const CompileOptions &o);

struct Flag {
  const char *name;
  const char *alias;    // another spelling, or nullptr
  const char *metavar;  // the value's name; nullptr: a switch
  Group group;
  Setter set;
  Getter get;           // nullptr: not recorded in the description
  const char *help;
};

// ------------------------------------------------------------ value parsers

std::string number(double x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.9g", x);
  return buf;
}

bool parseNumber(const std::string &flag, const std::string &value, double &x,
                 std::string &error) {
  char *end = nullptr;
  x = std::strtod(value.c_str(), &end);
  if (value.empty() || *end || !std::isfinite(x) || x < 0) {
    error = flag + " needs a non-negative number, got '" + value + "'";
    return false;
  }
  return true;
}

int parseInteger(const std::string &flag, const std::string &value, long long lo,
                 long long hi, int64_t &out, std::string &error) {
  char *end = nullptr;
  long long v = std::strtoll(value.c_str(), &end, 10);
  if (value.empty() || *end || v < lo || v > hi) {
    error = flag + " needs an integer from " + std::to_string(lo) + " to " +
            std::to_string(hi) + ", got '" + value + "'";
    return -1;
  }
  out = v;
  return 1;
}

// "2500000000", "2.3G", "512M": bytes (K, M, G, T are powers of 1024).
int parseBytes(const std::string &flag, const std::string &text, int64_t &bytes,
               std::string &error) {
  char *end = nullptr;
  double x = std::strtod(text.c_str(), &end);
  double scale = 0;
  std::string suffix = text.empty() || end == text.c_str() ? "?" : end;
  if (suffix.empty())
    scale = 1;
  else if (suffix == "K" || suffix == "k")
    scale = 1024.0;
  else if (suffix == "M")
    scale = 1024.0 * 1024;
  else if (suffix == "G")
    scale = 1024.0 * 1024 * 1024;
  else if (suffix == "T")
    scale = 1024.0 * 1024 * 1024 * 1024;
  double v = x * scale;
  if (scale == 0 || !std::isfinite(v) || v < 1 || v > 9e18) {
    error = flag + " needs a positive byte count such as 2500000000 or 2.3G, got '" +
            text + "'";
    return -1;
  }
  bytes = static_cast<int64_t>(v);
  return 1;
}

int parseChoice(const std::string &flag, const std::string &value,
                std::initializer_list<const char *> choices, std::string &out,
                std::string &error) {
  for (const char *c : choices)
    if (value == c) {
      out = value;
      return 1;
    }
  std::string list;
  size_t k = 0;
  for (const char *c : choices)
    list += std::string(k++ == 0 ? "" : k == choices.size() ? " or " : ", ") + c;
  error = flag + " must be " + list + ", got '" + value + "'";
  return -1;
}

// An optimizer hyper-parameter: a non-negative number below `below`.
int parseHyper(const char *flag, const std::string &value, double below, double &out,
               std::string &error) {
  double x = 0;
  if (!parseNumber(flag, value, x, error))
    return -1;
  if (x >= below) {
    error = std::string(flag) + " must be in [0, " + number(below) + "), got '" + value + "'";
    return -1;
  }
  out = x;
  return 1;
}

constexpr double kNoBound = 1e300;

// --topology SPEC, loaded once here so a bad one is refused before any work.
int parseTopology(const std::string &value, CompileOptions &o, std::string &error) {
  rt::TopologySource source = rt::parseTopologySpec(value);
  if (source.kind == rt::TopologySource::Kind::XmlFile && access(value.c_str(), R_OK) != 0) {
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
  o.pipeline.topology = value.empty() ? "native" : value;
  return 1;
}

int parseLink(const std::string &value, CompileOptions &o, std::string &error) {
  char *e1 = nullptr, *e2 = nullptr, *e3 = nullptr;
  double a = std::strtod(value.c_str(), &e1);
  double b = *e1 == ',' ? std::strtod(e1 + 1, &e2) : 0;
  long long p = e2 && *e2 == ',' ? std::strtoll(e2 + 1, &e3, 10) : 0;
  if (!e3 || *e3 || !(a > 0 && a < 1e6) || !(b > 0 && b < 1e6) || p < 2 || p > (1 << 24)) {
    error = "--link needs MICROSECONDS,GBPS,RANKS (e.g. 7,6,2; latency and "
            "bandwidth positive, at least 2 ranks), got '" + value + "'";
    return -1;
  }
  if (o.pipeline.bucketGiven) {
    error = "--link and --bucket-mb both set the bucket size; give one";
    return -1;
  }
  o.pipeline.linkGiven = true;
  o.pipeline.bucketBytes = bucketBytesForLink({a * 1e-6, b * 1e9, p});
  return 1;
}

int parseBucket(const std::string &value, CompileOptions &o, std::string &error) {
  double x = 0;
  if (!parseNumber("--bucket-mb", value, x, error))
    return -1;
  if (x <= 0 || x > 4096) {
    error = "--bucket-mb must be in (0, 4096], got '" + value + "'";
    return -1;
  }
  if (o.pipeline.linkGiven) {
    error = "--link and --bucket-mb both set the bucket size; give one";
    return -1;
  }
  o.pipeline.bucketBytes = static_cast<int64_t>(x * (1 << 20)) / 64 * 64;
  o.pipeline.bucketGiven = true;
  return 1;
}

int parseFreeze(const std::string &value, CompileOptions &o, std::string &error) {
  std::string item;
  for (size_t k = 0; k <= value.size(); ++k) {
    if (k == value.size() || value[k] == ',') {
      if (item.empty()) {
        error = "--freeze has an empty name in '" + value + "'";
        return -1;
      }
      o.pipeline.freeze.push_back(item);
      item.clear();
    } else {
      item += value[k];
    }
  }
  return 1;
}

int parseTarget(const std::string &value, CompileOptions &o, std::string &error) {
  // A name, not a flag or words: it becomes one "-march=" argument.
  if (value.empty() || value[0] == '-' ||
      value.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                              "0123456789_.-+") != std::string::npos) {
    error = "--target needs an -march name, got '" + value + "'";
    return -1;
  }
  o.target = value;
  return 1;
}

std::string joined(const std::vector<std::string> &items) {
  std::string s;
  for (const std::string &x : items)
    s += (s.empty() ? "" : ",") + x;
  return s;
}

std::string onOff(bool b) { return b ? "on" : "off"; }

// ------------------------------------------------------------------ table

#define PO o.pipeline
const Flag kFlags[] = {
    {"-o", nullptr, "FILE", Group::Output,
     [](const std::string &v, CompileOptions &o, std::string &) { return o.output = v, 1; },
     nullptr,
     "output file: the step library, with its initial parameters written beside it as "
     "FILE.init.safetensors; for --emit=STAGE the text (default stdout)"},
    {"--batch", nullptr, "N", Group::Output,
     [](const std::string &v, CompileOptions &o, std::string &e) {
       return parseInteger("--batch", v, 1, 1LL << 20, o.batch, e);
     },
     [](const CompileOptions &o) { return std::to_string(o.batch); },
     "per-rank batch; fixes a dynamic batch axis (required then)"},
    {"--emit", nullptr, "STAGE", Group::Output,
     [](const std::string &v, CompileOptions &o, std::string &e) {
       return parseChoice("--emit", v, {"hc", "train", "schedule", "cpp"}, o.emit, e);
     },
     nullptr,
     "hc: the verified hc graph IR after import and fusion. train: the whole training step "
     "as one function (inputs, parameters and optimizer state in; loss, gradients "
     "grad:NAME, updated parameters param:NAME and state out). schedule: buffers, views and "
     "kernel calls, planned. cpp: the generated C++ of the step library"},
    {"--target", nullptr, "ARCH", Group::Output, parseTarget,
     [](const CompileOptions &o) { return o.target; },
     "-march for the generated code (default: native)"},
    {"--sampler", nullptr, nullptr, Group::Driver,
     [](const std::string &, CompileOptions &o, std::string &) { return PO.sampler = true, 1; },
     [](const CompileOptions &o) { return onOff(PO.sampler); },
     "a forward-only sampling library instead of a training step: the graph cut at the "
     "model's full output (learned-sigma channels included), no loss, gradients or "
     "optimizer; inputs x_t, t, y; read by `hc-run sample`. --batch is the model batch per "
     "call (with guidance: 2 x images)"},
    {"--no-fuse", nullptr, nullptr, Group::Driver,
     [](const std::string &, CompileOptions &o, std::string &) { return PO.fuse = false, 1; },
     [](const CompileOptions &o) { return onOff(!PO.fuse); },
     "skip the fusion passes (the IR stays as the exporter decomposed it)"},
    {"--allow-shared-params", nullptr, nullptr, Group::Driver,
     [](const std::string &, CompileOptions &o, std::string &) {
       return PO.allowSharedParams = true, 1;
     },
     [](const CompileOptions &o) { return onOff(PO.allowSharedParams); },
     "train a parameter that two modules share (tied on purpose); without it such an "
     "initializer, where the other module's own parameter is missing from the file, is "
     "refused: an eval-mode export with constant folding merged parameters that merely "
     "held equal values"},
    {"--fuse-gemm-epilogues", nullptr, nullptr, Group::Machine,
     [](const std::string &, CompileOptions &o, std::string &) {
       return PO.fuseGemmEpilogues = true, 1;
     },
     [](const CompileOptions &o) { return onOff(PO.fuseGemmEpilogues); },
     "after autodiff, run GELU and its gradient in the GEMMs' epilogues (linear_gelu, "
     "linear_grad_input_gelu). Off by default: measured slower than the GEMM plus the "
     "separate vectorized pass on AVX-512 (bench/results-epilogue-*)"},
    {"--fuse-bias-grads", nullptr, "on|off", Group::Machine,
     [](const std::string &v, CompileOptions &o, std::string &e) {
       std::string s;
       if (parseChoice("--fuse-bias-grads", v, {"on", "off"}, s, e) < 0)
         return -1;
       return PO.fuseBiasGrads = s == "on", 1;
     },
     [](const CompileOptions &o) { return onOff(PO.fuseBiasGrads); },
     "after autodiff, each bias gradient's sum over dY in the weight gradient's GEMM "
     "(linear_grad_weight_bias; default on): the same bits, one pass over dY fewer"},
    {"--fuse-modulated-layer-norm", nullptr, "on|off", Group::Machine,
     [](const std::string &v, CompileOptions &o, std::string &e) {
       std::string s;
       if (parseChoice("--fuse-modulated-layer-norm", v, {"on", "off"}, s, e) < 0)
         return -1;
       return PO.fuseModulatedLayerNorm = s == "on", 1;
     },
     [](const CompileOptions &o) { return onOff(PO.fuseModulatedLayerNorm); },
     "adaLN's layer norm and its modulate as one op (modulated_layer_norm; default on): one "
     "pass over x forward and over dy and x backward, the normalized x never stored"},
    {"--precision", nullptr, "P", Group::Machine,
     [](const std::string &v, CompileOptions &o, std::string &e) {
       return parseChoice("--precision", v, {"fp32", "bf16"}, PO.precision, e);
     },
     [](const CompileOptions &o) { return PO.precision; },
     "fp32 (default) or bf16: mixed precision, an extension beyond the paper. The GEMMs "
     "(linear, its gradients, matmul) round their two inputs to bf16 and accumulate in "
     "fp32 (AVX512-BF16 where the CPU has it), and so do flash attention's products (Q, K, "
     "V, dO, the probabilities and dS rounded; its softmax fp32); norms, softmax, the "
     "loss, the optimizer, parameters and optimizer state stay fp32. Planned for this "
     "machine without AVX512-BF16, a warning: there it runs slower than fp32"},
    {"--bf16-storage", nullptr, "on|off", Group::Machine,
     [](const std::string &v, CompileOptions &o, std::string &e) {
       std::string s;
       if (parseChoice("--bf16-storage", v, {"on", "off"}, s, e) < 0)
         return -1;
       return PO.bf16Storage = s == "on", 1;
     },
     [](const CompileOptions &o) { return onOff(PO.bf16Storage); },
     "with --precision bf16: the activations that only bf16 products read (the "
     "modulated norms before qkv and fc1, the GELU before fc2, qkv before attention) "
     "stored as bf16 (hc-bf16-storage; default on): the products round them as they "
     "pack anyway, so the same bits in half the bytes"},
    {"--freeze", nullptr, "A,B", Group::Optimizer, parseFreeze,
     [](const CompileOptions &o) { return joined(PO.freeze); },
     "parameters that get no gradient and no update, beyond the model's own frozen set "
     "(ONNX metadata \"hc.frozen\", e.g. DiT's fixed pos_embed)"},
    {"--optimizer", nullptr, "O", Group::Optimizer,
     [](const std::string &v, CompileOptions &o, std::string &e) {
       if (!findOptimizer(v)) {
         e = "--optimizer must be " + optimizerNames() + ", got '" + v + "'";
         return -1;
       }
       return PO.optimizer = v, 1;
     },
     [](const CompileOptions &o) { return PO.optimizer; },
     "adamw (default, as torch.optim.AdamW), adam (ONNX's ai.onnx.preview.training Adam, "
     "T = completed steps) or sgd (no momentum). A model with training_info brings its own "
     "optimizer; these flags are refused then"},
    {"--lr", nullptr, "X", Group::Optimizer,
     [](const std::string &v, CompileOptions &o, std::string &e) {
       return parseHyper("--lr", v, kNoBound, PO.lr, e);
     },
     [](const CompileOptions &o) { return number(PO.lr); },
     "learning rate (default 1e-4; Adam's R)"},
    {"--beta1", nullptr, "X", Group::Optimizer,
     [](const std::string &v, CompileOptions &o, std::string &e) {
       return parseHyper("--beta1", v, 1, PO.beta1, e);
     },
     [](const CompileOptions &o) { return number(PO.beta1); },
     "AdamW beta1 / Adam alpha (default 0.9)"},
    {"--beta2", nullptr, "X", Group::Optimizer,
     [](const std::string &v, CompileOptions &o, std::string &e) {
       return parseHyper("--beta2", v, 1, PO.beta2, e);
     },
     [](const CompileOptions &o) { return number(PO.beta2); },
     "AdamW beta2 / Adam beta (default 0.999)"},
    {"--eps", nullptr, "X", Group::Optimizer,
     [](const std::string &v, CompileOptions &o, std::string &e) {
       PO.epsGiven = true;
       return parseHyper("--eps", v, kNoBound, PO.eps, e);
     },
     [](const CompileOptions &o) { return number(PO.eps); },
     "AdamW epsilon (default 1e-8) / Adam epsilon, added outside the square root (default "
     "1e-6, the operator's)"},
    {"--weight-decay", nullptr, "X", Group::Optimizer,
     [](const std::string &v, CompileOptions &o, std::string &e) {
       return parseHyper("--weight-decay", v, kNoBound, PO.weightDecay, e);
     },
     [](const CompileOptions &o) { return number(PO.weightDecay); },
     "decoupled weight decay for AdamW, L2 for SGD and Adam (Adam's norm_coefficient; "
     "default 0)"},
    {"--weight-decay-post", nullptr, "X", Group::Optimizer,
     [](const std::string &v, CompileOptions &o, std::string &e) {
       return parseHyper("--weight-decay-post", v, 1, PO.weightDecayPost, e);
     },
     [](const CompileOptions &o) { return number(PO.weightDecayPost); },
     "Adam's norm_coefficient_post: X <- (1 - it) X after the update (default 0)"},
    {"--link", nullptr, "A,B,P", Group::Machine, parseLink, nullptr,
     "the all-reduce's link: A microseconds per message, B GB/s, P ranks (default 7,6,2: "
     "two ranks over shared memory, measured by bench/hc-bench-allreduce); the bucket size "
     "is the smallest power of two (64 KiB..256 MiB) whose latency, ~2 log2(P) A, is at "
     "most a tenth of its transfer time, 2 (P-1)/P bytes / B (default link: 1 MiB)"},
    {"--bucket-mb", nullptr, "X", Group::Machine, parseBucket,
     [](const CompileOptions &o) { return number(PO.bucketBytes / double(1 << 20)); },
     "gradient all-reduce bucket size in MiB, overriding --link"},
    {"--topology", nullptr, "SPEC", Group::Machine, parseTopology,
     [](const CompileOptions &o) { return PO.topology; },
     "the machine to plan for: native (default, this machine, read with hwloc), an hwloc "
     "XML file (lstopo FILE.xml; the only form that carries memory kinds such as HBM) or an "
     "hwloc synthetic string (\"pack:2 numa:1 l3:1 core:8 pu:1\")"},
    {"--clusters", nullptr, "K", Group::Machine,
     [](const std::string &v, CompileOptions &o, std::string &e) {
       return parseInteger("--clusters", v, 1, 65536, PO.clusters, e);
     },
     [](const CompileOptions &o) { return std::to_string(PO.clusters); },
     "cut the topology's cores into K clusters (for machines whose caches draw no lines; a "
     "cluster may not span NUMA nodes)"},
    {"--ranks-per-node", nullptr, "N", Group::Machine,
     [](const std::string &v, CompileOptions &o, std::string &e) {
       return parseInteger("--ranks-per-node", v, 1, 65536, PO.ranksPerNode, e);
     },
     [](const CompileOptions &o) { return std::to_string(PO.ranksPerNode); },
     "ranks sharing one node; each takes a contiguous share of its cores in cluster order "
     "(default 1)"},
    {"--comm-cores", nullptr, "C", Group::Machine,
     [](const std::string &v, CompileOptions &o, std::string &e) {
       return parseInteger("--comm-cores", v, 0, 65536, PO.commCores, e);
     },
     [](const CompileOptions &o) { return std::to_string(PO.commCores); },
     "cores per rank reserved for communication progress and copies, the last of its share "
     "(default 0)"},
    {"--mem-budget", nullptr, "B", Group::Machine,
     [](const std::string &v, CompileOptions &o, std::string &e) {
       return parseBytes("--mem-budget", v, PO.memBudget, e);
     },
     [](const CompileOptions &o) { return std::to_string(PO.memBudget); },
     "bytes the step's resident set may use (suffix K, M, G: powers of 1024): arenas plus "
     "the host's inputs plus 64 MiB. hc-automem recomputes the activations cheapest to "
     "recompute (by its cost model) until the plan fits, or fails naming what the smallest "
     "plan needs. A sampler keeps packed copies of only those weights that fit what the "
     "plan leaves (hc-constant-weights)"},
    {"--fast-mem", nullptr, "B", Group::Machine,
     [](const std::string &v, CompileOptions &o, std::string &e) {
       return parseBytes("--fast-mem", v, PO.fastMem, e);
     },
     [](const CompileOptions &o) { return std::to_string(PO.fastMem); },
     "plan B bytes of DRAM as a fast memory tier holding the activations (without it: the "
     "HBM of an hwloc XML --topology, if any); activations that do not fit are offloaded to "
     "DRAM and prefetched back, or recomputed, whichever the cost model finds cheaper"},
    {"--rates", nullptr, "R", Group::Machine,
     [](const std::string &v, CompileOptions &o, std::string &e) {
       if (!resolveMachineRates(v, PO.ratesResolved, e))
         return -1;
       return PO.rates = v, 1;
     },
     [](const CompileOptions &o) { return PO.rates.empty() ? std::string("built-in") : PO.rates; },
     "the machine's rates, which hc-automem's and hc-cftp's cost models price with: "
     "KEY=VALUE items separated by commas, or files of such items one per line (# "
     "comments), as bench/cftp_rates.py writes them. Keys: gemm_gflops_per_thread, "
     "gemm_bf16_gflops_per_thread, attention_gflops_per_thread, attention_bf16_gflops_per_thread, "
     "stream_gbps_per_thread, "
     "call_us, fork_us, sync_us, copy_gbps, disk_gbps (default: measured on a 2-core Zen 5, "
     "bench/cftp-rates-zen5.txt; with --precision bf16 and --topology native on a CPU "
     "without AVX512-BF16, the bf16 rates not given are the fp32 ones: the runtime emulates "
     "bf16 GEMMs there)"},
    {"--offload-dir", nullptr, "D", Group::Machine,
     [](const std::string &v, CompileOptions &o, std::string &e) {
       if (v.empty()) {
         e = "--offload-dir needs a folder";
         return -1;
       }
       return PO.offloadDir = v, 1;
     },
     [](const CompileOptions &o) { return PO.offloadDir; },
     "a disk tier in folder D (an NVMe file system on a cluster): activations hc-automem "
     "moves go to a file there, which frees memory for --mem-budget; the cost model still "
     "recomputes where the disk is slower. hc-run --offload-dir overrides D where the step "
     "runs"},
    {"--mem-segments", nullptr, "M", Group::Machine,
     [](const std::string &v, CompileOptions &o, std::string &e) {
       return parseChoice("--mem-segments", v, {"auto", "on", "off"}, PO.memSegments, e);
     },
     [](const CompileOptions &o) { return PO.memSegments; },
     "auto (default), on or off: with a budget, also plan with the forward cut into "
     "segments where one activation carries the step (a DiT's block inputs); each segment "
     "keeps its cut and recomputes the rest before its backward. auto keeps the plan "
     "predicted cheaper; on always segments, off never"},
    {"--mem-recompute", nullptr, "M", Group::Machine,
     [](const std::string &v, CompileOptions &o, std::string &e) {
       return parseChoice("--mem-recompute", v, {"auto", "off"}, PO.memRecompute, e);
     },
     [](const CompileOptions &o) { return PO.memRecompute; },
     "auto (default) or off: with a budget, off never recomputes an activation (nor a "
     "segment): every byte freed moves to a slower tier, whatever --rates prices"},
    {"--mem-lookahead", nullptr, "auto|N", Group::Machine,
     [](const std::string &v, CompileOptions &o, std::string &e) {
       if (v == "auto") {
         PO.memLookahead = v;
         return 1;
       }
       int64_t n = 0;
       if (parseInteger("--mem-lookahead", v, 1, 64, n, e) < 0) {
         e = "--mem-lookahead needs auto or an integer from 1 to 64, got '" + v + "'";
         return -1;
       }
       PO.memLookahead = std::to_string(n);
       return 1;
     },
     [](const CompileOptions &o) { return PO.memLookahead; },
     "auto (default) or N: the kernel calls each tier copy runs beside. N: a prefetch starts "
     "N calls before its use, an offload is waited on N calls after it starts (or before "
     "the peak). auto: each copy's window holds as many calls as the cost model says the "
     "copy takes (at most 16), planned beside windows of 2 and the plan predicted cheaper "
     "kept, the copies' exposed seconds counted (--emit=schedule's hcs.memory says which "
     "won). Longer windows hide a slower tier's copies but free fewer bytes where the "
     "budget is tight"},
    {"--cftp", nullptr, "on|off", Group::Machine,
     [](const std::string &v, CompileOptions &o, std::string &e) {
       std::string s;
       if (parseChoice("--cftp", v, {"on", "off"}, s, e) < 0)
         return -1;
       return PO.cftp = s == "on", 1;
     },
     [](const CompileOptions &o) { return onOff(PO.cftp); },
     "communication-free tensor parallelism (default on): with more than one cluster per "
     "rank, each cluster runs its own stream of calls, calls cut across clusters where the "
     "cost model says so, waits only where data crosses (hc-cftp); off: every call on the "
     "whole team"},
    {"--cftp-partial-grads", nullptr, "on|off", Group::Machine,
     [](const std::string &v, CompileOptions &o, std::string &e) {
       std::string s;
       if (parseChoice("--cftp-partial-grads", v, {"on", "off"}, s, e) < 0)
         return -1;
       return PO.cftpPartialGrads = s == "on", 1;
     },
     [](const CompileOptions &o) { return onOff(PO.cftpPartialGrads); },
     "with CFTP (default on): on, a weight gradient whose other cuts would join the "
     "clusters' streams is summed per cluster over its own rows into a buffer of its own "
     "(the 'partial' arena: at most the gradients' size, within --mem-budget) and folded "
     "into the gradient where the streams join anyway (sums in another order, within "
     "rounding); off: cut by output feature, bit-equal to --cftp off on one thread per "
     "cluster"},
    {"--help", "-h", nullptr, Group::Output,
     [](const std::string &, CompileOptions &o, std::string &) { return o.help = true, 1; },
     nullptr, "this text"},
};
#undef PO

} // namespace

int parseCompileFlag(int argc, char **argv, int &i, CompileOptions &o, std::string &error,
                     FlagScope scope) {
  std::string arg = argv[i], value;
  size_t eq = arg.find('=');
  bool inlineValue = arg.rfind("--", 0) == 0 && eq != std::string::npos;
  if (inlineValue) {
    value = arg.substr(eq + 1);
    arg = arg.substr(0, eq);
  }
  const Flag *flag = std::find_if(std::begin(kFlags), std::end(kFlags), [&](const Flag &f) {
    return (arg == f.name || (f.alias && arg == f.alias)) &&
           (scope == FlagScope::All || f.group != Group::Output);
  });
  if (flag == std::end(kFlags))
    return 0;
  if (!flag->metavar) {
    if (inlineValue) {
      error = arg + " takes no value";
      return -1;
    }
  } else if (!inlineValue) {
    if (i + 1 >= argc) {
      error = arg + " needs a value";
      return -1;
    }
    value = argv[++i];
  }
  if (flag->group == Group::Optimizer)
    o.pipeline.optimizerFlags.push_back(flag->name);
  return flag->set(value, o, error);
}

std::string compileFlagsHelp(FlagScope scope) {
  constexpr size_t kIndent = 19, kWidth = 78;
  std::string out;
  for (const Flag &f : kFlags) {
    if (scope == FlagScope::Pipeline && f.group == Group::Output)
      continue;
    std::string head = "  " + (f.alias ? std::string(f.alias) + ", " : "") + f.name +
                       (f.metavar ? std::string(" ") + f.metavar : "");
    head += head.size() + 1 < kIndent ? std::string(kIndent - head.size(), ' ') : "  ";
    std::string line = head, word, text = f.help;
    bool fresh = true;  // nothing on this line after its indent yet
    for (size_t k = 0; k <= text.size(); ++k) {
      if (k < text.size() && text[k] != ' ') {
        word += text[k];
        continue;
      }
      if (word.empty())
        continue;
      if (!fresh && line.size() + 1 + word.size() > kWidth) {
        out += line + "\n";
        line = std::string(kIndent, ' ');
        fresh = true;
      }
      line += (fresh ? "" : " ") + word;
      fresh = false;
      word.clear();
    }
    out += line + "\n";
  }
  return out;
}

bool namesCompileFlag(const std::string &text) {
  for (const Flag &f : kFlags)
    for (const char *end : {" ", ":"})
      if (f.name[1] == '-' && text.find(std::string(f.name) + end) != std::string::npos)
        return true;
  return false;
}

std::string compileOptionsJson(const CompileOptions &o) {
  llvm::json::Object record;
  for (const Flag &f : kFlags)
    if (f.get)
      record[f.name] = f.get(o);
  std::string s;
  llvm::raw_string_ostream os(s);
  os << llvm::json::Value(std::move(record));
  return os.str();
}

} // namespace hc
