// ONNX ops that only the dynamo exporter (opsets 18..21) writes for DiT:
// CastLike (torch's type promotion), SplitToSequence + SequenceAt
// (`unbind` and `chunk` under optimize=False) and Gelu (opset 20).
// Sequences never reach hc's IR: SplitToSequence is a Split whose pieces
// the importer names, and SequenceAt with a constant position picks one.
#include "OpHandlerSupport.h"

using namespace mlir;
using namespace hc::graph;

namespace hc::import::detail {
namespace {

using TP = onnx::TensorProto;

int32_t onnxTypeOf(GraphImporter &gi, int i) {
  if (const Const *c = gi.inputConst(i))
    return c->dtype;
  Type t = gi.typeOf(gi.input(i)).getElementType();
  if (t.isF32())
    return TP::FLOAT;
  if (t.isF64())
    return TP::DOUBLE;
  if (t.isInteger(64))
    return TP::INT64;
  if (t.isInteger(32))
    return TP::INT32;
  if (t.isInteger(1))
    return TP::BOOL;
  gi.fail("input #" + std::to_string(i) + " has an unsupported element type");
}

void castLikeOp(GraphImporter &gi) { castTo(gi, onnxTypeOf(gi, 1)); }

// SplitToSequence-11: `split` absent: pieces of 1 along axis, squeezed when
// keepdims = 0; a scalar: pieces of that size, the last one smaller; 1-D:
// those sizes (keepdims ignored).
void splitToSequenceOp(GraphImporter &gi) {
  Value x = gi.input(0);
  std::vector<int64_t> shape = gi.staticShape(x, "input");
  int64_t rank = static_cast<int64_t>(shape.size());
  int64_t axis = gi.normalizeAxis(gi.attrInt("axis", 0), rank);
  int64_t dim = shape[axis];
  std::vector<int64_t> sizes;
  bool squeeze = false;
  // Every piece becomes a result of one hc.split: a bound keeps a hostile
  // file (a 2^31 axis in pieces of 1) from exhausting memory.
  constexpr int64_t kMaxPieces = 4096;
  auto pieces = [&](int64_t n) {
    if (n > kMaxPieces)
      gi.fail("a sequence of " + std::to_string(n) + " pieces; hc splits into "
              "at most " + std::to_string(kMaxPieces));
  };
  if (!gi.hasInput(1)) {
    pieces(dim);
    sizes.assign(dim, 1);
    squeeze = gi.attrInt("keepdims", 1) == 0;
  } else {
    const Const &split = gi.requireConst(1, "split");
    std::vector<int64_t> v = ints(split);
    if (split.shape.empty()) {
      if (v.at(0) <= 0)
        gi.fail("split size " + std::to_string(v.at(0)) + " is not positive");
      pieces(dim / v[0] + (dim % v[0] != 0));
      for (int64_t at = 0; at < dim; at += v[0])
        sizes.push_back(std::min(v[0], dim - at));
    } else if (split.shape.size() == 1) {
      pieces(static_cast<int64_t>(v.size()));
      sizes = v;
      int64_t sum = 0;
      for (int64_t s : sizes) {
        if (s < 0 || s > dim)
          gi.fail("split size " + std::to_string(s) + " is outside [0, " +
                  std::to_string(dim) + "]");
        sum += s;  // at most kMaxPieces sizes of at most dim: no overflow
      }
      if (sum != dim)
        gi.fail("split sizes " + shapeStr(sizes) + " add up to " +
                std::to_string(sum) + ", not the dim " + std::to_string(dim));
    } else {
      gi.fail("split must be a scalar or 1-D, it has shape " + shapeStr(split.shape));
    }
  }
  if (sizes.empty())
    gi.fail("the split axis has size 0: an empty sequence");
  Operation *op = gi.buildInferred<SplitOp>(
      x, {gi.b.getNamedAttr("axis", gi.b.getI64IntegerAttr(axis)),
          gi.b.getNamedAttr("sizes", gi.b.getDenseI64ArrayAttr(sizes))});
  std::vector<std::string> names;
  std::vector<int64_t> squeezed = shape;
  squeezed.erase(squeezed.begin() + axis);
  for (unsigned i = 0; i < op->getNumResults(); ++i) {
    std::string name = gi.node->output(0) + "#" + std::to_string(i);
    Value piece = op->getResult(i);
    gi.define(name, squeeze ? gi.reshape(piece, squeezed) : piece);
    names.push_back(name);
  }
  gi.sequences[gi.node->output(0)] = names;
}

void sequenceAtOp(GraphImporter &gi) {
  auto seq = gi.sequences.find(gi.node->input(0));
  if (seq == gi.sequences.end())
    gi.fail("input '" + gi.node->input(0) + "' is not a sequence");
  const Const &pos = gi.requireConst(1, "position");
  if (!pos.isInteger() || pos.numElements() != 1 || !pos.shape.empty())
    gi.fail("position must be an integer scalar");
  int64_t n = static_cast<int64_t>(seq->second.size()), p = ints(pos)[0];
  if (p < -n || p >= n)
    gi.fail("position " + std::to_string(p) + " is outside a sequence of " +
            std::to_string(n));
  const std::string &name = seq->second[p < 0 ? p + n : p];
  if (const Const *c = gi.constOf(name))
    gi.outputConst(0, *c);
  else
    gi.output(0, gi.valueOf(name));
}

// Gelu-20: "none" is the erf form, "tanh" PyTorch's approximation (the
// schema table has already refused any other string).
void geluOp(GraphImporter &gi) {
  Value x = gi.input(0);
  if (!isa<FloatType>(gi.typeOf(x).getElementType()))
    gi.fail("input must be a float tensor");
  std::string approximate = gi.attrString("approximate", "none");
  gi.output(0, gi.buildTyped<GeluOp>(
                   x.getType(), x,
                   {gi.b.getNamedAttr("approximate",
                                      gi.b.getStringAttr(approximate))}));
}

} // namespace

void addOpset18Handlers(std::map<std::string, OpHandler> &table) {
  table.insert({
      {"CastLike", castLikeOp},
      {"SplitToSequence", splitToSequenceOp},
      {"SequenceAt", sequenceAtOp},
      {"Gelu", geluOp},
  });
}

} // namespace hc::import::detail
