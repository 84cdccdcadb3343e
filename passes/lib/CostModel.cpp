#include "CostModel.h"

#include "hc/Schedule/KernelRegistry.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>

using namespace mlir;
namespace hs = hc::schedule;

namespace hc {

namespace {

// The rate keys, said once: name, unit scale to SI, and the field.
struct RateKey {
  const char *name;
  double scale;
  double &(*field)(MachineRates &);
};
const RateKey kRateKeys[] = {
    {"gemm_gflops_per_thread", 1e9, [](MachineRates &r) -> double & { return r.kernel.gemmFlops; }},
    {"gemm_bf16_gflops_per_thread", 1e9,
     [](MachineRates &r) -> double & { return r.kernel.gemmBf16Flops; }},
    {"attention_gflops_per_thread", 1e9,
     [](MachineRates &r) -> double & { return r.kernel.attentionFlops; }},
    {"attention_bf16_gflops_per_thread", 1e9,
     [](MachineRates &r) -> double & { return r.kernel.attentionBf16Flops; }},
    {"stream_gbps_per_thread", 1e9, [](MachineRates &r) -> double & { return r.kernel.memoryBytes; }},
    {"call_us", 1e-6, [](MachineRates &r) -> double & { return r.kernel.call; }},
    {"fork_us", 1e-6, [](MachineRates &r) -> double & { return r.kernel.fork; }},
    {"sync_us", 1e-6, [](MachineRates &r) -> double & { return r.sync; }},
    {"copy_gbps", 1e9, [](MachineRates &r) -> double & { return r.copyBytes; }},
    {"disk_gbps", 1e9, [](MachineRates &r) -> double & { return r.diskBytes; }},
};

std::string trim(const std::string &s) {
  size_t a = s.find_first_not_of(" \t\r"), b = s.find_last_not_of(" \t\r");
  return a == std::string::npos ? std::string() : s.substr(a, b - a + 1);
}

// One KEY=VALUE item; `where` prefixes a message.
bool parseItem(const std::string &item, const std::string &where, MachineRates &rates,
               std::string &error) {
  size_t eq = item.find('=');
  std::string key = trim(item.substr(0, eq));
  const RateKey *k = nullptr;
  for (const RateKey &r : kRateKeys)
    if (key == r.name)
      k = &r;
  if (!k) {
    error = where + "unknown rate '" + key + "' (keys: " + rateKeys() + ")";
    return false;
  }
  std::string text = eq == std::string::npos ? "" : trim(item.substr(eq + 1));
  char *end = nullptr;
  double v = std::strtod(text.c_str(), &end);
  if (text.empty() || *end || !(v > 0) || !std::isfinite(v)) {
    error = where + key + " needs a positive number, got '" + text + "'";
    return false;
  }
  k->field(rates) = v * k->scale;
  return true;
}

} // namespace

bool resolveMachineRates(const std::string &spec, std::string &resolved, std::string &error,
                         bool bf16Emulated) {
  MachineRates rates;
  if (!parseRates(spec, rates, error))
    return false;
  if (bf16Emulated) {  // which bf16 rates the spec left: parsed again over NaN
    MachineRates given;
    given.kernel.gemmBf16Flops = given.kernel.attentionBf16Flops = std::nan("");
    parseRates(spec, given, error);
    if (std::isnan(given.kernel.gemmBf16Flops))
      rates.kernel.gemmBf16Flops = rates.kernel.gemmFlops;
    if (std::isnan(given.kernel.attentionBf16Flops))
      rates.kernel.attentionBf16Flops = rates.kernel.attentionFlops;
  }
  resolved.clear();
  for (const RateKey &k : kRateKeys) {
    char value[40];
    std::snprintf(value, sizeof value, "%.17g", k.field(rates) / k.scale);
    resolved += (resolved.empty() ? "" : ",") + std::string(k.name) + "=" + value;
  }
  return true;
}

std::string rateKeys() {
  std::string keys;
  for (const RateKey &r : kRateKeys)
    keys += (keys.empty() ? "" : ", ") + std::string(r.name);
  return keys;
}

bool parseRates(const std::string &spec, MachineRates &rates, std::string &error) {
  if (spec.empty())
    return true;
  size_t at = 0;
  while (at <= spec.size()) {
    size_t comma = std::min(spec.find(',', at), spec.size());
    std::string item = trim(spec.substr(at, comma - at));
    at = comma + 1;
    if (item.empty()) {
      error = "--rates '" + spec + "': an empty item";
      return false;
    }
    if (item.find('=') != std::string::npos) {
      if (!parseItem(item, "--rates: ", rates, error))
        return false;
      continue;
    }
    std::ifstream in(item);
    if (!in) {
      error = "--rates " + item + ": cannot read the file (an item is KEY=VALUE or a file of them)";
      return false;
    }
    std::string line;
    for (int n = 1; std::getline(in, line); ++n) {
      line = trim(line.substr(0, line.find('#')));
      if (!line.empty() &&
          !parseItem(line, "--rates " + item + ":" + std::to_string(n) + ": ", rates, error))
        return false;
    }
  }
  rates.source = spec;
  return true;
}

double kernelSeconds(StringRef kernel, ArrayRef<ArrayRef<int64_t>> ins,
                     ArrayRef<ArrayRef<int64_t>> outs, double bytes,
                     const KernelRates &rates, int threads, DictionaryAttr attrs) {
  double flops = 0, rate = rates.gemmFlops;
  if (const hs::KernelInfo *k = hs::KernelRegistry::active().lookup(kernel)) {
    flops = hs::KernelRegistry::flops(*k, ins, outs);
    const bool attention =
        k->flops == hs::FlopRule::ATTENTION || k->flops == hs::FlopRule::ATTENTION_GRAD;
    // The precision flag of the product kernels (kernels.def: HCRT_FLAG(precision, ...)).
    auto p = attrs ? attrs.getAs<StringAttr>("precision") : StringAttr();
    const bool bf16 = p && p.getValue() == "bf16";
    if (attention)
      rate = bf16 ? rates.attentionBf16Flops : rates.attentionFlops;
    else if (bf16)
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

// A tier copy is handed to a copy lane and waited for: priced like a
// kernel call's dispatch on top of its bytes, so tiny buffers are not
// moved for free where recomputing them pays a call.
double copySeconds(int64_t bytes, const MachineRates &rates) {
  return static_cast<double>(bytes) / rates.copyBytes + rates.kernel.call;
}

double diskSeconds(int64_t bytes, const MachineRates &rates) {
  return static_cast<double>(bytes) / rates.diskBytes + rates.kernel.call;
}

} // namespace hc
