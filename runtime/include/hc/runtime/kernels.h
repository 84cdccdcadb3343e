// libhcrt kernel API: the calls that generated training steps make (HCOps).
//
// Plain C so generated code (C or C++) and foreign loaders need no C++ ABI
// agreement. Everything is float32 unless said otherwise; every size and
// stride is in elements (not bytes), int64_t. Matrices are row-major with an
// explicit leading dimension (the distance between consecutive rows); the
// last dimension of every tensor is contiguous.
//
// Threads. Every kernel takes an hc_threads range: it runs on team threads
// [first, first + count) of the runtime's persistent thread team (see
// hcrt_num_threads). count <= 0 means "all team threads from first on". The
// calling thread executes slot `first` itself and returns only when the whole
// call is done. Two calls on disjoint ranges may run concurrently from two
// different calling threads. Work is cut into pieces that depend only on the
// shapes and the range (some kernels hand the pieces to threads dynamically,
// so a thread slowed by other work does less; a piece's result does not
// depend on which thread runs it) and reductions run in a fixed order: the
// same inputs and the same range give bit-identical outputs run to run.
//
// Output contract: every element of every output (inside its shape; padding
// between rows is never touched) is written. Outputs never alias inputs
// unless a function says so.
#ifndef HC_RUNTIME_KERNELS_H
#define HC_RUNTIME_KERNELS_H

#include "hc/abi/tensor.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define HC_KERNELS_API_VERSION 1


// ---------------------------------------------------------------- team ----
// Team size: HC_NUM_THREADS from the environment, else one thread per core of
// the machine (hwloc). Threads are pinned to cores in cluster order (the cores
// of cluster 0 first), so a range of consecutive threads is cluster-local.
int32_t hcrt_num_threads(void);
// Resize the team (joins the old workers). Not safe while kernels run.
void hcrt_set_num_threads(int32_t n);
// Takes the last `n` cores of this process's share away from the kernel
// team, for threads that must not compete with compute (communication
// progress), and rebuilds the team. Writes their ids to `cores` (room for
// n) and returns how many were reserved: n, or 0 when the share has no more
// than n cores (compute keeps them all).
int32_t hcrt_reserve_cores(int32_t n, int32_t *cores);
// Index of the cluster team thread `t` belongs to.
int32_t hcrt_thread_cluster(int32_t t);

// CFTP (communication-free tensor parallelism): one stream of calls per
// cluster of a compiled plan. Cuts the team's threads, in team order (which
// is cluster order), into `nclusters` contiguous ranges, thread counts
// differing by at most one, and calls fn(ctx, k, range k) once per k, all
// concurrently: cluster 0 on the calling thread, cluster k > 0 on the
// worker that is the first thread of range k. Kernels called inside with
// that range run on its threads only (ranges are disjoint, so the clusters'
// kernels run at the same time). fn must not call hcrt_run_clusters again.
// Returns 0 once every fn has returned; -1, calling nothing, when nclusters
// < 1 or the team has fewer threads than nclusters.
typedef void (*hcrt_cluster_fn)(void *ctx, int32_t cluster, hc_threads threads);
int32_t hcrt_run_clusters(int32_t nclusters, hcrt_cluster_fn fn, void *ctx);
// Inside hcrt_run_clusters, a stream waiting for cluster k's may lend k its
// thread: a kernel that cluster k's fn calls on a range of one thread
// offers its independent pieces (a GEMM the row blocks of each step, one k
// block of one column panel of B packed once; flash attention its (batch,
// head) pairs), and hcrt_help_cluster(k), called from another cluster's
// fn, runs one of them on the calling thread (HC_CFTP_HELP=0: nothing is
// offered). The same bits whichever thread runs a piece. Returns 1 when it
// ran one, 0 when cluster k offers none now (or k is the caller's own).
int32_t hcrt_help_cluster(int32_t k);

// Instruction set the kernels dispatch to. Chosen once from CPUID (and the
// OS's saved vector state); HC_ISA=generic|avx2|avx512 in the environment or
// hcrt_set_isa() can force a lower one (tests and benchmarks use this to check
// every path). Asking for an ISA the CPU lacks falls back to the best one it
// has; the return value is the ISA in effect.
enum { HC_ISA_GENERIC = 0, HC_ISA_AVX2 = 1, HC_ISA_AVX512 = 2 };
int32_t hcrt_isa(void);
int32_t hcrt_set_isa(int32_t isa);
const char *hcrt_isa_name(int32_t isa);

// The machine's ceilings, measured now (about 0.2 s and 0.5 s): the FMA
// peak in GFLOP/s of `threads` threads running fp32 FMAs of `isa` width
// (HC_ISA_AVX2 or HC_ISA_AVX512; 0 when the CPU lacks it), median of 3;
// and a STREAM-like triad's bandwidth in GB/s (best of 5, 3 x 64 MiB).
double hcrt_fma_peak_gflops(int32_t threads, int32_t isa);
// The same for bf16 dot products (vdpbf16ps, 2 FLOPs per bf16 pair
// product and accumulate: 64 per zmm instruction); 0 without AVX512-BF16.
double hcrt_bf16_peak_gflops(int32_t threads);
// One thread's bf16 dot-product FLOP rate over its fp32 FMA rate (AVX-512),
// measured now in a few milliseconds; 0 without AVX512-BF16. About 2 on
// Zen 4/5, 0.5 on the Xeon measured in bench/results-device-anchors-spr16.txt.
double hcrt_bf16_over_fma(void);
// The AMX-BF16 tile products' peak (4 independent TDPBF16PS chains per
// thread), the threads run at once; 0 where hcrt_bf16_path() is not AMX.
double hcrt_amx_bf16_peak_gflops(int32_t threads);
double hcrt_triad_gbs(int32_t threads);

// ---------------------------------------------------------------- GEMM ----
// For each b in [0, batch):
//   C_b[m, n] = E(alpha * sum_k opA(A_b)[m, k] * opB(B_b)[k, n]) + beta * C_b[m, n]
// opA(A)[m, k] = trans_a ? A[k * lda + m] : A[m * lda + k]   (A is M x K or K x M)
// opB(B)[k, n] = trans_b ? B[n * ldb + k] : B[k * ldb + n]   (B is K x N or N x K)
// X_b = X + b * stride_x. beta == 0 means C is not read (NaN in C is fine).
// With PyTorch's [out, in] weights W: forward Y = X W^T is trans_b = 1,
// input gradient dX = dY W is (0, 0), weight gradient dW = dY^T X is
// trans_a = 1. K == 0 gives E(0) + beta * C.
//
// E, the fused epilogue, applies in this order to t = alpha * (A B)[m, n]:
//   HC_EPI_BIAS       t += bias[n]
//                     (if preact != NULL: preact[m * ld_preact + n] = t)
//   HC_EPI_GELU_TANH  t = 0.5 t (1 + tanh(sqrt(2/pi) (t + 0.044715 t^3)))
//   HC_EPI_GELU_TANH_GRAD  t *= gelu_tanh'(gelu_x[m * ld_gelu_x + n]) (the
//                     backward of a GELU whose input was gelu_x: dX W of the
//                     layer after it, times the GELU's derivative)
//   HC_EPI_GATE       t *= gate[(m / gate_rows) * ld_gate + n]   (adaLN gate;
//                     gate_rows = rows per sample, <= 0 means M)
//   HC_EPI_RESIDUAL   t += residual[m * ld_residual + n]
// then C = t + beta * C. residual may be C itself (same ld) for an in-place
// residual add; nothing else may alias C. Every epilogue pointer moves by its
// own stride_* per batch entry.
enum {
  HC_EPI_BIAS = 1u << 0,
  HC_EPI_GELU_TANH = 1u << 1,
  HC_EPI_GATE = 1u << 2,
  HC_EPI_RESIDUAL = 1u << 3,
  HC_EPI_GELU_TANH_GRAD = 1u << 4,
};

typedef struct hc_epilogue {
  uint32_t flags;  // HC_EPI_* bits
  const float *bias;
  int64_t stride_bias;
  float *preact;  // optional copy of the pre-activation (for GELU backward)
  int64_t ld_preact, stride_preact;
  const float *gate;
  int64_t ld_gate, gate_rows, stride_gate;
  const float *residual;
  int64_t ld_residual, stride_residual;
  const float *gelu_x;  // HC_EPI_GELU_TANH_GRAD: the GELU's input
  int64_t ld_gelu_x, stride_gelu_x;
} hc_epilogue;

typedef struct hc_sgemm_args {
  int64_t M, N, K;
  int64_t batch;  // <= 0 is treated as 1
  int32_t trans_a, trans_b;
  float alpha, beta;
  const float *A;
  int64_t lda, stride_a;
  const float *B;
  int64_t ldb, stride_b;
  float *C;
  int64_t ldc, stride_c;
  const hc_epilogue *epi;  // NULL: no epilogue
  // 1: B's contents stay as they are until hcrt_gemm_forget_packed names
  // their bytes (a sampler's weights): the driver keeps B's packed panels
  // (bf16-rounded for hc_gemm_bf16) from one call to the next, keyed by B,
  // its layout and the kernel, up to HC_GEMM_PACKED_MB (0: none, the call
  // runs as with b_constant 0), and reuses them instead of packing again.
  // Results are the same bits as with 0.
  int32_t b_constant;
  // 1: A's (B's) elements are bf16 (uint16_t, the upper half of a float32),
  // A (B) then points at them, cast; ld and strides count elements. Only
  // for hc_gemm_bf16 (which rounds to bf16 anyway: the same bits as the
  // float32 operand holding those values), and not with row sums of a bf16
  // A (hc_gemm_bf16_row_sums); the other entry points abort on it.
  int32_t a_bf16, b_bf16;
  // 1: C's elements are bf16 (C points at them, cast; ldc and stride_c
  // count elements): each result, its epilogue applied, rounded to nearest
  // even as hc_gelu_tanh_fwd_bf16 rounds (hc-bf16-storage's activations
  // that only bf16 products read: attention's q, k and v). Not with beta
  // != 0, a residual overlapping C, or row sums; either entry point.
  int32_t c_bf16;
} hc_sgemm_args;

// The packed panels of every b_constant call whose B overlaps the `bytes`
// bytes at `base` are dropped: call it before changing such a B, and
// before its memory is freed or reused, never while a GEMM reads that B.
void hcrt_gemm_forget_packed(const void *base, size_t bytes);
// The panels packed from B's whose first element lies in the `bytes` bytes
// at `base` hold at most `limit` bytes together (a step's parameter arena:
// the room its memory plan left them); past it, such calls pack B as if
// b_constant were 0. A range overlapping earlier ones replaces their limits.
void hcrt_gemm_limit_packed(const void *base, size_t bytes, size_t limit);
// The limits of the ranges inside the `bytes` bytes at `base` are dropped
// (before that memory is freed).
void hcrt_gemm_unlimit_packed(const void *base, size_t bytes);
// Bytes the packed panels of b_constant calls hold now (tests, diagnostics).
size_t hcrt_gemm_packed_bytes(void);

// The row chunk of every double column sum of the runtime (bias gradients,
// hc_sgemm_row_sums): each chunk summed apart, then the chunks in order, so
// the result does not depend on the partition.
#define HC_SUM_CHUNK 256

// The fast path: packed, cache-blocked (blocking from hwloc's cache sizes),
// micro-kernels chosen by hcrt_isa(), 2-D partition over the thread range.
void hc_sgemm(const hc_sgemm_args *args, hc_threads threads);
// Simple blocked reference with the same contract (single thread, float
// accumulation in k order). For testing and as a fallback.
void hc_sgemm_ref(const hc_sgemm_args *args);
// bf16 inputs, fp32 accumulation: hc_sgemm's contract with every element
// of opA and opB first rounded to bf16 (round to nearest even), products
// summed in float32. Operands and C stay float32 in memory; the rounding
// happens while the driver packs them. AVX512-BF16 (vdpbf16ps, which
// also treats bf16 denormals as zero) where CPUID has it and the AVX-512
// path is in effect; elsewhere the rounded operands go through the fp32
// kernel of hcrt_isa() (same rounding, float32 FMAs).
// vdpbf16ps is used only where it is faster than the fp32 FMAs: measured
// once per process (hcrt_bf16_over_fma() > 1); where it is slower (the
// Xeon above: half the FMA rate) the emulation is the faster bf16 GEMM.
// HC_BF16_NATIVE=1 or 0 in the environment, or hcrt_set_bf16_native(on),
// decide instead (on < 0: decide again, the environment else measured)
// where AMX (below) is not used; hcrt_bf16_native and hcrt_set_bf16_native
// return whether the vdpbf16ps kernel is in use (afterwards).
void hc_gemm_bf16(const hc_sgemm_args *args, hc_threads threads);
// Reference of the same contract (single thread, double accumulation).
void hc_gemm_bf16_ref(const hc_sgemm_args *args);
// hc_sgemm / hc_gemm_bf16 that also sum op(A)'s rows over k, in double, per
// chunk of HC_SUM_CHUNK ks: a_sums[(k / HC_SUM_CHUNK) * M + m] += op(A)[m, k],
// each chunk's ks in order, from the float32 operand (not its bf16
// rounding); entry b's at a_sums + b * ceil(K / HC_SUM_CHUNK) * M. The
// caller zero-fills a_sums and adds the chunks in order. A weight gradient's
// bias gradient (A = dY^T) from the GEMM's own pass over dY: the same bits
// as a separate column sum in HC_SUM_CHUNK chunks. C is as without them.
void hc_sgemm_row_sums(const hc_sgemm_args *args, double *a_sums, hc_threads threads);
void hc_gemm_bf16_row_sums(const hc_sgemm_args *args, double *a_sums, hc_threads threads);
int32_t hcrt_bf16_native(void);
int32_t hcrt_set_bf16_native(int32_t on);
// The kernel hc_gemm_bf16 (and bf16 attention's tile products) run now:
// AMX tiles where the CPU and OS have AMX-BF16 (before any of the above:
// 16 x 16 x 32 products per instruction), else vdpbf16ps or the emulation
// as above. HC_BF16_AMX_EMULATED is the AMX kernel with each tile
// instruction carried out in C++ (its test on CPUs without AMX).
enum {
  HC_BF16_EMULATED = 0,
  HC_BF16_VDPBF16PS = 1,
  HC_BF16_AMX = 2,
  HC_BF16_AMX_EMULATED = 3,
};
int32_t hcrt_bf16_path(void);
const char *hcrt_bf16_path_name(int32_t path);
// HC_AMX=0/1/2 in the environment, or hcrt_set_bf16_amx(mode): 0 no AMX,
// 1 AMX where the CPU has it (the default; any other value means it too),
// 2 the emulated tiles where the CPU has AVX512-BF16 (the AVX-512 path);
// mode < 0 decides again. Only mode 1 asks the OS for the tile data.
// Returns hcrt_bf16_path() afterwards.
int32_t hcrt_set_bf16_amx(int32_t mode);
// Convenience: no batch, no epilogue.
void hc_sgemm_simple(int32_t trans_a, int32_t trans_b, int64_t M, int64_t N,
                     int64_t K, float alpha, const float *A, int64_t lda,
                     const float *B, int64_t ldb, float beta, float *C,
                     int64_t ldc, hc_threads threads);

// ------------------------------------------------ elementwise activations ----
// Flat arrays of n elements. y may alias x; dx may alias dy.
// gelu_tanh(x) = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))  (PyTorch's
// GELU(approximate='tanh')); computed as x / (1 + exp(-2u)) with hc's own
// vectorized exp; the error is stated in runtime/README-kernels.md and
// checked by the tests.
void hc_gelu_tanh_fwd(int64_t n, const float *x, float *y, hc_threads threads);
// The same with y stored as bf16 (each float32 result rounded to nearest
// even: bf16 storage, HCRT_BF16).
void hc_gelu_tanh_fwd_bf16(int64_t n, const float *x, uint16_t *y, hc_threads threads);
// dx = dy * gelu_tanh'(x)   (x: the pre-activation)
void hc_gelu_tanh_bwd(int64_t n, const float *x, const float *dy, float *dx,
                      hc_threads threads);
// silu(x) = x * sigmoid(x)
void hc_silu_fwd(int64_t n, const float *x, float *y, hc_threads threads);
void hc_silu_bwd(int64_t n, const float *x, const float *dy, float *dx,
                 hc_threads threads);

// ------------------------------------------------------------- softmax ----
// Row softmax over `cols`: y[r, :] = softmax(x[r, :]). y may alias x.
void hc_softmax_fwd(int64_t rows, int64_t cols, const float *x, int64_t ldx,
                    float *y, int64_t ldy, hc_threads threads);
// dx = y * (dy - sum(dy * y)) per row (y: the forward output). dx may alias dy.
void hc_softmax_bwd(int64_t rows, int64_t cols, const float *y, int64_t ldy,
                    const float *dy, int64_t lddy, float *dx, int64_t lddx,
                    hc_threads threads);

// ---------------------------------------------------------- layer norm ----
// Per row r (length D, biased variance, like torch.nn.LayerNorm):
//   xhat = (x - mean) * rstd,  rstd = 1 / sqrt(var + eps)
//   y = xhat * gamma + beta                    (gamma/beta NULL: 1 / 0)
//   y = y * (1 + scale[g, :]) + shift[g, :]   (adaLN modulate; NULL: skip)
// with g = r / group_rows (group_rows = tokens per sample; <= 0: rows) and
// shift/scale rows ld_mod apart. mean/rstd [rows] are written when non-NULL
// (the backward needs them). y may alias x.
typedef struct hc_layernorm_args {
  int64_t rows, D;
  const float *x;
  int64_t ldx;
  float *y;
  int64_t ldy;
  const float *gamma, *beta;
  const float *shift, *scale;
  int64_t group_rows, ld_mod;
  float eps;
  float *mean, *rstd;
} hc_layernorm_args;
void hc_layernorm_fwd(const hc_layernorm_args *args, hc_threads threads);
// The same with y [rows, D] contiguous bf16 (args->y and ldy ignored): each
// float32 result rounded to nearest even.
void hc_layernorm_fwd_bf16(const hc_layernorm_args *args, uint16_t *y, hc_threads threads);

// Backward of hc_layernorm_fwd given dy (same ld as y unless lddy set).
// Writes dx [rows, D] (may alias dy), and where non-NULL dgamma, dbeta [D]
// and dshift, dscale [rows / group_rows, ld_mod]. Parameter gradients are
// overwritten, or added to when `accumulate` is non-zero. With mean and
// rstd NULL they are recomputed from x (with `eps`, by the forward's own
// float routine: the forward's bits) a few rows at a time just before those
// rows' backward, which then reads x from cache. With dshift or dscale, each group's sums run over its rows in
// order: the same bits at any thread count.
typedef struct hc_layernorm_bwd_args {
  int64_t rows, D;
  const float *x;
  int64_t ldx;
  const float *dy;
  int64_t lddy;
  float *dx;
  int64_t lddx;
  const float *gamma, *beta;    // as in the forward (beta only matters for dscale)
  const float *shift, *scale;   // as in the forward (shift unused)
  int64_t group_rows, ld_mod;
  const float *mean, *rstd;     // from the forward, or NULL (recomputed)
  float *dgamma, *dbeta;
  float *dshift, *dscale;
  int32_t accumulate;
  double eps;                   // read only when mean and rstd are NULL
} hc_layernorm_bwd_args;
void hc_layernorm_bwd(const hc_layernorm_bwd_args *args, hc_threads threads);

// ----------------------------------------------------- flash attention ----
// O = softmax(scale * Q K^T) V per (batch, head), tiled with an online
// softmax: no Tq x Tk matrix is ever stored. Q [Tq, Dh], K/V [Tk, Dh], O
// [Tq, Dh] are addressed as X[b * sb + h * sh + t * st + d] with their own
// strides, so Q, K and V may be slices of one fused qkv buffer
// ([B, T, 3, H, Dh]) and O may be [B, T, H, Dh]. lse [batch, heads, Tq]
// (contiguous) receives the row log-sum-exp of scale * Q K^T when non-NULL;
// the backward needs it. The backward recomputes P tile by tile from Q, K
// and lse; it writes dq, dk, dv (same strides convention, overwritten).
typedef struct hc_attention_args {
  int64_t batch, heads, Tq, Tk, Dh;
  float scale;  // usually 1 / sqrt(Dh)
  const float *q;
  int64_t q_sb, q_sh, q_st;
  const float *k;
  int64_t k_sb, k_sh, k_st;
  const float *v;
  int64_t v_sb, v_sh, v_st;
  float *o;  // forward output; backward input
  int64_t o_sb, o_sh, o_st;
  float *lse;
  // backward only
  const float *dout;
  int64_t do_sb, do_sh, do_st;
  float *dq;
  int64_t dq_sb, dq_sh, dq_st;
  float *dk;
  int64_t dk_sb, dk_sh, dk_st;
  float *dv;
  int64_t dv_sb, dv_sh, dv_st;
  // 1: every product's operands rounded to bf16 with float32 sums
  // (hc_gemm_bf16): Q, K, V, dO, and the probabilities and dS tiles, as
  // PyTorch's CPU flash attention does with bf16 inputs. The softmax, its
  // sums, lse and D_i = dO . O stay float32. 0: float32 throughout.
  int32_t bf16;
  // 1 (with bf16 only): q, k and v point at bf16 elements (cast; strides
  // in elements), stored rounded: the same products, half the bytes.
  int32_t qkv_bf16;
} hc_attention_args;
void hc_flash_attention_fwd(const hc_attention_args *args, hc_threads threads);
void hc_flash_attention_bwd(const hc_attention_args *args, hc_threads threads);

// ---------------------------------------------------------- optimizers ----
// torch.optim.AdamW (amsgrad=False, maximize=False), one fused pass:
//   p *= 1 - lr * weight_decay
//   m = beta1 * m + (1 - beta1) * g;  v = beta2 * v + (1 - beta2) * g * g
//   p -= lr / (1 - beta1^step) * m / (sqrt(v) / sqrt(1 - beta2^step) + eps)
// `step` is the step count after incrementing (1 on the first step).
void hc_adamw(int64_t n, float *param, const float *grad, float *exp_avg,
              float *exp_avg_sq, float lr, float beta1, float beta2, float eps,
              float weight_decay, int64_t step, hc_threads threads);
// torch.optim.SGD: g' = g + weight_decay * p; with momentum != 0:
//   buf = first_step ? g' : momentum * buf + (1 - dampening) * g'
//   g' = nesterov ? g' + momentum * buf : buf
// p -= lr * g'. momentum_buf may be NULL when momentum == 0.
void hc_sgd(int64_t n, float *param, const float *grad, float *momentum_buf,
            float lr, float momentum, float dampening, float weight_decay,
            int32_t nesterov, int32_t first_step, hc_threads threads);

// ---------------------------------------------------------------- loss ----
// Mean squared error over n elements: returns mean((pred - target)^2),
// accumulated in double in a fixed order.
float hc_mse_loss_fwd(int64_t n, const float *pred, const float *target,
                      hc_threads threads);
// dpred = dloss * 2 (pred - target) / n
void hc_mse_loss_bwd(int64_t n, const float *pred, const float *target,
                     float dloss, float *dpred, hc_threads threads);

// ----------------------------------------------------------- embedding ----
// out[i, :] = table[idx[i], :] for i < n_idx (D columns). Indices outside
// [0, num_rows) give a row of zeros.
void hc_embedding_fwd(int64_t n_idx, const int64_t *idx, int64_t num_rows,
                      int64_t D, const float *table, int64_t ld_table,
                      float *out, int64_t ld_out, hc_threads threads);
// dtable[idx[i], :] += dout[i, :] in i order (deterministic, no atomics).
// dtable [num_rows, D] is zeroed first unless `accumulate`; indices outside
// [0, num_rows) are ignored.
void hc_embedding_bwd(int64_t n_idx, const int64_t *idx, int64_t num_rows,
                      int64_t D, const float *dout, int64_t ld_dout,
                      float *dtable, int64_t ld_dtable, int32_t accumulate,
                      hc_threads threads);

#ifdef __cplusplus
}
#endif

#endif // HC_RUNTIME_KERNELS_H
