// bf16 GEMM kernels for AVX512-BF16 (vdpbf16ps): float32 operands are
// rounded to bf16 (round to nearest even, as the instruction rounds) while
// they are packed, bf16-stored ones (hc-bf16-storage's activations) packed
// from their bits; the 8x48 micro-kernel
// accumulates pairs of bf16 products in float32 (24 zmm accumulators, as
// the fp32 AVX-512 kernel). gemm.cpp's driver runs it: the packed layouts
// keep the fp32 kernel's panel strides (MR * kc and NR * kc floats), each
// 32-bit slot holding one k pair, so a panel fills half of its room. A is
// read in place where the driver's rule says so (microDirect), converted
// by the first sliver's calls into the packed panel the others read; a
// row-major B's slivers by the first row block's calls likewise. Only
// called when CPUID and the OS report AVX512-BF16 (gemm_bf16.cpp).
//
// Packed layouts (one uint32 word = bf16(x[2p]) | bf16(x[2p + 1]) << 16):
//   A: MR-row panels, word (p, i) at panel[p * MR + i]
//   B: NR-column slivers, word (p, j) at sliver[p * NR + j]
// for the k pairs p in [0, ceil(kc / 2)); an odd kc's last pair has a zero
// high half, rows / columns past the block's edge are zero.
#include "internal.h"

#include <immintrin.h>

#include <cstring>
#include <initializer_list>
#include <type_traits>

namespace hc::rt {
#pragma clang attribute push(__attribute__((target("avx512f,avx512dq,avx512bw,avx512vl,avx512bf16,avx2,fma"))), apply_to = function)
namespace gemm_avx512bf16 {
namespace {

constexpr int MR = 8, NR = 48;

// The 8 rows r[i] (8 words each) transposed: dst[c * ldd + i] = r[i][c].
inline void transpose8x8(const __m256 r[8], float *dst, int64_t ldd) {
  __m256 t0 = _mm256_unpacklo_ps(r[0], r[1]), t1 = _mm256_unpackhi_ps(r[0], r[1]);
  __m256 t2 = _mm256_unpacklo_ps(r[2], r[3]), t3 = _mm256_unpackhi_ps(r[2], r[3]);
  __m256 t4 = _mm256_unpacklo_ps(r[4], r[5]), t5 = _mm256_unpackhi_ps(r[4], r[5]);
  __m256 t6 = _mm256_unpacklo_ps(r[6], r[7]), t7 = _mm256_unpackhi_ps(r[6], r[7]);
  __m256 s0 = _mm256_shuffle_ps(t0, t2, 0x44), s1 = _mm256_shuffle_ps(t0, t2, 0xEE);
  __m256 s2 = _mm256_shuffle_ps(t1, t3, 0x44), s3 = _mm256_shuffle_ps(t1, t3, 0xEE);
  __m256 s4 = _mm256_shuffle_ps(t4, t6, 0x44), s5 = _mm256_shuffle_ps(t4, t6, 0xEE);
  __m256 s6 = _mm256_shuffle_ps(t5, t7, 0x44), s7 = _mm256_shuffle_ps(t5, t7, 0xEE);
  _mm256_storeu_ps(dst + 0 * ldd, _mm256_permute2f128_ps(s0, s4, 0x20));
  _mm256_storeu_ps(dst + 1 * ldd, _mm256_permute2f128_ps(s1, s5, 0x20));
  _mm256_storeu_ps(dst + 2 * ldd, _mm256_permute2f128_ps(s2, s6, 0x20));
  _mm256_storeu_ps(dst + 3 * ldd, _mm256_permute2f128_ps(s3, s7, 0x20));
  _mm256_storeu_ps(dst + 4 * ldd, _mm256_permute2f128_ps(s0, s4, 0x31));
  _mm256_storeu_ps(dst + 5 * ldd, _mm256_permute2f128_ps(s1, s5, 0x31));
  _mm256_storeu_ps(dst + 6 * ldd, _mm256_permute2f128_ps(s2, s6, 0x31));
  _mm256_storeu_ps(dst + 7 * ldd, _mm256_permute2f128_ps(s3, s7, 0x31));
}

// 16 consecutive k of a source row (the first `n` of them; the rest zero)
// as 8 pair words.
inline __m256 rowPairs(const float *src, int n) {
  __m256 lo, hi;
  if (n >= 16) {
    lo = _mm256_loadu_ps(src);
    hi = _mm256_loadu_ps(src + 8);
  } else {
    const int nl = n < 8 ? n : 8, nh = n - nl;
    lo = _mm256_maskz_loadu_ps(static_cast<__mmask8>((1u << nl) - 1), src);
    hi = _mm256_maskz_loadu_ps(static_cast<__mmask8>((1u << nh) - 1), src + 8);
  }
  // [lo, hi] as 16 bf16 in k order: word c = (k 2c, k 2c + 1)
  return _mm256_castsi256_ps(
      reinterpret_cast<__m256i>(_mm256_cvtne2ps_pbh(hi, lo)));
}

// The same 8 pair words from a bf16 source row: its bits as they are
// (rounding a bf16 value to bf16 keeps it); past `n`, zero halves.
inline __m256 rowPairs(const uint16_t *src, int n) {
  const __m256i w = n >= 16 ? _mm256_loadu_si256(reinterpret_cast<const __m256i *>(src))
                            : _mm256_maskz_loadu_epi16(static_cast<__mmask16>((1u << n) - 1), src);
  return _mm256_castsi256_ps(w);
}

// `rows` (<= W) source rows along k (src[r * lds + k], k < kc; float32 or
// bf16 elements) into a W-wide panel of pair words: dst[p * W + r]; rows
// past `rows` zero.
template <int W, typename T>
void packRows(const T *src, int64_t lds, int rows, int64_t kc, float *dst) {
  constexpr int64_t ahead = 256 / sizeof(T);  // 4 lines on
  const int64_t pairs = (kc + 1) / 2;
  for (int g = 0; g < W; g += 8) {
    const int rg = rows - g < 0 ? 0 : (rows - g > 8 ? 8 : rows - g);
    __m256 r[8];
    int64_t k = 0;
    for (; k + 16 <= kc; k += 16) {
      // Each row is a stream of its own: ask for its line 4 ahead (the
      // hardware prefetchers miss short strided segments).
      for (int i = 0; i < rg; ++i)
        _mm_prefetch(reinterpret_cast<const char *>(src + (g + i) * lds + k + ahead),
                     _MM_HINT_T0);
      for (int i = 0; i < 8; ++i)
        r[i] = i < rg ? rowPairs(src + (g + i) * lds + k, 16) : _mm256_setzero_ps();
      transpose8x8(r, dst + (k / 2) * W + g, W);
    }
    if (k < kc) {  // the last < 16 k: transposed apart, only its pairs kept
      alignas(32) float t[64];
      for (int i = 0; i < 8; ++i)
        r[i] = i < rg ? rowPairs(src + (g + i) * lds + k, static_cast<int>(kc - k))
                      : _mm256_setzero_ps();
      transpose8x8(r, t, 8);
      for (int64_t p = k / 2; p < pairs; ++p)
        std::memcpy(dst + p * W + g, t + (p - k / 2) * 8, 32);
    }
  }
}

// Word c of 32 bf16 [x0 (16), x1 (16)] interleaved: (x0[c], x1[c]).
inline __m512i interleave16(__m512 x0, __m512 x1) {
  const __m512i idx = _mm512_set_epi16(31, 15, 30, 14, 29, 13, 28, 12, 27, 11,
                                       26, 10, 25, 9, 24, 8, 23, 7, 22, 6, 21,
                                       5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
  return _mm512_permutexvar_epi16(
      idx, reinterpret_cast<__m512i>(_mm512_cvtne2ps_pbh(x1, x0)));
}

// The 16 pair words of columns [c, c + 16) from two bf16 source rows
// (r1 absent past an odd kc's end): row r0's bits low, r1's high.
inline __m512i interleave16(__mmask16 m, const uint16_t *r0, const uint16_t *r1, bool two) {
  const __m512i lo = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, r0));
  if (!two)
    return lo;
  const __m512i hi = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, r1));
  return _mm512_or_si512(lo, _mm512_slli_epi32(hi, 16));
}
inline __m512i interleave16(__mmask16 m, const float *r0, const float *r1, bool two) {
  const __m512 x0 = _mm512_maskz_loadu_ps(m, r0);
  return interleave16(x0, two ? _mm512_maskz_loadu_ps(m, r1) : _mm512_setzero_ps());
}

// Source rows along the panel's width (src[k * lds + c], c < cols <= W;
// float32 or bf16 elements): k pairs of rows interleaved into pair words,
// dst[p * W + c].
template <int W, typename T>
void packCols(const T *src, int64_t lds, int cols, int64_t kc, float *dst) {
  constexpr int V = (W + 15) / 16;
  __mmask16 mask[V];
  for (int v = 0; v < V; ++v) {
    const int n = cols - 16 * v;
    mask[v] = n >= 16 ? 0xffff : n <= 0 ? 0 : static_cast<__mmask16>((1u << n) - 1);
  }
  for (int64_t k = 0; k < kc; k += 2) {
    const T *r0 = src + k * lds, *r1 = r0 + lds;
    const bool two = k + 1 < kc;
    float *d = dst + (k / 2) * W;
    for (int v = 0; v < V; ++v) {
      const __m512i w = interleave16(mask[v], r0 + 16 * v, r1 + 16 * v, two);
      if (W - 16 * v >= 16)
        _mm512_storeu_si512(d + 16 * v, w);
      else
        _mm256_storeu_si256(reinterpret_cast<__m256i *>(d + 16 * v),
                            _mm512_castsi512_si256(w));
    }
    // prefetch the rows 8 pairs on (strided segments)
    _mm_prefetch(reinterpret_cast<const char *>(r0 + 16 * lds), _MM_HINT_T0);
    _mm_prefetch(reinterpret_cast<const char *>(r1 + 16 * lds), _MM_HINT_T0);
  }
}

// Two whole MR-wide panels of a transposed A (src[k * lds + c], c < 16) at
// once: one 16-float load per source row instead of two 8-float ones; the
// low 8 words of each pair row go to the first panel, the high 8 to the
// second (dst2). (The weight gradients dY^T X read A this way: its
// packing is a pass over the whole of dY.)
void packCols2(const float *src, int64_t lds, int64_t kc, float *dst, float *dst2) {
  for (int64_t k = 0; k < kc; k += 2) {
    const float *r0 = src + k * lds, *r1 = r0 + lds;
    const __m512 x0 = _mm512_loadu_ps(r0);
    const __m512 x1 = k + 1 < kc ? _mm512_loadu_ps(r1) : _mm512_setzero_ps();
    const __m512i w = interleave16(x0, x1);
    _mm256_storeu_si256(reinterpret_cast<__m256i *>(dst + (k / 2) * MR),
                        _mm512_castsi512_si256(w));
    _mm256_storeu_si256(reinterpret_cast<__m256i *>(dst2 + (k / 2) * MR),
                        _mm512_extracti64x4_epi64(w, 1));
    _mm_prefetch(reinterpret_cast<const char *>(r0 + 16 * lds), _MM_HINT_T0);
    _mm_prefetch(reinterpret_cast<const char *>(r1 + 16 * lds), _MM_HINT_T0);
  }
}

// Four whole MR-wide panels of a transposed bf16 A (src[k * lds + c], c <
// 32) at once: a pair of source rows is one 64-byte load each, its 16-bit
// halves interleaved lane by lane (unpack: columns 8L..8L+3 and 8L+4..8L+7
// of lane L) and the lanes' halves joined into panel L's 8 words. Column by
// column 8 at a time (packCols<MR>) it was 8% of the bf16 attention
// forward (V^T, 1 thread, S/2).
void packCols4(const uint16_t *src, int64_t lds, int64_t kc, float *dst) {
  const __m512i first = _mm512_set_epi64(11, 10, 3, 2, 9, 8, 1, 0);
  const __m512i second = _mm512_set_epi64(15, 14, 7, 6, 13, 12, 5, 4);
  for (int64_t k = 0; k < kc; k += 2) {
    const uint16_t *r0 = src + k * lds, *r1 = r0 + lds;
    const __m512i x0 = _mm512_loadu_si512(r0);
    const __m512i x1 = k + 1 < kc ? _mm512_loadu_si512(r1) : _mm512_setzero_si512();
    const __m512i lo = _mm512_unpacklo_epi16(x0, x1), hi = _mm512_unpackhi_epi16(x0, x1);
    const __m512i p01 = _mm512_permutex2var_epi64(lo, first, hi);
    const __m512i p23 = _mm512_permutex2var_epi64(lo, second, hi);
    float *d = dst + (k / 2) * MR;
    _mm256_storeu_si256(reinterpret_cast<__m256i *>(d), _mm512_castsi512_si256(p01));
    _mm256_storeu_si256(reinterpret_cast<__m256i *>(d + MR * kc),
                        _mm512_extracti64x4_epi64(p01, 1));
    _mm256_storeu_si256(reinterpret_cast<__m256i *>(d + 2 * MR * kc),
                        _mm512_castsi512_si256(p23));
    _mm256_storeu_si256(reinterpret_cast<__m256i *>(d + 3 * MR * kc),
                        _mm512_extracti64x4_epi64(p23, 1));
    _mm_prefetch(reinterpret_cast<const char *>(r0 + 16 * lds), _MM_HINT_T0);
    _mm_prefetch(reinterpret_cast<const char *>(r1 + 16 * lds), _MM_HINT_T0);
  }
}

// A's MR-row panels and B's W-column slivers from float32 or bf16-stored
// operands (the same words: rounding a bf16 value to bf16 keeps it; bf16
// denormals keep their bits, which the products read as zero, as they
// read the float32 conversion's flushed ones).
template <typename T>
void packPanelsA(const T *A, int64_t lda, int transA, int64_t m0, int64_t mc, int64_t k0,
                 int64_t kc, float *dst) {
  int64_t i0 = 0;
  if constexpr (std::is_same_v<T, float>)
    if (transA)
      for (; i0 + 2 * MR <= mc; i0 += 2 * MR)
        packCols2(A + k0 * lda + m0 + i0, lda, kc, dst + i0 * kc, dst + (i0 + MR) * kc);
  if constexpr (std::is_same_v<T, uint16_t>)
    if (transA)
      for (; i0 + 4 * MR <= mc; i0 += 4 * MR)
        packCols4(A + k0 * lda + m0 + i0, lda, kc, dst + i0 * kc);
  for (int64_t i = i0; i < mc; i += MR) {
    const int rows = static_cast<int>(mc - i < MR ? mc - i : MR);
    if (transA)  // A is K x M: element (m, k) at A[k * lda + m]
      packCols<MR>(A + k0 * lda + m0 + i, lda, rows, kc, dst + i * kc);
    else
      packRows<MR>(A + (m0 + i) * lda + k0, lda, rows, kc, dst + i * kc);
  }
}

template <int W, typename T>
void packSlivers(const T *B, int64_t ldb, int transB, int64_t k0, int64_t kc, int64_t n0,
                 int64_t nc, float *dst) {
  for (int64_t j = 0; j < nc; j += W) {
    const int cols = static_cast<int>(nc - j < W ? nc - j : W);
    if (transB)  // B is N x K: element (k, n) at B[n * ldb + k]
      packRows<W>(B + (n0 + j) * ldb + k0, ldb, cols, kc, dst + j * kc);
    else
      packCols<W>(B + k0 * ldb + n0 + j, ldb, cols, kc, dst + j * kc);
  }
}

void packA(const float *A, int64_t lda, int transA, int64_t m0, int64_t mc,
           int64_t k0, int64_t kc, float *dst) {
  packPanelsA(A, lda, transA, m0, mc, k0, kc, dst);
}

void packB(const float *B, int64_t ldb, int transB, int64_t k0, int64_t kc,
           int64_t n0, int64_t nc, float *dst) {
  packSlivers<NR>(B, ldb, transB, k0, kc, n0, nc, dst);
}

// GemmKernel::packABf16 / packBBf16: bf16-stored operands (x of linear
// and of its weight gradients, attention's q, k and v) packed from their
// bits, never widened to float32 first.
void packABf16(const uint16_t *A, int64_t lda, int transA, int64_t m0, int64_t mc,
               int64_t k0, int64_t kc, float *dst) {
  packPanelsA(A, lda, transA, m0, mc, k0, kc, dst);
}

void packBBf16(const uint16_t *B, int64_t ldb, int transB, int64_t k0, int64_t kc,
               int64_t n0, int64_t nc, float *dst) {
  packSlivers<NR>(B, ldb, transB, k0, kc, n0, nc, dst);
}

// The MR pair words of a transposed A panel for one k pair: rows r0 and
// r1 (the pair's second row; null past an odd kc's end), MR floats each.
inline __m256i colPairs(const float *r0, const float *r1) {
  const __m256 x0 = _mm256_loadu_ps(r0);
  const __m256 x1 = r1 ? _mm256_loadu_ps(r1) : _mm256_setzero_ps();
  const __m256i idx = _mm256_set_epi16(15, 7, 14, 6, 13, 5, 12, 4, 11, 3, 10, 2,
                                       9, 1, 8, 0);
  return _mm256_permutexvar_epi16(
      idx, reinterpret_cast<__m256i>(_mm256_cvtne2ps_pbh(x1, x0)));
}

// How microV finds A's panel: packed, or in place and converted into aCopy
// as it goes, transposed (element (i, k) at a[k * lda + i]) or row-major
// (at a[i * lda + k]; ARowMajorBf16: bf16 elements, hc-bf16-storage's
// activations, whose pair words are their bits).
enum ASource { APacked, ATransposed, ARowMajor, ARowMajorBf16 };

// C[0:MR, 0:nr] = alpha * sum_p A_p B_p + beta * C (+ bias[0:nr] on every
// row) for A's panel (see ASource) and B's sliver: packed at b, or
// (BFromRows) a whole sliver of B's rows (b[k * ldb + j]) converted into
// bCopy as the steps read it. V 16-column vectors computed (3 for a whole
// tile), the last one's stores masked to nr. cBf16: C holds bf16 (ldc
// counts them), each result rounded by vcvtneps2bf16 (beta 0).
template <int V, ASource S = APacked, bool BFromRows = false>
void microV(int64_t kc, const float *a, int64_t lda, int32_t *aCopy,
            const float *b, float *c, int64_t ldc, float alpha, float beta,
            int nr, const float *bias = nullptr, int64_t ldb = NR,
            float *bCopy = nullptr, bool cBf16 = false) {
  // C's row i at byte i * ldc * cBytes
  const int64_t cBytes = cBf16 ? 2 : 4;
  auto cRow = [&](int i) { return reinterpret_cast<char *>(c) + i * ldc * cBytes; };
  __m512 acc[MR][V];
#pragma unroll
  for (int i = 0; i < MR; ++i)
#pragma unroll
    for (int j = 0; j < V; ++j)
      acc[i][j] = _mm512_setzero_ps();
#pragma unroll
  for (int i = 0; i < MR; ++i)
    for (int l : {0, 64, 128, 191})
      if (l < 16 * cBytes * V)
        _mm_prefetch(cRow(i) + l, _MM_HINT_T1);
  const int64_t pairs = (kc + 1) / 2;
  // A in place: pair q converted into aCopy kAhead pairs before its step
  // reads it back (the loads of its two rows then have those steps to
  // arrive). Each row is another line, half of it this panel's: ask for
  // the rows 8 pairs further on into L1, and for the same rows' next line
  // (the panels two and three calls on) into L2.
  constexpr int64_t kAhead = 8;
  auto convert = [&](int64_t q) __attribute__((always_inline)) {
    const float *r0 = a + 2 * q * lda;
    _mm_prefetch(reinterpret_cast<const char *>(r0 + 16 * lda), _MM_HINT_T0);
    _mm_prefetch(reinterpret_cast<const char *>(r0 + 17 * lda), _MM_HINT_T0);
    _mm_prefetch(reinterpret_cast<const char *>(r0 + 16), _MM_HINT_T1);
    _mm_prefetch(reinterpret_cast<const char *>(r0 + lda + 16), _MM_HINT_T1);
    _mm256_storeu_si256(reinterpret_cast<__m256i *>(aCopy + q * MR),
                        colPairs(r0, 2 * q + 1 < kc ? r0 + lda : nullptr));
  };
  // Row-major in place: 8 pairs (a line of each row) at a time, the chunk
  // after the one the steps read; the rows' lines two chunks on into L1,
  // the next panel's rows (the next call's) into L2.
  // A bf16 row: the same lines two chunks on are 64 elements, not 32.
  using AElem = std::conditional_t<S == ARowMajorBf16, uint16_t, float>;
  const AElem *aRows = reinterpret_cast<const AElem *>(a);
  auto convertChunk = [&](int64_t q0) __attribute__((always_inline)) {
    const int64_t k0 = 2 * q0;
    __m256 r[MR];
#pragma unroll
    for (int i = 0; i < MR; ++i) {
      const AElem *row = aRows + i * lda + k0;
      _mm_prefetch(reinterpret_cast<const char *>(row + 128 / sizeof(AElem)), _MM_HINT_T0);
      _mm_prefetch(reinterpret_cast<const char *>(row + MR * lda), _MM_HINT_T1);
    }
    if (k0 + 16 <= kc) {
#pragma unroll
      for (int i = 0; i < MR; ++i)
        r[i] = rowPairs(aRows + i * lda + k0, 16);
      transpose8x8(r, reinterpret_cast<float *>(aCopy + q0 * MR), MR);
    } else {  // the last < 16 k: only its pairs kept (aCopy ends there)
      alignas(32) float t[64];
      for (int i = 0; i < MR; ++i)
        r[i] = rowPairs(aRows + i * lda + k0, static_cast<int>(kc - k0));
      transpose8x8(r, t, MR);
      std::memcpy(aCopy + q0 * MR, t, (pairs - q0) * MR * sizeof(float));
    }
  };
  const int32_t *ap = S == APacked ? reinterpret_cast<const int32_t *>(a) : aCopy;
  if constexpr (S == ATransposed)
    for (int64_t q = 0; q < kAhead && q < pairs; ++q)
      convert(q);
  constexpr bool kRows = S == ARowMajor || S == ARowMajorBf16;
  if constexpr (kRows)
    convertChunk(0);
  // C's lines into L1 16 pairs before the end (asked into L2 above; into
  // L1 at the start, the B sliver would evict them again).
  auto step = [&](int64_t p) __attribute__((always_inline)) {
    if constexpr (kRows) {
      if (p % 8 == 0 && p + 8 < pairs)
        convertChunk(p + 8);
      asm volatile("" ::: "memory");
    }
    if constexpr (S == ATransposed) {
      if (p + kAhead < pairs)
        convert(p + kAhead);
      // the words are read back from memory as broadcasts: keep the
      // compiler from forwarding the store as shuffles
      asm volatile("" ::: "memory");
    }
    const int32_t *ak = ap + p * MR;
    __m512bh bv[V];
    if constexpr (BFromRows) {
      // rows 2p and 2p + 1 interleaved into pair words, kept for the
      // block's other calls; each row's lines (4: a row that does not
      // start a line spans 4) asked 8 pairs ahead
      const float *r0 = b + 2 * p * ldb;
      const bool two = 2 * p + 1 < kc;
      for (const float *r : {r0 + 16 * ldb, r0 + 17 * ldb})
        for (int l : {0, 16, 32, 47})
          _mm_prefetch(reinterpret_cast<const char *>(r + l), _MM_HINT_T0);
#pragma unroll
      for (int j = 0; j < V; ++j) {
        const __m512 x0 = _mm512_loadu_ps(r0 + 16 * j);
        const __m512 x1 = two ? _mm512_loadu_ps(r0 + ldb + 16 * j) : _mm512_setzero_ps();
        const __m512i w = interleave16(x0, x1);
        _mm512_storeu_si512(bCopy + p * NR + 16 * j, w);
        bv[j] = reinterpret_cast<__m512bh>(w);
      }
    } else {
      const float *bk = b + p * NR;
#pragma unroll
      for (int j = 0; j < V; ++j)
        bv[j] = reinterpret_cast<__m512bh>(_mm512_loadu_si512(bk + 16 * j));
      _mm_prefetch(reinterpret_cast<const char *>(bk + 8 * NR), _MM_HINT_T0);
    }
#pragma unroll
    for (int i = 0; i < MR; ++i) {
      const __m512bh ai = reinterpret_cast<__m512bh>(_mm512_set1_epi32(ak[i]));
#pragma unroll
      for (int j = 0; j < V; ++j)
        acc[i][j] = _mm512_dpbf16_ps(acc[i][j], ai, bv[j]);
    }
  };
  int64_t p = 0;
  for (; p + 16 < pairs; ++p)
    step(p);
#pragma unroll
  for (int i = 0; i < MR; ++i)
    for (int l : {0, 64, 128, 191})
      if (l < 16 * cBytes * V)
        _mm_prefetch(cRow(i) + l, _MM_HINT_T0);
  for (; p < pairs; ++p)
    step(p);
  const __m512 va = _mm512_set1_ps(alpha);
  const __mmask16 last = static_cast<__mmask16>(
      nr >= 16 * V ? 0xffff : (1u << (nr - 16 * (V - 1))) - 1);
  __m512 vbias[V];
#pragma unroll
  for (int j = 0; j < V; ++j)
    vbias[j] = bias ? _mm512_maskz_loadu_ps(j + 1 < V ? 0xffff : last, bias + 16 * j)
                    : _mm512_setzero_ps();
#pragma unroll
  for (int i = 0; i < MR; ++i)
#pragma unroll
    for (int j = 0; j < V; ++j) {
      const __mmask16 mk = j + 1 < V ? 0xffff : last;
      __m512 r = _mm512_mul_ps(va, acc[i][j]);
      if (bias && cBf16)
        r = _mm512_add_ps(r, vbias[j]);
      if (cBf16) {
        const __m256i h = reinterpret_cast<__m256i>(_mm512_cvtneps_pbh(r));
        void *q = cRow(i) + 32 * j;
        if (mk == 0xffff)
          _mm256_storeu_si256(static_cast<__m256i *>(q), h);
        else
          _mm256_mask_storeu_epi16(q, mk, h);
        continue;
      }
      float *q = c + i * ldc + 16 * j;
      if (beta != 0.0f)
        r = _mm512_fmadd_ps(_mm512_set1_ps(beta), _mm512_maskz_loadu_ps(mk, q), r);
      if (bias)
        r = _mm512_add_ps(r, vbias[j]);
      if (mk == 0xffff)
        _mm512_storeu_ps(q, r);
      else
        _mm512_mask_storeu_ps(q, mk, r);
    }
}

void micro(int64_t kc, const float *a, const float *b, float *c, int64_t ldc,
           float alpha, float beta) {
  microV<3>(kc, a, MR, nullptr, b, c, ldc, alpha, beta, NR);
}

// An edge tile of nr < NR columns into `tile` (rows NR apart, beta 0):
// only the vectors that hold them.
void microEdge(int64_t kc, const float *a, const float *b, float *tile,
               float alpha, int nr) {
  if (nr <= 16)
    microV<1>(kc, a, MR, nullptr, b, tile, NR, alpha, 0.0f, nr);
  else if (nr <= 32)
    microV<2>(kc, a, MR, nullptr, b, tile, NR, alpha, 0.0f, nr);
  else
    microV<3>(kc, a, MR, nullptr, b, tile, NR, alpha, 0.0f, nr);
}

template <ASource S>
void microNr(int64_t kc, const float *a, int64_t lda, int32_t *aCopy,
             const float *b, float *c, int64_t ldc, float alpha, float beta,
             int nr, const float *bias, bool cBf16) {
  if (nr <= 16)
    microV<1, S>(kc, a, lda, aCopy, b, c, ldc, alpha, beta, nr, bias, NR, nullptr, cBf16);
  else if (nr <= 32)
    microV<2, S>(kc, a, lda, aCopy, b, c, ldc, alpha, beta, nr, bias, NR, nullptr, cBf16);
  else
    microV<3, S>(kc, a, lda, aCopy, b, c, ldc, alpha, beta, nr, bias, NR, nullptr, cBf16);
}

// The driver's micro-kernel with A read in place (GemmKernel: directB
// false, so B is a packed sliver unless bCopy asks for it converted): A's
// fp32 source is converted while the first sliver's products run, instead
// of in a pass of its own before them (a pass over the whole of dY for
// the gradients), and the converted panel left at aCopy for the other
// slivers (read packed, aLayout 0); B's the same way for the block's
// other row panels.
void microDirect(int64_t kc, const float *a, int64_t lda, int aLayout,
                 float *aCopy, const float *b, int64_t ldbk, float *bCopy,
                 float *c, int64_t ldc, float alpha, float beta, int nr,
                 const float *bias, bool cBf16) {
  int32_t *aWords = reinterpret_cast<int32_t *>(aCopy);
  if (bCopy) {  // a whole sliver of B's rows (convertsB), converted once
    if (aLayout == 1)
      microV<3, ARowMajor, true>(kc, a, lda, aWords, b, c, ldc, alpha, beta,
                                 nr, bias, ldbk, bCopy, cBf16);
    else if (aLayout == 4)
      microV<3, ARowMajorBf16, true>(kc, a, lda, aWords, b, c, ldc, alpha, beta,
                                     nr, bias, ldbk, bCopy, cBf16);
    else if (aLayout >= 2)
      microV<3, ATransposed, true>(kc, a, lda, aWords, b, c, ldc, alpha, beta,
                                   nr, bias, ldbk, bCopy, cBf16);
    else
      microV<3, APacked, true>(kc, a, MR, nullptr, b, c, ldc, alpha, beta, nr,
                               bias, ldbk, bCopy, cBf16);
    return;
  }
  if (aLayout == 1)
    microNr<ARowMajor>(kc, a, lda, reinterpret_cast<int32_t *>(aCopy), b, c,
                       ldc, alpha, beta, nr, bias, cBf16);
  else if (aLayout == 4)
    microNr<ARowMajorBf16>(kc, a, lda, reinterpret_cast<int32_t *>(aCopy), b, c,
                           ldc, alpha, beta, nr, bias, cBf16);
  else if (aLayout >= 2)
    microNr<ATransposed>(kc, a, lda, reinterpret_cast<int32_t *>(aCopy), b, c,
                         ldc, alpha, beta, nr, bias, cBf16);
  else
    microNr<APacked>(kc, a, MR, nullptr, b, c, ldc, alpha, beta, nr, bias, cBf16);
}

} // namespace

// B in 32-column slivers of pair words (word (p, j) at sliver[p * 32 + j]):
// the AMX kernel's B (gemm_amxbf16.cpp), whose tile rows are k pairs.
void packPairsB32(const float *B, int64_t ldb, int transB, int64_t k0,
                  int64_t kc, int64_t n0, int64_t nc, float *dst) {
  packSlivers<32>(B, ldb, transB, k0, kc, n0, nc, dst);
}

// packPairsB32's panel from a bf16 B (GemmKernel::packBBf16).
void packPairsB32Bf16(const uint16_t *B, int64_t ldb, int transB, int64_t k0,
                      int64_t kc, int64_t n0, int64_t nc, float *dst) {
  packSlivers<32>(B, ldb, transB, k0, kc, n0, nc, dst);
}

} // namespace gemm_avx512bf16
#pragma clang attribute pop

const GemmKernel &gemmAvx512Bf16() {
  // The tile epilogue is the fp32 AVX-512 one: the accumulators are fp32.
  static const GemmKernel k = [] {
    GemmKernel r = {gemm_avx512bf16::MR,    gemm_avx512bf16::NR,
                    gemm_avx512bf16::packA, gemm_avx512bf16::packB,
                    gemm_avx512bf16::micro, gemm_avx512bf16::microEdge,
                    gemmAvx512().combine,   gemm_avx512bf16::microDirect};
    r.directB = false;
    r.copiesA = true;
    r.directRowsABf16 = true;
    r.convertsB = true;
    r.flopsPerCycle = 128;  // 2 vdpbf16ps of 16 lanes x 2 products a cycle
    r.pairedB = true;
    r.storesBf16C = true;
    r.packABf16 = gemm_avx512bf16::packABf16;
    r.packBBf16 = gemm_avx512bf16::packBBf16;
    return r;
  }();
  return k;
}

} // namespace hc::rt
