// The packed B panels of b_constant GEMM calls (hc_sgemm_args): a sampler's
// weights are the same in every model call, yet each call packed them
// again (bf16: rounded and paired), 6% of DiT-S/2's bf16 sampling and 5%
// of its fp32 sampling on the Zen 4 VM. The first call that needs a panel
// packs it into a kept copy; later calls with the same B, layout and
// kernel read the copy. The owner of B drops them (hcrt_gemm_forget_packed)
// before B changes or its memory is freed.
#include "internal.h"
#include "hc/base/settings.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <tuple>
#include <vector>

namespace hc::rt {
namespace {

struct PanelKey {
  const GemmKernel *kernel;
  const float *B;
  int64_t ldb;
  int transB;
  int64_t k0, kc, n0, nc;
  bool operator<(const PanelKey &o) const {
    return std::tie(kernel, B, ldb, transB, k0, kc, n0, nc) <
           std::tie(o.kernel, o.B, o.ldb, o.transB, o.k0, o.kc, o.n0, o.nc);
  }
};

struct FreeDeleter {
  void operator()(float *p) const { std::free(p); }
};

struct Panel {
  std::unique_ptr<float, FreeDeleter> data;
  std::size_t bytes = 0;
  uintptr_t srcBegin = 0, srcEnd = 0;  // the bytes of B it was packed from
};

// A limit on the panels packed from one range of bytes (a step's
// parameter arena: the memory plan's room for them, hcrt_gemm_limit_packed).
struct Region {
  uintptr_t begin, end;
  std::size_t limit, bytes = 0;
};

struct PanelCache {
  std::mutex mu;
  std::map<PanelKey, Panel> panels;
  std::size_t bytes = 0;
  std::vector<Region> regions;
  // The region B's first byte lies in, or null.
  Region *regionOf(uintptr_t b) {
    for (Region &r : regions)
      if (r.begin <= b && b < r.end)
        return &r;
    return nullptr;
  }
};

PanelCache &cache() {
  static PanelCache *c = new PanelCache();  // outlives every static user
  return *c;
}

// Read at every call (tests change it).
std::size_t capacityBytes() {
  const long long mb = hc::rt::settingInt(hc::rt::Setting::GemmPackedMb, 4096);
  return mb > 0 ? static_cast<std::size_t>(mb) << 20 : std::size_t{0};
}

// The floats k.packB writes for nc columns: whole slivers of NR, kc each.
std::size_t panelFloats(const GemmKernel &k, int64_t kc, int64_t nc) {
  return static_cast<std::size_t>((nc + k.nr - 1) / k.nr * k.nr * kc);
}

}  // namespace

bool keepsPanels() { return capacityBytes() > 0; }

const float *constantPanel(const GemmKernel &k, const float *B, int64_t ldb,
                           int transB, int64_t k0, int64_t kc, int64_t n0,
                           int64_t nc, float *scratch) {
  const PanelKey key{&k, B, ldb, transB, k0, kc, n0, nc};
  PanelCache &c = cache();
  {
    std::lock_guard<std::mutex> lk(c.mu);
    auto it = c.panels.find(key);
    if (it != c.panels.end())
      return it->second.data.get();
  }
  // Room for one more sliver: a packer may store a vector past its panel.
  const std::size_t bytes = (panelFloats(k, kc, nc) + k.nr) * sizeof(float);
  // B's element (k, n) is at B[k * ldb + n], or B[n * ldb + k] transposed.
  const int64_t rows = transB ? nc : kc, cols = transB ? kc : nc;
  const float *first = transB ? B + n0 * ldb + k0 : B + k0 * ldb + n0;
  bool room;
  {
    std::lock_guard<std::mutex> lk(c.mu);
    const Region *r = c.regionOf(reinterpret_cast<uintptr_t>(first));
    room = c.bytes + bytes <= capacityBytes() && (!r || r->bytes + bytes <= r->limit);
  }
  if (!room) {  // packed as without b_constant
    k.packB(B, ldb, transB, k0, kc, n0, nc, scratch);
    return scratch;
  }
  // Packed outside the lock (another thread may pack the same panel: the
  // first one in is kept, the same bytes either way).
  float *p = static_cast<float *>(std::aligned_alloc(64, (bytes + 63) / 64 * 64));
  if (!p) {
    k.packB(B, ldb, transB, k0, kc, n0, nc, scratch);
    return scratch;
  }
  k.packB(B, ldb, transB, k0, kc, n0, nc, p);
  Panel panel;
  panel.data.reset(p);
  panel.bytes = bytes;
  panel.srcBegin = reinterpret_cast<uintptr_t>(first);
  panel.srcEnd = reinterpret_cast<uintptr_t>(first + (rows - 1) * ldb + cols);
  {
    std::lock_guard<std::mutex> lk(c.mu);
    auto it = c.panels.find(key);
    if (it != c.panels.end())  // another thread's copy came first
      return it->second.data.get();
    // Checked again: other panels may have been kept since.
    Region *r = c.regionOf(panel.srcBegin);
    if (c.bytes + bytes <= capacityBytes() && (!r || r->bytes + bytes <= r->limit)) {
      c.bytes += bytes;
      if (r)
        r->bytes += bytes;
      return c.panels.emplace(key, std::move(panel)).first->second.data.get();
    }
  }
  // No room after all (rare: a race lost): this call reads its own copy.
  std::memcpy(scratch, p, panelFloats(k, kc, nc) * sizeof(float));
  return scratch;
}

}  // namespace hc::rt

extern "C" void hcrt_gemm_forget_packed(const void *base, size_t bytes) {
  using namespace hc::rt;
  const uintptr_t b = reinterpret_cast<uintptr_t>(base), e = b + bytes;
  PanelCache &c = cache();
  std::lock_guard<std::mutex> lk(c.mu);
  for (auto it = c.panels.begin(); it != c.panels.end();) {
    if (it->second.srcBegin < e && b < it->second.srcEnd) {
      c.bytes -= it->second.bytes;
      if (Region *r = c.regionOf(it->second.srcBegin))
        r->bytes -= it->second.bytes;
      it = c.panels.erase(it);
    } else {
      ++it;
    }
  }
}

extern "C" void hcrt_gemm_unlimit_packed(const void *base, size_t bytes) {
  using namespace hc::rt;
  const uintptr_t b = reinterpret_cast<uintptr_t>(base), e = b + bytes;
  PanelCache &c = cache();
  std::lock_guard<std::mutex> lk(c.mu);
  c.regions.erase(std::remove_if(c.regions.begin(), c.regions.end(),
                                 [&](const Region &r) { return b <= r.begin && r.end <= e; }),
                  c.regions.end());
}

extern "C" void hcrt_gemm_limit_packed(const void *base, size_t bytes, size_t limit) {
  using namespace hc::rt;
  const uintptr_t b = reinterpret_cast<uintptr_t>(base), e = b + bytes;
  PanelCache &c = cache();
  std::lock_guard<std::mutex> lk(c.mu);
  // A range overlapping earlier ones replaces them (their owner is gone).
  c.regions.erase(std::remove_if(c.regions.begin(), c.regions.end(),
                                 [&](const Region &r) { return r.begin < e && b < r.end; }),
                  c.regions.end());
  Region r{b, e, limit};
  for (const auto &[key, panel] : c.panels)
    if (b <= panel.srcBegin && panel.srcBegin < e)
      r.bytes += panel.bytes;
  c.regions.push_back(r);
}

extern "C" size_t hcrt_gemm_packed_bytes(void) {
  using namespace hc::rt;
  PanelCache &c = cache();
  std::lock_guard<std::mutex> lk(c.mu);
  return c.bytes;
}
