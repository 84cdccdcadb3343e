// Bytes an op of a planned @step reads and writes, for CFTP (hc-cftp) and
// its proof in hc-verify-plan. Conservative: a strided view counts as the
// whole byte range from its first to its last element.
#ifndef HC_PASSES_CFTPACCESS_H
#define HC_PASSES_CFTPACCESS_H

#include "hc/Schedule/ScheduleOps.h"

#include "mlir/IR/Operation.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SmallVector.h"

#include <string>

namespace hc::cftp {

// Where a memref value lives: its root (an arena or a host input, see
// Places::kFirstInputRoot; constants are read-only and have none), the
// root's byte base, and its layout.
struct Place {
  int root = -1;  // -1: no bytes anyone writes (a constant)
  int64_t base = 0, elemBytes = 4, offset = 0;  // offset in elements
  llvm::SmallVector<int64_t> shape, strides;
};

struct Access {
  int root;
  int64_t lo, hi;  // bytes [lo, hi)
  bool write;
};

inline bool conflicts(const Access &a, const Access &b) {
  return a.root == b.root && (a.write || b.write) && a.lo < b.hi && b.lo < a.hi;
}

// The bytes of a place (empty when it has none).
inline bool rangeOf(const Place &p, int64_t &lo, int64_t &hi) {
  if (p.root < 0)
    return false;
  int64_t last = p.offset;
  for (size_t d = 0; d < p.shape.size(); ++d) {
    if (p.shape[d] == 0)
      return false;
    last += (p.shape[d] - 1) * p.strides[d];
  }
  lo = p.base + p.offset * p.elemBytes;
  hi = p.base + (last + 1) * p.elemBytes;
  return true;
}

// Resolves values of one @step (buffers must be planned).
class Places {
public:
  // False when `v` is none of buffer, input, constant or a view of one.
  bool placeOf(mlir::Value v, Place &out) const;
  // The byte ranges of an op's accesses (hcs AccessOpInterface).
  void accessesOf(mlir::Operation *op, llvm::SmallVectorImpl<Access> &out) const;
  // Roots: the arenas by their index in hs::kArenaNames, then the host's
  // inputs from kFirstInputRoot.
  static constexpr int kFirstInputRoot = schedule::kNumArenas;
  static std::string rootName(int root);  // "arena 'act'", "input 2"
  void add(const Place &p, bool write, llvm::SmallVectorImpl<Access> &out) const {
    int64_t lo, hi;
    if (rangeOf(p, lo, hi))
      out.push_back({p.root, lo, hi, write});
  }

private:
  int rootOf(mlir::Operation *def, int64_t &base) const;
};

} // namespace hc::cftp

#endif // HC_PASSES_CFTPACCESS_H
