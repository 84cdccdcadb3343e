#include "CftpAccess.h"

using namespace mlir;
namespace hs = hc::schedule;

namespace hc::cftp {

int Places::rootOf(Operation *def, int64_t &base) const {
  base = 0;
  if (auto buf = dyn_cast_or_null<hs::BufferOp>(def)) {
    static const char *arenas[] = {"act", "param", "grad", "m", "v", "state"};
    base = buf.getOffset() ? static_cast<int64_t>(*buf.getOffset()) : 0;
    for (int i = 0; i < 6; ++i)
      if (buf.getArena() == arenas[i])
        return i;
    return -2;
  }
  if (auto in = dyn_cast_or_null<hs::InputOp>(def))
    return 16 + static_cast<int>(in.getIndex());
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
  Place p;
  if (auto call = dyn_cast<hs::CallOp>(op)) {
    for (Value v : call.getIns())
      if (placeOf(v, p))
        add(p, false, out);
    for (Value v : call.getOuts())
      if (placeOf(v, p))
        add(p, true, out);
  } else if (auto start = dyn_cast<hs::AllReduceStartOp>(op)) {
    if (placeOf(start.getBucket(), p)) {
      add(p, false, out);
      add(p, true, out);
    }
  } else if (auto wait = dyn_cast<hs::WaitOp>(op)) {
    if (auto start = wait.getToken().getDefiningOp<hs::AllReduceStartOp>())
      if (placeOf(start.getBucket(), p))
        add(p, true, out);
  }
}

} // namespace hc::cftp
