// hc_sgemm: packed, cache-blocked SGEMM (BLIS-style loops jc/pc/ic/jr/ir)
// with the micro-kernel of the ISA hcrt_isa() picks, blocking derived from
// the cache sizes hwloc reports, a 2-D partition of C over the thread range
// (threads of one cluster share a column block, as the paper's N-split
// across clusters), and the epilogue fused on each C tile while it is hot.
// This file: the blocking, one thread's block (the loops and which operand
// is read in place) and the entry points; gemm_parallel.cpp cuts a call
// over the threads, gemm_packed.cpp keeps constant B panels.
#include "gemm_driver.h"
#include "hc/base/settings.h"

#include <algorithm>
#include <numeric>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace hc::rt {
namespace gemm_driver {

const GemmKernel &kernel() {
  switch (hcrt_isa()) {
  case HC_ISA_AVX512:
    return gemmAvx512();
  case HC_ISA_AVX2:
    return gemmAvx2();
  default:
    return gemmGeneric();
  }
}

int64_t knob(hc::rt::Setting s, int64_t dflt) {
  const long long v = hc::rt::settingInt(s, dflt);
  return v > 0 ? v : dflt;
}

// Whether A (B) is read in place by the kernels that can: 1 where
// runBlock's rule says so (the default), 0 never, 2 always
// (HC_GEMM_DIRECT_A, HC_GEMM_DIRECT_B; tuning and tests of both paths).
int directMode(hc::rt::Setting s) {
  return static_cast<int>(hc::rt::settingInt(s, 1));
}

// KC: 384 k steps per block, tuning data rather than a cache size: the
// C tile is loaded and stored once per k block, and 384 steps amortize it
// on every machine measured (the sliver then streams from L2, whatever
// L1d is). An L1-sized sliver was slower everywhere: Intel (48 KiB L1d)
// KC = 192/256 1-11% slower, 576-1152 within 1%; Zen 4 (32 KiB L1d), where
// the earlier 1.5x-L1d rule gave 256, 384 measured 0.3-5% faster at 1
// thread on S/2 and XL/2 shapes (8192 x 1152 x 384: 107-110 -> 112.6
// GFLOP/s, interleaved). Only a tiny L2 lowers it (an MR panel and an NR
// sliver in half of L2). MC: an MC x KC block of A takes a quarter of L2.
// NC: at most a KC x NC panel of B of twice the L2
// size; runBlock cuts a column range into equal panels under it. Each
// panel means another packing pass over A, and a sliver of B is reused
// from L2 by all of an MC block once it is in, so a panel may spill to L3:
// measured here, N = 1152 as one 2 MiB panel (A packed once) is 1-2% faster
// at 1 thread and 2-5% at 2 than two 1 MiB ones; a quarter of L3 (5424)
// was 5-8% slower on N >= 3456 than 1 MiB panels.
// HC_GEMM_MC/KC/NC override (tuning, tests).
Blocking blocking(const GemmKernel &k) {
  const CacheInfo &c = cacheInfo();
  Blocking b;
  int64_t kc = static_cast<int64_t>(c.l2 / 2) / ((k.mr + k.nr) * 4);
  kc = std::max<int64_t>(64, std::min<int64_t>(384, kc / 8 * 8));
  b.kc = knob(hc::rt::Setting::GemmKc, kc);
  int64_t mc = static_cast<int64_t>(c.l2 / 4) / (b.kc * 4);
  mc = std::max<int64_t>(k.mr, std::min<int64_t>(4096, mc / k.mr * k.mr));
  // a whole number of MR panels (a block packs ceil(mc / MR) of them)
  b.mc = std::max<int64_t>(k.mr, (knob(hc::rt::Setting::GemmMc, mc) + k.mr - 1) / k.mr * k.mr);
  int64_t nc = static_cast<int64_t>(2 * c.l2) / (b.kc * 4);
  nc = std::max<int64_t>(k.nr, std::min<int64_t>(8192, nc / k.nr * k.nr));
  b.nc = knob(hc::rt::Setting::GemmNc, nc);
  const bool inPlace = k.microDirect && !k.packedOnly;
  b.directA = inPlace ? directMode(hc::rt::Setting::GemmDirectA) : 0;
  b.directB = inPlace && k.directB ? directMode(hc::rt::Setting::GemmDirectB) : 0;
  b.rowsInPlace = !cpuIsIntel() && k.directRowsA;
  b.copiesA = k.copiesA;
  b.convertsB = inPlace && k.convertsB;
  return b;
}

// op(A)[m0:m1, k0:k1) added to the row sums (hc_sgemm_row_sums), the
// ks of each chunk in order.
void addRowSums(const Problem &p, int64_t m0, int64_t m1, int64_t k0,
                int64_t k1) {
  if (p.aBf16)
    contractViolation("hc_gemm_bf16_row_sums: row sums of a bf16 A");
  const OpsTable &o = ops();
  for (int64_t k = k0; k < k1;) {
    const int64_t chunk = k / HC_SUM_CHUNK;
    const int64_t end = std::min(k1, (chunk + 1) * HC_SUM_CHUNK);
    double *acc = p.aSums + chunk * p.M;
    if (p.transA)  // (m, k) at A[k * lda + m]: source rows, m contiguous
      o.colsum_f64(end - k, m1 - m0, p.A + k * p.lda + m0, p.lda, acc + m0);
    else
      for (int64_t m = m0; m < m1; ++m) {
        double s = acc[m];
        for (int64_t j = k; j < end; ++j)
          s += static_cast<double>(p.A[m * p.lda + j]);
        acc[m] = s;
      }
    k = end;
  }
}

void packA(const GemmKernel &k, const Problem &p, int64_t m0, int64_t mc,
           int64_t k0, int64_t kc, float *dst) {
  if (!p.aBf16)
    return k.packA(p.A, p.lda, p.transA, m0, mc, k0, kc, dst);
  if (!k.packABf16)
    contractViolation("a GEMM kernel without a bf16 packer given a bf16 A");
  k.packABf16(reinterpret_cast<const uint16_t *>(p.A), p.lda, p.transA, m0, mc, k0, kc, dst);
}

void packB(const GemmKernel &k, const Problem &p, int64_t k0, int64_t kc,
           int64_t n0, int64_t nc, float *dst) {
  if (!p.bBf16)
    return k.packB(p.B, p.ldb, p.transB, k0, kc, n0, nc, dst);
  if (!k.packBBf16)
    contractViolation("a GEMM kernel without a bf16 packer given a bf16 B");
  k.packBBf16(reinterpret_cast<const uint16_t *>(p.B), p.ldb, p.transB, k0, kc, n0, nc, dst);
}

// Asks for the lines of C's mr x nr tile at c (rows ldc elements apart,
// esize bytes each) into L2, for writing.
void prefetchTile(const float *c, int64_t ldc, int mr, int nr, int esize = 4) {
  for (int i = 0; i < mr; ++i) {
    const char *row = reinterpret_cast<const char *>(c) + i * ldc * esize;
    const char *end = row + nr * esize - 1;
    for (const char *l = row; l <= end; l += 64)
      __builtin_prefetch(l, 1, 2);
    __builtin_prefetch(end, 1, 2);
  }
}

// The tiles of the epilogue's own operands (C's lines the kernel asks for
// itself), asked for before the last k block's products so that those hide
// the misses. bf16, S/2 fc1 (8192 x 1536 x 384), 2 threads, fused over
// GEMM + separate pass, 2-3 runs each: GELU with its pre-activation
// 1.19-1.29 -> 1.12-1.15, the GELU gradient reading h 1.25-1.28 ->
// 1.08-1.12 (bench/results-epilogue-zen4-2core.txt).
void prefetchEpilogueTiles(const EpiCtx &e, int64_t m, int64_t n, int mr, int nr) {
  if (e.preact)
    prefetchTile(e.preact + m * e.ldPreact + n, e.ldPreact, mr, nr);
  if (e.geluGradX)
    prefetchTile(e.geluGradX + m * e.ldGeluGradX + n, e.ldGeluGradX, mr, nr);
  if (e.residual)
    prefetchTile(e.residual + m * e.ldResidual + n, e.ldResidual, mr, nr);
}

// Asks for `rows` rows of an NR = 48 float sliver, `ld` floats apart,
// into L2 (4 lines: a row that does not start a line spans 4).
void prefetchRows(const float *b, int64_t ld, int64_t rows) {
  for (int64_t r = 0; r < rows; ++r) {
    const char *row = reinterpret_cast<const char *>(b + r * ld);
    for (int off : {0, 64, 128, 191})
      __builtin_prefetch(row + off, 0, 2);
  }
}

// Whether source rows `ld` floats apart crowd a few cache sets: a stride
// that is a multiple of 2 KiB puts a column of rows into 2 of the 64 line
// slots of a 4 KiB page, so kc = 384 rows of one column take ~12 ways of
// each L2 set they reach (1 MiB, 16-way), more than an L2-resident block
// beside them leaves. DiT's 1536- and 4608-wide activations are such rows.
// (Measured here, 2 threads, dW 1536 x 384 x 8192 with A in place: 444-449
// GFLOP/s with lda = 1536, 464-471 with lda = 1552.)
bool crowdsSets(int64_t ld) { return (ld * 4) % 2048 == 0; }

BlockPlan planBlock(const GemmKernel &k, const Blocking &bl, const Problem &p,
                    int64_t rows, int64_t cols) {
  const int MR = k.mr, NR = k.nr;
  const std::size_t l2 = cacheInfo().l2;
  BlockPlan b;
  b.kcMax = std::min<int64_t>(bl.kc, p.K);
  const int64_t mRange = (rows + MR - 1) / MR * MR;
  // Few rows and a long K (the weight gradients dY^T X of DiT's narrow
  // layers, M = 384): one k step's A block for all rows fits L2 beside a
  // sliver, so A stays there while B's row-major source streams through
  // read in place, each sliver once per k step, and the panel is the whole
  // column range (nothing of B need stay in L2). Packing B there was 5% of
  // the time; measured here, 1 thread, 384 x 384 x 8192: 218-224 -> 233-238
  // GFLOP/s (with the kernel's further prefetches), 384 x 1536 x 8192
  // unchanged. Short K (attention's in-cache tiles) keeps the rules below.
  // A constant B is packed once and kept (constantPanel): never streamed,
  // read in place or converted by the kernel.
  b.streamB = !p.bConstant && !p.bBf16 && !p.transB && p.K > bl.kc && bl.directB != 0 &&
              static_cast<std::size_t>(mRange * b.kcMax * 4) <= l2 * 5 / 8;
  b.mcBlk = b.streamB ? mRange : bl.mc;
  b.mcMax = std::min<int64_t>(b.mcBlk, mRange);
  // Equal panels under bl.nc (N = 1728 as 2 x 864, not 1344 + 384).
  const int64_t ncLimit = b.streamB ? cols : bl.nc;
  const int64_t panels = (cols + ncLimit - 1) / ncLimit;
  b.ncBlk = ((cols + panels - 1) / panels + NR - 1) / NR * NR;
  b.ncMax = std::min<int64_t>(b.ncBlk, (cols + NR - 1) / NR * NR);
  // A read in place: saves a packing pass over A from memory; its panels
  // then stream from the source rows, which stay in L2 only beside a B
  // panel that leaves room. Measured here: 1.10-1.25x at 2 threads on S/2's
  // shapes; 2-3% slower when a KC x NC panel of B fills L2 (N = 1152). When
  // A is in cache anyway (attention's 256 x 64 tiles) packing costs little:
  // in place was 5-10% slower there at 8f0c6c5, 1-3% faster (rows) or even
  // (transposed) once B was read in place too (79cf6a6), within noise.
  // With streamB the same width rule holds for another reason: a wide
  // panel reuses each A block over many slivers, packing it pays (dW 384 x
  // 1536 x 8192: 221 in place, 230 packed; 384 x 384: 232 in place, 226).
  // Those gains were measured on AMD (Zen 5). On Intel (a Sapphire
  // Rapids-class VM, L2 2 MiB) a row-major A read in place was 3-6%
  // slower than packed at 1 and 2 threads on every S/2 shape it applied
  // to (1 thread, dX 2048 x 384 x 384: 172 -> 181 GFLOP/s packed; 2
  // threads, fwd 8192 x 384 x 384: 324 -> 345), with the same L1 lines
  // per step either way and no spill in the loop; a transposed A in place
  // stays ahead there (dW +1-3%), so only rows follow the vendor.
  // A kernel that copies every panel reads A's source once whatever the
  // panel of B (the width rule is about re-reading it).
  // A row-major bf16 A (an hc-bf16-storage activation) is read in place
  // where the kernel converts it (directRowsABf16), under the same rule: the
  // packing pass it saves was 2.7% of DiT-S/2's bf16 sampling call.
  const bool copiedOnce = bl.copiesA;
  b.directA = (!p.aBf16 || (k.directRowsABf16 && !p.transA)) &&
              ((bl.directA == 2 && (p.transA || k.directRowsA)) ||
               (bl.directA == 1 && (p.transA || bl.rowsInPlace) &&
               static_cast<std::size_t>(p.M * p.K * 4) > l2 &&
                (copiedOnce ||
                 static_cast<std::size_t>(bl.kc * b.ncMax * 4) <= l2 * 3 / 4)));
  // B (row-major) read in place: where each sliver would serve few rows
  // (packing is then a large share of the work) and the KC x NC block sits
  // in half of L2. Attention's tiles (M = Dh = 64, B = P or dS, 256 x 256):
  // packing B was 12% of flash attention at 1 thread. A last partial
  // sliver is still packed (its columns end inside a vector).
  b.directB = !p.bConstant && !p.bBf16 && !p.transB &&
              (bl.directB == 2 || b.streamB ||
               (bl.directB == 1 && rows <= 16 * MR &&
                static_cast<std::size_t>(b.kcMax * b.ncMax * 4) <= l2 / 2));
  // B's rows crowding a few sets: a sliver read in place does not stay in
  // L2 for its many calls beside A's block; packed just before them it
  // does (1 thread, 384 x 1536 x 2048: 240 -> 243 GFLOP/s; 384 x 384,
  // rows that spread: 242 -> 239, so only there).
  b.packSliver = b.streamB && crowdsSets(p.ldb);
  // Transposed A read in place is read again for every sliver of the
  // block, from rows that stay in L2 only where they spread over its sets:
  // the first sliver's calls copy each panel packed as they read it (an
  // extra load and store per k), the others read the copy (2 threads, dW
  // 1536 x 384 x 8192: 447-450 -> 453-464 GFLOP/s; neutral on the other
  // dW shapes within noise).
  b.copyA = b.directA && ((p.transA && b.ncMax > NR) || bl.copiesA);
  // A kernel that converts B while it computes: each whole sliver by the
  // first call that reads it, instead of a packing pass before the step
  // (the bf16 kernel, for a row-major B: X in the weight gradients, W in
  // the input gradients).
  b.convertB = bl.convertsB && !p.transB && !b.directB && !p.bConstant && !p.bBf16;
  return b;
}

// C[ic:ic+mc, jc:jc+nc] += this step's k block, on the calling thread: A's
// row block packed into Ap (or read in place, as the plan says), then every
// sliver of the step against it. Bs: room for one sliver packed just in
// time (plan.packSliver). m1: the end of the caller's rows (the last row
// block asks for the next k block's B).
void runRowBlock(const GemmKernel &k, const Blocking &bl, const Problem &p,
                 const BlockPlan &plan, const PanelStep &s, int64_t ic,
                 int64_t mc, int64_t m1, float *Ap, float *Bs) {
  const int MR = k.mr, NR = k.nr;
  alignas(64) float tile[16 * 64];
  const EpiCtx &e = p.epi;
  const int64_t jc = s.jc, nc = s.nc, nFull = s.nFull, pc = s.pc, kc = s.kc;
  const bool first = s.first, last = s.last, copyA = plan.copyA;
  // Read in place, A needs packing only for a last partial panel.
  const int64_t mFull = plan.directA ? mc / MR * MR : 0;
  const int64_t aOff = copyA ? 0 : mFull;
  if (mFull < mc)
    packA(k, p, ic + mFull, mc - mFull, pc, kc, Ap + (mFull - aOff) * kc);
  for (int64_t jr = 0; jr < nc; jr += NR) {
    const int nr = static_cast<int>(std::min<int64_t>(NR, nc - jr));
    const bool bInPlace = jr < nFull;
    const float *b0 =
        bInPlace ? p.B + pc * p.ldb + jc + jr : s.Bp + (jr - nFull) * kc;
    int64_t ldbk = bInPlace ? p.ldb : NR;
    // In place, the next sliver's rows are asked into L2 a share per
    // call: its first call would otherwise wait on memory row by row
    // (1 thread, 384 x 1536 x 2048: 234 -> 237 GFLOP/s).
    // Converted by this block's first call: its source rows the same way.
    const bool convertsB = jr < s.nConvert && ic == s.m0;
    const float *nextB = nullptr;
    int64_t nextRows = 0;
    if (bInPlace && jr + NR < nFull) {
      nextB = b0 + NR;
      nextRows = kc;
    } else if (convertsB && jr + NR < s.nConvert) {
      nextB = p.B + pc * p.ldb + jc + jr + NR;
      nextRows = kc;
    } else if ((bInPlace || s.nConvert > 0) && ic + plan.mcBlk >= m1 &&
               pc + kc < p.K) {
      nextB = p.B + (pc + kc) * p.ldb + jc;
      nextRows = std::min<int64_t>(bl.kc, p.K - pc - kc);
    }
    const int64_t calls = (mc + MR - 1) / MR;
    const int64_t rowsPerCall = (nextRows + calls - 1) / calls;
    // A kept panel comes from memory, not from a packing pass just before:
    // the first row block asks for the next sliver's lines, a share per call.
    const char *nextSliver = nullptr;
    int64_t sliverLines = 0;
    if (p.bConstant && ic == s.m0 && jr + NR < nc) {
      nextSliver = reinterpret_cast<const char *>(s.Bp + (jr + NR) * kc);
      sliverLines = ((k.pairedB ? (kc + 1) / 2 : kc) * NR * 4 + 63) / 64;
    }
    const int64_t linesPerCall = (sliverLines + calls - 1) / calls;
    const float *b = b0;
    if (plan.packSliver && bInPlace) {
      k.packB(p.B, p.ldb, 0, pc, kc, jc + jr, NR, Bs);
      b = Bs;
      ldbk = NR;
    }
    for (int64_t ir = 0; ir < mc; ir += MR) {
      if (nextB) {
        const int64_t r0 = ir / MR * rowsPerCall;
        prefetchRows(nextB + r0 * p.ldb, p.ldb,
                     std::min<int64_t>(rowsPerCall, nextRows - r0));
      }
      for (int64_t l = ir / MR * linesPerCall;
           nextSliver && l < std::min(sliverLines, (ir / MR + 1) * linesPerCall); ++l)
        __builtin_prefetch(nextSliver + l * 64, 0, 2);
      const int mr = static_cast<int>(std::min<int64_t>(MR, mc - ir));
      const int64_t m = ic + ir, n = jc + jr;
      const bool inPlace = ir < mFull && (!copyA || jr == 0);
      const float *a =
          inPlace ? advance(p.A, p.aBf16, p.transA ? pc * p.lda + m : m * p.lda + pc)
                  : Ap + (ir - aOff) * kc;
      const int layout = !inPlace ? 0 : !p.transA ? (p.aBf16 ? 4 : 1) : copyA ? 3 : 2;
      // kernelBias: the epilogue's bias added by the kernel as it stores
      // (only kernels that read in place take it).
      // The sliver's first call converts it from B's rows (whole slivers).
      const bool bFromSource = convertsB && ir == 0;
      // intoC: c is C itself (bf16 where e.cBf16: only microDirect of a
      // storesBf16C kernel writes that), not the tile buffer.
      auto micro = [&](float *c, int64_t ldc, float beta,
                       const float *kernelBias = nullptr, bool intoC = false) {
        const bool cb = intoC && e.cBf16;
        if (kernelBias && !k.microDirect)  // whole tile, both operands packed
          k.microAddBias(kc, a, b, c, ldc, p.alpha, beta, kernelBias);
        else if (bFromSource)
          k.microDirect(kc, a, p.lda, layout, Ap + ir * kc,
                        p.B + pc * p.ldb + jc + jr, p.ldb, s.BpConvert + jr * kc,
                        c, ldc, p.alpha, beta, nr, kernelBias, cb);
        else if (inPlace || bInPlace || nr < NR || kernelBias || cb)
          k.microDirect(kc, a, p.lda, layout, Ap + ir * kc, b, ldbk, nullptr,
                        c, ldc, p.alpha, beta, nr, kernelBias, cb);
        else
          k.micro(kc, a, b, c, ldc, p.alpha, beta);
      };
      const float *biasN =
          e.bias && (k.microDirect || (k.microAddBias && nr == NR)) ? e.bias + n : nullptr;
      // Edge columns too where the kernel can write just those
      // (S/2's Dh = 64 outputs: a quarter of the tiles were edges
      // computed into the buffer and copied). A bf16 C (one k block) only
      // where the kernel rounds as it stores (storesBf16C), else the
      // combine writes it.
      const bool whole =
          mr == MR && (nr == NR || k.microDirect) && (!e.cBf16 || k.storesBf16C);
      bool toC = false;  // the kernel writes C itself
      float betaEff = 1.0f;
      const float *toCBias = nullptr;
      // A kernel that starts its tile from the bias (AMX): forward
      // linears' bias without the tile buffer and combine pass (16
      // threads of the lent Xeon, S/2's M = 8192 forward shapes, runs
      // alternated: means +5-19% GFLOP/s by shape; the ranges overlap on
      // 8192 x 384 x 384; bench/results-device-amx-spr16.txt).
      // A bf16 C gets the same sums in the tile buffer, rounded by the
      // combine.
      const bool biasFirst = k.microBias && mr == MR && nr == NR && first &&
                             e.kind == EpiKind::Affine && e.bias && !e.gate &&
                             !e.residual && e.beta == 0.0f && p.alpha == 1.0f;
      if (biasFirst && !e.cBf16) {
        k.microBias(kc, a, b, p.C + m * p.ldc + n, p.ldc, e.bias + n);
        continue;
      }
      if (biasFirst) {
        k.microBias(kc, a, b, tile, NR, e.bias + n);
        EpiCtx rounded = e;
        rounded.bias = nullptr;
        k.combine(tile, NR, mr, nr, p.C, p.ldc, m, n, rounded, first, last);
        continue;
      }
      if (whole) {
        if (e.kind == EpiKind::None) {
          toC = true;
          betaEff = first ? e.beta : 1.0f;
        } else if (e.kind == EpiKind::Nonlinear && !last) {
          toC = true;
          betaEff = first ? 0.0f : 1.0f;
        } else if (e.kind == EpiKind::Affine && !first && !e.gate) {
          toC = true;
        } else if (e.kind == EpiKind::Affine && first && biasN && !e.gate &&
                   !e.residual) {
          // bias alone (and beta): the kernel adds it as it stores, no
          // tile buffer and combine pass (1 thread, 2048 x 1536 x 384 on
          // Zen 4: bias over plain 1.95 -> 0.13 ms, interleaved).
          toC = true;
          betaEff = e.beta;
          toCBias = biasN;
        }
      }
      // Nonlinear, last k block, nothing of C's old value left to scale or
      // add (an in-place residual is C itself):
      // the kernel finishes the pre-activation in C itself and the
      // epilogue runs over that tile in place (no staging tile, no pass
      // adding it to C). 1 thread, 2048 x 4608 x 1152 bias + GELU,
      // interleaved: 120.5-122.6 -> 118.9-119.1 ms; S/2 shapes and 2
      // threads within noise.
      const bool finishInC = whole && !e.cBf16 && e.kind == EpiKind::Nonlinear && last &&
                             (!first || e.beta == 0.0f) && e.residual != p.C;
      if (last && e.kind != EpiKind::None)
        prefetchEpilogueTiles(e, m, n, mr, nr);
      if (toC) {
        micro(const_cast<float *>(advance(p.C, e.cBf16, m * p.ldc + n)), p.ldc, betaEff,
              toCBias, true);
      } else if (finishInC && biasN) {
        // the kernel adds the bias too; the combine does the rest
        float *cTile = p.C + m * p.ldc + n;
        micro(cTile, p.ldc, first ? 0.0f : 1.0f, biasN);
        EpiCtx rest = e;
        rest.bias = nullptr;
        k.combine(cTile, p.ldc, mr, nr, p.C, p.ldc, m, n, rest, true, true);
      } else if (finishInC) {
        float *cTile = p.C + m * p.ldc + n;
        micro(cTile, p.ldc, first ? 0.0f : 1.0f);
        k.combine(cTile, p.ldc, mr, nr, p.C, p.ldc, m, n, e, true, true);
      } else {
        // The kernel asks for its output's lines ahead of its stores;
        // here that is the tile, so ask for C's, which the combine
        // then reads or writes (bias epilogue on a C bigger than
        // L3, 1 thread, 2048 x 4608 x 1152: 107 -> 97-99 ms, 95
        // without the epilogue).
        prefetchTile(advance(p.C, e.cBf16, m * p.ldc + n), p.ldc, mr, nr, e.cBf16 ? 2 : 4);
        if (nr < NR && !inPlace)
          k.microEdge(kc, a, b, tile, p.alpha, nr);
        else
          micro(tile, NR, 0.0f);
        k.combine(tile, NR, mr, nr, p.C, p.ldc, m, n, e, first, last);
      }
    }
  }
  // The row sums of A's block, while it is in cache from the products
  // above: the call that owns column 0 adds them (once per row and k).
  if (p.aSums && jc == 0)
    addRowSums(p, ic, ic + mc, pc, pc + kc);
}

// C = its epilogue of alpha * 0 (K = 0) for rows [m0, m1), cols [n0, n1).
void runEmptyK(const GemmKernel &k, const Problem &p, int64_t m0, int64_t m1,
               int64_t n0, int64_t n1) {
  alignas(64) float tile[16 * 64];
  std::memset(tile, 0, sizeof tile);
  for (int64_t m = m0; m < m1; m += k.mr)
    for (int64_t n = n0; n < n1; n += k.nr)
      k.combine(tile, k.nr, static_cast<int>(std::min<int64_t>(k.mr, m1 - m)),
                static_cast<int>(std::min<int64_t>(k.nr, n1 - n)), p.C, p.ldc,
                m, n, p.epi, true, true);
}

// C[m0:m1, n0:n1] of one problem on the calling thread.
void runBlock(const GemmKernel &k, const Blocking &bl, const Problem &p,
              int64_t m0, int64_t m1, int64_t n0, int64_t n1) {
  if (m1 <= m0 || n1 <= n0)
    return;
  if (p.K == 0) {
    runEmptyK(k, p, m0, m1, n0, n1);
    return;
  }
  const int NR = k.nr;
  const BlockPlan plan = planBlock(k, bl, p, m1 - m0, n1 - n0);
  float *Ap = scratch(2, plan.mcMax * plan.kcMax + 64);
  // streamB packs only a last partial sliver
  float *Bp = scratch(3, (plan.streamB ? 2 * NR : plan.ncMax) * plan.kcMax + 64);
  float *Bs = Bp + NR * plan.kcMax;  // a sliver packed just in time
  for (int64_t jc = n0; jc < n1; jc += plan.ncBlk) {
    const int64_t nc = std::min<int64_t>(plan.ncBlk, n1 - jc);
    const int64_t nFull = plan.directB ? nc / NR * NR : 0;  // slivers in place
    for (int64_t pc = 0; pc < p.K; pc += bl.kc) {
      const int64_t kc = std::min<int64_t>(bl.kc, p.K - pc);
      // plan.convertB: the kernel packs the whole slivers (B is not read
      // in place then: nFull 0), the last partial one is packed here.
      const int64_t nConvert = plan.convertB ? nc / NR * NR : 0;
      const float *panel = Bp;
      if (p.bConstant)  // the plan packs all of it (no in-place slivers)
        panel = constantPanel(k, p.B, p.ldb, p.transB, pc, kc, jc, nc, Bp);
      else if (nFull + nConvert < nc)
        packB(k, p, pc, kc, jc + nFull + nConvert, nc - nFull - nConvert,
              Bp + nConvert * kc);
      PanelStep s{jc, nc, nFull, pc, kc, pc == 0, pc + kc >= p.K, panel};
      s.nConvert = nConvert;
      s.m0 = m0;
      s.BpConvert = Bp;
      for (int64_t ic = m0; ic < m1; ic += plan.mcBlk)
        runRowBlock(k, bl, p, plan, s, ic, std::min<int64_t>(plan.mcBlk, m1 - ic),
                    m1, Ap, Bs);
    }
  }
}

bool overlaps(const float *a, int64_t lda, const float *c, int64_t ldc,
              int64_t M, int64_t N) {
  if (!a || M <= 0 || N <= 0)
    return false;
  const float *aEnd = a + (M - 1) * lda + N, *cEnd = c + (M - 1) * ldc + N;
  return a < cEnd && c < aEnd;
}

EpiCtx resolveEpi(const hc_sgemm_args &g, int64_t b) {
  EpiCtx e;
  e.beta = g.beta;
  e.cBf16 = g.c_bf16 != 0;
  const hc_epilogue *ep = g.epi;
  if (!ep || (!ep->flags && !ep->preact))
    return e;
  const uint32_t f = ep->flags;
  if (f & HC_EPI_BIAS)
    e.bias = ep->bias + b * ep->stride_bias;
  if (ep->preact) {
    e.preact = ep->preact + b * ep->stride_preact;
    e.ldPreact = ep->ld_preact;
  }
  e.gelu = (f & HC_EPI_GELU_TANH) != 0;
  if (f & HC_EPI_GATE) {
    e.gate = ep->gate + b * ep->stride_gate;
    e.ldGate = ep->ld_gate;
    e.gateRows = ep->gate_rows > 0 ? ep->gate_rows : std::max<int64_t>(1, g.M);
  }
  if (f & HC_EPI_RESIDUAL) {
    e.residual = ep->residual + b * ep->stride_residual;
    e.ldResidual = ep->ld_residual;
  }
  if (f & HC_EPI_GELU_TANH_GRAD) {
    e.geluGradX = ep->gelu_x + b * ep->stride_gelu_x;
    e.ldGeluGradX = ep->ld_gelu_x;
  }
  e.kind = (e.gelu || e.preact || e.geluGradX) ? EpiKind::Nonlinear
                                                : EpiKind::Affine;
  return e;
}

// A bf16 C over several k blocks: the float32 C the call would write (the
// same blocking, so the same sums, its epilogue applied in the usual
// order) a chunk of rows at a time into the calling thread's scratch (kept
// from call to call: a per-call allocation faulted its pages in every
// time), each chunk then rounded into C. Chunks of 8 MiB, or of 1/16 of
// the rows where that is more, whole gate rows: the scratch stays a small
// share of C's float32 size, which the step's memory plan no longer holds
// (the cast it replaces had a planned temporary of all of it), for B
// packed once per chunk. (A K split, which sums in another order, is only
// chosen for outputs far smaller than a chunk.)
void gemmViaTempBf16C(const GemmKernel &k, const Blocking &bl, const Problem &p, Range r) {
  int64_t rows = std::max<int64_t>((p.M + 15) / 16, (int64_t{8} << 20) / (4 * p.N));
  // Whole gate rows, and whole MR-row tiles: a chunk's edge rows must be
  // the call's own, since an edge tile adds its k block's sum to C while
  // a whole AMX tile starts its sums from C (another order: 1 bf16 ulp
  // apart on row 1904 of a 2100-row C in chunks of 1906).
  const int64_t unit = std::lcm<int64_t>(k.mr, p.epi.gate ? p.epi.gateRows : 1);
  rows = (rows + unit - 1) / unit * unit;
  rows = std::max<int64_t>(1, std::min(rows, p.M));
  float *T = scratch(6, static_cast<std::size_t>(rows * p.N) + 16);
  uint16_t *C = reinterpret_cast<uint16_t *>(p.C);
  for (int64_t r0 = 0; r0 < p.M; r0 += rows) {
    Problem q = p;
    q.M = std::min(rows, p.M - r0);
    q.A = advance(p.A, p.aBf16, p.transA ? r0 : r0 * p.lda);
    q.C = T;
    q.ldc = p.N;
    EpiCtx &e = q.epi;
    e.cBf16 = false;
    if (e.preact)
      e.preact += r0 * e.ldPreact;
    if (e.residual)
      e.residual += r0 * e.ldResidual;
    if (e.geluGradX)
      e.geluGradX += r0 * e.ldGeluGradX;
    if (e.gate)
      e.gate += (r0 / e.gateRows) * e.ldGate;
    gemm2d(k, bl, q, r);
    parallel(r, [&](int i, int cnt) {
      int64_t m0, m1;
      split(q.M, i, cnt, 1, m0, m1);
      for (int64_t m = m0; m < m1; ++m)
        storeBf16(T + m * p.N, p.N, C + (r0 + m) * p.ldc);
    });
  }
}

// Nonlinear epilogue whose inputs C must still be read after several k
// blocks (beta != 0 or residual overlapping C): compute T into a temporary,
// then apply the epilogue row block by row block.
void gemmViaTemp(const GemmKernel &k, const Blocking &bl, Problem p, Range r) {
  if (p.epi.cBf16)
    return gemmViaTempBf16C(k, bl, p, r);
  std::vector<float> T(static_cast<size_t>(p.M * p.N));
  Problem q = p;
  q.C = T.data();
  q.ldc = p.N;
  q.epi = EpiCtx();
  gemm2d(k, bl, q, r);
  parallel(r, [&](int i, int cnt) {
    int64_t m0, m1;
    split(p.M, i, cnt, k.mr, m0, m1);
    for (int64_t m = m0; m < m1; m += k.mr)
      for (int64_t n = 0; n < p.N; n += k.nr)
        k.combine(T.data() + m * p.N + n, p.N,
                  static_cast<int>(std::min<int64_t>(k.mr, m1 - m)),
                  static_cast<int>(std::min<int64_t>(k.nr, p.N - n)), p.C,
                  p.ldc, m, n, p.epi, true, true);
  });
}

// Whether the residual's float32 rows share bytes with a bf16 C's.
bool residualInBf16C(const Problem &p) {
  const EpiCtx &e = p.epi;
  if (!e.residual || p.M <= 0 || p.N <= 0)
    return false;
  const char *r0 = reinterpret_cast<const char *>(e.residual);
  const char *r1 = reinterpret_cast<const char *>(e.residual + (p.M - 1) * e.ldResidual + p.N);
  const char *c0 = reinterpret_cast<const char *>(p.C);
  const char *c1 = c0 + ((p.M - 1) * p.ldc + p.N) * 2;
  return r0 < c1 && c0 < r1;
}

// Entry b of a batched call.
Problem problemOf(const hc_sgemm_args &g, int64_t b, double *aSums) {
  Problem p;
  p.M = g.M, p.N = g.N, p.K = g.K;
  p.transA = g.trans_a, p.transB = g.trans_b;
  p.alpha = g.alpha;
  p.aBf16 = g.a_bf16 != 0, p.bBf16 = g.b_bf16 != 0;
  p.A = advance(g.A, p.aBf16, b * g.stride_a), p.lda = g.lda;
  p.B = advance(g.B, p.bBf16, b * g.stride_b), p.ldb = g.ldb;
  p.epi = resolveEpi(g, b);
  p.C = const_cast<float *>(advance(g.C, p.epi.cBf16, b * g.stride_c)), p.ldc = g.ldc;
  if (p.epi.cBf16 && (g.beta != 0.0f || aSums || residualInBf16C(p)))
    contractViolation("a GEMM's bf16 C (c_bf16) with beta != 0, row sums or a residual in C");
  p.bConstant = g.b_constant != 0 && !p.bBf16 && keepsPanels();
  if (aSums)
    p.aSums = aSums + b * ((g.K + HC_SUM_CHUNK - 1) / HC_SUM_CHUNK) * g.M;
  return p;
}

// Whether a nonlinear epilogue needs C computed apart first (K blocks
// would otherwise read back an already transformed C).
// A bf16 C holds only final results: more than one k block sums in a
// float32 temporary first.
bool needsTempC(const Blocking &bl, const Problem &p) {
  if (p.epi.cBf16)
    return p.K > bl.kc;
  return p.epi.kind == EpiKind::Nonlinear && p.K > bl.kc &&
         (p.epi.beta != 0.0f ||
          overlaps(p.epi.residual, p.epi.ldResidual, p.C, p.ldc, p.M, p.N));
}

} // namespace gemm_driver

using namespace gemm_driver;

// On the calling thread, operands in cache: A read in place wherever the
// kernel can (unless HC_GEMM_DIRECT_A=0). Attention's tiles: their Q/K/V
// slices and score tiles are in L2, and packing A was a pass over them
// that reading in place saves (measured here, 1 thread, flash attention
// S/2 T = 256: 16.7 -> 16.2 ms fwd + bwd).
void sgemmInCache(const hc_sgemm_args &g) { gemmInCacheWithKernel(kernel(), g); }

const GemmKernel &fp32Kernel() { return kernel(); }

void packOperandA(const GemmKernel &k, const float *A, int64_t lda, int transA, bool bf16,
                  int64_t m0, int64_t mc, int64_t k0, int64_t kc, float *dst) {
  Problem p{};
  p.A = A, p.lda = lda, p.transA = transA, p.aBf16 = bf16;
  packA(k, p, m0, mc, k0, kc, dst);
}

void packOperandB(const GemmKernel &k, const float *B, int64_t ldb, int transB, bool bf16,
                  int64_t k0, int64_t kc, int64_t n0, int64_t nc, float *dst) {
  Problem p{};
  p.B = B, p.ldb = ldb, p.transB = transB, p.bBf16 = bf16;
  packB(k, p, k0, kc, n0, nc, dst);
}

void gemmInCacheWithKernel(const GemmKernel &k, const hc_sgemm_args &g) {
  if (g.M <= 0 || g.N <= 0)
    return;
  Blocking bl = blocking(k);
  // (a bf16 A in cache stays packed: attention's tile products read in
  // place were 5-8% slower, docs/architecture.md)
  if (bl.directA == 1 && !g.a_bf16)
    bl.directA = 2;
  const Problem p = problemOf(g, 0, nullptr);
  if (needsTempC(bl, p))
    gemmViaTemp(k, bl, p, Range{0, 1});
  else
    runBlock(k, bl, p, 0, p.M, 0, p.N);
}

// hc_sgemm's driver with the kernel `k` (hc_gemm_bf16 runs it with a bf16
// kernel: gemm_bf16.cpp).
void gemmWithKernel(const GemmKernel &k, const hc_sgemm_args *g,
                    hc_threads threads, double *aSums) {
  const int64_t M = g->M, N = g->N, K = g->K;
  const int64_t batch = g->batch <= 0 ? 1 : g->batch;
  if (M <= 0 || N <= 0) {
    if (aSums && M > 0)  // no product to read A: its row sums alone
      for (int64_t b = 0; b < batch; ++b)
        addRowSums(problemOf(*g, b, aSums), 0, M, 0, K);
    return;
  }
  const Blocking bl = blocking(k);
  Range r = resolve(threads);
  // Small products stay on one thread (waking others costs more).
  const double macs = static_cast<double>(M) * N * std::max<int64_t>(K, 1);
  if (macs * batch < 262144.0)
    r.count = 1;
  auto problem = [&](int64_t b) { return problemOf(*g, b, aSums); };
  auto needsTemp = [&](const Problem &p) { return needsTempC(bl, p); };
  // Many small entries (attention heads): whole entries per thread.
  if (batch >= 2 * r.count && r.count > 1 && macs < 4.0e6) {
    parallel(r, [&](int i, int cnt) {
      int64_t b0, b1;
      split(batch, i, cnt, 1, b0, b1);
      for (int64_t b = b0; b < b1; ++b) {
        Problem p = problem(b);
        if (needsTemp(p))
          gemmViaTemp(k, bl, p, Range{0, 1});
        else
          runBlock(k, bl, p, 0, M, 0, N);
      }
    });
    return;
  }
  for (int64_t b = 0; b < batch; ++b) {
    Problem p = problem(b);
    if (needsTemp(p))
      gemmViaTemp(k, bl, p, r);
    else
      gemm2d(k, bl, p, r);
  }
}

} // namespace hc::rt

extern "C" void hc_sgemm(const hc_sgemm_args *g, hc_threads threads) {
  if (g->a_bf16 || g->b_bf16)
    hc::rt::contractViolation("hc_sgemm: a bf16 operand (only hc_gemm_bf16 reads them)");
  hc::rt::gemmWithKernel(hc::rt::kernel(), g, threads, nullptr);
}

extern "C" void hc_sgemm_row_sums(const hc_sgemm_args *g, double *aSums,
                                  hc_threads threads) {
  if (g->a_bf16 || g->b_bf16)
    hc::rt::contractViolation("hc_sgemm_row_sums: a bf16 operand (only hc_gemm_bf16 reads them)");
  hc::rt::gemmWithKernel(hc::rt::kernel(), g, threads, aSums);
}
