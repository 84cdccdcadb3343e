// hc_gemm_bf16: hc_sgemm's driver (gemm.cpp) with a kernel whose packing
// rounds both operands to bf16 (round to nearest even). With AMX the
// kernel is gemm_amxbf16.cpp's (tiles); with AVX512-BF16 where it outruns
// the FMAs, gemm_avx512bf16.cpp's (bf16 pairs, vdpbf16ps); elsewhere
// the fp32 kernel of hcrt_isa() with its packing followed by the rounding
// of the packed panel, so the products are the same exact bf16 products
// (8-bit significands: exact in float32) summed in float32. The fp32
// kernels read an operand in place without rounding it: the emulation
// turns those modes off (GemmKernel::packedOnly), both operands are packed,
// and keeps the kernel's stores (a bias added, edge columns written to C
// without the tile buffer). The native kernel rounds what it reads in
// place as it packs it.
#include "internal.h"
#include "hc/base/settings.h"

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace hc::rt {
namespace {

// -1: not decided yet: HC_BF16_NATIVE=1/0 from the environment, else
// measured (vdpbf16ps only where it outruns the FMAs); then the last
// hcrt_set_bf16_native.
std::atomic<int32_t> gNative{-1};

bool wantNative() {
  int32_t v = gNative.load(std::memory_order_relaxed);
  if (v < 0) {
    const char *e = hc::rt::setting(hc::rt::Setting::Bf16Native);
    v = e && *e ? std::atoi(e) != 0 : hcrt_bf16_over_fma() > 1.0;
    gNative.store(v, std::memory_order_relaxed);
  }
  return v != 0;
}

bool native() {
  return wantNative() && hcrt_isa() == HC_ISA_AVX512 && cpuHasAvx512Bf16();
}

// HC_AMX's modes (hcrt_set_bf16_amx); -1: not read yet.
std::atomic<int32_t> gAmx{-1};

// 0 off, 1 where the CPU has it, 2 emulated; anything else the default, 1.
int32_t validAmxMode(int32_t m) { return m >= 0 && m <= 2 ? m : 1; }

int32_t amxMode() {
  int32_t v = gAmx.load(std::memory_order_relaxed);
  if (v < 0) {
    const char *e = hc::rt::setting(hc::rt::Setting::Amx);
    v = e && *e ? validAmxMode(std::atoi(e)) : 1;
    gAmx.store(v, std::memory_order_relaxed);
  }
  return v;
}

int32_t path() {
  if (hcrt_isa() == HC_ISA_AVX512 && cpuHasAvx512Bf16()) {
    const int32_t amx = amxMode();
    if (amx == 1 && cpuHasAmxBf16())
      return HC_BF16_AMX;
    if (amx == 2)
      return HC_BF16_AMX_EMULATED;
  }
  return native() ? HC_BF16_VDPBF16PS : HC_BF16_EMULATED;
}

const GemmKernel &kernelBf16() {
  switch (path()) {
  case HC_BF16_AMX:
    return gemmAmxBf16(false);
  case HC_BF16_AMX_EMULATED:
    return gemmAmxBf16(true);
  case HC_BF16_VDPBF16PS:
    return gemmAvx512Bf16();
  default:
    break;
  }
  switch (hcrt_isa()) {
  case HC_ISA_AVX512:
    return gemmAvx512Rounded();
  case HC_ISA_AVX2:
    return gemmAvx2Rounded();
  default:
    return gemmGenericRounded();
  }
}

} // namespace

void sgemmInCacheBf16(const hc_sgemm_args &g) { gemmInCacheWithKernel(kernelBf16(), g); }

const GemmKernel &bf16Kernel() { return kernelBf16(); }

} // namespace hc::rt

using namespace hc::rt;

extern "C" {

void hc_gemm_bf16(const hc_sgemm_args *g, hc_threads threads) {
  gemmWithKernel(kernelBf16(), g, threads, nullptr);
}

void hc_gemm_bf16_row_sums(const hc_sgemm_args *g, double *aSums, hc_threads threads) {
  gemmWithKernel(kernelBf16(), g, threads, aSums);
}

int32_t hcrt_bf16_native(void) { return path() == HC_BF16_VDPBF16PS ? 1 : 0; }

int32_t hcrt_set_bf16_native(int32_t on) {
  gNative.store(on < 0 ? -1 : on ? 1 : 0, std::memory_order_relaxed);
  return hcrt_bf16_native();
}

int32_t hcrt_bf16_path(void) { return path(); }

const char *hcrt_bf16_path_name(int32_t p) {
  switch (p) {
  case HC_BF16_AMX:
    return "amx";
  case HC_BF16_AMX_EMULATED:
    return "amx-emulated";
  case HC_BF16_VDPBF16PS:
    return "vdpbf16ps";
  default:
    return "emulated";
  }
}

int32_t hcrt_set_bf16_amx(int32_t mode) {
  gAmx.store(mode < 0 ? -1 : validAmxMode(mode), std::memory_order_relaxed);
  return path();
}

void hc_gemm_bf16_ref(const hc_sgemm_args *g) {
  const int64_t M = g->M, N = g->N, K = g->K;
  const int64_t batch = g->batch <= 0 ? 1 : g->batch;
  if (M <= 0 || N <= 0)
    return;
  std::vector<float> a(static_cast<size_t>(M * K)), b(static_cast<size_t>(K * N));
  // Element i of an operand, float32 or bf16 (a_bf16, b_bf16).
  auto at = [](const float *p, bool bf16, int64_t i) {
    if (!bf16)
      return p[i];
    uint32_t u = static_cast<uint32_t>(reinterpret_cast<const uint16_t *>(p)[i]) << 16;
    float f;
    std::memcpy(&f, &u, 4);
    return f;
  };
  const bool aBf16 = g->a_bf16 != 0, bBf16 = g->b_bf16 != 0;
  for (int64_t e = 0; e < batch; ++e) {
    const int64_t ea = e * g->stride_a, eb = e * g->stride_b;
    for (int64_t m = 0; m < M; ++m)
      for (int64_t k = 0; k < K; ++k)
        a[m * K + k] = bf16Round(
            at(g->A, aBf16, ea + (g->trans_a ? k * g->lda + m : m * g->lda + k)));
    for (int64_t k = 0; k < K; ++k)
      for (int64_t n = 0; n < N; ++n)
        b[k * N + n] = bf16Round(
            at(g->B, bBf16, eb + (g->trans_b ? n * g->ldb + k : k * g->ldb + n)));
    hc_sgemm_args one = *g;
    hc_epilogue epi{};
    if (g->epi) {
      epi = *g->epi;
      if (epi.bias)
        epi.bias += e * epi.stride_bias;
      if (epi.preact)
        epi.preact += e * epi.stride_preact;
      if (epi.gate)
        epi.gate += e * epi.stride_gate;
      if (epi.residual)
        epi.residual += e * epi.stride_residual;
      if (epi.gelu_x)
        epi.gelu_x += e * epi.stride_gelu_x;
      one.epi = &epi;
    }
    one.batch = 1;
    one.trans_a = one.trans_b = 0;
    one.a_bf16 = one.b_bf16 = 0;
    one.A = a.data(), one.lda = K;
    one.B = b.data(), one.ldb = N;
    one.C = g->c_bf16 ? reinterpret_cast<float *>(reinterpret_cast<uint16_t *>(g->C) +
                                                  e * g->stride_c)
                      : g->C + e * g->stride_c;
    hc_sgemm_ref(&one);
  }
}

} // extern "C"
