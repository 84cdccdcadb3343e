#include "CostModel.h"

#include "hc/Schedule/KernelRegistry.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>

using namespace mlir;
namespace hs = hc::schedule;

namespace hc {

bool parseRates(const std::string &text, MachineRates &rates, std::string &error) {
  size_t at = 0;
  while (at < text.size()) {
    size_t comma = text.find(',', at);
    std::string item = text.substr(at, comma == std::string::npos ? std::string::npos
                                                                   : comma - at);
    at = comma == std::string::npos ? text.size() : comma + 1;
    size_t eq = item.find('=');
    std::string key = item.substr(0, eq);
    char *end = nullptr;
    double v = eq == std::string::npos ? 0 : std::strtod(item.c_str() + eq + 1, &end);
    double *slot = key == "gemm"        ? &rates.kernel.gemmFlops
                   : key == "gemm_bf16" ? &rates.kernel.gemmBf16Flops
                   : key == "attention" ? &rates.kernel.attentionFlops
                   : key == "memory"    ? &rates.kernel.memoryBytes
                   : key == "copy"      ? &rates.copyBytes
                   : key == "disk"      ? &rates.diskBytes
                                        : nullptr;
    if (!slot || !end || *end || !(v > 0) || !std::isfinite(v)) {
      error = "rates: expected gemm=GFLOPS,gemm_bf16=GFLOPS,attention=GFLOPS,memory=GBPS,copy=GBPS,disk=GBPS "
              "with positive numbers, got '" + item + "'";
      return false;
    }
    *slot = v * 1e9;
  }
  return true;
}

double kernelSeconds(StringRef kernel, ArrayRef<ArrayRef<int64_t>> ins,
                     ArrayRef<ArrayRef<int64_t>> outs, double bytes,
                     const KernelRates &rates, int threads, DictionaryAttr attrs) {
  double flops = 0, rate = rates.gemmFlops;
  if (const hs::KernelInfo *k = hs::KernelRegistry::active().lookup(kernel)) {
    flops = hs::KernelRegistry::flops(*k, ins, outs);
    if (k->flops == hs::FlopRule::ATTENTION || k->flops == hs::FlopRule::ATTENTION_GRAD)
      rate = rates.attentionFlops;
    // The GEMM class's precision flag (kernels.def: HCRT_FLAG(precision, ...)).
    if (auto p = attrs ? attrs.getAs<StringAttr>("precision") : StringAttr();
        p && p.getValue() == "bf16")
      rate = rates.gemmBf16Flops;
  }
  const double n = std::max(threads, 1);
  return std::max(flops / (rate * n), bytes / (rates.memoryBytes * n)) + rates.call +
         (n > 1 ? rates.fork : 0.0);
}

double callSeconds(hs::CallOp call, const MachineRates &rates) {
  auto shapes = [](ValueRange vs) {
    SmallVector<ArrayRef<int64_t>> r;
    for (Value v : vs)
      r.push_back(cast<MemRefType>(v.getType()).getShape());
    return r;
  };
  double bytes = 0;
  for (Value v : call->getOperands())
    bytes += static_cast<double>(hs::byteSize(cast<MemRefType>(v.getType())));
  return kernelSeconds(call.getKernel(), shapes(call.getIns()), shapes(call.getOuts()), bytes,
                       rates.kernel, rates.threads, call.getAttrs());
}

// A tier copy is handed to the copy thread and waited for: priced like a
// kernel call's dispatch on top of its bytes, so tiny buffers are not
// moved for free where recomputing them pays a call.
double copySeconds(int64_t bytes, const MachineRates &rates) {
  return static_cast<double>(bytes) / rates.copyBytes + rates.kernel.call;
}

double diskSeconds(int64_t bytes, const MachineRates &rates) {
  return static_cast<double>(bytes) / rates.diskBytes + rates.kernel.call;
}

} // namespace hc
