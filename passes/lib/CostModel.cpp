#include "CostModel.h"

#include "hc/Schedule/KernelRegistry.h"

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
    double *slot = key == "gemm"        ? &rates.gemmFlops
                   : key == "attention" ? &rates.attentionFlops
                   : key == "memory"    ? &rates.memoryBytes
                   : key == "copy"      ? &rates.copyBytes
                   : key == "disk"      ? &rates.diskBytes
                                        : nullptr;
    if (!slot || !end || *end || !(v > 0) || !std::isfinite(v)) {
      error = "rates: expected gemm=GFLOPS,attention=GFLOPS,memory=GBPS,copy=GBPS,disk=GBPS "
              "with positive numbers, got '" + item + "'";
      return false;
    }
    *slot = v * 1e9;
  }
  return true;
}

double callSeconds(hs::CallOp call, const MachineRates &rates) {
  auto shapes = [](ValueRange vs) {
    SmallVector<ArrayRef<int64_t>> r;
    for (Value v : vs)
      r.push_back(cast<MemRefType>(v.getType()).getShape());
    return r;
  };
  double flops = 0, rate = rates.gemmFlops;
  if (const hs::KernelInfo *k = hs::KernelRegistry::builtin().lookup(call.getKernel())) {
    flops = hs::KernelRegistry::flops(*k, shapes(call.getIns()), shapes(call.getOuts()));
    if (k->flops == hs::FlopRule::ATTENTION || k->flops == hs::FlopRule::ATTENTION_GRAD)
      rate = rates.attentionFlops;
  }
  double bytes = 0;
  for (Value v : call->getOperands())
    bytes += static_cast<double>(hs::byteSize(cast<MemRefType>(v.getType())));
  return std::max(flops / rate, bytes / rates.memoryBytes);
}

double copySeconds(int64_t bytes, const MachineRates &rates) {
  return static_cast<double>(bytes) / rates.copyBytes;
}

double diskSeconds(int64_t bytes, const MachineRates &rates) {
  return static_cast<double>(bytes) / rates.diskBytes;
}

} // namespace hc
