#include "CftpAccess.h"

using namespace mlir;
namespace hs = hc::schedule;

namespace hc::cftp {

int Places::rootOf(Operation *def, int64_t &base) const {
  base = 0;
  if (auto buf = dyn_cast_or_null<hs::BufferOp>(def)) {
    base = buf.getOffset() ? static_cast<int64_t>(*buf.getOffset()) : 0;
    for (int i = 0; i < hs::kNumArenas; ++i)
      if (buf.getArena() == hs::kArenaNames[i])
        return i;
    return -2;
  }
  if (auto in = dyn_cast_or_null<hs::InputOp>(def))
    return kFirstInputRoot + static_cast<int>(in.getIndex());
  if (isa_and_nonnull<hs::ConstantOp>(def))
    return -1;
  return -2;
}

bool Places::placeOf(Value v, Place &out) const {
  auto type = dyn_cast<MemRefType>(v.getType());
  if (!type)
    return false;
  Operation *def = v.getDefiningOp();
  if (auto view = dyn_cast_or_null<hs::ViewOp>(def))
    def = view.getSource().getDefiningOp();
  out.root = rootOf(def, out.base);
  if (out.root == -2)
    return false;
  out.shape.assign(type.getShape().begin(), type.getShape().end());
  out.strides.clear();
  if (!hs::stridesOf(type, out.strides, out.offset))
    return false;
  int64_t bits = type.getElementType().getIntOrFloatBitWidth();
  out.elemBytes = std::max<int64_t>(1, bits / 8);
  return true;
}

void Places::accessesOf(Operation *op, SmallVectorImpl<Access> &out) const {
  // The access model's memrefs as byte ranges. A request's wait reports
  // its accesses again: the bytes are the request's until then.
  Place p;
  for (const hs::Access &a : hs::accessesOf(op))
    if (placeOf(a.value, p))
      add(p, a.write, out);
}

std::string Places::rootName(int root) {
  if (root >= kFirstInputRoot)
    return "input " + std::to_string(root - kFirstInputRoot);
  if (root >= 0 && root < hs::kNumArenas)
    return std::string("arena '") + hs::kArenaNames[root] + "'";
  return "constant";
}

} // namespace hc::cftp
