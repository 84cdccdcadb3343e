// bf16 GEMM kernel on AMX tiles (TDPBF16PS: a 16 x 16 fp32 tile += a
// 16-row x 16-pair bf16 tile times a 16-pair x 16-column one). The paper's
// "matrix acceleration unit" on the x86 CPUs that have one (Sapphire
// Rapids and later). Same contract and driver as the AVX512-BF16 kernel
// (gemm_avx512bf16.cpp): float32 operands rounded to bf16 while packed,
// bf16-stored ones packed from their bits, products summed in float32; only the micro-kernel and A's
// layout differ.
//
// The 32 x 32 micro-tile is 2 x 2 accumulator tiles (four independent
// TDPBF16PS chains: one instruction issues every 16 cycles and its result
// takes longer than that), two A tiles and two B tiles: all 8 tile
// registers, configured by each thread as it packs a block of A (so that
// another library's tile configuration on the thread between two GEMMs
// does no harm). The tiles are not released: the team's threads keep 8 KiB
// of tile state across context switches.
//
// Packed layouts (one uint32 word = bf16(x[2p]) | bf16(x[2p + 1]) << 16),
// for the k pairs p in [0, ceil(kc / 2)), split into blocks of 16 pairs
// (one tile's depth) and a tail of tp = ceil(kc / 2) % 16 pairs:
//   A: 32-row panels; block q's words of row i at panel[q * 512 + i * 16 +
//      p % 16] (the tile rows are A's rows); the tail's at panel[nb * 512 +
//      i * tp + p % 16]. A panel fills half of its fp32 room (MR * kc).
//   B: 32-column slivers, word (p, j) at sliver[p * 32 + j] (the tile rows
//      are k pairs: packPairsB32, gemm_avx512bf16.cpp's layout).
// Rows and columns past the block's edge, and an odd kc's last high half,
// are zero. The tail is copied into zero-padded tiles in the kernel (a
// tile configuration has one depth, and loading another zeroes the tiles).
//
// Tiles, by the policy `T`: HardwareTiles issues the AMX instructions;
// EmulatedTiles carries out each in C++ with the hardware's order of fp32
// sums and flushing of denormals, measured (EmulatedTiles::dot), so that
// CPUs without AMX test the same bits (gtest.runtime.GemmBf16.*; where
// both run, AmxTilesAgainstTheirEmulation requires them equal).
#include "internal.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

namespace hc::rt {
#pragma clang attribute push(__attribute__((target("amx-tile,amx-bf16,avx512f,avx512dq,avx512bw,avx512vl,avx512bf16,avx2,fma,prfchw"))), apply_to = function)
namespace gemm_amxbf16 {
namespace {

constexpr int MR = 32, NR = 32;
constexpr int kPairsPerTile = 16;              // a tile row: 64 bytes of pairs
constexpr int64_t kBlockWords = MR * kPairsPerTile;  // A's words per block (= B's)

// Tile registers: C rows r, columns v at 2r + v; A's row halves; B's
// column halves.
enum : int { C00 = 0, C01 = 1, C10 = 2, C11 = 3, A0 = 4, A1 = 5, B0 = 6, B1 = 7 };

struct TileConfig {
  uint8_t palette = 1, startRow = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};

static_assert(sizeof(TileConfig) == 64, "LDTILECFG reads 64 bytes");

// Every tile 16 rows of 64 bytes: C 16 x 16 fp32, A 16 rows x 16 pairs,
// B 16 pairs x 16 columns.
TileConfig fullConfig() {
  TileConfig c;
  for (int t = 0; t < 8; ++t) {
    c.colsb[t] = 64;
    c.rows[t] = 16;
  }
  return c;
}

struct HardwareTiles {
  // always: load it again (each block of A); else only where this thread
  // never did. The configuration is per thread and stays until changed.
  static void configure(bool always) {
    static thread_local bool configured = false;
    if (always || !configured) {
      const TileConfig c = fullConfig();
      _tile_loadconfig(&c);
      configured = true;
    }
  }
  template <int t> static void zero() { _tile_zero(t); }
  template <int t> static void load(const void *p, int64_t stride) { _tile_loadd(t, p, stride); }
  template <int t> static void store(void *p, int64_t stride) { _tile_stored(t, p, stride); }
  template <int c, int a, int b> static void dot() { _tile_dpbf16ps(c, a, b); }
};

struct EmulatedTiles {
  struct State {
    alignas(64) unsigned char tile[8][16 * 64];
  };
  static State &state() {
    static thread_local State s;
    return s;
  }
  static void configure(bool) {}
  template <int t> static void zero() { std::memset(state().tile[t], 0, 16 * 64); }
  template <int t> static void load(const void *p, int64_t stride) {
    for (int r = 0; r < 16; ++r)
      std::memcpy(state().tile[t] + 64 * r, static_cast<const char *>(p) + r * stride, 64);
  }
  template <int t> static void store(void *p, int64_t stride) {
    for (int r = 0; r < 16; ++r)
      std::memcpy(static_cast<char *>(p) + r * stride, state().tile[t] + 64 * r, 64);
  }
  static float bf(const unsigned char *p) {
    uint16_t h;
    std::memcpy(&h, p, 2);
    const uint32_t u = static_cast<uint32_t>(h) << 16;
    float f;
    std::memcpy(&f, &u, 4);
    return f;
  }
  // Denormals as the hardware treats them: inputs read as zero, results
  // flushed (zeros keep their sign).
  static float flush(float x) {
    return std::fpclassify(x) == FP_SUBNORMAL ? std::copysign(0.0f, x) : x;
  }
  // TDPBF16PS as the hardware computes it (measured on the lent Xeon:
  // bench/results-device-amx-spr16.txt): for each row m and column n, the
  // products of the pairs' low halves summed in float32 in pair order, the
  // high halves' likewise, the two sums added, then that added to C (not
  // the SDM pseudo-code's order, two products added to C per pair).
  template <int c, int a, int b> static void dot() {
    State &s = state();
    float C[16][16];
    std::memcpy(C, s.tile[c], sizeof C);
    for (int m = 0; m < 16; ++m) {
      float lo[16] = {}, hi[16] = {};
      for (int k = 0; k < 16; ++k)
        for (int n = 0; n < 16; ++n) {
          const unsigned char *ak = s.tile[a] + 64 * m + 4 * k, *bk = s.tile[b] + 64 * k + 4 * n;
          const float p0 = flush(flush(bf(ak)) * flush(bf(bk)));
          const float p1 = flush(flush(bf(ak + 2)) * flush(bf(bk + 2)));
          lo[n] = flush(lo[n] + p0);
          hi[n] = flush(hi[n] + p1);
        }
      for (int n = 0; n < 16; ++n)
        C[m][n] = flush(flush(C[m][n]) + flush(lo[n] + hi[n]));
    }
    std::memcpy(s.tile[c], C, sizeof C);
  }
};

// ------------------------------------------------------------ packing ----

// 32 floats of a row (the first n; the rest zero) as 16 pair words.
inline __m512i rowWords(const float *src, int n) {
  __m512 lo, hi;
  if (n >= 32) {
    lo = _mm512_loadu_ps(src);
    hi = _mm512_loadu_ps(src + 16);
  } else {
    const int nl = n < 16 ? n : 16, nh = n - nl;
    lo = _mm512_maskz_loadu_ps(static_cast<__mmask16>((1u << nl) - 1), src);
    hi = _mm512_maskz_loadu_ps(static_cast<__mmask16>((1u << nh) - 1), src + 16);
  }
  return reinterpret_cast<__m512i>(_mm512_cvtne2ps_pbh(hi, lo));
}

// The same from a bf16 row (the compiler's bf16 storage): its k run
// already is the pairs, copied.
inline __m512i rowWords(const uint16_t *src, int n) {
  if (n >= 32)
    return _mm512_loadu_si512(src);
  return _mm512_maskz_loadu_epi16(static_cast<__mmask32>((1u << n) - 1), src);
}

// 16 floats (the first n) as 16 bf16 in the low halves of 32-bit words.
inline __m512i lowHalves(const float *src, __mmask16 m) {
  return _mm512_cvtepu16_epi32(reinterpret_cast<__m256i>(
      _mm512_cvtneps_pbh(_mm512_maskz_loadu_ps(m, src))));
}

// The same from 16 bf16 (the first n): their bits.
inline __m512i lowHalves(const uint16_t *src, __mmask16 m) {
  return _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, src));
}

// r[0..15] as 16 x 16 words, transposed in place (r[i] lane j <- r[j] lane i).
inline void transpose16(__m512i r[16]) {
  __m512i t[16], u[16];
  for (int j = 0; j < 8; ++j) {
    t[2 * j] = _mm512_unpacklo_epi32(r[2 * j], r[2 * j + 1]);
    t[2 * j + 1] = _mm512_unpackhi_epi32(r[2 * j], r[2 * j + 1]);
  }
  // u[4j + c]'s 128-bit lane L: column 4L + c of rows 4j..4j + 3
  for (int j = 0; j < 4; ++j) {
    u[4 * j + 0] = _mm512_unpacklo_epi64(t[4 * j], t[4 * j + 2]);
    u[4 * j + 1] = _mm512_unpackhi_epi64(t[4 * j], t[4 * j + 2]);
    u[4 * j + 2] = _mm512_unpacklo_epi64(t[4 * j + 1], t[4 * j + 3]);
    u[4 * j + 3] = _mm512_unpackhi_epi64(t[4 * j + 1], t[4 * j + 3]);
  }
  for (int c = 0; c < 4; ++c) {
    const __m512i v0 = _mm512_shuffle_i32x4(u[c], u[4 + c], 0x44);
    const __m512i v1 = _mm512_shuffle_i32x4(u[c], u[4 + c], 0xEE);
    const __m512i w0 = _mm512_shuffle_i32x4(u[8 + c], u[12 + c], 0x44);
    const __m512i w1 = _mm512_shuffle_i32x4(u[8 + c], u[12 + c], 0xEE);
    r[c] = _mm512_shuffle_i32x4(v0, w0, 0x88);
    r[4 + c] = _mm512_shuffle_i32x4(v0, w0, 0xDD);
    r[8 + c] = _mm512_shuffle_i32x4(v1, w1, 0x88);
    r[12 + c] = _mm512_shuffle_i32x4(v1, w1, 0xDD);
  }
}

// One 32-row panel of A (rows < 32 of them real) in the AMX layout.
// Row-major source (float32 or bf16): each row's k run is converted
// straight into its blocks.
template <class Src>
void packPanelRows(const Src *src, int64_t lda, int rows, int64_t kc, int32_t *dst) {
  const int64_t pairs = (kc + 1) / 2, nb = pairs / kPairsPerTile;
  const int tp = static_cast<int>(pairs % kPairsPerTile);
  const __mmask16 tailMask = static_cast<__mmask16>((1u << tp) - 1);
  for (int i = 0; i < MR; ++i) {
    const Src *row = src + i * lda;
    // the next rows' first lines (each row is a stream of its own)
    if (i + 4 < rows)
      _mm_prefetch(reinterpret_cast<const char *>(row + 4 * lda), _MM_HINT_T0);
    for (int64_t q = 0; q < nb; ++q)
      _mm512_storeu_si512(dst + q * kBlockWords + i * kPairsPerTile,
                          i < rows ? rowWords(row + 32 * q, static_cast<int>(std::min<int64_t>(32, kc - 32 * q)))
                                   : _mm512_setzero_si512());
    if (tp)
      _mm512_mask_storeu_epi32(dst + nb * kBlockWords + i * tp, tailMask,
                               i < rows ? rowWords(row + 32 * nb, static_cast<int>(kc - 32 * nb))
                                        : _mm512_setzero_si512());
  }
}

// Transposed source (element (i, k) at src[k * lda + i]; float32 or bf16
// elements: attention's V^T is bf16-stored), the whole mc-row
// block at once: per block of 16 pairs and group of 16 of A's rows, 16
// pair words built from two source rows each, then transposed so that
// each of A's rows holds its pairs. Blocks outermost: a block's 32 source
// rows are read along their mc contiguous floats, a stream the hardware
// prefetches, where a panel at a time read 128 bytes of each row 4-6 KiB
// apart (the weight gradients' dY, from memory).
template <class Src>
void packBlockCols(const Src *src, int64_t lda, int64_t mc, int64_t kc, int32_t *dst) {
  const int64_t pairs = (kc + 1) / 2, nb = pairs / kPairsPerTile;
  const int tp = static_cast<int>(pairs % kPairsPerTile);
  const int64_t groups = (mc + MR - 1) / MR * (MR / 16);
  for (int64_t q = 0; q <= nb; ++q) {
    const int depth = q < nb ? kPairsPerTile : tp;
    if (depth == 0)
      break;
    for (int64_t g = 0; g < groups; ++g) {
      const int64_t n = mc - 16 * g;
      const __mmask16 m = n >= 16 ? 0xffff : n <= 0 ? 0 : static_cast<__mmask16>((1u << n) - 1);
      __m512i w[16];
      for (int pp = 0; pp < 16; ++pp) {
        const int64_t k = 2 * (q * kPairsPerTile + pp);
        if (pp >= depth) {
          w[pp] = _mm512_setzero_si512();
          continue;
        }
        const Src *r0 = src + k * lda + 16 * g;
        const __m512i lo = lowHalves(r0, m);
        const __m512i hi = k + 1 < kc ? lowHalves(r0 + lda, m) : _mm512_setzero_si512();
        w[pp] = _mm512_or_si512(lo, _mm512_slli_epi32(hi, 16));
        _mm_prefetch(reinterpret_cast<const char *>(r0 + 32 * lda), _MM_HINT_T0);
        _mm_prefetch(reinterpret_cast<const char *>(r0 + 33 * lda), _MM_HINT_T0);
      }
      transpose16(w);  // w[i]: row 16g + i's pairs of this block
      // panel g / 2 starts at MR * kc floats per panel; its rows 16 (g % 2) + i
      int32_t *blk = dst + (g / 2) * MR * kc + q * kBlockWords;
      const int64_t r = 16 * (g % 2);
      for (int i = 0; i < 16; ++i) {
        if (depth == kPairsPerTile)
          _mm512_storeu_si512(blk + (r + i) * kPairsPerTile, w[i]);
        else
          _mm512_mask_storeu_epi32(blk + (r + i) * tp,
                                   static_cast<__mmask16>((1u << tp) - 1), w[i]);
      }
    }
  }
}

// An odd kc's last whole block holds 31 k (its last pair's high half is
// zero): rowWords reads only those.
template <class T>
void packA(const float *A, int64_t lda, int transA, int64_t m0, int64_t mc,
           int64_t k0, int64_t kc, float *dst) {
  T::configure(true);
  if (transA)  // A is K x M: element (m, k) at A[k * lda + m]
    return packBlockCols(A + k0 * lda + m0, lda, mc, kc, reinterpret_cast<int32_t *>(dst));
  for (int64_t i = 0; i < mc; i += MR) {
    const int rows = static_cast<int>(mc - i < MR ? mc - i : MR);
    packPanelRows(A + (m0 + i) * lda + k0, lda, rows, kc, reinterpret_cast<int32_t *>(dst + i * kc));
  }
}

// packA of a bf16 A (GemmKernel::packABf16): rows copied as pairs, a
// transposed one (attention's V^T) interleaved from its bits.
template <class T>
void packABf16(const uint16_t *A, int64_t lda, int transA, int64_t m0, int64_t mc,
               int64_t k0, int64_t kc, float *dst) {
  T::configure(true);
  if (transA) {  // A is K x M: element (m, k) at A[k * lda + m]
    packBlockCols(A + k0 * lda + m0, lda, mc, kc, reinterpret_cast<int32_t *>(dst));
    return;
  }
  for (int64_t i = 0; i < mc; i += MR) {
    const int rows = static_cast<int>(mc - i < MR ? mc - i : MR);
    packPanelRows(A + (m0 + i) * lda + k0, lda, rows, kc, reinterpret_cast<int32_t *>(dst + i * kc));
  }
}

// -------------------------------------------------------- micro-kernel ----

// The four accumulator tiles += A's panel times B's sliver over kc.
template <class T> void accumulate(int64_t kc, const int32_t *a, const int32_t *b) {
  const int64_t pairs = (kc + 1) / 2, nb = pairs / kPairsPerTile;
  const int tp = static_cast<int>(pairs % kPairsPerTile);
  // Each tile loaded just before its first product, so that a load
  // waits only for the products that read its register before.
  auto block = [](const int32_t *ak, const int32_t *bk) __attribute__((always_inline)) {
    T::template load<A0>(ak, 64);
    T::template load<B0>(bk, 4 * NR);
    T::template dot<C00, A0, B0>();
    T::template load<B1>(bk + 16, 4 * NR);
    T::template dot<C01, A0, B1>();
    T::template load<A1>(ak + 16 * kPairsPerTile, 64);
    T::template dot<C10, A1, B0>();
    T::template dot<C11, A1, B1>();
  };
  for (int64_t q = 0; q < nb; ++q)
    block(a + q * kBlockWords, b + q * kBlockWords);
  if (tp) {
    // The tail: tp pairs, zero-padded to a tile's depth.
    alignas(64) int32_t at[MR * kPairsPerTile], bt[kPairsPerTile * NR];
    const int32_t *ak = a + nb * kBlockWords, *bk = b + nb * kBlockWords;
    std::memset(at, 0, sizeof at);
    std::memset(bt, 0, sizeof bt);
    for (int i = 0; i < MR; ++i)
      std::memcpy(at + i * kPairsPerTile, ak + i * tp, tp * sizeof(int32_t));
    std::memcpy(bt, bk, tp * NR * sizeof(int32_t));
    block(at, bt);
  }
}

template <class T> void storeTiles(float *c, int64_t ldc) {
  const int64_t s = ldc * static_cast<int64_t>(sizeof(float));
  T::template store<C00>(c, s);
  T::template store<C01>(c + 16, s);
  T::template store<C10>(c + 16 * ldc, s);
  T::template store<C11>(c + 16 * ldc + 16, s);
}

// C[0:MR, 0:nr] = alpha * A B + beta * C. A whole tile with alpha 1 and
// beta 0 or 1 goes straight between C and the tiles; anything else
// through a staging tile.
// bias (whole tiles, alpha 1, beta 0; else null): the accumulators start
// from it (each tile's 16 rows loaded from the same 64 bytes), so a
// linear's C = bias + A B is stored straight from the tiles.
template <class T>
void microT(int64_t kc, const float *a, const float *b, float *c, int64_t ldc,
            float alpha, float beta, int nr, const float *bias = nullptr) {
  T::configure(false);
  // C's lines asked for (to write) before the products: a tile's rows lie
  // ldc apart, each store a miss of its own at the end otherwise (1 thread,
  // S/2's 8192 x 384 x 384 ran at 14% of the tile peak, its dW, whose C
  // stays in L2, at 27%).
  for (int i = 0; i < MR; ++i)
    for (int l : {0, 16, 31})
      if (l < nr)
        __builtin_prefetch(c + i * ldc + l, 1, 3);  // prefetchw
  const int32_t *aw = reinterpret_cast<const int32_t *>(a);
  const int32_t *bw = reinterpret_cast<const int32_t *>(b);
  const bool direct = nr == NR && alpha == 1.0f && (beta == 0.0f || beta == 1.0f);
  if (bias) {
    T::template load<C00>(bias, 0);
    T::template load<C01>(bias + 16, 0);
    T::template load<C10>(bias, 0);
    T::template load<C11>(bias + 16, 0);
  } else if (direct && beta == 1.0f) {
    const int64_t s = ldc * static_cast<int64_t>(sizeof(float));
    T::template load<C00>(c, s);
    T::template load<C01>(c + 16, s);
    T::template load<C10>(c + 16 * ldc, s);
    T::template load<C11>(c + 16 * ldc + 16, s);
  } else {
    T::template zero<C00>();
    T::template zero<C01>();
    T::template zero<C10>();
    T::template zero<C11>();
  }
  accumulate<T>(kc, aw, bw);
  if (direct) {
    storeTiles<T>(c, ldc);
    return;
  }
  alignas(64) float t[MR * NR];
  storeTiles<T>(t, NR);
  const __mmask16 lo = static_cast<__mmask16>(nr >= 16 ? 0xffff : (1u << nr) - 1);
  const __mmask16 hi = static_cast<__mmask16>(nr >= 32 ? 0xffff : nr <= 16 ? 0 : (1u << (nr - 16)) - 1);
  const __m512 va = _mm512_set1_ps(alpha), vb = _mm512_set1_ps(beta);
  for (int i = 0; i < MR; ++i)
    for (int h = 0; h < 2; ++h) {
      const __mmask16 mk = h ? hi : lo;
      float *q = c + i * ldc + 16 * h;
      __m512 r = _mm512_mul_ps(va, _mm512_load_ps(t + i * NR + 16 * h));
      if (beta != 0.0f)
        r = _mm512_fmadd_ps(vb, _mm512_maskz_loadu_ps(mk, q), r);
      _mm512_mask_storeu_ps(q, mk, r);
    }
}

template <class T>
void micro(int64_t kc, const float *a, const float *b, float *c, int64_t ldc,
           float alpha, float beta) {
  microT<T>(kc, a, b, c, ldc, alpha, beta, NR);
}

// C[0:MR, 0:NR] = bias + A B (the driver's bias epilogue on a whole tile
// of the first k block, alpha 1, beta 0).
template <class T>
void microBias(int64_t kc, const float *a, const float *b, float *c, int64_t ldc,
               const float *bias) {
  microT<T>(kc, a, b, c, ldc, 1.0f, 0.0f, NR, bias);
}

// An edge tile of nr < NR columns into `tile` (rows NR apart, beta 0).
template <class T>
void microEdge(int64_t kc, const float *a, const float *b, float *tile,
               float alpha, int nr) {
  microT<T>(kc, a, b, tile, NR, alpha, 0.0f, nr);
}

// The fp32 AVX-512 epilogue, whose staging buffers hold its own 8-row
// tiles: run on 8 rows at a time.
void combine(const float *t, int64_t ldt, int mr, int nr, float *C, int64_t ldc,
             int64_t m0, int64_t n0, const EpiCtx &e, bool first, bool last) {
  const GemmKernel &f = gemmAvx512();
  for (int i = 0; i < mr; i += f.mr)
    f.combine(t + i * ldt, ldt, mr - i < f.mr ? mr - i : f.mr, nr, C, ldc,
              m0 + i, n0, e, first, last);
}

} // namespace

double peakLoop(long iters) {
  HardwareTiles::configure(false);
  alignas(64) static const int32_t zeros[16 * 16] = {};
  _tile_zero(C00);
  _tile_zero(C01);
  _tile_zero(C10);
  _tile_zero(C11);
  _tile_loadd(A0, zeros, 64);
  _tile_loadd(A1, zeros, 64);
  _tile_loadd(B0, zeros, 64);
  _tile_loadd(B1, zeros, 64);
  for (long i = 0; i < iters; ++i) {
    _tile_dpbf16ps(C00, A0, B0);
    _tile_dpbf16ps(C01, A0, B1);
    _tile_dpbf16ps(C10, A1, B0);
    _tile_dpbf16ps(C11, A1, B1);
  }
  alignas(64) float out[16 * 16];
  _tile_stored(C00, out, 64);
  return out[0];
}

} // namespace gemm_amxbf16
#pragma clang attribute pop

const GemmKernel &gemmAmxBf16(bool emulated) {
  using namespace gemm_amxbf16;
  auto make = [](auto tiles) {
    using T = decltype(tiles);
    GemmKernel r = {MR,          NR,           packA<T>, gemm_avx512bf16::packPairsB32,
                    micro<T>,    microEdge<T>, combine, nullptr};
    r.directRowsA = false;
    r.directB = false;
    // 16 x 16 x 32 products every 16 cycles: 1024 FLOPs a cycle at best.
    r.flopsPerCycle = 1024;
    r.pairedB = true;
    r.microBias = microBias<T>;
    r.packABf16 = packABf16<T>;
    r.packBBf16 = gemm_avx512bf16::packPairsB32Bf16;
    return r;
  };
  static const GemmKernel hardware = make(HardwareTiles{});
  static const GemmKernel emulation = make(EmulatedTiles{});
  return emulated ? emulation : hardware;
}

double amxBf16Loop(long iters) { return gemm_amxbf16::peakLoop(iters); }

} // namespace hc::rt
