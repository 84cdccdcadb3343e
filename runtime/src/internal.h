// libhcrt internals shared by the kernel sources (not installed).
#ifndef HC_RUNTIME_INTERNAL_H
#define HC_RUNTIME_INTERNAL_H

#include "hc/runtime/kernels.h"

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <vector>
#include <type_traits>

namespace hc::rt {

// Resolved thread range: `count` team threads starting at `first`.
struct Range {
  int first = 0, count = 1;
};
Range resolve(hc_threads t);

using TaskFn = void (*)(void *ctx, int idx, int count);
// Runs fn(ctx, i, r.count) for every i in [0, r.count), slot i on team
// thread r.first + i; the caller runs slot 0. Returns when all are done.
void runTeam(Range r, TaskFn fn, void *ctx);

template <class F> void parallel(Range r, F &&f) {
  if (r.count <= 1) {
    f(0, 1);
    return;
  }
  runTeam(
      r, [](void *c, int i, int n) { (*static_cast<F *>(c))(i, n); },
      const_cast<void *>(static_cast<const void *>(&f)));
}

// Runs f(piece) for every piece in [0, pieces) over the range, pieces taken
// in order from a shared counter (a thread slowed by other work on its core
// takes fewer). The pieces are fixed, so the results are the same whichever
// thread runs which piece; use only where pieces write disjoint outputs.
template <class F> void parallelPieces(Range r, int64_t pieces, F &&f) {
  if (r.count <= 1 || pieces <= 1) {
    for (int64_t p = 0; p < pieces; ++p)
      f(p);
    return;
  }
  std::atomic<int64_t> next{0};
  parallel(r, [&](int, int) {
    for (int64_t p; (p = next.fetch_add(1, std::memory_order_relaxed)) < pieces;)
      f(p);
  });
}

// Whether the range's threads all run on cores of one NUMA node (they may
// sit in different clusters: an L3 or L2 group each).
bool oneNumaNode(Range r);

// The topology cluster team thread `thread` runs in (-1 outside the team).
int teamThreadCluster(int thread);

// Cores hcrt_reserve_cores took away from the team (communication progress
// and copies), in order; empty when none.
std::vector<int> reservedCores();

// Waits until `v` (acquire) reaches at least `target`: spins as long as a
// team worker does before it sleeps, then yields (on a shared or
// oversubscribed node the thread we wait for may need this core).
void spinUntil(const std::atomic<int64_t> &v, int64_t target);
// Helping at CFTP waits (stream_help.cpp). setHelpCluster: the cluster
// whose stream the calling thread leads inside hcrt_run_clusters (-1 after).
// offersPieces: whether a kernel called there on one thread offers its
// pieces (HC_CFTP_HELP, default on). runOffered: fn(ctx, i) for i in
// [0, n), on the calling thread and on threads of other streams waiting for
// this one (hcrt_help_cluster), returning when all are done; fn's results
// must not depend on the thread (scratch() is each thread's own).
void setHelpCluster(int k);
bool offersPieces();
using PieceFn = void (*)(const void *ctx, int64_t i);
void runOffered(int64_t n, PieceFn fn, const void *ctx);
template <class F> void runOffered(int64_t n, const F &f) {
  runOffered(n, [](const void *c, int64_t i) { (*static_cast<const F *>(c))(i); }, &f);
}
// The pieces a row or elementwise kernel of `units` independent units
// (`elems` elements in all) offers when a one-thread CFTP stream runs it:
// each at least kOfferElems elements (a claim costs an atomic add), at
// most 16; 0 when it offers nothing (outside a stream, or too small).
constexpr int64_t kOfferElems = 1 << 16;
inline int64_t offeredPieces(int64_t units, double elems) {
  if (elems < 2.0 * kOfferElems || units < 2 || !offersPieces())
    return 0;
  const double byElems = elems / static_cast<double>(kOfferElems);
  int64_t n = byElems < 16.0 ? static_cast<int64_t>(byElems) : 16;
  return n < units ? n : units;
}

// [begin, end) of part i of n over total items, in multiples of `grain`.
inline void split(int64_t total, int i, int n, int64_t grain, int64_t &begin,
                  int64_t &end) {
  int64_t units = (total + grain - 1) / grain;
  int64_t b = units * i / n, e = units * (i + 1) / n;
  begin = b * grain < total ? b * grain : total;
  end = e * grain < total ? e * grain : total;
}

// f(begin, end) over [0, total) cut by split() into `parts` pieces, offered
// to waiting streams (runOffered); empty pieces are skipped.
template <class F>
void runOfferedSplit(int64_t total, int64_t parts, int64_t grain, const F &f) {
  runOffered(parts, [&](int64_t i) {
    int64_t b, e;
    split(total, static_cast<int>(i), static_cast<int>(parts), grain, b, e);
    if (e > b)
      f(b, e);
  });
}

// Cache sizes (bytes) of the cores the team runs on, from hwloc.
struct CacheInfo {
  std::size_t l2 = 1024 * 1024, l3 = 8 * 1024 * 1024;
};
const CacheInfo &cacheInfo();

// The CPU's vendor, for kernel choices measured to differ between
// vendors beyond what the cache sizes say (gemm.cpp: a row-major A read
// in place).
bool cpuIsIntel();

// Thread-local scratch, 64-byte aligned, grown on demand, one per `slot`
// (0-7; in use: 0 the K split's partial C, 1 attention's tiles, 2-3 the
// GEMM's packed A and B, 4 a bf16 operand's block widened for packing, 5
// the bf16 layer norm's float32 rows).
float *scratch(int slot, std::size_t floats);

// A runtime contract the compiler guarantees was broken (a kernel given a
// dtype its registry row does not allow): one line naming it, then abort.
[[noreturn]] void contractViolation(const char *what);

// Per-ISA bodies of the fused kernels (ops_impl.inc), chunk-level: ops.cpp
// does the partitioning.
struct OpsTable {
  void (*gelu_fwd)(int64_t, const float *, float *);
  void (*gelu_bwd)(int64_t, const float *, const float *, float *);
  void (*silu_fwd)(int64_t, const float *, float *);
  void (*silu_bwd)(int64_t, const float *, const float *, float *);
  void (*softmax_fwd_rows)(int64_t, int64_t, int64_t, const float *, int64_t,
                           float *, int64_t, bool stream);
  void (*softmax_bwd_rows)(int64_t, int64_t, int64_t, const float *, int64_t,
                           const float *, int64_t, float *, int64_t);
  // The layer norms' last bool: stream the output (non-temporal stores;
  // ops.cpp decides, see streamOutput).
  void (*layernorm_fwd_rows)(const hc_layernorm_args &, int64_t, int64_t, bool);
  void (*layernorm_bwd_rows)(const hc_layernorm_bwd_args &, int64_t, int64_t,
                             float *, float *, float *, float *, bool);
  // (n, p, g, m, v, beta1, 1 - beta1, beta2, 1 - beta2, eps, decay,
  //  lr / bc1, sqrt(bc2))
  void (*adamw)(int64_t, float *, const float *, float *, float *, float,
                float, float, float, float, float, float, float);
  void (*sgd)(int64_t, float *, const float *, float *, float, float, float,
              float, int, int);
  double (*mse_sum)(int64_t, const float *, const float *);
  // (n, x): sum of x^2 in double, the same bits at any thread count
  double (*sumsq_f64)(int64_t, const float *);
  void (*mse_bwd)(int64_t, const float *, const float *, float, float *);
  // (rows, cols, x, ld, acc): acc[c] += the column sums, in double
  void (*colsum_f64)(int64_t, int64_t, const float *, int64_t, double *);
  // (rows, D, x, ldx, eps, mean, rstd): the forward's float statistics
  void (*layernorm_stats_rows)(int64_t, int64_t, const float *, int64_t,
                               double, float *, float *);
  // (n, x, shift, scale, y)
  void (*modulate_fwd_row)(int64_t, const float *, const float *,
                           const float *, float *);
  // (N, w, dy, lddy, x, ldx, scale, dx, lddx, dshift, dscale)
  void (*modulate_bwd_cols)(int64_t, int64_t, const float *, int64_t,
                            const float *, int64_t, const float *, float *,
                            int64_t, double *, double *);
  // (n, x, gate, h, y)
  void (*gated_residual_row)(int64_t, const float *, const float *,
                             const float *, float *);
  // (N, w, dy, lddy, h, ldh, gate, dh, lddh, dgate)
  void (*gated_residual_bwd_cols)(int64_t, int64_t, const float *, int64_t,
                                  const float *, int64_t, const float *,
                                  float *, int64_t, double *);
  // (Dh, Tq, Br, Bc) -> floats; tiles of Br query x Bc key rows
  int64_t (*attention_scratch)(int64_t, int64_t, int64_t, int64_t);
  // (args, batch, head, next task to prefetch or -1, scratch, Br, Bc)
  void (*attention_fwd_bh)(const hc_attention_args &, int64_t, int64_t,
                           int64_t, float *, int64_t, int64_t);
  void (*attention_bwd_bh)(const hc_attention_args &, int64_t, int64_t,
                           int64_t, float *, int64_t, int64_t);
  // (n, x, y): y = x rounded to bf16's bits (bf16Bits), as storeBf16
  void (*store_bf16)(int64_t, const float *, uint16_t *);
};
const OpsTable &opsGeneric();
const OpsTable &opsAvx2();
const OpsTable &opsAvx512();
const OpsTable &ops();  // the one hcrt_isa() selects

// ---- SGEMM internals (gemm.cpp drives, gemm_impl.inc per ISA) ----
enum class EpiKind {
  None,       // C = T + beta C
  Affine,     // C = gate (T + bias) + residual + beta C: k blocks accumulate
  Nonlinear,  // GELU or preact: applied once the whole T is known
};

// The epilogue of one batch entry, resolved.
struct EpiCtx {
  EpiKind kind = EpiKind::None;
  float beta = 0.0f;
  bool gelu = false;
  const float *bias = nullptr;
  float *preact = nullptr;
  int64_t ldPreact = 0;
  const float *gate = nullptr;
  int64_t ldGate = 0, gateRows = 1;
  const float *residual = nullptr;
  int64_t ldResidual = 0;
  const float *geluGradX = nullptr;  // HC_EPI_GELU_TANH_GRAD
  int64_t ldGeluGradX = 0;
  // hc_sgemm_args::c_bf16: C holds bf16 (uint16_t) elements. Only the
  // combine writes such a C, once per element, after the last k block.
  bool cBf16 = false;
};

struct GemmKernel {
  int mr, nr;
  void (*packA)(const float *A, int64_t lda, int transA, int64_t m0,
                int64_t mc, int64_t k0, int64_t kc, float *dst);
  void (*packB)(const float *B, int64_t ldb, int transB, int64_t k0,
                int64_t kc, int64_t n0, int64_t nc, float *dst);
  void (*micro)(int64_t kc, const float *a, const float *b, float *c,
                int64_t ldc, float alpha, float beta);
  // tile[0:MR, 0:nr] (rows NR apart) = alpha Ap^T Bp for nr < NR columns
  void (*microEdge)(int64_t kc, const float *a, const float *b, float *tile,
                    float alpha, int nr);
  void (*combine)(const float *t, int64_t ldt, int mr, int nr, float *C,
                  int64_t ldc, int64_t m0, int64_t n0, const EpiCtx &e,
                  bool first, bool last);
  // micro with either operand read in place: A's MR x kc panel packed
  // (aLayout 0), or element (i, k) at a[i * lda + k] (1; 4: a bf16 A, a
  // pointing at its uint16 element (0, 0), directRowsABf16) or a[k * lda + i]
  // (2; 3: also copied packed to aCopy on the way); B's kc x NR sliver
  // rows ldbk apart (NR: packed; ldb: read in place); writes exactly
  // columns [0, nr) of C's MR rows (an edge tile goes straight to C). Null
  // where the ISA has none (then both are packed). bias (nullable): nr
  // column terms added to every row after alpha and beta. cBf16: c holds
  // bf16 elements (ldc counts them), each result rounded to nearest even
  // as it is stored (only where storesBf16C; beta 0).
  void (*microDirect)(int64_t kc, const float *a, int64_t lda, int aLayout,
                      float *aCopy, const float *b, int64_t ldbk, float *bCopy,
                      float *c, int64_t ldc, float alpha, float beta, int nr,
                      const float *bias, bool cBf16);
  // micro for a whole tile of the first k block with alpha 1, beta 0 and a
  // bias epilogue alone: C = bias (NR column terms on every row) + A B, in
  // that order (AMX: the accumulators start from the bias). Null where
  // the kernel has none (microDirect adds its bias after the products).
  void (*microBias)(int64_t kc, const float *a, const float *b, float *c,
                    int64_t ldc, const float *bias) = nullptr;
  // micro (packed operands, a whole tile) with microDirect's bias: nr = NR
  // column terms added to every row after alpha and beta, as it stores.
  // For kernels without microDirect (AVX2); null where the tile buffer and
  // the combine pass add the bias.
  void (*microAddBias)(int64_t kc, const float *a, const float *b, float *c,
                       int64_t ldc, float alpha, float beta,
                       const float *bias) = nullptr;
  // What microDirect reads in place besides a transposed A: a row-major A
  // (aLayout 1) and B's rows. The bf16 kernel converts what it reads to
  // bf16 pairs, worth it only where each value is converted once: it reads
  // A alone, and writes every panel it reads to aCopy (copiesA, whatever
  // the layout) for the block's other slivers.
  bool directRowsA = true, directB = true;
  bool copiesA = false;
  // microDirect is handed packed panels only (aLayout 0, ldbk NR), never
  // an operand in place: the bf16 emulation (gemm_bf16.cpp), whose packing
  // rounds the operands, keeps the kernel for what it does as it stores
  // (a bias, edge columns straight to C).
  bool packedOnly = false;
  // microDirect reads a row-major bf16 A (hc_sgemm_args::a_bf16) in place
  // (aLayout 4): its panels converted while the first sliver's products
  // run, instead of in a packing pass before them.
  bool directRowsABf16 = false;
  // microDirect converts a row-major B read in place (ldbk != NR, whole
  // slivers) into the packed sliver at bCopy (the bf16 kernel; directB
  // kernels read B in place without a copy, bCopy null).
  bool convertsB = false;
  // Flops per cycle of the micro-kernel on one core, for the driver's cost
  // estimates (0: the fp32 FMA rate of its tile).
  double flopsPerCycle = 0;
  // A packed B sliver holds ceil(kc / 2) rows of NR words (bf16 pairs), not
  // kc rows: what the driver asks into cache ahead of a kept panel. Such a
  // kernel's packB of a row-major B whose rows are NR floats apart also
  // runs in place (dst == B: pair row p read from rows 2p and 2p + 1 before
  // it is written), as flash attention's forward converts P^T's panels.
  bool pairedB = false;
  // microDirect stores a bf16 C (hc_sgemm_args::c_bf16) itself: the
  // AVX512-BF16 kernel's vcvtneps2bf16, which also flushes denormal results
  // to zero (bf16 products read denormals as zero). Elsewhere the combine
  // rounds the tile buffer into C.
  bool storesBf16C = false;
  // packA / packB from a bf16 source (hc_sgemm_args::a_bf16 / b_bf16, at
  // its element (0, 0)): the panel packA / packB make of the widened block,
  // without widening it first (the same words, except that bf16 denormals
  // and signalling NaNs keep their bits where the float32 conversion
  // flushes or quiets them: the products read them alike, denormals as
  // zero), every layout. Every kernel hc_gemm_bf16 runs has them (the
  // emulation widens a block and packs it); null in the fp32 kernels,
  // which are never given a bf16 operand.
  void (*packABf16)(const uint16_t *A, int64_t lda, int transA, int64_t m0,
                    int64_t mc, int64_t k0, int64_t kc, float *dst) = nullptr;
  void (*packBBf16)(const uint16_t *B, int64_t ldb, int transB, int64_t k0,
                    int64_t kc, int64_t n0, int64_t nc, float *dst) = nullptr;
};
// Whether b_constant calls keep panels (HC_GEMM_PACKED_MB > 0); with 0 they
// run as calls without it.
bool keepsPanels();
// B's kc x nc panel at (k0, n0) as k.packB lays it out (slivers NR * kc
// floats apart), for a b_constant call: the kept copy, packed on the first
// call that asks; where HC_GEMM_PACKED_MB leaves no room, packed into
// `scratch` (room for it) and that returned (gemm_packed.cpp).
const float *constantPanel(const GemmKernel &k, const float *B, int64_t ldb,
                           int transB, int64_t k0, int64_t kc, int64_t n0,
                           int64_t nc, float *scratch);
// hc_sgemm's problem (batch 1) on the calling thread, A read in place
// where the kernel can: for operands already in cache (attention's tiles).
void sgemmInCache(const hc_sgemm_args &g);
// The same with the bf16 kernel (gemm_bf16.cpp: operands rounded to bf16).
void sgemmInCacheBf16(const hc_sgemm_args &g);

const GemmKernel &gemmGeneric();
const GemmKernel &gemmAvx2();
const GemmKernel &gemmAvx512();
// hc_gemm_bf16's emulation on each of them: packing rounds the operands to
// bf16 (a bf16 operand is widened), micro-kernels read packed panels only.
const GemmKernel &gemmGenericRounded();
const GemmKernel &gemmAvx2Rounded();
const GemmKernel &gemmAvx512Rounded();
// bf16 inputs, fp32 accumulation (gemm_avx512bf16.cpp): vdpbf16ps on
// operands rounded to bf16 as they are packed.
const GemmKernel &gemmAvx512Bf16();
// bf16 inputs, fp32 accumulation on AMX tiles (gemm_amxbf16.cpp). With
// `emulated`, the same kernel (packing, tile layout, loops) with each tile
// instruction carried out in C++: its test on CPUs without AMX (needs
// AVX512-BF16 for the packing).
const GemmKernel &gemmAmxBf16(bool emulated);
// B packed as the AMX kernel reads it (gemm_avx512bf16.cpp's pair words,
// 32-column slivers).
namespace gemm_avx512bf16 {
void packPairsB32(const float *B, int64_t ldb, int transB, int64_t k0,
                  int64_t kc, int64_t n0, int64_t nc, float *dst);
// packPairsB32's panel from a bf16 B (GemmKernel::packBBf16).
void packPairsB32Bf16(const uint16_t *B, int64_t ldb, int transB, int64_t k0,
                      int64_t kc, int64_t n0, int64_t nc, float *dst);
}
// `iters` rounds of 4 independent AMX bf16 tile products (16 x 16 x 32
// each) on the calling thread: machine_peak.cpp's AMX peak.
double amxBf16Loop(long iters);
// The fp32 kernel of the ISA hc_sgemm dispatches to (gemm.cpp): flash
// attention's forward calls its packing and micro-kernel on tiles it lays
// out itself.
const GemmKernel &fp32Kernel();
// The kernel hc_gemm_bf16 runs now (gemm_bf16.cpp: AMX, vdpbf16ps or the
// rounded fp32 emulation): flash attention's bf16 forward calls it on its
// own tiles.
const GemmKernel &bf16Kernel();
// k.packA / k.packB of an operand stored as float32 or, with `bf16`, as
// bf16 elements (the pointer cast): by the kernel's bf16 packers
// (gemm_driver::packA / packB).
void packOperandA(const GemmKernel &k, const float *A, int64_t lda, int transA, bool bf16,
                  int64_t m0, int64_t mc, int64_t k0, int64_t kc, float *dst);
void packOperandB(const GemmKernel &k, const float *B, int64_t ldb, int transB, bool bf16,
                  int64_t k0, int64_t kc, int64_t n0, int64_t nc, float *dst);
// sgemmInCache with a given kernel.
void gemmInCacheWithKernel(const GemmKernel &k, const hc_sgemm_args &g);
// hc_sgemm's driver (gemm.cpp) with a given kernel; aSums: op(A)'s row
// sums too (hc_sgemm_row_sums), or null.
void gemmWithKernel(const GemmKernel &k, const hc_sgemm_args *g,
                    hc_threads threads, double *aSums);
bool cpuHasAvx512Bf16();
// AMX-TILE and AMX-BF16 in CPUID, and the OS lets this process use the
// tile data (Linux: arch_prctl ARCH_REQ_XCOMP_PERM, asked once here).
bool cpuHasAmxBf16();

// float -> bf16 -> float, round to nearest even (NaN stays NaN, quiet).
inline float bf16Round(float x) {
  uint32_t u;
  __builtin_memcpy(&u, &x, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u)
    u |= 0x00400000u;
  else
    u += 0x7fffu + ((u >> 16) & 1u);
  u &= 0xffff0000u;
  float r;
  __builtin_memcpy(&r, &u, 4);
  return r;
}

// bf16 storage (HCRT_BF16): the bits bf16Round keeps, and back.
inline uint16_t bf16Bits(float x) {
  const float r = bf16Round(x);
  uint32_t u;
  __builtin_memcpy(&u, &r, 4);
  return static_cast<uint16_t>(u >> 16);
}
inline float bf16Widen(uint16_t h) {
  const uint32_t u = static_cast<uint32_t>(h) << 16;
  float r;
  __builtin_memcpy(&r, &u, 4);
  return r;
}
// n floats rounded to bf16 into dst (ops()' per-ISA loop).
void storeBf16(const float *src, int64_t n, uint16_t *dst);

constexpr float kSqrt2OverPi = 0.7978845608028654f;
constexpr float kGeluC = 0.044715f;

} // namespace hc::rt

#endif
