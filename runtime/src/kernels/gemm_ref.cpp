// Reference SGEMM: simple, blocked, single-threaded; the contract of
// hc_sgemm in its plainest form. Tests and the fast path's fallbacks use it.
#include "internal.h"

#include <cmath>

namespace hc::rt {

float geluExact(float t) {
  return 0.5f * t * (1.0f + std::tanh(kSqrt2OverPi * (t + kGeluC * t * t * t)));
}

// d/dx of geluExact, in double.
float geluGradExact(float x) {
  const double xd = x, th = std::tanh(kSqrt2OverPi * (xd + kGeluC * xd * xd * xd));
  const double du = kSqrt2OverPi * (1.0 + 3.0 * kGeluC * xd * xd);
  return static_cast<float>(0.5 * (1.0 + th) + 0.5 * xd * (1.0 - th * th) * du);
}

} // namespace hc::rt

using namespace hc::rt;

extern "C" void hc_sgemm_ref(const hc_sgemm_args *g) {
  if (g->a_bf16 || g->b_bf16)
    hc::rt::contractViolation("hc_sgemm_ref: a bf16 operand (hc_gemm_bf16_ref reads them)");
  if (g->c_bf16 && g->beta != 0.0f)
    hc::rt::contractViolation("hc_sgemm_ref: a bf16 C with beta != 0");
  const int64_t M = g->M, N = g->N, K = g->K;
  const int64_t batch = g->batch <= 0 ? 1 : g->batch;
  const hc_epilogue *ep = g->epi;
  const uint32_t fl = ep ? ep->flags : 0;
  constexpr int64_t NB = 64;
  float acc[NB];
  for (int64_t b = 0; b < batch; ++b) {
    const float *A = g->A + b * g->stride_a;
    const float *B = g->B + b * g->stride_b;
    float *C = g->c_bf16 ? nullptr : g->C + b * g->stride_c;
    uint16_t *Ch = g->c_bf16 ? reinterpret_cast<uint16_t *>(g->C) + b * g->stride_c : nullptr;
    for (int64_t m = 0; m < M; ++m)
      for (int64_t n0 = 0; n0 < N; n0 += NB) {
        const int64_t nb = N - n0 < NB ? N - n0 : NB;
        for (int64_t j = 0; j < nb; ++j)
          acc[j] = 0;
        for (int64_t k = 0; k < K; ++k) {
          float a = g->trans_a ? A[k * g->lda + m] : A[m * g->lda + k];
          if (g->trans_b)
            for (int64_t j = 0; j < nb; ++j)
              acc[j] += a * B[(n0 + j) * g->ldb + k];
          else
            for (int64_t j = 0; j < nb; ++j)
              acc[j] += a * B[k * g->ldb + n0 + j];
        }
        for (int64_t j = 0; j < nb; ++j) {
          const int64_t n = n0 + j;
          float t = g->alpha * acc[j];
          if (fl & HC_EPI_BIAS)
            t += ep->bias[b * ep->stride_bias + n];
          if (ep && ep->preact)
            ep->preact[b * ep->stride_preact + m * ep->ld_preact + n] = t;
          if (fl & HC_EPI_GELU_TANH)
            t = geluExact(t);
          if (fl & HC_EPI_GELU_TANH_GRAD)
            t *= geluGradExact(
                ep->gelu_x[b * ep->stride_gelu_x + m * ep->ld_gelu_x + n]);
          if (fl & HC_EPI_GATE) {
            int64_t gr = ep->gate_rows > 0 ? ep->gate_rows : M;
            t *= ep->gate[b * ep->stride_gate + (m / gr) * ep->ld_gate + n];
          }
          if (fl & HC_EPI_RESIDUAL)
            t += ep->residual[b * ep->stride_residual + m * ep->ld_residual + n];
          if (Ch) {  // bf16 C: beta 0 (the contract)
            Ch[m * g->ldc + n] = bf16Bits(t);
            continue;
          }
          float *c = C + m * g->ldc + n;
          *c = g->beta == 0.0f ? t : t + g->beta * *c;
        }
      }
  }
}

extern "C" void hc_sgemm_simple(int32_t trans_a, int32_t trans_b, int64_t M,
                                int64_t N, int64_t K, float alpha,
                                const float *A, int64_t lda, const float *B,
                                int64_t ldb, float beta, float *C, int64_t ldc,
                                hc_threads threads) {
  hc_sgemm_args g{};
  g.M = M;
  g.N = N;
  g.K = K;
  g.batch = 1;
  g.trans_a = trans_a;
  g.trans_b = trans_b;
  g.alpha = alpha;
  g.beta = beta;
  g.A = A;
  g.lda = lda;
  g.B = B;
  g.ldb = ldb;
  g.C = C;
  g.ldc = ldc;
  hc_sgemm(&g, threads);
}
