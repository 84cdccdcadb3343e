// gemm.cpp's driver, shared with gemm_parallel.cpp (how a call is cut over
// the threads): the problem, the blocking, the plan of one thread's block
// and the loops that run it. Private to the kernels (not installed).
#ifndef HC_RUNTIME_GEMM_DRIVER_H
#define HC_RUNTIME_GEMM_DRIVER_H

#include "internal.h"

namespace hc::rt::gemm_driver {

struct Blocking {
  int64_t mc, kc, nc;
  // kernels that can read an operand in place: 0 no, 1 by rule, 2 yes
  int directA, directB;
  // the rule reads a row-major A in place too (else only a transposed one)
  bool rowsInPlace;
  // the kernel copies every A panel it reads in place (GemmKernel)
  bool copiesA;
  // the kernel converts a row-major B's whole slivers into the panel
  bool convertsB;
};

struct Problem {
  int64_t M, N, K;
  int transA, transB;
  float alpha;
  const float *A;
  int64_t lda;
  const float *B;
  int64_t ldb;
  float *C;
  int64_t ldc;
  EpiCtx epi;
  double *aSums = nullptr;  // hc_sgemm_row_sums' sums (this entry's)
  bool bConstant = false;   // hc_sgemm_args::b_constant: B's panels kept
  // hc_sgemm_args::a_bf16 / b_bf16: the operand's elements are bf16 (A, B
  // point at them, cast): packed by the kernel's bf16 packers (packA /
  // packB below); a row-major bf16 A read in place only by
  // a kernel that converts it (GemmKernel::directRowsABf16).
  bool aBf16 = false, bBf16 = false;
};

// The operand `elems` elements past `base`, whatever its element size.
inline const float *advance(const float *base, bool bf16, int64_t elems) {
  return bf16 ? reinterpret_cast<const float *>(
                    reinterpret_cast<const uint16_t *>(base) + elems)
              : base + elems;
}
// k.packA / k.packB of p's operand: a bf16 one through the kernel's
// packABf16 / packBBf16 (a kernel without them given one: a contract
// violation); either way the kernel multiplies the values it would from a
// float32 operand holding them.
void packA(const GemmKernel &k, const Problem &p, int64_t m0, int64_t mc,
           int64_t k0, int64_t kc, float *dst);
void packB(const GemmKernel &k, const Problem &p, int64_t k0, int64_t kc,
           int64_t n0, int64_t nc, float *dst);

// How runBlock walks a rows x cols block of p: block sizes and which
// operand it reads in place. The grid and K-split estimates ask the same.
struct BlockPlan {
  bool streamB;          // A's block for all rows stays, B streams in place
  int64_t mcBlk, ncBlk;  // row block, column panel
  int64_t kcMax, mcMax, ncMax;
  bool directA, directB;
  bool packSliver;  // streamB: each sliver packed just before its calls
  bool copyA;       // A in place: the first sliver's calls copy it packed
  bool convertB;    // B's whole slivers packed by the first row block's calls
};

// One (jc, pc) step of the loops: B's kc x nc block at (pc, jc), its
// columns [jc + nFull, jc + nc) packed at Bp (the first nFull read in
// place).
struct PanelStep {
  int64_t jc, nc, nFull, pc, kc;
  bool first, last;  // pc is the first / last k block
  const float *Bp;
  // plan.convertB: the row block at m0 packs slivers [0, nConvert) of Bp
  // (writable here) with its first call on each
  int64_t nConvert = 0, m0 = 0;
  float *BpConvert = nullptr;
};

// op(A)[m0:m1, k0:k1) added to the row sums (hc_sgemm_row_sums).
void addRowSums(const Problem &p, int64_t m0, int64_t m1, int64_t k0, int64_t k1);
// Source rows `ld` floats apart that crowd a few cache sets (gemm.cpp).
bool crowdsSets(int64_t ld);
BlockPlan planBlock(const GemmKernel &k, const Blocking &bl, const Problem &p,
                    int64_t rows, int64_t cols);
void runRowBlock(const GemmKernel &k, const Blocking &bl, const Problem &p,
                 const BlockPlan &plan, const PanelStep &s, int64_t ic,
                 int64_t mc, int64_t m1, float *Ap, float *Bs);
// C[m0:m1, n0:n1] of one problem on the calling thread.
void runBlock(const GemmKernel &k, const Blocking &bl, const Problem &p,
              int64_t m0, int64_t m1, int64_t n0, int64_t n1);
// The whole problem on the calling thread, the row blocks of each step
// offered to the threads waiting for its stream (stream_help.cpp).
void runBlockOffered(const GemmKernel &k, const Blocking &bl, const Problem &p);
// The whole problem over the thread range (gemm_parallel.cpp): a 2-D grid
// of blocks, a K split, or a shared B panel, as its cost model says.
void gemm2d(const GemmKernel &k, const Blocking &bl, const Problem &p, Range r);

} // namespace hc::rt::gemm_driver

#endif // HC_RUNTIME_GEMM_DRIVER_H
