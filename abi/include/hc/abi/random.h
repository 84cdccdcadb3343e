// Counter-based random numbers (Philox4x32-10): a draw is a pure function of
// (seed, step, global sample index, op id, element index), so the same global
// sample draws the same numbers at any rank count and in any order.
// Header-only: the compiler's reference evaluator and generated code share it.
#ifndef HC_ABI_RANDOM_H
#define HC_ABI_RANDOM_H

#include <cstdint>

namespace hc::rt {

struct PhiloxBlock {
  uint32_t v[4];
};

inline PhiloxBlock philox4x32(uint32_t c0, uint32_t c1, uint32_t c2,
                              uint32_t c3, uint32_t k0, uint32_t k1) {
  constexpr uint32_t M0 = 0xD2511F53u, M1 = 0xCD9E8D57u;
  constexpr uint32_t W0 = 0x9E3779B9u, W1 = 0xBB67AE85u;
  for (int round = 0; round < 10; ++round) {
    uint64_t p0 = static_cast<uint64_t>(M0) * c0;
    uint64_t p1 = static_cast<uint64_t>(M1) * c2;
    uint32_t n0 = static_cast<uint32_t>(p1 >> 32) ^ c1 ^ k0;
    uint32_t n2 = static_cast<uint32_t>(p0 >> 32) ^ c3 ^ k1;
    c1 = static_cast<uint32_t>(p1);
    c3 = static_cast<uint32_t>(p0);
    c0 = n0;
    c2 = n2;
    k0 += W0;
    k1 += W1;
  }
  return {{c0, c1, c2, c3}};
}

// The op id (a draw's fourth key, 16 bits: the sample's high bits sit
// above them). A graph's own random ops (hc.random_uniform) are numbered
// from kGraphDrawFirst in import order; hc-run's own draws (its draw kinds:
// tools/hc-run/data.h, sample_mode.h) stay below it, so no op of a model
// ever draws the numbers of a trainer's draw for the same sample.
constexpr uint64_t kGraphDrawFirst = 0x100, kGraphDrawEnd = 0x10000;

// The 0-d int64 step inputs a graph with random ops gains (the operands of
// its hc.random_uniform ops). hc-run's train mode fills them per micro-batch:
// its seed, the 0-based step its own draws use, and the global index of the
// micro-batch's first sample (samples b of it are offset + b).
constexpr const char *kRngSeedInput = "hc.rng_seed";
constexpr const char *kRngStepInput = "hc.rng_step";
constexpr const char *kSampleOffsetInput = "hc.sample_offset";

// Uniform in [0, 1) with 24 random bits (exactly representable as float).
inline double uniform01(uint64_t seed, uint64_t step, uint64_t sample,
                        uint64_t opId, uint64_t element) {
  PhiloxBlock b = philox4x32(
      static_cast<uint32_t>(element), static_cast<uint32_t>(sample),
      static_cast<uint32_t>(step),
      static_cast<uint32_t>(opId) ^ (static_cast<uint32_t>(sample >> 32) << 16),
      static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32));
  return static_cast<double>(b.v[0] >> 8) * (1.0 / 16777216.0);
}

} // namespace hc::rt

#endif // HC_ABI_RANDOM_H
