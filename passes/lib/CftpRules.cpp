#include "CftpRules.h"

#include "mlir/IR/BuiltinAttributes.h"

using namespace mlir;

namespace hc::cftp {
namespace {

const SplitRule kWhole = {};

int64_t intAttr(DictionaryAttr attrs, StringRef key, int64_t dflt) {
  if (auto a = attrs.getAs<IntegerAttr>(key))
    return a.getInt();
  return dflt;
}

} // namespace

const SplitRule &splitRuleOf(StringRef kernel) {
  const hc::schedule::KernelInfo *k = hc::schedule::KernelRegistry::active().lookup(kernel);
  return k ? k->split : kWhole;
}

bool planSplit(const SplitRule &r, ArrayRef<ArrayRef<int64_t>> ins,
               ArrayRef<ArrayRef<int64_t>> outs, DictionaryAttr attrs,
               int64_t parts, Part &part) {
  if (r.rule == Rule::None || outs.empty() || ins.empty() || parts < 2)
    return false;
  part.inAxis.assign(ins.size(), -1);
  part.outAxis.assign(outs.size(), 0);
  part.how = "rows";
  ArrayRef<int64_t> out0 = outs[0];
  if (r.axisNotFirst) {
    int64_t axis = intAttr(attrs, "axis", 0);
    if (axis < 0)
      axis += static_cast<int64_t>(ins[0].size());
    if (axis <= 0)
      return false;
  }
  // Every output cut along dim 0 with the same extent (and rank, unless
  // the rule says dim 0 is the sample everywhere).
  auto outsByRows = [&](bool sameRank) {
    if (out0.empty())
      return false;
    part.extent = out0[0];
    for (ArrayRef<int64_t> o : outs)
      if (o.empty() || o[0] != part.extent ||
          (sameRank && o.size() != out0.size()))
        return false;
    return true;
  };
  switch (r.rule) {
  case Rule::None:
    return false;
  case Rule::Bcast:
    if (!outsByRows(true))
      return false;
    for (size_t i = 0; i < ins.size(); ++i) {
      if (ins[i].size() != out0.size())
        continue;  // broadcast along the leading dims: read whole
      if (ins[i][0] == part.extent)
        part.inAxis[i] = 0;
      else if (ins[i][0] != 1)
        return false;
    }
    break;
  case Rule::Lead:
    if (!outsByRows(false))
      return false;
    for (size_t i = 0; i < ins.size(); ++i) {
      if (ins[i].empty())
        continue;  // a scalar (the optimizer's step)
      if (ins[i][0] != part.extent)
        return false;
      part.inAxis[i] = 0;
    }
    break;
  case Rule::Rows:
    if (!outsByRows(true))
      return false;
    for (size_t i = 0; i < ins.size(); ++i) {
      if (!(r.mask & (1u << i)))
        continue;
      if (ins[i].size() < 2 || ins[i][0] != part.extent)
        return false;
      part.inAxis[i] = 0;
    }
    break;
  case Rule::Features: {
    // dw [out, in] = dy[..., out]^T x[..., in], and a bias gradient db
    // [out] beside it (cut alike: dim 0)
    if (outs.size() > 2 || out0.size() != 2 || ins.size() != 2 ||
        ins[0].empty() || ins[0].back() != out0[0] ||
        (outs.size() == 2 && (outs[1].size() != 1 || outs[1][0] != out0[0])))
      return false;
    part.extent = out0[0];
    part.inAxis[0] = static_cast<int>(ins[0].size()) - 1;
    part.how = "features";
    break;
  }
  case Rule::Reduce: {
    auto axes = attrs.getAs<DenseI64ArrayAttr>("axes");
    if (!axes || outs.size() != 1 || ins.size() != 1)
      return false;
    const int64_t rank = static_cast<int64_t>(ins[0].size());
    int64_t first = -1;
    for (int64_t d = 0; d < rank && first < 0; ++d)
      if (!llvm::is_contained(axes.asArrayRef(), d))
        first = d;
    if (first < 0)
      return false;
    const bool keep = static_cast<int64_t>(out0.size()) == rank;
    const int at = keep ? static_cast<int>(first) : 0;
    if (static_cast<int64_t>(out0.size()) <= at || out0[at] != ins[0][first])
      return false;
    part.extent = ins[0][first];
    part.inAxis[0] = static_cast<int>(first);
    part.outAxis[0] = at;
    if (first > 0)
      part.how = "features";
    break;
  }
  case Rule::Matmul:
    if (!outsByRows(true) || ins.size() != 2)
      return false;
    if (out0.size() == 2) {
      if (ins[0].size() != 2 || ins[0][0] != part.extent)
        return false;
      part.inAxis[0] = 0;
    } else {
      for (size_t i = 0; i < 2; ++i) {
        if (ins[i].size() != out0.size())
          continue;
        if (ins[i][0] == part.extent)
          part.inAxis[i] = 0;
        else if (ins[i][0] != 1)
          return false;
      }
    }
    break;
  }
  // Outputs stay contiguous: the dims before a cut one are all 1.
  for (size_t o = 0; o < outs.size(); ++o)
    for (int d = 0; d < part.outAxis[o]; ++d)
      if (outs[o][d] != 1)
        return false;
  return part.extent >= parts;
}

} // namespace hc::cftp
