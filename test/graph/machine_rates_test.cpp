// hc-compile's machine rates (passes/lib/CostModel.cpp): where the CPU has
// no bf16 dot product, the bf16 rates a spec does not give are its fp32
// ones (the runtime emulates bf16 GEMMs through the fp32 kernels there).
#include "hc/Passes/Passes.h"

#include <gtest/gtest.h>

#include <map>
#include <sstream>
#include <string>

namespace {

std::map<std::string, double> resolved(const std::string &spec, bool bf16Emulated) {
  std::string out, error;
  EXPECT_TRUE(hc::resolveMachineRates(spec, out, error, bf16Emulated)) << error;
  std::map<std::string, double> m;
  std::stringstream items(out);
  for (std::string item; std::getline(items, item, ',');) {
    const size_t eq = item.find('=');
    m[item.substr(0, eq)] = std::stod(item.substr(eq + 1));
  }
  return m;
}

} // namespace

TEST(MachineRates, EmulatedBf16TakesTheFp32Rates) {
  auto native = resolved("", false), emulated = resolved("", true);
  EXPECT_GT(native["gemm_bf16_gflops_per_thread"], native["gemm_gflops_per_thread"]);
  EXPECT_EQ(emulated["gemm_bf16_gflops_per_thread"], native["gemm_gflops_per_thread"]);
  EXPECT_EQ(emulated["attention_bf16_gflops_per_thread"],
            native["attention_gflops_per_thread"]);
  EXPECT_EQ(emulated["stream_gbps_per_thread"], native["stream_gbps_per_thread"]);
  // The spec's own fp32 rates, and its bf16 rates where it gives them.
  auto mine = resolved("gemm_gflops_per_thread=85,attention_bf16_gflops_per_thread=40", true);
  EXPECT_EQ(85, mine["gemm_bf16_gflops_per_thread"]);
  EXPECT_EQ(40, mine["attention_bf16_gflops_per_thread"]);
  EXPECT_EQ(85, resolved("gemm_gflops_per_thread=85", false)["gemm_gflops_per_thread"]);
  EXPECT_EQ(native["gemm_bf16_gflops_per_thread"],
            resolved("gemm_gflops_per_thread=85", false)["gemm_bf16_gflops_per_thread"]);
}
