// ONNX math ops: elementwise (with constant folding of shape arithmetic),
// reductions, softmax, layer norm, Gemm/MatMul, the patch-embedding Conv,
// permutation Einsum, Where and the counter-based random draws.
#include "OpHandlerSupport.h"
#include "hc/abi/random.h"

#include <algorithm>
#include <cmath>

using namespace mlir;
using namespace hc::graph;

namespace hc::import::detail {
namespace {

using TP = onnx::TensorProto;

// A folded value as the graph's element type computes it: float results
// are rounded to float32 after every op (for +, -, *, / and sqrt of float32
// operands, computing in double and rounding once is exactly the float32
// result), so folding gives what an evaluation of the graph would.
double rounded(double v, int32_t dtype) {
  return dtype == TP::FLOAT ? static_cast<double>(static_cast<float>(v)) : v;
}

template <typename OpT>
OpHandler binary(std::function<double(double, double)> fold,
                 bool compare = false, bool swap = false) {
  return [=](GraphImporter &gi) {
    const Const *a = gi.inputConst(0), *b = gi.inputConst(1);
    if (a && b && (a->isInteger() || a->numElements() <= 64)) {
      int32_t dtype = compare ? TP::BOOL : a->dtype;
      gi.outputConst(0, foldBroadcast(gi, {a, b}, dtype, [&](const double *v) {
                       double r = swap ? fold(v[1], v[0]) : fold(v[0], v[1]);
                       return a->isInteger() && !compare ? std::trunc(r)
                                                         : rounded(r, dtype);
                     }));
      return;
    }
    auto [l, r] = matchedOperands(gi);
    if (swap)
      std::swap(l, r);
    gi.output(0, gi.build<OpT>({l, r}));
  };
}

// Max and Min are variadic. PyTorch's dynamo exporter writes Max(t) with
// one input (table[t]'s index bound), which is the identity; two inputs are
// the binary op; more are refused.
OpHandler variadic(OpHandler two) {
  return [=](GraphImporter &gi) {
    if (gi.hasInput(2))
      gi.fail("more than 2 inputs are not supported");
    if (gi.hasInput(1))
      return two(gi);
    if (const Const *c = gi.inputConst(0))
      gi.outputConst(0, *c);
    else
      gi.output(0, gi.input(0));
  };
}

// Unary ops on small known constants fold like the binary ones: the
// exporters compute attention scales as Sqrt/Reciprocal of a shape
// (torch's SDPA: 1 / Sqrt(Cast(Shape(q)[-1:]))), and the fusion passes
// need those as constants.
template <typename OpT> OpHandler unary(std::function<double(double)> fold) {
  return [=](GraphImporter &gi) {
    const Const *c = gi.inputConst(0);
    if (c && (c->isInteger() || c->numElements() <= 64)) {
      gi.outputConst(0, foldBroadcast(gi, {c}, c->dtype, [&](const double *v) {
                       return rounded(fold(v[0]), c->dtype);
                     }));
      return;
    }
    Value x = gi.input(0);
    gi.output(0, gi.buildTyped<OpT>(x.getType(), x));
  };
}

// `axesFrom`: the opset from which axes are input 1 rather than an attribute
// (ReduceSum 13, ReduceMean 18); noop_with_empty_axes exists from then on.
template <typename OpT> OpHandler reduce(int64_t axesFrom) {
  return [=](GraphImporter &gi) {
    bool axesAsInput = gi.opset >= axesFrom;
    Value x = gi.input(0);
    int64_t rank = gi.typeOf(x).getRank();
    std::vector<int64_t> axes = axesAsInput && gi.hasInput(1)
                                    ? ints(gi.requireConst(1, "axes"))
                                    : gi.attrInts("axes");
    if (axes.empty()) {
      if (axesAsInput && gi.attrInt("noop_with_empty_axes", 0)) {
        gi.output(0, x);
        return;
      }
      for (int64_t d = 0; d < rank; ++d)
        axes.push_back(d);
    }
    for (int64_t &a : axes)
      a = gi.normalizeAxis(a, rank);
    std::sort(axes.begin(), axes.end());
    axes.erase(std::unique(axes.begin(), axes.end()), axes.end());
    gi.output(0, gi.build<OpT>(
                     x, {gi.b.getNamedAttr("axes", gi.b.getDenseI64ArrayAttr(axes)),
                         gi.b.getNamedAttr("keepdims", gi.b.getBoolAttr(
                                                           gi.attrInt("keepdims", 1)))}));
  };
}

void softmaxOp(GraphImporter &gi) {
  Value x = gi.input(0);
  int64_t axis = gi.normalizeAxis(gi.attrInt("axis", -1), gi.typeOf(x).getRank());
  gi.output(0, gi.buildTyped<SoftmaxOp>(
                   x.getType(), x,
                   {gi.b.getNamedAttr("axis", gi.b.getI64IntegerAttr(axis))}));
}

bool isConstFill(const Const *c, double value) {
  if (!c)
    return false;
  for (double v : c->data)
    if (v != value)
      return false;
  return true;
}

void layerNormOp(GraphImporter &gi) {
  Value x = gi.input(0);
  int64_t axis = gi.normalizeAxis(gi.attrInt("axis", -1), gi.typeOf(x).getRank());
  if (gi.outputUsed(1) || gi.outputUsed(2))
    gi.fail("LayerNormalization's mean/inv-std-dev outputs are not supported");
  std::vector<Value> operands{x};
  // A constant all-ones scale and all-zeros bias is a LayerNorm without affine.
  bool identityScale = isConstFill(gi.inputConst(1), 1.0);
  bool noBias = !gi.hasInput(2) || isConstFill(gi.inputConst(2), 0.0);
  Value weight, bias;
  if (!(identityScale && noBias)) {
    weight = gi.input(1);
    if (gi.hasInput(2))
      bias = gi.input(2);
  }
  auto op = gi.b.create<LayerNormOp>(
      gi.loc, x.getType(), x, weight, bias,
      gi.b.getF64FloatAttr(gi.attrFloat("epsilon", 1e-5)),
      gi.b.getI64IntegerAttr(axis));
  if (failed(mlir::verify(op)))
    gi.fail(gi.lastDiagnostic);
  gi.output(0, op);
}

void gemmOp(GraphImporter &gi) {
  Value a = gi.input(0), bm = gi.input(1);
  bool ta = gi.attrInt("transA", 0), tb = gi.attrInt("transB", 0);
  double alpha = gi.attrFloat("alpha", 1.0), beta = gi.attrFloat("beta", 1.0);
  Value c = gi.hasInput(2) ? gi.input(2) : Value();
  if (!ta && tb && alpha == 1.0 && beta == 1.0 &&
      (!c || gi.typeOf(c).getRank() == 1)) {
    auto w = gi.typeOf(bm);
    auto type = RankedTensorType::get({gi.typeOf(a).getDimSize(0), w.getDimSize(0)},
                                      w.getElementType());
    gi.output(0, c ? gi.buildTyped<LinearOp>(type, ValueRange{a, bm, c})
                   : gi.buildTyped<LinearOp>(type, ValueRange{a, bm}));
    return;
  }
  if (ta)
    a = gi.transpose(a, {1, 0});
  if (tb)
    bm = gi.transpose(bm, {1, 0});
  Value y = gi.build<MatmulOp>({a, bm});
  Type elem = gi.typeOf(y).getElementType();
  auto scalar = [&](double v) {
    return gi.materialize(makeConst({}, elem.isF64() ? TP::DOUBLE : TP::FLOAT, {v}));
  };
  if (alpha != 1.0)
    y = gi.build<MulOp>({y, scalar(alpha)});
  if (c) {
    if (beta != 1.0)
      c = gi.build<MulOp>({c, scalar(beta)});
    y = gi.build<AddOp>({y, c});
  }
  gi.output(0, y);
}

// Patch embedding: a Conv whose kernel equals its stride, without padding,
// is a reshape into patches followed by a linear layer.
void convOp(GraphImporter &gi) {
  Value x = gi.input(0), w = gi.input(1);
  auto xs = gi.staticShape(x, "conv input"), ws = gi.staticShape(w, "conv weight");
  if (xs.size() != 4 || ws.size() != 4)
    gi.fail("only 2-D convolutions are supported");
  int64_t p = ws[2], q = ws[3];
  auto strides = gi.attrInts("strides"), pads = gi.attrInts("pads"),
       dil = gi.attrInts("dilations"), kernel = gi.attrInts("kernel_shape");
  bool patch = gi.attrInt("group", 1) == 1 && strides == std::vector<int64_t>{p, q} &&
               (pads.empty() || pads == std::vector<int64_t>(4, 0)) &&
               (dil.empty() || dil == std::vector<int64_t>{1, 1}) &&
               (kernel.empty() || kernel == std::vector<int64_t>{p, q}) &&
               gi.attrString("auto_pad", "NOTSET") == "NOTSET" &&
               xs[1] == ws[1] && xs[2] % p == 0 && xs[3] % q == 0;
  if (!patch)
    gi.fail("only patch-embedding convolutions (kernel == stride, no padding, "
            "dilation 1, group 1, divisible input) are supported");
  int64_t B = xs[0], C = xs[1], H = xs[2] / p, W = xs[3] / q, D = ws[0];
  Value t = gi.reshape(x, {B, C, H, p, W, q});
  t = gi.transpose(t, {0, 2, 4, 1, 3, 5});
  t = gi.reshape(t, {B, H * W, C * p * q});
  Value wm = gi.reshape(w, {D, C * p * q});
  auto type = RankedTensorType::get({B, H * W, D}, gi.typeOf(x).getElementType());
  Value y = gi.hasInput(2) ? gi.buildTyped<LinearOp>(type, ValueRange{t, wm, gi.input(2)})
                           : gi.buildTyped<LinearOp>(type, ValueRange{t, wm});
  y = gi.reshape(y, {B, H, W, D});
  gi.output(0, gi.transpose(y, {0, 3, 1, 2}));
}

// Single-operand einsum that only permutes (unpatchify's 'nhwpqc->nchpwq').
void einsumOp(GraphImporter &gi) {
  std::string eq;
  for (char c : gi.attrString("equation", ""))
    if (c != ' ')
      eq += c;
  auto arrow = eq.find("->");
  if (gi.node->input_size() != 1 || arrow == std::string::npos ||
      eq.find('.') != std::string::npos || eq.find(',') != std::string::npos)
    gi.fail("only single-operand permutation einsums are supported, got '" +
            eq + "'");
  std::string in = eq.substr(0, arrow), out = eq.substr(arrow + 2);
  std::string sortedIn = in, sortedOut = out;
  std::sort(sortedIn.begin(), sortedIn.end());
  std::sort(sortedOut.begin(), sortedOut.end());
  if (sortedIn != sortedOut ||
      std::adjacent_find(sortedIn.begin(), sortedIn.end()) != sortedIn.end())
    gi.fail("einsum '" + eq + "' is not a permutation");
  Value x = gi.input(0);
  if (static_cast<int64_t>(in.size()) != gi.typeOf(x).getRank())
    gi.fail("einsum '" + eq + "' does not match the input's rank");
  std::vector<int64_t> perm;
  for (char c : out)
    perm.push_back(static_cast<int64_t>(in.find(c)));
  gi.output(0, gi.transpose(x, perm));
}

void whereOp(GraphImporter &gi) {
  if (allInputsConst(gi)) {
    gi.outputConst(0, foldBroadcast(gi, {gi.inputConst(0), gi.inputConst(1),
                                         gi.inputConst(2)},
                                    gi.inputConst(1)->dtype,
                                    [](const double *v) { return v[0] ? v[1] : v[2]; }));
    return;
  }
  gi.output(0, gi.build<WhereOp>({gi.input(0), gi.input(1), gi.input(2)}));
}

// Clip(x, min?, max?) (opset >= 11: bounds are optional inputs) as
// Max/Min, which autodiff already knows; torch.clamp exports as Clip.
void clipOp(GraphImporter &gi) {
  if (allInputsConst(gi)) {
    std::vector<const Const *> in = {gi.inputConst(0)};
    bool lo = gi.hasInput(1), hi = gi.hasInput(2);
    if (lo)
      in.push_back(gi.inputConst(1));
    if (hi)
      in.push_back(gi.inputConst(2));
    gi.outputConst(0, foldBroadcast(gi, in, in[0]->dtype, [&](const double *v) {
                     double r = v[0];
                     if (lo)
                       r = std::max(r, v[1]);
                     if (hi)
                       r = std::min(r, v[lo ? 2 : 1]);
                     return r;
                   }));
    return;
  }
  Value v = gi.input(0);
  for (int i : {1, 2}) {
    if (!gi.hasInput(i))
      continue;
    if (gi.typeOf(gi.input(i)).getRank() != 0)
      gi.fail("Clip bounds must be scalars");
    Value bound = gi.input(i);
    v = i == 1 ? gi.build<MaxOp>({v, bound}) : gi.build<MinOp>({v, bound});
  }
  gi.output(0, v);
}

// Counter-based draws replace ONNX's seeded RandomUniform(Like): keyed by the
// step's seed, step number and global sample index, plus a per-op id.
void randomUniformOp(GraphImporter &gi, std::vector<int64_t> shape) {
  int32_t dtype = static_cast<int32_t>(gi.attrInt("dtype", TP::FLOAT));
  if (dtype != TP::FLOAT && dtype != TP::DOUBLE)
    gi.fail("random draws must be float or double");
  if (shape.empty())
    gi.fail("random draws need a leading sample dim");
  const int64_t opId = static_cast<int64_t>(hc::rt::kGraphDrawFirst) + gi.nextRandomOpId++;
  if (opId >= static_cast<int64_t>(hc::rt::kGraphDrawEnd))
    gi.fail("more than " + std::to_string(hc::rt::kGraphDrawEnd - hc::rt::kGraphDrawFirst) +
            " random ops");
  auto type = RankedTensorType::get(shape, gi.elementType(dtype));
  gi.output(0, gi.buildTyped<RandomUniformOp>(
                   type,
                   ValueRange{gi.rngArgument(hc::rt::kRngSeedInput),
                              gi.rngArgument(hc::rt::kRngStepInput),
                              gi.rngArgument(hc::rt::kSampleOffsetInput)},
                   {gi.b.getNamedAttr("op_id", gi.b.getI64IntegerAttr(opId)),
                    gi.b.getNamedAttr("low", gi.b.getF64FloatAttr(gi.attrFloat("low", 0.0))),
                    gi.b.getNamedAttr("high", gi.b.getF64FloatAttr(gi.attrFloat("high", 1.0)))}));
}

} // namespace

void addMathHandlers(std::map<std::string, OpHandler> &table) {
  std::map<std::string, OpHandler> math = {
      {"Add", binary<AddOp>([](double a, double b) { return a + b; })},
      {"Sub", binary<SubOp>([](double a, double b) { return a - b; })},
      {"Mul", binary<MulOp>([](double a, double b) { return a * b; })},
      {"Div", binary<DivOp>([](double a, double b) { return a / b; })},
      {"Pow", binary<PowOp>([](double a, double b) { return std::pow(a, b); })},
      {"Max", variadic(binary<MaxOp>([](double a, double b) { return std::max(a, b); }))},
      {"Min", variadic(binary<MinOp>([](double a, double b) { return std::min(a, b); }))},
      {"Less", binary<LessOp>([](double a, double b) { return double(a < b); }, true)},
      {"Greater", binary<LessOp>([](double a, double b) { return double(a < b); }, true, true)},
      {"Equal", binary<EqualOp>([](double a, double b) { return double(a == b); }, true)},
      {"Where", whereOp},
      {"Clip", clipOp},
      {"Neg", unary<NegOp>([](double a) { return -a; })},
      {"Sqrt", unary<SqrtOp>([](double a) { return std::sqrt(a); })},
      {"Exp", unary<ExpOp>([](double a) { return std::exp(a); })},
      {"Log", unary<LogOp>([](double a) { return std::log(a); })},
      {"Tanh", unary<TanhOp>([](double a) { return std::tanh(a); })},
      {"Sigmoid", unary<SigmoidOp>([](double a) { return 1 / (1 + std::exp(-a)); })},
      {"Sin", unary<SinOp>([](double a) { return std::sin(a); })},
      {"Cos", unary<CosOp>([](double a) { return std::cos(a); })},
      {"Erf", unary<ErfOp>([](double a) { return std::erf(a); })},
      {"Reciprocal", unary<ReciprocalOp>([](double a) { return 1 / a; })},
      {"Softmax", softmaxOp},
      {"ReduceMean", reduce<ReduceMeanOp>(18)},
      {"ReduceSum", reduce<ReduceSumOp>(13)},
      {"LayerNormalization", layerNormOp},
      {"MatMul", [](GraphImporter &gi) {
         auto [l, r] = matchedOperands(gi);
         gi.output(0, gi.build<MatmulOp>({l, r}));
       }},
      {"Gemm", gemmOp},
      {"Conv", convOp},
      {"Einsum", einsumOp},
      {"RandomUniformLike", [](GraphImporter &gi) {
         randomUniformOp(gi, shapeOfInput(gi, 0));
       }},
      {"RandomUniform", [](GraphImporter &gi) {
         randomUniformOp(gi, gi.attrInts("shape"));
       }},
  };
  table.insert(math.begin(), math.end());
}

} // namespace hc::import::detail
